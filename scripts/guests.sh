# Host-side helpers to boot the test shapes (sourced by scripts/check.sh and scripts/demo.sh).
# Needs: repo, OUT (a directory for logs) set by the caller.
. "$repo/scripts/versions.env"
MR_CACHE=${METAROCE_CACHE:-$HOME/.cache/metaroce}
# Pair guests: the interop suite (rc_pingpong and perftest, both directions) takes ~10 min here
# beside a shape (a) guest, ~25 min on the slowest CI machine seen.
MR_TIMEOUT=${METAROCE_GUEST_TIMEOUT:-3000}
# A single guest runs single-host tests in one boot: the whole suite took ~24 min here beside other
# guests (2026-12-03), which on the slowest CI machine seen (2.3-2.6x slower) means ~60 min. The
# timeout only bounds a hang (each test has its own, 900 s): it stays under CI's 90 minutes.
MR_SINGLE_TIMEOUT=${METAROCE_SINGLE_TIMEOUT:-4800}

# Kernel image, modules dir and initrd ("" if none) of a kernel kind: test | release | baseline | rxe-abi | peer.
guest_kernel() {
  case "$1" in
    test|release|baseline|rxe-abi) mapfile -t K < <("$repo/scripts/kernel.sh" "$1" paths); K+=("");;
    peer) mapfile -t K < <("$repo/qemu/peer-kernel.sh")
          # The initramfs is rebuilt whenever the scripts that make it change.
          local initrd; initrd=$MR_CACHE/peer/initramfs-$(cat "$repo"/qemu/{mkinitramfs.sh,initramfs-init} | sha256sum | cut -c1-12).cpio.gz
          [ -f "$initrd" ] || "$repo/qemu/mkinitramfs.sh" "${K[1]}" "$initrd"
          K+=("$initrd");;
  esac
}

# The guest selftests are a kselftest target (tools/testing/selftests/drivers/infiniband/metaroce,
# one collection per suite), put into the kernel tree by the overlay. ksft_install installs them
# with the kernel's own `make -C tools/testing/selftests install` (kselftest_install.sh's tree:
# run_kselftest.sh, kselftest-list.txt, the collections) into $OUT/ksft, once per run; the guests
# run them from there with kselftest's runner (qemu/ksft-run.sh).
MR_KSFT_COLLECTIONS="single pair interop rxe-pair soak bench profile kmemleak cluster"
ksft_install() {
  MR_KSFT=$OUT/ksft
  [ -f "$MR_KSFT/kselftest-list.txt" ] && return 0
  local src=$MR_CACHE/src/linux-$KERNEL_SRC_VERSION c targets=()
  [ -d "$src/tools/testing/selftests" ] || { echo "ksft_install: no kernel source in $src (scripts/kernel.sh unpacks it)" >&2; return 1; }
  "$repo/scripts/overlay.sh" "$repo" "$src" >/dev/null || return 1
  for c in $MR_KSFT_COLLECTIONS; do targets+=("drivers/infiniband/metaroce/$c"); done
  rm -rf "$MR_KSFT"
  make -s -C "$src/tools/testing/selftests" TARGETS="${targets[*]}" KSFT_INSTALL_PATH="$MR_KSFT" install \
    >"$OUT/ksft-install.log" 2>&1 || { tail -20 "$OUT/ksft-install.log" >&2; return 1; }
  cp "$repo/qemu/ksft-run.sh" "$MR_KSFT/"
}

# Writes the command script a guest runs: a suite of selftests, with the role for pair shapes.
# The kselftest tree is copied beside it, into the guest's output share (/tmp/out in the guest,
# where nothing of the host's /tmp is visible).
# MR_GUEST_ENV (optional): more NAME=VALUE words the guest exports (scripts/bench.sh).
guest_script() { # FILE SUITE [FIRST-LAST] [ROLE]
  local f=$1 suite=$2 range=${3:-} role=${4:-} g=/tmp/out/ksft
  ksft_install || return 1
  rm -rf "$(dirname "$f")/ksft"; cp -a "$MR_KSFT" "$(dirname "$f")/ksft"
  { echo "export MR_FULL=${METAROCE_FULL:-}"
    [ -n "${MR_GUEST_ENV:-}" ] && echo "export $MR_GUEST_ENV"
    [ -n "$role" ] && echo "export MR_ROLE=$role${MR_NODES:+ MR_NODES=$MR_NODES}; . $g/drivers/infiniband/metaroce/lib.sh; mr_link_up"
    echo "bash $g/ksft-run.sh $g $suite $range"
  } >"$f"
}

# Boots one guest (kind, name, suite) alone, 2 vCPUs, namespaces exclusive; FIRST-LAST limits the
# suite to the tests numbered in that range, or in any of several joined by commas
# (qemu/ksft-run.sh). MR_GUEST_APPEND (optional): more kernel command-line words.
run_single() { # KIND NAME SUITE [FIRST-LAST[,FIRST-LAST...]]
  local kind=$1 name=$2 suite=$3 d=$OUT/$2
  guest_kernel "$kind"; mkdir -p "$d"; guest_script "$d/cmd.in" "$suite" "${4:-}" || return 1
  "$repo/qemu/run-guest.sh" --name "$name" --kernel "${K[0]}" --modules "${K[1]}" ${K[2]:+--initrd "${K[2]}"} \
    --out "$d" --cmd "$d/cmd.in" --smp 2 --timeout "$MR_SINGLE_TIMEOUT" \
    --append "ib_core.netns_mode=0${MR_GUEST_APPEND:+ $MR_GUEST_APPEND}"
}

# The two ends of a pair's QEMU link: sets LINK_A and LINK_B (run-guest.sh --net) and LINK_SOCK
# (the unix socket's path, for the caller to remove; empty for TCP). MR_LINK=unix (default): a
# stream over a unix socket, every frame passed on at once. MR_LINK=tcp: a TCP socket on
# 127.0.0.1, as before 2026-12-06: the host's Nagle algorithm holds a small frame behind an
# unacknowledged one until the other end's delayed ACK (the ~22 ms of every SEND round trip).
pair_link() {
  LINK_SOCK=
  case "${MR_LINK:-unix}" in
    unix)
      LINK_SOCK=$(mktemp -u /tmp/mr-link-XXXXXX.sock)
      LINK_A=unix-listen:$LINK_SOCK LINK_B=unix-connect:$LINK_SOCK;;
    tcp)
      local port
      port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
      LINK_A=listen:$port LINK_B=connect:$port;;
    *) echo "MR_LINK is unix or tcp, not $MR_LINK" >&2; return 1;;
  esac
}

# Boots two guests joined by a QEMU link (pair_link), one vCPU each, and waits for both.
# MR_GUEST_APPEND (optional): more kernel command-line words for both guests (scripts/bench.sh).
run_pair() { # KIND_A KIND_B NAME SUITE [FIRST-LAST[,FIRST-LAST...]]
  local ka=$1 kb=$2 name=$3 suite=$4 range=${5:-} rc_a=0 rc_b=0
  pair_link || return 1
  mkdir -p "$OUT/$name-a" "$OUT/$name-b"
  guest_script "$OUT/$name-a/cmd.in" "$suite" "$range" a || return 1
  guest_script "$OUT/$name-b/cmd.in" "$suite" "$range" b || return 1
  guest_kernel "$ka"
  "$repo/qemu/run-guest.sh" --name "$name-a" --kernel "${K[0]}" --modules "${K[1]}" ${K[2]:+--initrd "${K[2]}"} \
    --out "$OUT/$name-a" --cmd "$OUT/$name-a/cmd.in" --timeout "$MR_TIMEOUT" \
    --net "$LINK_A" --mac 52:54:00:00:00:0a ${MR_GUEST_APPEND:+--append "$MR_GUEST_APPEND"} & local pa=$!
  sleep 2
  guest_kernel "$kb"
  "$repo/qemu/run-guest.sh" --name "$name-b" --kernel "${K[0]}" --modules "${K[1]}" ${K[2]:+--initrd "${K[2]}"} \
    --out "$OUT/$name-b" --cmd "$OUT/$name-b/cmd.in" --timeout "$MR_TIMEOUT" \
    --net "$LINK_B" --mac 52:54:00:00:00:0b ${MR_GUEST_APPEND:+--append "$MR_GUEST_APPEND"} || rc_b=$?
  wait "$pa" || rc_a=$?
  [ -z "$LINK_SOCK" ] || rm -f "$LINK_SOCK"
  [ "$rc_a" = 0 ] && [ "$rc_b" = 0 ]
}

# The cluster shape: N guests (one vCPU each) on one L2 segment, a vde_switch whose sockets live
# in a private directory under /tmp (nothing leaves the machine). Guest I (MR_ROLE nI, address
# 192.0.2.I) runs SUITE with MR_NODES=N; node 1 launches the jobs (cluster/*). Waits for all.
run_cluster() { # KIND N NAME SUITE
  local kind=$1 n=$2 name=$3 suite=$4 i rc=0 sw pids=()
  sw=$(mktemp -d /tmp/mr-vde-XXXXXX)
  vde_switch --sock "$sw/ctl" --daemon --pidfile "$sw/pid" --mod 700 || { rm -rf "$sw"; return 1; }
  guest_kernel "$kind"
  for ((i = 1; i <= n; i++)); do
    mkdir -p "$OUT/$name-$i"
    MR_NODES=$n guest_script "$OUT/$name-$i/cmd.in" "$suite" "" "n$i" || { rc=1; break; }
    "$repo/qemu/run-guest.sh" --name "$name-$i" --kernel "${K[0]}" --modules "${K[1]}" ${K[2]:+--initrd "${K[2]}"} \
      --out "$OUT/$name-$i" --cmd "$OUT/$name-$i/cmd.in" --timeout "$MR_TIMEOUT" \
      --net "vde:$sw/ctl" --mac "$(printf '52:54:00:00:01:%02x' "$i")" ${MR_GUEST_APPEND:+--append "$MR_GUEST_APPEND"} &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || rc=1; done
  kill "$(cat "$sw/pid")" 2>/dev/null; rm -rf "$sw"
  return $rc
}

# Lines of a console log that mean the kernel found a bug, whatever the tests said.
console_bugs() {
  grep -E 'BUG:|WARNING:|KASAN|UBSAN|Oops|kernel BUG|general protection|possible (circular|recursive) locking|inconsistent lock state|suspicious RCU usage|unreferenced object|Call Trace:|soft lockup|detected stall|blocked for more than|Kernel panic|rust_panic|CFI failure' "$1" || true
}
