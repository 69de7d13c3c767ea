#!/usr/bin/env bash
# Applies this repository's kernel-tree overlay to a kernel source tree, idempotently:
#  - every file under the overlay roots is copied in when its content differs (so unchanged files
#    keep their mtimes and incremental builds stay incremental); files a previous run copied that
#    are gone from the repo are removed again;
#  - a few one-line hooks (Kconfig `source`, Makefile `obj-`, bindings/helpers includes, module
#    lines) are inserted after fixed anchor lines into pristine copies of the files they edit,
#    failing loudly if an anchor is missing.
# Usage: scripts/overlay.sh REPO_DIR KERNEL_SRC_DIR
set -euo pipefail
repo=$(cd "$1" && pwd); tree=$(cd "$2" && pwd)
die() { echo "overlay: $*" >&2; exit 1; }

# Overlay roots, relative to the repo and the tree alike. Build output and host-only cargo
# state never enter the tree.
roots=(drivers/infiniband/sw/metaroce rust/kernel/rdma rust/kernel/net rust/bindings/metaroce_helper.h
       rust/helpers/metaroce.c include tools/testing/selftests/drivers/infiniband/metaroce)
manifest=$tree/.metaroce-overlay-files
new_manifest=$(mktemp); trap 'rm -f "$new_manifest"' EXIT
changed=0
for r in "${roots[@]}"; do
  [ -e "$repo/$r" ] || continue
  while IFS= read -r -d '' f; do
    rel=${f#"$repo/"}
    echo "$rel" >>"$new_manifest"
    dst=$tree/$rel
    # Same content and the same executable bit (kselftest runs its TEST_PROGS directly), or a
    # copy; a symlink (a test one suite shares with another) is copied as the link.
    if [ -L "$f" ]; then
      [ "$(readlink "$f")" = "$(readlink "$dst" 2>/dev/null)" ] && continue
      mkdir -p "$(dirname "$dst")"; rm -f "$dst"; cp -P "$f" "$dst"; changed=$((changed + 1)); continue
    fi
    fx=; [ -x "$f" ] && fx=x; dx=; [ -x "$dst" ] && dx=x
    if ! cmp -s "$f" "$dst" || [ "$fx" != "$dx" ]; then
      mkdir -p "$(dirname "$dst")"; rm -f "$dst"; cp --preserve=mode "$f" "$dst"; changed=$((changed + 1))
    fi
  done < <(find "$repo/$r" \( -name target -o -name '*.orig' \) -prune -o \( -type f -o -type l \) -print0)
done
sort -o "$new_manifest" "$new_manifest"
removed=0
if [ -f "$manifest" ]; then
  while IFS= read -r rel; do
    [ -n "$rel" ] && { [ -f "$tree/$rel" ] || [ -L "$tree/$rel" ]; } && { rm -f "$tree/$rel"; removed=$((removed + 1)); }
  done < <(comm -23 "$manifest" "$new_manifest")
fi
cp "$new_manifest" "$manifest"

# Hooks: the few kernel files the overlay edits are rebuilt every time from their pristine
# versions (kept beside the tree in $tree.orig, outside it so that the kernel's own file walks such as
# `make rustfmtcheck` do not see them; extracted from the tarball once) plus the hook lines
# that apply to this repo state, and written back only when that differs. So hooks are declarative:
# a hook dropped from the repo disappears from the tree too.
. "$repo/scripts/versions.env"
hooked=(drivers/infiniband/Kconfig drivers/infiniband/sw/Makefile rust/bindings/bindings_helper.h
        rust/helpers/helpers.c rust/kernel/lib.rs rust/kernel/net/mod.rs rust/bindgen_parameters
        include/uapi/rdma/ib_user_ioctl_verbs.h)
pristine=$tree.orig
rm -rf "$tree/.metaroce-orig"   # where older versions of this script kept them
missing=()
for f in "${hooked[@]}"; do [ -f "$pristine/$f" ] || missing+=("$KERNEL_SRC_PKG/$f"); done
if [ "${#missing[@]}" -gt 0 ]; then
  mkdir -p "$pristine"
  tar -xf "/usr/src/$KERNEL_SRC_PKG.tar.xz" -C "$pristine" --strip-components=1 "${missing[@]}" \
    || die "cannot extract pristine ${missing[*]} from /usr/src/$KERNEL_SRC_PKG.tar.xz"
fi
stage=$(mktemp -d); trap 'rm -f "$new_manifest"; rm -rf "$stage"' EXIT
for f in "${hooked[@]}"; do mkdir -p "$stage/$(dirname "$f")"; cp "$pristine/$f" "$stage/$f"; done

# hook FILE ANCHOR LINE: insert LINE after the first line equal to ANCHOR.
hook() {
  local file=$stage/$1 anchor=$2 line=$3
  grep -qxF -- "$anchor" "$file" || die "anchor not found in $1: $anchor"
  awk -v a="$anchor" -v l="$line" '{ print } !done && $0 == a { print l; done = 1 }' "$file" >"$file.tmp"
  mv "$file.tmp" "$file"
}
# hook_block FILE ANCHOR: insert the lines read from stdin after the first line equal to ANCHOR.
hook_block() {
  local file=$stage/$1 anchor=$2 block; block=$(mktemp)
  cat >"$block"
  grep -qxF -- "$anchor" "$file" || die "anchor not found in $1: $anchor"
  awk -v a="$anchor" -v b="$block" '{ print } !done && $0 == a { while ((getline l < b) > 0) print l; done = 1 }' \
    "$file" >"$file.tmp"
  mv "$file.tmp" "$file"; rm -f "$block"
}
# Each hook belongs with the files that need it (so that `make patches` can apply the overlay a
# part at a time): the abstractions' Kconfig symbol and bindings with their helpers, the
# directory of their tracepoints with it, the driver's Kconfig and object with the driver.
if [ -f "$repo/rust/bindings/metaroce_helper.h" ]; then
  hook_block drivers/infiniband/Kconfig $'\tdef_bool !HIGHMEM' <<'KCONFIG'

config RUST_RDMA
	bool "Rust abstractions for RDMA (ib_core) and kernel networking"
	depends on RUST
	depends on INFINIBAND=y && INFINIBAND_USER_ACCESS=y
	depends on IPV6=y && INFINIBAND_VIRT_DMA
	# kernel::rdma::umem_odp binds ib_umem_odp, which exists only with it.
	depends on INFINIBAND_ON_DEMAND_PAGING
	select NET_UDP_TUNNEL
	# kernel::net::crypto: packet authentication with the crypto library.
	select CRYPTO_LIB_CHACHA20POLY1305
	help
	  Safe Rust abstractions over ib_core (devices, links, verbs
	  objects, user memory and rings) and over the networking pieces a
	  software RDMA provider needs (net devices, sk_buffs, UDP tunnel
	  sockets, routes). They live in the `kernel` crate, which is built
	  into vmlinux, so everything they call must be built in too.
KCONFIG
  hook rust/bindings/bindings_helper.h '#include <linux/xarray.h>' '#include "metaroce_helper.h"'
  # MetaRoCE's driver id (user space picks libmetaroce by it), after the last one 7.3 knows:
  # with the abstractions, whose `DriverId` names it.
  hook include/uapi/rdma/ib_user_ioctl_verbs.h $'\tRDMA_DRIVER_IONIC,' $'\tRDMA_DRIVER_METAROCE,'
fi
if [ -f "$repo/rust/helpers/metaroce.c" ]; then
  hook rust/helpers/helpers.c '#include "xarray.c"' '#include "metaroce.c"'
fi
# The tracepoints the abstractions wrap (metaroce_trace.c) are built in even with the driver a
# module: kbuild descends for built-in objects too (it visits the directory once).
if [ -f "$repo/drivers/infiniband/sw/metaroce/metaroce_trace.c" ]; then
  hook drivers/infiniband/sw/Makefile 'obj-$(CONFIG_RDMA_SIW)			+= siw/' \
       'obj-$(CONFIG_RUST_RDMA)		+= metaroce/'
fi
if [ -f "$repo/drivers/infiniband/sw/metaroce/Kconfig" ]; then
  hook drivers/infiniband/Kconfig 'source "drivers/infiniband/sw/siw/Kconfig"' \
       'source "drivers/infiniband/sw/metaroce/Kconfig"'
  hook drivers/infiniband/sw/Makefile 'obj-$(CONFIG_RDMA_SIW)			+= siw/' \
       'obj-$(CONFIG_RDMA_METAROCE)		+= metaroce/'
fi
# Enums passed through the function pointers our abstractions install (ib_device_ops:
# req_notify_cq, get_link_layer, alloc_mr, modify_srq) get their own CFI type, as the kernel's
# own list does (kCFI hashes the C prototype; a plain integer would not match). One pair per enum:
# its newtype, its derive and its Itanium-mangled name; inserted in reverse order after the
# kernel's last pair.
cfi_anchor="--with-attribute-custom-enum=lru_status='#[cfi_encoding=\"10lru_status\"]'"
[ -f "$repo/rust/bindings/metaroce_helper.h" ] &&
for e in ib_srq_attr_mask ib_mr_type ib_cq_notify_flags rdma_link_layer; do
  hook rust/bindgen_parameters "$cfi_anchor" "--with-attribute-custom-enum=$e='#[cfi_encoding=\"${#e}$e\"]'"
  # Zeroable like every struct of the bindings (`struct ib_mr` holds an `ib_mr_type`).
  hook rust/bindgen_parameters "$cfi_anchor" "--with-derive-custom-enum=$e=MaybeZeroable"
  hook rust/bindgen_parameters "$cfi_anchor" "--newtype-enum $e"
done
# mods FILE ANCHOR_MOD MOD...: declares each MOD (behind `#[cfg(CONFIG_RUST_RDMA)]`, on lines of
# their own) around the line `pub mod ANCHOR_MOD;`, those that sort before it above it and the
# others below, so the module list stays in the order rustfmt keeps (`make rustfmtcheck`).
mods() {
  local file=$stage/$1 anchor=$2; shift 2
  grep -qxF -- "pub mod $anchor;" "$file" || die "anchor not found in $1: pub mod $anchor;"
  printf '%s\n' "$@" | sort | awk -v a="$anchor" -v f="$file" '
    { m[n++] = $0 }
    END {
      while ((getline line < f) > 0) {
        if (!done && line == "pub mod " a ";") {
          for (i = 0; i < n; i++) if (m[i] < a) printf "#[cfg(CONFIG_RUST_RDMA)]\npub mod %s;\n", m[i]
          print line
          for (i = 0; i < n; i++) if (m[i] > a) printf "#[cfg(CONFIG_RUST_RDMA)]\npub mod %s;\n", m[i]
          done = 1
        } else print line
      }
    }' >"$file.tmp"
  mv "$file.tmp" "$file"
}
# Our networking modules, and the RDMA module of the kernel crate.
net_mods=()
for f in "$repo"/rust/kernel/net/*.rs; do [ -e "$f" ] && net_mods+=("$(basename "$f" .rs)"); done
[ "${#net_mods[@]}" -gt 0 ] && mods rust/kernel/net/mod.rs netlink "${net_mods[@]}"
if [ -d "$repo/rust/kernel/rdma" ]; then
  mods rust/kernel/lib.rs rbtree rdma
fi
for f in "${hooked[@]}"; do
  cmp -s "$stage/$f" "$tree/$f" || { cp "$stage/$f" "$tree/$f"; changed=$((changed + 1)); }
done
echo "overlay: $changed file(s)/hook(s) updated, $removed stale file(s) removed"
