//! Deterministic multipath network simulator for the MetaRoCE native
//! transport (`metaroce_proto::conn`), with a RoCEv2 go-back-N model run
//! over the same network for comparison.
//!
//! Virtual time, one seed for every random choice: a run is reproducible
//! bit for bit. See `Documentation/metaroce/protocol-core.rst`.

pub mod ep;
pub mod net;
pub mod sim;
