#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Hostile user space on the native transport: hostile_user.py's destroy-while-in-flight cases
# (c*: 16 x 1 MiB transfers, then an MR deregistered, a window deallocated, a QP destroyed, the
# context closed or the process gone at once) between two `metaroce-native` devices, whose RC QPs
# are streams of one connection. Each case's expected completions are those of 59-hostile-user
# (a deregistered source or READ sink: IBV_WC_LOC_PROT_ERR, the rest flushed; target or window:
# IBV_WC_REM_ACCESS_ERR; receive buffer: IBV_WC_REM_OP_ERR), then a fresh QP pair moves 64 KiB
# correctly. The source case drives the transmit path's local-error branch: the packet was polled
# from the connection, its payload could not be read when the skb was built after the
# connection's lock was dropped. make check runs c1 (source) and c3 (READ sink), ~40 s under
# TCG+KASAN; check-full all nine (~3 min). Then native_order.py: a local protection error right
# behind a request still in flight leaves that request's success intact (~20 s).
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
mr_two_devices metaroce-native
echo "GID index: mra0 $ga, mrb0 $gb"
stat() { ip netns exec $1 rdma statistic show link $2/1 | tr ' ' '\n' | grep -A1 -x "$3" | tail -n 1; }
sent0=$(stat mra mra0 native_data_sent)
cases=${MR_HOSTILE_CASES:-$([ -n "${MR_FULL:-}" ] && echo "c z" || echo "c1 c3 z")}
t0=$(date +%s)
ip netns exec mra timeout -k 10 1200 /usr/bin/python3 "$MR_SELFTESTS/hostile_user.py" mra0 "$ga" $cases; rc=$?
echo "hostile_user.py on native devices: exit $rc, $(( $(date +%s) - t0 )) s"
sent=$(( $(stat mra mra0 native_data_sent) - sent0 ))
echo "native DATA packets mra0 sent: $sent"
# Each case's fresh pair alone moves 64 KiB: at least 45 DATA packets of at most 1500 bytes.
[ "$sent" -ge 45 ] || fail "the cases did not run over the native transport ($sent DATA packets)"
# A local protection error right behind a request still unacknowledged (10 ms netem delay on the
# loopback): the earlier request completes successfully, the failed one with LOC_PROT_ERR, the
# rest flushed (found 2026-12-03: the native QP broke at once and flushed the earlier request).
ip netns exec mra tc qdisc add dev lo root netem delay 10ms limit 100000 || fail "netem on lo"
ip netns exec mra timeout 300 /usr/bin/python3 "$MR_SELFTESTS/native_order.py" mra0 "$ga" 5; orc=$?
ip netns exec mra tc qdisc del dev lo root
[ "$orc" = 0 ] || fail "native_order.py: wrong completion order, or no round provoked the local error"
mr_pingpong ibv_rc_pingpong "rc_pingpong afterwards, 64 KiB" mra mra0 $ga mrb mrb0 $gb -s 65536 -n 20
mr_dmesg_clean
[ "$rc" = 0 ] || fail "hostile_user.py on native devices: some cases did not behave as expected (see above)"
