#!/usr/bin/env bash
# The main job (README): builds the release kernel with MetaRoCE, boots it under QEMU, shows the
# module live, and runs the RoCEv2 protocol core in the deterministic lossy-network simulator.
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
echo "== booting it under QEMU ($( [ -w /dev/kvm ] && echo 'KVM if it works, else ' )TCG)"
guest_kernel release
rc=0
"$repo/qemu/run-guest.sh" --name demo --kernel "${K[0]}" --modules "${K[1]}" --out "$OUT/guest" \
  --cmd "$repo/qemu/demo-guest.sh" --smp 2 --timeout "$MR_TIMEOUT" >/dev/null || rc=$?
sed 's/^/  guest| /' "$OUT/guest/output.log" 2>/dev/null || true
[ "$rc" = 0 ] || { echo "demo guest failed ($rc); console: $OUT/guest/console.log"; exit 1; }
echo "== RoCEv2 protocol core: 2 endpoints, 1% loss, 1% duplication, 1% reordering (simulated)"
(cd "$repo" && cargo run -q --release --locked -p roce-sim -- --seed 1 --loss 0.01 --dup 0.01 --reorder 0.01) | sed 's/^/  sim| /'
echo "== done in $(( $(date +%s) - t0 )) s; logs in $OUT"
