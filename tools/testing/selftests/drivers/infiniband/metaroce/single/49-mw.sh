#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Memory windows (type 1 and type 2B) through the libmetaroce provider: mw_check.py drives binds,
# RDMA through windows with canary bytes around them, invalidation (local, by SEND with
# invalidate, by deallocation), the QP binding of type 2 windows, zero-based windows, the MR
# that cannot go while a window is bound, and bad binds (IBV_WC_MW_BIND_ERR); then rdma-core's
# own MWTest (pyverbs test_mr) on the same device; then RDMA FLUSH (flush_check.py: FLUSH work
# requests written into the send ring, their completions and refusals). Loopback on one
# device in a namespace.
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
mr_two_devices
echo "GID index: mra0 $ga"

t0=$(date +%s)
ip netns exec mra timeout 300 /usr/bin/python3 "$MR_SELFTESTS/mw_check.py" mra0 "$ga" || fail "mw_check.py"
echo "mw_check.py: $(( $(date +%s) - t0 )) s"

t0=$(date +%s) dir=/tmp/pyverbs-mw
rm -rf "$dir"; mkdir -p "$dir"
cp -r /usr/share/doc/rdma-core/tests "$dir/" && gunzip -f "$dir"/tests/*.gz || fail "cannot copy the pyverbs tests"
(cd "$dir" && ip netns exec mra timeout 300 /usr/bin/python3 tests/run_tests.py --dev mra0 --port 1 --gid "$ga" -v -k MWTest) > "$dir/log" 2>&1
cat "$dir/log"
ran=$(sed -n 's/^Ran \([0-9]*\) tests.*/\1/p' "$dir/log")
grep -qE '^OK( |$)' "$dir/log" || fail "rdma-core MWTest did not pass"
skips=$(grep -c "skipped" "$dir/log" || true)
# test_reg_mw_wrong_type is the only one that may skip (type 3 refused with EOPNOTSUPP would).
[ "${ran:-0}" -ge 7 ] && [ "$skips" -le 1 ] || fail "rdma-core MWTest: ran ${ran:-0}, skipped $skips"
echo "rdma-core MWTest: $ran run, $skips skipped, $(( $(date +%s) - t0 )) s"

t0=$(date +%s)
ip netns exec mra timeout 300 /usr/bin/python3 "$MR_SELFTESTS/flush_check.py" local mra0 "$ga" --ours || fail "flush_check.py"
echo "flush_check.py: $(( $(date +%s) - t0 )) s"

n=$(ip netns exec mra rdma res show mr 2>/dev/null | grep -c "dev mra0" || true)
echo "mra0: MRs left after the runs: $n"
[ "$n" = 0 ] || fail "mra0: $n MR(s) left after the processes exited"
mr_dmesg_clean
