# SPDX-License-Identifier: GPL-2.0
"""What the pyverbs check scripts (mw_check.py, odp_check.py) share: one line per check, the
first failure ends the script (with the device counters), and polling a CQ with a deadline; and
the file handshake of the scripts whose two ends run in two namespaces (attack.py, native_scale.py)."""
import os
import subprocess
import sys
import time


def ok(what):
    print(f"ok: {what}", flush=True)


def fail(what):
    print(f"FAIL: {what}", flush=True)
    subprocess.run(["rdma", "statistic", "show"], check=False)
    sys.exit(1)


class Files:
    """Two processes meeting through files in directory d: put writes one (atomically), wait
    polls for one and returns its text, or None after the given seconds."""

    def __init__(self, d):
        self.d = d

    def path(self, name):
        return os.path.join(self.d, name)

    def put(self, name, text):
        with open(self.path(name) + ".tmp", "w") as f:
            f.write(f"{text}\n")
        os.rename(self.path(name) + ".tmp", self.path(name))

    def wait(self, name, seconds, step=0.05):
        end = time.monotonic() + seconds
        while not os.path.exists(self.path(name)):
            if time.monotonic() > end:
                return None
            time.sleep(step)
        with open(self.path(name)) as f:
            return f.read().strip()


def poll(cq, what, seconds=30):
    """The next work completion of `cq`, or fail after `seconds`."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        n, wcs = cq.poll(1)
        if n:
            return wcs[0]
    fail(f"{what}: no completion in {seconds} s")
