#!/usr/bin/env bash
# Fetches Debian's stock 7.3.4 kernel (the independent rdma_rxe interop peer) into the cache:
# downloaded with apt-get, checked against the sha256 pinned in scripts/versions.env, extracted,
# never installed on the host. Prints the kernel image and the modules dir.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/scripts/versions.env"
cache=${METAROCE_CACHE:-$HOME/.cache/metaroce}
dir=$cache/peer/$PEER_PKG_VERSION
moddir=$dir/root/usr/lib/modules/$PEER_KERNEL_ABI
if [ ! -f "$dir/.done" ]; then
  rm -rf "$dir"; mkdir -p "$dir/debs"
  (cd "$dir/debs" && apt-get download -q "$PEER_PKG_BINARY=$PEER_PKG_VERSION" "$PEER_PKG_MODULES=$PEER_PKG_VERSION") >&2 \
    || { echo "peer-kernel: apt-get download of $PEER_PKG_BINARY/$PEER_PKG_MODULES failed (run 'make deps' first)" >&2; exit 1; }
  check() { local f; f=$(ls "$dir"/debs/"$1"_*.deb); echo "$2  $f" | sha256sum -c --quiet - >&2 \
    || { echo "peer-kernel: sha256 mismatch for $f" >&2; exit 1; }; dpkg-deb -x "$f" "$dir/root"; }
  check "$PEER_PKG_BINARY" "$PEER_SHA256_BINARY"
  check "$PEER_PKG_MODULES" "$PEER_SHA256_MODULES"
  depmod -b "$dir/root/usr" "$PEER_KERNEL_ABI"
  rm -rf "$dir/debs"
  touch "$dir/.done"
fi
echo "$moddir/vmlinuz"
echo "$moddir"
