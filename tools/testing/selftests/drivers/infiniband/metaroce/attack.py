#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The attack suite's verbs-side checks (issue 32): what a local process or a remote peer could do
with the defects a source review found, each case written so that it fails on the code before the
fix. Runs through the libmetaroce provider (pyverbs), reusing hostile_user.py's ring and verbs
helpers and its runner (each case in a forked child, watched for time, the kernel log checked).

Local cases (usage: attack.py local DEV GID_INDEX [CASE-PREFIX...]):
  e1-key-churn       an MR registered and deregistered 32 times takes the same table index each
                     time; its R_Key must not repeat (before: index << 8, all 32 equal): at most 4
                     of 31 successive keys may equal the one before (p = 1/256 each).
  e2-access-revoked  a loopback RC pair; a WRITE lands; the responder is moved RTS -> RTS with
                     IB_QP_ACCESS_FLAGS = local write only; the next WRITE must fail
                     (REM_INV_REQ_ERR, as rdma_rxe) and the target stay untouched (before: it
                     succeeded, query_qp reporting the new rights).
  e3-cq-err-once     a 2-entry user CQ overflowed by 16 WRITE completions raises IB_EVENT_CQ_ERR
                     once (read raw from the context's async event file), and once more after the
                     consumer polled it and it overflowed again (before: one per dropped
                     completion, each a GFP_ATOMIC entry on uverbs' list).
  e4-flush-spin-sq   a QP in the error state whose send ring a racing process keeps full (producer
                     index one behind the consumer) while this one rings the doorbell: one doorbell
                     flushes at most one ring's capacity (before: it flushed until the racer
                     stopped, under the QP's IRQ-off lock).
  e5-flush-spin-rq   the same with the receive ring while the QP is moved to the error state.
  n1-peer-churn      (a native device) 80 RC QPs, each to its own made-up destination
                     (::ffff:192.0.2.100 + i, given permanent neighbour entries by the caller),
                     moved to RTR (which makes a connection) and destroyed: all 80 succeed, the
                     table reaping unbound, quiet connections (before: the 65th failed with ENOSPC
                     until the device was deleted).
  n2-ctx-quota       (a native device) one process binds 20 RC QPs, kept alive, each to its own
                     made-up destination: the 17th and later must fail with EDQUOT (a user
                     context's QPs hold at most 16 connections); another process (its own user
                     context) then binds a QP to a new destination (before: all 20 succeeded, and
                     a process holding 64 made every other process's new connection fail).

Memory cgroup (usage: attack.py memcg DEV GID_INDEX; run inside a cgroup v2 group with the memory
controller): sets the group's memory.max to what it uses now plus 16 MiB, then creates up to 32
RC QPs of 4,096 send and receive WRs (about 5 MiB of ring memory each, 160 MiB in all), printing
"created N" after each. The rings must be charged to the group: creation fails (ENOMEM) or the
process is OOM-killed before the 32nd (before: all 32 were created, outside the limit).

Remote cases (the suite's network part, 63-attack.sh):
  attack.py uc-victim DEV GID_INDEX PEER_ADDR DIR
                     a UC QP on DEV whose address vector names PEER (an IPv4 address) with 16
                     posted 64-byte receives filled with 0xEE; writes its QPN to DIR/qpn, then waits
                     for DIR/go, polls for the seconds DIR/go holds (default 5) and writes to DIR/result the
                     number of completed receives and of receive buffers that changed.
  attack.py uc-write-victim DEV GID_INDEX PEER_ADDR DIR
                     a UC QP on DEV (remote write allowed) whose address vector names PEER, and a
                     4 KiB MR (remote write) filled with 0xEE; writes "QPN VA R_KEY" to DIR/target
                     (for the harness, which hands the attacker the QPN and VA only), waits for
                     DIR/go, waits the seconds it holds and writes DIR/result: "HIT CHANGED", HIT
                     the guess number roce_inject.py's uc-write wrote at VA (0: none landed),
                     CHANGED 1 if any byte other than that one 64-byte write changed.
  attack.py rc-pair a|b DEV GID_INDEX PEER_ADDR DIR
                     one end of an RC pair (native or RoCEv2 devices) across two namespaces,
                     the ends meeting through files in DIR. b sends a 64-byte SEND ("G1") to a once both are at RTS. a has 8
                     posted 64-byte receives filled with 0xEE; it checks G1, writes DIR/first (its
                     QPN) and polls until DIR/go exists plus 2 s (the forgery window, 63- and 64-attack.sh
                     injects meanwhile), writes DIR/forged ("completed changed" of the other 7
                     receives), then asks b for a second SEND ("G2", DIR/send2) and writes
                     DIR/result: "forged_completed changed g2" (g2 1 if G2 arrived intact). b
                     writes DIR/b-result: the status of its two sends.
Exit status 1 if any expectation failed.
"""
import ctypes
import fcntl
import os
import random
import signal
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostile_user as h  # noqa: E402  (ring and verbs helpers, the case runner)
from checklib import Files  # noqa: E402
import pyverbs.enums as e  # noqa: E402
from pyverbs.addr import AHAttr, GlobalRoute  # noqa: E402
from pyverbs.cq import CQ  # noqa: E402
from pyverbs.device import Context  # noqa: E402
from pyverbs.mr import MR  # noqa: E402
from pyverbs.pd import PD  # noqa: E402
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr  # noqa: E402
from pyverbs.wr import SGE, RecvWR, SendWR  # noqa: E402

IB_EVENT_CQ_ERR = 0
ASYNC_DESC = struct.Struct("<QII")  # struct ib_uverbs_async_event_desc
# Objects a case must not destroy before its child process exits: libibverbs' ibv_destroy_cq
# waits until every async event reported for the CQ was acknowledged through
# ibv_ack_async_event, and e3 reads the events from the file itself.
KEEP = []


def case_key_churn():
    env = h.Env()
    keys = []
    for _ in range(32):
        mr = MR(env.pd, 4096, h.RW)
        keys.append(mr.rkey)
        mr.close()
    same_index = sum(1 for k in keys if k >> 8 == keys[0] >> 8)
    repeats = sum(1 for a, b in zip(keys, keys[1:]) if a == b)
    low = len({k & 0xFF for k in keys})
    h.note(f"32 registrations: {same_index} took index {keys[0] >> 8:#x}; {repeats} of 31 keys equal the "
           f"one before; {low} distinct low bytes")
    h.expect(same_index >= 16, "the MR table did not reuse the index (the case proves nothing)")
    h.expect(repeats <= 4, f"{repeats} of 31 re-registrations got the deregistered MR's key again")
    return f"{repeats} of 31 keys repeated, {low} distinct key bytes"


def case_access_revoked():
    env = h.Env()
    a, b = env.rc_pair()
    env.rmr.write(bytes(4096), 4096)
    a.qp.post_send(h.write_wr(1, env.lmr, env.rmr, 256))
    wc = h.poll_one(env.cq, "WRITE with rights")
    h.expect(wc.status == e.IBV_WC_SUCCESS, f"WRITE with rights: {h.st(wc.status)}")
    # The responder keeps only local write (RTS -> RTS).
    attr = QPAttr()
    attr.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE
    b.qp.modify(attr, e.IBV_QP_ACCESS_FLAGS)
    got, _ = b.qp.query(e.IBV_QP_ACCESS_FLAGS)
    h.expect(got.qp_access_flags & e.IBV_ACCESS_REMOTE_WRITE == 0, "query_qp still reports remote write")
    before = env.rmr.read(4096, 0)
    a.qp.post_send(h.write_wr(2, env.lmr, env.rmr, 256, off=1024))
    wc = h.poll_one(env.cq, "WRITE after revocation")
    h.expect(wc.status != e.IBV_WC_SUCCESS, "a WRITE succeeded after remote write was revoked")
    h.expect(env.rmr.read(4096, 0) == before, "the revoked WRITE changed the target")
    h.note(f"WRITE after revocation: {h.st(wc.status)}")
    return f"revoked WRITE refused ({h.st(wc.status)}), target untouched"


def async_fd():
    """This process's async event file of its (one) uverbs context, non-blocking."""
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:[infinibandevent]":
                n = int(fd)
                fcntl.fcntl(n, fcntl.F_SETFL, fcntl.fcntl(n, fcntl.F_GETFL) | os.O_NONBLOCK)
                return n
        except OSError:
            pass
    raise h.Expect("no [infinibandevent] file among this process's descriptors")


def cq_errors(fd, seconds=2.0):
    """CQ error events read from `fd` within `seconds` (stops early once quiet after one)."""
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            buf = os.read(fd, ASYNC_DESC.size * 64)
        except BlockingIOError:
            time.sleep(0.05)
            continue
        for off in range(0, len(buf) - ASYNC_DESC.size + 1, ASYNC_DESC.size):
            _, ev, _ = ASYNC_DESC.unpack_from(buf, off)
            n += ev == IB_EVENT_CQ_ERR
    return n


def case_cq_err_once():
    env = h.Env()
    fd = async_fd()
    small = CQ(env.ctx, 2)
    a = h.Q(env.pd, small, rcq=env.cq)
    b = h.Q(env.pd, env.cq)
    KEEP.extend([env, small, a, b])
    h.connect(a, b)
    cap = None
    for rnd in (1, 2):
        for i in range(16):
            a.qp.post_send(h.write_wr(i, env.lmr, env.rmr, 64))
        # Every WRITE is acknowledged (the target sees the last one's bytes) before counting.
        time.sleep(2)
        errs = cq_errors(fd)
        got = h.poll(small, 64, 1)
        cap = len(got)
        h.note(f"round {rnd}: 16 completions into a CQ holding {cap}: {errs} CQ error event(s)")
        h.expect(0 < cap < 16, f"the CQ held {cap} of 16 completions (no overflow to test)")
        h.expect(errs == 1, f"round {rnd}: {errs} IB_EVENT_CQ_ERR events for one overflow, expected 1")
    return f"one CQ error event per overflow ({16 - cap} completions dropped each round)"


def spin_full(ring, seconds):
    """Forks a process (sharing the mapping) that keeps `ring` full for `seconds`: the producer
    index one behind the consumer index, rewritten as fast as it can."""
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        end = time.monotonic() + seconds
        while time.monotonic() < end and os.getppid() == parent:
            for _ in range(2000):
                ring.set(h.OFF_PROD, (ring.cons - 1) & ring.mask)
        os._exit(0)
    return pid


def to_error(q):
    attr = QPAttr()
    attr.qp_state = e.IBV_QPS_ERR
    q.qp.modify(attr, e.IBV_QP_STATE)


def case_flush_spin(ring_name):
    env = h.Env(cqe=4096)
    a, b = env.rc_pair(max_wr=16)
    q = a
    ring = q.sq if ring_name == "sq" else q.rq
    # Valid-looking entries in every slot (what the kernel flushes).
    for i in range(ring.mask + 1):
        ring.write_slot(i, h.send_wqe(i, e.IBV_WR_SEND, sges=[(env.lmr.buf, 64, env.lmr.lkey)])
                        if ring_name == "sq" else h.recv_wqe(i, sges=[(env.rmr.buf, 64, env.rmr.lkey)]))
    if ring_name == "sq":
        to_error(q)
        h.poll(env.cq, 4096, 1)
    pid = spin_full(ring, 8)
    time.sleep(0.5)
    t0 = time.monotonic()
    if ring_name == "sq":
        h.doorbell(q, env.lmr)
    else:
        to_error(q)
    took = time.monotonic() - t0
    flushed = len(h.poll(env.cq, 4096, 1))
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    cap = ring.mask + 1
    h.note(f"{ring_name}: one {'doorbell' if ring_name == 'sq' else 'move to the error state'} under a racer keeping "
           f"the {cap}-slot ring full: {flushed} flush completions, {took:.2f} s in the call")
    # One ring's worth per call (plus what the kernel's own ring held before the call).
    h.expect(flushed <= 2 * cap + 2, f"{flushed} completions from one call on a {cap}-slot ring: unbounded drain")
    return f"{flushed} flush completions from one call ({cap}-slot ring)"


def rtr_to(q, i):
    """Moves q to RTR towards the made-up host 192.0.2.(100 + i) (QPN 0x100 + i)."""
    from pyverbs.addr import GID
    attr = QPAttr(port_num=h.PORT)
    attr.qp_access_flags = h.RW
    attr.path_mtu = e.IBV_MTU_1024
    attr.dest_qp_num = 0x100 + i
    attr.rq_psn = attr.sq_psn = 0
    attr.max_dest_rd_atomic = attr.max_rd_atomic = 1
    attr.min_rnr_timer, attr.timeout, attr.retry_cnt, attr.rnr_retry = 1, 14, 3, 3
    gid = f"0000:0000:0000:0000:0000:ffff:c000:02{100 + i:02x}"
    attr.ah_attr = AHAttr(port_num=h.PORT, is_global=1, gr=GlobalRoute(dgid=GID(gid), sgid_index=h.GIDX))
    q.qp.to_rtr(attr)


def case_ctx_quota(n=20, quota=16):
    env = h.Env()
    kept, refused = [], []
    for i in range(n):
        q = h.Q(env.pd, env.cq, max_wr=4)
        try:
            rtr_to(q, i)
            kept.append(q)
        except Exception as ex:  # noqa: BLE001  (pyverbs raises its own error types)
            refused.append((i, getattr(ex, "error_code", None)))
            q.qp.close()
    h.note(f"one context: {len(kept)} of {n} QPs to distinct destinations reached RTR, refused: {refused[:3]}...")
    h.expect(len(kept) == quota, f"{len(kept)} connections held by one context, expected the quota of {quota}")
    h.expect(all(err == 122 for _, err in refused), f"refusals not EDQUOT (122): {refused}")
    # Another process, another user context: the table still has room for it.
    pid = os.fork()
    if pid == 0:
        try:
            with Context(name=h.DEV) as ctx:
                pd = PD(ctx)
                cq = CQ(ctx, 8)
                q = h.Q(pd, cq, max_wr=4)
                rtr_to(q, 50)
            os._exit(0)
        except Exception:  # noqa: BLE001
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    h.expect(os.waitstatus_to_exitcode(status) == 0, "another process could not bind a QP to a new destination")
    for q in kept:
        q.qp.close()
    return f"one context held {len(kept)} of {n} connections (quota {quota}, the rest EDQUOT); another context bound one more"


def case_peer_churn(n=80):
    env = h.Env()
    made = 0
    for i in range(n):
        q = h.Q(env.pd, env.cq, max_wr=4)
        try:
            rtr_to(q, i)
        except Exception as ex:  # noqa: BLE001  (pyverbs raises its own error types)
            raise h.Expect(f"QP {i + 1} of {n} to a new destination: RTR refused: {ex}")
        q.qp.close()
        made += 1
    h.note(f"{made} connections made to as many destinations, each QP destroyed after RTR")
    return f"{made} of {n} QPs to new destinations reached RTR"


CASES = [
    ("e1-key-churn", case_key_churn, 120),
    ("e2-access-revoked", case_access_revoked, 120),
    ("e3-cq-err-once", case_cq_err_once, 120),
    ("e4-flush-spin-sq", lambda: case_flush_spin("sq"), 120),
    ("e5-flush-spin-rq", lambda: case_flush_spin("rq"), 120),
    ("n1-peer-churn", case_peer_churn, 300),
    ("n2-ctx-quota", case_ctx_quota, 300),
]


def memcg(dev, gidx):
    """See the module's docstring."""
    rel = open("/proc/self/cgroup").read().strip().split("::", 1)[1]
    cg = "/sys/fs/cgroup" + rel
    h.set_device(dev, gidx)
    env = h.Env()
    cur = int(open(f"{cg}/memory.current").read())
    with open(f"{cg}/memory.max", "w") as f:
        f.write(str(cur + 16 * 1024 * 1024))
    print(f"memcg: {cg} uses {cur >> 20} MiB, limit set to {(cur >> 20) + 16} MiB", flush=True)
    qps = []
    for i in range(32):
        try:
            qps.append(h.Q(env.pd, env.cq, max_wr=4096, send_sge=16, recv_sge=2))
        except Exception as ex:  # noqa: BLE001  (pyverbs raises its own error types)
            print(f"refused {i + 1}: {ex}", flush=True)
            break
        ring = sum(r.size for r in (qps[-1].sq, qps[-1].rq))
        print(f"created {i + 1} ({ring >> 10} KiB of rings each)", flush=True)
    print(f"memcg: memory.current {int(open(f'{cg}/memory.current').read()) >> 20} MiB", flush=True)
    os._exit(0)


def victim_qp(dev, qp_type, nrecv):
    """A QP of qp_type on dev in INIT with nrecv posted 64-byte receives filled with 0xEE (one
    MR holds them all): (qp, cq, mr)."""
    ctx = Context(name=dev)
    pd = PD(ctx)
    cq = CQ(ctx, 64)
    size = max(nrecv, 1) * 64
    mr = MR(pd, size, h.RW)
    mr.write(b"\xee" * size, size)
    qp = QP(pd, QPInitAttr(qp_type=qp_type, scq=cq, rcq=cq,
                           cap=QPCap(max_send_wr=4, max_recv_wr=max(nrecv, 1), max_send_sge=1, max_recv_sge=1)))
    init = QPAttr(port_num=h.PORT)
    init.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE
    qp.to_init(init)
    for i in range(nrecv):
        qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(mr.buf + 64 * i, 64, mr.lkey)]))
    KEEP.append((ctx, pd))
    return qp, cq, mr


def connected_attr(peer, gidx, dest_qpn):
    """QPAttr for RTR towards the IPv4 address peer's QP dest_qpn (IPv4-mapped GID), PSN 0."""
    from pyverbs.addr import GID
    mapped = bytes(10) + b"\xff\xff" + bytes(int(x) for x in peer.split("."))
    gid = ":".join(mapped[i:i + 2].hex() for i in range(0, 16, 2))
    attr = QPAttr(port_num=h.PORT)
    attr.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE
    attr.path_mtu = e.IBV_MTU_1024
    attr.dest_qp_num = dest_qpn
    attr.rq_psn = attr.sq_psn = 0
    attr.ah_attr = AHAttr(port_num=h.PORT, is_global=1, gr=GlobalRoute(dgid=GID(gid), sgid_index=gidx))
    return attr


def publish_and_wait(d, name, text, default_wait):
    """A remote victim's handshake with its harness: writes text to DIR/name (atomically),
    waits up to 600 s for DIR/go and returns the seconds it holds (default_wait if empty)."""
    with open(os.path.join(d, name + ".tmp"), "w") as f:
        f.write(f"{text}\n")
    os.rename(os.path.join(d, name + ".tmp"), os.path.join(d, name))
    end = time.monotonic() + 600
    while not os.path.exists(os.path.join(d, "go")) and time.monotonic() < end:
        time.sleep(0.1)
    return float(open(os.path.join(d, "go")).read().strip() or default_wait)


def uc_victim(dev, gidx, peer, d):
    """See the module's docstring."""
    qp, cq, mr = victim_qp(dev, e.IBV_QPT_UC, 16)
    qp.to_rtr(connected_attr(peer, gidx, 0x99))
    wait = publish_and_wait(d, "qpn", qp.qp_num, 5)
    got = h.poll(cq, 16, wait)
    changed = sum(1 for i in range(16) if mr.read(64, 64 * i) != b"\xee" * 64)
    with open(os.path.join(d, "result"), "w") as f:
        f.write(f"{len(got)} {changed}\n")
    print(f"uc-victim: {len(got)} receives completed, {changed} buffers changed", flush=True)


def uc_write_victim(dev, gidx, peer, d):
    """See the module's docstring."""
    ctx = Context(name=dev)
    pd = PD(ctx)
    cq = CQ(ctx, 4)
    mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
    mr.write(b"\xee" * 4096, 4096)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UC, scq=cq, rcq=cq,
                           cap=QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)))
    init = QPAttr(port_num=h.PORT)
    init.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
    qp.to_init(init)
    attr = connected_attr(peer, gidx, 0x99)
    attr.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
    qp.to_rtr(attr)
    time.sleep(publish_and_wait(d, "target", f"{qp.qp_num} {mr.buf} {mr.rkey}", 2))
    data = mr.read(4096, 0)
    head = data[:64]
    hit = struct.unpack(">Q", head[:8])[0] if head != b"\xee" * 64 else 0
    changed = int(data[64:] != b"\xee" * 4032 or (hit and head != head[:8] * 8))
    with open(os.path.join(d, "result"), "w") as f:
        f.write(f"{hit} {changed}\n")
    print(f"uc-write-victim: R_Key {mr.rkey:#x}, hit by guess {hit}, other bytes changed {changed}", flush=True)
    KEEP.append((ctx, pd, cq, mr, qp))


def rc_pair(role, dev, gidx, peer, d):
    """See the module's docstring."""
    files = Files(d)
    put = files.put

    def wait(n, seconds=120):
        v = files.wait(n, seconds)
        if v is None:
            sys.exit(f"rc-pair {role}: no {n} after {seconds} s")
        return v

    qp, cq, mr = victim_qp(dev, e.IBV_QPT_RC, 8 if role == "a" else 0)
    put(f"qpn-{role}", qp.qp_num)
    other = int(wait("qpn-" + ("b" if role == "a" else "a")))
    attr = connected_attr(peer, gidx, other)
    attr.max_dest_rd_atomic = attr.max_rd_atomic = 1
    attr.min_rnr_timer, attr.timeout, attr.retry_cnt, attr.rnr_retry = 1, 14, 7, 7
    qp.to_rts(attr)
    put(f"rts-{role}", 1)
    if role == "b":
        wait("rts-a")
        status = []
        for n, msg in ((1, b"G1"), (2, b"G2")):
            if n == 2:
                wait("send2", 300)
            mr.write(msg * 32, 64)
            qp.post_send(SendWR(wr_id=n, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)]))
            wc = h.poll(cq, 1, 60)
            status.append(str(wc[0].status) if wc else "none")
        put("b-result", " ".join(status))
        print(f"rc-pair b: send statuses {status}", flush=True)
        return
    wc = h.poll(cq, 1, 60)
    ok1 = bool(wc) and wc[0].status == e.IBV_WC_SUCCESS and mr.read(64, 0) == b"G1" * 32
    if not ok1:
        sys.exit(f"rc-pair a: G1 not received intact: {[(w.status, w.wr_id) for w in wc]}")
    put("first", qp.qp_num)
    wait("go", 300)
    forged = h.poll(cq, 7, 2.0)
    changed = sum(1 for i in range(1, 8) if mr.read(64, 64 * i) != b"\xee" * 64)
    put("forged", f"{len(forged)} {changed}")
    put("send2", 1)
    wc = h.poll(cq, 1, 60)
    g2 = int(bool(wc) and wc[0].status == e.IBV_WC_SUCCESS and wc[0].wr_id == 1 + len(forged)
             and mr.read(64, 64 * (1 + len(forged))) == b"G2" * 32)
    put("result", f"{len(forged)} {changed} {g2}")
    print(f"rc-pair a: forged completions {len(forged)}, buffers changed {changed}, G2 intact {g2}", flush=True)


def main():
    mode = sys.argv[1]
    if mode == "rc-pair":
        rc_pair(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6])
        return
    if mode == "memcg":
        memcg(sys.argv[2], int(sys.argv[3]))
        return
    if mode == "uc-write-victim":
        uc_write_victim(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
        return
    if mode == "uc-victim":
        uc_victim(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
        return
    if mode != "local":
        sys.exit(__doc__)
    h.set_device(sys.argv[2], int(sys.argv[3]))
    only = sys.argv[4:]
    with Context(name=h.DEV) as ctx:
        h.GID = ctx.query_gid(h.PORT, h.GIDX)
    failed = []
    for name, fn, limit in CASES:
        if only and not any(name.startswith(o) for o in only):
            continue
        ok, line = h.run_case(name, fn, limit)
        print(line, flush=True)
        if not ok:
            failed.append(name)
    print(f"attack: {len(failed)} failed{': ' + ' '.join(failed) if failed else ''}", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
