#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Checks every RoCEv2 packet (UDP port 4791) of a pcap capture against our own ICRC code.

  pcap_roce.py [--sample OUT K] FILE MIN [OPCODE...]
      exit 0 if at least MIN RoCEv2 packets were captured, every ICRC verifies and every
      listed BTH opcode (e.g. 0x11) occurs; prints the count and the opcodes seen. With
      --sample, also writes the first K packets of each opcode to the pcap file OUT (for a
      dissector, which is too slow under TCG for thousands of packets)

The ICRC code is roce_inject.py's, which checks itself against rdma_rxe's captured packets.
Reads classic pcap (dumpcap -F pcap) with Ethernet framing.
"""
import collections, os, struct, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from roce_inject import icrc_ok, self_check  # noqa: E402


def frames(path):
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack_from("<I", data)[0]
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    linktype = struct.unpack_from(endian + "I", data, 20)[0]
    if linktype != 1:
        sys.exit(f"link type {linktype}, expected Ethernet")
    off = 24
    while off + 16 <= len(data):
        incl = struct.unpack_from(endian + "I", data, off + 8)[0]
        yield data[off + 16:off + 16 + incl], data[:24], data[off:off + 16 + incl]
        off += 16 + incl


def main():
    self_check()
    args = sys.argv[1:]
    sample = None
    if args[:1] == ["--sample"]:
        sample, per_op, args = args[1], int(args[2]), args[3:]
    path, least = args[0], int(args[1])
    need = {int(op, 16) for op in args[2:]}
    n = bad = 0
    ops = collections.Counter()
    head, picked = b"", []
    for fr, head, record in frames(path):
        etype = struct.unpack_from(">H", fr, 12)[0]
        l3 = fr[14:]
        if etype == 0x0800:
            ihl = (l3[0] & 0x0F) * 4
            if l3[9] != 17:
                continue
            total = struct.unpack_from(">H", l3, 2)[0]
            ip, rest = l3[:ihl], l3[ihl:total]
        elif etype == 0x86DD:
            if l3[6] != 17:
                continue
            plen = struct.unpack_from(">H", l3, 4)[0]
            ip, rest = l3[:40], l3[40:40 + plen]
        else:
            continue
        if struct.unpack_from(">H", rest, 2)[0] != 4791:
            continue
        udp, ib = rest[:8], rest[8:]
        n += 1
        ops[ib[0]] += 1
        if sample and ops[ib[0]] <= per_op:
            picked.append(record)
        if not icrc_ok(ip, udp, ib):
            bad += 1
    print(f"{n} RoCEv2 packets, {bad} bad ICRC, opcodes " +
          ", ".join(f"{op:#04x}x{c}" for op, c in sorted(ops.items())))
    if sample:
        with open(sample, "wb") as f:
            f.write(head + b"".join(picked))
        print(f"sample of {len(picked)} packets written to {sample}")
    missing = sorted(need - set(ops))
    if missing:
        print("missing opcodes: " + ", ".join(f"{op:#04x}" for op in missing))
    if bad or n < least or missing:
        sys.exit(1)


if __name__ == "__main__":
    main()
