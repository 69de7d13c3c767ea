#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# NVMe over Fabrics between MetaRoCE and Debian's rdma_rxe, each guest the target once.
# make check-full only since 2026-12-01 (225 s under TCG; make check took ~65 min on a slower
# machine): it passed in every make check from 2026-11-30 to the make check of 0fdadd6.
. "$(dirname "$0")/../lib.sh"
[ -n "${MR_FULL:-}" ] || { echo "SKIP: make check-full only (225 s under TCG)"; exit 4; }
MR_BOTH_WAYS=1 bash "$MR_SELFTESTS/pair/45-nvmeof.sh"
