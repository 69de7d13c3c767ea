//! The MetaRoCE native connection (`conn`) without a network model: two
//! connections joined by a queue that drops, duplicates and reorders, and
//! property tests that no input makes a connection panic.

use metaroce_proto::conn::{Completion, Conn, ConnConfig, ConnState, RxEvent, SendStatus};
use metaroce_proto::mrc_wire::{
    parse, AckPkt, MrcOp, MrcPacket, NakCode, DATA_HDR_LEN, MAX_HDR_LEN,
};
use metaroce_proto::stream::{MsgDesc, Request, Response};
use proptest::prelude::*;

mod common;
use common::Rand;

type C = Conn<4, 128, 2, 2, 8>;

fn pair() -> (Box<C>, Box<C>) {
    let mut cfg = ConnConfig::new(11);
    cfg.mss = 1024;
    cfg.paths = 4;
    let mut a = Box::new(C::new(cfg));
    cfg.conn_id = 22;
    let mut b = Box::new(C::new(cfg));
    for s in 0..2 {
        assert!(a.open_stream(s, 100 + s as u32, 200 + s as u32));
        assert!(b.open_stream(s, 200 + s as u32, 100 + s as u32));
    }
    (a, b)
}

fn msg(op: MrcOp, len: u32) -> MsgDesc {
    MsgDesc {
        op,
        len,
        va: if op.is_write() { 0x1000 } else { 0 },
        rkey: if op.is_write() { 5 } else { 0 },
        imm: if op.has_imm() { 0xABCD } else { 0 },
        se: false,
    }
}

/// Bytes of the responder's memory region of each stream (streams use
/// disjoint regions, so each stream's verbs order alone defines the data).
const REGION: u64 = 1 << 18;
/// The responder's memory: stream `s` owns `[BASE + s * REGION, + REGION)`.
const BASE: u64 = 0x10_0000;
/// The one valid key of the responder's memory.
const RKEY: u32 = 5;
/// Keys of the responder's windows over the same memory: valid for
/// WRITEs until a SEND_INV invalidates them; the only keys a SEND_INV may
/// name.
const WINDOWS: std::ops::Range<u32> = 0x100..0x200;

/// A message of a workload.
#[derive(Clone, Copy, Debug)]
struct Op {
    stream: usize,
    op: MrcOp,
    len: u32,
    /// Offset in the stream's region (writes, READ, atomics).
    at: u64,
    /// Atomics: compare or add, swap.
    operands: [u64; 2],
    /// Key (a wrong one gets a NAK).
    rkey: u32,
}

impl Op {
    fn new(stream: usize, op: MrcOp, len: u32, at: u64) -> Op {
        Op {
            stream,
            op,
            len,
            at,
            operands: [0; 2],
            rkey: RKEY,
        }
    }
    fn va(&self) -> u64 {
        BASE + self.stream as u64 * REGION + self.at
    }
    /// The responder refuses it (wrong key, beyond its memory; a SEND_INV
    /// naming no window). The workloads never use a window after their
    /// SEND_INV invalidated it.
    fn refused(&self) -> bool {
        if self.op.invalidates() {
            return !WINDOWS.contains(&self.rkey);
        }
        (self.rkey != RKEY && !WINDOWS.contains(&self.rkey))
            || self.va() - BASE + u64::from(self.len) > 2 * REGION
    }
    /// The requester's status and the receiver's refusal code if refused.
    fn refusal(&self) -> (SendStatus, NakCode) {
        if self.op.invalidates() {
            (SendStatus::RemoteInvalid, NakCode::InvalidRequest)
        } else {
            (SendStatus::RemoteAccess, NakCode::RemoteAccess)
        }
    }
}

/// Byte `i` of the payload of message `msn` of stream `s`.
fn pattern(s: usize, msn: u32, i: u32) -> u8 {
    (s as u32 * 131 + msn * 31 + i * 7 + (i >> 8)) as u8
}

/// The responder's memory before the run.
fn initial_memory() -> Vec<u8> {
    (0..2 * REGION).map(|i| (i * 13 + (i >> 9)) as u8).collect()
}

/// What a run delivered: send completions (stream, msn, status), receive
/// completions (stream, msn, len), the data of every READ and atomic
/// result (stream, msn) -> bytes, the responder's memory, retransmissions.
struct Outcome {
    sends: Vec<(usize, u32, SendStatus)>,
    recvs: Vec<(usize, u32, u32)>,
    reads: Results,
    memory: Vec<u8>,
    retx: u64,
    /// Receive completions marked refused (stream, msn, code).
    refused: Vec<(usize, u32, NakCode)>,
    /// Keys the receiver's glue invalidated (`Place::invalidate`), in
    /// order: (stream, msn, key).
    invalidations: Vec<(usize, u32, u32)>,
    /// Receive completions of SEND_INVs: (stream, msn, `invalidated`).
    inv_done: Vec<(usize, u32, Option<u32>)>,
}

/// The responder's side of the test's "kernel glue": checks a request
/// against its memory, carries out an atomic, answers.
fn respond(b: &mut C, mem: &mut [u8], req: &Request) {
    let off = req.va.checked_sub(BASE).map(|o| o as usize);
    let ok = req.rkey == RKEY
        && off.is_some_and(|o| {
            o.checked_add(req.len as usize)
                .is_some_and(|e| e <= mem.len())
        });
    let answer = if !ok {
        Response::Nak(NakCode::RemoteAccess)
    } else if req.op == MrcOp::Read {
        Response::Read
    } else {
        let o = off.unwrap();
        let word = &mut mem[o..o + 8];
        let old = u64::from_le_bytes(word.try_into().unwrap());
        let new = match req.op {
            MrcOp::CmpSwap if old == req.compare_add => req.swap,
            MrcOp::CmpSwap => old,
            _ => old.wrapping_add(req.compare_add),
        };
        word.copy_from_slice(&new.to_le_bytes());
        Response::Atomic(old)
    };
    assert!(b.respond(req.stream, req.msn, answer));
}

/// Runs `a` -> `b` with `loss`% loss, duplication and reordering in both
/// directions until every message completed at both ends. Payloads are real
/// bytes: `b` places WRITE data into its memory, READ responses carry
/// bytes of it, `a` places them into per-READ buffers.
fn loopback(seed: u64, loss: u64, msgs: &[Op]) -> Outcome {
    let (mut a, mut b) = pair();
    let mut r = Rand(seed | 1);
    let mut pending = msgs
        .iter()
        .copied()
        .collect::<std::collections::VecDeque<_>>();
    let mut wire: Vec<(u64, bool, Vec<u8>)> = Vec::new(); // (arrival, to_b, bytes)
    let mut now = 0u64;
    let mut out = Outcome {
        sends: Vec::new(),
        recvs: Vec::new(),
        reads: Default::default(),
        memory: initial_memory(),
        retx: 0,
        refused: Vec::new(),
        invalidations: Vec::new(),
        inv_done: Vec::new(),
    };
    // The responder's windows not invalidated yet.
    let mut live: std::collections::HashSet<u32> = WINDOWS.collect();
    // Data messages the test's glue refused (a WRITE with a bad key).
    let mut refusing = std::collections::HashSet::new();
    let total = msgs.len();
    let mut lens = std::collections::HashMap::new();
    while out.sends.len() < total || out.recvs.len() < total {
        assert!(
            now < 10_000_000_000,
            "stuck: {} sent, {} received",
            out.sends.len(),
            out.recvs.len()
        );
        while let Some(&m) = pending.front() {
            let posted = if m.op.is_atomic() {
                a.post_atomic(m.stream, m.op, m.va(), m.rkey, m.operands[0], m.operands[1])
            } else {
                let mut d = msg(m.op, m.len);
                if m.op.has_remote() {
                    d.va = m.va();
                    d.rkey = m.rkey;
                }
                if m.op.invalidates() {
                    d.rkey = m.rkey;
                }
                a.post(m.stream, d)
            };
            match posted {
                Ok(msn) => {
                    lens.insert((m.stream, msn), m.len);
                    if m.op.is_request() {
                        out.reads
                            .insert((m.stream, msn), vec![0xEE; m.len as usize]);
                    }
                    pending.pop_front();
                }
                Err(_) => break,
            }
        }
        for (from_a, c) in [(true, &mut a), (false, &mut b)] {
            let mut buf = [0u8; MAX_HDR_LEN];
            while let Some(t) = c.poll_transmit(now, &mut buf) {
                let mut bytes = buf[..t.hdr_len].to_vec();
                if let Some(p) = t.payload {
                    match p.mr {
                        None => {
                            assert!(from_a, "b sent data of its own messages");
                            bytes.extend(
                                (0..u32::from(p.len))
                                    .map(|i| pattern(p.stream, p.msn, p.offset + i)),
                            );
                        }
                        Some(mr) => {
                            assert!(!from_a && mr.rkey == RKEY);
                            let o = (mr.va - BASE) as usize;
                            bytes.extend_from_slice(&out.memory[o..o + usize::from(p.len)]);
                        }
                    }
                }
                if r.pct(loss) {
                    continue;
                }
                let delay = 2_000 + if r.pct(loss) { r.next() % 5_000 } else { 0 };
                if r.pct(loss) {
                    wire.push((now + delay + 700, from_a, bytes.clone()));
                }
                wire.push((now + delay, from_a, bytes));
            }
        }
        // Next event: the earliest arrival or timer.
        let next_arrival = wire.iter().map(|w| w.0).min();
        let next_timer = [a.next_deadline(), b.next_deadline()]
            .into_iter()
            .flatten()
            .min();
        now = match (next_arrival, next_timer) {
            (Some(x), Some(y)) => x.min(y),
            (x, y) => x.or(y).unwrap_or_else(|| {
                panic!(
                    "nothing in flight and no timer: {} sent {:?}, {} received, a {:?} b {:?}",
                    out.sends.len(),
                    out.sends.last(),
                    out.recvs.len(),
                    a.outstanding(1),
                    b.outstanding(1)
                )
            }),
        }
        .max(now);
        let (due, rest): (Vec<_>, Vec<_>) = wire.drain(..).partition(|w| w.0 <= now);
        wire = rest;
        for (_, to_b, bytes) in due {
            let c = if to_b { &mut b } else { &mut a };
            let data = bytes.get(DATA_HDR_LEN..).unwrap_or(&[]);
            let ev = c.on_packet(now, &bytes, false, 50_000, 1_000_000);
            match ev {
                Ok(RxEvent::Data(p)) if to_b => {
                    assert_eq!(usize::from(p.len), data.len());
                    assert!(
                        !refusing.contains(&(p.stream, p.msn)),
                        "refused message placed: {p:?}"
                    );
                    let key_ok = p.rkey == RKEY || live.contains(&p.rkey);
                    let bad = p.op.is_write()
                        && (!key_ok
                            || !p.va.checked_sub(BASE).is_some_and(|o| {
                                o + u64::from(lens[&(p.stream, p.msn)]) <= 2 * REGION
                            }));
                    assert!(p.invalidate.is_none() || p.op == MrcOp::SendInv, "{p:?}");
                    if let Some(k) = p.invalidate {
                        // The glue: invalidate the window, or refuse the message.
                        assert_eq!(k, p.rkey);
                        if live.remove(&k) {
                            out.invalidations.push((p.stream, p.msn, k));
                        } else {
                            assert!(b.refuse(p.stream, p.msn, NakCode::InvalidRequest));
                            refusing.insert((p.stream, p.msn));
                        }
                    } else if bad {
                        // The glue's refusal, right after the packet, before any transmit.
                        assert!(b.refuse(p.stream, p.msn, NakCode::RemoteAccess));
                        assert!(
                            !b.refuse(p.stream, p.msn, NakCode::RemoteAccess),
                            "refused twice"
                        );
                        refusing.insert((p.stream, p.msn));
                    } else if p.op.is_write() {
                        let o = (p.va + u64::from(p.offset) - BASE) as usize;
                        out.memory[o..o + data.len()].copy_from_slice(data);
                    } else {
                        let want: Vec<u8> = (0..u32::from(p.len))
                            .map(|i| pattern(p.stream, p.msn, p.offset + i))
                            .collect();
                        assert_eq!(data, &want[..], "send payload");
                    }
                }
                Ok(RxEvent::Data(p)) => {
                    // A response placed by (stream, msn, offset) into our request.
                    let buf = out
                        .reads
                        .get_mut(&(p.stream, p.msn))
                        .expect("response for no request");
                    match p.op {
                        MrcOp::ReadResp => {
                            let o = p.offset as usize;
                            buf[o..o + data.len()].copy_from_slice(data);
                        }
                        MrcOp::AtomicResp => buf.copy_from_slice(&p.va.to_le_bytes()),
                        op => panic!("{op:?} placed at the requester"),
                    }
                }
                Ok(RxEvent::Request(req)) => {
                    assert!(to_b);
                    respond(&mut b, &mut out.memory, &req);
                }
                Ok(_) => {}
                // Held until our NAK is acknowledged.
                Err(metaroce_proto::conn::RxDrop::NakPending) if to_b => {}
                Err(e) => panic!("dropped a valid packet: {e:?}"),
            }
        }
        a.on_timer(now);
        b.on_timer(now);
        while let Some(c) = a.poll_completion() {
            match c {
                Completion::Send {
                    stream,
                    msn,
                    status,
                } => out.sends.push((stream, msn, status)),
                Completion::Recv { .. } => panic!("receive completion at the sender"),
            }
        }
        while let Some(c) = b.poll_completion() {
            match c {
                Completion::Recv { stream, done } => {
                    out.recvs.push((stream, done.msn, done.len));
                    if let Some(code) = done.refused {
                        out.refused.push((stream, done.msn, code));
                    }
                    if done.op == MrcOp::SendInv {
                        // The key was invalidated before this completion.
                        if let Some(k) = done.invalidated {
                            assert!(
                                out.invalidations.contains(&(stream, done.msn, k)),
                                "{done:?} before its invalidation"
                            );
                        }
                        out.inv_done.push((stream, done.msn, done.invalidated));
                    } else {
                        assert_eq!(done.invalidated, None);
                    }
                }
                Completion::Send { .. } => panic!("send completion at the receiver"),
            }
        }
    }
    out.retx = a.stats.retransmits + b.stats.retransmits;
    out
}

fn workload() -> Vec<Op> {
    let ops = [MrcOp::Send, MrcOp::Write, MrcOp::SendImm, MrcOp::WriteImm];
    (0..60u32)
        // Each WRITE to its own bytes (see `read_workload`).
        .map(|i| {
            Op::new(
                (i % 2) as usize,
                ops[(i % 4) as usize],
                (i * 377) % 5000,
                u64::from(i / 2 * 5000),
            )
        })
        .collect()
}

/// Writes and READs (of what earlier WRITEs wrote, partly) in one region.
/// The WRITEs do not overlap each other: two WRITEs in flight at once may
/// land in any order (per-packet placement), so overlapping ones have no
/// defined result before the later completes.
fn read_workload() -> Vec<Op> {
    (0..80u32)
        .map(|i| {
            let s = (i % 2) as usize;
            match i % 5 {
                0 | 3 => {
                    let slot = (i / 5) * 2 + u32::from(i % 5 == 3);
                    Op::new(
                        s,
                        MrcOp::Write,
                        (i * 997) % 2000 + 1,
                        u64::from(slot * 2000),
                    )
                }
                // One empty READ (i = 16).
                1 | 4 => Op::new(
                    s,
                    MrcOp::Read,
                    (i * 1_499) % 7000 * u32::from(i != 16),
                    u64::from((i * 2_731) % 58_000),
                ),
                _ => Op::new(s, MrcOp::Send, (i * 377) % 3000, 0),
            }
        })
        .collect()
}

/// The results verbs order promises: every READ returns the bytes the
/// responder's memory holds after every earlier message of its stream
/// and none of the later ones; the final memory.
/// Results of READs and atomics by (stream, Msn).
type Results = std::collections::HashMap<(usize, u32), Vec<u8>>;

fn expected(msgs: &[Op]) -> (Results, Vec<u8>) {
    let mut mem = initial_memory();
    let mut reads = std::collections::HashMap::new();
    let mut msn = [0u32; 2];
    for m in msgs {
        let o = (m.va() - BASE) as usize;
        let n = m.len as usize;
        let id = (m.stream, msn[m.stream]);
        msn[m.stream] += 1;
        if m.refused() {
            continue;
        }
        match m.op {
            MrcOp::Write | MrcOp::WriteImm => {
                for i in 0..n {
                    mem[o + i] = pattern(id.0, id.1, i as u32);
                }
            }
            MrcOp::Read => {
                reads.insert(id, mem[o..o + n].to_vec());
            }
            MrcOp::CmpSwap | MrcOp::FetchAdd => {
                let old = u64::from_le_bytes(mem[o..o + 8].try_into().unwrap());
                let new = match m.op {
                    MrcOp::CmpSwap if old == m.operands[0] => m.operands[1],
                    MrcOp::CmpSwap => old,
                    _ => old.wrapping_add(m.operands[0]),
                };
                mem[o..o + 8].copy_from_slice(&new.to_le_bytes());
                reads.insert(id, old.to_le_bytes().to_vec());
            }
            _ => {}
        }
    }
    (reads, mem)
}

fn check_order(msgs: &[Op], out: &Outcome) {
    for s in 0..2 {
        let want: Vec<&Op> = msgs.iter().filter(|m| m.stream == s).collect();
        let sent: Vec<(u32, SendStatus)> = out
            .sends
            .iter()
            .filter(|c| c.0 == s)
            .map(|c| (c.1, c.2))
            .collect();
        let got: Vec<(u32, u32)> = out
            .recvs
            .iter()
            .filter(|c| c.0 == s)
            .map(|c| (c.1, c.2))
            .collect();
        let status = |m: &Op| {
            if m.refused() {
                m.refusal().0
            } else {
                SendStatus::Ok
            }
        };
        let want_sent: Vec<(u32, SendStatus)> = want
            .iter()
            .enumerate()
            .map(|(i, m)| (i as u32, status(m)))
            .collect();
        assert_eq!(sent, want_sent, "send order and status, stream {s}");
        // A request holds its place at the responder with length 0.
        let expect: Vec<(u32, u32)> = want
            .iter()
            .enumerate()
            .map(|(i, m)| (i as u32, if m.op.is_request() { 0 } else { m.len }))
            .collect();
        assert_eq!(got, expect, "receive order and lengths, stream {s}");
        // Refused data messages complete marked refused (requests not:
        // their NAK is the core's answer).
        let want_refused: Vec<(usize, u32, NakCode)> = want
            .iter()
            .enumerate()
            .filter(|(_, m)| m.refused() && !m.op.is_request())
            .map(|(i, m)| (s, i as u32, m.refusal().1))
            .collect();
        let got_refused: Vec<_> = out.refused.iter().filter(|c| c.0 == s).copied().collect();
        assert_eq!(
            got_refused, want_refused,
            "refused receive completions, stream {s}"
        );
        // Every SEND_INV not refused invalidated its key exactly once, and
        // its receive completion names it; a refused one invalidated none.
        let inv: Vec<_> = want
            .iter()
            .enumerate()
            .filter(|(_, m)| m.op.invalidates())
            .map(|(i, m)| (s, i as u32, (!m.refused()).then_some(m.rkey)))
            .collect();
        let got_inv: Vec<_> = out.inv_done.iter().filter(|c| c.0 == s).copied().collect();
        assert_eq!(got_inv, inv, "SEND_INV receive completions, stream {s}");
        let did: Vec<_> = out
            .invalidations
            .iter()
            .filter(|c| c.0 == s)
            .map(|&(s, m, k)| (s, m, Some(k)))
            .collect();
        let want_did: Vec<_> = inv.iter().filter(|c| c.2.is_some()).copied().collect();
        assert_eq!(did, want_did, "invalidations, stream {s}");
    }
    let (reads, mem) = expected(msgs);
    for (id, want) in &reads {
        let got = out.reads.get(id).expect("result");
        if got != want {
            let first = got.iter().zip(want).position(|(a, b)| a != b);
            let bad = got.iter().zip(want).filter(|(a, b)| a != b).count();
            panic!(
                "READ/atomic result {id:?} differs: len {} first {first:?}, {bad} bytes",
                want.len()
            );
        }
    }
    assert!(out.memory == mem, "responder memory differs");
}

#[test]
fn lossless_loopback_in_order() {
    for w in [workload(), read_workload()] {
        let out = loopback(1, 0, &w);
        check_order(&w, &out);
        assert_eq!(out.retx, 0);
    }
}

#[test]
fn lossy_loopback_completes_in_verbs_order() {
    for w in [workload(), read_workload()] {
        for seed in 1..=20 {
            let out = loopback(seed, 10, &w);
            check_order(&w, &out);
            assert!(
                out.retx > 0,
                "seed {seed}: 10% loss without a retransmission"
            );
        }
    }
}

/// Atomics on a few words (so that they hit the same word often), mixed
/// with WRITEs over those words and READs of them; every other CMP_SWAP
/// compares with the value the word holds at its turn in verbs order.
fn atomic_workload() -> Vec<Op> {
    let mut w: Vec<Op> = (0..90u32)
        .map(|i| {
            let s = (i % 2) as usize;
            let word = u64::from((i / 12) % 2) * 8;
            let v = u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            match i % 6 {
                0 | 3 => Op {
                    operands: [v, 0],
                    ..Op::new(s, MrcOp::FetchAdd, 8, word)
                },
                1 => Op {
                    operands: [v, v ^ 0xFF],
                    ..Op::new(s, MrcOp::CmpSwap, 8, word)
                },
                2 => Op::new(s, MrcOp::Read, 40, 0),
                4 => Op::new(s, MrcOp::Write, 8, word),
                _ => Op::new(s, MrcOp::Send, 100, 0),
            }
        })
        .collect();
    for k in (0..w.len()).filter(|k| k % 12 == 1) {
        let (_, mem) = expected(&w[..k]);
        let n = (w[k].va() - BASE) as usize;
        w[k].operands[0] = u64::from_le_bytes(mem[n..n + 8].try_into().unwrap());
    }
    w
}

#[test]
fn atomics_execute_once_in_verbs_order() {
    let w = atomic_workload();
    // Some CMP_SWAPs succeed and some fail in the model.
    let (res, _) = expected(&w);
    let mut msn = [0u32; 2];
    let (mut hit, mut miss) = (0, 0);
    for m in &w {
        let id = (m.stream, msn[m.stream]);
        msn[m.stream] += 1;
        if m.op == MrcOp::CmpSwap {
            if res[&id][..] == m.operands[0].to_le_bytes() {
                hit += 1;
            } else {
                miss += 1;
            }
        }
    }
    assert!(
        hit >= 3 && miss >= 3,
        "{hit} successful, {miss} failed CMP_SWAPs"
    );
    for (seed, loss) in (1..=20).zip([0, 10, 20, 30].into_iter().cycle()) {
        let out = loopback(seed, loss, &w);
        check_order(&w, &out);
    }
}

#[test]
fn misaligned_atomic_is_refused_by_the_core() {
    let mut w = atomic_workload();
    assert!(w[3].op == MrcOp::FetchAdd);
    w[3].at += 4;
    let out = loopback(3, 10, &w);
    let bad: Vec<_> = out.sends.iter().filter(|c| c.2 != SendStatus::Ok).collect();
    assert_eq!(bad, [&(1, 1, SendStatus::RemoteInvalid)]);
}

#[test]
fn reads_return_verbs_order_data() {
    // Every READ reads what the WRITEs before it wrote: the workload is
    // not trivial (some READ sees a WRITE of the run, some the initial
    // memory).
    let w = read_workload();
    let (reads, _) = expected(&w);
    let init = initial_memory();
    let fresh = reads.iter().filter(|(id, d)| {
        let m = w
            .iter()
            .filter(|m| m.stream == id.0)
            .nth(id.1 as usize)
            .unwrap();
        let o = (m.va() - BASE) as usize;
        !d.is_empty() && d[..] != init[o..o + d.len()]
    });
    assert!(fresh.count() >= 5);
    for seed in 21..=40 {
        let out = loopback(seed, 15, &w);
        check_order(&w, &out);
    }
}

#[test]
fn refused_read_completes_in_order_with_remote_access() {
    let mut w = read_workload();
    assert!(w[6].op == MrcOp::Read && w[11].op == MrcOp::Read && w[12].op == MrcOp::Send);
    w[6].rkey = 99;
    w[11].rkey = 98;
    // Beyond the responder's memory.
    w[12] = Op::new(0, MrcOp::Read, 100, 2 * REGION - 50);
    for seed in 1..=10 {
        let out = loopback(seed, 10, &w);
        check_order(&w, &out);
        let refused = out
            .sends
            .iter()
            .filter(|c| c.2 == SendStatus::RemoteAccess)
            .count();
        assert_eq!(refused, 3);
    }
}

/// A responder refuses WRITEs with a bad key (multi-packet and one-packet,
/// WRITE and WRITE_IMM): under loss, duplication and reordering each
/// completes in order with RemoteAccess at the requester, none of its
/// packets after the refusal is placed (checked in `loopback`), the
/// responder's memory keeps none of its bytes, and the responder's receive
/// completion comes in order marked refused.
#[test]
fn refused_write_completes_in_order_with_remote_access() {
    let mut w = workload();
    // Stream 1: WRITE of 4 packets, WRITE_IMM of 1, WRITE of 5.
    assert!(w[9].op == MrcOp::Write && w[9].len > 3 * 1024);
    assert!(w[15].op == MrcOp::WriteImm && w[15].len <= 1024);
    assert!(w[25].op == MrcOp::Write && w[25].len > 4 * 1024);
    for i in [9, 15, 25] {
        w[i].rkey = 77;
    }
    let mut retx = 0;
    for (seed, loss) in (1..=20).zip([0, 10, 20, 30].into_iter().cycle()) {
        let out = loopback(seed, loss, &w);
        check_order(&w, &out);
        assert_eq!(
            out.sends
                .iter()
                .filter(|c| c.2 == SendStatus::RemoteAccess)
                .count(),
            3
        );
        assert_eq!(out.refused.len(), 3);
        retx += out.retx;
    }
    assert!(retx > 0);
}

#[test]
fn dead_peer_fails_the_connection_in_order() {
    let (mut a, _b) = pair();
    for _ in 0..3 {
        a.post(0, msg(MrcOp::Send, 3000)).unwrap();
    }
    let mut now = 0;
    let mut buf = [0u8; DATA_HDR_LEN];
    for _ in 0..10_000 {
        while a.poll_transmit(now, &mut buf).is_some() {}
        match a.next_deadline() {
            Some(t) => now = t.max(now),
            None => break,
        }
        a.on_timer(now);
        if a.state() == ConnState::Failed {
            break;
        }
    }
    while a.poll_transmit(now, &mut buf).is_some() {}
    assert_eq!(a.state(), ConnState::Failed);
    let c: Vec<Completion> = std::iter::from_fn(|| a.poll_completion()).collect();
    let st: Vec<SendStatus> = c
        .iter()
        .map(|c| match c {
            Completion::Send { status, .. } => *status,
            _ => panic!(),
        })
        .collect();
    assert_eq!(
        st,
        [
            SendStatus::RetryExceeded,
            SendStatus::Flushed,
            SendStatus::Flushed
        ]
    );
    assert!(a.post(0, msg(MrcOp::Send, 1)).is_err());
}

/// Moves every packet `from` has for `to` now; returns the receiver's results.
fn deliver(
    from: &mut C,
    to: &mut C,
    now: u64,
) -> Vec<Result<RxEvent, metaroce_proto::conn::RxDrop>> {
    common::packets(from, now)
        .iter()
        .map(|b| to.on_packet(now, b, false, 50_000, 0))
        .collect()
}

#[test]
fn set_config_in_place_equals_new() {
    let mut cfg = ConnConfig::new(77);
    cfg.mss = 1024;
    cfg.paths = 3;
    let fresh = C::new(cfg);
    let mut c = Box::new(C::new(ConnConfig::new(1)));
    assert!(c.set_config(cfg));
    assert_eq!(c.config(), fresh.config());
    for i in 0..4 {
        assert_eq!(c.path_info(i), fresh.path_info(i));
        assert_eq!(c.path_rtt(i), fresh.path_rtt(i));
    }
    assert_eq!(c.conn_window(), fresh.conn_window());
    // A used connection keeps its configuration.
    assert!(c.open_stream(0, 1, 2));
    assert!(!c.set_config(ConnConfig::new(5)));
    assert_eq!(c.config().conn_id, 77);
}

#[test]
fn closed_stream_is_abandoned_and_its_data_acknowledged() {
    let (mut a, mut b) = pair();
    // Stream 0's receiver is gone: b acknowledges its data (the path moves on) but drops it.
    assert!(b.close_stream(0));
    a.post(0, msg(MrcOp::Send, 3000)).unwrap();
    let got = deliver(&mut a, &mut b, 0);
    assert_eq!(got.len(), 3);
    assert!(got
        .iter()
        .all(|r| *r == Err(metaroce_proto::conn::RxDrop::NoStream)));
    let acks = deliver(&mut b, &mut a, 10);
    assert!(!acks.is_empty() && acks.iter().all(|r| *r == Ok(RxEvent::Ack)));
    assert_eq!(a.stats.retransmits, 0);
    // Stream 1's sender closes with messages in flight: they are never resent, the
    // connection does not fail, and stream 0 still works.
    a.post(1, msg(MrcOp::Send, 2000)).unwrap();
    let mut buf = [0u8; DATA_HDR_LEN];
    while a.poll_transmit(20, &mut buf).is_some() {}
    assert_eq!(a.outstanding(1), 1);
    assert!(a.close_stream(1));
    assert_eq!(a.outstanding(1), 0);
    let mut now = 20;
    for _ in 0..200 {
        match a.next_deadline() {
            Some(t) => now = t.max(now),
            None => break,
        }
        a.on_timer(now);
        while a.poll_transmit(now, &mut buf).is_some() {}
    }
    assert_eq!(a.state(), ConnState::Active);
    assert_eq!(a.stats.retransmits, 0, "an abandoned message was resent");
    assert!(b.open_stream(0, 200, 100));
    a.post(0, msg(MrcOp::Send, 100)).unwrap();
    let got = deliver(&mut a, &mut b, now);
    assert!(matches!(got.as_slice(), [Ok(RxEvent::Data(_))]), "{got:?}");
    deliver(&mut b, &mut a, now + 10);
    let done: Vec<Completion> = std::iter::from_fn(|| a.poll_completion()).collect();
    assert_eq!(done.len(), 2, "{done:?}");
}

#[test]
fn restarted_peer_is_accepted_after_reset_receiver() {
    let (mut a, mut b) = pair();
    a.post(0, msg(MrcOp::Send, 10)).unwrap();
    assert!(matches!(
        deliver(&mut a, &mut b, 0).as_slice(),
        [Ok(RxEvent::Data(_))]
    ));
    assert_eq!(b.peer_conn(), Some(11));
    // `a` restarts: a new connection with a new id and the same streams.
    let mut cfg = ConnConfig::new(33);
    cfg.mss = 1024;
    cfg.paths = 4;
    let mut a2 = Box::new(C::new(cfg));
    assert!(a2.open_stream(0, 100, 200));
    a2.post(0, msg(MrcOp::Send, 10)).unwrap();
    let got = deliver(&mut a2, &mut b, 10);
    assert_eq!(got, [Err(metaroce_proto::conn::RxDrop::WrongConn)]);
    b.reset_receiver();
    a2.on_timer(50_000_000);
    let got = deliver(&mut a2, &mut b, 50_000_000);
    assert!(
        got.iter()
            .any(|r| matches!(r, Ok(RxEvent::Data(p)) if p.msn == 0)),
        "{got:?}"
    );
    assert_eq!(b.peer_conn(), Some(33));
    // b's sending half kept its state: its stream to a still works for the old peer's ids.
    assert_eq!(b.state(), ConnState::Active);
}

#[test]
fn ack_for_another_connection_is_dropped() {
    let (mut a, _) = pair();
    let mut buf = [0u8; 64];
    let n = AckPkt {
        conn: 99,
        ..AckPkt::default()
    }
    .write(&mut buf)
    .unwrap();
    assert!(a.on_packet(0, &buf[..n], false, 1, 0).is_err());
    assert_eq!(a.stats.drops, 1);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Arbitrary bytes never make a connection panic, in any state.
    #[test]
    fn noise_never_panics(pkts in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..120), 1..20), busy in any::<bool>()) {
        let (mut a, _) = pair();
        if busy {
            a.post(0, msg(MrcOp::Write, 9000)).unwrap();
        }
        let mut buf = [0u8; DATA_HDR_LEN];
        let mut now = 0;
        for p in &pkts {
            now += 1000;
            let _ = a.on_packet(now, p, true, 7, 5);
            while a.poll_transmit(now, &mut buf).is_some() {}
            a.on_timer(now);
            while a.poll_completion().is_some() {}
        }
    }

    /// Valid headers with mutated fields never make a connection panic.
    #[test]
    fn mutated_traffic_never_panics(seed in any::<u64>(), flips in prop::collection::vec((0usize..60, any::<u8>()), 1..4)) {
        let (mut a, mut b) = pair();
        a.post(0, msg(MrcOp::Send, 5000)).unwrap();
        a.post(1, msg(MrcOp::WriteImm, 2000)).unwrap();
        let mut buf = [0u8; DATA_HDR_LEN];
        let mut r = Rand(seed | 1);
        for round in 0..30u64 {
            let now = round * 3000;
            while let Some(t) = a.poll_transmit(now, &mut buf) {
                let mut bytes = buf[..t.hdr_len].to_vec();
                bytes.resize(t.hdr_len + t.payload.map_or(0, |p| usize::from(p.len)), 0);
                if r.pct(30) {
                    for &(at, v) in &flips {
                        if let Some(x) = bytes.get_mut(at) {
                            *x ^= v;
                        }
                    }
                }
                let _ = b.on_packet(now, &bytes, r.pct(20), 9, 100);
            }
            while let Some(t) = b.poll_transmit(now, &mut buf) {
                let mut bytes = buf[..t.hdr_len].to_vec();
                if r.pct(30) {
                    for &(at, v) in &flips {
                        if let Some(x) = bytes.get_mut(at) {
                            *x ^= v;
                        }
                    }
                }
                if let Ok(MrcPacket::Ack(_)) = parse(&bytes) {}
                let _ = a.on_packet(now, &bytes, false, 9, 0);
            }
            a.on_timer(now);
            b.on_timer(now);
            while a.poll_completion().is_some() {}
            while b.poll_completion().is_some() {}
        }
    }
}

/// A READ of `len` bytes at [`BASE`] under [`RKEY`].
fn read_of(len: u32) -> MsgDesc {
    MsgDesc {
        va: BASE,
        rkey: RKEY,
        ..msg(MrcOp::Read, len)
    }
}

/// Every packet `from` has now, as bytes (payloads zero).
fn drain(from: &mut C, now: u64) -> Vec<Vec<u8>> {
    let mut buf = [0u8; MAX_HDR_LEN];
    let mut out = Vec::new();
    while let Some(t) = from.poll_transmit(now, &mut buf) {
        let mut bytes = buf[..t.hdr_len].to_vec();
        if let Some(p) = t.payload {
            bytes.resize(t.hdr_len + usize::from(p.len), 0);
        }
        out.push(bytes);
    }
    out
}

fn data_ops(pkts: &[Vec<u8>]) -> Vec<MrcOp> {
    pkts.iter()
        .filter_map(|b| match parse(b) {
            Ok(MrcPacket::Data(h, _)) => Some(h.op),
            _ => None,
        })
        .collect()
}

#[test]
fn duplicate_read_request_is_answered_once() {
    let (mut a, mut b) = pair();
    let read = read_of(3000);
    assert_eq!(a.post(0, read), Ok(0));
    let req = drain(&mut a, 0);
    assert_eq!(data_ops(&req), [MrcOp::Read]);
    let r = b.on_packet(1, &req[0], false, 7, 0);
    let Ok(RxEvent::Request(q)) = r else {
        panic!("{r:?}")
    };
    assert_eq!(
        (q.stream, q.msn, q.op, q.rkey, q.va, q.len),
        (0, 0, MrcOp::Read, RKEY, BASE, 3000)
    );
    // The same request again (a retransmission, or duplicated by the network).
    assert_eq!(b.on_packet(2, &req[0], false, 7, 0), Ok(RxEvent::Duplicate));
    assert!(b.respond(0, 0, Response::Read));
    assert!(!b.respond(0, 0, Response::Read), "answered twice");
    assert!(!b.respond(0, 1, Response::Read), "answer to no request");
    let resp = drain(&mut b, 3);
    assert_eq!(data_ops(&resp), [MrcOp::ReadResp; 3]);
    // Once more after the answer: acknowledged, not answered again.
    assert_eq!(b.on_packet(4, &req[0], false, 7, 0), Ok(RxEvent::Duplicate));
    let again = drain(&mut b, 5);
    assert!(
        !again.is_empty() && data_ops(&again).is_empty(),
        "a duplicate request sent more data"
    );
    // The requester places the three packets and completes the READ only
    // after the last (its request was acknowledged in between).
    for (i, p) in resp.iter().enumerate() {
        if let Ok(MrcPacket::Data(..)) = parse(p) {
            let r = a.on_packet(6, p, false, 9, 0);
            assert!(
                matches!(r, Ok(RxEvent::Data(pl)) if pl.op == MrcOp::ReadResp && pl.msn == 0),
                "{r:?}"
            );
        } else {
            assert_eq!(a.on_packet(6, p, false, 9, 0), Ok(RxEvent::Ack));
        }
        if i == 0 {
            assert_eq!(a.poll_completion(), None, "READ complete before its data");
        }
    }
    assert_eq!(
        a.poll_completion(),
        Some(Completion::Send {
            stream: 0,
            msn: 0,
            status: SendStatus::Ok
        })
    );
}

#[test]
fn read_waits_for_earlier_writes_and_later_writes_for_the_read() {
    let (mut a, mut b) = pair();
    let mut write = msg(MrcOp::Write, 100);
    write.va = BASE;
    let read = read_of(10);
    a.post(0, write).unwrap();
    a.post(0, read).unwrap();
    a.post(0, read).unwrap();
    a.post(0, write).unwrap();
    // Only the first WRITE leaves: the READ waits for its completion.
    let first = drain(&mut a, 0);
    assert_eq!(data_ops(&first), [MrcOp::Write]);
    for p in &first {
        b.on_packet(1, p, false, 7, 0).unwrap();
    }
    for p in drain(&mut b, 2) {
        a.on_packet(3, &p, false, 9, 0).unwrap();
    }
    assert_eq!(
        drain(&mut a, 4).len(),
        0,
        "READ left before the WRITE completed"
    );
    assert!(matches!(
        a.poll_completion(),
        Some(Completion::Send { msn: 0, .. })
    ));
    // Both READs go together; the last WRITE waits for them.
    let reads = drain(&mut a, 5);
    assert_eq!(data_ops(&reads), [MrcOp::Read, MrcOp::Read]);
    for p in &reads {
        let r = b.on_packet(6, p, false, 7, 0);
        let Ok(RxEvent::Request(q)) = r else {
            panic!("{r:?}")
        };
        assert!(b.respond(q.stream, q.msn, Response::Read));
    }
    let resp = drain(&mut b, 7);
    assert_eq!(data_ops(&resp), [MrcOp::ReadResp, MrcOp::ReadResp]);
    // The requests are acknowledged but the data not there yet.
    for p in resp
        .iter()
        .filter(|p| matches!(parse(p), Ok(MrcPacket::Ack(_))))
    {
        a.on_packet(8, p, false, 9, 0).unwrap();
    }
    assert_eq!(a.poll_completion(), None);
    assert_eq!(
        data_ops(&drain(&mut a, 9)),
        [],
        "WRITE left before the READs completed"
    );
    for p in resp
        .iter()
        .filter(|p| matches!(parse(p), Ok(MrcPacket::Data(..))))
    {
        a.on_packet(10, p, false, 9, 0).unwrap();
    }
    assert!(matches!(
        a.poll_completion(),
        Some(Completion::Send {
            msn: 1,
            status: SendStatus::Ok,
            ..
        })
    ));
    assert!(matches!(
        a.poll_completion(),
        Some(Completion::Send {
            msn: 2,
            status: SendStatus::Ok,
            ..
        })
    ));
    assert_eq!(data_ops(&drain(&mut a, 11)), [MrcOp::Write]);
}

#[test]
fn response_for_a_flushed_read_is_acknowledged() {
    let (mut a, mut b) = pair();
    let read = read_of(0);
    a.post(0, read).unwrap();
    let req = drain(&mut a, 0);
    let Ok(RxEvent::Request(q)) = b.on_packet(1, &req[0], false, 7, 0) else {
        panic!()
    };
    assert_eq!(q.len, 0);
    assert!(b.respond(0, 0, Response::Read));
    // b's ACK and its (empty) READ_RESP never reach a, whose connection fails.
    let resp = drain(&mut b, 2);
    assert_eq!(data_ops(&resp), [MrcOp::ReadResp]);
    let mut now = 2;
    let mut buf = [0u8; MAX_HDR_LEN];
    while a.state() != ConnState::Failed {
        now = a.next_deadline().expect("a timer").max(now);
        a.on_timer(now);
        while a.poll_transmit(now, &mut buf).is_some() {}
    }
    assert_eq!(
        a.poll_completion(),
        Some(Completion::Send {
            stream: 0,
            msn: 0,
            status: SendStatus::RetryExceeded
        })
    );
    // The response arrives late: acknowledged (b stops resending it), not placed.
    let data = resp
        .iter()
        .find(|p| matches!(parse(p), Ok(MrcPacket::Data(..))))
        .unwrap();
    assert_eq!(a.on_packet(now, data, false, 9, 0), Ok(RxEvent::Duplicate));
    let acks = drain(&mut a, now);
    assert_eq!(acks.len(), 1);
    assert_eq!(b.on_packet(now, &acks[0], false, 9, 0), Ok(RxEvent::Ack));
    assert_eq!(
        b.next_deadline(),
        None,
        "b still has the response in flight"
    );
}

#[test]
fn atomic_waits_for_a_buffer_with_room_for_its_operands() {
    let (mut a, _b) = pair();
    a.post_atomic(0, MrcOp::CmpSwap, BASE, RKEY, 1, 2).unwrap();
    a.post(1, msg(MrcOp::Send, 10)).unwrap();
    let mut small = [0u8; DATA_HDR_LEN];
    // The other stream's SEND goes; the atomic does not, and nothing of it
    // was counted as sent.
    let t = a.poll_transmit(0, &mut small).expect("the SEND");
    assert_eq!(t.payload.map(|p| p.stream), Some(1));
    assert_eq!(a.poll_transmit(0, &mut small), None);
    let sent: u64 = (0..4).map(|i| a.path_info(i).unwrap().2.sent).sum();
    assert_eq!(sent, 1);
    let mut buf = [0u8; MAX_HDR_LEN];
    let t = a.poll_transmit(0, &mut buf).expect("the atomic");
    assert_eq!(t.hdr_len, MAX_HDR_LEN);
    let Ok(MrcPacket::Data(h, ops)) = parse(&buf) else {
        panic!()
    };
    assert_eq!(
        (h.op, h.va, h.rkey, h.msg_len),
        (MrcOp::CmpSwap, BASE, RKEY, 16)
    );
    assert_eq!(ops, [1u64.to_be_bytes(), 2u64.to_be_bytes()].concat());
}

#[test]
fn request_under_a_second_dsn_is_not_carried_out_again() {
    let (mut a, mut b) = pair();
    let read = read_of(10);
    a.post(0, read).unwrap();
    let req = drain(&mut a, 0);
    assert!(matches!(
        b.on_packet(1, &req[0], false, 7, 0),
        Ok(RxEvent::Request(_))
    ));
    assert!(b.respond(0, 0, Response::Read));
    for p in drain(&mut b, 2) {
        a.on_packet(3, &p, false, 9, 0).unwrap();
    }
    // a's ACK frees b's response slot.
    for p in drain(&mut a, 4) {
        assert_eq!(b.on_packet(5, &p, false, 7, 0), Ok(RxEvent::Ack));
    }
    // The same request under another Dsn (a corrupted or forged copy).
    let mut again = req[0].clone();
    let dsn = u32::from_be_bytes(again[20..24].try_into().unwrap()) + 5;
    again[20..24].copy_from_slice(&dsn.to_be_bytes());
    let r = b.on_packet(6, &again, false, 7, 0);
    assert_eq!(
        r,
        Err(metaroce_proto::conn::RxDrop::Stream(
            metaroce_proto::stream::StreamDrop::Inconsistent
        ))
    );
    assert!(data_ops(&drain(&mut b, 7)).is_empty());
}

/// `refuse` later, while the message is incomplete (another packet came in
/// between): its remaining packets are not placed, the one that completes
/// it is held until the NAK is acknowledged; a complete message, a second
/// refusal, a request and an unknown message cannot be refused.
#[test]
fn refusal_of_an_incomplete_message_and_what_cannot_be_refused() {
    use metaroce_proto::conn::RxDrop;
    let (mut a, mut b) = pair();
    let w = |len| MsgDesc {
        va: 0x1000,
        rkey: 5,
        ..msg(MrcOp::Write, len)
    };
    a.post(0, w(3000)).unwrap(); // Msn 0: 3 packets
    a.post(0, msg(MrcOp::Send, 10)).unwrap(); // Msn 1
    let pkts = drain(&mut a, 0);
    assert_eq!(pkts.len(), 4);
    let on = |b: &mut C, p: &Vec<u8>| b.on_packet(1, p, false, 50_000, 0);
    assert!(matches!(on(&mut b, &pkts[0]), Ok(RxEvent::Data(p)) if p.msn == 0));
    assert!(matches!(on(&mut b, &pkts[3]), Ok(RxEvent::Data(p)) if p.msn == 1));
    assert!(!b.refuse(0, 5, NakCode::RemoteAccess), "never received");
    assert!(b.refuse(0, 0, NakCode::RemoteOperation));
    assert!(!b.refuse(0, 0, NakCode::RemoteAccess), "refused twice");
    // Message 1 is complete and no longer the one just received: too late.
    assert!(!b.refuse(0, 1, NakCode::RemoteAccess));
    assert_eq!(
        on(&mut b, &pkts[1]),
        Ok(RxEvent::Refused(NakCode::RemoteOperation))
    );
    // The completing packet waits for the NAK's acknowledgement.
    assert_eq!(on(&mut b, &pkts[2]), Err(RxDrop::NakPending));
    assert_eq!(b.poll_completion(), None);
    // b's ACKs and NAK to a; a acknowledges the NAK; a's resent packet now passes.
    let mut now = 10;
    let mut sends = Vec::new();
    let mut recvs = Vec::new();
    for _ in 0..200 {
        // Both ways until nothing is left to send at this instant.
        loop {
            let to_a = drain(&mut b, now);
            for p in &to_a {
                assert!(!matches!(
                    a.on_packet(now, p, false, 50_000, 0),
                    Ok(RxEvent::Data(_))
                ));
            }
            let to_b = drain(&mut a, now);
            for p in &to_b {
                let r = b.on_packet(now, p, false, 50_000, 0);
                assert!(
                    !matches!(r, Ok(RxEvent::Data(_))),
                    "placed after the refusal: {r:?}"
                );
            }
            if to_a.is_empty() && to_b.is_empty() {
                break;
            }
        }
        sends.extend(std::iter::from_fn(|| a.poll_completion()));
        recvs.extend(std::iter::from_fn(|| b.poll_completion()));
        if sends.len() == 2 && recvs.len() == 2 {
            break;
        }
        now = [a.next_deadline(), b.next_deadline()]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now)
            .max(now + 1);
        a.on_timer(now);
        b.on_timer(now);
    }
    assert_eq!(
        sends,
        [
            Completion::Send {
                stream: 0,
                msn: 0,
                status: SendStatus::RemoteOperation
            },
            Completion::Send {
                stream: 0,
                msn: 1,
                status: SendStatus::Ok
            },
        ]
    );
    let got: Vec<_> = recvs
        .iter()
        .map(|c| match c {
            Completion::Recv { done, .. } => (done.msn, done.len, done.refused),
            c => panic!("{c:?}"),
        })
        .collect();
    assert_eq!(
        got,
        [(0, 3000, Some(NakCode::RemoteOperation)), (1, 10, None)]
    );
    // A READ request is answered with `respond`, not refused.
    a.post(
        0,
        MsgDesc {
            va: 0x1000,
            rkey: 5,
            ..msg(MrcOp::Read, 100)
        },
    )
    .unwrap();
    let p = drain(&mut a, now + 1);
    assert!(matches!(
        b.on_packet(now + 1, &p[0], false, 50_000, 0),
        Ok(RxEvent::Request(_))
    ));
    assert!(!b.refuse(0, 2, NakCode::RemoteAccess));
    assert_eq!(a.state(), ConnState::Active);
}

/// Windows written and then invalidated by SEND_INV on the same stream,
/// with SENDs and WRITEs around them: in each group of six messages of a
/// stream, a WRITE of several packets through a window, the SEND_INV of
/// that window (one empty, some of several packets), a SEND, a WRITE, a
/// SEND_IMM (twice a SEND_INV of a key that is no window) and a WRITE_IMM.
fn inv_workload() -> Vec<Op> {
    (0..72u32)
        .map(|i| {
            let s = ((i / 6) % 2) as usize;
            let window = WINDOWS.start + i / 6;
            let slot = u64::from(i / 12 * 2) * 4000;
            match i % 6 {
                0 => Op {
                    rkey: window,
                    ..Op::new(s, MrcOp::Write, (i * 577) % 3000 + 1100, slot)
                },
                1 => Op {
                    rkey: window,
                    ..Op::new(
                        s,
                        MrcOp::SendInv,
                        (i * 2_477) % 4500 * u32::from(i != 13),
                        0,
                    )
                },
                2 => Op::new(s, MrcOp::Send, (i * 377) % 3000, 0),
                3 => Op::new(s, MrcOp::Write, (i * 97) % 3000 + 1, slot + 4000),
                4 if i == 28 || i == 58 => Op {
                    rkey: 0x300 + i,
                    ..Op::new(s, MrcOp::SendInv, i * 50, 0)
                },
                4 => Op::new(s, MrcOp::SendImm, i * 10, 0),
                _ => Op::new(s, MrcOp::WriteImm, 0, 0),
            }
        })
        .collect()
}

/// Loopback of `inv_workload` with 0-30 % loss, duplication and
/// reordering: every WRITE through a window lands before the SEND_INV that
/// follows it invalidates the window (the SEND_INV's fence; a WRITE packet
/// placed after the invalidation would be refused and fail the memory and
/// status checks), each window is invalidated exactly once, before its
/// receive completion, which names it; a SEND_INV naming no window is
/// refused (InvalidRequest: the requester's RemoteInvalid, the receive
/// completion refused, nothing invalidated). Checked in `loopback` and
/// `check_order`.
#[test]
fn send_inv_invalidates_once_after_earlier_writes_in_verbs_order() {
    let w = inv_workload();
    assert!(
        w.iter()
            .filter(|m| m.op == MrcOp::SendInv && m.len > 2048)
            .count()
            >= 4
    );
    assert!(w.iter().any(|m| m.op == MrcOp::SendInv && m.len == 0));
    let mut retx = 0;
    for (seed, loss) in (1..=24).zip([0, 10, 20, 30].into_iter().cycle()) {
        let out = loopback(seed, loss, &w);
        check_order(&w, &out);
        assert_eq!(out.invalidations.len(), 12, "seed {seed}");
        assert_eq!(
            out.sends
                .iter()
                .filter(|c| c.2 == SendStatus::RemoteInvalid)
                .count(),
            2
        );
        retx += out.retx;
    }
    assert!(retx > 100, "{retx} retransmissions");
}

fn hdr_of(p: &[u8]) -> metaroce_proto::mrc_wire::DataHdr {
    match parse(p) {
        Ok(MrcPacket::Data(h, _)) => h,
        other => panic!("{other:?}"),
    }
}

/// One-packet SEND_INV: it waits for the SEND before it (fence), carries its
/// key in RKey, names it to the receiver on its one packet and never again
/// (duplicate), and its receive completion, after the SEND's, names it.
#[test]
fn send_inv_one_packet_waits_for_older_messages_and_names_its_key_once() {
    let (mut a, mut b) = pair();
    let inv = MsgDesc {
        rkey: 0x1234_5678,
        ..msg(MrcOp::SendInv, 300)
    };
    a.post(0, msg(MrcOp::Send, 10)).unwrap();
    a.post(0, inv).unwrap();
    // A message of the other stream is not held by it.
    a.post(1, msg(MrcOp::Send, 10)).unwrap();
    let first = drain(&mut a, 0);
    assert_eq!(
        data_ops(&first),
        [MrcOp::Send, MrcOp::Send],
        "SEND_INV left before the SEND completed"
    );
    for p in &first {
        assert!(
            matches!(b.on_packet(1, p, false, 7, 0), Ok(RxEvent::Data(pl)) if pl.invalidate.is_none())
        );
    }
    for p in drain(&mut b, 2) {
        assert_eq!(a.on_packet(3, &p, false, 9, 0), Ok(RxEvent::Ack));
    }
    assert!(matches!(
        a.poll_completion(),
        Some(Completion::Send {
            stream: 0,
            msn: 0,
            status: SendStatus::Ok
        })
    ));
    let pkts = drain(&mut a, 4);
    assert_eq!(data_ops(&pkts), [MrcOp::SendInv]);
    let h = hdr_of(&pkts[0]);
    assert_eq!(
        (h.msn, h.rsn, h.rkey, h.va, h.imm, h.len),
        (1, 1, 0x1234_5678, 0, 0, 300)
    );
    let r = b.on_packet(5, &pkts[0], false, 7, 0);
    let Ok(RxEvent::Data(pl)) = r else {
        panic!("{r:?}")
    };
    assert_eq!(
        (pl.op, pl.msn, pl.rsn, pl.len, pl.invalidate),
        (MrcOp::SendInv, 1, 1, 300, Some(0x1234_5678))
    );
    assert_eq!(
        b.on_packet(6, &pkts[0], false, 7, 0),
        Ok(RxEvent::Duplicate)
    );
    let got: Vec<_> = std::iter::from_fn(|| b.poll_completion())
        .map(|c| match c {
            Completion::Recv { stream, done } => {
                (stream, done.msn, done.op, done.len, done.invalidated)
            }
            c => panic!("{c:?}"),
        })
        .collect();
    // Per stream in Msn order (streams interleave as they like).
    let mut got = got;
    got.sort_by_key(|c| c.0);
    assert_eq!(
        got,
        [
            (0, 0, MrcOp::Send, 10, None),
            (0, 1, MrcOp::SendInv, 300, Some(0x1234_5678)),
            (1, 0, MrcOp::Send, 10, None),
        ]
    );
}

/// A SEND_INV of four packets arriving out of order, with duplicates and a
/// copy under a second Dsn: only the packet that places its last byte
/// names the key; a packet naming another key is dropped; the completion
/// comes once.
#[test]
fn send_inv_several_packets_name_the_key_on_the_completing_one() {
    use metaroce_proto::conn::RxDrop;
    use metaroce_proto::stream::StreamDrop;
    let (mut a, mut b) = pair();
    a.post(
        1,
        MsgDesc {
            rkey: 0x4242,
            ..msg(MrcOp::SendInv, 3500)
        },
    )
    .unwrap();
    let pkts = drain(&mut a, 0);
    assert_eq!(data_ops(&pkts), [MrcOp::SendInv; 4]);
    for p in &pkts {
        let h = hdr_of(p);
        assert_eq!(
            (h.rkey, h.va, h.msg_len),
            (0x4242, 0, 3500),
            "every packet carries the key"
        );
    }
    let on = |b: &mut C, p: &[u8]| b.on_packet(1, p, false, 7, 0);
    for i in [3, 1, 0] {
        let r = on(&mut b, &pkts[i]);
        assert!(
            matches!(r, Ok(RxEvent::Data(pl)) if pl.invalidate.is_none() && pl.op == MrcOp::SendInv),
            "{i}: {r:?}"
        );
        assert_eq!(on(&mut b, &pkts[i]), Ok(RxEvent::Duplicate));
    }
    // A packet of the message naming another key (forged or corrupted).
    let mut other = pkts[2].clone();
    other[48..52].copy_from_slice(&0x4343u32.to_be_bytes());
    assert_eq!(
        on(&mut b, &other),
        Err(RxDrop::Stream(StreamDrop::Inconsistent))
    );
    let r = on(&mut b, &pkts[2]);
    assert!(
        matches!(r, Ok(RxEvent::Data(pl)) if pl.invalidate == Some(0x4242) && pl.offset == 2048),
        "{r:?}"
    );
    assert_eq!(on(&mut b, &pkts[2]), Ok(RxEvent::Duplicate));
    // The same segment under another Dsn while the completion is not yet
    // polled: not a second invalidation.
    let mut again = pkts[2].clone();
    let dsn = u32::from_be_bytes(again[20..24].try_into().unwrap()) + 9;
    again[20..24].copy_from_slice(&dsn.to_be_bytes());
    let r = on(&mut b, &again);
    assert!(
        matches!(r, Ok(RxEvent::Data(pl)) if pl.invalidate.is_none()),
        "{r:?}"
    );
    let done: Vec<_> = std::iter::from_fn(|| b.poll_completion()).collect();
    assert!(
        matches!(done[..], [Completion::Recv { stream: 1, done }] if done.len == 3500 && done.invalidated == Some(0x4242) && done.refused.is_none()),
        "{done:?}"
    );
}

/// The receiver refuses a SEND_INV on its completing packet (a key it
/// cannot invalidate): that packet's acknowledgement is taken back, the
/// requester's message completes with RemoteInvalid after the NAK, the
/// receive completion is refused and names no key.
#[test]
fn refused_send_inv_completes_in_error_at_both_ends() {
    use metaroce_proto::conn::RxDrop;
    let (mut a, mut b) = pair();
    a.post(
        0,
        MsgDesc {
            rkey: 0x999,
            ..msg(MrcOp::SendInv, 1500)
        },
    )
    .unwrap();
    let pkts = drain(&mut a, 0);
    assert_eq!(pkts.len(), 2);
    assert!(
        matches!(b.on_packet(1, &pkts[1], false, 7, 0), Ok(RxEvent::Data(pl)) if pl.invalidate.is_none())
    );
    let r = b.on_packet(1, &pkts[0], false, 7, 0);
    let Ok(RxEvent::Data(pl)) = r else {
        panic!("{r:?}")
    };
    assert_eq!(pl.invalidate, Some(0x999));
    assert!(b.refuse(0, 0, NakCode::InvalidRequest));
    // Its copy is held until the NAK is acknowledged.
    assert_eq!(
        b.on_packet(2, &pkts[0], false, 7, 0),
        Err(RxDrop::NakPending)
    );
    let mut now = 3;
    let (mut sends, mut recvs) = (Vec::new(), Vec::new());
    for _ in 0..200 {
        loop {
            let to_a = drain(&mut b, now);
            for p in &to_a {
                a.on_packet(now, p, false, 9, 0).unwrap();
            }
            let to_b = drain(&mut a, now);
            for p in &to_b {
                let r = b.on_packet(now, p, false, 7, 0);
                assert!(!matches!(r, Ok(RxEvent::Data(_))), "placed again: {r:?}");
            }
            if to_a.is_empty() && to_b.is_empty() {
                break;
            }
        }
        sends.extend(std::iter::from_fn(|| a.poll_completion()));
        recvs.extend(std::iter::from_fn(|| b.poll_completion()));
        if !sends.is_empty() && !recvs.is_empty() {
            break;
        }
        now = [a.next_deadline(), b.next_deadline()]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now)
            .max(now + 1);
        a.on_timer(now);
        b.on_timer(now);
    }
    assert_eq!(
        sends,
        [Completion::Send {
            stream: 0,
            msn: 0,
            status: SendStatus::RemoteInvalid
        }]
    );
    assert!(
        matches!(recvs[..], [Completion::Recv { stream: 0, done }] if done.op == MrcOp::SendInv && done.refused == Some(NakCode::InvalidRequest) && done.invalidated.is_none()),
        "{recvs:?}"
    );
}

/// `a` -> `b` as the glue drives them: every packet delivered 10 us later
/// unless `lost` says so for a DATA packet (dropped before `b`'s connection
/// sees it, as the glue drops a SEND with no receive posted), timers run,
/// `b`'s completions taken, `a` posts `(stream, message)` from `posts` in
/// order as the streams take them. A stream of `a` is closed at its first
/// completion that is not `Ok` (native_completion returns false) and its
/// later posts are dropped. Runs until every post completed (or was
/// dropped) or 10 s; returns `a`'s send completions.
fn pump(
    a: &mut C,
    b: &mut C,
    now: &mut u64,
    posts: std::collections::VecDeque<(usize, MsgDesc)>,
    lost: impl Fn(&metaroce_proto::mrc_wire::DataHdr) -> bool,
) -> Vec<(usize, u32, SendStatus)> {
    pump_refusing(a, b, now, posts, lost, |_, _| false)
}

/// As [`pump`], and `b` refuses each arriving DATA packet that `refuse(header, now)` names, as
/// the glue does for a receive not posted (`Conn::not_ready`: an RNR ACK, nothing taken).
fn pump_refusing(
    a: &mut C,
    b: &mut C,
    now: &mut u64,
    mut posts: std::collections::VecDeque<(usize, MsgDesc)>,
    lost: impl Fn(&metaroce_proto::mrc_wire::DataHdr) -> bool,
    refuse: impl Fn(&metaroce_proto::mrc_wire::DataHdr, u64) -> bool,
) -> Vec<(usize, u32, SendStatus)> {
    let mut wire: Vec<(u64, bool, Vec<u8>)> = Vec::new();
    let mut sends = Vec::new();
    let mut closed = [false; 2];
    let mut posted = 0;
    let limit = *now + 10_000_000_000;
    while *now < limit {
        while let Some(&(s, m)) = posts.front() {
            if closed[s] {
                posts.pop_front();
            } else if a.post(s, m).is_ok() {
                posts.pop_front();
                posted += 1;
            } else {
                break;
            }
        }
        if posts.is_empty() && sends.len() == posted {
            break;
        }
        for (to_b, c) in [(true, &mut *a), (false, &mut *b)] {
            for p in drain(c, *now) {
                let drop = to_b && matches!(parse(&p), Ok(MrcPacket::Data(h, _)) if lost(&h));
                if !drop {
                    wire.push((*now + 10_000, to_b, p));
                }
            }
        }
        let arrival = wire.iter().map(|w| w.0).min();
        let timer = [a.next_deadline(), b.next_deadline()]
            .into_iter()
            .flatten()
            .min();
        let Some(next) = [arrival, timer].into_iter().flatten().min() else {
            break;
        };
        *now = next.max(*now);
        let (due, rest): (Vec<_>, Vec<_>) = wire.drain(..).partition(|w| w.0 <= *now);
        wire = rest;
        for (_, to_b, p) in due {
            if to_b {
                if let Ok(MrcPacket::Data(h, _)) = parse(&p) {
                    if b.admits(*now, &h).is_ok() && refuse(&h, *now) {
                        b.not_ready(&h, 50_000);
                        continue;
                    }
                }
            }
            let c = if to_b { &mut *b } else { &mut *a };
            let _ = c.on_packet(*now, &p, false, 50_000, 0);
        }
        a.on_timer(*now);
        b.on_timer(*now);
        while let Some(c) = a.poll_completion() {
            let Completion::Send {
                stream,
                msn,
                status,
            } = c
            else {
                panic!("{c:?}")
            };
            sends.push((stream, msn, status));
            if status != SendStatus::Ok && !closed[stream] {
                closed[stream] = true;
                // The glue flushes the QP's other requests itself.
                posted -= a.outstanding(stream) as usize;
                assert!(a.close_stream(stream));
            }
        }
        while b.poll_completion().is_some() {}
    }
    sends
}

fn writes(stream: usize, n: usize, len: u32) -> std::collections::VecDeque<(usize, MsgDesc)> {
    (0..n).map(|_| (stream, msg(MrcOp::Write, len))).collect()
}

/// Stream 0: 40 WRITEs of 8 KiB; stream 1: 3 SENDs of 2000 bytes among them.
fn sends_among_writes() -> std::collections::VecDeque<(usize, MsgDesc)> {
    let mut posts = writes(0, 40, 8 * 1024);
    for i in 0..3 {
        posts.insert(i * 5, (1, msg(MrcOp::Send, 2000)));
    }
    posts
}

/// A stream closed with packets lost on the way leaves Dsns the receiver
/// never gets (never resent): more than a Dsn window of later traffic on
/// the connection still passes (the receiver's Dsn window moves past
/// them), and the connection does not fail.
#[test]
fn dsns_abandoned_unreceived_do_not_block_the_connection() {
    let (mut a, mut b) = pair();
    let mut now = 0;
    // Stream 1: a WRITE of 3 packets, all lost; its QP is then destroyed.
    a.post(1, msg(MrcOp::Write, 3000)).unwrap();
    assert_eq!(drain(&mut a, now).len(), 3);
    assert!(a.close_stream(1));
    // Stream 0: 300 packets (the Dsn window is 128).
    let sends = pump(&mut a, &mut b, &mut now, writes(0, 30, 10 * 1024), |_| {
        false
    });
    assert_eq!(sends.len(), 30);
    assert!(sends.iter().all(|s| s.2 == SendStatus::Ok), "{sends:?}");
    assert_eq!(a.state(), ConnState::Active);
}

/// The receiver's QP never takes stream 1's data (a receiver not ready: the
/// glue drops its SENDs before the connection), while the peer keeps
/// acknowledging stream 0's: after its retransmissions stream 1 fails alone
/// (retry exceeded; the glue closes it and flushes the rest), stream 0
/// completes every message, the connection stays up and a new QP pair on
/// it works (more than a Dsn window: past the abandoned Dsns).
#[test]
fn stream_never_acknowledged_by_a_live_peer_fails_alone() {
    let (mut a, mut b) = pair();
    let mut now = 0;
    let posts = sends_among_writes();
    let sends = pump(&mut a, &mut b, &mut now, posts, |h| h.stream == 201);
    let one: Vec<_> = sends
        .iter()
        .filter(|s| s.0 == 1)
        .map(|s| (s.1, s.2))
        .collect();
    assert_eq!(one, [(0, SendStatus::RetryExceeded)], "{sends:?}");
    let zero: Vec<_> = sends.iter().filter(|s| s.0 == 0).collect();
    assert_eq!(zero.len(), 40, "{sends:?}");
    assert!(
        zero.iter()
            .enumerate()
            .all(|(i, s)| s.1 == i as u32 && s.2 == SendStatus::Ok),
        "{zero:?}"
    );
    assert_eq!(a.state(), ConnState::Active);
    // A fresh QP pair on stream 1: the glue closed the failed one (`pump`); the receiver's
    // old QP goes too (an open stream is not opened again).
    assert!(!b.open_stream(1, 211, 111));
    assert!(b.close_stream(1));
    assert!(a.open_stream(1, 111, 211));
    assert!(b.open_stream(1, 211, 111));
    let sends = pump(&mut a, &mut b, &mut now, writes(1, 20, 8 * 1024), |_| false);
    assert_eq!(sends.len(), 20);
    assert!(sends.iter().all(|s| s.2 == SendStatus::Ok), "{sends:?}");
}

/// As above, but the receiver answers each refused packet with an RNR ACK
/// (`Conn::not_ready`, section 5.6) and posts its receives only after 2 s, far
/// longer than `max_retx` retransmissions take: stream 1's SENDs are resent
/// without failing (RNR retries are unlimited) and complete once the receives
/// are there; stream 0 completes meanwhile, the connection stays up. Without
/// the RNR ACKs (the test above) stream 1 fails.
#[test]
fn receiver_not_ready_is_retried_without_limit() {
    let (mut a, mut b) = pair();
    let mut now = 0;
    let posts = sends_among_writes();
    let ready_at = 2_000_000_000;
    let sends = pump_refusing(
        &mut a,
        &mut b,
        &mut now,
        posts,
        |_| false,
        |h, t| h.stream == 201 && t < ready_at,
    );
    let one: Vec<_> = sends
        .iter()
        .filter(|s| s.0 == 1)
        .map(|s| (s.1, s.2))
        .collect();
    assert_eq!(
        one,
        [
            (0, SendStatus::Ok),
            (1, SendStatus::Ok),
            (2, SendStatus::Ok)
        ],
        "{sends:?}"
    );
    assert_eq!(
        sends
            .iter()
            .filter(|s| s.0 == 0 && s.2 == SendStatus::Ok)
            .count(),
        40
    );
    assert!(now >= ready_at);
    assert_eq!(a.state(), ConnState::Active);
    let max_retx = u64::from(ConnConfig::new(1).max_retx);
    assert!(b.stats.rnr_refused > max_retx, "{:?}", b.stats);
    assert!(a.stats.rnr_acks > max_retx, "{:?}", a.stats);
}

/// A SEND's Rsn names the receive it fills. Once a receive completed (its
/// buffer is the consumer's again), no packet may name it: a forged or
/// stale packet of a new message with an old Rsn, or one naming more
/// receives ahead than messages ahead, is dropped by its stream with
/// nothing placed (issue 32, finding 1).
#[test]
fn send_naming_a_completed_receive_is_dropped() {
    use metaroce_proto::conn::RxDrop;
    use metaroce_proto::stream::StreamDrop;
    let (mut a, mut b) = pair();
    for _ in 0..3 {
        a.post(0, msg(MrcOp::Send, 100)).unwrap();
    }
    let pkts = drain(&mut a, 0);
    assert_eq!(data_ops(&pkts), [MrcOp::Send; 3]);
    for p in &pkts[..2] {
        assert!(matches!(
            b.on_packet(1, p, false, 7, 0),
            Ok(RxEvent::Data(_))
        ));
    }
    let done: Vec<_> = std::iter::from_fn(|| b.poll_completion()).collect();
    assert!(
        matches!(done[..], [Completion::Recv { done: d0, .. }, Completion::Recv { done: d1, .. }] if d0.rsn == 0 && d1.rsn == 1),
        "{done:?}"
    );
    let forged = |msn: u32, rsn: u32| {
        let mut p = pkts[2].clone();
        p[24..28].copy_from_slice(&msn.to_be_bytes());
        p[28..32].copy_from_slice(&rsn.to_be_bytes());
        p
    };
    let rsn_window = Err(RxDrop::Stream(StreamDrop::RsnWindow));
    // Receives 0 and 1 completed: a new message may not name them.
    assert_eq!(b.on_packet(2, &forged(2, 0), false, 7, 0), rsn_window);
    assert_eq!(b.on_packet(2, &forged(2, 1), false, 7, 0), rsn_window);
    assert_eq!(
        b.on_packet(2, &forged(2, u32::MAX), false, 7, 0),
        rsn_window
    );
    // Message 2 is the oldest incomplete one: its receive is the next, 2.
    assert_eq!(b.on_packet(2, &forged(2, 3), false, 7, 0), rsn_window);
    // Message 4 has at most two receive-consuming messages before it.
    assert_eq!(b.on_packet(2, &forged(4, 5), false, 7, 0), rsn_window);
    // The genuine packet is still placed, at receive 2.
    let r = b.on_packet(3, &pkts[2], false, 7, 0);
    assert!(
        matches!(r, Ok(RxEvent::Data(pl)) if pl.rsn == 2 && pl.msn == 2),
        "{r:?}"
    );
    let done: Vec<_> = std::iter::from_fn(|| b.poll_completion()).collect();
    assert!(
        matches!(done[..], [Completion::Recv { done: d, .. }] if d.rsn == 2),
        "{done:?}"
    );
}

/// A one-path pair whose receiver coalesces ACKs ([`ConnConfig::ack_every`]).
fn coalescing_pair(ack_every: u16) -> (Box<C>, Box<C>) {
    let mut cfg = ConnConfig::new(11);
    cfg.mss = 1024;
    cfg.paths = 1;
    cfg.init_cwnd_path = 64;
    cfg.init_cwnd_conn = 64;
    cfg.ack_every = ack_every;
    let mut a = Box::new(C::new(cfg));
    cfg.conn_id = 22;
    let mut b = Box::new(C::new(cfg));
    assert!(a.open_stream(0, 100, 200));
    assert!(b.open_stream(0, 200, 100));
    (a, b)
}

/// Feeds `pkts` to `b` in the order of `order`; returns after which packets (indices into
/// `order`) `poll_control` had an ACK due.
fn control_acks(b: &mut C, pkts: &[Vec<u8>], order: &[usize]) -> Vec<usize> {
    let mut buf = [0u8; MAX_HDR_LEN];
    let mut due = Vec::new();
    for (k, &i) in order.iter().enumerate() {
        assert!(b.on_packet(1, &pkts[i], false, 9, 0).is_ok());
        while b.poll_control(1, &mut buf).is_some() {
            due.push(k);
        }
    }
    due
}

#[test]
fn receive_path_coalesces_acks_but_not_the_end_of_a_message_or_reordering() {
    // In order: every 4th packet's ACK is due at once, and the message's last one.
    let (mut a, mut b) = coalescing_pair(4);
    assert_eq!(a.post(0, msg(MrcOp::Write, 10 * 1024)), Ok(0));
    let pkts = drain(&mut a, 0);
    assert_eq!(pkts.len(), 10);
    let order: Vec<usize> = (0..10).collect();
    assert_eq!(control_acks(&mut b, &pkts, &order), [3, 7, 9]);
    // Reordered: the packet that leaves a gap behind it and every one until the gap
    // closes is due at once.
    let (mut a, mut b) = coalescing_pair(4);
    assert_eq!(a.post(0, msg(MrcOp::Write, 10 * 1024)), Ok(0));
    let pkts = drain(&mut a, 0);
    assert_eq!(
        control_acks(&mut b, &pkts, &[0, 2, 3, 1, 4, 5, 6, 7, 8, 9]),
        [1, 2, 3, 7, 9]
    );
    // What poll_control leaves waits for poll_transmit, which sends it.
    let (mut a, mut b) = coalescing_pair(4);
    assert_eq!(a.post(0, msg(MrcOp::Write, 10 * 1024)), Ok(0));
    let pkts = drain(&mut a, 0);
    assert_eq!(control_acks(&mut b, &pkts, &[0, 1]), []);
    assert!(b.acks_coalesced());
    let mut buf = [0u8; MAX_HDR_LEN];
    assert!(b.poll_receive_path(1, &mut buf).is_none());
    let acks = drain(&mut b, 1);
    assert_eq!(acks.len(), 1);
    assert!(matches!(
        parse(&acks[0]),
        Ok(MrcPacket::Ack(AckPkt { ack_seq: 1, .. }))
    ));
    assert!(!b.acks_coalesced());
    // 1 (the default): every ACK at once.
    let (mut a, mut b) = coalescing_pair(1);
    assert_eq!(a.post(0, msg(MrcOp::Write, 3 * 1024)), Ok(0));
    let pkts = drain(&mut a, 0);
    assert_eq!(control_acks(&mut b, &pkts, &[0, 1, 2]), [0, 1, 2]);
}
