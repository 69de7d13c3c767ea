#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Unloading metaroce with devices present (one with a user context open) unregisters them first;
# the module goes, the devices go, the netdevs stay and the kernel reports nothing.
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
trap 'kill $holder 2>/dev/null; mr_teardown; ip link del v2 2>/dev/null' EXIT
mr_veth_up
ip link add v2 type veth peer name v3 && ip link set v2 up && ip link set v3 up || fail "second veth"
rdma link add mr0 type metaroce netdev v0 || fail "rdma link add mr0"
rdma link add mr1 type metaroce netdev v2 || fail "rdma link add mr1"
/usr/bin/python3 -c '
import time
from pyverbs.device import Context
ctx = Context(name="mr0")
print("holder: context open", flush=True)
time.sleep(120)
' >/tmp/mr-holder.out 2>&1 & holder=$!
mr_wait 60 grep -q 'context open' /tmp/mr-holder.out || { cat /tmp/mr-holder.out; fail "no user context opened"; }
cat /tmp/mr-holder.out
kill -0 $holder || fail "the context holder died"

rmmod metaroce || fail "rmmod metaroce with devices present"
lsmod | grep -q '^metaroce ' && fail "metaroce still loaded"
mr_no_dev mr0 && mr_no_dev mr1 || fail "devices left after unload: $(ls /sys/class/infiniband)"
ip link show v0 >/dev/null && ip link show v2 >/dev/null || fail "netdevs went away with the module"
dmesg | grep -q 'metaroce: unloaded' || fail "no 'metaroce: unloaded' line"
kill $holder; wait $holder 2>/dev/null
# The module can come back and serve again.
rdma link add mr0 type metaroce netdev v0 || fail "add after reload"
mr_wait 10 mr_port_is mr0 PORT_ACTIVE || fail "mr0 not active after reload"
rdma link delete mr0 || fail "delete after reload"
rmmod metaroce || fail "second rmmod"
mr_dmesg_clean
dmesg | grep metaroce
