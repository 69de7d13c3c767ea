#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rstream (rsockets: a byte stream over an rdma_cm RC connection, RDMA WRITE with immediate into
# the peer's receive buffer) with blocking calls and data verification (-T b -T v): the client
# sends N transfers, the server checks every byte of the stream against rstream's pattern and
# sends N back, which the client checks. Both ends must exit 0 and print their result row, and
# each guest must have taken in at least N x size bytes on eth0. Runs: 100 x 10000 B. Not yet in
# check-full: 1000 x 1000 B and 16 x 1 MiB pass with MetaRoCE serving rdma_rxe but hung with rxe
# serving (README, rdma_cm). Server a between two MetaRoCE guests (both ways in check-full), each
# side once as server and once as client against rdma_rxe (MR_BOTH_WAYS).
MR_FULL_ONLY="make check's hour: the interop suite keeps rping, ucmatose and udaddy over rdma_cm"
. "$(dirname "$0")/../lib.sh"
mr_rdma_dev || fail "RDMA device"
port=19000 failed=0
runs=("100 10000")
both=${MR_BOTH_WAYS:-${MR_FULL:-}}
for srole in a ${both:+b}; do
  [ "$MR_ROLE" = "$srole" ] && me=server || me=client
  for run in "${runs[@]}"; do
    set -- $run; count=$1 size=$2
    port=$((port + 1)) t0=$SECONDS
    mr_cm_mark
    mr_cm_pair "rstream-$srole-$count-$size" "$srole" $port \
      rstream -b "$(mr_self)" -p $port -C "$count" -S "$size" -T b -T v -- \
      rstream -s "$(mr_peer)" -p $port -C "$count" -S "$size" -T b -T v
    rc=$?
    what="rstream $count x $size B, server $srole ($me)"
    row=${MR_OUT#*$'\n'custom }
    if [ $rc != 0 ] || [ "$row" = "$MR_OUT" ]; then
      echo "$MR_OUT"; echo "$MR_ERR"; echo "FAILED $what: exit $rc"; failed=1; continue
    fi
    if ! mr_cm_took $((count * size)) 1; then
      echo "$MR_OUT"; echo "FAILED $what: $MR_TOOK"; failed=1; continue
    fi
    echo "$what: ok, $MR_TOOK, $((SECONDS - t0)) s; row: custom ${row%%$'\n'*}"
  done
done
mr_our_kernel && rdma statistic show link $MR_DEV/1
mr_our_kernel && mr_dmesg_clean
[ $failed = 0 ] || fail "some rstream runs failed (see above)"
