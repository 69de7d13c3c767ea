//! Deterministic two-endpoint network simulator for the MetaRoCE protocol
//! core (`metaroce-proto`).
//!
//! Everything runs in virtual time from a single seed: the same seed gives
//! the same packets, losses and figures on every machine, so a failing
//! seed can be replayed with `roce-sim --seed N`. See
//! `Documentation/metaroce/protocol-core.rst`.

pub mod endpoint;
pub mod net;
pub mod rng;
pub mod sim;
