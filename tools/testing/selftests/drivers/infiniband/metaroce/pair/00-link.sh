#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The QEMU socket link carries IPv4 and IPv6 UDP both ways between the two guests.
MR_FULL_ONLY="make check's hour: every later test of the suite crosses the same link"
. "$(dirname "$0")/../lib.sh"
python3 "$MR_SELFTESTS/udp_echo.py" "$MR_ROLE" "$(mr_self)" "$(mr_peer)" || fail "IPv4 UDP exchange"
python3 "$MR_SELFTESTS/udp_echo.py" "$MR_ROLE" \
  "$([ "$MR_ROLE" = a ] && echo $MR_ADDR6_A || echo $MR_ADDR6_B)" \
  "$([ "$MR_ROLE" = a ] && echo $MR_ADDR6_B || echo $MR_ADDR6_A)" || fail "IPv6 UDP exchange"
