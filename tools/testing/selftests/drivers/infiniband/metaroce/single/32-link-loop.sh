#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Rounds of `rdma link add`/`rdma link delete` on one netdev leave no device, no leak report and
# no warning.
. "$(dirname "$0")/../lib.sh"
[ -n "${MR_FULL:-}" ] || skip "make check-full only (make check's hour: a soak of add/delete rounds; 30, 31, 33 and 34 create and delete devices in make check)"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
trap mr_teardown EXIT
mr_veth_up
# A minimum of rounds always runs, whatever the machine's speed (a sanitizer kernel under TCG
# takes ~10 s per round now that every device brings up ib_mad's QP1); more rounds, up to 100,
# run while the time budget lasts: `make check` gives 20 s, `make check-full` (MR_FULL) 1200 s,
# enough for all 100 under the release kernel. The budget only caps the extra work; it is
# never a pass/fail criterion.
min=${MR_LINK_MIN_ROUNDS:-5} rounds=${MR_LINK_ROUNDS:-100}
budget=${MR_LINK_BUDGET:-$([ -n "${MR_FULL:-}" ] && echo 1200 || echo 20)}
start=$(date +%s)
for ((i = 0; i < rounds; i++)); do
  rdma link add mr0 type metaroce netdev v0 || fail "add in round $i"
  rdma link delete mr0 || fail "delete in round $i"
  (( i + 1 < min || $(date +%s) - start < budget )) || { i=$((i + 1)); break; }
done
echo "$i of $rounds rounds in $(($(date +%s) - start)) s (minimum $min)"
mr_no_dev mr0 || fail "mr0 left behind"
[ -z "$(ls /sys/class/infiniband)" ] || fail "devices left: $(ls /sys/class/infiniband)"
# Leaks of all but the last few rounds are old enough to show in one scan.
mr_kmemleak_ours || true
mr_dmesg_clean
