#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# perftest between two MetaRoCE devices in two namespaces (user RC QPs through libmetaroce):
# WRITE, READ and SEND bandwidth, FETCH_AND_ADD and CMP_AND_SWAP, the three latency tests and four
# QPs at once. Each run must print its result row, and the device that receives the payload must
# count at least that many bytes in (`rcvd_bytes`). The interop suite runs the same tools against
# Debian's rdma_rxe in both directions.
#
# make check-full only: in make check the interop suite drives the same tools through MetaRoCE as
# server and as client, and this suite's ~4 minutes under KASAN do not fit CI's 60-minute budget.
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
[ -n "${MR_FULL:-}" ] || skip "make check-full only (interop/40-perftest covers these tools in make check)"
mr_fresh
mr_two_devices
rcvd() { ip netns exec "$1" rdma statistic show link "$2/1" | tr ' ' '\n' | grep -A1 -x rcvd_bytes | tail -n 1; }

port=18600 failed=0
# pt NAME MOVER SIZE ROWS TOOL ARGS...: server on mra0, client on mrb0; MOVER (server, client or
# both) must take in SIZE x ROWS bytes; ROWS is the iteration count perftest prints.
pt() {
  local name=$1 mover=$2 size=$3 rows=$4 tool=$5 srv a0 b0 da db; shift 5
  port=$((port + 1)); a0=$(rcvd mra mra0) b0=$(rcvd mrb mrb0)
  ip netns exec mra timeout 120 $tool -d mra0 -x $ga -p $port -F "$@" > /tmp/pt-server.log 2>&1 &
  srv=$!
  if ! mr_wait 60 sh -c "ip netns exec mra ss -Hltn 'sport = :$port' | grep -q ."; then
    cat /tmp/pt-server.log; echo "FAILED $name: server not listening"; failed=1; kill $srv; wait $srv; return
  fi
  if ! ip netns exec mrb timeout 120 $tool -d mrb0 -x $gb -p $port -F "$@" $MR_ADDR_A > /tmp/pt-client.log 2>&1; then
    cat /tmp/pt-client.log /tmp/pt-server.log; echo "FAILED $name: client"; failed=1; kill $srv; wait $srv; return
  fi
  wait $srv || { cat /tmp/pt-server.log; echo "FAILED $name: server"; failed=1; return; }
  grep -Eq "^ *$size +$rows +" /tmp/pt-client.log || { cat /tmp/pt-client.log; echo "FAILED $name: no row $size x $rows"; failed=1; return; }
  da=$(( $(rcvd mra mra0) - a0 )) db=$(( $(rcvd mrb mrb0) - b0 ))
  case $mover in
    server) [ $da -ge $((size * rows)) ] || { echo "FAILED $name: mra0 took in $da B"; failed=1; return; };;
    client) [ $db -ge $((size * rows)) ] || { echo "FAILED $name: mrb0 took in $db B"; failed=1; return; };;
    both) [ $da -ge $((size * rows)) ] && [ $db -ge $((size * rows)) ] || { echo "FAILED $name: took in $da/$db B"; failed=1; return; };;
  esac
  echo "$name: in $da B (server) $db B (client);$(grep -E "^ *$size +$rows +" /tmp/pt-client.log | tr -s ' \t' ' ')"
}
pt write_bw    server 65536 50  ib_write_bw -s 65536 -n 50
pt read_bw     client 65536 50  ib_read_bw -s 65536 -n 50
pt send_bw     server 65536 50  ib_send_bw -s 65536 -n 50
pt fetch_add   both   8     50  ib_atomic_bw -A FETCH_AND_ADD -n 50
pt cmp_swap    both   8     50  ib_atomic_bw -A CMP_AND_SWAP -n 50
pt write_lat   both   64    50  ib_write_lat -s 64 -n 50
pt read_lat    client 64    50  ib_read_lat -s 64 -n 50
pt send_lat    both   64    50  ib_send_lat -s 64 -n 50
pt write_bw_q4 server 4096  200 ib_write_bw -s 4096 -n 50 -q 4
ip netns exec mra rdma statistic show link mra0/1
ip netns exec mrb rdma statistic show link mrb0/1
[ $failed = 0 ] || fail "some perftest runs failed (see above)"
mr_dmesg_clean
