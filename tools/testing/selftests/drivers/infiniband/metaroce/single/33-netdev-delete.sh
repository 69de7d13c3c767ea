#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Deleting the netdev removes the MetaRoCE device on it (NETDEV_UNREGISTER → queued
# unregistration), even while a process holds a user context open on the device: the context is
# disassociated instead of blocking unregistration.
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
trap 'kill $holder 2>/dev/null; mr_teardown' EXIT
mr_veth_up
rdma link add mr0 type metaroce netdev v0 || fail "rdma link add mr0"

# A user context through the libmetaroce provider, held open for a while.
/usr/bin/python3 -c '
import sys, time
from pyverbs.device import Context
ctx = Context(name="mr0")
print("holder: context open, port state", ctx.query_port(1).state, flush=True)
time.sleep(120)
' >/tmp/mr-holder.out 2>&1 & holder=$!
mr_wait 60 grep -q 'context open' /tmp/mr-holder.out || { cat /tmp/mr-holder.out; fail "no user context opened"; }
cat /tmp/mr-holder.out
kill -0 $holder || fail "the context holder died"

ip link del v0 || fail "ip link del v0"
mr_wait 30 mr_no_dev mr0 || fail "mr0 still present 30 s after its netdev was deleted"
dmesg | grep -q 'mr0: netdev v0 is going away' || fail "no removal line in dmesg"
ip link show v1 >/dev/null 2>&1 && fail "v1 survived its peer's deletion"
kill $holder; wait $holder 2>/dev/null
mr_dmesg_clean
dmesg | grep metaroce
