// SPDX-License-Identifier: GPL-2.0
//! Target `conn`: two MetaRoCE native connections (`conn.rs`), A and B,
//! each the peer of the other with two streams open both ways, driven by a
//! schedule of posts, transmit polls, deliveries from a shared wire (in any
//! order: deliver, duplicate, drop, flip one bit, truncate, append
//! garbage, with or without CE, with any rate hint), forged ACKs (any
//! path, CumSeq, AckSeq, 256-bit Sack, CeCount, RateHint) and forged DATA
//! aimed at the other side's streams, timers and completion polls. When
//! the schedule ends and nothing forged or corrupted was ever accepted,
//! the wire is drained without loss until every message completed.
//!
//! Checked (rules from `Documentation/metaroce/transport.rst`):
//! * no panic; `post` answers `ConnFailed` after a failure, `TooLong`
//!   beyond 2^31 bytes, `Full` with `K` messages outstanding (when both
//!   apply the spec does not say which comes first: either is accepted),
//!   else the next Msn;
//! * every DATA packet sent matches its message (section 3.1, 8, 9):
//!   StreamId, opcode, Msn, Rsn (receive-consuming messages numbered in
//!   posting order, 0 for WRITE), MsgLen, RemoteVa/RKey only on writes, Imm
//!   only with an IMM opcode, SE only on the last packet of a
//!   receive-consuming message, Offset/PayloadLen the MSS segmentation
//!   (a zero-length message is one empty packet); new Dsns are contiguous
//!   from 0 and a retransmission (RETX) keeps its Dsn and segment
//!   (5.3); per path, PathSeq is contiguous (a retransmission takes a fresh
//!   one), PathFloor never goes back and `PathSeq - PathFloor < 256`
//!   (5.1); UDP source port in 49152-65535; DATA is ECT, ACKs are not (2);
//!   no DATA after the connection failed (7);
//! * every ACK sent echoes the connection id of the DATA its receive half
//!   accepted (7), carries the rate hint given with the newest accepted
//!   DATA (6.4), the count of accepted CE-marked DATA on its path (3.2),
//!   and claims only path sequence numbers that were accepted: CumSeq
//!   itself was not, every Sack bit was, every number from the newest
//!   PathFloor seen up to CumSeq was (4);
//! * every placement (`RxEvent::Data`) is exactly the accepted packet's
//!   header (stream, opcode, Msn, Rsn, Offset, RemoteVa, RKey, length); all
//!   packets placed for one message agree on MsgLen, opcode and Rsn (4);
//!   placement bounds against receive buffers and memory regions are the
//!   kernel glue's (the core knows neither; section 5.6's RNR is "not yet
//!   in the core"), so the harness checks the message's extent;
//! * completions per stream in verbs order (9): send completions Msn 0, 1,
//!   2... each exactly once, for posted messages only; `RetryExceeded` /
//!   `Flushed` only after the connection failed, the first non-success of
//!   a stream `RetryExceeded` and only `Flushed` after it (7); receive
//!   completions Msn 0, 1, 2... each once;
//! * windows and rate within their bounds: every path window in
//!   `[MSS, 256 MSS]`, the connection window in `[MSS, 4096 MSS]`
//!   (6.2, 6.3), the rate hint the sender uses is the one of the newest
//!   accepted ACK, and with a hint no new packet (other than a tail-loss
//!   probe, 5.4) leaves before the pacer's gaps at that hint allow (6.4:
//!   the sender paces at `RateHint * scale`, `scale <= 1`, so the gaps at
//!   the hint itself are a lower bound; a gap starts at most the pacer
//!   credit before the packet left);
//! * while nothing forged or corrupted has been accepted by either side
//!   (the UDP checksum of section 2 is the glue's, so a flipped bit that
//!   still parses is indistinguishable from the truth for the core):
//!   a genuine packet is never dropped (except, with MsnWindow, a DATA K
//!   messages ahead of a receiver whose complete messages were not polled:
//!   section 9 does not say when completions are released), a genuine DATA is placed exactly
//!   when its Dsn is new and reported duplicate otherwise (each Dsn placed
//!   once), its payload is the sender's bytes at that offset; a receive
//!   completion has the sender's opcode, length, Rsn, Imm and SE and every
//!   byte of the message placed; a successful send completion only after
//!   every packet of the message reached the peer; and after the drain
//!   every message of a side that did not fail completed at both ends
//!   (no stall: if nothing can move, some timer is pending);
//! * READ and atomics (section 11; `Post` with `flags` bit 2): each side
//!   also plays the responder's glue (memory: a fixed byte function for
//!   READs, a map of 8-byte words for atomics, one valid key; `flags` bit
//!   3: a wrong key, bit 4: a misaligned atomic) and answers every
//!   `RxEvent::Request` at once. Checked: a request packet carries its
//!   message (opcode, Msn, MsgLen, RemoteVa, RKey, operand block, no
//!   payload reference); a request is reported to the responder at most
//!   once per (stream, Msn) and matches what was posted; response packets
//!   carry the answer (READ_RESP segments at MSS boundaries with the memory
//!   reference `(RKey, va + Offset)`, ATOMIC_RESP the original value, NAK
//!   the code); every placed READ byte is the responder's memory byte, each
//!   placed once, an atomic's value is what the responder's execution
//!   returned; a successful READ/atomic completion only after its whole
//!   response arrived, a NAK's completion has the matching status; the
//!   fences of section 11.4 (no message starts while an older incomplete
//!   one of another class is outstanding; an atomic only alone); and at
//!   the drain every READ and atomic completes unless the responder's
//!   connection failed (section 11.5).
//! * SEND with invalidate (section 9.2; `Post` with `flags` bit 5): the
//!   key in RKey of every packet; it starts only alone; the receiver's
//!   glue (one invalidatable key; `flags` bit 3: another key, which it
//!   refuses with `Conn::refuse`, section 9.1) gets the key
//!   (`Place::invalidate`) on exactly the packet that places the message's
//!   last byte, never on another or twice, and only when every older
//!   message of the stream is completely placed; the receive completion
//!   names the key after it was invalidated, or is refused; the refused
//!   message's requester completes with `RemoteInvalid`, its held packets
//!   (`NakPending`) are the only genuine drops besides the one below.

use super::enc::{steps, Enc, Wire};
use arbitrary::{Result, Unstructured};
use metaroce_proto::conn::{Completion, Conn, ConnConfig, ConnState, MrRef, RxEvent, SendStatus};
use metaroce_proto::mrc_wire::{
    parse, AckPkt, DataHdr, MrcOp, MrcPacket, NakCode, DATA_HDR_LEN, MAX_HDR_LEN, MAX_MSG_LEN,
};
use metaroce_proto::path::PATH_WINDOW;
use metaroce_proto::stream::{MsgDesc, PostError};
use metaroce_proto::stream::{Request, Response};
use std::collections::{BTreeMap, BTreeSet};

/// Paths, Dsn descriptors (64 * 1), streams, messages per stream.
pub type C = Conn<4, 64, 1, 2, 4>;
const K: usize = 4;
const S: usize = 2;
/// Connection ids of A and B.
pub const IDS: [u32; 2] = [0x0A0A_0001, 0x0B0B_0002];
/// Most steps run per input.
pub const MAX_STEPS: usize = 400;
const MAX_CWND_CONN: u32 = 4096;

fn local_qpn(side: usize, s: usize) -> u32 {
    [100, 200][side] + s as u32
}

/// The stream of `side` whose QPN is `qpn`.
fn dst_stream(side: usize, qpn: u32) -> usize {
    (0..S)
        .find(|&s| local_qpn(side, s) == qpn)
        .unwrap_or_else(|| panic!("DATA for QPN {qpn}, no stream of side {side}"))
}

/// Parameters.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cfg {
    /// MSS: 16, 64, 256 or 1000 (modulo 4).
    pub mss: u8,
    /// Paths in use (modulo 4, plus one); bit 7: a pacer credit of 5 ms (the
    /// kernel's), else exact pacing.
    pub paths: u8,
    /// `max_retx` (modulo 4; bit 7: 16).
    pub max_retx: u8,
}

/// One step.
#[derive(Clone, Debug)]
pub enum Step {
    /// Post on `side`'s stream `stream % 2`: op (modulo 4: SEND, SEND_IMM,
    /// WRITE, WRITE_IMM; with `flags` bit 2: READ, CMP_SWAP, FETCH_ADD,
    /// READ; else with bit 5: SEND_INV), length (modulo 4 MSS + 1; `flags`
    /// bit 1: beyond 2^31), `flags` bit 0: solicited, bit 3: a key the
    /// responder refuses, bit 4: an atomic's address not 8-byte aligned.
    Post {
        /// 0 A, 1 B.
        side: u8,
        /// Stream.
        stream: u8,
        /// Operation.
        op: u8,
        /// Length.
        len: u16,
        /// Flags.
        flags: u8,
    },
    /// `side` transmits up to `n % 16 + 1` packets.
    Pump(u8, u8),
    /// Takes the packet `idx % len` off the wire.
    Deliver {
        /// Which packet.
        idx: u16,
        /// 0-2 deliver, 3 deliver and keep a copy, 4 drop, 5 flip bit
        /// `arg`, 6 truncate to `arg` bytes, 7 append `arg % 8 + 1` bytes.
        action: u8,
        /// Bit, length.
        arg: u16,
        /// The IP header says CE.
        ce: bool,
        /// Rate hint the receiving device gives (kbit/s).
        hint: u32,
    },
    /// A forged ACK to `side` (with its connection id).
    ForgeAck {
        /// Target.
        side: u8,
        /// Path (modulo 4).
        path: u8,
        /// CumSeq, relative to the path's newest PathSeq sent (i16) or raw.
        cum: u32,
        /// AckSeq likewise.
        ack_seq: u32,
        /// Bit 0: cum raw; bit 1: ack_seq raw; bit 2: the RNR flag.
        mode: u8,
        /// Bitmap.
        sack: [u64; 4],
        /// RateHint.
        hint: u32,
        /// CeCount.
        ce: u32,
    },
    /// Forged DATA to `side` (from its peer's connection id).
    ForgeData {
        /// Target.
        side: u8,
        /// Path, stream, opcode.
        sel: u8,
        /// PathSeq and PathFloor offsets from the newest genuine.
        seq: i8,
        /// Dsn offset from the newest genuine.
        dsn: i16,
        /// Msn offset from 0, Rsn.
        msn: u8,
        /// MsgLen, offset and length selectors.
        len: u32,
    },
    /// Time: mode 0 to the earliest deadline, 1 `ns` later; then both
    /// timers run.
    Timer(u8, u32),
    /// `side` polls its completions.
    Poll(u8),
}

impl Wire for Cfg {
    fn decode(u: &mut Unstructured<'_>) -> Result<Self> {
        Ok(Cfg {
            mss: u.arbitrary()?,
            paths: u.arbitrary()?,
            max_retx: u.arbitrary()?,
        })
    }
    fn encode(&self, e: &mut Enc) {
        e.u8(self.mss).u8(self.paths).u8(self.max_retx);
    }
}

impl Wire for Step {
    fn decode(u: &mut Unstructured<'_>) -> Result<Self> {
        let tag: u8 = u.arbitrary()?;
        Ok(match tag % 20 {
            0..=3 => Step::Post {
                side: u.arbitrary()?,
                stream: u.arbitrary()?,
                op: u.arbitrary()?,
                len: u.arbitrary()?,
                flags: u.arbitrary()?,
            },
            4..=7 => Step::Pump(u.arbitrary()?, u.arbitrary()?),
            8..=12 => Step::Deliver {
                idx: u.arbitrary()?,
                action: u.arbitrary()?,
                arg: u.arbitrary()?,
                ce: u.arbitrary()?,
                hint: u.arbitrary()?,
            },
            13 => Step::ForgeAck {
                side: u.arbitrary()?,
                path: u.arbitrary()?,
                cum: u.arbitrary()?,
                ack_seq: u.arbitrary()?,
                mode: u.arbitrary()?,
                sack: u.arbitrary()?,
                hint: u.arbitrary()?,
                ce: u.arbitrary()?,
            },
            14 => Step::ForgeData {
                side: u.arbitrary()?,
                sel: u.arbitrary()?,
                seq: u.arbitrary()?,
                dsn: u.arbitrary()?,
                msn: u.arbitrary()?,
                len: u.arbitrary()?,
            },
            15..=17 => Step::Timer(u.arbitrary()?, u.arbitrary()?),
            _ => Step::Poll(u.arbitrary()?),
        })
    }
    fn encode(&self, e: &mut Enc) {
        match self {
            Step::Post {
                side,
                stream,
                op,
                len,
                flags,
            } => {
                e.u8(0).u8(*side).u8(*stream).u8(*op).u16(*len).u8(*flags);
            }
            Step::Pump(s, n) => {
                e.u8(4).u8(*s).u8(*n);
            }
            Step::Deliver {
                idx,
                action,
                arg,
                ce,
                hint,
            } => {
                e.u8(8).u16(*idx).u8(*action).u16(*arg).bool(*ce).u32(*hint);
            }
            Step::ForgeAck {
                side,
                path,
                cum,
                ack_seq,
                mode,
                sack,
                hint,
                ce,
            } => {
                e.u8(13)
                    .u8(*side)
                    .u8(*path)
                    .u32(*cum)
                    .u32(*ack_seq)
                    .u8(*mode);
                for w in sack {
                    e.u64(*w);
                }
                e.u32(*hint).u32(*ce);
            }
            Step::ForgeData {
                side,
                sel,
                seq,
                dsn,
                msn,
                len,
            } => {
                e.u8(14)
                    .u8(*side)
                    .u8(*sel)
                    .u8(*seq as u8)
                    .u16(*dsn as u16)
                    .u8(*msn)
                    .u32(*len);
            }
            Step::Timer(m, ns) => {
                e.u8(15).u8(*m).u32(*ns);
            }
            Step::Poll(s) => {
                e.u8(18).u8(*s);
            }
        }
    }
}

target_input!("Parameters.");

/// The byte at `off` of message `msn` of `side`'s stream `s`.
fn pattern(side: usize, s: usize, msn: u32, off: u32) -> u8 {
    (off.wrapping_mul(7) ^ msn.wrapping_mul(31) ^ (s as u32 * 3 + side as u32 * 101)) as u8
}

/// The one key the responders accept.
const GOOD_KEY: u32 = 0x77;
const BAD_KEY: u32 = 0x66;

/// Byte at `va` of `side`'s memory (what its READ responses carry).
fn mem_byte(side: usize, va: u64) -> u8 {
    (va.wrapping_mul(13) ^ (va >> 7) ^ (side as u64 * 0x5D)) as u8
}

/// Initial value of the 8-byte word at `va` of `side`'s memory.
fn word0(side: usize, va: u64) -> u64 {
    va.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ side as u64
}

/// Fence class of section 11.4.
fn class(op: MrcOp) -> u8 {
    match op {
        MrcOp::Read => 1,
        MrcOp::CmpSwap | MrcOp::FetchAdd => 2,
        _ => 0,
    }
}

#[derive(Clone, Debug)]
struct TxMsg {
    desc: MsgDesc,
    rsn: u32,
    /// Atomic operands (compare or add, swap).
    operands: [u64; 2],
    /// READ bytes placed (genuine responses).
    resp: Vec<bool>,
    /// An ATOMIC_RESP's value, or a NAK's code, arrived.
    value: Option<u64>,
    nak: Option<NakCode>,
    /// Its first packet was sent.
    started: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seg {
    stream: usize,
    /// A response packet (the Msn is the peer's request's).
    resp: bool,
    msn: u32,
    offset: u32,
    len: u16,
}

/// What one side sent and had acknowledged.
#[derive(Default)]
struct TxModel {
    msgs: [Vec<TxMsg>; S],
    next_rsn: [u32; S],
    /// Next send completion expected per stream.
    reported: [u32; S],
    /// A `RetryExceeded` was reported on the stream.
    failed_seen: [bool; S],
    dsns: BTreeMap<u32, Seg>,
    next_dsn: u32,
    path_next: [u32; 4],
    path_floor: [u32; 4],
    /// Rate hint of the newest ACK this side accepted.
    hint: u32,
    /// Earliest time the pacer may let the next new packet leave, at the
    /// least (section 6.4 with `scale` = 1: a smaller scale only makes the
    /// gaps longer).
    pace_earliest: u64,
    /// Where the gap now running began and the packet length it is for:
    /// a new hint re-times it (section 6.4).
    pace_from: u64,
    pace_len: u32,
    /// The timers ran since the last transmission on the path (so a
    /// tail-loss probe, which the pacer does not hold, may be due).
    timer_since_send: [bool; 4],
}

#[derive(Clone, Debug)]
struct RxMsg {
    op: MrcOp,
    rsn: u32,
    msg_len: u32,
    /// Bytes placed by genuine packets.
    placed: Vec<bool>,
    /// Packets placed (`RxEvent::Data`) and their payload bytes, forged
    /// ones included: the core's count.
    pkts: u32,
    bytes: u64,
}

/// What one side received.
#[derive(Default)]
struct RxModel {
    /// Requests reported (`RxEvent::Request` or `Refused`), by (stream,
    /// Msn): each only once; with the answer given.
    requests: BTreeMap<(usize, u32), (Option<Request>, Response)>,
    /// The responder's atomic words.
    words: BTreeMap<u64, u64>,
    /// Dsns placed (`RxEvent::Data`).
    dsns: BTreeSet<u32>,
    /// SEND_INVs whose key the glue invalidated, by (stream, Msn).
    invalidated: BTreeSet<(usize, u32)>,
    /// Data messages the glue refused (a SEND_INV's key), by (stream, Msn).
    refused: BTreeSet<(usize, u32)>,
    /// Dsns accepted at all (placed or duplicate).
    seen: BTreeSet<u32>,
    /// Path sequence numbers accepted, per path.
    path_seqs: [BTreeSet<u32>; 4],
    /// Newest PathFloor accepted, per path.
    floor: [u32; 4],
    ce: [u32; 4],
    peer: Option<u32>,
    hint: u32,
    open: [BTreeMap<u32, RxMsg>; S],
    /// Next receive completion expected per stream.
    reported: [u32; S],
}

struct Pkt {
    to: usize,
    bytes: Vec<u8>,
    genuine: bool,
}

struct World {
    c: [Box<C>; 2],
    tx: [TxModel; 2],
    rx: [RxModel; 2],
    wire: Vec<Pkt>,
    now: u64,
    mss: u32,
    paths: usize,
    /// The pacer credit both sides use (`ConnConfig::pace_burst_ns`).
    pace_burst: u64,
    /// Something forged or corrupted was accepted.
    tainted: bool,
}

/// The pacing gap of a packet with `len` payload bytes at `kbps` (section
/// 6.4; 126 bytes of headers and framing), in ns: written from the spec, not
/// the core's `cc::pace_gap_ns`, so that the model checks that function too.
fn pace_gap(len: u32, kbps: u32) -> u64 {
    let bits = (u128::from(len) + 126) * 8_000_000;
    u64::try_from(bits.div_ceil(u128::from(kbps.max(1)))).unwrap_or(u64::MAX)
}

fn seq_diff(a: u32, b: u32) -> i64 {
    i64::from(a.wrapping_sub(b) as i32)
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
    let mss = [16u16, 64, 256, 1000][usize::from(input.cfg.mss % 4)];
    let paths = input.cfg.paths % 4 + 1;
    let max_retx = if input.cfg.max_retx & 0x80 != 0 {
        16
    } else {
        input.cfg.max_retx % 4
    };
    let pace_burst = if input.cfg.paths & 0x80 != 0 {
        5_000_000
    } else {
        0
    };
    let mk = |side: usize| {
        let mut cfg = ConnConfig::new(IDS[side]);
        cfg.mss = mss;
        cfg.paths = paths;
        cfg.max_retx = max_retx;
        cfg.pace_burst_ns = pace_burst;
        let mut c = Box::new(C::new(cfg));
        for s in 0..S {
            assert!(c.open_stream(s, local_qpn(side, s), local_qpn(1 - side, s)));
        }
        c
    };
    let mut w = World {
        c: [mk(0), mk(1)],
        tx: Default::default(),
        rx: Default::default(),
        wire: Vec::new(),
        now: 1,
        mss: u32::from(mss),
        paths: usize::from(paths),
        pace_burst,
        tainted: false,
    };
    for step in &input.steps {
        w.now += 1;
        if super::trace() {
            eprintln!(
                "step {step:?} (now {}, wire {}, tainted {})",
                w.now,
                w.wire.len(),
                w.tainted
            );
        }
        match *step {
            Step::Post {
                side,
                stream,
                op,
                len,
                flags,
            } => w.post(
                usize::from(side % 2),
                usize::from(stream) % S,
                op,
                len,
                flags,
            ),
            Step::Pump(side, n) => {
                for _ in 0..=n % 16 {
                    if !w.pump(usize::from(side % 2)) {
                        break;
                    }
                }
            }
            Step::Deliver {
                idx,
                action,
                arg,
                ce,
                hint,
            } => w.deliver(idx, action, arg, ce, hint),
            Step::ForgeAck {
                side,
                path,
                cum,
                ack_seq,
                mode,
                sack,
                hint,
                ce,
            } => {
                let side = usize::from(side % 2);
                let pi = usize::from(path % 4);
                let top = w.tx[side].path_next[pi];
                let rel = |v: u32, raw: bool| {
                    if raw {
                        v
                    } else {
                        top.wrapping_add(v as u16 as i16 as i32 as u32)
                    }
                };
                let a = AckPkt {
                    path: pi as u8,
                    conn: IDS[side],
                    cum: rel(cum, mode & 1 != 0),
                    ack_seq: rel(ack_seq, mode & 2 != 0),
                    rate_hint_kbps: hint,
                    ce_count: ce,
                    sack,
                    rnr: mode & 4 != 0,
                };
                let mut b = vec![0u8; 56];
                a.write(&mut b).unwrap();
                w.receive(side, &b, false, 0, false);
            }
            Step::ForgeData {
                side,
                sel,
                seq,
                dsn,
                msn,
                len,
            } => {
                let side = usize::from(side % 2);
                let b = w.forge_data(side, sel, seq, dsn, msn, len);
                w.receive(side, &b, false, 0, false);
            }
            Step::Timer(mode, ns) => w.timer(mode, ns),
            Step::Poll(side) => w.poll(usize::from(side % 2)),
        }
        w.check_windows();
    }
    w.finish();
}

impl World {
    fn post(&mut self, side: usize, s: usize, op: u8, len: u16, flags: u8) {
        let ops = if flags & 4 != 0 {
            [MrcOp::Read, MrcOp::CmpSwap, MrcOp::FetchAdd, MrcOp::Read]
        } else {
            [MrcOp::Send, MrcOp::SendImm, MrcOp::Write, MrcOp::WriteImm]
        };
        let op = if flags & 4 == 0 && flags & 32 != 0 {
            MrcOp::SendInv
        } else {
            ops[usize::from(op % 4)]
        };
        let mut len = u32::from(len) % (4 * self.mss + 1);
        if op.is_atomic() {
            len = 8;
        } else if flags & 2 != 0 {
            len += MAX_MSG_LEN + 1;
        }
        // READs from a few places (offset by the length), atomics on two
        // words per stream (so that they meet), misaligned on request.
        let va = match op {
            MrcOp::Read => 0x20_0000 * (s as u64 + 1) + u64::from(len % 61),
            MrcOp::CmpSwap | MrcOp::FetchAdd => {
                0x30_0000 * (s as u64 + 1)
                    + 8 * u64::from(len % 2)
                    + if flags & 16 != 0 { 4 } else { 0 }
            }
            _ if op.is_write() => 0x10_0000 * (s as u64 + 1),
            _ => 0,
        };
        let desc = MsgDesc {
            op,
            len,
            va,
            rkey: if op.has_remote() || op.invalidates() {
                if flags & 8 != 0 {
                    BAD_KEY
                } else {
                    GOOD_KEY
                }
            } else {
                0
            },
            imm: if op.has_imm() {
                0xC0DE_0000 | u32::from(len as u16)
            } else {
                0
            },
            se: flags & 1 != 0 && !op.is_request(),
        };
        // CMP_SWAP compares with the word's current value when `len` is even
        // (so that some succeed), FETCH_ADD adds.
        let cur = self.rx[1 - side]
            .words
            .get(&va)
            .copied()
            .unwrap_or_else(|| word0(1 - side, va));
        let operands = match op {
            MrcOp::CmpSwap if len % 2 == 0 => [cur, u64::from(len) << 40 | 0xAB],
            MrcOp::CmpSwap => [!cur, 1],
            MrcOp::FetchAdd => [u64::from(len) * 0x0101_0101 + 1, 0],
            _ => [0; 2],
        };
        let t = &mut self.tx[side];
        let outstanding = t.msgs[s].len() as u32 - t.reported[s];
        let got = if op.is_atomic() {
            self.c[side].post_atomic(s, op, va, desc.rkey, operands[0], operands[1])
        } else {
            self.c[side].post(s, desc)
        };
        let failed = self.c[side].state() == ConnState::Failed;
        let stream_failed = self.c[side].stream_failed(s);
        match got {
            Err(PostError::ConnFailed) => assert!(failed, "ConnFailed while not failed"),
            Err(PostError::StreamFailed) => assert!(
                !failed && stream_failed,
                "StreamFailed while the stream did not fail"
            ),
            Err(PostError::TooLong) => assert!(!failed && len > MAX_MSG_LEN),
            Err(PostError::Full) => assert!(
                !failed && outstanding as usize >= K,
                "Full with {outstanding} outstanding"
            ),
            Err(e) => panic!("post refused: {e:?}"),
            Ok(msn) => {
                assert!(
                    !failed && !stream_failed && len <= MAX_MSG_LEN && (outstanding as usize) < K,
                    "post accepted: {desc:?}, {outstanding} outstanding"
                );
                assert_eq!(msn, t.msgs[s].len() as u32, "Msn not in posting order");
                let rsn = if op.consumes_recv() {
                    t.next_rsn[s] += 1;
                    t.next_rsn[s] - 1
                } else {
                    0
                };
                t.msgs[s].push(TxMsg {
                    desc,
                    rsn,
                    operands,
                    resp: if op == MrcOp::Read {
                        vec![false; len as usize]
                    } else {
                        Vec::new()
                    },
                    value: None,
                    nak: None,
                    started: false,
                });
            }
        }
        if failed {
            assert_eq!(got, Err(PostError::ConnFailed));
        }
    }

    /// One transmission of `side`; false if it had none.
    fn pump(&mut self, side: usize) -> bool {
        let mut buf = [0u8; MAX_HDR_LEN];
        let failed = self.c[side].state() == ConnState::Failed;
        let Some(t) = self.c[side].poll_transmit(self.now, &mut buf) else {
            return false;
        };
        let mut bytes = buf[..t.hdr_len].to_vec();
        assert!(t.src_port >= 49152, "source port {}", t.src_port);
        assert!(usize::from(t.path) < self.paths, "path {}", t.path);
        match parse(&bytes) {
            Ok(MrcPacket::Ack(a)) => {
                assert!(
                    t.payload.is_none() && !t.ect && !t.retx,
                    "ACK transmit {t:?}"
                );
                self.check_ack_sent(side, &a);
            }
            Ok(MrcPacket::Probe(_)) => {
                // A restart-proof CHALLENGE (forged DATA of another ConnId after a quiet
                // spell) or the PROOF answering one.
                assert!(
                    t.payload.is_none() && !t.ect && !t.retx,
                    "probe transmit {t:?}"
                );
            }
            Ok(MrcPacket::Data(h, payload)) if h.len == 0 || t.payload.is_none() => {
                assert!(!failed, "DATA sent after the connection failed");
                if h.op.is_atomic() {
                    // The operand block is in the transmit's header bytes.
                    assert_eq!(t.hdr_len, DATA_HDR_LEN + 16, "atomic request length");
                    let m = &self.tx[side].msgs[dst_stream(1 - side, h.stream)][h.msn as usize];
                    let want: Vec<u8> = m.operands.iter().flat_map(|v| v.to_be_bytes()).collect();
                    assert_eq!(payload, &want[..], "atomic operand block");
                } else {
                    assert_eq!(t.hdr_len, DATA_HDR_LEN);
                }
                self.check_data_sent(side, &h, &t);
            }
            Err(metaroce_proto::mrc_wire::MrcError::Truncated) => {
                // A DATA header whose payload the caller appends: from our
                // message, or (a READ response) from our memory.
                let p = t.payload.expect("DATA transmit without payload");
                match p.mr {
                    None => bytes.extend(
                        (0..u32::from(p.len)).map(|i| pattern(side, p.stream, p.msn, p.offset + i)),
                    ),
                    Some(MrRef { va, .. }) => {
                        bytes.extend(
                            (0..u64::from(p.len)).map(|i| mem_byte(side, va.wrapping_add(i))),
                        );
                    }
                }
                let Ok(MrcPacket::Data(h, _)) = parse(&bytes) else {
                    panic!("DATA with its payload does not parse")
                };
                assert!(!failed, "DATA sent after the connection failed");
                self.check_data_sent(side, &h, &t);
            }
            other => panic!("transmit does not parse: {other:?}"),
        }
        self.wire.push(Pkt {
            to: 1 - side,
            bytes,
            genuine: true,
        });
        true
    }

    fn check_data_sent(&mut self, side: usize, h: &DataHdr, t: &metaroce_proto::conn::Transmit) {
        let mss = self.mss;
        assert!(t.ect, "DATA not ECT");
        assert_eq!(h.retx, t.retx);
        assert_eq!(h.conn, IDS[side], "DATA with another connection id");
        assert_eq!(h.path, t.path);
        let s = dst_stream(1 - side, h.stream);
        if h.op.is_response() {
            self.check_response_sent(side, s, h, t);
        }
        let tm = &mut self.tx[side];
        let seg = Seg {
            stream: s,
            resp: h.op.is_response(),
            msn: h.msn,
            offset: h.offset,
            len: h.len,
        };
        if !h.op.is_response() {
            let m = tm.msgs[s]
                .get(h.msn as usize)
                .unwrap_or_else(|| panic!("DATA for unposted message {} of stream {s}", h.msn));
            assert!(
                h.msn >= tm.reported[s],
                "DATA for message {} already completed",
                h.msn
            );
            let d = m.desc;
            match t.payload {
                Some(p) => {
                    assert!(!d.op.is_request(), "request with a payload reference");
                    assert_eq!(
                        (p.stream, p.msn, p.offset, p.len, p.mr),
                        (s, h.msn, h.offset, h.len, None),
                        "payload reference and header differ"
                    );
                }
                None => assert!(d.op.is_request(), "DATA without payload reference"),
            }
            let last = h.offset + u32::from(h.len) >= d.len;
            let msg_len = if d.op.is_atomic() { 16 } else { d.len };
            assert_eq!(
                (h.op, h.msg_len, h.rsn),
                (d.op, msg_len, m.rsn),
                "opcode, MsgLen, Rsn"
            );
            let remote = if d.op.has_remote() {
                (d.va, d.rkey)
            } else if d.op.invalidates() {
                (0, d.rkey)
            } else {
                (0, 0)
            };
            assert_eq!((h.va, h.rkey), remote, "RemoteVa/RKey");
            assert_eq!(h.imm, if d.op.has_imm() { d.imm } else { 0 }, "Imm");
            assert_eq!(h.se, d.se && last && d.op.consumes_recv(), "SE");
            if d.op.is_request() {
                assert_eq!(
                    (h.offset, u32::from(h.len)),
                    (0, if d.op.is_atomic() { 16 } else { 0 }),
                    "request Offset/PayloadLen"
                );
            } else {
                assert_eq!(h.offset % mss, 0, "offset not on an MSS boundary");
                assert_eq!(
                    u32::from(h.len),
                    (d.len - h.offset.min(d.len)).min(mss),
                    "segment length"
                );
                assert!(
                    h.offset < d.len || (d.len == 0 && h.offset == 0),
                    "segment past the message"
                );
            }
            // Section 11.4: a message starts only while every older
            // incomplete message is of its class; an atomic only alone.
            if !m.started {
                let c = class(d.op);
                let older = &tm.msgs[s][tm.reported[s] as usize..h.msn as usize];
                let alone = c == 2 || d.op.invalidates();
                assert!(
                    older.iter().all(|o| class(o.desc.op) == c) && (!alone || older.is_empty()),
                    "{:?} {} started with {:?} outstanding",
                    d.op,
                    h.msn,
                    older.iter().map(|o| o.desc.op).collect::<Vec<_>>()
                );
                tm.msgs[s][h.msn as usize].started = true;
            }
        }
        if h.retx {
            assert_eq!(
                tm.dsns.get(&h.dsn),
                Some(&seg),
                "retransmission of Dsn {} changed its segment",
                h.dsn
            );
        } else {
            assert_eq!(h.dsn, tm.next_dsn, "new Dsns not contiguous");
            assert!(
                !tm.dsns.values().any(|x| *x == seg),
                "segment {seg:?} sent under a second Dsn"
            );
            tm.dsns.insert(h.dsn, seg);
            tm.next_dsn += 1;
        }
        let pi = usize::from(h.path);
        assert_eq!(
            h.path_seq, tm.path_next[pi],
            "PathSeq not contiguous on path {pi}"
        );
        assert!(
            seq_diff(h.path_floor, tm.path_floor[pi]) >= 0,
            "PathFloor went back on path {pi}"
        );
        assert!(
            seq_diff(h.path_seq, h.path_floor) >= 0
                && h.path_seq.wrapping_sub(h.path_floor) < PATH_WINDOW,
            "PathSeq {} PathFloor {}",
            h.path_seq,
            h.path_floor
        );
        tm.path_next[pi] = h.path_seq.wrapping_add(1);
        tm.path_floor[pi] = h.path_floor;
        // Pacing (section 6.4): with a rate hint, a new packet leaves no
        // earlier than the gaps of the packets before it allow;
        // retransmissions and probes are not held, only counted.
        let now = self.now;
        if !h.retx && tm.hint != 0 && !tm.timer_since_send[pi] {
            assert!(
                now >= tm.pace_earliest,
                "new packet at {now} before the pacer allows it ({}), rate hint {} kbit/s",
                tm.pace_earliest,
                tm.hint
            );
        }
        if tm.hint != 0 {
            let from = tm.pace_earliest.max(now.saturating_sub(self.pace_burst));
            tm.pace_earliest = from.saturating_add(pace_gap(h.len.into(), tm.hint));
            tm.pace_from = from;
            tm.pace_len = h.len.into();
        }
        tm.timer_since_send[pi] = false;
    }

    /// A response packet `side` sent on stream `s`: the answer its glue gave.
    fn check_response_sent(
        &self,
        side: usize,
        s: usize,
        h: &DataHdr,
        t: &metaroce_proto::conn::Transmit,
    ) {
        let mss = self.mss;
        let (req, answer) = self.rx[side]
            .requests
            .get(&(s, h.msn))
            .unwrap_or_else(|| panic!("response to no request {} of stream {s}", h.msn));
        assert_eq!((h.rsn, h.se), (0, false), "response Rsn/SE");
        match *answer {
            Response::Read => {
                let req = req.expect("READ answered without its request");
                assert_eq!(
                    (h.op, h.msg_len, h.rkey, h.va, h.imm),
                    (MrcOp::ReadResp, req.len, 0, 0, 0),
                    "READ_RESP header"
                );
                assert_eq!(h.offset % mss, 0, "READ_RESP offset not on an MSS boundary");
                assert_eq!(
                    u32::from(h.len),
                    (req.len - h.offset.min(req.len)).min(mss),
                    "READ_RESP length"
                );
                assert!(
                    h.offset < req.len || (req.len == 0 && h.offset == 0),
                    "READ_RESP past the READ"
                );
                let p = t.payload.expect("READ_RESP without payload reference");
                let mr = Some(MrRef {
                    rkey: req.rkey,
                    va: req.va.wrapping_add(u64::from(h.offset)),
                });
                assert_eq!(
                    (p.stream, p.msn, p.offset, p.len, p.mr),
                    (s, h.msn, h.offset, h.len, mr),
                    "READ_RESP payload reference"
                );
            }
            Response::Atomic(v) => {
                assert_eq!(
                    (h.op, h.msg_len, h.offset, h.len, h.rkey, h.va),
                    (MrcOp::AtomicResp, 8, 0, 0, 0, v),
                    "ATOMIC_RESP"
                );
                assert!(t.payload.is_none());
            }
            Response::Nak(c) => {
                assert_eq!(
                    (h.op, h.msg_len, h.offset, h.len, h.imm),
                    (MrcOp::Nak, 0, 0, 0, c.to_u32()),
                    "NAK"
                );
                assert!(t.payload.is_none());
            }
        }
    }

    fn check_ack_sent(&self, side: usize, a: &AckPkt) {
        let r = &self.rx[side];
        assert_eq!(
            Some(a.conn),
            r.peer,
            "ACK with a connection id never accepted"
        );
        let pi = usize::from(a.path);
        assert!(pi < self.paths);
        assert_eq!(a.rate_hint_kbps, r.hint, "ACK rate hint");
        assert_eq!(a.ce_count, r.ce[pi], "ACK CeCount");
        let got = &r.path_seqs[pi];
        assert!(!got.contains(&a.cum), "ACK CumSeq {} was received", a.cum);
        for i in 0..256u32 {
            if a.sack[(i / 64) as usize] >> (i % 64) & 1 == 1 {
                let s = a.cum.wrapping_add(1).wrapping_add(i);
                assert!(
                    got.contains(&s),
                    "ACK claims PathSeq {s} on path {pi}, never accepted"
                );
            }
        }
        let f = r.floor[pi];
        let n = seq_diff(a.cum, f);
        assert!(n >= 0, "CumSeq {} behind the newest PathFloor {f}", a.cum);
        for k in 0..n.min(4096) as u32 {
            let s = f.wrapping_add(k);
            assert!(
                got.contains(&s),
                "ACK CumSeq {} covers PathSeq {s} never accepted (floor {f})",
                a.cum
            );
        }
    }

    fn deliver(&mut self, idx: u16, action: u8, arg: u16, ce: bool, hint: u32) {
        if self.wire.is_empty() {
            return;
        }
        let i = usize::from(idx) % self.wire.len();
        let p = match action % 8 {
            3 => Pkt {
                to: self.wire[i].to,
                bytes: self.wire[i].bytes.clone(),
                genuine: self.wire[i].genuine,
            },
            _ => self.wire.remove(i),
        };
        let mut bytes = p.bytes;
        let mut genuine = p.genuine;
        match action % 8 {
            4 => return,
            5 => {
                let bit = usize::from(arg) % (bytes.len() * 8);
                bytes[bit / 8] ^= 1 << (bit % 8);
                genuine = false;
            }
            6 => {
                bytes.truncate(usize::from(arg) % bytes.len());
                genuine = false;
            }
            // Trailing bytes are ignored (section 3.1): still genuine.
            7 => bytes.extend((0..=arg % 8).map(|x| x as u8 ^ 0x5A)),
            _ => {}
        }
        self.receive(p.to, &bytes, ce, hint, genuine);
    }

    fn receive(&mut self, side: usize, bytes: &[u8], ce: bool, hint: u32, genuine: bool) {
        let now = self.now;
        let r = self.c[side].on_packet(now, bytes, ce, 50_000, hint);
        if super::trace() {
            eprintln!(
                "  rx side {side} genuine {genuine} {:?} -> {r:?}",
                parse(bytes).map(|p| match p {
                    MrcPacket::Data(h, _) => format!("DATA {h:?}"),
                    MrcPacket::Ack(a) => format!("ACK {a:?}"),
                    MrcPacket::Probe(p) => format!("PROBE {p:?}"),
                })
            );
        }
        super::count(
            || {
                let what = match &r {
                    Ok(RxEvent::Data(p)) => format!("Data {:?}", p.op),
                    Ok(RxEvent::Request(q)) => format!("Request {:?}", q.op),
                    Ok(RxEvent::Nak { code, .. }) => format!("Nak {code:?}"),
                    Ok(e) => format!("{e:?}"),
                    Err(e) => format!("{e:?}"),
                };
                format!("rx genuine {genuine} {what}")
            },
            1,
        );
        let parsed = parse(bytes);
        if r.is_err() {
            if genuine && !self.tainted {
                self.genuine_drop(side, &parsed, r);
            }
            // DATA naming no open stream is acknowledged and its Dsn recorded
            // before it is dropped (section 4): the receive half took it.
            if let (Err(metaroce_proto::conn::RxDrop::NoStream), Ok(MrcPacket::Data(h, _))) =
                (r, &parsed)
            {
                if !genuine {
                    self.tainted = true;
                }
                self.rx_commit(side, h, ce, hint);
                self.rx[side].seen.insert(h.dsn);
            }
            return;
        }
        if !genuine {
            self.tainted = true;
        }
        match (parsed, r) {
            (Ok(MrcPacket::Ack(a)), Ok(RxEvent::Ack)) => {
                let tm = &mut self.tx[side];
                // Section 6.4: a new hint re-times the gap running (it ends
                // the packet's length at the new rate after it began, if
                // that is sooner).
                if a.rate_hint_kbps != tm.hint {
                    let end = match a.rate_hint_kbps {
                        0 => tm.pace_from,
                        kbps => tm.pace_from.saturating_add(pace_gap(tm.pace_len, kbps)),
                    };
                    tm.pace_earliest = tm.pace_earliest.min(end);
                }
                tm.hint = a.rate_hint_kbps;
            }
            (Ok(MrcPacket::Data(h, payload)), Ok(ev)) => {
                self.data_accepted(side, &h, payload, ce, hint, genuine, ev)
            }
            // Neither genuine side restarts: a proof names the peer the receiver has.
            (Ok(MrcPacket::Probe(_)), Ok(RxEvent::Probe)) => {}
            (p, r) => panic!("packet {p:?} gave {r:?}"),
        }
    }

    /// A genuine packet was dropped by an untainted side: only one case is
    /// allowed. Section 9 is silent on when the receiver releases its
    /// completions; the core releases them when the caller polls, so a
    /// receiver that has not polled can have its K-message ring full of
    /// complete messages and drops (MsnWindow) a genuine packet K messages
    /// ahead of the oldest, which the sender retransmits later.
    fn genuine_drop(
        &self,
        side: usize,
        parsed: &core::result::Result<MrcPacket<'_>, metaroce_proto::mrc_wire::MrcError>,
        r: core::result::Result<RxEvent, metaroce_proto::conn::RxDrop>,
    ) {
        use metaroce_proto::conn::RxDrop;
        use metaroce_proto::stream::StreamDrop;
        if let (Ok(MrcPacket::Probe(_)), Err(RxDrop::BadProof)) = (parsed, r) {
            // Our PROOF answered a forged CHALLENGE (or one whose cookie has expired).
            super::count(|| "genuine PROOF refused".into(), 1);
            return;
        }
        if let (Ok(MrcPacket::Data(h, _)), Err(RxDrop::NakPending)) = (parsed, r) {
            // Held until our NAK of the refused message is acknowledged
            // (section 9.1).
            let s = dst_stream(side, h.stream);
            assert!(
                self.rx[side].refused.contains(&(s, h.msn)),
                "genuine DATA {h:?} held, its message not refused"
            );
            super::count(|| "genuine NakPending drop (held)".into(), 1);
            return;
        }
        let (Ok(MrcPacket::Data(h, _)), Err(RxDrop::Stream(StreamDrop::MsnWindow))) = (parsed, r)
        else {
            panic!("genuine packet dropped: {r:?}");
        };
        let rm = &self.rx[side];
        let s = (0..S)
            .find(|&s| local_qpn(side, s) == h.stream)
            .expect("genuine DATA for no stream");
        let head = rm.reported[s];
        assert!(
            h.msn.wrapping_sub(head) as usize >= K,
            "genuine Msn {} dropped inside the window (head {head})",
            h.msn
        );
        let oldest = rm.open[s]
            .get(&head)
            .expect("window full but its oldest message has nothing placed");
        assert!(oldest.placed.iter().all(|&b| b), "window full but message {head} is incomplete: the sender ran more than K messages ahead");
        super::count(|| "genuine MsnWindow drop (receiver not polled)".into(), 1);
    }

    /// What the receive half of `side` records of every DATA packet it
    /// takes (placed, duplicate, or for no stream).
    fn rx_commit(&mut self, side: usize, h: &DataHdr, ce: bool, hint: u32) {
        let rm = &mut self.rx[side];
        if let Some(p) = rm.peer {
            assert_eq!(p, h.conn, "DATA of another connection accepted");
        }
        rm.peer = Some(h.conn);
        rm.hint = hint;
        let pi = usize::from(h.path);
        assert!(pi < self.paths, "DATA on path {pi} accepted");
        // Section 4, step 1: the window slides to PathFloor if it is after
        // CumSeq (the first PathSeq from the last floor on not received),
        // not merely after the previous floor (they differ near 2^31).
        let mut cum = rm.floor[pi];
        while rm.path_seqs[pi].contains(&cum) {
            cum = cum.wrapping_add(1);
        }
        if seq_diff(h.path_floor, cum) > 0 {
            rm.floor[pi] = h.path_floor;
        }
        rm.path_seqs[pi].insert(h.path_seq);
        if ce {
            rm.ce[pi] = rm.ce[pi].wrapping_add(1);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn data_accepted(
        &mut self,
        side: usize,
        h: &DataHdr,
        payload: &[u8],
        ce: bool,
        hint: u32,
        genuine: bool,
        ev: RxEvent,
    ) {
        let tainted = self.tainted;
        // What a refusal on this packet takes back (section 9.1).
        let pi = usize::from(h.path);
        let r = &self.rx[side];
        let before = (r.path_seqs[pi].contains(&h.path_seq), r.floor[pi], r.ce[pi]);
        self.rx_commit(side, h, ce, hint);
        let rm = &mut self.rx[side];
        let new_dsn = !rm.seen.contains(&h.dsn);
        rm.seen.insert(h.dsn);
        if ev == RxEvent::Duplicate {
            if genuine && !tainted {
                // A response for a message completed or flushed is
                // acknowledged like a duplicate (section 11.2).
                let stale = h.op.is_response()
                    && (0..S).any(|s| {
                        local_qpn(side, s) == h.stream && h.msn < self.tx[side].reported[s]
                    });
                assert!(!new_dsn || stale, "new Dsn {} reported duplicate", h.dsn);
            }
            return;
        }
        // The Dsn window places each Dsn once, whatever else happened.
        assert!(
            new_dsn && rm.dsns.insert(h.dsn),
            "Dsn {} placed twice",
            h.dsn
        );
        if h.op.is_response() {
            self.response_accepted(side, h, payload, genuine, ev);
            return;
        }
        let s = dst_stream(side, h.stream);
        if h.op.is_request() {
            self.request_accepted(side, s, h, ev);
        }
        let rm = &mut self.rx[side];
        if h.op.is_request() {
            assert!(
                h.msn >= rm.reported[s] && ((h.msn - rm.reported[s]) as usize) < K,
                "Msn {} outside the window",
                h.msn
            );
            let m = rm.open[s].entry(h.msn).or_insert_with(|| RxMsg {
                op: h.op,
                rsn: 0,
                msg_len: 0,
                placed: Vec::new(),
                pkts: 0,
                bytes: 0,
            });
            assert_eq!(
                (m.op, m.rsn, m.msg_len),
                (h.op, 0, 0),
                "packets of request {} disagree",
                h.msn
            );
            return;
        }
        if let RxEvent::Refused(c) = ev {
            // A new Dsn for a message the glue refused: only a forged or
            // corrupted copy (a refusal comes on the completing packet).
            assert!(
                tainted && rm.refused.contains(&(s, h.msn)) && c == NakCode::InvalidRequest,
                "DATA {h:?} refused ({c:?})"
            );
            return;
        }
        let RxEvent::Data(pl) = ev else {
            panic!("DATA {h:?} gave {ev:?}")
        };
        assert!(
            s < S && local_qpn(side, s) == h.stream,
            "placed into stream {s} for StreamId {}",
            h.stream
        );
        assert_eq!(
            (pl.op, pl.msn, pl.rsn, pl.offset, pl.va, pl.rkey, pl.len),
            (h.op, h.msn, h.rsn, h.offset, h.va, h.rkey, h.len),
            "placement differs from the packet"
        );
        assert!(
            h.msn >= rm.reported[s] && ((h.msn - rm.reported[s]) as usize) < K,
            "Msn {} outside the window",
            h.msn
        );
        let m = rm.open[s].entry(h.msn).or_insert_with(|| RxMsg {
            op: h.op,
            rsn: h.rsn,
            msg_len: h.msg_len,
            placed: if tainted {
                Vec::new()
            } else {
                vec![false; h.msg_len as usize]
            },
            pkts: 0,
            bytes: 0,
        });
        assert_eq!(
            (m.op, m.rsn, m.msg_len),
            (h.op, h.rsn, h.msg_len),
            "packets of message {} disagree",
            h.msn
        );
        // Section 9.2: the packet that places a SEND_INV's last byte (the
        // first time) names the key; no other packet does.
        let complete_before = m.pkts > 0 && m.bytes >= u64::from(m.msg_len);
        m.pkts += 1;
        m.bytes += u64::from(h.len);
        let completes = !complete_before && m.bytes >= u64::from(m.msg_len);
        let want = (h.op.invalidates() && completes).then_some(h.rkey);
        assert_eq!(
            pl.invalidate, want,
            "SEND_INV key named on the wrong packet"
        );
        if let Some(key) = pl.invalidate {
            self.send_inv_completed(side, s, h, key, before);
        }
        let rm = &mut self.rx[side];
        let m = rm.open[s].get_mut(&h.msn).expect("message just placed");
        let end = h
            .offset
            .checked_add(u32::from(h.len))
            .expect("offset overflows");
        assert!(end <= m.msg_len, "placement past the message");
        if genuine && !tainted {
            let from = 1 - side;
            for (i, &b) in payload.iter().enumerate() {
                let off = h.offset + i as u32;
                assert_eq!(b, pattern(from, s, h.msn, off), "payload byte {off}");
                if let Some(x) = m.placed.get_mut(off as usize) {
                    assert!(!*x, "byte {off} of message {} placed twice", h.msn);
                    *x = true;
                }
            }
        }
    }

    /// The glue's part for the packet that completed SEND_INV `h` on
    /// `side`'s stream `s` (section 9.2): the one invalidatable key is
    /// invalidated, another refused (`Conn::refuse`, which takes back that
    /// packet's acknowledgement: the model forgets its path sequence number,
    /// PathFloor and CE mark as `before` says).
    fn send_inv_completed(
        &mut self,
        side: usize,
        s: usize,
        h: &DataHdr,
        key: u32,
        before: (bool, u32, u32),
    ) {
        let tainted = self.tainted;
        let rm = &mut self.rx[side];
        if !tainted {
            // The fence: every older message of the stream is completely
            // placed before the SEND_INV's key is invalidated.
            for msn in rm.reported[s]..h.msn {
                let o = rm.open[s].get(&msn);
                assert!(
                    o.is_some_and(|o| o.placed.iter().all(|&b| b)),
                    "SEND_INV {} complete before message {msn} was placed",
                    h.msn
                );
            }
            let id = (s, h.msn);
            assert!(
                !rm.invalidated.contains(&id) && !rm.refused.contains(&id),
                "SEND_INV {} named its key twice",
                h.msn
            );
        }
        if key == GOOD_KEY {
            rm.invalidated.insert((s, h.msn));
            return;
        }
        assert!(
            self.c[side].refuse(s, h.msn, NakCode::InvalidRequest),
            "refusing SEND_INV {} failed",
            h.msn
        );
        rm.refused.insert((s, h.msn));
        rm.requests
            .insert((s, h.msn), (None, Response::Nak(NakCode::InvalidRequest)));
        let pi = usize::from(h.path);
        if !before.0 {
            rm.path_seqs[pi].remove(&h.path_seq);
        }
        (rm.floor[pi], rm.ce[pi]) = (before.1, before.2);
    }

    /// A new request reached `side` (the responder) on stream `s`: the
    /// glue's part. Checks it against what the peer posted, answers it
    /// (carrying out an atomic on `side`'s words) and records the answer.
    fn request_accepted(&mut self, side: usize, s: usize, h: &DataHdr, ev: RxEvent) {
        let tainted = self.tainted;
        let key = (s, h.msn);
        if !tainted {
            assert!(
                !self.rx[side].requests.contains_key(&key),
                "request {key:?} reported twice (executed twice)"
            );
        }
        let posted = self.tx[1 - side].msgs[s]
            .get(h.msn as usize)
            .filter(|_| !tainted);
        let answer = match ev {
            RxEvent::Refused(c) => {
                assert!(
                    h.op.is_atomic() && h.va % 8 != 0 && c == NakCode::InvalidRequest,
                    "core refused {h:?} with {c:?}"
                );
                self.rx[side].requests.insert(key, (None, Response::Nak(c)));
                return;
            }
            RxEvent::Request(req) => {
                let want_len = if h.op.is_atomic() { 8 } else { h.msg_len };
                assert_eq!(
                    (req.stream, req.msn, req.op, req.rkey, req.va, req.len),
                    (s, h.msn, h.op, h.rkey, h.va, want_len),
                    "request event differs from the packet"
                );
                assert!(
                    !(h.op.is_atomic() && h.va % 8 != 0),
                    "misaligned atomic handed to the glue"
                );
                if let Some(m) = posted {
                    assert_eq!(
                        (m.desc.op, m.desc.va, m.desc.rkey, m.desc.len),
                        (req.op, req.va, req.rkey, req.len),
                        "request differs from the posted message"
                    );
                    assert_eq!([req.compare_add, req.swap], m.operands, "atomic operands");
                }
                if req.rkey != GOOD_KEY {
                    Response::Nak(NakCode::RemoteAccess)
                } else if req.op == MrcOp::Read {
                    Response::Read
                } else {
                    let w = self.rx[side]
                        .words
                        .entry(req.va)
                        .or_insert_with(|| word0(side, req.va));
                    let old = *w;
                    *w = match req.op {
                        MrcOp::CmpSwap if old == req.compare_add => req.swap,
                        MrcOp::CmpSwap => old,
                        _ => old.wrapping_add(req.compare_add),
                    };
                    Response::Atomic(old)
                }
            }
            other => panic!("request {h:?} gave {other:?}"),
        };
        let RxEvent::Request(req) = ev else {
            unreachable!()
        };
        assert!(self.c[side].respond(s, h.msn, answer), "respond refused");
        assert!(!self.c[side].respond(s, h.msn, answer), "answered twice");
        self.rx[side].requests.insert(key, (Some(req), answer));
    }

    /// A new response reached `side` (the requester).
    fn response_accepted(
        &mut self,
        side: usize,
        h: &DataHdr,
        payload: &[u8],
        genuine: bool,
        ev: RxEvent,
    ) {
        let tainted = self.tainted;
        let s = dst_stream(side, h.stream);
        let tm = &mut self.tx[side];
        assert!(
            h.msn >= tm.reported[s],
            "response to completed message {} placed",
            h.msn
        );
        let Some(m) = tm.msgs[s].get_mut(h.msn as usize) else {
            assert!(tainted, "response to unposted message {}", h.msn);
            return;
        };
        assert!(
            m.started,
            "response to message {} whose request was never sent",
            h.msn
        );
        let answer = self.rx[1 - side].requests.get(&(s, h.msn)).map(|a| a.1);
        match ev {
            RxEvent::Data(pl) => {
                assert_eq!(
                    (pl.stream, pl.op, pl.msn, pl.rsn, pl.offset, pl.va, pl.rkey, pl.len),
                    (s, h.op, h.msn, 0, h.offset, h.va, 0, h.len),
                    "response placement differs from the packet"
                );
                match h.op {
                    MrcOp::ReadResp => {
                        assert!(
                            m.desc.op == MrcOp::Read && h.msg_len == m.desc.len,
                            "READ_RESP for {:?}",
                            m.desc
                        );
                        if genuine && !tainted {
                            for (i, &b) in payload.iter().enumerate() {
                                let off = h.offset + i as u32;
                                assert_eq!(
                                    b,
                                    mem_byte(1 - side, m.desc.va + u64::from(off)),
                                    "READ byte {off}"
                                );
                                let x = &mut m.resp[off as usize];
                                assert!(!*x, "READ byte {off} of message {} placed twice", h.msn);
                                *x = true;
                            }
                        }
                    }
                    MrcOp::AtomicResp => {
                        assert!(
                            m.desc.op.is_atomic() && m.value.is_none(),
                            "ATOMIC_RESP for {:?}",
                            m.desc
                        );
                        if !tainted {
                            assert_eq!(
                                answer,
                                Some(Response::Atomic(h.va)),
                                "atomic value is not the responder's"
                            );
                        }
                        m.value = Some(h.va);
                    }
                    op => panic!("{op:?} placed as a response"),
                }
            }
            RxEvent::Nak { stream, msn, code } => {
                assert_eq!(
                    (stream, msn, Some(code)),
                    (s, h.msn, NakCode::from_u32(h.imm)),
                    "NAK event"
                );
                // The model never refuses a data message (`Conn::refuse`):
                // a NAK for one is corrupted or forged (the core takes a NAK
                // for any started message, section 9.1).
                assert!(
                    (m.desc.op.is_request() || m.desc.op.invalidates() || tainted)
                        && m.nak.is_none(),
                    "NAK for {:?}",
                    m.desc
                );
                if !tainted {
                    assert_eq!(
                        answer,
                        Some(Response::Nak(code)),
                        "NAK the responder did not give"
                    );
                }
                m.nak = Some(code);
            }
            other => panic!("response {h:?} gave {other:?}"),
        }
    }

    fn forge_data(&self, side: usize, sel: u8, seq: i8, dsn: i16, msn: u8, len: u32) -> Vec<u8> {
        let peer = 1 - side;
        let pi = usize::from(sel % 4) % self.paths;
        let t = &self.tx[peer];
        let op = if sel & 0x40 != 0 {
            MrcOp::SendInv
        } else {
            [MrcOp::Send, MrcOp::SendImm, MrcOp::Write, MrcOp::WriteImm][usize::from(sel >> 2) % 4]
        };
        let s = usize::from(sel >> 4) % S;
        let msg_len = len % (4 * self.mss + 1);
        let offset = (len >> 16) % (msg_len + 1);
        let plen = ((len >> 8) as u8 as u32)
            .min(msg_len - offset)
            .min(self.mss);
        let top = t.path_next[pi];
        let h = DataHdr {
            retx: sel & 0x80 != 0,
            se: false,
            path: pi as u8,
            op,
            conn: IDS[peer],
            path_seq: top.wrapping_add(seq as i32 as u32),
            path_floor: top
                .wrapping_add(seq as i32 as u32)
                .wrapping_sub(u32::from(msn >> 4)),
            stream: local_qpn(side, s),
            dsn: t.next_dsn.wrapping_add(dsn as i32 as u32),
            msn: u32::from(msn % 16),
            rsn: if op == MrcOp::Write {
                0
            } else {
                u32::from(msn >> 4)
            },
            msg_len,
            offset,
            va: if op.is_write() { 0x4000 } else { 0 },
            rkey: if op.is_write() {
                1
            } else if op.invalidates() {
                GOOD_KEY
            } else {
                0
            },
            imm: if op.has_imm() { 9 } else { 0 },
            len: plen as u16,
        };
        let mut b = vec![0u8; DATA_HDR_LEN];
        h.write(&mut b).unwrap();
        b.resize(DATA_HDR_LEN + plen as usize, 0xF0);
        b
    }

    fn timer(&mut self, mode: u8, ns: u32) {
        match mode % 2 {
            0 => {
                let d = self.c.iter().filter_map(|c| c.next_deadline()).min();
                if let Some(d) = d {
                    self.now = self.now.max(d);
                }
            }
            _ => self.now += u64::from(ns),
        }
        for c in self.c.iter_mut() {
            c.on_timer(self.now);
        }
        for t in self.tx.iter_mut() {
            t.timer_since_send = [true; 4];
        }
    }

    fn poll(&mut self, side: usize) {
        while let Some(c) = self.c[side].poll_completion() {
            if super::trace() {
                eprintln!("  completion side {side}: {c:?}");
            }
            super::count(
                || match c {
                    Completion::Send {
                        stream,
                        msn,
                        status,
                    } => {
                        let op = self.tx[side]
                            .msgs
                            .get(stream)
                            .and_then(|m| m.get(msn as usize))
                            .map(|m| m.desc.op);
                        format!("completion send {op:?} {status:?}")
                    }
                    Completion::Recv { done, .. } => format!("completion recv {:?}", done.op),
                },
                1,
            );
            match c {
                Completion::Send {
                    stream,
                    msn,
                    status,
                } => self.send_done(side, stream, msn, status),
                Completion::Recv { stream, done } => self.recv_done(side, stream, done),
            }
        }
    }

    fn send_done(&mut self, side: usize, s: usize, msn: u32, status: SendStatus) {
        // Section 7: the connection failed, or the stream alone (a packet
        // of it never acknowledged while the peer acknowledged later data).
        let failed = self.c[side].state() == ConnState::Failed || self.c[side].stream_failed(s);
        let t = &mut self.tx[side];
        assert!(s < S);
        assert_eq!(
            msn, t.reported[s],
            "send completion out of order on stream {s}"
        );
        assert!(
            (msn as usize) < t.msgs[s].len(),
            "completion of unposted message {msn}"
        );
        t.reported[s] += 1;
        match status {
            SendStatus::Ok => {
                assert!(
                    !t.failed_seen[s],
                    "success on stream {s} after RetryExceeded (section 7: only flushes follow)"
                );
                if !self.tainted {
                    // Every packet of the message reached the peer; a READ's
                    // every byte, an atomic's value came back.
                    let m = &t.msgs[s][msn as usize];
                    let d = m.desc;
                    assert!(
                        m.resp.iter().all(|&b| b),
                        "READ {msn} completed with bytes missing"
                    );
                    assert!(
                        !d.op.is_atomic() || m.value.is_some(),
                        "atomic {msn} completed without its value"
                    );
                    assert!(m.nak.is_none(), "message {msn} completed Ok after a NAK");
                    assert!(
                        !(d.op.invalidates() && d.rkey == BAD_KEY),
                        "SEND_INV {msn} of a refused key completed Ok"
                    );
                    let segs: Vec<(&u32, &Seg)> = t
                        .dsns
                        .iter()
                        .filter(|(_, g)| g.stream == s && !g.resp && g.msn == msn)
                        .collect();
                    let want = if d.op.is_request() {
                        1
                    } else {
                        d.len.div_ceil(self.mss).max(1) as usize
                    };
                    assert_eq!(
                        segs.len(),
                        want,
                        "message {msn} completed with {} of {want} packets sent",
                        segs.len()
                    );
                    for (dsn, g) in segs {
                        assert!(
                            self.rx[1 - side].seen.contains(dsn),
                            "message {msn} completed but Dsn {dsn} ({g:?}) never reached the peer"
                        );
                    }
                }
            }
            SendStatus::RetryExceeded => {
                assert!(failed, "RetryExceeded without a failure");
                assert!(!t.failed_seen[s], "second RetryExceeded on stream {s}");
                t.failed_seen[s] = true;
            }
            SendStatus::Flushed => {
                assert!(failed, "Flushed without a failure");
                assert!(
                    t.failed_seen[s],
                    "Flushed before the stream's RetryExceeded"
                );
            }
            other => {
                let m = &t.msgs[s][msn as usize];
                assert!(
                    m.desc.op.is_request() || m.desc.op.invalidates() || self.tainted,
                    "{other:?} for a message that is no READ, atomic or SEND_INV"
                );
                if !self.tainted {
                    let want = match m.nak {
                        Some(NakCode::RemoteAccess) => SendStatus::RemoteAccess,
                        Some(NakCode::InvalidRequest) => SendStatus::RemoteInvalid,
                        Some(NakCode::RemoteOperation) => SendStatus::RemoteOperation,
                        None => panic!("{other:?} without a NAK"),
                    };
                    assert_eq!(other, want);
                    let misaligned = m.desc.op.is_atomic() && m.desc.va % 8 != 0;
                    assert!(
                        m.desc.rkey == BAD_KEY || misaligned,
                        "refused a good request {:?}",
                        m.desc
                    );
                }
            }
        }
    }

    fn recv_done(&mut self, side: usize, s: usize, done: metaroce_proto::stream::RecvDone) {
        let tainted = self.tainted;
        let rm = &mut self.rx[side];
        assert!(s < S);
        assert_eq!(
            done.msn, rm.reported[s],
            "receive completion out of order on stream {s}"
        );
        rm.reported[s] += 1;
        let m = rm.open[s]
            .remove(&done.msn)
            .expect("completion of a message with nothing placed");
        assert_eq!((done.op, done.rsn, done.len), (m.op, m.rsn, m.msg_len));
        if !tainted {
            let t = &self.tx[1 - side];
            let sent = t.msgs[s]
                .get(done.msn as usize)
                .expect("completion of a message the peer never posted");
            let d = sent.desc;
            assert!(
                m.placed.iter().all(|&b| b),
                "message {} completed with bytes never placed",
                done.msn
            );
            // A request holds its place with length 0 (section 11.3).
            let len = if d.op.is_request() { 0 } else { d.len };
            assert_eq!(
                (done.op, done.len, done.rsn, done.imm, done.se),
                (
                    d.op,
                    len,
                    sent.rsn,
                    if d.op.has_imm() { d.imm } else { 0 },
                    d.se && d.op.consumes_recv()
                ),
                "receive completion differs from the message sent"
            );
            // Section 9.2: a SEND_INV's completion names its key, after the
            // glue invalidated it, or is refused.
            let inv = d.op.invalidates();
            let refused = inv && d.rkey != GOOD_KEY;
            assert_eq!(
                done.refused,
                refused.then_some(NakCode::InvalidRequest),
                "refusal of {d:?}"
            );
            assert_eq!(
                done.invalidated,
                (inv && !refused).then_some(d.rkey),
                "invalidated key of {d:?}"
            );
            if done.invalidated.is_some() {
                assert!(
                    rm.invalidated.contains(&(s, done.msn)),
                    "SEND_INV {} completed before its key was invalidated",
                    done.msn
                );
            }
        }
    }

    fn check_windows(&self) {
        for (side, c) in self.c.iter().enumerate() {
            for i in 0..self.paths {
                let (cwnd, ..) = c.path_rtt(i).unwrap();
                assert!(
                    cwnd >= self.mss && cwnd <= 256 * self.mss,
                    "path {i} window {cwnd}"
                );
            }
            let (cwnd, hint) = c.conn_window();
            assert!(
                cwnd >= self.mss && cwnd <= MAX_CWND_CONN * self.mss,
                "connection window {cwnd}"
            );
            assert_eq!(
                hint, self.tx[side].hint,
                "rate hint in use is not the newest ACK's"
            );
        }
    }

    fn done(&self) -> bool {
        (0..2).all(|side| {
            let failed = self.c[side].state() == ConnState::Failed;
            let peer_failed = self.c[1 - side].state() == ConnState::Failed;
            (0..S).all(|s| {
                let t = &self.tx[side];
                let mut n = t.msgs[s].len() as u32;
                if peer_failed && !failed {
                    // Section 11.5: a request whose responder failed waits,
                    // and the messages behind it with it.
                    let from = t.reported[s] as usize;
                    if let Some(i) = t.msgs[s][from..]
                        .iter()
                        .position(|m| m.desc.op.is_request())
                    {
                        n = (from + i) as u32;
                    }
                }
                let failed = failed || self.c[side].stream_failed(s);
                t.reported[s] >= n && (failed || self.rx[1 - side].reported[s] >= n)
            })
        })
    }

    fn finish(&mut self) {
        for side in 0..2 {
            self.poll(side);
        }
        if self.tainted {
            return;
        }
        // Drain: every packet delivered at once, no loss, no hint.
        for round in 0..20_000 {
            let mut moved = false;
            for side in 0..2 {
                for _ in 0..512 {
                    if !self.pump(side) {
                        break;
                    }
                    moved = true;
                }
            }
            while !self.wire.is_empty() {
                let p = self.wire.remove(0);
                self.receive(p.to, &p.bytes, false, 0, p.genuine);
                moved = true;
            }
            for side in 0..2 {
                self.poll(side);
            }
            self.check_windows();
            if self.done() {
                super::count(|| "drain complete".into(), 1);
                return;
            }
            if !moved {
                let d = self.c.iter().filter_map(|c| c.next_deadline()).min();
                let Some(d) = d else {
                    panic!("stall after {round} rounds: messages outstanding, nothing to send, no timer");
                };
                self.now = self.now.max(d);
                for c in self.c.iter_mut() {
                    c.on_timer(self.now);
                }
                for t in self.tx.iter_mut() {
                    t.timer_since_send = [true; 4];
                }
            }
        }
        panic!("drain did not finish");
    }
}
