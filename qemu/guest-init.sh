#!/bin/bash
# PID 1 of every MetaRoCE test guest (our kernel or Debian's), on the host's root mounted read-only
# over 9p. Mounts scratch filesystems, the writable output share (tag "out") and the kernel's
# modules (tag "mods"), runs /tmp/out/cmd.sh, records its exit status in /tmp/out/rc and powers off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp TERM=dumb LC_ALL=C.UTF-8
mount -t proc proc /proc
mount -t sysfs sys /sys
mountpoint -q /dev || mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm && mount -t devpts devpts /dev/pts && mount -t tmpfs shm /dev/shm
ln -sfn /proc/self/fd /dev/fd; ln -sf /proc/self/fd/0 /dev/stdin; ln -sf /proc/self/fd/1 /dev/stdout; ln -sf /proc/self/fd/2 /dev/stderr
for d in /tmp /run /var/tmp /var/lib /var/cache /var/log; do mount -t tmpfs tmpfs "$d"; done
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t configfs configfs /sys/kernel/config 2>/dev/null
p9="trans=virtio,version=9p2000.L,msize=512000"
mkdir -p /tmp/out && mount -t 9p -o "$p9" out /tmp/out
mount -t 9p -o "$p9,ro,cache=loose" mods /lib/modules
# The repository may live under a directory the tmpfs mounts above just hid (a clone in /tmp, say):
# it is shared read-only as tag "repo" and mounted back at its host path.
repo=$(sed -n 's/.*mrguest\.repo=\([^ ]*\).*/\1/p' /proc/cmdline)
if [ -n "$repo" ] && [ ! -d "$repo/selftests" ]; then mkdir -p "$repo" && mount -t 9p -o "$p9,ro,cache=loose" repo "$repo"; fi
# Coldplug: load the drivers of the devices present (a modular kernel needs virtio_net; ours has
# everything built in and loads nothing here).
sort -u /sys/bus/*/devices/*/modalias 2>/dev/null | xargs -r modprobe -abq 2>/dev/null
name=$(sed -n 's/.*mrguest\.name=\([^ ]*\).*/\1/p' /proc/cmdline)
hostname "${name:-guest}"
ip link set lo up
# libibverbs dlopens every provider listed in /etc/libibverbs.d at each process's first verbs
# call: the 16 whose hardware no guest has cost about 1.3 s per process under TCG (ibv_devinfo
# 3.7 s with them, 1.2-1.4 s without, test kernel, 2026-12-07). The guests keep MetaRoCE's and
# rdma_rxe's.
if [ -d /etc/libibverbs.d ]; then
  mkdir -p /run/libibverbs.d
  for p in metaroce rxe; do [ -f "/etc/libibverbs.d/$p.driver" ] && cp "/etc/libibverbs.d/$p.driver" /run/libibverbs.d/; done
  mount --bind /run/libibverbs.d /etc/libibverbs.d
fi
echo "guest-init: $(uname -r) up after $(cut -d' ' -f1 /proc/uptime) s"
cd /tmp
bash /tmp/out/cmd.sh </dev/null 2>&1 | tee /tmp/out/output.log
echo "${PIPESTATUS[0]}" >/tmp/out/rc
sync; umount /tmp/out 2>/dev/null
busybox poweroff -f
busybox reboot -f
