// SPDX-License-Identifier: GPL-2.0
//! Work requests, work queue entries, completions and data placement.
//!
//! Send queue storage belongs to the caller: a power-of-two slice of
//! [`SendWqe`] passed to every call that needs it. The caller fills only
//! [`SendWqe::wr`] (through [`super::qp::Qp::post_send`]); the protocol
//! state next to it is private to the core.

use super::psn::Psn;

/// Remote access rights (`IB_ACCESS_REMOTE_*`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Access(u8);

impl Access {
    /// No remote access.
    pub const NONE: Access = Access(0);
    /// Remote RDMA READ.
    pub const READ: Access = Access(1);
    /// Remote RDMA WRITE.
    pub const WRITE: Access = Access(2);
    /// Remote atomics.
    pub const ATOMIC: Access = Access(4);
    /// FLUSH to global visibility (`IB_ACCESS_FLUSH_GLOBAL`).
    pub const FLUSH_GLOBAL: Access = Access(8);
    /// FLUSH to persistence (`IB_ACCESS_FLUSH_PERSISTENT`).
    pub const FLUSH_PERSISTENT: Access = Access(16);

    /// Union of two sets of rights.
    pub const fn with(self, other: Access) -> Access {
        Access(self.0 | other.0)
    }

    /// True if every right in `other` is in `self`.
    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }
}

/// Work completion status, mirroring the kernel's `enum ib_wc_status`
/// (the discriminants are the same).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum WcStatus {
    /// The work request completed successfully.
    Success = 0,
    /// Local length error: a received message did not fit the receive WQE.
    LocLenErr = 1,
    /// Local QP operation error: internal inconsistency (e.g. the caller
    /// passed a send queue of the wrong size).
    LocQpOpErr = 2,
    /// Local protection error (reported by the kernel glue, not the core).
    LocProtErr = 4,
    /// The work request was flushed because the QP entered the error state.
    WrFlushErr = 5,
    /// Bad response: unexpected opcode or length from the responder.
    BadRespErr = 7,
    /// Local access error (reported by the kernel glue, not the core).
    LocAccessErr = 8,
    /// The responder NAKed with Invalid Request.
    RemInvReqErr = 9,
    /// The responder NAKed with Remote Access Error.
    RemAccessErr = 10,
    /// The responder NAKed with Remote Operational Error.
    RemOpErr = 11,
    /// Transport retry counter exceeded.
    RetryExcErr = 12,
    /// RNR retry counter exceeded.
    RnrRetryExcErr = 13,
}

/// Atomic operation arguments.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AtomicOp {
    /// Compare and swap: if `*va == compare { *va = swap }`.
    CmpSwap {
        /// Compare operand.
        compare: u64,
        /// Swap operand.
        swap: u64,
    },
    /// Fetch and add: `*va += add`.
    FetchAdd {
        /// Addend.
        add: u64,
    },
}

/// The operation of a send work request.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum SendOp {
    /// SEND.
    #[default]
    Send,
    /// SEND with immediate data.
    SendImm {
        /// Immediate data.
        imm: u32,
    },
    /// SEND with invalidate (RC only).
    SendInv {
        /// R_Key the responder must invalidate.
        rkey: u32,
    },
    /// RDMA WRITE.
    Write {
        /// Remote address.
        va: u64,
        /// Remote key.
        rkey: u32,
    },
    /// RDMA WRITE with immediate data.
    WriteImm {
        /// Remote address.
        va: u64,
        /// Remote key.
        rkey: u32,
        /// Immediate data.
        imm: u32,
    },
    /// RDMA READ (RC only); the data lands in the WR's local buffer.
    Read {
        /// Remote address.
        va: u64,
        /// Remote key.
        rkey: u32,
    },
    /// ATOMIC WRITE (RC only): the WR's 8 bytes of local data (`len` must be
    /// 8) replace the 8-byte aligned remote word as one unit. The responder
    /// answers with a zero-length READ response, so it counts against
    /// `max_rd_atomic` like a READ.
    AtomicWrite {
        /// Remote address (8-byte aligned).
        va: u64,
        /// Remote key.
        rkey: u32,
    },
    /// FLUSH (RC only, IBTA 1.5 A19): makes what earlier requests wrote to
    /// `len` bytes at `va` (or, with selectivity [`super::ext::FLUSH_MR`],
    /// to the whole memory region of `rkey`) globally visible or
    /// persistent, as `placement` asks. The WR's own `len` must be 0: it
    /// moves no data. The responder answers with a zero-length READ
    /// response, so it counts against `max_rd_atomic` like a READ (our
    /// choice: rdma_rxe's requester does not count it, but every responder
    /// keeps a READ/atomic resource for it).
    Flush {
        /// Remote address.
        va: u64,
        /// Remote key.
        rkey: u32,
        /// Length of the range.
        len: u32,
        /// Placement type bits ([`super::ext::FLUSH_GLOBAL`],
        /// [`super::ext::FLUSH_PERSISTENT`]).
        placement: u8,
        /// Selectivity level ([`super::ext::FLUSH_RANGE`] or
        /// [`super::ext::FLUSH_MR`]).
        selectivity: u8,
    },
    /// Atomic operation (RC only); `len` must be 8 and the original value
    /// lands in the WR's local buffer.
    Atomic {
        /// Remote address (8-byte aligned).
        va: u64,
        /// Remote key.
        rkey: u32,
        /// Operation.
        op: AtomicOp,
    },
    /// A local operation (memory registration, local invalidate) that the
    /// caller carries out itself (RC and UC; `len` must be 0). It sends
    /// nothing: it holds its place in the send queue so that its completion
    /// is reported in posting order, successful once the requester passed
    /// it and everything before it completed, flushed if the QP enters the
    /// error state first.
    Local,
}

impl SendOp {
    /// True for READ, atomics, ATOMIC WRITE and FLUSH: operations that get
    /// a response of their own, count against `max_rd_atomic` and cannot be
    /// acknowledged implicitly.
    pub const fn needs_response(&self) -> bool {
        matches!(
            self,
            SendOp::Read { .. }
                | SendOp::Atomic { .. }
                | SendOp::AtomicWrite { .. }
                | SendOp::Flush { .. }
        )
    }
}

/// Destination of a UD send.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct UdDest {
    /// Destination QP number.
    pub qpn: u32,
    /// Q_Key; if its top bit is set the QP's own Q_Key is used instead.
    pub qkey: u32,
}

/// A send work request as posted by the consumer.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct SendWr {
    /// Consumer's identifier, returned in the completion.
    pub wr_id: u64,
    /// Operation.
    pub op: SendOp,
    /// Length in bytes of the local data (8 for atomics).
    pub len: u32,
    /// Generate a completion on success (errors are always reported).
    pub signaled: bool,
    /// Wait until earlier READs and atomics have completed.
    pub fence: bool,
    /// Set the solicited event bit on the last packet.
    pub solicited: bool,
    /// Destination, for UD QPs only.
    pub ud: Option<UdDest>,
}

/// One send queue slot: the posted work request and the core's private
/// transmit state for it.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct SendWqe {
    /// The work request.
    pub wr: SendWr,
    /// PSN of the first packet; valid once `started`.
    pub(super) first_psn: Psn,
    /// PSN of the last packet (for READs: of the last response).
    pub(super) last_psn: Psn,
    /// The requester assigned PSNs to this WQE.
    pub(super) started: bool,
    /// Final status once the WQE is done.
    pub(super) status: Option<WcStatus>,
}

impl SendWqe {
    /// A fresh slot for `wr`.
    pub(super) const fn new(wr: SendWr) -> Self {
        SendWqe {
            wr,
            first_psn: Psn::new(0),
            last_psn: Psn::new(0),
            started: false,
            status: None,
        }
    }
}

/// Completion of a send work request.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SendCompletion {
    /// The work request's `wr_id`.
    pub wr_id: u64,
    /// Status.
    pub status: WcStatus,
    /// The work request's length.
    pub byte_len: u32,
}

/// A receive WQE handed to the responder by [`super::resp::RecvQueue`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RecvWqe {
    /// Opaque handle chosen by the caller (e.g. a queue slot), returned in
    /// placements and completions.
    pub id: u64,
    /// Capacity in bytes of the WQE's scatter list.
    pub len: u32,
}

/// What a receive completion reports.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RecvKind {
    /// An incoming SEND (`IB_WC_RECV`).
    Send,
    /// An RDMA WRITE with immediate data (`IB_WC_RECV_RDMA_WITH_IMM`).
    WriteImm,
}

/// Completion of a receive WQE.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RecvCompletion {
    /// The WQE's `id`.
    pub id: u64,
    /// Status.
    pub status: WcStatus,
    /// What completed the WQE.
    pub kind: RecvKind,
    /// Bytes received (UD: including the 40-byte GRH area; WRITE with
    /// immediate: the RDMA length).
    pub byte_len: u32,
    /// Immediate data, if any.
    pub imm: Option<u32>,
    /// R_Key the sender asked to invalidate (SEND with invalidate). The
    /// glue performs the invalidation and sets `IB_WC_WITH_INVALIDATE`.
    pub invalidate: Option<u32>,
    /// Source QP (UD only).
    pub src_qp: Option<u32>,
}

/// Where the payload of a received packet goes. The payload itself is the
/// packet's `payload` slice; the core never copies data.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Place {
    /// Responder: copy to byte `offset` of receive WQE `id`.
    Recv {
        /// Receive WQE handle.
        id: u64,
        /// Byte offset in the WQE's scatter list.
        offset: u32,
        /// Bytes to copy.
        len: u32,
    },
    /// Responder: copy to `va` in the memory region of `rkey` (already
    /// checked with [`super::resp::MemAccess::check`]).
    Rdma {
        /// Remote key.
        rkey: u32,
        /// Virtual address.
        va: u64,
        /// Bytes to copy.
        len: u32,
    },
    /// Requester: copy READ response data to byte `offset` of the local
    /// buffer of send queue slot `slot`.
    ReadResp {
        /// Send queue slot.
        slot: u32,
        /// Byte offset in the WR's local buffer.
        offset: u32,
        /// Bytes to copy.
        len: u32,
    },
    /// Requester: store the original value returned by an atomic in the
    /// local buffer of send queue slot `slot` (8 bytes, host order).
    AtomicResult {
        /// Send queue slot.
        slot: u32,
        /// Original value at the remote address.
        value: u64,
    },
}

/// Send queue slot of ring index `idx` in a queue of `len` (a power of
/// two) entries.
pub(super) const fn slot_of(idx: u32, len: usize) -> usize {
    (idx as usize) & len.wrapping_sub(1)
}

/// The WQE at ring index `idx`; `None` only if `sq` is empty.
pub(super) fn wqe(sq: &[SendWqe], idx: u32) -> Option<&SendWqe> {
    sq.get(slot_of(idx, sq.len()))
}

/// Mutable variant of [`wqe`].
pub(super) fn wqe_mut(sq: &mut [SendWqe], idx: u32) -> Option<&mut SendWqe> {
    let len = sq.len();
    sq.get_mut(slot_of(idx, len))
}
