# Shared helpers for MetaRoCE selftests (sourced; bash). Addresses are documentation ranges only.
MR_SELFTESTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MR_ADDR_A=192.0.2.1 MR_ADDR_B=192.0.2.2
MR_ADDR6_A=2001:db8::1 MR_ADDR6_B=2001:db8::2

skip() { echo "SKIP: $*"; exit 4; }
fail() { echo "FAIL: $*"; exit 1; }

# This guest's and the peer's addresses in a two-guest shape (MR_ROLE a or b).
mr_self() { [ "$MR_ROLE" = a ] && echo $MR_ADDR_A || echo $MR_ADDR_B; }
mr_peer() { [ "$MR_ROLE" = a ] && echo $MR_ADDR_B || echo $MR_ADDR_A; }

# Configures eth0, the QEMU socket link between the two guests.
mr_link_up() {
  ip link set eth0 up
  ip addr add "$(mr_self)/24" dev eth0
  ip -6 addr add "$([ "$MR_ROLE" = a ] && echo $MR_ADDR6_A || echo $MR_ADDR6_B)/64" dev eth0 nodad
}

# Both guests of a pair wait here until the other arrives with the same name.
mr_barrier() { python3 "$MR_SELFTESTS/barrier.py" "$MR_ROLE" "$MR_ADDR_A" "$1" "${2:-240}"; }

# Runs a command and retries while it fails (the peer's server may not listen yet).
mr_retry() { local n=$1; shift; local i; for ((i = 0; i < n; i++)); do "$@" && return 0; sleep 1; done; return 1; }

# Reads a netdev statistic.
mr_netstat() { cat "/sys/class/net/$1/statistics/$2"; }

# True when running on MetaRoCE's own kernel (its release carries the -mr suffix).
mr_our_kernel() { uname -r | grep -q -- '-mr'; }
