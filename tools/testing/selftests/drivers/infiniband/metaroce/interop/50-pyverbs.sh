#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rdma-core 44's own test suite (pyverbs) in both guests at once, each against its own device:
# MetaRoCE on our kernel, rdma_rxe on Debian's stock kernel, measured by the same runner. The
# suite's traffic tests are loopback (to the device's own GID). MetaRoCE must have no failure and
# no error; rdma_rxe's result is reported for comparison (it fails test_resize_cq on this kernel).
. "$(dirname "$0")/../lib.sh"
ip link set lo up
mr_rdma_dev || fail "no RDMA device"
mr_pyverbs "$MR_DEV" "$MR_GID" || fail "pyverbs suite did not complete"
if mr_our_kernel; then
  [ "$PV_FAIL" = 0 ] || fail "MetaRoCE: $PV_FAIL pyverbs failures or errors: $PV_FAILED"
  # A floor, not "at least one": a feature that quietly turns into EOPNOTSUPP makes its tests
  # skip, which must fail here (94 pass on MetaRoCE and on rdma_rxe, 2026-12-03).
  [ "$PV_OK" -ge "${MR_PYVERBS_MIN:-94}" ] || fail "MetaRoCE: $PV_OK pyverbs tests passed, fewer than ${MR_PYVERBS_MIN:-94}"
  mr_dmesg_clean
fi
