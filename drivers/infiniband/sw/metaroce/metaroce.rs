// SPDX-License-Identifier: GPL-2.0

//! MetaRoCE: a software RDMA provider speaking RoCEv2 and the MetaRoCE multipath transport.
//!
//! Every C binding this crate needs lives behind the safe abstractions in `rust/kernel/rdma` and
//! `rust/kernel/net`; `#![deny(unsafe_code)]` keeps it that way.

#![deny(unsafe_code)]

mod device;
mod link;
mod mcast;
mod module;
mod mr;
mod native;
mod net;
mod ns;
pub mod proto;
mod qp;
mod rxe_abi;
mod srq;
mod timer;
mod uqueue;
mod verbs;
mod xmit;

use module::MetaRoceModule;

kernel::prelude::module! {
    type: MetaRoceModule,
    name: "metaroce",
    authors: ["MetaRoCE developers"],
    description: "MetaRoCE software RDMA provider (RoCEv2 and MetaRoCE transports)",
    license: "GPL",
    // `rdma link add ... type metaroce` loads the module (MODULE_ALIAS_RDMA_LINK).
    alias: ["rdma-link-metaroce", "rdma-link-metaroce-native"],
    params: {
        native_port: u16 {
            default: 19791,
            description: "UDP port of the MetaRoCE native transport (never 4791, RoCEv2's)",
        },
        native_link_kbps: u32 {
            default: 0,
            description: "Link rate in kbit/s a metaroce-native device divides among the senders \
                that send to it (the rate hint in its ACKs), read when a device is added; \
                0: the netdev's ethtool speed (no hints if it reports none)",
        },
    },
}
