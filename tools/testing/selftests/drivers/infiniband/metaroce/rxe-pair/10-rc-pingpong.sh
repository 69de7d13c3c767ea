#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# ibv_rc_pingpong across the link, 4 KiB x 200: both sides must report every byte.
. "$(dirname "$0")/../lib.sh"
size=4096 iters=200
args=(-d rxe0 -g 1 -s "$size" -n "$iters")
if [ "$MR_ROLE" = a ]; then out=$(ibv_rc_pingpong "${args[@]}" 2>&1)
else out=$(mr_retry 30 ibv_rc_pingpong "${args[@]}" "$(mr_peer)" 2>&1); fi
echo "$out"
want=$((size * iters * 2))
echo "$out" | grep -q "^$want bytes in" || fail "expected '$want bytes in' from ibv_rc_pingpong"
echo "$out" | grep -q "^$iters iters in" || fail "expected '$iters iters in'"
