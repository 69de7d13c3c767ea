//! Links with FIFO queues, serialization at a line rate, propagation delay,
//! random and bursty (Gilbert-Elliott) loss, reordering, ECN marking above a
//! queue threshold, a tail-drop buffer and failure at a given time.

use roce_sim::rng::Rng;
use std::collections::VecDeque;

/// Ethernet preamble, header, FCS and inter-frame gap per frame.
pub const FRAMING: u64 = 8 + 14 + 4 + 12;

/// Two-state bursty loss: in the bad state packets are lost with
/// `loss_bad`, in the good state with the link's `loss`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GilbertElliott {
    /// Per-packet probability of moving good -> bad.
    pub p_good_bad: f64,
    /// Per-packet probability of moving bad -> good.
    pub p_bad_good: f64,
    /// Loss probability in the bad state.
    pub loss_bad: f64,
}

impl GilbertElliott {
    /// A model with mean loss `mean` in bursts of mean length `burst`
    /// packets, losing every packet in the bad state.
    pub fn with_mean(mean: f64, burst: f64) -> Self {
        let p_bad_good = 1.0 / burst.max(1.0);
        // Stationary share of the bad state = mean.
        let p_good_bad = p_bad_good * mean / (1.0 - mean).max(1e-9);
        GilbertElliott {
            p_good_bad,
            p_bad_good,
            loss_bad: 1.0,
        }
    }
}

/// Parameters of one link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkCfg {
    /// Line rate in Mbit/s.
    pub mbps: u64,
    /// Propagation delay.
    pub delay_ns: u64,
    /// Random loss probability (good state if bursty).
    pub loss: f64,
    /// Bursty loss model.
    pub ge: Option<GilbertElliott>,
    /// Probability of an extra delay of up to `reorder_ns` (reordering
    /// within the link).
    pub reorder: f64,
    /// Largest extra delay.
    pub reorder_ns: u64,
    /// Mark ECT packets CE when at least this many packets are queued
    /// (0: never).
    pub ecn_pkts: usize,
    /// Tail-drop buffer in packets.
    pub buf_pkts: usize,
    /// The link fails (drops everything) from this time on.
    pub fail_at_ns: Option<u64>,
}

impl Default for LinkCfg {
    fn default() -> Self {
        LinkCfg {
            mbps: 10_000,
            delay_ns: 5_000,
            loss: 0.0,
            ge: None,
            reorder: 0.0,
            reorder_ns: 5_000,
            ecn_pkts: 20,
            buf_pkts: 1000,
            fail_at_ns: None,
        }
    }
}

/// A packet in the simulated network.
#[derive(Clone, Debug)]
pub struct Pkt {
    /// IP payload bytes counted on the wire (UDP + transport + payload,
    /// plus 20 bytes of IPv4 header added by `wire_len`).
    pub bytes: Vec<u8>,
    /// UDP source port.
    pub src_port: u16,
    /// Index of the sender the packet belongs to.
    pub flow: usize,
    /// ECN-capable.
    pub ect: bool,
    /// Congestion experienced.
    pub ce: bool,
}

impl Pkt {
    /// Bytes on the wire: IPv4 + UDP + `bytes` + Ethernet framing.
    pub fn wire_len(&self) -> u64 {
        self.bytes.len() as u64 + 20 + 8 + FRAMING
    }
}

/// Counters of one link.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LinkStats {
    /// Packets that entered the link's queue.
    pub pkts: u64,
    /// Their bytes (`Pkt::bytes`).
    pub bytes: u64,
    /// Lost to random or bursty loss.
    pub lost: u64,
    /// Lost because the link failed.
    pub failed: u64,
    /// Tail drops.
    pub overflow: u64,
    /// CE marks applied.
    pub ce_marks: u64,
    /// Largest queue (packets).
    pub max_queue: usize,
    /// Sum of queue lengths seen by arriving packets.
    pub queue_sum: u64,
}

impl LinkStats {
    /// Mean queue length seen by arriving packets.
    pub fn avg_queue(&self) -> f64 {
        if self.pkts == 0 {
            0.0
        } else {
            self.queue_sum as f64 / self.pkts as f64
        }
    }
}

/// One link: a FIFO queue in front of a transmitter.
pub struct Link {
    /// Parameters.
    pub cfg: LinkCfg,
    /// Counters.
    pub stats: LinkStats,
    /// Queued packets, head in transmission.
    pub queue: VecDeque<(Pkt, usize)>,
    /// The transmitter is busy.
    pub busy: bool,
    bad: bool,
    down: bool,
}

/// What [`Link::enqueue`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enq {
    /// Queued; the transmitter was idle and must be started.
    Start,
    /// Queued behind others.
    Queued,
    /// Dropped.
    Dropped,
}

impl Link {
    /// A link with `cfg`.
    pub fn new(cfg: LinkCfg) -> Self {
        Link {
            cfg,
            stats: LinkStats::default(),
            queue: VecDeque::new(),
            busy: false,
            bad: false,
            down: false,
        }
    }

    /// Serialization time of `p`.
    pub fn ser_ns(&self, p: &Pkt) -> u64 {
        (p.wire_len() * 8 * 1000).div_ceil(self.cfg.mbps.max(1))
    }

    /// Fails the link: queued packets are lost and every later one too.
    pub fn fail(&mut self) {
        self.down = true;
        self.stats.failed += self.queue.len() as u64;
        self.queue.clear();
        self.busy = false;
    }

    /// True once failed.
    pub fn is_down(&self) -> bool {
        self.down
    }

    /// A packet arrives at the link (`hop` is carried along for routing).
    pub fn enqueue(&mut self, rng: &mut Rng, mut p: Pkt, hop: usize) -> Enq {
        if self.down {
            self.stats.failed += 1;
            return Enq::Dropped;
        }
        let loss = match self.cfg.ge {
            Some(ge) => {
                if self.bad {
                    if rng.chance(ge.p_bad_good) {
                        self.bad = false;
                    }
                } else if rng.chance(ge.p_good_bad) {
                    self.bad = true;
                }
                if self.bad {
                    ge.loss_bad
                } else {
                    self.cfg.loss
                }
            }
            None => self.cfg.loss,
        };
        if rng.chance(loss) {
            self.stats.lost += 1;
            return Enq::Dropped;
        }
        if self.queue.len() >= self.cfg.buf_pkts {
            self.stats.overflow += 1;
            return Enq::Dropped;
        }
        if self.cfg.ecn_pkts > 0 && p.ect && self.queue.len() >= self.cfg.ecn_pkts {
            p.ce = true;
            self.stats.ce_marks += 1;
        }
        self.stats.pkts += 1;
        self.stats.bytes += p.bytes.len() as u64;
        self.stats.queue_sum += self.queue.len() as u64;
        self.queue.push_back((p, hop));
        self.stats.max_queue = self.stats.max_queue.max(self.queue.len());
        if self.busy {
            Enq::Queued
        } else {
            self.busy = true;
            Enq::Start
        }
    }

    /// Propagation delay for a packet leaving now (with reordering).
    pub fn prop_ns(&self, rng: &mut Rng) -> u64 {
        let mut d = self.cfg.delay_ns;
        if rng.chance(self.cfg.reorder) {
            d += 1 + rng.below(self.cfg.reorder_ns.max(1));
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gilbert_elliott_mean_and_bursts() {
        let ge = GilbertElliott::with_mean(0.05, 4.0);
        let mut l = Link::new(LinkCfg {
            ge: Some(ge),
            buf_pkts: usize::MAX,
            ..LinkCfg::default()
        });
        let mut rng = Rng::new(3);
        let p = Pkt {
            bytes: vec![0; 10],
            src_port: 1,
            flow: 0,
            ect: true,
            ce: false,
        };
        let mut lost = 0;
        let mut runs = 0;
        let mut prev = false;
        for _ in 0..200_000 {
            let d = l.enqueue(&mut rng, p.clone(), 0) == Enq::Dropped;
            lost += d as u32;
            runs += (d && !prev) as u32;
            prev = d;
            l.queue.clear();
        }
        let mean = lost as f64 / 200_000.0;
        let burst = lost as f64 / runs as f64;
        assert!((0.04..0.06).contains(&mean), "{mean}");
        assert!((3.0..5.0).contains(&burst), "{burst}");
    }

    #[test]
    fn ecn_and_tail_drop() {
        let mut l = Link::new(LinkCfg {
            ecn_pkts: 2,
            buf_pkts: 3,
            ..LinkCfg::default()
        });
        let mut rng = Rng::new(1);
        let p = Pkt {
            bytes: vec![0; 1000],
            src_port: 1,
            flow: 0,
            ect: true,
            ce: false,
        };
        let r: Vec<Enq> = (0..4).map(|_| l.enqueue(&mut rng, p.clone(), 0)).collect();
        assert_eq!(r, [Enq::Start, Enq::Queued, Enq::Queued, Enq::Dropped]);
        assert_eq!(l.stats.ce_marks, 1);
        assert!(l.queue[2].0.ce && !l.queue[1].0.ce);
        // 1000 + 28 + 38 bytes at 10 Gbit/s.
        assert_eq!(l.ser_ns(&p), 853);
        l.fail();
        assert_eq!(l.enqueue(&mut rng, p, 0), Enq::Dropped);
        assert_eq!(l.stats.failed, 4);
    }
}
