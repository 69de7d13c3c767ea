#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Network namespaces joined by veth act as hosts (shape a): UDP crosses between them.
. "$(dirname "$0")/../lib.sh"
[ -n "${MR_FULL:-}" ] || skip "make check-full only (make check's hour: the harness's two-namespace set-up; every two-namespace test from 36-rx on crosses the same veth)"
ip netns add mra && ip netns add mrb || fail "ip netns add"
trap 'ip netns del mra; ip netns del mrb' EXIT
ip link add va netns mra type veth peer name vb netns mrb || fail "veth pair"
ip -n mra addr add $MR_ADDR_A/24 dev va && ip -n mrb addr add $MR_ADDR_B/24 dev vb
ip -n mra link set va up && ip -n mrb link set vb up && ip -n mra link set lo up && ip -n mrb link set lo up
ip netns exec mra python3 "$MR_SELFTESTS/udp_echo.py" a $MR_ADDR_A $MR_ADDR_B & srv=$!
sleep 0.5
ip netns exec mrb python3 "$MR_SELFTESTS/udp_echo.py" b $MR_ADDR_B $MR_ADDR_A || fail "UDP between namespaces"
wait $srv || fail "echo server"
