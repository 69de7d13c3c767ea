#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Multicast attach/detach on a MetaRoCE device through libibverbs (ctypes: pyverbs 44 has no
ibv_attach_mcast), checked against the netdev's IP multicast memberships (`ip maddr`).

Usage: mcast_check.py DEVICE NETDEV
Run in the namespace of NETDEV. Prints one line per check; exits 1 on the first failure.
Checks: the device limits (ibv_query_device is left to ibv_devinfo in the shell test); attaching
a UD QP to an IPv4 and an IPv6 group makes the netdev a member, detaching the last QP ends the
membership, a second QP keeps it; a repeated attach is accepted (uverbs); unicast GIDs and RC
QPs are refused (EINVAL); MAX_GROUPS groups and MAX_QPS_PER_GROUP QPs per group, one more of
either is refused (ENOMEM); an attached QP cannot be destroyed (EBUSY, uverbs' rule); a process
that exits with attached QPs leaves the groups (checked by the shell test).
"""
import ctypes as C
import errno
import ipaddress
import subprocess
import sys

MAX_GROUPS, MAX_QPS_PER_GROUP = 32, 16
IBV_QPT_RC, IBV_QPT_UD = 2, 4

ibv = C.CDLL("libibverbs.so.1", use_errno=True)


class QpCap(C.Structure):
    _fields_ = [("max_send_wr", C.c_uint32), ("max_recv_wr", C.c_uint32),
                ("max_send_sge", C.c_uint32), ("max_recv_sge", C.c_uint32),
                ("max_inline_data", C.c_uint32)]


class QpInitAttr(C.Structure):
    _fields_ = [("qp_context", C.c_void_p), ("send_cq", C.c_void_p), ("recv_cq", C.c_void_p),
                ("srq", C.c_void_p), ("cap", QpCap), ("qp_type", C.c_int), ("sq_sig_all", C.c_int)]


Gid = C.c_uint8 * 16
for name, res, args in [
        ("ibv_get_device_list", C.POINTER(C.c_void_p), [C.POINTER(C.c_int)]),
        ("ibv_free_device_list", None, [C.POINTER(C.c_void_p)]),
        ("ibv_get_device_name", C.c_char_p, [C.c_void_p]),
        ("ibv_open_device", C.c_void_p, [C.c_void_p]),
        ("ibv_close_device", C.c_int, [C.c_void_p]),
        ("ibv_alloc_pd", C.c_void_p, [C.c_void_p]),
        ("ibv_dealloc_pd", C.c_int, [C.c_void_p]),
        ("ibv_create_cq", C.c_void_p, [C.c_void_p, C.c_int, C.c_void_p, C.c_void_p, C.c_int]),
        ("ibv_destroy_cq", C.c_int, [C.c_void_p]),
        ("ibv_create_qp", C.c_void_p, [C.c_void_p, C.POINTER(QpInitAttr)]),
        ("ibv_destroy_qp", C.c_int, [C.c_void_p]),
        ("ibv_attach_mcast", C.c_int, [C.c_void_p, C.POINTER(Gid), C.c_uint16]),
        ("ibv_detach_mcast", C.c_int, [C.c_void_p, C.POINTER(Gid), C.c_uint16])]:
    f = getattr(ibv, name)
    f.restype, f.argtypes = res, args


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def ok(msg):
    print(f"ok: {msg}", flush=True)


def gid_of(addr):
    ip = ipaddress.ip_address(addr)
    raw = (ipaddress.IPv6Address(f"::ffff:{ip}") if ip.version == 4 else ip).packed
    return Gid(*raw)


def memberships(netdev):
    """The multicast groups the netdev is a member of, both families."""
    out = subprocess.run(["ip", "maddr", "show", "dev", netdev], capture_output=True, text=True,
                         check=True).stdout
    return {w[1] for w in (l.split() for l in out.splitlines()) if len(w) >= 2 and w[0] in ("inet", "inet6")}


def expect_member(netdev, addr, want, what):
    have = str(ipaddress.ip_address(addr)) in memberships(netdev)
    if have != want:
        fail(f"{what}: {netdev} {'is not' if want else 'is still'} a member of {addr}: {sorted(memberships(netdev))}")


def attach(qp, addr):
    return ibv.ibv_attach_mcast(qp, C.byref(gid_of(addr)), 0)


def detach(qp, addr):
    return ibv.ibv_detach_mcast(qp, C.byref(gid_of(addr)), 0)


def main():
    dev_name, netdev = sys.argv[1], sys.argv[2]
    n = C.c_int()
    devs = ibv.ibv_get_device_list(C.byref(n))
    dev = next((devs[i] for i in range(n.value) if ibv.ibv_get_device_name(devs[i]).decode() == dev_name), None)
    if not dev:
        fail(f"no device {dev_name}")
    ctx = ibv.ibv_open_device(dev)
    pd = ibv.ibv_alloc_pd(ctx)
    cq = ibv.ibv_create_cq(ctx, 16, None, None, 0)
    if not (ctx and pd and cq):
        fail("open/alloc_pd/create_cq")

    def new_qp(qp_type=IBV_QPT_UD):
        attr = QpInitAttr(send_cq=cq, recv_cq=cq, cap=QpCap(1, 1, 1, 1, 0), qp_type=qp_type)
        qp = ibv.ibv_create_qp(pd, C.byref(attr))
        if not qp:
            fail(f"create_qp type {qp_type}: errno {C.get_errno()}")
        return qp

    v4, v6 = "239.1.2.3", "ff0e::db8:7"
    for addr in (v4, v6):
        expect_member(netdev, addr, False, "before any attach")
    a, b = new_qp(), new_qp()
    for addr in (v4, v6):
        if (r := attach(a, addr)) != 0:
            fail(f"attach to {addr}: {r}")
        expect_member(netdev, addr, True, f"attach to {addr}")
        if (r := attach(a, addr)) != 0:
            fail(f"second attach of the same QP to {addr}: {r} (uverbs accepts it)")
        if (r := attach(b, addr)) != 0:
            fail(f"second QP to {addr}: {r}")
        if (r := detach(a, addr)) != 0:
            fail(f"detach from {addr}: {r}")
        expect_member(netdev, addr, True, f"{addr} with one QP left")
        if (r := detach(a, addr)) != errno.EINVAL:
            fail(f"detach of a QP not attached to {addr}: {r}, expected EINVAL")
        if (r := detach(b, addr)) != 0:
            fail(f"detach of the last QP from {addr}: {r}")
        expect_member(netdev, addr, False, f"{addr} without QPs")
        ok(f"{addr}: membership follows the attached QPs")

    for bad in ("192.0.2.77", "2001:db8::77"):
        if (r := attach(a, bad)) != errno.EINVAL:
            fail(f"attach to unicast {bad}: {r}, expected EINVAL")
    rc = new_qp(IBV_QPT_RC)
    if (r := attach(rc, v4)) != errno.EINVAL:
        fail(f"attach of an RC QP: {r}, expected EINVAL")
    ibv.ibv_destroy_qp(rc)
    ok("unicast GIDs and RC QPs refused with EINVAL")

    groups = [f"239.2.0.{i}" for i in range(MAX_GROUPS)]
    for g in groups:
        if (r := attach(a, g)) != 0:
            fail(f"attach to group {g} of {MAX_GROUPS}: {r}")
    if (r := attach(a, "239.2.1.0")) != errno.ENOMEM:
        fail(f"group {MAX_GROUPS + 1}: {r}, expected ENOMEM")
    have = memberships(netdev)
    missing = [g for g in groups if g not in have]
    if missing:
        fail(f"memberships missing: {missing}")
    # A QP with attachments cannot be destroyed (uverbs: EBUSY until the user detaches it).
    if (r := ibv.ibv_destroy_qp(a)) != errno.EBUSY:
        fail(f"destroy_qp of an attached QP: {r}, expected EBUSY")
    for g in groups:
        if (r := detach(a, g)) != 0:
            fail(f"detach from {g}: {r}")
    left = [g for g in groups if g in memberships(netdev)]
    if left:
        fail(f"memberships left after detaching: {left}")
    if (r := ibv.ibv_destroy_qp(a)) != 0:
        fail(f"destroy_qp after detaching: {r}")
    ok(f"{MAX_GROUPS} groups, one more refused with ENOMEM; an attached QP is not destroyed (EBUSY)")

    qps = [b] + [new_qp() for _ in range(MAX_QPS_PER_GROUP)]
    for i, qp in enumerate(qps[:MAX_QPS_PER_GROUP]):
        if (r := attach(qp, v6)) != 0:
            fail(f"QP {i + 1} of {MAX_QPS_PER_GROUP} to {v6}: {r}")
    if (r := attach(qps[-1], v6)) != errno.ENOMEM:
        fail(f"QP {MAX_QPS_PER_GROUP + 1} to one group: {r}, expected ENOMEM")
    expect_member(netdev, v6, True, "a full group")
    ok(f"{MAX_QPS_PER_GROUP} QPs in one group, one more refused with ENOMEM")
    # The process leaves the rest to uverbs' cleanup at exit: the shell test checks that the
    # membership ends with it.
    print("exiting with attached QPs", flush=True)


if __name__ == "__main__":
    main()
