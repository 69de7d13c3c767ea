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
use crate::proto::opcode::Transport;
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

/// One scatter/gather element of a queued work request.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Seg {
    /// A kernel consumer's buffer.
    Kernel(KernelBuf),
    /// `len` bytes at `addr` of the user memory region of L_Key `lkey`.
    User { addr: u64, len: u32, lkey: u32 },
}

impl Default for Seg {
    fn default() -> Self {
        Seg::Kernel(KernelBuf::default())
    }
}

impl Seg {
    fn len(&self) -> usize {
        match self {
            Seg::Kernel(b) => b.len() as usize,
            Seg::User { len, .. } => *len as usize,
        }
    }
}

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

    fn read(&self, seg: &Seg, offset: usize, out: &mut [u8]) -> Result {
        match *seg {
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

    fn write(&self, seg: &Seg, offset: usize, data: &[u8]) -> Result {
        match *seg {
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

/// The error of a local copy: `EAGAIN` for on-demand paging memory that is not present yet
/// (a fault was asked for), `EFAULT` for anything else.
fn mr_errno(e: crate::mr::MrError) -> Error {
    match e {
        crate::mr::MrError::NotPresent => EAGAIN,
        _ => EFAULT,
    }
}

/// Whether the user buffers `segs` of PD `pd` can be written now: false if pages of an
/// on-demand paging region among them are not present (a fault was asked for). Invalid
/// buffers pass (the placement reports them). Any context.
fn recv_ready(dev: &MetaRoceDev, pd: Option<PdId>, segs: &[Seg]) -> bool {
    let Some(pd) = pd else { return true };
    segs.iter().all(|s| match *s {
        Seg::User { addr, len, lkey } if len > 0 => !matches!(
            dev.mr_check(
                lkey,
                KeyKind::Local,
                pd,
                addr,
                len as usize,
                AccessFlags::LOCAL_WRITE
            ),
            Err(crate::mr::MrError::NotPresent)
        ),
        _ => true,
    })
}

/// Copies `out.len()` bytes at byte `offset` of the concatenation of `segs` into `out`.
fn gather(
    m: &MemCtx<'_>,
    segs: impl IntoIterator<Item = Seg>,
    mut offset: usize,
    mut out: &mut [u8],
) -> Result {
    for b in segs {
        if out.is_empty() {
            break;
        }
        let len = b.len();
        if offset >= len {
            offset -= len;
            continue;
        }
        let n = core::cmp::min(len - offset, out.len());
        let (now, rest) = out.split_at_mut(n);
        m.read(&b, offset, now)?;
        out = rest;
        offset = 0;
    }
    if out.is_empty() {
        Ok(())
    } else {
        Err(EINVAL)
    }
}

/// A placement made while the device has on-demand paging regions: `data` copied to byte
/// `offset` of `segs` now, in one go with the check that their pages are present. `Ok(true)`
/// placed, `NotPresent` (a fault was asked for; the core refuses the packet and it comes
/// again), and other errors `Ok(false)`: left to the core's `Place`, which fails the same way
/// and reports it.
fn place_now(
    m: &MemCtx<'_>,
    segs: impl IntoIterator<Item = Seg>,
    offset: u32,
    data: &[u8],
) -> Result<bool, AccessError> {
    match scatter(m, segs, offset as usize, data) {
        Ok(()) => Ok(true),
        Err(e) if e == EAGAIN => Err(AccessError::NotPresent),
        Err(_) => Ok(false),
    }
}

/// Copies `data` to byte `offset` of the concatenation of `segs`.
fn scatter(
    m: &MemCtx<'_>,
    segs: impl IntoIterator<Item = Seg>,
    mut offset: usize,
    mut data: &[u8],
) -> Result {
    for b in segs {
        if data.is_empty() {
            break;
        }
        let len = b.len();
        if offset >= len {
            offset -= len;
            continue;
        }
        let n = core::cmp::min(len - offset, data.len());
        m.write(&b, offset, &data[..n])?;
        data = &data[n..];
        offset = 0;
    }
    if data.is_empty() {
        Ok(())
    } else {
        Err(EINVAL)
    }
}

/// The buffers of an SGE list of a kernel QP, checked against `max_sge`, the local DMA key and
/// the kernel's direct mapping; returns them in `out` with the total length.
fn kernel_bufs(
    qp: &Qp<MetaRoceDriver>,
    sges: &[Sge],
    max_sge: u32,
    out: &mut [Seg],
) -> Result<u32> {
    if sges.len() > max_sge as usize || sges.len() > out.len() {
        return Err(EINVAL);
    }
    let mut total: u32 = 0;
    for (s, o) in sges.iter().zip(out.iter_mut()) {
        if s.lkey() != LOCAL_DMA_LKEY {
            return Err(EINVAL);
        }
        *o = Seg::Kernel(KernelBuf::from_sge(qp, s)?);
        total = total.checked_add(s.length()).ok_or(EINVAL)?;
    }
    Ok(total)
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
                f(self.entries[self.slot(self.head)].wr_id);
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
        place_now(&m, bufs.iter().copied(), offset, data)
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
    fn bufs(self, slot: usize) -> impl Iterator<Item = Seg> + 'a {
        let side = self.side.get(slot).copied().unwrap_or_default();
        let n = if side.inline_len.is_some() {
            0
        } else {
            side.num_sge
        };
        self.bufs_n(slot, n)
    }

    fn bufs_n(self, slot: usize, n: u32) -> impl Iterator<Item = Seg> + 'a {
        let user = self.user_slot(slot);
        let n_user = if self.per_slot == 0 { 0 } else { n as usize };
        // (`Iterator::chain`: pin-init's `Init` has a `chain` too.)
        Iterator::chain(
            self.bufs.get(slot, n).iter().copied(),
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
    fn bufs(&self, slot: usize) -> impl Iterator<Item = Seg> + '_ {
        self.view().bufs(slot)
    }

    /// The first `n` buffers of `slot`, as the request there was parsed.
    fn bufs_n(&self, slot: usize, n: u32) -> impl Iterator<Item = Seg> + '_ {
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

    fn reset(&mut self) {
        self.tail = 0;
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
    /// The transport state machines: created when the QP enters RTR, dropped on RESET.
    engine: Option<Engine>,
    /// The engine's counters already added to the device's (`account`).
    counted: pqp::Stats,
    /// RC QPs of a native device: the connection stream (there is no `engine`).
    native: Option<NativeState>,
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
    fn transport(&self) -> Transport {
        match self.qp_type {
            QpType::Rc => Transport::Rc,
            QpType::Uc => Transport::Uc,
            _ => Transport::Ud,
        }
    }
}

pub(crate) fn create_qp(
    qp: &mut NewQp<'_, MetaRoceDriver>,
) -> Result<impl PinInit<MetaRoceQp, Error>> {
    let user = qp.origin() == Origin::User;
    let qp_type = qp.qp_type();
    // A user GSI QP does not exist (ib_core's MAD layer owns QP1).
    if user && !matches!(qp_type, QpType::Rc | QpType::Uc | QpType::Ud) {
        return Err(EOPNOTSUPP);
    }
    match qp_type {
        QpType::Gsi => {
            if qp.port_num() != PORT {
                return Err(EINVAL);
            }
        }
        // A native device's RC QPs use the native transport, its UC and UD QPs RoCEv2
        // (transport.rst, section 1).
        QpType::Rc | QpType::Uc | QpType::Ud => {}
        // RoCE has no QP0; raw packet and XRC QPs are not offered.
        _ => return Err(EOPNOTSUPP),
    }
    if qp.create_flags() != 0 {
        return Err(EOPNOTSUPP);
    }
    // A QP with an SRQ takes its receive requests from it (RC, UC, UD); QP1 has its own.
    let srq_sge = qp.srq().map(|srq| srq.max_sge);
    if srq_sge.is_some() && qp_type == QpType::Gsi {
        return Err(EINVAL);
    }
    if qp.send_cq().is_none() || qp.recv_cq().is_none() {
        return Err(EINVAL);
    }
    let mut cap = qp.cap();
    if srq_sge.is_some() {
        // The SRQ's sizes apply; the QP has no receive queue of its own.
        cap.max_recv_wr = 0;
        cap.max_recv_sge = 0;
    }
    if cap.max_send_wr > MAX_QP_WR
        || cap.max_recv_wr > MAX_QP_WR
        || cap.max_send_sge > MAX_SGE
        || cap.max_recv_sge > MAX_SGE
    {
        return Err(EINVAL);
    }
    // Kernel consumers' buffers stay valid until completion, so inline data is offered to
    // user QPs only (copied out of the ring when the request is taken).
    if !user && cap.max_inline_data != 0 {
        return Err(EINVAL);
    }
    // The private ring of a QP with an SRQ holds the requests it took and has not completed.
    let (rq_depth, rq_sge) = match srq_sge {
        Some(sge) => (SRQ_IN_PROGRESS, sge),
        None => (cap.max_recv_wr, cap.max_recv_sge),
    };
    let datagram = !matches!(qp_type, QpType::Rc | QpType::Uc);
    let native = qp.device().native && qp_type == QpType::Rc;
    let (mut rq, mut sq) = if user {
        // A send slot holds the SGEs or the inline data, whichever is larger (as rdma_rxe
        // sizes it); report what fits.
        let data = core::cmp::max(
            cap.max_send_sge * crate::rxe_abi::SGE_LEN as u32,
            cap.max_inline_data,
        );
        let data = core::cmp::max(data, USER_MIN_INLINE);
        if data > USER_MAX_INLINE {
            return Err(EINVAL);
        }
        cap.max_inline_data = data;
        cap.max_send_sge = core::cmp::min(data / crate::rxe_abi::SGE_LEN as u32, MAX_SGE);
        (
            RecvRing::new(rq_depth, rq_sge)?,
            SendRing::new(cap.max_send_wr, cap.max_send_sge, data, datagram, native)?,
        )
    } else {
        (
            RecvRing::new(rq_depth, rq_sge)?,
            SendRing::new(cap.max_send_wr, cap.max_send_sge, 0, datagram, native)?,
        )
    };
    if let Some(udata) = qp.udata() {
        // librxe sends no request and expects `struct rxe_create_qp_resp`: the mminfo of the
        // receive ring (zero for a QP with an SRQ, which librxe then does not map), then of
        // the send ring.
        udata.expect_no_request()?;
        let sq_elem = crate::rxe_abi::SEND_WQE_HDR + cap.max_inline_data as usize;
        let urq = if srq_sge.is_none() {
            let rq_elem =
                crate::rxe_abi::RECV_WQE_HDR + cap.max_recv_sge as usize * crate::rxe_abi::SGE_LEN;
            Some(UQueue::new(
                udata,
                core::cmp::max(cap.max_recv_wr, 1),
                rq_elem,
                Role::KernelConsumes,
            )?)
        } else {
            None
        };
        let usq = UQueue::new(
            udata,
            core::cmp::max(cap.max_send_wr, 1),
            sq_elem,
            Role::KernelConsumes,
        )?;
        let mut resp = [0u8; 32];
        if let Some(urq) = &urq {
            resp[..16].copy_from_slice(&urq.mminfo());
        }
        resp[16..].copy_from_slice(&usq.mminfo());
        udata.write_response(&resp)?;
        // The rings may hold more than asked for; report their capacity.
        if let Some(urq) = &urq {
            cap.max_recv_wr = urq.capacity();
        }
        cap.max_send_wr = usq.capacity();
        rq.user = urq;
        sq.user = Some(usq);
    }
    let sq_sig_all = qp.sq_sig_all();

    // Last fallible step: from here on, `destroy_qp` gives the number back.
    let qpn = qp.device().alloc_qpn(qp_type == QpType::Gsi)?;
    qp.set_qp_num(qpn);
    qp.set_cap(cap);
    Ok(try_pin_init!(MetaRoceQp {
        qpn,
        qp_type,
        sq_sig_all,
        cap,
        tx_queued: AtomicBool::new(false),
        tx_busy: AtomicBool::new(false),
        tx_again: AtomicBool::new(false),
        timer_listed: AtomicBool::new(false),
        inner <- new_spinlock_irq!(
            QpInner {
                state: QpState::Reset,
                attrs: QpAttrs {
                    qkey: 0,
                    pkey_index: 0,
                    sq_psn: 0,
                    rq_psn: 0,
                    dest_qpn: 0,
                    path_mtu: Mtu::Mtu1024,
                    access: AccessFlags::NONE,
                    timeout: 0,
                    retry_cnt: 0,
                    rnr_retry: 0,
                    min_rnr_timer: 0,
                    max_rd_atomic: 0,
                    max_dest_rd_atomic: 0,
                    av: None,
                },
                rq,
                sq,
                counted: pqp::Stats::default(),
                engine: None,
                native: None,
            },
            "metaroce_qp"
        ),
    }))
}

pub(crate) fn destroy_qp(qp: &Qp<MetaRoceDriver>) {
    // Acknowledgements and responses already due leave first.
    xmit::flush(qp);
    // A native QP gives its stream back (its unacknowledged messages are abandoned).
    let bound = {
        let mut g = qp.inner.lock();
        g.native
            .take()
            .and_then(|s| s.stream.map(|idx| (s.peer, idx)))
    };
    if let Some((peer, idx)) = bound {
        native::unbind(&peer, idx, qp.qpn);
    }
    // No new packet or transmit run can find the QP after this; the abstraction then waits
    // for the ones in progress.
    qp.device().unpublish_qp(qp.qpn);
    // Consumers must not find completions of a QP that no longer exists.
    if let Some(cq) = qp.send_cq() {
        cq.purge_qp(qp.id());
    }
    if let Some(cq) = qp.recv_cq() {
        cq.purge_qp(qp.id());
    }
    // Type 2 windows bound through this QP are freed before its number can be reused.
    if qp
        .device()
        .objects
        .mws
        .load(core::sync::atomic::Ordering::Relaxed)
        != 0
    {
        qp.device().mw_unbind_qp(qp.qpn);
    }
    qp.device().free_qpn(qp.qpn);
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
    let Some(engine) = inner.engine.as_ref() else {
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
    let Some(engine) = inner.engine.as_mut() else {
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
}

/// Moves the QP to the error state: the core flushes its send queue, the receive queue is
/// flushed here.
fn enter_error(qp: &Qp<MetaRoceDriver>, inner: &mut QpInner, n: &mut Notify) {
    inner.state = QpState::Err;
    if let Some(engine) = inner.engine.as_mut() {
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

/// The core's configuration from the QP's attributes.
fn engine_config(q: &MetaRoceQp, sq_depth: u32, a: &QpAttrs) -> QpConfig {
    let mut cfg = QpConfig::new(q.transport(), q.qpn, a.dest_qpn);
    cfg.pmtu = Pmtu::from_bytes(a.path_mtu.bytes()).unwrap_or(Pmtu::Mtu1024);
    cfg.qkey = if q.qp_type == QpType::Gsi {
        QP1_QKEY
    } else {
        a.qkey
    };
    cfg.sq_psn = Psn::new(a.sq_psn);
    cfg.rq_psn = Psn::new(a.rq_psn);
    cfg.sq_depth = sq_depth;
    cfg.max_rd_atomic = core::cmp::max(a.max_rd_atomic, 1);
    cfg.timeout = a.timeout;
    cfg.retry_cnt = a.retry_cnt;
    cfg.rnr_retry = a.rnr_retry;
    cfg.min_rnr_timer = a.min_rnr_timer;
    // The requester's PSN window: 1024 by default, 8 times rdma_rxe's 128 (README, "Performance
    // work": under TCG a 128-packet window, two ACK intervals, left the sender waiting for ACKs).
    cfg.max_inflight = crate::module_parameters::rc_max_unacked
        .value()
        .clamp(1, crate::proto::req::MAX_MSG_PSNS);
    cfg.access = core_access(a.access);
    cfg
}

/// The responder's rights for the QP's access flags.
fn core_access(flags: AccessFlags) -> pwr::Access {
    RIGHTS
        .into_iter()
        .filter(|(_, f)| flags.contains(*f))
        .fold(pwr::Access::NONE, |access, (r, _)| access.with(r))
}

pub(crate) fn modify_qp(qp: &Qp<MetaRoceDriver>, attr: &QpAttr, mask: QpAttrMask) -> Result {
    let mut n = Notify::default();
    // Datagram QPs have no path MTU attribute: their messages may be as long as the port's
    // active MTU (ibv_ud_pingpong sizes them by it), as rdma_rxe has it. Read before the QP
    // lock is taken (the netdev reference is under ib_core's port lock, IRQs on).
    let to_rtr = mask.contains(QpAttrMask::STATE) && matches!(attr.qp_state(), Ok(QpState::Rtr));
    let port_mtu = match qp.qp_type {
        QpType::Ud | QpType::Gsi if to_rtr => qp
            .device()
            .netdev(PORT)
            .and_then(|nd| Pmtu::from_bytes(crate::device::active_mtu(nd.mtu()).bytes())),
        _ => None,
    };
    // An RC QP of a native device that reaches RTR takes a stream of the connection to its
    // destination, bound before the QP lock is taken (the connection's lock comes first) and
    // given back if the transition fails.
    let native_rc = qp.device().native && qp.qp_type == QpType::Rc;
    let mut native_bind = if native_rc && to_rtr {
        let (state, attrs, bound) = {
            let g = qp.inner.lock();
            (
                g.state,
                g.attrs,
                g.native.as_ref().is_some_and(|s| s.stream.is_some()),
            )
        };
        let from = if mask.contains(QpAttrMask::CUR_STATE) {
            attr.cur_qp_state()?
        } else {
            state
        };
        if from == QpState::Init && !bound {
            let av = if mask.contains(QpAttrMask::AV) {
                Some(roce_av(attr.ah_attr())?)
            } else {
                attrs.av
            };
            let dest = if mask.contains(QpAttrMask::DEST_QPN) {
                attr.dest_qp_num()
            } else {
                attrs.dest_qpn
            };
            let av = av.ok_or(EINVAL)?;
            let mtu = qp.device().netdev(PORT).map_or(1500, |nd| nd.mtu());
            let peer = native::peer(qp.device(), &av, mtu)?;
            let idx = native::bind(&peer, qp.qpn, dest)?;
            Some((peer, idx))
        } else {
            None
        }
    } else {
        None
    };
    let res = (|| -> Result {
        let mut g = qp.inner.lock();
        let inner = &mut *g;
        let cur = if mask.contains(QpAttrMask::CUR_STATE) {
            attr.cur_qp_state()?
        } else {
            inner.state
        };
        let next = if mask.contains(QpAttrMask::STATE) {
            attr.qp_state()?
        } else {
            cur
        };
        if !modify_is_ok(cur, next, qp.qp_type, mask) {
            return Err(EINVAL);
        }
        // Resizing queues is not offered; rate limits and alternate paths neither.
        if mask.contains(QpAttrMask::CAP)
            || mask.contains(QpAttrMask::RATE_LIMIT)
            || mask.contains(QpAttrMask::ALT_PATH)
        {
            return Err(EOPNOTSUPP);
        }
        // Validate everything before changing anything.
        let mut a = inner.attrs;
        if mask.contains(QpAttrMask::PORT) && attr.port_num() != PORT {
            return Err(EINVAL);
        }
        if mask.contains(QpAttrMask::PKEY_INDEX) {
            // One P_Key per port.
            if attr.pkey_index() != 0 {
                return Err(EINVAL);
            }
            a.pkey_index = 0;
        }
        if mask.contains(QpAttrMask::QKEY) {
            a.qkey = attr.qkey();
        }
        if mask.contains(QpAttrMask::SQ_PSN) {
            a.sq_psn = attr.sq_psn();
        }
        if mask.contains(QpAttrMask::RQ_PSN) {
            a.rq_psn = attr.rq_psn();
        }
        if mask.contains(QpAttrMask::DEST_QPN) {
            a.dest_qpn = attr.dest_qp_num();
        }
        if mask.contains(QpAttrMask::PATH_MTU) {
            a.path_mtu = attr.path_mtu()?;
        }
        if mask.contains(QpAttrMask::ACCESS_FLAGS) {
            a.access = attr.access_flags();
        }
        if mask.contains(QpAttrMask::TIMEOUT) {
            a.timeout = attr.timeout();
            if a.timeout > 31 {
                return Err(EINVAL);
            }
        }
        if mask.contains(QpAttrMask::RETRY_CNT) {
            a.retry_cnt = attr.retry_cnt();
            if a.retry_cnt > 7 {
                return Err(EINVAL);
            }
        }
        if mask.contains(QpAttrMask::RNR_RETRY) {
            a.rnr_retry = attr.rnr_retry();
            if a.rnr_retry > 7 {
                return Err(EINVAL);
            }
        }
        if mask.contains(QpAttrMask::MIN_RNR_TIMER) {
            a.min_rnr_timer = attr.min_rnr_timer();
            if a.min_rnr_timer > 31 {
                return Err(EINVAL);
            }
        }
        // Not above what query_device reports (`max_qp_init_rd_atom`, `max_qp_rd_atom`).
        if mask.contains(QpAttrMask::MAX_QP_RD_ATOMIC) {
            // The initiator depth is clamped to what we report (max_qp_init_rd_atom): fewer
            // READs/atomics in flight than allowed is always safe, and perftest sets it to the
            // peer's max_qp_rd_atom (rdma_rxe reports 128), which a refusal would make fail
            // against rdma_rxe (seen: interop/40-perftest, "Failed to modify QP to RTS").
            a.max_rd_atomic = core::cmp::min(usize::from(attr.max_rd_atomic()), RESP_RES) as u8;
        }
        if mask.contains(QpAttrMask::MAX_DEST_RD_ATOMIC) {
            a.max_dest_rd_atomic = attr.max_dest_rd_atomic();
            if usize::from(a.max_dest_rd_atomic) > RESP_RES {
                return Err(EINVAL);
            }
        }
        if mask.contains(QpAttrMask::AV) {
            a.av = Some(roce_av(attr.ah_attr())?);
        }
        // The transport state machines start when the QP can first receive (RTR); at RTS the
        // send side takes the attributes that come with that transition (send PSN, local ACK
        // timeout, retry counts), the responder keeping what it received in RTR.
        let rebuild = match (cur, next) {
            (QpState::Init, QpState::Rtr) => true,
            (QpState::Rtr, QpState::Rts) => inner.engine.is_none(),
            _ => false,
        };
        if let (QpState::Rtr, QpState::Rts, Some(e)) = (cur, next, inner.engine.as_mut()) {
            let send = pqp::SendAttrs {
                sq_psn: Psn::new(a.sq_psn),
                timeout: a.timeout,
                retry_cnt: a.retry_cnt,
                rnr_retry: a.rnr_retry,
                max_rd_atomic: core::cmp::max(a.max_rd_atomic, 1),
            };
            e.set_send_attrs(send, &inner.sq.wqes).map_err(|_| EINVAL)?;
            inner.sq.reset();
        }
        // New access rights on a running responder (RTR→RTS, RTS→RTS): the next request is
        // checked against them (revoking remote write on a live QP takes effect).
        if let (false, true, Some(e)) = (
            rebuild,
            mask.contains(QpAttrMask::ACCESS_FLAGS),
            inner.engine.as_mut(),
        ) {
            e.set_access(core_access(a.access));
        }
        if rebuild && native_rc {
            inner.sq.reset();
            if let Some((peer, idx)) = native_bind.take() {
                inner.native = Some(NativeState {
                    peer,
                    stream: Some(idx),
                    head: 0,
                    posted: 0,
                    rq_base: inner.rq.head,
                    local_error: false,
                });
            }
        } else if rebuild {
            let mut cfg = engine_config(qp, inner.sq.depth(), &a);
            if let Some(mtu) = port_mtu {
                cfg.pmtu = mtu;
            }
            let engine = Engine::new(cfg).map_err(|_| EINVAL)?;
            account(qp, inner);
            inner.engine = Some(engine);
            inner.counted = pqp::Stats::default();
            inner.sq.reset();
        }
        inner.attrs = a;
        if next != cur {
            match next {
                // RESET empties both queues without completions.
                QpState::Reset => {
                    inner.rq.drain(|_| {});
                    inner.sq.reset();
                    if let Some(s) = inner.native.take() {
                        n.unbind = s.stream.map(|idx| (s.peer, idx));
                    }
                    account(qp, inner);
                    inner.engine = None;
                    inner.counted = pqp::Stats::default();
                }
                QpState::Err => enter_error(qp, inner, &mut n),
                _ => {}
            }
        }
        inner.state = next;
        Ok(())
    })();
    if let Some((peer, idx)) = native_bind.take() {
        native::unbind(&peer, idx, qp.qpn);
    }
    res?;
    n.deliver(qp);
    // A QP with an SRQ that is put in the error state takes no more requests from it:
    // ib_drain_qp waits for this event (IBA 10.3.1) before draining the CQ.
    if qp.srq().is_some()
        && mask.contains(QpAttrMask::STATE)
        && matches!(attr.qp_state(), Ok(QpState::Err))
    {
        qp.dispatch_event(QpEvent::LastWqeReached);
    }
    if mask.contains(QpAttrMask::STATE) {
        // Make the QP reachable by the receive path once it can receive; it stays so until
        // it is destroyed.
        qp.device().publish_qp(qp);
        // Anything posted earlier (or flushed) may now be sendable.
        xmit::schedule(qp);
    }
    Ok(())
}

pub(crate) fn query_qp(
    qp: &Qp<MetaRoceDriver>,
    attr: &mut QpAttrOut,
    init: &mut QpInitAttrOut,
) -> Result {
    let (state, a) = {
        let g = qp.inner.lock();
        (g.state, g.attrs)
    };
    attr.qp_state(state)
        .path_mtu(a.path_mtu)
        .qkey(a.qkey)
        .rq_psn(a.rq_psn)
        .sq_psn(a.sq_psn)
        .dest_qp_num(a.dest_qpn)
        .access_flags(a.access)
        .cap(qp.cap)
        .pkey_index(a.pkey_index)
        .sq_draining(false)
        .max_rd_atomic(a.max_rd_atomic)
        .max_dest_rd_atomic(a.max_dest_rd_atomic)
        .min_rnr_timer(a.min_rnr_timer)
        .port_num(PORT)
        .timeout(a.timeout)
        .retry_cnt(a.retry_cnt)
        .rnr_retry(a.rnr_retry);
    init.cap(qp.cap).sq_sig_all(qp.sq_sig_all);
    Ok(())
}

/// The core's form of a send work request's operation.
fn core_op(op: &SendOp) -> Result<pwr::SendOp> {
    Ok(match *op {
        SendOp::Send => pwr::SendOp::Send,
        SendOp::SendWithImm { imm } => pwr::SendOp::SendImm { imm },
        SendOp::SendWithInv { rkey } => pwr::SendOp::SendInv { rkey },
        SendOp::RdmaWrite { remote_addr, rkey } => pwr::SendOp::Write {
            va: remote_addr,
            rkey,
        },
        SendOp::RdmaWriteWithImm {
            remote_addr,
            rkey,
            imm,
        } => pwr::SendOp::WriteImm {
            va: remote_addr,
            rkey,
            imm,
        },
        SendOp::RdmaRead { remote_addr, rkey } => pwr::SendOp::Read {
            va: remote_addr,
            rkey,
        },
        SendOp::CmpSwap {
            remote_addr,
            rkey,
            compare,
            swap,
        } => pwr::SendOp::Atomic {
            va: remote_addr,
            rkey,
            op: pwr::AtomicOp::CmpSwap { compare, swap },
        },
        SendOp::FetchAdd {
            remote_addr,
            rkey,
            add,
        } => pwr::SendOp::Atomic {
            va: remote_addr,
            rkey,
            op: pwr::AtomicOp::FetchAdd { add },
        },
        // Carried out by `post_one` before the core queues them.
        SendOp::RegMr { .. } | SendOp::LocalInv { .. } => pwr::SendOp::Local,
        // Masked atomics, flush and other work requests are not offered.
        SendOp::Other(_) => return Err(EINVAL),
    })
}

/// Validates one send work request and hands it to the core.
fn post_one(
    qp: &Qp<MetaRoceDriver>,
    inner: &mut QpInner,
    wr: &SendWr<'_, MetaRoceDriver>,
    n: &mut Notify,
) -> Result {
    let op = wr.op();
    let flags = wr.flags();
    let signaled = qp.sq_sig_all || flags.signaled();
    let sges = wr.sges()?;
    match inner.state {
        QpState::Rts | QpState::Sqd => {}
        // Posting to a QP in error completes the request as flushed (which is how
        // ib_drain_sq learns the queue is empty).
        QpState::Err | QpState::Sqe => {
            let wc = WorkCompletion::new(
                wr.wr_id(),
                WcStatus::WrFlushErr,
                send_wc_opcode(&op),
                qp.id(),
            );
            n.send |= complete(qp, qp.send_cq(), wc, false);
            return Ok(());
        }
        _ => return Err(EINVAL),
    }
    if flags.inline() {
        return Err(EINVAL);
    }
    let cop = core_op(&op)?;
    let (ud, av) = match wr.ud()? {
        Some(d) => (
            Some(pwr::UdDest {
                qpn: d.remote_qpn,
                qkey: d.remote_qkey,
            }),
            Some(d.ah.av),
        ),
        None => (None, None),
    };
    let slot = inner.sq.slot(inner.sq.tail);
    let max_sge = qp.cap.max_send_sge;
    let len = kernel_bufs(qp, sges, max_sge, inner.sq.bufs.slot_mut(slot))?;
    if u64::from(len) > MAX_MSG_SZ {
        return Err(EINVAL);
    }
    let used = match (&inner.native, &inner.engine) {
        (Some(s), _) => inner.sq.tail.wrapping_sub(s.head),
        (None, Some(e)) => e.sq_used(),
        (None, None) => return Err(EINVAL),
    };
    if inner.native.is_some() && (used >= inner.sq.depth() || native_msg(&cop, len, false).is_err())
    {
        // What the native wire cannot carry (see `native_op`).
        return Err(if used >= inner.sq.depth() {
            ENOMEM
        } else {
            EOPNOTSUPP
        });
    }
    if cop == pwr::SendOp::Local {
        // Registration and local invalidate take effect now, in posting order with the
        // requests around them (a consumer may hand out a key only in a later request); the
        // core reports the completion in order. Everything that could refuse the request is
        // checked first, so a refused request has had no effect.
        let connected = matches!(qp.qp_type, QpType::Rc | QpType::Uc);
        if !connected || len != 0 || used >= inner.sq.depth() {
            return Err(if connected && len == 0 {
                ENOMEM
            } else {
                EINVAL
            });
        }
        let pd = qp.pd().ok_or(EINVAL)?.id();
        match op {
            SendOp::RegMr { key, access } => {
                let mr = wr.reg_mr()?.ok_or(EINVAL)?;
                crate::mr::register(mr, pd, key, access)?;
            }
            SendOp::LocalInv { rkey } => {
                qp.device().mr_invalidate(rkey, pd).map_err(|_| EINVAL)?;
            }
            _ => return Err(EINVAL),
        }
    }
    let cwr = pwr::SendWr {
        wr_id: wr.wr_id(),
        op: cop,
        len,
        signaled,
        fence: flags.fence(),
        solicited: flags.solicited(),
        ud,
    };
    let native = if inner.native.is_some() {
        native_slot(&cwr).map_err(|_| EOPNOTSUPP)?
    } else {
        let engine = inner.engine.as_mut().ok_or(EINVAL)?;
        engine
            .post_send(&mut inner.sq.wqes, cwr)
            .map_err(|e| match e {
                crate::proto::req::PostError::QueueFull => ENOMEM,
                _ => EINVAL,
            })?;
        NativeSlot::default()
    };
    inner.sq.side[slot] = SqSide {
        opcode: Some(send_wc_opcode(&op)),
        num_sge: sges.len() as u32,
        inline_len: None,
    };
    inner.sq.set_extra(slot, av, native);
    inner.sq.tail = inner.sq.tail.wrapping_add(1);
    Ok(())
}

/// Posts send work requests. A kernel consumer's post may run with IRQs disabled: no
/// allocation, no sleeping, no transmission (the device's transmit worker sends). A user QP's
/// doorbell comes from the uverbs command in process context and may send some packets itself
/// (`xmit::post_doorbell`).
pub(crate) fn post_send<'a>(
    qp: &Qp<MetaRoceDriver>,
    wrs: SendWrList<'a, MetaRoceDriver>,
) -> Result<(), PostError<SendWr<'a, MetaRoceDriver>>> {
    let mut n = Notify::default();
    let mut res = Ok(());
    let user;
    let mut prefault = false;
    {
        let mut g = qp.inner.lock();
        user = g.sq.user.is_some();
        if user {
            // librxe's doorbell: an empty list; the requests are in the send ring. Before RTS
            // the doorbell fails (librxe's `ibv_post_send` returns the error, as rdma_rxe's).
            match g.state {
                QpState::Rts | QpState::Sqd | QpState::Err | QpState::Sqe => {
                    prefault = drain_user_sq(qp, &mut g, &mut n)
                }
                _ => {
                    res = Err(PostError {
                        error: EINVAL,
                        bad_wr: None,
                    })
                }
            }
        }
        for wr in wrs {
            if let Err(error) = post_one(qp, &mut g, &wr, &mut n) {
                res = Err(PostError {
                    error,
                    bad_wr: Some(wr),
                });
                break;
            }
        }
    }
    n.deliver(qp);
    if user {
        // librxe's doorbell: the uverbs command, process context, no locks held. Pages of
        // on-demand paging buffers the new requests use that were not present are faulted
        // in first, so that the packets can be built.
        if prefault {
            if let Some(pd) = qp.pd() {
                qp.device().odp_faults().run_pd(pd.id());
            }
        }
        xmit::post_doorbell(qp);
    } else {
        xmit::schedule(qp);
    }
    res
}

/// Moves the requests librxe wrote into a user QP's send ring to the core, oldest first, while
/// the core has room (the rest wait in the ring for the next doorbell or completion). A
/// malformed request completes with `IB_WC_LOC_QP_OP_ERR` and moves the QP to the error state.
/// Returns whether faults of on-demand paging buffers were queued for the requests.
fn drain_user_sq(qp: &Qp<MetaRoceDriver>, inner: &mut QpInner, n: &mut Notify) -> bool {
    let mut prefault = false;
    drain_user_sq_into(qp, inner, n, &mut prefault);
    prefault
}

fn drain_user_sq_into(
    qp: &Qp<MetaRoceDriver>,
    inner: &mut QpInner,
    n: &mut Notify,
    prefault: &mut bool,
) {
    let mut raw = [0u8; crate::rxe_abi::SEND_WQE_HDR + USER_MAX_INLINE as usize];
    // At most one ring's worth of entries per call: the process may keep moving the producer
    // index (shared memory) while this runs under the QP's IRQ-off lock. What is left waits for
    // the next doorbell.
    let mut budget = inner.sq.user.as_ref().map_or(0, |q| q.capacity());
    loop {
        if budget == 0 {
            return;
        }
        budget -= 1;
        match inner.state {
            QpState::Rts | QpState::Sqd | QpState::Err | QpState::Sqe => {}
            _ => return,
        }
        let used = match (&inner.native, &inner.engine) {
            (Some(s), _) => inner.sq.tail.wrapping_sub(s.head),
            (None, Some(e)) => e.sq_used(),
            (None, None) => return,
        };
        if used >= inner.sq.depth() {
            return;
        }
        let Some(q) = inner.sq.user.as_ref() else {
            return;
        };
        let len = core::cmp::min(q.geometry().elem_size(), raw.len());
        if !matches!(q.peek(&mut raw[..len]), Ok(Ok(()))) {
            return;
        }
        let slot = inner.sq.slot(inner.sq.tail);
        let max_sge = qp.cap.max_send_sge;
        let per = inner.sq.per_slot;
        let parsed = {
            let data = inner
                .sq
                .data
                .get_mut(slot * per..(slot + 1) * per)
                .unwrap_or(&mut []);
            crate::rxe_abi::parse_send(&raw[..len], qp.qp_type == QpType::Ud, max_sge, data)
        };
        if let Some(q) = inner.sq.user.as_mut() {
            let _ = q.consume();
        }
        // A request refused here completes with its error and moves the QP to the error
        // state; the loop then flushes every request behind it in the ring (as rdma_rxe's
        // `flush_send_queue`): none waits for another doorbell.
        let flushing = matches!(inner.state, QpState::Err | QpState::Sqe);
        let w = match parsed {
            Ok(w) => w,
            Err(_) => {
                let wr_id = u64::from_ne_bytes(raw[..8].try_into().unwrap_or([0; 8]));
                let status = if flushing {
                    WcStatus::WrFlushErr
                } else {
                    WcStatus::LocQpOpErr
                };
                let wc = WorkCompletion::new(wr_id, status, WcOpcode::Send, qp.id());
                n.send |= complete(qp, qp.send_cq(), wc, false);
                if !flushing {
                    enter_error(qp, inner, n);
                }
                continue;
            }
        };
        if flushing {
            let wc = WorkCompletion::new(w.wr_id, WcStatus::WrFlushErr, w.wc_opcode, qp.id());
            n.send |= complete(qp, qp.send_cq(), wc, false);
            continue;
        }
        // The port's largest message, as for kernel posts.
        if u64::from(w.len) > MAX_MSG_SZ {
            let wc = WorkCompletion::new(w.wr_id, WcStatus::LocLenErr, w.wc_opcode, qp.id());
            n.send |= complete(qp, qp.send_cq(), wc, false);
            enter_error(qp, inner, n);
            continue;
        }
        // The local buffers must be registered to the QP's PD, writable where a READ or an
        // atomic places its result: checked now, before anything is sent (a bad L_Key
        // completes with IB_WC_LOC_PROT_ERR and the QP enters the error state).
        let write = matches!(w.op, pwr::SendOp::Read { .. } | pwr::SendOp::Atomic { .. });
        // Pages of on-demand paging buffers that are missing are queued for a fault, which the
        // doorbell runs before it sends.
        let sges_ok = w.inline_len.is_some()
            || inner.sq.bufs_n(slot, w.num_sge).count() == w.num_sge as usize
                && inner.sq.bufs_n(slot, w.num_sge).all(|s| match s {
                    Seg::User { addr, len, lkey } => {
                        len == 0
                            || qp.pd().is_some_and(|pd| {
                                match qp.device().mr_check_local(
                                    lkey,
                                    pd.id(),
                                    addr,
                                    len as usize,
                                    write,
                                ) {
                                    Ok(queued) => {
                                        *prefault |= queued;
                                        true
                                    }
                                    Err(_) => false,
                                }
                            })
                    }
                    Seg::Kernel(_) => false,
                });
        if !sges_ok {
            let wc = WorkCompletion::new(w.wr_id, WcStatus::LocProtErr, w.wc_opcode, qp.id());
            n.send |= complete(qp, qp.send_cq(), wc, false);
            enter_error(qp, inner, n);
            continue;
        }
        // Binding a memory window and local invalidate take effect now, in ring order (as
        // kernel QPs' local operations in `post_one`); the core completes them in order. A
        // refused one completes with its error and moves the QP to the error state, as in
        // rdma_rxe.
        if let Some(local) = &w.local {
            let pd = qp.pd().map(|p| p.id());
            let done = match (local, pd) {
                _ if !matches!(qp.qp_type, QpType::Rc | QpType::Uc) => Err(WcStatus::LocQpOpErr),
                (_, None) => Err(WcStatus::LocQpOpErr),
                (crate::rxe_abi::LocalWqe::Invalidate { rkey }, Some(pd)) => qp
                    .device()
                    .mr_invalidate(*rkey, pd)
                    .map_err(|_| WcStatus::LocQpOpErr),
                (crate::rxe_abi::LocalWqe::Bind(b), Some(pd)) => qp
                    .device()
                    .mw_bind(qp.qpn, pd, b)
                    .map_err(|_| WcStatus::MwBindErr),
            };
            if let Err(status) = done {
                let wc = WorkCompletion::new(w.wr_id, status, w.wc_opcode, qp.id());
                n.send |= complete(qp, qp.send_cq(), wc, false);
                enter_error(qp, inner, n);
                continue;
            }
        }
        // A UD request names a user AH of the QP's PD; its address vector is copied now, so
        // the AH may be destroyed while the request is in flight.
        let (ud, av) = match &w.ud {
            None => (None, None),
            Some(d) => match qp
                .pd()
                .and_then(|pd| qp.device().user_ah(d.ah_num, pd.id()))
            {
                Some(av) => (
                    Some(pwr::UdDest {
                        qpn: d.remote_qpn,
                        qkey: d.remote_qkey,
                    }),
                    Some(av),
                ),
                None => {
                    let wc =
                        WorkCompletion::new(w.wr_id, WcStatus::LocQpOpErr, w.wc_opcode, qp.id());
                    n.send |= complete(qp, qp.send_cq(), wc, false);
                    enter_error(qp, inner, n);
                    continue;
                }
            },
        };
        let cwr = pwr::SendWr {
            wr_id: w.wr_id,
            op: w.op,
            len: w.len,
            signaled: qp.sq_sig_all || w.signaled,
            fence: w.fence,
            solicited: w.solicited,
            ud,
        };
        let native = if inner.native.is_some() {
            // What the native wire cannot carry (see `native_op`) completes in error.
            native_slot(&cwr).ok()
        } else {
            let Some(engine) = inner.engine.as_mut() else {
                return;
            };
            engine
                .post_send(&mut inner.sq.wqes, cwr)
                .is_ok()
                .then(NativeSlot::default)
        };
        let Some(native) = native else {
            let wc = WorkCompletion::new(w.wr_id, WcStatus::LocQpOpErr, w.wc_opcode, qp.id());
            n.send |= complete(qp, qp.send_cq(), wc, false);
            enter_error(qp, inner, n);
            continue;
        };
        inner.sq.side[slot] = SqSide {
            opcode: Some(w.wc_opcode),
            num_sge: w.num_sge,
            inline_len: w.inline_len,
        };
        inner.sq.set_extra(slot, av, native);
        inner.sq.tail = inner.sq.tail.wrapping_add(1);
    }
}

/// Posts receive work requests. Runs with IRQs possibly disabled: no allocation, no sleeping.
pub(crate) fn post_recv<'a>(
    qp: &Qp<MetaRoceDriver>,
    wrs: RecvWrList<'a>,
) -> Result<(), PostError<RecvWr<'a>>> {
    let mut n = Notify::default();
    let mut res = Ok(());
    {
        let mut g = qp.inner.lock();
        let inner = &mut *g;
        for wr in wrs {
            let posted = (|| {
                // A QP with an SRQ takes its receive requests from the SRQ only.
                if qp.srq().is_some() {
                    return Err(EINVAL);
                }
                let sges = wr.sges()?;
                match inner.state {
                    QpState::Reset => Err(EINVAL),
                    QpState::Err => {
                        let wc = WorkCompletion::new(
                            wr.wr_id(),
                            WcStatus::WrFlushErr,
                            WcOpcode::Recv,
                            qp.id(),
                        );
                        n.recv |= complete(qp, qp.recv_cq(), wc, false);
                        Ok(())
                    }
                    _ => {
                        if inner.rq.is_full() {
                            return Err(ENOMEM);
                        }
                        let slot = inner.rq.slot(inner.rq.tail);
                        let len = kernel_bufs(
                            qp,
                            sges,
                            qp.cap.max_recv_sge,
                            inner.rq.bufs.slot_mut(slot),
                        )?;
                        inner.rq.entries[slot] = RecvEntry {
                            wr_id: wr.wr_id(),
                            num_sge: sges.len() as u32,
                            len,
                        };
                        inner.rq.tail = inner.rq.tail.wrapping_add(1);
                        Ok(())
                    }
                }
            })();
            if let Err(error) = posted {
                res = Err(PostError {
                    error,
                    bad_wr: Some(wr),
                });
                break;
            }
        }
    }
    n.deliver(qp);
    res
}

/// The responder's answer to a refused memory access: RNR for on-demand paging memory that is
/// being faulted in, a remote access error for anything else.
fn access_error(e: crate::mr::MrError) -> AccessError {
    match e {
        crate::mr::MrError::NotPresent => AccessError::NotPresent,
        _ => AccessError::Access,
    }
}

/// Memory regions as the responder sees them: R_Keys of user memory regions of the QP's PD
/// (kernel DMA MRs are not in the table: remote operations on them get a remote access NAK).
impl MemAccess for MemCtx<'_> {
    fn check(
        &mut self,
        rkey: u32,
        va: u64,
        len: u32,
        access: pwr::Access,
    ) -> Result<(), AccessError> {
        let pd = self.pd.ok_or(AccessError::Access)?;
        let need = mr_rights(access);
        self.dev
            .mr_check(
                rkey,
                KeyKind::Remote { qpn: self.qpn },
                pd,
                va,
                len as usize,
                need,
            )
            .map_err(access_error)
    }

    /// While the device has on-demand paging regions, READ responses and atomic results are
    /// placed here in the QP's own buffers, in one go with the check that their pages are
    /// present (the core asks again for a response it could not place).
    fn place_response(&mut self, slot: u32, offset: u32, data: &[u8]) -> Result<bool, AccessError> {
        match self.own {
            Some(own) if self.dev.has_odp() => {
                place_now(self, own.bufs(slot as usize), offset, data)
            }
            _ => Ok(false),
        }
    }

    /// While the device has on-demand paging regions, every WRITE packet is placed here, in
    /// one go with the check that its pages are present (a page could go between a separate
    /// check and the copy).
    fn place_write(&mut self, rkey: u32, va: u64, data: &[u8]) -> Result<bool, AccessError> {
        if !self.dev.has_odp() {
            return Ok(false);
        }
        let Some(pd) = self.pd else { return Ok(false) };
        match self
            .dev
            .mr_copy_to(rkey, KeyKind::Remote { qpn: self.qpn }, pd, va, data)
        {
            Ok(()) => Ok(true),
            Err(crate::mr::MrError::NotPresent) => Err(AccessError::NotPresent),
            // Left to the placement, which fails the same way and reports it.
            Err(_) => Ok(false),
        }
    }

    fn atomic(&mut self, rkey: u32, va: u64, op: pwr::AtomicOp) -> Result<u64, AccessError> {
        let pd = self.pd.ok_or(AccessError::Access)?;
        self.dev
            .mr_atomic(
                rkey,
                self.qpn,
                pd,
                va,
                AccessFlags::REMOTE_ATOMIC,
                |old| match op {
                    pwr::AtomicOp::CmpSwap { compare, swap } => (old == compare).then_some(swap),
                    pwr::AtomicOp::FetchAdd { add } => Some(old.wrapping_add(add)),
                },
            )
            .map_err(access_error)
    }

    fn atomic_write(&mut self, rkey: u32, va: u64, value: [u8; 8]) -> Result<(), AccessError> {
        let pd = self.pd.ok_or(AccessError::Access)?;
        self.dev
            .mr_atomic(rkey, self.qpn, pd, va, AccessFlags::REMOTE_WRITE, |_| {
                Some(u64::from_ne_bytes(value))
            })
            .map(|_| ())
            .map_err(access_error)
    }

    fn flush(
        &mut self,
        rkey: u32,
        va: u64,
        len: u32,
        whole: bool,
        access: pwr::Access,
    ) -> Result<(), AccessError> {
        let pd = self.pd.ok_or(AccessError::Access)?;
        self.dev
            .mr_flush(
                rkey,
                self.qpn,
                pd,
                va,
                len as usize,
                whole,
                mr_rights(access),
            )
            .map_err(|_| AccessError::Access)
    }
}

/// The core's remote rights and the `ib_access_flags` bit of each, for QPs and MRs alike.
const RIGHTS: [(pwr::Access, AccessFlags); 5] = [
    (pwr::Access::READ, AccessFlags::REMOTE_READ),
    (pwr::Access::WRITE, AccessFlags::REMOTE_WRITE),
    (pwr::Access::ATOMIC, AccessFlags::REMOTE_ATOMIC),
    (pwr::Access::FLUSH_GLOBAL, AccessFlags::FLUSH_GLOBAL),
    (pwr::Access::FLUSH_PERSISTENT, AccessFlags::FLUSH_PERSISTENT),
];

/// The memory region rights that grant the core's remote `access`.
fn mr_rights(access: pwr::Access) -> AccessFlags {
    RIGHTS
        .into_iter()
        .filter(|(a, _)| access.contains(*a))
        .fold(AccessFlags::NONE, |need, (_, f)| need.union(f))
}

/// The network header of a received packet as a UD receive buffer's 40-byte GRH area holds it:
/// an IPv6 header as is, an IPv4 header in the last 20 bytes (`union rdma_network_hdr`).
fn grh_area(ip: &[u8]) -> Option<([u8; GRH_LEN as usize], u8)> {
    let mut grh = [0u8; GRH_LEN as usize];
    match ip.first().map(|b| b >> 4) {
        Some(4) if ip.len() >= 20 => {
            grh[20..].copy_from_slice(&ip[..20]);
            Some((grh, RDMA_NETWORK_IPV4))
        }
        Some(6) if ip.len() >= 40 => {
            grh.copy_from_slice(&ip[..40]);
            Some((grh, RDMA_NETWORK_IPV6))
        }
        _ => None,
    }
}

/// `RDMA_NETWORK_IPV4` / `RDMA_NETWORK_IPV6` of `enum rdma_network_type`.
const RDMA_NETWORK_IPV4: u8 = 2;
const RDMA_NETWORK_IPV6: u8 = 3;

/// Delivers one received packet (ICRC verified) to `qp`. Softirq context.
///
/// Returns `false` if the packet was dropped without effect (the caller counts it).
pub(crate) fn receive(qp: &Qp<MetaRoceDriver>, pkt: &Packet<'_>, ip: &[u8]) -> bool {
    let mut n = Notify::default();
    let mut ok = true;
    let timed;
    {
        let mut g = qp.inner.lock();
        let inner = &mut *g;
        match inner.state {
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe => {}
            _ => return false,
        }
        // One P_Key per port, the default one; its membership bit may differ.
        if pkt.hdr.bth.pkey & 0x7fff != 0x7fff {
            return false;
        }
        // A connected QP takes packets from its peer's address to its own only (a QP number
        // and PSN are easy to guess: an off-path host must not inject into it).
        if matches!(qp.transport(), Transport::Rc | Transport::Uc) {
            let from_peer = inner
                .attrs
                .av
                .as_ref()
                .is_some_and(|av| packet::from_peer(ip, &av.sgid, &av.dgid));
            if !from_peer {
                qp.device().count(Counter::RcvdBadAddr, 1);
                return false;
            }
        }
        let Some(engine) = inner.engine.as_mut() else {
            return false;
        };
        let now = qp.device().now_ns();
        let mem = MemCtx::of(qp);
        let srq = qp.srq();
        let mut src = RecvSource::new(qp, &mut inner.rq, srq);
        let (wqes, own) = inner.sq.split();
        let out = engine.receive(
            now,
            pkt,
            wqes,
            &mut MemCtx {
                own: Some(own),
                ..mem
            },
            &mut src,
        );
        n.srq_limit |= src.srq_limit;
        // Receive requests of an SRQ name memory of the SRQ's protection domain.
        let rmem = match srq {
            Some(s) => MemCtx {
                pd: Some(s.pd().id()),
                ..mem
            },
            None => mem,
        };
        let ud = qp.transport() == Transport::Ud;
        let mut network_type = 0;
        let mut place_failed = false;
        if let Some(place) = out.place {
            let placed = match place {
                pwr::Place::Recv { id, offset, len } => {
                    // (Outstanding by the responder's order; checked all the same.)
                    let bufs = inner
                        .rq
                        .outstanding(id as u32)
                        .map(|(_, b)| b)
                        .ok_or(EINVAL);
                    let data = pkt.payload.get(..len as usize).ok_or(EINVAL);
                    data.and_then(|d| scatter(&rmem, bufs?.iter().copied(), offset as usize, d))
                }
                pwr::Place::ReadResp { slot, offset, len } => {
                    let bufs = inner.sq.bufs(slot as usize & (inner.sq.wqes.len() - 1));
                    let data = pkt.payload.get(..len as usize).ok_or(EINVAL);
                    data.and_then(|d| scatter(&mem, bufs, offset as usize, d))
                }
                pwr::Place::AtomicResult { slot, value } => {
                    let bufs = inner.sq.bufs(slot as usize & (inner.sq.wqes.len() - 1));
                    scatter(&mem, bufs, 0, &value.to_ne_bytes())
                }
                // Checked by `MemCtx::check` when the WRITE began.
                pwr::Place::Rdma { rkey, va, len } => {
                    match (mem.pd, pkt.payload.get(..len as usize)) {
                        (Some(pd), Some(d)) => mem
                            .dev
                            .mr_copy_to(rkey, KeyKind::Remote { qpn: mem.qpn }, pd, va, d)
                            .map_err(|_| EFAULT),
                        _ => Err(EINVAL),
                    }
                }
            };
            if placed.is_err() {
                qp.device().count(Counter::SendErr, 1);
                place_failed = true;
                // The peer learns why instead of retrying into a broken QP: a receive WQE it
                // could not use is a remote operational error, RDMA memory that became unusable
                // after its check a remote access error (READ responses and atomic results are
                // this QP's own requests: a local error only).
                let code = match place {
                    pwr::Place::Recv { .. } => Some(RoceNak::RemoteOperational),
                    pwr::Place::Rdma { .. } => Some(RoceNak::RemoteAccess),
                    _ => None,
                };
                if let (Some(code), Some(engine)) = (code, inner.engine.as_mut()) {
                    engine.placement_failed(pkt.hdr.bth.psn, code);
                }
                // Our own READ or atomic lost its local buffers: it fails with a local
                // protection error (rdma_rxe's completer does the same), not as flushed.
                if let (
                    pwr::Place::ReadResp { slot, .. } | pwr::Place::AtomicResult { slot, .. },
                    Some(engine),
                ) = (place, inner.engine.as_mut())
                {
                    engine.response_failed(slot, pwr::WcStatus::LocProtErr, &mut inner.sq.wqes);
                }
            }
        }
        if let Some(c) = out.completion {
            let (entry, bufs) = inner.rq.entry(c.id);
            let mut wc = WorkCompletion::new(
                entry.wr_id,
                wc_status(c.status),
                match c.kind {
                    pwr::RecvKind::Send => WcOpcode::Recv,
                    pwr::RecvKind::WriteImm => WcOpcode::RecvRdmaWithImm,
                },
                qp.id(),
            );
            wc.byte_len = c.byte_len;
            wc.imm = c.imm;
            if place_failed && wc.status == WcStatus::Success {
                wc.status = WcStatus::LocProtErr;
            }
            // SEND with invalidate: the named fast-register MR of this QP's PD becomes
            // invalid before the consumer sees the completion. A key that cannot be
            // invalidated fails the receive and breaks the QP (rdma_rxe does the same).
            if let (Some(rkey), WcStatus::Success) = (c.invalidate, wc.status) {
                let done = mem.pd.map(|pd| qp.device().mr_invalidate(rkey, pd));
                if matches!(done, Some(Ok(()))) {
                    wc.invalidate_rkey = Some(rkey);
                } else {
                    wc.status = WcStatus::RemInvReqErr;
                    place_failed = true;
                }
            }
            if ud {
                wc.src_qp = c.src_qp.unwrap_or(0);
                wc.pkey_index = 0;
                if c.status == pwr::WcStatus::Success {
                    match grh_area(ip) {
                        Some((grh, ty)) => {
                            network_type = ty;
                            if scatter(&rmem, bufs.iter().copied(), 0, &grh).is_err() {
                                wc.status = WcStatus::LocLenErr;
                            }
                        }
                        None => wc.status = WcStatus::GeneralErr,
                    }
                    wc.flags = WcFlags::GRH | WcFlags::WITH_NETWORK_HDR_TYPE;
                    wc.network_hdr_type = network_type;
                }
            }
            inner.rq.complete(c.id);
            qp.device().count(Counter::RdmaRecvs, 1);
            n.recv |= complete(qp, qp.recv_cq(), wc, pkt.hdr.bth.solicited);
        }
        if out.drop.is_some() && out.completion.is_none() && out.place.is_none() {
            ok = false;
        }
        // A malformed entry in a user receive ring, or payload that could not be placed,
        // breaks the QP (as a local QP operation / protection error would).
        if inner.rq.user_errors > 0 || place_failed {
            // A malformed receive WQE: the request that needed it is answered with a NAK
            // (remote operational error), not an RNR NAK the peer would retry.
            if inner.rq.user_errors > 0 {
                if let Some(engine) = inner.engine.as_mut() {
                    engine.placement_failed(pkt.hdr.bth.psn, RoceNak::RemoteOperational);
                }
            }
            inner.rq.user_errors = 0;
            if inner.state != QpState::Err {
                enter_error(qp, inner, &mut n);
            }
        }
        timed = settle(qp, inner, &mut n);
    }
    n.deliver(qp);
    if timed {
        timer::arm(qp);
    }
    // Acknowledgements and responses leave through the transmit worker.
    if qp.transport() != Transport::Ud {
        xmit::schedule(qp);
    }
    ok
}

/// One packet pulled from the core, ready for the network: its RoCE payload (BTH to ICRC
/// slot) in an skb and where it goes.
pub(crate) struct OutPacket {
    pub(crate) skb: kernel::net::skbuff::SkBuff,
    pub(crate) av: RoceAv,
    pub(crate) src_qpn: u32,
    pub(crate) dst_qpn: u32,
    /// A native packet (`native.rs`): its UDP source port (the path) and whether it is
    /// ECN-capable; the skb then holds the MetaRoCE header and payload.
    pub(crate) native: Option<(u16, bool)>,
}

impl OutPacket {
    /// A native packet from `peer`'s connection.
    pub(crate) fn native(
        skb: kernel::net::skbuff::SkBuff,
        peer: &Peer,
        src_port: u16,
        ect: bool,
    ) -> Self {
        let av = RoceAv {
            dgid: peer.dgid,
            sgid: peer.sgid,
            sgid_index: 0,
            dmac: [0; 6],
            flow_label: 0,
            hop_limit: 64,
            traffic_class: 0,
            sl: 0,
        };
        Self {
            skb,
            av,
            src_qpn: 0,
            dst_qpn: 0,
            native: Some((src_port, ect)),
        }
    }
}

/// Pulls up to `out.len()` packets from the QP's core into `out` (the transmit worker's
/// batch) and reports the send completions that became ready. Returns the number pulled.
/// Any context (GFP_ATOMIC skbs under the QP lock).
pub(crate) fn pull_tx(
    qp: &Qp<MetaRoceDriver>,
    headroom: usize,
    out: &mut [Option<OutPacket>],
) -> usize {
    if let Some(peer) = native_peer(qp) {
        return native::pull_tx(qp.device(), &peer, headroom, out);
    }
    let mut n = Notify::default();
    let mut got = 0;
    let timed;
    {
        let mut g = qp.inner.lock();
        let inner = &mut *g;
        if !matches!(
            inner.state,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Err | QpState::Sqe
        ) {
            return 0;
        }
        let now = qp.device().now_ns();
        while got < out.len() {
            let Some(engine) = inner.engine.as_mut() else {
                break;
            };
            let Some(d) = engine.poll_tx(now, &mut inner.sq.wqes) else {
                break;
            };
            match build_packet(qp, inner, &d, headroom) {
                Ok(p) => {
                    out[got] = Some(p);
                    got += 1;
                }
                Err(e) => {
                    qp.device().count(Counter::SendErr, 1);
                    if let (BuildError::Gather, PayloadRef::Sq { slot, .. }, Some(engine)) =
                        (e, d.payload, inner.engine.as_mut())
                    {
                        engine.local_error(slot, pwr::WcStatus::LocProtErr, &mut inner.sq.wqes);
                    }
                }
            }
        }
        timed = settle(qp, inner, &mut n);
    }
    n.deliver(qp);
    if timed {
        timer::arm(qp);
    }
    got
}

/// After the core ran (a packet in, packets out, a timer): reports the send completions it has
/// ready, moves the QP to the error state if the core entered it, and returns whether the core
/// waits for a deadline (local ACK timeout or RNR retry), i.e. whether the QP needs the timer.
fn settle(qp: &Qp<MetaRoceDriver>, inner: &mut QpInner, n: &mut Notify) -> bool {
    reap_send(qp, inner, n);
    if inner.engine.as_ref().is_some_and(|e| e.is_error()) && inner.state != QpState::Err {
        enter_error(qp, inner, n);
    }
    inner
        .engine
        .as_ref()
        .is_some_and(|e| e.next_deadline().is_some())
}

/// Runs the QP's core timers if a deadline passed and lets the transmit worker send what they
/// queued (retransmissions), reporting the completions they produced (retry exhaustion). Called
/// by the device's timer tick (`timer.rs`), process context. Returns whether a deadline is still
/// pending.
pub(crate) fn on_tick(qp: &Qp<MetaRoceDriver>) -> bool {
    if let Some(peer) = native_peer(qp) {
        let (fired, pending) = native::on_tick(qp.device(), &peer);
        if fired {
            xmit::schedule(qp);
        }
        return pending;
    }
    let mut n = Notify::default();
    let mut fired = false;
    let timed;
    {
        let mut g = qp.inner.lock();
        let inner = &mut *g;
        let now = qp.device().now_ns();
        if let Some(engine) = inner.engine.as_mut() {
            if engine.next_deadline().is_some_and(|d| d <= now) {
                engine.on_timer(now, &mut inner.sq.wqes);
                fired = true;
            }
        }
        timed = settle(qp, inner, &mut n);
    }
    n.deliver(qp);
    if fired {
        xmit::schedule(qp);
    }
    timed
}

/// Why no packet was built.
#[derive(Clone, Copy)]
pub(crate) enum BuildError {
    /// The send request's local data could not be read: its memory region was deregistered
    /// (or lost local access) after the request was posted. The request fails with a local
    /// protection error.
    Gather,
    /// Anything else (no memory for the skb): the packet is dropped and sent again by the
    /// transport's retry.
    Drop,
}

impl From<Error> for BuildError {
    fn from(_: Error) -> Self {
        BuildError::Drop
    }
}

fn build_packet(
    qp: &Qp<MetaRoceDriver>,
    inner: &mut QpInner,
    d: &TxDesc,
    headroom: usize,
) -> core::result::Result<OutPacket, BuildError> {
    let plen = d.payload.len() as usize;
    let (av, dst_qpn) = if qp.transport() == Transport::Ud {
        // One packet per datagram work request, in posting order.
        let slot = inner.sq.slot(inner.sq.ud_sent);
        inner.sq.ud_sent = inner.sq.ud_sent.wrapping_add(1);
        (
            inner.sq.avs.get(slot).copied().flatten().ok_or(EINVAL)?,
            d.hdr.bth.dest_qp,
        )
    } else {
        (inner.attrs.av.ok_or(EINVAL)?, d.hdr.bth.dest_qp)
    };
    let total = crate::proto::packet::wire_len(&d.hdr, plen).ok_or(EINVAL)?;
    let mut skb = kernel::net::skbuff::SkBuff::alloc(headroom + total, GFP_ATOMIC)?;
    skb.reserve(headroom)?;
    let buf = skb.put(total)?;
    let hl = crate::proto::packet::write_headers(&d.hdr, plen, buf).map_err(|_| EINVAL)?;
    let end = hl.checked_add(plen).ok_or(EINVAL)?;
    let mem = MemCtx::of(qp);
    match d.payload {
        PayloadRef::None => {}
        PayloadRef::Sq {
            slot,
            offset,
            len: _,
        } => {
            let slot = slot as usize & (inner.sq.wqes.len() - 1);
            match inner.sq.inline(slot) {
                Some(data) => {
                    let src = data
                        .get(offset as usize..offset as usize + plen)
                        .ok_or(EINVAL)?;
                    buf[hl..end].copy_from_slice(src);
                }
                // On-demand paging memory that is not present (a fault was asked for): the
                // packet is dropped and the transport's retry sends it again.
                None => gather(
                    &mem,
                    inner.sq.bufs(slot),
                    offset as usize,
                    &mut buf[hl..end],
                )
                .map_err(|e| {
                    if e == EAGAIN {
                        BuildError::Drop
                    } else {
                        BuildError::Gather
                    }
                })?,
            }
        }
        // READ response data, from memory `MemCtx::check` approved when the READ arrived.
        PayloadRef::Mr { rkey, va, len: _ } => {
            let pd = mem.pd.ok_or(EINVAL)?;
            mem.dev
                .mr_copy_from(
                    rkey,
                    KeyKind::Remote { qpn: mem.qpn },
                    pd,
                    va,
                    &mut buf[hl..end],
                )
                .map_err(|_| EFAULT)?;
        }
    }
    // Pad and ICRC slot.
    buf[end..].fill(0);
    Ok(OutPacket {
        skb,
        av,
        src_qpn: qp.qpn,
        dst_qpn,
        native: None,
    })
}

// Native RC QPs (`native.rs`): the QP keeps its work requests; the connection moves them.

/// The connection of a native RC QP (also after its stream closed: its transmit runs and
/// timer ticks still drive the connection).
fn native_peer(qp: &Qp<MetaRoceDriver>) -> Option<Arc<Peer>> {
    if !(qp.device().native && qp.qp_type == QpType::Rc) {
        return None;
    }
    qp.inner.lock().native.as_ref().map(|s| s.peer.clone())
}

/// The connection's form of a send request: the message, or `None` for a local operation
/// (done when posted). `Err` for what the native wire does not carry yet.
fn native_msg(
    op: &pwr::SendOp,
    len: u32,
    solicited: bool,
) -> core::result::Result<Option<MsgDesc>, ()> {
    Ok(native_op(op, len, solicited)?.map(|(m, _)| m))
}

/// The message and an atomic's operands.
fn native_op(
    op: &pwr::SendOp,
    len: u32,
    solicited: bool,
) -> core::result::Result<Option<(MsgDesc, (u64, u64))>, ()> {
    let (op, va, rkey, imm, operands) = match *op {
        pwr::SendOp::Send => (MrcOp::Send, 0, 0, 0, (0, 0)),
        pwr::SendOp::SendImm { imm } => (MrcOp::SendImm, 0, 0, imm, (0, 0)),
        pwr::SendOp::Write { va, rkey } => (MrcOp::Write, va, rkey, 0, (0, 0)),
        pwr::SendOp::WriteImm { va, rkey, imm } => (MrcOp::WriteImm, va, rkey, imm, (0, 0)),
        pwr::SendOp::Read { va, rkey } => (MrcOp::Read, va, rkey, 0, (0, 0)),
        // The 8-byte result lands in the request's local buffer.
        pwr::SendOp::Atomic {
            va,
            rkey,
            op: pwr::AtomicOp::CmpSwap { compare, swap },
        } if len == 8 => (MrcOp::CmpSwap, va, rkey, 0, (compare, swap)),
        pwr::SendOp::Atomic {
            va,
            rkey,
            op: pwr::AtomicOp::FetchAdd { add },
        } if len == 8 => (MrcOp::FetchAdd, va, rkey, 0, (add, 0)),
        // ATOMIC WRITE: one 8-byte packet, placed by a single copy of the aligned word.
        pwr::SendOp::AtomicWrite { va, rkey } if len == 8 && va % 8 == 0 => {
            (MrcOp::Write, va, rkey, 0, (0, 0))
        }
        // The key to invalidate travels in the RKey field (transport.rst, section 9.2).
        pwr::SendOp::SendInv { rkey } => (MrcOp::SendInv, 0, rkey, 0, (0, 0)),
        pwr::SendOp::Local => return Ok(None),
        // UD-only and malformed requests (an atomic whose buffer is not 8 bytes, an unaligned
        // ATOMIC WRITE) have no native form, nor has FLUSH (native devices do not report
        // IB_DEVICE_FLUSH_GLOBAL, so no MR of theirs grants it).
        _ => return Err(()),
    };
    Ok(Some((
        MsgDesc {
            op,
            len,
            va,
            rkey,
            imm,
            se: solicited,
        },
        operands,
    )))
}

fn native_slot(w: &pwr::SendWr) -> core::result::Result<NativeSlot, ()> {
    let m = native_op(&w.op, w.len, w.solicited)?;
    Ok(NativeSlot {
        wr_id: w.wr_id,
        signaled: w.signaled,
        msg: m.map(|(m, _)| m),
        operands: m.map_or((0, 0), |(_, o)| o),
        msn: 0,
        done: if m.is_none() {
            Some(WcStatus::Success)
        } else {
            None
        },
    })
}

/// Reports the send requests that are done, oldest first (posting order). Returns whether it
/// reported the request that failed locally ([`NativeState::local_error`]): the caller then
/// moves the QP to the error state.
fn native_retire(qp: &Qp<MetaRoceDriver>, inner: &mut QpInner, n: &mut Notify) -> bool {
    let QpInner { native, sq, .. } = inner;
    let Some(s) = native.as_mut() else {
        return false;
    };
    while s.head != s.posted {
        let slot = sq.slot(s.head);
        let Some(status) = sq.nslot(slot).done else {
            break;
        };
        report_native_send(qp, sq, slot, status, n);
        s.head = s.head.wrapping_add(1);
        if s.local_error && status == WcStatus::LocProtErr {
            return true;
        }
    }
    false
}

fn report_native_send(
    qp: &Qp<MetaRoceDriver>,
    sq: &SendRing,
    slot: usize,
    status: WcStatus,
    n: &mut Notify,
) {
    let dev = qp.device();
    let ns = sq.nslot(slot);
    match status {
        WcStatus::Success if ns.msg.is_some() => dev.count(Counter::RdmaSends, 1),
        WcStatus::RetryExcErr => dev.count(Counter::RetryExceededErr, 1),
        _ => {}
    }
    if ns.signaled || status != WcStatus::Success {
        let opcode = sq
            .side
            .get(slot)
            .and_then(|s| s.opcode)
            .unwrap_or(WcOpcode::Send);
        let mut wc = WorkCompletion::new(ns.wr_id, status, opcode, qp.id());
        wc.byte_len = ns.msg.map_or(0, |m| m.len);
        n.send |= complete(qp, qp.send_cq(), wc, false);
    }
}

/// The error state of a native QP: completions already known are reported, every other
/// request is flushed, in posting order; the stream is given back (by `n`).
fn native_flush(qp: &Qp<MetaRoceDriver>, inner: &mut QpInner, n: &mut Notify) {
    native_retire(qp, inner, n);
    let QpInner { native, sq, .. } = inner;
    let Some(s) = native.as_mut() else { return };
    while s.head != sq.tail {
        let slot = sq.slot(s.head);
        report_native_send(
            qp,
            sq,
            slot,
            sq.nslot(slot).done.unwrap_or(WcStatus::WrFlushErr),
            n,
        );
        s.head = s.head.wrapping_add(1);
    }
    s.posted = s.head;
    if let Some(idx) = s.stream.take() {
        n.unbind = Some((s.peer.clone(), idx));
    }
}

/// Hands the requests posted to `qp` (stream `idx`) to the connection, as far as it takes
/// them, and reports those done. Returns `false` if the QP is not on that stream any more
/// (or broke now): the caller closes the stream. Called under the connection's lock.
pub(crate) fn native_feed(
    qp: &Qp<MetaRoceDriver>,
    idx: usize,
    conn: &mut native::NativeConn,
    n: &mut Notify,
) -> bool {
    let mut g = qp.inner.lock();
    let inner = &mut *g;
    if !inner.native.as_ref().is_some_and(|s| s.stream == Some(idx)) {
        return false;
    }
    if inner.sq.user.is_some() {
        drain_user_sq(qp, inner, n);
    }
    let mut broke = false;
    {
        let QpInner { native, sq, .. } = &mut *inner;
        let Some(s) = native.as_mut() else {
            return false;
        };
        if s.stream != Some(idx) {
            return false;
        }
        // After a local error nothing more goes to the connection (the rest is flushed).
        while s.posted != sq.tail && !s.local_error {
            let slot = sq.slot(s.posted);
            let Some(side) = sq.native.get_mut(slot) else {
                broke = true;
                break;
            };
            if let Some(m) = side.msg {
                let posted = if m.op.is_atomic() {
                    conn.post_atomic(idx, m.op, m.va, m.rkey, side.operands.0, side.operands.1)
                } else {
                    conn.post(idx, m)
                };
                match posted {
                    Ok(msn) => side.msn = msn,
                    // `K` messages in flight: the rest waits for completions.
                    Err(NativePostError::Full) => break,
                    Err(_) => {
                        broke = true;
                        break;
                    }
                }
            }
            s.posted = s.posted.wrapping_add(1);
        }
    }
    if native_retire(qp, inner, n) || broke {
        enter_error(qp, inner, n);
        return false;
    }
    true
}

/// Copies `out.len()` bytes at `offset` of message `msn` of `qp` (stream `idx`) into `out`.
///
/// A READ response (`mr`) is read from the QP's memory at the key and address the core names
/// (checked when the request arrived; checked again here, as the region may have changed).
pub(crate) fn native_payload(
    qp: &Qp<MetaRoceDriver>,
    idx: usize,
    msn: u32,
    offset: u32,
    mr: Option<MrRef>,
    out: &mut [u8],
) -> core::result::Result<(), BuildError> {
    let g = qp.inner.lock();
    let s = g
        .native
        .as_ref()
        .filter(|s| s.stream == Some(idx))
        .ok_or(ENOENT)?;
    if let Some(m) = mr {
        let pd = qp.pd().ok_or(EINVAL)?.id();
        let kind = KeyKind::Remote { qpn: qp.qpn };
        let dev = qp.device();
        dev.mr_check(m.rkey, kind, pd, m.va, out.len(), AccessFlags::REMOTE_READ)
            .map_err(|_| EACCES)?;
        return Ok(dev
            .mr_copy_from(m.rkey, kind, pd, m.va, out)
            .map_err(|_| EFAULT)?);
    }
    let slot = native_msg_slot(s, &g.sq, msn, |_| true).ok_or(ENOENT)?;
    let off = offset as usize;
    match g.sq.inline(slot) {
        Some(data) => {
            let src = data.get(off..off + out.len()).ok_or(EINVAL)?;
            out.copy_from_slice(src);
            Ok(())
        }
        None => {
            let mem = MemCtx::of(qp);
            gather(&mem, g.sq.bufs(slot), off, out).map_err(|_| BuildError::Gather)
        }
    }
}

/// The local data of message `msn` of `qp` (stream `idx`) could not be read
/// ([`BuildError::Gather`]): the request completes with a local protection error and the QP
/// enters the error state (flushing the rest) once every request before it has completed;
/// until then nothing more goes to the connection ([`NativeState::local_error`]). A later
/// request failing meanwhile is flushed with the rest. Returns `false` if the QP left the
/// stream (it did now, or had before): the caller closes the stream. Called under the
/// connection's lock.
pub(crate) fn native_local_error(
    qp: &Qp<MetaRoceDriver>,
    idx: usize,
    msn: u32,
    n: &mut Notify,
) -> bool {
    let mut g = qp.inner.lock();
    let inner = &mut *g;
    let Some(s) = inner.native.as_ref().filter(|s| s.stream == Some(idx)) else {
        return false;
    };
    if s.local_error {
        return true;
    }
    let slot = native_msg_slot(s, &inner.sq, msn, |_| true);
    let marked = slot
        .and_then(|slot| inner.sq.native.get_mut(slot))
        .is_some_and(|ns| {
            if ns.done.is_some() {
                return false;
            }
            ns.done = Some(WcStatus::LocProtErr);
            true
        });
    if let (true, Some(s)) = (marked, inner.native.as_mut()) {
        s.local_error = true;
    }
    // Not among the requests waiting (or done already): the QP breaks now, as before.
    if !marked || native_retire(qp, inner, n) {
        enter_error(qp, inner, n);
        return false;
    }
    true
}

/// The send queue slot of message `msn` among the requests handed to the connection and not
/// completed, if its message passes `what`.
fn native_msg_slot(
    s: &NativeState,
    sq: &SendRing,
    msn: u32,
    what: impl Fn(&MsgDesc) -> bool,
) -> Option<usize> {
    let mut i = s.head;
    while i != s.posted {
        let slot = sq.slot(i);
        let side = sq.nslot(slot);
        if side.msg.is_some_and(|m| what(&m)) && side.msn == msn {
            return Some(slot);
        }
        i = i.wrapping_add(1);
    }
    None
}

/// Whether `qp` can take the DATA packet `h` now: a receive-consuming message needs its
/// posted receive (taken from the receive ring or SRQ here, in order). Without one the
/// packet is dropped unacknowledged and sent again later (receiver not ready).
pub(crate) fn native_ready(qp: &Qp<MetaRoceDriver>, h: &DataHdr, n: &mut Notify) -> bool {
    if !h.op.consumes_recv() {
        return true;
    }
    let mut g = qp.inner.lock();
    let inner = &mut *g;
    let Some(base) = inner.native.as_ref().map(|s| s.rq_base) else {
        return true;
    };
    let id = base.wrapping_add(h.rsn);
    let srq = qp.srq();
    let mut src = RecvSource::new(qp, &mut inner.rq, srq);
    // Taken already (or completed: a duplicate, which the connection recognises).
    let mut ok = (id.wrapping_sub(src.rq.taken) as i32) < 0;
    while !ok {
        if src.take().is_none() {
            break;
        }
        ok = (id.wrapping_sub(src.rq.taken) as i32) < 0;
    }
    n.srq_limit |= src.srq_limit;
    if inner.rq.user_errors > 0 {
        inner.rq.user_errors = 0;
        enter_error(qp, inner, n);
        return false;
    }
    if !ok {
        qp.device().count(Counter::SendRnrErr, 1);
    }
    ok
}

/// How a new DATA packet of a native QP was placed.
pub(crate) enum Placed {
    /// Its payload is in place.
    Done,
    /// The peer's request is refused with this code (a WRITE's key, range or rights, a SEND
    /// longer than its receive): nothing was written; the caller NAKs the message.
    Refuse(NakCode),
    /// The QP broke (a receive request naming bad memory, our own response buffers): it
    /// entered the error state; the caller closes its stream.
    Broken,
}

/// Places the payload of a new DATA packet of `qp` (stream `idx`).
pub(crate) fn native_place(
    qp: &Qp<MetaRoceDriver>,
    idx: usize,
    p: &NativePlace,
    data: &[u8],
    n: &mut Notify,
) -> Placed {
    let mut g = qp.inner.lock();
    let inner = &mut *g;
    let Some(base) = inner
        .native
        .as_ref()
        .filter(|s| s.stream == Some(idx))
        .map(|s| s.rq_base)
    else {
        return Placed::Broken;
    };
    let mut refuse = None;
    let mem = MemCtx::of(qp);
    let placed = (|| -> Result {
        let d = data.get(..usize::from(p.len)).ok_or(EINVAL)?;
        if matches!(p.op, MrcOp::ReadResp | MrcOp::AtomicResp) {
            // The response to our READ or atomic `msn`: into that request's local buffers.
            let s = inner.native.as_ref().ok_or(EINVAL)?;
            let is_request = |m: &MsgDesc| m.op == MrcOp::Read || m.op.is_atomic();
            let slot = native_msg_slot(s, &inner.sq, p.msn, is_request).ok_or(ENOENT)?;
            let placed = if p.op == MrcOp::ReadResp {
                scatter(&mem, inner.sq.bufs(slot), p.offset as usize, d)
            } else {
                scatter(&mem, inner.sq.bufs(slot), 0, &p.va.to_ne_bytes())
            };
            // Its local buffers went away: the request fails with a local protection error
            // (the QP breaks below, flushing the others).
            if placed.is_err() {
                if let Some(ns) = inner.sq.native.get_mut(slot) {
                    ns.done.get_or_insert(WcStatus::LocProtErr);
                }
            }
            return placed;
        }
        if p.op.is_write() {
            // The QP must allow remote writes, and the key name writable memory.
            refuse = Some(NakCode::RemoteAccess);
            if !inner.attrs.access.contains(AccessFlags::REMOTE_WRITE) {
                return Err(EACCES);
            }
            let pd = mem.pd.ok_or(EINVAL)?;
            let va = p.va.wrapping_add(u64::from(p.offset));
            let kind = KeyKind::Remote { qpn: mem.qpn };
            // The whole message's range, on every packet: a message that does not fit is refused
            // by each of its packets, whatever order they come in, and nothing of it is written
            // (this packet's bytes lie within it: the parser checked offset + len <= msg_len).
            let whole = usize::try_from(p.msg_len).map_err(|_| EINVAL)?;
            mem.dev
                .mr_check(p.rkey, kind, pd, p.va, whole, AccessFlags::REMOTE_WRITE)
                .map_err(|_| EACCES)?;
            return mem
                .dev
                .mr_copy_to(p.rkey, kind, pd, va, d)
                .map_err(|_| EFAULT);
        }
        let id = base.wrapping_add(p.rsn);
        // Only a receive handed to the connection and not completed may be written: a
        // completed one's buffers are the consumer's again (the stream's Rsn window keeps a
        // genuine peer inside this range; anything else breaks the QP).
        let (entry, bufs) = inner.rq.outstanding(id).ok_or(EINVAL)?;
        // The whole message must fit its receive (checked on every packet, as for writes).
        let end = u64::from(p.offset) + d.len() as u64;
        if end > u64::from(entry.len) || u64::from(p.msg_len) > u64::from(entry.len) {
            refuse = Some(NakCode::InvalidRequest);
            return Err(EMSGSIZE);
        }
        let rmem = match qp.srq() {
            Some(s) => MemCtx {
                pd: Some(s.pd().id()),
                ..mem
            },
            None => mem,
        };
        // A receive whose buffers cannot be written (their MR was deregistered): the message
        // is refused as a remote operational error, as on the RoCEv2 path, rather than
        // breaking the QP silently (its stream would then acknowledge the rest unplaced).
        refuse = Some(NakCode::RemoteOperation);
        scatter(&rmem, bufs.iter().copied(), p.offset as usize, d)?;
        // SEND with invalidate: the packet that completed the message names the key, once
        // (section 9.2); it becomes invalid before the connection lock is released, so before
        // the receive completes and before any later message of the peer is placed. A key
        // this QP may not invalidate refuses the message (the receive completes in error).
        if let Some(rkey) = p.invalidate {
            refuse = Some(NakCode::InvalidRequest);
            let pd = mem.pd.ok_or(EINVAL)?;
            mem.dev.mr_invalidate(rkey, pd).map_err(|_| EINVAL)?;
        }
        Ok(())
    })();
    match (placed, refuse) {
        (Ok(()), _) => Placed::Done,
        (Err(_), Some(code)) => {
            qp.device().count(Counter::RcvdDropped, 1);
            Placed::Refuse(code)
        }
        (Err(_), None) => {
            qp.device().count(Counter::RcvdDropped, 1);
            enter_error(qp, inner, n);
            Placed::Broken
        }
    }
}

/// Turns a completion of the connection for `qp` (stream `idx`) into a work completion.
/// Returns `false` if the QP is not on that stream any more or broke now (a send that
/// exhausted its retries): the caller closes the stream.
pub(crate) fn native_completion(
    qp: &Qp<MetaRoceDriver>,
    idx: usize,
    c: &NativeCompletion,
    n: &mut Notify,
) -> bool {
    let mut g = qp.inner.lock();
    let inner = &mut *g;
    let Some((head, posted, rq_base)) = inner
        .native
        .as_ref()
        .filter(|s| s.stream == Some(idx))
        .map(|s| (s.head, s.posted, s.rq_base))
    else {
        return false;
    };
    match *c {
        NativeCompletion::Send { msn, status, .. } => {
            let mut i = head;
            while i != posted {
                let slot = inner.sq.slot(i);
                let Some(side) = inner.sq.native.get_mut(slot) else {
                    break;
                };
                if side.msg.is_some() && side.done.is_none() {
                    if side.msn == msn {
                        side.done = Some(match status {
                            SendStatus::Ok => WcStatus::Success,
                            SendStatus::RetryExceeded => WcStatus::RetryExcErr,
                            SendStatus::Flushed => WcStatus::WrFlushErr,
                            SendStatus::RemoteAccess => WcStatus::RemAccessErr,
                            SendStatus::RemoteInvalid => WcStatus::RemInvReqErr,
                            SendStatus::RemoteOperation => WcStatus::RemOpErr,
                        });
                    }
                    break;
                }
                i = i.wrapping_add(1);
            }
            if native_retire(qp, inner, n) || status != SendStatus::Ok {
                enter_error(qp, inner, n);
                return false;
            }
            true
        }
        NativeCompletion::Recv { done, .. } => {
            // A plain WRITE holds the order but completes nothing here (also when refused:
            // the requester got the NAK).
            if !done.op.consumes_recv() {
                return true;
            }
            // A refused SEND (too long) or WRITE with immediate (bad key) completes its
            // receive in error and breaks the QP, as a responder error does in verbs.
            if let Some(code) = done.refused {
                let id = rq_base.wrapping_add(done.rsn);
                if id == inner.rq.head && inner.rq.head != inner.rq.taken {
                    let (entry, _) = inner.rq.entry(u64::from(id));
                    let status = match code {
                        // A SEND with invalidate that fitted was refused for its key.
                        NakCode::InvalidRequest
                            if done.op.invalidates() && done.len <= entry.len =>
                        {
                            WcStatus::RemInvReqErr
                        }
                        NakCode::InvalidRequest => WcStatus::LocLenErr,
                        _ => WcStatus::LocProtErr,
                    };
                    let opcode = if done.op.is_write() {
                        WcOpcode::RecvRdmaWithImm
                    } else {
                        WcOpcode::Recv
                    };
                    let wc = WorkCompletion::new(entry.wr_id, status, opcode, qp.id());
                    inner.rq.complete(u64::from(id));
                    n.recv |= complete(qp, qp.recv_cq(), wc, false);
                }
                enter_error(qp, inner, n);
                return false;
            }
            let id = rq_base.wrapping_add(done.rsn);
            if id != inner.rq.head || inner.rq.head == inner.rq.taken {
                // Receive completions come in Rsn order from requests taken in order.
                qp.device().count(Counter::RcvdDropped, 1);
                enter_error(qp, inner, n);
                return false;
            }
            let (entry, _) = inner.rq.entry(u64::from(id));
            let opcode = if done.op.is_write() {
                WcOpcode::RecvRdmaWithImm
            } else {
                WcOpcode::Recv
            };
            let mut wc = WorkCompletion::new(entry.wr_id, WcStatus::Success, opcode, qp.id());
            wc.byte_len = done.len;
            wc.imm = done.op.has_imm().then_some(done.imm);
            wc.invalidate_rkey = done.invalidated;
            inner.rq.complete(u64::from(id));
            qp.device().count(Counter::RdmaRecvs, 1);
            n.recv |= complete(qp, qp.recv_cq(), wc, done.se);
            true
        }
    }
}

/// The responder's answer to the peer's READ or atomic request on `qp` (stream `idx`): the QP
/// must allow the access and the key name memory with that right; an atomic is carried out
/// here (the word's original value goes back). Called under the connection's lock.
pub(crate) fn native_request(
    qp: &Qp<MetaRoceDriver>,
    idx: usize,
    r: &NativeRequest,
) -> NativeResponse {
    let g = qp.inner.lock();
    if !g.native.as_ref().is_some_and(|s| s.stream == Some(idx)) {
        return NativeResponse::Nak(NakCode::RemoteOperation);
    }
    let (need, qp_ok) = if r.op == MrcOp::Read {
        (
            AccessFlags::REMOTE_READ,
            g.attrs.access.contains(AccessFlags::REMOTE_READ),
        )
    } else {
        (
            AccessFlags::REMOTE_ATOMIC,
            g.attrs.access.contains(AccessFlags::REMOTE_ATOMIC),
        )
    };
    drop(g);
    let Some(pd) = qp.pd().map(|p| p.id()) else {
        return NativeResponse::Nak(NakCode::RemoteOperation);
    };
    if !qp_ok {
        return NativeResponse::Nak(NakCode::RemoteAccess);
    }
    let dev = qp.device();
    let kind = KeyKind::Remote { qpn: qp.qpn };
    match r.op {
        MrcOp::Read => match dev.mr_check(r.rkey, kind, pd, r.va, r.len as usize, need) {
            Ok(()) => NativeResponse::Read,
            Err(_) => NativeResponse::Nak(NakCode::RemoteAccess),
        },
        MrcOp::CmpSwap | MrcOp::FetchAdd => {
            let (op, a, b) = (r.op, r.compare_add, r.swap);
            let done = dev.mr_atomic(r.rkey, qp.qpn, pd, r.va, need, |old| match op {
                MrcOp::CmpSwap => (old == a).then_some(b),
                _ => Some(old.wrapping_add(a)),
            });
            match done {
                Ok(old) => NativeResponse::Atomic(old),
                Err(_) => NativeResponse::Nak(NakCode::RemoteAccess),
            }
        }
        _ => NativeResponse::Nak(NakCode::InvalidRequest),
    }
}
