#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Shared receive queues through the libmetaroce provider: the SRQ verbs on one device with pyverbs
# (create/query, resize with requests posted, limit event fired once then disarmed, two RC QPs
# taking from one SRQ, a bad L_Key breaking only the QP that took it, UC and UD QPs on an SRQ;
# srq_check.py), then between two namespaces
# (exclusive netns mode), received buffers validated (-c): ibv_srq_pingpong with four QPs sharing
# one SRQ, and perftest's ib_send_bw --use-srq.
. "$(dirname "$0")/../lib.sh"
[ -n "${MR_FULL:-}" ] || skip "make check-full only (make check's hour: interop/35-qp-types runs ibv_srq_pingpong -c against rdma_rxe)"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
mr_two_devices
echo "GID indices: mra0 $ga, mrb0 $gb"

t0=$(date +%s)
ip netns exec mra timeout 120 /usr/bin/python3 "$MR_SELFTESTS/srq_check.py" mra0 "$ga" || fail "srq_check.py"
echo "srq_check.py: $(( $(date +%s) - t0 )) s"

mr_pingpong ibv_srq_pingpong "SRQ 4 QPs 4 KiB" mra mra0 $ga mrb mrb0 $gb -q 4 -r 16 -s 4096 -n 10
mr_pingpong ibv_srq_pingpong "SRQ 4 QPs 64 B, events" mra mra0 $ga mrb mrb0 $gb -q 4 -r 16 -s 64 -n 20 -e

port=18700
rcvd() { ip netns exec "$1" rdma statistic show link "$2/1" | tr ' ' '\n' | grep -A1 -x rcvd_bytes | tail -n 1; }
a0=$(rcvd mra mra0) t0=$(date +%s)
ip netns exec mra timeout 120 ib_send_bw -d mra0 -x $ga -p $port -F --use-srq -s 16384 -n 50 > /tmp/pt-server.log 2>&1 &
srv=$!
mr_wait 60 sh -c "ip netns exec mra ss -Hltn 'sport = :$port' | grep -q ." || { cat /tmp/pt-server.log; fail "ib_send_bw: server not listening"; }
if ! ip netns exec mrb timeout 120 ib_send_bw -d mrb0 -x $gb -p $port -F --use-srq -s 16384 -n 50 $MR_ADDR_A > /tmp/pt-client.log 2>&1; then
  cat /tmp/pt-client.log /tmp/pt-server.log; fail "ib_send_bw --use-srq: client"
fi
wait $srv || { cat /tmp/pt-server.log; fail "ib_send_bw --use-srq: server"; }
grep -Eq "^ *16384 +50 +" /tmp/pt-client.log || { cat /tmp/pt-client.log /tmp/pt-server.log; fail "ib_send_bw --use-srq: no result row"; }
da=$(( $(rcvd mra mra0) - a0 ))
[ $da -ge $((16384 * 50)) ] || fail "ib_send_bw --use-srq: mra0 took in only $da B"
echo "ib_send_bw --use-srq 16 KiB x 50 ($(( $(date +%s) - t0 )) s): mra0 took in $da B;$(grep -E '^ *16384 +50 +' /tmp/pt-client.log | tr -s ' \t' ' ')"

for side in "mra mra0" "mrb mrb0"; do
  set -- $side
  ip netns exec "$1" rdma statistic show link "$2/1"
  n=$(ip netns exec "$1" rdma res show 2>/dev/null | sed -n "s/.*$2: .*srq \([0-9]*\).*/\1/p")
  echo "$2: SRQs in use after the runs: ${n:-?}"
  [ "${n:-0}" = 0 ] || fail "$2: $n SRQ(s) left after the processes exited"
done
mr_dmesg_clean
