// SPDX-License-Identifier: GPL-2.0
//! One path of a MetaRoCE connection (`transport.rst`, sections 4–6): the
//! sender's per-path sequence space with its 256 transmission slots, RTT
//! estimate, window and loss detection from SACKs, and the receiver's
//! per-path SACK state.

use super::cc::{Aimd, SavedWindow};
use super::mrc_wire::AckPkt;
use super::offload::CongestionEngine;
use super::sack::{bit_of, highest_bit, seq_diff, SeqWindow};

/// Path sequence numbers a path may have outstanding (the SACK span).
pub const PATH_WINDOW: u32 = 256;
/// RTOs in a row after which a path is FAILED.
pub const FAIL_AFTER_RTO: u8 = 3;
/// Losses within one epoch that make a path repath.
pub const REPATH_LOSS: u16 = 16;
/// Packets per loss-counting epoch.
pub const REPATH_EPOCH: u16 = 64;
/// Largest RTO backoff shift.
const MAX_BACKOFF: u8 = 10;

/// RTT estimate in nanoseconds (RFC 6298 arithmetic in integers).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Rtt {
    srtt: u64,
    rttvar: u64,
    min: u64,
    samples: u64,
    sum: u64,
}

impl Rtt {
    /// No sample yet.
    pub const NONE: Rtt = Rtt {
        srtt: 0,
        rttvar: 0,
        min: 0,
        samples: 0,
        sum: 0,
    };

    /// Adds a sample.
    pub fn sample(&mut self, rtt: u64) {
        let rtt = rtt.max(1);
        if self.samples == 0 || self.srtt == 0 {
            self.srtt = rtt;
            self.rttvar = rtt / 2;
        } else {
            let err = self.srtt.abs_diff(rtt);
            // rttvar = 3/4 rttvar + 1/4 |err|; srtt = 7/8 srtt + 1/8 rtt.
            self.rttvar = (self.rttvar - self.rttvar / 4).saturating_add(err / 4);
            self.srtt = (self.srtt - self.srtt / 8).saturating_add(rtt / 8);
        }
        self.min = if self.min == 0 {
            rtt
        } else {
            self.min.min(rtt)
        };
        self.samples = self.samples.saturating_add(1);
        self.sum = self.sum.saturating_add(rtt);
    }

    /// Smoothed RTT (0 before the first sample).
    pub const fn srtt(&self) -> u64 {
        self.srtt
    }

    /// Smallest sample (0 before the first).
    pub const fn min(&self) -> u64 {
        self.min
    }

    /// Mean of all samples (0 before the first).
    pub fn avg(&self) -> u64 {
        self.sum.checked_div(self.samples).unwrap_or(0)
    }

    /// `srtt + max(4 rttvar, 1 us)` clamped to `[min, max]`; `init` before
    /// the first sample.
    pub fn rto(&self, init: u64, min: u64, max: u64) -> u64 {
        if self.srtt == 0 {
            return init.clamp(min, max.max(min));
        }
        let var = self.rttvar.saturating_mul(4).max(1000);
        self.srtt.saturating_add(var).clamp(min, max.max(min))
    }
}

/// Path states (`transport.rst`, section 6.1).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PathState {
    /// Carries data within its window.
    Active,
    /// After an RTO, until an acknowledgment.
    Recovering,
    /// Several RTOs in a row: one packet at a time.
    Failed,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum SlotState {
    InFlight,
    Acked,
    /// Lost by a SACK gap: final.
    Lost,
    /// Declared lost by an RTO: an ACK may still prove it arrived.
    RtoLost,
}

/// An RTO episode that may still prove spurious (`transport.rst`, section
/// 5.5): one or more RTOs whose transmissions may still be acknowledged.
#[derive(Clone, Copy, Debug)]
struct Undo {
    /// Base at the episode's first RTO: PathFloor stays here while the
    /// episode lasts, so that the receiver's CumSeq only covers what it
    /// received in `lo .. hi`.
    lo: u32,
    /// Base at the episode's latest RTO.
    last: u32,
    /// Next at the episode's latest RTO.
    hi: u32,
    /// The window before the first of `rtos` RTOs; `None` once restored.
    before: Option<SavedWindow>,
    /// RTOs since `before` was taken.
    rtos: u8,
    /// A real loss was found since `before` was taken: no restore.
    real_loss: bool,
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    dsn: u32,
    len: u32,
    sent_at: u64,
    state: SlotState,
    /// An RTO declared it lost (undone since if in flight): no RTT sample.
    rto: bool,
}

const EMPTY: Slot = Slot {
    dsn: 0,
    len: 0,
    sent_at: 0,
    state: SlotState::Acked,
    rto: false,
};

/// What happened to a transmission, reported by [`TxPath::on_ack`] and
/// [`TxPath::on_timeout`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PathEvent {
    /// The transmission of `dsn` at this `seq` was received.
    Acked {
        /// Data sequence number.
        dsn: u32,
        /// Path sequence number of the transmission.
        seq: u32,
        /// Payload bytes.
        len: u32,
    },
    /// The transmission of `dsn` at this `seq` is lost.
    Lost {
        /// Data sequence number.
        dsn: u32,
        /// Path sequence number of the transmission.
        seq: u32,
    },
    /// The transmission of `dsn` at this `seq`, declared lost by an RTO
    /// that proved spurious, is in flight again (section 5.5).
    InFlight {
        /// Data sequence number.
        dsn: u32,
        /// Path sequence number of the transmission.
        seq: u32,
    },
}

/// Tail-loss probe state of a path.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Probe {
    /// Armed while packets are in flight.
    Armed,
    /// The probe timeout fired: one packet may be sent beyond the windows.
    Due,
    /// A probe was sent; re-armed by the next acknowledgment.
    Sent,
}

/// Per-path counters.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct PathStats {
    /// Transmissions.
    pub sent: u64,
    /// Payload bytes transmitted.
    pub bytes: u64,
    /// Retransmissions carried.
    pub retransmits: u64,
    /// Transmissions found lost by a SACK gap.
    pub sack_losses: u64,
    /// Transmissions found lost by an RTO.
    pub rto_losses: u64,
    /// RTOs.
    pub timeouts: u64,
    /// ECN echo increases seen.
    pub ecn_echoes: u64,
    /// Source port changes.
    pub repaths: u64,
    /// RTOs undone as spurious (section 5.5).
    pub spurious_rtos: u64,
    /// ACKs processed / dropped as inconsistent.
    pub acks: u64,
    /// ACKs whose CumSeq was beyond what the path sent.
    pub bad_acks: u64,
}

impl PathStats {
    /// All counters zero.
    pub const ZERO: PathStats = PathStats {
        sent: 0,
        bytes: 0,
        retransmits: 0,
        sack_losses: 0,
        rto_losses: 0,
        timeouts: 0,
        ecn_echoes: 0,
        repaths: 0,
        spurious_rtos: 0,
        acks: 0,
        bad_acks: 0,
    };
}

/// The sender's side of one path, its window kept by congestion engine `C`
/// (`super::offload`; the software AIMD by default).
#[derive(Clone, Debug)]
pub struct TxPath<C = Aimd> {
    /// State.
    pub state: PathState,
    /// Current UDP source port.
    pub port: u16,
    /// Congestion window.
    pub cc: C,
    /// RTT estimate.
    pub rtt: Rtt,
    /// Counters.
    pub stats: PathStats,
    base: u32,
    next: u32,
    slots: [Slot; PATH_WINDOW as usize],
    inflight_bytes: u32,
    inflight_pkts: u32,
    backoff: u8,
    rto_in_row: u8,
    last_ce: u32,
    last_send: u64,
    probe: Probe,
    epoch_sent: u16,
    epoch_lost: u16,
    new_route: bool,
    undo: Option<Undo>,
    /// The RTO timer runs from here at the earliest (the last undo).
    rto_from: u64,
    /// Newest send time of a transmission acknowledged in flight.
    acked_sent: u64,
}

fn slot_index(seq: u32) -> usize {
    (seq % PATH_WINDOW) as usize
}

impl<C: CongestionEngine> TxPath<C> {
    /// A path on UDP source `port` with window `cc`.
    pub const fn new(port: u16, cc: C) -> Self {
        TxPath {
            state: PathState::Active,
            port,
            cc,
            rtt: Rtt::NONE,
            stats: PathStats::ZERO,
            base: 0,
            next: 0,
            slots: [EMPTY; PATH_WINDOW as usize],
            inflight_bytes: 0,
            inflight_pkts: 0,
            backoff: 0,
            rto_in_row: 0,
            last_ce: 0,
            last_send: 0,
            probe: Probe::Armed,
            epoch_sent: 0,
            epoch_lost: 0,
            new_route: false,
            undo: None,
            rto_from: 0,
            acked_sent: 0,
        }
    }

    /// Newest send time of a transmission an ACK acknowledged while it was
    /// in flight (0: none yet).
    pub const fn acked_sent(&self) -> u64 {
        self.acked_sent
    }

    /// True from a repath until the first RTT sample on the new route.
    pub const fn new_route(&self) -> bool {
        self.new_route
    }

    /// PathFloor for the next DATA packet: the oldest unresolved sequence
    /// number, or the first one of an RTO episode that may still prove
    /// spurious (section 5.5).
    pub const fn floor(&self) -> u32 {
        match self.undo {
            Some(u) => u.lo,
            None => self.base,
        }
    }

    /// Next sequence number.
    pub const fn next_seq(&self) -> u32 {
        self.next
    }

    /// Payload bytes in flight.
    pub const fn inflight_bytes(&self) -> u32 {
        self.inflight_bytes
    }

    /// Packets in flight.
    pub const fn inflight_pkts(&self) -> u32 {
        self.inflight_pkts
    }

    /// True if the probe timeout fired and no probe was sent yet.
    pub fn probe_due(&self) -> bool {
        self.probe == Probe::Due && self.next.wrapping_sub(self.base) < PATH_WINDOW
    }

    /// When the probe timeout fires: `max(2 srtt, pto_min)` after the
    /// newest transmission, while packets are in flight and an RTT sample
    /// exists.
    pub fn probe_deadline(&self, pto_min: u64) -> Option<u64> {
        if self.inflight_pkts == 0 || self.probe == Probe::Due || self.rtt.srtt() == 0 {
            return None;
        }
        let pto = self.rtt.srtt().saturating_mul(2).max(pto_min);
        Some(self.last_send.saturating_add(pto))
    }

    /// The probe timeout fired at `now` (if it is due).
    pub fn on_probe_timer(&mut self, now: u64, pto_min: u64) {
        if self.probe_deadline(pto_min).is_some_and(|t| t <= now) {
            self.probe = Probe::Due;
        }
    }

    /// Bytes the window still allows (0 if none; a FAILED path allows one
    /// packet when empty).
    pub fn room(&self) -> u32 {
        if self.next.wrapping_sub(self.base) >= PATH_WINDOW {
            return 0;
        }
        match self.state {
            PathState::Failed if self.inflight_pkts > 0 => 0,
            PathState::Failed => u32::MAX,
            _ if self.inflight_pkts == 0 => self.cc.cwnd().max(1),
            _ => self.cc.cwnd().saturating_sub(self.inflight_bytes),
        }
    }

    /// True if a packet of `len` bytes may be sent now.
    pub fn can_send(&self, len: u32) -> bool {
        let room = self.room();
        room > 0 && (self.inflight_pkts == 0 || room >= len)
    }

    /// Records a transmission of `dsn` and returns its sequence number.
    pub fn on_send(&mut self, dsn: u32, len: u32, now: u64, retx: bool) -> u32 {
        let seq = self.next;
        if let Some(s) = self.slots.get_mut(slot_index(seq)) {
            *s = Slot {
                dsn,
                len,
                sent_at: now,
                state: SlotState::InFlight,
                rto: false,
            };
        }
        self.next = seq.wrapping_add(1);
        // The next send would reuse the slot of the episode's first seq and
        // carry a PathFloor 256 behind it: the episode ends unproven.
        if self
            .undo
            .is_some_and(|u| self.next.wrapping_sub(u.lo) >= PATH_WINDOW)
        {
            self.undo = None;
        }
        self.inflight_bytes = self.inflight_bytes.saturating_add(len);
        self.inflight_pkts = self.inflight_pkts.saturating_add(1);
        self.stats.sent = self.stats.sent.saturating_add(1);
        self.stats.bytes = self.stats.bytes.saturating_add(u64::from(len));
        if retx {
            self.stats.retransmits = self.stats.retransmits.saturating_add(1);
        }
        self.epoch_sent = self.epoch_sent.saturating_add(1);
        self.last_send = now;
        if self.probe == Probe::Due {
            self.probe = Probe::Sent;
        }
        seq
    }

    fn in_window(&self, seq: u32) -> bool {
        seq.wrapping_sub(self.base) < self.next.wrapping_sub(self.base)
    }

    fn resolve(&mut self, seq: u32, state: SlotState) -> Option<Slot> {
        if !self.in_window(seq) {
            return None;
        }
        let slot = self.slots.get_mut(slot_index(seq))?;
        if slot.state != SlotState::InFlight {
            return None;
        }
        slot.state = state;
        let s = *slot;
        self.inflight_bytes = self.inflight_bytes.saturating_sub(s.len);
        self.inflight_pkts = self.inflight_pkts.saturating_sub(1);
        Some(s)
    }

    fn advance_base(&mut self) {
        while self.base != self.next {
            match self.slots.get(slot_index(self.base)) {
                Some(s) if s.state == SlotState::InFlight => break,
                _ => self.base = self.base.wrapping_add(1),
            }
        }
    }

    /// Processes an ACK for this path at `now`; reports every transmission
    /// acknowledged or found lost through `ev`. Returns `Some(true)` if the
    /// ACK echoed new ECN marks, `None` if it was inconsistent (counted).
    pub fn on_ack(
        &mut self,
        ack: &AckPkt,
        now: u64,
        mut ev: impl FnMut(PathEvent),
    ) -> Option<bool> {
        // CumSeq may not be beyond what was sent.
        if seq_diff(ack.cum, self.next) > 0 {
            self.stats.bad_acks = self.stats.bad_acks.saturating_add(1);
            return None;
        }
        self.stats.acks = self.stats.acks.saturating_add(1);
        // RTT from the triggering transmission (never reused: no Karn rule).
        if self.in_window(ack.ack_seq) {
            if let Some(s) = self.slots.get(slot_index(ack.ack_seq)) {
                if s.state == SlotState::InFlight && !s.rto {
                    self.rtt.sample(now.saturating_sub(s.sent_at));
                    self.new_route = false;
                }
            }
        }
        let mut any = false;
        // Each outstanding seq is compared on its own: in the 2^31 window,
        // "before" is not monotonic over base .. next for a CumSeq or a
        // newest seq 2^31 away (a forged ACK), so a scan may not stop early.
        let outstanding = self.next.wrapping_sub(self.base);
        // Cumulative part: every seq before CumSeq.
        for off in 0..outstanding {
            let seq = self.base.wrapping_add(off);
            if seq_diff(seq, ack.cum) >= 0 {
                continue;
            }
            if let Some(s) = self.resolve(seq, SlotState::Acked) {
                any = true;
                self.acked_sent = self.acked_sent.max(s.sent_at);
                self.cc.on_ack(now, s.len);
                ev(PathEvent::Acked {
                    dsn: s.dsn,
                    seq,
                    len: s.len,
                });
            }
        }
        // Selective part.
        let cum1 = ack.cum.wrapping_add(1);
        for i in 0..PATH_WINDOW {
            if bit_of(&ack.sack, i) {
                let seq = cum1.wrapping_add(i);
                if let Some(s) = self.resolve(seq, SlotState::Acked) {
                    any = true;
                    self.acked_sent = self.acked_sent.max(s.sent_at);
                    self.cc.on_ack(now, s.len);
                    ev(PathEvent::Acked {
                        dsn: s.dsn,
                        seq,
                        len: s.len,
                    });
                }
            }
        }
        // Newest sequence number the receiver has seen on this path.
        let mut newest = ack.cum.wrapping_sub(1);
        if let Some(h) = highest_bit(&ack.sack) {
            newest = cum1.wrapping_add(h);
        }
        if self.in_window(ack.ack_seq) && seq_diff(ack.ack_seq, newest) > 0 {
            newest = ack.ack_seq;
        }
        // A gap before it is loss (duplicate threshold 1).
        for off in 0..outstanding {
            let seq = self.base.wrapping_add(off);
            if seq_diff(seq, newest) >= 0 {
                continue;
            }
            if let Some(s) = self.resolve(seq, SlotState::Lost) {
                self.count_loss(false);
                ev(PathEvent::Lost { dsn: s.dsn, seq });
            }
        }
        self.advance_base();
        if self.spurious_check(ack, now, &mut ev) {
            any = true;
        }
        if any {
            self.probe = Probe::Armed;
            self.backoff = 0;
            self.rto_in_row = 0;
            self.state = PathState::Active;
        }
        let ce = seq_diff(ack.ce_count, self.last_ce) > 0;
        if ce {
            self.last_ce = ack.ce_count;
            self.stats.ecn_echoes = self.stats.ecn_echoes.saturating_add(1);
        }
        Some(ce)
    }

    /// Spurious-RTO detection (section 5.5): every transmission an RTO of
    /// the open episode declared lost that `ack` covers (before CumSeq or
    /// its Sack bit set) arrived and is reported acked; one not covered
    /// before the newest Sack bit is really lost (a gap). If the ACK proves
    /// a transmission of the episode's latest RTO and no real loss was
    /// found since the window was saved, the RTOs are undone: window
    /// restored, backoff and RTOs in a row reset, state ACTIVE, and the
    /// episode's transmissions not proven yet are in flight again, their
    /// RTO timer running from `now`. Returns true if the ACK proved
    /// anything.
    fn spurious_check(&mut self, ack: &AckPkt, now: u64, ev: &mut impl FnMut(PathEvent)) -> bool {
        let Some(mut u) = self.undo else {
            return false;
        };
        let cum1 = ack.cum.wrapping_add(1);
        let newest = highest_bit(&ack.sack).map(|h| cum1.wrapping_add(h));
        let mut proved = false;
        let mut proved_last = false;
        let mut left = false;
        for off in 0..u.hi.wrapping_sub(u.lo).min(PATH_WINDOW) {
            let seq = u.lo.wrapping_add(off);
            let Some(slot) = self.slots.get_mut(slot_index(seq)) else {
                continue;
            };
            if slot.state != SlotState::RtoLost {
                continue;
            }
            let d = seq_diff(seq, cum1);
            let covered =
                seq_diff(seq, ack.cum) < 0 || (d >= 0 && bit_of(&ack.sack, d.unsigned_abs()));
            if covered {
                slot.state = SlotState::Acked;
                proved = true;
                proved_last |= seq_diff(seq, u.last) >= 0;
                ev(PathEvent::Acked {
                    dsn: slot.dsn,
                    seq,
                    len: slot.len,
                });
            } else if newest.is_some_and(|n| seq_diff(seq, n) < 0) {
                // A gap: the receiver got a later one. Lost for good (it was
                // counted as an RTO loss already).
                slot.state = SlotState::Lost;
                u.real_loss = true;
            } else {
                left = true;
            }
        }
        if proved_last && !u.real_loss {
            if let Some(before) = u.before.take() {
                self.cc.undo_timeout(before);
                let n = u64::from(u.rtos);
                self.stats.spurious_rtos = self.stats.spurious_rtos.saturating_add(n);
                self.backoff = 0;
                self.rto_in_row = 0;
                self.state = PathState::Active;
                if left {
                    self.unlose(u.lo, u.hi, now, ev);
                    left = false;
                }
            }
        }
        // Nothing left to prove: PathFloor moves on.
        self.undo = if left { Some(u) } else { None };
        proved
    }

    /// Every transmission in `lo .. hi` still declared lost by an RTO is in
    /// flight again (reported); the RTO timer restarts at `now`.
    fn unlose(&mut self, lo: u32, hi: u32, now: u64, ev: &mut impl FnMut(PathEvent)) {
        let mut oldest = None;
        for off in 0..hi.wrapping_sub(lo).min(PATH_WINDOW) {
            let seq = lo.wrapping_add(off);
            let Some(slot) = self.slots.get_mut(slot_index(seq)) else {
                continue;
            };
            if slot.state != SlotState::RtoLost {
                continue;
            }
            slot.state = SlotState::InFlight;
            self.inflight_bytes = self.inflight_bytes.saturating_add(slot.len);
            self.inflight_pkts = self.inflight_pkts.saturating_add(1);
            oldest.get_or_insert(seq);
            ev(PathEvent::InFlight { dsn: slot.dsn, seq });
        }
        if let Some(seq) = oldest {
            if seq_diff(seq, self.base) < 0 {
                self.base = seq;
            }
        }
        self.rto_from = now;
    }

    fn count_loss(&mut self, rto: bool) {
        if rto {
            self.stats.rto_losses = self.stats.rto_losses.saturating_add(1);
        } else {
            self.stats.sack_losses = self.stats.sack_losses.saturating_add(1);
            // A real loss: the open RTO episode is not undone.
            if let Some(u) = self.undo.as_mut() {
                u.real_loss = true;
            }
        }
        self.epoch_lost = self.epoch_lost.saturating_add(1);
    }

    /// True as soon as [`REPATH_LOSS`] losses were counted in the current
    /// epoch of at most [`REPATH_EPOCH`] packets sent; starts the next
    /// epoch then, or when the current one is full.
    pub fn loss_epoch_says_repath(&mut self) -> bool {
        let bad = self.epoch_lost >= REPATH_LOSS;
        if bad || self.epoch_sent >= REPATH_EPOCH {
            self.epoch_sent = 0;
            self.epoch_lost = 0;
        }
        bad
    }

    /// When the oldest transmission times out, if any is in flight.
    pub fn deadline(&self, init: u64, min: u64, max: u64) -> Option<u64> {
        if self.inflight_pkts == 0 {
            return None;
        }
        let s = self.slots.get(slot_index(self.base))?;
        let rto = self.rtt.rto(init, min, max) << self.backoff.min(MAX_BACKOFF);
        let from = s.sent_at.max(self.rto_from);
        Some(from.saturating_add(rto.min(max.max(min))))
    }

    /// The retransmission timer fired: every transmission in flight is
    /// lost, the window restarts and the path's state steps towards
    /// FAILED. The caller repaths.
    pub fn on_timeout(&mut self, mut ev: impl FnMut(PathEvent)) {
        let (base, saved) = (self.base, self.cc.saved());
        let mut seq = self.base;
        let mut lost = false;
        while self.in_window(seq) {
            if let Some(s) = self.resolve(seq, SlotState::RtoLost) {
                if let Some(slot) = self.slots.get_mut(slot_index(seq)) {
                    slot.rto = true;
                }
                self.count_loss(true);
                lost = true;
                ev(PathEvent::Lost { dsn: s.dsn, seq });
            }
            seq = seq.wrapping_add(1);
        }
        if lost {
            // Open an episode, or extend the open one (PathFloor stays at
            // its start); the window kept is the one before the first RTO
            // since the last restore or real loss.
            self.undo = Some(match self.undo {
                Some(u) if u.before.is_some() && !u.real_loss => Undo {
                    last: base,
                    hi: self.next,
                    rtos: u.rtos.saturating_add(1),
                    ..u
                },
                Some(u) => Undo {
                    last: base,
                    hi: self.next,
                    before: Some(saved),
                    rtos: 1,
                    real_loss: false,
                    ..u
                },
                None => Undo {
                    lo: base,
                    last: base,
                    hi: self.next,
                    before: Some(saved),
                    rtos: 1,
                    real_loss: false,
                },
            });
        }
        self.advance_base();
        self.stats.timeouts = self.stats.timeouts.saturating_add(1);
        self.probe = Probe::Armed;
        self.cc.on_timeout();
        self.backoff = self.backoff.saturating_add(1).min(MAX_BACKOFF);
        self.rto_in_row = self.rto_in_row.saturating_add(1);
        self.state = if self.rto_in_row >= FAIL_AFTER_RTO {
            PathState::Failed
        } else {
            PathState::Recovering
        };
    }

    /// Moves the path to a new UDP source port (a new route). The RTT
    /// estimate is kept as the best guess for the new route;
    /// [`Self::new_route`] says so until the first sample there.
    pub fn repath(&mut self, port: u16) {
        self.port = port;
        self.new_route = true;
        self.stats.repaths = self.stats.repaths.saturating_add(1);
        self.epoch_sent = 0;
        self.epoch_lost = 0;
    }
}

/// The receiver's side of one path.
#[derive(Clone, Copy, Debug, Default)]
pub struct RxPath {
    /// Received path sequence numbers.
    pub win: SeqWindow<4>,
    /// CE-marked DATA packets received, wrapping.
    pub ce_count: u32,
    /// An ACK is owed.
    pub ack_pending: bool,
    /// Newest sequence number to acknowledge.
    pub ack_seq: u32,
    /// UDP source port of the newest DATA packet (the ACK's source port).
    pub port: u16,
}

impl RxPath {
    /// Nothing received.
    pub const EMPTY: RxPath = RxPath {
        win: SeqWindow::new(0),
        ce_count: 0,
        ack_pending: false,
        ack_seq: 0,
        port: 0,
    };

    /// Builds the ACK owed on `path` for connection `conn`.
    pub fn ack(&self, path: u8, conn: u32, rate_hint_kbps: u32) -> AckPkt {
        AckPkt {
            path,
            conn,
            cum: self.win.cum(),
            ack_seq: self.ack_seq,
            rate_hint_kbps,
            ce_count: self.ce_count,
            sack: *self.win.bits(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::cc::MD_ECN_PATH;
    use super::*;

    fn path() -> TxPath {
        TxPath::new(50000, Aimd::new(1000, 4, 256, MD_ECN_PATH))
    }

    fn collect(p: &mut TxPath, ack: &AckPkt, now: u64) -> [u32; 2] {
        let mut n = [0u32; 2];
        p.on_ack(ack, now, |e| match e {
            PathEvent::Acked { .. } => n[0] += 1,
            PathEvent::Lost { .. } => n[1] += 1,
            PathEvent::InFlight { .. } => panic!("undo"),
        });
        n
    }

    #[test]
    fn sack_gap_is_loss_and_rtt() {
        let mut p = path();
        for d in 0..8 {
            assert_eq!(p.on_send(100 + d, 1000, 1000, false), d);
        }
        assert_eq!(p.inflight_bytes(), 8000);
        // Receiver got 0, 1, then 3 and 5 (2 and 4 missing): cum 2.
        let mut rx = RxPath::default();
        for s in [0, 1, 3, 5] {
            rx.win.mark(s);
        }
        rx.ack_seq = 5;
        let ack = rx.ack(0, 1, 0);
        assert_eq!(ack.cum, 2);
        assert_eq!(collect(&mut p, &ack, 11_000), [4, 2]);
        assert_eq!(p.rtt.srtt(), 10_000);
        assert_eq!(p.floor(), 6);
        assert_eq!(p.inflight_pkts(), 2);
        assert_eq!(p.stats.sack_losses, 2);
        // The same ACK again changes nothing.
        assert_eq!(collect(&mut p, &ack, 12_000), [0, 0]);
        // An ACK claiming more than was sent is refused.
        let bogus = AckPkt { cum: 9, ..ack };
        assert_eq!(p.on_ack(&bogus, 0, |_| {}), None);
    }

    #[test]
    fn window_and_timeout() {
        let mut p = path();
        let mut n = 0;
        while p.can_send(1000) {
            p.on_send(n, 1000, 0, false);
            n += 1;
        }
        assert_eq!(n, 4);
        let d = p.deadline(1_000_000, 50_000, 100_000_000).unwrap();
        assert_eq!(d, 1_000_000);
        let mut lost = 0;
        p.on_timeout(|_| lost += 1);
        assert_eq!(
            (lost, p.state, p.cc.cwnd()),
            (4, PathState::Recovering, 1000)
        );
        assert_eq!(p.deadline(1_000_000, 50_000, 100_000_000), None);
        p.on_send(9, 1000, 0, true);
        assert_eq!(p.deadline(1_000_000, 50_000, 100_000_000), Some(2_000_000));
        p.on_timeout(|_| {});
        p.on_timeout(|_| {});
        assert_eq!(p.state, PathState::Failed);
        // FAILED: one packet at a time.
        assert!(p.can_send(1000));
        p.on_send(10, 1000, 0, true);
        assert!(!p.can_send(1000));
    }

    /// Four transmissions 2..=5 in flight (0 and 1 acknowledged at 10 us,
    /// window 6000), then an RTO at 100 us: the window collapses.
    fn timed_out() -> (TxPath, RxPath) {
        let mut p = path();
        for d in 0..4 {
            p.on_send(100 + d, 1000, 0, false);
        }
        let mut rx = RxPath::default();
        rx.win.mark(0);
        rx.win.mark(1);
        rx.ack_seq = 1;
        assert_eq!(collect(&mut p, &rx.ack(0, 1, 0), 10_000), [2, 0]);
        for d in 4..6 {
            p.on_send(100 + d, 1000, 20_000, false);
        }
        let mut lost = 0;
        p.on_timeout(|e| {
            assert!(matches!(e, PathEvent::Lost { .. }));
            lost += 1;
        });
        assert_eq!(
            (lost, p.cc.cwnd(), p.state),
            (4, 1000, PathState::Recovering)
        );
        // PathFloor stays at the first seq the RTO declared lost.
        assert_eq!((p.floor(), p.inflight_pkts()), (2, 0));
        (p, rx)
    }

    fn events(p: &mut TxPath, ack: &AckPkt, now: u64) -> [u32; 3] {
        let mut n = [0u32; 3];
        p.on_ack(ack, now, |e| match e {
            PathEvent::Acked { .. } => n[0] += 1,
            PathEvent::Lost { .. } => n[1] += 1,
            PathEvent::InFlight { .. } => n[2] += 1,
        });
        n
    }

    #[test]
    fn spurious_rto_is_undone() {
        let (mut p, mut rx) = timed_out();
        let srtt = p.rtt.srtt();
        // A packet after the RTO still carries the held floor.
        assert_eq!(p.floor(), 2);
        assert_eq!(p.on_send(106, 1000, 200_000, false), 6);
        // The late ACK: everything up to 5 arrived.
        for s in 2..6 {
            rx.win.mark(s);
        }
        rx.ack_seq = 5;
        assert_eq!(events(&mut p, &rx.ack(0, 1, 0), 300_000), [4, 0, 0]);
        assert_eq!(p.stats.spurious_rtos, 1);
        assert_eq!((p.cc.cwnd(), p.cc.ssthresh()), (6000, u32::MAX));
        assert_eq!(p.state, PathState::Active);
        // No RTT sample from a transmission the RTO declared lost.
        assert_eq!(p.rtt.srtt(), srtt);
        // The episode is over: PathFloor is the oldest in flight again.
        assert_eq!((p.floor(), p.inflight_pkts()), (6, 1));
        // The same ACK again changes nothing.
        assert_eq!(events(&mut p, &rx.ack(0, 1, 0), 300_000), [0, 0, 0]);
        assert_eq!(p.stats.spurious_rtos, 1);
    }

    #[test]
    fn undo_puts_unproven_transmissions_back_in_flight() {
        let (mut p, mut rx) = timed_out();
        // The late ACK proves 2 and 3; 4 and 5 may still be on their way.
        rx.win.mark(2);
        rx.win.mark(3);
        rx.ack_seq = 3;
        assert_eq!(events(&mut p, &rx.ack(0, 1, 0), 300_000), [2, 0, 2]);
        assert_eq!((p.stats.spurious_rtos, p.cc.cwnd()), (1, 6000));
        assert_eq!(
            (p.floor(), p.inflight_pkts(), p.inflight_bytes()),
            (4, 2, 2000)
        );
        // Their RTO runs from the undo, not from their send time.
        let d = p.deadline(1_000_000, 50_000, 100_000_000).unwrap();
        assert_eq!(d, 300_000 + p.rtt.rto(1_000_000, 50_000, 100_000_000));
        rx.win.mark(5);
        rx.ack_seq = 5;
        // 5 acknowledged, 4 lost (a SACK gap) as for any transmission.
        assert_eq!(events(&mut p, &rx.ack(0, 1, 0), 310_000), [1, 1, 0]);
        assert_eq!(p.stats.sack_losses, 1);
    }

    #[test]
    fn real_loss_is_not_undone() {
        // 3 never arrived: the late ACK shows a gap below 5.
        let (mut p, mut rx) = timed_out();
        for s in [2, 4, 5] {
            rx.win.mark(s);
        }
        rx.ack_seq = 5;
        assert_eq!(events(&mut p, &rx.ack(0, 1, 0), 300_000), [3, 0, 0]);
        assert_eq!((p.stats.spurious_rtos, p.cc.cwnd()), (0, 1000));
        // 3 stays lost, whatever comes later.
        assert_eq!(p.floor(), 6);
        rx.win.advance_to(6);
        assert_eq!(events(&mut p, &rx.ack(0, 1, 0), 310_000), [0, 0, 0]);
        assert_eq!((p.stats.spurious_rtos, p.cc.cwnd()), (0, 1000));
        // 2..=5 never arrived, 6 (sent after the RTO) did, with its
        // PathFloor: the receiver's CumSeq must not cover 2..=5 (it would
        // if PathFloor were Base, 6), so they are not taken as arrived.
        let (mut p, mut rx) = timed_out();
        let floor = p.floor();
        p.on_send(106, 1000, 200_000, false);
        rx.win.advance_to(floor);
        rx.win.mark(6);
        rx.ack_seq = 6;
        assert_eq!(events(&mut p, &rx.ack(0, 1, 0), 300_000), [1, 0, 0]);
        assert_eq!((p.stats.spurious_rtos, p.cc.cwnd()), (0, 2000));
        assert_eq!(p.floor(), 7);
        // A SACK-gap loss after the RTO forbids the undo as well: 6, sent
        // after it, is lost; 2..=5 and 7 arrived.
        let (mut p, mut rx) = timed_out();
        p.on_send(106, 1000, 200_000, false);
        p.on_send(107, 1000, 200_000, false);
        for s in [2, 3, 4, 5, 7] {
            rx.win.mark(s);
        }
        rx.ack_seq = 7;
        assert_eq!(events(&mut p, &rx.ack(0, 1, 0), 300_000), [5, 1, 0]);
        assert_eq!((p.stats.sack_losses, p.stats.spurious_rtos), (1, 0));
        // 7's bytes grew the collapsed window; nothing was restored.
        assert_eq!(p.cc.cwnd(), 2000);
    }

    #[test]
    fn unanswered_rtos_fail_the_path_and_the_floor_moves_on() {
        let (mut p, _) = timed_out();
        p.on_send(9, 1000, 0, true);
        p.on_timeout(|_| {});
        p.on_send(9, 1000, 0, true);
        p.on_timeout(|_| {});
        assert_eq!((p.state, p.stats.spurious_rtos), (PathState::Failed, 0));
        assert_eq!(p.floor(), 2);
        // The floor is held while the receiver can still take the next
        // seq above it (256), then it is the oldest in flight again (8).
        while p.next_seq() < 2 + PATH_WINDOW - 1 {
            p.on_send(0, 1, 0, false);
        }
        assert_eq!(p.floor(), 2);
        p.on_send(0, 1, 0, false);
        assert_eq!(p.floor(), 8);
    }

    #[test]
    fn loss_epoch_triggers_repath() {
        // 64 packets with 16 of them lost (every fourth): repath once.
        let mut p = TxPath::new(1, Aimd::new(1, 1000, 1000, MD_ECN_PATH));
        for round in 0..2u32 {
            for d in 0..64 {
                p.on_send(d, 1, 0, false);
            }
            let base = round * 64;
            let mut rx = RxPath {
                win: SeqWindow::new(base),
                ..RxPath::default()
            };
            let lose_every = if round == 0 { 4 } else { 5 };
            for s in 0..64 {
                if s % lose_every != 0 {
                    rx.win.mark(base + s);
                }
            }
            rx.ack_seq = base + 63;
            p.on_ack(&rx.ack(0, 1, 0), 10, |_| {});
            // Round 0 loses 16 of 64, round 1 only 13.
            assert_eq!(p.loss_epoch_says_repath(), round == 0, "round {round}");
        }
        p.repath(2);
        assert_eq!((p.port, p.stats.repaths), (2, 1));
    }

    #[test]
    fn acknowledged_bytes_grow_the_window() {
        let mut p = path();
        for d in 0..6 {
            p.on_send(d, 1000, 0, false);
        }
        // Cumulative part: 0 and 1 acknowledged, slow start 4000 -> 6000.
        let mut rx = RxPath::default();
        rx.win.mark(0);
        rx.win.mark(1);
        rx.ack_seq = 1;
        assert_eq!(collect(&mut p, &rx.ack(0, 1, 0), 10), [2, 0]);
        assert_eq!(p.cc.cwnd(), 6000);
        // Selective part: 3 acknowledged (+1000), 2 lost (no change).
        rx.win.mark(3);
        rx.ack_seq = 3;
        assert_eq!(collect(&mut p, &rx.ack(0, 1, 0), 20), [1, 1]);
        assert_eq!(p.cc.cwnd(), 7000);
        // Nothing new acknowledged: no growth.
        assert_eq!(collect(&mut p, &rx.ack(0, 1, 0), 30), [0, 0]);
        assert_eq!(p.cc.cwnd(), 7000);
        // After an RTO: 1 MSS, ssthresh 3500, slow start up to it, then
        // one MSS per window acknowledged.
        p.on_timeout(|_| {});
        assert_eq!((p.cc.cwnd(), p.cc.ssthresh()), (1000, 3500));
        for d in 0..8 {
            assert_eq!(p.on_send(d, 1000, 40, true), 6 + d);
        }
        for s in 6..14 {
            rx.win.mark(s);
        }
        rx.ack_seq = 13;
        assert_eq!(collect(&mut p, &rx.ack(0, 1, 0), 50), [8, 0]);
        // 2000, 3000, 3500 (ssthresh); then 4 x 1000 >= 3500: 4500.
        assert_eq!(p.cc.cwnd(), 4500);
    }

    #[test]
    fn loss_epoch_repaths_at_the_sixteenth_loss() {
        // 20 packets sent, the first 16 lost: repath without waiting for
        // the epoch's 64 packets; the next epoch starts empty.
        let mut p = TxPath::new(1, Aimd::new(1, 1000, 1000, MD_ECN_PATH));
        for d in 0..20 {
            p.on_send(d, 1, 0, false);
        }
        let mut rx = RxPath::default();
        rx.win.mark(16);
        rx.ack_seq = 16;
        assert_eq!(collect(&mut p, &rx.ack(0, 1, 0), 10), [1, 16]);
        assert!(p.loss_epoch_says_repath());
        assert!(!p.loss_epoch_says_repath());
        // 15 losses are not enough, neither in 64 packets.
        for d in 20..84 {
            p.on_send(d, 1, 20, false);
        }
        for s in 17..84 {
            if s % 4 != 0 || s > 76 {
                rx.win.mark(s);
            }
        }
        rx.ack_seq = 83;
        assert_eq!(collect(&mut p, &rx.ack(0, 1, 0), 30), [52, 15]);
        assert!(!p.loss_epoch_says_repath());
    }

    #[test]
    fn new_route_until_an_rtt_sample() {
        let mut p = path();
        assert!(!p.new_route());
        p.on_send(0, 1000, 0, false);
        p.repath(2);
        assert!(p.new_route());
        // An ACK without a sample (AckSeq not in flight) keeps it.
        let mut rx = RxPath {
            ack_seq: 7,
            ..RxPath::default()
        };
        assert_eq!(collect(&mut p, &rx.ack(0, 1, 0), 10), [0, 0]);
        assert!(p.new_route());
        rx.win.mark(0);
        rx.ack_seq = 0;
        assert_eq!(collect(&mut p, &rx.ack(0, 1, 0), 10), [1, 0]);
        assert!(!p.new_route());
        assert_eq!(p.rtt.srtt(), 10);
    }

    #[test]
    fn seq_window_limit() {
        let mut p = TxPath::new(1, Aimd::new(1, 1000, 1000, MD_ECN_PATH));
        for d in 0..PATH_WINDOW {
            assert!(p.can_send(1));
            p.on_send(d, 1, 0, false);
        }
        assert!(!p.can_send(1));
    }
}
