#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# metaroce.ko loads on our kernel (Debian's peer kernel has rdma_rxe instead and skips this).
. "$(dirname "$0")/../lib.sh"
mr_our_kernel || skip "peer runs $(uname -r), not MetaRoCE's kernel"
bash "$MR_SELFTESTS/single/10-module.sh"
