# Runs inside each of the two demo guests (release kernel), MR_ROLE a (server) or b (client),
# joined by a QEMU socket link: MetaRoCE devices on eth0, then real RDMA traffic between them
# through Debian's unmodified rdma-core tools, and the port counters that show it.
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
show "ibv_rc_pingpong: 64 KiB x 100 SEND/RECV, every buffer validated" 18515 ibv_rc_pingpong -d mr0 -g "$MR_GID" -c -s 65536 -n 100
show "ib_write_bw: 64 KiB RDMA WRITEs x 2000" 18516 ib_write_bw -d mr0 -x "$MR_GID" -s 65536 -n 2000 -F --report_gbits
show "ib_read_bw: 64 KiB RDMA READs x 2000" 18517 ib_read_bw -d mr0 -x "$MR_GID" -s 65536 -n 2000 -F --report_gbits
show "ib_atomic_bw: FETCH_AND_ADD x 2000" 18518 ib_atomic_bw -d mr0 -x "$MR_GID" -A FETCH_AND_ADD -n 2000 -F
show "ib_send_lat: 64 B x 1000" 18519 ib_send_lat -d mr0 -x "$MR_GID" -s 64 -n 1000 -F
say "the same WRITEs with netem dropping 2% of the packets each guest sends: the transport recovers"
tc qdisc add dev eth0 root netem loss 2%
show "ib_write_bw under 2% loss: 64 KiB x 500" 18520 ib_write_bw -d mr0 -x "$MR_GID" -s 65536 -n 500 -F --report_gbits
tc -s qdisc show dev eth0 | grep -E 'dropped' | sed 's/^ */netem: /'
tc qdisc del dev eth0 root
say "port counters of mr0 (rdma statistic show link mr0/1)"
rdma statistic show link mr0/1 | tr ' ' '\n' | sed -n '3,$p' | paste - - | column -t | grep -vE '\s0$'
echo "(counters not shown are 0)"
mr_barrier demo-end
exit $rc
