#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# ibv_rc_pingpong between MetaRoCE and rdma_rxe, each as server and as client (the pair suite's test).
. "$(dirname "$0")/../lib.sh"
MR_BOTH_WAYS=1 bash "$MR_SELFTESTS/pair/30-rc-pingpong.sh"
