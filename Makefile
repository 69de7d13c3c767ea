# MetaRoCE: top-level commands. See README.md.
#   make demo        build the release kernel, boot it, show MetaRoCE (the main job)
#   make check       what CI runs: host tests + test kernel in every QEMU shape (TAP, N passed/failed)
#   make check-full  check plus the longer matrices (simulator sweep, release-kernel shapes)
#   make kernel      build the test kernel (FLAVOUR=release for the other); make -s kernel-paths
#   make deps        install pinned dependencies (run by the others)
#   make provider    build libmetaroce (providers/metaroce) and install it for libibverbs
#   make bench       release-kernel guests: MetaRoCE vs rdma_rxe vs TCP, out/bench/ (BENCH_QUICK=1: short)
#   make profile     perf profiles of both guests of each bench pair during a 64 KiB WRITE, out/profile/
#   make patches     the overlay as a git format-patch series against the pinned 7.3.4, out/patches/
#   make fuzz        libFuzzer targets of the protocol core, FUZZ_SECONDS (default 60) each (nightly)
FLAVOUR ?= test
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: all deps provider bench-deps kernel kernel-release kernel-paths host-test check check-full demo bench profile cluster patches sim fuzz clean-cache

all: demo

deps:
	@scripts/deps.sh

provider: deps
	@$(MAKE) -s -C providers/metaroce install O=$(CURDIR)/out/provider

kernel: deps
	@scripts/kernel.sh $(FLAVOUR)

kernel-release: deps
	@scripts/kernel.sh release

kernel-paths:
	@scripts/kernel.sh $(FLAVOUR) paths

host-test:
	cargo test --workspace --locked

sim:
	cargo run -q --release -p roce-sim -- --seed 1 --loss 0.01 --dup 0.01 --reorder 0.01

check:
	@scripts/check.sh

check-full:
	@METAROCE_FULL=1 scripts/check.sh

demo:
	@scripts/demo.sh

# Not part of deps (CI runs that): matplotlib, for the plots of `make bench` only.
bench-deps:
	@scripts/bench-deps.sh

bench:
	@scripts/bench.sh

profile:
	@scripts/profile.sh

cluster:
	@scripts/cluster.sh

patches: deps
	@scripts/patches.sh

fuzz:
	@scripts/fuzz.sh
