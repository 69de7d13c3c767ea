# rdma-core's own test suite (python3-pyverbs 44) on a `metaroce-native` device: its RC traffic tests
# (loopback on one device: one native connection from the device to itself) run over the native
# transport, UC and UD over RoCEv2. Prints every test's line and the skip reasons; fails on any
# failure or error. make check-full only (about 10 minutes under TCG); interop/50-pyverbs runs the
# suite on a RoCEv2 device in make check.
. "$MR_SELFTESTS/lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
[ -n "${MR_FULL:-}" ] || [ -n "${MR_TESTBED:-}" ] || skip "make check-full only (about 10 minutes under TCG)"
mr_fresh
mr_veth_up
trap 'rdma link delete mrn0 2>/dev/null; ip link del v0 2>/dev/null' EXIT
rdma link add mrn0 type metaroce-native netdev v0 || fail "add mrn0"
mr_wait 10 test -n "$(mr_gid_index mrn0 $MR_ADDR_A)" || fail "no RoCE v2 GID for $MR_ADDR_A"
gid=$(mr_gid_index mrn0 $MR_ADDR_A)
mr_pyverbs mrn0 $gid || fail "pyverbs did not run to its summary"
rdma statistic show link mrn0/1
# Known, with the reason (README): SEND with invalidate has no native opcode yet, so the remote
# invalidation of a type 2 memory window completes with IBV_WC_LOC_QP_OP_ERR.
known="test_mw_type2_invalidate_remote"
unexpected=$(for t in $PV_FAILED; do case " $known " in *" $t "*) ;; *) echo "$t";; esac; done)
[ -z "$unexpected" ] || fail "pyverbs on a native device: $PV_FAIL failed or errors; unexpected: $unexpected"
echo "known failures: ${PV_FAILED:-none}"
[ "$PV_OK" -gt 0 ] || fail "pyverbs ran no test"
mr_dmesg_clean
