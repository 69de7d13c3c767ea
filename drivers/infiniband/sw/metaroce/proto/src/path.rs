// SPDX-License-Identifier: GPL-2.0
//! One path of a MetaRoCE connection (`transport.rst`, sections 4–6): the
//! sender's per-path sequence space, RTT estimate, window and loss detection
//! from SACKs, and the receiver's per-path SACK state. The path's 256
//! transmission slots ([`SlotWindow`]) are not part of [`TxPath`]: they are
//! lent with the rest of the connection's state for packets in flight
//! (`super::flight`) and passed to each method that reads or writes them.

use super::cc::Aimd;
use super::mrc_wire::AckPkt;
use super::offload::CongestionEngine;
use super::sack::{highest_bit, seq_diff, set_bits, SeqWindow};

/// Path sequence numbers a path may have outstanding (the SACK span).
pub const PATH_WINDOW: u32 = 256;
/// RTOs in a row after which a path is FAILED.
pub const FAIL_AFTER_RTO: u8 = 3;
/// Losses within one epoch that make a path repath.
pub const REPATH_LOSS: u16 = 16;
/// Packets per loss-counting epoch.
pub const REPATH_EPOCH: u16 = 64;
/// A path whose RTT samples exceed this multiple of the median smoothed RTT of the
/// connection's other paths is on a slow route (section 6.1).
pub const SLOW_PATH_FACTOR: u64 = 4;
/// Consecutive slow samples that make a path repath (section 6.1).
pub const SLOW_PATH_SAMPLES: u16 = 8;
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
    last: u64,
}

impl Rtt {
    /// No sample yet.
    pub const NONE: Rtt = Rtt {
        srtt: 0,
        rttvar: 0,
        min: 0,
        samples: 0,
        sum: 0,
        last: 0,
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
        self.last = rtt;
    }

    /// Samples taken.
    pub const fn samples(&self) -> u64 {
        self.samples
    }

    /// The latest sample (0 before the first).
    pub const fn last(&self) -> u64 {
        self.last
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
    /// Declared lost by a SACK gap.
    Lost,
    /// Declared lost by a retransmission timeout.
    TimedOut,
}

impl SlotState {
    const fn lost(self) -> bool {
        matches!(self, SlotState::Lost | SlotState::TimedOut)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Slot {
    dsn: u32,
    len: u32,
    sent_at: u64,
    state: SlotState,
    /// For a lost transmission: the path's next sequence number when it was
    /// declared lost. Every DATA packet whose PathFloor skips it was sent
    /// later, so carries a PathSeq at or after this ([`TxPath::proven`]).
    lost_next: u32,
    /// An ACK named this transmission (its AckSeq) and gave an RTT sample.
    sampled: bool,
    /// Earlier transmissions of its Dsn (0: the first), at most
    /// [`MAX_BACKOFF`]: its own RTO backoff ([`TxPath::deadline`]).
    tries: u8,
}

const EMPTY: Slot = Slot {
    dsn: 0,
    len: 0,
    sent_at: 0,
    state: SlotState::Acked,
    lost_next: 0,
    sampled: false,
    tries: 0,
};

/// The transmission slots of one path: slot `seq % PATH_WINDOW` describes transmission `seq`
/// while it is one of the last `PATH_WINDOW` sent.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SlotWindow([Slot; PATH_WINDOW as usize]);

impl SlotWindow {
    /// Every slot empty (what a path with nothing in flight may be given).
    pub const EMPTY: SlotWindow = SlotWindow([EMPTY; PATH_WINDOW as usize]);

    /// Makes every slot empty.
    pub(super) fn clear(&mut self) {
        for s in self.0.iter_mut() {
            *s = EMPTY;
        }
    }

    fn get(&self, seq: u32) -> Option<&Slot> {
        self.0.get(slot_index(seq))
    }

    fn get_mut(&mut self, seq: u32) -> Option<&mut Slot> {
        self.0.get_mut(slot_index(seq))
    }
}

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
    /// Transmissions declared lost that an ACK later proved received.
    pub late_acks: u64,
    /// RTOs proven spurious (an original transmission acknowledged before
    /// anything sent after the RTO), their window reduction undone.
    pub spurious_rtos: u64,
    /// ECN echo increases seen.
    pub ecn_echoes: u64,
    /// Source port changes.
    pub repaths: u64,
    /// ACKs processed / dropped as inconsistent.
    pub acks: u64,
    /// ACKs whose CumSeq was beyond what the path sent.
    pub bad_acks: u64,
    /// Tail-loss probes that sent the newest packet in flight again (no new
    /// data was waiting).
    pub tail_probes: u64,
    /// RTOs that fired while the whole connection was silent (nothing sent after the path's
    /// oldest transmission acknowledged on any path): the path probed instead of declaring its
    /// transmissions lost (section 5.5.2).
    pub silences: u64,
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
        late_acks: 0,
        spurious_rtos: 0,
        ecn_echoes: 0,
        repaths: 0,
        acks: 0,
        bad_acks: 0,
        tail_probes: 0,
        silences: 0,
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
    /// Late acknowledgments and spurious-RTO undo on (section 5.5.1).
    pub late_acks: bool,
    /// Consecutive RTT samples that found the path's route slow (section 6.1).
    pub slow_samples: u16,
    base: u32,
    next: u32,
    inflight_bytes: u32,
    inflight_pkts: u32,
    backoff: u8,
    rto_in_row: u8,
    /// Silent timeouts since the last acknowledgment ([`Self::on_silence`]).
    silent_in_row: u8,
    last_ce: u32,
    last_send: u64,
    probe: Probe,
    epoch_sent: u16,
    epoch_lost: u16,
    new_route: bool,
    /// Slots in a lost state whose sequence number is still recent (within
    /// `PATH_WINDOW` of `next`): 0 skips the search for late proofs.
    lost_slots: u32,
    /// CumSeq up to which lost slots were already checked for proof.
    late_cum: u32,
    /// `next` at the last RTO, while that RTO may still prove spurious.
    undo_next: Option<u32>,
    /// The in-flight retransmission with the most earlier transmissions of
    /// its Dsn, if any: its RTO is backed off by those ([`Self::deadline`]).
    held: Option<u32>,
    /// The latest send time of a transmission acknowledged on this path.
    acked_sent: Option<u64>,
    /// When the ACK that last raised `acked_sent` arrived.
    acked_at: u64,
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
            late_acks: true,
            slow_samples: 0,
            base: 0,
            next: 0,
            inflight_bytes: 0,
            inflight_pkts: 0,
            backoff: 0,
            rto_in_row: 0,
            silent_in_row: 0,
            last_ce: 0,
            last_send: 0,
            probe: Probe::Armed,
            epoch_sent: 0,
            epoch_lost: 0,
            new_route: false,
            lost_slots: 0,
            late_cum: 0,
            undo_next: None,
            held: None,
            acked_sent: None,
            acked_at: 0,
        }
    }

    /// True from a repath until the first RTT sample on the new route.
    pub const fn new_route(&self) -> bool {
        self.new_route
    }

    /// Oldest unresolved sequence number (sent as PathFloor).
    pub const fn floor(&self) -> u32 {
        self.base
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

    /// The newest transmission still in flight, `(Dsn, PathSeq)`: what a
    /// tail-loss probe sends again when no new data waits (section 5.4).
    pub fn newest_in_flight(&self, w: &SlotWindow) -> Option<(u32, u32)> {
        let mut seq = self.next;
        while seq != self.base {
            seq = seq.wrapping_sub(1);
            let s = w.get(seq)?;
            if s.state == SlotState::InFlight {
                return Some((s.dsn, seq));
            }
        }
        None
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

    /// Records a transmission of `dsn`, which was sent `tries` times before
    /// (on any path; 0: this is its first transmission), and returns its
    /// sequence number.
    pub fn on_send(&mut self, w: &mut SlotWindow, dsn: u32, len: u32, now: u64, tries: u8) -> u32 {
        let retx = tries > 0;
        let tries = tries.min(MAX_BACKOFF);
        let seq = self.next;
        if let Some(s) = w.get_mut(seq) {
            if s.state.lost() {
                // Its seq (seq - PATH_WINDOW) is no longer recent.
                self.lost_slots = self.lost_slots.saturating_sub(1);
            }
            *s = Slot {
                dsn,
                len,
                sent_at: now,
                state: SlotState::InFlight,
                lost_next: 0,
                sampled: false,
                tries,
            };
        }
        if tries > 0 && self.held(w).map_or(0, |h| h.tries) < tries {
            self.held = Some(seq);
        }
        self.next = seq.wrapping_add(1);
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

    /// The Dsn that transmission `seq` carried, while it is not acknowledged.
    pub fn unacked_dsn(&self, w: &SlotWindow, seq: u32) -> Option<u32> {
        if !self.in_window(seq) {
            return None;
        }
        let s = w.get(seq)?;
        (s.state != SlotState::Acked).then_some(s.dsn)
    }

    fn in_window(&self, seq: u32) -> bool {
        seq.wrapping_sub(self.base) < self.next.wrapping_sub(self.base)
    }

    fn resolve(&mut self, w: &mut SlotWindow, seq: u32, state: SlotState) -> Option<Slot> {
        if !self.in_window(seq) {
            return None;
        }
        let slot = w.get_mut(seq)?;
        if slot.state != SlotState::InFlight {
            return None;
        }
        slot.state = state;
        slot.lost_next = self.next;
        let s = *slot;
        if state.lost() {
            self.lost_slots = self.lost_slots.saturating_add(1);
        }
        self.inflight_bytes = self.inflight_bytes.saturating_sub(s.len);
        self.inflight_pkts = self.inflight_pkts.saturating_sub(1);
        Some(s)
    }

    /// True if `seq`'s slot still describes its transmission: one of the
    /// last `PATH_WINDOW` sequence numbers sent.
    fn recent(&self, seq: u32) -> bool {
        let d = self.next.wrapping_sub(seq);
        (1..=PATH_WINDOW).contains(&d)
    }

    /// Whether `ack`'s CumSeq proves the lost transmission at `seq` (before
    /// CumSeq) received rather than skipped through PathFloor. A receiver
    /// skips `seq` only after a DATA packet whose PathFloor is past it;
    /// such a packet was sent after `seq` was declared lost, so its PathSeq
    /// `m` is at or after the slot's `lost_next`, and once the receiver
    /// took it, CumSeq is past `m` or `m`'s SACK bit is set. So a CumSeq not
    /// after `lost_next` with no SACK bit at or after it (`newest`, the
    /// highest bit, before it) shows that no such packet was taken.
    fn proven(ack: &AckPkt, newest_sacked: Option<u32>, lost_next: u32) -> bool {
        seq_diff(ack.cum, lost_next) <= 0
            && newest_sacked.is_none_or(|m| seq_diff(m, lost_next) < 0)
    }

    /// A lost transmission at `seq` was proven received: it counts as
    /// acknowledged (no window growth: its bytes left the window when it was
    /// declared lost) and `ev` hears of it, so that its retransmission, if
    /// still queued, is not sent. A proof for the last RTO's transmissions
    /// before anything sent after that RTO is acknowledged shows the RTO
    /// spurious: its window reduction is undone. Returns whether `seq` was
    /// lost.
    fn late(&mut self, w: &mut SlotWindow, seq: u32, ev: &mut impl FnMut(PathEvent)) -> bool {
        if !self.recent(seq) {
            return false;
        }
        let Some(slot) = w.get_mut(seq) else {
            return false;
        };
        if !slot.state.lost() {
            return false;
        }
        let timed_out = slot.state == SlotState::TimedOut;
        slot.state = SlotState::Acked;
        let s = *slot;
        self.acked_sent = self.acked_sent.max(Some(s.sent_at));
        self.lost_slots = self.lost_slots.saturating_sub(1);
        self.stats.late_acks = self.stats.late_acks.saturating_add(1);
        if timed_out && self.undo_next.is_some_and(|n| seq_diff(seq, n) < 0) {
            self.undo_next = None;
            self.cc.undo_timeout();
            self.backoff = 0;
            self.rto_in_row = 0;
            self.silent_in_row = 0;
            self.state = PathState::Active;
            self.stats.spurious_rtos = self.stats.spurious_rtos.saturating_add(1);
        }
        ev(PathEvent::Acked {
            dsn: s.dsn,
            seq,
            len: s.len,
        });
        true
    }

    /// Finds the lost transmissions `ack` proves received (AckSeq, SACK
    /// bits, and CumSeq where [`Self::proven`] allows) and reports them
    /// through [`Self::late`].
    fn late_proofs(
        &mut self,
        w: &mut SlotWindow,
        ack: &AckPkt,
        ev: &mut impl FnMut(PathEvent),
    ) -> bool {
        if self.lost_slots == 0 || !self.late_acks {
            self.late_cum = ack.cum;
            return false;
        }
        let mut any = self.late(w, ack.ack_seq, ev);
        let cum1 = ack.cum.wrapping_add(1);
        for i in set_bits(&ack.sack) {
            if self.lost_slots == 0 {
                break;
            }
            any |= self.late(w, cum1.wrapping_add(i), ev);
        }
        let newest = highest_bit(&ack.sack).map(|h| cum1.wrapping_add(h));
        // CumSeq: the recent seqs from the last CumSeq checked up to this one.
        let oldest = self.next.wrapping_sub(PATH_WINDOW);
        let from = if seq_diff(self.late_cum, oldest) > 0 {
            self.late_cum
        } else {
            oldest
        };
        if seq_diff(ack.cum, from) > 0 {
            let mut seq = from;
            while seq != ack.cum && self.lost_slots > 0 {
                let lost_next = w.get(seq).map_or(0, |s| s.lost_next);
                if self.recent(seq) && Self::proven(ack, newest, lost_next) {
                    any |= self.late(w, seq, ev);
                }
                seq = seq.wrapping_add(1);
            }
            self.late_cum = ack.cum;
        }
        any
    }

    /// The offsets from `base` of the outstanding seqs before `limit`
    /// (`seq_diff(seq, limit) < 0`), and whether the caller must still test
    /// each one. In the 2^31 window "before" is not monotonic over
    /// `base .. next` for a `limit` about 2^31 away (a forged ACK): then every
    /// outstanding offset comes with `true`. Otherwise the seqs before `limit`
    /// are one run from `base` (of length 0 for a `limit` not after `base`,
    /// all of them for a `limit` beyond `next`), returned exactly.
    fn before(&self, limit: u32) -> (core::ops::Range<u32>, bool) {
        const HALF: u32 = 1 << 31;
        let outstanding = self.next.wrapping_sub(self.base);
        if outstanding > PATH_WINDOW {
            return (0..outstanding, true);
        }
        let d = limit.wrapping_sub(self.base);
        if d <= outstanding {
            // seq - limit = off - d: negative exactly for off < d.
            (0..d, false)
        } else if d < HALF {
            // off - d lies in (-2^31, 0) for every outstanding off.
            (0..outstanding, false)
        } else if d.wrapping_neg() <= HALF - outstanding {
            // limit is base - b with b = -d: off + b lies in [1, 2^31).
            (0..0, false)
        } else {
            (0..outstanding, true)
        }
    }

    /// Resolves `seq` as acknowledged if it is in flight: the window grows and `ev` hears of
    /// it. Returns whether it was.
    fn acked(
        &mut self,
        w: &mut SlotWindow,
        seq: u32,
        now: u64,
        ev: &mut impl FnMut(PathEvent),
    ) -> bool {
        let Some(s) = self.resolve(w, seq, SlotState::Acked) else {
            return false;
        };
        self.acked_sent = self.acked_sent.max(Some(s.sent_at));
        if self.undo_next.is_some_and(|n| seq_diff(seq, n) >= 0) {
            // Something sent after the last RTO arrived first: not spurious.
            self.undo_next = None;
        }
        self.cc.on_ack(now, s.len);
        ev(PathEvent::Acked {
            dsn: s.dsn,
            seq,
            len: s.len,
        });
        true
    }

    fn advance_base(&mut self, w: &SlotWindow) {
        while self.base != self.next {
            match w.get(self.base) {
                Some(s) if s.state == SlotState::InFlight => break,
                _ => self.base = self.base.wrapping_add(1),
            }
        }
    }

    /// Processes an ACK for this path at `now`; reports every transmission
    /// acknowledged or found lost through `ev`. `w` is the path's slots, `None` while the
    /// connection holds no state for packets in flight (then nothing is in flight: the ACK
    /// can only be checked and its ECN echo taken). Returns `Some(true)` if the ACK echoed
    /// new ECN marks, `None` if it was inconsistent (counted).
    pub fn on_ack(
        &mut self,
        w: Option<&mut SlotWindow>,
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
        let heard = self.acked_sent;
        let any = match w {
            Some(w) => self.ack_slots(w, ack, now, &mut ev),
            None => {
                self.late_cum = ack.cum;
                false
            }
        };
        if self.acked_sent != heard {
            self.acked_at = now;
        }
        // An RNR ACK acknowledges nothing new but proves the receiver alive and the path good.
        if any || ack.rnr {
            self.probe = Probe::Armed;
            self.backoff = 0;
            self.rto_in_row = 0;
            self.silent_in_row = 0;
            self.state = PathState::Active;
        }
        let ce = seq_diff(ack.ce_count, self.last_ce) > 0;
        if ce {
            self.last_ce = ack.ce_count;
            self.stats.ecn_echoes = self.stats.ecn_echoes.saturating_add(1);
        }
        Some(ce)
    }

    /// [`Self::on_ack`]'s work on the slots: the RTT sample, late proofs, the cumulative and
    /// selective acknowledgments and the gaps. Returns whether anything was acknowledged.
    fn ack_slots(
        &mut self,
        w: &mut SlotWindow,
        ack: &AckPkt,
        now: u64,
        ev: &mut impl FnMut(PathEvent),
    ) -> bool {
        // RTT from the triggering transmission. Its own PathSeq names it, so
        // the sample is exact (no Karn rule) also for a transmission already
        // declared lost: an ACK slower than the RTO must raise the RTO, or a
        // growing queue leaves only the ACKs that beat it to be sampled and
        // every later transmission times out (seen under TCG: no sample for
        // seconds, the same packet resent on path after path). One sample per
        // transmission. One declared lost may have been sent before the
        // path's latest repath: it does not end a new route's probation.
        if self.recent(ack.ack_seq) {
            if let Some(s) = w.get_mut(ack.ack_seq) {
                if !s.sampled && s.state != SlotState::Acked {
                    s.sampled = true;
                    if s.state == SlotState::InFlight {
                        self.new_route = false;
                    }
                    self.rtt.sample(now.saturating_sub(s.sent_at));
                }
            }
        }
        // Transmissions declared lost that this ACK proves received; first,
        // so that an RTO proven spurious is undone before acknowledgments of
        // later transmissions could disarm that.
        let mut any = self.late_proofs(w, ack, ev);
        // Cumulative part: every seq before CumSeq.
        let (offs, test) = self.before(ack.cum);
        for off in offs {
            let seq = self.base.wrapping_add(off);
            if test && seq_diff(seq, ack.cum) >= 0 {
                continue;
            }
            any |= self.acked(w, seq, now, ev);
        }
        // Selective part: the set bits only, in ascending order.
        let cum1 = ack.cum.wrapping_add(1);
        for i in set_bits(&ack.sack) {
            let seq = cum1.wrapping_add(i);
            any |= self.acked(w, seq, now, ev);
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
        let (offs, test) = self.before(newest);
        for off in offs {
            let seq = self.base.wrapping_add(off);
            if test && seq_diff(seq, newest) >= 0 {
                continue;
            }
            if let Some(s) = self.resolve(w, seq, SlotState::Lost) {
                self.count_loss(false);
                ev(PathEvent::Lost { dsn: s.dsn, seq });
            }
        }
        self.advance_base(w);
        any
    }

    fn count_loss(&mut self, rto: bool) {
        if rto {
            self.stats.rto_losses = self.stats.rto_losses.saturating_add(1);
        } else {
            self.stats.sack_losses = self.stats.sack_losses.saturating_add(1);
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

    /// The held retransmission's slot while it is in flight.
    fn held<'a>(&self, w: &'a SlotWindow) -> Option<&'a Slot> {
        self.held
            .filter(|&seq| self.in_window(seq))
            .and_then(|seq| w.get(seq))
            .filter(|s| s.state == SlotState::InFlight)
    }

    /// When the path times out, if anything is in flight: the RTO after
    /// the oldest transmission, backed off by the path's RTOs in a row; and
    /// not before the RTO after the held retransmission backed off by the
    /// earlier transmissions of its Dsn (section 5.5, **our choice**). A
    /// Dsn resent after an RTO moves to another path, whose own backoff
    /// knows nothing of it: without its own, a peer slower than the RTO
    /// (a queue growing faster than the RTT estimate follows) sees the same
    /// packet again every RTO until `max_retx` fails a live connection.
    pub fn deadline(&self, w: &SlotWindow, init: u64, min: u64, max: u64) -> Option<u64> {
        if self.inflight_pkts == 0 {
            return None;
        }
        let rto = self.rtt.rto(init, min, max);
        let cap = max.max(min);
        let after = |sent_at: u64, shift: u8| {
            sent_at.saturating_add((rto << shift.min(MAX_BACKOFF)).min(cap))
        };
        let oldest = after(self.oldest_sent(w)?, self.backoff);
        let held = self.held(w).map_or(0, |h| after(h.sent_at, h.tries));
        Some(oldest.max(held))
    }

    /// The latest send time of a transmission acknowledged on this path.
    pub const fn acked_sent(&self) -> Option<u64> {
        self.acked_sent
    }

    /// When the acknowledgment of [`Self::acked_sent`]'s transmission arrived.
    pub const fn acked_at(&self) -> u64 {
        self.acked_at
    }

    /// The transmissions in flight, oldest first, as `(Dsn, PathSeq)`.
    pub fn in_flight<'a>(&self, w: &'a SlotWindow) -> impl Iterator<Item = (u32, u32)> + 'a {
        let base = self.base;
        (0..self.next.wrapping_sub(self.base).min(PATH_WINDOW)).filter_map(move |off| {
            let seq = base.wrapping_add(off);
            w.get(seq)
                .filter(|s| s.state == SlotState::InFlight)
                .map(|s| (s.dsn, seq))
        })
    }

    /// Silent timeouts since the path's last acknowledgment.
    pub const fn silent_in_row(&self) -> u8 {
        self.silent_in_row
    }

    /// When the path's oldest transmission in flight was sent, if any is.
    pub fn oldest_sent(&self, w: &SlotWindow) -> Option<u64> {
        if self.inflight_pkts == 0 {
            return None;
        }
        w.get(self.base).map(|s| s.sent_at)
    }

    /// The retransmission timer fired while the connection heard nothing newer than the path's
    /// oldest transmission (section 5.5.2, **our choice**): nothing is declared lost and the
    /// window stays; the timer backs off as after an RTO and one probe may leave beyond the
    /// windows ([`Self::probe_due`]). Its acknowledgment shows the path's gaps, if any.
    pub fn on_silence(&mut self) {
        self.silent_in_row = self.silent_in_row.saturating_add(1);
        self.backoff = self.backoff.saturating_add(1).min(MAX_BACKOFF);
        self.probe = Probe::Due;
        self.stats.silences = self.stats.silences.saturating_add(1);
    }

    /// The retransmission timer fired: every transmission in flight is
    /// lost, the window restarts and the path's state steps towards
    /// FAILED. The caller repaths.
    pub fn on_timeout(&mut self, w: &mut SlotWindow, mut ev: impl FnMut(PathEvent)) {
        let mut seq = self.base;
        while self.in_window(seq) {
            if let Some(s) = self.resolve(w, seq, SlotState::TimedOut) {
                self.count_loss(true);
                ev(PathEvent::Lost { dsn: s.dsn, seq });
            }
            seq = seq.wrapping_add(1);
        }
        self.advance_base(w);
        self.undo_next = Some(self.next);
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

    /// Lets go of the path's slots (they are being given back, `super::flight`): with nothing
    /// in flight, the slots only still tell which lost transmissions a late ACK may prove
    /// received; that proof (and an RTO's undo) is given up. Returns `false`, changing nothing,
    /// while a transmission is in flight.
    pub fn forget_slots(&mut self) -> bool {
        if self.inflight_pkts != 0 {
            return false;
        }
        self.base = self.next;
        self.lost_slots = 0;
        self.late_cum = self.next;
        self.undo_next = None;
        self.held = None;
        self.probe = Probe::Armed;
        true
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
        self.slow_samples = 0;
    }
}

/// The receiver's side of one path.
#[derive(Clone, Copy, Debug, Default)]
pub struct RxPath {
    /// Received path sequence numbers.
    pub win: SeqWindow<4>,
    /// CE-marked DATA packets received, wrapping.
    pub ce_count: u32,
    /// The owed ACK is due at once, also from a receive path that coalesces ACKs
    /// ([`crate::conn::Conn::poll_control`]; transport.rst section 4, step 5).
    pub ack_now: bool,
    /// DATA packets taken on this path since its last ACK (saturating): an ACK is owed
    /// while it is not 0 ([`Self::ack_pending`]).
    pub unacked: u16,
    /// Newest sequence number to acknowledge.
    pub ack_seq: u32,
    /// UDP source port of the newest DATA packet (the ACK's source port).
    pub port: u16,
    /// A DATA packet refused because its receive was not posted, owed an ACK with the RNR
    /// flag naming it ([`crate::conn::Conn::not_ready`]).
    pub rnr: Option<u32>,
}

impl RxPath {
    /// Nothing received.
    pub const EMPTY: RxPath = RxPath {
        win: SeqWindow::new(0),
        ce_count: 0,
        ack_now: false,
        unacked: 0,
        ack_seq: 0,
        port: 0,
        rnr: None,
    };

    /// Whether an ACK is owed.
    pub const fn ack_pending(&self) -> bool {
        self.unacked != 0 || self.rnr.is_some()
    }

    /// Builds the ACK owed on `path` for connection `conn`.
    pub fn ack(&self, path: u8, conn: u32, rate_hint_kbps: u32) -> AckPkt {
        AckPkt {
            path,
            conn,
            cum: self.win.cum(),
            ack_seq: self.rnr.unwrap_or(self.ack_seq),
            rate_hint_kbps,
            ce_count: self.ce_count,
            sack: *self.win.bits(),
            rnr: self.rnr.is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::super::cc::MD_ECN_PATH;
    use super::*;

    /// A path with its slots, taking the slot-passing calls by their plain names.
    struct Held {
        p: TxPath,
        w: SlotWindow,
    }

    impl core::ops::Deref for Held {
        type Target = TxPath;
        fn deref(&self) -> &TxPath {
            &self.p
        }
    }

    impl core::ops::DerefMut for Held {
        fn deref_mut(&mut self) -> &mut TxPath {
            &mut self.p
        }
    }

    impl Held {
        fn on_send(&mut self, dsn: u32, len: u32, now: u64, tries: u8) -> u32 {
            self.p.on_send(&mut self.w, dsn, len, now, tries)
        }
        fn on_ack(&mut self, ack: &AckPkt, now: u64, ev: impl FnMut(PathEvent)) -> Option<bool> {
            self.p.on_ack(Some(&mut self.w), ack, now, ev)
        }
        fn on_timeout(&mut self, ev: impl FnMut(PathEvent)) {
            self.p.on_timeout(&mut self.w, ev)
        }
        fn deadline(&self, init: u64, min: u64, max: u64) -> Option<u64> {
            self.p.deadline(&self.w, init, min, max)
        }
    }

    fn held(p: TxPath) -> Held {
        Held {
            p,
            w: SlotWindow::EMPTY,
        }
    }

    fn path() -> Held {
        held(TxPath::new(50000, Aimd::new(1000, 4, 256, MD_ECN_PATH)))
    }

    fn collect(p: &mut Held, ack: &AckPkt, now: u64) -> [u32; 2] {
        let mut n = [0u32; 2];
        p.on_ack(ack, now, |e| match e {
            PathEvent::Acked { .. } => n[0] += 1,
            PathEvent::Lost { .. } => n[1] += 1,
        });
        n
    }

    #[test]
    fn sack_gap_is_loss_and_rtt() {
        let mut p = path();
        for d in 0..8 {
            assert_eq!(p.on_send(100 + d, 1000, 1000, 0), d);
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
            p.on_send(n, 1000, 0, 0);
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
        p.on_send(9, 1000, 0, 1);
        assert_eq!(p.deadline(1_000_000, 50_000, 100_000_000), Some(2_000_000));
        p.on_timeout(|_| {});
        p.on_timeout(|_| {});
        assert_eq!(p.state, PathState::Failed);
        // FAILED: one packet at a time.
        assert!(p.can_send(1000));
        p.on_send(10, 1000, 0, 1);
        assert!(!p.can_send(1000));
    }

    /// An ACK naming a transmission already declared lost (late
    /// acknowledgments on or off) still times it: the RTO must learn of a
    /// queue growing faster than it, or every transmission times out before
    /// its ACK and none is ever sampled. Once per transmission.
    #[test]
    fn an_ack_late_for_the_rto_is_sampled_once() {
        for late_acks in [true, false] {
            let mut p = path();
            p.late_acks = late_acks;
            let mut rx = RxPath::default();
            p.on_send(100, 1000, 1_000, 0);
            p.on_send(101, 1000, 2_000, 0);
            p.on_timeout(|_| {});
            assert_eq!(p.rtt.srtt(), 0);
            // Seq 1 arrives 300 us after it was sent; its ACK names it.
            take(&mut rx, 0, 0);
            take(&mut rx, 1, 0);
            rx.ack_seq = 1;
            collect(&mut p, &rx.ack(0, 1, 0), 302_000);
            assert_eq!(p.rtt.srtt(), 300_000, "late_acks {late_acks}");
            // The same AckSeq again (a duplicate ACK) is no second sample.
            collect(&mut p, &rx.ack(0, 1, 0), 900_000);
            assert_eq!(p.rtt.srtt(), 300_000);
            // A new route learns nothing from a transmission sent before it.
            assert!(!p.new_route());
        }
    }

    /// A retransmission's RTO is backed off by the earlier transmissions of
    /// its Dsn, also on a path with no RTO of its own, and only while it is
    /// in flight; the oldest transmission's deadline still counts when it is
    /// later.
    #[test]
    fn a_retransmission_keeps_its_own_backoff() {
        let (init, min, max) = (1_000_000, 50_000, 100_000_000);
        let mut p = path();
        p.on_send(100, 1000, 0, 0);
        assert_eq!(p.deadline(init, min, max), Some(1_000_000));
        // Sent for the fourth time (three before, on other paths).
        p.on_send(7, 1000, 500_000, 3);
        assert_eq!(p.deadline(init, min, max), Some(500_000 + 8_000_000));
        // Capped by the largest RTO.
        let mut q = path();
        q.on_send(7, 1000, 0, 9);
        assert_eq!(q.deadline(init, min, 100_000_000), Some(100_000_000));
        // Acknowledged: the path's own deadline again.
        let mut p = path();
        p.on_send(7, 1000, 0, 3);
        p.on_send(100, 1000, 500_000, 0);
        assert_eq!(p.deadline(init, min, max), Some(8_000_000));
        let mut rx = RxPath::default();
        take(&mut rx, 0, 0);
        collect(&mut p, &rx.ack(0, 1, 0), 600_000);
        assert_eq!(p.inflight_pkts(), 1);
        let rto = p.rtt.rto(init, min, max);
        assert_eq!(p.deadline(init, min, max), Some(500_000 + rto));
    }

    #[test]
    fn loss_epoch_triggers_repath() {
        // 64 packets with 16 of them lost (every fourth): repath once.
        let mut p = held(TxPath::new(1, Aimd::new(1, 1000, 1000, MD_ECN_PATH)));
        for round in 0..2u32 {
            for d in 0..64 {
                p.on_send(d, 1, 0, 0);
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
            p.on_send(d, 1000, 0, 0);
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
            assert_eq!(p.on_send(d, 1000, 40, 1), 6 + d);
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
        let mut p = held(TxPath::new(1, Aimd::new(1, 1000, 1000, MD_ECN_PATH)));
        for d in 0..20 {
            p.on_send(d, 1, 0, 0);
        }
        let mut rx = RxPath::default();
        rx.win.mark(16);
        rx.ack_seq = 16;
        assert_eq!(collect(&mut p, &rx.ack(0, 1, 0), 10), [1, 16]);
        assert!(p.loss_epoch_says_repath());
        assert!(!p.loss_epoch_says_repath());
        // 15 losses are not enough, neither in 64 packets.
        for d in 20..84 {
            p.on_send(d, 1, 20, 0);
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
        p.on_send(0, 1000, 0, 0);
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
        let mut p = held(TxPath::new(1, Aimd::new(1, 1000, 1000, MD_ECN_PATH)));
        for d in 0..PATH_WINDOW {
            assert!(p.can_send(1));
            p.on_send(d, 1, 0, 0);
        }
        assert!(!p.can_send(1));
    }

    /// `before` against testing each outstanding seq on its own.
    fn check_before(base: u32, outstanding: u32, limit: u32) {
        let mut p = path();
        p.base = base;
        p.next = base.wrapping_add(outstanding);
        let (offs, test) = p.before(limit);
        let naive = |off: u32| seq_diff(base.wrapping_add(off), limit) < 0;
        let mut got = [false; PATH_WINDOW as usize];
        for off in offs {
            assert!(
                off < outstanding,
                "offset {off} beyond {outstanding} outstanding"
            );
            got[off as usize] = !test || naive(off);
        }
        for off in 0..outstanding {
            assert_eq!(
                got[off as usize],
                naive(off),
                "base {base} outstanding {outstanding} limit {limit} off {off}"
            );
        }
    }

    #[test]
    fn before_is_exact_near_every_edge() {
        const HALF: u32 = 1 << 31;
        for base in [0, 1, 255, HALF - 7, HALF, HALF + 3, u32::MAX - 2, u32::MAX] {
            for outstanding in [0, 1, 2, 63, 200, PATH_WINDOW - 1, PATH_WINDOW] {
                for centre in [
                    0,
                    HALF - PATH_WINDOW,
                    HALF,
                    HALF + PATH_WINDOW,
                    0u32.wrapping_sub(PATH_WINDOW),
                ] {
                    for k in 0..600u32 {
                        let limit = base.wrapping_add(centre).wrapping_add(k).wrapping_sub(300);
                        check_before(base, outstanding, limit);
                    }
                }
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn before_is_exact(base: u32, outstanding in 0..=PATH_WINDOW, limit: u32) {
            check_before(base, outstanding, limit);
        }
    }

    /// Every Acked event of one ACK: (seq, dsn) pairs.
    fn acked_seqs(p: &mut Held, ack: &AckPkt, now: u64) -> std::vec::Vec<u32> {
        let mut v = std::vec::Vec::new();
        p.on_ack(ack, now, |e| {
            if let PathEvent::Acked { seq, .. } = e {
                v.push(seq);
            }
        });
        v
    }

    /// The receiver takes DATA packet `seq` sent with PathFloor `floor`.
    fn take(rx: &mut RxPath, seq: u32, floor: u32) {
        rx.win.advance_to(floor);
        rx.win.mark(seq);
        rx.ack_seq = seq;
    }

    #[test]
    fn spurious_rto_is_undone() {
        let mut p = path();
        let mut rx = RxPath::default();
        let mut floors = [0u32; 8];
        for d in 0..8 {
            floors[d as usize] = p.floor();
            p.on_send(100 + d, 1000, 0, 0);
        }
        let cwnd = p.cc.cwnd();
        p.on_timeout(|_| {});
        assert_eq!(p.cc.cwnd(), 1000);
        assert_eq!(p.state, PathState::Recovering);
        // The originals were only late: the first ACK proves seq 0 received
        // before anything sent after the RTO.
        take(&mut rx, 0, floors[0]);
        assert_eq!(acked_seqs(&mut p, &rx.ack(0, 1, 0), 5), [0]);
        assert_eq!(p.stats.spurious_rtos, 1);
        assert_eq!(p.cc.cwnd(), cwnd);
        assert_eq!(p.state, PathState::Active);
        // The rest arrive together: CumSeq 8 proves them all (no DATA sent
        // after the RTO reached the receiver, so nothing was skipped).
        for s in 1..8 {
            take(&mut rx, s, floors[s as usize]);
        }
        assert_eq!(
            acked_seqs(&mut p, &rx.ack(0, 1, 0), 6),
            [7, 1, 2, 3, 4, 5, 6]
        );
        assert_eq!(p.stats.late_acks, 8);
        assert_eq!(p.lost_slots, 0);
        // Once only.
        assert_eq!(acked_seqs(&mut p, &rx.ack(0, 1, 0), 7), []);
    }

    #[test]
    fn genuine_rto_is_kept_and_skips_prove_nothing() {
        let mut p = path();
        let mut rx = RxPath::default();
        for d in 0..8 {
            p.on_send(100 + d, 1000, 0, 0);
        }
        p.on_timeout(|_| {});
        // Only the retransmission (seq 8, floor 8) arrives: the receiver
        // skips 0..8 through the floor. CumSeq 9 proves nothing about them.
        let floor = p.floor();
        assert_eq!(floor, 8);
        p.on_send(100, 1000, 10, 1);
        take(&mut rx, 8, floor);
        assert_eq!(acked_seqs(&mut p, &rx.ack(0, 1, 0), 20), [8]);
        assert_eq!(p.stats.late_acks, 0);
        assert_eq!(p.stats.spurious_rtos, 0);
        // An original arriving after that is proven by its AckSeq, but the
        // RTO is not undone: a later transmission was acknowledged first.
        take(&mut rx, 3, 0);
        assert_eq!(acked_seqs(&mut p, &rx.ack(0, 1, 0), 21), [3]);
        assert_eq!(p.stats.late_acks, 1);
        assert_eq!(p.stats.spurious_rtos, 0);
        assert!(p.cc.cwnd() < 4000);
    }

    #[test]
    fn sack_loss_then_late_arrival() {
        let mut p = path();
        let mut rx = RxPath::default();
        for d in 0..4 {
            p.on_send(100 + d, 1000, 0, 0);
        }
        take(&mut rx, 2, 0);
        assert_eq!(collect(&mut p, &rx.ack(0, 1, 0), 5), [1, 2]);
        // 0 and 1 were reordered, not lost.
        take(&mut rx, 1, 0);
        assert_eq!(acked_seqs(&mut p, &rx.ack(0, 1, 0), 6), [1]);
        take(&mut rx, 0, 0);
        assert_eq!(acked_seqs(&mut p, &rx.ack(0, 1, 0), 7), [0]);
        assert_eq!(p.stats.late_acks, 2);
        assert_eq!(p.stats.spurious_rtos, 0);
    }

    proptest::proptest! {
        /// Whatever the network does to DATA and ACKs and whenever RTOs
        /// fire, a transmission is reported acknowledged only if the
        /// receiver took it, and once.
        #[test]
        fn acknowledged_only_if_received(ops in proptest::collection::vec((0u8..6, 0u16..512), 1..400)) {
            let mut p = path();
            let mut rx = RxPath::default();
            let mut wire: std::vec::Vec<(u32, u32)> = std::vec::Vec::new();
            let mut acks: std::vec::Vec<AckPkt> = std::vec::Vec::new();
            let mut received = std::collections::BTreeSet::new();
            let mut reported = std::collections::BTreeSet::new();
            let mut now = 0u64;
            for (op, arg) in ops {
                now += 1;
                match op {
                    0 | 1 => if p.can_send(1000) {
                        let floor = p.floor();
                        let seq = p.on_send(u32::from(arg), 1000, now, 0);
                        wire.push((seq, floor));
                    },
                    2 => if !wire.is_empty() {
                        let (seq, floor) = wire.remove(usize::from(arg) % wire.len());
                        // As the connection takes DATA (transport.rst, section 4): a
                        // packet below CumSeq is still delivered (deduplicated by Dsn).
                        rx.win.advance_to(floor);
                        if !rx.win.fits(seq) {
                            continue;
                        }
                        rx.win.mark(seq);
                        received.insert(seq);
                        rx.ack_seq = seq;
                        if arg % 3 != 0 {
                            acks.push(rx.ack(0, 1, 0));
                        }
                    },
                    3 => if !acks.is_empty() {
                        let ack = acks.remove(usize::from(arg) % acks.len());
                        let mut bad = None;
                        p.on_ack(&ack, now, |e| if let PathEvent::Acked { seq, .. } = e {
                            if !received.contains(&seq) || !reported.insert(seq) {
                                bad = Some(seq);
                            }
                        });
                        proptest::prop_assert!(bad.is_none(), "seq {:?} reported but not received, or twice", bad);
                    },
                    4 => if p.inflight_pkts() > 0 && arg % 4 == 0 {
                        p.on_timeout(|_| {});
                    },
                    _ => if !wire.is_empty() && arg % 2 == 0 {
                        wire.remove(usize::from(arg) % wire.len());
                    },
                }
            }
        }
    }
}
