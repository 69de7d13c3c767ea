#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The multipath test bed of issue 8, in one guest: two hosts joined through four parallel routed paths.
#
#   tb-h1 (192.0.2.1) -- tb-ra ==4 links, ECMP== tb-rb -- tb-h2 (192.0.2.42)
#
# Each router namespace hashes flows over its four links by L4 header (fib_multipath_hash_policy=1), so
# the UDP source port picks the path: a RoCEv2 QP is one flow (one link), a native connection sprays
# over 8 paths and as many source ports. Every inter-router link is rate-limited with tbf in both
# directions, so the links, not the CPU, are the bottleneck (under TCG one core moves a few MB/s).
# For each wire protocol (`metaroce` = RoCEv2, `metaroce-native`) ib_write_bw runs h1 -> h2:
#   lossless; 1 % netem loss on every inter-router link; one link taken down (its far end) mid-transfer
#   while the router keeps hashing flows onto it (a black hole only the transport can route around).
# Figures are ratios within this run (README, section "MetaRoCE native transport in the kernel"). The
# test fails if a native transfer fails or loses data, or native lossless goodput is not above RoCEv2's
# (one flow cannot use more than one link); RoCEv2 outcomes are reported, not required.
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
[ -n "${MR_FULL:-}" ] || [ -n "${MR_TESTBED:-}" ] || skip "make check-full only (six perftest runs over shaped links take ~8 minutes under TCG)"
mr_fresh
# Per inter-router link and direction: low enough that four links carry less than one TCG guest can
# move through these namespaces (0.14-0.19 MB/s seen with 6 Mbit/s links, CPU-bound).
RATE=${MR_TB_RATE:-300kbit}
DUR=${MR_TB_SECONDS:-10}      # seconds of 64 KiB writes per run (perftest -D)
NS="tb-h1 tb-h2 tb-ra tb-rb"

tb_cleanup() {
  for n in $NS; do ip netns del $n 2>/dev/null; done
  mr_wait 30 mr_no_dev tb1; mr_wait 30 mr_no_dev tb2
  mr_netns_restore
}
mr_netns_exclusive
trap tb_cleanup EXIT
for n in $NS; do ip netns add $n || fail "netns $n"; ip -n $n link set lo up; done
x() { local n=$1; shift; ip netns exec "$n" "$@"; }

ip link add h1 netns tb-h1 type veth peer name h1 netns tb-ra || fail "veth h1"
ip link add h2 netns tb-h2 type veth peer name h2 netns tb-rb || fail "veth h2"
x tb-h1 ip addr add 192.0.2.1/29 dev h1; x tb-ra ip addr add 192.0.2.2/29 dev h1
x tb-h2 ip addr add 192.0.2.42/29 dev h2; x tb-rb ip addr add 192.0.2.41/29 dev h2
nh_ab= nh_ba=
for i in 1 2 3 4; do
  ip link add l$i netns tb-ra type veth peer name l$i netns tb-rb || fail "veth l$i"
  x tb-ra ip addr add 192.0.2.$((8 * i + 1))/29 dev l$i
  x tb-rb ip addr add 192.0.2.$((8 * i + 2))/29 dev l$i
  nh_ab="$nh_ab nexthop via 192.0.2.$((8 * i + 2)) dev l$i"
  nh_ba="$nh_ba nexthop via 192.0.2.$((8 * i + 1)) dev l$i"
done
for n in $NS; do for d in $(x $n ls /sys/class/net); do x $n ip link set $d up; done; done
for r in tb-ra tb-rb; do
  x $r sysctl -qw net.ipv4.ip_forward=1 net.ipv4.fib_multipath_hash_policy=1 || fail "sysctl in $r"
done
x tb-ra ip route add 192.0.2.40/29 $nh_ab || fail "ECMP route a->b"
x tb-rb ip route add 192.0.2.0/29 $nh_ba || fail "ECMP route b->a"
x tb-h1 ip route add default via 192.0.2.2 || fail "h1 default route"
x tb-h2 ip route add default via 192.0.2.41 || fail "h2 default route"
x tb-h1 ip route get 192.0.2.42 >/dev/null || fail "no route h1 -> h2"
# Rate limits: every inter-router link, both directions (ACKs take the reverse links).
shape() { # NS DEV QDISC...: tbf at the root, optional netem below it
  x $1 tc qdisc del dev $2 root 2>/dev/null
  x $1 tc qdisc add dev $2 root handle 1: tbf rate $RATE burst 4kb latency 400ms || fail "tbf on $1/$2"
  if [ $# -gt 2 ]; then x $1 tc qdisc add dev $2 parent 1:1 handle 10: "${@:3}" || fail "netem on $1/$2"; fi
}
shape_all() { for i in 1 2 3 4; do shape tb-ra l$i "$@"; shape tb-rb l$i "$@"; done; }
shape_all

# Devices of link type $1 on h1 and h2, and their GID indices.
devices() {
  x tb-h1 rdma link delete tb1 2>/dev/null; x tb-h2 rdma link delete tb2 2>/dev/null
  mr_wait 10 mr_no_dev tb1; mr_wait 10 mr_no_dev tb2
  x tb-h1 rdma link add tb1 type $1 netdev h1 || fail "add tb1 ($1)"
  x tb-h2 rdma link add tb2 type $1 netdev h2 || fail "add tb2 ($1)"
  g1=$(mr_ns_gid tb-h1 tb1 192.0.2.1); [ -n "$g1" ] || fail "no GID on tb1"
  g2=$(mr_ns_gid tb-h2 tb2 192.0.2.42); [ -n "$g2" ] || fail "no GID on tb2"
}

# run NAME [EVENT]: ib_write_bw h1 -> h2, 64 KiB writes for DUR seconds; EVENT (a command) runs once
# the transfer has moved 1 MB (perftest's start-up takes seconds under TCG). Sets BW (MB/s, average)
# and OK (1 if the run completed); prints the row.
port=19100
run() {
  local name=$1 ev=${2:-} srv cli
  port=$((port + 1)); BW=0 OK=0
  x tb-h2 timeout 120 ib_write_bw -d tb2 -x $g2 -p $port -s 65536 -D $DUR -F > /tmp/tb-server.log 2>&1 &
  srv=$!
  mr_wait 60 sh -c "ip netns exec tb-h2 ss -Hltn 'sport = :$port' | grep -q ." || { cat /tmp/tb-server.log; fail "$name: server not listening"; }
  local b0; b0=$(sent tb-h1 tb1)
  x tb-h1 timeout 90 ib_write_bw -d tb1 -x $g1 -p $port -s 65536 -D $DUR -F 192.0.2.42 > /tmp/tb-client.log 2>&1 &
  cli=$!
  if [ -n "$ev" ]; then
    # At most 120 s by the clock, and no longer than the client lives (a RoCEv2 transfer here
    # fails early; mr_wait counts attempts, and one attempt of this costs ~0.5 s under TCG).
    local deadline=$((SECONDS + 120))
    until [ "$(sent tb-h1 tb1)" -gt $((b0 + 1000000)) ] 2>/dev/null; do
      if [ $SECONDS -ge $deadline ] || ! kill -0 $cli 2>/dev/null; then echo "  (the transfer never moved 1 MB)"; break; fi
      sleep 0.5
    done
    eval "$ev"; echo "  event: $ev"
  fi
  wait $cli && wait $srv && OK=1
  wait $srv 2>/dev/null
  BW=$(awk '$1 == 65536 && NF >= 4 { print $4 }' /tmp/tb-client.log | tail -n 1)
  [ -n "$BW" ] || { BW=0 OK=0; }
  echo "$name: $([ $OK = 1 ] && echo completed || echo FAILED), $BW MB/s"
  [ $OK = 1 ] || tail -n 5 /tmp/tb-client.log | sed 's/^/  client: /'
}
sent() { x $1 rdma statistic show link $2/1 | tr ' ' '\n' | grep -A1 -x sent_bytes | tail -n 1; }
stats() { x $1 rdma statistic show link $2/1 | tr ' ' '\n' | paste - - | grep -E "^($3)\s" | tr '\n' ' '; echo; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

declare -A R
for type in metaroce metaroce-native; do
  devices $type
  echo "== $type"
  shape_all
  run "$type lossless"; R[$type,0]=$BW; R[$type,0ok]=$OK
  shape_all netem loss 1%
  run "$type 1% loss"; R[$type,1]=$BW; R[$type,1ok]=$OK
  shape_all
  run "$type link 2 down at 3 s" "ip -n tb-rb link set l2 down"; R[$type,down]=$BW; R[$type,downok]=$OK
  x tb-rb ip link set l2 up
  x tb-ra ip route replace 192.0.2.40/29 $nh_ab; x tb-rb ip route replace 192.0.2.0/29 $nh_ba
  for d in l1 l2 l3 l4; do echo "  $d a->b: $(x tb-ra tc -s qdisc show dev $d | grep -m1 -o 'Sent [0-9]* bytes [0-9]* pkt (dropped [0-9]*')"; done
  if [ $type = metaroce-native ]; then
    echo "  h1: $(stats tb-h1 tb1 'native_data_sent|retransmits|native_sack_losses|native_timeouts|native_silences|native_repaths|native_duplicates')"
    mount -t debugfs none /sys/kernel/debug 2>/dev/null
    cat /sys/kernel/debug/metaroce_tb1/connections | sed 's/^/  /'
  fi
done

echo "== summary (ratios within this run; link rate $RATE per direction x 4 links)"
for type in metaroce metaroce-native; do
  echo "$type: lossless ${R[$type,0]} MB/s; 1% loss $(ratio "${R[$type,1]}" "${R[$type,0]}") of lossless$([ "${R[$type,1ok]}" = 1 ] || echo ' (FAILED)'); link down $(ratio "${R[$type,down]}" "${R[$type,0]}") of lossless$([ "${R[$type,downok]}" = 1 ] || echo ' (FAILED)')"
done
echo "native / RoCEv2 lossless: $(ratio "${R[metaroce-native,0]}" "${R[metaroce,0]}")"

[ "${R[metaroce-native,0ok]}" = 1 ] && [ "${R[metaroce-native,1ok]}" = 1 ] && [ "${R[metaroce-native,downok]}" = 1 ] ||
  fail "a native transfer failed"
awk -v n="${R[metaroce-native,0]}" -v r="${R[metaroce,0]}" 'BEGIN { exit !(n > r) }' ||
  fail "native lossless goodput ${R[metaroce-native,0]} MB/s is not above RoCEv2's ${R[metaroce,0]} MB/s"
mr_dmesg_clean
