# Rounds of `rdma link add`/`rdma link delete` on one netdev leave no device, no leak report and
# no warning.
. "$MR_SELFTESTS/lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
mr_fresh
trap mr_teardown EXIT
mr_veth_up
# 100 rounds, unless the time budget runs out first: a sanitizer kernel under TCG takes ~10 s per
# round now that every device brings up ib_mad's QP1. `make check` gives it 60 s (CI's time goes
# to the data-path suites), `make check-full` (MR_FULL) 1200 s, enough for all 100 under the
# release kernel; the rest is left for the kmemleak scan and checks.
rounds=${MR_LINK_ROUNDS:-100} budget=${MR_LINK_BUDGET:-$([ -n "${MR_FULL:-}" ] && echo 1200 || echo 20)}
start=$(date +%s)
for ((i = 0; i < rounds; i++)); do
  rdma link add mr0 type metaroce netdev v0 || fail "add in round $i"
  rdma link delete mr0 || fail "delete in round $i"
  (( $(date +%s) - start < budget )) || { i=$((i + 1)); break; }
done
echo "$i of $rounds rounds in $(($(date +%s) - start)) s"
[ "$i" -ge 5 ] || fail "only $i rounds within ${budget} s"
mr_no_dev mr0 || fail "mr0 left behind"
[ -z "$(ls /sys/class/infiniband)" ] || fail "devices left: $(ls /sys/class/infiniband)"
# Leaks of all but the last few rounds are old enough to show in one scan.
mr_kmemleak_ours || true
mr_dmesg_clean
