// SPDX-License-Identifier: GPL-2.0

//! Kernel queue pairs of a MetaRoCE device: the verbs state machine, the send and receive
//! queues, and the glue between them and the protocol core's transport state machines.
//!
//! Data flows one way each: `post_send` validates a work request, hands it to the core's
//! requester ([`Engine`]) and schedules the QP on the device's transmit worker (`xmit.rs`),
//! which pulls packets from the core, copies their payload out of the consumer's buffers and
//! sends them. The receive path (`ns.rs`) hands each packet for the QP to [`receive`], which
//! lets the core decide where its payload goes and which work request completed, copies the
//! payload and queues the completions. Responses and acknowledgements the core produces on
//! receive leave through the same transmit worker.
//!
//! Kernel consumers address their buffers by kernel virtual address under the device's local
//! DMA key ([`KernelBuf`]); user QPs (driven by the stock librxe through its rings, `uqueue.rs`)
//! by address and L_Key of their registered memory regions (`mr.rs`). Remote operations
//! (RDMA READ/WRITE/atomics targeting a QP) resolve R_Keys of user memory regions; kernel DMA
//! MRs are not in that table, so a remote operation on kernel memory gets a remote access NAK.
//! Whenever the core of an RC QP holds a deadline (local ACK timeout, RNR retry), the QP is on
//! the device's timer list (`timer.rs`), whose tick runs the core's timers ([`on_tick`]);
//! datagram QPs need none.

use crate::device::MetaRoceDev;
use crate::device::{Counter, MetaRoceDriver, PORT};
use crate::mr::KeyKind;
use crate::native::{self, Peer};
use crate::proto::conn::{
    Completion as NativeCompletion, MrRef, NakCode, Place as NativePlace, Request as NativeRequest,
    Response as NativeResponse, SendStatus,
};
use crate::proto::ext::NakCode as RoceNak;
use crate::proto::mrc_wire::{DataHdr, MrcOp};
use crate::proto::opcode::Transport as Service;
use crate::proto::packet::Packet;
use crate::proto::packet::{self, PayloadRef, Pmtu, TxDesc};
use crate::proto::psn::Psn;
use crate::proto::qp::{self as pqp, QpConfig};
use crate::proto::resp::{AccessError, MemAccess, RecvQueue, GRH_LEN};
use crate::proto::stream::{MsgDesc, PostError as NativePostError};
use crate::proto::wr as pwr;
use crate::srq::Taken;
use crate::timer;
use crate::uqueue::{Role, UQueue};
use crate::verbs::{roce_av, CqPush, RoceAv};
use crate::xmit;
use core::sync::atomic::AtomicBool;
use kernel::new_spinlock_irq;
use kernel::prelude::*;
use kernel::rdma::cq::{Cq, CqEvent, WcFlags, WcOpcode, WcStatus, WorkCompletion};
use kernel::rdma::device::Mtu;
use kernel::rdma::mr::AccessFlags;
use kernel::rdma::pd::{Origin, PdId};
use kernel::rdma::qp::{
    modify_is_ok, NewQp, Qp, QpAttr, QpAttrMask, QpAttrOut, QpCap, QpEvent, QpInitAttrOut, QpState,
    QpType,
};
use kernel::rdma::srq::{Srq, SrqEvent};
use kernel::rdma::wr::{KernelBuf, PostError, RecvWr, RecvWrList, SendOp, SendWr, SendWrList, Sge};
use kernel::sync::Arc;
use kernel::sync::SpinLockIrq;

mod create;
mod mem;
mod modify;
mod post;
mod rx;
mod stream;
mod tx;

pub(crate) use create::*;
use mem::*;
pub(crate) use mem::{Seg, SegRef};
pub(crate) use modify::*;
pub(crate) use post::*;
pub(crate) use rx::*;
pub(crate) use stream::*;
pub(crate) use tx::*;

/// Most work requests per queue.
pub(crate) const MAX_QP_WR: u32 = 0x4000;
/// Most SGEs per work request.
pub(crate) const MAX_SGE: u32 = 32;
/// Most QPs per device (QP numbers below this).
pub(crate) const MAX_QP: u32 = 0x1000;
/// First QP number handed to RC/UC/UD QPs (0 and 1 are the special QPs).
pub(crate) const MIN_QPN: u32 = 16;
/// Largest message (the port's `max_msg_sz`, 8 MiB; rdma_rxe reports 2 GiB), enforced on
/// kernel and user posts alike.
pub(crate) const MAX_MSG_SZ: u64 = 0x80_0000;
/// The local key of kernel memory addressed by kernel virtual address: the device's
/// `local_dma_lkey` (ib_core's `IBK_LOCAL_DMA_LKEY`), which every kernel PD reports.
pub(crate) const LOCAL_DMA_LKEY: u32 = 0;
/// Responder resources of a QP (incoming READs and atomics in flight): the most
/// `max_dest_rd_atomic` accepts.
pub(crate) const RESP_RES: usize = 16;
/// Largest receive WQE slot read from a user ring (header and `MAX_SGE` SGEs).
const RECV_WQE_MAX: usize =
    crate::rxe_abi::RECV_WQE_HDR + MAX_SGE as usize * crate::rxe_abi::SGE_LEN;
/// Inline data a user QP's send WQE slot holds at least (the issue asks for 236 bytes or more).
const USER_MIN_INLINE: u32 = 256;
/// Most inline data (and SGE bytes) a user QP's send WQE slot holds.
const USER_MAX_INLINE: u32 = 512;
/// Requests a QP with an SRQ holds at once, taken from the SRQ and not yet completed: the
/// message being received (RC, UC) and the one a UC QP keeps from a dropped message.
const SRQ_IN_PROGRESS: u32 = 4;
/// The Q_Key of the GSI QP (`IB_QP1_QKEY`).
const QP1_QKEY: u32 = 0x8001_0000;

/// The protocol core's state of one QP.
pub(crate) type Engine = pqp::Qp<RESP_RES>;

/// Where user segments are resolved: the device's memory region table, for the QP's PD.
#[derive(Clone, Copy)]
struct MemCtx<'a> {
    dev: &'a MetaRoceDev,
    pd: Option<PdId>,
    /// The QP's number (type 2 memory windows answer only the QP that bound them).
    qpn: u32,
    /// The QP's own send buffers, for READ responses and atomic results placed by the core
    /// (`MemAccess::place_response`); `None` where nothing needs them.
    own: Option<SqBufs<'a>>,
}

impl<'a> MemCtx<'a> {
    /// The memory `qp` sees: its PD's regions (and its own send buffers left out).
    fn of(qp: &'a Qp<MetaRoceDriver>) -> Self {
        MemCtx {
            dev: qp.device(),
            pd: qp.pd().map(|p| p.id()),
            qpn: qp.qpn,
            own: None,
        }
    }

    fn read(&self, seg: SegRef<'_>, offset: usize, out: &mut [u8]) -> Result {
        match seg {
            Seg::Kernel(b) => b.read_at(offset, out),
            Seg::User { addr, lkey, .. } => {
                let pd = self.pd.ok_or(EINVAL)?;
                self.dev
                    .mr_copy_from(
                        lkey,
                        KeyKind::Local,
                        pd,
                        addr.wrapping_add(offset as u64),
                        out,
                    )
                    .map_err(mr_errno)
            }
        }
    }

    fn write(&self, seg: SegRef<'_>, offset: usize, data: &[u8]) -> Result {
        match seg {
            Seg::Kernel(b) => b.write_at(offset, data),
            Seg::User { addr, lkey, .. } => {
                let pd = self.pd.ok_or(EINVAL)?;
                self.dev
                    .mr_copy_to(
                        lkey,
                        KeyKind::Local,
                        pd,
                        addr.wrapping_add(offset as u64),
                        data,
                    )
                    .map_err(mr_errno)
            }
        }
    }
}

/// A fixed pool of `depth * max_sge` buffer slots, `max_sge` per queue entry.
struct BufPool {
    bufs: KVec<Seg>,
    max_sge: usize,
}

impl BufPool {
    fn new(depth: usize, max_sge: u32) -> Result<Self> {
        let max_sge = core::cmp::max(max_sge as usize, 1);
        let n = depth.checked_mul(max_sge).ok_or(EINVAL)?;
        let mut bufs = KVec::with_capacity(n, GFP_KERNEL_ACCOUNT)?;
        for _ in 0..n {
            bufs.push(Seg::default(), GFP_KERNEL_ACCOUNT)?;
        }
        Ok(Self { bufs, max_sge })
    }

    /// No buffer slots (the send queue of a user QP keeps its SGEs as bytes).
    fn none() -> Self {
        Self {
            bufs: KVec::new(),
            max_sge: 0,
        }
    }

    fn slot_mut(&mut self, slot: usize) -> &mut [Seg] {
        let base = slot * self.max_sge;
        self.bufs
            .get_mut(base..base + self.max_sge)
            .unwrap_or(&mut [])
    }

    fn get(&self, slot: usize, n: u32) -> &[Seg] {
        let base = slot * self.max_sge;
        self.bufs
            .get(base..base + core::cmp::min(n as usize, self.max_sge))
            .unwrap_or(&[])
    }

    /// Drops the buffers of `slot`: its request completed (or was flushed or discarded), and
    /// its kernel buffers are the consumer's again.
    fn release(&mut self, slot: usize) {
        for s in self.slot_mut(slot) {
            *s = Seg::default();
        }
    }

    /// Drops the buffers of every slot.
    fn release_all(&mut self) {
        for s in self.bufs.iter_mut() {
            *s = Seg::default();
        }
    }
}

/// A posted receive work request.
#[derive(Clone, Copy, Default)]
struct RecvEntry {
    wr_id: u64,
    num_sge: u32,
    len: u32,
}

/// The receive queue: entries `head..tail` (ring counters, depth a power of two) are posted
/// and not completed; `head..taken` were handed to the responder, which completes them in
/// order.
struct RecvRing {
    entries: KVec<RecvEntry>,
    bufs: BufPool,
    head: u32,
    taken: u32,
    tail: u32,
    /// User QPs: librxe's receive ring, which the process fills without a system call; the
    /// responder's `take` moves its oldest entry here.
    user: Option<UQueue>,
    max_sge: u32,
    /// Malformed entries found in the user ring (the QP then goes to the error state).
    user_errors: u32,
}

impl RecvRing {
    fn new(max_wr: u32, max_sge: u32) -> Result<Self> {
        let depth = core::cmp::max(max_wr, 1).next_power_of_two() as usize;
        let mut entries = KVec::with_capacity(depth, GFP_KERNEL_ACCOUNT)?;
        for _ in 0..depth {
            entries.push(RecvEntry::default(), GFP_KERNEL_ACCOUNT)?;
        }
        Ok(Self {
            entries,
            bufs: BufPool::new(depth, max_sge)?,
            head: 0,
            taken: 0,
            tail: 0,
            user: None,
            max_sge,
            user_errors: 0,
        })
    }

    fn slot(&self, idx: u32) -> usize {
        idx as usize & (self.entries.len() - 1)
    }

    /// Moves the oldest entry of the user ring (if any) to the tail of this ring. A malformed
    /// entry is consumed, counted and not moved.
    fn pull_user(&mut self) -> Option<()> {
        if self.is_full() {
            return None;
        }
        let max_sge = self.max_sge;
        let q = self.user.as_mut()?;
        let mut raw = [0u8; RECV_WQE_MAX];
        let n = core::cmp::min(q.geometry().elem_size(), raw.len());
        q.peek(&mut raw[..n]).ok()?.ok()?;
        let _ = q.consume();
        let slot = (self.tail as usize) & (self.entries.len() - 1);
        match crate::rxe_abi::parse_recv(&raw[..n], max_sge, self.bufs.slot_mut(slot)) {
            Some((wr_id, num_sge, len)) => {
                self.entries[slot] = RecvEntry {
                    wr_id,
                    num_sge,
                    len,
                };
                self.tail = self.tail.wrapping_add(1);
                Some(())
            }
            None => {
                self.user_errors += 1;
                None
            }
        }
    }

    /// Moves the oldest request of `srq` (if any) to the tail of this ring; sets `*limit` if
    /// that made the SRQ's limit fire. A malformed request is consumed from the SRQ, counted
    /// here and not moved.
    fn pull_srq(&mut self, srq: &Srq<MetaRoceDriver>, limit: &mut bool) -> Option<()> {
        if self.is_full() {
            return None;
        }
        let slot = (self.tail as usize) & (self.entries.len() - 1);
        let (taken, fired) = srq.take(self.bufs.slot_mut(slot));
        *limit |= fired;
        match taken {
            Taken::Empty => None,
            Taken::Entry {
                wr_id,
                num_sge,
                len,
            } => {
                self.entries[slot] = RecvEntry {
                    wr_id,
                    num_sge,
                    len,
                };
                self.tail = self.tail.wrapping_add(1);
                Some(())
            }
            Taken::Malformed => {
                self.user_errors += 1;
                None
            }
        }
    }

    fn is_full(&self) -> bool {
        self.tail.wrapping_sub(self.head) as usize >= self.entries.len()
    }

    /// The entry handed out under `id` and its buffers, if it is handed out and not
    /// completed (`head <= id < taken`, wrapping): a completed entry's buffers may already be
    /// freed or reused by their consumer and are never reached through this.
    fn outstanding(&self, id: u32) -> Option<(RecvEntry, &[Seg])> {
        (id.wrapping_sub(self.head) < self.taken.wrapping_sub(self.head))
            .then(|| self.entry(u64::from(id)))
    }

    /// The entry handed out under `id` and its buffers.
    fn entry(&self, id: u64) -> (RecvEntry, &[Seg]) {
        let slot = self.slot(id as u32);
        let e = self.entries[slot];
        (e, self.bufs.get(slot, e.num_sge))
    }

    /// Retires the oldest handed-out entry (the responder completes in order).
    fn complete(&mut self, id: u64) {
        if self.head != self.taken && id as u32 == self.head {
            self.bufs.release(self.slot(self.head));
            self.head = self.head.wrapping_add(1);
        }
    }

    /// Removes every entry, returning the `wr_id`s to flush in order: those moved here and
    /// those still in a user ring (a consumer may wait for their flush completions, e.g. a
    /// thread blocked on the CQ after `rdma_disconnect`). Malformed user entries are consumed
    /// and counted, without a completion (their `wr_id` cannot be trusted).
    ///
    /// At most one user ring's capacity is taken from the user ring per call (the process may
    /// keep refilling it while this runs under the QP's IRQ-off lock); the rest is flushed on
    /// the next call (the next doorbell, `post_recv` or state change).
    fn drain(&mut self, mut f: impl FnMut(u64)) {
        let mut budget = self.user.as_ref().map_or(0, |q| q.capacity());
        loop {
            while self.head != self.tail {
                let slot = self.slot(self.head);
                f(self.entries[slot].wr_id);
                self.bufs.release(slot);
                self.head = self.head.wrapping_add(1);
            }
            self.taken = self.head;
            if budget == 0 {
                break;
            }
            budget -= 1;
            // Each round consumes one user entry, so this ends with the ring or the budget.
            let errors = self.user_errors;
            if self.pull_user().is_none() && self.user_errors == errors {
                break;
            }
        }
    }
}

/// Where the responder takes receive requests: the QP's ring, fed from its user ring or, for a
/// QP with a shared receive queue, from the SRQ.
struct RecvSource<'a> {
    rq: &'a mut RecvRing,
    srq: Option<&'a Srq<MetaRoceDriver>>,
    /// The SRQ's limit fired: raise the event once the QP lock is released.
    srq_limit: bool,
    /// While the device has on-demand paging regions: where the receive buffers are resolved
    /// (the device and the PD of the QP or its SRQ), to check that their pages are present
    /// before a request is taken.
    odp: Option<(&'a MetaRoceDev, Option<PdId>)>,
}

impl<'a> RecvSource<'a> {
    fn new(
        qp: &'a Qp<MetaRoceDriver>,
        rq: &'a mut RecvRing,
        srq: Option<&'a Srq<MetaRoceDriver>>,
    ) -> Self {
        let dev: &'a MetaRoceDev = qp.device();
        let odp = dev.has_odp().then(|| {
            let pd = match srq {
                Some(s) => Some(s.pd().id()),
                None => qp.pd().map(|p| p.id()),
            };
            (dev, pd)
        });
        RecvSource {
            rq,
            srq,
            srq_limit: false,
            odp,
        }
    }
}

impl RecvQueue for RecvSource<'_> {
    fn take(&mut self) -> Option<pwr::RecvWqe> {
        let rq = &mut *self.rq;
        if rq.taken == rq.tail {
            match self.srq {
                Some(srq) => rq.pull_srq(srq, &mut self.srq_limit)?,
                None => rq.pull_user()?,
            }
        }
        let e = rq.entries[rq.slot(rq.taken)];
        let id = u64::from(rq.taken);
        // On-demand paging: a request whose buffers are not all present stays here (the core
        // answers RNR; the fault was asked for) and is taken when the sender retries.
        if let Some((dev, pd)) = self.odp {
            if !recv_ready(dev, pd, rq.entry(id).1) {
                return None;
            }
        }
        rq.taken = rq.taken.wrapping_add(1);
        Some(pwr::RecvWqe { id, len: e.len })
    }

    /// While the device has on-demand paging regions, every SEND packet is placed here, in one
    /// go with the check that its pages are present (see `MemCtx::place_write`).
    fn place(&mut self, wqe: &pwr::RecvWqe, offset: u32, data: &[u8]) -> Result<bool, AccessError> {
        let Some((dev, pd)) = self.odp else {
            return Ok(false);
        };
        let m = MemCtx {
            dev,
            pd,
            qpn: 0,
            own: None,
        };
        let (_, bufs) = self
            .rq
            .outstanding(wqe.id as u32)
            .ok_or(AccessError::Operational)?;
        place_now(&m, bufs.iter().map(Seg::as_ref), offset, data)
    }
}

/// What the glue keeps per send queue slot besides the core's [`pwr::SendWqe`] (what only
/// some QPs need is in [`SendRing`]'s optional per-slot arrays).
#[derive(Clone, Copy, Default)]
struct SqSide {
    opcode: Option<WcOpcode>,
    num_sge: u32,
    /// Bytes of inline data copied for the request (instead of SGEs).
    inline_len: Option<u32>,
}

/// A send queue slot of a native RC QP (`native.rs`).
#[derive(Clone, Copy, Default)]
struct NativeSlot {
    wr_id: u64,
    signaled: bool,
    /// The message to send (`None`: a local operation, done when posted).
    msg: Option<MsgDesc>,
    /// An atomic's operands (compare or addend, swap).
    operands: (u64, u64),
    /// Its Msn once handed to the connection.
    msn: u32,
    /// The completion status, once known.
    done: Option<WcStatus>,
}

/// A native RC QP's place on its connection (`native.rs`).
struct NativeState {
    /// The connection (kept after the stream closed: the QP's transmit runs still drive it).
    peer: Arc<Peer>,
    /// The stream the QP holds (`None` once closed: error or reset).
    stream: Option<usize>,
    /// Send ring counter of the oldest request not completed.
    head: u32,
    /// Send ring counter of the next request to hand to the connection.
    posted: u32,
    /// Receive ring counter of the request that Rsn 0 consumes.
    rq_base: u32,
    /// A request failed locally (its data could not be read) while requests before it were
    /// still in flight: no more requests go to the connection, and the QP breaks when the
    /// completions reach the failed one (earlier requests complete as the peer acknowledges
    /// them, as rdma_rxe's and the RoCEv2 core's requesters do).
    local_error: bool,
}

/// The parts of a [`SendRing`] that name each request's local buffers.
#[derive(Clone, Copy)]
struct SqBufs<'a> {
    side: &'a [SqSide],
    bufs: &'a BufPool,
    data: &'a [u8],
    per_slot: usize,
}

impl<'a> SqBufs<'a> {
    fn bufs(self, slot: usize) -> impl Iterator<Item = SegRef<'a>> + 'a {
        let side = self.side.get(slot).copied().unwrap_or_default();
        let n = if side.inline_len.is_some() {
            0
        } else {
            side.num_sge
        };
        self.bufs_n(slot, n)
    }

    fn bufs_n(self, slot: usize, n: u32) -> impl Iterator<Item = SegRef<'a>> + 'a {
        let user = self.user_slot(slot);
        let n_user = if self.per_slot == 0 { 0 } else { n as usize };
        // (`Iterator::chain`: pin-init's `Init` has a `chain` too.)
        Iterator::chain(
            self.bufs.get(slot, n).iter().map(Seg::as_ref),
            (0..n_user).map_while(move |i| crate::rxe_abi::sge_at(user, i)),
        )
    }

    fn user_slot(self, slot: usize) -> &'a [u8] {
        let base = slot * self.per_slot;
        self.data.get(base..base + self.per_slot).unwrap_or(&[])
    }
}

/// The send queue: the core's slots, the glue's per-slot data, and counters.
struct SendRing {
    wqes: KVec<pwr::SendWqe>,
    side: KVec<SqSide>,
    /// Kernel QPs: `max_send_sge` buffers per slot (none for user QPs).
    bufs: BufPool,
    /// User QPs: `per_slot` bytes per slot holding the request's inline data or its SGE
    /// records as librxe wrote them (`rxe_abi::sge_at`), copied out of the ring when the
    /// request was taken; as in librxe's slot, one or the other (empty for kernel QPs).
    data: KVec<u8>,
    per_slot: usize,
    /// Datagram QPs: each request's destination address vector (empty for the others).
    avs: KVec<Option<RoceAv>>,
    /// Native RC QPs: what the connection needs per request and the completion it reports
    /// (empty for the others).
    native: KVec<NativeSlot>,
    /// User QPs: librxe's send ring; new entries are moved to the core at each doorbell.
    user: Option<UQueue>,
    /// Work requests posted so far (ring counter).
    tail: u32,
    /// Work requests whose kernel buffers were dropped (ring counter, up to `tail`): they
    /// completed (or were flushed or discarded).
    released: u32,
    /// Datagram QPs: request packets pulled from the core so far (one per work request).
    ud_sent: u32,
}

impl SendRing {
    /// A ring of at least `max_wr` slots. `user_slot`: a user QP's bytes per slot (inline
    /// data or SGE records), 0 for a kernel QP (`max_sge` buffers per slot); `datagram` and
    /// `native` add the per-slot arrays only those QPs use.
    fn new(
        max_wr: u32,
        max_sge: u32,
        user_slot: u32,
        datagram: bool,
        native: bool,
    ) -> Result<Self> {
        let depth = core::cmp::max(max_wr, 1).next_power_of_two() as usize;
        let mut wqes = KVec::with_capacity(depth, GFP_KERNEL_ACCOUNT)?;
        let mut side = KVec::with_capacity(depth, GFP_KERNEL_ACCOUNT)?;
        for _ in 0..depth {
            wqes.push(pwr::SendWqe::default(), GFP_KERNEL_ACCOUNT)?;
            side.push(SqSide::default(), GFP_KERNEL_ACCOUNT)?;
        }
        let per_slot = user_slot as usize;
        let mut data = KVec::new();
        data.resize(
            depth.checked_mul(per_slot).ok_or(EINVAL)?,
            0u8,
            GFP_KERNEL_ACCOUNT,
        )?;
        let mut avs = KVec::new();
        if datagram {
            avs.resize(depth, None, GFP_KERNEL_ACCOUNT)?;
        }
        let mut nat = KVec::new();
        if native {
            nat.resize(depth, NativeSlot::default(), GFP_KERNEL_ACCOUNT)?;
        }
        Ok(Self {
            wqes,
            side,
            bufs: if per_slot == 0 {
                BufPool::new(depth, max_sge)?
            } else {
                BufPool::none()
            },
            data,
            per_slot,
            avs,
            native: nat,
            user: None,
            tail: 0,
            released: 0,
            ud_sent: 0,
        })
    }

    fn depth(&self) -> u32 {
        self.wqes.len() as u32
    }

    fn slot(&self, idx: u32) -> usize {
        idx as usize & (self.wqes.len() - 1)
    }

    /// What names each request's buffers.
    fn view(&self) -> SqBufs<'_> {
        SqBufs {
            side: &self.side,
            bufs: &self.bufs,
            data: &self.data,
            per_slot: self.per_slot,
        }
    }

    /// The core's slots and, borrowed apart from them, what names each request's buffers.
    fn split(&mut self) -> (&mut [pwr::SendWqe], SqBufs<'_>) {
        let view = SqBufs {
            side: &self.side,
            bufs: &self.bufs,
            data: &self.data,
            per_slot: self.per_slot,
        };
        (&mut self.wqes, view)
    }

    /// The buffers of the request in `slot` (none for inline data).
    fn bufs(&self, slot: usize) -> impl Iterator<Item = SegRef<'_>> + '_ {
        self.view().bufs(slot)
    }

    /// The first `n` buffers of `slot`, as the request there was parsed.
    fn bufs_n(&self, slot: usize, n: u32) -> impl Iterator<Item = SegRef<'_>> + '_ {
        self.view().bufs_n(slot, n)
    }

    /// A user QP's bytes for `slot`.
    fn user_slot(&self, slot: usize) -> &[u8] {
        self.view().user_slot(slot)
    }

    /// The inline data copied for `slot`, if the request carried inline data.
    fn inline(&self, slot: usize) -> Option<&[u8]> {
        let len = self.side.get(slot)?.inline_len? as usize;
        self.user_slot(slot).get(..len)
    }

    /// A native RC QP's record of the request in `slot`.
    fn nslot(&self, slot: usize) -> NativeSlot {
        self.native.get(slot).copied().unwrap_or_default()
    }

    /// Records for the request in `slot` what only some QPs keep: the destination of a
    /// datagram, the native connection's view of a native RC QP's request.
    fn set_extra(&mut self, slot: usize, av: Option<RoceAv>, native: NativeSlot) {
        if let Some(a) = self.avs.get_mut(slot) {
            *a = av;
        }
        if let Some(n) = self.native.get_mut(slot) {
            *n = native;
        }
    }

    /// Drops the kernel buffers of the requests up to `upto` (ring counter): they are done.
    fn release_to(&mut self, upto: u32) {
        while self.released != upto && self.released != self.tail {
            let slot = self.slot(self.released);
            self.bufs.release(slot);
            self.released = self.released.wrapping_add(1);
        }
    }

    fn reset(&mut self) {
        self.bufs.release_all();
        self.tail = 0;
        self.released = 0;
        self.ud_sent = 0;
        for w in self.wqes.iter_mut() {
            *w = pwr::SendWqe::default();
        }
    }
}

/// Attributes set through `modify_qp`.
#[derive(Clone, Copy)]
struct QpAttrs {
    qkey: u32,
    pkey_index: u16,
    sq_psn: u32,
    rq_psn: u32,
    dest_qpn: u32,
    path_mtu: Mtu,
    access: AccessFlags,
    timeout: u8,
    retry_cnt: u8,
    rnr_retry: u8,
    min_rnr_timer: u8,
    max_rd_atomic: u8,
    max_dest_rd_atomic: u8,
    /// The primary path of a connected QP.
    av: Option<RoceAv>,
}

/// The mutable state of a QP.
struct QpInner {
    state: QpState,
    attrs: QpAttrs,
    rq: RecvRing,
    sq: SendRing,
    /// What carries the QP's messages: set up when the QP enters RTR, dropped on RESET.
    transport: Transport,
    /// The RoCEv2 engine's counters already added to the device's (`account`).
    counted: pqp::Stats,
}

/// The transport of a QP: the protocol core's RoCEv2 state machines, or a stream of a native
/// connection (RC QPs of a native device). Every place that treats the two differently asks
/// this, and nothing else, which one the QP runs.
enum Transport {
    /// RESET and INIT: none yet.
    None,
    /// RoCEv2 (RC, UC, UD; every QP of a RoCEv2 device).
    Roce(Engine),
    /// The QP's place on its native connection (`native.rs`).
    Native(NativeState),
}

impl Transport {
    fn roce(&self) -> Option<&Engine> {
        match self {
            Transport::Roce(e) => Some(e),
            _ => None,
        }
    }

    fn roce_mut(&mut self) -> Option<&mut Engine> {
        match self {
            Transport::Roce(e) => Some(e),
            _ => None,
        }
    }

    fn native(&self) -> Option<&NativeState> {
        match self {
            Transport::Native(s) => Some(s),
            _ => None,
        }
    }

    fn native_mut(&mut self) -> Option<&mut NativeState> {
        match self {
            Transport::Native(s) => Some(s),
            _ => None,
        }
    }

    /// Drops the transport; returns the native stream the QP held, to give back to its
    /// connection once the QP lock is released.
    fn take_stream(&mut self) -> Option<(Arc<Peer>, usize)> {
        match core::mem::replace(self, Transport::None) {
            Transport::Native(s) => s.stream.map(|idx| (s.peer, idx)),
            _ => None,
        }
    }
}

/// A kernel queue pair.
#[pin_data]
pub(crate) struct MetaRoceQp {
    /// The QP number.
    pub(crate) qpn: u32,
    qp_type: QpType,
    sq_sig_all: bool,
    cap: QpCap,
    /// Whether the QP waits on the device's transmit worker's list.
    pub(crate) tx_queued: AtomicBool,
    /// Whether a context is pulling and sending the QP's packets (`xmit::transmit`).
    pub(crate) tx_busy: AtomicBool,
    /// Whether a context found `tx_busy` set and wants its holder to look again.
    pub(crate) tx_again: AtomicBool,
    /// Whether the QP is on the device's timer list.
    pub(crate) timer_listed: AtomicBool,
    #[pin]
    inner: SpinLockIrq<QpInner>,
}

impl MetaRoceQp {
    /// The IBA service (RC, UC, UD) of the QP's RoCEv2 packets.
    fn service(&self) -> Service {
        match self.qp_type {
            QpType::Rc => Service::Rc,
            QpType::Uc => Service::Uc,
            _ => Service::Ud,
        }
    }
}

/// Completions produced under the QP lock, delivered after it is released.
#[derive(Default)]
pub(crate) struct Notify {
    send: bool,
    recv: bool,
    /// The QP's SRQ reached its limit.
    srq_limit: bool,
    /// A native QP's stream to close (taken from the QP under its lock; closed once the lock
    /// is released, as the connection's lock comes first).
    unbind: Option<(Arc<Peer>, usize)>,
}

impl Notify {
    pub(crate) fn deliver(self, qp: &Qp<MetaRoceDriver>) {
        if let Some((peer, idx)) = &self.unbind {
            native::unbind(peer, *idx, qp.qpn);
        }
        if self.send {
            if let Some(cq) = qp.send_cq() {
                cq.notify_completion();
            }
        }
        if self.recv {
            if let Some(cq) = qp.recv_cq() {
                cq.notify_completion();
            }
        }
        if self.srq_limit {
            if let Some(srq) = qp.srq() {
                srq.dispatch_event(SrqEvent::LimitReached);
            }
        }
    }
}

/// Queues a completion of `qp` on `cq` (a kernel CQ or a user CQ's ring); returns whether the
/// consumer must be notified. A full user ring is reported to the process as a CQ error event.
fn complete(
    qp: &Qp<MetaRoceDriver>,
    cq: Option<&Cq<MetaRoceDriver>>,
    wc: WorkCompletion,
    solicited: bool,
) -> bool {
    let Some(cq) = cq else { return false };
    match cq.push_qpn(wc, qp.qp_num(), solicited) {
        CqPush::QueuedNotify => true,
        CqPush::Queued | CqPush::OverflowAgain => false,
        CqPush::Overflow => {
            cq.dispatch_user_event(CqEvent::Error);
            kernel::pr_warn_once!("work completion dropped: CQ full\n");
            false
        }
    }
}

fn send_wc_opcode(op: &SendOp) -> WcOpcode {
    match op {
        SendOp::RdmaWrite { .. } | SendOp::RdmaWriteWithImm { .. } => WcOpcode::RdmaWrite,
        SendOp::RdmaRead { .. } => WcOpcode::RdmaRead,
        SendOp::CmpSwap { .. } => WcOpcode::CompSwap,
        SendOp::FetchAdd { .. } => WcOpcode::FetchAdd,
        SendOp::RegMr { .. } => WcOpcode::RegMr,
        SendOp::LocalInv { .. } => WcOpcode::LocalInv,
        _ => WcOpcode::Send,
    }
}

fn wc_status(s: pwr::WcStatus) -> WcStatus {
    match s {
        pwr::WcStatus::Success => WcStatus::Success,
        pwr::WcStatus::LocLenErr => WcStatus::LocLenErr,
        pwr::WcStatus::LocQpOpErr => WcStatus::LocQpOpErr,
        pwr::WcStatus::LocProtErr => WcStatus::LocProtErr,
        pwr::WcStatus::WrFlushErr => WcStatus::WrFlushErr,
        pwr::WcStatus::BadRespErr => WcStatus::BadRespErr,
        pwr::WcStatus::LocAccessErr => WcStatus::LocAccessErr,
        pwr::WcStatus::RemInvReqErr => WcStatus::RemInvReqErr,
        pwr::WcStatus::RemAccessErr => WcStatus::RemAccessErr,
        pwr::WcStatus::RemOpErr => WcStatus::RemOpErr,
        pwr::WcStatus::RetryExcErr => WcStatus::RetryExcErr,
        pwr::WcStatus::RnrRetryExcErr => WcStatus::RnrRetryExcErr,
    }
}

/// Adds what the core counted since the last call to the device's port counters (rdma_rxe's
/// names and meanings).
fn account(qp: &Qp<MetaRoceDriver>, inner: &mut QpInner) {
    let Some(engine) = inner.transport.roce() else {
        return;
    };
    let now = engine.stats();
    let was = core::mem::replace(&mut inner.counted, now);
    let dev = qp.device();
    let d = |a: u64, b: u64| a.wrapping_sub(b);
    // Requests the responder saw twice, and those that arrived out of sequence (NAKed).
    dev.count(
        Counter::DuplicateRequest,
        d(now.resp.duplicates, was.resp.duplicates),
    );
    dev.count(
        Counter::OutOfSeqRequest,
        d(now.resp.seq_naks, was.resp.seq_naks),
    );
    // RNR NAKs received by the completer and sent by the responder.
    dev.count(Counter::RcvdRnrErr, d(now.comp.rnr_naks, was.comp.rnr_naks));
    dev.count(Counter::SendRnrErr, d(now.resp.rnr_naks, was.resp.rnr_naks));
    // Sequence error NAKs received, and retries (timeouts and NAKs) the completer started.
    dev.count(Counter::RcvdSeqErr, d(now.comp.seq_naks, was.comp.seq_naks));
    dev.count(
        Counter::CompleterRetryErr,
        d(now.comp.retries, was.comp.retries),
    );
    dev.count(
        Counter::LocalAckTimeouts,
        d(now.comp.timeouts, was.comp.timeouts),
    );
    dev.count(
        Counter::Retransmits,
        d(now.req.retransmits, was.req.retransmits),
    );
    dev.count(
        Counter::OdpResponseWaits,
        d(now.comp.sink_waits, was.comp.sink_waits),
    );
}

/// Reports the send completions the core has ready.
fn reap_send(qp: &Qp<MetaRoceDriver>, inner: &mut QpInner, n: &mut Notify) {
    account(qp, inner);
    let Some(engine) = inner.transport.roce_mut() else {
        return;
    };
    while let Some(c) = engine.poll_send_completion(&mut inner.sq.wqes) {
        // The completed request is the last one retired: completions come in posting order.
        let retired = inner.sq.tail.wrapping_sub(engine.sq_used());
        let slot = inner.sq.slot(retired.wrapping_sub(1));
        let opcode = inner.sq.side[slot].opcode.unwrap_or(WcOpcode::Send);
        let mut wc = WorkCompletion::new(c.wr_id, wc_status(c.status), opcode, qp.id());
        wc.byte_len = c.byte_len;
        match c.status {
            pwr::WcStatus::Success => qp.device().count(Counter::RdmaSends, 1),
            pwr::WcStatus::RetryExcErr => qp.device().count(Counter::RetryExceededErr, 1),
            pwr::WcStatus::RnrRetryExcErr => qp.device().count(Counter::RetryRnrExceededErr, 1),
            _ => {}
        }
        n.send |= complete(qp, qp.send_cq(), wc, false);
    }
    // Requests the core retired (reported or not signaled) are done: their buffers go. (A
    // native QP's requests are retired by its connection: `native_retire`.)
    let retired = inner.sq.tail.wrapping_sub(engine.sq_used());
    inner.sq.release_to(retired);
}

/// Moves the QP to the error state: the core flushes its send queue, the receive queue is
/// flushed here.
fn enter_error(qp: &Qp<MetaRoceDriver>, inner: &mut QpInner, n: &mut Notify) {
    inner.state = QpState::Err;
    if let Some(engine) = inner.transport.roce_mut() {
        engine.set_error();
    }
    reap_send(qp, inner, n);
    native_flush(qp, inner, n);
    let mut flushed = |wr_id| {
        let wc = WorkCompletion::new(wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, qp.id());
        n.recv |= complete(qp, qp.recv_cq(), wc, false);
    };
    inner.rq.drain(&mut flushed);
}
