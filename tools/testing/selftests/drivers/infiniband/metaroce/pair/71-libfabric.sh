#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# libfabric (Debian's 1.17, unmodified) between two MetaRoCE guests, in RoCEv2 mode (mr0) and native
# mode (mn0): fi_info lists the device under the verbs provider, then fi_pingpong with data checks
# (-c), 4 KiB x 100, over a verbs MSG endpoint (RC through rdma_cm) and over an RDM endpoint
# (verbs;ofi_rxm). The RDM run sets FI_UNIVERSE_SIZE=64: ofi_rxm sizes its CQ as (rx + tx queue) x
# the universe size, 65,536 entries by default, beyond a soft-RoCE device's 32,767 (rdma_rxe's
# limit too), and fi_enable fails with EINVAL. Expected: every run reports its 100 transfers.
MR_FULL_ONLY="with pair/70-ucx: the engines run in check-full and make cluster"
. "$(dirname "$0")/../lib.sh"
mr_our_kernel || skip "peer runs $(uname -r), not MetaRoCE's kernel"
# About 2 minutes on the test kernel; make check keeps pair/70-ucx, which takes the same RC and UD
# paths through an engine.
command -v fi_pingpong >/dev/null || skip "fi_pingpong not installed (Debian's libfabric-bin)"
trap mr_roce_back EXIT
# Both guests run one fi_pingpong (guest a serves on control port $2, b connects, retrying while
# a does not listen yet); the output is left in MR_OUT. Usage: fi_pair NAME PORT COMMAND...
fi_pair() {
  local name=$1 port=$2; shift 2
  mr_barrier "$name" || { MR_OUT="$name: the peer never arrived"; return 1; }
  if [ "$MR_ROLE" = a ]; then
    MR_OUT=$(timeout 150 "$@" -B "$port" 2>&1)
  else
    MR_OUT=$(mr_retry 20 timeout 150 "$@" -P "$port" "$(mr_peer)" 2>&1)
  fi
}
port=47600 failed=0
for dev in mr0 mn0; do
  if [ $dev = mn0 ]; then mr_native_dev || fail "mn0 (native)"; else mr_rdma_dev || fail "RDMA device"; fi
  fi_info -p verbs -d $dev >/tmp/fi_info.out 2>&1 && grep -q "domain: $dev" /tmp/fi_info.out \
    || { head -5 /tmp/fi_info.out; echo "FAILED fi_info lists no verbs domain $dev"; failed=1; }
  # NAME PROVIDER ENDPOINT ENV...
  for run in "msg verbs msg" "rdm verbs;ofi_rxm rdm FI_UNIVERSE_SIZE=64"; do
    set -- $run; name=$1 prov=$2 ep=$3; shift 3
    port=$((port + 1))
    fi_pair "fi-$dev-$name" $port env "$@" fi_pingpong -p "$prov" -e $ep -d $dev -I 100 -S 4096 -c
    rc=$?
    line=$(grep -E '^4k +100 +=100 ' <<<"$MR_OUT")
    if [ $rc != 0 ] || [ -z "$line" ]; then
      echo "$MR_OUT" | tail -n 6; echo "FAILED $dev $name ($prov, $ep): exit $rc"; failed=1; continue
    fi
    echo "$dev $name ($prov, $ep): $(tr -s ' ' <<<"$line")"
  done
done
mr_dmesg_clean
[ $failed = 0 ] || fail "some runs failed (see above)"
