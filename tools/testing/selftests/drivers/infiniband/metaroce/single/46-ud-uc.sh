#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# UD and UC traffic between user processes through the libmetaroce provider, between two
# namespaces (exclusive netns mode), received buffers validated (-c): ibv_ud_pingpong (user
# address handles, named in each work request by the number the driver returned; the 40-byte
# GRH area of every receive buffer) and ibv_uc_pingpong (SEND over UC, 4 KiB in 4 packets).
. "$(dirname "$0")/../lib.sh"
[ -n "${MR_FULL:-}" ] || skip "make check-full only (make check's hour: interop/35-qp-types runs ibv_ud_pingpong and ibv_uc_pingpong -c against rdma_rxe)"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
mr_two_devices
echo "GID indices: mra0 $ga, mrb0 $gb"
# A UD message fits one packet: 512 B plus the GRH under the veth's 1024-byte path MTU.
mr_pingpong ibv_ud_pingpong "UD 512 B, events" mra mra0 $ga mrb mrb0 $gb -s 512 -n 20 -e
mr_pingpong ibv_uc_pingpong "UC 4 KiB"         mra mra0 $ga mrb mrb0 $gb -s 4096 -n 10
for side in "mra mra0" "mrb mrb0"; do
  set -- $side
  ip netns exec "$1" rdma statistic show link "$2/1"
done
mr_dmesg_clean
