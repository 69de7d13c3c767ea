#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The other QP types and SRQs between MetaRoCE and Debian's rdma_rxe, each guest as server and as
# client, received buffers validated (-c): ibv_ud_pingpong (address handles, GRH), ibv_uc_pingpong
# and ibv_srq_pingpong (four QPs on one SRQ) over IPv4, ibv_rc_pingpong over IPv6 (the RoCE v2
# GID of each guest's 2001:db8:: address), and perftest's ib_send_bw over UD and UC.
. "$(dirname "$0")/../lib.sh"
mr_rdma_dev || fail "RDMA device"
# The RoCE v2 GID index of this guest's IPv6 address.
gid6=$(mr_gid_index "$MR_DEV" "2001:0db8:0000:0000:0000:0000:0000:000$([ "$MR_ROLE" = a ] && echo 1 || echo 2)")
[ -n "$gid6" ] || fail "no RoCE v2 GID for this guest's IPv6 address on $MR_DEV"
port=18900 failed=0
for srole in a b; do
  # NAME GID TOOL ARGS... (the expected byte count is size x iters x 2, as the tools print it)
  for run in "ud 512 20 $MR_GID ibv_ud_pingpong" "uc 4096 10 $MR_GID ibv_uc_pingpong" \
             "srq 4096 10 $MR_GID ibv_srq_pingpong -q 4" "rc-ipv6 4096 10 $gid6 ibv_rc_pingpong"; do
    set -- $run; name=$1 size=$2 iters=$3 gid=$4; shift 4
    port=$((port + 1))
    mr_pair_run "qt-$name-$srole" "$srole" $port "$@" -d "$MR_DEV" -g "$gid" -c -s "$size" -n "$iters"
    rc=$?
    line=$(grep -E 'bytes in' <<<"$MR_OUT" | head -n 1)
    want=$((size * iters * 2))
    if [ $rc != 0 ] || ! grep -q "^$want bytes in" <<<"$line"; then
      echo "$MR_OUT" | tail -n 15; echo "FAILED $name (server $srole): exit $rc, expected $want bytes"; failed=1; continue
    fi
    echo "$name, server $srole: $line"
  done
  for c in UD UC; do
    port=$((port + 1))
    size=$([ $c = UD ] && echo 512 || echo 16384)
    rx0=$(mr_netstat eth0 rx_bytes)
    mr_pair_run "qt-bw-$c-$srole" "$srole" $port ib_send_bw -d "$MR_DEV" -x "$MR_GID" -c $c -s $size -n 20 -F
    rc=$?
    rx=$(( $(mr_netstat eth0 rx_bytes) - rx0 ))
    if [ $rc != 0 ]; then echo "$MR_OUT" | tail -n 15; echo "FAILED send_bw -c $c (server $srole): exit $rc"; failed=1; continue; fi
    if [ "$MR_ROLE" = "$srole" ]; then
      # UD and UC may drop messages; the server must still have taken in most of them.
      [ "$rx" -ge $((size * 10)) ] || { echo "FAILED send_bw -c $c (server $srole): took in $rx B"; failed=1; continue; }
      echo "send_bw -c $c, server $srole: server took in $rx B"
    else
      grep -Eq "^ *$size +20 +" <<<"$MR_OUT" || { echo "$MR_OUT" | tail -n 15; echo "FAILED send_bw -c $c (server $srole): no result row"; failed=1; continue; }
      echo "send_bw -c $c, server $srole: $(grep -E "^ *$size +20 +" <<<"$MR_OUT" | tr -s ' ')"
    fi
  done
done
mr_our_kernel && rdma statistic show link $MR_DEV/1
mr_our_kernel && mr_dmesg_clean
[ $failed = 0 ] || fail "some runs failed (see above)"
