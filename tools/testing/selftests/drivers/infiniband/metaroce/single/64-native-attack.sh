#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The attack suite's native part (issue 32, finding 4, items 2 and 3): forged MetaRoCE packets from
# an off-path host. Two metaroce-native devices, mra0 (192.0.2.1) and mrb0 (192.0.2.2), and a third
# namespace mrc (192.0.2.200) that reaches mra only through mrb and spoofs mrb's address. A native
# RC pair (attack.py rc-pair) exchanges one SEND, then stays quiet for more than 1 s; mrc then
# sends, as 192.0.2.2:
#   * 40 SENDs of a made-up connection id to the live QP (native_inject.py data-restart): a
#     restart attempt. Before the fix the receiving half took any new id after 1 s of quiet and
#     placed them (and the real peer's next message was refused: WrongConn);
#   * 100 PROOFs with guessed cookies (proof-guess) and 20 CHALLENGEs (challenge-forged);
#   * then a flood, FLOOD (500) of each kind, written with the live connection ids (read from
#     debugfs: an attacker who learned them, the strongest one without keys): ACKs to mra0's idle
#     sending half whose CumSeq and SACK would retire data it never sent, with rate hints of
#     2^32-1 and 0 (ack-cum-ahead), ACKs and DATA on path ids out of range (ack-bad-path,
#     data-bad-path), DATA to a stream id no QP has (data-unknown-stream), DATA with a Dsn far
#     ahead (data-dsn-far) and more restart SENDs (data-restart).
# Round 1, plain mode. Expected: no forged receive completes and no buffer changes; the real
# peer's next SEND arrives intact; mra0 counts native_unproven >= 40, sends at least one
# CHALLENGE (to mrb0, which answers with its own id: nothing changes), native_bad_proofs >= 100,
# native_restarts 0; mrb0 refuses the PROOFs mra0 sent for the forged challenges; the flood is
# counted: rcvd_dropped grows by at least the 4 x FLOOD ACKs and DATA that consistency checks
# refuse, native_duplicates by at least FLOOD (data-unknown-stream: an old Dsn, acknowledged and
# never placed), and mra0 sends no DATA (no forged ACK made it retransmit or send).
# Round 2, authenticated mode (transport.rst 13.1): both devices again, with a fabric key each
# (logon keys metaroce:va and metaroce:vb, the same 32 bytes), the same pair and forgeries.
# Expected: the pair works, nothing forged is placed, and every forged packet is refused before
# the connection sees it: native_auth_errors >= 160 + 6 x FLOOD, native_unproven and
# native_challenges 0.
# No kernel warning in either round.
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
mr_two_devices metaroce-native
KEYS=
trap 'for k in $KEYS; do /usr/bin/python3 "$MR_SELFTESTS/logon_key.py" del $k >/dev/null 2>&1; done
      ip netns del mrc 2>/dev/null; mr_two_namespaces_cleanup' EXIT
echo "GID indices: mra0 $ga, mrb0 $gb"
mr_third_namespace
INJ="$MR_SELFTESTS/native_inject.py"
FLOOD=500
DBG=/sys/kernel/debug
[ -d $DBG/metaroce_mra0 ] || mount -t debugfs none $DBG 2>/dev/null
[ -r $DBG/metaroce_mra0/connections ] || fail "no $DBG/metaroce_mra0/connections (the test kernel has debugfs)"
# conn DEV PEER: the debugfs lines of DEV's connection to address PEER; field: a counter summed
# over them (a path counter sums its paths).
conn() { awk -v p="$2" '$1 == "connection" { s = ($5 == p) } s' $DBG/metaroce_$1/connections; }
field() { conn $1 $2 | grep -o "[ {]$3: [0-9]*" | awk '{ s += $2 } END { print s + 0 }'; }
/usr/bin/python3 "$INJ" --self-check || fail "native_inject.py self-check"

# stat NS DEV NAME: one counter of DEV (0 if the device has no such counter).
stat() { local v; v=$(ip netns exec $1 rdma statistic show link $2/1 | tr ' ' '\n' | awk -v n="$3" 'p { print; exit } $0 == n { p = 1 }'); echo "${v:-0}"; }
names="native_unproven native_challenges native_bad_proofs native_restarts native_auth_errors rcvd_dropped
       native_duplicates"

# round NAME: the RC pair, the forgeries from mrc during its quiet spell, and the outcome: sets
# res ("forged_completed changed g2_intact"), bres (the peer's send statuses), d_<counter> (mra0's
# counters' growth) and bp (mrb0's native_bad_proofs growth).
round() {
  local D=/tmp/attack-native-$1 pa pb n end
  MR_RC_PAIR_WHAT="$1: " mr_rc_pair $D
  echo "$1: native RC QP $qpn on mra0, its peer on mrb0; first SEND received"
  # The peer quiet for more than 1 s (restart_idle): from here a new id is a restart candidate.
  sleep 1.5
  for n in $names; do eval "a0_$n=$(stat mra mra0 $n)"; done
  local bp0 rp0; bp0=$(stat mrb mrb0 native_bad_proofs)
  # What mra0 took in, forged packets included (refused ones too).
  took() { echo $(( $(stat mra mra0 rcvd_pkts) + $(stat mra mra0 native_auth_errors) )); }
  rp0=$(took)
  # The live ids: mra0's (ACKs to its sending half carry it), mrb0's (its DATA carries it).
  local A B t0; A=$(conn mra0 $MR_ADDR_B | awk 'NR == 1 { print $2 }') B=$(conn mrb0 $MR_ADDR_A | awk 'NR == 1 { print $2 }')
  [ -n "$A" ] && [ -n "$B" ] || { cat $DBG/metaroce_mra0/connections $DBG/metaroce_mrb0/connections; fail "$1: no connection in debugfs"; }
  sent0=$(field mra0 $MR_ADDR_B data_sent)
  local S="$MR_ADDR_B $MR_ADDR_A" live="conn=$B,stream=$qpn"
  t0=$SECONDS
  ip netns exec mrc /usr/bin/python3 "$INJ" $S 40 data-restart:conn=0x01020304,stream=$qpn \
    $S 100 proof-guess:conn=0x5b5b5e5e $S 20 challenge-forged \
    $S $FLOOD ack-cum-ahead:conn=$A $S $FLOOD ack-bad-path:conn=$A $S $FLOOD data-bad-path:$live \
    $S $FLOOD data-dsn-far:$live $S $FLOOD data-unknown-stream:conn=$B $S $FLOOD data-restart:$live \
    || fail "$1: injection from mrc"
  echo "$1: $((160 + 6 * FLOOD)) forged packets sent in $((SECONDS - t0)) s (mra0 id $A, mrb0 id $B)"
  end=$((SECONDS + 60)); until [ $(( $(took) - rp0 )) -ge $((160 + 6 * FLOOD)) ] || [ $SECONDS -ge $end ]; do sleep 0.5; done
  touch $D/go
  end=$((SECONDS + 120)); until [ -e $D/result ] || [ $SECONDS -ge $end ]; do sleep 0.5; done
  [ -e $D/result ] || { cat $D/a.log $D/b.log; fail "$1: the victim gave no result"; }
  end=$((SECONDS + 60)); until [ -e $D/b-result ] || [ $SECONDS -ge $end ]; do sleep 0.5; done
  wait $pa; wait $pb
  res=$(cat $D/result) bres=$(cat $D/b-result 2>/dev/null)
  for n in $names; do eval "d_$n=\$(( \$(stat mra mra0 $n) - a0_$n ))"; done
  bp=$(( $(stat mrb mrb0 native_bad_proofs) - bp0 ))
  echo "$1: forged completions, buffers changed, second SEND intact: $res; peer's send statuses: $bres"
  echo "$1: mra0: native_unproven +$d_native_unproven native_challenges +$d_native_challenges" \
    "native_bad_proofs +$d_native_bad_proofs native_restarts +$d_native_restarts" \
    "native_auth_errors +$d_native_auth_errors rcvd_dropped +$d_rcvd_dropped" \
    "native_duplicates +$d_native_duplicates; mrb0: native_bad_proofs +$bp"
  sent=$(( $(field mra0 $MR_ADDR_B data_sent) - sent0 ))
  [ "$sent" = 0 ] || fail "$1: forged ACKs made mra0 send $sent DATA packets"
  set -- $res
  [ "$1 $2" = "0 0" ] || fail "forged SENDs of a new connection id were placed: $1 completions, $2 buffers changed"
  [ "$3" = 1 ] || fail "the real peer's next SEND did not arrive intact after the forgery"
  [ "$bres" = "0 0" ] || fail "the real peer's sends did not both succeed: $bres"
}
# Round 1: plain mode.
round plain
[ "$d_native_unproven" -ge 40 ] || fail "native_unproven +$d_native_unproven, expected >= 40"
[ "$d_native_challenges" -ge 1 ] || fail "no CHALLENGE sent for the unproven id"
[ "$d_native_bad_proofs" -ge 100 ] || fail "native_bad_proofs +$d_native_bad_proofs, expected >= 100"
[ "$d_native_restarts" = 0 ] || fail "a restart was accepted: $d_native_restarts"
[ "$bp" -ge 1 ] || fail "mrb0 refused none of the PROOFs mra0 sent for the forged CHALLENGEs"
[ "$d_rcvd_dropped" -ge $((4 * FLOOD)) ] || fail "rcvd_dropped +$d_rcvd_dropped, expected >= $((4 * FLOOD)) (the flood)"
[ "$d_native_duplicates" -ge $FLOOD ] || fail "native_duplicates +$d_native_duplicates, expected >= $FLOOD"
ip netns exec mra rdma statistic show link mra0/1

# Round 2: the authenticated mode.
KEY=5d41402abc4b2a76b9719d911017c5925d41402abc4b2a76b9719d911017c592
for d in "mra va" "mrb vb"; do
  set -- $d
  ip netns exec $1 rdma link delete ${1}0 || fail "delete ${1}0"
  /usr/bin/python3 "$MR_SELFTESTS/logon_key.py" add metaroce:$2 $KEY || fail "key metaroce:$2"
  KEYS="$KEYS metaroce:$2"
  ip netns exec $1 rdma link add ${1}0 type metaroce-native netdev $2 || fail "add ${1}0 (authenticated)"
  dmesg | grep -q "${1}0: added on netdev $2 (MetaRoCE native, authenticated with key metaroce:$2;" \
    || { dmesg | grep "${1}0: added" | tail -1; fail "${1}0 is not in the authenticated mode"; }
done
ga=$(mr_ns_gid mra mra0 $MR_ADDR_A) gb=$(mr_ns_gid mrb mrb0 $MR_ADDR_B)
[ -n "$ga" ] && [ -n "$gb" ] || fail "no RoCE v2 GIDs on the authenticated devices"
round authenticated
[ "$d_native_auth_errors" -ge $((160 + 6 * FLOOD)) ] ||
  fail "native_auth_errors +$d_native_auth_errors, expected >= $((160 + 6 * FLOOD)) (every forged packet)"
[ "$d_native_unproven" = 0 ] && [ "$d_native_challenges" = 0 ] \
  || fail "forged packets reached the connection in the authenticated mode"
ip netns exec mra rdma statistic show link mra0/1
mr_dmesg_clean
