#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# udaddy (rdma_cm, UD): address and route resolution, SIDR to the listener for the remote QPN and
# Q_Key, then the client sends its messages (SEND with immediate) and the server answers each
# through an AH built from the received GRH. Both ends must exit 0 after "data transfers
# complete", and each guest must have taken in at least the payload on eth0 and completed at least
# that many receives (rdma_recvs): udaddy counts completions without looking at their status.
# udaddy always uses rdma_cm port 7174. Runs: 2 connections x 10 messages of 1024 B (the active
# MTU); check-full adds 8 x 100 of 100 B. Server a between two MetaRoCE guests (both ways in
# check-full), each side once as server and once as client against rdma_rxe (MR_BOTH_WAYS).
. "$(dirname "$0")/../lib.sh"
# make check runs it against rdma_rxe both ways (interop); two MetaRoCE guests in check-full (CI time).
[ -n "${MR_BOTH_WAYS:-}${MR_FULL:-}" ] || skip "two MetaRoCE guests: make check-full (make check runs the interop suite's copy)"
mr_rdma_dev || fail "RDMA device"
failed=0
runs=("2 10 1024")
[ -n "${MR_FULL:-}" ] && runs+=("8 100 100")
both=${MR_BOTH_WAYS:-${MR_FULL:-}}
for srole in a ${both:+b}; do
  [ "$MR_ROLE" = "$srole" ] && me=server || me=client
  for run in "${runs[@]}"; do
    set -- $run; conns=$1 count=$2 size=$3
    t0=$SECONDS
    mr_cm_mark
    mr_cm_pair "udaddy-$srole-$conns-$count-$size" "$srole" 7174 \
      udaddy -b "$(mr_self)" -c "$conns" -C "$count" -S "$size" -- \
      udaddy -s "$(mr_peer)" -c "$conns" -C "$count" -S "$size"
    rc=$?
    what="udaddy $conns connections x $count x $size B, server $srole ($me)"
    mr_cm_verdict "$what" $rc $((conns * count * size)) $((conns * count)) $t0 || failed=1
  done
done
mr_our_kernel && rdma statistic show link $MR_DEV/1
mr_our_kernel && mr_dmesg_clean
[ $failed = 0 ] || fail "some udaddy runs failed (see above)"
