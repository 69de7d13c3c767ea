#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""RC error completions through the libmetaroce provider (pyverbs), on one device (loopback).

- Remote access errors arrive as NAKs, promptly: the requester's QPs have a local ACK timeout
  of 1.07 s (timeout 18) and 7 retries, so an error that came from retry exhaustion instead
  would take over 8 s; the check allows 4 s for a loaded TCG host. RDMA READ from an MR without remote read, WRITE to an
  MR without remote write, WRITE under an R_Key no MR has, WRITE past an MR's end, ATOMIC to an
  MR without remote atomic; each leaves the canary bytes of the target MR as they were.
- A SEND with no receive posted and rnr_retry 0: IBV_WC_RNR_RETRY_EXC_ERR.
- Every packet lost (netem on lo): IBV_WC_RETRY_EXC_ERR after retry_cnt retransmissions, with the
  device's local_ack_timeout_err and retry_exceeded_err counters moving.

Usage: rc_errors.py DEV GID_INDEX. Prints one line per check; exits non-zero on the first failure.
"""
import subprocess
import sys
import time

import pyverbs.enums as e
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.wr import SGE, SendWR

from mw_check import CANARY, Side, fail, ok, poll

N = 4096


def counters(dev):
    out = subprocess.run(["rdma", "statistic", "show", "link", f"{dev}/1"], capture_output=True, text=True).stdout
    words = out.split()
    return {words[i]: int(words[i + 1]) for i in range(len(words) - 1) if words[i + 1].isdigit()}


def main():
    dev, gid_index = sys.argv[1], int(sys.argv[2])
    ctx = Context(name=dev)
    gid = ctx.query_gid(1, gid_index)
    pd = PD(ctx)
    lmr = MR(pd, N, e.IBV_ACCESS_LOCAL_WRITE)
    lmr.write(bytes(range(256)) * (N // 256), N)

    def target(access):
        mr = MR(pd, N, access)
        if access & e.IBV_ACCESS_LOCAL_WRITE:
            mr.write(bytes([CANARY]) * N, N)
        return mr

    def nak(what, op, mr, rkey, addr, length=64, atomic=False):
        s = Side(ctx, pd, gid, gid_index, timeout=18)
        wr = SendWR(wr_id=1, opcode=op, num_sge=1, sg=[SGE(lmr.buf, 8 if atomic else length, lmr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        if atomic:
            wr.set_wr_atomic(rkey, addr, 1, 0)
        else:
            wr.set_wr_rdma(rkey, addr)
        t0 = time.monotonic()
        s.req.post_send(wr)
        wc = poll(s.scq, what)
        took = time.monotonic() - t0
        if wc.status != e.IBV_WC_REM_ACCESS_ERR:
            fail(f"{what}: status {wc.status}, expected IBV_WC_REM_ACCESS_ERR")
        if mr.read(N, 0) != bytes([CANARY]) * N:
            fail(f"{what}: the target MR changed")
        # A NAK, not retry exhaustion (8 local ACK timeouts: over 8 s).
        if took > 4:
            fail(f"{what}: the error took {took:.2f} s (a timeout, not a NAK)")
        ok(f"{what}: IBV_WC_REM_ACCESS_ERR after {took * 1000:.0f} ms, target unchanged")

    rw = e.IBV_ACCESS_LOCAL_WRITE
    m = target(rw | e.IBV_ACCESS_REMOTE_WRITE)
    nak("READ from an MR without remote read", e.IBV_WR_RDMA_READ, m, m.rkey, m.buf)
    m = target(rw | e.IBV_ACCESS_REMOTE_READ)
    nak("WRITE to an MR without remote write", e.IBV_WR_RDMA_WRITE, m, m.rkey, m.buf)
    m = target(rw | e.IBV_ACCESS_REMOTE_WRITE)
    nak("WRITE under an R_Key no MR has", e.IBV_WR_RDMA_WRITE, m, (m.rkey + 0x10000) | 0xff, m.buf)
    nak("WRITE 64 bytes ending 1 past the MR", e.IBV_WR_RDMA_WRITE, m, m.rkey, m.buf + N - 63)
    m = target(rw | e.IBV_ACCESS_REMOTE_WRITE)
    nak("FETCH_ADD on an MR without remote atomic", e.IBV_WR_ATOMIC_FETCH_AND_ADD, m, m.rkey, m.buf, atomic=True)

    # RNR: nothing posted to receive, no RNR retries.
    s = Side(ctx, pd, gid, gid_index, rnr_retry=0)
    s.req.post_send(SendWR(wr_id=2, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(lmr.buf, 64, lmr.lkey)],
                           send_flags=e.IBV_SEND_SIGNALED))
    wc = poll(s.scq, "SEND without a receive")
    if wc.status != e.IBV_WC_RNR_RETRY_EXC_ERR:
        fail(f"SEND without a receive, rnr_retry 0: status {wc.status}")
    ok("SEND without a receive, rnr_retry 0: IBV_WC_RNR_RETRY_EXC_ERR")

    # Every packet lost: the requester retransmits retry_cnt times, then gives up.
    s = Side(ctx, pd, gid, gid_index, retry_cnt=2)
    before = counters(dev)
    subprocess.run(["tc", "qdisc", "add", "dev", "lo", "root", "netem", "loss", "100%"], check=True)
    try:
        m = target(rw | e.IBV_ACCESS_REMOTE_WRITE)
        wr = SendWR(wr_id=3, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(lmr.buf, 64, lmr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(m.rkey, m.buf)
        t0 = time.monotonic()
        s.req.post_send(wr)
        wc = poll(s.scq, "WRITE with every packet lost")
        took = time.monotonic() - t0
    finally:
        subprocess.run(["tc", "qdisc", "del", "dev", "lo", "root"], check=False)
    after = counters(dev)
    if wc.status != e.IBV_WC_RETRY_EXC_ERR:
        fail(f"WRITE with every packet lost: status {wc.status}, expected IBV_WC_RETRY_EXC_ERR")
    d = {k: after.get(k, 0) - before.get(k, 0) for k in ("local_ack_timeout_err", "retry_exceeded_err", "retransmits")}
    if d["local_ack_timeout_err"] < 3 or d["retry_exceeded_err"] < 1 or d["retransmits"] < 2:
        fail(f"WRITE with every packet lost: counters moved {d}")
    ok(f"WRITE with every packet lost: IBV_WC_RETRY_EXC_ERR after {took:.2f} s; counters {d}")
    ok("all RC error checks passed")


if __name__ == "__main__":
    main()
