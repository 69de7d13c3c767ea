# Shared helpers for MetaRoCE selftests (sourced; bash). Addresses are documentation ranges only.
MR_SELFTESTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MR_ADDR_A=192.0.2.1 MR_ADDR_B=192.0.2.2
MR_ADDR6_A=2001:db8::1 MR_ADDR6_B=2001:db8::2

skip() { echo "SKIP: $*"; exit 4; }
fail() { echo "FAIL: $*"; exit 1; }

# This guest's and the peer's addresses in a two-guest shape (MR_ROLE a or b). In the cluster
# shape MR_ROLE is nI, node I of MR_NODES (1 is the launcher), at 192.0.2.I and 2001:db8::I.
mr_self() {
  case $MR_ROLE in a) echo $MR_ADDR_A;; n*) echo "192.0.2.${MR_ROLE#n}";; *) echo $MR_ADDR_B;; esac
}
mr_peer() { [ "$MR_ROLE" = a ] && echo $MR_ADDR_B || echo $MR_ADDR_A; }

# Configures eth0, the QEMU link between the two guests (the segment of the cluster shape).
mr_link_up() {
  ip link set eth0 up
  ip addr add "$(mr_self)/24" dev eth0
  ip -6 addr add "$(mr_self6)/64" dev eth0 nodad
}

# Both guests of a pair wait here until the other arrives with the same name.
mr_barrier() { python3 -S "$MR_SELFTESTS/barrier.py" "$MR_ROLE" "$MR_ADDR_A" "$1" "${2:-240}"; }

# Runs a command and retries while it fails (the peer's server may not listen yet).
mr_retry() { local n=$1; shift; local i; for ((i = 0; i < n; i++)); do "$@" && return 0; sleep 1; done; return 1; }

# Reads a netdev statistic.
mr_netstat() { cat "/sys/class/net/$1/statistics/$2"; }

# Fails on any sanitizer, lockdep or WARN report in dmesg.
mr_dmesg_clean() {
  local bad
  bad=$(dmesg | grep -E 'WARNING:|BUG:|KASAN|UBSAN|Oops|general protection|possible circular|inconsistent lock|unreferenced object|refcount_t:|CFI failure|waiting for .* to become free') || return 0
  echo "$bad"
  fail "kernel reported problems (see above)"
}

# True when running on MetaRoCE's own kernel (release 7.3.4-mr, test 7.3.4-mr-test; not the
# baseline kernel, 7.3.4-mr-rxe, the same source with rdma_rxe instead).
mr_our_kernel() { [[ $(uname -r) == *-mr || $(uname -r) == *-mr-test ]]; }

# The index of the RoCE v2 GID of IPv4 address $2 in device $1's table (empty if none yet). An
# IPv6 address is given in full (2001:0db8:0000:...:0001), as sysfs prints GIDs. The table has
# 256 entries (rdma_rxe's 1024), searched in index order with the shell's own `read` (no process per entry).
mr_gid_index() {
  local want g n
  case $2 in
    *:*) want=$2;;
    *) want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' $(tr . ' ' <<<"$2"));;
  esac
  for ((n = 0; ; n++)); do
    g=/sys/class/infiniband/$1/ports/1/gids/$n
    [ -e "$g" ] || return
    read -r g <"$g"
    [ "$g" = "$want" ] && [ "$(cat "/sys/class/infiniband/$1/ports/1/gid_attrs/types/$n" 2>/dev/null)" = 'RoCE v2' ] \
      && { echo "$n"; return; }
  done
}

# This pair guest's RDMA device on eth0: MetaRoCE (mr0) on our kernel, rdma_rxe (rxe0) on Debian's.
# Creates it if needed and sets MR_DEV and MR_GID (the RoCE v2 GID index of this guest's IPv4 address).
mr_rdma_dev() {
  local type i
  if mr_our_kernel; then MR_DEV=mr0 type=metaroce; else MR_DEV=rxe0 type=rxe; fi
  [ -e "/sys/class/infiniband/$MR_DEV" ] || rdma link add "$MR_DEV" type "$type" netdev eth0 || return 1
  for ((i = 0; i < 100; i++)); do
    MR_GID=$(mr_gid_index "$MR_DEV" "$(mr_self)")
    [ -n "$MR_GID" ] && ibv_devinfo -d "$MR_DEV" | grep -q PORT_ACTIVE && return 0
    sleep 0.1
  done
  echo "no active port with a RoCE v2 GID for $(mr_self) on $MR_DEV"; return 1
}

# Replaces this guest's RoCEv2 device mr0 by a native one, mn0, and waits for its port: tests that
# run both modes; mr_roce_back (their EXIT trap) puts mr0 back for the tests that follow.
mr_native_dev() {
  local i
  if [ -e /sys/class/infiniband/mr0 ]; then rdma link delete mr0 || return 1; fi
  rdma link add mn0 type metaroce-native netdev eth0 || return 1
  for ((i = 0; i < 100; i++)); do ibv_devinfo -d mn0 2>/dev/null | grep -q PORT_ACTIVE && return 0; sleep 0.1; done
  echo "mn0: no active port"; return 1
}
mr_roce_back() { rdma link delete mn0 2>/dev/null; mr_rdma_dev >/dev/null || echo "mr0 could not be restored"; }

# Open MPI's mpirun (Debian's 4.1) across guests of this machine's private segment, one rank per
# host: HOSTS is a comma-separated list of addresses (this guest's among them), whose other hosts
# serve node_agent.py, Open MPI's remote launcher here (the guests have no ssh). DEV is the RDMA
# device UCX uses (pml ucx: RC, with UD for UCX's set-up; Open MPI 4.1 takes only mlx* devices
# unless told otherwise), or "tcp" for Open MPI's own TCP transport. rdma_rxe (rxe*) also needs
# UCX_UD_ETH_DGID_CHECK=n: it reports sl 0 in UD completions, and UCX then drops every UD packet.
# The job is ended after MR_MPI_TIMEOUT seconds (900). Usage: mr_mpirun HOSTS DEV PROGRAM ARGS...
mr_mpirun() {
  local hosts=$1 dev=$2; shift 2
  local -a net
  case $dev in
    tcp) net=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include eth0);;
    *) net=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any --mca btl ^openib,uct --mca osc ^ucx
            -x UCX_TLS=rc_verbs,ud_verbs,self -x "UCX_NET_DEVICES=$dev:1")
       [[ $dev == rxe* ]] && net+=(-x UCX_UD_ETH_DGID_CHECK=n);;
  esac
  timeout "${MR_MPI_TIMEOUT:-900}" mpirun --allow-run-as-root --host "${hosts//,/:1,}:1" -np "$(tr ',' '\n' <<<"$hosts" | wc -l)" --map-by node \
    --mca plm_rsh_agent "python3 -S $MR_SELFTESTS/node_agent.py" --mca plm_rsh_no_tree_spawn 1 \
    --mca oob_tcp_if_include eth0 "${net[@]}" "$@"
}

# Both guests of a pair run one rdma-core/perftest tool: the server on role $2, the client on the
# other role connecting to it. Usage: mr_pair_run NAME SERVER_ROLE PORT TOOL ARGS...; the tool's
# output is left in $MR_OUT. The client retries while the server is not listening yet.
mr_pair_run() {
  local name=$1 srole=$2 port=$3 tool=$4; shift 4
  mr_barrier "$name" || { echo "$name: the peer never arrived"; return 1; }
  if [ "$MR_ROLE" = "$srole" ]; then
    MR_OUT=$(timeout 150 "$tool" "$@" -p "$port" 2>&1)
  else
    MR_OUT=$(mr_retry 20 timeout 150 "$tool" "$@" -p "$port" "$(mr_peer)" 2>&1)
  fi
}

# This guest's and the peer's IPv6 addresses in a two-guest shape.
mr_self6() {
  case $MR_ROLE in a) echo $MR_ADDR6_A;; n*) echo "2001:db8::${MR_ROLE#n}";; *) echo $MR_ADDR6_B;; esac
}
mr_peer6() { [ "$MR_ROLE" = a ] && echo $MR_ADDR6_B || echo $MR_ADDR6_A; }

# True while an rdma_cm ID of this guest listens on port $1 (bound or wildcard, any port space).
# (Few processes: each exec costs up to a second in a KASAN guest under TCG.)
mr_cm_listening() {
  local l
  while IFS= read -r l; do [[ $l == *"state LISTEN "*":$1 "* ]] && return 0; done < <(rdma res show cm_id 2>/dev/null)
  return 1
}

# Both guests of a pair run one rdma_cm tool: the server on role $2, the client on the other role.
# The client starts only once the server's rdma_cm ID listens on port $3 (seen in `rdma res show
# cm_id`; one barrier named NAME then releases the client), so no retry can hide a failed
# connection. Each command runs under `timeout ${MR_CM_TIMEOUT:-120}` (600 s with MR_FULL); its
# stdout is left in MR_OUT, its stderr in MR_ERR, its exit status is returned.
# Usage: mr_cm_pair NAME SERVER_ROLE PORT SERVER_CMD... -- CLIENT_CMD...
mr_cm_pair() {
  local name=$1 srole=$2 port=$3 t=${MR_CM_TIMEOUT:-${MR_FULL:+600}} pid i rc; shift 3
  t=${t:-120}
  local -a srv=() cli=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
  [ $# -gt 0 ] && shift; cli=("$@")
  if [ "$MR_ROLE" = "$srole" ]; then
    timeout "$t" "${srv[@]}" >/tmp/cm-pair.out 2>/tmp/cm-pair.err & pid=$!
    for ((i = 0; i < 300; i++)); do
      mr_cm_listening "$port" && break
      kill -0 $pid 2>/dev/null || break
      sleep 0.2
    done
    mr_cm_listening "$port" || echo "$name: the server does not listen on rdma_cm port $port" >>/tmp/cm-pair.err
    # The client is released even so: it then fails as well, and both guests report.
    mr_barrier "$name" || echo "$name: the client never came" >>/tmp/cm-pair.err
    wait $pid; rc=$?
  else
    mr_barrier "$name" || { MR_ERR="$name: the server never reported"; return 1; }
    timeout "$t" "${cli[@]}" >/tmp/cm-pair.out 2>/tmp/cm-pair.err; rc=$?
  fi
  MR_OUT= MR_ERR=
  IFS= read -r -d '' MR_OUT </tmp/cm-pair.out; IFS= read -r -d '' MR_ERR </tmp/cm-pair.err
  MR_OUT=${MR_OUT%$'\n'} MR_ERR=${MR_ERR%$'\n'}
  return $rc
}

# Both guests of a pair run UCX's ucx_perftest (UCP API) over RDMA device $4 with transports $5
# (UCX_TLS): the server on role $2, the client connecting to it over eth0 (UCX's out-of-band TCP
# exchange on port $3, which also hands the server the client's test parameters). The client is
# released once the server listens. The output is left in MR_OUT, the exit status returned.
# Usage: mr_ucx_pair NAME SERVER_ROLE PORT DEV TLS PERFTEST-ARGS...
mr_ucx_pair() {
  local name=$1 srole=$2 port=$3 dev=$4 tls=$5 t=${MR_UCX_TIMEOUT:-${MR_FULL:+600}} pid i rc; shift 5
  t=${t:-150}
  if [ "$MR_ROLE" = "$srole" ]; then
    UCX_TLS=$tls UCX_NET_DEVICES=$dev:1 timeout "$t" ucx_perftest -p "$port" >/tmp/ucx-pair.out 2>&1 & pid=$!
    for ((i = 0; i < 300; i++)); do
      [ -n "$(ss -Hltn "sport = :$port")" ] && break
      kill -0 $pid 2>/dev/null || break
      sleep 0.2
    done
    mr_barrier "$name" || echo "$name: the client never came" >>/tmp/ucx-pair.out
    wait $pid; rc=$?
  else
    mr_barrier "$name" || { MR_OUT="$name: the server never reported"; return 1; }
    UCX_TLS=$tls UCX_NET_DEVICES=$dev:1 timeout "$t" ucx_perftest "$(mr_peer)" -p "$port" "$@" \
      >/tmp/ucx-pair.out 2>&1; rc=$?
  fi
  MR_OUT=$(cat /tmp/ucx-pair.out)
  return $rc
}

# This guest's eth0 rx bytes (MR_RX) and its device's successful receive completions (MR_RECVS,
# `rdma statistic` rdma_recvs: MetaRoCE's counters carry rdma_rxe's names).
mr_cm_counts() {
  local -a w; local i
  read -r MR_RX </sys/class/net/eth0/statistics/rx_bytes
  read -r -d '' -a w < <(rdma statistic show link "$MR_DEV/1")
  MR_RECVS=0
  for ((i = 0; i + 1 < ${#w[@]}; i++)); do [ "${w[i]}" = rdma_recvs ] && MR_RECVS=${w[i + 1]}; done
}

# Marks the start of a transfer for mr_cm_took.
mr_cm_mark() { mr_cm_counts; MR_RX0=$MR_RX MR_RECVS0=$MR_RECVS; }

# True if since mr_cm_mark eth0 took in at least $1 bytes and the device completed at least $2
# receives (MADs count too, so these are floors); MR_TOOK says what was seen.
mr_cm_took() {
  mr_cm_counts
  MR_TOOK="eth0 rx $((MR_RX - MR_RX0)) B (>= $1), $((MR_RECVS - MR_RECVS0)) receives (>= $2)"
  [ $((MR_RX - MR_RX0)) -ge "$1" ] && [ $((MR_RECVS - MR_RECVS0)) -ge "$2" ]
}

# Wire correctness of a capture (dumpcap -P on a veth): at least $2 RoCEv2 packets, every ICRC
# verified by our own checker, every opcode listed after $2 present, and tshark's InfiniBand
# dissector decodes the first 8 packets of every opcode (a sample: dissecting thousands of
# packets takes many minutes under TCG) with no malformed field or error.
# Usage: mr_wire_check PCAP MIN [OPCODE...]
mr_wire_check() {
  local pcap=$1 least=$2 decoded z sampled; shift 2
  python3 "$MR_SELFTESTS/pcap_roce.py" --sample /tmp/wire-sample.pcap 8 "$pcap" "$least" "$@" > /tmp/wire-check.txt ||
    { cat /tmp/wire-check.txt; echo "ICRC/opcode check of $pcap failed"; return 1; }
  cat /tmp/wire-check.txt
  sampled=$(sed -n 's/^sample of \([0-9]*\) packets.*/\1/p' /tmp/wire-check.txt)
  # (one tshark run: it takes a minute to start under TCG)
  tshark -r /tmp/wire-sample.pcap -V > /tmp/wire.txt 2>&1 || { tail /tmp/wire.txt; echo "tshark -r failed"; return 1; }
  decoded=$(grep -c "^InfiniBand" /tmp/wire.txt)
  [ "$decoded" -ge "${sampled:-1}" ] || { head -60 /tmp/wire.txt; echo "tshark decoded $decoded of $sampled InfiniBand packets"; return 1; }
  # RoCEv2 sends a zero UDP checksum over IPv6 too (a tunnel, RFC 6935; the ICRC covers the
  # packet), which tshark flags as an error of the UDP layer: every other error counts.
  if grep -Ei "malformed|expert info \(error" /tmp/wire.txt | grep -v "Illegal checksum value (0)" | head -20 | grep .; then
    echo "tshark reports malformed packets or errors"; return 1
  fi
  z=$(grep -c "Illegal checksum value (0)" /tmp/wire.txt)
  echo "tshark: $decoded InfiniBand packets decoded, none malformed ($z IPv6 zero UDP checksums)"
}

# Runs rdma-core's own test suite (python3-pyverbs 44, /usr/share/doc/rdma-core/tests; traffic
# tests run as loopback on one device) against device $1 with GID index $2. Prints every test's
# line, the tracebacks of failures and errors, and the skip reasons counted; sets PV_RAN, PV_OK,
# PV_SKIP, PV_FAIL (failures + errors) and PV_FAILED (their names). Returns 1 if the suite did not
# run to its summary.
mr_pyverbs() {
  local dev=$1 gid=$2 dir=/tmp/pyverbs-$1 log summary
  rm -rf "$dir"; mkdir -p "$dir"
  cp -r /usr/share/doc/rdma-core/tests "$dir/" && gunzip -f "$dir"/tests/*.gz || { echo "cannot copy the pyverbs tests"; return 1; }
  log=$dir/log
  # Debian's python3 (the first python3 on PATH may be another build without pyverbs).
  (cd "$dir" && timeout 600 /usr/bin/python3 tests/run_tests.py --dev "$dev" --port 1 --gid "$gid" -v) > "$log" 2>&1
  cat "$log"
  PV_RAN=$(sed -n 's/^Ran \([0-9]*\) tests.*/\1/p' "$log")
  summary=$(grep -E '^(OK|FAILED)( |$)' "$log" | tail -n 1)
  [ -n "$PV_RAN" ] && [ -n "$summary" ] || { echo "pyverbs: no summary line"; return 1; }
  local f e
  num() { local v; v=$(sed -n "s/.*$1=\([0-9]*\).*/\1/p" <<<"$summary"); echo "${v:-0}"; }
  PV_SKIP=$(num skipped) f=$(num failures) e=$(num errors)
  PV_FAIL=$((f + e))
  PV_OK=$((PV_RAN - PV_SKIP - PV_FAIL))
  PV_FAILED=$(sed -n 's/^\(FAIL\|ERROR\): \([^ ]*\).*/\2/p' "$log" | tr '\n' ' ')
  echo "pyverbs skip reasons:"
  grep -oE "skipped '[^']*'|skipped \"[^\"]*\"" "$log" | sed -E 's/^skipped .//; s/.$//; s/ \(.*//' | sort | uniq -c | sort -rn
  echo "pyverbs on $dev ($(uname -r)): $PV_RAN run, $PV_OK ok, $PV_SKIP skipped, $PV_FAIL failed or errors${PV_FAILED:+: $PV_FAILED}"
}

# The verdict of one ucmatose/udaddy run (both print the same lines): exit status RC, its success
# lines in $MR_OUT, and at least BYTES taken in over at least RECVS receives (mr_cm_took: the tools
# never look at completion status). Prints the failure or "WHAT: ok"; returns 1 on failure.
# Usage: mr_cm_verdict WHAT RC BYTES RECVS T0
mr_cm_verdict() {
  if [ "$2" != 0 ] || [[ $MR_OUT != *$'\n'"data transfers complete"$'\n'* ]] || [[ $MR_OUT != *$'\n'"return status 0" ]]; then
    echo "$MR_OUT"; echo "$MR_ERR"; echo "FAILED $1: exit $2"; return 1
  fi
  if ! mr_cm_took "$3" "$4"; then
    echo "$MR_OUT"; echo "FAILED $1: $MR_TOOK"; return 1
  fi
  echo "$1: ok, $MR_TOOK, $((SECONDS - $5)) s"
}

# Sourced by a test that kselftest's runner started (SUITE/NN-name.sh): in a two-guest shape
# (MR_ROLE a or b) both guests meet here before the test starts, so that a test never talks to the
# peer's previous one; a test another test runs (an interop wrapper calling the pair suite's
# script) does not meet again. MR_TRACE=1 (a development aid) traces every command with the test's
# elapsed seconds and its file:line, to find where a test spends its time.
# A test that only make check-full runs says why in MR_FULL_ONLY, set before it sources this
# file: it skips here, before the barrier, which both guests of a pair would otherwise pay for
# every such test (about half a minute each under TCG).
if [ -n "${MR_FULL_ONLY:-}" ] && [ -z "${MR_FULL:-}" ]; then skip "make check-full only ($MR_FULL_ONLY)"; fi
if [[ $0 == *[0-9][0-9]-*.sh ]] && [ -z "${MR_TEST_NAME:-}" ]; then
  MR_TEST_NAME=$(basename "$(cd "$(dirname "$0")" && pwd)")/$(basename "$0" .sh)
  export MR_TEST_NAME
  # (The cluster shape's nodes, MR_ROLE nI, meet in their tests: node 1 waits for the others.)
  if [[ ${MR_ROLE:-} == [ab] ]] && ! mr_barrier "start-$MR_TEST_NAME"; then
    fail "the peer guest never reached $MR_TEST_NAME"
  fi
  if [ -n "${MR_TRACE:-}" ]; then PS4='+${SECONDS}s ${BASH_SOURCE##*/}:${LINENO} '; set -x; fi
fi
