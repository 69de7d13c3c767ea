#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Benchmark suite set-up: the RDMA device of the provider under test (MR_BENCH_PROVIDER; for
# MetaRoCE also the mode the driver logged when it registered the device) on the QEMU link, and
# what perftest will read as its clock (it converts cycles with the cpu MHz of /proc/cpuinfo; the
# report cross-checks every figure against wall time anyway).
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/bench/bench-lib.bash"
command -v ib_write_bw >/dev/null || fail "perftest is not installed"
command -v iperf3 >/dev/null || fail "iperf3 is not installed"
bench_dev || fail "RDMA device"
echo "$(uname -r): provider ${MR_BENCH_PROVIDER}, $MR_DEV, RoCE v2 GID index $MR_GID, $(nproc) CPU"
ibv_devinfo -d "$MR_DEV" | grep -E 'transport|state|active_mtu|link_layer'
# MetaRoCE's mode as the driver registered the device ("(RoCEv2)" or "(MetaRoCE native; ...)").
added=$(dmesg | grep -F "$MR_DEV: added on netdev" | tail -n 1 | sed 's/^\[[^]]*\] //')
[ -n "$added" ] && echo "$added"
# The user ABI the device serves (its uverbs abi_version): MetaRoCE's own (1, libmetaroce) or
# rdma_rxe's (2, librxe: rdma_rxe, and MetaRoCE on the rxe-abi kernel).
uabi=
for u in /sys/class/infiniband_verbs/uverbs*; do
  [ "$(cat "$u/ibdev" 2>/dev/null)" = "$MR_DEV" ] && uabi=$(cat "$u/abi_version")
done
case $uabi in 1) uprov=libmetaroce;; 2) uprov=librxe;; *) fail "$MR_DEV has no user verbs ABI ('$uabi')";; esac
echo "user ABI version $uabi ($uprov)"
grep -m1 'cpu MHz' /proc/cpuinfo || echo "no cpu MHz in /proc/cpuinfo"
# Module parameters given on the kernel command line (BENCH_APPEND), for the report's header.
params=$(tr ' ' '\n' </proc/cmdline | grep '^metaroce\.' | tr '\n' ' ' | sed 's/ $//')
printf '{"kernel":"%s","provider":"%s","dev":"%s","gid":%s,"cpus":%s,"mtu":%s,"cpu_mhz":"%s","reps":%s,"quick":"%s","added":"%s","params":"%s","uabi":%s,"uprov":"%s"}\n' \
  "$(uname -r)" "$MR_BENCH_PROVIDER" "$MR_DEV" "$MR_GID" "$(nproc)" "$(cat /sys/class/net/eth0/mtu)" \
  "$(sed -n 's/^cpu MHz[[:space:]]*: //p' /proc/cpuinfo | head -n1)" "$BENCH_REPS" "${BENCH_QUICK:-}" "${added//\"/}" "${params//\"/}" "$uabi" "$uprov" \
  >"$BENCH_DIR/setup.$MR_ROLE.json"
