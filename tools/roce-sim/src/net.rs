//! Lossy, duplicating, reordering two-way link with virtual time.
//!
//! Each direction serializes packets at a fixed rate and delivers them
//! after a fixed propagation delay. A packet may be dropped, duplicated or
//! delayed by a random extra amount (which reorders it behind later
//! packets), each with its own probability. Routers also rewrite the
//! fields the ICRC masks (TTL, ECN), to show the ICRC ignores them.

use super::rng::Rng;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Link and impairment parameters.
#[derive(Clone, Copy, Debug)]
pub struct NetConfig {
    /// Probability that a packet is lost.
    pub loss: f64,
    /// Probability that a packet is delivered twice.
    pub dup: f64,
    /// Probability that a packet is delayed by up to `reorder_ns` extra.
    pub reorder: f64,
    /// Largest extra delay of a reordered packet.
    pub reorder_ns: u64,
    /// One-way propagation delay.
    pub latency_ns: u64,
    /// Line rate in Gbit/s.
    pub rate_gbps: u64,
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            loss: 0.0,
            dup: 0.0,
            reorder: 0.0,
            reorder_ns: 20_000,
            latency_ns: 2_000,
            rate_gbps: 25,
        }
    }
}

/// Counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetStats {
    /// Packets handed to the network.
    pub sent: u64,
    /// Packets lost (impairment or cut link).
    pub dropped: u64,
    /// Extra copies delivered.
    pub duplicated: u64,
    /// Packets given an extra delay.
    pub reordered: u64,
}

/// A packet on the wire: arrival time, sequence number (for a stable
/// order), destination endpoint, bytes.
type InFlight = (u64, u64, usize, Vec<u8>);

/// The network between endpoint 0 and endpoint 1.
pub struct Network {
    cfg: NetConfig,
    rng: Rng,
    in_flight: BinaryHeap<Reverse<InFlight>>,
    seq: u64,
    link_free: [u64; 2],
    /// False once the link is cut: every packet is lost.
    pub up: bool,
    /// Counters.
    pub stats: NetStats,
}

/// Ethernet preamble, header, FCS and inter-frame gap added to each frame
/// when computing its serialization time.
const FRAMING: u64 = 8 + 14 + 4 + 12;

impl Network {
    /// A network with its own random stream.
    pub fn new(cfg: NetConfig, seed: u64) -> Self {
        Network {
            cfg,
            rng: Rng::new(seed),
            in_flight: BinaryHeap::new(),
            seq: 0,
            link_free: [0; 2],
            up: true,
            stats: NetStats::default(),
        }
    }

    /// True if endpoint `from` may start sending at `now`.
    pub fn can_send(&self, from: usize, now: u64) -> bool {
        self.link_free[from] <= now
    }

    /// When endpoint `from`'s transmitter becomes free, if after `now`.
    pub fn busy_until(&self, from: usize, now: u64) -> Option<u64> {
        Some(self.link_free[from]).filter(|&t| t > now)
    }

    /// Sends an IP packet from endpoint `from` to the other one; returns
    /// false if the network lost it.
    pub fn send(&mut self, from: usize, now: u64, mut pkt: Vec<u8>) -> bool {
        let bits = (pkt.len() as u64 + FRAMING) * 8;
        let start = self.link_free[from].max(now);
        self.link_free[from] = start + bits.div_ceil(self.cfg.rate_gbps);
        self.stats.sent += 1;
        if !self.up || self.rng.chance(self.cfg.loss) {
            self.stats.dropped += 1;
            return false;
        }
        // A router on the way: decrement the TTL and mark ECN (the IPv4
        // checksum is left stale: all three are masked out of the ICRC).
        pkt[8] = pkt[8].wrapping_sub(1);
        if self.rng.chance(0.5) {
            pkt[1] |= 0x03;
        }
        let mut at = self.link_free[from] + self.cfg.latency_ns;
        if self.rng.chance(self.cfg.reorder) {
            self.stats.reordered += 1;
            at += 1 + self.rng.below(self.cfg.reorder_ns);
        }
        let to = 1 - from;
        if self.rng.chance(self.cfg.dup) {
            self.stats.duplicated += 1;
            let later = at + self.rng.below(self.cfg.reorder_ns);
            self.push(later, to, pkt.clone());
        }
        self.push(at, to, pkt);
        true
    }

    fn push(&mut self, at: u64, to: usize, pkt: Vec<u8>) {
        self.seq += 1;
        self.in_flight.push(Reverse((at, self.seq, to, pkt)));
    }

    /// Arrival time of the next packet.
    pub fn next_arrival(&self) -> Option<u64> {
        self.in_flight.peek().map(|Reverse((t, ..))| *t)
    }

    /// Removes a packet that has arrived by `now`: (destination, bytes).
    pub fn pop_arrived(&mut self, now: u64) -> Option<(usize, Vec<u8>)> {
        if self.next_arrival()? > now {
            return None;
        }
        self.in_flight
            .pop()
            .map(|Reverse((_, _, to, pkt))| (to, pkt))
    }
}
