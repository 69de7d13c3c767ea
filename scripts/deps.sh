#!/usr/bin/env bash
# Installs everything MetaRoCE needs to build and test, idempotently, at the versions pinned in
# scripts/versions.env. Run by `make deps`, which both README commands run first.
# A piece that cannot be installed fails the run with a message that names it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/versions.env"

die() { echo "deps: $*" >&2; exit 1; }
log() { echo "deps: $*"; }
[ "$(id -u)" = 0 ] || die "must run as root (apt-get); this project's machines run as root"

# --- Debian: trixie-backports carries linux-source-7.3; pinned low so nothing else comes from it.
src=/etc/apt/sources.list.d/metaroce-trixie.sources
pin=/etc/apt/preferences.d/metaroce-trixie
want_src='Types: deb
URIs: http://deb.debian.org/debian
Suites: trixie trixie-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg'
want_pin='Package: *
Pin: release n=trixie
Pin-Priority: 1

Package: *
Pin: release n=trixie-backports
Pin-Priority: 1

Package: '"$KERNEL_SRC_PKG"'
Pin: release n=trixie-backports
Pin-Priority: 100'
changed=0
if [ "$(cat "$src" 2>/dev/null)" != "$want_src" ]; then printf '%s\n' "$want_src" >"$src"; changed=1; fi
if [ "$(cat "$pin" 2>/dev/null)" != "$want_pin" ]; then printf '%s\n' "$want_pin" >"$pin"; changed=1; fi

debs=(
  "$KERNEL_SRC_PKG=$KERNEL_SRC_VERSION"
  clang-19 lld-19 llvm-19 libclang-19-dev
  flex bison bc libelf-dev libssl-dev cpio kmod xz-utils zstd make rsync
  qemu-system-x86 busybox-static
  rdma-core ibverbs-utils perftest rdmacm-utils python3-pyverbs iproute2 iperf3 tshark python3-docutils
  # The engines on top (pair/70-ucx, the cluster shape): UCX, Open MPI over UCX, libfabric, and
  # vde_switch, the guests' local L2 segment.
  ucx-utils openmpi-bin libopenmpi-dev libfabric-bin vde2
)
missing=()
for d in "${debs[@]}"; do
  name=${d%%=*}; ver=${d#*=}
  have=$(dpkg-query -W -f='${db:Status-Abbrev} ${Version}' "$name" 2>/dev/null || true)
  case "$have" in
    "ii  "*) [ "$name" = "$d" ] || [ "${have#ii  }" = "$ver" ] || missing+=("$d") ;;
    *) missing+=("$d") ;;
  esac
done
if [ "${#missing[@]}" -gt 0 ] || [ "$changed" = 1 ]; then
  log "apt-get update"
  apt-get update -qq || die "apt-get update failed"
fi
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" \
    || die "apt-get install failed for one of: ${missing[*]}"
fi
for d in "${debs[@]}"; do
  dpkg-query -W -f='${db:Status-Abbrev}' "${d%%=*}" 2>/dev/null | grep -q '^ii' || die "Debian package ${d%%=*} is not installed"
done
[ -f "/usr/src/$KERNEL_SRC_PKG.tar.xz" ] || die "/usr/src/$KERNEL_SRC_PKG.tar.xz missing (package $KERNEL_SRC_PKG)"

# --- Rust: rustup toolchain, rust-src and a pinned bindgen.
export PATH="$HOME/.cargo/bin:$PATH"
command -v rustup >/dev/null || die "rustup not found (the machine's Rust toolchain is installed by rustup)"
for c in rust-src rustfmt clippy; do   # rustfmt, clippy: make check's lint step
  rustup component list --installed 2>/dev/null | grep -q "^$c" || {
    log "rustup component add $c"; rustup component add "$c" || die "rustup component add $c failed"; }
done
if [ "$(bindgen --version 2>/dev/null)" != "bindgen $BINDGEN_VERSION" ]; then
  log "cargo install bindgen-cli $BINDGEN_VERSION (about 2 minutes)"
  cargo install bindgen-cli --locked --version "$BINDGEN_VERSION" || die "cargo install bindgen-cli $BINDGEN_VERSION failed"
fi
for t in clang-19 ld.lld-19 llvm-ar-19 rustc bindgen qemu-system-x86_64 busybox ibv_rc_pingpong ib_write_bw rdma tshark ucx_perftest mpicc mpirun fi_info vde_switch; do
  command -v "$t" >/dev/null || die "tool $t not found after install"
done
log "all dependencies present"
