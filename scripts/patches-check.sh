#!/usr/bin/env bash
# Checks that every prefix of the `make patches` series builds (make check-full): the series is
# applied with `git am` to a pristine tree of the pinned source one patch at a time, and after each
# the kernel is configured from the release fragments (not strictly: a symbol a later patch adds
# is simply absent) and built (bzImage and modules) out of tree, incrementally. Prints one TAP-ish
# "ok|not-ok PATCH" line per prefix, the build's tail under a failure.
# Usage: scripts/patches-check.sh [PATCH_DIR]   (default: a fresh `scripts/patches.sh` series)
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/scripts/versions.env"
export PATH="$HOME/.cargo/bin:$PATH"
cache=${METAROCE_CACHE:-$HOME/.cache/metaroce}
work=$cache/patches-check; rm -rf "$work"; mkdir -p "$work"
series=${1:-}
if [ -z "$series" ]; then
  series=$work/series
  "$repo/scripts/patches.sh" "$series" >/dev/null || { echo "not-ok make patches"; exit 1; }
fi
mkdir -p "$HOME/.cache"; exec 9>"$HOME/.cache/metaroce-build.lock"; flock 9   # one kernel build at a time
tree=$work/linux build=$work/build
mkdir -p "$tree" "$build"
tar -xf "/usr/src/$KERNEL_SRC_PKG.tar.xz" -C "$tree" --strip-components=1
git -C "$tree" init -q && git -C "$tree" add -A -f && \
  git -C "$tree" -c user.name=check -c user.email=check@example.org commit -q -m pristine || { echo "not-ok pristine tree"; exit 1; }
bad=0
for p in "$series"/[0-9][0-9][0-9][0-9]-*.patch; do
  case $(basename "$p") in 0000-*) continue;; esac   # the cover letter
  name=$(basename "$p" .patch); log=$work/$name.log
  if ! git -C "$tree" -c user.name=check -c user.email=check@example.org am -q "$p" >"$log" 2>&1; then
    echo "not-ok $name (does not apply)"; sed 's/^/    /' "$log" | tail -20; bad=1; break
  fi
  if (cd "$tree" && LLVM="$LLVM_SUFFIX" scripts/kconfig/merge_config.sh -n -O "$build" \
        "$repo/configs/guest.config" "$repo/configs/release.config") >>"$log" 2>&1 &&
     make -C "$tree" O="$build" LLVM="$LLVM_SUFFIX" -s -j"$(nproc)" bzImage modules >>"$log" 2>&1; then
    echo "ok $name ($(grep -E '^CONFIG_(RUST_RDMA|RDMA_METAROCE)=' "$build/.config" | tr '\n' ' '))"
  else
    echo "not-ok $name"; grep -E 'error|Error' "$log" | head -20 | sed 's/^/    /'; bad=1
  fi
done
[ "$bad" = 0 ]
