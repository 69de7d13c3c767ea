#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Run after a suite (the guests run it last): a kernel with kmemleak (the test kernel) scans for
# unreferenced objects, and any whose allocation involves RDMA or Rust code fails the test.
# kmemleak's own console line only counts leaks, so the reports are read here. Skips on a kernel
# without kmemleak (the release kernel, Debian's).
. "$(dirname "$0")/../lib.sh"
grep -qw kmemleak=off /proc/cmdline &&
  skip "kmemleak=off on this guest's command line (make check: kmemleak costs ~2.5x per process under TCG, so only the guest of the lifecycle and teardown tests keeps it; check-full keeps it in every test-kernel guest)"
[ -w /sys/kernel/debug/kmemleak ] || skip "no kmemleak in this kernel"
# Twice: the first scan only ages objects freed moments ago (kmemleak reports an object once it
# was seen unreferenced for 5 s).
echo scan >/sys/kernel/debug/kmemleak; sleep 6; echo scan >/sys/kernel/debug/kmemleak
ours=$(awk '/^unreferenced object/ { n++ } { blk[n] = blk[n] "\n" $0 }
            END { for (k = 1; k <= n; k++) if (blk[k] ~ /ib_|rdma|uverbs|metaroce|_RN/) print blk[k] }' \
       /sys/kernel/debug/kmemleak)
all=$(grep -c '^unreferenced object' /sys/kernel/debug/kmemleak)
# (Worded so that the console scan, which looks for kmemleak's own report line, does not match.)
[ -z "$ours" ] || { echo "$ours" | head -80
                    fail "$(echo "$ours" | grep -c '^unreferenced object') leak(s) from RDMA/Rust code"; }
echo "$all leak report(s), none from RDMA/Rust code"
