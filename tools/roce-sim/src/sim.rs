//! The simulation driver: a random but reproducible workload between two
//! endpoints over an impaired network, with end-to-end checks.
//!
//! Each endpoint posts `wrs` work requests to the other (SEND with and
//! without immediate or invalidate, RDMA WRITE with and without immediate,
//! RDMA READ, compare-and-swap and fetch-and-add; mixed sizes from 0 bytes
//! to three path MTUs; some unsignaled, some fenced) while serving the
//! peer's requests. The driver keeps a shadow copy of each memory region
//! and checks that
//!
//! * every posted WR completes exactly once, in posting order, with the
//!   expected status (all successes; with a cut link: successes, then one
//!   `RetryExcErr`, then `WrFlushErr`),
//! * every SEND lands byte-exact in a receive WQE, in order, with the right
//!   length, immediate data and invalidate key,
//! * READs and atomics return the values the shadow predicts, atomics run
//!   exactly once, and the final memory equals the shadow.
//!
//! The memory region is split so that retried READs cannot observe later
//! WRITEs (which the IBTA allows): READs target a region nobody writes.

use super::endpoint::{Endpoint, Memory};
use super::net::{NetConfig, Network};
use super::rng::Rng;
use metaroce_proto::ext::{FLUSH_GLOBAL, FLUSH_MR, FLUSH_RANGE};
use metaroce_proto::opcode::Transport;
use metaroce_proto::packet::Pmtu;
use metaroce_proto::psn::Psn;
use metaroce_proto::qp::QpConfig;
use metaroce_proto::wr::{Access, AtomicOp, RecvCompletion, RecvKind, SendOp, SendWr, WcStatus};
use std::collections::VecDeque;

const MR_LEN: usize = 64 * 1024;
const READ_REGION: std::ops::Range<usize> = 0..16 * 1024;
const WRITE_REGION: std::ops::Range<usize> = 16 * 1024..48 * 1024;
const ATOMIC_BASE: usize = 48 * 1024;
const ATOMIC_SLOTS: u64 = 64;

/// Simulation parameters.
#[derive(Clone, Copy, Debug)]
pub struct SimConfig {
    /// Seed of every random choice.
    pub seed: u64,
    /// Network model.
    pub net: NetConfig,
    /// Work requests each endpoint posts.
    pub wrs: u32,
    /// Path MTU.
    pub pmtu: Pmtu,
    /// Cut the link (lose every packet) from this virtual time on.
    pub cut_at_ns: Option<u64>,
    /// Give up (and fail) after this much virtual time.
    pub max_time_ns: u64,
    /// Local ACK timeout exponent of both QPs.
    pub timeout: u8,
    /// Transport retry count of both QPs.
    pub retry_cnt: u8,
    /// Receive WQEs each endpoint keeps posted. The receiver tops its
    /// receive queue up to this depth at random intervals (up to 30 us
    /// apart), so a small depth makes it run dry and answer with RNR NAKs;
    /// must be at least 1.
    pub rq_depth: usize,
    /// Print every packet sent and received to standard error.
    pub trace: bool,
}

impl SimConfig {
    /// Defaults: lossless 25 Gbit/s link with 2 us latency, 200 WRs per
    /// side, 1024-byte MTU, ~4 ms ACK timeout, 7 retries, 128 receive WQEs
    /// (twice the send queue depth; measured over hundreds of seeds at
    /// every path MTU, lossless and at 1% impairments, the receivers never
    /// ran dry, so retransmissions come from the network alone).
    pub fn new(seed: u64) -> Self {
        SimConfig {
            seed,
            net: NetConfig::default(),
            wrs: 200,
            pmtu: Pmtu::Mtu1024,
            cut_at_ns: None,
            max_time_ns: 20_000_000_000,
            timeout: 10,
            retry_cnt: 7,
            rq_depth: 128,
            trace: false,
        }
    }
}

/// Figures of a finished run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Work requests posted (both sides).
    pub wrs_posted: u64,
    /// Work requests that completed successfully.
    pub wrs_ok: u64,
    /// Work requests completed with `RetryExcErr` / `RnrRetryExcErr`.
    pub wrs_retry_exceeded: u64,
    /// Work requests flushed.
    pub wrs_flushed: u64,
    /// Packets handed to the network.
    pub packets: u64,
    /// Packets lost by the network.
    pub lost: u64,
    /// Request packets retransmitted.
    pub retransmits: u64,
    /// Duplicate requests seen by responders plus stale responses seen by
    /// completers.
    pub duplicates: u64,
    /// Local ACK timeouts.
    pub timeouts: u64,
    /// PSN sequence error NAKs sent.
    pub seq_naks: u64,
    /// RNR NAKs sent.
    pub rnr_naks: u64,
    /// Payload bytes of successfully completed work requests.
    pub bytes: u64,
    /// Virtual time at the end.
    pub virtual_ns: u64,
}

impl Report {
    /// Delivered payload bytes per virtual second.
    pub fn goodput(&self) -> u64 {
        if self.virtual_ns == 0 {
            0
        } else {
            (u128::from(self.bytes) * 1_000_000_000 / u128::from(self.virtual_ns)) as u64
        }
    }
}

/// A posted WR and what its completion must show.
struct Posted {
    wr_id: u64,
    signaled: bool,
    slot: usize,
    /// Expected local buffer (READ data, atomic original value).
    result: Option<Vec<u8>>,
    bytes: u64,
}

/// What the next receive completion must show.
struct ExpectRecv {
    kind: RecvKind,
    data: Vec<u8>,
    byte_len: u32,
    imm: Option<u32>,
    invalidate: Option<u32>,
}

struct Side {
    ep: Endpoint,
    rng: Rng,
    posted: VecDeque<Posted>,
    to_post: u32,
    next_wr_id: u64,
    /// Expected contents of the peer's memory region.
    peer_shadow: Vec<u8>,
    peer_base: u64,
    peer_rkey: u32,
    /// Receive completions this side must see, in order.
    incoming: VecDeque<ExpectRecv>,
    refill_at: u64,
    /// A non-success completion was seen.
    failed: bool,
}

fn err(seed: u64, side: usize, msg: impl std::fmt::Display) -> String {
    format!("seed {seed}, endpoint {side}: {msg}")
}

/// Runs one simulation; `Err` describes the first invariant violation.
pub fn run(cfg: &SimConfig) -> Result<Report, String> {
    let seed = cfg.seed;
    if cfg.rq_depth == 0 {
        return Err(format!("seed {seed}: rq_depth must be at least 1"));
    }
    let mut rng = Rng::new(seed);
    let mut net = Network::new(cfg.net, rng.next_u64());
    let recv_len = 3 * cfg.pmtu.bytes() + 64;

    let mut sides: Vec<Side> = Vec::new();
    let mut mems = Vec::new();
    for i in 0..2u32 {
        let mut data = vec![0u8; MR_LEN];
        rng.fill(&mut data);
        mems.push(Memory {
            rkey: 0x100 + i,
            base: 0x1000_0000 * u64::from(i + 1),
            data,
            access: Access::READ
                .with(Access::WRITE)
                .with(Access::ATOMIC)
                .with(Access::FLUSH_GLOBAL),
            atomics: 0,
            fail_next_atomic: false,
            flushes: 0,
        });
    }
    // Start both directions a little below the 24-bit PSN wrap.
    let psns = [
        Psn::new(0xFF_FFFF).sub(rng.below(300) as u32),
        Psn::new(0xFF_FFFF).sub(rng.below(300) as u32),
    ];
    for i in 0..2usize {
        let mut qc = QpConfig::new(Transport::Rc, 0x11 + i as u32, 0x11 + (1 - i) as u32);
        qc.pmtu = cfg.pmtu;
        qc.sq_psn = psns[i];
        qc.rq_psn = psns[1 - i];
        qc.sq_depth = 64;
        qc.timeout = cfg.timeout;
        qc.retry_cnt = cfg.retry_cnt;
        qc.min_rnr_timer = 1;
        qc.access = qc.access.with(Access::FLUSH_GLOBAL);
        qc.ack_every = 1 + rng.below(16) as u32;
        qc.ack_req_every = 1 + rng.below(32) as u32;
        // Small PSN windows too, so that READs (up to 3 PSNs here) often start with the
        // window nearly full and their responses run past it.
        qc.max_inflight = [2, 5, 16, 128][rng.below(4) as usize];
        let ips = [[10, 0, 0, 1], [10, 0, 0, 2]];
        let ep = Endpoint::new(qc, mems[i].clone(), ips[i], ips[1 - i])
            .map_err(|e| err(seed, i, format!("{e:?}")))?;
        sides.push(Side {
            ep,
            rng: Rng::new(rng.next_u64()),
            posted: VecDeque::new(),
            to_post: cfg.wrs,
            next_wr_id: (i as u64) << 32,
            peer_shadow: mems[1 - i].data.clone(),
            peer_base: mems[1 - i].base,
            peer_rkey: mems[1 - i].rkey,
            incoming: VecDeque::new(),
            refill_at: 0,
            failed: false,
        });
    }

    let mut rep = Report {
        wrs_posted: 2 * u64::from(cfg.wrs),
        ..Report::default()
    };
    let mut now = 0u64;
    loop {
        if cfg.cut_at_ns.is_some_and(|t| now >= t) {
            net.up = false;
        }
        let mut busy = true;
        while busy {
            busy = false;
            while let Some((to, pkt)) = net.pop_arrived(now) {
                busy = true;
                let out = sides[to]
                    .ep
                    .receive_packet(now, &pkt)
                    .map_err(|e| err(seed, to, e))?;
                if cfg.trace {
                    eprintln!("{now:>12} ep{to} <- {} {:?}", describe(&pkt), out.drop);
                }
                if let Some(c) = out.completion {
                    check_recv(&mut sides[to], &c).map_err(|e| err(seed, to, e))?;
                }
            }
            for i in 0..2 {
                if sides[i].ep.qp.next_deadline().is_some_and(|t| t <= now) {
                    let s = &mut sides[i].ep;
                    s.qp.on_timer(now, &mut s.sq);
                    busy = true;
                }
                while net.can_send(i, now) {
                    match sides[i].ep.poll_packet(now).map_err(|e| err(seed, i, e))? {
                        Some(pkt) => {
                            let text = if cfg.trace {
                                describe(&pkt)
                            } else {
                                String::new()
                            };
                            let delivered = net.send(i, now, pkt);
                            if cfg.trace {
                                eprintln!(
                                    "{now:>12} ep{i} -> {text}{}",
                                    if delivered { "" } else { " LOST" }
                                );
                            }
                            busy = true;
                        }
                        None => break,
                    }
                }
                busy |= reap(&mut sides[i], cfg, &mut rep).map_err(|e| err(seed, i, e))?;
                busy |=
                    post_more(&mut sides, i, cfg.pmtu, recv_len).map_err(|e| err(seed, i, e))?;
                let s = &mut sides[i];
                if now >= s.refill_at && s.ep.rq.posted.len() < cfg.rq_depth {
                    while s.ep.rq.posted.len() < cfg.rq_depth {
                        s.ep.rq.post(recv_len);
                    }
                    s.refill_at = now + s.rng.below(30_000);
                    busy = true;
                }
            }
        }
        if sides.iter().all(|s| s.to_post == 0 && s.posted.is_empty()) {
            break;
        }
        let mut next: Option<u64> = net.next_arrival();
        for (i, s) in sides.iter().enumerate() {
            let refill = (s.ep.rq.posted.len() < cfg.rq_depth).then_some(s.refill_at.max(now + 1));
            for t in [s.ep.qp.next_deadline(), net.busy_until(i, now), refill]
                .into_iter()
                .flatten()
            {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        }
        if let Some(t) = cfg.cut_at_ns.filter(|&t| t > now) {
            next = Some(next.map_or(t, |n| n.min(t)));
        }
        now = match next {
            Some(t) if t > cfg.max_time_ns => {
                return Err(format!("seed {seed}: not finished after {t} ns"))
            }
            Some(t) => t.max(now),
            None => {
                return Err(format!(
                    "seed {seed}: stalled at {now} ns with work outstanding"
                ))
            }
        };
    }

    let lossless_end = cfg.cut_at_ns.is_none();
    for (i, s) in sides.iter().enumerate() {
        if lossless_end {
            if let Some(e) = s.incoming.front() {
                return Err(err(
                    seed,
                    i,
                    format!(
                        "{} receive completions missing (next {:?})",
                        s.incoming.len(),
                        e.kind
                    ),
                ));
            }
            let peer = &sides[1 - i].ep.mem.data;
            if let Some(at) = peer.iter().zip(&s.peer_shadow).position(|(a, b)| a != b) {
                return Err(err(
                    seed,
                    1 - i,
                    format!("memory differs from the shadow at offset {at}"),
                ));
            }
        }
        let st = s.ep.qp.stats();
        rep.retransmits += st.req.retransmits;
        rep.duplicates += st.resp.duplicates + st.comp.stale;
        rep.timeouts += st.comp.timeouts;
        rep.seq_naks += st.resp.seq_naks;
        rep.rnr_naks += st.resp.rnr_naks;
    }
    rep.packets = net.stats.sent;
    rep.lost = net.stats.dropped;
    rep.virtual_ns = now;
    Ok(rep)
}

/// One-line summary of a packet for traces.
fn describe(pkt: &[u8]) -> String {
    match metaroce_proto::packet::parse(&pkt[28..]) {
        Ok(p) => {
            let h = &p.hdr;
            let mut s = format!(
                "{:?} psn {:#08x} len {}",
                h.bth.opcode,
                h.bth.psn.get(),
                p.payload.len()
            );
            if h.bth.ack_req {
                s.push_str(" A");
            }
            if let Some(a) = h.aeth {
                s.push_str(&format!(" {:?} msn {}", a.syndrome, a.msn));
            }
            s
        }
        Err(e) => format!("unparsable {e:?}"),
    }
}

/// Drains send completions of side `s` and checks them.
fn reap(s: &mut Side, cfg: &SimConfig, rep: &mut Report) -> Result<bool, String> {
    let mut any = false;
    while let Some(c) = s.ep.qp.poll_send_completion(&mut s.ep.sq) {
        any = true;
        loop {
            let p = s
                .posted
                .pop_front()
                .ok_or("completion without a posted WR")?;
            if p.wr_id == c.wr_id {
                retire(s, p, c.status, cfg, rep)?;
                break;
            }
            if p.signaled {
                return Err(format!(
                    "completion for WR {:#x} before WR {:#x}",
                    c.wr_id, p.wr_id
                ));
            }
            retire(s, p, WcStatus::Success, cfg, rep)?;
        }
    }
    // Unsignaled WRs retired without a completion free their slot too.
    while s.posted.len() > s.ep.qp.sq_used() as usize {
        any = true;
        let p = s.posted.pop_front().ok_or("queue accounting")?;
        if p.signaled {
            return Err(format!(
                "signaled WR {:#x} retired without completion",
                p.wr_id
            ));
        }
        retire(s, p, WcStatus::Success, cfg, rep)?;
    }
    Ok(any)
}

fn retire(
    s: &mut Side,
    p: Posted,
    status: WcStatus,
    cfg: &SimConfig,
    rep: &mut Report,
) -> Result<(), String> {
    match status {
        WcStatus::Success if !s.failed => {
            if let Some(want) = &p.result {
                if s.ep.local(p.slot) != &want[..] {
                    return Err(format!("WR {:#x}: wrong READ/atomic result", p.wr_id));
                }
            }
            rep.wrs_ok += 1;
            rep.bytes += p.bytes;
        }
        WcStatus::RetryExcErr | WcStatus::RnrRetryExcErr
            if cfg.cut_at_ns.is_some() && !s.failed =>
        {
            s.failed = true;
            rep.wrs_retry_exceeded += 1;
        }
        WcStatus::WrFlushErr if s.failed => rep.wrs_flushed += 1,
        other => {
            return Err(format!(
                "WR {:#x} completed with {other:?} (after an error: {})",
                p.wr_id, s.failed
            ))
        }
    }
    Ok(())
}

fn check_recv(s: &mut Side, c: &RecvCompletion) -> Result<(), String> {
    let e = s
        .incoming
        .pop_front()
        .ok_or("unexpected receive completion")?;
    if c.status != WcStatus::Success {
        return Err(format!("receive completed with {:?}", c.status));
    }
    if (c.kind, c.byte_len, c.imm, c.invalidate) != (e.kind, e.byte_len, e.imm, e.invalidate) {
        return Err(format!(
            "receive completion {:?}/{}/{:?}/{:?}, expected {:?}/{}/{:?}/{:?}",
            c.kind, c.byte_len, c.imm, c.invalidate, e.kind, e.byte_len, e.imm, e.invalidate
        ));
    }
    let buf =
        s.ep.rq
            .bufs
            .remove(&c.id)
            .ok_or("completion for an unknown receive WQE")?;
    if buf.get(..e.data.len()) != Some(&e.data[..]) {
        return Err("received SEND data differs".into());
    }
    Ok(())
}

fn size(rng: &mut Rng, pmtu: u32) -> u32 {
    match rng.below(10) {
        0 => 0,
        1..=3 => 1 + rng.below(64) as u32,
        4 | 5 => pmtu - 1 + rng.below(3) as u32,
        _ => 1 + rng.below(u64::from(3 * pmtu)) as u32,
    }
}

/// Posts new WRs on side `i` while its send queue has room.
fn post_more(sides: &mut [Side], i: usize, pmtu: Pmtu, recv_len: u32) -> Result<bool, String> {
    let mut any = false;
    let (a, b) = sides.split_at_mut(1);
    let (s, peer) = if i == 0 {
        (&mut a[0], &mut b[0])
    } else {
        (&mut b[0], &mut a[0])
    };
    let depth = s.ep.sq.len();
    while s.to_post > 0 && s.posted.len() < depth {
        any = true;
        let r = &mut s.rng;
        let wr_id = s.next_wr_id;
        let mut len = size(r, pmtu.bytes()).min(recv_len);
        let mut data = vec![0u8; len as usize];
        r.fill(&mut data);
        let mut result = None;
        let mut recv = None;
        let shadow = &mut s.peer_shadow;
        let op = match r.below(100) {
            0..=29 => SendOp::Send,
            30..=37 => SendOp::SendImm {
                imm: r.next_u64() as u32,
            },
            38..=42 => SendOp::SendInv {
                rkey: r.next_u64() as u32,
            },
            43..=60 => SendOp::Write { va: 0, rkey: 0 },
            61..=68 => SendOp::WriteImm {
                va: 0,
                rkey: 0,
                imm: r.next_u64() as u32,
            },
            69..=84 => SendOp::Read { va: 0, rkey: 0 },
            85..=91 => SendOp::Atomic {
                va: 0,
                rkey: 0,
                op: AtomicOp::CmpSwap {
                    compare: 0,
                    swap: r.next_u64(),
                },
            },
            92..=94 => SendOp::Atomic {
                va: 0,
                rkey: 0,
                op: AtomicOp::FetchAdd { add: r.next_u64() },
            },
            95..=96 => SendOp::Local,
            97 => SendOp::Flush {
                va: 0,
                rkey: 0,
                len: 0,
                placement: 0,
                selectivity: 0,
            },
            _ => SendOp::AtomicWrite { va: 0, rkey: 0 },
        };
        let op = match op {
            SendOp::Send | SendOp::SendImm { .. } | SendOp::SendInv { .. } => {
                let (imm, invalidate) = match op {
                    SendOp::SendImm { imm } => (Some(imm), None),
                    SendOp::SendInv { rkey } => (None, Some(rkey)),
                    _ => (None, None),
                };
                recv = Some(ExpectRecv {
                    kind: RecvKind::Send,
                    data: data.clone(),
                    byte_len: len,
                    imm,
                    invalidate,
                });
                op
            }
            SendOp::Write { .. } | SendOp::WriteImm { .. } => {
                let off = WRITE_REGION.start
                    + r.below((WRITE_REGION.len() - len as usize) as u64) as usize;
                shadow[off..off + len as usize].copy_from_slice(&data);
                let (va, rkey) = (s.peer_base + off as u64, s.peer_rkey);
                match op {
                    SendOp::WriteImm { imm, .. } => {
                        recv = Some(ExpectRecv {
                            kind: RecvKind::WriteImm,
                            data: Vec::new(),
                            byte_len: len,
                            imm: Some(imm),
                            invalidate: None,
                        });
                        SendOp::WriteImm { va, rkey, imm }
                    }
                    _ => SendOp::Write { va, rkey },
                }
            }
            SendOp::Read { .. } => {
                let off =
                    READ_REGION.start + r.below((READ_REGION.len() - len as usize) as u64) as usize;
                result = Some(shadow[off..off + len as usize].to_vec());
                data = vec![0; len as usize];
                SendOp::Read {
                    va: s.peer_base + off as u64,
                    rkey: s.peer_rkey,
                }
            }
            SendOp::Atomic { op: aop, .. } => {
                len = 8;
                let off = ATOMIC_BASE + 8 * r.below(ATOMIC_SLOTS) as usize;
                let cell = &mut shadow[off..off + 8];
                let orig = u64::from_le_bytes(cell.try_into().map_err(|_| "atomic cell")?);
                let aop = match aop {
                    AtomicOp::CmpSwap { swap, .. } => {
                        let compare = if r.chance(0.5) { orig } else { r.next_u64() };
                        if compare == orig {
                            cell.copy_from_slice(&swap.to_le_bytes());
                        }
                        AtomicOp::CmpSwap { compare, swap }
                    }
                    AtomicOp::FetchAdd { add } => {
                        cell.copy_from_slice(&orig.wrapping_add(add).to_le_bytes());
                        AtomicOp::FetchAdd { add }
                    }
                };
                result = Some(orig.to_le_bytes().to_vec());
                data = vec![0; 8];
                SendOp::Atomic {
                    va: s.peer_base + off as u64,
                    rkey: s.peer_rkey,
                    op: aop,
                }
            }
            // A memory registration or local invalidate: no packet, only a
            // completion in posting order.
            SendOp::Local => {
                len = 0;
                data = Vec::new();
                SendOp::Local
            }
            // A FLUSH of a range of the peer's region, or of all of it.
            SendOp::Flush { .. } => {
                let whole = r.chance(0.3);
                let off = r.below(MR_LEN as u64 / 2) as usize;
                len = 0;
                data = Vec::new();
                SendOp::Flush {
                    va: s.peer_base + off as u64,
                    rkey: s.peer_rkey,
                    len: r.below(MR_LEN as u64 / 2) as u32,
                    placement: FLUSH_GLOBAL,
                    selectivity: if whole { FLUSH_MR } else { FLUSH_RANGE },
                }
            }
            SendOp::AtomicWrite { .. } => {
                len = 8;
                let off = ATOMIC_BASE + 8 * r.below(ATOMIC_SLOTS) as usize;
                data = r.next_u64().to_le_bytes().to_vec();
                shadow[off..off + 8].copy_from_slice(&data);
                SendOp::AtomicWrite {
                    va: s.peer_base + off as u64,
                    rkey: s.peer_rkey,
                }
            }
        };
        let wr = SendWr {
            wr_id,
            op,
            len,
            signaled: r.chance(0.8),
            fence: r.chance(0.05),
            solicited: r.chance(0.5),
            ud: None,
        };
        let slot =
            s.ep.post_send(wr, data)
                .map_err(|e| format!("post: {e:?}"))?;
        s.posted.push_back(Posted {
            wr_id,
            signaled: wr.signaled,
            slot,
            result,
            bytes: u64::from(len),
        });
        if let Some(e) = recv {
            peer.incoming.push_back(e);
        }
        s.next_wr_id += 1;
        s.to_post -= 1;
    }
    Ok(any)
}
