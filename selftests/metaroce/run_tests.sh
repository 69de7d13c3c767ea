#!/bin/bash
# kselftest-style runner, run inside a test guest: executes every test of one suite in order and
# prints TAP 13. A test exits 0 (pass), 4 (skip, kselftest's KSFT_SKIP) or anything else (fail);
# its output is shown as TAP diagnostics.
# Usage: run_tests.sh SUITE   (pair suites read MR_ROLE=a|b from the environment)
set -o pipefail
here=$(cd "$(dirname "$0")" && pwd)
export MR_SELFTESTS=$here
suite=${1:?usage: run_tests.sh SUITE}
. "$here/lib.sh"
tests=("$here/$suite"/*.sh)
echo "TAP version 13"
echo "1..${#tests[@]}"
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
  timeout -k 5 "${MR_TEST_TIMEOUT:-$([ -n "${MR_FULL:-}" ] && echo 2400 || echo 900)}" bash "$t" >"$log" 2>&1; rc=$?
  sed 's/^/# /' "$log"; why=$(sed -n 's/^SKIP: //p' "$log" | tail -n 1); rm -f "$log"
  dur="$(( $(date +%s) - start ))s"
  case $rc in
    0) echo "ok $i $name # $dur";;
    4) echo "ok $i $name # SKIP ${why:-}";;
    124) echo "not ok $i $name # timed out after $dur"; failed=$((failed + 1));;
    *) echo "not ok $i $name # exit $rc after $dur"; failed=$((failed + 1));;
  esac
done
[ "$failed" = 0 ]
