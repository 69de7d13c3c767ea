#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Hostile user space (hostile_user.py): a process that writes malformed WQEs into its own rings,
# scribbles over their indices and headers (also from a racing thread and a racing process),
# destroys MRs, windows, QPs and its context while 1 MiB transfers are in flight, and exhausts
# every object type up to the limits query_device reports. Each case runs in a child process,
# which may be hurt (error completions, its QP in error, errnos, at worst a signal inside the provider
# for a scribbled header); the kernel must not be. Afterwards: no object of the test is left in
# `rdma res`, the device still carries an RC pingpong and a perftest to mrb0 with verified
# buffers, and the console is free of sanitizer and WARN reports.
# Run time (test kernel, TCG, 2026-12-01): about 8 min for the script, 5 of them exhausting the
# object limits (65534 PDs alone take a minute). make check exhausts contexts and memory windows
# only (4080 QPs take 70 s) and leaves out b3 (CQ consumer moved, 22 s) and b5 (a racing process;
# b4 races a thread); check-full runs every case and every object type. MR_HOSTILE_CASES="a b" (case-name prefixes) runs a
# subset.
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
mr_two_devices
echo "GID index: mra0 $ga, mrb0 $gb"

# Objects of each kind on mra0 (the kernel's own: the MAD layer's PD, CQ and QP1).
res_counts() {
  local k out=
  for k in pd cq qp mr srq ctx cm_id; do
    out+="$k $(ip netns exec mra rdma res show $k 2>/dev/null | grep -c "mra0" || true) "
  done
  echo "$out"
}
before=$(res_counts)
echo "rdma res before: $before"

t0=$(date +%s)
cases=${MR_HOSTILE_CASES:-$([ -n "${MR_FULL:-}" ] || echo "a b1 b2 b4 b6 c d1 d2 d6 z")}
ip netns exec mra timeout -k 10 1200 /usr/bin/python3 "$MR_SELFTESTS/hostile_user.py" mra0 "$ga" $cases; rc=$?
echo "hostile_user.py: exit $rc, $(( $(date +%s) - t0 )) s"

# Everything of the test's processes is gone once they have exited (ib_uverbs tears down at
# file release; give a slow guest a moment).
mr_wait 30 test "$(res_counts)" = "$before"
after=$(res_counts)
echo "rdma res after:  $after"
if [ "$after" != "$before" ]; then
  ip netns exec mra rdma res show
  fail "objects left on mra0 after the test: before [$before], after [$after]"
fi

mr_pingpong ibv_rc_pingpong "rc_pingpong afterwards, 64 KiB" mra mra0 $ga mrb mrb0 $gb -s 65536 -n 20
mr_perf "write_bw afterwards, 64 KiB x 20" ib_write_bw -s 65536 -n 20 -F
mr_dmesg_clean
[ "$rc" = 0 ] || fail "hostile_user.py: some cases did not behave as expected (see above)"
