// SPDX-License-Identifier: GPL-2.0
//! Streams (QPs) of a MetaRoCE connection (`transport.rst`, sections 8 and
//! 9): segmentation and send completions in posting order on the sender;
//! on the receiver, byte counting of out-of-order placed messages and
//! receive completions released strictly in message order.
//!
//! Both sides keep a ring of `K` message slots indexed by Msn; the sender
//! never has more than `K` messages between its oldest incomplete and its
//! newest, so the receiver's ring cannot overflow.
//!
//! RDMA READ and atomics (section 11): the requester's message is a
//! one-packet request; it completes when the request is acknowledged *and*
//! the response arrived (every READ byte placed, the atomic's value, or a
//! NAK), still in posting order. A request starts only as the fences of
//! section 11.4 allow. The responder keeps each request's answer in a
//! [`RespRing`] until every response packet is acknowledged.

use super::mrc_wire::{DataHdr, MrcOp, NakCode, ATOMIC_LEN, ATOMIC_OPERANDS_LEN, MAX_MSG_LEN};
use super::sack::seq_diff;

/// A message to send.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MsgDesc {
    /// Operation.
    pub op: MrcOp,
    /// Length in bytes.
    pub len: u32,
    /// Remote address (writes).
    pub va: u64,
    /// Remote key (writes, READ, atomics); the key the responder is to
    /// invalidate ([`MrcOp::SendInv`]).
    pub rkey: u32,
    /// Immediate data (IMM opcodes).
    pub imm: u32,
    /// Solicited event.
    pub se: bool,
}

/// Why a message could not be posted.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PostError {
    /// `K` messages are outstanding on the stream.
    Full,
    /// Longer than `MAX_MSG_LEN`.
    TooLong,
    /// No such stream, or it is not open.
    NoStream,
    /// The connection has failed.
    ConnFailed,
    /// The stream has failed ([`TxStream::failed`]).
    StreamFailed,
    /// Not an opcode one posts (a response), or an atomic posted with
    /// [`TxStream::post`] instead of [`TxStream::post_atomic`].
    BadOp,
}

#[derive(Clone, Copy, Debug)]
struct TxMsg {
    desc: MsgDesc,
    rsn: u32,
    pkts: u32,
    acked: u32,
    /// Atomic operands: Compare (or Add), Swap (or 0).
    operands: [u64; 2],
    /// READ bytes placed (each response packet counted once).
    resp_bytes: u32,
    /// The response is complete (requests only).
    resp_done: bool,
    /// The responder refused the request.
    nak: Option<NakCode>,
}

const NO_TX_MSG: TxMsg = TxMsg {
    desc: NO_MSG,
    rsn: 0,
    pkts: 0,
    acked: 0,
    operands: [0; 2],
    resp_bytes: 0,
    resp_done: false,
    nak: None,
};

/// Fence class of an opcode (section 11.4): a message starts only while
/// every older incomplete message of its stream is of its class, and an
/// atomic only when none is.
fn fence_class(op: MrcOp) -> u8 {
    match op {
        MrcOp::Read => 1,
        MrcOp::CmpSwap | MrcOp::FetchAdd => 2,
        _ => 0,
    }
}

const NO_MSG: MsgDesc = MsgDesc {
    op: MrcOp::Write,
    len: 0,
    va: 0,
    rkey: 0,
    imm: 0,
    se: false,
};

/// A segment chosen for transmission: message `msn`, bytes
/// `offset .. offset + len`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Segment {
    /// Message.
    pub msn: u32,
    /// Offset within the message.
    pub offset: u32,
    /// Payload length.
    pub len: u16,
}

/// The sending side of a stream.
#[derive(Clone, Copy, Debug)]
pub struct TxStream<const K: usize> {
    /// The peer's QP number (StreamId on the wire).
    pub remote_qpn: u32,
    /// Open for posting.
    pub open: bool,
    /// After a connection failure: the first incomplete message was
    /// reported (as retry exceeded); later ones are flushed.
    pub failed_reported: bool,
    /// A packet of this stream went unacknowledged through every
    /// retransmission while the peer kept acknowledging the connection's
    /// other data: the stream failed alone, as if its connection had
    /// (nothing more is sent or posted, its messages complete with retry
    /// exceeded, then flushed).
    pub failed: bool,
    msgs: [TxMsg; K],
    head: u32,
    next: u32,
    seg: u32,
    seg_off: u32,
    next_rsn: u32,
}

impl<const K: usize> Default for TxStream<K> {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl<const K: usize> TxStream<K> {
    /// A closed stream with nothing posted.
    pub const EMPTY: Self = TxStream {
        remote_qpn: 0,
        open: false,
        failed_reported: false,
        failed: false,
        msgs: [NO_TX_MSG; K],
        head: 0,
        next: 0,
        seg: 0,
        seg_off: 0,
        next_rsn: 0,
    };
}

fn ring<const K: usize>(msn: u32) -> usize {
    (msn as usize) % K.max(1)
}

impl<const K: usize> TxStream<K> {
    /// Posts a message; returns its Msn. A READ is `op` [`MrcOp::Read`],
    /// `len` bytes from the responder's (`rkey`, `va`); an atomic goes
    /// through [`Self::post_atomic`].
    pub fn post(&mut self, desc: MsgDesc, mss: u16) -> Result<u32, PostError> {
        if desc.op.is_atomic() {
            return Err(PostError::BadOp);
        }
        self.post_with(desc, [0; 2], mss)
    }

    /// Posts an atomic (`op` [`MrcOp::CmpSwap`] or [`MrcOp::FetchAdd`]) on
    /// the 8-byte word at the responder's (`rkey`, `va`): `compare_add` is
    /// the compare value (CMP_SWAP) or the addend (FETCH_ADD), `swap` the
    /// swap value (CMP_SWAP, else ignored). Returns its Msn.
    pub fn post_atomic(
        &mut self,
        op: MrcOp,
        va: u64,
        rkey: u32,
        compare_add: u64,
        swap: u64,
        mss: u16,
    ) -> Result<u32, PostError> {
        if !op.is_atomic() {
            return Err(PostError::BadOp);
        }
        let desc = MsgDesc {
            op,
            len: ATOMIC_LEN,
            va,
            rkey,
            imm: 0,
            se: false,
        };
        let swap = if op == MrcOp::CmpSwap { swap } else { 0 };
        self.post_with(desc, [compare_add, swap], mss)
    }

    fn post_with(&mut self, desc: MsgDesc, operands: [u64; 2], mss: u16) -> Result<u32, PostError> {
        if !self.open || K == 0 {
            return Err(PostError::NoStream);
        }
        if self.failed {
            return Err(PostError::StreamFailed);
        }
        if desc.len > MAX_MSG_LEN {
            return Err(PostError::TooLong);
        }
        // Responses are not posted; an atomic needs its operands.
        if desc.op.is_response() || (desc.op.is_atomic() && desc.len != ATOMIC_LEN) {
            return Err(PostError::BadOp);
        }

        if self.next.wrapping_sub(self.head) as usize >= K {
            return Err(PostError::Full);
        }
        let msn = self.next;
        let rsn = if desc.op.consumes_recv() {
            let r = self.next_rsn;
            self.next_rsn = r.wrapping_add(1);
            r
        } else {
            0
        };
        // A request is one packet; its data comes back in the response.
        let pkts = if desc.op.is_request() {
            1
        } else {
            desc.len.div_ceil(u32::from(mss.max(1))).max(1)
        };
        if let Some(m) = self.msgs.get_mut(ring::<K>(msn)) {
            *m = TxMsg {
                desc,
                rsn,
                pkts,
                operands,
                ..NO_TX_MSG
            };
        }
        self.next = msn.wrapping_add(1);
        Ok(msn)
    }

    /// True if some message has bytes not yet sent and its fence allows
    /// it to start (or it started).
    pub fn has_unsent(&self) -> bool {
        !self.failed && self.seg != self.next && (self.seg_off > 0 || self.may_start())
    }

    /// Section 11.4: the message at `seg` may start if every older
    /// incomplete message is of its fence class; an atomic or a SEND_INV
    /// (section 9.2) only if there is none.
    fn may_start(&self) -> bool {
        let Some(m) = self.msgs.get(ring::<K>(self.seg)) else {
            return false;
        };
        let class = fence_class(m.desc.op);
        if class == 2 || m.desc.op.invalidates() {
            return self.head == self.seg;
        }
        let mut i = self.head;
        while i != self.seg {
            match self.msgs.get(ring::<K>(i)) {
                Some(o) if fence_class(o.desc.op) == class => {}
                _ => return false,
            }
            i = i.wrapping_add(1);
        }
        true
    }

    /// Takes the next segment of at most `mss` bytes (a request: its one
    /// packet, of length 0).
    pub fn next_segment(&mut self, mss: u16) -> Option<Segment> {
        if !self.has_unsent() {
            return None;
        }
        let m = self.msgs.get(ring::<K>(self.seg))?;
        let total = if m.desc.op.is_request() {
            0
        } else {
            m.desc.len
        };
        let left = total.saturating_sub(self.seg_off);
        let len = left.min(u32::from(mss.max(1)));
        let seg = Segment {
            msn: self.seg,
            offset: self.seg_off,
            len: u16::try_from(len).unwrap_or(u16::MAX),
        };
        self.seg_off = self.seg_off.saturating_add(len);
        if self.seg_off >= total {
            self.seg = self.seg.wrapping_add(1);
            self.seg_off = 0;
        }
        Some(seg)
    }

    /// Fills the stream fields of a DATA header for a segment.
    pub fn fill_header(&self, seg: &Segment, h: &mut DataHdr) -> Option<()> {
        let m = self.msgs.get(ring::<K>(seg.msn))?;
        let last = seg.offset.saturating_add(u32::from(seg.len)) >= m.desc.len;
        let op = m.desc.op;
        h.op = op;
        h.se = m.desc.se && last && op.consumes_recv();
        h.stream = self.remote_qpn;
        h.msn = seg.msn;
        h.rsn = m.rsn;
        h.msg_len = m.desc.len;
        h.offset = seg.offset;
        h.va = if op.has_remote() { m.desc.va } else { 0 };
        // SEND_INV: the key to invalidate, in every packet (section 9.2).
        h.rkey = if op.has_remote() || op.invalidates() {
            m.desc.rkey
        } else {
            0
        };
        h.imm = if op.has_imm() { m.desc.imm } else { 0 };
        h.len = seg.len;
        if op.is_atomic() {
            // The operand block is the payload (section 3.1).
            h.msg_len = u32::from(ATOMIC_OPERANDS_LEN);
            h.len = ATOMIC_OPERANDS_LEN;
        }
        Some(())
    }

    /// True if the next segment [`Self::next_segment`] would give is an
    /// atomic request's.
    pub fn next_is_atomic(&self) -> bool {
        self.has_unsent()
            && self
                .msgs
                .get(ring::<K>(self.seg))
                .is_some_and(|m| m.desc.op.is_atomic())
    }

    /// The operands of atomic `msn` (Compare or Add, Swap or 0).
    pub fn operands(&self, msn: u32) -> Option<[u64; 2]> {
        self.msgs
            .get(ring::<K>(msn))
            .filter(|m| m.desc.op.is_atomic())
            .map(|m| m.operands)
    }

    /// Checks that a new (not duplicate) response packet `h` answers a
    /// request of this stream whose request was sent and whose response is
    /// not complete, with a consistent opcode and length.
    pub fn check_response(&self, h: &DataHdr) -> Result<(), StreamDrop> {
        // A NAK may refuse a data message whose later packets are not sent
        // yet (it started: `seg` is past it or inside it).
        let sent = seq_diff(h.msn, self.seg) < 0
            || (h.op == MrcOp::Nak && h.msn == self.seg && self.seg_off > 0);
        if seq_diff(h.msn, self.head) < 0 || !sent {
            return Err(StreamDrop::MsnWindow);
        }
        let m = self
            .msgs
            .get(ring::<K>(h.msn))
            .ok_or(StreamDrop::MsnWindow)?;
        let ok = !m.resp_done
            && match h.op {
                MrcOp::ReadResp => m.desc.op == MrcOp::Read && h.msg_len == m.desc.len,
                MrcOp::AtomicResp => m.desc.op.is_atomic(),
                // Any message may be refused (sections 11.2 and 9.1).
                MrcOp::Nak => true,
                _ => false,
            };
        if ok {
            Ok(())
        } else {
            Err(StreamDrop::Inconsistent)
        }
    }

    /// True if response `h` is for a message that already completed or was
    /// flushed (before the oldest incomplete one): acknowledged, not placed.
    pub fn stale_response(&self, h: &DataHdr) -> bool {
        seq_diff(h.msn, self.head) < 0
    }

    /// Counts a new response packet (after [`Self::check_response`]).
    pub fn response(&mut self, h: &DataHdr) {
        let Some(m) = self.msgs.get_mut(ring::<K>(h.msn)) else {
            return;
        };
        match h.op {
            MrcOp::ReadResp => {
                m.resp_bytes = m.resp_bytes.saturating_add(u32::from(h.len));
                // Every byte placed (a zero-length READ: its one packet).
                m.resp_done = m.resp_bytes >= m.desc.len;
            }
            MrcOp::Nak => {
                m.nak = NakCode::from_u32(h.imm);
                m.resp_done = true;
            }
            _ => m.resp_done = true,
        }
    }

    /// Our data message `msn` was refused with `code` by the receiving half
    /// of this same connection (one that talks to itself): it completes with
    /// `code`, as after a NAK. `false` if it is not a started, incomplete
    /// message without an answer.
    pub fn nak(&mut self, msn: u32, code: NakCode) -> bool {
        let started = seq_diff(msn, self.seg) < 0 || (msn == self.seg && self.seg_off > 0);
        if seq_diff(msn, self.head) < 0 || !started {
            return false;
        }
        match self.msgs.get_mut(ring::<K>(msn)) {
            Some(m) if !m.resp_done => {
                m.nak = Some(code);
                m.resp_done = true;
                true
            }
            _ => false,
        }
    }

    /// One packet of message `msn` was acknowledged (first time).
    pub fn packet_acked(&mut self, msn: u32) {
        if seq_diff(msn, self.head) < 0 || seq_diff(msn, self.next) >= 0 {
            return;
        }
        if let Some(m) = self.msgs.get_mut(ring::<K>(msn)) {
            m.acked = m.acked.saturating_add(1).min(m.pkts);
        }
    }

    /// Pops the oldest message if it is complete; returns its Msn.
    pub fn pop_complete(&mut self) -> Option<u32> {
        self.pop_done().map(|(msn, _)| msn)
    }

    /// Pops the oldest message if it is complete: every packet
    /// acknowledged and, for a request, its response complete. Returns its
    /// Msn and the responder's NAK, if it refused the request.
    pub fn pop_done(&mut self) -> Option<(u32, Option<NakCode>)> {
        if self.head == self.next || self.head == self.seg {
            return None;
        }
        let m = self.msgs.get(ring::<K>(self.head))?;
        if m.acked < m.pkts || (m.desc.op.is_request() && !m.resp_done) {
            return None;
        }
        let msn = self.head;
        self.head = msn.wrapping_add(1);
        Some((msn, m.nak))
    }

    /// Pops the oldest incomplete message unconditionally (connection
    /// failure); returns its Msn.
    pub fn pop_failed(&mut self) -> Option<u32> {
        if self.head == self.next {
            return None;
        }
        let msn = self.head;
        self.head = msn.wrapping_add(1);
        if seq_diff(self.seg, self.head) < 0 {
            self.seg = self.head;
            self.seg_off = 0;
        }
        Some(msn)
    }

    /// Messages posted and not completed.
    pub fn outstanding(&self) -> u32 {
        self.next.wrapping_sub(self.head)
    }
}

/// A receive completion.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RecvDone {
    /// Message sequence number.
    pub msn: u32,
    /// Operation.
    pub op: MrcOp,
    /// Receive sequence number (which posted receive).
    pub rsn: u32,
    /// Length.
    pub len: u32,
    /// Immediate data.
    pub imm: u32,
    /// Solicited event.
    pub se: bool,
    /// The receiver refused the message ([`super::conn::Conn::refuse`]):
    /// nothing of it was placed after the refusal; the requester gets a NAK
    /// with this code.
    pub refused: Option<NakCode>,
    /// A SEND_INV that was not refused: the key the caller invalidated
    /// when [`super::conn::Place::invalidate`] named it (verbs:
    /// `IB_WC_WITH_INVALIDATE`, `ex.invalidate_rkey`). `None` otherwise.
    pub invalidated: Option<u32>,
}

#[derive(Clone, Copy, Debug)]
struct RxMsg {
    active: bool,
    done: RecvDone,
    placed: u32,
    /// SEND_INV: the key its packets carry (all the same).
    inv_rkey: u32,
}

/// Why a DATA packet was refused by its stream.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum StreamDrop {
    /// Msn outside `[head, head + K)`.
    MsnWindow,
    /// Fields differ from earlier packets of the same message.
    Inconsistent,
    /// A receive-consuming message whose Rsn cannot be its own: it names a
    /// receive an earlier message completed, or more receives ahead than
    /// messages ahead (`rsn - rsn_head > msn - head`).
    RsnWindow,
}

/// The receiving side of a stream.
#[derive(Clone, Copy, Debug)]
pub struct RxStream<const K: usize> {
    /// Our QP number (the StreamId we accept).
    pub local_qpn: u32,
    /// Accepting data.
    pub open: bool,
    slots: [RxMsg; K],
    head: u32,
    /// The Rsn the next receive-consuming message completed in order will
    /// carry: receives before it are completed and never placed into again.
    rsn_head: u32,
}

impl<const K: usize> Default for RxStream<K> {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl<const K: usize> RxStream<K> {
    /// A closed stream with nothing received.
    pub const EMPTY: Self = RxStream {
        local_qpn: 0,
        open: false,
        slots: [RxMsg {
            active: false,
            done: RecvDone {
                msn: 0,
                op: MrcOp::Write,
                rsn: 0,
                len: 0,
                imm: 0,
                se: false,
                refused: None,
                invalidated: None,
            },
            placed: 0,
            inv_rkey: 0,
        }; K],
        head: 0,
        rsn_head: 0,
    };
}

/// The length a receiving stream counts for message `h`: a request holds
/// its place in the order but completes on its one packet (its bytes travel
/// in the response).
fn rx_len(h: &DataHdr) -> u32 {
    if h.op.is_request() {
        0
    } else {
        h.msg_len
    }
}

impl<const K: usize> RxStream<K> {
    /// Checks that a new (not duplicate) packet fits the stream.
    pub fn check(&self, h: &DataHdr) -> Result<(), StreamDrop> {
        let d = seq_diff(h.msn, self.head);
        if d < 0 || d.unsigned_abs() as usize >= K {
            return Err(StreamDrop::MsnWindow);
        }
        let s = self
            .slots
            .get(ring::<K>(h.msn))
            .ok_or(StreamDrop::MsnWindow)?;
        if s.active && (s.done.len != rx_len(h) || s.done.op != h.op || s.done.rsn != h.rsn) {
            return Err(StreamDrop::Inconsistent);
        }
        // Message `head + d` has at most `d` receive-consuming messages
        // before it that have not completed, so its Rsn lies in
        // `[rsn_head, rsn_head + d]`: a receive that completed (its buffer
        // handed back to the consumer) is never named (section 9).
        if h.op.consumes_recv() {
            let r = seq_diff(h.rsn, self.rsn_head);
            if r < 0 || r > d {
                return Err(StreamDrop::RsnWindow);
            }
        }
        // Every packet of a SEND_INV names the same key (section 9.2).
        if s.active && h.op.invalidates() && s.inv_rkey != h.rkey {
            return Err(StreamDrop::Inconsistent);
        }
        // A request is one packet: another new Dsn for it is never genuine,
        // and must not have it carried out twice (section 11.3).
        if s.active && h.op.is_request() {
            return Err(StreamDrop::Inconsistent);
        }
        Ok(())
    }

    /// Counts a new packet's payload as placed (after [`Self::check`]).
    pub fn placed(&mut self, h: &DataHdr) {
        let Some(s) = self.slots.get_mut(ring::<K>(h.msn)) else {
            return;
        };
        if !s.active {
            *s = RxMsg {
                active: true,
                done: RecvDone {
                    msn: h.msn,
                    op: h.op,
                    rsn: h.rsn,
                    len: rx_len(h),
                    imm: h.imm,
                    se: false,
                    refused: None,
                    invalidated: None,
                },
                placed: 0,
                inv_rkey: if h.op.invalidates() { h.rkey } else { 0 },
            };
        }
        s.placed = s.placed.saturating_add(u32::from(h.len));
        s.done.se |= h.se;
    }

    /// Marks data message `msn` (neither a request nor a response) as
    /// refused with `code`; `false` if no such message is in the ring (not
    /// seen yet, or completed) or it is already refused.
    pub fn refuse(&mut self, msn: u32, code: NakCode) -> bool {
        match self.slots.get_mut(ring::<K>(msn)) {
            Some(s)
                if s.active
                    && s.done.msn == msn
                    && s.done.refused.is_none()
                    && !s.done.op.is_request()
                    && !s.done.op.is_response() =>
            {
                s.done.refused = Some(code);
                true
            }
            _ => false,
        }
    }

    /// The refusal of message `msn`, while the ring holds it.
    pub fn refused(&self, msn: u32) -> Option<NakCode> {
        self.slots
            .get(ring::<K>(msn))
            .filter(|s| s.active && s.done.msn == msn)
            .and_then(|s| s.done.refused)
    }

    /// The opcode of message `msn`, while the ring holds it.
    pub fn op_of(&self, msn: u32) -> Option<MrcOp> {
        self.slots
            .get(ring::<K>(msn))
            .filter(|s| s.active && s.done.msn == msn)
            .map(|s| s.done.op)
    }

    /// True if message `msn` is in the ring and `len` more bytes would
    /// place every byte of it.
    pub fn would_complete(&self, msn: u32, len: u16) -> bool {
        self.slots.get(ring::<K>(msn)).is_some_and(|s| {
            s.active && s.done.msn == msn && s.placed.saturating_add(u32::from(len)) >= s.done.len
        })
    }

    /// True if message `msn` is in the ring with every byte placed.
    pub fn all_placed(&self, msn: u32) -> bool {
        self.slots
            .get(ring::<K>(msn))
            .is_some_and(|s| s.active && s.done.msn == msn && s.placed >= s.done.len)
    }

    /// Pops the oldest message if every byte of it is placed.
    pub fn pop_complete(&mut self) -> Option<RecvDone> {
        let s = self.slots.get_mut(ring::<K>(self.head))?;
        if !s.active || s.done.msn != self.head || s.placed < s.done.len {
            return None;
        }
        s.active = false;
        self.head = self.head.wrapping_add(1);
        let mut done = s.done;
        if done.op.consumes_recv() {
            self.rsn_head = done.rsn.wrapping_add(1);
        }
        if done.op.invalidates() && done.refused.is_none() {
            done.invalidated = Some(s.inv_rkey);
        }
        Some(done)
    }

    /// Oldest message not completed.
    pub const fn head(&self) -> u32 {
        self.head
    }
}

/// The responder's answer to a READ or atomic request, given by the caller
/// through [`super::conn::Conn::respond`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Response {
    /// READ allowed: the core sends the bytes, the caller reads them from
    /// the request's (RKey, va + offset) as each packet is built.
    Read,
    /// Atomic carried out: the word's original value.
    Atomic(u64),
    /// Refused: one NAK packet completes the requester's message in error.
    Nak(NakCode),
}

/// A READ or atomic request the responder has received.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Request {
    /// Stream index.
    pub stream: usize,
    /// The requester's Msn (the key of [`super::conn::Conn::respond`]).
    pub msn: u32,
    /// [`MrcOp::Read`], [`MrcOp::CmpSwap`] or [`MrcOp::FetchAdd`].
    pub op: MrcOp,
    /// Remote key.
    pub rkey: u32,
    /// Address of the first byte (READ) or of the 8-byte word (atomics).
    pub va: u64,
    /// Bytes to read (READ), 8 (atomics).
    pub len: u32,
    /// CMP_SWAP: the compare value; FETCH_ADD: the addend.
    pub compare_add: u64,
    /// CMP_SWAP: the swap value; else 0.
    pub swap: u64,
}

#[derive(Clone, Copy, Debug)]
struct Resp {
    active: bool,
    req: Request,
    answer: Option<Response>,
    /// Bytes segmented (READ), or whether the one packet was (others).
    sent: u32,
    started: bool,
    pkts: u32,
    acked: u32,
    /// Arrival order, for oldest-first sending.
    order: u32,
}

const NO_RESP: Resp = Resp {
    active: false,
    req: Request {
        stream: 0,
        msn: 0,
        op: MrcOp::Read,
        rkey: 0,
        va: 0,
        len: 0,
        compare_add: 0,
        swap: 0,
    },
    answer: None,
    sent: 0,
    started: false,
    pkts: 0,
    acked: 0,
    order: 0,
};

/// A response segment chosen for transmission.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RespSegment {
    /// The requester's Msn.
    pub msn: u32,
    /// Offset within the READ.
    pub offset: u32,
    /// Payload bytes.
    pub len: u16,
}

/// The responder's side of a stream: one slot per request, indexed by the
/// requester's Msn, held from the request's arrival until every response
/// packet is acknowledged (the replay cache of section 11.3).
#[derive(Clone, Copy, Debug)]
pub struct RespRing<const K: usize> {
    slots: [Resp; K],
    order: u32,
    /// Slots in use (so that an idle ring costs nothing to poll).
    held: u32,
}

impl<const K: usize> Default for RespRing<K> {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl<const K: usize> RespRing<K> {
    /// No request.
    pub const EMPTY: Self = RespRing {
        slots: [NO_RESP; K],
        order: 0,
        held: 0,
    };

    /// Checks that a new (not duplicate) request `h` can take its slot: the
    /// slot is free or holds an older request (whose response the requester
    /// has completed: it posts Msn `m + K` only after `m` completed).
    pub fn check(&self, h: &DataHdr) -> Result<(), StreamDrop> {
        let s = self
            .slots
            .get(ring::<K>(h.msn))
            .ok_or(StreamDrop::MsnWindow)?;
        if s.active && seq_diff(h.msn, s.req.msn) <= 0 {
            return Err(StreamDrop::Inconsistent);
        }
        Ok(())
    }

    /// Takes request `h` of stream `stream` (after [`Self::check`]); an
    /// atomic's operands are `payload`. Returns the request.
    pub fn insert(&mut self, stream: usize, h: &DataHdr, payload: &[u8]) -> Option<Request> {
        let word = |i: usize| -> u64 {
            payload
                .get(i..i.saturating_add(8))
                .and_then(|b| b.try_into().ok())
                .map_or(0, u64::from_be_bytes)
        };
        let atomic = h.op.is_atomic();
        let req = Request {
            stream,
            msn: h.msn,
            op: h.op,
            rkey: h.rkey,
            va: h.va,
            len: if atomic { ATOMIC_LEN } else { h.msg_len },
            compare_add: if atomic { word(0) } else { 0 },
            swap: if h.op == MrcOp::CmpSwap { word(8) } else { 0 },
        };
        let order = self.order;
        self.order = order.wrapping_add(1);
        let s = self.slots.get_mut(ring::<K>(h.msn))?;
        if !s.active {
            self.held = self.held.saturating_add(1);
        }
        *s = Resp {
            active: true,
            req,
            order,
            ..NO_RESP
        };
        Some(req)
    }

    /// Takes a NAK with `code` for data message `msn` (op `op`) that the
    /// receiver refused: sent like a request's NAK. `false` if the slot
    /// already holds `msn`. A slot holding an older message is taken over
    /// (the requester completed it: it posts `msn` only after `msn - K`).
    pub fn refuse_data(&mut self, stream: usize, msn: u32, op: MrcOp, code: NakCode) -> bool {
        let order = self.order;
        let Some(s) = self.slots.get_mut(ring::<K>(msn)) else {
            return false;
        };
        if s.active && s.req.msn == msn {
            return false;
        }
        if !s.active {
            self.held = self.held.saturating_add(1);
        }
        self.order = order.wrapping_add(1);
        *s = Resp {
            active: true,
            req: Request {
                stream,
                msn,
                op,
                ..NO_RESP.req
            },
            answer: Some(Response::Nak(code)),
            pkts: 1,
            order,
            ..NO_RESP
        };
        true
    }

    /// True while data message `msn` is refused and its NAK is not
    /// acknowledged: its packets are then dropped unacknowledged, so that
    /// the requester cannot complete it before the NAK arrives.
    pub fn nak_pending(&self, msn: u32) -> bool {
        self.slots.get(ring::<K>(msn)).is_some_and(|s| {
            s.active
                && s.req.msn == msn
                && !s.req.op.is_request()
                && matches!(s.answer, Some(Response::Nak(_)))
        })
    }

    /// Frees the NAKs of refused data messages (the receiving half starts
    /// over: [`super::conn::Conn::reset_receiver`]).
    pub fn forget_refusals(&mut self) {
        for s in self.slots.iter_mut() {
            if s.active && !s.req.op.is_request() {
                s.active = false;
                self.held = self.held.saturating_sub(1);
            }
        }
    }

    /// Records the answer to request `msn`; `false` if there is no such
    /// request waiting for one or the answer does not fit it (a value for
    /// a READ, [`Response::Read`] for an atomic).
    pub fn answer(&mut self, msn: u32, r: Response, mss: u16) -> bool {
        let Some(s) = self.slots.get_mut(ring::<K>(msn)) else {
            return false;
        };
        if !s.active || s.req.msn != msn || s.answer.is_some() {
            return false;
        }
        let pkts = match r {
            Response::Read if s.req.op == MrcOp::Read => {
                s.req.len.div_ceil(u32::from(mss.max(1))).max(1)
            }
            Response::Atomic(_) if s.req.op.is_atomic() => 1,
            Response::Nak(_) => 1,
            _ => return false,
        };
        s.answer = Some(r);
        s.pkts = pkts;
        true
    }

    fn unsent(s: &Resp) -> bool {
        s.active
            && match s.answer {
                None => false,
                Some(Response::Read) => !s.started || s.sent < s.req.len,
                Some(_) => !s.started,
            }
    }

    /// True if some answered request has response bytes not yet sent.
    pub fn has_unsent(&self) -> bool {
        self.held != 0 && self.slots.iter().any(Self::unsent)
    }

    /// Takes the next response segment of at most `mss` bytes, of the
    /// oldest request with some unsent.
    pub fn next_segment(&mut self, mss: u16) -> Option<RespSegment> {
        let base = self.order;
        let s = self
            .slots
            .iter_mut()
            .filter(|s| Self::unsent(s))
            .min_by_key(|s| s.order.wrapping_sub(base))?;
        let read = s.answer == Some(Response::Read);
        let len = if read {
            s.req.len.saturating_sub(s.sent).min(u32::from(mss.max(1)))
        } else {
            0
        };
        let seg = RespSegment {
            msn: s.req.msn,
            offset: s.sent,
            len: u16::try_from(len).unwrap_or(u16::MAX),
        };
        s.sent = s.sent.saturating_add(len);
        s.started = true;
        Some(seg)
    }

    /// The request `msn` and its answer, while its slot holds it.
    pub fn get(&self, msn: u32) -> Option<(Request, Response)> {
        self.slots
            .get(ring::<K>(msn))
            .filter(|s| s.active && s.req.msn == msn)
            .and_then(|s| s.answer.map(|a| (s.req, a)))
    }

    /// Fills the stream fields of a response packet; `None` if the request
    /// is gone (every packet acknowledged, or superseded).
    pub fn fill_header(&self, seg: &RespSegment, remote_qpn: u32, h: &mut DataHdr) -> Option<()> {
        let (req, answer) = self.get(seg.msn)?;
        h.se = false;
        h.stream = remote_qpn;
        h.msn = seg.msn;
        h.rsn = 0;
        h.offset = seg.offset;
        h.rkey = 0;
        h.imm = 0;
        h.va = 0;
        h.len = seg.len;
        match answer {
            Response::Read => {
                h.op = MrcOp::ReadResp;
                h.msg_len = req.len;
            }
            Response::Atomic(v) => {
                h.op = MrcOp::AtomicResp;
                h.msg_len = ATOMIC_LEN;
                h.va = v;
                h.len = 0;
            }
            Response::Nak(c) => {
                h.op = MrcOp::Nak;
                h.msg_len = 0;
                h.imm = c.to_u32();
                h.len = 0;
            }
        }
        Some(())
    }

    /// One response packet of request `msn` was acknowledged (first
    /// time); the slot is freed after the last.
    pub fn packet_acked(&mut self, msn: u32) {
        if let Some(s) = self
            .slots
            .get_mut(ring::<K>(msn))
            .filter(|s| s.active && s.req.msn == msn)
        {
            s.acked = s.acked.saturating_add(1);
            if s.acked >= s.pkts && !Self::unsent(s) {
                s.active = false;
                self.held = self.held.saturating_sub(1);
            }
        }
    }

    /// Requests held (waiting for an answer or acknowledgements).
    pub fn held(&self) -> u32 {
        self.held
    }
}

/// One stream's whole state: its sending side, its receiving side and the
/// responder's ring of the peer's requests on it.
#[derive(Clone, Copy, Debug)]
pub struct Stream<const K: usize> {
    /// The sending side.
    pub tx: TxStream<K>,
    /// The receiving side.
    pub rx: RxStream<K>,
    /// The peer's requests we answer.
    pub resp: RespRing<K>,
}

impl<const K: usize> Stream<K> {
    /// A closed stream with nothing posted or received.
    pub const EMPTY: Self = Stream {
        tx: TxStream::EMPTY,
        rx: RxStream::EMPTY,
        resp: RespRing::EMPTY,
    };
}

/// Where a connection keeps its streams: slot `i` holds stream `i`'s [`Stream`] while it is
/// open. The core never allocates: a store whose slots are not inline (the kernel's, one
/// allocation per bound QP, so that an unbound connection costs nothing for its streams) is
/// handed a slot's storage by [`super::conn::Conn::open_stream`] and gives it back at
/// [`super::conn::Conn::close_stream`], for the caller to free where it may.
pub trait StreamStore<const K: usize> {
    /// The storage of one stream, as the caller hands it in (`()` for an inline store).
    type Slot;
    /// Every slot empty.
    const EMPTY: Self;
    /// Stream `i`'s state, if slot `i` holds storage.
    fn slot(&self, i: usize) -> Option<&Stream<K>>;
    /// Stream `i`'s state, if slot `i` holds storage.
    fn slot_mut(&mut self, i: usize) -> Option<&mut Stream<K>>;
    /// Puts `s` into slot `i` (its state is reset by the caller, [`super::conn::Conn`]).
    /// Gives `s` back if there is no slot `i` or it already holds storage.
    fn put(&mut self, i: usize, s: Self::Slot) -> Result<(), Self::Slot>;
    /// Takes slot `i`'s storage out (`None`: it holds none).
    fn take(&mut self, i: usize) -> Option<Self::Slot>;
}

/// Streams inline, `S` of them (the host's tests and simulators): every slot always holds
/// storage, a closed stream is [`Stream::EMPTY`].
impl<const K: usize, const S: usize> StreamStore<K> for [Stream<K>; S] {
    type Slot = ();
    const EMPTY: Self = [Stream::EMPTY; S];

    fn slot(&self, i: usize) -> Option<&Stream<K>> {
        self.get(i)
    }

    fn slot_mut(&mut self, i: usize) -> Option<&mut Stream<K>> {
        self.get_mut(i)
    }

    fn put(&mut self, i: usize, s: ()) -> Result<(), ()> {
        if i < S {
            Ok(())
        } else {
            Err(s)
        }
    }

    fn take(&mut self, i: usize) -> Option<()> {
        let s = self.get_mut(i)?;
        *s = Stream::EMPTY;
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(msn: u32, off: u32, len: u16, msg_len: u32) -> DataHdr {
        DataHdr {
            retx: false,
            se: false,
            path: 0,
            op: MrcOp::Send,
            conn: 1,
            path_seq: 0,
            path_floor: 0,
            stream: 5,
            dsn: 0,
            msn,
            rsn: msn,
            msg_len,
            offset: off,
            va: 0,
            rkey: 0,
            imm: 0,
            len,
        }
    }

    #[test]
    fn segmentation_and_send_order() {
        let mut t = TxStream::<4>::default();
        let send = |len| MsgDesc {
            op: MrcOp::Send,
            len,
            ..NO_MSG
        };
        assert_eq!(t.post(send(1), 1000), Err(PostError::NoStream));
        t.open = true;
        assert_eq!(t.post(send(2500), 1000), Ok(0));
        assert_eq!(t.post(send(0), 1000), Ok(1));
        let segs: [Option<Segment>; 5] = core::array::from_fn(|_| t.next_segment(1000));
        assert_eq!(
            segs[2],
            Some(Segment {
                msn: 0,
                offset: 2000,
                len: 500
            })
        );
        assert_eq!(
            segs[3],
            Some(Segment {
                msn: 1,
                offset: 0,
                len: 0
            })
        );
        assert_eq!(segs[4], None);
        // Message 1 fully acked first: no completion until 0 is.
        t.packet_acked(1);
        assert_eq!(t.pop_complete(), None);
        for _ in 0..3 {
            t.packet_acked(0);
        }
        assert_eq!(t.pop_complete(), Some(0));
        assert_eq!(t.pop_complete(), Some(1));
        for _ in 0..4 {
            t.post(send(1), 1000).unwrap();
        }
        assert_eq!(t.post(send(1), 1000), Err(PostError::Full));
    }

    #[test]
    fn receive_completions_in_order() {
        let mut r = RxStream::<4>::default();
        // Message 1 (one packet) arrives before message 0's two packets.
        let a = hdr(1, 0, 10, 10);
        r.check(&a).unwrap();
        r.placed(&a);
        assert_eq!(r.pop_complete(), None);
        let b = hdr(0, 1000, 500, 1500);
        r.check(&b).unwrap();
        r.placed(&b);
        assert_eq!(r.pop_complete(), None);
        assert_eq!(
            r.check(&hdr(0, 0, 1000, 1400)),
            Err(StreamDrop::Inconsistent)
        );
        let c = hdr(0, 0, 1000, 1500);
        r.placed(&c);
        assert_eq!(r.pop_complete().map(|d| d.msn), Some(0));
        assert_eq!(r.pop_complete().map(|d| (d.msn, d.len)), Some((1, 10)));
        assert_eq!(r.pop_complete(), None);
        assert_eq!(r.check(&hdr(1, 0, 1, 1)), Err(StreamDrop::MsnWindow));
        assert_eq!(r.check(&hdr(6, 0, 1, 1)), Err(StreamDrop::MsnWindow));
        // Zero-length message completes on its one packet.
        let z = hdr(2, 0, 0, 0);
        r.check(&z).unwrap();
        r.placed(&z);
        assert_eq!(r.pop_complete().map(|d| d.len), Some(0));
    }

    fn req(op: MrcOp, msn: u32, msg_len: u32) -> DataHdr {
        DataHdr {
            op,
            msn,
            rsn: 0,
            msg_len,
            offset: 0,
            va: 0x8000,
            rkey: 3,
            len: if op.is_atomic() { 16 } else { 0 },
            ..hdr(0, 0, 0, 0)
        }
    }

    #[test]
    fn response_ring_segments_and_frees() {
        let mut q = RespRing::<4>::default();
        let h = req(MrcOp::Read, 3, 2500);
        q.check(&h).unwrap();
        let r = q.insert(1, &h, &[]).unwrap();
        assert_eq!(
            (r.stream, r.msn, r.len, r.va, r.rkey),
            (1, 3, 2500, 0x8000, 3)
        );
        assert!(!q.has_unsent(), "sent before the answer");
        assert!(
            !q.answer(3, Response::Atomic(1), 1000),
            "a value for a READ"
        );
        assert!(!q.answer(2, Response::Read, 1000));
        assert!(q.answer(3, Response::Read, 1000));
        assert!(!q.answer(3, Response::Read, 1000), "answered twice");
        let segs: [Option<RespSegment>; 4] = core::array::from_fn(|_| q.next_segment(1000));
        let want = |offset, len| {
            Some(RespSegment {
                msn: 3,
                offset,
                len,
            })
        };
        assert_eq!(
            segs,
            [want(0, 1000), want(1000, 1000), want(2000, 500), None]
        );
        // The same Msn again with a new Dsn: refused; Msn + K takes the slot.
        assert_eq!(q.check(&h), Err(StreamDrop::Inconsistent));
        assert_eq!(q.check(&req(MrcOp::Read, 7, 1)), Ok(()));
        for _ in 0..2 {
            q.packet_acked(3);
        }
        assert_eq!(q.held(), 1);
        q.packet_acked(4);
        assert_eq!(q.held(), 1, "another Msn's ACK freed the slot");
        q.packet_acked(3);
        assert_eq!((q.held(), q.get(3)), (0, None));
        // An atomic: its operands from the payload, one packet.
        let mut ops = [0u8; 16];
        ops[..8].copy_from_slice(&5u64.to_be_bytes());
        ops[8..].copy_from_slice(&9u64.to_be_bytes());
        let r = q.insert(0, &req(MrcOp::CmpSwap, 8, 16), &ops).unwrap();
        assert_eq!((r.len, r.compare_add, r.swap), (8, 5, 9));
        assert!(
            !q.answer(8, Response::Read, 1000),
            "READ data for an atomic"
        );
        assert!(q.answer(8, Response::Atomic(77), 1000));
        assert_eq!(
            q.next_segment(1000),
            Some(RespSegment {
                msn: 8,
                offset: 0,
                len: 0
            })
        );
        assert!(!q.has_unsent());
        let mut out = hdr(0, 0, 0, 0);
        q.fill_header(
            &RespSegment {
                msn: 8,
                offset: 0,
                len: 0,
            },
            0x42,
            &mut out,
        )
        .unwrap();
        assert_eq!(
            (out.op, out.va, out.msg_len, out.stream),
            (MrcOp::AtomicResp, 77, 8, 0x42)
        );
        q.packet_acked(8);
        assert_eq!(q.held(), 0);
    }

    #[test]
    fn request_completes_after_its_response() {
        let mut t = TxStream::<4> {
            open: true,
            ..TxStream::EMPTY
        };
        let read = MsgDesc {
            op: MrcOp::Read,
            len: 1500,
            va: 0x8000,
            rkey: 3,
            ..NO_MSG
        };
        assert_eq!(t.post(read, 1000), Ok(0));
        assert_eq!(
            t.post(
                MsgDesc {
                    op: MrcOp::CmpSwap,
                    len: 8,
                    ..read
                },
                1000
            ),
            Err(PostError::BadOp)
        );
        assert_eq!(t.post_atomic(MrcOp::FetchAdd, 0x10, 3, 1, 99, 1000), Ok(1));
        let resp = |op, msn, off, len, msg_len| DataHdr {
            op,
            msn,
            offset: off,
            len,
            msg_len,
            va: 0,
            rkey: 0,
            rsn: 0,
            ..hdr(0, 0, 0, 0)
        };
        // Not sent yet: no response accepted.
        assert_eq!(
            t.check_response(&resp(MrcOp::ReadResp, 0, 0, 1000, 1500)),
            Err(StreamDrop::MsnWindow)
        );
        assert_eq!(
            t.next_segment(1000),
            Some(Segment {
                msn: 0,
                offset: 0,
                len: 0
            })
        );
        // The atomic waits for the READ (section 11.4).
        assert!(!t.has_unsent());
        t.packet_acked(0);
        assert_eq!(t.pop_done(), None, "READ complete without its data");
        assert_eq!(
            t.check_response(&resp(MrcOp::ReadResp, 0, 0, 1000, 1400)),
            Err(StreamDrop::Inconsistent)
        );
        assert_eq!(
            t.check_response(&resp(MrcOp::AtomicResp, 0, 0, 0, 8)),
            Err(StreamDrop::Inconsistent)
        );
        for (off, len) in [(1000, 500), (0, 1000)] {
            let h = resp(MrcOp::ReadResp, 0, off, len, 1500);
            t.check_response(&h).unwrap();
            t.response(&h);
        }
        assert_eq!(
            t.check_response(&resp(MrcOp::ReadResp, 0, 0, 1000, 1500)),
            Err(StreamDrop::Inconsistent)
        );
        assert_eq!(t.pop_done(), Some((0, None)));
        assert_eq!(
            t.next_segment(1000),
            Some(Segment {
                msn: 1,
                offset: 0,
                len: 0
            })
        );
        assert_eq!(t.operands(1), Some([1, 0]));
        t.packet_acked(1);
        let nak = DataHdr {
            imm: NakCode::RemoteAccess.to_u32(),
            ..resp(MrcOp::Nak, 1, 0, 0, 0)
        };
        t.check_response(&nak).unwrap();
        t.response(&nak);
        assert_eq!(t.pop_done(), Some((1, Some(NakCode::RemoteAccess))));
        assert!(t.stale_response(&nak));
    }
}
