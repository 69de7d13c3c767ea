// SPDX-License-Identifier: GPL-2.0
//! Target `sack`: the SACK bitmap and per-path sequence logic of the
//! MetaRoCE transport (`sack.rs`, `path.rs`; `transport.rst` sections 4,
//! 5.1-5.5, 6.1, 6.2).
//!
//! Two things are driven by one step sequence:
//! * a receive window [`SeqWindow`] starting at an arbitrary sequence
//!   number (so the 2^32 wrap is reached), at the per-path size (256 bits)
//!   and at the Dsn-window size (1024 bits), fed marks and floors anywhere
//!   (around the cumulative point, at the window's edge, half the sequence
//!   space away); each is compared after every step with a naive model (a
//!   set of received numbers after the cumulative point, section 4 rules 1
//!   and 2);
//! * a sender path [`TxPath`] fed sends, a receiver [`RxPath`] fed some of
//!   those transmissions (in any order, with their PathFloor), honest ACKs
//!   built by that receiver and forged ACKs with arbitrary CumSeq, AckSeq
//!   (relative to the path's base or next, or raw 32-bit values) and
//!   arbitrary 256-bit bitmaps, retransmission timeouts and time steps.
//!
//! Checked for the sender path against a model of every transmission:
//! * an ACK whose CumSeq is after what was sent is refused and changes
//!   nothing; otherwise every in-flight transmission it covers (before
//!   CumSeq, or its Sack bit set) is reported acked, once, with its Dsn and
//!   length, and nothing else: never a sequence number that was not sent,
//!   nor one already acked or declared lost;
//! * a transmission is declared lost exactly when it is in flight, not
//!   covered, and before the newest acknowledged sequence number
//!   `max(CumSeq - 1, highest Sack bit, AckSeq)` (section 5.3, duplicate
//!   threshold one), and at most once; an RTO declares every in-flight one
//!   lost (5.5). The spec does not say whether an AckSeq the path never
//!   sent counts: the model, like the core, ignores it; Sack bits count as
//!   the formula says even for numbers beyond the last sent (a forged ACK
//!   can only cause spurious retransmissions that way);
//! * an honest ACK (from the receiver model) never declares lost a
//!   transmission the receiver got;
//! * in-flight packets and bytes, PathFloor (the oldest in flight) and
//!   the next sequence number follow the model; never more than 256
//!   outstanding (`can_send` refuses at the limit);
//! * the smallest RTT is the smallest `now - sent_at` of an AckSeq among the
//!   last 256 sent and not acknowledged, in flight or declared lost (5.2),
//!   one sample per transmission; the RTO deadline exists exactly while
//!   packets are in flight;
//! * states: an ACK that acknowledges something makes the path ACTIVE; an
//!   RTO makes it RECOVERING, the third in a row FAILED (6.1); the window
//!   restarts at one MSS after an RTO (6.2), always within `[MSS, 256
//!   MSS]`; until the first RTO it grows by exactly the bytes of the
//!   transmissions each ACK acknowledges (6.2: slow start, `cwnd += b`
//!   while cwnd < ssthresh, which is infinite until then; the path is never
//!   fed an ECN decrease here), at most to 256 MSS;
//! * the ECN echo is reported exactly when CeCount moved forward;
//! * the repath epoch says "repath" as soon as 16 losses were counted in
//!   an epoch of at most 64 sends, and starts a new epoch then or when 64
//!   sends are full (6.1; the core counts the losses detected while the
//!   epoch's sends happen, which is how the harness reads the spec's "16
//!   of the last 64 packets it sent").
//!
//! The sender's own sequence space starts at 0 (section 5.1) and cannot
//! wrap within an input; its wrap is covered by the receive windows above,
//! which start anywhere, and by ACK fields anywhere in the 2^32 space.

use super::enc::{steps, Enc, Wire};
use arbitrary::{Result, Unstructured};
use metaroce_proto::cc::{Aimd, MD_ECN_PATH};
use metaroce_proto::mrc_wire::AckPkt;
use metaroce_proto::path::{
    PathEvent, PathState, RxPath, SlotWindow, TxPath, FAIL_AFTER_RTO, PATH_WINDOW, REPATH_EPOCH,
    REPATH_LOSS,
};
use metaroce_proto::sack::{highest_bit, Mark, SeqWindow};
use std::collections::BTreeSet;

/// Most steps run per input.
pub const MAX_STEPS: usize = 1500;
const RTO_INIT: u64 = 1_000_000;
const RTO_MIN: u64 = 50_000;
const RTO_MAX: u64 = 100_000_000;

/// Parameters.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cfg {
    /// First sequence number of the stand-alone receive windows.
    pub start: u32,
    /// MSS (modulo 4096, plus one).
    pub mss: u16,
    /// Initial window in packets (modulo 8, plus one).
    pub init: u8,
    /// Bit 0: sends ignore the congestion window (not the 256 limit).
    pub flags: u8,
}

/// Selects a sequence number.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sel {
    /// 0: the window's / path's base + `v` (as i16), 1: next + `v` (i16),
    /// 2: base + 256 + `v` (i16), 3: base + 2^31 + `v` (i16), 4..: `v` raw.
    pub mode: u8,
    /// Offset or raw value.
    pub v: u32,
}

/// One step.
#[derive(Clone, Debug)]
pub enum Step {
    /// Mark a sequence number in the stand-alone windows.
    Mark(Sel),
    /// Move the stand-alone windows' floor.
    Advance(Sel),
    /// Send a packet of `len` (modulo 4 MSS) bytes on the path.
    Send(u16),
    /// Deliver transmission `idx` (modulo those sent, from the newest) to
    /// the receiver; `ce`: it was CE-marked.
    Deliver(u16, bool),
    /// The receiver's ACK, with this rate hint.
    AckHonest,
    /// A forged ACK.
    AckForged {
        /// CumSeq.
        cum: Sel,
        /// AckSeq.
        ack_seq: Sel,
        /// Bitmap.
        sack: [u64; 4],
        /// CeCount.
        ce: u32,
    },
    /// The path's RTO fires (if anything is in flight: at its deadline).
    Timeout,
    /// Time passes.
    Wait(u32),
}

impl Wire for Cfg {
    fn decode(u: &mut Unstructured<'_>) -> Result<Self> {
        Ok(Cfg {
            start: u.arbitrary()?,
            mss: u.arbitrary()?,
            init: u.arbitrary()?,
            flags: u.arbitrary()?,
        })
    }
    fn encode(&self, e: &mut Enc) {
        e.u32(self.start).u16(self.mss).u8(self.init).u8(self.flags);
    }
}

impl Wire for Sel {
    fn decode(u: &mut Unstructured<'_>) -> Result<Self> {
        Ok(Sel {
            mode: u.arbitrary()?,
            v: u.arbitrary()?,
        })
    }
    fn encode(&self, e: &mut Enc) {
        e.u8(self.mode).u32(self.v);
    }
}

impl Wire for Step {
    fn decode(u: &mut Unstructured<'_>) -> Result<Self> {
        let tag: u8 = u.arbitrary()?;
        Ok(match tag % 16 {
            0 | 1 => Step::Mark(Sel::decode(u)?),
            2 => Step::Advance(Sel::decode(u)?),
            3..=5 => Step::Send(u.arbitrary()?),
            6..=8 => Step::Deliver(u.arbitrary()?, u.arbitrary()?),
            9 | 10 => Step::AckHonest,
            11 | 12 => Step::AckForged {
                cum: Sel::decode(u)?,
                ack_seq: Sel::decode(u)?,
                sack: u.arbitrary()?,
                ce: u.arbitrary()?,
            },
            13 => Step::Timeout,
            _ => Step::Wait(u.arbitrary()?),
        })
    }
    fn encode(&self, e: &mut Enc) {
        match self {
            Step::Mark(s) => {
                e.u8(0);
                s.encode(e);
            }
            Step::Advance(s) => {
                e.u8(2);
                s.encode(e);
            }
            Step::Send(l) => {
                e.u8(3).u16(*l);
            }
            Step::Deliver(i, ce) => {
                e.u8(6).u16(*i).bool(*ce);
            }
            Step::AckHonest => {
                e.u8(9);
            }
            Step::AckForged {
                cum,
                ack_seq,
                sack,
                ce,
            } => {
                e.u8(11);
                cum.encode(e);
                ack_seq.encode(e);
                for w in sack {
                    e.u64(*w);
                }
                e.u32(*ce);
            }
            Step::Timeout => {
                e.u8(13);
            }
            Step::Wait(ns) => {
                e.u8(14).u32(*ns);
            }
        }
    }
}

target_input!("Parameters.");

/// Signed distance of two wrapping sequence numbers (the harness's own).
fn diff(a: u32, b: u32) -> i64 {
    i64::from(a.wrapping_sub(b) as i32)
}

fn pick(s: &Sel, base: u32, next: u32) -> u32 {
    let off = s.v as u16 as i16 as i32 as u32;
    match s.mode % 6 {
        0 => base.wrapping_add(off),
        1 => next.wrapping_add(off),
        2 => base.wrapping_add(256).wrapping_add(off),
        3 => base.wrapping_add(1 << 31).wrapping_add(off),
        _ => s.v,
    }
}

/// The naive receive window: the cumulative point and the set of numbers
/// received after it.
struct WinModel {
    span: u32,
    cum: u32,
    got: BTreeSet<u32>,
}

impl WinModel {
    fn slide(&mut self) {
        while self.got.remove(&self.cum) {
            self.cum = self.cum.wrapping_add(1);
        }
    }
    fn mark(&mut self, s: u32) -> Mark {
        let d = diff(s, self.cum);
        if d < 0 {
            return Mark::Duplicate;
        }
        if d == 0 {
            self.cum = self.cum.wrapping_add(1);
            self.slide();
            return Mark::New;
        }
        if d > i64::from(self.span) {
            return Mark::TooFar;
        }
        if self.got.insert(s) {
            Mark::New
        } else {
            Mark::Duplicate
        }
    }
    fn advance(&mut self, f: u32) {
        if diff(f, self.cum) <= 0 {
            return;
        }
        self.cum = f;
        self.got.retain(|&s| diff(s, f) >= 0);
        self.slide();
    }
    fn contains(&self, s: u32) -> bool {
        match diff(s, self.cum) {
            d if d < 0 => true,
            0 => false,
            _ => self.got.contains(&s),
        }
    }
}

fn check_window<const W: usize>(w: &SeqWindow<W>, m: &WinModel, probe: u32) {
    assert_eq!(w.cum(), m.cum, "cumulative point");
    let mut want = [0u64; W];
    for &s in &m.got {
        let i = s.wrapping_sub(m.cum).wrapping_sub(1);
        assert!(i < m.span, "model holds {s} outside the span");
        want[(i / 64) as usize] |= 1 << (i % 64);
    }
    assert_eq!(w.bits(), &want, "bitmap after cum {}", m.cum);
    assert!(
        !w.contains(w.cum()),
        "the cumulative point counts as received"
    );
    assert_eq!(
        w.contains(probe),
        m.contains(probe),
        "contains({probe}), cum {}",
        m.cum
    );
    let d = diff(probe, m.cum);
    assert_eq!(
        w.fits(probe),
        d <= 0 || d <= i64::from(m.span),
        "fits({probe}), cum {}",
        m.cum
    );
    assert_eq!(
        highest_bit(w.bits()),
        m.got.iter().map(|&s| s.wrapping_sub(m.cum) - 1).max()
    );
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum St {
    InFlight,
    Acked,
    Lost,
}

#[derive(Clone, Copy, Debug)]
struct Tx {
    dsn: u32,
    len: u32,
    at: u64,
    floor: u32,
    st: St,
    delivered: bool,
    /// An ACK's AckSeq named it and it gave an RTT sample.
    sampled: bool,
}

struct PathModel {
    tx: Vec<Tx>,
    last_ce: u32,
    rto_in_row: u8,
    epoch_sent: u32,
    epoch_lost: u32,
    min_rtt: u64,
    /// The window has only grown since the path started (no RTO, no ECN):
    /// slow start with ssthresh infinite.
    cwnd: Option<u32>,
}

impl PathModel {
    fn next(&self) -> u32 {
        self.tx.len() as u32
    }
    fn base(&self) -> u32 {
        self.tx
            .iter()
            .position(|t| t.st == St::InFlight)
            .map_or(self.next(), |i| i as u32)
    }
    fn inflight(&self) -> (u32, u32) {
        let f = self.tx.iter().filter(|t| t.st == St::InFlight);
        (f.clone().count() as u32, f.map(|t| t.len).sum())
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
    let c = input.cfg;
    let mss = u32::from(c.mss % 4096) + 1;
    let init = u32::from(c.init % 8) + 1;
    let ignore_cwnd = c.flags & 1 != 0;
    // Stand-alone windows.
    let mut w4 = SeqWindow::<4>::new(c.start);
    let mut w16 = SeqWindow::<16>::new(c.start);
    let mut m4 = WinModel {
        span: 256,
        cum: c.start,
        got: BTreeSet::new(),
    };
    let mut m16 = WinModel {
        span: 1024,
        cum: c.start,
        got: BTreeSet::new(),
    };
    // The path.
    let mut p = TxPath::new(50_000, Aimd::new(mss, init, PATH_WINDOW, MD_ECN_PATH));
    // Its transmission slots (the connection's flight holds them).
    let mut w = SlotWindow::EMPTY;
    // The model below knows the rules of sections 5.2-5.5, not the late
    // acknowledgments of 5.5.1 (added after it; the path's property test
    // `acknowledged_only_if_received` covers those): off, as in the kernel.
    p.late_acks = false;
    let mut rx = RxPath::default();
    let mut pm = PathModel {
        tx: Vec::new(),
        last_ce: 0,
        rto_in_row: 0,
        epoch_sent: 0,
        epoch_lost: 0,
        min_rtt: 0,
        cwnd: Some(p.cc.cwnd()),
    };
    let mut now = 1u64;
    let mut dsn = 0u32;
    for step in &input.steps {
        now += 1;
        if super::trace() {
            eprintln!(
                "step {step:?} (base {} next {} cwnd {})",
                pm.base(),
                pm.next(),
                p.cc.cwnd()
            );
        }
        match step {
            Step::Mark(s) => {
                let seq = pick(s, m4.cum, m4.cum.wrapping_add(1));
                assert_eq!(
                    w4.mark(seq),
                    m4.mark(seq),
                    "mark({seq}) in the 256-bit window"
                );
                let seq16 = pick(s, m16.cum, m16.cum.wrapping_add(1));
                assert_eq!(
                    w16.mark(seq16),
                    m16.mark(seq16),
                    "mark({seq16}) in the 1024-bit window"
                );
                check_window(&w4, &m4, seq.wrapping_add(3));
                check_window(&w16, &m16, seq16.wrapping_sub(1));
            }
            Step::Advance(s) => {
                let f = pick(s, m4.cum, m4.cum.wrapping_add(1));
                w4.advance_to(f);
                m4.advance(f);
                let f16 = pick(s, m16.cum, m16.cum.wrapping_add(1));
                w16.advance_to(f16);
                m16.advance(f16);
                check_window(&w4, &m4, f);
                check_window(&w16, &m16, f16.wrapping_add(64));
            }
            Step::Send(l) => {
                let len = u32::from(*l) % (4 * mss);
                let limit = pm.next() - pm.base() >= PATH_WINDOW;
                if limit {
                    assert!(
                        !p.can_send(len) && p.room() == 0,
                        "room beyond 256 outstanding"
                    );
                    continue;
                }
                if !ignore_cwnd && !p.can_send(len) {
                    continue;
                }
                let floor = p.floor();
                assert_eq!(floor, pm.base(), "PathFloor is not the oldest in flight");
                let seq = p.on_send(&mut w, dsn, len, now, 0);
                assert_eq!(seq, pm.next(), "sequence numbers not contiguous");
                pm.tx.push(Tx {
                    dsn,
                    len,
                    at: now,
                    floor,
                    st: St::InFlight,
                    delivered: false,
                    sampled: false,
                });
                pm.epoch_sent += 1;
                dsn = dsn.wrapping_add(1);
            }
            Step::Deliver(i, ce) => {
                if pm.tx.is_empty() {
                    continue;
                }
                let k = pm.tx.len() - 1 - usize::from(*i) % pm.tx.len();
                let t = pm.tx[k];
                // Receiver rules 1-3 (section 4), as conn.rs applies them.
                let mut win = rx.win;
                win.advance_to(t.floor);
                if !win.fits(k as u32) {
                    // Only a sender that broke the 256 limit gets here.
                    panic!(
                        "transmission {k} (floor {}) beyond the receiver's window at {}",
                        t.floor,
                        win.cum()
                    );
                }
                win.mark(k as u32);
                rx.win = win;
                if *ce {
                    rx.ce_count = rx.ce_count.wrapping_add(1);
                }
                rx.ack_seq = k as u32;
                pm.tx[k].delivered = true;
            }
            Step::AckHonest => {
                let a = rx.ack(0, 1, 0);
                ack((&mut p, &mut w), &mut pm, &a, now, true, mss);
            }
            Step::AckForged {
                cum,
                ack_seq,
                sack,
                ce,
            } => {
                let (b, n) = (pm.base(), pm.next());
                let a = AckPkt {
                    path: 0,
                    conn: 1,
                    cum: pick(cum, b, n),
                    ack_seq: pick(ack_seq, b, n),
                    rate_hint_kbps: 0,
                    ce_count: *ce,
                    sack: *sack,
                    rnr: false,
                };
                ack((&mut p, &mut w), &mut pm, &a, now, false, mss);
            }
            Step::Timeout => {
                let dl = p.deadline(&w, RTO_INIT, RTO_MIN, RTO_MAX);
                let (n, _) = pm.inflight();
                assert_eq!(
                    dl.is_some(),
                    n > 0,
                    "RTO deadline without packets in flight or none with them"
                );
                let Some(dl) = dl else { continue };
                let oldest = pm.tx[pm.base() as usize].at;
                assert!(
                    dl > oldest && dl <= oldest + RTO_MAX,
                    "deadline {dl} for a packet sent at {oldest}"
                );
                now = now.max(dl);
                let mut lost = Vec::new();
                p.on_timeout(&mut w, |e| match e {
                    PathEvent::Lost { dsn, seq } => lost.push((dsn, seq)),
                    e => panic!("RTO reported {e:?}"),
                });
                let want: Vec<(u32, u32)> = pm
                    .tx
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| t.st == St::InFlight)
                    .map(|(s, t)| (t.dsn, s as u32))
                    .collect();
                assert_eq!(lost, want, "RTO losses");
                for &(_, s) in &lost {
                    pm.tx[s as usize].st = St::Lost;
                }
                pm.epoch_lost += lost.len() as u32;
                pm.rto_in_row = pm.rto_in_row.saturating_add(1);
                let st = if pm.rto_in_row >= FAIL_AFTER_RTO {
                    PathState::Failed
                } else {
                    PathState::Recovering
                };
                assert_eq!(p.state, st, "state after {} RTOs in a row", pm.rto_in_row);
                assert_eq!(p.cc.cwnd(), mss, "window after an RTO");
                pm.cwnd = None;
                epoch(&mut p, &mut pm);
            }
            Step::Wait(ns) => now += u64::from(*ns),
        }
        check_path(&p, &pm, mss);
    }
}

fn epoch(p: &mut TxPath, pm: &mut PathModel) {
    let want = pm.epoch_lost >= u32::from(REPATH_LOSS);
    if want || pm.epoch_sent >= u32::from(REPATH_EPOCH) {
        pm.epoch_sent = 0;
        pm.epoch_lost = 0;
    }
    assert_eq!(p.loss_epoch_says_repath(), want, "repath epoch");
}

fn ack(
    (p, w): (&mut TxPath, &mut SlotWindow),
    pm: &mut PathModel,
    a: &AckPkt,
    now: u64,
    honest: bool,
    mss: u32,
) {
    let (base, next) = (pm.base(), pm.next());
    let mut ev = Vec::new();
    let before_state = p.state;
    let before_cwnd = p.cc.cwnd();
    let r = p.on_ack(Some(w), a, now, |e| ev.push(e));
    if super::trace() {
        eprintln!("  ack {a:?} -> {r:?} {ev:?}");
    }
    if diff(a.cum, next) > 0 {
        assert_eq!(
            r, None,
            "ACK with CumSeq {} beyond next {next} accepted",
            a.cum
        );
        assert!(ev.is_empty(), "refused ACK reported events");
        assert_eq!((p.state, p.cc.cwnd()), (before_state, before_cwnd));
        return;
    }
    let echo = r.expect("consistent ACK refused");
    let covered = |s: u32| {
        let i = s.wrapping_sub(a.cum).wrapping_sub(1);
        diff(s, a.cum) < 0 || (i < 256 && a.sack[(i / 64) as usize] >> (i % 64) & 1 == 1)
    };
    let mut newest = a.cum.wrapping_sub(1);
    if let Some(h) = highest_bit(&a.sack) {
        newest = a.cum.wrapping_add(1).wrapping_add(h);
    }
    let ack_seq_sent = a.ack_seq.wrapping_sub(base) < next.wrapping_sub(base);
    if ack_seq_sent && diff(a.ack_seq, newest) > 0 {
        newest = a.ack_seq;
    }
    // RTT sample from AckSeq if it is recent and not acknowledged, once.
    // (Numbers before the first ever sent: the core's slots for them are
    // empty, i.e. acknowledged.)
    if a.ack_seq < next && next - a.ack_seq <= 256 {
        let t = &mut pm.tx[a.ack_seq as usize];
        if t.st != St::Acked && !t.sampled {
            t.sampled = true;
            let rtt = now.saturating_sub(t.at).max(1);
            pm.min_rtt = if pm.min_rtt == 0 {
                rtt
            } else {
                pm.min_rtt.min(rtt)
            };
        }
    }
    let mut want = Vec::new();
    let mut acked_bytes = 0u32;
    for (s, t) in pm.tx.iter_mut().enumerate() {
        let s = s as u32;
        if t.st != St::InFlight {
            continue;
        }
        if covered(s) {
            want.push(PathEvent::Acked {
                dsn: t.dsn,
                seq: s,
                len: t.len,
            });
            t.st = St::Acked;
            acked_bytes += t.len;
        } else if diff(s, newest) < 0 {
            assert!(
                !(honest && t.delivered),
                "honest ACK declares delivered transmission {s} lost"
            );
            want.push(PathEvent::Lost { dsn: t.dsn, seq: s });
            t.st = St::Lost;
            pm.epoch_lost += 1;
        }
    }
    // The core reports the cumulative part, then the Sack bits, then the
    // losses: compare as sets of events (each at most once).
    let key = |e: &PathEvent| match *e {
        PathEvent::Acked { seq, .. } => (0, seq),
        PathEvent::Lost { seq, .. } => (1, seq),
    };
    let mut got = ev.clone();
    got.sort_by_key(key);
    want.sort_by_key(key);
    assert_eq!(got, want, "events of ACK {a:?} (base {base}, next {next})");
    let ce = diff(a.ce_count, pm.last_ce) > 0;
    assert_eq!(echo, ce, "ECN echo");
    if ce {
        pm.last_ce = a.ce_count;
    }
    if acked_bytes > 0 || want.iter().any(|e| matches!(e, PathEvent::Acked { .. })) {
        assert_eq!(
            p.state,
            PathState::Active,
            "an acknowledgment leaves the path {:?}",
            p.state
        );
        pm.rto_in_row = 0;
    } else {
        assert_eq!(
            p.state, before_state,
            "an ACK that acknowledged nothing changed the state"
        );
    }
    // Slow start (section 6.2): `cwnd += b` while below ssthresh, which is
    // infinite until the first RTO or ECN reduction; at most 256 MSS.
    if let Some(w) = pm.cwnd {
        let grown = w.saturating_add(acked_bytes).min(256 * mss);
        assert_eq!(
            p.cc.cwnd(),
            grown,
            "slow start: {w} + {acked_bytes} acknowledged bytes"
        );
        pm.cwnd = Some(grown);
    }
    epoch(p, pm);
}

fn check_path(p: &TxPath, pm: &PathModel, mss: u32) {
    let (n, bytes) = pm.inflight();
    assert_eq!(
        (p.inflight_pkts(), p.inflight_bytes()),
        (n, bytes),
        "in flight"
    );
    assert_eq!(p.floor(), pm.base(), "PathFloor");
    assert_eq!(p.next_seq(), pm.next(), "next sequence number");
    assert!(
        p.next_seq().wrapping_sub(p.floor()) <= PATH_WINDOW,
        "more than 256 outstanding"
    );
    let w = p.cc.cwnd();
    assert!(
        w >= mss && w <= 256 * mss,
        "window {w} outside [MSS, 256 MSS] (MSS {mss})"
    );
    assert_eq!(p.rtt.min(), pm.min_rtt, "smallest RTT sample");
    let rto = p.rtt.rto(RTO_INIT, RTO_MIN, RTO_MAX);
    assert!((RTO_MIN..=RTO_MAX).contains(&rto), "RTO {rto}");
}
