# Helpers of the benchmark suite (`make bench`, scripts/bench.sh), sourced after lib.sh. Role a is
# always the server, role b the client. Every measured run leaves, in /tmp/out/bench/ (the guest's
# output share): ID.ROLE.out (the tool's output), ID.ROLE.tsv (samples every 0.1 s of wall time,
# eth0 rx+tx bytes, busy and total CPU jiffies from /proc/stat), ID.ROLE.ctr (the device's
# `rdma statistic` line before and after the run, when the test has an RDMA device) and one JSON
# line in runs.jsonl. scripts/bench_report.py turns these into figures on the host; nothing is
# computed here.
# Environment (from scripts/bench.sh): MR_BENCH_PROVIDER metaroce|metaroce-native|rxe, BENCH_QUICK,
# BENCH_REPS.
# A metaroce-native device carries RC QPs over the native transport (UDP port 19791) and UC, UD
# and QP1 over RoCEv2. Every perftest workload of this suite is RC (perftest's default connection
# type, set up over its own TCP socket, not rdma_cm), so on that device all of them run native; the
# counters in ID.ROLE.ctr (native_data_sent against sent_pkts) show per run which wire carried it,
# and the report says so for every native figure rather than assuming it.
BENCH_DIR=/tmp/out/bench
mkdir -p "$BENCH_DIR"
BENCH_REPS=${BENCH_REPS:-$([ -n "${BENCH_QUICK:-}" ] && echo 1 || echo 3)}
# Loss sweep levels in percent (each guest drops that share of its outgoing packets).
BENCH_LOSS=${BENCH_LOSS:-$([ -n "${BENCH_QUICK:-}" ] && echo "0 1" || echo "0 0.1 1 2 5 10")}
# The link-limited sweep (35-loss-limited.sh): its levels and the bottleneck's rate.
BENCH_LOSS_LIMITED=${BENCH_LOSS_LIMITED:-0 1 2 5 10}
BENCH_LIMIT=${BENCH_LIMIT:-100mbit}
# Time limit of one tool run (a run under 10 % loss may crawl; it is then recorded as failed).
BENCH_RUN_TIMEOUT=${BENCH_RUN_TIMEOUT:-180}
# A file descriptor whose reads never return data: `read -t` on it sleeps without a fork.
[ -p /tmp/bench-tick ] || mkfifo /tmp/bench-tick
exec 7<>/tmp/bench-tick
bench_sleep() { read -r -t "$1" -u 7 _ || true; }

# The RDMA device of the provider under test on eth0 (sets MR_DEV and MR_GID, creating it once).
# A MetaRoCE device it creates must log the mode asked for when the driver registers it.
bench_dev() {
  local type mode= i
  case ${MR_BENCH_PROVIDER:-} in
    metaroce) MR_DEV=mr0 type=metaroce mode="(RoCEv2)"; modprobe metaroce 2>/dev/null;;
    metaroce-native) MR_DEV=mr0 type=metaroce-native mode="(MetaRoCE native"; modprobe metaroce 2>/dev/null;;
    # The authenticated mode (transport.rst 13.1): both guests hold the same fabric key.
    metaroce-native-auth) MR_DEV=mr0 type=metaroce-native mode="(MetaRoCE native, authenticated with key metaroce:eth0"
      modprobe metaroce 2>/dev/null
      [ -e "/sys/class/infiniband/$MR_DEV" ] || /usr/bin/python3 "$MR_SELFTESTS/logon_key.py" add metaroce:eth0 \
        000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f >/dev/null || return 1;;
    rxe) MR_DEV=rxe0 type=rxe; modprobe rdma_rxe 2>/dev/null;;
    *) echo "MR_BENCH_PROVIDER must be metaroce, metaroce-native(-auth) or rxe, not '${MR_BENCH_PROVIDER:-}'"; return 1;;
  esac
  # BENCH_MTU: the link's MTU for every figure (RDMA and TCP alike), set before the device
  # exists so that its port MTU (RoCEv2) and native payload follow it.
  if [ -n "${BENCH_MTU:-}" ] && [ "$(cat /sys/class/net/eth0/mtu)" != "$BENCH_MTU" ]; then
    ip link set eth0 mtu "$BENCH_MTU" || { echo "cannot set eth0's MTU to $BENCH_MTU"; return 1; }
  fi
  if [ ! -e "/sys/class/infiniband/$MR_DEV" ]; then
    rdma link add "$MR_DEV" type "$type" netdev eth0 || return 1
    if [ -n "$mode" ] && ! dmesg | grep -qF "$MR_DEV: added on netdev eth0 $mode"; then
      echo "$MR_DEV is not a $type device: $(dmesg | grep -F "$MR_DEV: added on netdev" | tail -n 1)"; return 1
    fi
  fi
  for ((i = 0; i < 100; i++)); do
    MR_GID=$(mr_gid_index "$MR_DEV" "$(mr_self)")
    [ -n "$MR_GID" ] && ibv_devinfo -d "$MR_DEV" | grep -q PORT_ACTIVE && return 0
    bench_sleep 0.1
  done
  echo "no active port with a RoCE v2 GID for $(mr_self) on $MR_DEV"; return 1
}

# Samples wall time, eth0 bytes (rx + tx) and CPU jiffies every 0.1 s into FILE until killed
# (shell builtins only: no process per sample on the guest's single vCPU).
bench_sampler() {
  local f=$1 tx rx u n s i w q sq st
  while :; do
    read -r tx </sys/class/net/eth0/statistics/tx_bytes; read -r rx </sys/class/net/eth0/statistics/rx_bytes
    read -r _ u n s i w q sq st _ </proc/stat
    echo "$EPOCHREALTIME $((tx + rx)) $((u + n + s + q + sq + st)) $((u + n + s + i + w + q + sq + st))"
    bench_sleep 0.1
  done >"$f"
}

# Appends the line of the device's counters (`rdma statistic show link DEV/1`: "link DEV/1 NAME
# VALUE ...") to FILE; nothing without a device (MR_DEV unset).
bench_counters() {
  [ -n "${MR_DEV:-}" ] || return 0
  rdma statistic show link "$MR_DEV/1" >>"$1" 2>&1 || echo "no counters" >>"$1"
}

# One measured run: the server (role a) runs BENCH_SRV, the client (role b) BENCH_CLI, both under
# the sampler. The client retries while the server does not accept connections yet. META is a
# JSON object body (no braces) describing the run; the record adds role, exit status and times.
# The device's counters are read before the sampler starts and after it stops (outside the
# transfer window the report measures).
# Usage: bench_run ID META   (arrays BENCH_SRV and BENCH_CLI set by the caller)
BENCH_FAILED=0
bench_run() {
  local id=$1 meta=$2 spid rc try t0 t1 out
  mr_barrier "bench-$id" || { echo "$id: the peer never arrived"; BENCH_FAILED=$((BENCH_FAILED + 1)); return 1; }
  out=$BENCH_DIR/$id.$MR_ROLE.out
  rm -f "$BENCH_DIR/$id.$MR_ROLE.ctr"; bench_counters "$BENCH_DIR/$id.$MR_ROLE.ctr"
  bench_sampler "$BENCH_DIR/$id.$MR_ROLE.tsv" & spid=$!
  bench_sleep 0.3
  # ID.ROLE.t0 and .t1 are written (through 9p, so their modification times come from the host's
  # clock) right beside t0 and t1: the report compares the guest's clock with the host's.
  t0=$EPOCHREALTIME; echo "$t0" >"$BENCH_DIR/$id.$MR_ROLE.t0"
  if [ "$MR_ROLE" = a ]; then
    timeout "$BENCH_RUN_TIMEOUT" "${BENCH_SRV[@]}" >"$out" 2>&1; rc=$?
  else
    for ((try = 0; try < 30; try++)); do
      t0=$EPOCHREALTIME; echo "$t0" >"$BENCH_DIR/$id.$MR_ROLE.t0"
      timeout "$BENCH_RUN_TIMEOUT" "${BENCH_CLI[@]}" >"$out" 2>&1; rc=$?
      # iperf3 -J reports an error inside its JSON and may still exit 0.
      [ $rc = 0 ] && grep -q '^[[:space:]]*"error":' "$out" && rc=1
      [ $rc != 0 ] && grep -qEi "couldn't connect|unable to connect|connection refused" "$out" || break
      bench_sleep 0.5
    done
  fi
  t1=$EPOCHREALTIME; echo "$t1" >"$BENCH_DIR/$id.$MR_ROLE.t1"
  bench_sleep 0.3
  kill "$spid"; wait "$spid" 2>/dev/null
  bench_counters "$BENCH_DIR/$id.$MR_ROLE.ctr"
  printf '{"id":"%s","role":"%s","rc":%d,"t0":%s,"t1":%s,"kernel":"%s","provider":"%s",%s}\n' \
    "$id" "$MR_ROLE" "$rc" "$t0" "$t1" "$(uname -r)" "${MR_BENCH_PROVIDER:-}" "$meta" >>"$BENCH_DIR/runs.jsonl"
  if [ $rc != 0 ]; then
    echo "$id ($MR_ROLE): exit $rc"; tail -n 5 "$out"; BENCH_FAILED=$((BENCH_FAILED + 1)); return 1
  fi
  echo "$id ($MR_ROLE): ok, $(( ${t1%.*} - ${t0%.*} )) s"
}

# A perftest run between the two devices. Usage: bench_perftest ID META TOOL ARGS...
BENCH_PORT=${BENCH_PORT:-20000}
bench_perftest() {
  local id=$1 meta=$2 tool=$3; shift 3
  BENCH_PORT=$((BENCH_PORT + 1))
  BENCH_SRV=("$tool" -d "$MR_DEV" -x "$MR_GID" -F -p "$BENCH_PORT" "$@")
  BENCH_CLI=("${BENCH_SRV[@]}" "$(mr_peer)")
  bench_run "$id" "\"tool\":\"$tool\",\"args\":\"$*\",$meta"
}

# An iperf3 run (TCP) over the same link. Usage: bench_iperf ID META STREAMS SECONDS
bench_iperf() {
  local id=$1 meta=$2 streams=$3 secs=$4
  BENCH_PORT=$((BENCH_PORT + 1))
  BENCH_SRV=(iperf3 -s -1 -p "$BENCH_PORT")
  BENCH_CLI=(iperf3 -c "$(mr_peer)" -p "$BENCH_PORT" -P "$streams" -t "$secs" -J)
  bench_run "$id" "\"tool\":\"iperf3\",\"args\":\"-P $streams -t $secs\",$meta"
}

# Sets netem loss of PERCENT on this guest's eth0 egress (0: no qdisc of ours).
bench_loss() {
  tc qdisc del dev eth0 root 2>/dev/null
  [ "$1" = 0 ] || tc qdisc add dev eth0 root netem loss "$1%"
}

# The link-limited path of 35-loss-limited.sh on this guest's eth0 egress: netem drops PERCENT of
# the packets (root), tbf shapes the rest to BENCH_LIMIT, and its one FIFO queue is RED with ECN:
# from an average queue of 150 KB (12 ms at 100 Mbit/s) ECN-capable packets are marked CE and
# others dropped, with a probability that grows to 25 % at 300 KB and is 1 beyond; tail drop at
# 450 KB (36 ms). rdma_rxe's window (128 unacknowledged packets of 1 KiB) stays below the marking
# range: a stack with a window that size sends without a drop of the queue's (measured 2026-12-07:
# rdma_rxe 0 drops, though its window, not the link, then limits it).
# Usage: bench_limit PERCENT
bench_limit() {
  tc qdisc del dev eth0 root 2>/dev/null
  tc qdisc add dev eth0 root handle 1: netem loss "$1%" limit 10000 &&
    tc qdisc add dev eth0 parent 1:1 handle 10: tbf rate "$BENCH_LIMIT" burst 16kb latency 100ms &&
    tc qdisc add dev eth0 parent 10:1 handle 20: red limit 450000 min 150000 max 300000 avpkt 1500 \
      burst 150 probability 0.25 bandwidth "$BENCH_LIMIT" ecn
}

# Writes eth0's qdisc statistics (sent, dropped, overlimits, RED's marks and drops) after run ID
# to ID.ROLE.qdisc: the report counts the bottleneck's drops and ECN marks per run.
bench_qdisc() {
  tc -s qdisc show dev eth0 >"$BENCH_DIR/$1.$MR_ROLE.qdisc" 2>&1
}
