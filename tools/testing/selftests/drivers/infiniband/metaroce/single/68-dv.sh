#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The metaroce_dv extension API (providers/metaroce/metaroce_dv.h) through its example,
# metaroce_dv_write (two RC QPs on one device, connected to each other, RDMA WRITEs checked byte
# for byte), on a native and a RoCEv2 device:
#  - metaroce_dv_query_device reports the native transport on a native device only, per-QP
#    wire choice on both, and 8 paths;
#  - the default wire of an RC QP on a native device is the native transport (native DATA
#    counted), METAROCE_DV_WIRE_ROCEV2 carries it as RoCEv2 instead (no native DATA, RoCEv2
#    packets counted);
#  - METAROCE_DV_QP_INIT_ATTR_PATHS 2 makes a connection of 2 paths (debugfs), the default one of 8;
#  - metaroce_dv_query_conn reads those paths' figures from the QP's stats page (the same
#    count, transmissions on them), and "not native" for a RoCEv2 QP;
#  - the native wire is refused (EINVAL) on a RoCEv2 device, and paths above the maximum.
. "$(dirname "$0")/../lib.sh"
[ -n "${MR_FULL:-}" ] || skip "make check-full only (make check's hour: 67-provider keeps libmetaroce itself)"
. "$MR_SELFTESTS/single/link-common.bash"
command -v metaroce_dv_write >/dev/null || fail "metaroce_dv_write is not installed (make provider)"
mr_fresh
mr_veth_up
trap 'rdma link delete mrn0 2>/dev/null; rdma link delete mr0 2>/dev/null; ip link del v0 2>/dev/null' EXIT
stat_of() { rdma statistic show link "$1/1" | tr ' ' '\n' | awk -v n="$2" 'p { print; exit } $0 == n { p = 1 }'; }
add() { # TYPE NAME: (re)creates the device, sets gid
  rdma link delete "$2" 2>/dev/null
  rdma link add "$2" type "$1" netdev v0 || fail "add $2 ($1)"
  mr_wait 10 test -n "$(mr_gid_index "$2" $MR_ADDR_A)" || fail "no RoCE v2 GID on $2"
  gid=$(mr_gid_index "$2" $MR_ADDR_A)
}
run() { # DEV ARGS...: metaroce_dv_write, output kept in $out
  local dev=$1; shift
  out=$(timeout 120 metaroce_dv_write -d "$dev" -g "$gid" -s 65536 -n 8 "$@" 2>&1); rc=$?
  echo "$out" | sed 's/^/  /'
  return $rc
}
paths_of() { # DEV: path lines of the device's native connections (debugfs)
  grep -c '^  path ' "/sys/kernel/debug/metaroce_$1/connections" 2>/dev/null
}
run_paths() { # DEV ARGS...: metaroce_dv_write with 400 WRITEs; sets paths to the path count of
  # the connection, read while they run (a connection may be reaped once its QPs are gone)
  local dev=$1; shift
  timeout 120 metaroce_dv_write -d "$dev" -g "$gid" -s 65536 -n 400 "$@" > /tmp/dv.log 2>&1 &
  local pid=$!
  mr_wait 60 sh -c "grep -q '^connection' /sys/kernel/debug/metaroce_$dev/connections" ||
    { kill $pid; cat /tmp/dv.log; fail "no native connection appeared on $dev"; }
  paths=$(paths_of "$dev")
  wait $pid; rc=$?
  out=$(cat /tmp/dv.log)
  echo "$out" | sed 's/^/  /'
  [ "$rc" = 0 ] || fail "metaroce_dv_write $* on $dev (exit $rc)"
}

add metaroce-native mrn0
run_paths mrn0 -p 2
echo "paths of the connection made with -p 2: $paths"
[ "$paths" = 2 ] || { cat /sys/kernel/debug/metaroce_mrn0/connections; fail "-p 2 made a connection of $paths paths"; }
grep -q "native yes, per-QP wire yes, max paths 8" <<<"$out" || fail "query_device on a native device: $out"
grep -q "^connection: paths 2," <<<"$out" || fail "metaroce_dv_query_conn did not report 2 paths"
sent=$(awk '/^  path [0-9]+:/ { for (i = 1; i < NF; i++) if ($i == "sent") s += $(i + 1) } END { print s + 0 }' <<<"$out")
echo "transmissions on the 2 paths (stats page): $sent"
[ "$sent" -gt 0 ] || fail "the stats page shows no transmission"

add metaroce-native mrn0
d0=$(stat_of mrn0 native_data_sent)
run_paths mrn0 -w default
d1=$(stat_of mrn0 native_data_sent)
echo "default wire: native DATA packets $d0 -> $d1, $paths paths"
[ "$d1" -gt "$d0" ] || fail "an RC QP of a native device did not use the native transport by default"
[ "$paths" = 8 ] || fail "the default connection has $paths paths, not 8"
grep -q "^connection: paths 8," <<<"$out" || fail "metaroce_dv_query_conn did not report 8 paths"

s0=$(stat_of mrn0 sent_pkts)
run mrn0 -w rocev2 || fail "RoCEv2 wire on mrn0 (exit $rc)"
d2=$(stat_of mrn0 native_data_sent)
s1=$(stat_of mrn0 sent_pkts)
echo "RoCEv2 wire: native DATA $d1 -> $d2, RoCEv2 packets $s0 -> $s1"
[ "$d2" = "$d1" ] || fail "the RoCEv2 wire sent native DATA"
grep -q "^connection: not native" <<<"$out" || fail "metaroce_dv_query_conn on a RoCEv2 QP: $out"
# 8 WRITEs of 64 KiB over an MTU of 1024: 512 packets at least.
[ $((s1 - s0)) -ge 512 ] || fail "the RoCEv2 wire sent $((s1 - s0)) RoCEv2 packets for 8 x 64 KiB"

run mrn0 -w native -p 9
[ "$rc" = 2 ] && grep -q "Invalid argument" <<<"$out" || fail "9 paths (of 8) were not refused with EINVAL (exit $rc)"
rdma link delete mrn0

add metaroce mr0
run mr0 -w native
[ "$rc" = 2 ] && grep -q "Invalid argument" <<<"$out" || fail "the native wire on a RoCEv2 device was not refused with EINVAL (exit $rc)"
grep -q "native no, per-QP wire yes" <<<"$out" || fail "query_device on a RoCEv2 device: $out"
run mr0 -w rocev2 || fail "RoCEv2 wire on mr0 (exit $rc)"
mr_dmesg_clean
