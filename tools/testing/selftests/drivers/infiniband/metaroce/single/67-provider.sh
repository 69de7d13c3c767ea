#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# libmetaroce, MetaRoCE's own rdma-core provider (providers/metaroce), over the driver's own id
# and user ABI (include/uapi/rdma/metaroce-abi.h), and rdma_rxe beside it in the same kernel:
#  - the devices report ABI version 1 (rdma_rxe's is 2) and libibverbs opens them, which only
#    libmetaroce can (driver id RDMA_DRIVER_METAROCE);
#  - the stock tools through it: ibv_{rc,uc,ud,srq}_pingpong with received data validated,
#    perftest WRITE, READ, atomics and SEND latency;
#  - coexistence: an rdma_rxe device (librxe) in one namespace and a MetaRoCE device
#    (libmetaroce) in the other move data over RoCEv2 both ways; deleting either device, and
#    unloading rdma_rxe, leaves the other working.
# Skips on a kernel built with CONFIG_RDMA_METAROCE_RXE_ABI (MetaRoCE then reports rdma_rxe's
# id and librxe drives it; the other tests cover that).
. "$(dirname "$0")/../lib.sh"
[ -n "${MR_FULL:-}" ] || skip "make check-full only (make check's hour: every make-check verbs test goes through libmetaroce; rdma_rxe beside MetaRoCE in one kernel is checked here only)"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
mr_two_devices
abi=$(ip netns exec mra cat /sys/class/infiniband_verbs/uverbs0/abi_version) || fail "no uverbs device in mra"
[ "$abi" = 1 ] || skip "the kernel serves rdma_rxe's user ABI (abi_version $abi): CONFIG_RDMA_METAROCE_RXE_ABI"
[ -e /etc/libibverbs.d/metaroce.driver ] || fail "libmetaroce is not installed (make provider)"
ip netns exec mra ibv_devinfo -d mra0 > /tmp/devinfo.log 2>&1 || { cat /tmp/devinfo.log; fail "ibv_devinfo -d mra0"; }
grep -q "PORT_ACTIVE" /tmp/devinfo.log || { cat /tmp/devinfo.log; fail "mra0: port not active"; }
echo "GID indices: mra0 $ga, mrb0 $gb"

mr_pingpong ibv_rc_pingpong "RC 64 B, events" mra mra0 $ga mrb mrb0 $gb -s 64 -n 20 -e
mr_pingpong ibv_rc_pingpong "RC 1 MiB"        mra mra0 $ga mrb mrb0 $gb -s 1048576 -n 2
mr_pingpong ibv_uc_pingpong "UC 4 KiB"        mra mra0 $ga mrb mrb0 $gb -s 4096 -n 20
mr_pingpong ibv_ud_pingpong "UD 1 KiB"        mra mra0 $ga mrb mrb0 $gb -s 1024 -n 20
mr_pingpong ibv_srq_pingpong "SRQ 4 KiB"      mra mra0 $ga mrb mrb0 $gb -s 4096 -n 20 -q 4
mr_perf "WRITE 64 KiB"   ib_write_bw -s 65536 -n 200 -F
mr_perf "READ 64 KiB"    ib_read_bw -s 65536 -n 100 -F
mr_perf "fetch-and-add"  ib_atomic_bw -A FETCH_AND_ADD -n 200 -F
mr_perf "SEND lat 8 B"   ib_send_lat -s 8 -n 100 -F
mr_dmesg_clean

# Coexistence: rdma_rxe's device rxb0 in place of mrb0, in the initial namespace (rdma_rxe
# refuses `rdma link add` from another namespace in exclusive mode): vb moves there.
modprobe rdma_rxe || fail "modprobe rdma_rxe (the test kernel builds it beside MetaRoCE)"
ip netns exec mrb rdma link delete mrb0 || fail "delete mrb0"
ip -n mrb link set vb netns 1 || fail "vb to the initial namespace"
ip addr add $MR_ADDR_B/24 dev vb && ip link set vb up || fail "vb address"
trap 'rdma link delete rxb0 2>/dev/null; mr_two_namespaces_cleanup' EXIT
rdma link add rxb0 type rxe netdev vb || fail "add rxb0 (rdma_rxe)"
gx=
for ((i = 0; i < 100; i++)); do gx=$(mr_gid_index rxb0 $MR_ADDR_B); [ -n "$gx" ] && break; sleep 0.1; done
[ -n "$gx" ] || fail "no RoCE v2 GID on rxb0"
ibv_devinfo -d rxb0 > /tmp/devinfo-rxe.log 2>&1 || { cat /tmp/devinfo-rxe.log; fail "ibv_devinfo -d rxb0 (librxe)"; }
mr_pingpong ibv_rc_pingpong "RC MetaRoCE server, rdma_rxe client" mra mra0 $ga init rxb0 $gx -s 4096 -n 20
mr_pingpong ibv_ud_pingpong "UD MetaRoCE server, rdma_rxe client" mra mra0 $ga init rxb0 $gx -s 1024 -n 20
ip netns exec mra rdma link delete mra0 || fail "delete mra0"
ibv_devinfo -d rxb0 >/dev/null || fail "rxb0 gone with mra0"
ip netns exec mra rdma link add mra0 type metaroce netdev va || fail "re-add mra0"
ga=$(mr_ns_gid mra mra0 $MR_ADDR_A); [ -n "$ga" ] || fail "no RoCE v2 GID on the new mra0"
mr_pingpong ibv_rc_pingpong "RC new MetaRoCE device, rdma_rxe client" mra mra0 $ga init rxb0 $gx -s 4096 -n 20
rdma link delete rxb0 || fail "delete rxb0"
rmmod rdma_rxe || fail "rmmod rdma_rxe"
ip netns exec mra ibv_devinfo -d mra0 >/dev/null || fail "mra0 gone with rdma_rxe"
mr_dmesg_clean
