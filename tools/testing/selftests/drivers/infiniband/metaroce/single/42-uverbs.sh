#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The libmetaroce provider (rdma-core's pyverbs through Debian's /usr/bin/python3) drives mr0's
# user objects that need no QP: device and port queries, a PD, user MRs over pinned memory with
# several access sets (keys, rkey only with remote rights, invalid combinations refused), CQs
# whose ring the provider mmaps (the create response's mminfo), polled empty, armed, resized and
# destroyed in numbers; ibv_devinfo -v on the device; rdma res shows the MRs while they exist
# and nothing is left afterwards; dmesg stays clean.
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
trap mr_teardown EXIT
mr_veth_up

rdma link add mr0 type metaroce netdev v0 || fail "rdma link add mr0"
mr_wait 10 mr_port_is mr0 PORT_ACTIVE || fail "mr0 port not active"
info=$(ibv_devinfo -v -d mr0) || fail "ibv_devinfo -v -d mr0"
grep -q 'transport:.*InfiniBand' <<<"$info" && grep -q 'max_cqe:' <<<"$info" || { echo "$info"; fail "ibv_devinfo -v output"; }

/usr/bin/python3 - <<'PY' || fail "user verbs on mr0"
import errno, sys
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ, CompChannel
from pyverbs.mr import MR
from pyverbs.pyverbs_error import PyverbsRDMAError
import pyverbs.enums as e

def check(cond, what):
    if not cond:
        sys.exit("FAIL: " + what)
    print("ok:", what)

def refused(fn, err, what):
    try:
        obj = fn()
    except PyverbsRDMAError as ex:
        check(ex.error_code == err, f"{what} refused with errno {ex.error_code} (want {err})")
        return
    obj.close()
    sys.exit("FAIL: " + what + " was accepted")

ctx = Context(name="mr0")
dattr = ctx.query_device()
check(dattr.vendor_id == 0xffffff and dattr.max_cqe >= 1024, f"query_device (vendor {dattr.vendor_id:#x}, max_cqe {dattr.max_cqe})")
pattr = ctx.query_port(1)
check(pattr.state == e.IBV_PORT_ACTIVE, "query_port: port 1 active")
pd = PD(ctx)

# MRs over page-crossing buffers with several access sets.
L, RW, RR, RA = e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE, e.IBV_ACCESS_REMOTE_READ, e.IBV_ACCESS_REMOTE_ATOMIC
sets = [0, L, L | RR, L | RW, L | RW | RR, L | RA, L | RW | RR | RA, L | e.IBV_ACCESS_RELAXED_ORDERING,
        L | e.IBV_ACCESS_MW_BIND]
mrs, keys = [], set()
for i, acc in enumerate(sets):
    mr = MR(pd, 3 * 4096 + 100 * i + 1, acc)
    remote = bool(acc & (RW | RR | RA))
    check(mr.lkey != 0 and mr.lkey not in keys, f"MR access {acc:#x}: lkey {mr.lkey:#x} new and non-zero")
    check((mr.rkey == mr.lkey) if remote else (mr.rkey == 0), f"MR access {acc:#x}: rkey {mr.rkey:#x}")
    keys.add(mr.lkey)
    mr.write(b"metaroce" * 8, 64, 4090)
    check(mr.read(64, 4090) == b"metaroce" * 8, f"MR access {acc:#x}: buffer still the process's memory")
    mrs.append(mr)
refused(lambda: MR(pd, 4096, RW), errno.EINVAL, "MR remote write without local write")
refused(lambda: MR(pd, 4096, RA), errno.EINVAL, "MR remote atomic without local write")
odp = MR(pd, 4096, L | RW | e.IBV_ACCESS_ON_DEMAND)
check(odp.lkey != 0 and odp.lkey not in keys and odp.rkey == odp.lkey, f"MR with on-demand paging: lkey {odp.lkey:#x}")
odp.close()
refused(lambda: MR(pd, 0, L | e.IBV_ACCESS_ON_DEMAND, implicit=True), errno.EOPNOTSUPP, "implicit on-demand paging MR")
import subprocess
res = subprocess.run(["rdma", "res", "show", "mr", "dev", "mr0"], capture_output=True, text=True).stdout
print(res)
check(res.count("mrlen") >= len(sets), f"rdma res shows {res.count('mrlen')} MRs")
for mr in mrs:
    mr.close()
# Registering and releasing again reuses keys without leaking pins.
for _ in range(8):
    MR(pd, 64 * 1024, L | RW).close()
check(True, "8 MR register/deregister rounds")

# CQs: the provider mmaps the ring from the create response's mminfo and checks its slot size.
cq = CQ(ctx, 100)
check(cq.cqe >= 100, f"CQ of 100 created with {cq.cqe} entries (ring mapped by the provider)")
n, wcs = cq.poll(4)
check(n == 0, "new CQ polls empty")
cq.req_notify()
cq.req_notify(True)
check(True, "req_notify (next and solicited)")
cq.resize(600)
check(cq.cqe >= 600, f"CQ resized to {cq.cqe} entries (new ring mapped)")
n, wcs = cq.poll(4)
check(n == 0, "resized CQ polls empty")
cq.resize(10)
check(10 <= cq.cqe < 600, f"CQ shrunk to {cq.cqe} entries")
try:
    cq.resize(dattr.max_cqe + 1)
    sys.exit("FAIL: resize above max_cqe accepted")
except PyverbsRDMAError as ex:
    check(ex.error_code == errno.EINVAL and 10 <= cq.cqe < 600, f"resize above max_cqe refused ({ex.error_code}), CQ intact")
check(cq.poll(1)[0] == 0, "CQ still usable after a refused resize")
cq.close()
ch = CompChannel(ctx)
cq = CQ(ctx, 8, None, ch, 0)
cq.req_notify()
check(cq.poll(1)[0] == 0, "CQ on a completion channel, armed, empty")
cq.close()
ch.close()
refused(lambda: CQ(ctx, dattr.max_cqe + 1), errno.EINVAL, "CQ above max_cqe")
cqs = [CQ(ctx, 1 + 67 * i) for i in range(16)]
check(all(c.cqe >= 1 + 67 * i for i, c in enumerate(cqs)), "16 CQs of different sizes")
for c in cqs:
    c.close()
pd.close()
ctx.close()
print("done")
PY

left=$(rdma res show mr dev mr0; rdma res show cq dev mr0 | grep -v 'comm \[ib_core\]')
grep -q 'mrlen' <<<"$left" && { echo "$left"; fail "MRs left after the process closed its context"; }
grep -q 'comm python' <<<"$left" && { echo "$left"; fail "CQs left after the process closed its context"; }

# A process that exits without destroying anything: uverbs cleans up (entries, pins, rings).
/usr/bin/python3 -c '
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
import os
ctx = Context(name="mr0"); pd = PD(ctx); cq = CQ(ctx, 50); mr = MR(pd, 8192, 7)
os._exit(0)
' || fail "abrupt exit"
rdma link delete mr0 || fail "rdma link delete mr0"
mr_no_dev mr0 || fail "mr0 still present after delete"
mr_dmesg_clean
