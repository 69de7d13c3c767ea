#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Open MPI 4.1 (Debian's, unmodified) across the cluster shape's MR_NODES guests, one rank per
# guest: mpi_coll runs allreduce, alltoall and bcast from 8 B to MR_MPI_MAX bytes (default 4 MiB)
# and a barrier loop, then concurrent flows between every pair of ranks (their fairness), every
# element of every result checked, over
#   - roce:   pml ucx on MetaRoCE devices in RoCEv2 mode (UCX rc_verbs, ud_verbs for set-up),
#   - tcp:    pml ob1 with Open MPI's tcp btl (the baseline on the same segment),
#   - native: pml ucx on metaroce-native devices (RC over the native transport),
#   - native-loss, tcp-loss: native and tcp again with 1 % of node 2's packets lost (netem on its
#             eth0 egress: one guest's link),
# in that order (MR_MPI_MODES picks some); on a kernel without MetaRoCE (the baseline kernel, the
# same source with rdma_rxe built in) the one mode is
#   - rxe:    pml ucx on rdma_rxe devices, with UCX_UD_ETH_DGID_CHECK=n: rdma_rxe reports sl 0 in
#             UD completions, and UCX's UD transport then drops every packet (pair/70-ucx).
# Nodes 2..N serve node_agent.py, Open MPI's remote launcher (the guests have no
# ssh), which node 1 also uses to switch every node's device to native mode. Expected: every job
# ends with "every result checked" and exit 0; in native mode the data left as native DATA.
# Each job's report is left in /tmp/out/mpi-MODE.txt (node 1) for scripts/cluster.sh.
. "$(dirname "$0")/../lib.sh"
command -v mpirun >/dev/null || skip "Open MPI not installed (Debian's openmpi-bin)"
[ -n "${MR_NODES:-}" ] || skip "not in the cluster shape (MR_NODES unset)"
agent="$MR_SELFTESTS/node_agent.py"
node=${MR_ROLE#n}
mr_rdma_dev || fail "RDMA device"
if [ "$node" != 1 ]; then
  # Served until node 1 stops this node (or the suite's timeout ends the guest).
  python3 -S "$agent" serve "$(mr_self)" || fail "node_agent on node $node"
  mr_dmesg_clean
  exit 0
fi
stop_all() { for ((i = 2; i <= MR_NODES; i++)); do python3 -S "$agent" stop "192.0.2.$i" >/dev/null 2>&1; done; }
trap stop_all EXIT
stat() { rdma statistic show link "$1/1" | tr ' ' '\n' | awk -v n="$2" 'p { print; exit } $0 == n { p = 1 }'; }
for ((i = 2; i <= MR_NODES; i++)); do
  python3 -S "$agent" wait "192.0.2.$i" 300 || fail "node $i never served"
done
hosts=$(seq -s, -f '192.0.2.%g' 1 "$MR_NODES")
max=${MR_MPI_MAX:-4194304}
failed=0
mpi() { # MODE DEV
  local mode=$1 dev=$2 rc t0
  t0=$(date +%s)
  mr_mpirun "$hosts" "$dev" "$MR_SELFTESTS/cluster/mpi_coll" "$max" \
    >/tmp/out/mpi-$mode.txt 2>&1
  rc=$?
  echo "== $mode: exit $rc after $(( $(date +%s) - t0 )) s"
  grep -E '^(allreduce|alltoall|bcast|flows|barrier|[0-9]+ ranks)' /tmp/out/mpi-$mode.txt
  if [ $rc != 0 ] || ! grep -q "^$MR_NODES ranks: every result checked" /tmp/out/mpi-$mode.txt; then
    grep -vE '^(allreduce|alltoall|bcast|flows|barrier)' /tmp/out/mpi-$mode.txt | tail -n 25
    echo "FAILED $mode"; failed=1
  fi
}
# Every node's non-zero device counters and eth0's packet counts (through the agents), after a job.
counters() {
  local show="rdma statistic show link $1/1 | tr ' ' '\\n' | awk 'NF' | paste - - | awk '\$1 != \"link\" && \$2 != 0 { printf \"%s %s \", \$1, \$2 }'"
  show+="; cd /sys/class/net/eth0/statistics && echo eth0 rx_packets \$(cat rx_packets) rx_dropped \$(cat rx_dropped) tx_packets \$(cat tx_packets)"
  echo "node 1: $(sh -c "$show")"
  for ((i = 2; i <= MR_NODES; i++)); do echo "node $i: $(python3 -S "$agent" "192.0.2.$i" "$show")"; done
}
# Every node to native mode (node 1 too), through the agents.
to_native() {
  local switch='rdma link delete mr0 && rdma link add mn0 type metaroce-native netdev eth0 &&
    for i in $(seq 100); do ibv_devinfo -d mn0 | grep -q PORT_ACTIVE && exit 0; sleep 0.1; done; exit 1'
  for ((i = 2; i <= MR_NODES; i++)); do
    python3 -S "$agent" "192.0.2.$i" "$switch" || fail "node $i: no native device"
  done
  sh -c "$switch" || fail "node 1: no native device"
}
# 1 % loss on node 2's egress (netem) while the jobs of the modes named *-loss run.
lossy() { # add | del
  local cmd="tc qdisc replace dev eth0 root netem loss 1%"
  [ "$1" = add ] || cmd="tc qdisc del dev eth0 root"
  python3 -S "$agent" "192.0.2.2" "$cmd" || fail "node 2: $cmd"
}
modes=${MR_MPI_MODES:-roce tcp native native-loss tcp-loss}
mr_our_kernel || modes=rxe
for mode in $modes; do
  case $mode in
    roce) mpi roce mr0; counters mr0;;
    rxe) mpi rxe rxe0; counters rxe0;;
    tcp) mpi tcp tcp;;
    native)
      to_native
      data0=$(stat mn0 native_data_sent)
      mpi native mn0; counters mn0
      data=$(( $(stat mn0 native_data_sent) - data0 ))
      [ "$data" -ge 1000 ] || { echo "FAILED native: only $data native DATA packets from node 1"; failed=1; };;
    native-loss)
      [ -e /sys/class/infiniband/mn0 ] || to_native
      lossy add; mpi native-loss mn0; counters mn0; lossy del;;
    tcp-loss) lossy add; mpi tcp-loss tcp; lossy del;;
    *) fail "MR_MPI_MODES: roce, tcp, native, native-loss, tcp-loss or rxe, not $mode";;
  esac
done
mr_dmesg_clean
[ $failed = 0 ] || fail "some jobs failed (see above)"
