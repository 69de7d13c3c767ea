#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rping (rdma_cm; RC SEND, RDMA READ and RDMA WRITE) across the QEMU link with -v: every line the
# server prints after its RDMA READ of the client's buffer and every line the client prints after
# the server's RDMA WRITE back must be rping's own pattern for that ping, one line per ping, in
# order and nothing else (the expected lines are generated here); the client also compares the
# buffers itself (-V). Runs: `rping -v -C 100` (64 B, IPv4) and 10 pings of 4000 B over IPv6 (each
# READ and WRITE spans four packets at MTU 1024); check-full adds 500 x 64 B, 20 x 65535 B and
# 100 x 64 B over IPv6. Between two MetaRoCE guests (suite pair) guest a serves (both ways in
# check-full); against Debian's rdma_rxe (suite interop, MR_BOTH_WAYS) each guest serves once and
# connects once.
. "$(dirname "$0")/../lib.sh"
# make check runs it against rdma_rxe both ways (interop); two MetaRoCE guests in check-full (CI time).
[ -n "${MR_BOTH_WAYS:-}${MR_FULL:-}" ] || skip "two MetaRoCE guests: make check-full (make check runs the interop suite's copy)"
mr_rdma_dev || fail "RDMA device"

# rping's ping buffer for pings 0 .. $1-1 of $2 bytes, one line each prefixed with $3:
# "rdma-ping-N: " then characters from 'A' + N mod 58 cycling through 'A'..'z', $2 - 1 in all.
rping_expect() {
  awk -v n="$1" -v s="$2" -v p="$3" 'BEGIN {
    for (c = 65; c <= 122; c++) abc = abc sprintf("%c", c)
    cyc = abc; while (length(cyc) < s + 58) cyc = cyc cyc
    for (i = 0; i < n; i++) {
      line = sprintf("rdma-ping-%d: ", i)
      print p line substr(cyc, i % 58 + 1, s - 1 - length(line))
    }
  }'
}

port=18960 failed=0
runs=("4 100 64" "6 10 4000")
[ -n "${MR_FULL:-}" ] && runs+=("4 500 64" "4 20 65535" "6 100 64")
both=${MR_BOTH_WAYS:-${MR_FULL:-}}
for srole in a ${both:+b}; do
  [ "$MR_ROLE" = "$srole" ] && me=server || me=client
  [ $me = server ] && prefix='server ping data: ' || prefix='ping data: '
  for run in "${runs[@]}"; do
    set -- $run; fam=$1 count=$2 size=$3
    if [ "$fam" = 6 ]; then self=$(mr_self6) peer=$(mr_peer6); else self=$(mr_self) peer=$(mr_peer); fi
    port=$((port + 1)) t0=$SECONDS
    mr_cm_pair "rping-$srole-$fam-$count-$size" "$srole" $port \
      rping -s -v -a "$self" -p $port -S "$size" -- \
      rping -c -v -V -a "$peer" -p $port -C "$count" -S "$size"
    rc=$?
    what="rping IPv$fam $count x $size B, server $srole ($me)"
    expect=$(rping_expect "$count" "$size" "$prefix")
    if [ $rc != 0 ] || [ "$MR_OUT" != "$expect" ]; then
      diff <(echo "$expect") <(echo "$MR_OUT") | head -c 3000; echo; echo "$MR_ERR"
      echo "FAILED $what: exit $rc, $(grep -c "^$prefix" <<<"$MR_OUT") ping lines, not the $count expected ones"
      failed=1; continue
    fi
    echo "$what: ok, $count/$count ping lines as expected, $((SECONDS - t0)) s"
  done
done
mr_our_kernel && rdma statistic show link $MR_DEV/1
mr_our_kernel && mr_dmesg_clean
[ $failed = 0 ] || fail "some rping runs failed (see above)"
