# Helpers for the MetaRoCE device-lifecycle selftests (sourced after lib.sh; not a test itself).
# Shape: a veth pair v0/v1 in the test's namespace, v0 carrying 192.0.2.1/24 and 2001:db8::1/64.

# Waits up to $1 seconds for the command to succeed.
mr_wait() { local n=$(($1 * 10)) i; shift; for ((i = 0; i < n; i++)); do "$@" && return 0; sleep 0.1; done; return 1; }

mr_has_dev() { [ -e "/sys/class/infiniband/$1" ]; }
mr_no_dev() { ! mr_has_dev "$1"; }

# Port 1 state as ibv_devinfo prints it (PORT_ACTIVE, PORT_DOWN, ...).
mr_port_state() { ibv_devinfo -d "$1" 2>/dev/null | awk '$1 == "state:" { print $2; exit }'; }
mr_port_is() { [ "$(mr_port_state "$1")" = "$2" ]; }
mr_active_mtu() { ibv_devinfo -d "$1" 2>/dev/null | awk '$1 == "active_mtu:" { print $2; exit }'; }
mr_active_mtu_is() { [ "$(mr_active_mtu "$1")" = "$2" ]; }

# Both RoCE v2 GIDs of v0's addresses are in mr0's table.
mr_gids_ok() {
  local out; out=$(ibv_devinfo -v -d "$1" 2>/dev/null) || return 1
  grep -q "::ffff:$MR_ADDR_A, RoCE v2" <<<"$out" && grep -q "$MR_ADDR6_A, RoCE v2" <<<"$out"
}

mr_veth_up() {
  ip link del v0 2>/dev/null  # left over by an earlier test that was killed
  ip link add v0 type veth peer name v1 || fail "veth pair"
  ip addr add "$MR_ADDR_A/24" dev v0 && ip -6 addr add "$MR_ADDR6_A/64" dev v0 nodad || fail "addresses"
  ip link set v0 up && ip link set v1 up || fail "link up"
}

# Starts from a clean slate: no metaroce device or module, empty dmesg.
mr_fresh() {
  mr_teardown
  if lsmod | grep -q '^metaroce '; then rmmod metaroce || fail "rmmod of a preloaded metaroce"; fi
  dmesg -c >/dev/null
}

mr_teardown() {
  local d
  for d in /sys/class/infiniband/*; do
    [ -e "$d" ] && rdma link delete "$(basename "$d")" 2>/dev/null
  done
  ip link del v0 2>/dev/null
  ip link del v2 2>/dev/null
  # Left over by an earlier test that was killed before its exit trap ran.
  ip netns del mra 2>/dev/null
  ip netns del mrb 2>/dev/null
  true
}


# Two namespaces mra and mrb joined by veth va/vb ($MR_ADDR_A / $MR_ADDR_B and their IPv6 twins), in
# ib_core's exclusive netns mode (switched to if needed, and back at exit). Installs an EXIT trap that
# deletes both namespaces and waits for their devices mra0/mrb0 to go.
# Switches ib_core to exclusive netns mode if it is not (skips the test if it cannot); sets
# mr_ns_restore when mr_netns_restore must switch it back.
mr_netns_exclusive() {
  mr_ns_restore=
  mode=$(rdma system show | sed -n 's/.*netns \([a-z]*\).*/\1/p')
  if [ "$mode" != exclusive ]; then
    # Only possible while no other namespace exists (earlier tests' ones may still be dying).
    mr_wait 30 rdma system set netns exclusive 2>/dev/null || skip "cannot switch ib_core to exclusive netns mode"
    mr_ns_restore=1
  fi
}
mr_netns_restore() { [ -n "$mr_ns_restore" ] && mr_wait 30 rdma system set netns shared; true; }

mr_two_namespaces() {
  mr_netns_exclusive
  trap mr_two_namespaces_cleanup EXIT
  ip netns add mra && ip netns add mrb || fail "ip netns add"
  ip link add va netns mra type veth peer name vb netns mrb || fail "veth pair"
  ip -n mra addr add $MR_ADDR_A/24 dev va && ip -n mra -6 addr add $MR_ADDR6_A/64 dev va nodad || fail "addresses a"
  ip -n mrb addr add $MR_ADDR_B/24 dev vb && ip -n mrb -6 addr add $MR_ADDR6_B/64 dev vb nodad || fail "addresses b"
  ip -n mra link set va up && ip -n mrb link set vb up || fail "link up"
}

mr_two_namespaces_cleanup() {
  ip netns del mra 2>/dev/null; ip netns del mrb 2>/dev/null
  mr_wait 30 mr_no_dev mra0; mr_wait 30 mr_no_dev mrb0
  mr_netns_restore
}

# The RoCE v2 GID index of address $3 on device $2 in namespace $1, waiting up to $4 seconds
# (default 10) for it to appear; empty if it never does. One process in the namespace polls (each
# `ip netns exec` + bash start costs about a second under TCG).
mr_ns_gid() {
  ip netns exec "$1" bash -c ". $MR_SELFTESTS/lib.sh
    for ((i = 0; i < ${4:-10} * 10; i++)); do g=\$(mr_gid_index $2 $3); [ -n \"\$g\" ] && { echo \$g; exit; }; sleep 0.1; done"
}

# mr_two_namespaces plus, for RDMA traffic between them: lo up in both (loopback traffic), MetaRoCE
# devices mra0 on va and mrb0 on vb (link type $1, default metaroce), and ga/gb set to the RoCE v2
# GID indices of $MR_ADDR_A on mra0 and $MR_ADDR_B on mrb0.
# Counter COUNTER of device DEV's port 1 in namespace NS (0 if the device does not report it).
mr_stat() { # NS DEV COUNTER
  local v
  v=$(ip netns exec "$1" rdma statistic show link "$2/1" | tr ' ' '\n' | awk -v n="$3" 'p { print; exit } $0 == n { p = 1 }')
  echo "${v:-0}"
}

# Loads the module with the parameters "$@", makes two native devices (mr_two_devices) and runs
# $MR_WRITES (default 200) 64 KiB WRITEs from mrb0 to mra0; sets DATA (mrb0's native DATA
# packets), ACKS (mra0's native ACKs) and GSO (mrb0's GSO batches) for them.
mr_native_writes() {
  local a0 d0 g0
  mr_fresh
  modprobe metaroce "$@" || fail "modprobe metaroce $*"
  mr_two_devices metaroce-native
  a0=$(mr_stat mra mra0 native_acks_sent); d0=$(mr_stat mrb mrb0 native_data_sent)
  g0=$(mr_stat mrb mrb0 sent_gso_batches)
  mr_perf "write_bw 64 KiB x ${MR_WRITES:-200}, $*" ib_write_bw -s 65536 -n "${MR_WRITES:-200}" -F
  ACKS=$(( $(mr_stat mra mra0 native_acks_sent) - a0 )); DATA=$(( $(mr_stat mrb mrb0 native_data_sent) - d0 ))
  GSO=$(( $(mr_stat mrb mrb0 sent_gso_batches) - g0 ))
  echo "$*: $DATA native DATA packets, $ACKS ACKs from the receiver, $GSO GSO batches"
  [ "$DATA" -ge $(( ${MR_WRITES:-200} * 45 )) ] || fail "only $DATA native DATA packets for ${MR_WRITES:-200} WRITEs of 64 KiB"
}

mr_two_devices() {
  local type=${1:-metaroce}
  mr_two_namespaces
  ip -n mra link set lo up && ip -n mrb link set lo up || fail "lo up"
  ip netns exec mra rdma link add mra0 type $type netdev va || fail "add mra0"
  ip netns exec mrb rdma link add mrb0 type $type netdev vb || fail "add mrb0"
  ga=$(mr_ns_gid mra mra0 $MR_ADDR_A); [ -n "$ga" ] || fail "no RoCE v2 GID for $MR_ADDR_A on mra0"
  gb=$(mr_ns_gid mrb mrb0 $MR_ADDR_B); [ -n "$gb" ] || fail "no RoCE v2 GID for $MR_ADDR_B on mrb0"
}

# A third namespace mrc (192.0.2.200) that reaches mra only through mrb (gateway 192.0.2.201 in
# mrb): an off-path host that knows both addresses. Reverse-path filters are off in mra and mrb,
# and mrb forwards packets whose source is one of its own addresses (accept_local), so that mrc
# can also send with a spoofed source address, mrb's included. Sets ADDR_C; the caller's EXIT
# trap deletes mrc (ip netns del mrc).
mr_third_namespace() {
  ADDR_C=192.0.2.200
  local gw=192.0.2.201
  ip netns add mrc || fail "ip netns add mrc"
  ip link add vc netns mrc type veth peer name vbc netns mrb || fail "veth mrc-mrb"
  ip -n mrc addr add $ADDR_C/32 dev vc && ip -n mrb addr add $gw/32 dev vbc || fail "addresses c"
  ip -n mrc link set vc up && ip -n mrb link set vbc up && ip -n mrc link set lo up || fail "link up c"
  ip -n mrc route add $gw/32 dev vc && ip -n mrc route add $MR_ADDR_A/32 via $gw dev vc || fail "routes c"
  ip -n mrb route add $ADDR_C/32 dev vbc || fail "route b -> c"
  ip netns exec mrb sysctl -qw net.ipv4.ip_forward=1 || fail "forwarding in mrb"
  for ns in mra mrb; do ip netns exec $ns sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0; done
  ip netns exec mra sysctl -qw net.ipv4.conf.va.rp_filter=0
  ip netns exec mrb sysctl -qw net.ipv4.conf.all.accept_local=1 net.ipv4.conf.vbc.accept_local=1
}

# mr_rc_pair DIR: starts attack.py's RC pair in DIR (end b in mrb on mrb0, end a in mra on mra0;
# GID indices $gb, $ga), sets pa and pb (their PIDs) and qpn (a's QP number) once a received the
# first SEND; fails (naming $MR_RC_PAIR_WHAT) if it did not within 180 s.
mr_rc_pair() {
  local D=$1 end
  rm -rf $D; mkdir -p $D
  ip netns exec mrb timeout 300 /usr/bin/python3 "$MR_SELFTESTS/attack.py" rc-pair b mrb0 "$gb" $MR_ADDR_A $D > $D/b.log 2>&1 &
  pb=$!
  ip netns exec mra timeout 300 /usr/bin/python3 "$MR_SELFTESTS/attack.py" rc-pair a mra0 "$ga" $MR_ADDR_B $D > $D/a.log 2>&1 &
  pa=$!
  # (Counted in seconds: under KASAN one try of a command can take a second.)
  end=$((SECONDS + 180)); until [ -e $D/first ] || ! kill -0 $pa 2>/dev/null || [ $SECONDS -ge $end ]; do sleep 0.5; done
  [ -e $D/first ] || { cat $D/a.log $D/b.log; fail "${MR_RC_PAIR_WHAT:-}the RC pair did not exchange its first SEND"; }
  qpn=$(cat $D/first)
}

# Runs one of rdma-core's pingpong examples with received buffers validated (-c), the server in
# namespace SERVER_NS (at $MR_ADDR_A) and the client in CLIENT_NS, and prints its result line.
# Usage: mr_pingpong TOOL NAME SERVER_NS SERVER_DEV SERVER_GID CLIENT_NS CLIENT_DEV CLIENT_GID ARGS...
mr_pp_port=18515
mr_pingpong() {
  local tool=$1 name=$2 sns=$3 sdev=$4 sgid=$5 cns=$6 cdev=$7 cgid=$8 port srv; shift 8
  mr_pp_port=$((mr_pp_port + 1)); port=$mr_pp_port
  ip netns exec "$sns" timeout 120 "$tool" -d "$sdev" -g "$sgid" -p $port -c "$@" > /tmp/pp-server.log 2>&1 &
  srv=$!
  mr_wait 60 sh -c "ip netns exec $sns ss -Hltn 'sport = :$port' | grep -q ." || { cat /tmp/pp-server.log; fail "$name: server not listening"; }
  # Client namespace "init": the initial one.
  local cx=(ip netns exec "$cns"); [ "$cns" = init ] && cx=()
  if ! "${cx[@]}" timeout 120 "$tool" -d "$cdev" -g "$cgid" -p $port -c "$@" $MR_ADDR_A > /tmp/pp-client.log 2>&1; then
    cat /tmp/pp-client.log /tmp/pp-server.log
    ip netns exec mra rdma statistic show link mra0/1; ip netns exec mrb rdma statistic show link mrb0/1
    fail "$name: client"
  fi
  wait $srv || { cat /tmp/pp-server.log; fail "$name: server"; }
  grep -q "iters in" /tmp/pp-client.log || { cat /tmp/pp-client.log; fail "$name: no result line"; }
  echo "$name: $(grep 'iters in' /tmp/pp-client.log)"
}

# Runs a perftest tool (or an ibv_* example, which takes -g for the GID index) with the server in
# namespace mra on mra0 and the client in mrb on mrb0, one port per run; fails the test if either
# side fails (printing both logs and the port counters) or no result row is printed, and prints
# the last result row. Usage: mr_perf NAME TOOL ARGS...
mr_perf_port=18900
mr_perf() {
  local name=$1 tool=$2 gflag=-x srv; shift 2
  mr_perf_port=$((mr_perf_port + 1))
  case $tool in ibv_*) gflag=-g;; esac
  ip netns exec mra timeout 150 $tool -d mra0 $gflag $ga -p $mr_perf_port "$@" > /tmp/perf-server.log 2>&1 &
  srv=$!
  mr_wait 60 sh -c "ip netns exec mra ss -Hltn 'sport = :$mr_perf_port' | grep -q ." || { cat /tmp/perf-server.log; fail "$name: server not listening"; }
  if ! ip netns exec mrb timeout 150 $tool -d mrb0 $gflag $gb -p $mr_perf_port "$@" $MR_ADDR_A > /tmp/perf-client.log 2>&1; then
    cat /tmp/perf-client.log /tmp/perf-server.log
    ip netns exec mra rdma statistic show link mra0/1; ip netns exec mrb rdma statistic show link mrb0/1
    fail "$name: client"
  fi
  wait $srv || { cat /tmp/perf-server.log; fail "$name: server"; }
  grep -Eq '^ *[0-9]+ +[0-9]+ +' /tmp/perf-client.log || { cat /tmp/perf-client.log; fail "$name: no result row"; }
  echo "$name: $(grep -E '^ *[0-9]+ +[0-9]+ +' /tmp/perf-client.log | tail -n 1 | tr -s ' ')"
}

# One kmemleak scan (slow under KASAN); fails the test on any report whose allocation backtrace
# involves RDMA or Rust code (boot-time leaks of unrelated subsystems are not ours). Returns 1
# without scanning when kmemleak is absent (the release kernel).
mr_kmemleak_ours() {
  [ -w /sys/kernel/debug/kmemleak ] || return 1
  echo scan >/sys/kernel/debug/kmemleak
  local ours
  ours=$(awk '/^unreferenced object/ { n++ } { blk[n] = blk[n] "\n" $0 }
              END { for (i = 1; i <= n; i++) if (blk[i] ~ /ib_|rdma|uverbs|metaroce|_RN/) print blk[i] }' \
         /sys/kernel/debug/kmemleak)
  [ -z "$ours" ] || { echo "$ours" | head -60; fail "kmemleak reports leaks from RDMA/Rust code"; }
}
