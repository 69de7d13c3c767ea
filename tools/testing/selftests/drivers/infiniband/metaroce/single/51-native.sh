#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The MetaRoCE native transport in the kernel (Documentation/metaroce/transport.rst): two
# `metaroce-native` devices in two namespaces, unmodified rdma-core apps through libmetaroce
# (RC QPs become streams of one native connection per device pair). Checks: ibv_rc_pingpong with
# received buffers validated (-c; loopback, 64 B with events, 1 MiB), perftest SEND, WRITE (several
# QPs on one connection), READ and both atomics, 1 MiB pingpongs, WRITE, READ and FETCH_ADD under
# 1 % netem loss on both veths, and a capture of
# everything on the wire checked by pcap_native.py (independent of the driver): only native
# packets on UDP port 19791, correct non-zero UDP checksums, well-formed headers, ECT(0) DATA,
# DATA sprayed over several paths and source ports, no RoCEv2 packet. Telemetry: the receivers'
# rate hints (veth reports 10 Gbit/s: one sender's share is 10 Gbit/s less 1/32) reach the senders
# (counter native_rate_hint_changes, tracepoint metaroce_rate_hint), and the losses netem causes
# show as metaroce_path loss events. mw_check.py's memory windows on a native device, remote
# invalidation (SEND with invalidate) included.
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
mr_two_devices metaroce-native
echo "GID indices: mra0 $ga, mrb0 $gb"
dmesg | grep -q "mra0: added on netdev va (MetaRoCE native; rate hints share 10000000 kbit/s)" ||
  fail "mra0 is not a native device sharing veth's 10 Gbit/s"
# The transport's tracepoints, from before the first packet.
T=/sys/kernel/tracing
[ -d $T/events ] || mount -t tracefs nodev $T || fail "tracefs"
[ -d $T/events/metaroce/metaroce_path ] || fail "no metaroce tracepoints"
echo > $T/trace; echo 1 > $T/events/metaroce/enable || fail "enabling metaroce events"

ip netns exec mrb dumpcap -q -i vb -P -w /tmp/native.pcap -f "udp port 4791 or udp port 19791" 2>/tmp/dumpcap.log &
cap=$!
mr_wait 30 grep -q "Capturing on" /tmp/dumpcap.log || fail "dumpcap did not start"

mr_pingpong ibv_rc_pingpong "loopback 4 KiB" mra mra0 $ga mra mra0 $ga -s 4096 -n 5
mr_pingpong ibv_rc_pingpong "64 B, events"   mra mra0 $ga mrb mrb0 $gb -s 64 -n 20 -e
mr_pingpong ibv_rc_pingpong "1 MiB"          mra mra0 $ga mrb mrb0 $gb -s 1048576 -n 2
mr_perf "send_bw 4 KiB x 50" ib_send_bw -s 4096 -n 50 -F
mr_perf "write_bw 64 KiB x 20, 2 QPs" ib_write_bw -s 65536 -n 20 -q 2 -F
mr_perf "read_bw 64 KiB x 20" ib_read_bw -s 65536 -n 20 -F
mr_perf "fetch_add x 50" ib_atomic_bw -A FETCH_AND_ADD -n 50 -F
mr_perf "cmp_swap x 50" ib_atomic_bw -A CMP_AND_SWAP -n 50 -F

sleep 1; kill -INT $cap 2>/dev/null; wait $cap; cat /tmp/dumpcap.log
ip netns exec mra rdma statistic show link mra0/1
ip netns exec mrb rdma statistic show link mrb0/1
# SEND, WRITE, READ, READ_RESP, CMP_SWAP, FETCH_ADD, ATOMIC_RESP.
python3 "$MR_SELFTESTS/pcap_native.py" /tmp/native.pcap 1000 4 --ops 0,2,4,5,7,8,9 || fail "native wire check"

# Memory windows over the native wire (RC loopback on mra0: WRITE/READ through windows, remote
# invalidation by SEND with invalidate, canaries around every refused access).
t0=$(date +%s)
ip netns exec mra timeout 300 /usr/bin/python3 "$MR_SELFTESTS/mw_check.py" mra0 "$ga" || fail "mw_check.py on a native device"
echo "mw_check.py: $(( $(date +%s) - t0 )) s"
# RDMA FLUSH is RoCEv2 only: a native device does not report IB_DEVICE_FLUSH_GLOBAL.
ip netns exec mra /usr/bin/python3 "$MR_SELFTESTS/flush_check.py" refused mra0 || fail "FLUSH_GLOBAL MR on a native device"
stat() { ip netns exec $1 rdma statistic show link $2/1 | tr ' ' '\n' | grep -A1 -x "$3" | tail -n 1; }
for d in "mra mra0" "mrb mrb0"; do
  [ "$(stat $d native_rate_hint_changes)" -ge 1 ] || fail "${d#* } received no rate hint"
done

ip netns exec mra tc qdisc add dev va root netem loss 1% || fail "netem on va"
ip netns exec mrb tc qdisc add dev vb root netem loss 1% || fail "netem on vb"
mr_pingpong ibv_rc_pingpong "1 MiB, 1% loss" mra mra0 $ga mrb mrb0 $gb -s 1048576 -n 4
mr_perf "write_bw 64 KiB x 50, 1% loss" ib_write_bw -s 65536 -n 50 -F
# READ and atomics under loss: check-full (the native core's loss recovery is the same for every
# opcode; make check covers it with SEND and WRITE, and READ/atomics without loss above).
if [ -n "${MR_FULL:-}" ]; then
  mr_perf "read_bw 64 KiB x 20, 1% loss" ib_read_bw -s 65536 -n 20 -F
  mr_perf "fetch_add x 50, 1% loss" ib_atomic_bw -A FETCH_AND_ADD -n 50 -F
fi
ip netns exec mra tc -s qdisc show dev va | grep -E 'netem|dropped'
ip netns exec mrb tc -s qdisc show dev vb | grep -E 'netem|dropped'
echo 0 > $T/events/metaroce/enable
grep -c metaroce_ $T/trace | sed 's/^/trace lines: /'
grep -m 5 "metaroce_path: mr[ab]0 conn=0x[0-9a-f]* path=[0-7] loss count=[1-9]" $T/trace ||
  fail "no path loss event under 1 % loss"
grep -m 3 "metaroce_path:" $T/trace | grep -v " loss " || true
# Each connection's first hint: one sender on a 10 Gbit/s link gets all of it but 1/32.
for d in mra0 mrb0; do
  grep -m 1 "metaroce_rate_hint: $d conn=0x[0-9a-f]* rate hint 0 -> 9687500 kbit/s" $T/trace ||
    fail "no rate hint event on $d"
done

ip netns exec mra rdma statistic show link mra0/1
ip netns exec mrb rdma statistic show link mrb0/1
mr_dmesg_clean
