#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Path MTUs from 256 to 4096 bytes, then a misbehaving link, between two namespaces.
#
# MTU sweep: with the veths at MTU 9000 the port's active MTU is 4096; ibv_rc_pingpong -c (every
# received buffer checked) runs 16 KiB messages at each path MTU (256, 1024 and 4096 without MR_FULL), and the packets mra0 takes in
# must match that MTU's segmentation: at least 10 x 16384 / MTU request packets, and no more than
# those plus one acknowledgement per packet mra0 sent (a device ignoring the path MTU fails one
# bound or the other). UD: ibv_ud_pingpong -c with 4096-byte messages in single packets.
#
# Faults: netem duplicates 5% of the packets leaving each namespace and sends 25% of them ahead
# of the others (the rest wait 2 ms), so requests, responses and ACKs arrive twice and out of
# order. ibv_rc_pingpong -c, and perftest SEND, WRITE and READ must complete, and the responders'
# counters must show the duplicates and out-of-order requests they coped with.
. "$(dirname "$0")/../lib.sh"
[ -n "${MR_FULL:-}" ] || skip "make check-full only (make check's hour: 30-link checks the active MTU at each netdev MTU, 44-rc-loss the recovery of a faulty link, and the host's roce-sim the core under duplication and reordering)"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
mr_two_devices
stat() { ip netns exec "$1" rdma statistic show link "$2/1" | tr ' ' '\n' | grep -A1 -x "$3" | tail -n 1; }

ip -n mra link set va mtu 9000 && ip -n mrb link set vb mtu 9000 || fail "veth MTU 9000"
mr_wait 10 sh -c "ip netns exec mra ibv_devinfo -d mra0 | grep -q 'active_mtu:.*4096'" ||
  { ip netns exec mra ibv_devinfo -d mra0; fail "mra0: active_mtu is not 4096 at netdev MTU 9000"; }
# check-full: all five path MTUs; MR_FULL unset (a run by hand): the smallest, the default and the largest.
for m in $([ -n "${MR_FULL:-}" ] && echo 256 512 1024 2048 4096 || echo 256 1024 4096); do
  p0=$(stat mra mra0 rcvd_pkts) s0=$(stat mra mra0 sent_pkts)
  mr_pingpong ibv_rc_pingpong "RC path MTU $m, 16 KiB x 10" mra mra0 $ga mrb mrb0 $gb -m $m -s 16384 -n 10
  got=$(( $(stat mra mra0 rcvd_pkts) - p0 )) sent=$(( $(stat mra mra0 sent_pkts) - s0 ))
  min=$(( 10 * 16384 / m ))
  echo "path MTU $m: mra0 took in $got packets (at least $min requests), sent $sent"
  [ "$got" -ge "$min" ] && [ "$got" -le $((min + sent + 10)) ] ||
    fail "path MTU $m: $got packets received, expected $min..$((min + sent + 10))"
done
mr_pingpong ibv_ud_pingpong "UD 4096 B x 20" mra mra0 $ga mrb mrb0 $gb -s 4096 -n 20
ip -n mra link set va mtu 1500 && ip -n mrb link set vb mtu 1500 || fail "veth MTU 1500"

ip netns exec mra tc qdisc add dev va root netem delay 2ms reorder 25% 50% duplicate 5% || fail "netem on va"
ip netns exec mrb tc qdisc add dev vb root netem delay 2ms reorder 25% 50% duplicate 5% || fail "netem on vb"
d0=$(( $(stat mra mra0 duplicate_request) + $(stat mrb mrb0 duplicate_request) ))
o0=$(( $(stat mra mra0 out_of_seq_request) + $(stat mrb mrb0 out_of_seq_request) ))
mr_pingpong ibv_rc_pingpong "RC under duplication and reordering, 4 KiB x 100" mra mra0 $ga mrb mrb0 $gb -s 4096 -n 100

mr_perf "send_bw 4 KiB x 100" ib_send_bw -s 4096 -n 100 -F
mr_perf "write_bw 64 KiB x 20" ib_write_bw -s 65536 -n 20 -F
mr_perf "read_bw 64 KiB x 20" ib_read_bw -s 65536 -n 20 -F

ip netns exec mra tc -s qdisc show dev va | grep -E 'netem|Sent'
ip netns exec mrb tc -s qdisc show dev vb | grep -E 'netem|Sent'
for side in "mra mra0" "mrb mrb0"; do
  set -- $side
  ip netns exec "$1" rdma statistic show link "$2/1"
done
dup=$(( $(stat mra mra0 duplicate_request) + $(stat mrb mrb0 duplicate_request) - d0 ))
ooo=$(( $(stat mra mra0 out_of_seq_request) + $(stat mrb mrb0 out_of_seq_request) - o0 ))
echo "duplicate requests seen: $dup, out-of-sequence requests seen: $ooo"
[ "$dup" -gt 0 ] && [ "$ooo" -gt 0 ] || fail "the responders saw no duplicate or no out-of-order request"
mr_dmesg_clean
