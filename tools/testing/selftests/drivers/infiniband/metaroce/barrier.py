#!/usr/bin/env python3
"""Two-party barrier over TCP between the guests of a pair.

barrier.py ROLE ADDR_A NAME TIMEOUT: role a listens on ADDR_A, role b connects; both exchange NAME
and return once they hold the same one. Exits non-zero on timeout or a name mismatch.
"""
import socket
import sys
import time

PORT = 7099


def main() -> int:
    role, addr, name, timeout = sys.argv[1], sys.argv[2], sys.argv[3].encode(), float(sys.argv[4])
    deadline = time.monotonic() + timeout
    if role == "a":
        with socket.socket() as srv:
            srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            srv.bind((addr, PORT))
            srv.listen(1)
            srv.settimeout(timeout)
            conn, _ = srv.accept()
            with conn:
                conn.settimeout(timeout)
                got = conn.recv(256)
                conn.sendall(name)
    else:
        while True:
            try:
                with socket.create_connection((addr, PORT), timeout=5) as conn:
                    conn.settimeout(timeout)
                    conn.sendall(name)
                    got = conn.recv(256)
                    break
            except OSError:
                if time.monotonic() > deadline:
                    print(f"barrier {name.decode()}: peer never came", file=sys.stderr)
                    return 1
                time.sleep(0.5)
    if got != name:
        print(f"barrier: we are at {name.decode()}, the peer at {got.decode()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
