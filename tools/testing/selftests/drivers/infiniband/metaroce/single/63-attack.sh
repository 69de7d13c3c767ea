#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The attack suite (issue 32; ReDMArk, USENIX Security 2021, is the model): what a remote host
# without keys, and a local process, could do with the defects a source review found. Each check
# fails on the code before its fix.
# Network part: mra0 (192.0.2.1) has a UC QP whose address vector names mrb0 (192.0.2.2). A third
# namespace mrc (192.0.2.200, routed through mrb) knows the QPN and sends 20 forged UC SEND-only
# packets with correct ICRCs; mrb sends 20 more from a spoofed third address (192.0.2.3, "another
# address on the link"). Expected: no receive completes, no buffer changes, 40 drops counted
# (rcvd_bad_addr). Control: the same packets from mrb's own address are placed (so the injection
# itself works and the check can fail).
# R_Key guessing (ReDMArk's key attack), from mrc spoofing the peer's address (so the address
# check passes: the strongest off-path sender) with forged UC RDMA WRITE-only packets at a UC QP
# whose QPN and buffer address the attacker is given; each guess writes its own number, so the
# target tells which guess landed. (1) 256 guesses in the key layout before the fix (index << 8):
# that layout's key is hit at guess index + 1 (before the fix, always); now only if the random
# key byte happens to be 0, at the same guess (checked either way). (2) every key in order from 0
# up to the end of the victim's table index: hit exactly at guess R_Key + 1, no other byte written.
# PSN guessing: a RoCEv2 RC pair (attack.py rc-pair) exchanges one SEND; mrc, spoofing the peer's
# address, sends 200 RC SEND-only packets at guessed PSNs to the live QP. Expected: none placed
# (p = 200 / 2^24 that one hits the expected PSN), the real peer's next SEND arrives intact and
# both its sends succeed.
# Verbs part (attack.py local): key churn, access revoked on a live QP, one CQ error event per
# overflow, bounded ring flushes under a racing process.
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
mr_two_devices
trap 'ip netns del mrc 2>/dev/null; mr_two_namespaces_cleanup' EXIT
echo "GID indices: mra0 $ga, mrb0 $gb"
ADDR_SPOOF=192.0.2.3
mr_third_namespace

stat() { ip netns exec mra rdma statistic show link mra0/1 | tr ' ' '\n' | awk -v n="$1" 'p { print; exit } $0 == n { p = 1 }'; }
# victim DIR: starts attack.py's UC victim on mra0 and waits for its QPN (in $qpn).
victim() {
  rm -rf "$1"; mkdir -p "$1"
  ip netns exec mra timeout 300 /usr/bin/python3 "$MR_SELFTESTS/attack.py" uc-victim mra0 "$ga" $MR_ADDR_B "$1" > "$1/log" 2>&1 &
  local pid=$!
  mr_wait 120 sh -c "test -e $1/qpn || ! kill -0 $pid 2>/dev/null"
  [ -e "$1/qpn" ] || { cat "$1/log"; fail "the UC victim did not start"; }
  qpn=$(cat "$1/qpn")
}
# verdict DIR SECONDS: lets the victim poll, then prints "completed changed".
verdict() {
  echo "$2" > "$1/go"
  mr_wait 120 test -e "$1/result"
  [ -e "$1/result" ] || { cat "$1/log"; fail "the UC victim gave no result"; }
  cat "$1/result"
}

bad0=$(stat rcvd_bad_addr)
[ -n "$bad0" ] || fail "no rcvd_bad_addr counter"
victim /tmp/attack-uc
echo "victim UC QP $qpn on mra0 (peer $MR_ADDR_B)"
ip netns exec mrc python3 "$MR_SELFTESTS/roce_inject.py" $ADDR_C $MR_ADDR_A 20 uc-send:$qpn || fail "injection from mrc"
ip netns exec mrb python3 "$MR_SELFTESTS/roce_inject.py" $ADDR_SPOOF $MR_ADDR_A 20 uc-send:$qpn || fail "injection from a spoofed address"
counted() { [ "$(( $(stat rcvd_bad_addr) - bad0 ))" -ge 40 ]; }
mr_wait 30 counted
res=$(verdict /tmp/attack-uc 3)
bad=$(( $(stat rcvd_bad_addr) - bad0 ))
echo "forged UC SENDs: 40 sent (20 off-path via mrb, 20 spoofed on the link); victim: completed/changed $res; rcvd_bad_addr +$bad"
[ "$res" = "0 0" ] || fail "forged UC SENDs were placed into the victim's receives: $res"
[ "$bad" -ge 40 ] || fail "rcvd_bad_addr +$bad, expected +40"

# Control: the same packets from the peer's own address are taken (UC accepts a first/only packet
# at any PSN): the injection path works, so the check above can fail.
victim /tmp/attack-uc2
ip netns exec mrb python3 "$MR_SELFTESTS/roce_inject.py" $MR_ADDR_B $MR_ADDR_A 20 uc-send:$qpn || fail "injection from the peer's address"
res=$(verdict /tmp/attack-uc2 5)
echo "control, from the peer's address: completed/changed $res"
[ "${res% *}" -ge 1 ] && [ "${res#* }" -ge 1 ] || fail "packets from the peer's own address were not placed ($res): the check above proves nothing"

# counters: mra0's counters as "name value" lines.
counters() { ip netns exec mra rdma statistic show link mra0/1 | tr ' ' '\n' | awk 'NF { if (n) { print n, $0; n = "" } else n = $0 }' | grep -v '^link\|^[0-9]'; }
# grown FILE: the counters that grew since FILE (a counters snapshot), as "name +delta".
grown() { counters | awk 'NR == FNR { a[$1] = $2; next } $1 in a && $2 != a[$1] { printf "%s +%d ", $1, $2 - a[$1] }' "$1" -; }
# wvictim DIR: starts attack.py's UC WRITE victim, sets wq, wva, wrk (QPN, address, R_Key).
wvictim() {
  rm -rf "$1"; mkdir -p "$1"
  ip netns exec mra timeout 300 /usr/bin/python3 "$MR_SELFTESTS/attack.py" uc-write-victim mra0 "$ga" $MR_ADDR_B "$1" > "$1/log" 2>&1 &
  local pid=$!
  mr_wait 120 sh -c "test -e $1/target || ! kill -0 $pid 2>/dev/null"
  [ -e "$1/target" ] || { cat "$1/log"; fail "the UC WRITE victim did not start"; }
  read -r wq wva wrk < "$1/target"
}
counters > /tmp/attack-c0
drop0=$(stat rcvd_dropped)
wvictim /tmp/attack-wr1
idx=$((wrk >> 8)) byte=$((wrk & 255))
[ $idx -lt 64 ] || fail "the victim's MR has table index $idx: the sweeps below assume a small one"
ip netns exec mrc python3 "$MR_SELFTESTS/roce_inject.py" $MR_ADDR_B $MR_ADDR_A 256 uc-write:$wq:$wva:old || fail "old-layout guesses"
res=$(verdict /tmp/attack-wr1 2)
want=0; [ $byte = 0 ] && want=$((idx + 1))
echo "R_Key guessing, old layout (index << 8): R_Key $(printf %#x $wrk) (index $idx); hit by guess ${res% *} of 256" \
  "(before the fix: guess $((idx + 1))); other bytes changed ${res#* }"
[ "$res" = "$want 0" ] || fail "old-layout guesses: hit/changed '$res', expected '$want 0'"
wvictim /tmp/attack-wr2
n=$(( ((wrk >> 8) + 1) * 256 ))
ip netns exec mrc python3 "$MR_SELFTESTS/roce_inject.py" $MR_ADDR_B $MR_ADDR_A $n uc-write:$wq:$wva:all || fail "key sweep"
res=$(verdict /tmp/attack-wr2 2)
echo "R_Key guessing, every key in order: R_Key $(printf %#x $wrk) hit by guess ${res% *} of $n; other bytes changed ${res#* }"
[ "$res" = "$((wrk + 1)) 0" ] || fail "key sweep: hit/changed '$res', expected '$((wrk + 1)) 0'"
echo "mra0 counters grown by the guesses: $(grown /tmp/attack-c0)"
# Every guess that missed is a counted drop.
miss=$(( 256 - (want > 0) + n - 1 )) d=$(( $(stat rcvd_dropped) - drop0 ))
[ $d -ge $miss ] || fail "rcvd_dropped +$d for $miss missed key guesses"

# PSN guessing on a live RoCEv2 RC pair.
D=/tmp/attack-rc
mr_rc_pair $D
counters > /tmp/attack-c1
drop0=$(stat rcvd_dropped)
ip netns exec mrc python3 "$MR_SELFTESTS/roce_inject.py" $MR_ADDR_B $MR_ADDR_A 200 rc-send:$qpn || fail "PSN guesses"
sleep 1
touch $D/go
end=$((SECONDS + 120)); until [ -e $D/result ] && [ -e $D/b-result ] || [ $SECONDS -ge $end ]; do sleep 0.5; done
wait $pa; wait $pb
res=$(cat $D/result 2>/dev/null) bres=$(cat $D/b-result 2>/dev/null)
echo "PSN guessing: 200 forged RC SENDs; forged completions, buffers changed, second SEND intact: $res;" \
  "peer's send statuses: $bres; mra0 counters grown: $(grown /tmp/attack-c1)"
[ "$res" = "0 0 1" ] || { cat $D/a.log $D/b.log; fail "PSN guesses: '$res', expected '0 0 1'"; }
[ "$bres" = "0 0" ] || { cat $D/b.log; fail "the real peer's sends did not both succeed: $bres"; }
d=$(( $(stat rcvd_dropped) - drop0 )); [ $d -ge 200 ] || fail "rcvd_dropped +$d for 200 PSN guesses"

ip netns exec mra timeout -k 10 900 /usr/bin/python3 "$MR_SELFTESTS/attack.py" local mra0 "$ga" e; rc=$?
ip netns exec mra rdma statistic show link mra0/1

# Memory cgroup: a process's ring memory is charged to its group (attack.py memcg). The test
# kernel has memory cgroups (configs/test.config); other kernels may not.
cgroot=/sys/fs/cgroup
[ -e $cgroot/cgroup.controllers ] || mount -t cgroup2 none $cgroot || fail "mount cgroup2"
if grep -qw memory $cgroot/cgroup.controllers; then
  echo +memory > $cgroot/cgroup.subtree_control || fail "enable the memory controller"
  mkdir -p $cgroot/mrattack
  # `ip netns exec` mounts its own /sys: the cgroup2 hierarchy is mounted again inside.
  out=$(ip netns exec mra sh -c 'mount -t cgroup2 none /sys/fs/cgroup && echo $$ > /sys/fs/cgroup/mrattack/cgroup.procs &&
          exec /usr/bin/python3 "$0" memcg mra0 "$1"' "$MR_SELFTESTS/attack.py" "$ga" 2>&1); mrc=$?
  echo "$out"
  oom=$(awk '$1 == "oom_kill" { print $2 }' $cgroot/mrattack/memory.events)
  echo "memcg: exit $mrc, oom_kill ${oom:-0}"
  rmdir $cgroot/mrattack
  grep -q "^created 32 " <<<"$out" && fail "32 QPs (160 MiB of rings) created under a 16 MiB limit: ring memory is not charged"
  grep -q "^created 1 " <<<"$out" || fail "memcg: not even one QP was created (the case did not run)"
  grep -q "^refused" <<<"$out" || [ "${oom:-0}" -gt 0 ] || fail "memcg: QP creation neither refused nor OOM-killed"
elif uname -r | grep -q -- '-mr-test'; then fail "no memory controller in the test kernel (CONFIG_MEMCG)"
else echo "memcg: this kernel has no memory controller; the case needs the test kernel"
fi

# A native device on the same netdev: connections to made-up destinations do not fill its table.
ip netns exec mra rdma link delete mra0 || fail "delete mra0"
ip netns exec mra rdma link add mrn0 type metaroce-native netdev va || fail "add mrn0 (native)"
# 80 made-up hosts 192.0.2.100-179 with permanent neighbour entries (modify_qp resolves the MAC).
for i in $(seq 100 179); do ip -n mra neigh replace 192.0.2.$i lladdr 02:00:5e:10:00:$(printf %02x $((i - 100))) dev va nud permanent; done
gn=$(mr_ns_gid mra mrn0 $MR_ADDR_A); [ -n "$gn" ] || fail "no RoCE v2 GID for $MR_ADDR_A on mrn0"
ip netns exec mra timeout -k 10 600 /usr/bin/python3 "$MR_SELFTESTS/attack.py" local mrn0 "$gn" n1 n2; rc2=$?
ip netns exec mra rdma statistic show link mrn0/1
ip netns exec mra rdma link delete mrn0
mr_dmesg_clean
[ "$rc" = 0 ] || fail "attack.py local: some cases did not behave as expected (see above)"
[ "$rc2" = 0 ] || fail "attack.py local n1, n2 (native peer table, per-context quota): see above"
