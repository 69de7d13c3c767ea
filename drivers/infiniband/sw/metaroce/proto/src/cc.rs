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
        self.ssthresh = (self.cwnd / 2).max(self.mss.saturating_mul(2));
        self.cwnd = self.mss;
        self.acc = 0;
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

/// The receiving device's fair-share allocator over `N` sender slots.
///
/// A sender is active if it sent a DATA packet within the last `active_ns`;
/// each active sender's share is the link rate divided by their number.
#[derive(Clone, Copy, Debug)]
pub struct RateAlloc<const N: usize> {
    link_kbps: u32,
    active_ns: u64,
    last_seen: [Option<u64>; N],
}

impl<const N: usize> RateAlloc<N> {
    /// An allocator for a link of `link_kbps`.
    pub const fn new(link_kbps: u32, active_ns: u64) -> Self {
        RateAlloc {
            link_kbps,
            active_ns,
            last_seen: [None; N],
        }
    }

    /// Sender `slot` sent a packet at `now` (slots beyond `N` are ignored).
    pub fn note(&mut self, slot: usize, now: u64) {
        if let Some(s) = self.last_seen.get_mut(slot) {
            *s = Some(now);
        }
    }

    /// Number of active senders at `now`.
    pub fn active(&self, now: u64) -> u32 {
        let n = self
            .last_seen
            .iter()
            .filter(|t| t.is_some_and(|t| now.saturating_sub(t) <= self.active_ns))
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// The fair share of one active sender in kbit/s: the link rate less
    /// [`HINT_HEADROOM`] (so that a standing queue drains), divided by
    /// the number of active senders (at least one).
    pub fn share_kbps(&self, now: u64) -> u32 {
        let usable = self.link_kbps - self.link_kbps / HINT_HEADROOM;
        usable / self.active(now).max(1)
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
    fn cap_and_share() {
        // 4096 + 126 bytes at 25 Gbit/s: 1351.04 ns.
        assert_eq!(pace_gap_ns(4096, 25_000_000), Some(1352));
        assert_eq!(pace_gap_ns(4096, 0), None);
        assert_eq!(
            pace_gap_ns(u32::MAX, 1),
            Some(u64::from(u32::MAX) * 8_000_000)
        );
        let mut r = RateAlloc::<8>::new(128_000_000, 100);
        assert_eq!(r.share_kbps(0), 124_000_000);
        for s in 0..4 {
            r.note(s, 10);
        }
        r.note(99, 10);
        assert_eq!(r.share_kbps(50), 31_000_000);
        r.note(0, 150);
        assert_eq!(r.share_kbps(150), 124_000_000);
    }
}
