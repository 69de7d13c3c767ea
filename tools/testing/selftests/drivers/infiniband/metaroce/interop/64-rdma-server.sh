#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rdma_server/rdma_client between MetaRoCE and rdma_rxe, each as server and as client (the pair
# suite's test). In check-full only: in a dev run of the merged tree, right after
# 63-rstream's hang, rdma_rxe's rdma_server timed out after a passing MetaRoCE client (open, see
# README; it passed both ways in the helper's earlier runs). Two MetaRoCE guests pass.
. "$(dirname "$0")/../lib.sh"
[ -n "${MR_FULL:-}" ] || skip "check-full only: rdma_rxe's rdma_server timed out once after a MetaRoCE client (open)"
MR_BOTH_WAYS=1 bash "$MR_SELFTESTS/pair/64-rdma-server.sh"
