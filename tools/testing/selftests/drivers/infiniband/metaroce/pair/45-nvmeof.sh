#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# NVMe over Fabrics over RDMA, an in-kernel consumer driven through rdma_cm: nvmet-rdma exports a
# 32 MiB file-backed namespace from the target guest; nvme-rdma on the host guest connects through
# /dev/nvme-fabrics (what nvme-cli writes), writes 8 MiB of a seeded pseudo-random pattern with
# O_DIRECT (1 MiB and 4 KiB requests), reads it back and compares, then disconnects; the target
# compares its backing file with the same pattern. nvme-rdma registers every data buffer with a
# fast-register MR (IB_WR_REG_MR) and the target answers with SEND with invalidate or the host
# posts LOCAL_INV, so this runs fast registration, remote access through it and invalidation.
# Between two MetaRoCE guests (suite pair) guest a is the target; against Debian's rdma_rxe (suite
# interop, MR_BOTH_WAYS) each guest is the target once (and never twice: see the end).
. "$(dirname "$0")/../lib.sh"
# make check runs it against rdma_rxe both ways (interop/45-nvmeof), which covers MetaRoCE as
# target and as host; two MetaRoCE guests add the pairing of both in check-full.
[ -n "${MR_BOTH_WAYS:-}${MR_FULL:-}" ] || skip "two MetaRoCE guests: make check-full (make check runs interop/45-nvmeof)"
mr_rdma_dev || fail "RDMA device"
nqn=nqn.2026-11.org.example:metaroce
cfg=/sys/kernel/config/nvmet
mib=8
pattern() { python3 -c "import random, sys; random.seed($1); sys.stdout.buffer.write(random.randbytes($mib << 20))" >"$2"; }

target_up() { # IMAGE [MODULE-PARAMETERS]
  # Guest a's target takes its receives from a kernel SRQ (use_srq=1), guest b's from its QPs.
  modprobe nvmet-rdma $2 || fail "modprobe nvmet-rdma $2"
  [ -z "$2" ] || echo "nvmet-rdma: $(grep -H . /sys/module/nvmet_rdma/parameters/use_srq)"
  mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config
  truncate -s 32M "$1"
  mkdir "$cfg/subsystems/$nqn" || fail "nvmet subsystem"
  echo 1 >"$cfg/subsystems/$nqn/attr_allow_any_host"
  mkdir "$cfg/subsystems/$nqn/namespaces/1"
  # tmpfs has no O_DIRECT: the file backend uses the page cache.
  echo 1 >"$cfg/subsystems/$nqn/namespaces/1/buffered_io"
  echo -n "$1" >"$cfg/subsystems/$nqn/namespaces/1/device_path"
  echo 1 >"$cfg/subsystems/$nqn/namespaces/1/enable" || fail "nvmet namespace enable"
  mkdir "$cfg/ports/1"
  echo rdma >"$cfg/ports/1/addr_trtype"
  echo ipv4 >"$cfg/ports/1/addr_adrfam"
  echo "$(mr_self)" >"$cfg/ports/1/addr_traddr"
  echo 4420 >"$cfg/ports/1/addr_trsvcid"
  ln -s "$cfg/subsystems/$nqn" "$cfg/ports/1/subsystems/$nqn" || fail "nvmet port (rdma_cm listen on $(mr_self):4420)"
}

# The controller connected to $nqn, and its namespace's disk nvmeXn1, whose device is the
# controller (no native multipath: our kernel) or the subsystem (Debian's kernel, which also has
# a hidden per-path nvmeXcYn1); both carry subsysnqn.
host_ctrl() {
  local c
  for c in /sys/class/nvme/nvme*; do
    [ "$(cat "$c/subsysnqn" 2>/dev/null)" = "$nqn" ] && { basename "$c"; return; }
  done
}
host_dev() {
  local d
  for d in /sys/block/nvme*n1; do
    d=$(basename "$d")
    [[ $d =~ ^nvme[0-9]+n1$ ]] && [ "$(cat "/sys/block/$d/device/subsysnqn" 2>/dev/null)" = "$nqn" ] \
      && { echo "$d"; return; }
  done
}

host_run() {
  modprobe nvme-rdma || fail "modprobe nvme-rdma"
  local i dev ctrl
  for ((i = 0; i < 10; i++)); do
    echo "transport=rdma,traddr=$(mr_peer),trsvcid=4420,nqn=$nqn" >/dev/nvme-fabrics 2>/tmp/nvme-connect.err && break
    sleep 3
  done
  [ $i -lt 10 ] || { cat /tmp/nvme-connect.err; dmesg | tail -20; fail "nvme-rdma connect to $(mr_peer)"; }
  for ((i = 0; i < 100; i++)); do
    ctrl=$(host_ctrl); dev=$(host_dev); [ -n "$dev" ] && [ -b "/dev/$dev" ] && break; sleep 0.2
  done
  [ -n "$dev" ] && [ -b "/dev/$dev" ] || { ls /sys/class/nvme* /sys/block; dmesg | tail -20; fail "no namespace block device for $nqn"; }
  echo "connected: /dev/$dev ($(cat /sys/block/$dev/size) sectors) on $ctrl, $(cat /sys/class/nvme/$ctrl/transport) $(cat /sys/class/nvme/$ctrl/address)"
  pattern 7 /tmp/nvme-pattern
  local t0=$(date +%s)
  # The first half in 1 MiB requests, the second in 4 KiB ones; then everything read back in 256 KiB.
  dd if=/tmp/nvme-pattern of="/dev/$dev" bs=1M count=$((mib / 2)) oflag=direct status=none || fail "write 1 MiB blocks"
  dd if=/tmp/nvme-pattern of="/dev/$dev" bs=4k skip=$((mib * 128)) seek=$((mib * 128)) oflag=direct status=none \
    || fail "write 4 KiB blocks"
  dd if="/dev/$dev" of=/tmp/nvme-back bs=256k count=$((mib * 4)) iflag=direct status=none || fail "read back"
  echo "wrote and read $mib MiB in $(( $(date +%s) - t0 )) s"
  cmp /tmp/nvme-pattern /tmp/nvme-back || fail "data read back differs from data written"
  echo 1 >"/sys/class/nvme/$ctrl/delete_controller" || fail "disconnect"
  for ((i = 0; i < 50; i++)); do [ -z "$(host_ctrl)" ] && break; sleep 0.2; done
  [ -z "$(host_ctrl)" ] || fail "controller still present after delete_controller"
  modprobe -r nvme-rdma nvme-fabrics 2>/dev/null
  return 0
}

for trole in a ${MR_BOTH_WAYS:+b}; do
  mr_barrier "nvme-start-$trole" || fail "peer"
  if [ "$MR_ROLE" = "$trole" ]; then
    target_up /tmp/nvme-$trole.img "$([ "$trole" = a ] && echo use_srq=1)"
    mr_barrier "nvme-ready-$trole" || fail "peer (host) never arrived"
    mr_barrier "nvme-done-$trole" 600 || fail "the host did not finish"
    pattern 7 /tmp/nvme-pattern
    head -c $((mib << 20)) /tmp/nvme-$trole.img | cmp - /tmp/nvme-pattern || fail "target file differs from the pattern"
    echo "target $trole: backing file holds the $mib MiB pattern"
    # The target stays configured until the guest powers off: unlinking the port from the
    # subsystem after a connection makes lockdep report nvmet_config_sem against rdma_cm's
    # handler_mutex (nvmet_port_subsys_drop_link -> rdma_destroy_id; an upstream nvmet report
    # seen here with MetaRoCE, also known from blktests over TCP: linux-nvme/nvme-cli#3113).
  else
    mr_barrier "nvme-ready-$trole" || fail "peer (target) never arrived"
    host_run
    mr_barrier "nvme-done-$trole" 600 || fail "peer"
  fi
done
mr_our_kernel && rdma statistic show link $MR_DEV/1
mr_our_kernel && mr_dmesg_clean
true
