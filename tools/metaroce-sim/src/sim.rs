//! The simulation: `M` senders, each behind its own NIC link, spray over
//! `k` fabric links (planes, chosen per packet by ECMP over the UDP source
//! port), optionally through one shared bottleneck link, to one receiving
//! host that runs one receiver per sender. ACKs return after the forward
//! propagation delay (no queueing), lost with probability `ack_loss`, or
//! through a return link of their own (`ack_link`: queued, serialized, lossy).
//! Timers fire exactly at their deadlines or, as in the kernel, on the next
//! tick of a periodic timer (`tick_ns`).
//!
//! ```text
//!  sender i -- NIC i --+-- plane 0 --+
//!                      +-- plane 1 --+-- [bottleneck] -- receiver
//!                      +-- ...     --+
//! ```

use crate::ep::{GbnReceiver, GbnSender, MetaReceiver, MetaSender, Out, Workload};
use crate::net::{Enq, Link, LinkCfg, LinkStats, Pkt};
use metaroce_proto::cc::RateAlloc;
use metaroce_proto::conn::ConnConfig;
use roce_sim::rng::Rng;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Packets a sender's NIC queue holds (a go-back-N sender in congestion
/// collapse would otherwise queue without bound).
pub const NIC_BUF_PKTS: usize = 4096;

/// The go-back-N model's retransmission timeout: an IBTA local ACK timeout
/// of 4.096 us * 2^8.
pub const GBN_RTO_NS: u64 = 4096 * 256;

/// Transport under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// MetaRoCE native (`metaroce_proto::conn`).
    Meta,
    /// RoCEv2 RC model: one route, fixed window, go-back-N.
    Gbn,
}

/// How a fabric link is chosen from a packet's UDP source port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ecmp {
    /// `(port + flow) % k`: consecutive ports spread exactly.
    Modulo,
    /// A multiplicative hash of (port, flow): collisions as in real ECMP.
    Hash,
}

/// A scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Seed of every random choice.
    pub seed: u64,
    /// Transport.
    pub mode: Mode,
    /// Fabric links (planes).
    pub planes: Vec<LinkCfg>,
    /// ECMP function.
    pub ecmp: Ecmp,
    /// Shared last hop to the receiver, if any.
    pub bottleneck: Option<LinkCfg>,
    /// Sender NIC rate in Mbit/s (0: the sum of the planes' rates).
    pub nic_mbps: u64,
    /// Number of senders (incast when > 1).
    pub senders: usize,
    /// What each sender transfers.
    pub wl: Workload,
    /// Paths per MetaRoCE connection.
    pub paths: u8,
    /// Payload bytes per packet.
    pub mss: u16,
    /// ACK loss probability.
    pub ack_loss: f64,
    /// Smallest RTO (MetaRoCE).
    pub rto_min_ns: u64,
    /// Go-back-N window in packets (0: twice one plane's BDP).
    pub gbn_window: u32,
    /// Receiver fair-share rate hints on.
    pub rate_hint: bool,
    /// Receiver active-sender window.
    pub active_ns: u64,
    /// Give up after this much virtual time.
    pub max_time_ns: u64,
    /// Width of the goodput timeline buckets.
    pub bucket_ns: u64,
    /// Receiver stalls `(period, length)`: during `[k period, k period +
    /// length)` the receiver takes no packets (they wait, in order, and it
    /// sends no ACKs), like a descheduled vCPU under TCG.
    pub rx_stall: Option<(u64, u64)>,
    /// The receiver's ACKs wait for its transmit worker `(min, max)`: DATA is taken at once,
    /// and the first packet that finds no worker run pending schedules one after a delay
    /// drawn uniformly from `[min, max]`; that run sends every ACK owed. The kernel driver's
    /// default (`rx_transmit=0`) under load: a trace of the bench's 64 KiB WRITE on one-vCPU
    /// guests showed ACKs held 4-12 ms with 7-250 packets behind them (2026-12-07).
    /// `None`: ACKs leave as soon as DATA is taken.
    pub ack_hold: Option<(u64, u64)>,
    /// The return path of ACKs as a link of its own (one for all senders):
    /// queueing, serialization and its loss (on top of `ack_loss`). `None`:
    /// ACKs take the forward propagation delay, unqueued.
    pub ack_link: Option<LinkCfg>,
    /// Timers run on a periodic tick of this length (the kernel driver's
    /// device timer: 5 ms): a deadline fires at the first tick at or after
    /// it. 0: at the deadline itself.
    pub tick_ns: u64,
    /// MetaRoCE connection timers (0: the core's defaults): initial RTO,
    /// largest RTO, smallest tail-loss probe timeout.
    pub rto_init_ns: u64,
    pub rto_max_ns: u64,
    pub pto_min_ns: u64,
    /// MetaRoCE pacer credit (`ConnConfig::pace_burst_ns`).
    pub pace_burst_ns: u64,
    /// MetaRoCE packets per path in a row (`ConnConfig::path_run`).
    pub path_run: u8,
    /// MetaRoCE silence probes (`ConnConfig::silence_probes`).
    pub silence_probes: bool,
}

impl Scenario {
    /// One sender spraying over four 10 Gbit/s planes (5 us each way),
    /// 8 paths, 4 MiB in 64 KiB messages over two streams.
    pub fn multipath(seed: u64) -> Self {
        Scenario {
            seed,
            mode: Mode::Meta,
            planes: vec![LinkCfg::default(); 4],
            ecmp: Ecmp::Modulo,
            bottleneck: None,
            nic_mbps: 0,
            senders: 1,
            wl: Workload {
                bytes: 4 << 20,
                msg: 64 << 10,
                streams: 2,
            },
            paths: 8,
            mss: 4096,
            ack_loss: 0.0,
            rto_min_ns: 50_000,
            gbn_window: 0,
            rate_hint: true,
            active_ns: metaroce_proto::cc::ACTIVE_NS,
            max_time_ns: 2_000_000_000,
            bucket_ns: 20_000,
            rx_stall: None,
            ack_hold: None,
            ack_link: None,
            tick_ns: 0,
            rto_init_ns: 0,
            rto_max_ns: 0,
            pto_min_ns: 0,
            pace_burst_ns: 0,
            path_run: 1,
            silence_probes: true,
        }
    }

    /// The kernel driver's regime on the bench's link-limited path: one
    /// 200 Mbit/s link each way (a tbf-like droptail FIFO of 1000 packets,
    /// 1 ms one way, no ECN), 8 paths sprayed over it, MTU 1500 (1364
    /// payload bytes), ACKs queued on the return link, timers on the
    /// device's 5 ms tick with the driver's defaults (`native.rs`: RTO
    /// floor `native_rto_min_ms` 10 ms, initial RTO 20 ms, tail-loss probes
    /// from one tick, RTO at most 2 s, a tick of pacer credit), 8 MiB in
    /// 64 KiB messages. Loss set with [`Scenario::with_loss_both_ways`] hits
    /// data and ACKs alike, as netem on the guest's interface does.
    pub fn kernel(seed: u64) -> Self {
        const TICK: u64 = 5_000_000;
        let link = LinkCfg {
            mbps: 200,
            delay_ns: 1_000_000,
            ecn_pkts: 0,
            buf_pkts: 1000,
            ..LinkCfg::default()
        };
        let mut s = Scenario::multipath(seed);
        s.planes = vec![link];
        s.nic_mbps = 1000;
        s.ack_link = Some(link);
        s.mss = 1364;
        s.wl.bytes = 8 << 20;
        s.tick_ns = TICK;
        s.rto_min_ns = 2 * TICK;
        s.rto_init_ns = 4 * TICK;
        s.rto_max_ns = 2_000_000_000;
        s.pto_min_ns = TICK;
        s.pace_burst_ns = TICK;
        s.max_time_ns = 60_000_000_000;
        s.bucket_ns = 1_000_000;
        s
    }

    /// Sets random loss on every plane and on the ACKs' way back (the
    /// return link if there is one, else `ack_loss`).
    pub fn with_loss_both_ways(mut self, p: f64) -> Self {
        self = self.with_loss(p);
        match &mut self.ack_link {
            Some(l) => l.loss = p,
            None => self.ack_loss = p,
        }
        self
    }

    /// `m` senders with 25 Gbit/s NICs into one 25 Gbit/s bottleneck
    /// (through one fast plane), 1 MiB each.
    pub fn incast(seed: u64, m: usize) -> Self {
        let mut s = Scenario::multipath(seed);
        s.planes = vec![LinkCfg {
            mbps: 400_000,
            delay_ns: 2_000,
            ..LinkCfg::default()
        }];
        s.bottleneck = Some(LinkCfg {
            mbps: 25_000,
            delay_ns: 3_000,
            ..LinkCfg::default()
        });
        s.nic_mbps = 25_000;
        s.senders = m;
        s.wl.bytes = 1 << 20;
        s.paths = 4;
        s
    }

    /// Sets random loss on every plane.
    pub fn with_loss(mut self, p: f64) -> Self {
        for l in &mut self.planes {
            l.loss = p;
        }
        self
    }

    /// One-way propagation delay from a sender to the receiver.
    pub fn one_way_ns(&self) -> u64 {
        let plane = self.planes.iter().map(|l| l.delay_ns).max().unwrap_or(0);
        plane + self.bottleneck.map_or(0, |b| b.delay_ns)
    }

    /// Base RTT of a full-size packet: propagation both ways plus one
    /// serialization per hop.
    pub fn base_rtt_ns(&self) -> u64 {
        let pkt = Pkt {
            bytes: vec![0; usize::from(self.mss) + 60],
            src_port: 0,
            flow: 0,
            ect: false,
            ce: false,
        };
        let mut ser = Link::new(LinkCfg {
            mbps: self.nic(),
            ..LinkCfg::default()
        })
        .ser_ns(&pkt);
        if let Some(p) = self.planes.first() {
            ser += Link::new(*p).ser_ns(&pkt);
        }
        if let Some(b) = self.bottleneck {
            ser += Link::new(b).ser_ns(&pkt);
        }
        2 * self.one_way_ns() + ser
    }

    /// When a timer with deadline `d` fires: at `d`, or at the first tick
    /// at or after it.
    pub fn fire_at(&self, d: u64) -> u64 {
        match self.tick_ns {
            0 => d,
            t => d.div_ceil(t).saturating_mul(t),
        }
    }

    fn nic(&self) -> u64 {
        if self.nic_mbps > 0 {
            self.nic_mbps
        } else {
            self.planes.iter().map(|l| l.mbps).sum::<u64>().max(1)
        }
    }

    /// Receiver capacity in Mbit/s (the bottleneck, else all planes).
    pub fn rx_mbps(&self) -> u64 {
        match self.bottleneck {
            Some(b) => b.mbps,
            None => self
                .planes
                .iter()
                .map(|l| l.mbps)
                .sum::<u64>()
                .min(self.nic() * self.senders as u64),
        }
    }
}

/// Per-sender figures.
#[derive(Clone, Debug, Default)]
pub struct SenderReport {
    /// Payload bytes placed at the receiver.
    pub bytes: u64,
    /// When the transfer completed (receiver side).
    pub done_at: Option<u64>,
    /// Placed bytes per timeline bucket.
    pub timeline: Vec<u64>,
}

/// Figures of one run.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Every sender completed.
    pub completed: bool,
    /// Invariant violations.
    pub errors: Vec<String>,
    /// Time of the last completion.
    pub elapsed_ns: u64,
    /// Payload goodput over the whole run, Mbit/s.
    pub goodput_mbps: f64,
    /// Data packets sent (first transmissions plus retransmissions).
    pub packets: u64,
    /// Retransmissions.
    pub retransmits: u64,
    /// RTOs.
    pub timeouts: u64,
    /// RTOs proven spurious.
    pub spurious_rtos: u64,
    /// RTOs that found the connection silent and probed instead.
    pub silences: u64,
    /// Transmissions declared lost and later proven received.
    pub late_acks: u64,
    /// Repaths.
    pub repaths: u64,
    /// ECN echoes acted on by paths.
    pub ecn_echoes: u64,
    /// Plane counters.
    pub planes: Vec<LinkStats>,
    /// Bottleneck counters.
    pub bottleneck: Option<LinkStats>,
    /// Per sender.
    pub senders: Vec<SenderReport>,
    /// Timeline bucket width.
    pub bucket_ns: u64,
    /// Base RTT of the scenario.
    pub base_rtt_ns: u64,
    /// Largest queue of any plane or the bottleneck per timeline bucket.
    pub queue_timeline: Vec<usize>,
}

impl Report {
    /// Largest queue of any plane or the bottleneck.
    pub fn max_queue(&self) -> usize {
        self.queues().map(|s| s.max_queue).max().unwrap_or(0)
    }

    /// Mean queue seen by arriving packets at the busiest queue.
    pub fn avg_queue(&self) -> f64 {
        self.queues().map(|s| s.avg_queue()).fold(0.0, f64::max)
    }

    fn queues(&self) -> impl Iterator<Item = &LinkStats> {
        self.planes.iter().chain(self.bottleneck.iter())
    }

    /// Per-sender rates (Mbit/s) between `from` and the first completion
    /// of any sender (while all are active).
    pub fn rates_while_all_active(&self, from: u64) -> Vec<f64> {
        let end = self
            .senders
            .iter()
            .filter_map(|s| s.done_at)
            .min()
            .unwrap_or(self.elapsed_ns);
        let b0 = (from / self.bucket_ns) as usize;
        let b1 = (end / self.bucket_ns) as usize;
        let span = (b1.saturating_sub(b0)) as f64 * self.bucket_ns as f64;
        self.senders
            .iter()
            .map(|s| {
                let bytes: u64 = s.timeline.iter().take(b1).skip(b0).sum();
                bytes as f64 * 8.0 * 1000.0 / span.max(1.0)
            })
            .collect()
    }

    /// Sum of all senders' placed bytes per bucket.
    pub fn timeline(&self) -> Vec<u64> {
        let n = self
            .senders
            .iter()
            .map(|s| s.timeline.len())
            .max()
            .unwrap_or(0);
        (0..n)
            .map(|i| {
                self.senders
                    .iter()
                    .map(|s| s.timeline.get(i).copied().unwrap_or(0))
                    .sum()
            })
            .collect()
    }

    /// Share of the planes' packets each plane carried.
    pub fn plane_shares(&self) -> Vec<f64> {
        let total: u64 = self.planes.iter().map(|p| p.pkts).sum();
        self.planes
            .iter()
            .map(|p| p.pkts as f64 / total.max(1) as f64)
            .collect()
    }
}

/// Jain's fairness index of `x`.
pub fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let q: f64 = x.iter().map(|v| v * v).sum();
    if q == 0.0 {
        0.0
    } else {
        s * s / (x.len() as f64 * q)
    }
}

enum Kind {
    LinkDone(usize),
    Arrive(Pkt, usize),
    ToRecv(Pkt),
    /// The receiver of flow `i` runs its transmit worker ([`Scenario::ack_hold`]).
    AckRun(usize),
    ToSend(usize, Vec<u8>),
    Timer(usize),
    Fail(usize),
}

struct Ev {
    t: u64,
    seq: u64,
    kind: Kind,
}

impl PartialEq for Ev {
    fn eq(&self, o: &Self) -> bool {
        (self.t, self.seq) == (o.t, o.seq)
    }
}
impl Eq for Ev {}
impl PartialOrd for Ev {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ev {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.t, self.seq).cmp(&(o.t, o.seq))
    }
}

enum Snd {
    Meta(MetaSender),
    Gbn(GbnSender),
}

enum Rcv {
    Meta(MetaReceiver),
    Gbn(GbnReceiver),
}

struct World {
    sc: Scenario,
    rng: Rng,
    links: Vec<Link>,
    nplanes: usize,
    events: BinaryHeap<Reverse<Ev>>,
    seq: u64,
    snd: Vec<Snd>,
    rcv: Vec<Rcv>,
    timer_at: Vec<Option<u64>>,
    /// Index of the ACK return link in `links`, if any.
    ack_link: Option<usize>,
    alloc: RateAlloc<64>,
    qtl: Vec<usize>,
    /// Per flow: a worker run of [`Scenario::ack_hold`] is pending.
    ack_run: Vec<bool>,
}

impl World {
    fn push(&mut self, t: u64, kind: Kind) {
        self.seq += 1;
        self.events.push(Reverse(Ev {
            t,
            seq: self.seq,
            kind,
        }));
    }

    fn plane_of(&self, p: &Pkt) -> usize {
        let k = self.nplanes.max(1);
        match self.sc.ecmp {
            Ecmp::Modulo => (usize::from(p.src_port) + p.flow) % k,
            Ecmp::Hash => {
                let x = (u64::from(p.src_port) << 16 | p.flow as u64)
                    .wrapping_mul(0x9E37_79B9_7F4A_7C15);
                ((x >> 32) % k as u64) as usize
            }
        }
    }

    /// Link index of hop `hop` of `p`'s route, or `None` at the receiver.
    fn route(&self, p: &Pkt, hop: usize) -> Option<usize> {
        let nic = p.flow;
        let plane = self.sc.senders + self.plane_of(p);
        let bn = self.sc.senders + self.nplanes;
        match hop {
            0 => Some(nic),
            1 => Some(plane),
            2 if self.sc.bottleneck.is_some() => Some(bn),
            _ => None,
        }
    }

    fn arrive(&mut self, now: u64, p: Pkt, hop: usize) {
        match self.route(&p, hop) {
            Some(l) => {
                let q = self.enqueue(now, l, p, hop);
                if l >= self.sc.senders {
                    let b = (now / self.sc.bucket_ns.max(1)) as usize;
                    if self.qtl.len() <= b {
                        self.qtl.resize(b + 1, 0);
                    }
                    self.qtl[b] = self.qtl[b].max(q);
                }
            }
            None => self.push(now, Kind::ToRecv(p)),
        }
    }

    /// Queues `p` (at `hop` of its route) on link `l`, starting the link if
    /// it was idle; returns the queue's length.
    fn enqueue(&mut self, now: u64, l: usize, p: Pkt, hop: usize) -> usize {
        let link = &mut self.links[l];
        let ser = link.ser_ns(&p);
        let started = link.enqueue(&mut self.rng, p, hop) == Enq::Start;
        let q = link.queue.len();
        if started {
            self.push(now + ser, Kind::LinkDone(l));
        }
        q
    }

    fn link_done(&mut self, now: u64, l: usize) {
        let link = &mut self.links[l];
        let Some((p, hop)) = link.queue.pop_front() else {
            link.busy = false;
            return;
        };
        let prop = link.prop_ns(&mut self.rng);
        let next = link.queue.front().map(|(q, _)| link.ser_ns(q));
        match next {
            Some(ser) => self.push(now + ser, Kind::LinkDone(l)),
            None => link.busy = false,
        }
        if Some(l) == self.ack_link {
            self.push(now + prop, Kind::ToSend(p.flow, p.bytes));
        } else {
            self.push(now + prop, Kind::Arrive(p, hop + 1));
        }
    }

    /// Sends an ACK (or other receiver packet) of flow `i` back.
    fn send_back(&mut self, now: u64, i: usize, bytes: Vec<u8>) {
        if self.rng.chance(self.sc.ack_loss) {
            return;
        }
        match self.ack_link {
            Some(l) => {
                let p = Pkt {
                    bytes,
                    src_port: 0,
                    flow: i,
                    ect: false,
                    ce: false,
                };
                self.enqueue(now, l, p, 0);
            }
            None => {
                let back = self.sc.one_way_ns();
                self.push(now + back, Kind::ToSend(i, bytes));
            }
        }
    }

    fn pump_sender(&mut self, now: u64, i: usize) {
        let mut outs: Vec<Out> = Vec::new();
        let deadline = match &mut self.snd[i] {
            Snd::Meta(s) => {
                while let Some(o) = s.poll(now) {
                    outs.push(o);
                }
                s.conn.next_deadline()
            }
            Snd::Gbn(s) => {
                while let Some(o) = s.poll(now) {
                    outs.push(o);
                }
                s.next_deadline()
            }
        };
        for o in outs {
            let p = Pkt {
                bytes: o.bytes,
                src_port: o.src_port,
                flow: i,
                ect: o.ect,
                ce: false,
            };
            self.arrive(now, p, 0);
        }
        if let Some(d) = deadline {
            let d = self.sc.fire_at(d);
            if self.timer_at[i] != Some(d) {
                self.timer_at[i] = Some(d);
                self.push(d.max(now), Kind::Timer(i));
            }
        } else {
            self.timer_at[i] = None;
        }
    }

    /// The transmit worker of flow `i`'s receiver runs: every ACK owed leaves.
    fn ack_run(&mut self, now: u64, i: usize) {
        if let Some(f) = self.ack_run.get_mut(i) {
            *f = false;
        }
        let mut outs = Vec::new();
        if let Some(Rcv::Meta(r)) = self.rcv.get_mut(i) {
            while let Some(o) = r.poll(now) {
                outs.push(o);
            }
        }
        for o in outs {
            self.send_back(now, i, o.bytes);
        }
    }

    fn deliver_rx(&mut self, now: u64, p: Pkt) {
        let i = p.flow;
        self.alloc.note(i, now);
        let hint = if self.sc.rate_hint {
            self.alloc.share_kbps(now)
        } else {
            0
        };
        let mut outs = Vec::new();
        match &mut self.rcv[i] {
            Rcv::Meta(r) => {
                r.on_packet(now, &p.bytes, p.ce, p.src_port, hint);
                match self.sc.ack_hold {
                    Some((lo, hi)) => {
                        if !self.ack_run.get(i).copied().unwrap_or(true) {
                            self.ack_run[i] = true;
                            let d = lo + self.rng.below(hi.saturating_sub(lo) + 1);
                            self.push(now + d, Kind::AckRun(i));
                        }
                    }
                    None => {
                        while let Some(o) = r.poll(now) {
                            outs.push(o);
                        }
                    }
                }
            }
            Rcv::Gbn(r) => {
                r.on_packet(now, &p.bytes);
                outs.extend(r.poll(p.src_port));
            }
        }
        for o in outs {
            self.send_back(now, i, o.bytes);
        }
    }
}

/// Runs a scenario to completion (or `max_time_ns`).
pub fn run(sc: &Scenario) -> Report {
    // The connections are large values: run on a thread with a big stack.
    let sc = sc.clone();
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(move || run_inner(sc))
        .expect("spawn simulation thread")
        .join()
        .expect("simulation thread panicked")
}

fn run_inner(sc: Scenario) -> Report {
    let m = sc.senders.max(1);
    let nic = sc.nic();
    let mut links: Vec<Link> = (0..m)
        .map(|_| {
            Link::new(LinkCfg {
                mbps: nic,
                delay_ns: 0,
                ecn_pkts: 0,
                buf_pkts: NIC_BUF_PKTS,
                ..LinkCfg::default()
            })
        })
        .collect();
    links.extend(sc.planes.iter().map(|c| Link::new(*c)));
    if let Some(b) = sc.bottleneck {
        links.push(Link::new(b));
    }
    let ack_link = sc.ack_link.map(|c| {
        links.push(Link::new(c));
        links.len() - 1
    });
    let base_rtt = sc.base_rtt_ns();
    let mut snd = Vec::new();
    let mut rcv = Vec::new();
    for i in 0..m {
        let id = 0x1000 + i as u32;
        match sc.mode {
            Mode::Meta => {
                let mut cfg = ConnConfig::new(id);
                cfg.mss = sc.mss;
                cfg.paths = sc.paths;
                cfg.rto_min_ns = sc.rto_min_ns;
                if sc.rto_init_ns > 0 {
                    cfg.rto_init_ns = sc.rto_init_ns;
                }
                if sc.rto_max_ns > 0 {
                    cfg.rto_max_ns = sc.rto_max_ns;
                }
                if sc.pto_min_ns > 0 {
                    cfg.pto_min_ns = sc.pto_min_ns;
                }
                cfg.pace_burst_ns = sc.pace_burst_ns;
                cfg.path_run = sc.path_run;
                cfg.silence_probes = sc.silence_probes;
                cfg.port_seed = (sc.seed as u32).wrapping_mul(0x9E37_79B9) ^ id;
                snd.push(Snd::Meta(MetaSender::new(cfg, sc.wl)));
                let mut rcfg = ConnConfig::new(0x8000 + i as u32);
                rcfg.mss = sc.mss;
                rcfg.paths = sc.paths;
                rcv.push(Rcv::Meta(MetaReceiver::new(rcfg, sc.wl)));
            }
            Mode::Gbn => {
                let window = if sc.gbn_window > 0 {
                    sc.gbn_window
                } else {
                    // Twice one plane's bandwidth-delay product.
                    let plane = sc.planes.first().map_or(10_000, |p| p.mbps);
                    let bdp = plane * base_rtt / 8_000 / u64::from(sc.mss);
                    (2 * bdp).max(4) as u32
                };
                let port = 49152 + (sc.seed as u16 % 1024) + i as u16;
                snd.push(Snd::Gbn(GbnSender::new(
                    sc.wl.bytes,
                    u32::from(sc.mss),
                    window,
                    GBN_RTO_NS,
                    port,
                )));
                rcv.push(Rcv::Gbn(GbnReceiver::new(u32::from(sc.mss))));
            }
        }
    }
    let mut w = World {
        nplanes: sc.planes.len(),
        alloc: RateAlloc::new(
            u32::try_from(sc.rx_mbps() * 1000).unwrap_or(u32::MAX),
            sc.active_ns,
            u32::from(sc.mss),
        ),
        rng: Rng::new(sc.seed ^ 0x5EED),
        links,
        events: BinaryHeap::new(),
        seq: 0,
        snd,
        rcv,
        timer_at: vec![None; m],
        ack_link,
        qtl: Vec::new(),
        ack_run: vec![false; m],
        sc,
    };
    for (j, c) in w.sc.planes.clone().iter().enumerate() {
        if let Some(t) = c.fail_at_ns {
            w.push(t, Kind::Fail(m + j));
        }
    }
    for i in 0..m {
        w.pump_sender(0, i);
    }
    let mut now = 0;
    while let Some(Reverse(ev)) = w.events.pop() {
        now = ev.t;
        if now > w.sc.max_time_ns {
            break;
        }
        match ev.kind {
            Kind::LinkDone(l) => w.link_done(now, l),
            Kind::Arrive(p, hop) => w.arrive(now, p, hop),
            Kind::ToRecv(p) => match w.sc.rx_stall {
                Some((period, len)) if period > 0 && now % period < len => {
                    w.push(now - now % period + len, Kind::ToRecv(p));
                }
                _ => w.deliver_rx(now, p),
            },
            Kind::AckRun(i) => w.ack_run(now, i),
            Kind::ToSend(i, bytes) => {
                match &mut w.snd[i] {
                    Snd::Meta(s) => s.on_packet(now, &bytes),
                    Snd::Gbn(s) => s.on_ack(now, &bytes),
                }
                w.pump_sender(now, i);
            }
            Kind::Timer(i) => {
                if w.timer_at[i] == Some(ev.t) {
                    w.timer_at[i] = None;
                    match &mut w.snd[i] {
                        Snd::Meta(s) => s.on_timer(now),
                        Snd::Gbn(s) => s.on_timer(now),
                    }
                    w.pump_sender(now, i);
                }
            }
            Kind::Fail(l) => w.links[l].fail(),
        }
        if all_done(&w) {
            break;
        }
    }
    report(&w, now, base_rtt)
}

fn all_done(w: &World) -> bool {
    w.snd.iter().all(|s| match s {
        Snd::Meta(s) => s.done(),
        Snd::Gbn(s) => s.done(),
    }) && w.rcv.iter().all(|r| match r {
        Rcv::Meta(r) => r.done(),
        Rcv::Gbn(_) => true,
    })
}

fn report(w: &World, now: u64, base_rtt: u64) -> Report {
    let m = w.snd.len();
    let bucket = w.sc.bucket_ns.max(1);
    let mut r = Report {
        completed: all_done(w),
        bucket_ns: bucket,
        base_rtt_ns: base_rtt,
        planes: w.links[m..m + w.nplanes].iter().map(|l| l.stats).collect(),
        bottleneck: w.sc.bottleneck.map(|_| w.links[m + w.nplanes].stats),
        queue_timeline: w.qtl.clone(),
        ..Report::default()
    };
    if !r.completed {
        r.errors.push(format!("did not complete by {now} ns"));
    }
    for (s, rc) in w.snd.iter().zip(&w.rcv) {
        let (placed, done_at): (&[(u64, u32)], Option<u64>) = match (s, rc) {
            (Snd::Meta(s), Rcv::Meta(rc)) => {
                r.errors.extend(s.error.clone());
                r.errors.extend(rc.error.clone());
                r.packets += s.conn.stats.data_sent + s.conn.stats.retransmits;
                r.retransmits += s.conn.stats.retransmits;
                r.repaths += s.conn.stats.repaths;
                for p in 0..usize::from(w.sc.paths) {
                    if let Some((_, _, st)) = s.conn.path_info(p) {
                        r.timeouts += st.timeouts;
                        r.spurious_rtos += st.spurious_rtos;
                        r.silences += st.silences;
                        r.late_acks += st.late_acks;
                        r.ecn_echoes += st.ecn_echoes;
                    }
                }
                (&rc.placed, rc.done_at.max(s.done_at))
            }
            (Snd::Gbn(s), Rcv::Gbn(rc)) => {
                r.packets += s.sent;
                r.retransmits += s.retransmits;
                r.timeouts += s.timeouts;
                (&rc.placed, s.done_at)
            }
            _ => unreachable!("sender and receiver modes match"),
        };
        let mut sr = SenderReport {
            done_at,
            ..SenderReport::default()
        };
        for &(t, n) in placed {
            let b = (t / bucket) as usize;
            if sr.timeline.len() <= b {
                sr.timeline.resize(b + 1, 0);
            }
            sr.timeline[b] += u64::from(n);
            sr.bytes += u64::from(n);
        }
        r.elapsed_ns = r.elapsed_ns.max(done_at.unwrap_or(now));
        r.senders.push(sr);
    }
    let total: u64 = r.senders.iter().map(|s| s.bytes).sum();
    r.goodput_mbps = total as f64 * 8.0 * 1000.0 / r.elapsed_ns.max(1) as f64;
    r
}
