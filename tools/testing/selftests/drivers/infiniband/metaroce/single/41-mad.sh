#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# GSI (QP1) traffic through the kernel UD data path, across two namespaces (exclusive netns mode):
# vendor-class MADs sent from user space through ib_umad leave mrb0's QP1 (posted by ib_mad with
# IRQs off, sent by the transmit worker as RoCEv2 UD packets), reach mra0's QP1 (receive path,
# GRH placement, work-completion fields ib_mad needs to build the answer) and come back, over
# IPv4 and IPv6 GIDs. Payloads must cross intact; both devices count what they sent and received.
. "$(dirname "$0")/../lib.sh"
[ -n "${MR_FULL:-}" ] || skip "make check-full only (make check's hour: the interop suite's rdma_cm tools exchange their CM MADs through the same GSI QP with rdma_rxe)"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
mr_two_namespaces
ip netns exec mra rdma link add mra0 type metaroce netdev va || fail "add mra0"
ip netns exec mrb rdma link add mrb0 type metaroce netdev vb || fail "add mrb0"
# Loopback traffic (a device to its own GID) goes through lo, which a new namespace has down.
ip -n mra link set lo up || fail "lo up in mra"
mr_wait 10 ip netns exec mrb sh -c 'ls /sys/class/infiniband/mrb0/ports/1/gids >/dev/null' || fail "mrb0 not visible in mrb"

stat_of() { ip netns exec "$1" rdma statistic show link "$2/1" | tr ' ' '\n' | awk -v k="$3" 'p { print; exit } $0 == k { p = 1 }'; }

# On failure: both devices' counters and QPs.
mad_fail() {
  local msg=$1
  cat /tmp/umad-serve.log
  for d in "mra mra0" "mrb mrb0"; do
    set -- $d
    ip netns exec "$1" rdma statistic show link "$2/1"
    ip netns exec "$1" rdma res show qp link "$2/1"
  done
  fail "$msg"
}
n=5
ip netns exec mra /usr/bin/python3 "$MR_SELFTESTS/umad_ping.py" serve mra0 $((3 * n)) > /tmp/umad-serve.log 2>&1 &
server=$!
# The wire between the namespaces, captured on mrb's side.
ip netns exec mrb dumpcap -q -i vb -P -w /tmp/mad.pcap -f "udp port 4791" 2>/tmp/dumpcap.log &
cap=$!
mr_wait 30 grep -q "Capturing on" /tmp/dumpcap.log || fail "dumpcap did not start"
ip netns exec mrb /usr/bin/python3 "$MR_SELFTESTS/umad_ping.py" ping mrb0 "::ffff:$MR_ADDR_A" "::ffff:$MR_ADDR_B" $n ||
  mad_fail "IPv4 MAD round trips"
ip netns exec mrb /usr/bin/python3 "$MR_SELFTESTS/umad_ping.py" ping mrb0 "$MR_ADDR6_A" "$MR_ADDR6_B" $n ||
  mad_fail "IPv6 MAD round trips"
sleep 1; kill -INT $cap 2>/dev/null; wait $cap; cat /tmp/dumpcap.log
# Loopback: mra0 to its own GIDs. The kernel routes these through lo; the receive path hands
# them to the device whose netdev owns the destination address.
ip netns exec mra /usr/bin/python3 "$MR_SELFTESTS/umad_ping.py" ping mra0 "$MR_ADDR6_A" "$MR_ADDR6_A" $n ||
  mad_fail "IPv6 loopback MAD round trips"
wait $server || mad_fail "MAD responder"
cat /tmp/umad-serve.log
ip netns exec mra /usr/bin/python3 "$MR_SELFTESTS/umad_ping.py" ping mra0 "::ffff:$MR_ADDR_A" "::ffff:$MR_ADDR_A" $n ||
  mad_fail "IPv4 loopback MADs"

# Wire correctness: every ICRC verifies with our checker and tshark decodes every packet.
mr_wire_check /tmp/mad.pcap $((4 * n)) 0x64 || fail "wire check of the MAD capture"

ip netns exec mra rdma statistic show link mra0/1
ip netns exec mrb rdma statistic show link mrb0/1
for d in "mra mra0" "mrb mrb0"; do
  set -- $d
  for k in sent_pkts rcvd_pkts; do
    v=$(stat_of "$1" "$2" $k)
    [ "${v:-0}" -ge $((2 * n)) ] || fail "$2: $k is ${v:-none}, expected at least $((2 * n))"
  done
  v=$(stat_of "$1" "$2" send_err)
  [ "${v:-0}" = 0 ] || fail "$2: send_err $v"
done
mr_dmesg_clean
