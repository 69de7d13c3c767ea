#!/usr/bin/env bash
# `make patches`: this repository's kernel-tree overlay as a `git format-patch` series against the
# pinned Linux source (scripts/versions.env), for a user with their own 7.3 tree:
#   git am out/patches/*.patch    (or: patch -p1 < each, in order)
# The series applies the overlay a part at a time, in the order a reviewer reads it: the Rust
# bindings and helpers with the abstractions' Kconfig symbol, the networking abstractions, the RDMA
# abstractions with their tracepoints, the protocol core, the driver, the selftests, the
# documentation. Each part is scripts/overlay.sh run on a copy of the repository that holds only
# the files of the parts so far (its hooks follow the files), committed in a scratch git repository
# whose first commit holds the pristine versions of the files the series edits; so the index lines
# of the patches name the pristine blobs and `git am` applies them to a full tree.
# scripts/patches-check.sh (make check-full) builds the kernel at every prefix of the series.
# Usage: scripts/patches.sh [OUT_DIR]    (default out/patches)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/scripts/versions.env"
out=${1:-$repo/out/patches}
tarball=/usr/src/$KERNEL_SRC_PKG.tar.xz
[ -f "$tarball" ] || { echo "patches: $tarball missing; run 'make deps'" >&2; exit 1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
K=drivers/infiniband/sw/metaroce
T=tools/testing/selftests/drivers/infiniband/metaroce

# The parts: subject, the repository paths they add (files or directories), the message body.
subjects=() paths=() bodies=()
part() { subjects+=("$1"); paths+=("$2"); bodies+=("$3"); }
part "rust: add bindings and helpers for RDMA and networking abstractions" \
  "rust/bindings/metaroce_helper.h rust/helpers/metaroce.c include/trace" \
"Add the RUST_RDMA Kconfig symbol and the C side the Rust RDMA and
networking abstractions need: the ib_core, UDP tunnel, route and
sk_buff headers for bindgen, helpers for the static inline functions
they call, kCFI encodings for the enums passed through the
ib_device_ops callbacks the abstractions install, the header of the
tracepoints the RDMA abstractions wrap (bindgen reads it here), and
RDMA_DRIVER_METAROCE in enum rdma_driver_id, which the abstractions'
DriverId names.

RUST_RDMA needs ib_core and user access built in, as the abstractions
live in the kernel crate, which is part of vmlinux."
part "rust: net: add net device, sk_buff, UDP tunnel and checksum abstractions" \
  "rust/kernel/net" \
"Safe wrappers for what a software RDMA provider needs from the
networking stack: references to net devices and their notifier, network
namespaces with per-namespace state, sk_buff construction and parsing,
UDP tunnel sockets with an encapsulated-receive callback, IPv4 and IPv6
routes, checksums, and ChaCha20-Poly1305 from the crypto library.

Each type keeps the C object's lifetime rules in the type system: a
reference counted device is an ARef, a socket is torn down before its
namespace, and a received sk_buff is owned by exactly one handler.
KUnit suites cover the sk_buff, checksum and UDP tunnel wrappers."
part "rust: rdma: add ib_core abstractions for software RDMA providers" \
  "rust/kernel/rdma $K/Makefile $K/metaroce_trace.c" \
"A #[vtable] Driver trait over struct ib_device_ops, with devices
registered through ib_core and link types through rdma_link_ops, and
verbs objects (PD, CQ, QP, SRQ, MR, MW, AH, user contexts) embedded in
the driver's own structures through Opaque<T> and pin-init.

User memory is reached through pinned ib_umem and on-demand paging
through ib_umem_odp with an interval notifier. Kernel consumers'
buffers are reached only while their work request is outstanding:
every posted request gets a ticket that the completion retires, and
fast-register MR pages only while their mapping is registered.

The tracepoints the native transport emits are defined here, built into
vmlinux with the abstractions. KUnit suites cover tickets, fast-register
loans, user memory and the shared mmap buffers."
part "RDMA/metaroce: add the sans-I/O protocol core" \
  "$K/proto/src" \
"The RoCEv2 and MetaRoCE protocol state machines, as no_std Rust without
allocation or floats: header parsing and building, ICRC, the requester,
responder and completer, and the native multipath transport (per-path
sequence numbers, SACK, selective retransmission, congestion control).

The core does no I/O: the driver feeds it packets and timer ticks and
sends what it returns. The same files build on the host, where they are
unit, property and fuzz tested."
part "RDMA/metaroce: add the MetaRoCE software RDMA provider" \
  "$K include/uapi/rdma/metaroce-abi.h" \
"'rdma link add NAME type metaroce netdev DEV' creates an RDMA device
on any net device that carries RoCEv2, interoperable with rdma_rxe and
RoCE NICs; 'type metaroce-native' carries RC QPs over the MetaRoCE
multipath transport instead. User space drives the device through
the libmetaroce provider over the driver's own user ABI
(include/uapi/rdma/metaroce-abi.h, driver id RDMA_DRIVER_METAROCE);
CONFIG_RDMA_METAROCE_RXE_ABI keeps rdma_rxe's ABI and id, for the
stock librxe, during the transition.

The driver is safe Rust (#![deny(unsafe_code)]) over the abstractions
of the previous patches, laid out as device data, verbs objects, data
path and module."
part "selftests: drivers/infiniband/metaroce: add MetaRoCE selftests" \
  "$T" \
"kselftest collections for the MetaRoCE provider: 'single' runs in one
machine with network namespaces as hosts, 'pair' and 'interop' between
two machines joined by a link (the second one running rdma_rxe for
interop), 'kmemleak' checks for leaks from RDMA or Rust code after a
suite, and 'soak', 'bench' and 'profile' drive the longer runs.

  make -C tools/testing/selftests \\
       TARGETS=drivers/infiniband/metaroce/single run_tests"
part "Documentation: infiniband: add MetaRoCE documentation" \
  "Documentation/metaroce" \
"An admin guide (configuration, module parameters, counters,
tracepoints, debugfs, troubleshooting), the native transport's
specification, the protocol core and the Rust abstractions."

# Scratch repository: the pristine versions of every file the series edits.
edited=(drivers/infiniband/Kconfig drivers/infiniband/sw/Makefile rust/bindings/bindings_helper.h
        rust/helpers/helpers.c rust/kernel/lib.rs rust/kernel/net/mod.rs rust/bindgen_parameters
        Documentation/infiniband/index.rst)
tree=$work/linux; mkdir -p "$tree"
tar -xf "$tarball" -C "$tree" --strip-components=1 "${edited[@]/#/$KERNEL_SRC_PKG/}"
git -C "$tree" init -q
git -C "$tree" config user.name "MetaRoCE developers"; git -C "$tree" config user.email "metaroce@example.org"
git -C "$tree" add -A; git -C "$tree" commit -q -m "Linux $KERNEL_SRC_VERSION (pristine files the series edits)"
base=$(git -C "$tree" rev-parse HEAD)

# Each part: a copy of the repository with the parts so far, overlaid onto the tree, committed.
sub=$work/repo; mkdir -p "$sub/scripts"
cp "$repo/scripts/versions.env" "$repo/scripts/overlay.sh" "$sub/scripts/"
for i in "${!subjects[@]}"; do
  for p in ${paths[$i]}; do
    if [ "$p" = Documentation/metaroce ]; then
      # The kernel-form documentation, without the repository's own changelog and bench reports.
      d=$tree/Documentation/infiniband/metaroce; mkdir -p "$d"
      for f in index admin-guide transport protocol-core abstractions; do
        cp "$repo/Documentation/metaroce/$f.rst" "$d/"
      done
      sed -i -e '/^   changelog$/d' -e '/^- ``changelog.rst``/d' -e '/^- ``bench\/``/d' "$d/index.rst"
      awk '!done && $0 == "   user_verbs" { print; print "   metaroce/index"; done = 1; next } { print }' \
        "$tree/Documentation/infiniband/index.rst" >"$work/index.rst"
      mv "$work/index.rst" "$tree/Documentation/infiniband/index.rst"
      continue
    fi
    mkdir -p "$sub/$(dirname "$p")"; cp -a "$repo/$p" "$sub/$(dirname "$p")/"
  done
  # The driver's directory holds the parts before it (proto/src, Makefile, trace); drop what is
  # not the repository's kernel tree (host crates' cargo files and tests).
  rm -rf "$sub/$K/proto/Cargo.toml" "$sub/$K/proto/tests" "$sub/$K/proto/target"
  find "$sub" -name '__pycache__' -prune -exec rm -rf {} + 2>/dev/null || true
  "$sub/scripts/overlay.sh" "$sub" "$tree" >/dev/null
  rm -f "$tree/.metaroce-overlay-files"
  git -C "$tree" add -A
  printf '%s\n\n%s\n\nSigned-off-by: MetaRoCE developers <metaroce@example.org>\n' \
    "${subjects[$i]}" "${bodies[$i]}" | git -C "$tree" commit -q -F -
done
rm -rf "$tree.orig"

rm -rf "$out"; mkdir -p "$out"
git -C "$tree" format-patch -q --cover-letter -o "$out" "$base"..HEAD
# The cover letter: what the series is and what it applies to.
cover=$(ls "$out"/0000-*.patch)
python3 - "$cover" "$KERNEL_SRC_VERSION" <<'EOF'
import sys
p, ver = sys.argv[1], sys.argv[2]
s = open(p).read()
s = s.replace("*** SUBJECT HERE ***", "Add MetaRoCE, a software RDMA provider in Rust")
s = s.replace("*** BLURB HERE ***", f"""MetaRoCE creates an RDMA device on any net device ('rdma link add NAME
type metaroce netdev DEV'). It speaks RoCEv2, interoperable with rdma_rxe
and RoCE NICs, and the MetaRoCE multipath transport.

The series applies to Linux {ver.split('-')[0]} (built and tested against Debian's
linux-source-7.3 {ver}): the Rust bindings and abstractions first, then
the protocol core, the driver, the selftests and the documentation. The
kernel builds after every patch.""")
open(p, "w").write(s)
EOF
ls "$out"
