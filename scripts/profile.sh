#!/usr/bin/env bash
# `make profile` (README, "Where the time goes"): boots each pair of `make bench` on the release
# (or baseline) kernel and records `perf` profiles of both guests during a 64 KiB ib_write_bw
# and one iperf3 stream (the kselftest collection profile, tools/testing/selftests/drivers/infiniband/metaroce/profile).
# Writes out/profile/profiles.md.
# PROFILE_ONLY="metaroce rxe" picks pairs (default: metaroce metaroce-native rxe);
# PROFILE_SECONDS (default 20) is each recording's length; PROFILE_WORKLOADS (default
# "write-64k tcp"; also rate-64) what is recorded.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
OUT=${METAROCE_OUT:-$repo/out}/profile
. "$repo/scripts/guests.sh"
pairs=${PROFILE_ONLY:-metaroce metaroce-native rxe}
"$repo/scripts/deps.sh" | tail -1
rm -rf "$OUT"; mkdir -p "$OUT"
failed=0
for p in $pairs; do
  case $p in
    metaroce|metaroce-native) kind=release;;
    rxe) kind=baseline;;
    *) echo "profile: unknown pair $p"; exit 2;;
  esac
  "$repo/scripts/kernel.sh" "$kind" >"$OUT/kernel-$kind.log" 2>&1 || { tail -20 "$OUT/kernel-$kind.log"; exit 1; }
  echo "profile: pair $p on the $kind kernel"
  MR_GUEST_ENV="MR_BENCH_PROVIDER=$p PROFILE_SECONDS=${PROFILE_SECONDS:-20} PROFILE_WORKLOADS='${PROFILE_WORKLOADS:-write-64k tcp}'" \
    run_pair "$kind" "$kind" "profile-$p" profile || { failed=$((failed + 1)); echo "profile: pair $p failed (logs: $OUT/profile-$p-{a,b}/)"; }
done
{
  echo "# Profiles ($(date -u +%F), commit $(git -C "$repo" describe --always --dirty 2>/dev/null))"
  for p in $pairs; do
    for f in "$OUT/profile-$p-"[ab]/bench/profile-*.txt; do
      [ -f "$f" ] || continue
      printf '\n## %s: %s\n\n```\n' "$p" "$(basename "$f" .txt)"; cat "$f"; printf '```\n'
    done
  done
} >"$OUT/profiles.md"
echo "profile: $OUT/profiles.md"
[ "$failed" = 0 ]
