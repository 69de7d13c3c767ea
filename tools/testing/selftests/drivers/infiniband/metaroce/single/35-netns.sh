#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Two devices in two namespaces (ib_core's exclusive netns mode): each device is created in the
# namespace of its netdev, only that namespace sees it, each carries its own RoCE v2 GIDs, and
# deleting a namespace removes its device (and the peer's, whose veth end goes too).
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
mr_two_namespaces

ip netns exec mra rdma link add mra0 type metaroce netdev va || fail "add mra0 in mra"
ip netns exec mrb rdma link add mrb0 type metaroce netdev vb || fail "add mrb0 in mrb"
# A netdev name resolves in the caller's namespace only.
ip netns exec mra rdma link add mrx0 type metaroce netdev vb 2>/dev/null && fail "mra could use mrb's vb"

a=$(ip netns exec mra rdma dev); b=$(ip netns exec mrb rdma dev); root=$(rdma dev)
echo "mra: $a"; echo "mrb: $b"; echo "init: $root"
grep -q mra0 <<<"$a" && ! grep -q mrb0 <<<"$a" || fail "mra sees: $a"
grep -q mrb0 <<<"$b" && ! grep -q mra0 <<<"$b" || fail "mrb sees: $b"
grep -qE 'mra0|mrb0' <<<"$root" && fail "init_net sees: $root"

gids() { ip netns exec "$1" ibv_devinfo -v -d "$2" 2>/dev/null | grep -q "::ffff:$3, RoCE v2"; }
mr_wait 30 gids mra mra0 $MR_ADDR_A || fail "mra0 lacks the GID of $MR_ADDR_A"
mr_wait 30 gids mrb mrb0 $MR_ADDR_B || fail "mrb0 lacks the GID of $MR_ADDR_B"
ip netns exec mra ibv_devinfo -d mra0 | grep -q PORT_ACTIVE || fail "mra0 not active"

# Deleting mra deletes va, and with it its peer vb in mrb: both devices go, each through its
# netdev's NETDEV_UNREGISTER (for mra0 possibly after ib_core moved it back to init_net).
ip netns del mra
mr_wait 60 sh -c "dmesg | grep -q 'mra0: netdev va is going away'" || fail "mra0 not removed with its namespace"
mr_wait 60 sh -c "dmesg | grep -q 'mrb0: netdev vb is going away'" || fail "mrb0 not removed with its netdev"
mr_wait 30 sh -c '! rdma dev | grep -q mra0' || fail "mra0 still visible in init_net: $(rdma dev)"
mr_wait 30 sh -c '! ip netns exec mrb rdma dev | grep -q mrb0' || fail "mrb0 still visible in mrb"
mr_dmesg_clean
dmesg | grep metaroce
