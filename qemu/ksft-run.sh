#!/bin/bash
# In a guest: runs one collection of the MetaRoCE kselftests (tools/testing/selftests/drivers/
# infiniband/metaroce/SUITE) with kselftest's own runner, from a kselftest install tree
# (scripts/guests.sh makes it on the host with `make -C tools/testing/selftests install`), then
# the kmemleak collection on a kernel with kmemleak. The runner's TAP goes to stdout with each
# result line shortened to SUITE/TEST and given its duration, or its skip reason (the test's last
# "SKIP: ..." line), which kselftest itself does not print.
# Usage: ksft-run.sh KSFT_INSTALL_DIR SUITE [FIRST-LAST]
#   FIRST-LAST: only the tests whose number prefix lies in that range (e.g. 10-55), so that one
#   suite can be shared between guests that run side by side; several ranges joined by commas
#   (10-34,57-57) select the tests of any of them.
# Per-test timeout: the collection's `settings` file (900 s), MR_TEST_TIMEOUT if set, else 2400 s
# under make check-full (MR_FULL).
set -o pipefail
ksft=${1:?usage: ksft-run.sh KSFT_INSTALL_DIR SUITE [FIRST-LAST]} suite=${2:?} range=${3:-0-99}
col=drivers/infiniband/metaroce/$suite
sel=()
while IFS=: read -r c t; do
  [ "$c" = "$col" ] || continue
  if [[ $t == [0-9][0-9]-* ]]; then
    n=$((10#${t%%-*})) in=
    for r in ${range//,/ }; do [ "$n" -ge "${r%-*}" ] && [ "$n" -le "${r#*-}" ] && in=1; done
    [ -n "$in" ] || continue
  fi
  sel+=(-t "$c:$t")
done <"$ksft/kselftest-list.txt"
[ "${#sel[@]}" -gt 0 ] || { echo "ksft-run: no test of $col in $range"; exit 1; }
to=${MR_TEST_TIMEOUT:-$([ -n "${MR_FULL:-}" ] && echo 2400)}

# Result lines get SUITE/TEST and " # Ns" (or the skip reason); the rest passes unchanged.
annotate() {
  local line t0=$SECONDS why= re='^(ok|not ok) ([0-9]+) selftests: drivers/infiniband/metaroce/([^:]+): ([^ ]+)\.sh( # (.*))?$'
  while IFS= read -r line; do
    case $line in
      "# selftests: "*) t0=$SECONDS why=;;
      "# SKIP: "*) why=${line#"# SKIP: "};;
    esac
    if [[ $line =~ $re ]]; then
      local st=${BASH_REMATCH[1]} n=${BASH_REMATCH[2]} name=${BASH_REMATCH[3]}/${BASH_REMATCH[4]} d=${BASH_REMATCH[6]}
      case $st:$d in
        ok:SKIP) line="ok $n $name # SKIP $why";;
        ok:*) line="ok $n $name # $((SECONDS - t0))s";;
        *) line="not ok $n $name # ${d:+$d }after $((SECONDS - t0))s";;
      esac
    fi
    printf '%s\n' "$line"
  done
}

"$ksft/run_kselftest.sh" "${sel[@]}" ${to:+-o "$to"} | annotate; rc=$?
# (A test kernel booted with kmemleak=off has no kmemleak file: the collection says so.)
if [ -w /sys/kernel/debug/kmemleak ] || grep -qw kmemleak=off /proc/cmdline; then
  "$ksft/run_kselftest.sh" -t drivers/infiniband/metaroce/kmemleak:kmemleak.sh | annotate || rc=1
fi
exit $rc
