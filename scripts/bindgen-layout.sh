#!/usr/bin/env bash
# Checks that bindgen's Rust layout of every C type our abstractions name (rust/kernel/{rdma,net}:
# each `bindings::NAME`), and of every type those contain, matches the C compiler's. The kernel
# generates its bindings with --no-layout-tests, so a struct whose Rust size or field offsets differ
# from C's builds without a word, and a Rust access to a field past the difference reads or writes
# another field (found the hard way: a write of struct sock's sk_write_space landed 64 bytes early).
#
# How: the test kernel's own bindgen command (rust/bindings/.bindings_generated.rs.cmd, same
# headers, flags and configuration), with layout tests instead of --no-layout-tests and only those
# types allowed, compiled by rustc (metadata only; the layout of #[repr(C)] types on
# x86_64-unknown-linux-gnu is the kernel target's). Each failed layout assertion names a type.
#
# Types known to differ, all with the same cause in bindgen 0.73 (it drops a member clang lays out):
#   sched_statistics, task_struct: the empty `____cacheline_aligned` struct sched_statistics
#     (CONFIG_SCHEDSTATS off) loses its 64-byte alignment, so task_struct's later fields move.
#   socket_lock_t (and its anonymous union), sock: the union's untagged `struct slock_owned { ... };`
#     member (an -fms-extensions anonymous struct) is not generated; the union shrinks from 72 to 8
#     bytes and every struct sock field after sk_lock is 64 bytes early in Rust.
# Rust code must never reach a field of these through bindings (a pointer to them is fine); C
# helpers read or write such fields. Any other difference fails the check, and so does a field
# access to a known one from rust/kernel/{rdma,net} (a grep, below).
#
# Usage: scripts/bindgen-layout.sh [BUILD_DIR]   (default: the cache's test kernel build)
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${METAROCE_CACHE:-$HOME/.cache/metaroce}/build/test}
cmdfile=$build/rust/bindings/.bindings_generated.rs.cmd
[ -f "$cmdfile" ] || { echo "no bindgen command in $build (is the kernel built?)"; exit 1; }
KNOWN_DIFF="sched_statistics task_struct socket_lock_t__bindgen_ty_1 socket_lock_t sock"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

names=$(grep -rhoE 'bindings::[a-z_][A-Za-z0-9_]*' "$repo/rust/kernel/rdma" "$repo/rust/kernel/net" \
        | sed 's/^bindings:://' | sort -u)
[ -n "$names" ] || { echo "no bindings:: names found under rust/kernel/{rdma,net}"; exit 1; }
allow=$(paste -sd'|' <<<"$names")
cmd=$(sed -n 's|^savedcmd_rust/bindings/bindings_generated.rs := ||p' "$cmdfile")
cmd=${cmd%%; sed -Ei*}                                   # the kernel's post-processing of its own file
cmd=$(sed -E 's/ -Wp,-MMD,[^ ]+//; s/\$\(pound\)/#/g' <<<"$cmd")
[[ $cmd == *" --no-layout-tests "* && $cmd == *" -o rust/bindings/bindings_generated.rs "* ]] \
  || { echo "unexpected bindgen command in $cmdfile"; exit 1; }
cmd=${cmd/ --no-layout-tests / --allowlist-type \'($allow)\' }
cmd=${cmd/ -o rust\/bindings\/bindings_generated.rs / -o $work\/gen.rs }
(cd "$build" && eval "$cmd") >"$work/bindgen.log" 2>&1 || { tail -20 "$work/bindgen.log"; exit 1; }

# Compile on the host: the kernel's pin-init derive and CFI attributes dropped (layout unchanged),
# the ffi crate and the types the kernel's command blocklists defined as the kernel defines them.
sed -E '/^#\[derive\(MaybeZeroable\)\]$/d; s/, MaybeZeroable//; s/MaybeZeroable, //; /cfi_encoding/d' \
  "$work/gen.rs" >"$work/gen2.rs"
cat >"$work/lib.rs" <<EOF
#![no_std]
#![allow(warnings)]
pub mod ffi {
    pub type c_char = i8; pub type c_schar = i8; pub type c_uchar = u8;
    pub type c_short = i16; pub type c_ushort = u16; pub type c_int = i32; pub type c_uint = u32;
    pub type c_long = isize; pub type c_ulong = usize; pub type c_longlong = i64;
    pub type c_ulonglong = u64; pub use core::ffi::c_void;
}
pub type __kernel_size_t = usize;
pub type __kernel_ssize_t = isize;
pub type __kernel_ptrdiff_t = isize;
include!("gen2.rs");
EOF
rustc --edition 2021 --crate-type lib --target x86_64-unknown-linux-gnu --emit=metadata \
  -o "$work/lib.rmeta" "$work/lib.rs" >"$work/rustc.log" 2>&1
# Every failed assertion: "error[E0080]" then "--> FILE:LINE"; the assertion's label ("Size of T",
# "Alignment of T", "Offset of field: T::f") is on that line or just before it.
bad=$(awk '/^error\[E0080\]/ { e = 1; next } e && /-->/ { split($2, a, ":"); print a[2]; e = 0 }' "$work/rustc.log" \
      | while read -r line; do
          sed -n "$((line > 2 ? line - 2 : 1)),${line}p" "$work/gen2.rs" | grep -oE '\["[^"]+"\]' | tail -1
        done | sed -E 's/^\["//; s/"\]$//' | sort -u)
other=$(grep -E '^error' "$work/rustc.log" | grep -vE '^error\[E0080\]|^error: aborting' | sort -u)
[ -z "$other" ] || { echo "the layout tests did not compile:"; echo "$other"; exit 1; }
echo "$(wc -l <<<"$names") names allowed, $(grep -c '^pub struct\|^pub union' "$work/gen2.rs") types generated, $(grep -c '\["' "$work/gen2.rs") layout assertions"
fail=0
while read -r what; do
  [ -n "$what" ] || continue
  ty=${what#Size of }; ty=${ty#Alignment of }; ty=${ty#Offset of field: }; ty=${ty%%::*}
  if grep -qw -- "$ty" <<<"$KNOWN_DIFF"; then echo "known: $what"; else echo "DIFFERS: $what"; fail=1; fi
done <<<"$bad"
# The known ones are harmless only while no Rust code of ours reaches into them by field: a
# struct sock field (sk_*, __sk_common; `(*socket).sk` is struct socket's and fine) or task_struct.
if grep -rnE '\)\.(sk_[a-z_]+|__sk_common)\b|bindings::task_struct\b' "$repo/rust/kernel/rdma" "$repo/rust/kernel/net"; then
  echo "the line(s) above reach a field of a type whose Rust layout differs from C's"; fail=1
fi
exit $fail
