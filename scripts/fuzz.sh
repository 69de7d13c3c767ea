#!/usr/bin/env bash
# `make fuzz`: runs every cargo-fuzz (libFuzzer) target of fuzz/ against the protocol core for
# FUZZ_SECONDS (default 60) each, one after the other under `nice -n FUZZ_NICE` (default 15), and prints
# executions and crashes per target. A target that crashes is restarted for the rest of its time (at
# most 20 runs); every crash input is kept in out/fuzz/artifacts/TARGET/. Exit status 1 if any target
# crashed. The working corpus grows in out/fuzz/corpus/TARGET/, seeded from fuzz/seeds/TARGET/ and
# fuzz/regressions/TARGET/ (both checked in). FUZZ_TARGETS="packet psn" runs a subset.
#
# Needs the nightly pinned in scripts/versions.env (FUZZ_ANY_NIGHTLY=1 accepts another one) and
# cargo-fuzz, which is installed here on first use (cargo install --locked, ~40 s): it is not in
# scripts/deps.sh because `make check` and CI never need it.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/scripts/versions.env"
export PATH="$HOME/.cargo/bin:$PATH"
secs=${FUZZ_SECONDS:-60}
nice_lvl=${FUZZ_NICE:-15}
targets=${FUZZ_TARGETS:-packet headers psn responder requester icrc_mutate mrc_packet sack conn}
OUT=${METAROCE_OUT:-$repo/out}/fuzz
tc=$FUZZ_TOOLCHAIN
die() { echo "fuzz: $*" >&2; exit 2; }
log() { echo "fuzz: $*"; }
case $secs in ''|*[!0-9]*|0) die "FUZZ_SECONDS must be a positive integer";; esac

want="rustc $FUZZ_RUSTC_VERSION ($FUZZ_RUSTC_COMMIT $FUZZ_RUSTC_DATE)"
have=$(rustc +"$tc" -V 2>/dev/null) || die "no '$tc' toolchain in rustup (rustup toolchain list)"
if [ "$have" != "$want" ]; then
  [ -n "${FUZZ_ANY_NIGHTLY:-}" ] || die "toolchain '$tc' is '$have', pinned '$want' (scripts/versions.env); FUZZ_ANY_NIGHTLY=1 to use it anyway"
  log "warning: using '$have' instead of the pinned '$want'"
fi
mkdir -p "$OUT/logs" || die "cannot create $OUT/logs"
if [ "$(cargo fuzz --version 2>/dev/null)" != "cargo-fuzz $CARGO_FUZZ_VERSION" ]; then
  log "cargo install cargo-fuzz $CARGO_FUZZ_VERSION --locked (first use, about 40 s)"
  nice -n "$nice_lvl" cargo install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION" >"$OUT/logs/install.log" 2>&1 \
    || { tail -20 "$OUT/logs/install.log" >&2; die "cargo install cargo-fuzz $CARGO_FUZZ_VERSION failed"; }
fi

cd "$repo" || exit 2
# Overflow checks and debug assertions: fuzz/Cargo.toml's profile, and the targets refuse to build
# without them. No sanitizer: the protocol core has no unsafe code (forbid(unsafe_code)).
flags=(--fuzz-dir fuzz -s none --debug-assertions)
cargo +"$tc" fetch --locked --manifest-path fuzz/Cargo.toml >"$OUT/logs/build.log" 2>&1 \
  || { tail -20 "$OUT/logs/build.log" >&2; die "fuzz/Cargo.lock is not up to date"; }
log "building the fuzz targets ($have)"
nice -n "$nice_lvl" cargo +"$tc" fuzz build "${flags[@]}" >>"$OUT/logs/build.log" 2>&1 \
  || { tail -30 "$OUT/logs/build.log" >&2; die "cargo fuzz build failed (see $OUT/logs/build.log)"; }

rows=() total_crashes=0
for t in $targets; do
  corpus=$OUT/corpus/$t art=$OUT/artifacts/$t tlog=$OUT/logs/$t.log
  mkdir -p "$corpus" "$art"; : >"$tlog"
  seeds=("fuzz/seeds/$t"); [ -d "fuzz/regressions/$t" ] && seeds+=("fuzz/regressions/$t")
  log "$t: ${secs}s"
  left=$secs execs=0 crashes=0 runs=0 t0=$(date +%s)
  while [ "$left" -gt 0 ] && [ "$runs" -lt 20 ]; do
    runs=$((runs + 1)) s=$(date +%s)
    nice -n "$nice_lvl" cargo +"$tc" fuzz run "${flags[@]}" "$t" "$corpus" "${seeds[@]}" -- \
      -max_total_time="$left" -print_final_stats=1 -timeout=20 -rss_limit_mb=2048 \
      -artifact_prefix="$art/" >>"$tlog" 2>&1
    rc=$?
    n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$tlog" | tail -1)
    # Each run appends its own final stats; count only the newest line once.
    execs=$((execs + ${n:-0}))
    sed -i 's/^stat::number_of_executed_units:/stat::counted_units:/' "$tlog"
    left=$((secs - ($(date +%s) - t0)))
    [ "$rc" = 0 ] && break
    if grep -q 'Test unit written to' "$tlog"; then
      crashes=$((crashes + 1))
      log "$t: crash: $(grep -o 'Test unit written to .*' "$tlog" | tail -1 | sed 's/Test unit written to //')"
      sed -i 's/Test unit written to/Crash unit written to/' "$tlog"
    else
      tail -20 "$tlog" >&2; die "$t: libFuzzer failed without a crash input (rc $rc, see $tlog)"
    fi
  done
  total_crashes=$((total_crashes + crashes))
  rows+=("$(printf '%-12s %8s %14s %10s %8s' "$t" "$(( $(date +%s) - t0 ))" "$execs" "$(( execs / ( $(date +%s) - t0 > 0 ? $(date +%s) - t0 : 1 ) ))" "$crashes")")
done

echo
printf '%-12s %8s %14s %10s %8s\n' target seconds executions exec/s crashes
for r in "${rows[@]}"; do echo "$r"; done
echo "# $(date -u +%Y-%m-%d), $have, cargo-fuzz $CARGO_FUZZ_VERSION, nice -n $nice_lvl; logs and crash inputs in $OUT"
[ "$total_crashes" = 0 ]
