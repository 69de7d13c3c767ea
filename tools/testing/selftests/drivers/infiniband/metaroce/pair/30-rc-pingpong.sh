#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# ibv_rc_pingpong across the QEMU link with received buffers validated (-c): 64 B event-driven
# (-e), 4 KiB and 1 MiB. Between two MetaRoCE guests (suite pair) guest a serves and the 1 MiB run
# is left to check-full (single/43-rc-pingpong and the interop suite carry it in make check);
# against Debian's rdma_rxe (suite interop, MR_BOTH_WAYS) each guest serves once and connects once.
. "$(dirname "$0")/../lib.sh"
mr_rdma_dev || fail "RDMA device"
port=18700
big=${MR_BOTH_WAYS:-${MR_FULL:-}}
for srole in a ${MR_BOTH_WAYS:+b}; do
  for run in "64 20 -e" "4096 10" ${big:+"1048576 1"}; do
    set -- $run; size=$1 iters=$2; shift 2
    port=$((port + 1))
    mr_pair_run "pp-$srole-$size" "$srole" $port ibv_rc_pingpong -d "$MR_DEV" -g "$MR_GID" -c -s "$size" -n "$iters" "$@"
    rc=$?
    echo "server $srole, $size B x $iters $*: $(grep -E 'bytes in|iters in' <<<"$MR_OUT" | tr '\n' ' ')"
    [ $rc = 0 ] || { echo "$MR_OUT"; fail "ibv_rc_pingpong, server $srole, $size B"; }
    grep -q "^$((size * iters * 2)) bytes in" <<<"$MR_OUT" || { echo "$MR_OUT"; fail "expected $((size * iters * 2)) bytes"; }
  done
done
mr_our_kernel && rdma statistic show link $MR_DEV/1
mr_our_kernel && mr_dmesg_clean
true
