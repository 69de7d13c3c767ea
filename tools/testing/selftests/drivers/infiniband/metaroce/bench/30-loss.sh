#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Goodput under loss: netem drops BENCH_LOSS percent of each guest's outgoing packets (so of both
# directions) while ib_write_bw moves 64 KiB messages, then while iperf3 moves one TCP stream.
# A run that does not finish within BENCH_RUN_TIMEOUT, or fails (retry exhaustion), is recorded
# as such, never as a figure.
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/bench/bench-lib.bash"
bench_dev || fail "RDMA device"
BENCH_PORT=40000
n=$([ -n "${BENCH_QUICK:-}" ] && echo 200 || echo 300)
secs=$([ -n "${BENCH_QUICK:-}" ] && echo 3 || echo 5)
trap 'bench_loss 0' EXIT
for ((rep = 1; rep <= BENCH_REPS; rep++)); do
  for loss in $BENCH_LOSS; do
    bench_loss "$loss" || fail "tc netem loss $loss%"
    bench_perftest "loss-write-65536-l$loss-r$rep" \
      "\"kind\":\"loss\",\"op\":\"write\",\"size\":65536,\"qps\":1,\"loss\":$loss,\"rep\":$rep" \
      ib_write_bw -s 65536 -n "$n" --report_gbits
    bench_iperf "loss-tcp-l$loss-r$rep" "\"kind\":\"loss\",\"op\":\"tcp\",\"size\":0,\"qps\":1,\"loss\":$loss,\"rep\":$rep" 1 "$secs"
  done
done
bench_loss 0
[ "$BENCH_FAILED" = 0 ] || fail "$BENCH_FAILED run(s) failed (see above)"
