#!/usr/bin/env bash
# Builds a MetaRoCE guest kernel from the pinned Debian source with this repo's overlay.
# Usage: scripts/kernel.sh FLAVOUR [paths]
#   FLAVOUR: test (sanitizers) | release | baseline (release with rdma_rxe=m instead of MetaRoCE,
#   the reference `make bench` measures against: same source, same config but the provider) |
#   rxe-abi (release with MetaRoCE speaking rdma_rxe's user ABI, for Debian's librxe: the bench's
#   measure of libmetaroce against librxe over the same driver)
#   The pristine source is unpacked once into $METAROCE_CACHE (default ~/.cache/metaroce), the
#   overlay applied idempotently, and each flavour builds out of tree (O=) into its own directory,
#   so rebuilds compile only what changed. `paths` prints bzImage and the modules dir, nothing else.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/scripts/versions.env"
flavour=${1:?usage: kernel.sh test|release|baseline|rxe-abi [paths]}
case "$flavour" in test|release|baseline|rxe-abi) ;; *) echo "kernel: unknown flavour $flavour" >&2; exit 2 ;; esac
cache=${METAROCE_CACHE:-$HOME/.cache/metaroce}
src=$cache/src/linux-$KERNEL_SRC_VERSION
build=$cache/build/$flavour
modroot=$build/modroot
export PATH="$HOME/.cargo/bin:$PATH"
mk() { make -C "$src" O="$build" LLVM="$LLVM_SUFFIX" "$@"; }

if [ "${2:-}" = paths ]; then
  rel=$(cat "$build/include/config/kernel.release" 2>/dev/null) || { echo "kernel: $flavour not built yet" >&2; exit 1; }
  echo "$build/arch/x86/boot/bzImage"
  echo "$modroot/lib/modules/$rel"
  exit 0
fi
log() { echo "kernel[$flavour]: $*"; }
t0=$(date +%s)
# One kernel build at a time on this machine, whichever cache or checkout asks (2 cores).
mkdir -p "$HOME/.cache"
exec 9>"$HOME/.cache/metaroce-build.lock"
flock -n 9 || { log "waiting for another kernel build to finish"; flock 9; }

# 1. Pristine source, unpacked once per tarball.
tarball=/usr/src/$KERNEL_SRC_PKG.tar.xz
[ -f "$tarball" ] || { echo "kernel: $tarball missing; run 'make deps'" >&2; exit 1; }
stamp="$KERNEL_SRC_PKG $KERNEL_SRC_VERSION $(stat -c '%s %Y' "$tarball")"
if [ "$(cat "$src/.metaroce-pristine" 2>/dev/null)" != "$stamp" ]; then
  log "unpacking $tarball"
  rm -rf "$src" "$src.orig" "$cache/build"; mkdir -p "$src"
  tar -xf "$tarball" -C "$src" --strip-components=1
  echo "$stamp" >"$src/.metaroce-pristine"
fi

# 2. Overlay.
"$repo/scripts/overlay.sh" "$repo" "$src"

# 3. Configuration: allnoconfig + fragments, strict, redone only when an input changed.
mkdir -p "$build"
if [ "$flavour" = baseline ] || [ "$flavour" = rxe-abi ]; then
  # baseline.config and rxe-abi.config override a few keys of guest.config and release.config (the
  # provider, its user ABI and the version suffix). Those keys, and only those, are dropped from
  # copies of the two fragments, so strict mode still fails on any other redefinition.
  keys=$(sed -nE 's/^(# )?(CONFIG_[A-Za-z0-9_]+)[= ].*/\2/p' "$repo/configs/$flavour.config" | paste -sd'|')
  [ -n "$keys" ] || { echo "kernel: configs/$flavour.config sets nothing" >&2; exit 1; }
  mkdir -p "$build/fragments"
  for f in guest release; do
    grep -vE "^(# )?($keys)[= ]" "$repo/configs/$f.config" >"$build/fragments/$f.config" || true
  done
  frags=("$build/fragments/guest.config" "$build/fragments/release.config" "$repo/configs/$flavour.config")
else
  frags=("$repo/configs/guest.config" "$repo/configs/$flavour.config")
fi
cfg_inputs=$(cat "${frags[@]}" "$src/drivers/infiniband/Kconfig" "$src/drivers/infiniband/sw/metaroce/Kconfig" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$build/.metaroce-config" 2>/dev/null)" != "$cfg_inputs" ] || [ ! -f "$build/.config" ]; then
  log "configuring from ${frags[*]##*/}"
  mk -s rustavailable >/dev/null || { mk rustavailable; exit 1; }
  # -n: start from allnoconfig; -s: fail when a requested value does not stick.
  (cd "$src" && LLVM="$LLVM_SUFFIX" scripts/kconfig/merge_config.sh -s -n -O "$build" "${frags[@]}") \
    >"$build/merge_config.log" 2>&1 || {
      grep -E 'Value requested|redefined|Requested and effective|Error|error' "$build/merge_config.log" >&2 || tail -30 "$build/merge_config.log" >&2
      echo "kernel: configuration failed (full log: $build/merge_config.log)" >&2; exit 1; }
  echo "$cfg_inputs" >"$build/.metaroce-config"
fi

# 4. Build and install modules into a private root the guests mount at /lib/modules.
log "building bzImage and modules (LLVM=$LLVM_SUFFIX, -j$(nproc))"
mk -s -j"$(nproc)" bzImage modules
rm -rf "$modroot"
mk -s INSTALL_MOD_PATH="$modroot" modules_install >/dev/null
paths=$("$0" "$flavour" paths)
log "done in $(( $(date +%s) - t0 )) s"
echo "bzImage: $(echo "$paths" | sed -n 1p)"
echo "modules: $(echo "$paths" | sed -n 2p)"
