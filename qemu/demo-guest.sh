# Runs inside each of the two demo guests (release kernel), MR_ROLE a (server) or b (client),
# joined by a QEMU socket link: MetaRoCE devices on eth0, then real RDMA traffic between them
# through Debian's unmodified rdma-core tools, and the port counters that show it. Last, the
# same WRITEs under the same loss in both transports, RoCEv2 (go-back-N) and MetaRoCE's native
# one (sprayed paths, SACK, selective retransmission), side by side. Then Open MPI collectives
# (mpi_coll, built by scripts/demo.sh) across both guests over the native devices.
set -u
. "$MR_SELFTESTS/lib.sh"
mr_link_up
say() { echo "== $*"; }
say "kernel $(uname -r), role $MR_ROLE ($(mr_self)); rdma_rxe absent, MetaRoCE present:"
grep -E 'CONFIG_(RDMA_RXE|RDMA_METAROCE|RUST_RDMA)[= ]' <(zcat /proc/config.gz)
say "rdma link add mr0 type metaroce netdev eth0"
mr_rdma_dev || { echo "no MetaRoCE device"; exit 1; }
rdma link show mr0/1
ibv_devinfo -d mr0 | grep -E 'hca_id|transport|fw_ver|state|active_mtu|link_layer'
echo "RoCE v2 GID index $MR_GID: $(cat /sys/class/infiniband/mr0/ports/1/gids/$MR_GID)"
rc=0
show() { # NAME TOOL ARGS...: runs one tool in both guests (server a, client b), shows the client's lines
  local name=$1; shift
  say "$name"
  if mr_pair_run "demo-$name" a "$@"; then
    grep -E "$SHOW" <<<"$MR_OUT" | sed 's/^ *//'
  else
    echo "$MR_OUT"; echo "FAILED: $name"; rc=1
  fi
}
SHOW='bytes in|iters in|^ *#bytes|^ *[0-9]+ +[0-9]+ +'
ctr() { rdma statistic show link "$1/1" | tr ' ' '\n' | awk -v n="$2" 'p { print; exit } $0 == n { p = 1 }'; }
bw() { awk '$1 == 65536 && NF >= 4 { v = $4 } END { print v == "" ? "n/a" : v }' <<<"$MR_OUT"; }
LOSS=2%
show "ibv_rc_pingpong: 64 KiB x 100 SEND/RECV, every buffer validated" 18515 ibv_rc_pingpong -d mr0 -g "$MR_GID" -c -s 65536 -n 100
show "ib_write_bw: 64 KiB RDMA WRITEs x 2000" 18516 ib_write_bw -d mr0 -x "$MR_GID" -s 65536 -n 2000 -F --report_gbits
rbw0=$(bw)
show "ib_read_bw: 64 KiB RDMA READs x 2000" 18517 ib_read_bw -d mr0 -x "$MR_GID" -s 65536 -n 2000 -F --report_gbits
show "ib_atomic_bw: FETCH_AND_ADD x 2000" 18518 ib_atomic_bw -d mr0 -x "$MR_GID" -A FETCH_AND_ADD -n 2000 -F
show "ib_send_lat: 64 B x 1000" 18519 ib_send_lat -d mr0 -x "$MR_GID" -s 64 -n 1000 -F
say "the same WRITEs with netem dropping $LOSS of the packets each guest sends: the transport recovers"
tc qdisc add dev eth0 root netem loss $LOSS
r0=($(ctr mr0 sent_pkts) $(ctr mr0 retransmits))
show "ib_write_bw under $LOSS loss: 64 KiB x 500" 18520 ib_write_bw -d mr0 -x "$MR_GID" -s 65536 -n 500 -F --report_gbits
rbw=$(bw) r1=($(ctr mr0 sent_pkts) $(ctr mr0 retransmits))
tc -s qdisc show dev eth0 | grep -E 'dropped' | sed 's/^ */netem: /'
tc qdisc del dev eth0 root
say "port counters of mr0 (rdma statistic show link mr0/1)"
rdma statistic show link mr0/1 | tr ' ' '\n' | sed -n '3,$p' | paste - - | column -t | grep -vE '\s0$'
echo "(counters not shown are 0)"

say "the same WRITEs in MetaRoCE's native transport: rdma link add mn0 type metaroce-native netdev eth0"
rdma link delete mr0 && rdma link add mn0 type metaroce-native netdev eth0 || { echo "FAILED: native device"; rc=1; }
for ((i = 0; i < 100; i++)); do
  NGID=$(mr_gid_index mn0 "$(mr_self)")
  [ -n "$NGID" ] && ibv_devinfo -d mn0 | grep -q PORT_ACTIVE && break
  sleep 0.1
done
show "native ib_write_bw, no loss: 64 KiB x 2000" 18521 ib_write_bw -d mn0 -x "$NGID" -s 65536 -n 2000 -F --report_gbits
nbw0=$(bw)
tc qdisc add dev eth0 root netem loss $LOSS
n0=($(ctr mn0 native_data_sent) $(ctr mn0 retransmits) $(ctr mn0 native_sack_losses) $(ctr mn0 native_timeouts))
show "native ib_write_bw under $LOSS loss: 64 KiB x 500" 18522 ib_write_bw -d mn0 -x "$NGID" -s 65536 -n 500 -F --report_gbits
nbw=$(bw) n1=($(ctr mn0 native_data_sent) $(ctr mn0 retransmits) $(ctr mn0 native_sack_losses) $(ctr mn0 native_timeouts))
tc -s qdisc show dev eth0 | grep -E 'dropped' | sed 's/^ */netem: /'
tc qdisc del dev eth0 root
# Paths of this guest's connection that carried DATA (debugfs: one line per path).
paths=$(grep -E '^ +path [0-9]+ ' /sys/kernel/debug/metaroce_mn0/connections 2>/dev/null | grep -cE 'sent: [1-9]')
if [ "$MR_ROLE" = b ]; then
  d() { echo $(( ${2:-0} - ${1:-0} )); }
  say "64 KiB WRITEs, one QP, this guest sending, netem dropping $LOSS each way (Gbit/s; ib_write_bw's average)"
  printf '  %-9s %9s %12s %14s %16s  %s\n' transport "no loss" "$LOSS loss" "packets sent" "retransmitted" "how"
  rsent=$(( $(d ${r0[0]} ${r1[0]}) - $(d ${r0[1]} ${r1[1]}) ))
  printf '  %-9s %9s %12s %14s %16s  %s\n' RoCEv2 "$rbw0" "$rbw" "$rsent" "$(d ${r0[1]} ${r1[1]})" \
    "go-back-N: a loss resends everything after it"
  printf '  %-9s %9s %12s %14s %16s  %s\n' native "$nbw0" "$nbw" "$(d ${n0[0]} ${n1[0]})" "$(d ${n0[1]} ${n1[1]})" \
    "selective: $(d ${n0[2]} ${n1[2]}) found lost by SACK gaps, $(d ${n0[3]} ${n1[3]}) RTOs; $paths paths used"
  echo "  (packets sent: for the first time, during the lossy run; retransmitted: sent again)"
fi
say "Open MPI over UCX on the native devices: collectives across both guests, every element checked"
if [ "$MR_ROLE" = a ]; then
  # Open MPI starts its rank here through the node agent (the guests have no ssh); b stops it.
  python3 -S "$MR_SELFTESTS/node_agent.py" serve "$(mr_self)" || { echo "FAILED: node agent"; rc=1; }
else
  if python3 -S "$MR_SELFTESTS/node_agent.py" wait "$(mr_peer)" 120 &&
     MR_MPI_TIMEOUT=300 mr_mpirun "$(mr_self),$(mr_peer)" mn0 /tmp/out/mpi_coll 1048576 >/tmp/mpi.out 2>&1 &&
     grep -q '^2 ranks: every result checked' /tmp/mpi.out; then
    grep -E '^(allreduce|alltoall|bcast) +1048576|^barrier|ranks:' /tmp/mpi.out | sed 's/^/  /'
  else
    tail -20 /tmp/mpi.out; echo "FAILED: MPI collectives"; rc=1
  fi
  python3 -S "$MR_SELFTESTS/node_agent.py" stop "$(mr_peer)" >/dev/null
fi
rdma link delete mn0
mr_barrier demo-end
exit $rc
