#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Completion-event moderation (ibv_modify_cq through libmetaroce; admin-guide.rst, "CQ
# moderation"): cq_moderation.c, two RC QPs of mr0 WRITing to each other through its own GID,
# times each completion event against its completion: moderation off (the event comes with the
# completion), a count of 4 (no event for three completions in 300 ms, one with the fourth), a
# period of 60 ms with a count out of reach (the event not before 40 ms), and a completion in
# error told at once whatever the count. The device reports its limits (cq_mod_caps).
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
prog=$(dirname "$0")/cq_moderation
[ -x "$prog" ] || fail "$prog is not built (the collection's TEST_GEN_FILES)"
mr_fresh
trap mr_teardown EXIT
mr_veth_up

rdma link add mr0 type metaroce netdev v0 || fail "rdma link add mr0"
mr_wait 10 mr_port_is mr0 PORT_ACTIVE || fail "mr0 port not active"
mr_wait 10 test -n "$(mr_gid_index mr0 $MR_ADDR_A)" || fail "no RoCE v2 GID on mr0"
out=$(timeout 120 "$prog" mr0 "$(mr_gid_index mr0 $MR_ADDR_A)" 2>&1); rc=$?
echo "$out"
[ $rc = 0 ] || fail "cq_moderation on mr0 (exit $rc)"
grep -q 'max_cq_count 65535, max_cq_period 65535 us' <<<"$out" || fail "cq_mod_caps not the driver's limits"
mr_dmesg_clean
