#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Explicit on-demand paging (ODP) MRs on a RoCEv2 device: rdma-core 44's own ODP tests (pyverbs
# tests.test_odp; implicit ODP, prefetch (librxe 44 has no ibv_advise_mr), XRC and huge pages skip,
# as on rdma_rxe) and odp_check.py, which makes the pages fault: ODP MRs over untouched memory and
# memory dropped with MADV_DONTNEED, RDMA WRITE/READ/atomics/SEND (RC, UD) into and out of them,
# and WRITEs while another thread keeps dropping the target's pages. Data must land intact, the
# faults must be counted (odp_faults), and the console must stay clean (KASAN, lockdep).
. "$(dirname "$0")/../lib.sh"
[ -n "${MR_FULL:-}" ] || skip "make check-full only (make check's hour: its ~3 minutes of rdma-core's ODP tests; on-demand paging is a feature no other make-check test needs)"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
mr_veth_up
trap 'rdma link delete mr0 2>/dev/null; ip link del v0 2>/dev/null' EXIT
rdma link add mr0 type metaroce netdev v0 || fail "add mr0"
for ((i = 0; i < 100; i++)); do gid=$(mr_gid_index mr0 $MR_ADDR_A); [ -n "$gid" ] && break; sleep 0.1; done
[ -n "$gid" ] || fail "no RoCE v2 GID for $MR_ADDR_A"
ibv_devinfo -v -d mr0 | grep -A4 general_odp_caps
dir=/tmp/pyverbs-odp; rm -rf "$dir"; mkdir -p "$dir"
cp -r /usr/share/doc/rdma-core/tests "$dir/" && gunzip -f "$dir"/tests/*.gz || fail "cannot copy the pyverbs tests"
(cd "$dir" && timeout 600 /usr/bin/python3 tests/run_tests.py --dev mr0 --port 1 --gid "$gid" -v test_odp) > "$dir/log" 2>&1
cat "$dir/log"
grep -qE '^OK( |$)' "$dir/log" || fail "pyverbs test_odp: not OK"
passed=$(grep -c ' \.\.\. ok$' "$dir/log")
[ "$passed" -ge 7 ] || fail "pyverbs test_odp: $passed tests passed, expected the 7 that rdma_rxe passes"
echo "pyverbs test_odp: $passed passed"
timeout 600 /usr/bin/python3 "$MR_SELFTESTS/odp_check.py" mr0 "$gid" || fail "odp_check.py"
rdma statistic show link mr0/1
mr_dmesg_clean
