# UD multicast from MetaRoCE to rdma_rxe: rdma_cm's mckey, the rdma_rxe guest (b) receiving (it
# joins the group and waits for every message), the MetaRoCE guest (a) sending once the receiver
# printed that it joined (one barrier), 50 messages of 1000 B; the receiver must complete all of
# them and exit 0. The other direction is not tested with mckey: its sender posts unsignaled
# sends and destroys its QP at once; in a run on 2026-12-01 the MetaRoCE receiver saw 1 of
# rdma_rxe's 50 datagrams arrive (rcvd_pkts), consistent with rdma_rxe transmitting from a work
# item that the QP's destruction cut short, and waited for the rest until its timeout.
. "$MR_SELFTESTS/lib.sh"
mr_rdma_dev || fail "RDMA device"
failed=0 n=50
for rrole in b; do
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
    timeout 120 stdbuf -oL mckey -m $grp -b "$(mr_self)" -s -C $n -S 1000 >/tmp/mckey.out 2>&1; rc=$?
    if [ $rc = 0 ] && grep -q "return status 0" /tmp/mckey.out; then
      echo "$name: sent $n x 1000 B to group $grp"
    else
      cat /tmp/mckey.out; echo "FAILED $name: sender exit $rc"; failed=1
    fi
  fi
done
mr_our_kernel && rdma statistic show link $MR_DEV/1
mr_our_kernel && mr_dmesg_clean
[ $failed = 0 ] || fail "some mckey runs failed (see above)"
