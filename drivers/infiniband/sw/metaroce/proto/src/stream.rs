// SPDX-License-Identifier: GPL-2.0
//! Streams (QPs) of a MetaRoCE connection (`transport.rst`, sections 8 and
//! 9): segmentation and send completions in posting order on the sender;
//! on the receiver, byte counting of out-of-order placed messages and
//! receive completions released strictly in message order.
//!
//! Both sides keep a ring of `K` message slots indexed by Msn; the sender
//! never has more than `K` messages between its oldest incomplete and its
//! newest, so the receiver's ring cannot overflow.

use super::mrc_wire::{DataHdr, MrcOp, MAX_MSG_LEN};
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
    /// Remote key (writes).
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
}

#[derive(Clone, Copy, Debug)]
struct TxMsg {
    desc: MsgDesc,
    rsn: u32,
    pkts: u32,
    acked: u32,
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
            msgs: [TxMsg {
                desc: NO_MSG,
                rsn: 0,
                pkts: 0,
                acked: 0,
            }; K],
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
    /// Posts a message; returns its Msn.
    pub fn post(&mut self, desc: MsgDesc, mss: u16) -> Result<u32, PostError> {
        if !self.open || K == 0 {
            return Err(PostError::NoStream);
        }
        if desc.len > MAX_MSG_LEN {
            return Err(PostError::TooLong);
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
        let pkts = desc.len.div_ceil(u32::from(mss.max(1))).max(1);
        if let Some(m) = self.msgs.get_mut(ring::<K>(msn)) {
            *m = TxMsg {
                desc,
                rsn,
                pkts,
                acked: 0,
            };
        }
        self.next = msn.wrapping_add(1);
        Ok(msn)
    }

    /// True if some message has bytes not yet sent.
    pub fn has_unsent(&self) -> bool {
        self.seg != self.next
    }

    /// Takes the next segment of at most `mss` bytes.
    pub fn next_segment(&mut self, mss: u16) -> Option<Segment> {
        if !self.has_unsent() {
            return None;
        }
        let m = self.msgs.get(ring::<K>(self.seg))?;
        let left = m.desc.len.saturating_sub(self.seg_off);
        let len = left.min(u32::from(mss.max(1)));
        let seg = Segment {
            msn: self.seg,
            offset: self.seg_off,
            len: u16::try_from(len).unwrap_or(u16::MAX),
        };
        self.seg_off = self.seg_off.saturating_add(len);
        if self.seg_off >= m.desc.len {
            self.seg = self.seg.wrapping_add(1);
            self.seg_off = 0;
        }
        Some(seg)
    }

    /// Fills the stream fields of a DATA header for a segment.
    pub fn fill_header(&self, seg: &Segment, h: &mut DataHdr) -> Option<()> {
        let m = self.msgs.get(ring::<K>(seg.msn))?;
        let last = seg.offset.saturating_add(u32::from(seg.len)) >= m.desc.len;
        h.op = m.desc.op;
        h.se = m.desc.se && last && m.desc.op.consumes_recv();
        h.stream = self.remote_qpn;
        h.msn = seg.msn;
        h.rsn = m.rsn;
        h.msg_len = m.desc.len;
        h.offset = seg.offset;
        h.va = if m.desc.op.is_write() { m.desc.va } else { 0 };
        h.rkey = if m.desc.op.is_write() { m.desc.rkey } else { 0 };
        h.imm = if m.desc.op.has_imm() { m.desc.imm } else { 0 };
        h.len = seg.len;
        Some(())
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
        if self.head == self.next || self.head == self.seg {
            return None;
        }
        let m = self.msgs.get(ring::<K>(self.head))?;
        if m.acked < m.pkts {
            return None;
        }
        let msn = self.head;
        self.head = msn.wrapping_add(1);
        Some(msn)
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
}

#[derive(Clone, Copy, Debug)]
struct RxMsg {
    active: bool,
    done: RecvDone,
    placed: u32,
}

/// Why a DATA packet was refused by its stream.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum StreamDrop {
    /// Msn outside `[head, head + K)`.
    MsnWindow,
    /// Fields differ from earlier packets of the same message.
    Inconsistent,
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
                },
                placed: 0,
            }; K],
            head: 0,
        };
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
        if s.active && (s.done.len != h.msg_len || s.done.op != h.op || s.done.rsn != h.rsn) {
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
                    len: h.msg_len,
                    imm: h.imm,
                    se: false,
                },
                placed: 0,
            };
        }
        s.placed = s.placed.saturating_add(u32::from(h.len));
        s.done.se |= h.se;
    }

    /// Pops the oldest message if every byte of it is placed.
    pub fn pop_complete(&mut self) -> Option<RecvDone> {
        let s = self.slots.get_mut(ring::<K>(self.head))?;
        if !s.active || s.done.msn != self.head || s.placed < s.done.len {
            return None;
        }
        s.active = false;
        self.head = self.head.wrapping_add(1);
        Some(s.done)
    }

    /// Oldest message not completed.
    pub const fn head(&self) -> u32 {
        self.head
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
}
