#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""MAD round trips through ib_umad over a MetaRoCE device's GSI QP (QP1).

  umad_ping.py serve DEV COUNT                answer COUNT vendor-class GET requests, then exit
  umad_ping.py ping DEV DST_GID SRC_GID COUNT  send COUNT requests from DEV's GID SRC_GID to the
                                              QP1 of DST_GID and check the answers
GIDs are IPv6 text (::ffff:192.0.2.1 for an IPv4 address); DEV is the RDMA device of port 1.

The kernel's MAD layer sends and receives these through the provider's kernel UD path:
post_send on QP1 (with IRQs off), the transmit worker, RoCEv2 UD packets with a DETH, the
receive path, GRH placement and the work completion fields ib_mad needs to answer. The
responder echoes the request's payload reversed, so data has to cross intact both ways.

IPv6 GIDs use GET/GET_RESP, so ib_mad matches each answer to its request (by TID and by the
GIDs of the request's AH, read back through query_ah, against the answer's GRH). IPv4 GIDs use
unsolicited SENDs both ways: the GRH area of a RoCEv2 IPv4 packet holds an IPv4 header, which
ib_mad's response matching (rcv_has_same_gid) does not understand, whatever the provider.
Exit status 0 only if every round trip completed with the right payload.
"""
import os, select, struct, sys, fcntl

MAGIC = 0x1b
def _iowr(nr, size): return (3 << 30) | (size << 16) | (MAGIC << 8) | nr
def _io(nr): return (MAGIC << 8) | nr
ENABLE_PKEY = _io(3)
# struct ib_user_mad_reg_req: id, method_mask[2 x u64 (4-aligned)], qpn, class, version, oui[3], rmpp
REG_FMT = "=I16sBBB3sB"
REG_SIZE = (struct.calcsize(REG_FMT) + 3) & ~3
REGISTER_AGENT = _iowr(1, REG_SIZE)
# struct ib_user_mad_hdr (with pkey_index: 64 bytes)
HDR_FMT = ">IIIII4s4sHBBBBBB16sIH6s"
HDR_SIZE = struct.calcsize(HDR_FMT)
assert HDR_SIZE == 64, HDR_SIZE
MAD_SIZE = 256
VENDOR_CLASS = 0x09       # vendor-specific class without OUI
GET, SEND, GET_RESP = 0x01, 0x03, 0x81
QP1_QKEY = 0x80010000

def register(fd, methods):
    mask = 0
    for m in methods:
        mask |= 1 << m
    req = struct.pack(REG_FMT, 0, mask.to_bytes(16, "little"), 1, VENDOR_CLASS, 1, b"\0\0\0", 0)
    req = req.ljust(REG_SIZE, b"\0")
    out = bytearray(req)
    fcntl.ioctl(fd, REGISTER_AGENT, out)
    return struct.unpack_from("=I", out)[0]

def umad_path(dev):
    base = "/sys/class/infiniband_mad"
    for u in sorted(os.listdir(base)):
        try:
            with open(f"{base}/{u}/ibdev") as f:
                if f.read().strip() == dev:
                    return f"/dev/infiniband/{u}"
        except OSError:
            pass
    sys.exit(f"no umad device for {dev}")

def gid_index(dev, gid_text):
    import ipaddress
    want = ipaddress.IPv6Address(gid_text)
    base = f"/sys/class/infiniband/{dev}/ports/1"
    for n in sorted(os.listdir(f"{base}/gids"), key=int):
        try:
            with open(f"{base}/gids/{n}") as f:
                gid = ipaddress.IPv6Address(f.read().strip())
            with open(f"{base}/gid_attrs/types/{n}") as f:
                ty = f.read().strip()
        except (OSError, ValueError):
            continue
        if gid == want and ty == "RoCE v2":
            return int(n)
    sys.exit(f"{gid_text} is not a RoCE v2 GID of {dev}")

def open_umad(dev):
    fd = os.open(umad_path(dev), os.O_RDWR)
    fcntl.ioctl(fd, ENABLE_PKEY)
    return fd

def mad(method, tid, payload):
    hdr = struct.pack(">BBBBHHQHHI", 1, VENDOR_CLASS, 1, method, 0, 0, tid, 0x10, 0, 0)
    return (hdr + payload).ljust(MAD_SIZE, b"\0")[:MAD_SIZE]

def read_one(fd, timeout):
    r, _, _ = select.select([fd], [], [], timeout)
    if not r:
        sys.exit(f"no MAD within {timeout} s")
    buf = os.read(fd, HDR_SIZE + MAD_SIZE)
    return struct.unpack(HDR_FMT, buf[:HDR_SIZE]), buf[HDR_SIZE:]

def serve(dev, count):
    fd = open_umad(dev)
    agent = register(fd, [GET, SEND])
    for _ in range(count):
        h, m = read_one(fd, 60)
        (_id, status, _t, _r, length, qpn, qkey, lid, sl, pb, grh, gidx, hop, tc, gid, fl, pki, _res) = h
        if m[3] not in (GET, SEND):
            sys.exit(f"unexpected method {m[3]:#x}")
        if not grh:
            sys.exit("request arrived without a GRH (RoCE needs one)")
        tid = struct.unpack_from(">Q", m, 8)[0]
        payload = m[24:]
        reply = struct.pack(HDR_FMT, agent, 0, 0, 0, 0, qpn, struct.pack(">I", QP1_QKEY), lid, sl, pb,
                            1, gidx, hop or 64, tc, gid, fl, pki, b"\0" * 6)
        os.write(fd, reply + mad(GET_RESP if m[3] == GET else SEND, tid, payload[::-1]))
    print(f"served {count} requests")

def ping(dev, gid_text, src_text, count):
    import ipaddress
    gid = ipaddress.IPv6Address(gid_text).packed
    sgid_index = gid_index(dev, src_text)
    fd = open_umad(dev)
    v4 = ipaddress.IPv6Address(gid_text).ipv4_mapped is not None
    method, answer = (SEND, SEND) if v4 else (GET, GET_RESP)
    # A device sending SENDs to its own GID gets them itself, unanswered.
    to_self = v4 and gid_text == src_text
    agent = register(fd, [SEND] if v4 else [])
    timeout, retries = (0, 0) if v4 else (2000, 5)
    for i in range(count):
        payload = os.urandom(200)
        hdr = struct.pack(HDR_FMT, agent, 0, timeout, retries, 0, struct.pack(">I", 1), struct.pack(">I", QP1_QKEY),
                          0, 0, 0, 1, sgid_index, 64, 0, gid, 0, 0, b"\0" * 6)
        os.write(fd, hdr + mad(method, 0x1000 + i, payload))
        h, m = read_one(fd, 30)
        status = h[1]
        if status:
            sys.exit(f"request {i}: status {status} (110 = timed out)")
        if m[3] != answer:
            sys.exit(f"request {i}: answer has method {m[3]:#x}")
        if struct.unpack_from(">Q", m, 8)[0] & 0xffffffff != 0x1000 + i:
            sys.exit(f"request {i}: answer has another TID")
        want = payload.ljust(MAD_SIZE - 24, b"\0")
        if m[24:] != (want if to_self else want[::-1]):
            sys.exit(f"request {i}: payload corrupted")
        if not h[10]:
            sys.exit(f"request {i}: answer without GRH")
    print(f"{count} MAD round trips ({'SEND' if v4 else 'GET'}) to {gid_text} ok")

if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "ping":
        ping(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        sys.exit(__doc__)
