#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""RDMA FLUSH (IBTA 1.5 A19) on MetaRoCE (libmetaroce) and against rdma_rxe (librxe).

rdma-core 44 has no ibv_wr_flush, so this script writes the FLUSH work request into the QP's send
ring itself, in the layout of the device's user ABI: MetaRoCE's (include/uapi/rdma/metaroce-abi.h:
opcode METAROCE_WR_FLUSH, remote address, R_Key, the range's length, placement type and
selectivity level) or rdma_rxe's (rdma_user_rxe.h: `wr.flush`, the range's length in
`dma.length`, the address also in `iova`, which rdma_rxe's requester puts in the RETH), and rings
the doorbell as hostile_user.py does (uverbs' post_send command with no work request). The
memory regions and QPs get IB_ACCESS_FLUSH_GLOBAL (1 << 8) by its number, which libibverbs passes
through.

Each case runs on a fresh RC QP pair (a refused FLUSH breaks the requester's QP) and checks the
status of every completion, and the completion's opcode (IBV_WC_FLUSH, 8) for a FLUSH that worked:

  write-then-flush   WRITE 4 KiB, then FLUSH (global, range) of those bytes: both succeed, in order
  flush-mr           FLUSH of the whole MR (selectivity MR; address 0 and length 0 are not checked)
  flush-empty        FLUSH of 0 bytes at the MR's start
  past-end           range running past the MR's end                        -> REM_ACCESS_ERR
  mr-no-right        MR without FLUSH_GLOBAL                                  -> REM_ACCESS_ERR
  bad-rkey           an R_Key nobody has                                      -> REM_ACCESS_ERR
  persistent         placement "persistent", which the QP does not grant      -> REM_INV_REQ_ERR
  qp-no-right        responder QP without FLUSH_GLOBAL                        -> REM_INV_REQ_ERR
and, when the requester is MetaRoCE (--ours), requests its requester refuses before sending:
  placement-0, selectivity-2 (reserved), with-sge (a FLUSH carries no local data) -> a local error

Modes:
  flush_check.py local DEV GIDX [--ours]           both QPs of each pair on DEV (loopback)
  flush_check.py serve DEV GIDX ADDR PORT          the responder side of `post`, listening on ADDR
  flush_check.py post DEV GIDX PEER PORT [--ours]  the requester side, against `serve` on PEER
  flush_check.py refused DEV                       DEV must refuse an MR with FLUSH_GLOBAL (EOPNOTSUPP)
Exit status 1 if any expectation failed.
"""
import json
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostile_user as h  # noqa: E402  (ring and verbs helpers)
import pyverbs.enums as e  # noqa: E402
from pyverbs.addr import GID, AHAttr, GlobalRoute  # noqa: E402
from pyverbs.cq import CQ  # noqa: E402
from pyverbs.device import Context  # noqa: E402
from pyverbs.mr import MR  # noqa: E402
from pyverbs.pd import PD  # noqa: E402
from pyverbs.pyverbs_error import PyverbsRDMAError  # noqa: E402
from pyverbs.qp import QPAttr  # noqa: E402

WR_FLUSH = 14
WC_FLUSH = 8
ACCESS_FLUSH_GLOBAL = 1 << 8
FLUSH_GLOBAL, FLUSH_PERSISTENT = 1, 2
RANGE, WHOLE_MR = 0, 1
MR_LEN = 64 * 1024
RW = h.RW

# name: (responder QP's extra rights, target MR, offset, length, placement, selectivity,
#        expected statuses of [WRITE,] FLUSH, requester-local case)
CASES = [
    ("write-then-flush", ACCESS_FLUSH_GLOBAL, "flush", 0, 4096, FLUSH_GLOBAL, RANGE, ["SUCCESS", "SUCCESS"], False),
    ("flush-mr", ACCESS_FLUSH_GLOBAL, "flush", None, 0, FLUSH_GLOBAL, WHOLE_MR, ["SUCCESS"], False),
    ("flush-empty", ACCESS_FLUSH_GLOBAL, "flush", 0, 0, FLUSH_GLOBAL, RANGE, ["SUCCESS"], False),
    ("past-end", ACCESS_FLUSH_GLOBAL, "flush", MR_LEN - 8, 64, FLUSH_GLOBAL, RANGE, ["REM_ACCESS_ERR"], False),
    ("mr-no-right", ACCESS_FLUSH_GLOBAL, "plain", 0, 64, FLUSH_GLOBAL, RANGE, ["REM_ACCESS_ERR"], False),
    ("bad-rkey", ACCESS_FLUSH_GLOBAL, "bogus", 0, 64, FLUSH_GLOBAL, RANGE, ["REM_ACCESS_ERR"], False),
    ("persistent", ACCESS_FLUSH_GLOBAL, "flush", 0, 64, FLUSH_PERSISTENT, RANGE, ["REM_INV_REQ_ERR"], False),
    ("qp-no-right", 0, "flush", 0, 64, FLUSH_GLOBAL, RANGE, ["REM_INV_REQ_ERR"], False),
    ("placement-0", ACCESS_FLUSH_GLOBAL, "flush", 0, 64, 0, RANGE, ["LOCAL"], True),
    ("selectivity-2", ACCESS_FLUSH_GLOBAL, "flush", 0, 64, FLUSH_GLOBAL, 2, ["LOCAL"], True),
    ("with-sge", ACCESS_FLUSH_GLOBAL, "flush", 0, 64, FLUSH_GLOBAL, RANGE, ["LOCAL"], True),
]


def flush_wqe(wr_id, raddr, rkey, length, placement, level, sges=()):
    """The FLUSH work request in the device's layout: MetaRoCE's (opcode 10, the range's
    length in `length`, placement and selectivity in `flush`) or rdma_rxe's."""
    if not h.RXE:
        return h.send_wqe(wr_id, e.IBV_WR_SEND, op=10, raddr=raddr, rkey=rkey, sges=sges, length=length,
                          fields=((32, "B", placement), (33, "B", level)))
    w = h.send_wqe(wr_id, WR_FLUSH, raddr=raddr, sges=sges, length=length,
                   fields=((36, "I", rkey), (40, "B", placement), (41, "B", level), (152, "Q", raddr)))
    if not sges:
        struct.pack_into("<I", w, 196, 0)
    return w


class Side:
    """A context on one device with a PD, a CQ, a FLUSH-able MR and a plain one."""

    def __init__(self, dev, gidx):
        self.ctx = Context(name=dev)
        # The raw doorbell (h.doorbell) writes to this context's command file.
        h.CMD_FD = self.ctx.cmd_fd
        self.gid = self.ctx.query_gid(h.PORT, gidx)
        self.gidx = gidx
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 256)
        self.fmr = MR(self.pd, MR_LEN, RW | ACCESS_FLUSH_GLOBAL)
        self.pmr = MR(self.pd, MR_LEN, RW)
        self.src = MR(self.pd, MR_LEN, RW)
        self.src.write(bytes((i * 13 + 5) & 0xFF for i in range(MR_LEN)), MR_LEN)

    def qp(self):
        return h.Q(self.pd, self.cq)

    def rts(self, q, dest_qpn, dgid, extra):
        attr = QPAttr(port_num=h.PORT)
        attr.qp_access_flags = RW | extra
        attr.path_mtu = e.IBV_MTU_1024
        attr.dest_qp_num = dest_qpn
        attr.rq_psn = attr.sq_psn = 0
        attr.max_dest_rd_atomic = attr.max_rd_atomic = 1
        attr.min_rnr_timer, attr.timeout, attr.retry_cnt, attr.rnr_retry = 1, 14, 3, 7
        attr.ah_attr = AHAttr(port_num=h.PORT, is_global=1,
                              gr=GlobalRoute(dgid=dgid, sgid_index=self.gidx))
        q.qp.to_rts(attr)

    def mrs(self):
        return {"flush": [self.fmr.buf, self.fmr.rkey], "plain": [self.pmr.buf, self.pmr.rkey],
                "bogus": [self.fmr.buf, 0xDEAD00]}


def run_case(req, q, target, case):
    """Posts the case's work requests on requester QP q against `target` ({name: [addr, rkey]});
    returns a list of failure strings."""
    name, _, mr, off, length, placement, level, want, _ = case
    base, rkey = target[mr]
    raddr = 0 if off is None else base + off
    wrs = []
    if name == "write-then-flush":
        wr = h.write_wr(0x57, req.src, req.fmr, length)
        wr.set_wr_rdma(target["flush"][1], base + off)
        q.qp.post_send(wr)
        wrs.append(0x57)
    sges = [(req.src.buf, 64, req.src.lkey)] if name == "with-sge" else ()
    q.sq.push(flush_wqe(0xF1, raddr, rkey, length, placement, level, sges))
    h.doorbell(q, req.src)
    wrs.append(0xF1)
    wcs = h.poll(req.cq, len(wrs), 20)
    bad = []
    if len(wcs) != len(wrs):
        return [f"{len(wcs)} of {len(wrs)} completions in 20 s (QP state {q.state()})"]
    for wc, wr_id, w in zip(wcs, wrs, want):
        got = h.st(wc.status)
        ok = got in ("LOC_QP_OP_ERR", "LOC_LEN_ERR", "LOC_PROT_ERR") if w == "LOCAL" else got == w
        if wc.wr_id != wr_id or not ok:
            bad.append(f"wr {wc.wr_id:#x}: {got}, expected wr {wr_id:#x}: {w}")
        elif wr_id == 0xF1 and w == "SUCCESS" and wc.opcode != WC_FLUSH:
            bad.append(f"FLUSH completed with opcode {wc.opcode}, expected IBV_WC_FLUSH ({WC_FLUSH})")
    return bad


def report(results):
    failed = [n for n, bad in results if bad]
    for n, bad in results:
        print(f"{'ok' if not bad else 'FAIL'}: {n}{': ' + '; '.join(bad) if bad else ''}", flush=True)
    print(f"flush_check: {len(results) - len(failed)} of {len(results)} cases ok", flush=True)
    return 1 if failed else 0


def cases(ours):
    return [c for c in CASES if ours or not c[8]]


def local(dev, gidx, ours):
    h.set_device(dev, gidx)
    s = Side(dev, gidx)
    results = []
    for c in cases(ours):
        a, b = s.qp(), s.qp()
        s.rts(a, b.qpn, s.gid, c[1])
        s.rts(b, a.qpn, s.gid, c[1])
        s.fmr.write(bytes(MR_LEN), MR_LEN)
        bad = run_case(s, a, s.mrs(), c)
        if c[0] == "write-then-flush" and not bad and s.fmr.read(4096, 0) != s.src.read(4096, 0):
            bad.append("the WRITE's data is not in the target MR")
        results.append((c[0], bad))
        a.qp.close()
        b.qp.close()
    return report(results)


def serve(dev, gidx, addr, port):
    h.set_device(dev, gidx)
    s = Side(dev, gidx)
    qps = [s.qp() for _ in CASES]
    with socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET) as srv:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((addr, port))
        srv.listen(1)
        srv.settimeout(120)
        conn, _ = srv.accept()
        with conn:
            conn.settimeout(300)
            f = conn.makefile("rw")
            f.write(json.dumps({"gid": str(s.gid), "qpns": [q.qpn for q in qps], "mrs": s.mrs()}) + "\n")
            f.flush()
            peer = json.loads(f.readline())
            for q, c, qpn in zip(qps, CASES, peer["qpns"]):
                s.rts(q, qpn, GID(peer["gid"]), c[1])
            f.write("ready\n")
            f.flush()
            done = f.readline().strip()
    # The requester judges; the responder only had to answer. Its QPs must still exist.
    states = [q.state() for q in qps]
    print(f"serve: requester reported {done!r}; responder QP states {states}", flush=True)
    return 0 if done == "done" else 1


def post(dev, gidx, peer, port, ours):
    h.set_device(dev, gidx)
    s = Side(dev, gidx)
    qps = [s.qp() for _ in CASES]
    end = time.monotonic() + 120
    while True:
        try:
            conn = socket.create_connection((peer, port), timeout=10)
            break
        except OSError:
            if time.monotonic() > end:
                print("post: the responder never listened", flush=True)
                return 1
            time.sleep(0.5)
    with conn:
        conn.settimeout(300)
        f = conn.makefile("rw")
        info = json.loads(f.readline())
        f.write(json.dumps({"gid": str(s.gid), "qpns": [q.qpn for q in qps]}) + "\n")
        f.flush()
        for q, c, qpn in zip(qps, CASES, info["qpns"]):
            s.rts(q, qpn, GID(info["gid"]), 0)
        if f.readline().strip() != "ready":
            print("post: the responder did not get ready", flush=True)
            return 1
        results = []
        for q, c in zip(qps, CASES):
            if ours or not c[8]:
                results.append((c[0], run_case(s, q, info["mrs"], c)))
        f.write("done\n")
        f.flush()
    return report(results)


def refused(dev):
    ctx = Context(name=dev)
    pd = PD(ctx)
    try:
        MR(pd, MR_LEN, RW | ACCESS_FLUSH_GLOBAL)
    except PyverbsRDMAError as ex:
        ok = ex.error_code == 95  # EOPNOTSUPP
        print(f"{'ok' if ok else 'FAIL'}: {dev} refused an MR with FLUSH_GLOBAL: errno {ex.error_code}", flush=True)
        return 0 if ok else 1
    print(f"FAIL: {dev} registered an MR with FLUSH_GLOBAL", flush=True)
    return 1


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    ours = "--ours" in args
    args = [a for a in args if a != "--ours"]
    if mode == "local":
        return local(args[0], int(args[1]), ours)
    if mode == "serve":
        return serve(args[0], int(args[1]), args[2], int(args[3]))
    if mode == "post":
        return post(args[0], int(args[1]), args[2], int(args[3]), ours)
    if mode == "refused":
        return refused(args[0])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
