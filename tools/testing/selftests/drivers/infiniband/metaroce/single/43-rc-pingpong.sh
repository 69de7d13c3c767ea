#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# RC traffic between user processes through the libmetaroce provider: ibv_rc_pingpong (SEND/RECV
# over an RC QP, user rings, user MRs, user CQs, inline sends for small messages) between two
# namespaces (exclusive netns mode), with received buffers validated
# (-c): 64 B event-driven (-e), 1 MiB polling, and 4 KiB over loopback (server and client on the
# same device).
. "$(dirname "$0")/../lib.sh"
[ -n "${MR_FULL:-}" ] || skip "make check-full only (make check's hour: pair/30-rc-pingpong and interop/30-rc-pingpong run ibv_rc_pingpong -c)"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
mr_two_devices
echo "GID indices: mra0 $ga, mrb0 $gb"

# Under the sanitizer kernel and TCG each run costs tens of seconds of process start-up: the
# capped set is one run per size class.
mr_pingpong ibv_rc_pingpong "loopback 4 KiB" mra mra0 $ga mra mra0 $ga -s 4096 -n 5
mr_pingpong ibv_rc_pingpong "64 B, events"   mra mra0 $ga mrb mrb0 $gb -s 64 -n 20 -e
mr_pingpong ibv_rc_pingpong "1 MiB"          mra mra0 $ga mrb mrb0 $gb -s 1048576 -n 1

ip netns exec mra rdma statistic show link mra0/1
ip netns exec mrb rdma statistic show link mrb0/1
mr_dmesg_clean
