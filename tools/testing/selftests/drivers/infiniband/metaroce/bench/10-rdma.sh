#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# RDMA figures of the provider under test: WRITE, READ and SEND bandwidth over four message sizes,
# SEND and WRITE latency at 8 B, 64 B message rate with 1 and 8 QPs; BENCH_REPS repetitions, the
# repetition as the outer loop (an interrupted run still has whole sets).
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/bench/bench-lib.bash"
bench_dev || fail "RDMA device"
BENCH_PORT=20000
if [ -n "${BENCH_QUICK:-}" ]; then sizes="4096 65536" lat_iters=50; else sizes="64 4096 65536 1048576" lat_iters=100; fi
# Iterations per size: 2-10 s of transfer each under TCG (measured 2026-11-30: MetaRoCE about
# 5000 64 B WRITEs/s, rdma_rxe 1100; 0.05-0.1 Gb/s at 4 and 64 KiB; ~25 ms per latency round trip), so
# that the 0.1 s wall-time samples resolve the transfer window to a few percent.
iters() { case $1 in 64) echo 10000;; 4096) echo 10000;; 65536) echo 500;; 1048576) echo 40;; esac; }
rate_iters=10000
for ((rep = 1; rep <= BENCH_REPS; rep++)); do
  for op in write read send; do
    for size in $sizes; do
      n=$(iters "$size")
      bench_perftest "bw-$op-$size-r$rep" "\"kind\":\"bw\",\"op\":\"$op\",\"size\":$size,\"qps\":1,\"loss\":0,\"rep\":$rep" \
        "ib_${op}_bw" -s "$size" -n "$n" --report_gbits
    done
  done
  for op in send write; do
    bench_perftest "lat-$op-8-r$rep" "\"kind\":\"lat\",\"op\":\"$op\",\"size\":8,\"qps\":1,\"loss\":0,\"rep\":$rep" \
      "ib_${op}_lat" -s 8 -n "$lat_iters"
  done
  for q in 1 8; do
    bench_perftest "rate-write-64-q$q-r$rep" "\"kind\":\"rate\",\"op\":\"write\",\"size\":64,\"qps\":$q,\"loss\":0,\"rep\":$rep" \
      ib_write_bw -s 64 -q "$q" -n $((q == 1 ? rate_iters : 2 * rate_iters / q)) --report_gbits
  done
done
[ "$BENCH_FAILED" = 0 ] || fail "$BENCH_FAILED run(s) failed (see above)"
