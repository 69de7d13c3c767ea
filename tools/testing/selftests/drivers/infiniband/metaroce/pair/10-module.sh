#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# metaroce.ko loads on our kernel (Debian's peer kernel has rdma_rxe instead and skips this).
MR_FULL_ONLY="make check's hour: 20-rdma-dev's rdma link add loads the module, and single/10-module checks loading and unloading"
. "$(dirname "$0")/../lib.sh"
mr_our_kernel || skip "peer runs $(uname -r), not MetaRoCE's kernel"
bash "$MR_SELFTESTS/single/10-module.sh"
