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

# Fails on any sanitizer, lockdep or WARN report in dmesg.
mr_dmesg_clean() {
  local bad
  bad=$(dmesg | grep -E 'WARNING:|BUG:|KASAN|UBSAN|Oops|general protection|possible circular|inconsistent lock|unreferenced object|refcount_t:|waiting for .* to become free') || return 0
  echo "$bad"
  fail "kernel reported problems (see above)"
}

# True when running on MetaRoCE's own kernel (its release carries the -mr suffix).
mr_our_kernel() { uname -r | grep -q -- '-mr'; }

# The index of the RoCE v2 GID of IPv4 address $2 in device $1's table (empty if none yet).
mr_gid_index() {
  local want g n
  want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' $(tr . ' ' <<<"$2"))
  for g in /sys/class/infiniband/$1/ports/1/gids/*; do
    n=${g##*/}
    [ "$(cat "$g")" = "$want" ] && [ "$(cat "/sys/class/infiniband/$1/ports/1/gid_attrs/types/$n" 2>/dev/null)" = 'RoCE v2' ] \
      && { echo "$n"; return; }
  done
}

# This pair guest's RDMA device on eth0: MetaRoCE (mr0) on our kernel, rdma_rxe (rxe0) on Debian's.
# Creates it if needed and sets MR_DEV and MR_GID (the RoCE v2 GID index of this guest's IPv4 address).
mr_rdma_dev() {
  local type i
  if mr_our_kernel; then MR_DEV=mr0 type=metaroce; else MR_DEV=rxe0 type=rxe; fi
  [ -e "/sys/class/infiniband/$MR_DEV" ] || rdma link add "$MR_DEV" type "$type" netdev eth0 || return 1
  for ((i = 0; i < 100; i++)); do
    MR_GID=$(mr_gid_index "$MR_DEV" "$(mr_self)")
    [ -n "$MR_GID" ] && ibv_devinfo -d "$MR_DEV" | grep -q PORT_ACTIVE && return 0
    sleep 0.1
  done
  echo "no active port with a RoCE v2 GID for $(mr_self) on $MR_DEV"; return 1
}

# Both guests of a pair run one rdma-core/perftest tool: the server on role $2, the client on the
# other role connecting to it. Usage: mr_pair_run NAME SERVER_ROLE PORT TOOL ARGS...; the tool's
# output is left in $MR_OUT. The client retries while the server is not listening yet.
mr_pair_run() {
  local name=$1 srole=$2 port=$3 tool=$4; shift 4
  mr_barrier "$name" || { echo "$name: the peer never arrived"; return 1; }
  if [ "$MR_ROLE" = "$srole" ]; then
    MR_OUT=$(timeout 150 "$tool" "$@" -p "$port" 2>&1)
  else
    MR_OUT=$(mr_retry 20 timeout 150 "$tool" "$@" -p "$port" "$(mr_peer)" 2>&1)
  fi
}
