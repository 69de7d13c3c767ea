#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The authenticated native mode between two guests (issue 32, part 3; transport.rst 13.1): both
# guests put the same 32-byte fabric key in their keyrings as `logon` key metaroce:eth0, replace
# mr0 by a metaroce-native device (which finds the key and seals every packet), and run
# ibv_rc_pingpong with received buffers validated (-c). Expected: the transfers complete, no
# packet is refused (native_auth_errors 0), DATA went both ways, the kernel log names the mode.
# Afterwards mr0 (RoCEv2, plain) is back for the tests that follow.
. "$(dirname "$0")/../lib.sh"
mr_our_kernel || skip "peer runs $(uname -r), not MetaRoCE's kernel"
KEY=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
stat() { rdma statistic show link mn0/1 | tr ' ' '\n' | awk -v n="$1" 'p { print; exit } $0 == n { p = 1 }'; }
restore() {
  rdma link delete mn0 2>/dev/null
  /usr/bin/python3 "$MR_SELFTESTS/logon_key.py" del metaroce:eth0 >/dev/null 2>&1
  mr_rdma_dev >/dev/null || echo "mr0 could not be restored"
}
trap restore EXIT
/usr/bin/python3 "$MR_SELFTESTS/logon_key.py" add metaroce:eth0 $KEY || fail "add the fabric key"
[ -e /sys/class/infiniband/mr0 ] && { rdma link delete mr0 || fail "delete mr0"; }
rdma link add mn0 type metaroce-native netdev eth0 || fail "add mn0 (native, authenticated)"
dmesg | grep -q "mn0: added on netdev eth0 (MetaRoCE native, authenticated with key metaroce:eth0;" \
  || { dmesg | grep mn0 | tail -3; fail "mn0 is not in the authenticated mode"; }
for ((i = 0; i < 100; i++)); do
  gid=$(mr_gid_index mn0 "$(mr_self)")
  [ -n "$gid" ] && ibv_devinfo -d mn0 | grep -q PORT_ACTIVE && break
  sleep 0.1
done
[ -n "$gid" ] || fail "no RoCE v2 GID for $(mr_self) on mn0"
port=18780
for run in "4096 20" "65536 4"; do
  set -- $run; size=$1 iters=$2
  port=$((port + 1))
  mr_pair_run "auth-pp-$size" a $port ibv_rc_pingpong -d mn0 -g "$gid" -c -s "$size" -n "$iters"
  rc=$?
  echo "authenticated, $size B x $iters: $(grep -E 'bytes in|iters in' <<<"$MR_OUT" | tr '\n' ' ')"
  [ $rc = 0 ] || { echo "$MR_OUT"; rdma statistic show link mn0/1; fail "ibv_rc_pingpong (authenticated), $size B"; }
  grep -q "^$((size * iters * 2)) bytes in" <<<"$MR_OUT" || { echo "$MR_OUT"; fail "expected $((size * iters * 2)) bytes"; }
done
rdma statistic show link mn0/1
[ "$(stat native_auth_errors)" = 0 ] || fail "native_auth_errors $(stat native_auth_errors): a genuine packet was refused"
[ "$(stat native_data_sent)" -gt 0 ] || fail "no native DATA sent"
mr_barrier auth-done || fail "the peer did not finish"
mr_dmesg_clean
