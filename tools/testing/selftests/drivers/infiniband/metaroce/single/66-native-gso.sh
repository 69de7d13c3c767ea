#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Native packets handed to the network stack in batches (module parameters tx_gso=1 and
# native_path_run=8): a connection sends runs of 8 DATA packets per path and the transmit
# batch gives each run to the stack as one fraglist UDP GSO packet (sent_gso_batches). Over
# veth the batch reaches the peer namespace whole and the UDP receive path splits it: the
# received data is validated (ibv_rc_pingpong -c, 1 MiB and 64 KiB with events) and READ
# responses batch as well. (65-native-rx-transmit checks that nothing is batched with the default
# tx_gso=0.) The module is unloaded at the end (the next test loads it with its defaults).
. "$(dirname "$0")/../lib.sh"
[ -n "${MR_FULL:-}" ] || skip "make check-full only (make check's hour: tx_gso=1 and native_path_run=8 are not the defaults; 51-native runs the defaults)"
. "$MR_SELFTESTS/single/link-common.bash"
trap 'mr_teardown; rmmod metaroce 2>/dev/null' EXIT

# 64 KiB WRITEs from mrb0 to mra0 with tx_gso=$1 (mr_native_writes sets DATA and GSO).
writes() { MR_WRITES=100 mr_native_writes tx_gso="$1" native_path_run=8; }

writes 1
# Runs of 8 in batches of 16 packets: about one GSO packet per 8 DATA packets while the window
# is open; at least one per 16 (each batch of two or more counts once).
[ $((GSO * 16)) -ge "$DATA" ] || fail "tx_gso=1: $GSO GSO batches for $DATA DATA packets"
mr_pingpong ibv_rc_pingpong "1 MiB"           mra mra0 $ga mrb mrb0 $gb -s 1048576 -n 4
mr_pingpong ibv_rc_pingpong "64 KiB, events"  mra mra0 $ga mrb mrb0 $gb -s 65536 -n 50 -e
r0=$(mr_stat mra mra0 sent_gso_batches)
mr_perf "read_bw 64 KiB x 50" ib_read_bw -s 65536 -n 50 -F
[ "$(mr_stat mra mra0 sent_gso_batches)" -gt "$r0" ] || fail "READ responses: no GSO batch from mra0"
ip netns exec mra rdma statistic show link mra0/1
ip netns exec mrb rdma statistic show link mrb0/1
mr_dmesg_clean
