#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# `rdma link add` autoloads metaroce and creates a device every stock tool sees: ibv_devices,
# ibv_devinfo -v (PORT_ACTIVE, Ethernet, RoCE v2 GIDs for v0's IPv4 and IPv6 addresses), rdma
# dev/link/res/statistic; the port follows v0 down/up (counted in link_downed) and MTU changes;
# `rdma link delete` removes it.
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
trap mr_teardown EXIT
mr_veth_up

rdma link add mr0 type metaroce netdev v0 || fail "rdma link add mr0 type metaroce netdev v0"
lsmod | grep -q '^metaroce ' || fail "metaroce was not autoloaded through rdma-link-metaroce"
ibv_devices | grep -qw mr0 || { ibv_devices; fail "ibv_devices does not list mr0"; }
mr_wait 30 mr_gids_ok mr0 || { ibv_devinfo -v -d mr0; fail "RoCE v2 GIDs of $MR_ADDR_A and $MR_ADDR6_A missing"; }
info=$(ibv_devinfo -v -d mr0) || fail "ibv_devinfo -v -d mr0"
echo "$info" | grep -E 'hca_id|transport|node_guid|sys_image_guid|vendor_id|phys_port_cnt|state|active_mtu|link_layer|GID'
grep -q 'link_layer:[[:space:]]*Ethernet' <<<"$info" || fail "link layer is not Ethernet"
grep -q 'state:[[:space:]]*PORT_ACTIVE' <<<"$info" || fail "port not PORT_ACTIVE"
grep -q 'active_mtu:[[:space:]]*1024' <<<"$info" || fail "active MTU for a 1500-byte netdev is not 1024"
grep -q 'phys_state:[[:space:]]*LINK_UP' <<<"$info" || fail "phys_state not LINK_UP"

rdma dev show mr0 || fail "rdma dev show mr0"
link=$(rdma link show mr0/1) || fail "rdma link show mr0/1"
echo "$link"
grep -q 'state ACTIVE' <<<"$link" && grep -q 'netdev v0' <<<"$link" || fail "rdma link: $link"
rdma res show mr0 || fail "rdma res show mr0"
rdma statistic show link mr0/1 || fail "rdma statistic show link mr0/1"

ip link set v0 down
mr_wait 10 mr_port_is mr0 PORT_DOWN || fail "port not PORT_DOWN after v0 down (is $(mr_port_state mr0))"
rdma link show mr0/1 | grep -q 'state DOWN' || fail "rdma link does not show DOWN"
ip link set v0 up
mr_wait 10 mr_port_is mr0 PORT_ACTIVE || fail "port not PORT_ACTIVE after v0 up (is $(mr_port_state mr0))"
ip link set v1 down
mr_wait 10 mr_port_is mr0 PORT_DOWN || fail "port not PORT_DOWN after peer v1 down (no carrier)"
ip link set v1 up
mr_wait 10 mr_port_is mr0 PORT_ACTIVE || fail "port not PORT_ACTIVE after peer v1 up"

hc=/sys/class/infiniband/mr0/ports/1/hw_counters
[ "$(cat $hc/link_downed)" = 2 ] || fail "link_downed is $(cat $hc/link_downed) after two link losses, not 2"
[ "$(cat $hc/sent_pkts)" = 0 ] && [ "$(cat $hc/rcvd_pkts)" = 0 ] || fail "packet counters moved without traffic"
rdma statistic show link mr0/1 | grep -q 'link_downed 2' || fail "rdma statistic does not show link_downed 2"

ip link set v0 mtu 9000 || fail "mtu 9000"
mr_wait 5 mr_active_mtu_is mr0 4096 || fail "active MTU not 4096 at netdev MTU 9000 ($(mr_active_mtu mr0))"
ip link set v0 mtu 1200 || fail "mtu 1200"
mr_wait 5 mr_active_mtu_is mr0 1024 || fail "active MTU not 1024 at netdev MTU 1200 ($(mr_active_mtu mr0))"
ip link set v0 mtu 1000 || fail "mtu 1000"
mr_wait 5 mr_active_mtu_is mr0 512 || fail "active MTU not 512 at netdev MTU 1000 ($(mr_active_mtu mr0))"
ip link set v0 mtu 1500
dmesg | grep -q 'mr0: netdev v0 MTU 1000' || fail "no MTU change line in dmesg"

rdma link delete mr0 || fail "rdma link delete mr0"
mr_no_dev mr0 || fail "mr0 still in /sys/class/infiniband after delete"
ibv_devices | grep -qw mr0 && fail "ibv_devices still lists mr0"
rdma link show | grep -q mr0 && fail "rdma link still shows mr0"
mr_dmesg_clean
dmesg | grep metaroce
