// SPDX-License-Identifier: GPL-2.0
//! Completer: consumes responses (ACK, NAK, RNR NAK, READ responses,
//! atomic ACKs), completes send WQEs strictly in posting order and drives
//! retransmission (the role of rdma_rxe's `rxe_comp.c`).
//!
//! `una` is the oldest PSN not yet acknowledged and `una_idx` the WQE
//! containing it. An ACK for PSN `p` acknowledges every PSN up to `p`
//! (implicitly completing earlier WQEs), except that a READ or atomic can
//! only complete with its own response: an acknowledgement beyond one that
//! has not received its data means that data was lost, which triggers a
//! retry (an "implied NAK").
//!
//! Retries are go-back-N from `una`: on the local ACK timeout, on a PSN
//! sequence error NAK and on an implied NAK. Each consumes one unit of
//! `retry_cnt`; RNR NAKs consume `rnr_retry` (7 = unlimited) and delay the
//! retry by the NAK's RNR timer. Both counters are reset whenever `una`
//! advances. A retry that is already under way from the same `una` is not
//! restarted by further NAKs (only by the timer), so a burst of out-of-order
//! responses costs one retry, not many. Each such response restarts the ACK
//! timer instead (as rdma_rxe's completer does with every packet): a
//! responder finishes the READ response it is sending before it reads the
//! repeated request (rdma_rxe does), so after one lost packet of a long READ
//! the rest of the first response keeps arriving, out of sequence, for as
//! long as it takes to send; timing out meanwhile would spend `retry_cnt`
//! on a live responder and fail the READ (seen with 4 MiB READs from
//! rdma_rxe at ~4.5 MB/s: the ~1 s stream outlasted 7 timeouts of 67 ms).

use super::ext::{NakCode, Syndrome};
use super::opcode::{OpKind, Opcode, Transport};
use super::packet::Packet;
use super::psn::Psn;
use super::qp::{DropReason, QpConfig, RxOutcome};
use super::req::Requester;
use super::resp::{AccessError, MemAccess};
use super::timer::{ack_timeout_ns, rnr_timer_ns};
use super::wr::{slot_of, wqe, wqe_mut, Place, SendCompletion, SendOp, SendWqe, WcStatus};

/// `rnr_retry` value meaning "retry forever".
pub const RNR_RETRY_INFINITE: u8 = 7;

/// How long the requester waits before asking again for a READ response or
/// atomic result that found its local buffers missing (on-demand paging
/// memory the glue is faulting in). Our choice: long enough for a fault
/// under a loaded guest, short against any ACK timeout.
pub const LOCAL_FAULT_WAIT_NS: u64 = 1_000_000;

/// Completer counters.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct CompStats {
    /// Local ACK timeouts that found unacknowledged packets.
    pub timeouts: u64,
    /// Go-back-N retries started (timeouts, sequence NAKs, implied NAKs).
    pub retries: u64,
    /// PSN sequence error NAKs received.
    pub seq_naks: u64,
    /// RNR NAKs received.
    pub rnr_naks: u64,
    /// Responses for PSNs already acknowledged.
    pub stale: u64,
    /// READ responses and atomic results refused because their local
    /// buffers were not present (each followed by a wait and a new request).
    pub sink_waits: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Retry {
    Timeout,
    Nak,
}

/// A READ or atomic before the acknowledged PSN has not received its data.
struct ImpliedNak;

/// Completer state of one QP.
#[derive(Clone, Debug)]
pub struct Completer {
    cfg: QpConfig,
    /// Next WQE to report through `poll_completion`.
    pub(super) head: u32,
    /// Oldest WQE that is not done.
    pub(super) una_idx: u32,
    /// Oldest unacknowledged PSN.
    pub(super) una: Psn,
    retry_left: u8,
    rnr_left: u8,
    /// Local ACK timeout deadline, armed while packets are unacknowledged.
    rto: Option<u64>,
    /// End of an RNR wait; the requester is paused until then.
    rnr_until: Option<u64>,
    /// `una` at the last retry, until `una` advances.
    rewound_at: Option<Psn>,
    /// The QP is in the error state: every unfinished WQE is flushed.
    pub(super) error: bool,
    /// RC: a WQE whose local data could not be read, and the status it ends
    /// with. The requester sends nothing from it on; it fails once every
    /// WQE before it is done (see [`Completer::local_error`]).
    halt: Option<(u32, WcStatus)>,
    /// Counters.
    pub(super) stats: CompStats,
}

impl Completer {
    /// A completer expecting the first response for `cfg.sq_psn`.
    pub(super) fn new(cfg: QpConfig) -> Self {
        Completer {
            cfg,
            head: 0,
            una_idx: 0,
            una: cfg.sq_psn,
            retry_left: cfg.retry_cnt,
            rnr_left: cfg.rnr_retry,
            rto: None,
            rnr_until: None,
            rewound_at: None,
            error: false,
            halt: None,
            stats: CompStats::default(),
        }
    }

    /// True while the requester must not send: error state or RNR wait.
    pub(super) fn blocks_tx(&self) -> bool {
        self.error || self.rnr_until.is_some()
    }

    /// Moves the QP to the error state.
    pub(super) fn set_error(&mut self) {
        self.error = true;
        self.rto = None;
        self.rnr_until = None;
    }

    /// True if the requester must not send from WQE `idx` on: a local
    /// error halted the send queue at or before it.
    pub(super) fn halts(&self, idx: u32) -> bool {
        self.halt
            .is_some_and(|(h, _)| idx.wrapping_sub(self.head) >= h.wrapping_sub(self.head))
    }

    /// The local data of WQE `idx`, which the requester has started, could
    /// not be read. UC and UD (done on transmission) fail it at once. RC
    /// sends nothing more from it on, lets the WQEs before it complete as
    /// their responses arrive (or fail by their own retries), and then
    /// completes it with `status` and enters the error state: the order of
    /// rdma_rxe's completer for a requester-side error. A second local
    /// error keeps the earlier of the two WQEs.
    pub(super) fn local_error(
        &mut self,
        idx: u32,
        status: WcStatus,
        req: &Requester,
        sq: &mut [SendWqe],
    ) {
        let outstanding = req.tail.wrapping_sub(self.head);
        if self.error || idx.wrapping_sub(self.head) >= outstanding {
            return;
        }
        // RC: only a WQE not yet done (a done one keeps its status).
        let rc = self.cfg.transport == Transport::Rc;
        if rc && idx.wrapping_sub(self.una_idx) >= req.tail.wrapping_sub(self.una_idx) {
            return;
        }
        if !rc {
            if let Some(w) = wqe_mut(sq, idx) {
                w.status = Some(status);
            }
            self.set_error();
            return;
        }
        if !self.halts(idx) {
            self.halt = Some((idx, status));
        }
        self.fail_halted(req, sq);
    }

    /// The response data of the READ or atomic in send queue slot `slot`
    /// (a [`Place::ReadResp`] or [`Place::AtomicResult`] handed out) could
    /// not be placed in its local buffers: it completes with `status`, also
    /// if that response was its last and it counts as done, and the QP
    /// enters the error state. Ignored for a slot with no READ or atomic
    /// outstanding or unreported.
    pub(super) fn response_failed(
        &mut self,
        slot: u32,
        status: WcStatus,
        req: &Requester,
        sq: &mut [SendWqe],
    ) {
        let len = sq.len();
        let n = req.tail.wrapping_sub(self.head);
        let Some(idx) = (0..n)
            .map(|k| self.head.wrapping_add(k))
            .find(|&i| slot_of(i, len) == slot as usize)
        else {
            return;
        };
        if let Some(w) = wqe_mut(sq, idx) {
            if w.wr.op.needs_response() && w.started {
                w.status = Some(status);
                self.set_error();
            }
        }
    }

    /// Fails the halted WQE once everything before it is done.
    fn fail_halted(&mut self, req: &Requester, sq: &mut [SendWqe]) {
        if let Some((h, status)) = self.halt {
            if !self.error && self.una_idx == h {
                self.fail(status, req, sq);
            }
        }
    }

    /// Earliest pending deadline.
    pub(super) fn next_deadline(&self) -> Option<u64> {
        match (self.rto, self.rnr_until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Called after the requester sent a packet at time `now`: arms the
    /// local ACK timer if it is not running (RC only).
    pub(super) fn on_sent(&mut self, now: u64) {
        if self.cfg.transport == Transport::Rc && self.rto.is_none() {
            self.rto = ack_timeout_ns(self.cfg.timeout).map(|t| now.saturating_add(t));
        }
    }

    /// Handles expired timers.
    pub(super) fn on_timer(&mut self, now: u64, req: &mut Requester, sq: &mut [SendWqe]) {
        if self.error {
            return;
        }
        if self.rnr_until.is_some_and(|t| now >= t) {
            self.rnr_until = None;
        }
        if self.rto.is_some_and(|t| now >= t) {
            self.rto = None;
            if self.una != req.psn {
                self.stats.timeouts = self.stats.timeouts.saturating_add(1);
                self.retry(now, Retry::Timeout, req, sq);
            }
        }
    }

    /// Returns the next completion in posting order, if any. Unsignaled
    /// successful WQEs are retired silently; in the error state every WQE
    /// without a status is reported as flushed.
    pub(super) fn poll_completion(
        &mut self,
        req: &Requester,
        sq: &mut [SendWqe],
    ) -> Option<SendCompletion> {
        self.pass_local(req, sq);
        self.fail_halted(req, sq);
        while self.head != req.tail {
            let w = wqe(sq, self.head)?;
            let status = match w.status {
                Some(s) => s,
                None if self.error => WcStatus::WrFlushErr,
                None => return None,
            };
            self.head = self.head.wrapping_add(1);
            if status != WcStatus::Success || w.wr.signaled {
                return Some(SendCompletion {
                    wr_id: w.wr.wr_id,
                    status,
                    byte_len: w.wr.len,
                });
            }
        }
        None
    }

    /// RC: completes local WQEs that the requester has passed and whose
    /// predecessors are all acknowledged (their empty PSN range starts at
    /// `una`). They carry no PSN, so no ACK would retire them; until they
    /// are retired here or by an ACK they have no status (so the error
    /// state flushes them, and their slots are not reused early).
    fn pass_local(&mut self, req: &Requester, sq: &mut [SendWqe]) {
        if self.cfg.transport != Transport::Rc || self.error {
            return;
        }
        while self.una_idx != req.cur {
            match wqe_mut(sq, self.una_idx) {
                Some(w) if w.wr.op == SendOp::Local && w.started && w.first_psn == self.una => {
                    w.status = Some(WcStatus::Success);
                    self.una_idx = self.una_idx.wrapping_add(1);
                }
                _ => return,
            }
        }
    }

    /// Processes a response packet. READ response data and atomic results
    /// are offered to [`MemAccess::place_response`] before they are
    /// accepted.
    pub(super) fn receive(
        &mut self,
        now: u64,
        pkt: &Packet<'_>,
        req: &mut Requester,
        sq: &mut [SendWqe],
        mem: &mut impl MemAccess,
    ) -> RxOutcome {
        if self.error {
            return RxOutcome::dropped(DropReason::QpError);
        }
        let p = pkt.hdr.bth.psn;
        if p.is_before(self.una) {
            self.stats.stale = self.stats.stale.saturating_add(1);
            return RxOutcome::dropped(DropReason::Stale);
        }
        if !p.is_before(req.hi_psn) {
            return RxOutcome::dropped(DropReason::Ghost);
        }
        match pkt.hdr.bth.opcode.info().kind {
            OpKind::Ack => self.on_ack(now, pkt, req, sq),
            OpKind::ReadResp => self.on_read_resp(now, pkt, req, sq, mem),
            OpKind::AtomicAck => self.on_atomic_ack(now, pkt, req, sq, mem),
            _ => RxOutcome::dropped(DropReason::WrongTransport),
        }
    }

    fn on_ack(
        &mut self,
        now: u64,
        pkt: &Packet<'_>,
        req: &mut Requester,
        sq: &mut [SendWqe],
    ) -> RxOutcome {
        let p = pkt.hdr.bth.psn;
        let Some(aeth) = pkt.hdr.aeth else {
            return RxOutcome::dropped(DropReason::Malformed);
        };
        match aeth.syndrome {
            Syndrome::Ack { .. } => {
                if self.ack_through(now, p.next(), req, sq).is_err() {
                    self.retry(now, Retry::Nak, req, sq);
                }
            }
            Syndrome::Nak(NakCode::PsnSeqErr) => {
                self.stats.seq_naks = self.stats.seq_naks.saturating_add(1);
                // Everything before the NAK's PSN arrived; resend from there
                // (or from an earlier READ/atomic still missing its data).
                let _ = self.ack_through(now, p, req, sq);
                self.retry(now, Retry::Nak, req, sq);
            }
            Syndrome::Rnr { timer } => {
                self.stats.rnr_naks = self.stats.rnr_naks.saturating_add(1);
                if self.ack_through(now, p, req, sq).is_err() {
                    self.retry(now, Retry::Nak, req, sq);
                } else {
                    self.rnr(now, timer, req, sq);
                }
            }
            Syndrome::Nak(code) => {
                let _ = self.ack_through(now, p, req, sq);
                let status = match code {
                    NakCode::RemoteAccess => WcStatus::RemAccessErr,
                    NakCode::RemoteOperational => WcStatus::RemOpErr,
                    _ => WcStatus::RemInvReqErr,
                };
                self.fail(status, req, sq);
            }
        }
        RxOutcome::default()
    }

    fn on_read_resp(
        &mut self,
        now: u64,
        pkt: &Packet<'_>,
        req: &mut Requester,
        sq: &mut [SendWqe],
        mem: &mut impl MemAccess,
    ) -> RxOutcome {
        let p = pkt.hdr.bth.psn;
        if self.ack_through(now, p, req, sq).is_err() || p != self.una {
            // An earlier response is missing.
            self.retry(now, Retry::Nak, req, sq);
            return RxOutcome::dropped(DropReason::OutOfSequence);
        }
        let idx = self.una_idx;
        let Some(w) = wqe(sq, idx).copied() else {
            return RxOutcome::dropped(DropReason::QpError);
        };
        let ack = pkt
            .hdr
            .aeth
            .is_none_or(|a| matches!(a.syndrome, Syndrome::Ack { .. }));
        if let SendOp::AtomicWrite { .. } | SendOp::Flush { .. } = w.wr.op {
            // Answered by an empty READ RESPONSE Only at the request's PSN.
            let only = pkt.hdr.bth.opcode == Opcode::RcReadRespOnly;
            if !w.started || w.first_psn != p || !only || !pkt.payload.is_empty() || !ack {
                return self.bad_response(req, sq);
            }
            self.complete(req, sq);
            self.progressed(now, req, sq);
            return RxOutcome::default();
        }
        let mtu = self.cfg.pmtu.bytes();
        let off = p
            .since(w.first_psn)
            .checked_mul(mtu)
            .filter(|&o| o < w.wr.len || w.wr.len == 0);
        let (SendOp::Read { .. }, true, Some(off)) = (w.wr.op, w.started, off) else {
            return self.bad_response(req, sq);
        };
        let remaining = w.wr.len.saturating_sub(off);
        let last = remaining <= mtu;
        let pos = pkt.hdr.bth.opcode.info().pos;
        if pos.is_end() != last || pkt.payload.len() != remaining.min(mtu) as usize || !ack {
            return self.bad_response(req, sq);
        }
        let len = remaining.min(mtu);
        let slot = slot_of(idx, sq.len()) as u32;
        let placed = match len {
            0 => true,
            _ => match mem.place_response(slot, off, pkt.payload) {
                Err(AccessError::NotPresent) => return self.sink_missing(now, req, sq),
                r => r == Ok(true),
            },
        };
        if last {
            self.complete(req, sq);
        } else {
            self.una = p.next();
        }
        self.progressed(now, req, sq);
        RxOutcome {
            place: (!placed).then_some(Place::ReadResp {
                slot,
                offset: off,
                len,
            }),
            ..RxOutcome::default()
        }
    }

    /// The response at `una` found its local buffers missing (the glue is
    /// faulting them in): nothing is accepted, and after
    /// [`LOCAL_FAULT_WAIT_NS`] the requester asks again from `una` (a READ
    /// from the first byte not yet placed; an atomic is answered from the
    /// responder's saved result, not executed twice). Neither retry counter
    /// is consumed: the fault either brings the pages in or makes the next
    /// placement fail for good, which completes the work request with a
    /// local error.
    fn sink_missing(&mut self, now: u64, req: &mut Requester, sq: &mut [SendWqe]) -> RxOutcome {
        self.stats.sink_waits = self.stats.sink_waits.saturating_add(1);
        // Also during an RNR wait, which may end sooner: the requester resends from `una`,
        // where it may not stand (a later ACK moved it on), so the refused response is asked
        // for again without waiting for the ACK timeout.
        let until = now.saturating_add(LOCAL_FAULT_WAIT_NS);
        self.rnr_until = Some(self.rnr_until.map_or(until, |t| t.max(until)));
        self.rewind(req, sq);
        RxOutcome::dropped(DropReason::NotPresent)
    }

    fn on_atomic_ack(
        &mut self,
        now: u64,
        pkt: &Packet<'_>,
        req: &mut Requester,
        sq: &mut [SendWqe],
        mem: &mut impl MemAccess,
    ) -> RxOutcome {
        let p = pkt.hdr.bth.psn;
        if self.ack_through(now, p, req, sq).is_err() || p != self.una {
            self.retry(now, Retry::Nak, req, sq);
            return RxOutcome::dropped(DropReason::OutOfSequence);
        }
        let idx = self.una_idx;
        let Some(w) = wqe(sq, idx).copied() else {
            return RxOutcome::dropped(DropReason::QpError);
        };
        let (SendOp::Atomic { .. }, true, Some(ack)) = (
            w.wr.op,
            w.started && w.first_psn == p,
            pkt.hdr.atomic_ack_eth,
        ) else {
            return self.bad_response(req, sq);
        };
        let slot = slot_of(idx, sq.len()) as u32;
        let placed = match mem.place_response(slot, 0, &ack.orig.to_ne_bytes()) {
            Err(AccessError::NotPresent) => return self.sink_missing(now, req, sq),
            r => r == Ok(true),
        };
        self.complete(req, sq);
        self.progressed(now, req, sq);
        RxOutcome {
            place: (!placed).then_some(Place::AtomicResult {
                slot,
                value: ack.orig,
            }),
            ..RxOutcome::default()
        }
    }

    /// Completes, in order, every WQE whose PSNs all precede `upto` and
    /// moves `una` up to `upto`. Stops at a READ/atomic without its data.
    fn ack_through(
        &mut self,
        now: u64,
        upto: Psn,
        req: &mut Requester,
        sq: &mut [SendWqe],
    ) -> Result<(), ImpliedNak> {
        let (start, start_idx) = (self.una, self.una_idx);
        let mut result = Ok(());
        while self.una_idx != req.tail {
            let Some(w) = wqe(sq, self.una_idx).copied() else {
                break;
            };
            if !w.started {
                break;
            }
            if !w.last_psn.is_before(upto) {
                // `upto` lies inside this WQE.
                if upto.is_after(self.una) {
                    if w.wr.op.needs_response() {
                        result = Err(ImpliedNak);
                    } else {
                        self.una = upto;
                    }
                }
                break;
            }
            if w.wr.op.needs_response() {
                result = Err(ImpliedNak);
                break;
            }
            self.complete(req, sq);
        }
        if self.una != start {
            self.progressed(now, req, sq);
        } else if self.una_idx != start_idx {
            // Only local WQEs (no PSN) were retired.
            self.catch_up(req, sq);
        }
        result
    }

    /// A late ACK covered WQEs that were rewound but not resent yet: the
    /// requester resumes after them. Also when they were only local WQEs,
    /// which leave `una` where it was: a requester left at a retired index
    /// would read its slot, which a new request may have taken.
    fn catch_up(&self, req: &mut Requester, sq: &[SendWqe]) {
        let passed = self.una_idx.wrapping_sub(self.head) > req.cur.wrapping_sub(self.head);
        if self.una.is_after(req.psn) || passed {
            req.seek(self.una_idx, self.una, sq);
        }
    }

    /// Marks WQE `una_idx` successfully done and moves past it.
    fn complete(&mut self, req: &mut Requester, sq: &mut [SendWqe]) {
        let idx = self.una_idx;
        if let Some(w) = wqe_mut(sq, idx) {
            w.status = Some(WcStatus::Success);
            self.una = w.last_psn.next();
            // Only WQEs before the requester's position are counted in
            // `rd_atomic` (after a rewind, later ones are not).
            let counted = idx.wrapping_sub(self.head) < req.cur.wrapping_sub(self.head);
            if w.wr.op.needs_response() && counted {
                req.rd_atomic = req.rd_atomic.saturating_sub(1);
            }
        }
        self.una_idx = idx.wrapping_add(1);
    }

    /// Bookkeeping after `una` advanced.
    fn progressed(&mut self, now: u64, req: &mut Requester, sq: &mut [SendWqe]) {
        self.retry_left = self.cfg.retry_cnt;
        self.rnr_left = self.cfg.rnr_retry;
        self.rewound_at = None;
        self.catch_up(req, sq);
        self.rto = if self.una != req.psn {
            ack_timeout_ns(self.cfg.timeout).map(|t| now.saturating_add(t))
        } else {
            None
        };
        self.fail_halted(req, sq);
    }

    fn retry(&mut self, now: u64, why: Retry, req: &mut Requester, sq: &mut [SendWqe]) {
        if self.error || self.una_idx == req.tail {
            return;
        }
        if why == Retry::Nak && self.rewound_at == Some(self.una) {
            // The responder is alive, still sending what it began before it saw the
            // repeated request: the ACK timer starts again.
            if self.rto.is_some() {
                self.rto = ack_timeout_ns(self.cfg.timeout).map(|t| now.saturating_add(t));
            }
            return;
        }
        if self.retry_left == 0 {
            self.fail(WcStatus::RetryExcErr, req, sq);
            return;
        }
        self.retry_left -= 1;
        self.stats.retries = self.stats.retries.saturating_add(1);
        self.rewind(req, sq);
    }

    fn rnr(&mut self, now: u64, timer: u8, req: &mut Requester, sq: &mut [SendWqe]) {
        if self.rnr_until.is_some() || self.una_idx == req.tail {
            return;
        }
        if self.rnr_left == 0 {
            self.fail(WcStatus::RnrRetryExcErr, req, sq);
            return;
        }
        if self.cfg.rnr_retry != RNR_RETRY_INFINITE {
            self.rnr_left -= 1;
        }
        self.rnr_until = Some(now.saturating_add(rnr_timer_ns(timer)));
        self.rewind(req, sq);
    }

    fn rewind(&mut self, req: &mut Requester, sq: &[SendWqe]) {
        self.rewound_at = Some(self.una);
        req.seek(self.una_idx, self.una, sq);
        self.rto = None;
    }

    fn bad_response(&mut self, req: &Requester, sq: &mut [SendWqe]) -> RxOutcome {
        self.fail(WcStatus::BadRespErr, req, sq);
        RxOutcome::dropped(DropReason::BadResponse)
    }

    /// Completes WQE `una_idx` with `status` and enters the error state.
    /// Local WQEs there carry no error of their own: those that were passed
    /// with every earlier WQE acknowledged complete successfully (as
    /// `pass_local` would have done at the next poll, also after a rewind
    /// moved the requester back onto them) and `status` goes to the first
    /// other WQE; a local WQE not passed yet is flushed with everything
    /// after it (none of which was sent).
    fn fail(&mut self, status: WcStatus, req: &Requester, sq: &mut [SendWqe]) {
        let mut idx = self.una_idx;
        while idx != req.tail {
            match wqe_mut(sq, idx) {
                Some(w) if w.wr.op == SendOp::Local => {
                    if !(self.cfg.transport == Transport::Rc
                        && w.started
                        && w.first_psn == self.una)
                    {
                        // Not passed: nothing after it was sent; it and
                        // everything after it are flushed.
                        break;
                    }
                    w.status = Some(WcStatus::Success);
                    idx = idx.wrapping_add(1);
                }
                Some(w) => {
                    w.status = Some(status);
                    break;
                }
                None => break,
            }
        }
        self.set_error();
    }
}
