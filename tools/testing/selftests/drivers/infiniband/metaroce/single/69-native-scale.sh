#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Many native connections on one device (issue 34, item 4). Two metaroce-native devices, mra0
# and mrb0, whose netdevs get NA and NB addresses (2001:db8::1:I and 2001:db8::2:J): a connection
# is per pair of GIDs, so NA x NB RC QP pairs, pair (I, J) between mra0's address I and mrb0's
# address J (native_scale.py), make N = NA x NB connections on each device at once: more than
# the 64 a device could ever hold before; 32 x 32 = 1,024 (MR_SCALE_NA and MR_SCALE_NB set
# them). Every pair moves one 4 KiB SEND, checked byte for byte. Printed: the time to connect and
# to move the data, the debugfs connection count of each device, and the memory (vmalloc + slab)
# the connections took: the growth between the QPs in INIT (rings and all already allocated) and
# the QPs at RTS, per connection; and per QP, from before its creation to RTS. Then, with the QPs
# still bound, the idle connections (transport.rst 10.1): mrb0's N connections each took a flight
# to send (their state for packets in flight, from the device's pool) and give it back
# native_flight_idle_ms after their last ACK; mra0's only acknowledged and took none. Once no
# flight is lent the memory is read again: what an idle connection costs (with its QP's stream),
# beside the sizes debugfs states. Then the QPs are destroyed: 2 s later every connection is idle and unbound, and the next connection made on a
# device (native_scale.py poke) reaps them: native_peers_reaped must grow by N on each device and
# the connections must be gone. Then, beside it, rdma_rxe's memory per QP: the same N RC QP pairs
# on one rdma_rxe device, each pair looped through the device's address, one checked SEND each
# (MR_SCALE_RXE=0 leaves it out). No kernel warning.
# MR_SCALE_Q (default 1): QP pairs per address pair, all on its connection; with Q > 1 one QP
# more is bound on the first pair, which must fail with ENOSPC once Q is the 256 streams a
# connection carries (70-native-streams: 1 x 1 addresses, 256 QP pairs).
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
# make check leaves it to check-full (8 x 10 took 98 s on the test kernel; the table's code runs
# in every native test, and 64-native-attack makes 80 connections to as many destinations).
[ -n "${MR_FULL:-}" ] || [ -n "${MR_SCALE_NA:-}" ] || skip "make check-full only (98 s for 80 connections per device under TCG)"
NA=${MR_SCALE_NA:-32} NB=${MR_SCALE_NB:-32} Q=${MR_SCALE_Q:-1}
N=$((NA * NB)) SIZE=4096 PY="$MR_SELFTESTS/native_scale.py" STREAMS=256
# The steps' files, on the output share when there is one (a run's progress can be watched).
D=$( [ -d /tmp/out ] && echo /tmp/out/native-scale || echo /tmp/native-scale )
echo "$NA x $NB addresses: $N connections per device, $Q QP pair(s) on each"
mr_fresh
# One process holds every QP of its device: the per-context quota is raised to N.
modprobe metaroce native_ctx_peers=$((N + 16)) || fail "modprobe metaroce native_ctx_peers=$((N + 16))"
mr_two_devices metaroce-native
trap 'kill $pa $pb 2>/dev/null; mr_two_namespaces_cleanup' EXIT
# The addresses, one `ip` process per namespace.
for ((i = 1; i <= NA; i++)); do printf 'addr add 2001:db8::1:%x/64 dev va nodad\n' $i; done | ip -n mra -batch - \
  || fail "addresses on va"
for ((i = 1; i <= NB; i++)); do printf 'addr add 2001:db8::2:%x/64 dev vb nodad\n' $i; done | ip -n mrb -batch - \
  || fail "addresses on vb"
echo "devices up and addresses added after $SECONDS s"
v2gids() { ip netns exec "$1" ibv_devinfo -v -d "$2" | grep -c 'RoCE v2'; }
end=$((SECONDS + 300))
until [ "$(v2gids mra mra0)" -ge $((NA + 2)) ] && [ "$(v2gids mrb mrb0)" -ge $((NB + 2)) ] || [ $SECONDS -ge $end ]; do sleep 1; done
ga6=$(v2gids mra mra0) gb6=$(v2gids mrb mrb0)
[ "$ga6" -ge $((NA + 2)) ] && [ "$gb6" -ge $((NB + 2)) ] || fail "RoCE v2 GIDs: mra0 $ga6, mrb0 $gb6; expected $((NA + 2)) and $((NB + 2))"
echo "RoCE v2 GIDs: mra0 $ga6, mrb0 $gb6 after $SECONDS s"

mem() { awk '$1 == "VmallocUsed:" || $1 == "Slab:" { s += $2 } END { print s }' /proc/meminfo; }
DBG=/sys/kernel/debug
[ -d $DBG/metaroce_mra0 ] || mount -t debugfs none $DBG 2>/dev/null
conns() { grep -c '^connection' $DBG/metaroce_$1/connections 2>/dev/null; }
# waitfor SECONDS FILE...: until every FILE exists in $D, or a result says FAIL.
waitfor() {
  local end=$((SECONDS + $1)) f; shift
  while [ $SECONDS -lt $end ]; do
    grep -qs FAIL $D/result-* && { cat $D/result-* $D/*.log; fail "native_scale.py: $(grep -h FAIL $D/result-*)"; }
    for f in "$@"; do [ -e "$D/$f" ] || continue 2; done
    return 0
  done
  cat $D/*.log 2>/dev/null; fail "no $* after $1 s"
}
rm -rf $D; mkdir -p $D
r0a=$(mr_stat mra mra0 native_peers_reaped) r0b=$(mr_stat mrb mrb0 native_peers_reaped)
t0=$SECONDS
ip netns exec mra /usr/bin/python3 "$PY" a mra0 $D $NA $NB $SIZE $Q > $D/a.log 2>&1 & pa=$!
ip netns exec mrb /usr/bin/python3 "$PY" b mrb0 $D $NA $NB $SIZE $Q > $D/b.log 2>&1 & pb=$!
waitfor 600 open-a open-b
mq=$(mem)
touch $D/create
waitfor 600 init-a init-b
echo "$((N * Q)) QPs in INIT on each device in $((SECONDS - t0)) s"
m0=$(mem)
touch $D/go
waitfor 600 result-a result-b
m1=$(mem) ca=$(conns mra0) cb=$(conns mrb0)
echo "connected (a: $(cat $D/rts-a) s, b: $(cat $D/rts-b) s) and moved $((N * Q)) x $SIZE B: a $(cat $D/result-a), b $(cat $D/result-b)"
echo "connections: mra0 $ca, mrb0 $cb; memory (vmalloc + slab) +$(( (m1 - m0) / 1024 )) MiB for $((2 * N)) connections:" \
  "$(( (m1 - m0) / (2 * N) )) KiB per connection with $Q QP(s) bound;" \
  "$(( (m1 - mq) / (2 * N * Q) )) KiB per QP from its creation to RTS, its connection's share included"
grep -q "^ok $((N * Q)) " $D/result-a && grep -q "^ok $((N * Q)) " $D/result-b || fail "not every pair moved its data"
if [ "$Q" -gt 1 ]; then
  waitfor 60 extra-a
  want=$([ "$Q" -ge $STREAMS ] && echo ENOSPC || echo ok)
  echo "one QP more on the first connection: $(cat $D/extra-a) (expected $want)"
  [ "$(cat $D/extra-a)" = "$want" ] || fail "QP $((Q + 1)) on one connection: $(cat $D/extra-a), expected $want"
fi
[ "$ca" -ge $N ] && [ "$cb" -ge $N ] || fail "connections held: mra0 $ca, mrb0 $cb; expected $N each"
mr_wait 120 [ "$(mr_stat mrb mrb0 native_flights_lent)" = 0 ] ||
  fail "mrb0: $(mr_stat mrb mrb0 native_flights_lent) flights still lent 120 s after the last SEND"
ta=$(mr_stat mra mra0 native_flights_taken) tb=$(mr_stat mrb mrb0 native_flights_taken)
rb=$(mr_stat mrb mrb0 native_flights_returned) kb=$(mr_stat mrb mrb0 native_flights)
mi=$(mem)
echo "idle: mrb0 took $tb flights and gave back $rb ($kb kept by its pool), mra0 took $ta;" \
  "memory +$(( (mi - m0) / 1024 )) MiB for $((2 * N)) idle connections: $(( (mi - m0) / (2 * N) )) KiB per" \
  "connection with $Q QP(s) bound ($(head -n 1 $DBG/metaroce_mrb0/connections))"
[ "$tb" -ge $N ] && [ "$rb" = "$tb" ] && [ "$ta" = 0 ] && [ "$kb" -le 8 ] ||
  fail "flights: mrb0 took $tb, gave back $rb, kept $kb (expected >= $N, all, <= 8); mra0 took $ta (expected 0)"
touch $D/release
waitfor 300 closed-a closed-b
wait $pa $pb
# Idle and unbound for longer than the reaping delay (2 s), then a new connection on each device.
sleep 3
# (Between the devices' first IPv6 addresses, which no pair used: a new connection on each.)
A6=2001:0db8:0000:0000:0000:0000:0000:0001 B6=2001:0db8:0000:0000:0000:0000:0000:0002
ip netns exec mra /usr/bin/python3 "$PY" poke mra0 "$(mr_ns_gid mra mra0 $A6)" $B6 || fail "poke on mra0"
ip netns exec mrb /usr/bin/python3 "$PY" poke mrb0 "$(mr_ns_gid mrb mrb0 $B6)" $A6 || fail "poke on mrb0"
ra=$(( $(mr_stat mra mra0 native_peers_reaped) - r0a )) rb=$(( $(mr_stat mrb mrb0 native_peers_reaped) - r0b ))
m2=$(mem)
echo "after the QPs went and one new connection each: reaped mra0 $ra, mrb0 $rb; connections mra0 $(conns mra0)," \
  "mrb0 $(conns mrb0); memory $(( (m1 - m2) / 1024 )) MiB lower than with every connection up"
[ "$ra" -ge $N ] && [ "$rb" -ge $N ] || fail "reaped mra0 $ra, mrb0 $rb; expected $N each"
[ "$(conns mra0)" -le 1 ] && [ "$(conns mrb0)" -le 1 ] || fail "connections left after reaping"

# rdma_rxe beside it (MR_SCALE_RXE=0 leaves it out): N RC QP pairs on one rdma_rxe device,
# each pair connected to itself through the device's own address (rdma_rxe's UDP sockets are the
# initial namespace's, so the device is there, on a veth of its own), one checked SEND each, the
# memory read the same way: what a QP costs there from its creation to RTS, where MetaRoCE's
# figure above is a QP plus its share of a connection.
if [ "${MR_SCALE_RXE:-1}" != 0 ] && [ "$Q" = 1 ]; then
  modprobe rdma_rxe || fail "modprobe rdma_rxe (the test kernel builds it beside MetaRoCE)"
  trap 'kill $pa $pb $pl 2>/dev/null; rdma link delete rxl0 2>/dev/null; ip link del rxv0 2>/dev/null; mr_two_namespaces_cleanup' EXIT
  ip link add rxv0 type veth peer name rxv1 && ip addr add 192.0.2.60/24 dev rxv0 &&
    ip link set rxv1 up && ip link set rxv0 up || fail "veth rxv0 for rdma_rxe"
  rdma link add rxl0 type rxe netdev rxv0 || fail "rdma link add rxl0 type rxe"
  gx=
  for ((i = 0; i < 100 && ${#gx} == 0; i++)); do gx=$(mr_gid_index rxl0 192.0.2.60); [ -n "$gx" ] || sleep 0.1; done
  [ -n "$gx" ] || fail "no RoCE v2 GID for 192.0.2.60 on rxl0"
  rm -f $D/go $D/create $D/release
  t0=$SECONDS
  /usr/bin/python3 "$PY" loop rxl0 $gx $N $SIZE $D > $D/l.log 2>&1 & pl=$!
  waitfor 600 open-l
  mq=$(mem)
  touch $D/create
  waitfor 600 init-l
  touch $D/go
  waitfor 600 result-l
  m1=$(mem)
  echo "rdma_rxe: $N RC QP pairs connected in $(cat $D/rts-l) s and $N x $SIZE B moved: $(cat $D/result-l);" \
    "$(( (m1 - mq) / (2 * N) )) KiB per QP from its creation to RTS"
  grep -q "^ok $N " $D/result-l || fail "rdma_rxe: not every pair moved its data"
  touch $D/release
  waitfor 300 closed-l
  wait $pl
  rdma link delete rxl0 || fail "rdma link delete rxl0"
  ip link del rxv0
fi
mr_dmesg_clean
