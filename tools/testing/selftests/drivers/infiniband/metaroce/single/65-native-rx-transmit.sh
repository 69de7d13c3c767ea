#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The native transport with the receive path transmitting (module parameter rx_transmit=2: ACKs
# and the data an ACK makes room for leave from softirq) and its ACK coalescing
# (native_ack_every; Documentation/metaroce/transport.rst section 4, step 5). With
# native_ack_every=1 the receiver of a 64 KiB WRITE stream sends an ACK for every DATA packet
# (the worker alone, rx_transmit=0, sends one for about 12); with 4 the receive path sends fewer,
# and the worker, scheduled for the rest, sends them as soon as it runs: in this 2-vCPU guest,
# on the other vCPU at once (about 0.7 per DATA packet; 0.12-0.14 in the 1-vCPU bench guests).
# With 4: received data validated (ibv_rc_pingpong -c, 1 MiB and 64 B with events) and READs.
# The module is unloaded at the end (the next test loads it with its defaults).
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
trap 'mr_teardown; rmmod metaroce 2>/dev/null' EXIT

# Loads the module with native_ack_every=$1, makes the two devices and runs 64 KiB WRITEs from
# mrb0 to mra0; sets DATA and ACKS (mra0's ACKs for them).
writes() {
  mr_fresh
  modprobe metaroce rx_transmit=2 native_ack_every=$1 || fail "modprobe metaroce rx_transmit=2 native_ack_every=$1"
  mr_two_devices metaroce-native
  local a0 d0
  a0=$(mr_stat mra mra0 native_acks_sent); d0=$(mr_stat mrb mrb0 native_data_sent)
  mr_perf "write_bw 64 KiB x 200, native_ack_every=$1" ib_write_bw -s 65536 -n 200 -F
  ACKS=$(( $(mr_stat mra mra0 native_acks_sent) - a0 )); DATA=$(( $(mr_stat mrb mrb0 native_data_sent) - d0 ))
  echo "native_ack_every=$1: $DATA native DATA packets, $ACKS ACKs from the receiver"
  [ "$DATA" -ge 9000 ] || fail "only $DATA native DATA packets for 12.5 MiB of WRITEs"
}

writes 1
acks1=$ACKS
[ $((ACKS * 10)) -ge $((DATA * 9)) ] || fail "native_ack_every=1: $ACKS ACKs for $DATA DATA packets, not one per packet"
writes 4
[ $((ACKS * 20)) -le $((acks1 * 19)) ] || fail "native_ack_every=4: $ACKS ACKs for $DATA DATA packets ($acks1 with 1): not coalesced"
mr_pingpong ibv_rc_pingpong "1 MiB"        mra mra0 $ga mrb mrb0 $gb -s 1048576 -n 4
mr_pingpong ibv_rc_pingpong "64 B, events" mra mra0 $ga mrb mrb0 $gb -s 64 -n 50 -e
mr_perf "read_bw 64 KiB x 50" ib_read_bw -s 65536 -n 50 -F
ip netns exec mra rdma statistic show link mra0/1
ip netns exec mrb rdma statistic show link mrb0/1
mr_dmesg_clean
