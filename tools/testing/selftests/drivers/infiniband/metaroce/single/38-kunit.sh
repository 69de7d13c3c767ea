#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The KUnit suites of the Rust networking and RDMA abstractions (built into the test kernel): their
# boot-time results, then a re-run of the UDP tunnel suite with loopback up, whose round trip
# (route, build, send, encap_rcv, IPv4 and IPv6) was skipped at boot because lo was still down.
. "$(dirname "$0")/../lib.sh"
k=/sys/kernel/debug/kunit
[ -d $k ] || skip "no $k (CONFIG_KUNIT_DEBUGFS off or debugfs not mounted)"
for s in rust_metaroce_skbuff rust_metaroce_udp_tunnel rust_metaroce_shared_buf rust_metaroce_umem rust_metaroce_checksum rust_metaroce_tx_budget rust_metaroce_ticket rust_metaroce_fastreg; do
  [ -r "$k/$s/results" ] || fail "suite $s is not in this kernel"
  echo "boot: $s"; sed 's/^/  /' "$k/$s/results"
  grep -q '^not ok' "$k/$s/results" && fail "suite $s failed at boot"
done
# (The results files carry the suite's status: "ok" means every case passed or was skipped, and
# the skb cases never skip.)
grep -qx 'ok 1 rust_metaroce_skbuff' $k/rust_metaroce_skbuff/results || fail "rust_metaroce_skbuff did not pass"
grep -qx 'ok 1 rust_metaroce_shared_buf' $k/rust_metaroce_shared_buf/results || fail "rust_metaroce_shared_buf did not pass"
grep -qx 'ok 1 rust_metaroce_umem' $k/rust_metaroce_umem/results || fail "rust_metaroce_umem did not pass"
grep -qx 'ok 1 rust_metaroce_checksum' $k/rust_metaroce_checksum/results || fail "rust_metaroce_checksum did not pass"
for s in rust_metaroce_tx_budget rust_metaroce_ticket rust_metaroce_fastreg; do
  grep -qx "ok 1 $s" $k/$s/results || fail "$s did not pass"
done

ip link set lo up || fail "lo up"
dmesg -c >/dev/null
echo run > $k/rust_metaroce_udp_tunnel/run || fail "cannot re-run rust_metaroce_udp_tunnel"
echo "re-run:"; sed 's/^/  /' $k/rust_metaroce_udp_tunnel/results
r=$k/rust_metaroce_udp_tunnel/results
grep -q '^not ok' $r && fail "rust_metaroce_udp_tunnel failed"
grep -qx 'ok 1 rust_metaroce_udp_tunnel' $r || fail "rust_metaroce_udp_tunnel did not pass"
dmesg | grep -q 'loopback round trip passed (IPv4, IPv6)' || fail "the loopback round trip did not run (skipped?): $(dmesg | tail -5)"
true
