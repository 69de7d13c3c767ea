#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rdma_server / rdma_client (librdmacm's synchronous endpoint API: rdma_getaddrinfo,
# rdma_create_ep, rdma_get_request, one inline 16-byte SEND each way, rdma_disconnect). The server
# listens on the wildcard address (every device). Both ends must exit 0 and print "end 0"; one
# connection (five in a row in check-full). Server a between two MetaRoCE guests (both ways in
# check-full), each side as server and as client against rdma_rxe (MR_BOTH_WAYS).
MR_FULL_ONLY="make check's hour: the interop suite keeps rping, ucmatose and udaddy over rdma_cm"
. "$(dirname "$0")/../lib.sh"
mr_rdma_dev || fail "RDMA device"
port=19020 failed=0 n=1
[ -n "${MR_FULL:-}" ] && n=5
both=${MR_BOTH_WAYS:-${MR_FULL:-}}
for srole in a ${both:+b}; do
  [ "$MR_ROLE" = "$srole" ] && me=server || me=client
  for ((i = 1; i <= n; i++)); do
    port=$((port + 1)) t0=$SECONDS
    mr_cm_pair "rdma-server-$srole-$i" "$srole" $port rdma_server -p $port -- rdma_client -s "$(mr_peer)" -p $port
    rc=$?
    what="rdma_server/rdma_client connection $i, server $srole ($me)"
    if [ $rc != 0 ] || [[ $MR_OUT != *"rdma_$me: end 0" ]]; then
      echo "$MR_OUT"; echo "$MR_ERR"; echo "FAILED $what: exit $rc"; failed=1; continue
    fi
    echo "$what: ok, $((SECONDS - t0)) s"
  done
done
mr_our_kernel && rdma statistic show link $MR_DEV/1
mr_our_kernel && mr_dmesg_clean
[ $failed = 0 ] || fail "some rdma_server/rdma_client runs failed (see above)"
