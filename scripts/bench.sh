#!/usr/bin/env bash
# `make bench` (README, "Benchmarks"): boots pairs of guests joined by the QEMU socket link and
# measures, pair after pair on the same kind of link:
#   metaroce          MetaRoCE in RoCEv2 mode (link type metaroce) on the release kernel
#   metaroce-native   MetaRoCE in native mode (link type metaroce-native: RC QPs over the native
#                     transport, UDP port 19791) on the same release kernel and module
#   rxe               rdma_rxe on the baseline kernel (same source and config, rdma_rxe instead of MetaRoCE)
#   metaroce-librxe   (only when named in BENCH_ONLY) MetaRoCE in RoCEv2 mode on the rxe-abi kernel:
#                     the same driver speaking rdma_rxe's user ABI, driven by Debian's librxe, against
#                     which the report measures libmetaroce and MetaRoCE's own ABI (pair metaroce)
#   rxe-debian        rdma_rxe on Debian's stock kernel (cross-check; BENCH_PEER=0 leaves it out)
# and TCP (iperf3) in every pair. Each pair runs the kselftest collection bench
# (tools/testing/selftests/drivers/infiniband/metaroce/bench); the host then writes out/bench/results.{json,md} and PNG plots (scripts/bench_report.py).
# BENCH_QUICK=1: one repetition, fewer sizes and loss levels, no rxe-debian (development).
# BENCH_MTU=9000 runs every figure (RDMA and TCP) at that link MTU (default: the link's 1500).
# BENCH_APPEND="metaroce.native_rto_min_ms=10" adds kernel command-line words to every guest.
# BENCH_REPS=N overrides the repetitions (default 3); BENCH_ONLY="metaroce-native rxe" picks pairs
# (only the kernels those pairs boot are built); BENCH_TESTS=0-0,35-35 runs only the bench
# collection's tests of those numbers (00-setup records the guests; a report then has only
# their figures).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
OUT=${METAROCE_OUT:-$repo/out}/bench
. "$repo/scripts/guests.sh"
export PATH="$HOME/.cargo/bin:$PATH"
quick=${BENCH_QUICK:-}
reps=${BENCH_REPS:-$([ -n "$quick" ] && echo 1 || echo 3)}
pairs=${BENCH_ONLY:-metaroce metaroce-native rxe$([ -n "$quick" ] || [ "${BENCH_PEER:-1}" = 0 ] || echo ' rxe-debian')}
# The kernel kind and the provider (MR_BENCH_PROVIDER in the guests) of a pair.
pair_kind() {
  case $1 in
    metaroce) kind=release prov=metaroce;;
    metaroce-native) kind=release prov=metaroce-native;;
    metaroce-native-auth) kind=release prov=metaroce-native-auth;;
    metaroce-librxe) kind=rxe-abi prov=metaroce;;
    rxe) kind=baseline prov=rxe;;
    rxe-debian) kind=peer prov=rxe;;
    *) return 1;;
  esac
}
kinds=
for p in $pairs; do
  pair_kind "$p" || { echo "bench: unknown pair $p (pairs: metaroce metaroce-native metaroce-native-auth metaroce-librxe rxe rxe-debian)"; exit 2; }
  case " $kinds " in *" $kind "*) ;; *) kinds="$kinds $kind";; esac
done
# A full pair takes ~25 min under TCG (README); the timeouts only bound a hang.
export METAROCE_GUEST_TIMEOUT=${METAROCE_GUEST_TIMEOUT:-5400}
# Under TCG the guest's TSC runs at the host's rate, but a guest calibrating it at boot on a busy
# host can be far off (once 49.8 MHz instead of 2300: guest time then ran 46 times too fast, and
# perftest, which converts cycles with that figure, too). The guests are told the host's TSC
# frequency; the report still checks every guest's clock against the host's (9p file times).
tsc_mhz=$(dmesg 2>/dev/null | sed -n 's/.*tsc: Refined TSC clocksource calibration: \([0-9.]*\) MHz.*/\1/p' | tail -n1)
[ -n "$tsc_mhz" ] || tsc_mhz=$(dmesg 2>/dev/null | sed -n 's/.*tsc: Detected \([0-9.]*\) MHz processor.*/\1/p' | tail -n1)
[ -n "$tsc_mhz" ] || tsc_mhz=$(sed -n 's/^cpu MHz[[:space:]]*: //p' /proc/cpuinfo | head -n1)
tsc_khz=$(awk -v m="$tsc_mhz" 'BEGIN { printf "%d", m * 1000 }')
[ "${BENCH_TSC_KHZ:-}" = 0 ] || export MR_GUEST_APPEND="tsc_early_khz=${BENCH_TSC_KHZ:-$tsc_khz}"
# BENCH_APPEND: more kernel command-line words for every guest (module parameters such as
# metaroce.native_rto_min_ms=10, to measure a default against another in the same way).
[ -z "${BENCH_APPEND:-}" ] || export MR_GUEST_APPEND="${MR_GUEST_APPEND:+$MR_GUEST_APPEND }$BENCH_APPEND"
t0=$(date +%s)
say() { echo "bench: $* ($(( $(date +%s) - t0 )) s)"; }

say "dependencies"
"$repo/scripts/deps.sh" | tail -1
"$repo/scripts/bench-deps.sh" || exit 1
mkdir -p "$(dirname "$OUT")"
say "kernels: release (MetaRoCE), baseline (rdma_rxe), rxe-abi (MetaRoCE, rdma_rxe's user ABI), same source and config, as the pairs need"
for k in release baseline rxe-abi; do
  case " $kinds " in *" $k "*) ;; *) continue;; esac
  nice -n 10 "$repo/scripts/kernel.sh" "$k" >"$OUT.kernel-$k.log" 2>&1 ||
    { tail -20 "$OUT.kernel-$k.log"; echo "bench: the $k kernel did not build"; exit 1; }
  grep -E "done in" "$OUT.kernel-$k.log" || true
done
rm -rf "$OUT"; mkdir -p "$OUT"; mv "$OUT".kernel-*.log "$OUT/" 2>/dev/null

# Host load while the guests run: load average, other QEMU guests and compiler processes (the
# machine is shared; the report marks figures taken under contention).
(
  while :; do
    read -r l1 _ </proc/loadavg
    q=0 c=0
    for p in /proc/[0-9]*; do
      read -r -d '' exe <"$p/cmdline" 2>/dev/null || continue
      case $exe in
        *qemu-system*) tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q 'mrguest.name=bench-' || q=$((q + 1));;
        *clang*|*rustc*|*ld.lld*|*cc1*) c=$((c + 1));;
      esac
    done
    echo "$(date +%s) $l1 $q $c"
    sleep 5
  done
) >"$OUT/host-load.tsv" 2>/dev/null & mon=$!
trap 'kill $mon 2>/dev/null' EXIT

failed=0
for p in $pairs; do
  pair_kind "$p"
  say "pair $p: $prov on the $kind kernel"
  s=$(date +%s)
  MR_GUEST_ENV="MR_BENCH_PROVIDER=$prov BENCH_REPS=$reps BENCH_QUICK=$quick BENCH_MTU=${BENCH_MTU:-} MR_TEST_TIMEOUT=$METAROCE_GUEST_TIMEOUT" \
    run_pair "$kind" "$kind" "bench-$p" bench "${BENCH_TESTS:-}"; rc=$?
  e=$(date +%s)
  grep -E '^(not )?ok ' "$OUT/bench-$p-b/output.log" 2>/dev/null | sed "s/^/  $p| /"
  bugs=$(console_bugs "$OUT/bench-$p-a/console.log"; console_bugs "$OUT/bench-$p-b/console.log")
  [ -n "$bugs" ] && { echo "$bugs" | head -20 | sed "s/^/  $p console| /"; rc=1; }
  [ "$rc" = 0 ] || { failed=$((failed + 1)); echo "bench: pair $p failed (logs: $OUT/bench-$p-{a,b}/)"; }
  printf '{"name":"%s","kernel":"%s","provider":"%s","rc":%d,"start":%d,"end":%d}\n' \
    "$p" "$kind" "$prov" "$rc" "$s" "$e" >>"$OUT/pairs.jsonl"
done
kill $mon 2>/dev/null

say "report"
/usr/bin/python3 "$repo/scripts/bench_report.py" "$OUT" --commit "$(git -C "$repo" describe --always --dirty 2>/dev/null || echo unknown)" \
  --reps "$reps" ${quick:+--quick} || { echo "bench: the report failed"; exit 1; }
say "done: $OUT/results.md, results.json, *.png$([ "$failed" = 0 ] || echo " ($failed pair(s) with failed runs, see above)")"
[ "$failed" = 0 ]
