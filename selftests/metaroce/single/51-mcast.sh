# UD multicast through rdma_cm (librdmacm's unmodified mckey) between two namespaces, IPv4 and
# IPv6: a receiver with two QPs attached to one group (each must receive every datagram: the
# device hands each attached QP a copy) and a sender in the other namespace. rdma_cm joins the IP
# group for both (IGMP/MLD) and attaches the QPs through ibv_attach_mcast; the receiving device's
# counters must show the datagrams arriving for the group, and when the processes are gone no
# attachment is left (the netdev's link-layer multicast list loses the group's address).
. "$MR_SELFTESTS/lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
mr_two_devices
stat() { ip netns exec "$1" rdma statistic show link "$2/1" | tr ' ' '\n' | grep -A1 -x "$3" | tail -n 1; }
count=20

mcast() { # NAME GROUP ADDR_A ADDR_B MAC
  local name=$1 group=$2 a=$3 b=$4 mac=$5 srv r0 n0
  r0=$(stat mra mra0 rcvd_pkts) n0=$(stat mra mra0 rcvd_no_qp)
  ip netns exec mra timeout 120 mckey -m "$group" -b "$a" -c 2 -C $count > /tmp/mc-recv.log 2>&1 &
  srv=$!
  mr_wait 60 grep -q "receiving data transfers" /tmp/mc-recv.log || { cat /tmp/mc-recv.log; fail "$name: receiver did not join"; }
  ip -n mra maddress show dev va | grep -qi "$mac" || { ip -n mra maddress show dev va; fail "$name: $mac not in va's multicast list"; }
  if ! ip netns exec mrb timeout 60 mckey -m "$group" -b "$b" -s -C $count > /tmp/mc-send.log 2>&1; then
    cat /tmp/mc-send.log; fail "$name: sender"
  fi
  if ! wait $srv; then
    cat /tmp/mc-recv.log /tmp/mc-send.log
    ip netns exec mra rdma statistic show link mra0/1
    fail "$name: receiver"
  fi
  grep -q "data transfers complete" /tmp/mc-recv.log || { cat /tmp/mc-recv.log; fail "$name: receiver incomplete"; }
  local got=$(( $(stat mra mra0 rcvd_pkts) - r0 )) noqp=$(( $(stat mra mra0 rcvd_no_qp) - n0 ))
  echo "$name: 2 receiving QPs took $count datagrams each; mra0 took in $got packets, $noqp for no QP"
  [ "$got" -ge $count ] || fail "$name: mra0 took in only $got packets"
  mr_wait 10 sh -c "! ip -n mra maddress show dev va | grep -qi '$mac'" ||
    { ip -n mra maddress show dev va; fail "$name: $mac still in va's multicast list after the receiver left"; }
}
mcast "IPv4 group 239.0.2.1" 239.0.2.1 $MR_ADDR_A $MR_ADDR_B 01:00:5e:00:02:01
mcast "IPv6 group ff05::db8:1" ff05::db8:1 $MR_ADDR6_A $MR_ADDR6_B 33:33:0d:b8:00:01
ip netns exec mra rdma statistic show link mra0/1
mr_dmesg_clean
