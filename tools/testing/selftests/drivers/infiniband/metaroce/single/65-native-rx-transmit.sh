#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The native transport with the receive path transmitting (module parameter rx_transmit=2: ACKs
# and the data an ACK makes room for leave from softirq) and its ACK coalescing
# (native_ack_every; Documentation/metaroce/transport.rst section 4, step 5). With
# native_ack_every=1 the receiver of a 64 KiB WRITE stream sends an ACK for every DATA packet
# (the worker alone, rx_transmit=0, sends one for about 12); with 4 the receive path sends fewer,
# and the worker, scheduled for the rest, sends them as soon as it runs: in this 2-vCPU guest,
# on the other vCPU at once (about 0.7 per DATA packet; 0.12-0.14 in the 1-vCPU bench guests).
# Nothing leaves as a GSO batch (tx_gso's default, 0). With 4: received data validated
# (ibv_rc_pingpong -c, 1 MiB and 64 B with events) and READs.
# The module is unloaded at the end (the next test loads it with its defaults).
. "$(dirname "$0")/../lib.sh"
[ -n "${MR_FULL:-}" ] || skip "make check-full only (make check's hour: rx_transmit=2 is not the default; 51-native runs the default)"
. "$MR_SELFTESTS/single/link-common.bash"
trap 'mr_teardown; rmmod metaroce 2>/dev/null' EXIT

# 64 KiB WRITEs from mrb0 to mra0 with native_ack_every=$1 (mr_native_writes sets DATA and ACKS).
writes() { mr_native_writes rx_transmit=2 native_ack_every="$1"; }

writes 1
acks1=$ACKS
[ "$GSO" -eq 0 ] || fail "default tx_gso=0: $GSO GSO batches sent"
[ $((ACKS * 10)) -ge $((DATA * 9)) ] || fail "native_ack_every=1: $ACKS ACKs for $DATA DATA packets, not one per packet"
writes 4
[ $((ACKS * 20)) -le $((acks1 * 19)) ] || fail "native_ack_every=4: $ACKS ACKs for $DATA DATA packets ($acks1 with 1): not coalesced"
mr_pingpong ibv_rc_pingpong "1 MiB"        mra mra0 $ga mrb mrb0 $gb -s 1048576 -n 4
mr_pingpong ibv_rc_pingpong "64 B, events" mra mra0 $ga mrb mrb0 $gb -s 64 -n 50 -e
mr_perf "read_bw 64 KiB x 50" ib_read_bw -s 65536 -n 50 -F
ip netns exec mra rdma statistic show link mra0/1
ip netns exec mrb rdma statistic show link mrb0/1
mr_dmesg_clean
