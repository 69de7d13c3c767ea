#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# RC error completions on one device (loopback, in a namespace): remote access errors come back
# as NAKs at once and leave the target memory untouched, RNR retry exhaustion, and transport
# retry exhaustion with every packet lost (netem on lo), with the port counters that count them
# (rc_errors.py).
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
mr_two_devices
t0=$(date +%s)
ip netns exec mra timeout 300 /usr/bin/python3 "$MR_SELFTESTS/rc_errors.py" mra0 "$ga" || fail "rc_errors.py"
echo "rc_errors.py: $(( $(date +%s) - t0 )) s"
ip netns exec mra rdma statistic show link mra0/1
mr_dmesg_clean
