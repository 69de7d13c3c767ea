#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A local protection error behind a request still in flight, on one device (RC QPs in loopback):
WRITE 1 MiB from MR A, WRITE 64 KiB from MR B, WRITE 4 KiB from MR A, then MR B deregistered at
once. The first WRITE's data is readable throughout, so it must complete successfully, even when
its last packets are still unacknowledged when the second request's data turns out unreadable
(the native transport sends the second right behind the first); the second completes with
IBV_WC_LOC_PROT_ERR and the third is flushed (rdma_rxe's order). When the connection is fast
enough to read the second request's data before the deregistration (its window grows from round
to round), all three succeed: a round that did not provoke the error, allowed, but at least one
round of the `ROUNDS` must provoke it.
Usage: native_order.py DEV GID_INDEX [ROUNDS]. Exits non-zero on the first wrong order, or if no
round provoked the error.
"""
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR

PORT = 1
RW = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
NAMES = {e.IBV_WC_SUCCESS: "SUCCESS", e.IBV_WC_LOC_PROT_ERR: "LOC_PROT_ERR",
         e.IBV_WC_WR_FLUSH_ERR: "WR_FLUSH_ERR"}


def rc_pair(ctx, pd, cq, gid, gid_index):
    cap = QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=1, max_recv_sge=1)
    a = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
    b = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
    for x, y in ((a, b), (b, a)):
        attr = QPAttr(port_num=PORT)
        attr.qp_access_flags = RW
        attr.path_mtu = e.IBV_MTU_1024
        attr.dest_qp_num = y.qp_num
        attr.max_dest_rd_atomic = attr.max_rd_atomic = 1
        attr.min_rnr_timer, attr.timeout, attr.retry_cnt, attr.rnr_retry = 12, 14, 7, 7
        attr.ah_attr = AHAttr(port_num=PORT, is_global=1, gr=GlobalRoute(dgid=gid, sgid_index=gid_index))
        x.to_rts(attr)
    return a, b


def main():
    dev, gid_index = sys.argv[1], int(sys.argv[2])
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    ctx = Context(name=dev)
    gid = ctx.query_gid(PORT, gid_index)
    pd = PD(ctx)
    big = 1 << 20
    mra = MR(pd, big, e.IBV_ACCESS_LOCAL_WRITE)
    target = MR(pd, 2 * big, RW)
    provoked = 0
    for r in range(rounds):
        cq = CQ(ctx, 16)
        a, _b = rc_pair(ctx, pd, cq, gid, gid_index)
        mrb = MR(pd, 64 * 1024, e.IBV_ACCESS_LOCAL_WRITE)
        for i, (mr, n, off) in enumerate(((mra, big, 0), (mrb, 64 * 1024, big), (mra, 4096, big + 65536))):
            wr = SendWR(wr_id=i, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(mr.buf, n, mr.lkey)],
                        send_flags=e.IBV_SEND_SIGNALED)
            wr.set_wr_rdma(target.rkey, target.buf + off)
            a.post_send(wr)
        mrb.close()
        got, end = {}, time.monotonic() + 60
        while len(got) < 3 and time.monotonic() < end:
            n, wcs = cq.poll(3)
            for w in wcs[:n]:
                got[w.wr_id] = w.status
        order = [NAMES.get(got.get(i), str(got.get(i))) for i in range(3)]
        if order == ["SUCCESS"] * 3:
            print(f"ok: round {r}: SUCCESS x 3 (the data was read before the deregistration: not provoked)",
                  flush=True)
            continue
        if order != ["SUCCESS", "LOC_PROT_ERR", "WR_FLUSH_ERR"]:
            print(f"FAIL: round {r}: statuses {order}, expected SUCCESS, LOC_PROT_ERR, WR_FLUSH_ERR")
            sys.exit(1)
        provoked += 1
        print(f"ok: round {r}: SUCCESS, LOC_PROT_ERR, WR_FLUSH_ERR", flush=True)
    if provoked == 0:
        print(f"FAIL: no round of {rounds} provoked the local error")
        sys.exit(1)


main()
