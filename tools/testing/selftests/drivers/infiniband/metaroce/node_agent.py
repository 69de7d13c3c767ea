#!/usr/bin/env python3
"""Remote command execution between the guests of the cluster shape (a stand-in for ssh).

The guests have no ssh; Open MPI's launcher starts its daemons through an "rsh agent" called as
`AGENT HOST COMMAND...`, which this is:

  node_agent.py serve ADDR           run commands that other guests send (until `stop`)
  node_agent.py HOST COMMAND...      run COMMAND (one shell line) on HOST, relay its output and
                                     exit with its status (Open MPI's plm_rsh_agent)
  node_agent.py stop HOST            end HOST's server
  node_agent.py wait HOST TIMEOUT    return once HOST's server answers

Test use only: anyone on the guests' private segment (documentation addresses, no route off the
machine) may run anything as root. Frames: a request is one line of JSON; the answer is a stream
of (kind, length, bytes) frames, kind b"o" output, b"x" the exit status as text.
"""
import json
import os
import socket
import subprocess
import sys
import threading
import time

PORT = 7098


def frame(conn, kind, data):
    conn.sendall(kind + len(data).to_bytes(4, "big") + data)


def handle(conn, stop):
    with conn:
        line = conn.makefile("rb").readline()
        req = json.loads(line)
        if req.get("stop"):
            frame(conn, b"x", b"0")
            stop.set()
            return
        proc = subprocess.Popen(["/bin/sh", "-c", req["cmd"]], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        while True:
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            try:
                frame(conn, b"o", chunk)
            except OSError:
                proc.kill()  # the caller went away: so does its command
                break
        rc = proc.wait()
        try:
            frame(conn, b"x", str(rc if rc >= 0 else 128 - rc).encode())
        except OSError:
            pass


def serve(addr):
    stop = threading.Event()
    with socket.socket() as srv:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((addr, PORT))
        srv.listen(16)
        srv.settimeout(0.5)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except socket.timeout:
                continue
            conn.settimeout(None)
            threading.Thread(target=handle, args=(conn, stop), daemon=True).start()
    return 0


def recv_exact(f, n):
    data = f.read(n)
    if len(data) != n:
        raise EOFError("connection closed")
    return data


def call(host, req, out):
    with socket.create_connection((host, PORT), timeout=10) as conn:
        conn.settimeout(None)
        conn.sendall(json.dumps(req).encode() + b"\n")
        f = conn.makefile("rb")
        while True:
            kind = recv_exact(f, 1)
            data = recv_exact(f, int.from_bytes(recv_exact(f, 4), "big"))
            if kind == b"x":
                return int(data)
            out.write(data)
            out.flush()


def main():
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "serve":
        return serve(args[1])
    if len(args) == 2 and args[0] == "stop":
        return call(args[1], {"stop": True}, sys.stdout.buffer)
    if len(args) == 3 and args[0] == "wait":
        deadline = time.monotonic() + float(args[2])
        while True:
            try:
                return call(args[1], {"cmd": "true"}, sys.stdout.buffer)
            except OSError:
                if time.monotonic() > deadline:
                    print(f"node_agent: {args[1]} did not answer", file=sys.stderr)
                    return 1
                time.sleep(0.5)
    if len(args) >= 2:
        try:
            return call(args[0], {"cmd": " ".join(args[1:])}, sys.stdout.buffer)
        except (OSError, EOFError) as e:
            print(f"node_agent: {args[0]}: {e}", file=sys.stderr)
            return 255
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
