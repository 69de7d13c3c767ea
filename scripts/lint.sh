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
#   kselftest      every suite of the guest selftests is a kselftest collection whose Makefile
#                  lists each of its test scripts in TEST_PROGS (a script left out would never run)
#                  and whose scripts are executable
#   clippy         only with LINT_ONLY=clippy (make check-full runs it after the guests): the test
#                  kernel's build directory rebuilt with `make CLIPPY=1 vmlinux modules`, every Rust
#                  object compiled again through clippy-driver (~6 min); fails on any clippy or
#                  rustc warning in our Rust (rust/kernel/{rdma,net}, the driver and its protocol
#                  core); warnings in the rest of the kernel's Rust are counted, not failed. (The
#                  next plain build compiles the Rust objects once more; bzImage and the installed
#                  modules the guests use are not touched.)
#   rustdoc        the kernel's `make rustdoc` (the kernel crate with our abstractions) in the test
#                  kernel's build directory: fails on any warning (a broken or private intra-doc
#                  link, a malformed doc comment). Needs the test kernel built (make check builds it
#                  first).
#   bindgen-layout the Rust layout bindgen generated for every C type our abstractions name (and
#                  the types inside them) against clang's (scripts/bindgen-layout.sh: the test
#                  kernel's bindgen command with layout tests, compiled by rustc; ~15 s). Fails on
#                  any difference but the known ones that script lists, which no Rust code of ours
#                  may reach into by field.
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
clippy_clean() {
  local build=${METAROCE_CACHE:-$HOME/.cache/metaroce}/build/test log ours
  [ -f "$build/vmlinux" ] || { echo "the test kernel is not built"; return 1; }
  log=$(mktemp)
  make -s -C "$src" O="$build" LLVM="$LLVM_SUFFIX" CLIPPY=1 -j"$(nproc)" vmlinux modules >"$log" 2>&1 \
    || { tail -30 "$log"; rm -f "$log"; return 1; }
  # One block per diagnostic: its first line, then "--> FILE:LINE:COL".
  ours=$(awk '/^(warning|error)/ { head = $0 } /^ *--> / && head != "" { print $2 ": " head; head = "" }' "$log" \
         | sed "s|^$src/||" | grep -E '^(rust/kernel/(rdma|net)/|drivers/infiniband/sw/metaroce/)' | sort -u)
  echo "$(grep -cE '^(warning|error)' "$log") diagnostic line(s) in the whole build"
  rm -f "$log"
  [ -z "$ours" ] || { echo "$ours"; return 1; }
}
cd "$repo"
if [ "${LINT_ONLY:-}" = clippy ]; then check clippy clippy_clean; exit 0; fi
check cargo-fmt cargo fmt --check
check cargo-clippy cargo clippy --workspace --all-targets --locked -q -- -D warnings
check rustfmtcheck make -s -C "$src" LLVM="$LLVM_SUFFIX" rustfmtcheck
cp_one() {
  local f ign bad=0
  for f in rust/helpers/metaroce.c rust/bindings/metaroce_helper.h include/trace/events/metaroce.h \
           include/uapi/rdma/metaroce-abi.h drivers/infiniband/sw/metaroce/metaroce_trace.c; do
    ign=; [ "${f##*/}" = metaroce_trace.c ] && ign=--ignore=EXPORT_SYMBOL
    perl "$src/scripts/checkpatch.pl" --strict --no-tree -q --show-types $ign -f "$f" || bad=1
  done
  return $bad
}
check checkpatch cp_one
ksft_lists() {
  local d f bad=0 listed
  for d in tools/testing/selftests/drivers/infiniband/metaroce/*/; do
    [ "$(basename "$d")" = fixtures ] && continue   # data (packet captures), not a collection
    [ -f "$d/Makefile" ] || { echo "$d: no Makefile"; bad=1; continue; }
    listed=$(sed -n '/^TEST_PROGS :=/,/^$/p' "$d/Makefile" | tr -d '\\' | tr -s ' \t' '\n' | grep '\.sh$' | sort)
    for f in "$d"*.sh; do
      grep -qxF "$(basename "$f")" <<<"$listed" || { echo "$f: not in TEST_PROGS"; bad=1; }
      [ -x "$f" ] || { echo "$f: not executable"; bad=1; }
    done
    for f in $listed; do [ -e "$d$f" ] || { echo "$d$f: listed but missing"; bad=1; }; done
  done
  return $bad
}
check kselftest ksft_lists
rustdoc_clean() {
  local log rc
  log=$(make -s -C "$src" O="${METAROCE_CACHE:-$HOME/.cache/metaroce}/build/test" LLVM="$LLVM_SUFFIX" rustdoc 2>&1); rc=$?
  if [ $rc != 0 ] || grep -q '^warning' <<<"$log"; then echo "$log" | grep -A6 '^\(warning\|error\)'; return 1; fi
}
check rustdoc rustdoc_clean
check bindgen-layout "$repo/scripts/bindgen-layout.sh"
