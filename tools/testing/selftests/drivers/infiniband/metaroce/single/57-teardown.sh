#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Teardown under load (issue 10 item 4): while perftest moves data between mra0 and mrb0 (two
# namespaces joined by veth, RC over RoCEv2 or over the native transport), one of six things
# happens to it; each has a written expected outcome, checked here:
#
#   link-delete   `rdma link delete mrb0`: returns at once (ib_core disassociates the user contexts
#                 instead of waiting for them) and mrb0 is gone; every context on mrb0 receives
#                 IBV_EVENT_DEVICE_FATAL (an ibv_asyncwatch on each device is the witness: perftest
#                 reads no asynchronous events, so it either exits with an error when a post fails
#                 or is left polling a dead CQ and is killed; which one is printed).
#   down-up       vb down for 3 s, then up: mrb0's port follows (IBV_EVENT_PORT_ERR, then
#                 IBV_EVENT_PORT_ACTIVE); the transfer either fails with a completion error (the RC
#                 retry budget spent while the link was down: RoCEv2 mode) or carries on once the
#                 link is back (the native transport keeps retransmitting); which one is printed, a
#                 transfer that does neither fails the test.
#   netdev-delete `ip link del vb` (and with it va): both devices go through NETDEV_UNREGISTER and
#                 the contexts on both receive IBV_EVENT_DEVICE_FATAL.
#   module-unload `rmmod metaroce`: succeeds with both devices' contexts open; both devices go, their
#                 contexts receive IBV_EVENT_DEVICE_FATAL.
#   kill-9        SIGKILL to the client: it is gone at once and its QPs are released (rdma res); the
#                 server of a WRITE or READ test exits by itself when its TCP control connection
#                 closes (ib_send_bw's server polls its receive CQ forever and is killed).
#   netns-kill    SIGKILL to every process of mrb, then `ip netns del mrb`: mra0 (whose veth end goes
#                 with vb) is removed and its contexts receive IBV_EVENT_DEVICE_FATAL.
#
# For every case: the action finishes within 120 s, every process ends (by itself where said above,
# else SIGKILL) and is reaped within 10 s of the kill, no task is left in D state, no QP of the tool
# is left; the devices are then re-created and the next repetition runs. The repetitions
# alternate the link type (metaroce, metaroce-native) and the tool (ib_write_bw, ib_send_bw,
# ib_read_bw). At the end: a pingpong proves the re-created devices work, no verbs object is left
# (rdma res), the module unloads, and kmemleak and the console report nothing from RDMA/Rust code.
# Repetitions: MR_TEARDOWN_REPS per case (make check 1 of the link-delete case, check-full 50 or as many as start within
# MR_TEARDOWN_BUDGET seconds, 2000 by default; the count reached is printed).
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
reps=${MR_TEARDOWN_REPS:-$([ -n "${MR_FULL:-}" ] && echo 50 || echo 1)}
budget=${MR_TEARDOWN_BUDGET:-$([ -n "${MR_FULL:-}" ] && echo 2000 || echo 100000)}
# make check runs one of the six cases (link-delete: ~40-110 s under TCG+KASAN, depending on the
# machine; netdev delete, module unload, namespace deletion and process exit under an open context
# have their own tests without load, 33, 34, 35 and 59's c9); check-full all six.
cases=${MR_TEARDOWN_CASES:-$([ -n "${MR_FULL:-}" ] && echo "link-delete down-up netdev-delete module-unload kill-9 netns-kill" ||
  echo "link-delete")}
mr_netns_exclusive
cleanup() {
  kill -9 $cli $srv $wa $wb 2>/dev/null
  ip netns del mra 2>/dev/null; ip netns del mrb 2>/dev/null
  mr_wait 30 mr_no_dev mra0; mr_wait 30 mr_no_dev mrb0
  mr_netns_restore
}
cli= srv= wa= wb=
trap cleanup EXIT

# Namespaces, veth, addresses and devices of link type $1, whatever is missing of them.
setup() {
  local type=$1
  ip netns list | grep -qw mra || ip netns add mra || fail "netns mra"
  ip netns list | grep -qw mrb || ip netns add mrb || fail "netns mrb"
  ip -n mra link set lo up && ip -n mrb link set lo up || fail "lo up"
  if ! ip -n mra link show va >/dev/null 2>&1; then
    ip -n mrb link del vb 2>/dev/null
    ip link add va netns mra type veth peer name vb netns mrb || fail "veth pair"
    ip -n mra addr add $MR_ADDR_A/24 dev va && ip -n mra -6 addr add $MR_ADDR6_A/64 dev va nodad || fail "addresses a"
    ip -n mrb addr add $MR_ADDR_B/24 dev vb && ip -n mrb -6 addr add $MR_ADDR6_B/64 dev vb nodad || fail "addresses b"
    ip -n mra link set va up && ip -n mrb link set vb up || fail "link up"
  fi
  # A device of the other link type goes first.
  local ns dev nd
  for ns in mra mrb; do
    dev=${ns}0 nd=$([ $ns = mra ] && echo va || echo vb)
    if ip netns exec $ns rdma link show 2>/dev/null | grep -q "link $dev/"; then
      ip netns exec $ns rdma link show $dev/1 2>/dev/null | grep -q "netdev $nd" &&
        [ "$(cat /tmp/td-type-$dev 2>/dev/null)" = "$type" ] && continue
      ip netns exec $ns rdma link delete $dev || fail "delete $dev of the other type"
    fi
    ip netns exec $ns rdma link add $dev type $type netdev $nd || fail "add $dev ($type)"
    echo $type > /tmp/td-type-$dev
  done
  ga=$(mr_ns_gid mra mra0 $MR_ADDR_A 30); [ -n "$ga" ] || fail "no RoCE v2 GID for $MR_ADDR_A on mra0"
  gb=$(mr_ns_gid mrb mrb0 $MR_ADDR_B 30); [ -n "$gb" ] || fail "no RoCE v2 GID for $MR_ADDR_B on mrb0"
}

sent() { ip netns exec mrb rdma statistic show link mrb0/1 2>/dev/null | awk '{ for (i = 1; i < NF; i++) if ($i == "sent_pkts") print $(i + 1) }'; }
# Packets both devices sent; the READ server's responses count on mra0.
moved() { local a b
  a=$(ip netns exec mra rdma statistic show link mra0/1 2>/dev/null | awk '{ for (i = 1; i < NF; i++) if ($i == "sent_pkts") print $(i + 1) }')
  b=$(sent); echo $(( ${a:-0} + ${b:-0} )); }
# Both devices together sent at least $2 packets since the count was $1.
moved_since() { [ $(( $(moved) - $1 )) -ge $2 ]; }

# Starts TOOL between mra0 (server) and mrb0 (client), until stopped, and waits for traffic; an
# ibv_asyncwatch on each device records the asynchronous events every user context receives
# (perftest itself reads none).
port=19300
start_load() {
  local tool=$1 m0
  port=$((port + 1))
  ip netns exec mra stdbuf -oL ibv_asyncwatch -d mra0 > /tmp/td-wa.log 2>&1 &
  wa=$!
  ip netns exec mrb stdbuf -oL ibv_asyncwatch -d mrb0 > /tmp/td-wb.log 2>&1 &
  wb=$!
  ip netns exec mra $tool -d mra0 -x $ga -p $port -s 65536 -q 2 --run_infinitely -D 2 -F > /tmp/td-s.log 2>&1 &
  srv=$!
  mr_wait 60 sh -c "ip netns exec mra ss -Hltn 'sport = :$port' | grep -q ." || { cat /tmp/td-s.log; fail "$tool: server not listening"; }
  ip netns exec mrb $tool -d mrb0 -x $gb -p $port -s 65536 -q 2 --run_infinitely -D 2 -F $MR_ADDR_A > /tmp/td-c.log 2>&1 &
  cli=$!
  m0=$(moved)
  mr_wait 60 moved_since $m0 500 ||
    { cat /tmp/td-c.log /tmp/td-s.log; fail "$tool: no traffic within 60 s"; }
}

# The watcher of device $1 (a or b) reported event $2 within 10 s.
event() { mr_wait 10 grep -q "$2" /tmp/td-w$1.log || { cat /tmp/td-w$1.log; fail "$c: no $2 on ${1/a/mra0}${1/b/mrb0}"; }; }

# Sets END to how process $1 ended within $2 s ("exit N after T s"), or to "" if it still runs.
# (Not a command substitution: `wait` only works in the shell that started the process.)
ended() { local pid=$1 t=$2 t0=$SECONDS rc
  END=
  while kill -0 $pid 2>/dev/null && (( SECONDS - t0 < t )); do sleep 0.2; done
  kill -0 $pid 2>/dev/null && return 0
  wait $pid 2>/dev/null; rc=$?; END="exit $rc after $((SECONDS - t0)) s"; }

# A process that must end: END says how it ended by itself within $2 s, or "killed after $2 s"
# (SIGKILL; reap checks it goes).
ended_or_killed() { ended $1 $2; [ -n "$END" ] || { kill -9 $1; END="killed after $2 s"; }; }

# Kills what is left of the processes and checks they are reaped; fails on a task in D state.
reap() { local p
  for p in $cli $srv $wa $wb; do kill -9 $p 2>/dev/null; done
  for p in $cli $srv $wa $wb; do
    mr_wait 10 sh -c "! kill -0 $p 2>/dev/null" || { ps -o pid,stat,wchan:32,cmd -p $p; fail "pid $p survives SIGKILL"; }
    wait $p 2>/dev/null
  done
  cli= srv= wa= wb=
  local d; d=$(ps -eo stat,pid,wchan:32,comm | awk '$1 ~ /^D/')
  [ -z "$d" ] || { echo "$d"; fail "tasks in D state"; }
}

run_case() { # CASE TYPE TOOL
  local type=$2 tool=$3 t0 took cend send moved0 how=
  c=$1
  setup $type
  start_load $tool
  t0=$SECONDS
  case $c in
    link-delete) timeout 120 ip netns exec mrb rdma link delete mrb0 || fail "$c: rdma link delete mrb0"
                 mr_no_dev mrb0 || fail "$c: mrb0 still there";;
    down-up)     ip -n mrb link set vb down || fail "$c: down"
                 mr_wait 10 sh -c "ip netns exec mrb ibv_devinfo -d mrb0 | grep -q PORT_DOWN" || fail "$c: mrb0 port not DOWN"
                 sleep 3
                 ip -n mrb link set vb up || fail "$c: up"
                 mr_wait 30 sh -c "ip netns exec mrb ibv_devinfo -d mrb0 | grep -q PORT_ACTIVE" || fail "$c: mrb0 port not ACTIVE again";;
    netdev-delete) timeout 120 ip -n mrb link del vb || fail "$c: ip link del vb"
                 mr_wait 60 sh -c '! ip netns exec mrb rdma dev | grep -q mrb0' || fail "$c: mrb0 not removed"
                 mr_wait 60 sh -c '! ip netns exec mra rdma dev | grep -q mra0' || fail "$c: mra0 not removed";;
    module-unload) timeout 120 rmmod metaroce || fail "$c: rmmod metaroce"
                 mr_no_dev mra0 && mr_no_dev mrb0 || fail "$c: devices left after unload";;
    kill-9)      kill -9 $cli; mr_wait 10 sh -c "! kill -0 $cli 2>/dev/null" || fail "$c: client survives SIGKILL";;
    netns-kill)  ip netns pids mrb | xargs -r kill -9
                 timeout 120 ip netns del mrb || fail "$c: ip netns del mrb"
                 mr_wait 60 sh -c '! ip netns exec mra rdma dev | grep -q mra0' || fail "$c: mra0 not removed";;
  esac
  took=$((SECONDS - t0))
  (( took <= 120 )) || fail "$c: the action took $took s"
  case $c in
    link-delete)
      event b IBV_EVENT_DEVICE_FATAL
      ended_or_killed $cli 5; how="client $END"; ended_or_killed $srv 5; how="$how, server $END";;
    down-up)
      event b IBV_EVENT_PORT_ERR; event b IBV_EVENT_PORT_ACTIVE
      # Either the transfer failed (completion error) or it moves data again.
      moved0=$(moved)
      ended $cli 20
      if [ -n "$END" ]; then how="client failed ($END: $(grep -m1 -iE 'error|fail|couldn' /tmp/td-c.log))"
      else
        mr_wait 30 moved_since $moved0 500 ||
          { tail -n 5 /tmp/td-c.log /tmp/td-s.log; fail "$c: transfer neither failed nor resumed"; }
        how="transfer resumed"
      fi;;
    netdev-delete|module-unload)
      event a IBV_EVENT_DEVICE_FATAL; event b IBV_EVENT_DEVICE_FATAL
      ended_or_killed $cli 5; how="client $END"; ended_or_killed $srv 5; how="$how, server $END";;
    kill-9)
      # The killed client's objects go. The servers of WRITE and READ tests wait on their TCP
      # control connection and end by themselves; ib_send_bw's polls its receive CQ forever.
      mr_wait 30 sh -c "! ip netns exec mrb rdma res show qp | grep -q $tool" ||
        { ip netns exec mrb rdma res show; fail "$c: the killed client's QPs remain"; }
      ended_or_killed $srv 20
      [ $tool = ib_send_bw ] || [ "${END#exit}" != "$END" ] || { tail -n 5 /tmp/td-s.log; fail "$c: $tool server did not end by itself"; }
      how="server $END";;
    netns-kill)
      event a IBV_EVENT_DEVICE_FATAL
      ended_or_killed $srv 5; how="server $END";;
  esac
  reap
  # Objects of the ended processes are released.
  local ns
  for ns in mra mrb; do
    ip netns list | grep -qw $ns || continue
    mr_wait 30 sh -c "! ip netns exec $ns rdma res show qp | grep -q $tool" ||
      { ip netns exec $ns rdma res show; fail "$c: QPs of $tool left in $ns"; }
  done
  [ $c = module-unload ] && { modprobe metaroce || fail "modprobe metaroce"; rm -f /tmp/td-type-*; }
  [ $c = link-delete ] && rm -f /tmp/td-type-mrb0
  echo "ok $c rep $rep ($type, $tool): action $took s; $how"
}

# Kernel memory in KiB after dropping caches: slab objects in use (/proc/slabinfo) plus vmalloc
# (a native connection lives in vmalloc). Measured after every repetition, at the same point of the
# rotation, so that a leak shows as growth over many repetitions where kmemleak is absent (the
# release kernel); its noise is the rest of the kernel's churn, hence only printed.
kmem_kib() {
  sync; echo 3 > /proc/sys/vm/drop_caches
  awk 'FNR == 1 { f++ } f == 1 && $1 !~ /^(#|slabinfo)/ { s += $2 * $4 }
       f == 2 && $1 == "VmallocUsed:" { v = $2 } END { printf "%d\n", s / 1024 + v }' /proc/slabinfo /proc/meminfo
}
t_all=$SECONDS
types=(metaroce metaroce-native) tools=(ib_write_bw ib_send_bw ib_read_bw)
kmem=()
i=0 done_reps=0
for ((rep = 1; rep <= reps; rep++)); do
  # make check-full stops starting repetitions when its time budget is spent (the suite's
  # per-test limit is 2400 s; one repetition of the six cases takes ~5 min under KASAN and TCG).
  (( SECONDS - t_all < budget )) || break
  k=0
  for c in $cases; do
    # Over six repetitions every case meets every (link type, tool) pair.
    run_case $c ${types[$(((rep + k) % 2))]} ${tools[$(((rep + k) % 3))]}
    i=$((i + 1)) k=$((k + 1))
  done
  done_reps=$rep
  # (Only printed from three repetitions on: make check's single one skips the cache drop.)
  (( reps >= 3 )) && [ -r /proc/slabinfo ] && kmem+=("$(kmem_kib)")
done
echo "$i teardowns under load ($done_reps of $reps repetitions of each case) in $((SECONDS - t_all)) s"
# Repetition 1 warms caches; the growth from the end of repetition 2 on is what a leak would add.
[ ${#kmem[@]} -ge 3 ] && echo "kernel memory (slab + vmalloc) after repetitions 2..$done_reps: ${kmem[1]} .. ${kmem[-1]} KiB" \
  "($(( (kmem[-1] - kmem[1]) * 1024 / ((done_reps - 2) * $(echo $cases | wc -w)) )) bytes per teardown;" \
  "every 10th: $(for ((j = 1; j < ${#kmem[@]}; j += 10)); do printf '%s ' ${kmem[j]}; done))"
[ "$done_reps" -ge 1 ] || fail "no repetition ran"

# The last devices serve a fresh transfer.
setup metaroce-native
mr_pingpong ibv_rc_pingpong "rc_pingpong after the teardowns" mra mra0 $ga mrb mrb0 $gb -s 65536 -n 20
for ns in mra mrb; do
  n=$(ip netns exec $ns rdma res show qp | grep -vc 'type GSI' || true)
  [ "$n" = 0 ] || { ip netns exec $ns rdma res show qp; fail "$ns: $n QPs left"; }
  for r in mr cq pd; do
    n=$(ip netns exec $ns rdma res show $r | grep -c 'comm ib_\|comm ibv_' || true)
    [ "$n" = 0 ] || { ip netns exec $ns rdma res show $r; fail "$ns: $n user ${r}s left"; }
  done
done
ip netns del mra; ip netns del mrb
mr_wait 30 mr_no_dev mra0 && mr_wait 30 mr_no_dev mrb0 || fail "devices left with their namespaces gone"
mr_wait 30 rmmod metaroce || fail "metaroce does not unload after the teardowns"
mr_kmemleak_ours && echo "kmemleak: nothing from RDMA/Rust code"
mr_dmesg_clean
