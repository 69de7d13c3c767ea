#!/usr/bin/env bash
# Lint checks of make check (issue 37): prints one "ok NAME" or "not-ok NAME" line per check,
# with the findings indented below a failing one. Needs the kernel source unpacked with the
# overlay applied (scripts/kernel.sh test does both).
#   cargo-fmt      cargo fmt --check (host crates: protocol core, simulators)
#   cargo-clippy   cargo clippy --all-targets -D warnings (host crates)
#   rustfmtcheck   the kernel's `make rustfmtcheck` over the tree with the overlay (the kernel's
#                  .rustfmt.toml; every Rust file of the tree, ours among them)
#   checkpatch     scripts/checkpatch.pl --strict on our C files and headers. Ignored:
#                  EXPORT_SYMBOL in metaroce_trace.c (it exports the Rust tracepoint wrappers
#                  that the tracepoint header defines, so no function precedes the exports).
#   rustdoc        the kernel's `make rustdoc` (the kernel crate with our abstractions) in the test
#                  kernel's build directory: fails on any warning (a broken or private intra-doc
#                  link, a malformed doc comment). Needs the test kernel built (make check builds it
#                  first).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/scripts/versions.env"
export PATH="$HOME/.cargo/bin:$PATH"
src=${METAROCE_CACHE:-$HOME/.cache/metaroce}/src/linux-$KERNEL_SRC_VERSION
out=$(mktemp); trap 'rm -f "$out"' EXIT
check() { # NAME COMMAND...
  local name=$1; shift
  if "$@" >"$out" 2>&1; then echo "ok $name"; else echo "not-ok $name"; sed 's/^/    /' "$out" | tail -40; fi
}
cd "$repo"
check cargo-fmt cargo fmt --check
check cargo-clippy cargo clippy --workspace --all-targets --locked -q -- -D warnings
check rustfmtcheck make -s -C "$src" LLVM="$LLVM_SUFFIX" rustfmtcheck
cp_one() {
  local f ign bad=0
  for f in rust/helpers/metaroce.c rust/bindings/metaroce_helper.h include/trace/events/metaroce.h \
           drivers/infiniband/sw/metaroce/metaroce_trace.c; do
    ign=; [ "${f##*/}" = metaroce_trace.c ] && ign=--ignore=EXPORT_SYMBOL
    perl "$src/scripts/checkpatch.pl" --strict --no-tree -q --show-types $ign -f "$f" || bad=1
  done
  return $bad
}
check checkpatch cp_one
rustdoc_clean() {
  local log rc
  log=$(make -s -C "$src" O="${METAROCE_CACHE:-$HOME/.cache/metaroce}/build/test" LLVM="$LLVM_SUFFIX" rustdoc 2>&1); rc=$?
  if [ $rc != 0 ] || grep -q '^warning' <<<"$log"; then echo "$log" | grep -A6 '^\(warning\|error\)'; return 1; fi
}
check rustdoc rustdoc_clean
