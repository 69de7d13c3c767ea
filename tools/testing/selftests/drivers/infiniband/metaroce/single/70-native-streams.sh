#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A connection's 256 streams (issue 34, item 4): 256 RC QP pairs between one address of mra0 and
# one of mrb0, so all on one native connection per device, each moving a 4 KiB SEND checked byte
# for byte; a 257th QP towards the same peer fails with ENOSPC; memory per connection with its
# QPs bound; then the QPs go and the connection is reaped. 69-native-scale's steps, with
# 1 x 1 addresses and MR_SCALE_Q=256.
. "$(dirname "$0")/../lib.sh"
[ -n "${MR_FULL:-}" ] || [ -n "${MR_STREAMS_TEST:-}" ] || skip "make check-full only (256 QP pairs under TCG)"
MR_SCALE_NA=1 MR_SCALE_NB=1 MR_SCALE_Q=${MR_SCALE_Q:-256} exec bash "$(dirname "$0")/69-native-scale.sh"
