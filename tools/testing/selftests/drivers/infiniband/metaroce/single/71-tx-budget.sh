#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Transmit back-pressure (module parameter tx_budget_kb; admin-guide.rst): RoCEv2-mode 64 KiB
# WRITEs from mrb0 whose own link is the bottleneck, tbf at 2 Mbit/s with a 300 KB FIFO on its
# veth (RoCEv2 mode has no congestion control, and its window, 1024 packets, is larger than the
# queue). With the default budget the transmit worker waits for its packets in the stack to be
# freed: the queue drops nothing, send_err stays 0, tx_budget_waits counts the waits. make
# check-full also runs the control: with the bound off (tx_budget_kb=0) the same WRITEs must
# overrun the queue (else this test bed does not test the bound; make check leaves it out for
# its hour: measured 2026-12-07, 433 drops for 12 messages); their drops, send_err and
# retransmissions are printed.
. "$(dirname "$0")/../lib.sh"
. "$MR_SELFTESTS/single/link-common.bash"
trap 'mr_teardown; rmmod metaroce 2>/dev/null' EXIT

# Runs the WRITEs with the module parameters "$@"; sets DROPS (the queue's), SENDERR, RETX, WAITS.
writes() {
  local e0 r0 w0
  mr_fresh
  modprobe metaroce "$@" || fail "modprobe metaroce $*"
  mr_two_devices metaroce
  ip netns exec mrb tc qdisc replace dev vb root tbf rate 2mbit burst 8kb limit 300kb || fail "tbf on vb"
  e0=$(mr_stat mrb mrb0 send_err); r0=$(mr_stat mrb mrb0 retransmits); w0=$(mr_stat mrb mrb0 tx_budget_waits)
  # A 4 s ACK timeout (-u 20): the queue holds up to 1.2 s of packets.
  mr_perf "write_bw 64 KiB x 12 behind 2 Mbit/s${*:+, $*}" ib_write_bw -s 65536 -n 12 -u 20 -F
  DROPS=$(ip netns exec mrb tc -s qdisc show dev vb | sed -n 's/.*(dropped \([0-9]*\),.*/\1/p' | head -n 1)
  SENDERR=$(( $(mr_stat mrb mrb0 send_err) - e0 )); RETX=$(( $(mr_stat mrb mrb0 retransmits) - r0 ))
  WAITS=$(( $(mr_stat mrb mrb0 tx_budget_waits) - w0 ))
  echo "${*:-defaults}: queue drops ${DROPS:-?}, send_err $SENDERR, retransmits $RETX, tx_budget_waits $WAITS"
  [ -n "$DROPS" ] || fail "no tbf statistics on vb"
}

writes
[ "$DROPS" -eq 0 ] || fail "with the budget the queue dropped $DROPS packets"
[ "$SENDERR" -eq 0 ] || fail "with the budget send_err rose by $SENDERR"
[ "$WAITS" -gt 0 ] || fail "the transmit worker never waited for room: the budget was not reached"
[ -n "${MR_FULL:-}" ] || { mr_dmesg_clean; exit 0; }
writes tx_budget_kb=0
[ "$DROPS" -gt 0 ] || fail "without the budget the queue dropped nothing: the test bed does not overrun it"
[ "$WAITS" -eq 0 ] || fail "tx_budget_kb=0 still counted $WAITS waits"
mr_dmesg_clean
