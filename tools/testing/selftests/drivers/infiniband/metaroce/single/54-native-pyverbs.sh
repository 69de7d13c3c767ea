#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rdma-core's own test suite (python3-pyverbs 44) on a `metaroce-native` device: its RC traffic tests
# (loopback on one device: one native connection from the device to itself) run over the native
# transport, UC and UD over RoCEv2 (remote invalidation of a type 2 memory window travels as the
# native SEND with invalidate). Prints every test's line and the skip reasons; fails on any failure
# or error. make check-full only (about 10 minutes under TCG); interop/50-pyverbs runs the
# suite on a RoCEv2 device in make check.
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
[ -n "${MR_FULL:-}" ] || [ -n "${MR_TESTBED:-}" ] || skip "make check-full only (about 10 minutes under TCG)"
mr_fresh
mr_veth_up
trap 'rdma link delete mrn0 2>/dev/null; ip link del v0 2>/dev/null' EXIT
rdma link add mrn0 type metaroce-native netdev v0 || fail "add mrn0"
mr_wait 10 test -n "$(mr_gid_index mrn0 $MR_ADDR_A)" || fail "no RoCE v2 GID for $MR_ADDR_A"
gid=$(mr_gid_index mrn0 $MR_ADDR_A)
mr_pyverbs mrn0 $gid || fail "pyverbs did not run to its summary"
rdma statistic show link mrn0/1
[ "${PV_FAIL:-0}" = 0 ] || fail "pyverbs on a native device: $PV_FAIL failed or errors: $PV_FAILED"
echo "$PV_OK passed"
# A floor, not "at least one": a feature that quietly turns into EOPNOTSUPP makes its tests skip,
# which must fail here. 87 pass on a native device (2026-12-05; the RoCEv2 device's 94 include ODP's
# seven, which native devices do not offer).
[ "$PV_OK" -ge "${MR_PYVERBS_MIN:-87}" ] || fail "$PV_OK pyverbs tests passed, fewer than ${MR_PYVERBS_MIN:-87}"
mr_dmesg_clean
