#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The target of forged native WRITEs and atomics (56-native-inject): one RC QP on DEV, moved to RTS
towards a peer GID that runs no QP of its own, so that the device keeps a connection (and a stream
bound to the QP) that only the injector talks to, and one MR of 3 x 4096 bytes filled with a canary
byte, writable and atomically accessible remotely.

Usage: native_canary.py DEV SGID_INDEX DGID OUT GO
Writes "QPN RKEY ADDR LENGTH" (decimal) to OUT, waits (up to 240 s) until the file GO exists, then
checks the MR: every byte must still be the canary except the 64 bytes at offset 2 x 4096, which
must hold what native_inject.py's write-valid packet carries (the positive control: a forged WRITE
with a valid key, Dsn and Msn is placed, so the canary check can see a write). Prints the ranges
that changed; exits 1 if they are not exactly that one.
"""
import os
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr

W = 4096
CANARY = 0x5A
PORT = 1


def main():
    dev, sgid_index, dgid, out, go = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    ctx = Context(name=dev)
    pd = PD(ctx)
    cq = CQ(ctx, 16)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                           cap=QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)))
    mr = MR(pd, 3 * W, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_ATOMIC)
    mr.write(bytes([CANARY]) * (3 * W), 3 * W)
    attr = QPAttr(port_num=PORT)
    attr.qp_access_flags = e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_ATOMIC
    attr.path_mtu = e.IBV_MTU_1024
    attr.dest_qp_num = 0x123
    attr.rq_psn = attr.sq_psn = 0
    attr.max_dest_rd_atomic = attr.max_rd_atomic = 1
    attr.min_rnr_timer, attr.timeout, attr.retry_cnt, attr.rnr_retry = 12, 14, 7, 7
    attr.ah_attr = AHAttr(port_num=PORT, is_global=1, gr=GlobalRoute(dgid=GID(dgid), sgid_index=sgid_index))
    qp.to_rts(attr)
    with open(out + ".tmp", "w") as f:
        f.write(f"{qp.qp_num} {mr.rkey} {mr.buf} {3 * W}\n")
    os.rename(out + ".tmp", out)
    end = time.monotonic() + 240
    while not os.path.exists(go):
        if time.monotonic() > end:
            sys.exit("native_canary: never told to check")
        time.sleep(0.2)
    got = mr.read(3 * W, 0)
    # What native_inject.py's DATA builder carries as payload (its data()).
    control = bytes((0xA5 ^ k) & 0xFF for k in range(64))
    want = bytearray([CANARY]) * (3 * W)
    want[2 * W:2 * W + 64] = control
    changed, start = [], None
    for k in range(3 * W + 1):
        differs = k < 3 * W and got[k] != CANARY
        if differs and start is None:
            start = k
        elif not differs and start is not None:
            changed.append((start, k))
            start = None
    print("changed byte ranges of the MR:", " ".join(f"[{a},{b})" for a, b in changed) or "none")
    if got != bytes(want):
        print("FAIL: the MR is not canary everywhere but the positive control's 64 bytes at", 2 * W)
        return 1
    print("ok: refused WRITEs and atomics wrote nothing; the valid forged WRITE was placed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
