#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The QEMU link carries UDP both ways (the pair suite's test).
. "$(dirname "$0")/../lib.sh"
bash "$MR_SELFTESTS/pair/00-link.sh"
