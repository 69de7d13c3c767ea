#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Many native connections on one device (issue 34, item 4), one end of each: run by
single/69-native-scale.sh in two namespaces, the ends meeting through files in DIR.

usage: native_scale.py a|b DEV DIR NA NB SIZE [Q]
       native_scale.py loop DEV GID_INDEX N SIZE DIR
       native_scale.py poke DEV GID_INDEX DGID

mra0 has NA addresses 2001:db8::1:1 and on, mrb0 NB addresses 2001:db8::2:1 and on; a
connection is per pair of GIDs, so N = NA x NB RC QP pairs, pair (i, j) between mra0's address
i and mrb0's address j, make N connections on each device. Q (default 1): QP pairs per address
pair, all on that pair's connection (N x Q QP pairs); with Q > 1, a then binds one QP more on
the first address pair and writes what its move to RTR gave in DIR/extra-a ("ok" or the errno
name: ENOSPC once the connection has all its streams).
a (on mra0): QP (i, j) from address i towards mrb0's address j, with one posted receive of SIZE
   bytes.
b (on mrb0): QP (i, j) from address j towards mra0's address i.
The steps, each announced by a file in DIR: both ends open the device and make their PD, CQ and
MR (DIR/open-ROLE), and on DIR/create create their QPs (INIT) and write their
QP numbers (DIR/qpns-ROLE), then DIR/init-ROLE; on DIR/go both move to RTS (DIR/rts-ROLE: the
seconds it took); b then sends SIZE bytes on every QP (buffer k filled with byte k % 251 + 1
after k as 4 bytes) and a checks every receive; each writes DIR/result-ROLE ("ok N SECONDS" or
"FAIL ..."), then both hold their QPs until DIR/release and exit (which destroys them).
loop: N RC QP pairs on one device that is not MetaRoCE (rdma_rxe), each pair connected to itself
   through the device's GID GID_INDEX, one SEND of SIZE bytes checked on each (loop()).
poke: one RC QP on DEV from GID_INDEX to DGID (a made-up destination) moved to RTR and closed:
creating a connection is when the device reaps its idle ones.
"""
import errno
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checklib import Files  # noqa: E402
import pyverbs.enums as e  # noqa: E402
from pyverbs.addr import GID, AHAttr, GlobalRoute  # noqa: E402
from pyverbs.cq import CQ  # noqa: E402
from pyverbs.device import Context  # noqa: E402
from pyverbs.pyverbs_error import PyverbsRDMAError  # noqa: E402
from pyverbs.mr import MR  # noqa: E402
from pyverbs.pd import PD  # noqa: E402
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr  # noqa: E402
from pyverbs.wr import SGE, RecvWR, SendWR  # noqa: E402

PORT = 1


def full6(addr):
    """2001:db8::100:5 as sysfs prints a GID (eight groups of four hex digits)."""
    head, _, tail = addr.partition("::")
    h = [g for g in head.split(":") if g]
    t = [g for g in tail.split(":") if g]
    groups = h + ["0"] * (8 - len(h) - len(t)) + t
    return ":".join(f"{int(g, 16):04x}" for g in groups)


def gid_indices(dev):
    """Every RoCE v2 GID of dev's port 1: {gid: index}."""
    base = f"/sys/class/infiniband/{dev}/ports/{PORT}"
    out = {}
    for name in os.listdir(f"{base}/gids"):
        try:
            with open(f"{base}/gid_attrs/types/{name}") as f:
                if f.read().strip() != "RoCE v2":
                    continue
        except OSError:
            continue
        with open(f"{base}/gids/{name}") as f:
            out[f.read().strip()] = int(name)
    return out


def rc_qp(pd, cq):
    return QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                             cap=QPCap(max_send_wr=1, max_recv_wr=1, max_send_sge=1, max_recv_sge=1)))


def to_init(qp):
    attr = QPAttr(port_num=PORT)
    attr.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE
    qp.to_init(attr)


def conn_attr(sgid_index, dgid, dest_qpn):
    attr = QPAttr(port_num=PORT)
    attr.path_mtu = e.IBV_MTU_1024
    attr.dest_qp_num = dest_qpn
    attr.rq_psn = attr.sq_psn = 0
    attr.max_dest_rd_atomic = attr.max_rd_atomic = 1
    attr.min_rnr_timer, attr.timeout, attr.retry_cnt, attr.rnr_retry = 1, 18, 7, 7
    attr.ah_attr = AHAttr(port_num=PORT, is_global=1, gr=GlobalRoute(dgid=GID(dgid), sgid_index=sgid_index))
    return attr


def pattern(i, size):
    return i.to_bytes(4, "little") + bytes([i % 251 + 1]) * (size - 4)


def main(role, dev, d, na, nb, size, q=1):
    files = Files(d)
    put = files.put

    def wait(name, seconds=600):
        v = files.wait(name, seconds, 0.1)
        if v is None:
            put(f"result-{role}", f"FAIL no {name} after {seconds} s")
            sys.exit(1)
        return v

    gids = gid_indices(dev)
    side_a = [full6(f"2001:db8::1:{i + 1:x}") for i in range(na)]
    side_b = [full6(f"2001:db8::2:{j + 1:x}") for j in range(nb)]
    pairs = [(side_a[i], side_b[j]) for i in range(na) for j in range(nb)] * q
    if role == "a":
        local, remote = [gids.get(x) for x, _ in pairs], [y for _, y in pairs]
    else:
        local, remote = [gids.get(y) for _, y in pairs], [x for x, _ in pairs]
    n = len(pairs)
    missing = [k for k, g in enumerate(local) if g is None]
    if missing:
        put(f"result-{role}", f"FAIL no RoCE v2 GID on {dev} for {len(missing)} QP(s), e.g. QP {missing[0]}")
        sys.exit(1)
    ctx = Context(name=dev)
    pd = PD(ctx)
    cq = CQ(ctx, n)
    mr = MR(pd, n * size, e.IBV_ACCESS_LOCAL_WRITE)
    put(f"open-{role}", 1)
    wait("create")
    qps = []
    for i in range(n):
        qp = rc_qp(pd, cq)
        to_init(qp)
        if role == "a":
            qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(mr.buf + i * size, size, mr.lkey)]))
        else:
            mr.write(pattern(i, size), size, i * size)
        qps.append(qp)
    put(f"qpns-{role}", " ".join(str(q.qp_num) for q in qps))
    put(f"init-{role}", n)
    other = [int(x) for x in wait("qpns-" + ("b" if role == "a" else "a")).split()]
    wait("go")
    t0 = time.monotonic()
    for i, qp in enumerate(qps):
        qp.to_rts(conn_attr(local[i], remote[i], other[i]))
    put(f"rts-{role}", f"{time.monotonic() - t0:.1f}")
    wait("rts-" + ("b" if role == "a" else "a"))
    t0 = time.monotonic()
    if role == "b":
        for i, qp in enumerate(qps):
            qp.post_send(SendWR(wr_id=i, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf + i * size, size, mr.lkey)],
                                send_flags=e.IBV_SEND_SIGNALED))
    done, bad = set(), []
    end = time.monotonic() + 300
    while len(done) < n and time.monotonic() < end:
        k, wcs = cq.poll(min(n, 64))
        if not k:
            time.sleep(0.01)
        for wc in wcs:
            if wc.status != e.IBV_WC_SUCCESS:
                bad.append((wc.wr_id, wc.status))
            elif role == "a" and (wc.byte_len != size or mr.read(size, wc.wr_id * size) != pattern(wc.wr_id, size)):
                bad.append((wc.wr_id, "data"))
            done.add(wc.wr_id)
    secs = time.monotonic() - t0
    if bad or len(done) < n:
        put(f"result-{role}", f"FAIL {len(done)} of {n} completions, bad {bad[:4]}")
    else:
        put(f"result-{role}", f"ok {n} {secs:.1f}")
    if role == "a" and q > 1:
        extra = rc_qp(pd, cq)
        to_init(extra)
        try:
            extra.to_rtr(conn_attr(local[0], remote[0], other[0]))
            put("extra-a", "ok")
        except PyverbsRDMAError as ex:
            put("extra-a", errno.errorcode.get(ex.error_code, str(ex.error_code)))
        extra.close()
    wait("release")
    for qp in qps:
        qp.close()
    put(f"closed-{role}", 1)


def loop(dev, gidx, n, size, d):
    """N RC QP pairs on one device, each pair connected to itself over the device's GID gidx
    (the loopback of a device that is not MetaRoCE: rdma_rxe, whose per-QP memory single/69
    reports beside MetaRoCE's per connection). Same steps and files as a/b, role "l"."""
    files = Files(d)
    put = files.put
    ctx = Context(name=dev)
    pd = PD(ctx)
    cq = CQ(ctx, 2 * n)
    mr = MR(pd, n * size, e.IBV_ACCESS_LOCAL_WRITE)
    src = MR(pd, size, e.IBV_ACCESS_LOCAL_WRITE)
    gid = str(ctx.query_gid(PORT, gidx))
    put("open-l", 1)
    if files.wait("create", 600, 0.1) is None:
        put("result-l", "FAIL no create after 600 s")
        sys.exit(1)
    senders, receivers = [], []
    for i in range(n):
        s, r = rc_qp(pd, cq), rc_qp(pd, cq)
        to_init(s)
        to_init(r)
        r.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(mr.buf + i * size, size, mr.lkey)]))
        senders.append(s)
        receivers.append(r)
    put("init-l", n)
    if files.wait("go", 600, 0.1) is None:
        put("result-l", "FAIL no go after 600 s")
        sys.exit(1)
    t0 = time.monotonic()
    for s, r in zip(senders, receivers):
        s.to_rts(conn_attr(gidx, gid, r.qp_num))
        r.to_rts(conn_attr(gidx, gid, s.qp_num))
    put("rts-l", f"{time.monotonic() - t0:.1f}")
    # The SENDs leave one at a time from one source buffer (made before the QPs, so that the
    # memory the QPs took is read without it).
    t0 = time.monotonic()
    got, bad = set(), []
    for i, s in enumerate(senders):
        src.write(pattern(i, size), size, 0)
        s.post_send(SendWR(wr_id=n + i, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(src.buf, size, src.lkey)],
                           send_flags=e.IBV_SEND_SIGNALED))
        # One SEND in flight at a time (its source buffer is reused).
        while True:
            k, wcs = cq.poll(2)
            for wc in wcs:
                if wc.status != e.IBV_WC_SUCCESS:
                    bad.append((wc.wr_id, wc.status))
                elif wc.wr_id < n:
                    if wc.byte_len != size or mr.read(size, wc.wr_id * size) != pattern(wc.wr_id, size):
                        bad.append((wc.wr_id, "data"))
                    got.add(wc.wr_id)
                else:
                    got.add(wc.wr_id)
            if (n + i in got and i in got) or bad or time.monotonic() - t0 > 300:
                break
            if not k:
                time.sleep(0.001)
        if bad:
            break
    secs = time.monotonic() - t0
    if bad or len(got) < 2 * n:
        put("result-l", f"FAIL {len(got)} of {2 * n} completions, bad {bad[:4]}")
    else:
        put("result-l", f"ok {n} {secs:.1f}")
    files.wait("release", 600, 0.1)
    for qp in senders + receivers:
        qp.close()
    put("closed-l", 1)


def poke(dev, gidx, dgid):
    ctx = Context(name=dev)
    pd = PD(ctx)
    cq = CQ(ctx, 1)
    qp = rc_qp(pd, cq)
    to_init(qp)
    qp.to_rtr(conn_attr(gidx, dgid, 1))
    qp.close()


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "loop":
        loop(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
    elif len(sys.argv) == 5 and sys.argv[1] == "poke":
        poke(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif len(sys.argv) in (7, 8) and sys.argv[1] in ("a", "b"):
        main(sys.argv[1], sys.argv[2], sys.argv[3], *(int(x) for x in sys.argv[4:]))
    else:
        sys.exit(__doc__)
