#!/usr/bin/env python3
"""udp_echo.py ROLE SELF PEER: role a echoes one datagram back; role b sends 64 numbered
datagrams until every one has come back (the link may drop a few), within 60 s."""
import socket
import sys
import time

PORT = 7100


def main() -> int:
    role, me, peer = sys.argv[1:4]
    fam = socket.AF_INET6 if ":" in me else socket.AF_INET
    with socket.socket(fam, socket.SOCK_DGRAM) as s:
        s.bind((me, PORT))
        deadline = time.monotonic() + 60
        if role == "a":
            s.settimeout(60)
            while True:
                data, addr = s.recvfrom(2048)
                s.sendto(data, addr)
                if data == b"done":
                    return 0
        want = {b"ping %d" % i for i in range(64)}
        s.settimeout(0.5)
        while want and time.monotonic() < deadline:
            for m in sorted(want):
                s.sendto(m, (peer, PORT))
            try:
                while True:
                    data, _ = s.recvfrom(2048)
                    want.discard(data)
            except socket.timeout:
                pass
        for _ in range(5):
            s.sendto(b"done", (peer, PORT))
        print(f"{64 - len(want)}/64 datagrams echoed over {fam.name}")
        return 0 if not want else 1


if __name__ == "__main__":
    sys.exit(main())
