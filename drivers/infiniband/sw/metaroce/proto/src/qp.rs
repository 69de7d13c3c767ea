// SPDX-License-Identifier: GPL-2.0
//! A queue pair: requester, completer and responder behind one sans-I/O
//! interface.
//!
//! Inputs are posted work requests ([`Qp::post_send`]), received packets
//! ([`Qp::receive`]) and time ([`Qp::on_timer`], with `now` in nanoseconds
//! of a caller-chosen monotonic clock). Outputs are pulled: packets to
//! send ([`Qp::poll_tx`]), send completions ([`Qp::poll_send_completion`]),
//! and, per received packet, an [`RxOutcome`] telling where its payload
//! goes and which receive WQE completed. [`Qp::next_deadline`] tells when
//! `on_timer` must be called next. The caller owns the send queue slice,
//! the receive queue ([`RecvQueue`]) and memory ([`MemAccess`]).

use super::comp::{CompStats, Completer};
use super::ext::NakCode;
use super::opcode::Transport;
use super::packet::{Packet, Pmtu, TxDesc};
use super::psn::Psn;
use super::req::{PostError, ReqStats, Requester, MAX_MSG_PSNS};
use super::resp::{MemAccess, RecvQueue, RespStats, Responder};
use super::wr::{Access, Place, RecvCompletion, SendCompletion, SendWqe, SendWr, WcStatus};

/// Static attributes of a queue pair (the subset of `ib_qp_attr` the
/// transport needs).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct QpConfig {
    /// RC, UC or UD.
    pub transport: Transport,
    /// Path MTU.
    pub pmtu: Pmtu,
    /// Local QP number (sent as the DETH source QP on UD).
    pub qpn: u32,
    /// Remote QP number (RC/UC).
    pub dest_qpn: u32,
    /// Partition key sent in every BTH.
    pub pkey: u16,
    /// Q_Key (UD).
    pub qkey: u32,
    /// First PSN the requester sends (`sq_psn`).
    pub sq_psn: Psn,
    /// First PSN the responder expects (`rq_psn`).
    pub rq_psn: Psn,
    /// Send queue slots: a power of two; the send queue slice passed to
    /// every call must have exactly this length.
    pub sq_depth: u32,
    /// READs/atomics the requester may have outstanding (`max_rd_atomic`);
    /// must not exceed the peer's responder resources.
    pub max_rd_atomic: u8,
    /// Local ACK timeout exponent: 4.096 us * 2^timeout, 0 = none.
    pub timeout: u8,
    /// Transport retries (0..=7).
    pub retry_cnt: u8,
    /// RNR retries (0..=7, 7 = unlimited).
    pub rnr_retry: u8,
    /// RNR timer code sent in RNR NAKs (`min_rnr_timer`).
    pub min_rnr_timer: u8,
    /// Remote operations the peer may perform on this QP.
    pub access: Access,
    /// Responder: acknowledge at least every this many packets.
    pub ack_every: u32,
    /// Requester: set AckReq at least every this many packets.
    pub ack_req_every: u32,
    /// Requester: PSN window (1..=2^22). A request packet leaves only while
    /// fewer than this many PSNs are unacknowledged; a READ's responses may
    /// run past it (their span stays within 2^22, see `req.rs`).
    pub max_inflight: u32,
}

impl QpConfig {
    /// Defaults for a QP of `transport` between `qpn` and `dest_qpn`: PSNs
    /// start at 0, 256-slot send queue, 1024-byte MTU, 8 READ/atomics, ~67
    /// ms ACK timeout, 7 retries, unlimited RNR retries, 0.64 ms RNR
    /// timer, all remote access, ACK and AckReq every 64 packets, 128 PSNs
    /// in flight (rdma_rxe's `RXE_MAX_UNACKED_PSNS`).
    pub const fn new(transport: Transport, qpn: u32, dest_qpn: u32) -> Self {
        QpConfig {
            transport,
            pmtu: Pmtu::Mtu1024,
            qpn,
            dest_qpn,
            pkey: 0xFFFF,
            qkey: 0,
            sq_psn: Psn::new(0),
            rq_psn: Psn::new(0),
            sq_depth: 256,
            max_rd_atomic: 8,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            access: Access::READ.with(Access::WRITE).with(Access::ATOMIC),
            ack_every: 64,
            ack_req_every: 64,
            max_inflight: 128,
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.transport == Transport::Cnp {
            return Err(ConfigError::Transport);
        }
        if !self.sq_depth.is_power_of_two() || self.sq_depth > 1 << 30 {
            return Err(ConfigError::SqDepth);
        }
        if self.max_inflight == 0 || self.max_inflight > MAX_MSG_PSNS {
            return Err(ConfigError::Window);
        }
        if self.ack_every == 0 || self.ack_req_every == 0 {
            return Err(ConfigError::AckInterval);
        }
        if self.retry_cnt > 7 || self.rnr_retry > 7 || self.timeout > 31 || self.min_rnr_timer > 31
        {
            return Err(ConfigError::Range);
        }
        Ok(())
    }
}

/// Invalid [`QpConfig`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ConfigError {
    /// The transport is not RC, UC or UD.
    Transport,
    /// `sq_depth` is not a power of two up to 2^30.
    SqDepth,
    /// `max_inflight` is 0 or above 2^22.
    Window,
    /// `ack_every` or `ack_req_every` is 0.
    AckInterval,
    /// A retry count, timeout or timer code is out of range.
    Range,
    /// Send attributes changed after work requests were posted.
    InUse,
}

/// Why a received packet was dropped (for the kernel's counters). A
/// dropped packet may still have completed a receive WQE with an error.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum DropReason {
    /// The QP is in the error state.
    QpError,
    /// The opcode belongs to another transport (or is a CNP, which the
    /// congestion control in the glue handles).
    WrongTransport,
    /// A PSN ahead of the expected one (the first one is NAKed), or a gap
    /// in READ/atomic responses.
    OutOfSequence,
    /// A duplicate request: re-acknowledged or replayed.
    Duplicate,
    /// A response for a PSN already acknowledged.
    Stale,
    /// A response for a PSN never sent.
    Ghost,
    /// No receive WQE (RNR NAK on RC).
    NoRecvWqe,
    /// Opcode out of message order.
    OpSequence,
    /// Payload length against PMTU, RETH length or receive WQE.
    BadLength,
    /// Operation not enabled on this QP.
    QpAccess,
    /// Memory access refused.
    AccessDenied,
    /// Memory operation failed.
    Operational,
    /// Atomic address not 8-byte aligned.
    Misaligned,
    /// A duplicate READ/atomic no longer (or never) in the responder's
    /// resources, or a READ/atomic on a QP without resources.
    NoResource,
    /// UD Q_Key mismatch.
    QkeyMismatch,
    /// UC: part of a message whose start was lost.
    UcDropped,
    /// A response inconsistent with its work request (completes it with
    /// `BadRespErr`).
    BadResponse,
    /// A header required by the opcode is missing (only possible for
    /// packets not produced by [`super::packet::parse`]).
    Malformed,
    /// A FLUSH with no or an unknown placement type, or a reserved
    /// selectivity level.
    BadFlush,
    /// A READ response or atomic result whose local buffers are not present
    /// (on-demand paging memory being faulted in): asked for again after
    /// [`super::comp::LOCAL_FAULT_WAIT_NS`].
    NotPresent,
}

/// Result of processing one received packet.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct RxOutcome {
    /// Where to copy the packet's payload.
    pub place: Option<Place>,
    /// A receive WQE completed by this packet.
    pub completion: Option<RecvCompletion>,
    /// The packet was dropped, and why.
    pub drop: Option<DropReason>,
}

impl RxOutcome {
    /// A dropped packet without side effects.
    pub const fn dropped(reason: DropReason) -> Self {
        RxOutcome {
            place: None,
            completion: None,
            drop: Some(reason),
        }
    }
}

/// All counters of a QP.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Stats {
    /// Requester.
    pub req: ReqStats,
    /// Completer.
    pub comp: CompStats,
    /// Responder.
    pub resp: RespStats,
}

/// The send side's attributes that come with the move to ready-to-send
/// ([`Qp::set_send_attrs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendAttrs {
    /// First PSN the requester sends.
    pub sq_psn: Psn,
    /// Local ACK timeout (4.096 µs × 2^timeout; 0: none).
    pub timeout: u8,
    /// Transport retries.
    pub retry_cnt: u8,
    /// RNR retries (7: unlimited).
    pub rnr_retry: u8,
    /// READs and atomics the requester keeps outstanding.
    pub max_rd_atomic: u8,
}

/// A queue pair with `R` responder resources (`max_dest_rd_atomic`).
#[derive(Clone, Debug)]
pub struct Qp<const R: usize> {
    cfg: QpConfig,
    req: Requester,
    comp: Completer,
    resp: Responder<R>,
}

impl<const R: usize> Qp<R> {
    /// Creates a QP in the ready-to-send state.
    pub fn new(cfg: QpConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        Ok(Qp {
            cfg,
            req: Requester::new(cfg),
            comp: Completer::new(cfg),
            resp: Responder::new(cfg),
        })
    }

    /// The QP's configuration.
    pub const fn config(&self) -> &QpConfig {
        &self.cfg
    }

    /// Changes the remote access rights the responder grants (verbs'
    /// `IB_QP_ACCESS_FLAGS`, allowed at RTR→RTS and RTS→RTS on a live QP):
    /// each request that begins after this call is checked against `access`
    /// (a multi-packet WRITE already under way finishes as it began).
    pub fn set_access(&mut self, access: Access) {
        self.cfg.access = access;
        self.resp.set_access(access);
    }

    /// Sets the send side's attributes when the QP moves to ready-to-send
    /// (RTR to RTS: the starting send PSN, local ACK timeout, retry counts
    /// and outstanding READ/atomic limit arrive with that transition), keeping
    /// the responder's state: packets may have been received in RTR. Refused
    /// with `InUse` once anything was posted, as the requester would lose it.
    pub fn set_send_attrs(&mut self, attrs: SendAttrs, sq: &[SendWqe]) -> Result<(), ConfigError> {
        if self.sq_used() != 0 || !self.sq_ok(sq) {
            return Err(ConfigError::InUse);
        }
        let mut cfg = self.cfg;
        cfg.sq_psn = attrs.sq_psn;
        cfg.timeout = attrs.timeout;
        cfg.retry_cnt = attrs.retry_cnt;
        cfg.rnr_retry = attrs.rnr_retry;
        cfg.max_rd_atomic = attrs.max_rd_atomic;
        cfg.validate()?;
        let (error, stats) = (self.comp.error, (self.req.stats, self.comp.stats));
        self.cfg = cfg;
        self.req = Requester::new(cfg);
        self.comp = Completer::new(cfg);
        (self.req.stats, self.comp.stats) = stats;
        if error {
            self.comp.set_error();
        }
        Ok(())
    }

    fn sq_ok(&self, sq: &[SendWqe]) -> bool {
        sq.len() == self.cfg.sq_depth as usize
    }

    /// Posts a send work request. In the error state it is accepted and
    /// then flushed.
    pub fn post_send(&mut self, sq: &mut [SendWqe], wr: SendWr) -> Result<(), PostError> {
        if !self.sq_ok(sq) {
            return Err(PostError::BadQueue);
        }
        self.req.post(self.comp.head, sq, wr, self.comp.blocks_tx())
    }

    /// Returns the next packet to transmit: responses before requests.
    pub fn poll_tx(&mut self, now: u64, sq: &mut [SendWqe]) -> Option<TxDesc> {
        if let Some(d) = self.resp.poll_tx() {
            return Some(d);
        }
        if !self.sq_ok(sq) {
            self.set_error();
            return None;
        }
        let d = self.req.poll_tx(&self.comp, sq)?;
        self.comp.on_sent(now);
        Some(d)
    }

    /// Processes a received packet addressed to this QP. The caller has
    /// already verified the ICRC, the destination QP number and the P_Key,
    /// and copies `pkt.payload` as the outcome's `place` says.
    pub fn receive(
        &mut self,
        now: u64,
        pkt: &Packet<'_>,
        sq: &mut [SendWqe],
        mem: &mut impl MemAccess,
        rq: &mut impl RecvQueue,
    ) -> RxOutcome {
        let info = pkt.hdr.bth.opcode.info();
        if info.transport != self.cfg.transport {
            return RxOutcome::dropped(DropReason::WrongTransport);
        }
        let out = if info.kind.is_request() {
            self.resp.receive(pkt, mem, rq)
        } else if self.sq_ok(sq) {
            self.comp.receive(now, pkt, &mut self.req, sq, mem)
        } else {
            self.set_error();
            RxOutcome::dropped(DropReason::QpError)
        };
        self.sync_error();
        out
    }

    /// Send queue slots in use: posted work requests not yet returned by
    /// [`Qp::poll_send_completion`] (unsignaled ones included).
    pub fn sq_used(&self) -> u32 {
        self.req.tail.wrapping_sub(self.comp.head)
    }

    /// Returns the next send completion, in posting order.
    pub fn poll_send_completion(&mut self, sq: &mut [SendWqe]) -> Option<SendCompletion> {
        if !self.sq_ok(sq) {
            return None;
        }
        self.comp.poll_completion(&self.req, sq)
    }

    /// When `on_timer` must be called next, if at all.
    pub fn next_deadline(&self) -> Option<u64> {
        self.comp.next_deadline()
    }

    /// Handles timers that expired at `now`.
    pub fn on_timer(&mut self, now: u64, sq: &mut [SendWqe]) {
        if self.sq_ok(sq) {
            self.comp.on_timer(now, &mut self.req, sq);
        }
        self.sync_error();
    }

    /// In the error state, a packet from the peer: if it retransmits the request this QP
    /// answered with the NAK that broke it (remote access or operational error, invalid
    /// request), the NAK is queued again for [`Qp::poll_tx`] and `true` returned. The first
    /// NAK may have been lost on the way; the peer then learns the error instead of retrying
    /// into `RETRY_EXC_ERR`. Bounded ([`MAX_NAK_REPEATS`](super::resp::MAX_NAK_REPEATS)); the
    /// packet itself is dropped.
    pub fn repeat_nak(&mut self, pkt: &Packet<'_>) -> bool {
        let info = pkt.hdr.bth.opcode.info();
        self.is_error()
            && info.transport == self.cfg.transport
            && info.kind.is_request()
            && self.resp.repeat_nak(pkt.hdr.bth.psn)
    }

    /// True once the QP is in the error state.
    pub fn is_error(&self) -> bool {
        self.comp.error || self.resp.error
    }

    /// Moves the QP to the error state (e.g. `modify_qp(IB_QPS_ERR)`):
    /// nothing more is sent and every unfinished send WQE is flushed.
    pub fn set_error(&mut self) {
        self.comp.set_error();
        self.resp.set_error();
    }

    /// The local data of send WQE `idx` (the `slot` of a
    /// [`PayloadRef::Sq`](super::packet::PayloadRef::Sq) that [`Qp::poll_tx`] handed out) could not be read:
    /// its memory region was deregistered or lost its local access after the
    /// work request was posted. Use [`WcStatus::LocProtErr`]. The WQE
    /// completes with `status` once every WQE before it is done (RC: their
    /// acknowledgements still count; nothing after it is sent), and the QP
    /// then enters the error state; UC and UD fail it at once.
    pub fn local_error(&mut self, idx: u32, status: WcStatus, sq: &mut [SendWqe]) {
        if self.sq_ok(sq) {
            self.comp.local_error(idx, status, &self.req, sq);
        }
        self.sync_error();
    }

    /// The response data of [`Place::ReadResp`] or [`Place::AtomicResult`]
    /// (send queue `slot`) could not be placed in the request's local
    /// buffers (its memory region went away): the READ or atomic completes
    /// with `status` ([`WcStatus::LocProtErr`]), even if that response
    /// completed it, and the QP enters the error state.
    pub fn response_failed(&mut self, slot: u32, status: WcStatus, sq: &mut [SendWqe]) {
        if self.sq_ok(sq) {
            self.comp.response_failed(slot, status, &self.req, sq);
        }
        self.sync_error();
    }

    /// The payload of the request at `psn`, handed out by [`Qp::receive`],
    /// could not be placed: the QP enters the error state and RC answers
    /// the request with a NAK instead of its acknowledgement. Use
    /// [`NakCode::RemoteOperational`] for a receive WQE whose buffers are
    /// unusable (IBTA class A, rdma_rxe's `RESPST_ERR_MALFORMED_WQE`) and
    /// [`NakCode::RemoteAccess`] for RDMA memory that became unusable after
    /// its check (an MR deregistered while the WRITE was arriving).
    pub fn placement_failed(&mut self, psn: Psn, code: NakCode) {
        self.resp.placement_failed(psn, code);
        self.sync_error();
    }

    /// In the error state, returns the receive WQE held by the responder
    /// (if any) as flushed. The glue flushes the WQEs still in its receive
    /// queue itself.
    pub fn flush_recv(&mut self) -> Option<RecvCompletion> {
        self.resp.flush()
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        Stats {
            req: self.req.stats,
            comp: self.comp.stats,
            resp: self.resp.stats,
        }
    }

    fn sync_error(&mut self) {
        if self.comp.error && !self.resp.error {
            self.resp.set_error();
        }
        if self.resp.error && !self.comp.error {
            self.comp.set_error();
        }
    }
}
