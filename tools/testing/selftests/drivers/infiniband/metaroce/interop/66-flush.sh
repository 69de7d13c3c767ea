#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# RDMA FLUSH (IBTA 1.5) between MetaRoCE and Debian's rdma_rxe, each side once the requester and
# once the responder: flush_check.py serves (memory regions with and without FLUSH_GLOBAL, one RC
# QP per case) on one guest and posts the FLUSH work requests, written into the QP's send ring in the device's own layout
# (rdma-core 44 has no ibv_wr_flush), from the other, which checks every completion: a WRITE then
# a FLUSH of its range, a FLUSH of the whole MR and of 0 bytes succeed; a range past the MR, an MR
# without the right and a bogus R_Key get IBV_WC_REM_ACCESS_ERR, the persistent placement and a
# QP without the right IBV_WC_REM_INV_REQ_ERR. MetaRoCE as requester also refuses malformed
# FLUSH requests locally.
. "$(dirname "$0")/../lib.sh"
mr_rdma_dev || fail "RDMA device"
failed=0 port=18990
for srole in a b; do
  port=$((port + 1))
  name=flush-$srole t0=$SECONDS
  mr_barrier "$name" || { echo "$name: the peer never arrived"; failed=1; continue; }
  if [ "$MR_ROLE" = "$srole" ]; then
    timeout 300 /usr/bin/python3 "$MR_SELFTESTS/flush_check.py" serve "$MR_DEV" "$MR_GID" "$(mr_self)" $port ||
      { echo "FAILED $name: responder side"; failed=1; }
  else
    ours=; mr_our_kernel && ours=--ours
    timeout 300 /usr/bin/python3 "$MR_SELFTESTS/flush_check.py" post "$MR_DEV" "$MR_GID" "$(mr_peer)" $port $ours ||
      { echo "FAILED $name: requester side"; failed=1; }
  fi
  echo "$name: $((SECONDS - t0)) s"
done
mr_our_kernel && rdma statistic show link $MR_DEV/1
mr_our_kernel && mr_dmesg_clean
[ $failed = 0 ] || fail "FLUSH against rdma_rxe (see above)"
