#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""logon_key.py add DESC HEX | del DESC: adds a `logon` key DESC with the bytes HEX to the user
keyring (what `keyctl add logon DESC DATA @u` does), or invalidates it; through the add_key(2) and
keyctl(2) system calls, so that the guests need no keyutils. MetaRoCE's authenticated native mode
takes its fabric key from `metaroce:<netdev>` (Documentation/metaroce/transport.rst, 13.1)."""
import ctypes
import os
import sys

SYS_ADD_KEY, SYS_KEYCTL = 248, 250          # x86_64
KEY_SPEC_USER_KEYRING = -4
KEYCTL_SEARCH, KEYCTL_INVALIDATE = 10, 21

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def check(r, what):
    if r < 0:
        e = ctypes.get_errno()
        sys.exit(f"logon_key: {what}: {os.strerror(e)}")
    return r


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "add":
        data = bytes.fromhex(sys.argv[3])
        serial = check(libc.syscall(SYS_ADD_KEY, b"logon", sys.argv[2].encode(), data, ctypes.c_size_t(len(data)),
                                    ctypes.c_int(KEY_SPEC_USER_KEYRING)), "add_key")
        print(f"logon key {sys.argv[2]}: serial {serial}, {len(data)} bytes")
    elif len(sys.argv) == 3 and sys.argv[1] == "del":
        serial = check(libc.syscall(SYS_KEYCTL, KEYCTL_SEARCH, ctypes.c_int(KEY_SPEC_USER_KEYRING), b"logon",
                                    sys.argv[2].encode(), 0), "search")
        check(libc.syscall(SYS_KEYCTL, KEYCTL_INVALIDATE, ctypes.c_long(serial)), "invalidate")
        print(f"logon key {sys.argv[2]}: invalidated")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
