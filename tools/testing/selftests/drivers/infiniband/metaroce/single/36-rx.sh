#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The receive path through the UDP tunnel abstraction, across two namespaces (exclusive netns
# mode): datagrams sent from mrb to mra's UDP port 4791 reach mra0 only, are parsed and checked
# (ICRC), and every one is counted in `rdma statistic` as received or as a drop with its reason.
# IPv4 (raw socket, own IP header) and IPv6 (UDP socket) both.
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
mr_two_namespaces
ip netns exec mra rdma link add mra0 type metaroce netdev va || fail "add mra0"
ip netns exec mrb rdma link add mrb0 type metaroce netdev vb || fail "add mrb0"
dmesg | grep -q "listening on UDP port 4791" || fail "no socket was opened"

# stats NS DEV: "name value" lines of the port's counters, from one `rdma statistic` call.
stats() { ip netns exec "$1" rdma statistic show link "$2/1" | tr ' ' '\n' | awk 'p { print n, $0; p = 0; next } /^[a-z_]+$/ { n = $0; p = 1 }'; }
# expect NS DEV name=value...: waits up to 10 s for all of them at once.
expect() {
  local ns=$1 dev=$2 want got i kv ok; shift 2
  for ((i = 0; i < 20; i++)); do
    got=$(stats "$ns" "$dev"); ok=1
    for kv in "$@"; do grep -qx "${kv%=*} ${kv#*=}" <<<"$got" || ok=; done
    [ -n "$ok" ] && return 0
    sleep 0.5
  done
  echo "$got" | sed 's/^/  /'; fail "$dev counters: expected $*"
}
zero="rcvd_pkts=0 rcvd_malformed=0 rcvd_icrc_err=0 rcvd_no_qp=0"
expect mra mra0 $zero

ip netns exec mrb python3 "$MR_SELFTESTS/roce_inject.py" \
  $MR_ADDR_B $MR_ADDR_A 20 valid   $MR_ADDR6_B $MR_ADDR6_A 10 valid \
  $MR_ADDR_B $MR_ADDR_A 7 bad-icrc $MR_ADDR6_B $MR_ADDR6_A 5 bad-icrc \
  $MR_ADDR_B $MR_ADDR_A 3 short    $MR_ADDR6_B $MR_ADDR6_A 4 bad-opcode || fail "roce_inject.py"

ip netns exec mra rdma statistic show link mra0/1
# 30 valid packets of 12 + 4 + 4 bytes (BTH, payload, ICRC); 12 bad ICRCs; 3 short + 4 bad opcodes.
expect mra mra0 rcvd_pkts=30 rcvd_no_qp=30 rcvd_bytes=600 rcvd_icrc_err=12 rcvd_malformed=7
# Nothing reached the sender's own device.
expect mrb mrb0 $zero
# The datagrams went to the tunnel socket, not to a socket queue (no UDP receive errors).
udp4_err=$(ip netns exec mra awk '/^Udp:/ { if (!h) { for (i = 1; i <= NF; i++) c[$i] = i; h = 1 } else print $c["InErrors"] }' /proc/net/snmp)
udp6_err=$(ip netns exec mra awk '$1 == "Udp6InErrors" { print $2 }' /proc/net/snmp6)
[ "$udp4_err" = 0 ] && [ "$udp6_err" = 0 ] || fail "UDP receive errors in mra: IPv4 $udp4_err, IPv6 $udp6_err"

# Deleting the namespace releases its sockets (pernet exit).
ip netns exec mra rdma link delete mra0 || fail "delete mra0"
ip netns del mra
mr_wait 60 sh -c "dmesg | grep -q 'released UDP port 4791'" || fail "mra's sockets were not released with it"
mr_dmesg_clean
dmesg | grep metaroce
