#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Explicit on-demand paging (ODP) memory regions through the libmetaroce provider (pyverbs), on
one device (RC and UD QPs in loopback), where pyverbs' own test_odp never makes a page fault (its
buffers are written before they are registered).

Every ODP MR here lies in fresh anonymous memory (mmap) that the process has not touched, so
nothing is mapped when it is registered, or in memory the process has just dropped with
madvise(MADV_DONTNEED) (the mm invalidates the pages; reading them again gives zeros, so data
placed into a stale page would be lost and the check sees it). Checks:

- the device reports ODP support for RC and UD;
- an RDMA WRITE of 64 KiB (64 packets) into untouched ODP memory: the responder answers RNR while
  it faults the pages in, the requester retries, the data lands;
- 40 rounds of: MADV_DONTNEED on the target, WRITE a new pattern, compare every byte (each round
  invalidates and faults the pages again);
- an RDMA READ of 64 KiB from ODP memory into an untouched ODP sink (the requester faults its sink
  in when the READ is posted);
- FETCH_ADD and CMP_SWAP on an untouched ODP page, results in an untouched ODP sink;
- SEND from an untouched ODP source into an untouched ODP receive buffer (the receive waits
  for its pages: RNR), RC and UD (UD: the source only; a datagram that finds its receive
  buffer missing is dropped, as UD may);
- WRITEs while another thread drops the target's pages in a loop (invalidation racing placement):
  every WRITE completes successfully; a final WRITE after the thread stops lands intact;
- READs and FETCH_ADDs while a thread drops their local sinks in a loop: responses that find their
  sink gone wait and are asked for again (odp_response_waits rises), everything completes, each
  atomic is executed once, a final READ lands intact;
- a WRITE into ODP memory the process has unmapped fails with a remote access error (the fault
  fails; the responder does not answer RNR forever);
- the MR is deregistered while faults may still be queued.

Usage: odp_check.py DEV GID_INDEX. Prints one line per check; exits non-zero on the first failure.
"""
import ctypes
import subprocess
import sys
import threading
import time

import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mem_alloc import MAP_ANONYMOUS_, MAP_PRIVATE_, mmap, munmap
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

from checklib import fail, ok, poll

PORT = 1
N = 64 * 1024
MADV_DONTNEED = 4
ODP = e.IBV_ACCESS_ON_DEMAND
RW = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_ATOMIC
libc = ctypes.CDLL(None, use_errno=True)
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
PROT_NONE, MAP_PRIVATE, MAP_ANONYMOUS, MAP_FIXED = 0, 0x02, 0x20, 0x10


def expect_ok(cq, what):
    wc = poll(cq, what, 60)
    if wc.status != e.IBV_WC_SUCCESS:
        fail(f"{what}: status {wc.status}")
    return wc


def fresh(length):
    """Anonymous memory the process has not touched: no page is mapped yet."""
    return mmap(length=length, flags=MAP_ANONYMOUS_ | MAP_PRIVATE_)


def drop(addr, length):
    if libc.madvise(addr, length, MADV_DONTNEED) != 0:
        fail(f"madvise: errno {ctypes.get_errno()}")


def peek(addr, length):
    return ctypes.string_at(addr, length)


def poke(addr, data):
    ctypes.memmove(addr, data, len(data))


def pattern(seed, length=N):
    return bytes((i * 7 + seed * 31 + (i >> 9)) & 0xff for i in range(length))


def counter(dev, name):
    out = subprocess.run(["rdma", "statistic", "show", "link", f"{dev}/1"], capture_output=True,
                         text=True, check=False).stdout.split()
    return int(out[out.index(name) + 1]) if name in out else -1


def odp_faults(dev):
    return counter(dev, "odp_faults")


def odp_fault_errors(dev):
    return counter(dev, "odp_fault_errors")


class Rc:
    """A connected RC pair in loopback on one PD: `req` sends, `resp` answers."""

    def __init__(self, ctx, pd, gid, gid_index):
        self.scq, self.rcq = CQ(ctx, 64), CQ(ctx, 64)
        cap = QPCap(max_send_wr=32, max_recv_wr=32, max_send_sge=1, max_recv_sge=1)
        self.req = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.scq, rcq=self.scq, cap=cap))
        self.resp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.rcq, rcq=self.rcq, cap=cap))
        for a, b in ((self.req, self.resp), (self.resp, self.req)):
            attr = QPAttr(port_num=PORT)
            attr.qp_access_flags = RW
            attr.path_mtu = e.IBV_MTU_1024
            attr.dest_qp_num = b.qp_num
            attr.rq_psn = attr.sq_psn = 0
            attr.max_dest_rd_atomic = attr.max_rd_atomic = 4
            # pyverbs' own tests use these: RNR retried forever, 0.64 ms RNR timer.
            attr.min_rnr_timer, attr.timeout, attr.retry_cnt, attr.rnr_retry = 12, 14, 7, 7
            attr.ah_attr = AHAttr(port_num=PORT, is_global=1,
                                  gr=GlobalRoute(dgid=gid, sgid_index=gid_index))
            a.to_rts(attr)

    def rdma(self, op, lmr, laddr, length, rkey, raddr, what):
        wr = SendWR(wr_id=1, opcode=op, num_sge=1, sg=[SGE(laddr, length, lmr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(rkey, raddr)
        self.req.post_send(wr)
        return expect_ok(self.scq, what)

    def atomic(self, op, lmr, laddr, rkey, raddr, compare_add, swap, what):
        wr = SendWR(wr_id=2, opcode=op, num_sge=1, sg=[SGE(laddr, 8, lmr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_atomic(rkey, raddr, compare_add, swap)
        self.req.post_send(wr)
        return expect_ok(self.scq, what)


def main():
    dev, gid_index = sys.argv[1], int(sys.argv[2])
    ctx = Context(name=dev)
    caps = ctx.query_device_ex().odp_caps
    rc, ud = caps.rc_odp_caps, caps.ud_odp_caps
    need_rc = e.IBV_ODP_SUPPORT_SEND | e.IBV_ODP_SUPPORT_RECV | e.IBV_ODP_SUPPORT_WRITE | \
        e.IBV_ODP_SUPPORT_READ | e.IBV_ODP_SUPPORT_ATOMIC | e.IBV_ODP_SUPPORT_SRQ_RECV
    if not caps.general_caps & e.IBV_ODP_SUPPORT or rc & need_rc != need_rc or \
            ud & e.IBV_ODP_SUPPORT_SEND == 0:
        fail(f"odp caps: general {caps.general_caps:#x} rc {rc:#x} ud {ud:#x}")
    ok(f"device: ODP, rc caps {rc:#x}, ud caps {ud:#x}")
    gid = ctx.query_gid(PORT, gid_index)
    pd = PD(ctx)
    f0 = odp_faults(dev)

    src = MR(pd, N, e.IBV_ACCESS_LOCAL_WRITE)  # ordinary pinned source
    taddr = fresh(N)
    tmr = MR(pd, N, RW | ODP, address=taddr)
    s = Rc(ctx, pd, gid, gid_index)

    p = pattern(1)
    src.write(p, N)
    s.rdma(e.IBV_WR_RDMA_WRITE, src, src.buf, N, tmr.rkey, taddr, "WRITE 64 KiB into untouched ODP")
    if peek(taddr, N) != p:
        fail("WRITE into untouched ODP memory: the bytes differ")
    f1 = odp_faults(dev)
    if f1 <= f0:
        fail(f"WRITE into untouched ODP memory: odp_faults {f0} -> {f1}, expected a fault")
    ok(f"WRITE into untouched ODP memory: data intact, odp_faults {f0} -> {f1}")

    for r in range(40):
        drop(taddr, N)
        p = pattern(r + 2)
        src.write(p, N)
        s.rdma(e.IBV_WR_RDMA_WRITE, src, src.buf, N, tmr.rkey, taddr, f"WRITE round {r}")
        got = peek(taddr, N)
        if got != p:
            bad = next(i for i in range(N) if got[i] != p[i])
            fail(f"round {r}: after MADV_DONTNEED the WRITE did not land (first bad byte {bad})")
    f2 = odp_faults(dev)
    ok(f"40 rounds of MADV_DONTNEED + WRITE 64 KiB: data intact, odp_faults {f1} -> {f2}")

    saddr = fresh(N)
    smr = MR(pd, N, RW | ODP, address=saddr)
    s.rdma(e.IBV_WR_RDMA_READ, smr, saddr, N, tmr.rkey, taddr, "READ 64 KiB into untouched ODP sink")
    if peek(saddr, N) != p:
        fail("READ from ODP into an untouched ODP sink: the bytes differ")
    ok("READ 64 KiB from ODP memory into an untouched ODP sink: data intact")

    aaddr, raddr = fresh(4096), fresh(4096)
    amr = MR(pd, 4096, RW | ODP, address=aaddr)
    rmr = MR(pd, 4096, RW | ODP, address=raddr)
    s.atomic(e.IBV_WR_ATOMIC_FETCH_AND_ADD, rmr, raddr, amr.rkey, aaddr + 64, 5, 0,
             "FETCH_ADD on untouched ODP")
    old = int.from_bytes(peek(raddr, 8), "little")
    now = int.from_bytes(peek(aaddr + 64, 8), "little")
    if old != 0 or now != 5:
        fail(f"FETCH_ADD on untouched ODP: returned {old}, word now {now}")
    drop(raddr, 4096)
    s.atomic(e.IBV_WR_ATOMIC_CMP_AND_SWP, rmr, raddr + 8, amr.rkey, aaddr + 64, 5, 0x1122334455667788,
             "CMP_SWAP on ODP")
    old = int.from_bytes(peek(raddr + 8, 8), "little")
    now = int.from_bytes(peek(aaddr + 64, 8), "little")
    if old != 5 or now != 0x1122334455667788:
        fail(f"CMP_SWAP on ODP: returned {old}, word now {now:#x}")
    ok("FETCH_ADD and CMP_SWAP on untouched ODP memory, results in an untouched ODP sink")

    # SEND: both ends untouched ODP memory.
    xaddr, yaddr = fresh(N), fresh(N)
    xmr = MR(pd, N, RW | ODP, address=xaddr)
    ymr = MR(pd, N, RW | ODP, address=yaddr)
    s.resp.post_recv(RecvWR(wr_id=3, num_sge=1, sg=[SGE(yaddr, N, ymr.lkey)]))
    p = pattern(77)
    poke(xaddr, p)
    drop(xaddr, N)   # the source's pages are dropped too: they read back as zeros
    poke(xaddr, p[:N // 2])
    s.req.post_send(SendWR(wr_id=4, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(xaddr, N, xmr.lkey)],
                           send_flags=e.IBV_SEND_SIGNALED))
    expect_ok(s.scq, "SEND from ODP")
    wc = expect_ok(s.rcq, "RECV into untouched ODP")
    want = p[:N // 2] + bytes(N // 2)
    if wc.byte_len != N or peek(yaddr, N) != want:
        fail(f"SEND from ODP into an untouched ODP buffer: byte_len {wc.byte_len}, bytes differ")
    ok("SEND 64 KiB from ODP memory (half dropped) into an untouched ODP receive buffer")

    # UD SEND from untouched ODP memory.
    ucq = CQ(ctx, 16)
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
    ua = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=ucq, rcq=ucq, cap=cap))
    ub = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=ucq, rcq=ucq, cap=cap))
    for q in (ua, ub):
        a = QPAttr(port_num=PORT)
        a.qkey = 0x1234
        q.to_rts(a)
    rbuf = MR(pd, 1024 + 40, e.IBV_ACCESS_LOCAL_WRITE)
    ub.post_recv(RecvWR(wr_id=5, num_sge=1, sg=[SGE(rbuf.buf, 1024 + 40, rbuf.lkey)]))
    uaddr = fresh(4096)
    umr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE | ODP, address=uaddr)
    up = pattern(9, 1000)
    poke(uaddr + 100, up)
    drop(uaddr, 4096)
    poke(uaddr + 100, up)
    ah = AH(pd, attr=AHAttr(port_num=PORT, is_global=1, gr=GlobalRoute(dgid=gid, sgid_index=gid_index)))
    wr = SendWR(wr_id=6, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(uaddr + 100, 1000, umr.lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_ud(ah, ub.qp_num, 0x1234)
    ua.post_send(wr)
    got = {}
    for _ in range(2):
        wc = poll(ucq, "UD SEND from ODP", 60)
        if wc.status != e.IBV_WC_SUCCESS:
            fail(f"UD SEND from ODP: wr {wc.wr_id} status {wc.status}")
        got[wc.wr_id] = wc
    if 5 not in got or rbuf.read(1000, 40) != up:
        fail("UD SEND from ODP: the datagram's bytes differ")
    ok("UD SEND of 1000 bytes from dropped ODP memory")

    # Invalidation racing placement.
    stop = threading.Event()
    drops = [0]

    def dropper():
        while not stop.is_set():
            drop(taddr, N)
            drops[0] += 1
            time.sleep(0.01)

    t = threading.Thread(target=dropper)
    t.start()
    rounds, end = 0, time.monotonic() + 20
    try:
        # A minimum that always runs (3 WRITEs, with a drop among them); the clock adds more.
        while rounds < 3 or drops[0] == 0 or time.monotonic() < end:
            s.rdma(e.IBV_WR_RDMA_WRITE, src, src.buf, N, tmr.rkey, taddr, f"WRITE under invalidation {rounds}")
            rounds += 1
    finally:
        stop.set()
        t.join()
    if rounds == 0 or drops[0] == 0:
        fail(f"invalidation race: {rounds} WRITEs, {drops[0]} drops")
    p = pattern(200)
    src.write(p, N)
    s.rdma(e.IBV_WR_RDMA_WRITE, src, src.buf, N, tmr.rkey, taddr, "final WRITE")
    if peek(taddr, N) != p:
        fail("after the invalidation race: the final WRITE did not land")
    ok(f"{rounds} WRITEs of 64 KiB while {drops[0]} MADV_DONTNEEDs dropped the target: all completed; final data intact")

    # Invalidation racing the requester's own sinks: the doorbell faults a READ's sink (and an
    # atomic's result buffer) in, and a thread drops it again before the responses arrive. A
    # response that finds its sink gone is refused and asked for again (odp_response_waits);
    # every READ and atomic completes, and each atomic is executed once.
    w0 = counter(dev, "odp_response_waits")
    if w0 < 0:
        fail("no odp_response_waits counter")
    reads = [0, 0]

    def sink_dropper():
        while not stop.is_set():
            drop(saddr, N)
            drop(raddr, 4096)
            reads[1] += 1
            time.sleep(0.01)

    stop.clear()
    t = threading.Thread(target=sink_dropper)
    t.start()
    start = int.from_bytes(peek(aaddr + 64, 8), "little")
    adds = 0
    try:
        end = time.monotonic() + 15
        while time.monotonic() < end or (counter(dev, "odp_response_waits") == w0 and time.monotonic() < end + 30):
            s.rdma(e.IBV_WR_RDMA_READ, smr, saddr, N, tmr.rkey, taddr, f"READ under sink invalidation {reads[0]}")
            reads[0] += 1
            for _ in range(4):
                s.atomic(e.IBV_WR_ATOMIC_FETCH_AND_ADD, rmr, raddr + 16, amr.rkey, aaddr + 64, 1, 0,
                         f"FETCH_ADD under sink invalidation {adds}")
                adds += 1
    finally:
        stop.set()
        t.join()
    waits = counter(dev, "odp_response_waits") - w0
    now = int.from_bytes(peek(aaddr + 64, 8), "little")
    if now != (start + adds) & (2**64 - 1):
        fail(f"FETCH_ADD under sink invalidation: word {now:#x}, expected {start:#x} + {adds} (each executed once)")
    s.rdma(e.IBV_WR_RDMA_READ, smr, saddr, N, tmr.rkey, taddr, "final READ")
    if peek(saddr, N) != p:
        fail("after the sink invalidation race: the final READ's bytes differ")
    if waits <= 0:
        fail(f"sink invalidation race: {reads[0]} READs, {adds} atomics, {reads[1]} drops, but no response "
             "ever found its sink gone (odp_response_waits unchanged): the race was not provoked")
    ok(f"{reads[0]} READs of 64 KiB and {adds} FETCH_ADDs while {reads[1]} MADV_DONTNEEDs dropped their sinks: "
       f"all completed, {waits} responses waited for their sink (odp_response_waits); atomics executed once; "
       "final READ intact")

    # Memory the process unmapped: its fault fails, and the WRITE fails with a remote access
    # error instead of waiting (RNR) forever.
    gaddr = fresh(N)
    gmr = MR(pd, N, RW | ODP, address=gaddr)
    s2 = Rc(ctx, pd, gid, gid_index)
    munmap(gaddr, N)
    # A PROT_NONE mapping in its place, so that no later mmap (the provider.s rings) lands there.
    if libc.mmap(gaddr, N, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != gaddr:
        fail(f"mmap PROT_NONE: errno {ctypes.get_errno()}")
    wr = SendWR(wr_id=8, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(src.buf, 4096, src.lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_rdma(gmr.rkey, gaddr)
    s2.req.post_send(wr)
    wc = poll(s2.scq, "WRITE into unmapped ODP memory", 60)
    if wc.status != e.IBV_WC_REM_ACCESS_ERR:
        fail(f"WRITE into unmapped ODP memory: status {wc.status}, expected a remote access error")
    gmr.close()
    munmap(gaddr, N)
    if odp_fault_errors(dev) < 1:
        fail("WRITE into unmapped ODP memory: no failed fault counted (odp_fault_errors)")
    ok("WRITE into ODP memory the process unmapped: the fault fails, the WRITE gets a remote access error")

    # Deregistration with faults possibly queued: drop, post a WRITE, deregister right after it.
    drop(taddr, N)
    s.rdma(e.IBV_WR_RDMA_WRITE, src, src.buf, N, tmr.rkey, taddr, "WRITE before dereg")
    for m in (tmr, smr, amr, rmr, xmr, ymr, umr):
        m.close()
    for a, n in ((taddr, N), (saddr, N), (aaddr, 4096), (raddr, 4096), (xaddr, N), (yaddr, N), (uaddr, 4096)):
        munmap(a, n)
    ok(f"ODP MRs deregistered and unmapped; odp_faults {f0} -> {odp_faults(dev)}")


main()
