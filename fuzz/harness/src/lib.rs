// SPDX-License-Identifier: GPL-2.0
//! Fuzz harnesses for the MetaRoCE protocol core (`metaroce-proto`).
//!
//! Each module is one fuzz target: `run(data)` decodes the fuzzer's bytes
//! (through [`arbitrary`] for the structured targets), drives the protocol
//! core and panics on any broken invariant. The targets in `fuzz/` are
//! one-line wrappers, so the same code runs on stable in this crate's tests
//! (which replay the checked-in seeds) and under libFuzzer on nightly.
//!
//! Every structured input has a byte encoding that the decoder reads field
//! by field (little-endian integers, one byte per tag, missing bytes read as
//! zero, the way [`arbitrary::Unstructured`] does), and an encoder, so that
//! hand-made seeds are written as Rust values (`seeds.rs`).

#[cfg(not(debug_assertions))]
compile_error!("the fuzz harness needs debug assertions and overflow checks");

/// Declares a target's whole input, `Input { cfg: Cfg, steps: Vec<Step> }`, in the module that
/// invokes it: decoded from the fuzzer's bytes by the module's `Cfg::decode` and
/// `steps(u, MAX_STEPS)`, and encoded back (for seeds) by `Cfg::encode` and `Step::encode`.
/// The argument documents `cfg`.
macro_rules! target_input {
    ($cfg_doc:literal) => {
        /// A whole input.
        #[derive(Clone, Debug, Default)]
        pub struct Input {
            #[doc = $cfg_doc]
            pub cfg: Cfg,
            /// Steps.
            pub steps: Vec<Step>,
        }

        impl Input {
            /// Encodes the input.
            pub fn encode(&self) -> Vec<u8> {
                let mut e = Enc::default();
                self.cfg.encode(&mut e);
                for s in &self.steps {
                    s.encode(&mut e);
                }
                e.0
            }
        }

        impl<'a> arbitrary::Arbitrary<'a> for Input {
            fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
                Ok(Input {
                    cfg: Cfg::decode(u)?,
                    steps: steps(u, MAX_STEPS)?,
                })
            }
            fn arbitrary_take_rest(mut u: Unstructured<'a>) -> Result<Self> {
                Self::arbitrary(&mut u)
            }
        }
    };
}

pub mod conn;
pub mod enc;
pub mod fixtures;
pub mod headers;
pub mod icrc_mutate;
pub mod mem;
pub mod mrc_packet;
pub mod packet;
pub mod psn;
pub mod requester;
pub mod responder;
pub mod sack;
pub mod seeds;

/// True when `METAROCE_FUZZ_TRACE` is set: the harnesses print every step
/// (for reproducing a crash with `cargo test`, not under libFuzzer).
pub fn trace() -> bool {
    static T: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *T.get_or_init(|| std::env::var_os("METAROCE_FUZZ_TRACE").is_some())
}

/// True when `METAROCE_FUZZ_STATS` is set: the harnesses count what the
/// inputs reached (drop reasons, completion statuses, retries...), to judge
/// a corpus's coverage on stable (see the `corpus_stats` test).
pub fn stats_on() -> bool {
    static T: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *T.get_or_init(|| std::env::var_os("METAROCE_FUZZ_STATS").is_some())
}

static COUNTS: std::sync::Mutex<std::collections::BTreeMap<String, u64>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Adds `n` to counter `key` (only with [`stats_on`]).
pub fn count(key: impl FnOnce() -> String, n: u64) {
    if stats_on() && n > 0 {
        *COUNTS.lock().unwrap().entry(key()).or_default() += n;
    }
}

/// The counters so far.
pub fn counts() -> std::collections::BTreeMap<String, u64> {
    COUNTS.lock().unwrap().clone()
}
