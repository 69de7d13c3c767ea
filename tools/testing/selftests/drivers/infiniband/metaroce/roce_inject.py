#!/usr/bin/env python3
"""roce_inject.py SRC DST COUNT KIND [SRC DST COUNT KIND ...]: sends COUNT RoCEv2 datagrams of each
KIND from SRC to DST:4791 (one process for all groups: Python starts slowly in a debug guest).

KIND is one of
  valid      RC SEND-only packets with a correct ICRC (to QP 0x11, which does not exist)
  bad-icrc   the same packets with one ICRC bit flipped
  short      datagrams too short to hold a BTH and ICRC
  bad-opcode a reserved BTH opcode with a correct ICRC
  uc-send:QPN  UC SEND-only packets of 64 bytes (0x41) to QP QPN, PSN 0, 1, 2, ... (UC takes a
             first/only packet at any PSN: an injection needs only the QPN)
  uc-write:QPN:VA:LAYOUT
             UC RDMA WRITE-only packets of 64 bytes to QP QPN at address VA, the i-th (from 0)
             guessing R_Key i << 8 (LAYOUT old: the key layout before issue 32's fix, table index
             << 8) or i (LAYOUT all: every key byte of index 0, then of index 1, ...); its payload
             is i + 1 (big endian, 8 times), so the target tells which guess hit
  rc-send:QPN  RC SEND-only packets of 64 bytes (0x42) to QP QPN at pseudo-random PSNs (a guess
             each; seeded, so a run repeats)

IPv6 goes through a normal UDP socket (every field the ICRC covers is known in advance);
IPv4 through a raw socket with our own IP header, since the kernel picks the IPv4 ID, which the
ICRC covers. The ICRC code checks itself first against rdma_rxe captures (tests/fixtures).
"""
import glob
import os
import random
import socket
import struct
import sys
import time
import zlib

PORT = 4791
SPORT = 49152
PSN_GUESS = random.Random(0x32)   # rc-send's guesses


def icrc(ip: bytes, udp: bytes, ib: bytes) -> bytes:
    """The invariant CRC (IBTA RoCEv2 annex): CRC-32 over a masked LRH stand-in, IP and UDP
    headers and the IB packet, variant fields set to ones."""
    if ip[0] >> 4 == 4:
        ip = bytearray(ip)
        ip[1] = 0xFF              # TOS
        ip[8] = 0xFF              # TTL
        ip[10:12] = b"\xff\xff"   # header checksum
    else:
        ip = bytearray(ip)
        ip[0] |= 0x0F             # traffic class + flow label
        ip[1:4] = b"\xff\xff\xff"
        ip[7] = 0xFF              # hop limit
    udp = bytearray(udp)
    udp[6:8] = b"\xff\xff"        # checksum
    ib = bytearray(ib)
    ib[4] = 0xFF                  # BTH reserved byte (FECN/BECN)
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(ib)))


FLUSH = 0x1C


def icrc_ok(ip: bytes, udp: bytes, ib: bytes) -> bool:
    """True if the trailer of `ib` (BTH to ICRC) is its ICRC. A FLUSH request may also carry
    rdma_rxe's ICRC, which covers the headers a second time, unmasked (Linux 7.3's rdma_rxe has no
    payload offset for that opcode; MetaRoCE sends it by default, module parameter flush_icrc_rxe)."""
    body, trailer = ib[:-4], ib[-4:]
    std = icrc(ip, udp, body)
    if std == trailer:
        return True
    rxe = zlib.crc32(bytes(body), struct.unpack("<I", std)[0])
    return body[:1] == bytes([FLUSH]) and struct.pack("<I", rxe) == trailer


def self_check() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    fixtures = glob.glob(os.path.join(here, "fixtures/rxe-*.hex"))
    if not fixtures:
        sys.exit("roce_inject: no fixtures to check the ICRC code against")
    for f in fixtures:
        hexs = "".join(l for l in open(f) if not l.startswith("#"))
        pkt = bytes.fromhex("".join(hexs.split()))
        ihl = (pkt[0] & 0x0F) * 4
        ip, udp, ib = pkt[:ihl], pkt[ihl:ihl + 8], pkt[ihl + 8:]
        # rdma_rxe's FLUSH requests (rxe-op1c-*) carry its own ICRC for that opcode.
        if not icrc_ok(ip, udp, ib) or (ib[0] == FLUSH) == (icrc(ip, udp, ib[:-4]) == ib[-4:]):
            sys.exit(f"roce_inject: ICRC self-check failed on {os.path.basename(f)}")


def ib_packet(kind: str, seq: int) -> bytes:
    """BTH (+ payload) without ICRC."""
    if kind.startswith("uc-send:"):
        qpn = int(kind.split(":", 1)[1], 0)
        return struct.pack(">BBHII", 0x24, 0, 0xFFFF, qpn, seq & 0xFFFFFF) + b"\x41" * 64  # UC SEND_ONLY
    if kind.startswith("uc-write:"):
        _, qpn, va, layout = kind.split(":")
        rkey = seq << 8 if layout == "old" else seq
        reth = struct.pack(">QII", int(va, 0), rkey & 0xFFFF_FFFF, 64)
        # UC RDMA_WRITE_ONLY, PSN = the guess number (UC takes an only packet at any PSN).
        return struct.pack(">BBHII", 0x2A, 0, 0xFFFF, int(qpn, 0), seq & 0xFFFFFF) + reth \
            + struct.pack(">Q", seq + 1) * 8
    if kind.startswith("rc-send:"):
        qpn = int(kind.split(":", 1)[1], 0)
        return struct.pack(">BBHII", 0x04, 0, 0xFFFF, qpn, PSN_GUESS.getrandbits(24)) + b"\x42" * 64  # RC SEND_ONLY
    opcode = 0x04 if kind != "bad-opcode" else 0x1F   # RC SEND_ONLY / reserved RC opcode
    payload = struct.pack(">I", seq)
    bth = struct.pack(">BBHII", opcode, 0, 0xFFFF, 0x11, seq & 0xFFFFFF)  # pad 0, TVer 0
    return bth + payload


def checksum(b: bytes) -> int:
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f">{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def main() -> int:
    args = sys.argv[1:]
    if not args or len(args) % 4:
        sys.exit(__doc__)
    self_check()
    for g in range(0, len(args), 4):
        send(args[g], args[g + 1], int(args[g + 2]), args[g + 3])
    return 0


def send(src: str, dst: str, count: int, kind: str) -> None:
    if kind not in ("valid", "bad-icrc", "short", "bad-opcode") and not kind.startswith(("uc-send:", "rc-send:")) \
            and not (kind.startswith("uc-write:") and len(kind.split(":")) == 4 and kind.endswith((":old", ":all"))):
        sys.exit(f"roce_inject: unknown kind {kind}")
    v6 = ":" in dst
    if v6:
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        s.bind((src, SPORT))
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    for i in range(count):
        if kind == "short":
            body = b"\x04\x00"
        else:
            ib = ib_packet(kind, i)
            ulen = 8 + len(ib) + 4
            udp = struct.pack(">HHHH", SPORT, PORT, ulen, 0)
            if v6:
                ip = struct.pack(">IHBB", 6 << 28, ulen, 17, 64) + socket.inet_pton(socket.AF_INET6, src) \
                    + socket.inet_pton(socket.AF_INET6, dst)
            else:
                ip = bytearray(struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + ulen, (0x1000 + i) & 0xFFFF, 0x4000, 64, 17, 0,
                                           socket.inet_aton(src), socket.inet_aton(dst)))
                ip[10:12] = struct.pack(">H", checksum(bytes(ip)))
                ip = bytes(ip)
            trailer = icrc(ip, udp, ib)
            if kind == "bad-icrc":
                trailer = bytes([trailer[0] ^ 0x01]) + trailer[1:]
            body = ib + trailer
        if v6:
            s.sendto(body, (dst, PORT))
        else:
            udp = struct.pack(">HHHH", SPORT, PORT, 8 + len(body), 0)
            ip = bytearray(struct.pack(">BBHHHBBH4s4s", 0x45, 0, 28 + len(body), (0x1000 + i) & 0xFFFF, 0x4000, 64, 17, 0,
                                       socket.inet_aton(src), socket.inet_aton(dst)))
            ip[10:12] = struct.pack(">H", checksum(bytes(ip)))
            s.sendto(bytes(ip) + udp + body, (dst, 0))
        if i % 16 == 15:
            # Bursts of 16: the receiving veth's backlog must not overflow (a guess that hits
            # must arrive).
            time.sleep(0.002)
    s.close()


if __name__ == "__main__":
    sys.exit(main())
