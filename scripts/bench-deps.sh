#!/usr/bin/env bash
# What `make bench` needs beyond `make deps`: matplotlib for the plots (Debian's package, for
# Debian's python3). Kept out of deps.sh, which CI runs.
set -euo pipefail
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null && exit 0
echo "bench-deps: installing python3-matplotlib"
apt-get install -y -q --no-install-recommends python3-matplotlib >/dev/null 2>&1 ||
  { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends python3-matplotlib >/dev/null; }
/usr/bin/python3 -c 'import matplotlib'
