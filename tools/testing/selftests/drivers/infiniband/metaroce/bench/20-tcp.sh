#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# TCP over the same link (iperf3, 1 and 4 streams): the reference the RDMA figures are divided by.
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/bench/bench-lib.bash"
BENCH_PORT=30000
secs=$([ -n "${BENCH_QUICK:-}" ] && echo 3 || echo 5)
for ((rep = 1; rep <= BENCH_REPS; rep++)); do
  for p in 1 4; do
    bench_iperf "tcp-p$p-r$rep" "\"kind\":\"tcp\",\"op\":\"tcp\",\"size\":0,\"qps\":$p,\"loss\":0,\"rep\":$rep" "$p" "$secs"
  done
done
[ "$BENCH_FAILED" = 0 ] || fail "$BENCH_FAILED run(s) failed (see above)"
