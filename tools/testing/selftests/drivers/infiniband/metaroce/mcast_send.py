#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Sends COUNT UD datagrams of SIZE bytes to an IPv4 multicast group through pyverbs, each
signaled and completed before the next is posted, so that the QP outlives every send (mckey's
sender posts unsignaled sends and destroys its QP at once, which cuts rdma_rxe's transmit short).

Usage: mcast_send.py DEVICE GID_INDEX GROUP COUNT SIZE [QKEY]
QKEY defaults to rdma_cm's RDMA_UDP_QKEY (0x01234567), the Q_Key of a receiver that joined the
group through rdma_cm's UDP port space (mckey). Payload byte i of message m is (m + i) & 0xff.
Prints one line; exits 1 if a send does not complete successfully within 10 s.
"""
import ipaddress
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR

PORT = 1
MULTICAST_QPN = 0xFFFFFF


def main():
    dev, gidx, group, count, size = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    qkey = int(sys.argv[6], 0) if len(sys.argv) > 6 else 0x01234567
    grp = ipaddress.ip_address(group)
    if grp.version != 4 or not grp.is_multicast:
        sys.exit(f"{group}: not an IPv4 multicast group")
    ctx = Context(name=dev)
    pd = PD(ctx)
    cq = CQ(ctx, 4)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq,
                           cap=QPCap(max_send_wr=4, max_recv_wr=1, max_send_sge=1, max_recv_sge=1)))
    attr = QPAttr(port_num=PORT)
    attr.qkey = qkey
    attr.sq_psn = 0
    qp.to_rts(attr)
    dgid = GID(ipaddress.IPv6Address(f"::ffff:{grp}").exploded)
    gr = GlobalRoute(dgid=dgid, sgid_index=gidx)
    gr.hop_limit = 64
    ah = AH(pd, attr=AHAttr(port_num=PORT, is_global=1, gr=gr))
    mr = MR(pd, size, e.IBV_ACCESS_LOCAL_WRITE)
    t0 = time.monotonic()
    for m in range(count):
        mr.write(bytes((m + i) & 0xFF for i in range(size)), size)
        wr = SendWR(wr_id=m, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, size, mr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_ud(ah, MULTICAST_QPN, qkey)
        qp.post_send(wr)
        deadline = time.monotonic() + 10
        while True:
            n, wcs = cq.poll(1)
            if n:
                break
            if time.monotonic() > deadline:
                sys.exit(f"send {m}: no completion within 10 s")
            time.sleep(0.001)
        if wcs[0].status != e.IBV_WC_SUCCESS or wcs[0].wr_id != m:
            sys.exit(f"send {m}: completion status {wcs[0].status}, wr_id {wcs[0].wr_id}")
    print(f"sent {count} x {size} B to {group} (Q_Key {qkey:#x}) in {time.monotonic() - t0:.1f} s, "
          f"every send completed", flush=True)


if __name__ == "__main__":
    main()
