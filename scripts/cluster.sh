#!/usr/bin/env bash
# `make cluster` (README, "MPI and UCX"): the cluster shape. CLUSTER_NODES (default 4) guests of
# the release kernel, one vCPU and one MetaRoCE device each, on one vde_switch segment that exists
# only on this machine, run the kselftest collection cluster: Open MPI jobs across all of them
# (allreduce, alltoall, bcast 8 B - CLUSTER_MAX bytes and a barrier loop, every result checked) in
# RoCEv2 mode, over TCP and in native mode, then native and TCP again with 1 % of one guest's packets
# lost (CLUSTER_MODES picks some of roce, tcp, native, native-loss, tcp-loss). Results:
# out/cluster/clu-1/mpi-MODE.txt
# and the summary printed at the end. Then (CLUSTER_RXE=0 leaves it out) the same shape on the baseline
# kernel with rdma_rxe. scripts/cluster_report.py writes out/cluster/results.{md,json} and, with
# matplotlib (make bench-deps), allreduce.png. Exit status 0 when every job passed and every console
# is clean.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
OUT=${METAROCE_OUT:-$repo/out}/cluster
. "$repo/scripts/guests.sh"
export PATH="$HOME/.cargo/bin:$PATH"
nodes=${CLUSTER_NODES:-4}
[ "$nodes" -ge 2 ] && [ "$nodes" -le 16 ] || { echo "cluster: CLUSTER_NODES is 2-16, not $nodes" >&2; exit 2; }
"$repo/scripts/deps.sh" | tail -1
mkdir -p "$OUT"; rm -rf "$OUT"/clu-* "$OUT"/rxe-* "$OUT/ksft" "$OUT"/results.*
echo "== release kernel"
"$repo/scripts/kernel.sh" release >"$OUT/kernel-release.log" 2>&1 || { tail -30 "$OUT/kernel-release.log"; exit 1; }
echo "== $nodes guests on one segment, MetaRoCE (started $(date -u +%H:%M:%S))"
t0=$(date +%s)
MR_GUEST_ENV="MR_MPI_MAX=${CLUSTER_MAX:-4194304} MR_MPI_MODES='${CLUSTER_MODES:-roce tcp native native-loss tcp-loss}'" run_cluster release "$nodes" clu cluster; rc=$?
echo "== finished after $(( $(date +%s) - t0 )) s"
cat "$OUT/clu-1/output.log" 2>/dev/null
shapes=clu
# The same shape with rdma_rxe (the baseline kernel: the same source, rdma_rxe built in).
if [ "${CLUSTER_RXE:-1}" != 0 ]; then
  echo "== baseline kernel (rdma_rxe)"
  "$repo/scripts/kernel.sh" baseline >"$OUT/kernel-baseline.log" 2>&1 || { tail -30 "$OUT/kernel-baseline.log"; exit 1; }
  echo "== $nodes guests on one segment, rdma_rxe (started $(date -u +%H:%M:%S))"
  t0=$(date +%s)
  MR_GUEST_ENV="MR_MPI_MAX=${CLUSTER_MAX:-4194304}" run_cluster baseline "$nodes" rxe cluster || rc=1
  echo "== finished after $(( $(date +%s) - t0 )) s"
  cat "$OUT/rxe-1/output.log" 2>/dev/null
  shapes+=" rxe"
fi
for s in $shapes; do
  for ((i = 1; i <= nodes; i++)); do
    bugs=$(console_bugs "$OUT/$s-$i/console.log")
    [ -z "$bugs" ] || { echo "$s-$i console:"; echo "$bugs" | head -10; rc=1; }
    grep -q '^ok ' "$OUT/$s-$i/output.log" 2>/dev/null || { echo "$s-$i: the test did not pass"; rc=1; }
  done
done
/usr/bin/python3 "$repo/scripts/cluster_report.py" "$OUT" $shapes || rc=1
[ $rc = 0 ] && echo "cluster: passed" || echo "cluster: FAILED"
exit $rc
