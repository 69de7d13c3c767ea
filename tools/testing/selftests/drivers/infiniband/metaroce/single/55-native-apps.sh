#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The other stock rdma-core apps between two `metaroce-native` devices (issue 8: every stock app of
# the data-path issues also runs between native devices), received data validated: ibv_srq_pingpong
# (four RC QPs sharing an SRQ: native streams placing into SRQ receives), ib_send_bw --use-srq,
# rping -V (rdma_cm over QP1, then RC SEND, READ and WRITE on the native wire), and ibv_ud_pingpong
# and ibv_uc_pingpong, whose UD and UC QPs travel as RoCEv2 on a native device. The device counters
# must show native DATA for the RC runs and RoCEv2-only traffic for the UD/UC ones.
. "$(dirname "$0")/../lib.sh"
[ -n "${MR_FULL:-}" ] || skip "make check-full only (make check's hour: 51-native runs the stock apps' core over the native transport)"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
mr_two_devices metaroce-native
echo "GID indices: mra0 $ga, mrb0 $gb"
stat() { ip netns exec $1 rdma statistic show link $2/1 | tr ' ' '\n' | grep -A1 -x "$3" | tail -n 1; }
native() { stat mrb mrb0 native_data_sent; }

n0=$(native)
mr_pingpong ibv_srq_pingpong "SRQ 4 QPs 4 KiB" mra mra0 $ga mrb mrb0 $gb -q 4 -r 16 -s 4096 -n 10
mr_pingpong ibv_srq_pingpong "SRQ 4 QPs 64 B, events" mra mra0 $ga mrb mrb0 $gb -q 4 -r 16 -s 64 -n 20 -e
mr_perf "send_bw --use-srq 16 KiB x 50" ib_send_bw --use-srq -s 16384 -n 50 -F
n1=$(native)
[ $((n1 - n0)) -ge 100 ] || fail "SRQ runs sent only $((n1 - n0)) native DATA packets"
echo "SRQ runs: $((n1 - n0)) native DATA packets from mrb0"

# rping: the server in mra, the client in mrb; -V checks every ping's data, -v prints it.
port=7471
ip netns exec mra timeout 120 rping -s -v -a $MR_ADDR_A -p $port -S 4000 > /tmp/rping-s.log 2>&1 &
srv=$!
mr_wait 60 sh -c "ip netns exec mra rdma resource show cm_id 2>/dev/null | grep -q LISTEN" || { cat /tmp/rping-s.log; fail "rping server not listening"; }
ip netns exec mrb timeout 120 rping -c -v -V -a $MR_ADDR_A -p $port -C 20 -S 4000 > /tmp/rping-c.log 2>&1 ||
  { cat /tmp/rping-c.log /tmp/rping-s.log; fail "rping client"; }
wait $srv || { cat /tmp/rping-s.log; fail "rping server"; }
[ "$(grep -c '^ping data: ' /tmp/rping-c.log)" = 20 ] || { cat /tmp/rping-c.log; fail "rping: not 20 ping lines"; }
n2=$(native)
[ $((n2 - n1)) -ge 20 ] || fail "rping sent only $((n2 - n1)) native DATA packets"
echo "rping 20 x 4000 B: ok ($((n2 - n1)) native DATA packets from mrb0)"

# UD and UC stay RoCEv2 on a native device: no native DATA from them.
mr_pingpong ibv_ud_pingpong "UD 512 B, events" mra mra0 $ga mrb mrb0 $gb -s 512 -n 20 -e
mr_pingpong ibv_uc_pingpong "UC 4 KiB" mra mra0 $ga mrb mrb0 $gb -s 4096 -n 10
n3=$(native)
[ "$n3" = "$n2" ] || fail "UD/UC runs sent $((n3 - n2)) native DATA packets"

ip netns exec mra rdma statistic show link mra0/1
ip netns exec mrb rdma statistic show link mrb0/1
mr_dmesg_clean
