#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Forged and malformed native packets against live native traffic (issue 10, item 2): two
# `metaroce-native` devices (mra0, mrb0), ib_write_bw and ib_send_bw (64 KiB, mrb -> mra) running
# while native_inject.py, in the peer's namespace and from the peer's addresses, fires every kind
# of bad packet at mra0 (and forged ACKs at mrb0, the live data sender). Then:
#
# * both transfers completed, and afterwards ibv_rc_pingpong -c (64 KiB both ways, buffers
#   validated) runs over the same connection;
# * each kind was counted where it must be, from counters read before and after: exactly for
#   rcvd_malformed (no legitimate packet is malformed), the kernel's UDP checksum counters in mra's
#   namespace (Udp InCsumErrors, Udp6InCsumErrors: a bad UDP checksum never reaches the device)
#   and the per-path debugfs counters (bad_acks; acks of mra's idle sending half); at least the
#   number sent for rcvd_dropped, native_drops, rcvd_no_qp and native_duplicates, which the
#   legitimate traffic may also raise;
# * accepted by design, and checked as such: an ACK whose CumSeq is not beyond what the path sent
#   is processed (nothing authenticates it): ack-sack-unsent's SACK bits for sequences mra0 never
#   sent acknowledge nothing, but its rate hints (0xffffffff, 0) are taken, each one a
#   native_rate_hint_changes; a forged DATA packet whose Dsn the receiver already has is
#   acknowledged as a duplicate and never placed (data-unknown-stream, write-bad-rkey,
#   write-past-end, atomic-unaligned with their default Dsn);
# * forged rate hints changed nothing lasting: mrb0 (live sender) still holds the receiver's
#   share, 9687500 kbit/s (its forged ACKs carried 0xffffffff but were all dropped before the hint
#   is read), and mra0, which took the forged hints, holds 9687500 again once genuine ACKs came
#   (after the pingpong);
# * forged WRITEs and atomics that reach placement (a Dsn and Msn the receiver accepts): on a
#   disposable connection (IPv6 GIDs; its QP is native_canary.py's, its peer runs no QP), a WRITE
#   with a bad RKey, a WRITE past the MR's end and a FETCH_ADD at an odd address leave the MR's
#   canary bytes untouched, and a forged WRITE with the valid key (the positive control) is
#   placed: the canary check sees writes, and a packet with the right ids is accepted by design;
# * a connection whose QPs are all gone still acknowledges DATA (forged duplicates after the
#   pingpong), its ACKs carried by another QP of the device;
# * no kernel warning.
#
# Not covered: forged DATA with a new Dsn on a live connection (it would take that Dsn from the
# real sender, whose packet would then count as a duplicate and never be placed; a refusal's NAK
# would name a message the peer never sent, which the peer drops unacknowledged until the
# receiver's connection fails after MAX_RETX); DATA of a wrong connection id from a live peer
# (after 1 s without DATA the receiver takes it for a restarted peer and resets its receive half,
# section 7); receive-consuming opcodes (SEND) to live streams; tiny forged rate hints (at 1 kbit/s
# a sender's next packet schedules the following one ~9 s later, and a genuine hint does not undo it).
. "$(dirname "$0")/../lib.sh"
[ -n "${MR_FULL:-}" ] || skip "make check-full only (2.5 min here, 6.5 min on the slowest CI machine; make check keeps 36-rx's malformed RoCEv2 packets and 60-native-hostile)"
. "$MR_SELFTESTS/single/link-common.bash"
INJ="$MR_SELFTESTS/native_inject.py"
DUR=${MR_INJECT_SECONDS:-5}   # perftest's report interval: the transfers run until stopped
/usr/bin/python3 "$INJ" --self-check || fail "native_inject.py self-check"
mr_fresh
mr_two_devices metaroce-native
echo "GID indices: mra0 $ga, mrb0 $gb"
DBG=/sys/kernel/debug
[ -d $DBG/metaroce_mra0 ] || mount -t debugfs none $DBG 2>/dev/null
[ -r $DBG/metaroce_mra0/connections ] || skip "no $DBG/metaroce_mra0/connections (debugfs)"

stat() { ip netns exec $1 rdma statistic show link $2/1 | tr ' ' '\n' | grep -A1 -x "$3" | tail -n 1; }
# conn DEV PEER: the debugfs lines of DEV's connection to address PEER (as the view prints it).
conn() { awk -v p="$2" '$1 == "connection" { s = ($5 == p) } s' $DBG/metaroce_$1/connections; }
# field DEV PEER NAME: NAME's value summed over the connection's lines (a path counter sums its paths).
field() { conn $1 $2 | grep -o "[ {]$3: [0-9]*" | awk '{ s += $2 } END { print s + 0 }'; }
hint() { conn $1 $2 | sed -n 's/.* rate hint \([0-9]*\) kbit\/s.*/\1/p'; }
counters() { for d in "mra mra0" "mrb mrb0"; do ip netns exec ${d% *} rdma statistic show link ${d#* }/1; done; }
udp4_csum() { ip netns exec mra awk '/^Udp:/ { if (!h) { for (i = 1; i <= NF; i++) c[$i] = i; h = 1 } else print $c["InCsumErrors"] }' /proc/net/snmp; }
udp6_csum() { ip netns exec mra awk '$1 == "Udp6InCsumErrors" { print $2 }' /proc/net/snmp6; }

# Both connections exist from here on (a device keeps its connections while it lives).
mr_perf "warm-up write_bw 64 KiB x 5" ib_write_bw -s 65536 -n 5 -F
A=$(conn mra0 $MR_ADDR_B | awk 'NR == 1 { print $2 }')   # mra0's id: ACKs to mra0 carry it
B=$(conn mrb0 $MR_ADDR_A | awk 'NR == 1 { print $2 }')   # mrb0's id: its DATA carries it
[ -n "$A" ] && [ -n "$B" ] || { cat $DBG/metaroce_mra0/connections $DBG/metaroce_mrb0/connections; fail "no connection in debugfs"; }
echo "connection ids: mra0 $A, mrb0 $B"
# All traffic of this test before the pingpong flows mrb -> mra: mra0's sending half never sent a
# DATA packet, so every path's next sequence is 0 and its rate hint is still 0.
[ "$(field mra0 $MR_ADDR_B sent)" = 0 ] || { conn mra0 $MR_ADDR_B; fail "mra0 sent DATA (the exact ACK checks assume it never did)"; }
[ "$(hint mra0 $MR_ADDR_B)" = 0 ] || fail "mra0 holds a rate hint before any ACK"

# The legitimate transfers: servers in mra, clients in mrb, for $DUR s each.
start_bw() {
  local name=$1 port=$2; shift 2
  ip netns exec mra timeout 600 "$@" -d mra0 -x $ga -p $port -s 65536 -D $DUR --run_infinitely -F > /tmp/inj-$name-s.log 2>&1 &
  eval srv_$name=$!
  mr_wait 60 sh -c "ip netns exec mra ss -Hltn 'sport = :$port' | grep -q ." || { cat /tmp/inj-$name-s.log; fail "$name: server not listening"; }
  ip netns exec mrb timeout 600 "$@" -d mrb0 -x $gb -p $port -s 65536 -D $DUR --run_infinitely -F $MR_ADDR_A > /tmp/inj-$name-c.log 2>&1 &
  eval cli_$name=$!
}
start_bw write 18951 ib_write_bw
start_bw send 18952 ib_send_bw
streams() { conn mra0 $MR_ADDR_B | sed -n 's/^ *streams (QPN)://p'; }
two_streams() { [ "$(streams | wc -w)" -ge 2 ]; }
mr_wait 60 two_streams || { cat /tmp/inj-*.log; conn mra0 $MR_ADDR_B; fail "the transfers' QPs never bound to streams"; }
Q=$(streams | awk '{ print $1 }')
D=$(field mrb0 $MR_ADDR_A data_sent)
echo "live stream (mra0 QPN) $Q; mrb0 had sent $D DATA packets"

names="rcvd_malformed rcvd_no_qp rcvd_dropped native_drops native_duplicates native_rate_hint_changes"
for n in $names; do eval "a0_$n=$(stat mra mra0 $n)"; done
b0_dropped=$(stat mrb mrb0 rcvd_dropped)
c4=$(udp4_csum) c6=$(udp6_csum)
acks0=$(field mra0 $MR_ADDR_B acks) bad0=$(field mra0 $MR_ADDR_B bad_acks) bbad0=$(field mrb0 $MR_ADDR_A bad_acks)

# Counts per kind (expected counters below are sums of them).
S4="$MR_ADDR_B $MR_ADDR_A" S6="$MR_ADDR6_B $MR_ADDR6_A"
live="conn=$B,stream=$Q"
t0=$(date +%s)
ip netns exec mrb /usr/bin/python3 "$INJ" \
  $S4 10 "data-msn-far:$live,dsn=$((D + 300))" \
  $S4 18 short  $S4 12 version-type  $S4 20 opcode  $S4 18 reserved  $S4 22 lengths  $S4 15 placement \
  $S4 10 zero-checksum  $S4 10 bad-checksum  $S6 6 bad-checksum  $S6 10 no-conn \
  $S4 16 ack-cum-ahead:conn=$A  $S4 10 ack-wrong-conn:conn=$A  $S4 10 ack-bad-path:conn=$A \
  $S4 20 ack-sack-unsent:conn=$A \
  $S4 10 data-path-window:$live  $S4 10 data-dsn-far:$live  $S4 10 data-bad-path:$live \
  $S4 10 data-unknown-stream:conn=$B  $S4 10 write-bad-rkey:$live  $S4 10 write-past-end:$live \
  $S4 10 atomic-unaligned:$live || fail "native_inject.py towards mra0"
# Forged ACKs to the live sender, from mra's address.
ip netns exec mra /usr/bin/python3 "$INJ" \
  $MR_ADDR_A $MR_ADDR_B 16 ack-cum-ahead:conn=$B  $MR_ADDR_A $MR_ADDR_B 10 ack-wrong-conn:conn=$B \
  $MR_ADDR_A $MR_ADDR_B 10 ack-bad-path:conn=$B || fail "native_inject.py towards mrb0"
echo "injected in $(( $(date +%s) - t0 )) s"
# The transfers run until stopped (--run_infinitely): one that ended by itself failed. data-msn-far
# also relies on its stream being open when it arrives (else a new Dsn is taken for a stream that
# is gone).
kill -0 $cli_write 2>/dev/null && kill -0 $cli_send 2>/dev/null ||
  { tail -n 5 /tmp/inj-*.log; counters; conn mra0 $MR_ADDR_B; conn mrb0 $MR_ADDR_A
    fail "a transfer ended under injection"; }
# Another report interval with the injection over, then stop them.
sleep $((DUR + 1))
for n in write send; do
  eval "c=\$cli_$n s=\$srv_$n"
  kill -0 $c 2>/dev/null || { cat /tmp/inj-$n-c.log /tmp/inj-$n-s.log; counters; fail "ib_${n}_bw client ended under injection"; }
  kill -INT $c $s 2>/dev/null; wait $c $s 2>/dev/null
  rows=$(grep -Ec '^ *65536 +[0-9]+ +' /tmp/inj-$n-c.log)
  [ "$rows" -ge 2 ] || { cat /tmp/inj-$n-c.log; fail "ib_${n}_bw: $rows report rows, expected at least 2"; }
  echo "ib_${n}_bw 64 KiB under injection, $rows reports every $DUR s; last: $(grep -E '^ *65536 +[0-9]+ +' /tmp/inj-$n-c.log | tail -n 1 | tr -s ' ')"
done
counters
for n in $names; do eval "d_$n=\$(( \$(stat mra mra0 $n) - a0_$n ))"; done
echo "mra0 deltas: malformed $d_rcvd_malformed, no_qp $d_rcvd_no_qp, dropped $d_rcvd_dropped, native_drops $d_native_drops," \
  "duplicates $d_native_duplicates, rate hint changes $d_native_rate_hint_changes"

# Exact: malformed kinds, UDP checksums, path ACK counters.
want=$((18 + 12 + 20 + 18 + 22 + 15 + 10))
[ $d_rcvd_malformed = $want ] || fail "rcvd_malformed +$d_rcvd_malformed, expected +$want (short, version-type, opcode, reserved, lengths, placement, zero-checksum)"
[ $(( $(udp4_csum) - c4 )) = 10 ] || fail "Udp InCsumErrors +$(( $(udp4_csum) - c4 )), expected +10"
[ $(( $(udp6_csum) - c6 )) = 6 ] || fail "Udp6InCsumErrors +$(( $(udp6_csum) - c6 )), expected +6"
d=$(( $(field mra0 $MR_ADDR_B bad_acks) - bad0 )); [ $d = 16 ] || fail "mra0 path bad_acks +$d, expected +16 (ack-cum-ahead)"
d=$(( $(field mrb0 $MR_ADDR_A bad_acks) - bbad0 )); [ $d = 16 ] || fail "mrb0 path bad_acks +$d, expected +16 (ack-cum-ahead)"
# Accepted by design: ack-sack-unsent's 20 ACKs (the only ACKs mra0 gets) are processed, and each
# of their alternating hints is a change.
d=$(( $(field mra0 $MR_ADDR_B acks) - acks0 )); [ $d = 20 ] || fail "mra0 path acks +$d, expected +20 (ack-sack-unsent)"
[ $d_native_rate_hint_changes = 20 ] || fail "mra0 native_rate_hint_changes +$d_native_rate_hint_changes, expected +20"
[ "$(field mra0 $MR_ADDR_B data_sent)" = 0 ] || fail "a forged ACK made mra0 send"
# At least: the legitimate traffic may add its own.
dropped=$((16 + 10 + 10 + 10 + 10 + 10))   # ack-cum-ahead, -wrong-conn, -bad-path, data-path-window, -dsn-far, -bad-path
dups=40                                    # data-unknown-stream, write-bad-rkey, write-past-end, atomic-unaligned
[ $d_rcvd_dropped -ge $dropped ] || fail "rcvd_dropped +$d_rcvd_dropped, expected at least +$dropped"
[ $d_native_drops -ge $dropped ] || fail "native_drops +$d_native_drops, expected at least +$dropped"
[ $d_rcvd_no_qp -ge 10 ] || fail "rcvd_no_qp +$d_rcvd_no_qp, expected at least +10 (no-conn)"
[ $d_native_duplicates -ge $dups ] || fail "native_duplicates +$d_native_duplicates, expected at least +$dups"
# data-msn-far: each is a drop (MsnWindow or DsnWindow) or a duplicate (its Dsn was used meanwhile).
[ $((d_rcvd_dropped - dropped + d_native_duplicates - dups)) -ge 10 ] || fail "data-msn-far: fewer than 10 counted"
d=$(( $(stat mrb mrb0 rcvd_dropped) - b0_dropped )); [ $d -ge 36 ] || fail "mrb0 rcvd_dropped +$d, expected at least +36"
# Forged hints: none reached mrb0; mra0 took them (the last was 0).
h=$(hint mrb0 $MR_ADDR_A); [ "$h" = 9687500 ] || fail "mrb0's rate hint is $h, not the receiver's share 9687500"
h=$(hint mra0 $MR_ADDR_B); [ "$h" = 0 ] || fail "mra0's rate hint is $h, not the last forged one (0)"
conn mra0 $MR_ADDR_B | grep -q "^connection .* Failed" && fail "mra0's connection failed"

# The connection carries validated data both ways; genuine ACKs replace the forged hint.
mr_pingpong ibv_rc_pingpong "64 KiB after injection" mra mra0 $ga mrb mrb0 $gb -s 65536 -n 20
h=$(hint mra0 $MR_ADDR_B); [ "$h" = 9687500 ] || fail "mra0's rate hint is $h after genuine ACKs, not 9687500"
conn mra0 $MR_ADDR_B | head -n 3

# A connection no QP is bound to any more still acknowledges DATA (section 4): a peer whose last
# message's ACK was lost, or came after an RTO, retransmits into a connection whose receiving QP
# has gone (a ping-pong client exits after its last receive). The pingpong's QPs are gone; forged
# DATA from mrb (a duplicate Dsn) must make mra0 send ACKs, carried by another QP of the device.
[ -z "$(streams | tr -d ' ')" ] || fail "mra0 still has streams bound after the pingpong: $(streams)"
sent0=$(field mra0 $MR_ADDR_B acks_sent)
ip netns exec mrb /usr/bin/python3 "$INJ" $S4 5 data-unknown-stream:conn=$B || fail "native_inject.py: DATA to an unbound connection"
acked() { [ "$(field mra0 $MR_ADDR_B acks_sent)" -gt "$sent0" ]; }
mr_wait 20 acked || { conn mra0 $MR_ADDR_B; fail "mra0 sent no ACK for DATA to a connection without QPs"; }
echo "DATA to a connection without QPs: mra0 acks_sent $sent0 -> $(field mra0 $MR_ADDR_B acks_sent)"

# Forged WRITEs and an atomic that reach placement, on a disposable connection (IPv6 GIDs; only the
# injector talks to it: its first DATA packet gives it its peer's connection id).
v6a=2001:0db8:0000:0000:0000:0000:0000:0001 v6b=2001:0db8:0000:0000:0000:0000:0000:0002
g6=$(mr_ns_gid mra mra0 $v6a)
[ -n "$g6" ] || fail "no RoCE v2 GID for $MR_ADDR6_A on mra0"
rm -f /tmp/canary.out /tmp/canary.go
ip netns exec mra timeout 300 /usr/bin/python3 "$MR_SELFTESTS/native_canary.py" mra0 $g6 $v6b /tmp/canary.out /tmp/canary.go > /tmp/canary.log 2>&1 &
can=$!
mr_wait 60 test -s /tmp/canary.out || { cat /tmp/canary.log; fail "native_canary.py did not start"; }
read -r cq rkey addr len < /tmp/canary.out
echo "canary QP $cq, MR $len bytes at $addr, rkey $rkey"
p0=$(stat mra mra0 rcvd_pkts) r0=$(stat mra mra0 rcvd_dropped)
c="conn=0x0c0ffee0,stream=$cq,rkey=$rkey"
ip netns exec mrb /usr/bin/python3 "$INJ" \
  $S6 1 "write-bad-rkey:$c,dsn=0,msn=0,va=$((addr + 4096))" \
  $S6 1 "write-past-end:$c,dsn=1,msn=1,va=$((addr + len - 32))" \
  $S6 1 "atomic-unaligned:$c,dsn=2,msn=2,va=$((addr + 4096))" \
  $S6 1 "write-valid:$c,dsn=3,msn=3,va=$((addr + 8192))" || fail "native_inject.py towards the canary"
got4() { [ $(( $(stat mra mra0 rcvd_pkts) - p0 )) -ge 4 ]; }
mr_wait 30 got4 || fail "the canary's device did not receive the 4 packets"
touch /tmp/canary.go
wait $can; rc=$?
cat /tmp/canary.log
[ $rc = 0 ] || fail "native_canary.py: forged WRITEs/atomics changed the MR, or the positive control was not placed"
# They all passed the connection's checks: the two WRITEs were refused by placement, which counts
# each refused packet in rcvd_dropped (and NAKs it); the unaligned atomic is refused by the core's
# request check (a NAK, no drop); the valid WRITE is placed.
d=$(( $(stat mra mra0 rcvd_dropped) - r0 ))
[ $d = 2 ] || fail "rcvd_dropped +$d for the canary packets, expected +2 (the two refused WRITEs)"
conn mra0 2001:db8:0:0:0:0:0:2 | head -n 3

counters
mr_dmesg_clean
