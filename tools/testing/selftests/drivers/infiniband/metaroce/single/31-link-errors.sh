#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Bad `rdma link add` input fails with a clear error and leaves nothing half-created: an unknown
# netdev (ENODEV from ib_core), a netdev already carrying a MetaRoCE device (EEXIST), a device
# name already in use (ib_core's error), a missing netdev argument.
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
trap mr_teardown EXIT
mr_veth_up
modprobe metaroce || fail "modprobe metaroce"

out=$(rdma link add mr0 type metaroce netdev nosuch0 2>&1) && fail "link on an unknown netdev succeeded"
echo "unknown netdev: $out"
mr_no_dev mr0 || fail "mr0 exists after a failed add"

rdma link add mr0 type metaroce netdev v0 || fail "rdma link add mr0"
out=$(rdma link add mr1 type metaroce netdev v0 2>&1) && fail "second device on v0 succeeded"
echo "second device on v0: $out"
dmesg | grep -q 'mr1: netdev v0 already carries MetaRoCE device mr0' || fail "no EEXIST explanation in dmesg"
mr_no_dev mr1 || fail "mr1 exists after a failed add"

out=$(rdma link add mr0 type metaroce netdev v1 2>&1) && fail "duplicate name mr0 succeeded"
echo "duplicate name: $out"
dmesg | grep -q 'mr0: registration on v1 failed' || fail "no duplicate-name explanation in dmesg"
rdma link show | grep -q 'netdev v1' && fail "a device was left on v1"
# The failed attempt must not have disturbed the existing mr0.
rdma link show mr0/1 | grep -q 'netdev v0' || fail "mr0 lost its netdev"

ls /sys/class/infiniband
[ "$(ls /sys/class/infiniband | wc -l)" = 1 ] || fail "unexpected devices in /sys/class/infiniband"
rdma link delete mr0 || fail "rdma link delete mr0"
out=$(rdma link delete mr0 2>&1) && fail "deleting a deleted device succeeded"
echo "delete twice: $out"
mr_dmesg_clean
dmesg | grep metaroce
