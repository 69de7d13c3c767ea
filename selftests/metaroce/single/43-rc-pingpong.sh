# RC traffic between user processes through the stock librxe provider: ibv_rc_pingpong (SEND/RECV
# over an RC QP, user rings, user MRs, user CQs, inline sends for small messages) between two
# namespaces (exclusive netns mode), with received buffers validated
# (-c): 64 B event-driven (-e), 1 MiB polling, and 4 KiB over loopback (server and client on the
# same device).
. "$MR_SELFTESTS/lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
mr_two_devices
echo "GID indices: mra0 $ga, mrb0 $gb"

port=18515
# pingpong NAME SERVER_NS SERVER_DEV SERVER_GID CLIENT_NS CLIENT_DEV CLIENT_GID ARGS...
pingpong() {
  local name=$1 sns=$2 sdev=$3 sgid=$4 cns=$5 cdev=$6 cgid=$7; shift 7
  port=$((port + 1))
  ip netns exec "$sns" timeout 120 ibv_rc_pingpong -d "$sdev" -g "$sgid" -p $port -c "$@" > /tmp/pp-server.log 2>&1 &
  local srv=$!
  mr_wait 60 sh -c "ip netns exec $sns ss -Hltn 'sport = :$port' | grep -q ." || { cat /tmp/pp-server.log; fail "$name: server not listening"; }
  if ! ip netns exec "$cns" timeout 120 ibv_rc_pingpong -d "$cdev" -g "$cgid" -p $port -c "$@" $MR_ADDR_A > /tmp/pp-client.log 2>&1; then
    cat /tmp/pp-client.log /tmp/pp-server.log
    ip netns exec mra rdma statistic show link mra0/1; ip netns exec mrb rdma statistic show link mrb0/1
    fail "$name: client"
  fi
  wait $srv || { cat /tmp/pp-server.log; fail "$name: server"; }
  grep -q "iters in" /tmp/pp-client.log || { cat /tmp/pp-client.log; fail "$name: no result line"; }
  echo "$name: $(grep 'iters in' /tmp/pp-client.log)"
}

# Under the sanitizer kernel and TCG each run costs tens of seconds of process start-up: the
# capped set is one run per size class.
pingpong "loopback 4 KiB" mra mra0 $ga mra mra0 $ga -s 4096 -n 5
pingpong "64 B, events"   mra mra0 $ga mrb mrb0 $gb -s 64 -n 20 -e
pingpong "1 MiB"          mra mra0 $ga mrb mrb0 $gb -s 1048576 -n 1

ip netns exec mra rdma statistic show link mra0/1
ip netns exec mrb rdma statistic show link mrb0/1
mr_dmesg_clean
