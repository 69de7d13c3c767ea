// SPDX-License-Identifier: GPL-2.0
//! Fuzz target `mrc_packet`: see `metaroce_fuzz_harness::mrc_packet`.
#![no_main]
#![feature(cfg_overflow_checks)]

// The kernel has CONFIG_RUST_OVERFLOW_CHECKS=y: refuse a build without them.
#[cfg(not(overflow_checks))]
compile_error!("fuzz builds need overflow checks (fuzz/Cargo.toml [profile.release])");

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    metaroce_fuzz_harness::mrc_packet::run(data);
});
