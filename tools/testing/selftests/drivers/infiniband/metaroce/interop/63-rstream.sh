#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rstream between MetaRoCE and rdma_rxe, each as server and as client (the pair suite's test).
# In check-full only: with rdma_rxe serving, the rxe server sometimes waits forever after the
# MetaRoCE client exited (seen in a dev run of make check's 100 x 10000 B: the client passed, the
# server hit its timeout; open, see README). MetaRoCE serving rxe and two MetaRoCE guests pass.
. "$(dirname "$0")/../lib.sh"
[ -n "${MR_FULL:-}" ] || skip "check-full only: rdma_rxe's rstream server can hang after a MetaRoCE client (open)"
MR_BOTH_WAYS=1 bash "$MR_SELFTESTS/pair/63-rstream.sh"
