#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Each guest brings up its RDMA device on the QEMU link: MetaRoCE on our kernel, rdma_rxe on
# Debian's (the interop shape), and shows what the peer sees of it.
. "$(dirname "$0")/../lib.sh"
mr_rdma_dev || fail "RDMA device on eth0"
echo "$(uname -r): $MR_DEV, RoCE v2 GID index $MR_GID ($(cat /sys/class/infiniband/$MR_DEV/ports/1/gids/$MR_GID))"
ibv_devinfo -d "$MR_DEV" | grep -E 'transport|state|active_mtu|link_layer'
