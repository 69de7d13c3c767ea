#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Kernel memory per RC QP and per connection (`make bench`, issue 9 item 3), from system-wide
counters read between phases of one process's verbs calls:

  created   NQP RC QPs (64 send and 64 receive WQEs, one SGE each, one shared CQ), left in RESET
  conns     NCONN more QPs, each moved to RTR towards its own address (static neighbours on
            eth0, 192.0.2.200 and up, that never answer; nothing is posted, so nothing is sent):
            on a MetaRoCE native device each opens a connection, elsewhere nothing more
  streams   NSTREAM more QPs moved to RTR towards the first of those addresses: on a native
            device each binds a stream of the existing connection
  destroyed every QP destroyed (what the device keeps: native connections live as long as the
            device, README)

Memory is counted three ways: `slab` (/proc/meminfo's Slab: slab pages, and kmalloc() of more than
8 KiB, which comes from the page allocator but is accounted there; `slab_objs` is the /proc/slabinfo
sum of active objects x object size, and `qp_created_by_cache` splits a QP's share by cache on
kernels with slabinfo), `vmalloc` (/proc/meminfo VmallocUsed: the rings the provider maps)
and `pages` (the rest of the kernel's share of used memory: MemTotal - MemFree minus anonymous
pages, page cache, slab, vmalloc, page tables and kernel stacks, i.e. mostly page-allocator
allocations such as kmalloc of more than 8 KiB; per-CPU page lists make it noisy, reported as is).
A QP's figure is the `created` delta divided by NQP (plus, at RTR, the `streams` delta divided by
NSTREAM); a connection's is the `conns` delta divided by NCONN minus the per-QP RTR share.

Usage: mem_probe.py DEVICE GID_INDEX [NQP NCONN NSTREAM]. Prints one JSON line (bytes).
"""
import ipaddress
import json
import subprocess
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr

PORT = 1
FAKE_BASE = ipaddress.ip_address("192.0.2.200")


def meminfo():
    m = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            m[k] = int(v.split()[0]) * 1024
    return m


def slab_bytes(m):
    """Bytes in slab objects: from /proc/slabinfo when the kernel has it (CONFIG_SLUB_DEBUG), else
    /proc/meminfo's Slab (whole slab pages, so coarser)."""
    total = 0
    try:
        f = open("/proc/slabinfo")
    except OSError:
        return m["Slab"]
    with f:
        for line in f:
            w = line.split()
            if line.startswith(("slabinfo", "#")) or len(w) < 4:
                continue
            total += int(w[1]) * int(w[3])
    return total


def slab_caches():
    """{cache: bytes in active objects} from /proc/slabinfo ({} without it)."""
    try:
        with open("/proc/slabinfo") as f:
            return {w[0]: int(w[1]) * int(w[3]) for w in (line.split() for line in f)
                    if len(w) >= 4 and not w[0].startswith(("slabinfo", "#"))}
    except OSError:
        return {}


def sample():
    """One reading after the allocator settled (per-CPU slab and page lists flushed by a short sleep
    and a slab shrink: writing 2 to drop_caches shrinks the slab caches, also freeing empty slabs)."""
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2\n")
    time.sleep(0.5)
    m = meminfo()
    s = slab_bytes(m)
    used = m["MemTotal"] - m["MemFree"]
    known = (m["AnonPages"] + m["Cached"] + m["Buffers"] + m["Slab"] + m["VmallocUsed"] + m["PageTables"]
             + m["KernelStack"] + m.get("Percpu", 0))
    # slab: /proc/meminfo's Slab, which also counts kmalloc() of more than 8 KiB (whole pages from
    # the page allocator, not in /proc/slabinfo); slab_objs: the slabinfo sum alone.
    return {"slab": m["Slab"], "slab_objs": s, "vmalloc": m["VmallocUsed"], "pages": used - known}


def delta(a, b):
    return {k: b[k] - a[k] for k in a}


def per(d, n):
    return {k: round(v / n) for k, v in d.items()} if n else {}


def main():
    dev, gidx = sys.argv[1], int(sys.argv[2])
    nqp, nconn, nstream = (int(x) for x in (sys.argv[3:6] if len(sys.argv) >= 6 else (128, 16, 15)))
    ctx = Context(name=dev)
    pd = PD(ctx)
    cq = CQ(ctx, 256)
    fakes = [str(FAKE_BASE + i) for i in range(nconn)]
    for i, a in enumerate(fakes):
        subprocess.run(["ip", "neigh", "replace", a, "lladdr", f"02:00:00:00:01:{i:02x}", "dev", "eth0",
                        "nud", "permanent"], check=True)

    def new_qp():
        return QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                                 cap=QPCap(max_send_wr=64, max_recv_wr=64, max_send_sge=1, max_recv_sge=1)))

    def to_rtr(qp, addr, dqpn):
        attr = QPAttr(port_num=PORT)
        attr.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
        attr.path_mtu = e.IBV_MTU_1024
        attr.dest_qp_num = dqpn
        attr.rq_psn = 0
        attr.max_dest_rd_atomic = 1
        attr.min_rnr_timer = 12
        dgid = GID(ipaddress.IPv6Address(f"::ffff:{addr}").exploded)
        attr.ah_attr = AHAttr(port_num=PORT, is_global=1, gr=GlobalRoute(dgid=dgid, sgid_index=gidx))
        qp.to_rtr(attr)

    s0 = sample()
    c0 = slab_caches()
    qps = [new_qp() for _ in range(nqp)]
    s1 = sample()
    c1 = slab_caches()
    # Where a QP's slab bytes are (kernels with /proc/slabinfo): caches that grew by at least 64
    # bytes per QP, largest first.
    by_cache = {k: round((c1.get(k, 0) - v0) / nqp) for k, v0 in c0.items()}
    by_cache.update({k: round(v / nqp) for k, v in c1.items() if k not in c0})
    by_cache = dict(sorted(((k, v) for k, v in by_cache.items() if v >= 64), key=lambda kv: -kv[1]))
    if c0:
        # kmalloc() of more than 8 KiB (and slab pages' slack): in Slab, in no cache.
        d = delta(s0, s1)
        by_cache["(pages: kmalloc > 8 KiB)"] = round((d["slab"] - d["slab_objs"]) / nqp)
    conn_qps = [new_qp() for _ in range(nconn)]
    s2a = sample()
    for i, (qp, a) in enumerate(zip(conn_qps, fakes)):
        to_rtr(qp, a, 0x100 + i)
    s2 = sample()
    stream_qps = [new_qp() for _ in range(nstream)]
    s3a = sample()
    for i, qp in enumerate(stream_qps):
        to_rtr(qp, fakes[0], 0x200 + i)
    s3 = sample()
    for q in qps + conn_qps + stream_qps:
        q.close()
    s4 = sample()
    for a in fakes:
        subprocess.run(["ip", "neigh", "del", a, "dev", "eth0"], check=False)

    created = per(delta(s0, s1), nqp)
    rtr_stream = per(delta(s3a, s3), nstream)
    rtr_conn = per(delta(s2a, s2), nconn)
    conn = {k: rtr_conn[k] - rtr_stream[k] for k in rtr_conn}
    print(json.dumps({
        "dev": dev, "nqp": nqp, "nconn": nconn, "nstream": nstream,
        "qp_created": created, "qp_created_by_cache": by_cache, "qp_rtr_extra": rtr_stream,
        "qp_rtr": {k: created[k] + rtr_stream[k] for k in created},
        "connection": conn,
        "left_after_destroy": delta(s0, s4),
        "samples": [s0, s1, s2a, s2, s3a, s3, s4],
    }), flush=True)


if __name__ == "__main__":
    main()
