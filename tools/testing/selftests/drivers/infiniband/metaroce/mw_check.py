#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Memory windows through the libmetaroce provider (pyverbs), on one device (RC QPs in loopback).

The responder's MR is 3 x W bytes: a window covers the middle W bytes, the outer thirds are canaries
that must never change. Checks:

- the device reports IBV_DEVICE_MEM_WINDOW and TYPE_2B and max_mw; an MR may ask for MW_BIND;
- type 1 (ibv_bind_mw): RDMA WRITE and READ through the window reach exactly its bytes; a WRITE one
  byte past its end, a READ needing a right the window lacks, and the MR's own (local-only) key
  get a remote access error; the MR cannot be deregistered while the window is bound (EBUSY);
  re-binding with length 0 leaves the window unusable, and then the MR can go;
- type 2 (IBV_WR_BIND_MW): usable only through the QP that bound it (another QP of the same PD
  gets a remote access error); binding a bound type 2 window fails (IBV_WC_MW_BIND_ERR); local
  invalidate and a received SEND with invalidate (the window's key in the receive completion)
  make its key fail; zero-based addressing; destroying the QP that bound a window frees it (a
  later QP with the same number cannot use it); deallocating a bound window makes its key fail;
- bad binds complete with IBV_WC_MW_BIND_ERR: outside the MR, an MR without MW_BIND, a writable
  window over an MR without local write, a type 1 zero-based bind (the provider itself refuses that
  one with EINVAL).

Every remote access error also leaves the canaries and the bytes outside what succeeded unchanged.
Usage: mw_check.py DEV GID_INDEX. Prints one line per check; exits non-zero on the first failure.
"""
import errno
import sys

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR, MW, MWBind, MWBindInfo
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

from checklib import fail, ok, poll

W = 4096
PORT = 1
CANARY = 0xA5
RW = e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_LOCAL_WRITE


class Side:
    """A connected RC pair on one PD: `req` sends, `resp` answers; each has its own CQ."""

    def __init__(self, ctx, pd, gid, gid_index, retry_cnt=7, rnr_retry=7, timeout=14):
        self.rcq, self.scq = CQ(ctx, 32), CQ(ctx, 32)
        cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=1, max_recv_sge=1)
        self.req = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.scq, rcq=self.scq, cap=cap))
        self.resp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.rcq, rcq=self.rcq, cap=cap))
        for a, b in ((self.req, self.resp), (self.resp, self.req)):
            attr = QPAttr(port_num=PORT)
            attr.qp_access_flags = RW | e.IBV_ACCESS_REMOTE_ATOMIC
            attr.path_mtu = e.IBV_MTU_1024
            attr.dest_qp_num = b.qp_num
            attr.rq_psn = attr.sq_psn = 0
            attr.max_dest_rd_atomic = attr.max_rd_atomic = 1
            attr.min_rnr_timer, attr.timeout, attr.retry_cnt, attr.rnr_retry = 12, timeout, retry_cnt, rnr_retry
            attr.ah_attr = AHAttr(port_num=PORT, is_global=1,
                                  gr=GlobalRoute(dgid=gid, sgid_index=gid_index))
            a.to_rts(attr)


def main():
    dev, gid_index = sys.argv[1], int(sys.argv[2])
    ctx = Context(name=dev)
    attr = ctx.query_device()
    flags = attr.device_cap_flags
    if not flags & e.IBV_DEVICE_MEM_WINDOW or not flags & e.IBV_DEVICE_MEM_WINDOW_TYPE_2B:
        fail(f"device_cap_flags {flags:#x}: MEM_WINDOW / MEM_WINDOW_TYPE_2B missing")
    if attr.max_mw == 0:
        fail("max_mw is 0")
    ok(f"device: MEM_WINDOW, MEM_WINDOW_TYPE_2B, max_mw {attr.max_mw}")
    gid = ctx.query_gid(PORT, gid_index)
    pd = PD(ctx)
    lmr = MR(pd, 3 * W, e.IBV_ACCESS_LOCAL_WRITE)  # the requester's local buffer

    def new_target(access=e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_MW_BIND):
        mr = MR(pd, 3 * W, access)
        if access & e.IBV_ACCESS_LOCAL_WRITE:
            mr.write(bytes([CANARY]) * (3 * W), 3 * W)
        return mr

    def expect(mr, mid, what):
        """The middle third holds `mid`, the outer thirds only canaries."""
        got = mr.read(3 * W, 0)
        if got[:W] != bytes([CANARY]) * W or got[2 * W:] != bytes([CANARY]) * W:
            fail(f"{what}: a canary byte changed")
        if got[W:2 * W] != mid:
            fail(f"{what}: the window's bytes differ from what was written")

    def rdma(side, op, rkey, addr, length, what, want):
        """One RDMA WRITE or READ of `length` bytes at `addr` under `rkey`; `want` the status."""
        wr = SendWR(wr_id=7, opcode=op, num_sge=1, sg=[SGE(lmr.buf, length, lmr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(rkey, addr)
        side.req.post_send(wr)
        wc = poll(side.scq, what)
        if wc.status != want:
            fail(f"{what}: status {wc.status}, expected {want}")
        ok(f"{what}: status {wc.status}")

    def bind_wr(side, mw, mr, addr, length, access, what, want=e.IBV_WC_SUCCESS):
        """A type 2 bind posted on the responder QP; returns the new R_Key."""
        wr = SendWR(wr_id=9, opcode=e.IBV_WR_BIND_MW, send_flags=e.IBV_SEND_SIGNALED)
        wr.set_bind_wr(mw, MWBindInfo(mr, addr, length, access))
        side.resp.post_send(wr)
        wc = poll(side.rcq, what)
        if wc.status != want or (want == e.IBV_WC_SUCCESS and wc.opcode != e.IBV_WC_BIND_MW):
            fail(f"{what}: status {wc.status} opcode {wc.opcode}, expected status {want}")
        ok(f"{what}: status {wc.status}")
        return wr.rkey

    pattern = bytes((i * 13 + 5) & 0xff for i in range(W))
    lmr.write(pattern, W)

    # --- type 1 ---
    s = Side(ctx, pd, gid, gid_index)
    mr = new_target()
    mw = MW(pd, e.IBV_MW_TYPE_1)
    s.resp.bind_mw(mw, MWBind(MWBindInfo(mr, mr.buf + W, W, e.IBV_ACCESS_REMOTE_WRITE), e.IBV_SEND_SIGNALED))
    wc = poll(s.rcq, "type 1 bind")
    if wc.status != e.IBV_WC_SUCCESS or wc.opcode != e.IBV_WC_BIND_MW:
        fail(f"type 1 bind: status {wc.status} opcode {wc.opcode}")
    ok(f"type 1 window bound to the middle third, rkey {mw.rkey:#x}")
    rdma(s, e.IBV_WR_RDMA_WRITE, mw.rkey, mr.buf + W, W, "type 1 WRITE of the whole window", e.IBV_WC_SUCCESS)
    expect(mr, pattern, "type 1 WRITE")
    try:
        mr.close()
        fail("dereg of an MR with a bound window succeeded")
    except PyverbsRDMAError as ex:
        if ex.error_code != errno.EBUSY:
            fail(f"dereg of an MR with a bound window: errno {ex.error_code}, expected EBUSY")
    ok("dereg of the MR while the window is bound -> EBUSY")
    rdma(s, e.IBV_WR_RDMA_READ, mw.rkey, mr.buf + W, 64, "type 1 READ without REMOTE_READ on the window",
         e.IBV_WC_REM_ACCESS_ERR)
    expect(mr, pattern, "after the refused READ")

    s = Side(ctx, pd, gid, gid_index)
    rdma(s, e.IBV_WR_RDMA_WRITE, mw.rkey, mr.buf + W + 1, W, "type 1 WRITE one byte past the window",
         e.IBV_WC_REM_ACCESS_ERR)
    expect(mr, pattern, "after the WRITE past the window")
    s = Side(ctx, pd, gid, gid_index)
    rdma(s, e.IBV_WR_RDMA_WRITE, mr.lkey, mr.buf + W, 64,
         "WRITE under the MR's own key (no remote rights)", e.IBV_WC_REM_ACCESS_ERR)
    expect(mr, pattern, "after the WRITE under the MR's key")

    # Re-bind read-only over the middle third: READ works, then unbind with length 0.
    s = Side(ctx, pd, gid, gid_index)
    s.resp.bind_mw(mw, MWBind(MWBindInfo(mr, mr.buf + W, W, e.IBV_ACCESS_REMOTE_READ), e.IBV_SEND_SIGNALED))
    if poll(s.rcq, "type 1 re-bind").status != e.IBV_WC_SUCCESS:
        fail("type 1 re-bind")
    lmr.write(bytes(W), W, W)
    wr = SendWR(wr_id=8, opcode=e.IBV_WR_RDMA_READ, num_sge=1, sg=[SGE(lmr.buf + W, W, lmr.lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_rdma(mw.rkey, mr.buf + W)
    s.req.post_send(wr)
    if poll(s.scq, "type 1 READ").status != e.IBV_WC_SUCCESS or lmr.read(W, W) != pattern:
        fail("type 1 READ through the re-bound window")
    ok(f"type 1 re-bound read-only under rkey {mw.rkey:#x}: READ returned the window's bytes")
    s.resp.bind_mw(mw, MWBind(MWBindInfo(mr, mr.buf + W, 0, 0), e.IBV_SEND_SIGNALED))
    if poll(s.rcq, "type 1 unbind").status != e.IBV_WC_SUCCESS:
        fail("type 1 unbind (length 0)")
    rdma(s, e.IBV_WR_RDMA_READ, mw.rkey, mr.buf + W, 64, "READ through the unbound type 1 window",
         e.IBV_WC_REM_ACCESS_ERR)
    s = Side(ctx, pd, gid, gid_index)
    try:
        s.resp.bind_mw(mw, MWBind(MWBindInfo(mr, mr.buf + W, W, e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_ZERO_BASED),
                                  e.IBV_SEND_SIGNALED))
        fail("a zero-based type 1 bind was accepted")
    except PyverbsRDMAError as ex:
        if ex.error_code != errno.EINVAL:
            fail(f"zero-based type 1 bind: errno {ex.error_code}")
    ok("zero-based type 1 bind refused by the provider (EINVAL)")
    mw.close()
    mr.close()
    ok("type 1 window deallocated, then its MR deregistered")

    # --- type 2 ---
    s = Side(ctx, pd, gid, gid_index)
    mr = new_target()
    mw = MW(pd, e.IBV_MW_TYPE_2)
    rkey = bind_wr(s, mw, mr, mr.buf + W, W, e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ, "type 2 bind")
    rdma(s, e.IBV_WR_RDMA_WRITE, rkey, mr.buf + W, W, "type 2 WRITE through the binding QP", e.IBV_WC_SUCCESS)
    expect(mr, pattern, "type 2 WRITE")
    other = Side(ctx, pd, gid, gid_index)
    rdma(other, e.IBV_WR_RDMA_WRITE, rkey, mr.buf + W, 64, "type 2 WRITE through another QP of the PD",
         e.IBV_WC_REM_ACCESS_ERR)
    expect(mr, pattern, "after the WRITE through another QP")
    bind_wr(s, mw, mr, mr.buf + W, W, e.IBV_ACCESS_REMOTE_WRITE, "bind of a bound type 2 window",
            e.IBV_WC_MW_BIND_ERR)

    # Local invalidate (posted on another QP of the PD), after which the key fails. The QPs that
    # bound the window stay: destroying them would free it (checked below).
    bound_by = s
    s = Side(ctx, pd, gid, gid_index)
    inv = SendWR(wr_id=10, opcode=e.IBV_WR_LOCAL_INV, send_flags=e.IBV_SEND_SIGNALED)
    inv.imm_data = rkey
    s.resp.post_send(inv)
    wc = poll(s.rcq, "local invalidate")
    if wc.status != e.IBV_WC_SUCCESS or wc.opcode != e.IBV_WC_LOCAL_INV:
        fail(f"local invalidate: status {wc.status} opcode {wc.opcode}")
    ok(f"local invalidate of {rkey:#x}")
    rdma(s, e.IBV_WR_RDMA_WRITE, rkey, mr.buf + W, 64, "WRITE under the invalidated key", e.IBV_WC_REM_ACCESS_ERR)
    expect(mr, pattern, "after the WRITE under the invalidated key")
    del bound_by
    mw.close()

    # (The provider names the window of a type 2 bind by ibv_mw's rkey, which pyverbs keeps at
    # the key the window was allocated with: each binding below uses a fresh window.)
    # Zero-based addressing: offsets count from the window's start.
    s = Side(ctx, pd, gid, gid_index)
    mwz = MW(pd, e.IBV_MW_TYPE_2)
    zb = bind_wr(s, mwz, mr, mr.buf + W, W, e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_ZERO_BASED,
                 "zero-based type 2 bind")
    half = bytes(range(256)) * (W // 512)
    lmr.write(half, len(half), 2 * W)
    wr = SendWR(wr_id=11, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(lmr.buf + 2 * W, len(half), lmr.lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_rdma(zb, W // 2)  # zero-based: offset W/2 of the window
    s.req.post_send(wr)
    if poll(s.scq, "zero-based WRITE").status != e.IBV_WC_SUCCESS:
        fail("zero-based WRITE")
    expect(mr, pattern[:W // 2] + half, "zero-based WRITE at window offset W/2")
    ok("zero-based WRITE at offset W/2 landed in the window's second half")
    rdma(s, e.IBV_WR_RDMA_WRITE, zb, W // 2 + 1, len(half), "zero-based WRITE one byte past the window",
         e.IBV_WC_REM_ACCESS_ERR)
    expect(mr, pattern[:W // 2] + half, "after the zero-based WRITE past the window")
    mwz.close()

    # Remote invalidate: SEND with invalidate from the requester names the window.
    s = Side(ctx, pd, gid, gid_index)
    mw2 = MW(pd, e.IBV_MW_TYPE_2)
    k2 = bind_wr(s, mw2, mr, mr.buf + W, W, e.IBV_ACCESS_REMOTE_WRITE, "second type 2 window bound")
    rmr = MR(pd, 64, e.IBV_ACCESS_LOCAL_WRITE)
    s.resp.post_recv(RecvWR(wr_id=20, num_sge=1, sg=[SGE(rmr.buf, 64, rmr.lkey)]))
    sw = SendWR(wr_id=21, opcode=e.IBV_WR_SEND_WITH_INV, num_sge=1, sg=[SGE(lmr.buf, 16, lmr.lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    sw.imm_data = k2
    s.req.post_send(sw)
    if poll(s.scq, "SEND with invalidate").status != e.IBV_WC_SUCCESS:
        fail("SEND with invalidate: sender's completion")
    wc = poll(s.rcq, "receive of SEND with invalidate")
    # ibv_wc's imm_data and invalidated_rkey share a union; pyverbs shows it as imm_data. The
    # flag: libmetaroce maps its CQE's WITH_INV to IBV_WC_WITH_INV; librxe (rdma_rxe, and
    # MetaRoCE built with CONFIG_RDMA_METAROCE_RXE_ABI) copies the kernel's wc_flags, whose
    # IB_WC_WITH_INVALIDATE (1 << 2) is libibverbs' IBV_WC_IP_CSUM_OK. Either bit is taken.
    flag = e.IBV_WC_WITH_INV | e.IBV_WC_IP_CSUM_OK
    if wc.status != e.IBV_WC_SUCCESS or not wc.wc_flags & flag or wc.imm_data != k2:
        fail(f"receive: status {wc.status} flags {wc.wc_flags:#x} rkey {wc.imm_data:#x}")
    ok(f"SEND with invalidate: receive flagged WITH_INV, rkey {k2:#x}")
    rdma(s, e.IBV_WR_RDMA_WRITE, k2, mr.buf + W, 64, "WRITE under the remotely invalidated key",
         e.IBV_WC_REM_ACCESS_ERR)
    mw2.close()

    # Destroying the QP that bound a type 2 window frees the window, so a QP that gets the same
    # number later cannot use it.
    x = Side(ctx, pd, gid, gid_index)
    mw3 = MW(pd, e.IBV_MW_TYPE_2)
    k3 = bind_wr(x, mw3, mr, mr.buf + W, W, e.IBV_ACCESS_REMOTE_WRITE, "type 2 bind on a QP about to go")
    gone = (x.req.qp_num, x.resp.qp_num)
    del x
    s = Side(ctx, pd, gid, gid_index)
    reused = (s.req.qp_num, s.resp.qp_num) == gone
    rdma(s, e.IBV_WR_RDMA_WRITE, k3, mr.buf + W, 64,
         "WRITE under the window of a destroyed QP" + (" from a QP with its number" if reused else ""),
         e.IBV_WC_REM_ACCESS_ERR)
    expect(mr, pattern[:W // 2] + half, "after the WRITE under the destroyed QP's window")
    mw3.close()

    # A bound window deallocated: its key fails, and the MR can then go.
    s = Side(ctx, pd, gid, gid_index)
    mw4 = MW(pd, e.IBV_MW_TYPE_2)
    k4 = bind_wr(s, mw4, mr, mr.buf + W, W, e.IBV_ACCESS_REMOTE_WRITE, "type 2 bind before deallocation")
    rdma(s, e.IBV_WR_RDMA_WRITE, k4, mr.buf + W, W, "WRITE through it", e.IBV_WC_SUCCESS)
    expect(mr, pattern, "WRITE through the window")
    mw4.close()
    rdma(s, e.IBV_WR_RDMA_WRITE, k4, mr.buf + W, 64, "WRITE under a deallocated window's key",
         e.IBV_WC_REM_ACCESS_ERR)
    expect(mr, pattern, "after the WRITE under the deallocated key")
    mr.close()
    ok("bound windows deallocated, then the MR deregistered")

    # --- bad binds ---
    mr = new_target()
    for what, target, addr, length, access in (
        ("bind past the MR's end", mr, mr.buf + 2 * W, W + 1, e.IBV_ACCESS_REMOTE_WRITE),
        ("bind over an MR without MW_BIND", new_target(e.IBV_ACCESS_LOCAL_WRITE), None, W, e.IBV_ACCESS_REMOTE_WRITE),
        ("writable window over an MR without local write", new_target(e.IBV_ACCESS_MW_BIND), None, W,
         e.IBV_ACCESS_REMOTE_WRITE),
    ):
        s = Side(ctx, pd, gid, gid_index)
        m = MW(pd, e.IBV_MW_TYPE_2)
        bind_wr(s, m, target, target.buf if addr is None else addr, length, access, what, e.IBV_WC_MW_BIND_ERR)
        m.close()
    ok("all memory window checks passed")


if __name__ == "__main__":
    main()
