#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Incast in one guest (issue 8's test bed): four senders write to one receiver at once through a
# router whose link to the receiver is the bottleneck, shaped by tbf with an ECN-marking fq_codel
# (it marks CE on ECN-capable packets instead of dropping them).
#
#   tb-s1..tb-s4 (192.0.2.1/.9/.17/.25) -- tb-rc -- [bottleneck] -- tb-r (192.0.2.42)
#
# For each wire protocol each sender runs ib_write_bw (64 KiB, -D seconds) to its own server port on
# the receiver's one device. Printed: every sender's goodput, Jain's fairness index, the bottleneck
# queue's marks and drops, the senders' ECN reactions. Fails if a native transfer fails, if native
# fairness is below 0.8, or if the native senders never reacted to a CE mark although the queue
# marked; RoCEv2 figures (no congestion control in this provider's RoCEv2 mode) are reported.
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
[ -n "${MR_FULL:-}" ] || [ -n "${MR_TESTBED:-}" ] || skip "make check-full only (four perftest pairs under TCG take minutes)"
mr_fresh
RATE=${MR_INCAST_RATE:-800kbit} # the bottleneck (below what one TCG guest moves: see 52-testbed)
DUR=${MR_INCAST_SECONDS:-20}
TYPES=${MR_INCAST_TYPES:-metaroce metaroce-native}
# The receiver's link is the incast bottleneck; its netdev (veth) reports 10 Gbit/s, so the rate
# its hints share is given as the module parameter (spec 6.4).
kbps=${RATE%kbit}
modprobe metaroce native_link_kbps=$kbps || fail "modprobe metaroce native_link_kbps=$kbps"
SENDERS="1 2 3 4"
NS="tb-r tb-rc $(for i in $SENDERS; do echo tb-s$i; done)"

ic_cleanup() {
  for n in $NS; do ip netns del $n 2>/dev/null; done
  for i in $SENDERS; do mr_wait 30 mr_no_dev ts$i; done; mr_wait 30 mr_no_dev tr
  mr_netns_restore
}
mr_netns_exclusive
trap ic_cleanup EXIT
for n in $NS; do ip netns add $n || fail "netns $n"; ip -n $n link set lo up; done
x() { local n=$1; shift; ip netns exec "$n" "$@"; }

for i in $SENDERS; do
  ip link add s$i netns tb-s$i type veth peer name s$i netns tb-rc || fail "veth s$i"
  x tb-s$i ip addr add 192.0.2.$((8 * i - 7))/29 dev s$i
  x tb-rc ip addr add 192.0.2.$((8 * i - 6))/29 dev s$i
  x tb-s$i ip link set s$i up; x tb-rc ip link set s$i up
  x tb-s$i ip route add default via 192.0.2.$((8 * i - 6))
done
ip link add r netns tb-r type veth peer name r netns tb-rc || fail "veth r"
x tb-r ip addr add 192.0.2.42/29 dev r; x tb-rc ip addr add 192.0.2.41/29 dev r
x tb-r ip link set r up; x tb-rc ip link set r up
x tb-r ip route add default via 192.0.2.41
x tb-rc sysctl -qw net.ipv4.ip_forward=1 || fail "forwarding"
# The bottleneck: rc -> r.
x tb-rc tc qdisc add dev r root handle 1: tbf rate $RATE burst 4kb latency 1s || fail "tbf"
# CoDel's 5 ms target is for real links: at 800 kbit/s one 1 KiB packet takes 10 ms and a TCG guest's
# RTT is tens of ms, so the target and interval are scaled up (else every packet is marked and the
# senders' windows sit at their floor: seen, 901 decreases and < 5 KB/s each).
x tb-rc tc qdisc add dev r parent 1:1 handle 10: fq_codel ecn target 100ms interval 1s || fail "fq_codel ecn"

devices() {
  for i in $SENDERS; do x tb-s$i rdma link delete ts$i 2>/dev/null; done; x tb-r rdma link delete tr 2>/dev/null
  for i in $SENDERS; do mr_wait 10 mr_no_dev ts$i; done; mr_wait 10 mr_no_dev tr
  x tb-r rdma link add tr type $1 netdev r || fail "add tr ($1)"
  gr=$(mr_ns_gid tb-r tr 192.0.2.42); [ -n "$gr" ] || fail "no GID on tr"
  for i in $SENDERS; do
    x tb-s$i rdma link add ts$i type $1 netdev s$i || fail "add ts$i ($1)"
    gs[$i]=$(mr_ns_gid tb-s$i ts$i 192.0.2.$((8 * i - 7))); [ -n "${gs[$i]}" ] || fail "no GID on ts$i"
  done
}
stat() { x $1 rdma statistic show link $2/1 | tr ' ' '\n' | grep -A1 -x "$3" | tail -n 1; }

port=19300
declare -A BW OK JAIN ECN
for type in $TYPES; do
  devices $type
  echo "== $type: $(echo $SENDERS | wc -w) senders -> 1, bottleneck $RATE (tbf + fq_codel ecn)"
  pids=
  for i in $SENDERS; do
    x tb-r timeout 300 ib_write_bw -d tr -x $gr -p $((port + i)) -s 65536 -D $DUR -F > /tmp/ic-srv$i.log 2>&1 &
  done
  for i in $SENDERS; do
    mr_wait 60 sh -c "ip netns exec tb-r ss -Hltn 'sport = :$((port + i))' | grep -q ." || fail "server $i not listening"
  done
  e0=0; for i in $SENDERS; do [ $type = metaroce-native ] && e0=$((e0 + $(stat tb-s$i ts$i native_ecn_decreases))); done
  q0=$(x tb-rc tc -s qdisc show dev r | grep -A3 fq_codel | grep -o 'ecn_mark [0-9]*' | awk '{print $2}')
  for i in $SENDERS; do
    x tb-s$i timeout 300 ib_write_bw -d ts$i -x ${gs[$i]} -p $((port + i)) -s 65536 -D $DUR -F 192.0.2.42 > /tmp/ic-cli$i.log 2>&1 &
    pids="$pids $!"
  done
  ok=1 i=0
  for p in $pids; do i=$((i + 1)); wait $p || { ok=0; echo "sender $i FAILED"; tail -n 3 /tmp/ic-cli$i.log; }; done
  wait
  sum=0 sq=0 list=
  for i in $SENDERS; do
    # MB/s from the iterations completed (perftest's own column has two decimals only).
    b=$(awk -v d=$DUR '$1 == 65536 && NF >= 4 { printf "%.4f\n", $2 * 65536 / 1e6 / d }' /tmp/ic-cli$i.log | tail -n 1); b=${b:-0}
    list="$list $b"; sum=$(awk -v a=$sum -v b=$b 'BEGIN { print a + b }'); sq=$(awk -v a=$sq -v b=$b 'BEGIN { print a + b * b }')
  done
  n=$(echo $SENDERS | wc -w)
  JAIN[$type]=$(awk -v s=$sum -v q=$sq -v n=$n 'BEGIN { if (q > 0) printf "%.3f", s * s / (n * q); else print 0 }')
  OK[$type]=$ok BW[$type]=$sum
  q1=$(x tb-rc tc -s qdisc show dev r | grep -A3 fq_codel | grep -o 'ecn_mark [0-9]*' | awk '{print $2}')
  e1=0; for i in $SENDERS; do [ $type = metaroce-native ] && e1=$((e1 + $(stat tb-s$i ts$i native_ecn_decreases))); done
  ECN[$type]="$((${q1:-0} - ${q0:-0})) CE marks at the bottleneck, $((e1 - e0)) sender window decreases"
  echo "$type: per sender (MB/s):$list; total $sum MB/s; Jain ${JAIN[$type]}; ${ECN[$type]}"
  x tb-rc tc -s qdisc show dev r | grep -A3 fq_codel | sed 's/^/  /'
  marks=$((${q1:-0} - ${q0:-0})) reacted=$((e1 - e0))
  if [ $type = metaroce-native ]; then
    dmesg | grep -q "tr: added on netdev r (MetaRoCE native; rate hints share $kbps kbit/s)" ||
      fail "the receiver does not share $kbps kbit/s"
    echo "receiver: $(stat tb-r tr native_duplicates) duplicate DATA, $(stat tb-r tr rcvd_pkts) packets"
    for i in $SENDERS; do
      h=$(sed -n 's/.* rate hint \([0-9]*\) kbit\/s.*/\1/p' /sys/kernel/debug/metaroce_ts$i/connections | head -n 1)
      echo "sender $i: rate hint ${h:-?} kbit/s, $(stat tb-s$i ts$i native_rate_hint_changes) changes;" \
        "$(stat tb-s$i ts$i native_data_sent) DATA, $(stat tb-s$i ts$i retransmits) retransmitted" \
        "($(stat tb-s$i ts$i native_sack_losses) SACK losses, $(stat tb-s$i ts$i native_timeouts) RTOs)," \
        "RTT avg $(stat tb-s$i ts$i native_rtt_avg_us) us"
      HINTS="$HINTS ${h:-0}"
    done
  fi
  port=$((port + 10))
done

[ "${OK[metaroce-native]}" = 1 ] || fail "a native sender failed"
# Every sender heard the receiver's share (the last one printed may be larger than a quarter:
# senders that finished first no longer count).
for h in $HINTS; do [ "$h" -gt 0 ] || fail "a native sender never received a rate hint"; done
awk -v j="${JAIN[metaroce-native]}" 'BEGIN { exit !(j >= 0.8) }' || fail "native Jain index ${JAIN[metaroce-native]} < 0.8"
[ "$marks" -eq 0 ] || [ "$reacted" -gt 0 ] || fail "the bottleneck marked $marks packets CE and no native sender reacted"
mr_dmesg_clean
