#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# ib_write_bw across the link: perftest's report plus the receiving netdev's byte counter prove
# that the data crossed the wire (perftest's own Gb/s figure is not trusted under TCG).
. "$(dirname "$0")/../lib.sh"
size=65536 iters=200
args=(-d rxe0 -x 1 -s "$size" -n "$iters" -F --report_gbits)
rx0=$(mr_netstat eth0 rx_bytes) tx0=$(mr_netstat eth0 tx_bytes)
if [ "$MR_ROLE" = a ]; then out=$(ib_write_bw "${args[@]}" 2>&1)
else out=$(mr_retry 30 ib_write_bw "${args[@]}" "$(mr_peer)" 2>&1); fi
echo "$out"
echo "$out" | grep -Eq "^ *$size +$iters +" || fail "no result row for $size bytes x $iters"
rx=$(( $(mr_netstat eth0 rx_bytes) - rx0 )) tx=$(( $(mr_netstat eth0 tx_bytes) - tx0 ))
echo "eth0 moved rx=$rx tx=$tx bytes"
# The client (b) writes into the server's (a) memory.
if [ "$MR_ROLE" = a ]; then min=$rx; else min=$tx; fi
[ "$min" -ge $((size * iters)) ] || fail "only $min bytes crossed the link, expected >= $((size * iters))"
