#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A namespace whose UDP port 4791 is already bound by a userspace socket: `rdma link add` fails
# with EADDRINUSE and says why in dmesg, nothing is left half-created, and once the port is
# free the same command works.
. "$(dirname "$0")/../lib.sh"
[ -n "${MR_FULL:-}" ] || skip "make check-full only (make check's hour: 31-link-errors keeps the other refusals of rdma link add)"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
bpid=
cleanup() { [ -n "$bpid" ] && kill $bpid 2>/dev/null; ip netns del mrc 2>/dev/null; mr_wait 30 mr_no_dev mrc0; true; }
trap cleanup EXIT
ip netns add mrc || fail "ip netns add"
ip -n mrc link add vc type veth peer name vd || fail "veth pair"
ip -n mrc addr add $MR_ADDR_A/24 dev vc && ip -n mrc link set vc up && ip -n mrc link set vd up || fail "addresses"
ip netns exec mrc python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", 4791))
print("bound", flush=True); time.sleep(120)' > /tmp/mr-busy.out &
bpid=$!
mr_wait 10 grep -q bound /tmp/mr-busy.out || fail "could not bind 4791 from user space"
out=$(ip netns exec mrc rdma link add mrc0 type metaroce netdev vc 2>&1) && fail "link add succeeded on a busy port"
echo "rdma: $out"
dmesg | grep -q "mrc0: cannot bind IPv4 UDP port 4791.*already bound" || fail "no clear dmesg line: $(dmesg | tail -5)"
ip netns exec mrc test -e /sys/class/infiniband/mrc0 && fail "mrc0 exists after the failure"
ip netns exec mrc rdma link | grep -q mrc0 && fail "rdma link lists mrc0"
kill $bpid; wait $bpid 2>/dev/null; bpid=
ip netns exec mrc rdma link add mrc0 type metaroce netdev vc || fail "link add after the port was freed"
ip netns exec mrc rdma dev | grep -q mrc0 || fail "mrc0 missing after the second link add"
ip netns exec mrc rdma link delete mrc0 || fail "delete mrc0"
mr_dmesg_clean
