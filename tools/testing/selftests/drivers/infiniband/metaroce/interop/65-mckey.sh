#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# UD multicast between MetaRoCE and rdma_rxe, both directions: the receiver joins an IPv4 group
# with rdma_cm's mckey and waits for every message; the sender starts once the receiver printed
# that it joined (one barrier); 50 messages of 1000 B; the receiver must complete all of them and
# exit 0. MetaRoCE (a) sends with mckey. rdma_rxe (b) sends with mcast_send.py (pyverbs, each send
# signaled and completed before the next): mckey's own sender posts unsignaled sends and destroys
# its QP at once, and in a run on 2026-12-01 only 1 of rdma_rxe's 50 datagrams left before the
# destroy cut its transmit work short (the MetaRoCE receiver then waited for the rest until its
# timeout).
. "$(dirname "$0")/../lib.sh"
mr_rdma_dev || fail "RDMA device"
failed=0 n=50
for rrole in b a; do
  grp=239.192.2.$([ $rrole = a ] && echo 1 || echo 2)
  name=mckey-$rrole
  t0=$SECONDS
  if [ "$MR_ROLE" = "$rrole" ]; then
    timeout 120 stdbuf -oL mckey -m $grp -b "$(mr_self)" -C $n -S 1000 >/tmp/mckey.out 2>&1 & pid=$!
    for ((i = 0; i < 600; i++)); do
      grep -q "receiving data transfers" /tmp/mckey.out && break
      kill -0 $pid 2>/dev/null || break
      sleep 0.1
    done
    grep -q "receiving data transfers" /tmp/mckey.out || echo "$name: the receiver did not join"
    mr_barrier "$name" || echo "$name: the sender never came"
    wait $pid; rc=$?
    if [ $rc = 0 ] && grep -q "return status 0" /tmp/mckey.out; then
      echo "$name: received $n x 1000 B on group $grp ($((SECONDS - t0)) s)"
    else
      cat /tmp/mckey.out; echo "FAILED $name: receiver exit $rc"; failed=1
    fi
  else
    mr_barrier "$name" || fail "$name: the receiver never reported"
    if mr_our_kernel; then
      timeout 120 stdbuf -oL mckey -m $grp -b "$(mr_self)" -s -C $n -S 1000 >/tmp/mckey.out 2>&1; rc=$?
      grep -q "return status 0" /tmp/mckey.out || rc=1
    else
      timeout 120 python3 "$MR_SELFTESTS/mcast_send.py" "$MR_DEV" "$MR_GID" $grp $n 1000 >/tmp/mckey.out 2>&1
      rc=$?
    fi
    if [ $rc = 0 ]; then
      tail -n1 /tmp/mckey.out; echo "$name: sent $n x 1000 B to group $grp"
    else
      cat /tmp/mckey.out; echo "FAILED $name: sender exit $rc"; failed=1
    fi
  fi
done
mr_our_kernel && rdma statistic show link $MR_DEV/1
mr_our_kernel && mr_dmesg_clean
[ $failed = 0 ] || fail "some mckey runs failed (see above)"
