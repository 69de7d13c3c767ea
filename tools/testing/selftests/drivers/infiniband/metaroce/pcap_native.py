#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Checks a capture (classic pcap, Ethernet) of MetaRoCE native traffic
(Documentation/metaroce/transport.rst, sections 2-3), independently of the driver:

* every UDP datagram to the native port carries a correct, non-zero UDP checksum;
* every one is a well-formed MRH: version 1, type DATA (60-byte header + PayloadLen bytes,
  Offset + PayloadLen <= MsgLen, known opcode) or ACK (56 bytes, ConnId echoed);
* DATA is ECT(0), ACKs are Not-ECT;
* the DATA packets of each connection use at least MIN_PATHS distinct PathIds and as many
  UDP source ports (spraying), and no RoCEv2 packet (port 4791) carries RC traffic.

Usage: pcap_native.py PCAP MIN_DATA MIN_PATHS [--port N] [--ops N,N,...]
(--ops: DATA opcodes that must appear at least once)
Prints counts per packet kind; exit status 1 on any violation.
"""
import struct
import sys

NATIVE_PORT = 19791
ROCE_PORT = 4791


def packets(path):
    with open(path, "rb") as f:
        hdr = f.read(24)
        magic = struct.unpack("<I", hdr[:4])[0]
        if magic in (0xA1B2C3D4, 0xA1B23C4D):
            end = "<"
        elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
            end = ">"
        else:
            sys.exit(f"{path}: not a classic pcap file")
        linktype = struct.unpack(end + "I", hdr[20:24])[0]
        if linktype != 1:
            sys.exit(f"{path}: link type {linktype}, expected Ethernet")
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            incl = struct.unpack(end + "IIII", rec)[2]
            yield f.read(incl)


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def udp_of(frame):
    """(src, dst, ecn, udp bytes) of an IPv4/IPv6 UDP frame, else None."""
    eth_type = struct.unpack("!H", frame[12:14])[0]
    ip = frame[14:]
    if eth_type == 0x0800:
        ihl = (ip[0] & 15) * 4
        if ip[9] != 17:
            return None
        total = struct.unpack("!H", ip[2:4])[0]
        return ip[12:16], ip[16:20], ip[1] & 3, ip[ihl:total]
    if eth_type == 0x86DD:
        if ip[6] != 17:
            return None
        plen = struct.unpack("!H", ip[4:6])[0]
        tc = ((ip[0] & 15) << 4) | (ip[1] >> 4)
        return ip[8:24], ip[24:40], tc & 3, ip[40:40 + plen]
    return None


def main():
    args = sys.argv[1:]
    port = NATIVE_PORT
    if "--port" in args:
        i = args.index("--port")
        port = int(args[i + 1])
        del args[i:i + 2]
    need = []
    if "--ops" in args:
        i = args.index("--ops")
        need = [int(o) for o in args[i + 1].split(",")]
        del args[i:i + 2]
    if len(args) != 3:
        sys.exit(__doc__)
    path, min_data, min_paths = args[0], int(args[1]), int(args[2])
    bad = []
    n = {"data": 0, "retx": 0, "ack": 0, "roce": 0, "payload": 0, "ops": {}}
    paths = {}  # conn id -> set of (path id, source port)
    for frame in packets(path):
        u = udp_of(frame)
        if u is None:
            continue
        src, dst, ecn, udp = u
        sport, dport, ulen, ucs = struct.unpack("!HHHH", udp[:8])
        if dport == ROCE_PORT:
            n["roce"] += 1
            continue
        if dport != port:
            continue
        pseudo = src + dst + struct.pack("!BBH", 0, 17, ulen)
        if ucs == 0 or csum(pseudo + udp[:ulen]) != 0xFFFF:
            bad.append(f"bad UDP checksum {ucs:#06x} from port {sport}")
            continue
        m = udp[8:ulen]
        if len(m) < 8 or m[0] >> 4 != 1:
            bad.append(f"not an MRH: {m[:8].hex()}")
            continue
        kind = m[0] & 15
        conn = struct.unpack("!I", m[4:8])[0]
        if kind == 1:
            if len(m) < 60:
                bad.append("short DATA header")
                continue
            msg_len, offset = struct.unpack("!II", m[32:40])
            va, rkey, imm = struct.unpack("!QII", m[40:56])
            plen = struct.unpack("!H", m[56:58])[0]
            op = m[3]
            # 0 SEND, 1 SEND_IMM, 2 WRITE, 3 WRITE_IMM, 5 READ_RESP, 10 SEND_INV: payload within
            # the message; 4 READ: no payload; 7 CMP_SWAP, 8 FETCH_ADD: the 16-byte operand block
            # is the payload; 6 NAK, 9 ATOMIC_RESP: no payload (transport.rst, sections 3, 9.2
            # and 11).
            if op > 10 or len(m) < 60 + plen or plen > 9000:
                bad.append(f"bad DATA: op {op} len {plen} offset {offset} msg {msg_len}")
                continue
            if op in (0, 1, 2, 3, 5, 10) and offset + plen > msg_len:
                bad.append(f"DATA beyond its message: op {op} len {plen} offset {offset} msg {msg_len}")
                continue
            if (op in (4, 6, 9) and plen != 0) or (op in (7, 8) and plen != 16):
                bad.append(f"op {op} with {plen} payload bytes")
                continue
            # Sends carry no RemoteVa; SEND and SEND_IMM no RKey; SEND_INV the key to invalidate
            # in RKey (every packet) and no Imm.
            if (op in (0, 1, 10) and va != 0) or (op in (0, 1) and rkey != 0) or (op == 10 and imm != 0):
                bad.append(f"send op {op} with RemoteVa {va:#x} RKey {rkey:#x} Imm {imm:#x}")
                continue
            n["ops"][op] = n["ops"].get(op, 0) + 1
            if ecn != 2:
                bad.append(f"DATA not ECT(0): ECN {ecn}")
            n["data"] += 1
            n["payload"] += plen
            if m[1] & 0x80:
                n["retx"] += 1
            paths.setdefault(conn, set()).add((m[2], sport))
        elif kind == 2:
            if len(m) != 56:
                bad.append(f"ACK of {len(m)} bytes")
                continue
            if ecn != 0:
                bad.append(f"ACK with ECN {ecn}")
            n["ack"] += 1
        else:
            bad.append(f"unknown type {kind}")
    print(f"native DATA {n['data']} ({n['retx']} retransmissions, {n['payload']} payload bytes), "
          f"ACK {n['ack']}, RoCEv2 packets {n['roce']}")
    names = ["SEND", "SEND_IMM", "WRITE", "WRITE_IMM", "READ", "READ_RESP", "NAK", "CMP_SWAP", "FETCH_ADD",
             "ATOMIC_RESP", "SEND_INV"]
    print("DATA by opcode: " + ", ".join(f"{names[o]} {c}" for o, c in sorted(n["ops"].items())))
    for conn, ps in sorted(paths.items()):
        ids = {p for p, _ in ps}
        ports = {s for _, s in ps}
        print(f"connection {conn:#010x}: DATA on {len(ids)} paths, {len(ports)} source ports")
        if len(ids) < min_paths or len(ports) < min_paths:
            bad.append(f"connection {conn:#010x} sprayed over {len(ids)} paths / {len(ports)} ports, "
                       f"fewer than {min_paths}")
    if n["data"] < min_data:
        bad.append(f"{n['data']} DATA packets, fewer than {min_data}")
    if n["ack"] == 0 and min_data > 0:
        bad.append("no ACK")
    for o in need:
        if o not in n["ops"]:
            bad.append(f"no DATA packet of opcode {o}")
    if n["roce"]:
        bad.append(f"{n['roce']} RoCEv2 packets (port {ROCE_PORT}) in a native run")
    for b in bad[:20]:
        print("BAD:", b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
