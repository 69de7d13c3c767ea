// SPDX-License-Identifier: GPL-2.0

//! MetaRoCE: a software RDMA provider speaking RoCEv2 and the MetaRoCE multipath transport.
//!
//! This crate stays free of `unsafe`: every C binding it needs lives behind the safe
//! abstractions in `rust/kernel/rdma` and `rust/kernel/net`.

#![deny(unsafe_code)]

use kernel::prelude::*;

pub mod proto;

module! {
    type: MetaRoce,
    name: "metaroce",
    authors: ["MetaRoCE developers"],
    description: "MetaRoCE software RDMA provider (RoCEv2 and MetaRoCE transports)",
    license: "GPL",
}

struct MetaRoce;

impl kernel::Module for MetaRoce {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        pr_info!("loaded\n");
        Ok(MetaRoce)
    }
}

impl Drop for MetaRoce {
    fn drop(&mut self) {
        pr_info!("unloaded\n");
    }
}
