#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Kernel memory per RC QP and per connection (mem_probe.py: slab objects, vmalloc'ed rings and
# other pages, as deltas of system-wide counters between phases), in each guest of the pair on its
# own: no traffic, nothing posted. The report puts MetaRoCE's figures beside rdma_rxe's.
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/bench/bench-lib.bash"
bench_dev || fail "RDMA device"
[ -r /proc/slabinfo ] || echo "no /proc/slabinfo: slab figures are /proc/meminfo Slab pages"
out=$BENCH_DIR/memory.$MR_ROLE.json
timeout 300 python3 "$MR_SELFTESTS/mem_probe.py" "$MR_DEV" "$MR_GID" 128 16 15 >"$out" || fail "mem_probe.py"
python3 - "$out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for k in ("qp_created", "qp_rtr", "connection"):
    v = r[k]
    print(f"{k}: slab {v['slab']} B, vmalloc {v['vmalloc']} B, other pages {v['pages']} B")
print("left after destroying every QP:", r["left_after_destroy"])
PY
