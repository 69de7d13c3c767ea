#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# UCX (Debian's 1.13, unmodified) between two MetaRoCE guests, in RoCEv2 mode (mr0) and native mode
# (mn0): ucx_perftest's tag-matching latency over UD alone (ud_verbs) and 64 KiB tag bandwidth over
# RC with UD for UCX's connection set-up (rc_verbs,ud_verbs). UCX's UD transport drops every
# received packet whose GRH area does not name one of its GIDs, and takes an IPv4 destination from
# that area only when the completion's sl reports an IPv4 RoCE packet (qp/rx.rs roce_packet_type):
# before that, every UD run ended in "UD endpoint ... unhandled timeout error" (issue 35). Expected:
# every run completes with its final report; in native mode the RC run's data left as native DATA.
MR_FULL_ONLY="make check's hour: 3.5 min; make cluster and check-full run the engines"
. "$(dirname "$0")/../lib.sh"
mr_our_kernel || skip "peer runs $(uname -r), not MetaRoCE's kernel"
command -v ucx_perftest >/dev/null || skip "ucx_perftest not installed (Debian's ucx-utils)"
stat() { rdma statistic show link "$1/1" | tr ' ' '\n' | awk -v n="$2" 'p { print; exit } $0 == n { p = 1 }'; }
trap mr_roce_back EXIT
port=18800 failed=0
for dev in mr0 mn0; do
  if [ $dev = mn0 ]; then mr_native_dev || fail "mn0 (native)"; else mr_rdma_dev || fail "RDMA device"; fi
  data0=$(stat $dev native_data_sent)
  # NAME TLS ARGS...
  for run in "ud ud_verbs -t tag_lat -n 200" "rc rc_verbs,ud_verbs -t tag_bw -s 65536 -n 100"; do
    set -- $run; name=$1 tls=$2; shift 2
    port=$((port + 1))
    mr_ucx_pair "ucx-$dev-$name" a $port $dev "$tls" "$@"
    rc=$?
    [ "$MR_ROLE" = a ] && { [ $rc = 0 ] || { echo "$MR_OUT" | tail -n 8; echo "FAILED $dev $name (server): exit $rc"; failed=1; }; continue; }
    final=$(grep '^Final:' <<<"$MR_OUT")
    if [ $rc != 0 ] || [ -z "$final" ]; then
      echo "$MR_OUT" | grep -v '^ *[0-9]* *0x' | tail -n 8; echo "FAILED $dev $name ($tls $*): exit $rc"; failed=1; continue
    fi
    echo "$dev $name ($tls $*): $(tr -s ' ' <<<"$final")"
  done
  data=$(( $(stat $dev native_data_sent) - data0 ))
  echo "$dev: native DATA packets sent $data"
  if [ $dev = mn0 ] && [ "$MR_ROLE" = b ] && [ "$data" -lt 100 ]; then
    echo "FAILED mn0: the RC run's 6.4 MB left in $data native DATA packets"; failed=1
  fi
  [ $dev = mr0 ] && [ "$data" != 0 ] && { echo "FAILED mr0: $data native DATA packets in RoCEv2 mode"; failed=1; }
done
mr_dmesg_clean
[ $failed = 0 ] || fail "some runs failed (see above)"
