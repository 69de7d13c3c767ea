#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Shared receive queue verbs through the libmetaroce provider (pyverbs), on one device:

- create, query (sizes granted at least as asked, limit disarmed);
- requests posted to the SRQ's ring survive a resize (IBV_SRQ_MAX_WR: new ring, its mminfo written
  where the provider.s command points), a resize below the posted count fails with EINVAL;
- the limit (IBV_SRQ_LIMIT) fires IBV_EVENT_SRQ_LIMIT_REACHED once when a SEND takes a request and
  fewer than the limit remain, and is disarmed afterwards (query reports 0);
- two RC QPs receiving through the one SRQ (loopback on the device), requests taken in posting
  order whichever QP a message arrives on, every payload checked;
- a request with an L_Key that names no memory region completes in error on the QP that took it,
  and the request behind it is not flushed with that QP: the other QP receives into it;
- a UC QP and a UD QP (GRH area) receive through an SRQ.

Usage: srq_check.py DEV GID_INDEX. Prints one line per check; exits non-zero on the first failure.
"""
import errno
import sys

import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

MSG = 64
PORT = 1


def ok(what):
    print(f"ok: {what}", flush=True)


def fail(what):
    print(f"FAIL: {what}", flush=True)
    sys.exit(1)


def expect_errno(what, err, fn):
    try:
        fn()
    except PyverbsRDMAError as ex:
        if ex.error_code == err:
            ok(f"{what} -> {errno.errorcode[err]}")
            return
        fail(f"{what}: errno {ex.error_code}, expected {err}")
    fail(f"{what}: succeeded, expected {errno.errorcode[err]}")


def poll(cq, n, what):
    got = []
    for _ in range(200000):
        nc, wcs = cq.poll(n - len(got))
        got += wcs[:nc]
        if len(got) == n:
            return got
    fail(f"{what}: {len(got)} of {n} completions")


def main():
    dev, gid_index = sys.argv[1], int(sys.argv[2])
    ctx = Context(name=dev)
    attr = ctx.query_device()
    if attr.max_srq == 0 or attr.max_srq_wr == 0 or attr.max_srq_sge == 0:
        fail(f"device limits max_srq {attr.max_srq} max_srq_wr {attr.max_srq_wr} max_srq_sge {attr.max_srq_sge}")
    if not attr.device_cap_flags & e.IBV_DEVICE_SRQ_RESIZE:
        fail("IBV_DEVICE_SRQ_RESIZE not reported")
    ok(f"device: max_srq {attr.max_srq}, max_srq_wr {attr.max_srq_wr}, max_srq_sge {attr.max_srq_sge}, SRQ_RESIZE")
    pd = PD(ctx)
    cq = CQ(ctx, 64)
    srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=8, max_sge=2)))
    q = srq.query()
    if q.max_wr < 8 or q.max_sge < 2 or q.srq_limit != 0:
        fail(f"query after create: max_wr {q.max_wr} max_sge {q.max_sge} limit {q.srq_limit}")
    ok(f"create/query: max_wr {q.max_wr} max_sge {q.max_sge} limit {q.srq_limit}")
    expect_errno("create with max_wr above the device's", errno.EINVAL,
                 lambda: SRQ(pd, SrqInitAttr(SrqAttr(max_wr=attr.max_srq_wr + 1, max_sge=1))))

    access = e.IBV_ACCESS_LOCAL_WRITE
    nbuf = 16
    rmr = MR(pd, MSG * nbuf, access)
    smr = MR(pd, MSG * nbuf, access)

    def post_srq(i):
        # Two SGEs per request: halves of buffer i.
        h = MSG // 2
        sges = [SGE(rmr.buf + i * MSG, h, rmr.lkey), SGE(rmr.buf + i * MSG + h, h, rmr.lkey)]
        srq.post_recv(RecvWR(wr_id=i, num_sge=2, sg=sges))

    posted = 6
    for i in range(posted):
        post_srq(i)
    ok(f"{posted} requests posted to the SRQ ring")
    expect_errno("resize below the posted requests", errno.EINVAL,
                 lambda: srq.modify(SrqAttr(max_wr=2), e.IBV_SRQ_MAX_WR))
    srq.modify(SrqAttr(max_wr=32), e.IBV_SRQ_MAX_WR)
    q = srq.query()
    if q.max_wr < 32:
        fail(f"resize: max_wr {q.max_wr}")
    ok(f"resized to max_wr {q.max_wr} with {posted} requests posted")
    expect_errno("limit above the SRQ's size", errno.EINVAL,
                 lambda: srq.modify(SrqAttr(srq_limit=q.max_wr + 1), e.IBV_SRQ_LIMIT))
    srq.modify(SrqAttr(srq_limit=4), e.IBV_SRQ_LIMIT)
    if srq.query().srq_limit != 4:
        fail("limit not armed")
    ok("limit armed at 4")

    # Two receiving QPs share the SRQ; one sender talks to both (loopback through the device).
    gid = ctx.query_gid(PORT, gid_index)

    def rc_qp(with_srq):
        cap = QPCap(max_send_wr=16, max_recv_wr=0 if with_srq else 16, max_send_sge=1, max_recv_sge=1)
        return QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, srq=srq if with_srq else None, cap=cap))

    recv = [rc_qp(True), rc_qp(True)]
    send = [rc_qp(False), rc_qp(False)]

    def connect(qp, peer):
        a = QPAttr(port_num=PORT)
        a.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
        a.path_mtu = e.IBV_MTU_1024
        a.dest_qp_num = peer.qp_num
        a.rq_psn = 0
        a.sq_psn = 0
        a.max_dest_rd_atomic = 1
        a.max_rd_atomic = 1
        a.min_rnr_timer = 12
        a.timeout = 14
        a.retry_cnt = 7
        a.rnr_retry = 7
        a.ah_attr = AHAttr(port_num=PORT, is_global=1, gr=GlobalRoute(dgid=gid, sgid_index=gid_index))
        qp.to_rts(a)

    for r, s in zip(recv, send):
        connect(r, s)
        connect(s, r)
    ok("two RC QPs with the SRQ connected")

    def send_msgs(count, base):
        for k in range(count):
            i = base + k
            data = bytes([(i * 7 + j) & 0xff for j in range(MSG)])
            smr.write(data, MSG, i * MSG)
            s = send[k % 2]
            s.post_send(SendWR(wr_id=1000 + i, opcode=e.IBV_WR_SEND, num_sge=1,
                               sg=[SGE(smr.buf + i * MSG, MSG, smr.lkey)],
                               send_flags=e.IBV_SEND_SIGNALED))
        wcs = poll(cq, 2 * count, f"{count} sends")
        recvs = {}
        for wc in wcs:
            if wc.status != e.IBV_WC_SUCCESS:
                fail(f"completion of wr_id {wc.wr_id}: status {wc.status}")
            if wc.opcode == e.IBV_WC_RECV:
                if wc.byte_len != MSG:
                    fail(f"receive {wc.wr_id}: byte_len {wc.byte_len}")
                recvs[wc.wr_id] = wc.qp_num
        return recvs

    def check_payloads(ids):
        # Messages from the two senders may arrive in either order, and each takes the SRQ's
        # oldest request then: the buffers of requests `ids` must hold exactly messages `ids`.
        got = sorted(rmr.read(MSG, i * MSG) for i in ids)
        want = sorted(bytes([(i * 7 + j) & 0xff for j in range(MSG)]) for i in ids)
        if got != want:
            fail(f"payloads of requests {list(ids)} differ from the messages sent")

    # 3 SENDs take the 3 oldest requests: 3 remain, fewer than the limit of 4.
    recvs = send_msgs(3, 0)
    if sorted(recvs) != [0, 1, 2]:
        fail(f"received wr_ids {sorted(recvs)}, expected [0, 1, 2] (the oldest requests)")
    if set(recvs.values()) != {recv[0].qp_num, recv[1].qp_num}:
        fail(f"receiving QPs {set(recvs.values())}: both QPs must take from the SRQ")
    check_payloads(range(3))
    ok("3 SENDs over two QPs landed in the SRQ's oldest requests 0..2, payloads checked")
    ev = ctx.get_async_event()
    if ev.event_type != e.IBV_EVENT_SRQ_LIMIT_REACHED:
        fail(f"async event {ev.event_type}, expected SRQ_LIMIT_REACHED")
    ev.ack()
    ok("IBV_EVENT_SRQ_LIMIT_REACHED raised")
    if srq.query().srq_limit != 0:
        fail("limit still armed after it fired")
    ok("limit disarmed after firing")

    # Refill and drain more than the SRQ held at the resize: the resized ring keeps working.
    for i in range(posted, nbuf):
        post_srq(i)
    recvs = send_msgs(nbuf - 3, 3)
    if sorted(recvs) != list(range(3, nbuf)):
        fail(f"received wr_ids {sorted(recvs)}")
    check_payloads(range(3, nbuf))
    ok(f"{nbuf - 3} more SENDs through the resized SRQ, payloads checked")

    # A request naming no memory region (an L_Key never handed out) breaks only the QP that
    # takes it: its receive completes in error, the request behind it stays in the SRQ (not
    # flushed with that QP) and the other QP receives into it.
    srq.post_recv(RecvWR(wr_id=777, num_sge=1, sg=[SGE(rmr.buf, MSG, 0xffffff00)]))
    srq.post_recv(RecvWR(wr_id=778, num_sge=1, sg=[SGE(rmr.buf + MSG, MSG, rmr.lkey)]))
    smr.write(bytes([0x5a] * MSG), MSG, 0)
    send[0].post_send(SendWR(wr_id=2000, opcode=e.IBV_WR_SEND, num_sge=1,
                             sg=[SGE(smr.buf, MSG, smr.lkey)], send_flags=e.IBV_SEND_SIGNALED))
    bad = None
    for _ in range(200000):
        nc, wcs = cq.poll(1)
        if nc and wcs[0].wr_id == 777:
            bad = wcs[0]
            break
        if nc and wcs[0].wr_id == 778:
            fail(f"request 778 completed (status {wcs[0].status}) before the bad one")
    if bad is None:
        fail("no completion for the request with a wrong L_Key")
    if bad.status == e.IBV_WC_SUCCESS or bad.qp_num != recv[0].qp_num:
        fail(f"bad request: status {bad.status} on QP {bad.qp_num}")
    ok(f"request with a wrong L_Key completed with status {bad.status} on the QP that took it")
    smr.write(bytes([0xa5] * MSG), MSG, MSG)
    send[1].post_send(SendWR(wr_id=2001, opcode=e.IBV_WR_SEND, num_sge=1,
                             sg=[SGE(smr.buf + MSG, MSG, smr.lkey)], send_flags=e.IBV_SEND_SIGNALED))
    good = None
    for _ in range(200000):
        nc, wcs = cq.poll(1)
        if nc and wcs[0].wr_id == 778:
            good = wcs[0]
            break
    if good is None or good.status != e.IBV_WC_SUCCESS or good.qp_num != recv[1].qp_num:
        fail(f"request 778: {None if good is None else (good.status, good.qp_num)}")
    if rmr.read(MSG, MSG) != bytes([0xa5] * MSG):
        fail("payload of the message after the bad request differs")
    ok("the next request stayed in the SRQ and the other QP received into it")
    for qp in recv + send:
        qp.close()
    srq.close()
    ok("QPs and SRQ destroyed")

    # UC and UD QPs receive through an SRQ too (a UD request holds the 40-byte GRH area first).
    cq2 = CQ(ctx, 16)
    srq2 = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=8, max_sge=1)))

    def qp_of(qp_type, with_srq):
        cap = QPCap(max_send_wr=4, max_recv_wr=0 if with_srq else 4, max_send_sge=1, max_recv_sge=1)
        return QP(pd, QPInitAttr(qp_type=qp_type, scq=cq2, rcq=cq2, srq=srq2 if with_srq else None, cap=cap))

    uc_r, uc_s = qp_of(e.IBV_QPT_UC, True), qp_of(e.IBV_QPT_UC, False)
    connect(uc_r, uc_s)
    connect(uc_s, uc_r)
    ud_r, ud_s = qp_of(e.IBV_QPT_UD, True), qp_of(e.IBV_QPT_UD, False)
    qkey = 0x11111111
    for qp in (ud_r, ud_s):
        a = QPAttr(port_num=PORT)
        a.qkey = qkey
        qp.to_rts(a)
    grh = 40
    srq2.post_recv(RecvWR(wr_id=31, num_sge=1, sg=[SGE(rmr.buf, MSG, rmr.lkey)]))
    srq2.post_recv(RecvWR(wr_id=32, num_sge=1, sg=[SGE(rmr.buf + 4 * MSG, grh + MSG, rmr.lkey)]))
    uc_data, ud_data = bytes([0x3c] * MSG), bytes([0xc3] * MSG)
    smr.write(uc_data, MSG, 0)
    smr.write(ud_data, MSG, MSG)
    uc_s.post_send(SendWR(wr_id=41, opcode=e.IBV_WR_SEND, num_sge=1,
                          sg=[SGE(smr.buf, MSG, smr.lkey)], send_flags=e.IBV_SEND_SIGNALED))
    wcs = poll(cq2, 2, "UC SEND")
    rwc = [w for w in wcs if w.opcode == e.IBV_WC_RECV]
    if any(w.status != e.IBV_WC_SUCCESS for w in wcs) or len(rwc) != 1 or rwc[0].wr_id != 31 \
            or rwc[0].qp_num != uc_r.qp_num or rmr.read(MSG, 0) != uc_data:
        fail(f"UC through the SRQ: {[(w.wr_id, w.status, w.qp_num) for w in wcs]}")
    ok("UC QP received through the SRQ, payload checked")
    ah = AH(pd, attr=AHAttr(port_num=PORT, is_global=1, gr=GlobalRoute(dgid=gid, sgid_index=gid_index)))
    wr = SendWR(wr_id=42, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(smr.buf + MSG, MSG, smr.lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_ud(ah, ud_r.qp_num, qkey)
    ud_s.post_send(wr)
    wcs = poll(cq2, 2, "UD SEND")
    rwc = [w for w in wcs if w.opcode == e.IBV_WC_RECV]
    if any(w.status != e.IBV_WC_SUCCESS for w in wcs) or len(rwc) != 1 or rwc[0].wr_id != 32 \
            or rwc[0].qp_num != ud_r.qp_num or rwc[0].byte_len != grh + MSG \
            or not rwc[0].wc_flags & e.IBV_WC_GRH or rmr.read(MSG, 4 * MSG + grh) != ud_data:
        fail(f"UD through the SRQ: {[(w.wr_id, w.status, w.qp_num, w.byte_len) for w in wcs]}")
    ok("UD QP received through the SRQ (GRH area, payload checked)")
    for qp in (uc_r, uc_s, ud_r, ud_s):
        qp.close()
    srq2.close()


if __name__ == "__main__":
    main()
