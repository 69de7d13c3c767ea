//! Shared proptest strategies and the impairment generator of the loopback tests.

// Each test crate that includes this module uses only part of it.
#![allow(dead_code)]

use metaroce_proto::bth::Bth;
use metaroce_proto::conn::{Conn, ConnConfig, FlightStore};
use metaroce_proto::ext::{Aeth, AtomicAckEth, AtomicEth, Deth, Feth, NakCode, Reth, Syndrome};
use metaroce_proto::mrc_wire::{MrcOp, DATA_HDR_LEN};
use metaroce_proto::offload::CongestionEngine;
use metaroce_proto::opcode::{ExtSet, Opcode};
use metaroce_proto::packet::Headers;
use metaroce_proto::psn::{Psn, PSN_MASK};
use metaroce_proto::stream::{MsgDesc, StreamStore};
use proptest::prelude::*;

pub fn all_opcodes() -> Vec<Opcode> {
    (0..=255u8).filter_map(Opcode::from_u8).collect()
}

pub fn syndrome() -> impl Strategy<Value = Syndrome> {
    prop_oneof![
        (0..32u8).prop_map(|credits| Syndrome::Ack { credits }),
        (0..32u8).prop_map(|timer| Syndrome::Rnr { timer }),
        prop::sample::select(vec![
            NakCode::PsnSeqErr,
            NakCode::InvalidRequest,
            NakCode::RemoteAccess,
            NakCode::RemoteOperational,
            NakCode::InvalidRdRequest,
        ])
        .prop_map(Syndrome::Nak),
    ]
}

prop_compose! {
    pub fn headers()(
        op in prop::sample::select(all_opcodes()),
        flags in any::<(bool, bool, bool)>(),
        pkey in any::<u16>(),
        resv8 in any::<u8>(),
        qp in 0..=0xFF_FFFFu32,
        psn in 0..=PSN_MASK,
        a in any::<(u64, u32, u64, u64)>(),
        qkey in any::<u32>(),
        syn in syndrome(),
        msn in 0..=0xFF_FFFFu32,
        imm in any::<u32>(),
    ) -> Headers {
        let bth = Bth {
            opcode: op,
            solicited: flags.0,
            mig_req: flags.1,
            pad: 0,
            pkey,
            resv8,
            dest_qp: qp,
            ack_req: flags.2,
            psn: Psn::new(psn),
        };
        let e = op.info().exts;
        let mut h = Headers::new(bth);
        let has = |x| e.contains(x);
        h.feth = has(ExtSet::FETH).then_some(Feth { placement: (imm & 0xF) as u8, selectivity: ((imm >> 4) & 3) as u8 });
        h.deth = has(ExtSet::DETH).then_some(Deth { qkey, src_qp: qp ^ 0x5A5A5A });
        h.reth = has(ExtSet::RETH).then_some(Reth { va: a.0, rkey: a.1, len: a.1.rotate_left(7) });
        h.atomic_eth = has(ExtSet::ATOMIC_ETH).then_some(AtomicEth { va: a.0, rkey: a.1, swap_add: a.2, compare: a.3 });
        h.aeth = has(ExtSet::AETH).then_some(Aeth { syndrome: syn, msn });
        h.atomic_ack_eth = has(ExtSet::ATOMIC_ACK_ETH).then_some(AtomicAckEth { orig: a.3 });
        h.imm = has(ExtSet::IMM).then_some(imm);
        h.ieth = has(ExtSet::IETH).then_some(imm.rotate_left(3));
        h
    }
}

/// The kernel's connection shape (`native.rs`: 8 paths, 512 descriptors,
/// 16 streams, K = 32).
pub type NativeConn = Conn<8, 512, 8, 16, 32>;

/// Nanoseconds per millisecond.
pub const MS: u64 = 1_000_000;
/// The kernel's timer tick (`timer::TICK_MS`).
pub const TICK: u64 = 5 * MS;

/// `native.rs`'s connection parameters on an MTU-1500 netdev with the
/// module's defaults (RTO floor two ticks, initial RTO four, probe timeout
/// one, RTO up to 2 s); pacer credit and late acknowledgments as the core's
/// defaults (the caller sets the kernel's where it matters).
pub fn kernel_config(conn_id: u32) -> ConnConfig {
    let mut cfg = ConnConfig::new(conn_id);
    cfg.mss = 1024;
    cfg.paths = 8;
    cfg.rto_min_ns = 2 * TICK;
    cfg.rto_init_ns = 4 * TICK;
    cfg.pto_min_ns = TICK;
    cfg.rto_max_ns = 2_000 * MS;
    cfg
}

/// xorshift64 for the loopback tests' impairments (loss, delay, corruption).
pub struct Rand(pub u64);

impl Rand {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// True with probability `p` percent.
    pub fn pct(&mut self, p: u64) -> bool {
        self.next() % 100 < p
    }
    /// True with probability `p` per mille.
    pub fn permille(&mut self, p: u64) -> bool {
        self.next() % 1000 < p
    }
}

/// Every packet `from` sends now, as bytes (payloads zero; atomics wait: the buffer has no room
/// for their operands).
pub fn packets<
    const P: usize,
    const D: usize,
    const DW: usize,
    const S: usize,
    const K: usize,
    C: CongestionEngine,
    St: StreamStore<K>,
    Fl: FlightStore<P, D>,
>(
    from: &mut Conn<P, D, DW, S, K, C, St, Fl>,
    now: u64,
) -> Vec<Vec<u8>> {
    let mut buf = [0u8; DATA_HDR_LEN];
    let mut out = Vec::new();
    while let Some(t) = from.poll_transmit(now, &mut buf) {
        let mut bytes = buf[..t.hdr_len].to_vec();
        if let Some(p) = t.payload {
            bytes.resize(t.hdr_len + usize::from(p.len), 0);
        }
        out.push(bytes);
    }
    out
}

/// A native SEND of `len` bytes.
#[allow(dead_code)]
pub fn send(len: u32) -> MsgDesc {
    MsgDesc {
        op: MrcOp::Send,
        len,
        va: 0,
        rkey: 0,
        imm: 0,
        se: false,
    }
}

/// A native RDMA WRITE of `len` bytes to (rkey 5, va 0x1000).
pub fn write(len: u32) -> MsgDesc {
    MsgDesc {
        op: MrcOp::Write,
        len,
        va: 0x1000,
        rkey: 5,
        imm: 0,
        se: false,
    }
}
