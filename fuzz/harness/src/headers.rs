// SPDX-License-Identifier: GPL-2.0
//! Target `headers`: structured build/parse round trips for every opcode.
//!
//! The input picks an opcode out of the 40 supported ones, every header
//! field, a payload and optionally one inconsistency. A consistent packet
//! must build to exactly `wire_len` bytes and parse back to the same headers
//! and payload; each inconsistency must be refused with its own error, and
//! every prefix of the packet must parse cleanly or fail cleanly.

use super::enc::{Enc, Wire};
use super::packet::check_parsed;
use arbitrary::{Result, Unstructured};
use metaroce_proto::bth::{Bth, QPN_MASK};
use metaroce_proto::ext::{Aeth, AtomicAckEth, AtomicEth, Deth, Feth, Reth, Syndrome};
use metaroce_proto::opcode::{ExtSet, Opcode};
use metaroce_proto::packet::{build, pad_for, parse, wire_len, BuildError, Headers};
use metaroce_proto::psn::Psn;

/// Every supported opcode, in numeric order.
pub fn all_opcodes() -> Vec<Opcode> {
    (0..=255u8).filter_map(Opcode::from_u8).collect()
}

/// One structured packet.
#[derive(Clone, Debug, Default)]
pub struct Input {
    /// Index into [`all_opcodes`] (modulo).
    pub op: u8,
    /// Bit 0 solicited, bit 1 MigReq, bit 2 AckReq.
    pub flags: u8,
    /// P_Key.
    pub pkey: u16,
    /// BTH byte 4.
    pub resv8: u8,
    /// Destination QP (masked to 24 bits).
    pub dest_qp: u32,
    /// PSN (masked).
    pub psn: u32,
    /// RETH/AtomicETH address.
    pub va: u64,
    /// RETH/AtomicETH key.
    pub rkey: u32,
    /// RETH length.
    pub len: u32,
    /// AtomicETH swap/add; FETH: bits 0-3 the placement type, bits 4-5
    /// the selectivity level.
    pub swap: u64,
    /// AtomicETH compare.
    pub compare: u64,
    /// AtomicAckETH value.
    pub orig: u64,
    /// AETH syndrome byte (an invalid one becomes an ACK).
    pub syndrome: u8,
    /// AETH MSN.
    pub msn: u32,
    /// Immediate data.
    pub imm: u32,
    /// IETH key.
    pub ieth: u32,
    /// DETH Q_Key.
    pub qkey: u32,
    /// DETH source QP.
    pub src_qp: u32,
    /// Payload length (ignored for opcodes without payload).
    pub plen: u16,
    /// Payload fill byte.
    pub fill: u8,
    /// 1: an extra header (a FETH if bit 7 of `fill` is set and the opcode
    /// has none, else ImmDt or IETH), 2: a wrong pad, 3: payload on an
    /// opcode without one, 4: required headers missing (all of them, or
    /// only the FETH if bit 7 of `fill` is set and there is one); anything
    /// else: consistent.
    pub tweak: u8,
}

impl Wire for Input {
    fn decode(u: &mut Unstructured<'_>) -> Result<Self> {
        Ok(Input {
            op: u.arbitrary()?,
            flags: u.arbitrary()?,
            pkey: u.arbitrary()?,
            resv8: u.arbitrary()?,
            dest_qp: u.arbitrary()?,
            psn: u.arbitrary()?,
            va: u.arbitrary()?,
            rkey: u.arbitrary()?,
            len: u.arbitrary()?,
            swap: u.arbitrary()?,
            compare: u.arbitrary()?,
            orig: u.arbitrary()?,
            syndrome: u.arbitrary()?,
            msn: u.arbitrary()?,
            imm: u.arbitrary()?,
            ieth: u.arbitrary()?,
            qkey: u.arbitrary()?,
            src_qp: u.arbitrary()?,
            plen: u.arbitrary()?,
            fill: u.arbitrary()?,
            tweak: u.arbitrary()?,
        })
    }
    fn encode(&self, e: &mut Enc) {
        e.u8(self.op).u8(self.flags).u16(self.pkey).u8(self.resv8);
        e.u32(self.dest_qp)
            .u32(self.psn)
            .u64(self.va)
            .u32(self.rkey)
            .u32(self.len);
        e.u64(self.swap)
            .u64(self.compare)
            .u64(self.orig)
            .u8(self.syndrome);
        e.u32(self.msn)
            .u32(self.imm)
            .u32(self.ieth)
            .u32(self.qkey)
            .u32(self.src_qp);
        e.u16(self.plen).u8(self.fill).u8(self.tweak);
    }
}

impl<'a> arbitrary::Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Input::decode(u)
    }
}

/// The consistent headers and payload length an input describes.
pub fn headers_of(i: &Input) -> (Headers, usize) {
    let ops = all_opcodes();
    let op = ops[usize::from(i.op) % ops.len()];
    let info = op.info();
    let plen = if info.payload {
        usize::from(i.plen) % 4200
    } else {
        0
    };
    let mut h = Headers::new(Bth {
        opcode: op,
        solicited: i.flags & 1 != 0,
        mig_req: i.flags & 2 != 0,
        pad: pad_for(plen),
        pkey: i.pkey,
        resv8: i.resv8,
        dest_qp: i.dest_qp & QPN_MASK,
        ack_req: i.flags & 4 != 0,
        psn: Psn::new(i.psn),
    });
    let has = |x| info.exts.contains(x);
    h.feth = has(ExtSet::FETH).then_some(feth_of(i.swap));
    h.deth = has(ExtSet::DETH).then_some(Deth {
        qkey: i.qkey,
        src_qp: i.src_qp & QPN_MASK,
    });
    h.reth = has(ExtSet::RETH).then_some(Reth {
        va: i.va,
        rkey: i.rkey,
        len: i.len,
    });
    h.atomic_eth = has(ExtSet::ATOMIC_ETH).then_some(AtomicEth {
        va: i.va,
        rkey: i.rkey,
        swap_add: i.swap,
        compare: i.compare,
    });
    let syndrome = Syndrome::decode(i.syndrome).unwrap_or(Syndrome::Ack {
        credits: i.syndrome & 0x1F,
    });
    h.aeth = has(ExtSet::AETH).then_some(Aeth {
        syndrome,
        msn: i.msn & 0xFF_FFFF,
    });
    h.atomic_ack_eth = has(ExtSet::ATOMIC_ACK_ETH).then_some(AtomicAckEth { orig: i.orig });
    h.imm = has(ExtSet::IMM).then_some(i.imm);
    h.ieth = has(ExtSet::IETH).then_some(i.ieth);
    (h, plen)
}

/// The FETH the low bits of `v` stand for: every placement type (0-15)
/// and selectivity level (0-3), valid or not (the codec does not judge).
pub fn feth_of(v: u64) -> Feth {
    Feth {
        placement: (v & 0xF) as u8,
        selectivity: ((v >> 4) & 3) as u8,
    }
}

/// Runs one input.
pub fn run(data: &[u8]) {
    let Ok(i) = Input::decode(&mut Unstructured::new(data)) else {
        return;
    };
    let (mut h, plen) = headers_of(&i);
    let info = h.bth.opcode.info();
    let payload = vec![i.fill; plen];
    let mut out = vec![0u8; 4400];
    match i.tweak {
        1 => {
            // A header the opcode does not have.
            if i.fill & 0x80 != 0 && h.feth.is_none() {
                h.feth = Some(feth_of(i.swap));
            } else if h.imm.is_none() {
                h.imm = Some(i.imm);
            } else {
                h.ieth = Some(i.ieth);
            }
            assert_eq!(
                build(&h, &payload, &mut out),
                Err(BuildError::HeaderMismatch)
            );
        }
        2 => {
            h.bth.pad = (h.bth.pad + 1 + i.fill % 3) % 4;
            assert_eq!(build(&h, &payload, &mut out), Err(BuildError::BadPad));
        }
        3 if !info.payload => {
            let extra = vec![i.fill; usize::from(i.plen % 64) + 1];
            h.bth.pad = pad_for(extra.len());
            assert_eq!(
                build(&h, &extra, &mut out),
                Err(BuildError::UnexpectedPayload)
            );
        }
        4 if !info.exts.is_empty() => {
            if i.fill & 0x80 != 0 && h.feth.is_some() {
                // Only the FETH (a FLUSH keeps its RETH).
                h.feth = None;
            } else {
                h.feth = None;
                h.deth = None;
                h.reth = None;
                h.atomic_eth = None;
                h.aeth = None;
                h.atomic_ack_eth = None;
                h.imm = None;
                h.ieth = None;
            }
            assert_eq!(
                build(&h, &payload, &mut out),
                Err(BuildError::HeaderMismatch)
            );
        }
        _ => {
            let n = build(&h, &payload, &mut out).expect("consistent packet refused");
            assert_eq!(Some(n), wire_len(&h, plen));
            assert_eq!(n % 4, 0);
            let pkt = &out[..n];
            let p = parse(pkt).expect("built packet does not parse");
            assert_eq!(p.hdr, h);
            assert_eq!(p.payload, &payload[..]);
            check_parsed(pkt, &p);
            // Every prefix parses or fails cleanly; a prefix that parses is
            // itself a consistent packet.
            // (The headers and the end are where the length rules bite.)
            for cut in (0..n.min(96)).chain(n.saturating_sub(16)..n) {
                if let Ok(q) = parse(&pkt[..cut]) {
                    check_parsed(&pkt[..cut], &q);
                }
            }
        }
    }
}
