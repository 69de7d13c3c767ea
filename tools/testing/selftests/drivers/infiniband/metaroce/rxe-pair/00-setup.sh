#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rdma_rxe on the QEMU link in both guests (Debian's stock kernel: the harness self-test).
. "$(dirname "$0")/../lib.sh"
modprobe rdma_rxe || fail "modprobe rdma_rxe"
rdma link add rxe0 type rxe netdev eth0 || fail "rdma link add rxe0"
ibv_devinfo -d rxe0 | grep -q PORT_ACTIVE || fail "rxe0 port not active"
# GID index 1 is the RoCEv2 GID of the IPv4 address.
grep -q "$(mr_self | awk -F. '{ printf "%02x%02x:%02x%02x", $1, $2, $3, $4 }')" \
  /sys/class/infiniband/rxe0/ports/1/gids/1 || fail "GID 1 is not ::ffff:$(mr_self): $(cat /sys/class/infiniband/rxe0/ports/1/gids/1)"
echo "rxe0 up, GID1 $(cat /sys/class/infiniband/rxe0/ports/1/gids/1)"
