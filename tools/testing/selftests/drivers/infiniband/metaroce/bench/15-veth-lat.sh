#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# 8-byte latency where the link does not hide it (issue 33, item 6): the socket link between the
# pair's guests costs ~22 ms a round trip under TCG for every stack, so guest a also runs
# ib_send_lat between two devices of the provider under test inside itself, each
# on one end of a veth pair in a network namespace of its own (one kernel, two stacks). The raw
# outputs go to vlat-send-rREP.{srv,cli} in the bench directory and vethlat.a.json names them;
# scripts/bench_report.py puts the figures of the pairs side by side (rdma_rxe runs the same on
# Debian's kernel). Guest b has nothing to do here. Both ends wait for completion events (`-e`;
# ib_write_lat polls memory and has no such mode, so it is left out):
# two busy-polling processes on the guest's one vCPU take turns by the scheduler's slice (measured
# 2026-12-05: every stack, rdma_rxe too, at a typical 0.79-0.81 ms, the slice, and MetaRoCE now and
# then at ~4 ms, a tick), which measures the scheduler rather than the stack.
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/bench/bench-lib.bash"
case ${MR_BENCH_PROVIDER:-} in
  metaroce | metaroce-native) type=$MR_BENCH_PROVIDER; modprobe metaroce 2>/dev/null;;
  rxe) type=rxe; modprobe rdma_rxe 2>/dev/null;;
  # The authenticated mode's key is named after eth0 (metaroce:eth0): not for these netdevs.
  *) echo "no veth latency for provider '${MR_BENCH_PROVIDER:-}'"; exit 0;;
esac
# Guest b waits for guest a here, so that the next test's barrier finds both (its wait is 240 s).
if [ "$MR_ROLE" != a ]; then
  echo "the veth latency runs in guest a"
  mr_barrier veth-done 600 || echo "guest a did not finish the veth runs"
  exit 0
fi
iters=$([ -n "${BENCH_QUICK:-}" ] && echo 200 || echo 1000)
A=192.0.2.201 B=192.0.2.202
cleanup() {
  ip netns exec vla rdma link delete vla0 2>/dev/null
  ip netns exec vlb rdma link delete vlb0 2>/dev/null
  ip netns del vla 2>/dev/null; ip netns del vlb 2>/dev/null
}
trap 'cleanup; mr_barrier veth-done 600 >/dev/null' EXIT
cleanup
ip netns add vla && ip netns add vlb || fail "namespaces"
ip link add vla-eth type veth peer name vlb-eth || fail "veth pair"
ip link set vla-eth netns vla && ip link set vlb-eth netns vlb || fail "moving the veth ends"
for n in a b; do
  addr=$([ $n = a ] && echo $A || echo $B)
  ip -n vl$n link set lo up && ip -n vl$n addr add "$addr/24" dev vl$n-eth && ip -n vl$n link set vl$n-eth up \
    || fail "addresses in vl$n"
  ip netns exec vl$n rdma link add vl${n}0 type "$type" netdev vl$n-eth || skip "rdma link add vl${n}0 ($type) in a namespace"
done
gid() { # DEV ADDR: the RoCE v2 GID index of ADDR on DEV, once the port is active
  local i g
  for ((i = 0; i < 100; i++)); do
    g=$(mr_gid_index "$1" "$2")
    [ -n "$g" ] && ibv_devinfo -d "$1" | grep -q PORT_ACTIVE && { echo "$g"; return 0; }
    bench_sleep 0.1
  done
  return 1
}
ga=$(gid vla0 $A) && gb=$(gid vlb0 $B) || fail "no active port with a RoCE v2 GID on vla0/vlb0"
echo "veth pair: vla0 ($A, GID $ga) and vlb0 ($B, GID $gb), $type, $iters iterations per run"
runs=() failed=0 port=20900
# (rdma_rxe of 7.3 in event mode hung in 2 of 3 runs on 2026-12-05: each run is capped at 40 s.)
for ((rep = 1; rep <= BENCH_REPS; rep++)); do
  for op in send; do
    id=vlat-$op-r$rep port=$((port + 1))
    ip netns exec vla timeout 40 "ib_${op}_lat" -d vla0 -x "$ga" -F -e -s 8 -n "$iters" -p $port \
      >"$BENCH_DIR/$id.srv" 2>&1 & spid=$!
    for ((try = 0; try < 30; try++)); do
      ip netns exec vlb timeout 40 "ib_${op}_lat" -d vlb0 -x "$gb" -F -e -s 8 -n "$iters" -p $port $A \
        >"$BENCH_DIR/$id.cli" 2>&1; rc=$?
      [ $rc != 0 ] && grep -qEi "couldn't connect|unable to connect|connection refused" "$BENCH_DIR/$id.cli" || break
      bench_sleep 0.3
    done
    wait $spid; src=$?
    [ $rc = 0 ] && [ $src = 0 ] || { echo "$id: exit $rc (server $src)"; tail -n 3 "$BENCH_DIR/$id.cli"; failed=$((failed + 1)); }
    runs+=("{\"id\":\"$id\",\"op\":\"$op\",\"rep\":$rep,\"rc\":$rc,\"server_rc\":$src}")
    grep -E '^ *8 +[0-9]+ ' "$BENCH_DIR/$id.cli" | sed "s/^ */$id: /"
  done
done
(IFS=,; echo "{\"provider\":\"$MR_BENCH_PROVIDER\",\"kernel\":\"$(uname -r)\",\"iters\":$iters,\"runs\":[${runs[*]}]}") \
  >"$BENCH_DIR/vethlat.a.json"
[ $failed = 0 ] || fail "$failed veth latency run(s) failed"
