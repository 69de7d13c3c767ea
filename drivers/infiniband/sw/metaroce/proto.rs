// SPDX-License-Identifier: GPL-2.0

//! The sans-I/O RoCEv2 protocol core (`proto/`), compiled unchanged from the files the host
//! workspace tests: each module is a flat sibling file that reaches the others through `super::`.

#[path = "proto/src/bth.rs"]
pub mod bth;
#[path = "proto/src/cc.rs"]
pub mod cc;
#[path = "proto/src/comp.rs"]
pub mod comp;
#[path = "proto/src/conn.rs"]
pub mod conn;
#[path = "proto/src/ext.rs"]
pub mod ext;
#[path = "proto/src/icrc.rs"]
pub mod icrc;
#[path = "proto/src/mcast.rs"]
pub mod mcast;
#[path = "proto/src/mrc_wire.rs"]
pub mod mrc_wire;
#[path = "proto/src/offload.rs"]
pub mod offload;
#[path = "proto/src/opcode.rs"]
pub mod opcode;
#[path = "proto/src/packet.rs"]
pub mod packet;
#[path = "proto/src/path.rs"]
pub mod path;
#[path = "proto/src/psn.rs"]
pub mod psn;
#[path = "proto/src/qp.rs"]
pub mod qp;
#[path = "proto/src/req.rs"]
pub mod req;
#[path = "proto/src/resp.rs"]
pub mod resp;
#[path = "proto/src/sack.rs"]
pub mod sack;
#[path = "proto/src/stream.rs"]
pub mod stream;
#[path = "proto/src/timer.rs"]
pub mod timer;
#[path = "proto/src/wire.rs"]
pub mod wire;
#[path = "proto/src/wr.rs"]
pub mod wr;
