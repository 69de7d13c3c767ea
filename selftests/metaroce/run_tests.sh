#!/bin/bash
# kselftest-style runner, run inside a test guest: executes every test of one suite in order and
# prints TAP 13. A test exits 0 (pass), 4 (skip, kselftest's KSFT_SKIP) or anything else (fail);
# its output is shown as TAP diagnostics.
# Usage: run_tests.sh SUITE [FIRST-LAST]   (pair suites read MR_ROLE=a|b from the environment)
# FIRST-LAST: only the tests whose number prefix lies in that range (e.g. 10-55), so that one
# suite can be shared between guests that run side by side.
set -o pipefail
here=$(cd "$(dirname "$0")" && pwd)
export MR_SELFTESTS=$here
suite=${1:?usage: run_tests.sh SUITE [FIRST-LAST]}
range=${2:-0-99}
. "$here/lib.sh"
tests=()
for t in "$here/$suite"/*.sh; do
  n=$(basename "$t"); n=$((10#${n%%-*}))
  [ "$n" -ge "${range%-*}" ] && [ "$n" -le "${range#*-}" ] && tests+=("$t")
done
# A kernel with kmemleak (the test kernel) ends the suite with one scan: any unreferenced object
# whose allocation involves RDMA or Rust code fails it (kmemleak's console line only counts them).
leaks=0; [ -w /sys/kernel/debug/kmemleak ] && leaks=1
echo "TAP version 13"
echo "1..$(( ${#tests[@]} + leaks ))"
i=0 failed=0
for t in "${tests[@]}"; do
  i=$((i + 1)); name="$suite/$(basename "$t" .sh)"
  if [ -n "${MR_ROLE:-}" ] && ! mr_barrier "start-$name" 2>&1 | sed 's/^/# /'; then
    echo "not ok $i $name # the peer guest never reached this test"; failed=$((failed + 1)); continue
  fi
  log=$(mktemp); start=$(date +%s)
  # 900 s per test (2400 s in make check-full): 41-mad took 408 s and interop/40-perftest 460 s
  # under TCG+KASAN on a loaded host (user-space start-up dominates); the guest's own timeout
  # bounds the suite.
  # MR_TRACE=1 (a development aid): every command traced with the test's elapsed seconds and its
  # file:line, to find where a test spends its time (bash takes no PS4 from the environment as root).
  to=${MR_TEST_TIMEOUT:-$([ -n "${MR_FULL:-}" ] && echo 2400 || echo 900)}
  if [ -n "${MR_TRACE:-}" ]; then
    timeout -k 5 "$to" bash -c 'PS4="+\${SECONDS}s \${BASH_SOURCE##*/}:\${LINENO} "; set -x; . "$1"' _ "$t" >"$log" 2>&1
  else timeout -k 5 "$to" bash "$t" >"$log" 2>&1; fi; rc=$?
  sed 's/^/# /' "$log"; why=$(sed -n 's/^SKIP: //p' "$log" | tail -n 1); rm -f "$log"
  dur="$(( $(date +%s) - start ))s"
  case $rc in
    0) echo "ok $i $name # $dur";;
    4) echo "ok $i $name # SKIP ${why:-}";;
    124) echo "not ok $i $name # timed out after $dur"; failed=$((failed + 1));;
    *) echo "not ok $i $name # exit $rc after $dur"; failed=$((failed + 1));;
  esac
done
if [ "$leaks" = 1 ]; then
  i=$((i + 1)); start=$(date +%s)
  # Twice: the first scan only ages objects freed moments ago (kmemleak reports an object once it
  # was seen unreferenced for 5 s).
  echo scan >/sys/kernel/debug/kmemleak; sleep 6; echo scan >/sys/kernel/debug/kmemleak
  ours=$(awk '/^unreferenced object/ { n++ } { blk[n] = blk[n] "\n" $0 }
              END { for (k = 1; k <= n; k++) if (blk[k] ~ /ib_|rdma|uverbs|metaroce|_RN/) print blk[k] }' \
         /sys/kernel/debug/kmemleak)
  all=$(grep -c '^unreferenced object' /sys/kernel/debug/kmemleak)
  if [ -z "$ours" ]; then
    # (Worded so that the console scan, which looks for kmemleak's own report line, does not match.)
    echo "ok $i $suite/kmemleak # $(( $(date +%s) - start ))s, $all leak report(s), none from RDMA/Rust code"
  else
    echo "$ours" | head -80 | sed 's/^/# /'
    echo "not ok $i $suite/kmemleak # $(echo "$ours" | grep -c '^unreferenced object') leak(s) from RDMA/Rust code"
    failed=$((failed + 1))
  fi
fi
[ "$failed" = 0 ]
