// SPDX-License-Identifier: GPL-2.0

//! MetaRoCE: a software RDMA provider speaking RoCEv2 and the MetaRoCE multipath transport.
//!
//! Every C binding this crate needs lives behind the safe abstractions in `rust/kernel/rdma` and
//! `rust/kernel/net`; `#![deny(unsafe_code)]` keeps it that way.

#![deny(unsafe_code)]

mod device;
mod integrity;
mod link;
mod mcast;
mod module;
mod mr;
mod native;
mod net;
mod ns;
mod odp;
pub mod proto;
mod qp;
mod srq;
mod timer;
mod uabi;
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
        native_rto_min_ms: u32 {
            default: 10,
            description: "Shortest retransmission timeout of a native connection's paths in ms \
                (5..2000, at least one timer tick), read when a connection is created",
        },
        native_delay_target_us: u32 {
            default: 0,
            description: "Delay signal of native connections: a path whose smoothed RTT exceeds \
                its smallest by more than this many microseconds decreases its window as on an \
                ECN echo (0: off, ECN only), read when a connection is created",
        },
        native_late_acks: u32 {
            default: 0,
            description: "1: native connections count a transmission declared lost as \
                acknowledged when an ACK proves it received, and undo an RTO proven spurious \
                (Documentation/metaroce/transport.rst 5.5.1); 0 (default until a stall seen \
                once in CI is ruled out): off; read when a connection is created",
        },
        native_silence_probes: u32 {
            default: 1,
            description: "1 (default): a native path whose RTO fires while nothing sent after \
                its oldest packet was acknowledged on any path of the connection probes and \
                backs off instead of declaring its packets lost \
                (Documentation/metaroce/transport.rst 5.5.2); 0: every RTO declares them lost; \
                read when a connection is created",
        },
        native_ack_train_us: u32 {
            default: 5000,
            description: "Microseconds a native path's RTO that falls just after the \
                connection's newest ACK arrived waits for the rest of that ACK train, at most \
                this long past the RTO (Documentation/metaroce/transport.rst 5.5.2); default \
                5000 (one timer tick); 0: no wait; at most 100000; read when a connection is \
                created",
        },
        native_pace_burst_us: u32 {
            default: 5000,
            description: "Pacer credit of native connections in microseconds \
                (Documentation/metaroce/transport.rst 6.4): a sender polled late may catch up on \
                this much sending time at once (default: one 5 ms timer tick; 0: exact pacing, \
                one packet per poll when polls come late); read when a connection is created",
        },
        flush_icrc_rxe: u32 {
            default: 1,
            description: "1 (default): RDMA FLUSH requests carry the ICRC rdma_rxe computes for \
                them (over their headers twice: Linux 7.3's rdma_rxe gives the FLUSH opcode no \
                payload offset) so that rdma_rxe accepts them; 0: the IBTA ICRC. Read when a net \
                namespace's first device opens its sockets; received FLUSH requests are \
                accepted with either",
        },
        rc_max_unacked: u32 {
            default: 1024,
            description: "Most unacknowledged PSNs an RC requester of a RoCEv2 device keeps in \
                flight (1..4194304; rdma_rxe has 128), read when a QP reaches RTR",
        },
        tx_inline_batches: u32 {
            default: 16,
            description: "Batches of 16 packets a user QP's send doorbell transmits itself, in \
                the posting process, before the device's transmit worker takes over (0: the \
                worker sends everything)",
        },
        rx_transmit: u32 {
            default: 0,
            description: "What the receive path (softirq) transmits itself for the QP a packet \
                arrived for: 0 nothing (the device's transmit worker sends everything, one ACK \
                for the packets that arrived before it ran), 1 the native ACKs and \
                restart-proof packets it made due (the worker sends the rest), 2 one batch of \
                16 packets of anything (ACKs, responses, the data an ACK made room for): lower \
                latency, less bulk goodput",
        },
        native_ack_every: u32 {
            default: 4,
            description: "ACK coalescing of native connections on the receive path \
                (rx_transmit 1 or 2; Documentation/metaroce/transport.rst section 4): a path's ACK \
                leaves from softirq once this many DATA packets wait on it, or at once for the \
                end of a message, reordering, a retransmission or a gap; the transmit worker \
                sends the others (default 4; 1: every ACK at once); read when a connection is \
                created",
        },
        tx_highpri: u32 {
            default: 1,
            description: "1: the devices' transmit workers run on a high-priority work queue \
                (nice -20, like a NIC's transmit engine beside the applications), 0: at normal \
                priority; read when a device is added",
        },
        tx_budget_kb: u32 {
            default: 256,
            description: "KiB of packet memory (skb truesize, about twice the bytes on the wire) \
                a device may have queued in the network stack and not yet freed; its transmit \
                worker waits beyond that, as a UDP socket waits for its send buffer, instead of \
                overrunning a queue (a qdisc, a slower link). 0: no bound (the drops are \
                counted in send_err); read when a device is added (16..65536)",
        },
        tx_gso: u32 {
            default: 0,
            description: "1: consecutive native packets of one path in a transmit batch leave \
                as one fraglist UDP GSO packet (routed, queued and handed to the netdev once, \
                split back into the packets in front of it; counted in sent_gso_batches), 0 \
                (default): each packet alone",
        },
        native_path_run: u32 {
            default: 1,
            description: "New DATA packets a native connection sends on one path in a row while \
                its window allows, before it picks the least loaded path again (1..=64, default \
                1: every packet; Documentation/metaroce/transport.rst section 10): the runs \
                tx_gso hands over as one GSO packet; read when a connection is created",
        },
        native_flight_idle_ms: u32 {
            default: 100,
            description: "How long a native connection keeps its state for packets in flight \
                (about 60 KiB, lent from the device's pool) with nothing in flight and nothing \
                to send before it gives it back (1..=60000 ms, default 100; \
                Documentation/metaroce/transport.rst section 10.1): an idle connection then \
                costs a few KiB; read when a connection is created",
        },
        native_max_peers: u32 {
            default: 1024,
            description: "Native connections (remote devices) a metaroce-native device keeps at \
                once (1..=65536, default 1024; each costs about 160 KiB): when full, a new one \
                takes the place of an unbound, quiet one, else binding a QP fails with ENOSPC",
        },
        native_ctx_peers: u32 {
            default: 16,
            description: "Native connections the QPs of one user context may hold at once \
                (1..=65536, default 16; kernel QPs have no quota): binding a QP towards one \
                more remote device fails with EDQUOT",
        },
    },
}
