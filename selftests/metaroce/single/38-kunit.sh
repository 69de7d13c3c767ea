# The KUnit suites of the Rust networking abstractions (built into the test kernel): their
# boot-time results, then a re-run of the UDP tunnel suite with loopback up, whose round trip
# (route, build, send, encap_rcv, IPv4 and IPv6) was skipped at boot because lo was still down.
. "$MR_SELFTESTS/lib.sh"
k=/sys/kernel/debug/kunit
[ -d $k ] || skip "no $k (CONFIG_KUNIT_DEBUGFS off or debugfs not mounted)"
for s in rust_metaroce_skbuff rust_metaroce_udp_tunnel; do
  [ -r "$k/$s/results" ] || fail "suite $s is not in this kernel"
  echo "boot: $s"; sed 's/^/  /' "$k/$s/results"
  grep -q '^not ok' "$k/$s/results" && fail "suite $s failed at boot"
done
grep -qE '^ *ok [0-9]+ build_and_parse_round_trip$' $k/rust_metaroce_skbuff/results || fail "skb round trip did not pass"

ip link set lo up || fail "lo up"
echo run > $k/rust_metaroce_udp_tunnel/run || fail "cannot re-run rust_metaroce_udp_tunnel"
echo "re-run:"; sed 's/^/  /' $k/rust_metaroce_udp_tunnel/results
r=$k/rust_metaroce_udp_tunnel/results
grep -q '^not ok' $r && fail "rust_metaroce_udp_tunnel failed"
grep -qE '^ *ok [0-9]+ loopback_ipv4_and_ipv6$' $r || fail "the loopback round trip did not pass (skipped or missing)"
grep -qE '^ *ok [0-9]+ mixed_families_are_refused$' $r || fail "mixed_families_are_refused did not pass"
true
