#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# ucmatose (rdma_cm, RC): several connections to one listener, then on each the server sends its
# messages and the client sends as many back. Both ends must exit 0 after "data transfers
# complete", and each guest must have taken in at least the payload on eth0 and completed at least
# that many receives (rdma_recvs): ucmatose counts completions without looking at their status.
# Runs: 3 connections x 10 messages of 4000 B (four packets each at MTU 1024); check-full adds
# 16 x 100 of 1000 B (against rdma_rxe serving it once left rxe with 1348 of its 1600 receives
# successful, 2026-11-30, a loaded KASAN guest falling behind; passed both ways on 2026-12-03 with
# no duplicate request or retransmission on either side: README, rdma_cm). Server a between two MetaRoCE guests (both ways in check-full),
# each side once as server and once as client against rdma_rxe (MR_BOTH_WAYS).
. "$(dirname "$0")/../lib.sh"
# make check runs it against rdma_rxe both ways (interop); two MetaRoCE guests in check-full (CI time).
[ -n "${MR_BOTH_WAYS:-}${MR_FULL:-}" ] || skip "two MetaRoCE guests: make check-full (make check runs the interop suite's copy)"
mr_rdma_dev || fail "RDMA device"
port=18980 failed=0
runs=("3 10 4000")
[ -n "${MR_FULL:-}" ] && runs+=("16 100 1000")
both=${MR_BOTH_WAYS:-${MR_FULL:-}}
for srole in a ${both:+b}; do
  [ "$MR_ROLE" = "$srole" ] && me=server || me=client
  for run in "${runs[@]}"; do
    set -- $run; conns=$1 count=$2 size=$3
    port=$((port + 1)) t0=$SECONDS
    mr_cm_mark
    mr_cm_pair "ucmatose-$srole-$conns-$count-$size" "$srole" $port \
      ucmatose -b "$(mr_self)" -p $port -c "$conns" -C "$count" -S "$size" -- \
      ucmatose -s "$(mr_peer)" -p $port -c "$conns" -C "$count" -S "$size"
    rc=$?
    what="ucmatose $conns connections x $count x $size B, server $srole ($me)"
    mr_cm_verdict "$what" $rc $((conns * count * size)) $((conns * count)) $t0 || failed=1
  done
done
mr_our_kernel && rdma statistic show link $MR_DEV/1
mr_our_kernel && mr_dmesg_clean
[ $failed = 0 ] || fail "some ucmatose runs failed (see above)"
