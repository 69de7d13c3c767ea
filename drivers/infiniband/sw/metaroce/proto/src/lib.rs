// SPDX-License-Identifier: GPL-2.0
//! Sans-I/O RoCEv2 protocol core of the MetaRoCE RDMA provider.
//!
//! The crate parses and builds RoCEv2 transport headers, computes the
//! ICRC, and implements the RC/UC/UD transport state machines (requester,
//! completer, responder) as pure functions of their inputs: packets, posted
//! work requests and the current time. It performs no I/O, reads no clock,
//! allocates nothing and never panics on packet contents; storage for
//! queues is owned by the caller.
//!
//! Module inclusion rule: the kernel module compiles each file below
//! directly with `#[path = "proto/src/<name>.rs"] pub mod <name>;` inside a
//! parent module, so modules are flat sibling files that reach each other
//! only through `super::`. See `Documentation/metaroce/protocol-core.rst`.
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod auth;
pub mod bth;
pub mod cc;
pub mod comp;
pub mod conn;
pub mod cqmod;
pub mod ext;
pub mod flight;
pub mod icrc;
pub mod mcast;
pub mod mrc_wire;
pub mod offload;
pub mod opcode;
pub mod packet;
pub mod path;
pub mod psn;
pub mod qp;
pub mod req;
pub mod resp;
pub mod restart;
pub mod ring;
pub mod sack;
pub mod stream;
pub mod timer;
pub mod wire;
pub mod wr;
