#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Goodput under loss on a link-limited path (issue 34, item 6). The plain sweep (30-loss.sh) runs
# where the guests' CPUs limit every stack, so its shares mostly measure TCG stalls. Here each
# guest's egress is a bottleneck every stack fills without loss: netem drops BENCH_LOSS_LIMITED
# percent of the packets, then tbf shapes them to BENCH_LIMIT (default 100mbit, below what every
# pair moves lossless in 10-rdma.sh) through one FIFO queue (RED: marks ECN-capable packets once
# its average queue passes 12 ms, drops the others early, tail-drops at 36 ms; bench-lib.bash). The share of a pair's
# lossless goodput then measures its loss recovery. ib_write_bw 64 KiB, then one TCP stream.
# A run that does not finish within BENCH_LIMIT_TIMEOUT (default 90 s) is recorded as failed,
# never as a figure.
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/bench/bench-lib.bash"
bench_dev || fail "RDMA device"
BENCH_PORT=45000
BENCH_RUN_TIMEOUT=${BENCH_LIMIT_TIMEOUT:-90}
n=$([ -n "${BENCH_QUICK:-}" ] && echo 200 || echo 300)
secs=$([ -n "${BENCH_QUICK:-}" ] && echo 3 || echo 5)
trap 'bench_loss 0' EXIT
bench_limit 0 || fail "tc: bottleneck of $BENCH_LIMIT"
tc qdisc show dev eth0
for ((rep = 1; rep <= BENCH_REPS; rep++)); do
  for loss in ${BENCH_LOSS_LIMITED//,/ }; do
    bench_limit "$loss" || fail "tc: bottleneck of $BENCH_LIMIT at $loss% loss"
    bench_perftest "limited-write-65536-l$loss-r$rep" \
      "\"kind\":\"limited\",\"op\":\"write\",\"size\":65536,\"qps\":1,\"loss\":$loss,\"rep\":$rep" \
      ib_write_bw -s 65536 -n "$n" --report_gbits
    bench_qdisc "limited-write-65536-l$loss-r$rep"
    bench_limit "$loss" || fail "tc: bottleneck of $BENCH_LIMIT at $loss% loss"
    bench_iperf "limited-tcp-l$loss-r$rep" "\"kind\":\"limited\",\"op\":\"tcp\",\"size\":0,\"qps\":1,\"loss\":$loss,\"rep\":$rep" 1 "$secs"
    bench_qdisc "limited-tcp-l$loss-r$rep"
  done
done
bench_loss 0
[ "$BENCH_FAILED" = 0 ] || fail "$BENCH_FAILED run(s) failed (see above)"
