#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# metaroce.ko loads and unloads cleanly, saying so in dmesg.
. "$(dirname "$0")/../lib.sh"
lsmod | grep -q '^metaroce ' && { rmmod metaroce || fail "rmmod of a preloaded metaroce"; }
# The test kernel checks the type of every indirect call (kCFI, configs/test.config), Rust's too:
# address-taken functions carry a __cfi_ preamble, Rust ones included (mangled names start _R).
if uname -r | grep -q -- '-mr-test$'; then
  # One read of /proc/kallsyms (about 150,000 lines: seconds under TCG).
  read -r c r < <(awk '$3 ~ /^__cfi_/ { c++; if ($3 ~ /^__cfi__R/) r++ } END { print c + 0, r + 0 }' /proc/kallsyms)
  [ "$c" -gt 0 ] && [ "$r" -gt 0 ] || fail "test kernel without kCFI preambles ($c, Rust $r)"
  echo "kCFI: $c functions with a type-check preamble, $r of them Rust; $(dmesg | grep -m1 -o 'CFI: Using.*' || echo 'boot line rotated out')"
fi
dmesg -c >/dev/null
modprobe metaroce || fail "modprobe metaroce"
lsmod | grep -q '^metaroce ' || fail "metaroce not in lsmod after modprobe"
dmesg | grep -q 'metaroce: loaded' || fail "no 'metaroce: loaded' line in dmesg"
modinfo metaroce | grep -E '^(filename|description|license|vermagic)'
rmmod metaroce || fail "rmmod metaroce"
lsmod | grep -q '^metaroce ' && fail "metaroce still loaded after rmmod"
dmesg | grep -q 'metaroce: unloaded' || fail "no 'metaroce: unloaded' line in dmesg"
dmesg | grep metaroce
