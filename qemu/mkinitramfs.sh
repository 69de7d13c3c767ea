#!/usr/bin/env bash
# Builds the small initramfs that lets a modular kernel (Debian's stock one) boot the host root over
# 9p: busybox-static, the 9p/virtio modules and their dependencies (resolved by modprobe), and
# qemu/initramfs-init. Usage: mkinitramfs.sh MODULES_DIR OUTPUT.cpio.gz
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
moddir=$(cd "$1" && pwd); out=$2
rel=$(basename "$moddir"); base=$(dirname "$(dirname "$moddir")")  # .../usr/lib/modules/REL -> .../usr
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$work"/{bin,proc,dev,modules,newroot}
cp /bin/busybox "$work/bin/busybox"
cp "$repo/qemu/initramfs-init" "$work/init"; chmod +x "$work/init"
modprobe -S "$rel" -d "$base/.." --show-depends -a 9pnet_virtio 9p 2>/dev/null | awk '$1 == "insmod" { print $2 }' |
  awk '!seen[$0]++' | while read -r ko; do
    name=$(basename "$ko"); name=${name%.xz}; name=${name%.zst}
    case "$ko" in *.xz) xz -dc "$ko" ;; *.zst) zstd -dcq "$ko" ;; *) cat "$ko" ;; esac >"$work/modules/$name"
    echo "$name" >>"$work/modules.order"
  done
[ -s "$work/modules.order" ] || { echo "mkinitramfs: no 9p modules found under $moddir" >&2; exit 1; }
(cd "$work" && find . | cpio -o -H newc --quiet | gzip -1) >"$out"
