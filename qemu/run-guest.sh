#!/usr/bin/env bash
# Boots one test guest under QEMU (KVM when it works, TCG otherwise) with the host's root read-only
# over 9p, a writable output directory and the kernel's modules, runs a command script in it and
# waits for it to power off. A guest still running at the timeout is killed.
#
# run-guest.sh --name N --kernel BZIMAGE --modules DIR --out DIR --cmd SCRIPT
#              [--initrd CPIO] [--smp 1] [--mem 2048] [--timeout 900] [--append "ARGS"]
#              [--net listen:PORT|connect:PORT|unix-listen:PATH|unix-connect:PATH|vde:DIR --mac MAC]
# Exit status: the command's own; 124 if the guest was killed at the timeout; 125 if it stopped
# without recording a status (panic, crash). The console log is OUT/console.log.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
name=guest smp=1 mem=2048 timeout=900 initrd= append= net= mac=52:54:00:00:00:01
while [ $# -gt 0 ]; do
  case "$1" in
    --name) name=$2;; --kernel) kernel=$2;; --modules) modules=$2;; --out) out=$2;; --cmd) cmd=$2;;
    --initrd) initrd=$2;; --smp) smp=$2;; --mem) mem=$2;; --timeout) timeout=$2;;
    --append) append=$2;; --net) net=$2;; --mac) mac=$2;;
    *) echo "run-guest: unknown argument $1" >&2; exit 2;;
  esac
  shift 2
done
: "${kernel:?--kernel}" "${modules:?--modules}" "${out:?--out}" "${cmd:?--cmd}"
# The guest mounts the kernel's modules at /lib/modules of the shared host root, so that
# mountpoint must exist on the host (an empty directory, as on a host with no kernel installed).
[ -d /lib/modules ] || mkdir -p /lib/modules
mkdir -p "$out"; rm -f "$out/rc" "$out/console.log" "$out/output.log"
cp "$cmd" "$out/cmd.sh"

accel=tcg,thread=multi
if [ -w /dev/kvm ] && [ "${METAROCE_KVM:-auto}" != no ] &&
   timeout 20 qemu-system-x86_64 -accel kvm -cpu host -display none -nodefaults -no-reboot -kernel /dev/null >/dev/null 2>&1 </dev/null; then
  accel=kvm
fi
# 4-level paging (la57=off), as on most x86 servers: once, under TCG with 5-level paging, a test
# kernel reported a KASAN wild-memory-access in handle_edge_irq during early boot (before init;
# the direct map then sits at 0xff11...), which 4-level guests have not shown.
# The read-only shares (host root, modules, repository) are mounted with cache=loose: nothing
# changes them while a guest runs, and without the page cache every exec re-read its binary and
# libraries over 9p (10 runs of python3 -c pass: 142 s uncached, 16 s cached, test kernel, TCG).
# Under TCG on a busy host a slow guest is not a hung one: lockup and stall detectors get a long
# leash (a real lockup still reports); panics end the guest so the host sees it at once.
cmdline="console=ttyS0 panic=-1 oops=panic watchdog_thresh=60 rcupdate.rcu_cpu_stall_timeout=300
 hung_task_timeout_secs=600 kasan.fault=report tsc=reliable mitigations=off mrguest.name=$name mrguest.repo=$repo $append"
qargs=(-accel "$accel" -machine q35 -cpu max,la57=off -smp "$smp" -m "$mem" -nodefaults -display none -no-reboot
       -serial "file:$out/console.log" -kernel "$kernel"
       -fsdev "local,id=root,path=/,security_model=none,readonly=on,multidevs=remap"
       -device virtio-9p-pci,fsdev=root,mount_tag=/dev/root
       -fsdev "local,id=out,path=$out,security_model=none" -device virtio-9p-pci,fsdev=out,mount_tag=out
       -fsdev "local,id=mods,path=$(dirname "$modules"),security_model=none,readonly=on"
       -device virtio-9p-pci,fsdev=mods,mount_tag=mods
       -fsdev "local,id=repo,path=$repo,security_model=none,readonly=on" -device virtio-9p-pci,fsdev=repo,mount_tag=repo
       -device virtio-rng-pci)
if [ -n "$initrd" ]; then
  qargs+=(-initrd "$initrd"); cmdline+=" root=/dev/root mrguest.init=$repo/qemu/guest-init.sh"
else
  cmdline+=" root=/dev/root rootfstype=9p rootflags=trans=virtio,version=9p2000.L,msize=512000,cache=loose ro init=$repo/qemu/guest-init.sh"
fi
case "$net" in
  "") ;;
  listen:*|connect:*) qargs+=(-netdev "socket,id=n0,${net%%:*}=127.0.0.1:${net#*:}" -device "virtio-net-pci,netdev=n0,mac=$mac");;
  # A stream over a unix socket: no Nagle or delayed ACK between the two QEMUs (a TCP
  # socket link holds a small frame behind an unacknowledged one for a delayed ACK).
  unix-listen:*|unix-connect:*)
    server=off; [ "${net%%:*}" = unix-listen ] && server=on
    qargs+=(-netdev "stream,id=n0,server=$server,addr.type=unix,addr.path=${net#*:}" -device "virtio-net-pci,netdev=n0,mac=$mac");;
  # A port of a vde_switch whose control socket directory is DIR (the cluster shape's segment).
  vde:*) qargs+=(-netdev "vde,id=n0,sock=${net#*:}" -device "virtio-net-pci,netdev=n0,mac=$mac");;
  *) echo "run-guest: bad --net $net" >&2; exit 2;;
esac
rc=0
timeout -k 10 "$timeout" qemu-system-x86_64 "${qargs[@]}" -append "$(echo $cmdline)" </dev/null >"$out/qemu.log" 2>&1 || rc=$?
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
  echo "run-guest[$name]: killed after ${timeout}s; console tail:" >&2; tail -n 40 "$out/console.log" >&2; exit 124
fi
if [ ! -f "$out/rc" ]; then
  echo "run-guest[$name]: guest stopped without a result (qemu status $rc); console tail:" >&2
  tail -n 60 "$out/console.log" >&2; cat "$out/qemu.log" >&2; exit 125
fi
exit "$(cat "$out/rc")"
