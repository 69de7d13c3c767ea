// SPDX-License-Identifier: GPL-2.0
//! Congestion control of the MetaRoCE transport (`transport.rst`, section
//! 6): an ECN-driven AIMD window used per path and per connection, the
//! sender's pacing at the receiver's rate hint, and the
//! receiver's fair-share allocator. Integers only; multipliers are Q16
//! (65536 = 1.0).

/// Q16 one.
pub const Q16_ONE: u32 = 1 << 16;
/// Per-path multiplicative decrease on an ECN echo (0.8).
pub const MD_ECN_PATH: u32 = 52_429;
/// Per-connection multiplicative decrease on an ECN echo (0.875).
pub const MD_ECN_CONN: u32 = 57_344;

/// An AIMD congestion window in bytes, with slow start.
///
/// # Invariants
///
/// `mss <= cwnd <= max`, once constructed through [`Aimd::new`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Aimd {
    cwnd: u32,
    ssthresh: u32,
    acc: u32,
    mss: u32,
    max: u32,
    md_q16: u32,
    /// No further decrease before this time (once per RTT).
    hold_until: u64,
    /// `(cwnd, ssthresh)` before the first timeout since the last
    /// acknowledgment or decrease, for [`Aimd::undo_timeout`].
    prior: Option<(u32, u32)>,
}

impl Aimd {
    /// A window of `init_pkts` packets of `mss` bytes, at most `max_pkts`,
    /// decreasing by `md_q16` on congestion.
    pub const fn new(mss: u32, init_pkts: u32, max_pkts: u32, md_q16: u32) -> Self {
        // `Ord::max`/`min`/`clamp` are not `const`: spelled out.
        let mss = if mss == 0 { 1 } else { mss };
        let max = mss.saturating_mul(if max_pkts == 0 { 1 } else { max_pkts });
        let init = mss.saturating_mul(init_pkts);
        Aimd {
            cwnd: if init < mss {
                mss
            } else if init > max {
                max
            } else {
                init
            },
            ssthresh: u32::MAX,
            acc: 0,
            mss,
            max,
            md_q16: if md_q16 > Q16_ONE { Q16_ONE } else { md_q16 },
            hold_until: 0,
            prior: None,
        }
    }

    /// The window in bytes.
    pub const fn cwnd(&self) -> u32 {
        self.cwnd
    }

    /// The slow-start threshold in bytes.
    pub const fn ssthresh(&self) -> u32 {
        self.ssthresh
    }

    /// `bytes` were acknowledged: slow start below `ssthresh`, then one MSS
    /// per window's worth of acknowledged bytes.
    pub fn on_ack(&mut self, bytes: u32) {
        self.prior = None;
        if self.cwnd < self.ssthresh {
            self.cwnd = self.cwnd.saturating_add(bytes).min(self.ssthresh);
        } else {
            self.acc = self.acc.saturating_add(bytes);
            if self.acc >= self.cwnd {
                self.acc = self.acc.saturating_sub(self.cwnd);
                self.cwnd = self.cwnd.saturating_add(self.mss);
            }
        }
        self.cwnd = self.cwnd.clamp(self.mss, self.max);
    }

    /// Congestion was signalled (ECN echo) at `now`; the decrease happens at
    /// most once per `rtt_ns`. Returns true if the window was decreased.
    pub fn on_congestion(&mut self, now: u64, rtt_ns: u64) -> bool {
        if now < self.hold_until {
            return false;
        }
        self.prior = None;
        let reduced = (u64::from(self.cwnd) * u64::from(self.md_q16)) >> 16;
        self.cwnd = u32::try_from(reduced)
            .unwrap_or(u32::MAX)
            .clamp(self.mss, self.max);
        self.ssthresh = self.cwnd;
        self.acc = 0;
        self.hold_until = now.saturating_add(rtt_ns);
        true
    }

    /// A retransmission timeout: restart from one MSS in slow start.
    pub fn on_timeout(&mut self) {
        if self.prior.is_none() {
            self.prior = Some((self.cwnd, self.ssthresh));
        }
        self.ssthresh = (self.cwnd / 2).max(self.mss.saturating_mul(2));
        self.cwnd = self.mss;
        self.acc = 0;
    }

    /// The timeouts since the last acknowledgment or decrease were spurious:
    /// the window and threshold from before the first of them come back.
    pub fn undo_timeout(&mut self) {
        if let Some((cwnd, ssthresh)) = self.prior.take() {
            self.cwnd = cwnd.clamp(self.mss, self.max);
            self.ssthresh = ssthresh;
        }
    }
}

/// Bytes a DATA packet occupies on the link beyond its payload, as the
/// pacer counts them: MRH 60 + UDP 8 + IPv4 20 + Ethernet framing 38.
pub const PACE_OVERHEAD: u32 = 60 + 8 + 20 + 38;

/// Time in ns a packet with `payload` bytes occupies at `kbps` (the
/// receiver's rate hint): the pacing gap; `None` without a hint.
pub fn pace_gap_ns(payload: u32, kbps: u32) -> Option<u64> {
    if kbps == 0 {
        return None;
    }
    // bytes * 8 bits / (kbps * 1000 / 1e9 bits per ns) = bytes * 8e6 / kbps.
    let bits = u64::from(payload.saturating_add(PACE_OVERHEAD)).saturating_mul(8_000_000);
    Some(bits.div_ceil(u64::from(kbps)))
}

/// The allocator hands out all but 1/`HINT_HEADROOM` of the link.
pub const HINT_HEADROOM: u32 = 32;

/// The shortest active-sender window of [`RateAlloc`] (spec 6.4).
pub const ACTIVE_NS: u64 = 100_000;

/// A sender counts as active while its last DATA packet is at most this
/// many packet times (at its current share) old, if that is longer than the
/// allocator's fixed window.
pub const ACTIVE_GAPS: u64 = 4;

/// Rounds of the active-window search in [`RateAlloc::share_kbps`].
const ACTIVE_ROUNDS: usize = 4;

/// The receiving device's fair-share allocator over `N` sender slots.
///
/// A sender is active if it sent a DATA packet within the active window:
/// `active_ns`, or [`ACTIVE_GAPS`] packet times at the share it would get,
/// whichever is longer (a sender paced at a share of a slow link sends
/// less often than `active_ns`: it must still count). Each active sender's
/// share is the usable link rate divided by their number.
#[derive(Clone, Copy, Debug)]
pub struct RateAlloc<const N: usize> {
    link_kbps: u32,
    active_ns: u64,
    mss: u32,
    last_seen: [Option<u64>; N],
    /// Slots from here on were never noted (the scans stop here: a device's
    /// senders fill slots from 0).
    used: usize,
}

impl<const N: usize> RateAlloc<N> {
    /// An allocator for a link of `link_kbps` (0: unknown, no hints) whose
    /// senders send DATA packets of up to `mss` payload bytes.
    pub const fn new(link_kbps: u32, active_ns: u64, mss: u32) -> Self {
        RateAlloc {
            link_kbps,
            active_ns,
            mss,
            last_seen: [None; N],
            used: 0,
        }
    }

    /// The link rate the shares divide (0: unknown).
    pub fn link_kbps(&self) -> u32 {
        self.link_kbps
    }

    /// Sender `slot` sent a packet at `now` (slots beyond `N` are ignored).
    pub fn note(&mut self, slot: usize, now: u64) {
        if let Some(s) = self.last_seen.get_mut(slot) {
            *s = Some(now);
            self.used = self.used.max(slot.saturating_add(1));
        }
    }

    /// Forgets sender `slot` (its connection is gone).
    pub fn forget(&mut self, slot: usize) {
        if let Some(s) = self.last_seen.get_mut(slot) {
            *s = None;
        }
    }

    /// A slot for a sender that has none (a device with more senders than
    /// `N` maps them onto the slots as they send): the first slot never
    /// noted or forgotten, else the one whose sender was seen longest ago.
    /// Taking a slot whose sender is still active undercounts the active
    /// senders by one (with more than `N` of them at once, the share is
    /// that of `N`); its next packet claims a slot again.
    pub fn claim(&self) -> usize {
        let mut best = 0;
        let mut oldest = u64::MAX;
        for (i, s) in self.last_seen.iter().enumerate() {
            match *s {
                None => return i,
                Some(t) if t < oldest => (best, oldest) = (i, t),
                Some(_) => {}
            }
        }
        best
    }

    /// The senders ever noted and not forgotten: when each last sent.
    fn seen(&self) -> impl Iterator<Item = u64> + '_ {
        self.last_seen
            .get(..self.used)
            .unwrap_or(&[])
            .iter()
            .flatten()
            .copied()
    }

    /// Number of senders seen within `window_ns` before `now`.
    fn seen_within(&self, now: u64, window_ns: u64) -> u32 {
        let n = self
            .seen()
            .filter(|&t| now.saturating_sub(t) <= window_ns)
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    fn usable(&self) -> u32 {
        self.link_kbps - self.link_kbps / HINT_HEADROOM
    }

    /// Number of active senders at `now`. The window depends on the share,
    /// which depends on the count: starting from the senders of the last
    /// `active_ns`, the window widens to [`ACTIVE_GAPS`] packet times at the
    /// share of the senders found so far, a few rounds (the count only
    /// grows, so the window only shrinks towards the fixed point from
    /// above and every sender at its share is found).
    pub fn active(&self, now: u64) -> u32 {
        let (mut known, mut within) = (0u32, 0u32);
        for t in self.seen() {
            known = known.saturating_add(1);
            within = within.saturating_add(u32::from(now.saturating_sub(t) <= self.active_ns));
        }
        let mut n = within;
        // Every sender known is in the fixed window (the usual case): no
        // wider window can find more.
        if n == known {
            return n;
        }
        for _ in 0..ACTIVE_ROUNDS {
            let share = self.usable() / n.max(1);
            let gap = pace_gap_ns(self.mss, share).unwrap_or(0);
            let window = gap.saturating_mul(ACTIVE_GAPS).max(self.active_ns);
            let m = self.seen_within(now, window);
            if m <= n {
                break;
            }
            n = m;
        }
        n
    }

    /// The fair share of one active sender in kbit/s: the link rate less
    /// [`HINT_HEADROOM`] (so that a standing queue drains), divided by
    /// the number of active senders (at least one); 0 (no hint) when the
    /// link rate is unknown.
    pub fn share_kbps(&self, now: u64) -> u32 {
        self.usable() / self.active(now).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_start_then_additive() {
        let mut a = Aimd::new(1000, 4, 256, MD_ECN_PATH);
        assert_eq!(a.cwnd(), 4000);
        a.on_ack(4000);
        assert_eq!(a.cwnd(), 8000);
        assert!(a.on_congestion(0, 100));
        assert_eq!(a.cwnd(), 6400); // 8000 * 0.8
        assert!(!a.on_congestion(50, 100)); // once per RTT
        assert!(a.on_congestion(100, 100));
        assert_eq!(a.cwnd(), 5120);
        // Additive: one MSS per cwnd acknowledged.
        a.on_ack(5000);
        assert_eq!(a.cwnd(), 5120);
        a.on_ack(120);
        assert_eq!(a.cwnd(), 6120);
        a.on_timeout();
        assert_eq!((a.cwnd(), a.ssthresh()), (1000, 3060));
        for _ in 0..1000 {
            a.on_congestion(u64::MAX, 0);
        }
        assert_eq!(a.cwnd(), 1000);
        for _ in 0..100_000 {
            a.on_ack(u32::MAX);
        }
        assert_eq!(a.cwnd(), 256_000);
    }

    #[test]
    fn claim_takes_free_then_stalest_slot() {
        let mut r = RateAlloc::<3>::new(3000, 100, 1000);
        assert_eq!(r.claim(), 0);
        r.note(0, 10);
        assert_eq!(r.claim(), 1);
        r.note(1, 5);
        r.note(2, 20);
        // Full: the sender seen longest ago gives its slot.
        assert_eq!(r.claim(), 1);
        r.forget(2);
        assert_eq!(r.claim(), 2);
        r.note(2, 30);
        r.note(1, 40);
        assert_eq!(r.claim(), 0);
    }

    #[test]
    fn cap_and_share() {
        // 4096 + 126 bytes at 25 Gbit/s: 1351.04 ns.
        assert_eq!(pace_gap_ns(4096, 25_000_000), Some(1352));
        assert_eq!(pace_gap_ns(4096, 0), None);
        assert_eq!(
            pace_gap_ns(u32::MAX, 1),
            Some(u64::from(u32::MAX) * 8_000_000)
        );
        let mut r = RateAlloc::<8>::new(128_000_000, 100, 4096);
        assert_eq!(r.share_kbps(0), 124_000_000);
        for s in 0..4 {
            r.note(s, 10);
        }
        r.note(99, 10);
        assert_eq!(r.share_kbps(50), 31_000_000);
        // The others' packets are older than 100 ns and than four packet
        // times at the full rate (4 x 264 ns).
        r.note(0, 5_000);
        assert_eq!(r.share_kbps(5_000), 124_000_000);
        r.forget(0);
        assert_eq!(r.active(5_000), 0);
        assert_eq!(RateAlloc::<8>::new(0, 100, 4096).share_kbps(0), 0);
    }

    #[test]
    fn slow_senders_stay_active() {
        // 775 kbit/s usable (800 less 1/32): four senders at their share of
        // ~194 kbit/s send a 1024-byte packet every ~47 ms, far more than
        // the fixed 100 us window; each must still count.
        let mut r = RateAlloc::<8>::new(800, 100_000, 1024);
        let gap = pace_gap_ns(1024, 775 / 4).unwrap();
        assert!(gap > 40_000_000);
        for s in 0..4u64 {
            // Sender s last sent s quarter-gaps ago.
            r.note(s as usize, 10 * gap - s * gap / 4);
        }
        assert_eq!(r.active(10 * gap), 4);
        assert_eq!(r.share_kbps(10 * gap), 775 / 4);
        // A sender silent for many packet times no longer counts.
        assert_eq!(r.active(10 * gap + 3 * ACTIVE_GAPS * gap), 0);
        // Fast links keep the fixed window: 8 senders at 25 Gbit/s send a
        // 4 KiB packet every ~11 us, inside 100 us.
        let mut f = RateAlloc::<8>::new(25_000_000, 100_000, 4096);
        for s in 0..8 {
            f.note(s, 1_000_000 - 1_000 * s as u64);
        }
        f.note(7, 1_000_000 - 150_000);
        assert_eq!(f.active(1_000_000), 7);
    }

    /// The count of active senders as first written: every slot scanned in
    /// every round.
    fn active_reference<const N: usize>(r: &RateAlloc<N>, now: u64) -> u32 {
        let within = |w: u64| {
            r.last_seen
                .iter()
                .filter(|t| t.is_some_and(|t| now.saturating_sub(t) <= w))
                .count() as u32
        };
        let mut n = within(r.active_ns);
        for _ in 0..ACTIVE_ROUNDS {
            let share = r.usable() / n.max(1);
            let gap = pace_gap_ns(r.mss, share).unwrap_or(0);
            let m = within(gap.saturating_mul(ACTIVE_GAPS).max(r.active_ns));
            if m <= n {
                break;
            }
            n = m;
        }
        n
    }

    proptest::proptest! {
        #[test]
        fn active_matches_the_reference(
            link_log in 0u32..28,
            active_ns in 1u64..1_000_000,
            mss in 64u32..9000,
            // Ages spread over many orders of magnitude, so that senders
            // fall inside, between and beyond the fixed and widened windows.
            ops in proptest::collection::vec((0usize..70, 0u32..40, proptest::num::u64::ANY, 0u8..4), 0..40),
            now in 0u64..1 << 42,
        ) {
            let mut r = RateAlloc::<64>::new(1 << link_log, active_ns, mss);
            for (slot, age_log, bits, what) in ops {
                let age = bits % (1u64 << age_log).max(1);
                if what == 0 { r.forget(slot) } else { r.note(slot, now.saturating_sub(age)) }
                proptest::prop_assert_eq!(r.active(now), active_reference(&r, now));
            }
        }
    }
}
