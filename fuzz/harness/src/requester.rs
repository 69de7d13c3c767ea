// SPDX-License-Identifier: GPL-2.0
//! Target `requester`: a queue pair's requester and completer fed an
//! arbitrary sequence of posted work requests, transmit polls, ACK / NAK /
//! RNR NAK / READ response / atomic ACK packets (aimed at the PSNs of the
//! posted requests or anywhere), timer events, completion polls and error
//! transitions, for RC, UC and UD.
//!
//! The harness keeps a model of the send queue: PSNs are assigned in
//! posting order (a message of `n` packets takes `n` PSNs), so every
//! transmitted packet can be traced to its work request. Besides "no
//! panic", it checks:
//! * `post_send` accepts or refuses exactly as the rules say;
//! * every transmitted request belongs to a posted, unreported work request
//!   and matches it: opcode and position, payload offset and length (never
//!   past the WR's data), RETH / AtomicETH / immediate / IETH / DETH, AckReq
//!   on a message's last packet, solicited bit; new PSNs are contiguous (no
//!   gap) and, on RC, start within `max_inflight` of the oldest PSN that
//!   could still be unacknowledged (a READ's responses may run past it),
//!   and a READ, atomic, ATOMIC WRITE or FLUSH only while fewer than
//!   `max_rd_atomic` earlier ones wait for their response;
//!   a FLUSH is one RC FLUSH packet (one PSN) with the WR's FETH and RETH
//!   (its range length, not the WR's length, which is 0) and no payload;
//!   nothing is sent in the error state;
//! * READ response data is placed only into a READ's buffer, in order,
//!   never past its length, and an atomic result only into its atomic WR,
//!   once; an ATOMIC WRITE (RETH length 8, its 8 bytes from the send queue)
//!   or a FLUSH is accepted as answered only by an empty READ RESPONSE Only
//!   with an ACK at its PSN, and nothing is placed for it;
//! * send completions come in posting order, each WR at most once, with its
//!   length; a success needs an acknowledgement covering the WR (RC), its
//!   complete READ data, atomic result or ATOMIC WRITE / FLUSH response, or its
//!   full transmission (UC/UD);
//!   signaled successes and every error are reported, unsignaled successes
//!   retired silently; after the first error only flushes follow;
//! * a local WR (`SendOp::Local`, RC and UC, no data) is never sent, takes
//!   no PSN and completes in posting order: on RC only once every earlier
//!   WR is acknowledged, on UC once every earlier WR went out; flushed like
//!   the others at the error transition;
//! * RC with a timeout: while work is outstanding and the QP is not in
//!   error, either a packet can be sent or a timer is pending (no stall);
//! * at the error transition every posted WR is retired and every signaled
//!   one reported.

use super::enc::{bytes, steps, Enc, Wire};
use super::packet::check_parsed;
use super::responder::{check_encodes, pmtu_of};
use arbitrary::{Result, Unstructured};
use metaroce_proto::bth::Bth;
use metaroce_proto::ext::{Aeth, AtomicAckEth, Feth, NakCode, Syndrome};
use metaroce_proto::opcode::{OpKind, Opcode, Position, Transport};
use metaroce_proto::packet::{build, pad_for, parse, Headers, Packet, PayloadRef, TxDesc};
use metaroce_proto::psn::Psn;
use metaroce_proto::qp::{DropReason, Qp, QpConfig};
use metaroce_proto::req::{PostError, MAX_MSG_LEN, MAX_MSG_PSNS};
use metaroce_proto::wr::{AtomicOp, Place, SendOp, SendWqe, SendWr, UdDest, WcStatus};

/// Local QP number.
pub const QPN: u32 = 0x31;
/// Remote QP number.
pub const DEST_QPN: u32 = 0x42;
/// The QP's own Q_Key.
pub const QKEY: u32 = 0x0BAD_CAFE;
/// Most steps run per input.
pub const MAX_STEPS: usize = 600;

/// QP attributes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cfg {
    /// 0-2: RC, 3: UC, 4: UD (modulo 5).
    pub transport: u8,
    /// Path MTU index.
    pub pmtu: u8,
    /// First PSN.
    pub sq_psn: u32,
    /// log2 of the send queue depth (modulo 5).
    pub sq_depth_log: u8,
    /// `max_rd_atomic` (modulo 5).
    pub max_rd_atomic: u8,
    /// ACK timeout exponent (modulo 32; 0 disables the timer).
    pub timeout: u8,
    /// Transport retries (modulo 8).
    pub retry_cnt: u8,
    /// RNR retries (modulo 8; 7 is unlimited).
    pub rnr_retry: u8,
    /// `max_inflight` selector: 1, 2, 3, 8, 128 or 2^22.
    pub max_inflight: u8,
    /// AckReq interval - 1 (modulo 8).
    pub ack_req_every: u8,
}

/// A work request to post.
#[derive(Clone, Copy, Debug, Default)]
pub struct Post {
    /// 0xE0-0xFF: FLUSH (see [`flush_of`]); else, modulo 10: 0 SEND, 1
    /// SEND imm, 2 SEND inv, 3 WRITE, 4 WRITE imm, 5 READ, 6 CmpSwap, 7
    /// FetchAdd, 8 ATOMIC WRITE, 9 local.
    pub op: u8,
    /// Length (modulo 1100 unless bit 7 of `flags`; atomics and ATOMIC
    /// WRITE: 8 unless bit 5; local and FLUSH: 0 unless bit 5). FLUSH: also
    /// the length of the range (inverted if bit 7 of `flags`).
    pub len: u16,
    /// Bit 0 signaled, 1 fence, 2 solicited, 3 UD: use the QP's Q_Key, 4
    /// a length above 2^31, 5 atomics, local and FLUSH keep `len`, 6 UD: no
    /// destination, 7 `len` as is (else modulo 1100).
    pub flags: u8,
    /// Remote address (atomics and ATOMIC WRITE: aligned down unless odd).
    pub va: u64,
    /// Remote key, immediate data, invalidate key; FLUSH: bits 24-29 may
    /// give the FETH ([`flush_of`]).
    pub key: u32,
}

/// A response packet to receive.
#[derive(Clone, Copy, Debug, Default)]
pub struct Resp {
    /// 0 ACK, 1 NAK, 2 RNR NAK, 3 READ response, 4 atomic ACK, 5 ACK of
    /// the last PSN sent, 6 what a correct responder sends next for WR `k`
    /// (modulo 7).
    pub kind: u8,
    /// PSN mode (modulo 3): 0 a posted WR's PSN, 1 relative to the next new
    /// PSN, 2 raw (`value`).
    pub psn_sel: u8,
    /// WR index (from the oldest unreported one).
    pub k: u16,
    /// Packet index inside the WR (bit 15: the last one).
    pub j: u16,
    /// Offset from the next new PSN (mode 1).
    pub d: i8,
    /// READ response payload selector: 0 the right length, 1 one MTU, 2
    /// empty, 3 up to 5000 bytes (the rest of the bits).
    pub plen: u16,
    /// Credits, NAK code, RNR timer; for READ responses: bits 0-1 the
    /// position if bit 2 is set (else the one that fits the PSN), bit 4 a
    /// NAK in the AETH. READ responses and atomic ACKs: bit 3 the local
    /// buffers are "not present" ([`SinkMem`]).
    pub aux: u8,
    /// Atomic value, raw PSN.
    pub value: u64,
    /// MSN.
    pub msn: u32,
}

/// One step.
#[derive(Clone, Debug)]
pub enum Step {
    /// Post a work request.
    Post(Post),
    /// Poll up to this many packets (modulo 16, plus one).
    PollTx(u8),
    /// Receive a response.
    Resp(Resp),
    /// Timers: mode 0 to the next deadline, 1 advance by `ns`, 2 now.
    Timer(u8, u32),
    /// Poll up to this many completions (modulo 16, plus one).
    PollComp(u8),
    /// Receive raw bytes if they parse as a response.
    Raw(Vec<u8>),
    /// `modify_qp(ERR)`.
    SetError,
}

impl Wire for Cfg {
    fn decode(u: &mut Unstructured<'_>) -> Result<Self> {
        Ok(Cfg {
            transport: u.arbitrary()?,
            pmtu: u.arbitrary()?,
            sq_psn: u.arbitrary()?,
            sq_depth_log: u.arbitrary()?,
            max_rd_atomic: u.arbitrary()?,
            timeout: u.arbitrary()?,
            retry_cnt: u.arbitrary()?,
            rnr_retry: u.arbitrary()?,
            max_inflight: u.arbitrary()?,
            ack_req_every: u.arbitrary()?,
        })
    }
    fn encode(&self, e: &mut Enc) {
        e.u8(self.transport)
            .u8(self.pmtu)
            .u32(self.sq_psn)
            .u8(self.sq_depth_log);
        e.u8(self.max_rd_atomic)
            .u8(self.timeout)
            .u8(self.retry_cnt)
            .u8(self.rnr_retry);
        e.u8(self.max_inflight).u8(self.ack_req_every);
    }
}

impl Wire for Post {
    fn decode(u: &mut Unstructured<'_>) -> Result<Self> {
        Ok(Post {
            op: u.arbitrary()?,
            len: u.arbitrary()?,
            flags: u.arbitrary()?,
            va: u.arbitrary()?,
            key: u.arbitrary()?,
        })
    }
    fn encode(&self, e: &mut Enc) {
        e.u8(self.op)
            .u16(self.len)
            .u8(self.flags)
            .u64(self.va)
            .u32(self.key);
    }
}

impl Wire for Resp {
    fn decode(u: &mut Unstructured<'_>) -> Result<Self> {
        Ok(Resp {
            kind: u.arbitrary()?,
            psn_sel: u.arbitrary()?,
            k: u.arbitrary()?,
            j: u.arbitrary()?,
            d: u.arbitrary()?,
            plen: u.arbitrary()?,
            aux: u.arbitrary()?,
            value: u.arbitrary()?,
            msn: u.arbitrary()?,
        })
    }
    fn encode(&self, e: &mut Enc) {
        e.u8(self.kind)
            .u8(self.psn_sel)
            .u16(self.k)
            .u16(self.j)
            .u8(self.d as u8);
        e.u16(self.plen).u8(self.aux).u64(self.value).u32(self.msn);
    }
}

impl Wire for Step {
    fn decode(u: &mut Unstructured<'_>) -> Result<Self> {
        let tag: u8 = u.arbitrary()?;
        Ok(match tag % 24 {
            0..=4 => Step::Post(Post::decode(u)?),
            5..=9 => Step::PollTx(u.arbitrary()?),
            10..=17 => Step::Resp(Resp::decode(u)?),
            18 | 19 => Step::Timer(u.arbitrary()?, u.arbitrary()?),
            20 | 21 => Step::PollComp(u.arbitrary()?),
            22 => Step::Raw(bytes(u)?.to_vec()),
            _ => Step::SetError,
        })
    }
    fn encode(&self, e: &mut Enc) {
        match self {
            Step::Post(p) => {
                e.u8(0);
                p.encode(e);
            }
            Step::PollTx(n) => {
                e.u8(5).u8(*n);
            }
            Step::Resp(r) => {
                e.u8(10);
                r.encode(e);
            }
            Step::Timer(m, ns) => {
                e.u8(18).u8(*m).u32(*ns);
            }
            Step::PollComp(n) => {
                e.u8(20).u8(*n);
            }
            Step::Raw(b) => {
                e.u8(22).bytes(b);
            }
            Step::SetError => {
                e.u8(23);
            }
        }
    }
}

target_input!("QP attributes.");

/// The QP configuration of `c`.
pub fn qp_config(c: &Cfg) -> QpConfig {
    let t = match c.transport % 5 {
        0..=2 => Transport::Rc,
        3 => Transport::Uc,
        _ => Transport::Ud,
    };
    let mut q = QpConfig::new(t, QPN, DEST_QPN);
    q.pmtu = pmtu_of(c.pmtu);
    q.sq_psn = Psn::new(c.sq_psn);
    q.rq_psn = Psn::new(c.sq_psn ^ 0x80_0000);
    q.qkey = QKEY;
    q.sq_depth = 1 << (c.sq_depth_log % 5);
    q.max_rd_atomic = c.max_rd_atomic % 5;
    q.timeout = c.timeout % 32;
    q.retry_cnt = c.retry_cnt % 8;
    q.rnr_retry = c.rnr_retry % 8;
    q.max_inflight = [1, 2, 3, 8, 128, 1 << 22][usize::from(c.max_inflight % 6)];
    q.ack_req_every = u32::from(c.ack_req_every % 8) + 1;
    q
}

/// The FETH of a FLUSH post (`op` 0xE0-0xFF): bit 4 of `op` clear, a
/// valid one (placement GLOBAL, PERSISTENT, both, GLOBAL for bits 0-1 of
/// `op`, selectivity range or whole region for bit 2); set, the raw fields
/// from `key` (bits 24-27 placement 0-15, bits 28-29 selectivity 0-3).
pub fn flush_of(p: &Post) -> Feth {
    if p.op & 0x10 == 0 {
        Feth {
            placement: [1, 2, 3, 1][usize::from(p.op & 3)],
            selectivity: (p.op >> 2) & 1,
        }
    } else {
        Feth {
            placement: (p.key >> 24) as u8 & 0xF,
            selectivity: (p.key >> 28) as u8 & 3,
        }
    }
}

/// True for operations that get a response of their own: READ, atomics,
/// ATOMIC WRITE and FLUSH (they count against `max_rd_atomic`).
pub fn needs_response(op: &SendOp) -> bool {
    matches!(
        op,
        SendOp::Read { .. }
            | SendOp::Atomic { .. }
            | SendOp::AtomicWrite { .. }
            | SendOp::Flush { .. }
    )
}

/// True for operations answered by an empty READ RESPONSE Only at their
/// (single) PSN: ATOMIC WRITE and FLUSH.
pub fn empty_read(op: &SendOp) -> bool {
    matches!(op, SendOp::AtomicWrite { .. } | SendOp::Flush { .. })
}

/// The work request a `Post` stands for.
pub fn send_wr(p: &Post, id: u64, t: Transport) -> SendWr {
    let atomic_va = if p.va & 1 != 0 { p.va } else { p.va & !7 };
    let flush = flush_of(p);
    let range = if p.flags & 0x80 != 0 {
        !u32::from(p.len)
    } else {
        u32::from(p.len)
    };
    let sel = if p.op >= 0xE0 { 10 } else { p.op % 10 };
    let op = match sel {
        0 => SendOp::Send,
        1 => SendOp::SendImm { imm: p.key },
        2 => SendOp::SendInv { rkey: p.key },
        3 => SendOp::Write {
            va: p.va,
            rkey: p.key,
        },
        4 => SendOp::WriteImm {
            va: p.va,
            rkey: p.key,
            imm: !p.key,
        },
        5 => SendOp::Read {
            va: p.va,
            rkey: p.key,
        },
        6 => SendOp::Atomic {
            va: atomic_va,
            rkey: p.key,
            op: AtomicOp::CmpSwap {
                compare: p.va,
                swap: !p.va,
            },
        },
        7 => SendOp::Atomic {
            va: atomic_va,
            rkey: p.key,
            op: AtomicOp::FetchAdd { add: p.va >> 3 },
        },
        8 => SendOp::AtomicWrite {
            va: atomic_va,
            rkey: p.key,
        },
        9 => SendOp::Local,
        _ => SendOp::Flush {
            va: p.va,
            rkey: p.key,
            len: range,
            placement: flush.placement,
            selectivity: flush.selectivity,
        },
    };
    // Mostly messages of up to four 256-byte packets (bit 7: up to 64 KiB).
    let mut len = if p.flags & 0x80 != 0 {
        u32::from(p.len)
    } else {
        u32::from(p.len) % 1100
    };
    if matches!(op, SendOp::Atomic { .. } | SendOp::AtomicWrite { .. }) && p.flags & 0x20 == 0 {
        len = 8;
    }
    if (op == SendOp::Local || matches!(op, SendOp::Flush { .. })) && p.flags & 0x20 == 0 {
        len = 0;
    }
    if p.flags & 0x10 != 0 {
        len = MAX_MSG_LEN + 1 + len;
    }
    let ud = (t == Transport::Ud && p.flags & 0x40 == 0).then_some(UdDest {
        qpn: p.key & 0xFF_FFFF,
        qkey: if p.flags & 8 != 0 {
            0x8000_0000
        } else {
            p.key & 0x7FFF_FFFF
        },
    });
    SendWr {
        wr_id: id,
        op,
        len,
        signaled: p.flags & 1 != 0,
        fence: p.flags & 2 != 0,
        solicited: p.flags & 4 != 0,
        ud,
    }
}

/// What `post_send` must answer, given the send queue use.
pub fn expected_post(
    cfg: &QpConfig,
    used: u32,
    wr: &SendWr,
) -> core::result::Result<(), PostError> {
    if used >= cfg.sq_depth {
        return Err(PostError::QueueFull);
    }
    let ok = match cfg.transport {
        Transport::Rc => true,
        Transport::Uc => matches!(
            wr.op,
            SendOp::Send
                | SendOp::SendImm { .. }
                | SendOp::Write { .. }
                | SendOp::WriteImm { .. }
                | SendOp::Local
        ),
        _ => matches!(wr.op, SendOp::Send | SendOp::SendImm { .. }),
    };
    if !ok {
        return Err(PostError::InvalidOp);
    }
    if wr.len > MAX_MSG_LEN || u64::from(wr.len).div_ceil(u64::from(cfg.pmtu.bytes())) > 1 << 22 {
        return Err(PostError::InvalidLength);
    }
    if matches!(wr.op, SendOp::Atomic { .. } | SendOp::AtomicWrite { .. }) && wr.len != 8 {
        return Err(PostError::InvalidLength);
    }
    // A local WQE carries no data, nor does a FLUSH (its range is in the op).
    if (wr.op == SendOp::Local || matches!(wr.op, SendOp::Flush { .. })) && wr.len != 0 {
        return Err(PostError::InvalidLength);
    }
    // FLUSH: placement GLOBAL (1) and/or PERSISTENT (2), nothing else;
    // selectivity range (0) or whole region (1).
    if let SendOp::Flush {
        placement,
        selectivity,
        ..
    } = wr.op
    {
        if !(1..=3).contains(&placement) || selectivity > 1 {
            return Err(PostError::InvalidOp);
        }
    }
    if cfg.transport == Transport::Ud {
        if wr.ud.is_none() {
            return Err(PostError::MissingDest);
        }
        if wr.len > cfg.pmtu.bytes() {
            return Err(PostError::InvalidLength);
        }
    }
    Ok(())
}

#[derive(Clone, Copy, Debug)]
struct Wr {
    wr: SendWr,
    /// Linear first PSN (distance from `sq_psn`).
    first: u32,
    /// PSNs used.
    npsn: u32,
    reported: bool,
    /// READ: bytes placed, contiguously from 0.
    covered: u32,
    atomic_placed: bool,
    /// READ: its last response was accepted; ATOMIC WRITE and FLUSH: its
    /// empty READ RESPONSE Only was accepted.
    answered: bool,
    /// Every packet went out at least once.
    tx_done: bool,
    /// Posted while the QP was in the error state (so it is flushed).
    in_error: bool,
}

impl Wr {
    fn end(&self) -> u32 {
        self.first + self.npsn
    }
}

struct Model {
    cfg: QpConfig,
    wrs: Vec<Wr>,
    /// Linear PSN of the next new packet.
    hi: u32,
    /// Upper bound of the (linear) oldest unacknowledged PSN.
    una_ub: u32,
    /// Index of the next WR a completion may report.
    next_report: usize,
    /// An error completion was reported.
    error_reported: bool,
    now: u64,
}

impl Model {
    fn lin(&self, p: Psn) -> u32 {
        p.since(self.cfg.sq_psn)
    }
    fn psn(&self, l: u32) -> Psn {
        self.cfg.sq_psn.add(l)
    }
    /// The WR whose PSN range holds linear PSN `l`, and the packet index.
    fn find(&self, l: u32) -> Option<(usize, u32)> {
        let k = self.wrs.partition_point(|w| w.first <= l).checked_sub(1)?;
        let w = &self.wrs[k];
        (l < w.end()).then_some((k, l - w.first))
    }
    fn mtu(&self) -> u32 {
        self.cfg.pmtu.bytes()
    }
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
    let cfg = qp_config(&input.cfg);
    let mut qp = Qp::<4>::new(cfg).expect("valid configuration refused");
    let mut sq = vec![SendWqe::default(); cfg.sq_depth as usize];
    let mut m = Model {
        cfg,
        wrs: Vec::new(),
        hi: 0,
        una_ub: 0,
        next_report: 0,
        error_reported: false,
        now: 0,
    };
    for step in &input.steps {
        m.now += 1;
        if super::trace() {
            eprintln!(
                "step {step:?} (hi {}, una_ub {}, now {})",
                m.hi, m.una_ub, m.now
            );
        }
        match step {
            Step::Post(p) => post(&mut qp, &mut m, &mut sq, p),
            Step::PollTx(n) => {
                for _ in 0..=(n % 16) {
                    if !poll_tx(&mut qp, &mut m, &mut sq) {
                        break;
                    }
                }
            }
            Step::Resp(r) => {
                let buf = build_resp(&m, r);
                let pkt = parse(&buf).expect("built response does not parse");
                let mut mem = SinkMem {
                    refuse: r.aux & 8 != 0,
                    place_now: r.msn & 1 != 0,
                    placed: None,
                };
                receive(&mut qp, &mut m, &pkt, &mut sq, &mut mem);
            }
            Step::Timer(mode, ns) => {
                match mode % 3 {
                    0 => {
                        if let Some(t) = qp.next_deadline() {
                            m.now = m.now.max(t);
                        }
                    }
                    1 => m.now += u64::from(*ns),
                    _ => {}
                }
                qp.on_timer(m.now, &mut sq);
            }
            Step::PollComp(n) => {
                for _ in 0..=(n % 16) {
                    if !poll_comp(&mut qp, &mut m, &mut sq) {
                        break;
                    }
                }
            }
            Step::Raw(b) => {
                if let Ok(pkt) = parse(b) {
                    check_parsed(b, &pkt);
                    let kind = pkt.hdr.bth.opcode.info().kind;
                    if !kind.is_request() {
                        let mut mem = SinkMem {
                            refuse: false,
                            place_now: false,
                            placed: None,
                        };
                        receive(&mut qp, &mut m, &pkt, &mut sq, &mut mem);
                    }
                }
            }
            Step::SetError => qp.set_error(),
        }
    }
    // No stall: outstanding work can make progress.
    while poll_comp(&mut qp, &mut m, &mut sq) {}
    let st = qp.stats();
    super::count(|| "stat retransmits".into(), st.req.retransmits);
    super::count(|| "stat timeouts".into(), st.comp.timeouts);
    super::count(|| "stat retries".into(), st.comp.retries);
    super::count(|| "stat seq_naks".into(), st.comp.seq_naks);
    super::count(|| "stat rnr_naks".into(), st.comp.rnr_naks);
    super::count(
        || {
            format!(
                "input ended: error {} used {}",
                qp.is_error(),
                qp.sq_used().min(2)
            )
        },
        1,
    );
    if cfg.transport == Transport::Rc
        && cfg.timeout != 0
        && cfg.max_rd_atomic > 0
        && !qp.is_error()
        && qp.sq_used() > 0
    {
        let mut probe = qp.clone();
        let mut psq = sq.clone();
        if probe.poll_tx(m.now, &mut psq).is_none() && qp.next_deadline().is_none() {
            // Nothing to send and no timer: only local WQEs may be left,
            // which that transmit poll passed (the requester passes them
            // there, e.g. after a retry rewound it past them) and which
            // now complete.
            while probe.poll_send_completion(&mut psq).is_some() {}
            assert_eq!(
                probe.sq_used(),
                0,
                "stall: {} WRs outstanding, nothing to send and no timer",
                qp.sq_used()
            );
        }
    }
    qp.set_error();
    assert!(
        qp.poll_tx(m.now, &mut sq).is_none(),
        "sent after the error transition"
    );
    while poll_comp(&mut qp, &mut m, &mut sq) {}
    assert_eq!(
        qp.sq_used(),
        0,
        "WRs not retired after the error transition"
    );
    for (k, w) in m.wrs.iter().enumerate() {
        assert!(
            w.reported || !w.wr.signaled,
            "signaled WR {k} never reported"
        );
    }
}

fn post(qp: &mut Qp<4>, m: &mut Model, sq: &mut [SendWqe], p: &Post) {
    let id = m.wrs.len() as u64;
    let wr = send_wr(p, id, m.cfg.transport);
    let want = expected_post(&m.cfg, qp.sq_used(), &wr);
    let in_error = qp.is_error();
    let got = qp.post_send(sq, wr);
    super::count(
        || {
            format!(
                "post {} -> {got:?}",
                format!("{:?}", wr.op)
                    .split([' ', '{'])
                    .next()
                    .unwrap_or("?")
            )
        },
        1,
    );
    assert_eq!(got, want, "post_send of {wr:?}");
    if got.is_ok() {
        let npsn = match wr.op {
            // A local WQE takes no PSN: its (empty) range starts where the
            // next WR's starts.
            SendOp::Local => 0,
            SendOp::Atomic { .. } | SendOp::AtomicWrite { .. } | SendOp::Flush { .. } => 1,
            _ => m.cfg.pmtu.packets(wr.len),
        };
        let first = m.wrs.last().map_or(0, |w| w.end());
        m.wrs.push(Wr {
            wr,
            first,
            npsn,
            reported: false,
            covered: 0,
            atomic_placed: false,
            answered: false,
            tx_done: false,
            in_error,
        });
    }
}

fn build_resp(m: &Model, r: &Resp) -> Vec<u8> {
    let mtu = m.mtu();
    let live = &m.wrs[m.next_report.min(m.wrs.len())..];
    // The READ response position that fits the PSN: index 0 First, 1
    // Middle, 2 Last, 3 Only.
    let (mut psn, want_len, fit) = match (r.psn_sel % 3, live.is_empty()) {
        (0, false) => {
            let w = &live[usize::from(r.k) % live.len()];
            // A local WQE has no PSN of its own: aim at the one its range
            // starts at (the next WR's first).
            let n = w.npsn.max(1);
            let j = if r.j & 0x8000 != 0 {
                n - 1
            } else {
                u32::from(r.j) % n
            };
            // An ATOMIC WRITE's or FLUSH's right answer is an empty READ
            // RESPONSE Only.
            let aw = empty_read(&w.wr.op);
            let left = if aw {
                0
            } else {
                w.wr.len.saturating_sub(j.saturating_mul(mtu))
            };
            let fit = match (j == 0, j + 1 == w.npsn) {
                _ if aw => 3,
                (true, true) => 3,
                (true, false) => 0,
                (false, false) => 1,
                (false, true) => 2,
            };
            (m.psn(w.first + j), left.min(mtu), fit)
        }
        (2, _) => (Psn::new(r.value as u32), mtu, 3),
        _ => (m.psn(m.hi).add(r.d as i32 as u32), mtu, 3),
    };
    let aux = r.aux;
    let ack = Syndrome::Ack {
        credits: aux & 0x1F,
    };
    let codes = [
        NakCode::PsnSeqErr,
        NakCode::InvalidRequest,
        NakCode::RemoteAccess,
        NakCode::RemoteOperational,
        NakCode::InvalidRdRequest,
    ];
    let (op, syndrome, plen) = match r.kind % 7 {
        0 => (Opcode::RcAck, ack, 0),
        1 => (Opcode::RcAck, Syndrome::Nak(codes[usize::from(aux) % 5]), 0),
        2 => (Opcode::RcAck, Syndrome::Rnr { timer: aux & 0x1F }, 0),
        3 => {
            let op = [
                Opcode::RcReadRespFirst,
                Opcode::RcReadRespMiddle,
                Opcode::RcReadRespLast,
                Opcode::RcReadRespOnly,
            ][if aux & 4 != 0 {
                usize::from(aux & 3)
            } else {
                fit
            }];
            let syn = if aux & 0x10 != 0 {
                Syndrome::Nak(codes[usize::from(aux >> 5) % 5])
            } else {
                ack
            };
            let v = u32::from(r.plen >> 2);
            let plen = match r.plen & 3 {
                0 => want_len,
                1 => mtu,
                2 => 0,
                _ => v % 5000,
            };
            (op, syn, plen)
        }
        4 => (Opcode::RcAtomicAck, ack, 0),
        6 => match honest(m, r) {
            Some((op, p, plen)) => {
                psn = p;
                (op, ack, plen)
            }
            None => (Opcode::RcAck, ack, 0),
        },
        _ => (Opcode::RcAck, ack, 0),
    };
    let psn = if r.kind % 7 == 5 {
        m.psn(m.hi).sub(1)
    } else {
        psn
    };
    let plen = plen as usize;
    let mut h = Headers::new(Bth {
        opcode: op,
        solicited: false,
        mig_req: false,
        pad: pad_for(plen),
        pkey: m.cfg.pkey,
        resv8: 0,
        dest_qp: QPN,
        ack_req: false,
        psn,
    });
    if op != Opcode::RcReadRespMiddle {
        h.aeth = Some(Aeth {
            syndrome,
            msn: r.msn & 0xFF_FFFF,
        });
    }
    if op == Opcode::RcAtomicAck {
        h.atomic_ack_eth = Some(AtomicAckEth { orig: r.value });
    }
    let payload: Vec<u8> = (0..plen).map(|i| i as u8).collect();
    let mut buf = vec![0u8; plen + 64];
    let n = build(&h, &payload, &mut buf).expect("consistent response refused");
    buf.truncate(n);
    buf
}

/// What a correct responder sends next for live WR `r.k`: the next READ
/// response, the atomic ACK, the empty READ RESPONSE Only of an ATOMIC
/// WRITE or FLUSH, or the ACK of the WR's last PSN.
fn honest(m: &Model, r: &Resp) -> Option<(Opcode, Psn, u32)> {
    let live = &m.wrs[m.next_report.min(m.wrs.len())..];
    let w = live.get(usize::from(r.k) % live.len().max(1))?;
    let mtu = m.mtu();
    Some(match w.wr.op {
        SendOp::Read { .. } => {
            let j = (w.covered / mtu).min(w.npsn - 1);
            let op = match (j == 0, j + 1 == w.npsn) {
                (true, true) => Opcode::RcReadRespOnly,
                (true, false) => Opcode::RcReadRespFirst,
                (false, false) => Opcode::RcReadRespMiddle,
                (false, true) => Opcode::RcReadRespLast,
            };
            (
                op,
                m.psn(w.first + j),
                w.wr.len.saturating_sub(j * mtu).min(mtu),
            )
        }
        SendOp::Atomic { .. } => (Opcode::RcAtomicAck, m.psn(w.first), 0),
        SendOp::AtomicWrite { .. } | SendOp::Flush { .. } => {
            (Opcode::RcReadRespOnly, m.psn(w.first), 0)
        }
        // A local WQE: the ACK of the PSN before its empty range.
        _ => (Opcode::RcAck, m.psn(w.end()).sub(1), 0),
    })
}

fn poll_tx(qp: &mut Qp<4>, m: &mut Model, sq: &mut [SendWqe]) -> bool {
    let error = qp.is_error();
    let Some(d) = qp.poll_tx(m.now, sq) else {
        return false;
    };
    if super::trace() {
        eprintln!(
            "tx {:?} psn {:?} {:?} {:?}",
            d.hdr.bth.opcode, d.hdr.bth.psn, d.hdr.reth, d.payload
        );
    }
    assert!(!error, "sent {d:?} in the error state");
    check_request(m, &d, sq.len() as u32);
    true
}

fn check_request(m: &mut Model, d: &TxDesc, depth: u32) {
    let mtu = m.mtu();
    check_encodes(d, mtu);
    let b = d.hdr.bth;
    let info = b.opcode.info();
    assert!(info.kind.is_request(), "requester sent {:?}", b.opcode);
    assert!(
        d.hdr.feth.is_none()
            || matches!(
                m.find(m.lin(b.psn)).map(|(k, _)| m.wrs[k].wr.op),
                Some(SendOp::Flush { .. })
            ),
        "FETH on {:?}",
        b.opcode
    );
    assert_eq!(info.transport, m.cfg.transport, "wrong transport");
    assert_eq!(b.pkey, m.cfg.pkey);
    let l = m.lin(b.psn);
    assert!(
        l <= m.hi,
        "PSN gap: sent linear PSN {l}, next new is {}",
        m.hi
    );
    let (k, j) = m.find(l).expect("packet for no posted WR");
    let w = m.wrs[k];
    assert!(w.wr.op != SendOp::Local, "packet {j} for local WR {k}");
    assert!(
        !w.reported,
        "packet for WR {k} after its completion was reported"
    );
    let wr = w.wr;
    let off = j * mtu;
    let rc = m.cfg.transport == Transport::Rc;
    // Packets this descriptor covers (a READ request covers the rest).
    let covers = match wr.op {
        SendOp::Read { .. } => w.npsn - j,
        _ => 1,
    };
    let last = j + covers == w.npsn;
    if rc && needs_response(&wr.op) {
        // max_rd_atomic: READs, atomics, ATOMIC WRITEs and FLUSHes sent
        // before this one (in posting order) and still without their
        // response.
        let open = m.wrs[..k]
            .iter()
            .filter(|o| needs_response(&o.wr.op) && !o.reported && !o.answered && !o.atomic_placed)
            .count();
        assert!(
            open < usize::from(m.cfg.max_rd_atomic),
            "{:?} of WR {k} sent with {open} responses outstanding, max_rd_atomic {}",
            b.opcode,
            m.cfg.max_rd_atomic
        );
    }
    match wr.op {
        SendOp::Read { va, rkey } => {
            assert_eq!(b.opcode, Opcode::RcReadRequest);
            let reth = d.hdr.reth.expect("READ without RETH");
            assert_eq!(reth.va, va.wrapping_add(u64::from(off)));
            assert_eq!((reth.rkey, reth.len), (rkey, wr.len - off.min(wr.len)));
            assert_eq!(d.payload, PayloadRef::None);
        }
        SendOp::Atomic { va, rkey, op } => {
            assert_eq!(j, 0);
            let a = d.hdr.atomic_eth.expect("atomic without AtomicETH");
            assert_eq!((a.va, a.rkey), (va, rkey));
            match op {
                AtomicOp::CmpSwap { compare, swap } => {
                    assert_eq!(b.opcode, Opcode::RcCmpSwap);
                    assert_eq!((a.compare, a.swap_add), (compare, swap));
                }
                AtomicOp::FetchAdd { add } => {
                    assert_eq!(b.opcode, Opcode::RcFetchAdd);
                    assert_eq!(a.swap_add, add);
                }
            }
            assert_eq!(d.payload, PayloadRef::None, "atomic request with payload");
        }
        SendOp::AtomicWrite { va, rkey } => {
            assert_eq!((j, b.opcode), (0, Opcode::RcAtomicWrite));
            let reth = d.hdr.reth.expect("ATOMIC WRITE without RETH");
            assert_eq!((reth.va, reth.rkey, reth.len), (va, rkey, 8));
            assert_eq!(wr.len, 8);
            // The WR's 8 bytes, from its own send queue slot.
            assert_eq!(
                d.payload,
                PayloadRef::Sq {
                    slot: k as u32 % depth,
                    offset: 0,
                    len: 8
                }
            );
            assert_eq!(b.pad, 0);
            assert_eq!((b.dest_qp, b.solicited), (DEST_QPN, false));
            assert!(d.hdr.atomic_eth.is_none() && d.hdr.imm.is_none() && d.hdr.ieth.is_none());
        }
        SendOp::Flush {
            va,
            rkey,
            len,
            placement,
            selectivity,
        } => {
            assert_eq!((j, b.opcode), (0, Opcode::RcFlush));
            assert_eq!(
                d.hdr.feth,
                Some(Feth {
                    placement,
                    selectivity
                }),
                "FLUSH FETH"
            );
            let reth = d.hdr.reth.expect("FLUSH without RETH");
            assert_eq!(
                (reth.va, reth.rkey, reth.len),
                (va, rkey, len),
                "FLUSH RETH"
            );
            assert_eq!(wr.len, 0);
            assert_eq!(d.payload, PayloadRef::None, "FLUSH with payload");
            assert_eq!(b.pad, 0);
            assert_eq!((b.dest_qp, b.solicited), (DEST_QPN, false));
            assert!(d.hdr.atomic_eth.is_none() && d.hdr.imm.is_none() && d.hdr.ieth.is_none());
        }
        op => {
            let len = wr.len.saturating_sub(off).min(mtu);
            assert!(
                off < wr.len || (off == 0 && wr.len == 0),
                "packet past the message"
            );
            let pos = match (j == 0, last) {
                (true, true) => Position::Only,
                (true, false) => Position::First,
                (false, false) => Position::Middle,
                (false, true) => Position::Last,
            };
            assert_eq!(info.pos, pos, "position of packet {j} of WR {k}");
            let write = matches!(op, SendOp::Write { .. } | SendOp::WriteImm { .. });
            assert_eq!(info.kind, if write { OpKind::Write } else { OpKind::Send });
            let want_payload = if len > 0 {
                PayloadRef::Sq {
                    slot: k as u32 % depth,
                    offset: off,
                    len,
                }
            } else {
                PayloadRef::None
            };
            assert_eq!(d.payload, want_payload, "payload of packet {j} of WR {k}");
            assert_eq!(b.pad, pad_for(len as usize));
            let (imm, inv, reth) = match op {
                SendOp::SendImm { imm } => (Some(imm), None, None),
                SendOp::SendInv { rkey } => (None, Some(rkey), None),
                SendOp::Write { va, rkey } => (None, None, Some((va, rkey))),
                SendOp::WriteImm { va, rkey, imm } => (Some(imm), None, Some((va, rkey))),
                _ => (None, None, None),
            };
            assert_eq!(d.hdr.imm, imm.filter(|_| last));
            assert_eq!(d.hdr.ieth, inv.filter(|_| last));
            let want_reth = reth.filter(|_| j == 0).map(|(va, rkey)| (va, rkey, wr.len));
            assert_eq!(d.hdr.reth.map(|r| (r.va, r.rkey, r.len)), want_reth);
            let se = wr.solicited && last && (!write || imm.is_some());
            assert_eq!(b.solicited, se, "solicited bit");
            match wr.ud {
                Some(ud) => {
                    let deth = d.hdr.deth.expect("UD without DETH");
                    let qkey = if ud.qkey & 0x8000_0000 != 0 {
                        QKEY
                    } else {
                        ud.qkey
                    };
                    assert_eq!((b.dest_qp, deth.qkey, deth.src_qp), (ud.qpn, qkey, QPN));
                }
                None => assert_eq!(b.dest_qp, DEST_QPN),
            }
        }
    }
    if rc && last {
        assert!(b.ack_req, "last packet of a message without AckReq");
    }
    if l == m.hi {
        // A new PSN: inside the window of the oldest PSN that may be
        // unacknowledged (a READ's responses may run past it), and the
        // unacknowledged span never beyond 2^22 PSNs unless alone.
        if rc {
            let lb = l.saturating_sub(m.una_ub);
            assert!(
                lb == 0 || (lb < m.cfg.max_inflight && lb + covers <= MAX_MSG_PSNS),
                "window: {lb} PSNs unacknowledged (+ {covers}), max_inflight {}",
                m.cfg.max_inflight
            );
        }
        m.hi = l + covers;
    }
    if last {
        m.wrs[k].tx_done = true;
    }
}

fn receive(qp: &mut Qp<4>, m: &mut Model, pkt: &Packet<'_>, sq: &mut [SendWqe], mem: &mut SinkMem) {
    let was_error = qp.is_error();
    let mut out = qp.receive(m.now, pkt, sq, mem, &mut NoRq);
    // What the QP's own buffers took at once is checked as if the outcome had carried it.
    if let Some(placed) = mem.placed.take() {
        assert!(
            out.drop.is_none() && out.place.is_none(),
            "placed at once, yet {out:?}"
        );
        let kind = pkt.hdr.bth.opcode.info().kind;
        out.place = Some(match placed {
            (slot, offset, data) if kind == OpKind::ReadResp => Place::ReadResp {
                slot,
                offset,
                len: data.len() as u32,
            },
            (slot, 0, data) if kind == OpKind::AtomicAck => Place::AtomicResult {
                slot,
                value: u64::from_ne_bytes(data.try_into().expect("atomic result of 8 bytes")),
            },
            p => panic!("{kind:?} placed {p:?}"),
        });
    }
    if mem.refuse && out.drop == Some(DropReason::NotPresent) {
        // Refused for a missing local page: nothing was accepted.
        assert!(out.place.is_none());
    } else {
        assert_ne!(
            out.drop,
            Some(DropReason::NotPresent),
            "NotPresent without a refusal"
        );
    }
    super::count(
        || {
            format!(
                "rx {:?} -> {:?} {}",
                pkt.hdr.bth.opcode,
                out.drop,
                if out.place.is_some() { "placed" } else { "" }
            )
        },
        1,
    );
    if super::trace() {
        eprintln!(
            "rx {:?} psn {:?} len {} {:?}\n   -> {out:?}",
            pkt.hdr.bth.opcode,
            pkt.hdr.bth.psn,
            pkt.payload.len(),
            pkt.hdr.aeth
        );
    }
    let p = pkt.hdr.bth.psn;
    let l = m.lin(p);
    if was_error {
        assert!(out.drop.is_some() && out.place.is_none() && out.completion.is_none());
        return;
    }
    assert!(
        out.completion.is_none(),
        "receive completion on the requester side"
    );
    if out.drop.is_some() {
        assert!(out.place.is_none(), "dropped response placed data: {out:?}");
    }
    if l >= m.hi {
        assert!(
            matches!(
                out.drop,
                Some(DropReason::Ghost | DropReason::Stale | DropReason::WrongTransport)
            ),
            "response for a PSN never sent accepted: {out:?}"
        );
        return;
    }
    if let Some((k, j)) = m.find(l) {
        let w = &mut m.wrs[k];
        let read_resp = pkt.hdr.bth.opcode.info().kind == OpKind::ReadResp;
        if matches!(w.wr.op, SendOp::Read { .. })
            && read_resp
            && out.drop.is_none()
            && j + 1 == w.npsn
        {
            w.answered = true;
        }
        if empty_read(&w.wr.op) && pkt.hdr.bth.opcode.info().kind == OpKind::ReadResp {
            if out.drop.is_none() {
                // Accepted as the ATOMIC WRITE's or FLUSH's answer: it must
                // be one.
                let ack = pkt.hdr.aeth.map(|a| a.syndrome);
                assert!(
                    j == 0
                        && pkt.hdr.bth.opcode == Opcode::RcReadRespOnly
                        && pkt.payload.is_empty()
                        && matches!(ack, Some(Syndrome::Ack { .. })),
                    "ATOMIC WRITE/FLUSH {k} answered by {:?} with {} bytes, {ack:?}",
                    pkt.hdr.bth.opcode,
                    pkt.payload.len()
                );
                assert!(
                    out.place.is_none(),
                    "placement for an ATOMIC WRITE/FLUSH: {out:?}"
                );
                assert!(
                    !w.reported,
                    "ATOMIC WRITE/FLUSH {k} answered after its completion was reported"
                );
                w.answered = true;
            }
        }
    }
    match out.place {
        None => {}
        Some(Place::ReadResp { slot, offset, len }) => {
            let (k, j) = m.find(l).expect("READ data for no WR");
            let w = &mut m.wrs[k];
            assert!(
                matches!(w.wr.op, SendOp::Read { .. }),
                "READ data placed into a non-READ WR"
            );
            assert!(!w.reported);
            assert_eq!(
                slot,
                k as u32 % sq.len() as u32,
                "READ data into the wrong slot"
            );
            assert_eq!(len as usize, pkt.payload.len());
            assert_eq!(offset, j * m.cfg.pmtu.bytes());
            assert_eq!(offset, w.covered, "READ data not contiguous");
            let end = offset.checked_add(len).expect("READ placement overflows");
            assert!(
                end <= w.wr.len,
                "READ data past the buffer: {end} > {}",
                w.wr.len
            );
            w.covered = end;
        }
        Some(Place::AtomicResult { slot, value }) => {
            let (k, j) = m.find(l).expect("atomic result for no WR");
            let w = &mut m.wrs[k];
            assert!(
                matches!(w.wr.op, SendOp::Atomic { .. }),
                "atomic result into a non-atomic WR"
            );
            assert_eq!((j, slot), (0, k as u32 % sq.len() as u32));
            assert_eq!(Some(value), pkt.hdr.atomic_ack_eth.map(|a| a.orig));
            assert!(!w.atomic_placed, "atomic result placed twice");
            w.atomic_placed = true;
        }
        Some(pl) => panic!("requester returned a responder placement {pl:?}"),
    }
    if !matches!(
        out.drop,
        Some(DropReason::Stale | DropReason::WrongTransport)
    ) {
        m.una_ub = m.una_ub.max(l + 1);
    }
}

fn poll_comp(qp: &mut Qp<4>, m: &mut Model, sq: &mut [SendWqe]) -> bool {
    let Some(c) = qp.poll_send_completion(sq) else {
        return false;
    };
    if super::trace() {
        eprintln!("completion {c:?}");
    }
    let k = c.wr_id as usize;
    super::count(
        || {
            // The operation's name, without its fields.
            let op = m.wrs.get(k).map(|w| format!("{:?}", w.wr.op));
            let name = op
                .as_deref()
                .map(|s| s.split([' ', '{']).next().unwrap_or(s));
            format!("completion {:?} {}", c.status, name.unwrap_or("?"))
        },
        1,
    );
    assert!(
        k < m.wrs.len() && k >= m.next_report,
        "completion {k} out of order (next {})",
        m.next_report
    );
    for s in m.next_report..k {
        assert!(!m.error_reported, "WR {s} skipped after an error");
        assert!(
            !m.wrs[s].in_error,
            "WR {s} posted in the error state retired as a success"
        );
        check_success(m, s);
        assert!(!m.wrs[s].wr.signaled, "signaled WR {s} skipped");
    }
    let w = m.wrs[k];
    assert_eq!(c.byte_len, w.wr.len);
    if m.error_reported {
        assert_eq!(
            (k, c.status),
            (m.next_report, WcStatus::WrFlushErr),
            "after an error only flushes"
        );
    }
    // A local WR only completes (once passed and everything before it
    // completed) or is flushed: it never carries another WR's error.
    assert!(
        w.wr.op != SendOp::Local || matches!(c.status, WcStatus::Success | WcStatus::WrFlushErr),
        "local WR {k} completed with {:?}",
        c.status
    );
    if w.in_error {
        assert_eq!(
            c.status,
            WcStatus::WrFlushErr,
            "WR {k} posted in the error state not flushed"
        );
    }
    match c.status {
        WcStatus::Success => {
            assert!(w.wr.signaled, "unsignaled success reported");
            check_success(m, k);
        }
        s => {
            assert!(
                qp.is_error(),
                "error completion {s:?} outside the error state"
            );
            m.error_reported = true;
        }
    }
    m.wrs[k].reported = true;
    m.next_report = k + 1;
    true
}

/// A WR retired successfully (reported or silently).
fn check_success(m: &Model, k: usize) {
    let w = &m.wrs[k];
    match m.cfg.transport {
        Transport::Rc => {
            // For a local WQE (an empty PSN range) this says that every WR
            // before it was acknowledged.
            assert!(
                w.end() <= m.una_ub,
                "WR {k} completed without an acknowledgement"
            );
            match w.wr.op {
                SendOp::Read { .. } => {
                    assert_eq!(w.covered, w.wr.len, "READ {k} completed without its data")
                }
                SendOp::Atomic { .. } => {
                    assert!(w.atomic_placed, "atomic {k} completed without its result")
                }
                SendOp::AtomicWrite { .. } => assert!(
                    w.answered,
                    "ATOMIC WRITE {k} completed without its response"
                ),
                SendOp::Flush { .. } => {
                    assert!(w.answered, "FLUSH {k} completed without its response");
                    assert_eq!(w.wr.len, 0);
                }
                _ => {}
            }
        }
        // A local WQE is passed once everything before it went out.
        _ if w.wr.op == SendOp::Local => {
            for (s, o) in m.wrs[..k].iter().enumerate() {
                assert!(
                    o.tx_done || o.wr.op == SendOp::Local,
                    "local WR {k} completed before WR {s} was sent"
                );
            }
        }
        _ => assert!(w.tx_done, "UC/UD WR {k} completed before it was sent"),
    }
}

/// The requester's memory: the responder's side must never be touched; its own READ and atomic
/// buffers may be "not present" (on-demand paging: [`MemAccess::place_response`] refuses) or
/// take the data at once (recorded here for the model's checks).
struct SinkMem {
    refuse: bool,
    place_now: bool,
    /// (slot, offset, data) taken at once.
    placed: Option<(u32, u32, Vec<u8>)>,
}

impl metaroce_proto::resp::MemAccess for SinkMem {
    fn place_response(
        &mut self,
        slot: u32,
        offset: u32,
        data: &[u8],
    ) -> core::result::Result<bool, metaroce_proto::resp::AccessError> {
        assert!(self.placed.is_none(), "two placements for one packet");
        if self.refuse {
            return Err(metaroce_proto::resp::AccessError::NotPresent);
        }
        if self.place_now {
            self.placed = Some((slot, offset, data.to_vec()));
        }
        Ok(self.place_now)
    }

    fn check(
        &mut self,
        _: u32,
        _: u64,
        _: u32,
        _: metaroce_proto::wr::Access,
    ) -> core::result::Result<(), metaroce_proto::resp::AccessError> {
        panic!("requester target touched responder memory")
    }
    fn atomic(
        &mut self,
        _: u32,
        _: u64,
        _: AtomicOp,
    ) -> core::result::Result<u64, metaroce_proto::resp::AccessError> {
        panic!("requester target ran an atomic")
    }
    fn atomic_write(
        &mut self,
        _: u32,
        _: u64,
        _: [u8; 8],
    ) -> core::result::Result<(), metaroce_proto::resp::AccessError> {
        panic!("requester target ran an ATOMIC WRITE")
    }
    fn flush(
        &mut self,
        _: u32,
        _: u64,
        _: u32,
        _: bool,
        _: metaroce_proto::wr::Access,
    ) -> core::result::Result<(), metaroce_proto::resp::AccessError> {
        panic!("requester target ran a FLUSH")
    }
}

struct NoRq;

impl metaroce_proto::resp::RecvQueue for NoRq {
    fn take(&mut self) -> Option<metaroce_proto::wr::RecvWqe> {
        panic!("requester target took a receive WQE")
    }
}
