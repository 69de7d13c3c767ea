# SPDX-License-Identifier: GPL-2.0
"""What the pyverbs check scripts (mw_check.py, odp_check.py) share: one line per check, the
first failure ends the script (with the device counters), and polling a CQ with a deadline."""
import subprocess
import sys
import time


def ok(what):
    print(f"ok: {what}", flush=True)


def fail(what):
    print(f"FAIL: {what}", flush=True)
    subprocess.run(["rdma", "statistic", "show"], check=False)
    sys.exit(1)


def poll(cq, what, seconds=30):
    """The next work completion of `cq`, or fail after `seconds`."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        n, wcs = cq.poll(1)
        if n:
            return wcs[0]
    fail(f"{what}: no completion in {seconds} s")
