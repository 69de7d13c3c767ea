// SPDX-License-Identifier: GPL-2.0
//! Target `responder`: a queue pair's responder fed an arbitrary sequence
//! of request packets, posted receives, transmit polls, memory failures and
//! error transitions, for RC, UC and UD and 0, 1 or 4 response resources.
//!
//! Besides "no panic", every step checks:
//! * data is placed only where it may go: a `Place::Recv` stays inside the
//!   receive WQE it names (a WQE the responder took and still holds),
//!   contiguous with the bytes already placed there; a `Place::Rdma` lies
//!   inside the range the last approved WRITE check covered; READ response
//!   payloads lie inside an approved READ check; atomics only on aligned
//!   addresses (asserted by the memory model) and only for an accepted
//!   atomic request, never for a duplicate;
//! * ATOMIC WRITE: executed exactly once, for the expected PSN only, with
//!   the request's key, aligned address and 8 bytes of payload (RETH length
//!   8, no pad), placing nothing and taking no receive WQE; a duplicate
//!   executes nothing; a wrong length or alignment is refused with an
//!   Invalid Request NAK before any memory call;
//! * FLUSH: approved by the memory model (key, rights, and the range unless
//!   the whole region is asked for) at most once per packet, only for an
//!   accepted RC FLUSH at the expected PSN with a known placement type
//!   (1-3) and selectivity level (0-1) that the QP's access grants, and
//!   exactly as the FETH/RETH ask (key, address, length, whole region for
//!   selectivity 1, `FLUSH_GLOBAL`/`FLUSH_PERSISTENT` for placement bits 0
//!   and 1); an accepted FLUSH was approved, placed nothing, took no
//!   receive WQE; a duplicate makes no memory call; an unknown placement or
//!   selectivity, or one the QP does not grant, is refused before any
//!   memory call and moves the QP to the error state;
//! * a dropped packet places nothing, and sequence errors and duplicates
//!   take no receive WQE;
//! * receive completions come in the order the WQEs were taken, each WQE
//!   completes once, with the length actually placed; after the error
//!   transition the held WQE is flushed and no taken WQE is lost;
//! * RC: only the expected PSN executes (model of the expected PSN), ACKs
//!   acknowledge only PSNs before it, NAKs name it, READ responses and
//!   atomic ACKs belong to an accepted request and carry the value the
//!   atomic returned, an ATOMIC WRITE or FLUSH is answered by an empty READ
//!   RESPONSE Only with an ACK AETH at its PSN carrying its MSN, MSNs never exceed
//!   the messages completed, and in the error state only the final NAK is
//!   sent, with the code of the refusal that caused it (access: Remote
//!   Access, operational: Remote Operational, else Invalid Request); UC and
//!   UD send nothing;
//! * everything sent encodes and parses back.

use super::enc::{bytes, steps, Enc, Wire};
use super::mem::{Flush, Mem, Rq, MRS};
use super::packet::check_parsed;
use arbitrary::{Result, Unstructured};
use metaroce_proto::bth::Bth;
use metaroce_proto::ext::{AtomicEth, Deth, Feth, NakCode, Reth, Syndrome};
use metaroce_proto::opcode::{ExtSet, OpKind, Opcode, Position, Transport};
use metaroce_proto::packet::{build, pad_for, parse, Headers, Packet, PayloadRef, Pmtu, TxDesc};
use metaroce_proto::psn::Psn;
use metaroce_proto::qp::{DropReason, Qp, QpConfig, RxOutcome};
use metaroce_proto::resp::GRH_LEN;
use metaroce_proto::wr::{Access, Place, RecvKind, SendWqe, WcStatus};

/// Local QP number.
pub const QPN: u32 = 0x11;
/// Remote QP number.
pub const DEST_QPN: u32 = 0x22;
/// The QP's Q_Key.
pub const QKEY: u32 = 0x1234_5678;
/// Most steps run per input.
pub const MAX_STEPS: usize = 600;

/// QP attributes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cfg {
    /// 0, 1: RC, 2: UC, 3: UD (modulo 4).
    pub transport: u8,
    /// Path MTU index (modulo 5).
    pub pmtu: u8,
    /// First expected PSN.
    pub rq_psn: u32,
    /// Bit 0 READ, bit 1 WRITE, bit 2 ATOMIC, bit 3 FLUSH_GLOBAL, bit 4
    /// FLUSH_PERSISTENT; only if bit 7 is set (else all of them).
    pub access: u8,
    /// RNR timer code.
    pub min_rnr_timer: u8,
    /// ACK coalescing interval - 1 (modulo 8).
    pub ack_every: u8,
    /// Response resources: 0 → 4, 1 → 1, 2 → 0 (modulo 3).
    pub res: u8,
}

/// One packet request, described relative to the model's state.
#[derive(Clone, Copy, Debug, Default)]
pub struct Pkt {
    /// Bit 7 clear: a request opcode of the QP's transport (index in the
    /// low bits); set: any of the 40 opcodes.
    pub op: u8,
    /// PSN offset from the expected PSN (signed).
    pub dpsn: i8,
    /// Bit 0 SE, bit 1 MigReq, bit 2 AckReq, bit 3 wrong Q_Key, bits 4-7
    /// into BTH byte 4.
    pub flags: u8,
    /// Payload length selector: low 2 bits 0 → one MTU, 1 → 0, 2 → up to
    /// one MTU, 3 → up to 16 KiB (the rest of the bits give the value).
    pub plen: u16,
    /// Key/address selector: bits 0-1 region (0, 3: the R/W/A region, 1:
    /// the read-only region, 2: an unknown key), bit 2 a wild address, bit
    /// 3 an address below the region, bits 4-5 the RETH length mode (0:
    /// the payload length, 1: a multi-packet length, 2: up to 18 KiB, 3:
    /// raw).
    pub key: u8,
    /// Offset into the region.
    pub off: u16,
    /// RETH length value.
    pub rlen: u32,
    /// Atomic operands; FLUSH: the FETH ([`feth_of`]).
    pub swap: u64,
    /// Atomic compare operand.
    pub compare: u64,
    /// Immediate data (and IETH key, DETH source QP).
    pub imm: u32,
}

/// One step.
#[derive(Clone, Debug)]
pub enum Step {
    /// Receive a packet built from the description.
    Pkt(Pkt),
    /// Receive raw bytes if they parse.
    Raw(Vec<u8>),
    /// Post a receive WQE of this many bytes (modulo 20000).
    PostRecv(u16),
    /// Poll up to this many packets (modulo 16, plus one).
    PollTx(u8),
    /// The next memory call fails with an operational error.
    FailNext,
    /// `modify_qp(ERR)`: error state, flush.
    SetError,
}

impl Wire for Cfg {
    fn decode(u: &mut Unstructured<'_>) -> Result<Self> {
        Ok(Cfg {
            transport: u.arbitrary()?,
            pmtu: u.arbitrary()?,
            rq_psn: u.arbitrary()?,
            access: u.arbitrary()?,
            min_rnr_timer: u.arbitrary()?,
            ack_every: u.arbitrary()?,
            res: u.arbitrary()?,
        })
    }
    fn encode(&self, e: &mut Enc) {
        e.u8(self.transport)
            .u8(self.pmtu)
            .u32(self.rq_psn)
            .u8(self.access);
        e.u8(self.min_rnr_timer).u8(self.ack_every).u8(self.res);
    }
}

impl Wire for Pkt {
    fn decode(u: &mut Unstructured<'_>) -> Result<Self> {
        Ok(Pkt {
            op: u.arbitrary()?,
            dpsn: u.arbitrary()?,
            flags: u.arbitrary()?,
            plen: u.arbitrary()?,
            key: u.arbitrary()?,
            off: u.arbitrary()?,
            rlen: u.arbitrary()?,
            swap: u.arbitrary()?,
            compare: u.arbitrary()?,
            imm: u.arbitrary()?,
        })
    }
    fn encode(&self, e: &mut Enc) {
        e.u8(self.op)
            .u8(self.dpsn as u8)
            .u8(self.flags)
            .u16(self.plen)
            .u8(self.key);
        e.u16(self.off)
            .u32(self.rlen)
            .u64(self.swap)
            .u64(self.compare)
            .u32(self.imm);
    }
}

impl Wire for Step {
    fn decode(u: &mut Unstructured<'_>) -> Result<Self> {
        let tag: u8 = u.arbitrary()?;
        Ok(match tag % 20 {
            0..=10 => Step::Pkt(Pkt::decode(u)?),
            11 => Step::Raw(bytes(u)?.to_vec()),
            12..=14 => Step::PostRecv(u.arbitrary()?),
            15..=17 => Step::PollTx(u.arbitrary()?),
            18 => Step::FailNext,
            _ => Step::SetError,
        })
    }
    fn encode(&self, e: &mut Enc) {
        match self {
            Step::Pkt(p) => {
                e.u8(0);
                p.encode(e);
            }
            Step::Raw(b) => {
                e.u8(11).bytes(b);
            }
            Step::PostRecv(n) => {
                e.u8(12).u16(*n);
            }
            Step::PollTx(n) => {
                e.u8(15).u8(*n);
            }
            Step::FailNext => {
                e.u8(18);
            }
            Step::SetError => {
                e.u8(19);
            }
        }
    }
}

target_input!("QP attributes.");

const PMTUS: [Pmtu; 5] = [
    Pmtu::Mtu256,
    Pmtu::Mtu512,
    Pmtu::Mtu1024,
    Pmtu::Mtu2048,
    Pmtu::Mtu4096,
];

/// Path MTU for a selector.
pub fn pmtu_of(sel: u8) -> Pmtu {
    PMTUS[usize::from(sel) % PMTUS.len()]
}

/// Transport for a selector.
pub fn transport_of(sel: u8) -> Transport {
    match sel % 4 {
        0 | 1 => Transport::Rc,
        2 => Transport::Uc,
        _ => Transport::Ud,
    }
}

/// The QP configuration of `c`.
pub fn qp_config(c: &Cfg) -> QpConfig {
    let mut q = QpConfig::new(transport_of(c.transport), QPN, DEST_QPN);
    q.pmtu = pmtu_of(c.pmtu);
    q.rq_psn = Psn::new(c.rq_psn);
    q.sq_psn = Psn::new(c.rq_psn ^ 0x5A_5A5A);
    q.qkey = QKEY;
    q.sq_depth = 4;
    let bits = if c.access & 0x80 == 0 {
        0x1F
    } else {
        c.access & 0x1F
    };
    let mut a = Access::NONE;
    for (bit, r) in [
        (1, Access::READ),
        (2, Access::WRITE),
        (4, Access::ATOMIC),
        (8, Access::FLUSH_GLOBAL),
        (16, Access::FLUSH_PERSISTENT),
    ] {
        if bits & bit != 0 {
            a = a.with(r);
        }
    }
    q.access = a;
    q.min_rnr_timer = c.min_rnr_timer & 0x1F;
    q.ack_every = u32::from(c.ack_every % 8) + 1;
    q
}

/// The FETH of a FLUSH description: bit 7 clear, a valid one (placement
/// GLOBAL, PERSISTENT or both from bits 0-1, 0 counting as GLOBAL;
/// selectivity from bit 4: range or whole region); set, the raw fields
/// (bits 0-3 placement 0-15, bits 4-5 selectivity 0-3).
pub fn feth_of(v: u64) -> Feth {
    if v & 0x80 == 0 {
        Feth {
            placement: ((v & 3) as u8).max(1),
            selectivity: ((v >> 4) & 1) as u8,
        }
    } else {
        Feth {
            placement: (v & 0xF) as u8,
            selectivity: ((v >> 4) & 3) as u8,
        }
    }
}

/// The rights a FLUSH of `placement` asks for (the unknown bits ask for
/// none), on the QP and on the region.
pub fn flush_rights(placement: u8) -> Access {
    let mut a = Access::NONE;
    if placement & 1 != 0 {
        a = a.with(Access::FLUSH_GLOBAL);
    }
    if placement & 2 != 0 {
        a = a.with(Access::FLUSH_PERSISTENT);
    }
    a
}

/// True for a FETH the responder must execute: placement GLOBAL and/or
/// PERSISTENT and nothing else, selectivity range or whole region.
pub fn feth_valid(f: &Feth) -> bool {
    (1..=3).contains(&f.placement) && f.selectivity <= 1
}

/// Builds the packet a description stands for, given the expected PSN.
pub fn build_pkt(p: &Pkt, cfg: &QpConfig, epsn: Psn) -> Vec<u8> {
    let all: Vec<Opcode> = (0..=255u8).filter_map(Opcode::from_u8).collect();
    let ours: Vec<Opcode> = all
        .iter()
        .copied()
        .filter(|o| o.info().transport == cfg.transport && o.info().kind.is_request())
        .collect();
    let op = if p.op & 0x80 == 0 {
        ours[usize::from(p.op & 0x7F) % ours.len()]
    } else {
        all[usize::from(p.op & 0x7F) % all.len()]
    };
    let info = op.info();
    let mtu = cfg.pmtu.bytes() as usize;
    let v = usize::from(p.plen >> 2);
    let plen = if !info.payload {
        0
    } else {
        match p.plen & 3 {
            0 => mtu,
            1 => 0,
            2 => v % (mtu + 1),
            _ => v,
        }
    };
    let mr = match p.key & 3 {
        1 => MRS[1],
        _ => MRS[0],
    };
    let rkey = if p.key & 3 == 2 {
        0xBAD0 | u32::from(p.key)
    } else {
        mr.rkey
    };
    let off = u64::from(p.off);
    let va = if p.key & 4 != 0 {
        off.wrapping_mul(0x1_0000_0001)
    } else if p.key & 8 != 0 {
        mr.base.wrapping_sub(off)
    } else {
        mr.base.wrapping_add(off)
    };
    let rlen = match (p.key >> 4) & 3 {
        0 => plen as u32,
        1 => (mtu as u32) * (p.rlen % 8 + 1) - (p.rlen >> 8) % mtu as u32,
        2 => p.rlen % 0x4800,
        _ => p.rlen,
    };
    let mut h = Headers::new(Bth {
        opcode: op,
        solicited: p.flags & 1 != 0,
        mig_req: p.flags & 2 != 0,
        pad: pad_for(plen),
        pkey: cfg.pkey,
        resv8: p.flags >> 4,
        dest_qp: cfg.qpn,
        ack_req: p.flags & 4 != 0,
        psn: epsn.add(p.dpsn as i32 as u32),
    });
    let has = |x| info.exts.contains(x);
    h.feth = has(ExtSet::FETH).then_some(feth_of(p.swap));
    h.deth = has(ExtSet::DETH).then_some(Deth {
        qkey: if p.flags & 8 != 0 {
            !cfg.qkey
        } else {
            cfg.qkey
        },
        src_qp: p.imm & 0xFF_FFFF,
    });
    h.reth = has(ExtSet::RETH).then_some(Reth {
        va,
        rkey,
        len: rlen,
    });
    h.atomic_eth = has(ExtSet::ATOMIC_ETH).then_some(AtomicEth {
        va,
        rkey,
        swap_add: p.swap,
        compare: p.compare,
    });
    h.aeth = has(ExtSet::AETH).then_some(metaroce_proto::ext::Aeth {
        syndrome: Syndrome::Ack { credits: 0x1F },
        msn: p.imm & 0xFF_FFFF,
    });
    h.atomic_ack_eth =
        has(ExtSet::ATOMIC_ACK_ETH).then_some(metaroce_proto::ext::AtomicAckEth { orig: p.swap });
    h.imm = has(ExtSet::IMM).then_some(p.imm);
    h.ieth = has(ExtSet::IETH).then_some(p.imm ^ 0x5A5A);
    let payload: Vec<u8> = (0..plen).map(|i| i as u8).collect();
    let mut buf = vec![0u8; plen + 128];
    let n = build(&h, &payload, &mut buf).expect("consistent packet refused");
    buf.truncate(n);
    buf
}

/// Checks a transmitted descriptor encodes and parses back.
pub fn check_encodes(d: &TxDesc, mtu: u32) {
    let plen = d.payload.len();
    assert!(plen <= mtu, "payload {plen} above the MTU");
    let pos = d.hdr.bth.opcode.info().pos;
    if matches!(pos, Position::First | Position::Middle) {
        assert_eq!(plen, mtu, "{:?} packet not one MTU", d.hdr.bth.opcode);
    }
    let payload = vec![0x5Au8; plen as usize];
    let mut buf = vec![0u8; plen as usize + 128];
    let n = build(&d.hdr, &payload, &mut buf).expect("descriptor does not encode");
    let p = parse(&buf[..n]).expect("descriptor does not parse");
    assert_eq!(p.hdr, d.hdr);
    check_parsed(&buf[..n], &p);
}

struct Model {
    cfg: QpConfig,
    /// RC: expected PSN.
    epsn: Psn,
    /// UC: expected PSN (after the first packet).
    uc_epsn: Option<Psn>,
    /// Messages completed (RC), for the MSN bound.
    msn: u32,
    /// Accepted READ requests: first PSN and number of responses.
    reads: Vec<(Psn, u32)>,
    /// Executed atomics: PSN and original value.
    atomics: Vec<(Psn, u64)>,
    /// Executed ATOMIC WRITEs and FLUSHes (answered by an empty READ
    /// RESPONSE Only): PSN and the MSN that completed them.
    empty_reads: Vec<(Psn, u32)>,
    /// RC: the NAK code the request that moved the QP to the error state
    /// must be answered with.
    nak: Option<NakCode>,
}

/// Runs one input.
pub fn run(data: &[u8]) {
    let Ok(input) = <Input as arbitrary::Arbitrary>::arbitrary_take_rest(Unstructured::new(data))
    else {
        return;
    };
    run_input(&input);
}

/// Runs a decoded input.
pub fn run_input(input: &Input) {
    match input.cfg.res % 3 {
        0 => run_with::<4>(input),
        1 => run_with::<1>(input),
        _ => run_with::<0>(input),
    }
}

fn run_with<const R: usize>(input: &Input) {
    let cfg = qp_config(&input.cfg);
    let mut qp = Qp::<R>::new(cfg).expect("valid configuration refused");
    let mut sq = vec![SendWqe::default(); cfg.sq_depth as usize];
    let mut mem = Mem::default();
    let mut rq = Rq::default();
    let mut m = Model {
        cfg,
        epsn: cfg.rq_psn,
        uc_epsn: None,
        msn: 0,
        reads: Vec::new(),
        atomics: Vec::new(),
        empty_reads: Vec::new(),
        nak: None,
    };
    let mut now = 0u64;
    for step in &input.steps {
        now += 1000;
        if super::trace() {
            eprintln!("step {step:?} (epsn {:?})", m.epsn);
        }
        match step {
            Step::Pkt(p) => {
                let base = if cfg.transport == Transport::Uc {
                    m.uc_epsn.unwrap_or(m.epsn)
                } else {
                    m.epsn
                };
                let buf = build_pkt(p, &cfg, base);
                let pkt = parse(&buf).expect("built packet does not parse");
                receive(&mut qp, &mut m, &pkt, now, &mut sq, &mut mem, &mut rq);
            }
            Step::Raw(b) => {
                if let Ok(pkt) = parse(b) {
                    check_parsed(b, &pkt);
                    receive(&mut qp, &mut m, &pkt, now, &mut sq, &mut mem, &mut rq);
                }
            }
            Step::PostRecv(n) => rq.post(u32::from(*n) % 20000),
            Step::PollTx(n) => {
                for _ in 0..=(n % 16) {
                    if !poll(&mut qp, &m, now, &mut sq, &mem) {
                        break;
                    }
                }
            }
            Step::FailNext => mem.fail_next = true,
            Step::SetError => {
                qp.set_error();
                flush(&mut qp, &mut rq);
            }
        }
    }
    while poll(&mut qp, &m, now, &mut sq, &mem) {}
    let st = qp.stats().resp;
    super::count(|| "stat duplicates".into(), st.duplicates);
    super::count(|| "stat seq_naks".into(), st.seq_naks);
    super::count(|| "stat rnr_naks".into(), st.rnr_naks);
    super::count(|| "stat atomics executed".into(), mem.atomics.len() as u64);
    super::count(
        || "stat atomic writes executed".into(),
        mem.atomic_writes.len() as u64,
    );
    super::count(|| "stat flushes executed".into(), mem.flushes.len() as u64);
    super::count(
        || "stat whole-region flushes executed".into(),
        mem.flushes.iter().filter(|f| f.whole_mr).count() as u64,
    );
    super::count(
        || "input ended in error state".into(),
        u64::from(qp.is_error()),
    );
    qp.set_error();
    assert!(
        qp.poll_tx(now, &mut sq).is_none(),
        "sent after the error transition"
    );
    flush(&mut qp, &mut rq);
    assert!(
        rq.out.is_empty(),
        "receive WQEs taken and never returned: {:?}",
        rq.out
    );
}

fn flush<const R: usize>(qp: &mut Qp<R>, rq: &mut Rq) {
    if let Some(c) = qp.flush_recv() {
        let (w, _) = rq.out.pop_front().expect("flushed a WQE never taken");
        assert_eq!(c.id, w.id, "flushed WQE out of order");
        assert_eq!(c.status, WcStatus::WrFlushErr);
    }
    assert!(qp.flush_recv().is_none(), "flushed twice");
}

fn poll<const R: usize>(
    qp: &mut Qp<R>,
    m: &Model,
    now: u64,
    sq: &mut [SendWqe],
    mem: &Mem,
) -> bool {
    let error = qp.is_error();
    let Some(d) = qp.poll_tx(now, sq) else {
        return false;
    };
    if super::trace() {
        eprintln!(
            "tx {:?} psn {:?} {:?} {:?}",
            d.hdr.bth.opcode, d.hdr.bth.psn, d.hdr.aeth, d.payload
        );
    }
    assert_eq!(m.cfg.transport, Transport::Rc, "UC/UD responder sent {d:?}");
    super::count(
        || {
            format!(
                "tx {:?} {:?}",
                d.hdr.bth.opcode,
                d.hdr.aeth.map(|a| a.syndrome)
            )
        },
        1,
    );
    check_encodes(&d, m.cfg.pmtu.bytes());
    let b = d.hdr.bth;
    assert_eq!((b.dest_qp, b.pkey), (DEST_QPN, m.cfg.pkey));
    let aeth = d.hdr.aeth;
    if error {
        assert!(
            matches!(aeth.map(|a| a.syndrome), Some(Syndrome::Nak(c)) if c != NakCode::PsnSeqErr)
                && b.opcode == Opcode::RcAck,
            "sent {d:?} in the error state"
        );
        if let (Some(want), Some(Syndrome::Nak(c))) = (m.nak, aeth.map(|a| a.syndrome)) {
            assert_eq!(c, want, "final NAK code");
        }
    }
    if let Some(a) = aeth {
        assert!(
            a.msn <= m.msn,
            "MSN {} above the {} messages completed",
            a.msn,
            m.msn
        );
    }
    match b.opcode.info().kind {
        OpKind::Ack => match aeth.expect("ACK without AETH").syndrome {
            Syndrome::Ack { .. } => {
                assert!(
                    b.psn.is_before(m.epsn),
                    "ACK of {:?}, expected PSN {:?}",
                    b.psn,
                    m.epsn
                )
            }
            Syndrome::Nak(_) | Syndrome::Rnr { .. } => {
                assert_eq!(b.psn, m.epsn, "NAK for a PSN other than the expected one")
            }
        },
        OpKind::ReadResp => {
            assert!(
                b.psn.is_before(m.epsn),
                "READ response ahead of the expected PSN"
            );
            let syn = aeth.map(|a| a.syndrome);
            if let Some(a) = aeth {
                assert!(
                    matches!(a.syndrome, Syndrome::Ack { .. }),
                    "READ response with {syn:?}"
                );
            }
            let empty_only = b.opcode == Opcode::RcReadRespOnly && d.payload == PayloadRef::None;
            if empty_only && m.empty_reads.iter().any(|&(p, _)| p == b.psn) {
                // The answer to an ATOMIC WRITE or FLUSH (first or
                // replayed): its own PSN and MSN, an ACK AETH, no payload,
                // no pad.
                let a = aeth.expect("ATOMIC WRITE/FLUSH response without AETH");
                assert!(
                    m.empty_reads
                        .iter()
                        .any(|&(p, msn)| p == b.psn && msn & 0xFF_FFFF == a.msn),
                    "ATOMIC WRITE/FLUSH response {:?} with MSN {} (executed: {:?})",
                    b.psn,
                    a.msn,
                    m.empty_reads
                );
                assert_eq!(b.pad, 0, "ATOMIC WRITE/FLUSH response with pad");
                return true;
            }
            assert!(
                m.reads.iter().any(|&(p, n)| b.psn.since(p) < n),
                "READ response {:?} for no accepted READ",
                b.psn
            );
            match d.payload {
                PayloadRef::None => {}
                PayloadRef::Mr { rkey, va, len } => assert!(
                    mem.reads.iter().any(|r| r.covers(rkey, va, len)),
                    "READ response from unchecked memory {rkey:#x} {va:#x}+{len}"
                ),
                PayloadRef::Sq { .. } => panic!("READ response from the send queue"),
            }
        }
        OpKind::AtomicAck => {
            assert!(b.psn.is_before(m.epsn));
            let orig = d.hdr.atomic_ack_eth.expect("atomic ACK without value").orig;
            let exec = m.atomics.iter().rev().find(|&&(p, _)| p == b.psn);
            assert_eq!(
                exec.map(|e| e.1),
                Some(orig),
                "atomic ACK with a value never returned"
            );
        }
        k => panic!("responder sent {k:?}"),
    }
    true
}

#[allow(clippy::too_many_arguments)]
fn receive<const R: usize>(
    qp: &mut Qp<R>,
    m: &mut Model,
    pkt: &Packet<'_>,
    now: u64,
    sq: &mut [SendWqe],
    mem: &mut Mem,
    rq: &mut Rq,
) {
    let was_error = qp.is_error();
    let (calls, taken, atomics) = (mem.calls, rq.taken, mem.atomics.len());
    let atomic_writes = mem.atomic_writes.len();
    let flushes = mem.flushes.len();
    let epsn = m.epsn;
    let info = pkt.hdr.bth.opcode.info();
    let p = pkt.hdr.bth.psn;
    let out: RxOutcome = qp.receive(now, pkt, sq, mem, rq);
    super::count(|| format!("rx {:?} -> {:?}", info.kind, out.drop), 1);
    if let Some(c) = out.completion {
        super::count(|| format!("recv completion {:?} {:?}", c.status, c.kind), 1);
    }
    if super::trace() {
        eprintln!(
            "rx {:?} psn {:?} len {} {:?}\n   -> {out:?}",
            pkt.hdr.bth.opcode,
            p,
            pkt.payload.len(),
            pkt.hdr.reth
        );
    }
    let untouched = mem.calls == calls && rq.taken == taken;
    if was_error {
        if info.transport == m.cfg.transport {
            assert_eq!(
                out.drop,
                Some(DropReason::QpError),
                "accepted in the error state"
            );
        }
        assert!(untouched && out.place.is_none() && out.completion.is_none());
        return;
    }
    if out.drop.is_some() {
        assert!(out.place.is_none(), "dropped packet placed data: {out:?}");
    }
    match out.drop {
        Some(
            DropReason::OutOfSequence
            | DropReason::WrongTransport
            | DropReason::QpError
            | DropReason::Ghost
            | DropReason::Stale
            | DropReason::UcDropped
            | DropReason::QkeyMismatch,
        ) => {
            assert!(
                untouched,
                "{:?} drop touched memory or the receive queue",
                out.drop
            );
            assert!(out.completion.is_none());
        }
        Some(DropReason::Duplicate) => {
            assert!(
                rq.taken == taken && out.completion.is_none(),
                "duplicate consumed a WQE"
            );
        }
        _ => {}
    }
    let executed = mem.atomics.len() - atomics;
    if executed > 0 {
        assert_eq!(executed, 1);
        assert!(
            out.drop.is_none(),
            "atomic executed for a dropped packet: {out:?}"
        );
        assert!(matches!(info.kind, OpKind::CmpSwap | OpKind::FetchAdd));
        m.atomics.push((p, mem.atomics[atomics].2));
    }
    let aw_executed = mem.atomic_writes.len() - atomic_writes;
    if aw_executed > 0 {
        assert_eq!(aw_executed, 1, "one packet, several ATOMIC WRITEs");
        assert!(
            out.drop.is_none(),
            "ATOMIC WRITE executed for a dropped packet: {out:?}"
        );
        assert_eq!(
            info.kind,
            OpKind::AtomicWrite,
            "{:?} executed an ATOMIC WRITE",
            pkt.hdr.bth.opcode
        );
        assert_eq!(executed, 0);
        let reth = pkt.hdr.reth.expect("ATOMIC WRITE without RETH");
        let (rkey, va, value) = mem.atomic_writes[atomic_writes];
        assert_eq!(
            (rkey, va),
            (reth.rkey, reth.va),
            "ATOMIC WRITE to another place than the RETH's"
        );
        assert!(
            reth.len == 8 && pkt.hdr.bth.pad == 0,
            "ATOMIC WRITE executed with RETH length {} pad {}",
            reth.len,
            pkt.hdr.bth.pad
        );
        assert_eq!(
            &value.to_ne_bytes()[..],
            pkt.payload,
            "ATOMIC WRITE of other bytes than the payload"
        );
    }
    if info.kind == OpKind::AtomicWrite && info.transport == m.cfg.transport {
        let reth = pkt.hdr.reth.expect("ATOMIC WRITE without RETH");
        let well_formed =
            pkt.payload.len() == 8 && reth.len == 8 && pkt.hdr.bth.pad == 0 && reth.va % 8 == 0;
        if out.drop.is_none() {
            assert!(
                well_formed,
                "ATOMIC WRITE accepted with {} bytes, RETH {reth:?}",
                pkt.payload.len()
            );
            assert_eq!(aw_executed, 1, "ATOMIC WRITE accepted but not executed");
            assert!(
                out.place.is_none() && out.completion.is_none() && rq.taken == taken,
                "ATOMIC WRITE placed or completed: {out:?}"
            );
        }
        if p == epsn && !well_formed {
            assert!(
                matches!(
                    out.drop,
                    Some(
                        DropReason::BadLength
                            | DropReason::Misaligned
                            | DropReason::QpAccess
                            | DropReason::OpSequence
                    )
                ),
                "malformed ATOMIC WRITE (payload {}, RETH {reth:?}, pad {}): {out:?}",
                pkt.payload.len(),
                pkt.hdr.bth.pad
            );
            assert_eq!(mem.calls, calls, "malformed ATOMIC WRITE reached memory");
            assert!(qp.is_error(), "malformed ATOMIC WRITE left the QP working");
        }
    }
    let fl_executed = mem.flushes.len() - flushes;
    if fl_executed > 0 {
        assert_eq!(fl_executed, 1, "one packet, several FLUSHes");
        assert!(
            out.drop.is_none(),
            "FLUSH approved for a dropped packet: {out:?}"
        );
        assert_eq!(
            info.kind,
            OpKind::Flush,
            "{:?} executed a FLUSH",
            pkt.hdr.bth.opcode
        );
        assert_eq!(executed + aw_executed, 0);
        let feth = pkt.hdr.feth.expect("FLUSH without FETH");
        let reth = pkt.hdr.reth.expect("FLUSH without RETH");
        assert!(feth_valid(&feth), "FLUSH executed with {feth:?}");
        let want = Flush {
            rkey: reth.rkey,
            va: reth.va,
            len: reth.len,
            whole_mr: feth.selectivity == 1,
            access: flush_rights(feth.placement),
        };
        assert_eq!(
            mem.flushes[flushes], want,
            "FLUSH executed otherwise than the FETH/RETH ask"
        );
        assert!(
            m.cfg.access.contains(want.access),
            "FLUSH beyond the QP's rights {:?}",
            m.cfg.access
        );
    }
    if info.kind == OpKind::Flush && info.transport == m.cfg.transport {
        let feth = pkt.hdr.feth.expect("FLUSH without FETH");
        let granted = feth_valid(&feth) && m.cfg.access.contains(flush_rights(feth.placement));
        if out.drop.is_none() {
            assert!(
                granted,
                "FLUSH accepted with {feth:?}, QP access {:?}",
                m.cfg.access
            );
            assert_eq!(fl_executed, 1, "FLUSH accepted but not approved by memory");
            assert!(
                out.place.is_none() && out.completion.is_none() && rq.taken == taken,
                "FLUSH placed or completed: {out:?}"
            );
        }
        if out.drop == Some(DropReason::Duplicate) {
            assert_eq!(mem.calls, calls, "duplicate FLUSH executed again");
        }
        if p == epsn && !granted {
            let ok = if feth_valid(&feth) {
                matches!(
                    out.drop,
                    Some(DropReason::QpAccess | DropReason::OpSequence)
                )
            } else {
                matches!(
                    out.drop,
                    Some(DropReason::BadFlush | DropReason::QpAccess | DropReason::OpSequence)
                )
            };
            assert!(
                ok,
                "FLUSH with {feth:?}, QP access {:?}: {out:?}",
                m.cfg.access
            );
            assert_eq!(mem.calls, calls, "refused FLUSH reached memory");
            assert!(qp.is_error(), "refused FLUSH left the QP working");
        }
    }
    if out.drop == Some(DropReason::BadFlush) {
        assert_eq!(
            info.kind,
            OpKind::Flush,
            "BadFlush for {:?}",
            pkt.hdr.bth.opcode
        );
        assert!(!feth_valid(&pkt.hdr.feth.expect("FLUSH without FETH")));
    }
    if m.cfg.transport == Transport::Rc
        && info.transport == Transport::Rc
        && info.kind.is_request()
        && qp.is_error()
    {
        if p == epsn && out.drop.is_some() {
            // Class C: the QP is in the error state and answers with one
            // NAK whose code follows the refusal.
            let code = match out.drop {
                Some(DropReason::AccessDenied) => NakCode::RemoteAccess,
                Some(DropReason::Operational) => NakCode::RemoteOperational,
                _ => NakCode::InvalidRequest,
            };
            m.nak = Some(code);
            if info.kind == OpKind::AtomicWrite
                && matches!(
                    out.drop,
                    Some(DropReason::BadLength | DropReason::Misaligned)
                )
            {
                assert_eq!(code, NakCode::InvalidRequest);
            }
        }
    }
    if info.transport != m.cfg.transport || !info.kind.is_request() {
        assert!(
            out.drop.is_some(),
            "non-request accepted by the responder: {out:?}"
        );
        return;
    }
    // Expected-PSN models.
    match m.cfg.transport {
        Transport::Rc => {
            if out.drop.is_none() {
                assert_eq!(p, m.epsn, "RC executed a PSN other than the expected one");
                m.epsn = match info.kind {
                    OpKind::ReadReq => {
                        let n = m.cfg.pmtu.packets(pkt.hdr.reth.unwrap().len);
                        m.reads.push((p, n));
                        p.add(n)
                    }
                    _ => p.next(),
                };
                if info.pos.is_end() {
                    m.msn += 1;
                }
                if matches!(info.kind, OpKind::AtomicWrite | OpKind::Flush) {
                    m.empty_reads.push((p, m.msn));
                }
            }
        }
        Transport::Uc => {
            if out.drop.is_none() && !info.pos.is_start() {
                assert_eq!(
                    Some(p),
                    m.uc_epsn,
                    "UC accepted a middle packet out of order"
                );
            }
            if out.drop != Some(DropReason::UcDropped) {
                m.uc_epsn = Some(p.next());
            }
            if info.pos.is_start() && out.drop != Some(DropReason::UcDropped) {
                // Any open message was abandoned: a held WQE starts over.
                rq.out.iter_mut().for_each(|(_, fill)| *fill = 0);
            }
        }
        _ => {}
    }
    // Placement.
    match out.place {
        None => {}
        Some(Place::Recv { id, offset, len }) => {
            assert_eq!(len as usize, pkt.payload.len(), "placement length");
            let (w, fill) = rq
                .out
                .iter_mut()
                .find(|(w, _)| w.id == id)
                .expect("placed into a WQE not held");
            match m.cfg.transport {
                Transport::Ud => assert!(offset == GRH_LEN && *fill == 0),
                Transport::Uc => assert!(
                    offset == *fill || offset == 0,
                    "UC placement not contiguous"
                ),
                _ => assert_eq!(offset, *fill, "RC placement not contiguous"),
            }
            let end = offset.checked_add(len).expect("placement end overflows");
            assert!(
                end <= w.len,
                "placement past the receive WQE: {end} > {}",
                w.len
            );
            *fill = end;
        }
        Some(Place::Rdma { rkey, va, len }) => {
            assert_eq!(len as usize, pkt.payload.len(), "placement length");
            assert!(info.kind == OpKind::Write);
            let last = mem
                .writes
                .last()
                .expect("RDMA placement without a WRITE check");
            assert!(
                last.covers(rkey, va, len),
                "RDMA placement {rkey:#x} {va:#x}+{len} outside {last:?}"
            );
        }
        Some(pl) => panic!("responder returned a requester placement {pl:?}"),
    }
    // Completion.
    if let Some(c) = out.completion {
        let (w, fill) = rq.out.pop_front().expect("completion without a WQE taken");
        assert_eq!(c.id, w.id, "receive completion out of order");
        match c.status {
            WcStatus::Success => match c.kind {
                RecvKind::Send => {
                    assert_eq!(info.kind, OpKind::Send);
                    assert!(info.pos.is_end());
                    if m.cfg.transport == Transport::Ud {
                        assert_eq!(c.byte_len, GRH_LEN + pkt.payload.len() as u32);
                        assert_eq!(c.src_qp, pkt.hdr.deth.map(|d| d.src_qp));
                    } else {
                        assert_eq!(c.byte_len, fill, "completion length is not what was placed");
                    }
                    assert!(c.byte_len <= w.len);
                    assert_eq!((c.imm, c.invalidate), (pkt.hdr.imm, pkt.hdr.ieth));
                }
                RecvKind::WriteImm => {
                    assert_eq!(info.kind, OpKind::Write);
                    assert!(info.pos.is_end() && c.imm.is_some() && c.imm == pkt.hdr.imm);
                    assert_eq!(
                        fill, 0,
                        "data placed into a WQE consumed by WRITE with immediate"
                    );
                }
            },
            WcStatus::LocLenErr => {
                assert!(out.drop.is_some());
                assert!(c.byte_len > w.len, "length error for a message that fits");
            }
            s => panic!("receive completion with status {s:?}"),
        }
    }
    if out.drop.is_none() && info.kind != OpKind::AtomicWrite {
        assert!(
            out.place.is_some() || pkt.payload.is_empty(),
            "accepted payload placed nowhere: {out:?}"
        );
    }
}
