// SPDX-License-Identifier: GPL-2.0
//! Responder: executes incoming requests and produces acknowledgements and
//! READ/atomic responses (the role of rdma_rxe's `rxe_resp.c`).
//!
//! RC requests are accepted strictly in PSN order:
//!
//! * the expected PSN executes: data placement is returned to the caller
//!   as a [`Place`], memory checks and atomics go through [`MemAccess`],
//!   receive WQEs come from [`RecvQueue`];
//! * a PSN ahead of the expected one gets one PSN sequence error NAK, then
//!   later packets are dropped silently until the expected PSN arrives;
//! * a PSN behind (a duplicate) is re-acknowledged; a duplicate READ
//!   restarts its response stream from the requested PSN and a duplicate
//!   atomic is answered from the replay cache without executing it again;
//! * no receive WQE gives an RNR NAK with the QP's `min_rnr_timer`;
//! * invalid requests, access and operational errors give the matching
//!   NAK and move the QP to the error state (IBTA class C errors).
//!
//! READ and atomic requests are kept in `R` response resources (the QP's
//! `max_dest_rd_atomic`), reused round-robin, which also serve as the
//! replay cache. Outgoing packets are pulled with `poll_tx` in PSN order:
//! pending READ/atomic responses first, then the coalesced ACK or NAK.
//!
//! UC accepts only in-order packets: a gap drops the rest of the open
//! message and the responder resynchronizes on the next first/only packet;
//! nothing is ever acknowledged and errors drop silently. UD delivers
//! single-packet SENDs after a Q_Key check.

use super::bth::Bth;
use super::ext::{
    Aeth, AtomicAckEth, NakCode, Syndrome, CREDITS_UNLIMITED, FLUSH_GLOBAL, FLUSH_MR,
    FLUSH_PERSISTENT,
};
use super::opcode::{OpKind, Opcode, Position, Transport};
use super::packet::{pad_for, Headers, Packet, PayloadRef, TxDesc};
use super::psn::Psn;
use super::qp::{DropReason, QpConfig, RxOutcome};
use super::req::{MAX_MSG_LEN, MAX_MSG_PSNS};
use super::wr::{Access, AtomicOp, Place, RecvCompletion, RecvKind, RecvWqe, WcStatus};

/// Bytes reserved at the start of a UD receive buffer for the GRH (or the
/// IPv4/IPv6 header for RoCEv2); the glue writes that header itself.
pub const GRH_LEN: u32 = 40;

/// Why [`MemAccess`] refused an operation.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AccessError {
    /// Invalid R_Key, out-of-bounds range or missing permission: answered
    /// with a Remote Access Error NAK.
    Access,
    /// The operation could not be carried out: answered with a Remote
    /// Operational Error NAK.
    Operational,
    /// The memory is valid but not there yet (an on-demand paging region
    /// whose pages the glue is faulting in): answered like a missing
    /// receive WQE, with an RNR NAK (RC) or a drop (UC), so the request is
    /// sent again later. Nothing is executed or placed.
    NotPresent,
}

/// Memory checks and atomics, supplied by the kernel glue.
pub trait MemAccess {
    /// Checks that `len` (> 0) bytes at `va` of the memory region of `rkey`
    /// may be accessed with `access` ([`Access::READ`] or
    /// [`Access::WRITE`]). Called once per READ or WRITE message, before
    /// any of its data is placed or read.
    fn check(&mut self, rkey: u32, va: u64, len: u32, access: Access) -> Result<(), AccessError>;

    /// Places a WRITE packet's payload (`data`, not empty) at `va` of the
    /// memory region of `rkey` right away, as the last step before the
    /// packet is accepted, if the glue wants to (memory that may go away
    /// between a check and a later copy, such as on-demand paging: checked
    /// and copied in one go). `Ok(true)`: placed, the outcome carries no
    /// [`Place`] for it. `Ok(false)`: not placed now, the outcome carries
    /// [`Place::Rdma`] (the default). `Err(AccessError::NotPresent)`:
    /// nothing placed, the packet is refused with an RNR NAK (RC) and sent
    /// again. The glue reports other errors as `Ok(false)`, and the
    /// placement from [`Place::Rdma`] fails the same way.
    fn place_write(&mut self, _rkey: u32, _va: u64, _data: &[u8]) -> Result<bool, AccessError> {
        Ok(false)
    }

    /// The requester's side: places a READ response's payload (`data`, not
    /// empty) at byte `offset` of the local buffers of the READ in send
    /// queue slot `slot`, or an atomic's original value (host byte order,
    /// `offset` 0) in the atomic's, as the last step before the response is
    /// accepted. The same contract as [`MemAccess::place_write`]: `Ok(true)`
    /// placed, `Ok(false)` left to [`Place::ReadResp`] /
    /// [`Place::AtomicResult`] (the default; other errors too),
    /// `Err(AccessError::NotPresent)`: nothing placed, the response is
    /// dropped and asked for again (see
    /// [`super::comp::LOCAL_FAULT_WAIT_NS`]).
    fn place_response(
        &mut self,
        _slot: u32,
        _offset: u32,
        _data: &[u8],
    ) -> Result<bool, AccessError> {
        Ok(false)
    }

    /// Checks [`Access::ATOMIC`] access to the 8 bytes at `va` (8-byte
    /// aligned) and executes `op` on them atomically, returning the
    /// original value.
    fn atomic(&mut self, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, AccessError>;

    /// Checks [`Access::WRITE`] access to the 8 bytes at `va` (8-byte
    /// aligned) and stores `value` there as one unit (ATOMIC WRITE; atomic
    /// with respect to [`MemAccess::atomic`]).
    fn atomic_write(&mut self, rkey: u32, va: u64, value: [u8; 8]) -> Result<(), AccessError>;

    /// FLUSH: checks `access` ([`Access::FLUSH_GLOBAL`] and/or
    /// [`Access::FLUSH_PERSISTENT`]) to `len` bytes (possibly 0) at `va` of
    /// the memory region of `rkey`, or to the whole region if `whole_mr`
    /// (then `va` and `len` are not checked), and makes what earlier
    /// requests placed there globally visible or persistent, as `access`
    /// asks.
    fn flush(
        &mut self,
        rkey: u32,
        va: u64,
        len: u32,
        whole_mr: bool,
        access: Access,
    ) -> Result<(), AccessError>;
}

/// Source of receive WQEs (the QP's receive queue or its SRQ).
pub trait RecvQueue {
    /// Removes and returns the next posted receive WQE, if any. A WQE taken
    /// by the responder is returned in a completion or by
    /// [`super::qp::Qp::flush_recv`].
    fn take(&mut self) -> Option<RecvWqe>;

    /// Places a SEND packet's payload (`data`, not empty) at byte `offset`
    /// of `wqe`'s buffers right away, as [`MemAccess::place_write`] does
    /// for WRITEs: `Ok(true)` placed, `Ok(false)` left to [`Place::Recv`]
    /// (the default), `Err(AccessError::NotPresent)` refused with an RNR NAK
    /// (a WQE taken for the packet is kept for its retry).
    fn place(&mut self, _wqe: &RecvWqe, _offset: u32, _data: &[u8]) -> Result<bool, AccessError> {
        Ok(false)
    }
}

/// Responder counters.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct RespStats {
    /// Request packets received.
    pub packets: u64,
    /// Duplicate requests received.
    pub duplicates: u64,
    /// PSN sequence error NAKs queued.
    pub seq_naks: u64,
    /// RNR NAKs queued.
    pub rnr_naks: u64,
    /// ACK/NAK packets sent.
    pub acks: u64,
    /// READ response and atomic ACK packets sent.
    pub responses: u64,
    /// NAKs sent again for a retransmission of the request that broke the QP.
    pub nak_repeats: u64,
}

/// The message currently being received.
#[derive(Clone, Copy, Debug)]
enum Msg {
    Idle,
    Send {
        wqe: RecvWqe,
        off: u32,
    },
    Write {
        va: u64,
        rkey: u32,
        left: u32,
        total: u32,
    },
}

/// A queued ACK or NAK.
#[derive(Clone, Copy, Debug)]
struct AckSlot {
    psn: Psn,
    syndrome: Syndrome,
    msn: u32,
}

/// A READ or atomic kept for (re)transmission of its responses.
#[derive(Clone, Copy, Debug)]
enum Res {
    Read {
        /// PSN of the original request (first response).
        psn: Psn,
        va: u64,
        rkey: u32,
        len: u32,
        /// Response index where the current stream started.
        start: u32,
        /// Next response index to send.
        next: u32,
        msn: u32,
    },
    Atomic {
        psn: Psn,
        orig: u64,
        msn: u32,
    },
    /// An executed ATOMIC WRITE or FLUSH, answered with an empty READ
    /// RESPONSE Only.
    EmptyRead {
        psn: Psn,
        msn: u32,
    },
}

#[derive(Clone, Copy, Debug, Default)]
struct ResSlot {
    res: Option<Res>,
    /// Responses remain to be sent.
    pending: bool,
}

/// How often a responder answers retransmissions of the request that broke it with its NAK
/// again: one more than the largest `retry_cnt` (7), so every retry of the peer can see it.
pub const MAX_NAK_REPEATS: u8 = 8;

/// Why a request was refused.
enum Fail {
    /// No receive WQE.
    Rnr,
    /// Class C error: NAK with `code`, optionally completing a WQE.
    Nak(NakCode, DropReason, Option<RecvCompletion>),
}

impl From<AccessError> for Fail {
    fn from(e: AccessError) -> Self {
        match e {
            AccessError::Access => Fail::Nak(NakCode::RemoteAccess, DropReason::AccessDenied, None),
            AccessError::Operational => {
                Fail::Nak(NakCode::RemoteOperational, DropReason::Operational, None)
            }
            AccessError::NotPresent => Fail::Rnr,
        }
    }
}

/// The rights a FLUSH of `placement` needs, on the QP and on the MR.
fn flush_access(placement: u8) -> Access {
    let mut a = Access::NONE;
    if placement & FLUSH_GLOBAL != 0 {
        a = a.with(Access::FLUSH_GLOBAL);
    }
    if placement & FLUSH_PERSISTENT != 0 {
        a = a.with(Access::FLUSH_PERSISTENT);
    }
    a
}

fn invalid(reason: DropReason) -> Fail {
    Fail::Nak(NakCode::InvalidRequest, reason, None)
}

/// Responder state of one QP with `R` READ/atomic response resources.
#[derive(Clone, Debug)]
pub struct Responder<const R: usize> {
    cfg: QpConfig,
    /// Expected PSN.
    epsn: Psn,
    /// Message sequence number (24 bits): completed requests.
    msn: u32,
    /// A NAK (sequence or RNR) for `epsn` was queued: drop packets ahead of
    /// `epsn` silently until it arrives.
    nak_sent: bool,
    msg: Msg,
    /// UC: receive WQE of a dropped message, reused by the next one.
    held: Option<RecvWqe>,
    ack: Option<AckSlot>,
    /// Packets accepted since the last queued ACK.
    unacked: u32,
    res: [ResSlot; R],
    res_next: usize,
    /// RC: the NAK of the request that moved the QP to the error state, answered again
    /// (at most [`MAX_NAK_REPEATS`] times, counted in `stats.nak_repeats`) when that
    /// request is retransmitted.
    fatal: Option<AckSlot>,
    /// The QP is in the error state.
    pub(super) error: bool,
    /// Counters.
    pub(super) stats: RespStats,
}

impl<const R: usize> Responder<R> {
    /// A responder expecting `cfg.rq_psn`.
    pub(super) fn new(cfg: QpConfig) -> Self {
        Responder {
            cfg,
            epsn: cfg.rq_psn,
            msn: 0,
            nak_sent: false,
            msg: Msg::Idle,
            held: None,
            ack: None,
            unacked: 0,
            res: [ResSlot::default(); R],
            res_next: 0,
            fatal: None,
            error: false,
            stats: RespStats::default(),
        }
    }

    /// Moves the QP to the error state: nothing more is sent, except the NAK
    /// queued by the request that broke the QP (a second call, e.g. the
    /// consumer's move to the error state, keeps it).
    /// The remote access rights the QP grants from now on (`IB_QP_ACCESS_FLAGS` at RTR→RTS or
    /// RTS→RTS): every request that starts after this is checked against them.
    pub(super) fn set_access(&mut self, access: Access) {
        self.cfg.access = access;
    }

    pub(super) fn set_error(&mut self) {
        if self.error {
            return;
        }
        self.error = true;
        self.ack = None;
        self.res.iter_mut().for_each(|s| s.pending = false);
    }

    /// The glue could not place the payload of the request at `psn`: an
    /// RC request is answered with a NAK `code` instead of its
    /// acknowledgement and the QP enters the error state. UC and UD have no
    /// one to tell.
    pub(super) fn placement_failed(&mut self, psn: Psn, code: NakCode) {
        if self.error {
            return;
        }
        self.set_error();
        if self.cfg.transport == Transport::Rc {
            self.fail_with(psn, code);
        }
    }

    /// Queues the NAK `code` for the request at `psn`, which moved the QP to the error state,
    /// and keeps it to answer that request's retransmissions.
    fn fail_with(&mut self, psn: Psn, code: NakCode) {
        let nak = AckSlot {
            psn,
            syndrome: Syndrome::Nak(code),
            msn: self.msn,
        };
        self.ack = Some(nak);
        self.fatal = Some(nak);
    }

    /// In the error state, a request packet at `psn` arrived from the peer. If it is a
    /// retransmission of the request this QP answered with the NAK that broke it, the NAK is
    /// queued again and `true` returned (the caller then transmits it). On a lossy link the
    /// first NAK may be lost; the peer's requester would otherwise retry into
    /// `RETRY_EXC_ERR` instead of learning the error. At most [`MAX_NAK_REPEATS`] times, one
    /// at a time: a forged flood gets no more than that.
    pub(super) fn repeat_nak(&mut self, psn: Psn) -> bool {
        match self.fatal {
            Some(nak)
                if self.error
                    && nak.psn == psn
                    && self.ack.is_none()
                    && self.stats.nak_repeats < u64::from(MAX_NAK_REPEATS) =>
            {
                self.stats.nak_repeats = self.stats.nak_repeats.saturating_add(1);
                self.ack = Some(nak);
                true
            }
            _ => false,
        }
    }

    /// Returns the receive WQE the responder holds, completed with
    /// `WR_FLUSH_ERR`, once the QP is in the error state.
    pub(super) fn flush(&mut self) -> Option<RecvCompletion> {
        if !self.error {
            return None;
        }
        self.abandon_msg();
        let w = self.held.take()?;
        Some(RecvCompletion {
            id: w.id,
            status: WcStatus::WrFlushErr,
            kind: RecvKind::Send,
            byte_len: 0,
            imm: None,
            invalidate: None,
            src_qp: None,
        })
    }

    /// Processes a request packet.
    pub(super) fn receive(
        &mut self,
        pkt: &Packet<'_>,
        mem: &mut impl MemAccess,
        rq: &mut impl RecvQueue,
    ) -> RxOutcome {
        if self.error {
            return RxOutcome::dropped(DropReason::QpError);
        }
        self.stats.packets = self.stats.packets.saturating_add(1);
        match self.cfg.transport {
            Transport::Ud => self.receive_ud(pkt, rq),
            Transport::Uc => self.receive_uc(pkt, mem, rq),
            Transport::Rc | Transport::Cnp => self.receive_rc(pkt, mem, rq),
        }
    }

    fn receive_rc(
        &mut self,
        pkt: &Packet<'_>,
        mem: &mut impl MemAccess,
        rq: &mut impl RecvQueue,
    ) -> RxOutcome {
        let p = pkt.hdr.bth.psn;
        let d = p.diff(self.epsn);
        if d > 0 {
            if !self.nak_sent {
                self.nak_sent = true;
                self.stats.seq_naks = self.stats.seq_naks.saturating_add(1);
                self.set_ack(self.epsn, Syndrome::Nak(NakCode::PsnSeqErr));
            }
            return RxOutcome::dropped(DropReason::OutOfSequence);
        }
        if d < 0 {
            self.stats.duplicates = self.stats.duplicates.saturating_add(1);
            return self.duplicate(pkt, mem);
        }
        self.nak_sent = false;
        match self.execute(pkt, mem, rq) {
            Ok(out) => out,
            Err(Fail::Rnr) => {
                self.nak_sent = true;
                self.stats.rnr_naks = self.stats.rnr_naks.saturating_add(1);
                self.set_ack(
                    p,
                    Syndrome::Rnr {
                        timer: self.cfg.min_rnr_timer,
                    },
                );
                RxOutcome::dropped(DropReason::NoRecvWqe)
            }
            Err(Fail::Nak(code, reason, completion)) => {
                self.set_error();
                self.fail_with(p, code);
                RxOutcome {
                    place: None,
                    completion,
                    drop: Some(reason),
                }
            }
        }
    }

    fn receive_uc(
        &mut self,
        pkt: &Packet<'_>,
        mem: &mut impl MemAccess,
        rq: &mut impl RecvQueue,
    ) -> RxOutcome {
        let p = pkt.hdr.bth.psn;
        let start = pkt.hdr.bth.opcode.info().pos.is_start();
        if p != self.epsn || (start && !matches!(self.msg, Msg::Idle)) {
            // Lost packets (or a lost last packet): the open message is
            // dropped; resynchronize on a packet that starts a message.
            self.abandon_msg();
            if !start {
                return RxOutcome::dropped(DropReason::UcDropped);
            }
            self.epsn = p;
        }
        match self.execute(pkt, mem, rq) {
            Ok(out) => out,
            Err(fail) => {
                self.abandon_msg();
                self.epsn = p.next();
                match fail {
                    Fail::Rnr => RxOutcome::dropped(DropReason::NoRecvWqe),
                    Fail::Nak(_, reason, completion) => RxOutcome {
                        place: None,
                        completion,
                        drop: Some(reason),
                    },
                }
            }
        }
    }

    fn receive_ud(&mut self, pkt: &Packet<'_>, rq: &mut impl RecvQueue) -> RxOutcome {
        let Some(deth) = pkt.hdr.deth else {
            return RxOutcome::dropped(DropReason::Malformed);
        };
        if deth.qkey != self.cfg.qkey {
            return RxOutcome::dropped(DropReason::QkeyMismatch);
        }
        let Some(len) = u32::try_from(pkt.payload.len())
            .ok()
            .filter(|&l| l <= self.cfg.pmtu.bytes())
        else {
            return RxOutcome::dropped(DropReason::BadLength);
        };
        let Some(wqe) = rq.take() else {
            return RxOutcome::dropped(DropReason::NoRecvWqe);
        };
        let byte_len = GRH_LEN + len;
        let mut c = RecvCompletion {
            id: wqe.id,
            status: WcStatus::Success,
            kind: RecvKind::Send,
            byte_len,
            imm: pkt.hdr.imm,
            invalidate: None,
            src_qp: Some(deth.src_qp),
        };
        if byte_len > wqe.len {
            c.status = WcStatus::LocLenErr;
            return RxOutcome {
                place: None,
                completion: Some(c),
                drop: Some(DropReason::BadLength),
            };
        }
        let place = (len > 0).then_some(Place::Recv {
            id: wqe.id,
            offset: GRH_LEN,
            len,
        });
        RxOutcome {
            place,
            completion: Some(c),
            drop: None,
        }
    }

    /// Executes the request at the expected PSN (RC and UC).
    fn execute(
        &mut self,
        pkt: &Packet<'_>,
        mem: &mut impl MemAccess,
        rq: &mut impl RecvQueue,
    ) -> Result<RxOutcome, Fail> {
        let info = pkt.hdr.bth.opcode.info();
        let in_order = match (self.msg, info.kind) {
            (Msg::Idle, _) => info.pos.is_start(),
            (Msg::Send { .. }, OpKind::Send) | (Msg::Write { .. }, OpKind::Write) => {
                !info.pos.is_start()
            }
            _ => false,
        };
        if !in_order {
            return Err(invalid(DropReason::OpSequence));
        }
        let need = match info.kind {
            OpKind::Flush => pkt
                .hdr
                .feth
                .map_or(Access::NONE, |f| flush_access(f.placement)),
            OpKind::Write | OpKind::AtomicWrite => Access::WRITE,
            OpKind::ReadReq => Access::READ,
            OpKind::CmpSwap | OpKind::FetchAdd => Access::ATOMIC,
            _ => Access::NONE,
        };
        if !self.cfg.access.contains(need) {
            return Err(invalid(DropReason::QpAccess));
        }
        if !self.cfg.pmtu.payload_ok(info.pos, pkt.payload.len()) {
            return Err(invalid(DropReason::BadLength));
        }
        match info.kind {
            OpKind::Send => self.exec_send(pkt, info.pos, rq),
            OpKind::Write => self.exec_write(pkt, info.pos, mem, rq),
            OpKind::ReadReq => self.exec_read(pkt, mem),
            OpKind::CmpSwap | OpKind::FetchAdd => self.exec_atomic(pkt, mem),
            OpKind::AtomicWrite => self.exec_atomic_write(pkt, mem),
            OpKind::Flush => self.exec_flush(pkt, mem),
            _ => Err(invalid(DropReason::WrongTransport)),
        }
    }

    fn exec_send(
        &mut self,
        pkt: &Packet<'_>,
        pos: Position,
        rq: &mut impl RecvQueue,
    ) -> Result<RxOutcome, Fail> {
        let len = payload_len(pkt)?;
        let (wqe, off, fresh) = match self.msg {
            Msg::Send { wqe, off } => (wqe, off, false),
            _ => (
                self.held.take().or_else(|| rq.take()).ok_or(Fail::Rnr)?,
                0,
                true,
            ),
        };
        let end = off.saturating_add(len);
        let mut c = RecvCompletion {
            id: wqe.id,
            status: WcStatus::Success,
            kind: RecvKind::Send,
            byte_len: end,
            imm: pkt.hdr.imm,
            invalidate: pkt.hdr.ieth,
            src_qp: None,
        };
        if end > wqe.len {
            self.msg = Msg::Idle;
            c.status = WcStatus::LocLenErr;
            return Err(Fail::Nak(
                NakCode::InvalidRequest,
                DropReason::BadLength,
                Some(c),
            ));
        }
        // The last step that may refuse the packet: placing it now.
        let placed = match pkt.payload.get(..len as usize) {
            Some(data) if len > 0 => match rq.place(&wqe, off, data) {
                Ok(placed) => placed,
                Err(AccessError::NotPresent) => {
                    if fresh {
                        self.held = Some(wqe);
                    }
                    return Err(Fail::Rnr);
                }
                Err(_) => false,
            },
            _ => false,
        };
        let place = (len > 0 && !placed).then_some(Place::Recv {
            id: wqe.id,
            offset: off,
            len,
        });
        let completion = if pos.is_end() {
            self.msg = Msg::Idle;
            self.msn = (self.msn + 1) & 0xFF_FFFF;
            Some(c)
        } else {
            self.msg = Msg::Send { wqe, off: end };
            None
        };
        self.accepted(pkt, pos);
        Ok(RxOutcome {
            place,
            completion,
            drop: None,
        })
    }

    fn exec_write(
        &mut self,
        pkt: &Packet<'_>,
        pos: Position,
        mem: &mut impl MemAccess,
        rq: &mut impl RecvQueue,
    ) -> Result<RxOutcome, Fail> {
        let len = payload_len(pkt)?;
        let (va, rkey, left, total) = match (self.msg, pkt.hdr.reth) {
            (
                Msg::Write {
                    va,
                    rkey,
                    left,
                    total,
                },
                _,
            ) => (va, rkey, left, total),
            (_, Some(reth)) => (reth.va, reth.rkey, reth.len, reth.len),
            (_, None) => return Err(invalid(DropReason::Malformed)),
        };
        if len > left || (pos.is_end() && len != left) {
            return Err(invalid(DropReason::BadLength));
        }
        // WRITE with immediate consumes a receive WQE on its last packet;
        // check for one before anything is placed.
        let wqe = match pkt.hdr.imm {
            Some(_) => Some(self.held.take().or_else(|| rq.take()).ok_or(Fail::Rnr)?),
            None => None,
        };
        if pos.is_start() && total > 0 {
            if let Err(e) = mem.check(rkey, va, total, Access::WRITE) {
                // Give back the WQE taken above; without one, keep the WQE
                // a UC responder may still hold from an abandoned message.
                if wqe.is_some() {
                    self.held = wqe;
                }
                return Err(e.into());
            }
        }
        // The last step that may refuse the packet: placing it now.
        let placed = match pkt.payload.get(..len as usize) {
            Some(data) if len > 0 => match mem.place_write(rkey, va, data) {
                Ok(placed) => placed,
                Err(AccessError::NotPresent) => {
                    if wqe.is_some() {
                        self.held = wqe;
                    }
                    return Err(Fail::Rnr);
                }
                Err(_) => false,
            },
            _ => false,
        };
        let place = (len > 0 && !placed).then_some(Place::Rdma { rkey, va, len });
        let completion = if pos.is_end() {
            self.msg = Msg::Idle;
            self.msn = (self.msn + 1) & 0xFF_FFFF;
            wqe.map(|w| RecvCompletion {
                id: w.id,
                status: WcStatus::Success,
                kind: RecvKind::WriteImm,
                byte_len: total,
                imm: pkt.hdr.imm,
                invalidate: None,
                src_qp: None,
            })
        } else {
            self.msg = Msg::Write {
                va: va.wrapping_add(u64::from(len)),
                rkey,
                left: left - len,
                total,
            };
            None
        };
        self.accepted(pkt, pos);
        Ok(RxOutcome {
            place,
            completion,
            drop: None,
        })
    }

    fn exec_read(&mut self, pkt: &Packet<'_>, mem: &mut impl MemAccess) -> Result<RxOutcome, Fail> {
        let Some(reth) = pkt.hdr.reth else {
            return Err(invalid(DropReason::Malformed));
        };
        let n = self.cfg.pmtu.packets(reth.len);
        if reth.len > MAX_MSG_LEN || n > MAX_MSG_PSNS {
            return Err(invalid(DropReason::BadLength));
        }
        if R == 0 {
            return Err(invalid(DropReason::NoResource));
        }
        if reth.len > 0 {
            mem.check(reth.rkey, reth.va, reth.len, Access::READ)?;
        }
        let p = pkt.hdr.bth.psn;
        self.msn = (self.msn + 1) & 0xFF_FFFF;
        let res = Res::Read {
            psn: p,
            va: reth.va,
            rkey: reth.rkey,
            len: reth.len,
            start: 0,
            next: 0,
            msn: self.msn,
        };
        self.push_res(p, res);
        self.epsn = p.add(n);
        Ok(RxOutcome::default())
    }

    fn exec_atomic(
        &mut self,
        pkt: &Packet<'_>,
        mem: &mut impl MemAccess,
    ) -> Result<RxOutcome, Fail> {
        let Some(a) = pkt.hdr.atomic_eth else {
            return Err(invalid(DropReason::Malformed));
        };
        if a.va % 8 != 0 {
            return Err(invalid(DropReason::Misaligned));
        }
        if R == 0 {
            return Err(invalid(DropReason::NoResource));
        }
        let op = match pkt.hdr.bth.opcode {
            Opcode::RcCmpSwap => AtomicOp::CmpSwap {
                compare: a.compare,
                swap: a.swap_add,
            },
            _ => AtomicOp::FetchAdd { add: a.swap_add },
        };
        let orig = mem.atomic(a.rkey, a.va, op)?;
        let p = pkt.hdr.bth.psn;
        self.msn = (self.msn + 1) & 0xFF_FFFF;
        self.push_res(
            p,
            Res::Atomic {
                psn: p,
                orig,
                msn: self.msn,
            },
        );
        self.epsn = p.next();
        Ok(RxOutcome::default())
    }

    /// ATOMIC WRITE: exactly 8 bytes of payload (RETH length 8, no pad) to
    /// an 8-byte aligned address, executed once; duplicates replay the
    /// response from the resource (IBTA 1.5 oA19-28 ff.).
    fn exec_atomic_write(
        &mut self,
        pkt: &Packet<'_>,
        mem: &mut impl MemAccess,
    ) -> Result<RxOutcome, Fail> {
        let Some(reth) = pkt.hdr.reth else {
            return Err(invalid(DropReason::Malformed));
        };
        let value: [u8; 8] = match pkt.payload.try_into() {
            Ok(v) if reth.len == 8 && pkt.hdr.bth.pad == 0 => v,
            _ => return Err(invalid(DropReason::BadLength)),
        };
        if reth.va % 8 != 0 {
            return Err(invalid(DropReason::Misaligned));
        }
        if R == 0 {
            return Err(invalid(DropReason::NoResource));
        }
        mem.atomic_write(reth.rkey, reth.va, value)?;
        let p = pkt.hdr.bth.psn;
        self.msn = (self.msn + 1) & 0xFF_FFFF;
        self.push_res(
            p,
            Res::EmptyRead {
                psn: p,
                msn: self.msn,
            },
        );
        self.epsn = p.next();
        Ok(RxOutcome::default())
    }

    /// FLUSH: a known placement type and selectivity level, then the
    /// glue's check and barrier ([`MemAccess::flush`]); answered like ATOMIC
    /// WRITE, and like it not executed again for a duplicate (IBTA 1.5
    /// oA19-14 ff.: the response is replayed from the resource).
    fn exec_flush(
        &mut self,
        pkt: &Packet<'_>,
        mem: &mut impl MemAccess,
    ) -> Result<RxOutcome, Fail> {
        let (Some(feth), Some(reth)) = (pkt.hdr.feth, pkt.hdr.reth) else {
            return Err(invalid(DropReason::Malformed));
        };
        let known = FLUSH_GLOBAL | FLUSH_PERSISTENT;
        if feth.placement == 0 || feth.placement & !known != 0 || feth.selectivity > FLUSH_MR {
            return Err(invalid(DropReason::BadFlush));
        }
        if R == 0 {
            return Err(invalid(DropReason::NoResource));
        }
        mem.flush(
            reth.rkey,
            reth.va,
            reth.len,
            feth.selectivity == FLUSH_MR,
            flush_access(feth.placement),
        )?;
        let p = pkt.hdr.bth.psn;
        self.msn = (self.msn + 1) & 0xFF_FFFF;
        self.push_res(
            p,
            Res::EmptyRead {
                psn: p,
                msn: self.msn,
            },
        );
        self.epsn = p.next();
        Ok(RxOutcome::default())
    }

    /// Stores a new READ/atomic in the next resource (overwriting the
    /// oldest; a requester honouring `max_rd_atomic` has no response of it
    /// outstanding any more). Its responses acknowledge everything before
    /// `p`, so a queued ACK for earlier PSNs is dropped.
    fn push_res(&mut self, p: Psn, res: Res) {
        if let Some(slot) = self.res.get_mut(self.res_next) {
            *slot = ResSlot {
                res: Some(res),
                pending: true,
            };
        }
        self.res_next = if self.res_next + 1 >= R {
            0
        } else {
            self.res_next + 1
        };
        if self.ack.is_some_and(|a| !a.psn.is_after(p)) {
            self.ack = None;
        }
        self.unacked = 0;
    }

    /// Bookkeeping after a SEND/WRITE packet was accepted: advance the
    /// expected PSN and queue an ACK if the requester asked for one, the
    /// message ended, or `ack_every` packets went unacknowledged.
    fn accepted(&mut self, pkt: &Packet<'_>, pos: Position) {
        let p = pkt.hdr.bth.psn;
        self.epsn = p.next();
        if self.cfg.transport != Transport::Rc {
            return;
        }
        self.unacked = self.unacked.saturating_add(1);
        if pkt.hdr.bth.ack_req
            || pos.is_end()
            || self.unacked >= self.cfg.ack_every
            || self.ack.is_some()
        {
            self.unacked = 0;
            self.set_ack(
                p,
                Syndrome::Ack {
                    credits: CREDITS_UNLIMITED,
                },
            );
        }
    }

    /// Queues an ACK/NAK unless the queued one carries newer information.
    /// Order: ACK(p-1) < NAK(p) < ACK(p), since a NAK for `p` acknowledges
    /// `p - 1`.
    fn set_ack(&mut self, psn: Psn, syndrome: Syndrome) {
        if let Some(old) = self.ack {
            let d = psn.diff(old.psn);
            let is_ack = matches!(syndrome, Syndrome::Ack { .. });
            if d < 0 || (d == 0 && !is_ack) {
                return;
            }
        }
        self.ack = Some(AckSlot {
            psn,
            syndrome,
            msn: self.msn,
        });
    }

    fn duplicate(&mut self, pkt: &Packet<'_>, mem: &mut impl MemAccess) -> RxOutcome {
        let p = pkt.hdr.bth.psn;
        match pkt.hdr.bth.opcode.info().kind {
            OpKind::ReadReq => self.replay_read(pkt, mem),
            OpKind::CmpSwap | OpKind::FetchAdd | OpKind::AtomicWrite | OpKind::Flush => {
                let found = self.res.iter_mut().find(|s| {
                    matches!(s.res, Some(Res::Atomic { psn, .. } | Res::EmptyRead { psn, .. })
                        if psn == p)
                });
                match found {
                    Some(s) => {
                        s.pending = true;
                        RxOutcome::dropped(DropReason::Duplicate)
                    }
                    None => RxOutcome::dropped(DropReason::NoResource),
                }
            }
            _ => {
                // C9-105: acknowledge again, with the latest PSN.
                self.set_ack(
                    self.epsn.sub(1),
                    Syndrome::Ack {
                        credits: CREDITS_UNLIMITED,
                    },
                );
                RxOutcome::dropped(DropReason::Duplicate)
            }
        }
    }

    /// Restarts the responses of a READ at the duplicate request's PSN; the
    /// duplicate must ask for exactly the rest of the original READ.
    fn replay_read(&mut self, pkt: &Packet<'_>, mem: &mut impl MemAccess) -> RxOutcome {
        let p = pkt.hdr.bth.psn;
        let mtu = self.cfg.pmtu.bytes();
        let pmtu = self.cfg.pmtu;
        let Some(reth) = pkt.hdr.reth else {
            return RxOutcome::dropped(DropReason::Malformed);
        };
        for slot in self.res.iter_mut() {
            let Some(Res::Read {
                psn,
                va,
                rkey,
                len,
                ref mut start,
                ref mut next,
                ..
            }) = slot.res
            else {
                continue;
            };
            let k = p.since(psn);
            if k >= pmtu.packets(len) {
                continue;
            }
            let off = k.saturating_mul(mtu);
            if reth.rkey != rkey
                || reth.va != va.wrapping_add(u64::from(off))
                || reth.len != len.saturating_sub(off)
            {
                return RxOutcome::dropped(DropReason::NoResource);
            }
            if reth.len > 0 && mem.check(rkey, reth.va, reth.len, Access::READ).is_err() {
                return RxOutcome::dropped(DropReason::AccessDenied);
            }
            *start = k;
            *next = k;
            slot.pending = true;
            return RxOutcome::dropped(DropReason::Duplicate);
        }
        RxOutcome::dropped(DropReason::NoResource)
    }

    /// Produces the next response packet: pending READ/atomic responses in
    /// PSN order, then the queued ACK/NAK. RC only.
    pub(super) fn poll_tx(&mut self) -> Option<TxDesc> {
        let mut best: Option<(usize, i32)> = None;
        for (i, s) in self.res.iter().enumerate() {
            let key = match (s.pending, s.res) {
                (true, Some(Res::Read { psn, next, .. })) => psn.add(next),
                (true, Some(Res::Atomic { psn, .. } | Res::EmptyRead { psn, .. })) => psn,
                _ => continue,
            };
            let d = key.diff(self.epsn);
            if best.is_none_or(|(_, bd)| d < bd) {
                best = Some((i, d));
            }
        }
        if let Some((i, _)) = best {
            self.stats.responses = self.stats.responses.saturating_add(1);
            return self.response(i);
        }
        let a = self.ack.take()?;
        self.stats.acks = self.stats.acks.saturating_add(1);
        let mut hdr = Headers::new(self.bth(Opcode::RcAck, a.psn, 0));
        hdr.aeth = Some(Aeth {
            syndrome: a.syndrome,
            msn: a.msn,
        });
        Some(TxDesc {
            hdr,
            payload: PayloadRef::None,
        })
    }

    fn response(&mut self, i: usize) -> Option<TxDesc> {
        let mtu = self.cfg.pmtu.bytes();
        let pmtu = self.cfg.pmtu;
        let slot = self.res.get_mut(i)?;
        let ack = |msn| Aeth {
            syndrome: Syndrome::Ack {
                credits: CREDITS_UNLIMITED,
            },
            msn,
        };
        match slot.res.as_mut()? {
            Res::Atomic { psn, orig, msn } => {
                let (psn, orig, msn) = (*psn, *orig, *msn);
                slot.pending = false;
                let mut hdr = Headers::new(self.bth(Opcode::RcAtomicAck, psn, 0));
                hdr.aeth = Some(ack(msn));
                hdr.atomic_ack_eth = Some(AtomicAckEth { orig });
                Some(TxDesc {
                    hdr,
                    payload: PayloadRef::None,
                })
            }
            Res::EmptyRead { psn, msn } => {
                let (psn, msn) = (*psn, *msn);
                slot.pending = false;
                let mut hdr = Headers::new(self.bth(Opcode::RcReadRespOnly, psn, 0));
                hdr.aeth = Some(ack(msn));
                Some(TxDesc {
                    hdr,
                    payload: PayloadRef::None,
                })
            }
            Res::Read {
                psn,
                va,
                rkey,
                len,
                start,
                next,
                msn,
            } => {
                let n = pmtu.packets(*len);
                let k = *next;
                let off = k.saturating_mul(mtu);
                let plen = len.saturating_sub(off).min(mtu);
                let op = if n.saturating_sub(*start) == 1 {
                    Opcode::RcReadRespOnly
                } else if k == *start {
                    Opcode::RcReadRespFirst
                } else if k + 1 == n {
                    Opcode::RcReadRespLast
                } else {
                    Opcode::RcReadRespMiddle
                };
                let (psn, va, rkey, msn) =
                    (psn.add(k), va.wrapping_add(u64::from(off)), *rkey, *msn);
                *next = k + 1;
                slot.pending = *next < n;
                let mut hdr = Headers::new(self.bth(op, psn, pad_for(plen as usize)));
                if op != Opcode::RcReadRespMiddle {
                    hdr.aeth = Some(ack(msn));
                }
                let payload = if plen > 0 {
                    PayloadRef::Mr {
                        rkey,
                        va,
                        len: plen,
                    }
                } else {
                    PayloadRef::None
                };
                Some(TxDesc { hdr, payload })
            }
        }
    }

    fn bth(&self, opcode: Opcode, psn: Psn, pad: u8) -> Bth {
        Bth {
            opcode,
            solicited: false,
            mig_req: false,
            pad,
            pkey: self.cfg.pkey,
            resv8: 0,
            dest_qp: self.cfg.dest_qpn,
            ack_req: false,
            psn,
        }
    }

    /// UC: gives up the open message, keeping its receive WQE for the next.
    fn abandon_msg(&mut self) {
        if let Msg::Send { wqe, .. } = self.msg {
            self.held = Some(wqe);
        }
        self.msg = Msg::Idle;
    }
}

/// Payload length as `u32` (it is at most one PMTU once checked).
fn payload_len(pkt: &Packet<'_>) -> Result<u32, Fail> {
    u32::try_from(pkt.payload.len()).map_err(|_| invalid(DropReason::BadLength))
}
