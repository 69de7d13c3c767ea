#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Where the CPU goes (issue 9 item 2): `perf record` (cpu-clock, the only event under TCG) on both
# guests of a pair, system-wide with call graphs, while `ib_write_bw -s 65536` runs for
# PROFILE_SECONDS (default 20) and, for comparison, one iperf3 stream. Leaves in
# /tmp/out/bench/: profile-ID.ROLE.txt (`perf report`: top symbols, self time, and the same by
# DSO/module) and the runs' records as the bench suite writes them. The report is read by eye
# (README, "Where the time goes"); nothing here is a pass/fail figure. Under TCG the only event is
# cpu-clock, an hrtimer: it cannot fire while interrupts are off, so time spent with interrupts
# disabled is charged to the instruction that enables them (`_raw_spin_unlock_irq*`).
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/bench/bench-lib.bash"
command -v perf >/dev/null || fail "perf is not installed"
bench_dev || fail "RDMA device"
secs=${PROFILE_SECONDS:-20}
BENCH_PORT=21000
# Profiles the whole guest while the run of bench_run happens (started on both sides after the
# run's barrier, so both record the transfer).
profile() {
  local id=$1 what=$2; shift 2
  ( bench_sleep 1; perf record -q -e cpu-clock -F 499 -a -g -o "/tmp/perf-$id.data" -- sleep "$secs" \
      >/tmp/perf-$id.log 2>&1 ) & ppid=$!
  "$@"
  wait "$ppid"
  {
    echo "# $what ($(uname -r), ${MR_BENCH_PROVIDER}, role $MR_ROLE): perf record -e cpu-clock -a -g, $secs s"
    perf report -q -i "/tmp/perf-$id.data" --stdio --no-children --sort dso --percent-limit 1 -g none 2>/dev/null | head -20
    echo
    perf report -q -i "/tmp/perf-$id.data" --stdio --no-children --sort sym --percent-limit 0.5 -g none 2>/dev/null | head -45
  } >"$BENCH_DIR/profile-$id.$MR_ROLE.txt"
  grep -c . "$BENCH_DIR/profile-$id.$MR_ROLE.txt" >/dev/null || fail "$id: empty profile"
  head -12 "$BENCH_DIR/profile-$id.$MR_ROLE.txt"
}
# PROFILE_WORKLOADS picks what is recorded (default: write-64k tcp; rate-64 is the bench's 64 B
# message-rate workload on one QP). Runs last past the window (-D, seconds).
for w in ${PROFILE_WORKLOADS:-write-64k tcp}; do
  case $w in
    write-64k) profile write-64k "ib_write_bw 64 KiB" bench_perftest "prof-write-64k" "\"kind\":\"profile\"" \
      ib_write_bw -s 65536 -D $((secs + 4)) --report_gbits;;
    rate-64) profile rate-64 "ib_write_bw 64 B, 1 QP" bench_perftest "prof-rate-64" "\"kind\":\"profile\"" \
      ib_write_bw -s 64 -D $((secs + 4)) --report_gbits;;
    tcp) profile tcp "iperf3, one stream" bench_iperf "prof-tcp" "\"kind\":\"profile\"" 1 $((secs + 4));;
    *) fail "unknown profile workload $w";;
  esac
done
[ "$BENCH_FAILED" = 0 ] || fail "$BENCH_FAILED run(s) failed"
