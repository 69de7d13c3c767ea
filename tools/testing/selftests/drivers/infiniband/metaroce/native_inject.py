#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""native_inject.py SRC DST COUNT KIND[:key=value,...] [SRC DST COUNT KIND ...]: sends COUNT MetaRoCE
native datagrams of each KIND from SRC (an address of this namespace) to DST, UDP port 19791
(Documentation/metaroce/transport.rst, sections 2-4), through raw sockets: one process for all groups
(Python starts slowly in a debug guest). Every datagram carries a correct UDP checksum unless its kind
says otherwise.

Also: native_inject.py --self-check (the builders against a decoder written from the spec, the UDP
checksum against known vectors, and the packets against tests/fixtures/native-inject.txt, which the
protocol core's own codec checks in proto/tests/native_inject.rs); native_inject.py --emit (prints
that fixture).

Kinds that need no live connection (what the receiving device must do with them):
  short            truncated headers and payloads                       rcvd_malformed (Truncated)
  version-type     version other than 1, unknown packet type            rcvd_malformed
  opcode           DATA opcodes 11..255                                 rcvd_malformed (BadOpcode)
  reserved         reserved flag bits, bytes 58-59, StreamId 31:24, ACK bytes 1 and 3: rcvd_malformed
  lengths          PayloadLen > 9000, Offset + PayloadLen > MsgLen (and overflowing), MsgLen > 2^31,
                   the fixed lengths of READ/atomics/NAK/ATOMIC_RESP wrong, PayloadLen beyond the
                   datagram                                             rcvd_malformed
  placement        RemoteVa/RKey/Rsn/Imm where the opcode has none, NAK codes 0 and 4: rcvd_malformed
  zero-checksum    a well-formed ACK with UDP checksum 0 (IPv4 only: IPv6 forbids it and its UDP
                   layer drops it before us)                            rcvd_malformed
  bad-checksum     a well-formed ACK with a wrong UDP checksum: the UDP layer drops it before the
                   tunnel socket sees it; counted by the kernel (Udp InCsumErrors and InErrors,
                   Udp6InCsumErrors for IPv6), never by the device
  no-conn          well-formed WRITEs with a made-up connection id: rcvd_no_qp when SRC and DST
                   are not the addresses of a connection of the device (send them from such an
                   address: from a peer that has a connection this is DATA of a wrong connection
                   id, dropped, and after 1 s without DATA a restart the peer must prove, 7.1)
  probe-reserved   CHALLENGE/PROOF with reserved bytes set, a truncated one: rcvd_malformed
  challenge-forged CHALLENGEs with made-up cookies: the device answers each with a PROOF of its
                   own connection id to SRC (a reflection no larger than the packet), no state kept

Kinds for a live connection; key conn= is required. ACKs carry the *receiving* device's own
connection id (debugfs: its `connection` line), DATA the sending peer's id (the peer's own line).
Keys: conn, stream (a QPN bound on the receiver: its `streams (QPN)` line), dsn, paths (default 8).
Forged packets must come from the peer's address: run this in the peer's namespace, or anywhere
with SRC spoofed (IPv4: a SRC this host does not own is written in a raw IP header).
  data-restart     SENDs of a made-up connection (conn= xor 0x5a5a5a5a: give the peer's id) to
                   stream= (Msn = Rsn = i % 4): a restart attempt. From a live peer: WrongConn.
                   After 1 s without DATA: Dropped unacknowledged (native_unproven) and a CHALLENGE sent to SRC,
                   at most one per ms; never placed unless the device at SRC proves conn= (7.1)
  proof-guess      PROOFs for conn= with guessed cookies: refused (native_bad_proofs)
  ack-cum-ahead    CumSeq 2^30 + i beyond anything sent, SACK all ones, RateHint alternately
                   0xffffffff and 0: dropped (BadAck): rcvd_dropped, native_drops, path bad_acks
  ack-wrong-conn   another connection id: dropped (WrongConn): rcvd_dropped, native_drops
  ack-bad-path     PathId beyond the connection's paths: dropped (BadPath): as above
  ack-sack-unsent  CumSeq cum= (default 0), SACK bits for CumSeq + 1 .. + 256, RateHint alternately
                   0xffffffff and 0: ACCEPTED by design when CumSeq is not beyond what the path sent
                   (an ACK is not authenticated): the path counts an ACK, nothing outstanding is
                   acknowledged if those sequences were never sent, and the sender takes the hint
                   (native_rate_hint_changes) until the next genuine ACK replaces it
  data-path-window WRITE with PathSeq 2^30 + i ahead of the window: dropped (PathWindow)
  data-dsn-far     WRITE with an old PathSeq and Dsn 2^30 + i: dropped (DsnWindow)
  data-bad-path    WRITE on a PathId beyond the connection's paths: dropped (BadPath)
  data-msn-far     WRITE to stream= with Msn 2^30 + i, Dsn dsn= + i (give the peer's data_sent plus
                   a few hundred): dropped (MsnWindow) if that Dsn is new to the receiver, a
                   duplicate if the peer already used it, dropped (DsnWindow) if too far ahead
  data-unknown-stream, write-bad-rkey, write-past-end, atomic-unaligned, write-valid:
                   WRITE to StreamId 0xfffffe; WRITE with RKey 0xdead00.. at va=; a 64-byte WRITE at
                   va= (default 2^64 - 32) under rkey=; FETCH_ADD at va= | 3 (never aligned) under
                   rkey=; a 64-byte WRITE at va= under rkey= (valid if the key and range are).
                   Dsn dsn= + i and Msn msn= + i; dsn defaults to 0xc0000000, which a receiver that
                   got fewer than 2^30 packets already has: then they are acknowledged as duplicates
                   and never placed. With a Dsn the receiver has not seen and an Msn in its window
                   they reach the stream and placement checks (NoStream; a refusal with a NAK;
                   write-valid is placed: nothing authenticates a packet), but they consume that Dsn
                   of the real sender and make the receiver NAK messages the peer never sent (its
                   NAK is then never acknowledged): use that only on a disposable connection, as
                   56-native-inject does with native_canary.py.
"""
import os
import socket
import struct
import sys
import time

PORT = 19791
MAX_PAYLOAD = 9000       # the wire's largest DATA payload (mrc_wire::MAX_PAYLOAD)
SPORT = 49152            # forged packets' UDP source ports: SPORT + (i % 4096)
OLD = 0xC000_0000        # a sequence number 2^30 behind any live one
FAR = 0x4000_0000        # and one 2^30 ahead
HUGE = 0xFFFF_FFFF
OP = {"SEND": 0, "SEND_IMM": 1, "WRITE": 2, "WRITE_IMM": 3, "READ": 4, "READ_RESP": 5, "NAK": 6,
      "CMP_SWAP": 7, "FETCH_ADD": 8, "ATOMIC_RESP": 9, "SEND_INV": 10}


def data(op=OP["WRITE"], flags=0, path=0, conn=0x0102_0304, seq=0, floor=0, stream=17, dsn=0, msn=0,
         rsn=0, msg_len=64, offset=0, va=0, rkey=0, imm=0, plen=64, resv=0, vt=0x11, payload=None) -> bytes:
    """A DATA packet (spec 3.1): the 60-byte header, then `payload` (default: PayloadLen bytes)."""
    hdr = struct.pack(">BBBBIIIIIIIIIQIIHH", vt, flags, path, op, conn, seq, floor, stream, dsn, msn, rsn,
                      msg_len, offset, va, rkey, imm, plen, resv)
    assert len(hdr) == 60
    if payload is None:
        payload = bytes((0xA5 ^ k) & 0xFF for k in range(plen))
    return hdr + payload


def ack(path=0, conn=0x0102_0304, cum=0, ack_seq=0, hint=0, ce=0, sack=(0, 0, 0, 0), flags=0, resv=0,
        vt=0x12) -> bytes:
    """An ACK (spec 3.2): 56 bytes."""
    b = struct.pack(">BBBBIIIII4Q", vt, flags, path, resv, conn, cum, ack_seq, hint, ce, *sack)
    assert len(b) == 56
    return b


def probe(vt=0x13, conn=0, cookie=0, flags=0, path=0, resv=0) -> bytes:
    """A CHALLENGE (vt 0x13) or PROOF (vt 0x14) (spec 7.1): 16 bytes."""
    return struct.pack(">BBBBIQ", vt, flags, path, resv, conn, cookie)


ONES = (2**64 - 1,) * 4


def build(kind: str, i: int, p: dict):
    """(MRH bytes, what a decoder written from spec section 3 must say, checksum: ok/bad/zero)."""
    conn = p.get("conn", 0x0102_0304)
    stream = p.get("stream", 17)
    paths = p.get("paths", 8)
    path = i % paths
    sport_seq = OLD + i
    if kind == "short":
        full = data()
        v = [(b"", "Truncated"), (b"\x11", "Truncated"), (full[:7], "Truncated"), (full[:8], "Truncated"),
             (full[:30], "Truncated"), (full[:59], "Truncated"), (ack()[:8], "Truncated"),
             (ack()[:55], "Truncated"), (full[:60 + 40], "Truncated")]
        b, e = v[i % len(v)]
        return b, e, "ok"
    if kind == "version-type":
        v = [(data(vt=0x21), "BadVersion"), (data(vt=0x01), "BadVersion"), (ack(vt=0xF2), "BadVersion"),
             (data(vt=0x10), "BadType"), (data(vt=0x15), "BadType"), (ack(vt=0x1F), "BadType")]
        b, e = v[i % len(v)]
        return b, e, "ok"
    if kind == "opcode":
        return data(op=11 + i % 245), "BadOpcode", "ok"
    if kind == "reserved":
        v = [data(flags=0x01), data(flags=0x20), data(flags=0xBF), data(resv=1), data(resv=0x100),
             data(stream=0x0100_0011), data(stream=0x8000_0011), ack(flags=0x80), ack(resv=1)]
        return v[i % len(v)], "Reserved", "ok"
    if kind == "lengths":
        v = [(data(plen=MAX_PAYLOAD + 1, msg_len=16384, payload=b""), "BadLength"),
             (data(plen=100, offset=100, msg_len=150), "BadLength"),
             (data(plen=0x20, offset=0xFFFF_FFF0, msg_len=0x8000_0000), "BadLength"),
             (data(plen=0, msg_len=0x8000_0001), "BadLength"),
             (data(op=OP["READ"], plen=16, msg_len=16, va=0x1000, rkey=1), "BadLength"),
             (data(op=OP["READ"], plen=0, offset=8, msg_len=16, va=0x1000, rkey=1), "BadLength"),
             (data(op=OP["CMP_SWAP"], plen=16, msg_len=32, va=0x1000, rkey=1), "BadLength"),
             (data(op=OP["FETCH_ADD"], plen=8, msg_len=16, va=0x1000, rkey=1), "BadLength"),
             (data(op=OP["ATOMIC_RESP"], plen=0, msg_len=16), "BadLength"),
             (data(op=OP["NAK"], plen=0, msg_len=4, imm=1), "BadLength"),
             # PayloadLen says 200, the datagram holds 100 payload bytes.
             (data(plen=200, msg_len=200, payload=bytes(100)), "Truncated")]
        b, e = v[i % len(v)]
        return b, e, "ok"
    if kind == "placement":
        v = [data(op=OP["SEND"], rkey=5), data(op=OP["SEND"], va=8), data(op=OP["SEND_IMM"], va=8),
             data(op=OP["SEND"], imm=1), data(op=OP["WRITE"], rsn=1), data(op=OP["WRITE"], imm=1),
             data(op=OP["SEND_INV"], va=8, rkey=3), data(op=OP["SEND_INV"], rkey=3, imm=1),
             data(op=OP["READ"], plen=0, msg_len=16, rsn=1), data(op=OP["READ_RESP"], rkey=1),
             data(op=OP["READ_RESP"], va=1), data(op=OP["NAK"], plen=0, msg_len=0, imm=0),
             data(op=OP["NAK"], plen=0, msg_len=0, imm=4), data(op=OP["ATOMIC_RESP"], plen=0, msg_len=8, rkey=1),
             data(op=OP["FETCH_ADD"], plen=16, msg_len=16, va=0x1000, rkey=1, rsn=1)]
        return v[i % len(v)], "BadPlacement", "ok"
    if kind in ("zero-checksum", "bad-checksum"):
        # Well formed and harmless if it got through (an ACK of nothing).
        return ack(path=path, conn=conn), "ACK", "zero" if kind == "zero-checksum" else "bad"
    if kind == "no-conn":
        return data(conn=0x0BAD_0000 + i, stream=0xFFFFFE, seq=i, dsn=i, path=path), "DATA", "ok"
    if kind == "ack-cum-ahead":
        return ack(path=path, conn=conn, cum=FAR + i, ack_seq=FAR + i, hint=HUGE if i % 2 == 0 else 0,
                   sack=ONES), "ACK", "ok"
    if kind == "ack-wrong-conn":
        return ack(path=path, conn=conn ^ 0xA5A5_A5A5, hint=HUGE), "ACK", "ok"
    if kind == "ack-bad-path":
        return ack(path=paths + i % (256 - paths), conn=conn, hint=HUGE), "ACK", "ok"
    if kind == "probe-reserved":
        v = [probe(conn=1), probe(flags=1), probe(path=1), probe(resv=1), probe(vt=0x14, conn=5, flags=0x80),
             probe()[:15]]
        return v[i % len(v)], "Truncated" if i % len(v) == 5 else "Reserved", "ok"
    if kind == "proof-guess":
        # A PROOF for connection conn= with a guessed cookie: refused (native_bad_proofs).
        return probe(vt=0x14, conn=conn, cookie=(0x9E37_79B9_7F4A_7C15 * (i + 1)) & (2**64 - 1)), "PROOF", "ok"
    if kind == "challenge-forged":
        # A CHALLENGE with a made-up cookie: answered with a PROOF to the (spoofed) source.
        return probe(cookie=i), "CHALLENGE", "ok"
    if kind == "data-restart":
        # SENDs of a made-up connection (conn= ^ 0x5a5a5a5a) to stream=, as a restarted peer sends its
        # first messages: Msn = Rsn = i % 4, so that one names the receiver's next receive
        # whatever its position. Placed only after a proven restart (spec 7.1).
        k = i % 4
        return data(op=OP["SEND"], conn=conn ^ 0x5A5A_5A5A, path=path, seq=i, floor=0, stream=stream, dsn=i, msn=k, rsn=k), \
            "DATA", "ok"
    if kind == "ack-sack-unsent":
        cum = p.get("cum", 0)
        return ack(path=path, conn=conn, cum=cum, ack_seq=cum, hint=HUGE if i % 2 == 0 else 0, sack=ONES), \
            "ACK", "ok"
    # DATA to a live connection: an old PathSeq and PathFloor (2^30 behind: before the window, never
    # moving it) unless the kind is about the path window.
    old = {"conn": conn, "path": path, "seq": sport_seq, "floor": OLD}
    if kind == "data-path-window":
        return data(**{**old, "seq": FAR + i}, stream=stream, dsn=OLD + i), "DATA", "ok"
    if kind == "data-dsn-far":
        return data(**old, stream=stream, dsn=FAR + i), "DATA", "ok"
    if kind == "data-bad-path":
        return data(**{**old, "path": paths + i % (256 - paths)}, stream=stream, dsn=OLD + i), "DATA", "ok"
    if kind == "data-msn-far":
        return data(**old, stream=stream, dsn=(p.get("dsn", OLD) + i) & 0xFFFF_FFFF, msn=FAR + i), "DATA", "ok"
    dsn = (p.get("dsn", OLD) + i) & 0xFFFF_FFFF
    msn = (p.get("msn", 0) + i) & 0xFFFF_FFFF
    if kind == "data-unknown-stream":
        return data(**old, stream=0xFFFFFE, dsn=dsn, msn=msn), "DATA", "ok"
    if kind == "write-bad-rkey":
        return data(**old, stream=stream, dsn=dsn, msn=msn, va=p.get("va", 0x1000), rkey=0xDEAD_0000 + i), \
            "DATA", "ok"
    if kind == "write-past-end":
        return data(**old, stream=stream, dsn=dsn, msn=msn, va=p.get("va", 2**64 - 32), rkey=p.get("rkey", 1)), \
            "DATA", "ok"
    if kind == "atomic-unaligned":
        return data(**old, op=OP["FETCH_ADD"], stream=stream, dsn=dsn, msn=msn, va=p.get("va", 0x1000) | 3,
                    rkey=p.get("rkey", 1), msg_len=16, plen=16, payload=struct.pack(">QQ", 1, 0)), "DATA", "ok"
    if kind == "write-valid":
        return data(**old, stream=stream, dsn=dsn, msn=msn, va=p.get("va", 0x1000), rkey=p.get("rkey", 1)), \
            "DATA", "ok"
    sys.exit(f"native_inject: unknown kind {kind}")


KINDS = ["short", "version-type", "opcode", "reserved", "lengths", "placement", "zero-checksum", "bad-checksum",
         "no-conn", "ack-cum-ahead", "ack-wrong-conn", "ack-bad-path", "ack-sack-unsent", "data-path-window",
         "data-dsn-far", "data-bad-path", "data-msn-far", "data-unknown-stream", "write-bad-rkey",
         "write-past-end", "atomic-unaligned", "write-valid", "probe-reserved", "proof-guess", "challenge-forged",
         "data-restart"]


def decode(b: bytes):
    """Spec section 3, in the order of its checks: ("DATA", fields) / ("ACK", fields) / (error, None).
    Written from transport.rst, independently of the builders above."""
    if len(b) < 8:
        return "Truncated", None
    if b[0] >> 4 != 1:
        return "BadVersion", None
    t = b[0] & 15
    if t == 2:
        if b[1] != 0 or b[3] != 0:
            return "Reserved", None
        if len(b) < 56:
            return "Truncated", None
        f = dict(zip(("path", "conn", "cum", "ack_seq", "hint", "ce"), (b[2],) + struct.unpack(">IIIII", b[4:24])))
        f["sack"] = struct.unpack(">4Q", b[24:56])
        return "ACK", f
    if t in (3, 4):
        if b[1] != 0 or b[2] != 0 or b[3] != 0 or (t == 3 and b[4:8] != bytes(4)):
            return "Reserved", None
        if len(b) < 16:
            return "Truncated", None
        conn, cookie = struct.unpack(">IQ", b[4:16])
        return ("CHALLENGE" if t == 3 else "PROOF"), {"conn": conn, "cookie": cookie}
    if t != 1:
        return "BadType", None
    if len(b) < 60:
        return "Truncated", None
    names = ("conn", "seq", "floor", "stream", "dsn", "msn", "rsn", "msg_len", "offset")
    f = dict(zip(names, struct.unpack(">9I", b[4:40])))
    f["va"], f["rkey"], f["imm"], f["plen"], resv = struct.unpack(">QIIHH", b[40:60])
    f["op"], f["flags"], f["path"] = b[3], b[1], b[2]
    op = f["op"]
    if op > 10:
        return "BadOpcode", None
    if f["flags"] & 0x3F or resv or f["stream"] >> 24:
        return "Reserved", None
    end = f["offset"] + f["plen"]
    if f["plen"] > MAX_PAYLOAD or f["msg_len"] > 2**31 or end > 0xFFFF_FFFF or end > f["msg_len"]:
        return "BadLength", None
    fixed = {4: f["offset"] == 0 and f["plen"] == 0, 6: f["msg_len"] == 0,
             7: f["msg_len"] == 16 and f["offset"] == 0 and f["plen"] == 16,
             8: f["msg_len"] == 16 and f["offset"] == 0 and f["plen"] == 16,
             9: f["msg_len"] == 8 and f["offset"] == 0 and f["plen"] == 0}
    if not fixed.get(op, True):
        return "BadLength", None
    va, rkey, rsn, imm = f["va"], f["rkey"], f["rsn"], f["imm"]
    place = {0: va == 0 and rkey == 0, 1: va == 0 and rkey == 0, 10: va == 0, 2: rsn == 0, 3: True,
             4: rsn == 0, 7: rsn == 0, 8: rsn == 0, 5: rsn == 0 and va == 0 and rkey == 0,
             6: rsn == 0 and va == 0 and rkey == 0 and imm in (1, 2, 3), 9: rsn == 0 and rkey == 0}[op]
    if not place or not (op in (1, 3, 6) or imm == 0):
        return "BadPlacement", None
    if len(b) < 60 + f["plen"]:
        return "Truncated", None
    return "DATA", f


def checksum16(b: bytes) -> int:
    """The folded ones'-complement sum of `b` as big-endian 16-bit words (odd byte padded)."""
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f">{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def udp_datagram(src: bytes, dst: bytes, sport: int, mrh: bytes, mode: str) -> bytes:
    """UDP header + MRH with the checksum (RFC 768 over the pseudo-header) right, wrong or 0."""
    ulen = 8 + len(mrh)
    udp = struct.pack(">HHHH", sport, PORT, ulen, 0) + mrh
    c = ~checksum16(src + dst + struct.pack(">BBH", 0, 17, ulen) + udp) & 0xFFFF
    c = c or 0xFFFF
    if mode == "bad":
        c ^= 0x0101 if c ^ 0x0101 else 0x0202
    elif mode == "zero":
        c = 0
    return udp[:6] + struct.pack(">H", c) + udp[8:]


def fixture_lines():
    """Every kind's first packets as `kind index expected hex` (the protocol core checks them)."""
    p = {"conn": 0x1234_5678, "stream": 0x11, "paths": 8}
    for kind in KINDS:
        for i in range(16):
            # The selftest's keys: dsn= only for data-msn-far (the others keep their old Dsn).
            b, e, _ = build(kind, i, {**p, "dsn": 1000} if kind == "data-msn-far" else p)
            yield f"{kind} {i} {e} {b.hex() or '-'}"


def fixture_path():
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, "fixtures/native-inject.txt")


def self_check(need_fixture: bool) -> None:
    def no(msg):
        sys.exit(f"native_inject: self-check failed: {msg}")
    # RFC 768 vectors of proto/src/mrc_wire.rs (udp_checksum_vectors).
    udp = struct.pack(">HHHH", 49152, PORT, 11, 0) + b"abc"
    a6 = bytes.fromhex("20010db8" + "00" * 11 + "01")
    b6 = bytes.fromhex("20010db8" + "00" * 11 + "02")
    for s, d, want in ((bytes([192, 0, 2, 1]), bytes([192, 0, 2, 2]), 0xAA21), (a6, b6, 0xD2B0)):
        got = udp_datagram(s, d, 49152, b"abc", "ok")[6:8]
        if got != struct.pack(">H", want):
            no(f"UDP checksum {got.hex()}, expected {want:04x}")
        if checksum16(s + d + struct.pack(">BBH", 0, 17, 11) + udp_datagram(s, d, 49152, b"abc", "ok")) != 0xFFFF:
            no("a datagram with its checksum does not sum to all ones")
        for mode in ("bad", "zero"):
            u = udp_datagram(s, d, 49152, b"abc", mode)
            if checksum16(s + d + struct.pack(">BBH", 0, 17, 11) + u) == 0xFFFF and mode == "bad":
                no("a bad checksum verifies")
            if mode == "zero" and u[6:8] != b"\0\0":
                no("zero checksum not zero")
    # The layout by hand (spec 3.1/3.2 byte offsets), then every kind through the decoder.
    d = data(flags=0x80, path=7, op=3, conn=0xDEADBEEF, seq=1, floor=2, stream=0x123456, dsn=3, msn=4, rsn=5,
             msg_len=10000, offset=8192, va=0x1122334455667788, rkey=0xABCD, imm=0x01020304, plen=1808)
    want = {0: b"\x11\x80\x07\x03", 4: bytes.fromhex("deadbeef"), 8: b"\0\0\0\1", 12: b"\0\0\0\2",
            16: bytes.fromhex("00123456"), 20: b"\0\0\0\3", 24: b"\0\0\0\4", 28: b"\0\0\0\5",
            32: (10000).to_bytes(4, "big"), 36: (8192).to_bytes(4, "big"), 40: bytes.fromhex("1122334455667788"),
            48: bytes.fromhex("0000abcd"), 52: bytes.fromhex("01020304"), 56: (1808).to_bytes(2, "big") + b"\0\0"}
    for off, w in want.items():
        if d[off:off + len(w)] != w:
            no(f"DATA bytes {off}..: {d[off:off + len(w)].hex()}, expected {w.hex()}")
    a = ack(path=255, conn=1, cum=0xFFFFFFFE, ack_seq=3, hint=25_000_000, ce=17, sack=(1, 0, 2**64 - 1, 1 << 63))
    if a[:4] != b"\x12\x00\xff\x00" or a[8:12] != bytes.fromhex("fffffffe") or a[16:20] != (25_000_000).to_bytes(4, "big") \
            or a[24:32] != (1).to_bytes(8, "big") or a[48:56] != (1 << 63).to_bytes(8, "big"):
        no(f"ACK layout {a.hex()}")
    p = {"conn": 0x1234_5678, "stream": 0x11, "dsn": 1000, "paths": 8}
    for kind in KINDS:
        for i in range(40):
            b, e, _ = build(kind, i, p)
            got, f = decode(b)
            if got != e:
                no(f"{kind} #{i}: decoded as {got}, built as {e}: {b.hex()}")
            if f is None:
                continue
            # The fields each live kind is about.
            checks = {
                "ack-cum-ahead": f.get("cum") == FAR + i and f.get("conn") == p["conn"],
                "ack-wrong-conn": f.get("conn") != p["conn"],
                "ack-bad-path": f.get("path", 0) >= p["paths"],
                "ack-sack-unsent": f.get("cum") == 0 and f.get("sack") == ONES and f.get("hint") in (0, HUGE),
                "data-path-window": f.get("seq") == FAR + i and f.get("floor") == OLD,
                "data-dsn-far": f.get("dsn") == FAR + i and f.get("seq") == OLD + i,
                "data-bad-path": f.get("path", 0) >= p["paths"],
                "data-msn-far": f.get("msn") == FAR + i and f.get("dsn") == 1000 + i and f.get("stream") == 0x11,
                "data-unknown-stream": f.get("stream") == 0xFFFFFE,
                "proof-guess": f.get("conn") == p["conn"] and f.get("cookie") != 0,
                "challenge-forged": f.get("conn") == 0 and f.get("cookie") == i,
                "data-restart": f.get("conn") == p["conn"] ^ 0x5A5A_5A5A and f.get("op") == OP["SEND"]
                and f.get("msn") == f.get("rsn") == i % 4 and f.get("stream") == 0x11,
                "write-bad-rkey": f.get("op") == 2 and f.get("rkey") == 0xDEAD0000 + i,
                "write-past-end": f.get("va", 0) + f.get("msg_len", 0) > 2**64 - 1,
                "atomic-unaligned": f.get("op") == 8 and f.get("va", 0) % 8 != 0,
                "write-valid": f.get("op") == 2 and f.get("rkey") == 1 and f.get("plen") == 64,
            }
            if not checks.get(kind, True):
                no(f"{kind} #{i}: fields {f}")
    # The fixture the protocol core's codec checks must be what the builders make.
    fx = fixture_path()
    if os.path.exists(fx):
        lines = [l.rstrip("\n") for l in open(fx) if not l.startswith("#")]
        if lines != list(fixture_lines()):
            no(f"{fx} is not what the builders make (regenerate it with --emit)")
    elif need_fixture:
        no(f"no {fx}")


def send(src: str, dst: str, count: int, spec: str) -> None:
    kind, _, rest = spec.partition(":")
    p = {}
    for kv in filter(None, rest.split(",")):
        k, _, v = kv.partition("=")
        p[k] = int(v, 0)
    if kind not in KINDS:
        sys.exit(f"native_inject: unknown kind {kind}")
    v6 = ":" in dst
    fam = socket.AF_INET6 if v6 else socket.AF_INET
    if kind == "zero-checksum" and v6:
        sys.exit("native_inject: zero-checksum is IPv4 only (IPv6 forbids a zero UDP checksum)")
    # A raw socket of protocol UDP: the kernel writes the IP header (from SRC) and leaves our UDP
    # header, checksum included, as it is.
    s = socket.socket(fam, socket.SOCK_RAW, socket.IPPROTO_UDP)
    sa, da = socket.inet_pton(fam, src), socket.inet_pton(fam, dst)
    spoof = False
    try:
        s.bind((src, 0))
    except OSError:
        # SRC is not ours (an off-path host spoofing a peer): IPv4 with our own IP header.
        if v6:
            raise
        s.close()
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        spoof = True
    for i in range(count):
        mrh, _, mode = build(kind, i, p)
        dgram = udp_datagram(sa, da, SPORT + i % 4096, mrh, mode)
        if spoof:
            ip = bytearray(struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(dgram), 0x2000 + i % 0xE000, 0x4000, 64,
                                       17, 0, sa, da))
            ip[10:12] = struct.pack(">H", ~checksum16(bytes(ip)) & 0xFFFF)
            dgram = bytes(ip) + dgram
        s.sendto(dgram, (dst, 0))
        if i % 16 == 15:
            # Bursts of 16: the receiving veth's backlog must never overflow (the selftest
            # counts every packet).
            time.sleep(0.002)
    s.close()


def main() -> int:
    args = sys.argv[1:]
    if args == ["--self-check"]:
        self_check(True)
        print("native_inject: self-check passed")
        return 0
    if args == ["--emit"]:
        print("# native_inject.py --emit: kind, index, what spec section 3 says of it, the MRH in hex")
        for l in fixture_lines():
            print(l)
        return 0
    if not args or len(args) % 4:
        sys.exit(__doc__)
    self_check(False)
    for g in range(0, len(args), 4):
        send(args[g], args[g + 1], int(args[g + 2]), args[g + 3])
    return 0


if __name__ == "__main__":
    sys.exit(main())
