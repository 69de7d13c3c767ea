#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Registration makes ib_mad open port 1's GSI QP (QP1) through the driver's kernel verbs: no
# "Couldn't open port" or other ib_mad error, `rdma res` shows QP 1 (GSI, RTS) with its CQ and PD
# on mr0, a user PD and CQ work through libmetaroce, and `rdma link delete` leaves no object behind.
. "$(dirname "$0")/../lib.sh"
[ -n "${MR_FULL:-}" ] || skip "make check-full only (make check's hour: 41-mad sends and receives through the same GSI QP)"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
trap mr_teardown EXIT
mr_veth_up

rdma link add mr0 type metaroce netdev v0 || fail "rdma link add mr0"
bad=$(dmesg | grep -E "Couldn't (open|start|create|change|post)|ib_mad.*(error|fail)|Failed to request completion")
[ -z "$bad" ] || { echo "$bad"; fail "ib_mad could not open mr0's port"; }

qp=$(rdma res show qp link mr0/1) || fail "rdma res show qp link mr0/1"
echo "$qp"
grep -Eq 'lqpn 1 .*type GSI .*state RTS' <<<"$qp" || fail "no GSI QP 1 in RTS on mr0/1"
[ "$(grep -c lqpn <<<"$qp")" = 1 ] || fail "expected exactly one QP on mr0/1"
cq=$(rdma res show cq dev mr0) || fail "rdma res show cq dev mr0"
echo "$cq"
grep -Eq 'dev mr0 .*cqe [0-9]+ .*users [1-9]' <<<"$cq" || fail "no CQ used by the GSI QP on mr0"
pd=$(rdma res show pd dev mr0) || fail "rdma res show pd dev mr0"
echo "$pd"
grep -Eq 'dev mr0 .*users [1-9]' <<<"$pd" || fail "no PD in use on mr0"
sum=$(rdma res show mr0) || fail "rdma res show mr0"
echo "$sum"
for r in pd cq qp; do grep -Eq " $r 1( |\$)" <<<"$sum" || fail "resource summary does not count one $r"; done

# User objects through libmetaroce (42-uverbs covers them in depth): a PD and a CQ with its ring.
/usr/bin/python3 -c '
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
ctx = Context(name="mr0")
pd = PD(ctx)
cq = CQ(ctx, 16)
print("user PD and CQ of", cq.cqe, "entries")
' || fail "user verbs on mr0 did not behave as expected"

rdma link delete mr0 || fail "rdma link delete mr0"
mr_no_dev mr0 || fail "mr0 still present after delete"
left=$(rdma res show qp; rdma res show cq; rdma res show pd)
grep -q mr0 <<<"$left" && { echo "$left"; fail "objects of mr0 left after delete"; }
mr_dmesg_clean
dmesg | grep -E 'metaroce|mr0'
