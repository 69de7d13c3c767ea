#!/usr/bin/env bash
# The main job (README): builds the release kernel with MetaRoCE, boots two guests on it joined by
# a QEMU socket link, runs RDMA traffic between their MetaRoCE devices with rdma-core's own tools
# and shows the counters, ends with Open MPI collectives across both guests over the native
# transport, then runs the RoCEv2 protocol core in the deterministic simulator.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
OUT=${METAROCE_OUT:-$repo/out}/demo
rm -rf "$OUT"; mkdir -p "$OUT"
. "$repo/scripts/guests.sh"
export PATH="$HOME/.cargo/bin:$PATH"
t0=$(date +%s)
echo "== dependencies"; "$repo/scripts/deps.sh" | tail -1
echo "== release kernel (first build ~15 min on 2 cores, then incremental)"
"$repo/scripts/kernel.sh" release | tail -3
echo "== booting two guests on it under QEMU ($( [ -w /dev/kvm ] && echo 'KVM if it works, else ' )TCG), joined by a QEMU link (${MR_LINK:-unix} socket)"
guest_kernel release
pair_link || exit 1
for r in a b; do
  mkdir -p "$OUT/guest-$r"
  printf 'export MR_SELFTESTS=%s/tools/testing/selftests/drivers/infiniband/metaroce MR_ROLE=%s\nbash %s/qemu/demo-guest.sh\n' \
    "$repo" $r "$repo" >"$OUT/guest-$r/cmd.in"
done
# The MPI program both guests run at the end (qemu/demo-guest.sh), in each one's output share.
for r in a b; do
  mpicc -O2 -o "$OUT/guest-$r/mpi_coll" "$repo/tools/testing/selftests/drivers/infiniband/metaroce/cluster/mpi_coll.c" \
    || { echo "mpicc failed (Debian's libopenmpi-dev; make deps)"; exit 1; }
done
rc_a=0 rc_b=0
"$repo/qemu/run-guest.sh" --name demo-a --kernel "${K[0]}" --modules "${K[1]}" --out "$OUT/guest-a" \
  --cmd "$OUT/guest-a/cmd.in" --timeout "$MR_TIMEOUT" --net "$LINK_A" --mac 52:54:00:00:00:0a >/dev/null & pa=$!
sleep 2
"$repo/qemu/run-guest.sh" --name demo-b --kernel "${K[0]}" --modules "${K[1]}" --out "$OUT/guest-b" \
  --cmd "$OUT/guest-b/cmd.in" --timeout "$MR_TIMEOUT" --net "$LINK_B" --mac 52:54:00:00:00:0b >/dev/null || rc_b=$?
wait $pa || rc_a=$?
[ -z "$LINK_SOCK" ] || rm -f "$LINK_SOCK"
echo "-- server guest (a)"; sed 's/^/  guest-a| /' "$OUT/guest-a/output.log" 2>/dev/null || true
echo "-- client guest (b)"; sed 's/^/  guest-b| /' "$OUT/guest-b/output.log" 2>/dev/null || true
[ "$rc_a" = 0 ] && [ "$rc_b" = 0 ] || { echo "demo guests failed (a $rc_a, b $rc_b); consoles: $OUT/guest-*/console.log"; exit 1; }
echo "== RoCEv2 protocol core: 2 endpoints, 1% loss, 1% duplication, 1% reordering (simulated)"
(cd "$repo" && cargo run -q --release --locked -p roce-sim -- --seed 1 --loss 0.01 --dup 0.01 --reorder 0.01) | sed 's/^/  sim| /'
echo "== done in $(( $(date +%s) - t0 )) s; logs in $OUT"
