#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# MetaRoCE on our kernel's guest, rdma_rxe on Debian's (the pair suite's test).
. "$(dirname "$0")/../lib.sh"
bash "$MR_SELFTESTS/pair/20-rdma-dev.sh"
