// SPDX-License-Identifier: GPL-2.0

//! A QP's queues: the receive ring (fed by the consumer, a user ring or an SRQ) with the
//! responder's view of it, and the send ring (the core's slots and what the glue keeps per
//! request). Kernel requests keep their buffers ([`KernelBuf`]) and tickets here until they
//! complete.

use super::*;

/// A fixed pool of `depth * max_sge` buffer slots, `max_sge` per queue entry, and for a kernel
/// QP each entry's ticket (its completion carries it, see `kernel::rdma::ticket`).
pub(super) struct BufPool {
    pub(super) bufs: KVec<Seg>,
    pub(super) max_sge: usize,
    /// Kernel QPs: the ticket of each entry's request (empty for user QPs).
    pub(super) tickets: KVec<Option<Ticket>>,
}

impl BufPool {
    pub(super) fn new(depth: usize, max_sge: u32, kernel: bool) -> Result<Self> {
        let max_sge = core::cmp::max(max_sge as usize, 1);
        let n = depth.checked_mul(max_sge).ok_or(EINVAL)?;
        let mut bufs = KVec::with_capacity(n, GFP_KERNEL_ACCOUNT)?;
        for _ in 0..n {
            bufs.push(Seg::default(), GFP_KERNEL_ACCOUNT)?;
        }
        let mut tickets = KVec::new();
        if kernel {
            tickets.reserve(depth, GFP_KERNEL_ACCOUNT)?;
            for _ in 0..depth {
                tickets.push(None, GFP_KERNEL_ACCOUNT)?;
            }
        }
        Ok(Self {
            bufs,
            max_sge,
            tickets,
        })
    }

    /// No buffer slots (the send queue of a user QP keeps its SGEs as bytes).
    pub(super) fn none() -> Self {
        Self {
            bufs: KVec::new(),
            max_sge: 0,
            tickets: KVec::new(),
        }
    }

    /// Keeps the ticket of the request in `slot`.
    pub(super) fn set_ticket(&mut self, slot: usize, t: Ticket) {
        if let Some(s) = self.tickets.get_mut(slot) {
            *s = Some(t);
        }
    }

    /// The ticket of the request in `slot`, for its completion.
    pub(super) fn take_ticket(&mut self, slot: usize) -> Option<Ticket> {
        self.tickets.get_mut(slot)?.take()
    }

    pub(super) fn slot_mut(&mut self, slot: usize) -> &mut [Seg] {
        let base = slot * self.max_sge;
        self.bufs
            .get_mut(base..base + self.max_sge)
            .unwrap_or(&mut [])
    }

    pub(super) fn get(&self, slot: usize, n: u32) -> &[Seg] {
        let base = slot * self.max_sge;
        self.bufs
            .get(base..base + core::cmp::min(n as usize, self.max_sge))
            .unwrap_or(&[])
    }

    /// Drops the buffers of `slot`: its request completed (or was flushed or discarded), and
    /// its kernel buffers are the consumer's again.
    pub(super) fn release(&mut self, slot: usize) {
        for s in self.slot_mut(slot) {
            *s = Seg::default();
        }
        let _ = self.take_ticket(slot);
    }

    /// Drops the buffers of every slot.
    pub(super) fn release_all(&mut self) {
        for s in self.bufs.iter_mut() {
            *s = Seg::default();
        }
        for t in self.tickets.iter_mut() {
            *t = None;
        }
    }
}

/// A posted receive work request.
#[derive(Clone, Copy, Default)]
pub(super) struct RecvEntry {
    pub(super) wr_id: u64,
    pub(super) num_sge: u32,
    pub(super) len: u32,
}

/// The receive queue: entries `head..tail` (ring counters, depth a power of two) are posted
/// and not completed; `head..taken` were handed to the responder, which completes them in
/// order.
pub(super) struct RecvRing {
    pub(super) entries: KVec<RecvEntry>,
    pub(super) bufs: BufPool,
    pub(super) head: u32,
    pub(super) taken: u32,
    pub(super) tail: u32,
    /// User QPs: librxe's receive ring, which the process fills without a system call; the
    /// responder's `take` moves its oldest entry here.
    pub(super) user: Option<UQueue>,
    pub(super) max_sge: u32,
    /// Malformed entries found in the user ring (the QP then goes to the error state).
    pub(super) user_errors: u32,
}

impl RecvRing {
    pub(super) fn new(max_wr: u32, max_sge: u32, kernel: bool) -> Result<Self> {
        let depth = core::cmp::max(max_wr, 1).next_power_of_two() as usize;
        let mut entries = KVec::with_capacity(depth, GFP_KERNEL_ACCOUNT)?;
        for _ in 0..depth {
            entries.push(RecvEntry::default(), GFP_KERNEL_ACCOUNT)?;
        }
        Ok(Self {
            entries,
            bufs: BufPool::new(depth, max_sge, kernel)?,
            head: 0,
            taken: 0,
            tail: 0,
            user: None,
            max_sge,
            user_errors: 0,
        })
    }

    pub(super) fn slot(&self, idx: u32) -> usize {
        idx as usize & (self.entries.len() - 1)
    }

    /// Moves the oldest entry of the user ring (if any) to the tail of this ring. A malformed
    /// entry is consumed, counted and not moved.
    pub(super) fn pull_user(&mut self) -> Option<()> {
        if self.is_full() {
            return None;
        }
        let max_sge = self.max_sge;
        let q = self.user.as_mut()?;
        let mut raw = [0u8; RECV_WQE_MAX];
        let n = q
            .peek_entry(
                &mut raw,
                crate::uabi::RECV_WQE_HDR,
                crate::uabi::recv_wqe_len,
            )
            .ok()?
            .ok()?;
        let _ = q.consume();
        let slot = self.slot(self.tail);
        match crate::uabi::parse_recv(&raw[..n], max_sge, self.bufs.slot_mut(slot)) {
            Some((wr_id, num_sge, len)) => {
                self.append(slot, wr_id, num_sge, len);
                Some(())
            }
            None => {
                self.user_errors += 1;
                None
            }
        }
    }

    /// Records the request whose buffers are in `slot` (the tail's) as posted.
    pub(super) fn append(&mut self, slot: usize, wr_id: u64, num_sge: u32, len: u32) {
        self.entries[slot] = RecvEntry {
            wr_id,
            num_sge,
            len,
        };
        self.tail = self.tail.wrapping_add(1);
    }

    /// Moves the oldest request of `srq` (if any) to the tail of this ring; sets `*limit` if
    /// that made the SRQ's limit fire. A malformed request is consumed from the SRQ, counted
    /// here and not moved.
    pub(super) fn pull_srq(
        &mut self,
        qp: &Qp<MetaRoceDriver>,
        srq: &Srq<MetaRoceDriver>,
        limit: &mut bool,
    ) -> Option<()> {
        if self.is_full() {
            return None;
        }
        let slot = self.slot(self.tail);
        let (taken, fired) = srq.take(self.bufs.slot_mut(slot));
        *limit |= fired;
        match taken {
            Taken::Empty => None,
            Taken::Entry {
                wr_id,
                num_sge,
                len,
                ticket,
            } => {
                if let Some(t) = ticket {
                    // The request is this QP's now: its completion retires it here.
                    let bufs = self.bufs.slot_mut(slot).iter_mut().filter_map(|s| match s {
                        Seg::Kernel(k) => Some(k),
                        Seg::User { .. } => None,
                    });
                    match t.transfer(qp, bufs) {
                        Ok(t) => self.bufs.set_ticket(slot, t),
                        Err(_) => {
                            // Its SRQ is gone (cannot happen while the QP uses it).
                            self.bufs.release(slot);
                            self.user_errors += 1;
                            return None;
                        }
                    }
                }
                self.append(slot, wr_id, num_sge, len);
                Some(())
            }
            Taken::Malformed => {
                self.user_errors += 1;
                None
            }
        }
    }

    pub(super) fn is_full(&self) -> bool {
        self.tail.wrapping_sub(self.head) as usize >= self.entries.len()
    }

    /// The entry handed out under `id` and its buffers, if it is handed out and not
    /// completed (`head <= id < taken`, wrapping): a completed entry's buffers may already be
    /// freed or reused by their consumer and are never reached through this.
    pub(super) fn outstanding(&self, id: u32) -> Option<(RecvEntry, &[Seg])> {
        (id.wrapping_sub(self.head) < self.taken.wrapping_sub(self.head))
            .then(|| self.entry(u64::from(id)))
    }

    /// The entry handed out under `id` and its buffers.
    pub(super) fn entry(&self, id: u64) -> (RecvEntry, &[Seg]) {
        let slot = self.slot(id as u32);
        let e = self.entries[slot];
        (e, self.bufs.get(slot, e.num_sge))
    }

    /// Retires the oldest handed-out entry (the responder completes in order): drops its
    /// buffers and returns a kernel request's ticket, for its completion.
    pub(super) fn complete(&mut self, id: u64) -> Option<Ticket> {
        if self.head != self.taken && id as u32 == self.head {
            let slot = self.slot(self.head);
            let t = self.bufs.take_ticket(slot);
            self.bufs.release(slot);
            self.head = self.head.wrapping_add(1);
            return t;
        }
        None
    }

    /// Removes every entry, returning the `wr_id`s to flush in order: those moved here and
    /// those still in a user ring (a consumer may wait for their flush completions, e.g. a
    /// thread blocked on the CQ after `rdma_disconnect`). Malformed user entries are consumed
    /// and counted, without a completion (their `wr_id` cannot be trusted).
    ///
    /// At most one user ring's capacity is taken from the user ring per call (the process may
    /// keep refilling it while this runs under the QP's IRQ-off lock); the rest is flushed on
    /// the next call (the next doorbell, `post_recv` or state change).
    pub(super) fn drain(&mut self, mut f: impl FnMut(u64, Option<Ticket>)) {
        let mut budget = self.user.as_ref().map_or(0, |q| q.capacity());
        loop {
            while self.head != self.tail {
                let slot = self.slot(self.head);
                f(self.entries[slot].wr_id, self.bufs.take_ticket(slot));
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
pub(super) struct RecvSource<'a> {
    pub(super) qp: &'a Qp<MetaRoceDriver>,
    pub(super) rq: &'a mut RecvRing,
    pub(super) srq: Option<&'a Srq<MetaRoceDriver>>,
    /// The SRQ's limit fired: raise the event once the QP lock is released.
    pub(super) srq_limit: bool,
    /// While the device has on-demand paging regions: where the receive buffers are resolved
    /// (the device and the PD of the QP or its SRQ), to check that their pages are present
    /// before a request is taken.
    pub(super) odp: Option<(&'a MetaRoceDev, Option<PdId>)>,
}

impl<'a> RecvSource<'a> {
    pub(super) fn new(
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
            qp,
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
                Some(srq) => rq.pull_srq(self.qp, srq, &mut self.srq_limit)?,
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
pub(super) struct SqSide {
    pub(super) opcode: Option<WcOpcode>,
    pub(super) num_sge: u32,
    /// Bytes of inline data copied for the request (instead of SGEs).
    pub(super) inline_len: Option<u32>,
}

/// A send queue slot of a native RC QP (`native.rs`).
#[derive(Clone, Copy, Default)]
pub(super) struct NativeSlot {
    pub(super) wr_id: u64,
    pub(super) signaled: bool,
    /// The message to send (`None`: a local operation, done when posted).
    pub(super) msg: Option<MsgDesc>,
    /// An atomic's operands (compare or addend, swap).
    pub(super) operands: (u64, u64),
    /// Its Msn once handed to the connection.
    pub(super) msn: u32,
    /// The completion status, once known.
    pub(super) done: Option<WcStatus>,
}

/// A native RC QP's place on its connection (`native.rs`).
pub(super) struct NativeState {
    /// The connection (kept after the stream closed: the QP's transmit runs still drive it).
    pub(super) peer: Arc<Peer>,
    /// The stream the QP holds (`None` once closed: error or reset).
    pub(super) stream: Option<usize>,
    /// Send ring counter of the oldest request not completed.
    pub(super) head: u32,
    /// Send ring counter of the next request to hand to the connection.
    pub(super) posted: u32,
    /// Receive ring counter of the request that Rsn 0 consumes.
    pub(super) rq_base: u32,
    /// A request failed locally (its data could not be read) while requests before it were
    /// still in flight: no more requests go to the connection, and the QP breaks when the
    /// completions reach the failed one (earlier requests complete as the peer acknowledges
    /// them, as rdma_rxe's and the RoCEv2 core's requesters do).
    pub(super) local_error: bool,
}

/// The parts of a [`SendRing`] that name each request's local buffers.
#[derive(Clone, Copy)]
pub(super) struct SqBufs<'a> {
    pub(super) side: &'a [SqSide],
    pub(super) bufs: &'a BufPool,
    pub(super) data: &'a [u8],
    pub(super) per_slot: usize,
}

impl<'a> SqBufs<'a> {
    pub(super) fn bufs(self, slot: usize) -> impl Iterator<Item = SegRef<'a>> + 'a {
        let side = self.side.get(slot).copied().unwrap_or_default();
        let n = if side.inline_len.is_some() {
            0
        } else {
            side.num_sge
        };
        self.bufs_n(slot, n)
    }

    pub(super) fn bufs_n(self, slot: usize, n: u32) -> impl Iterator<Item = SegRef<'a>> + 'a {
        let user = self.user_slot(slot);
        let n_user = if self.per_slot == 0 { 0 } else { n as usize };
        // (`Iterator::chain`: pin-init's `Init` has a `chain` too.)
        Iterator::chain(
            self.bufs.get(slot, n).iter().map(Seg::as_ref),
            (0..n_user).map_while(move |i| crate::uabi::sge_at(user, i)),
        )
    }

    pub(super) fn user_slot(self, slot: usize) -> &'a [u8] {
        let base = slot * self.per_slot;
        self.data.get(base..base + self.per_slot).unwrap_or(&[])
    }
}

/// The send queue: the core's slots, the glue's per-slot data, and counters.
pub(super) struct SendRing {
    pub(super) wqes: KVec<pwr::SendWqe>,
    pub(super) side: KVec<SqSide>,
    /// Kernel QPs: `max_send_sge` buffers per slot (none for user QPs).
    pub(super) bufs: BufPool,
    /// User QPs: `per_slot` bytes per slot holding the request's inline data or its SGE
    /// records as librxe wrote them (`uabi::sge_at`), copied out of the ring when the
    /// request was taken; as in librxe's slot, one or the other (empty for kernel QPs).
    pub(super) data: KVec<u8>,
    pub(super) per_slot: usize,
    /// Datagram QPs: each request's destination address vector (empty for the others).
    pub(super) avs: KVec<Option<RoceAv>>,
    /// Native RC QPs: what the connection needs per request and the completion it reports
    /// (empty for the others).
    pub(super) native: KVec<NativeSlot>,
    /// User QPs: librxe's send ring; new entries are moved to the core at each doorbell.
    pub(super) user: Option<UQueue>,
    /// Work requests posted so far (ring counter).
    pub(super) tail: u32,
    /// Work requests whose kernel buffers were dropped (ring counter, up to `tail`): they
    /// completed (or were flushed or discarded).
    pub(super) released: u32,
    /// Datagram QPs: request packets pulled from the core so far (one per work request).
    pub(super) ud_sent: u32,
}

impl SendRing {
    /// A ring of at least `max_wr` slots. `user_slot`: a user QP's bytes per slot (inline
    /// data or SGE records), 0 for a kernel QP (`max_sge` buffers per slot); `datagram` and
    /// `native` add the per-slot arrays only those QPs use.
    pub(super) fn new(
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
                BufPool::new(depth, max_sge, true)?
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

    pub(super) fn depth(&self) -> u32 {
        self.wqes.len() as u32
    }

    pub(super) fn slot(&self, idx: u32) -> usize {
        idx as usize & (self.wqes.len() - 1)
    }

    /// What names each request's buffers.
    pub(super) fn view(&self) -> SqBufs<'_> {
        SqBufs {
            side: &self.side,
            bufs: &self.bufs,
            data: &self.data,
            per_slot: self.per_slot,
        }
    }

    /// The core's slots and, borrowed apart from them, what names each request's buffers.
    pub(super) fn split(&mut self) -> (&mut [pwr::SendWqe], SqBufs<'_>) {
        let view = SqBufs {
            side: &self.side,
            bufs: &self.bufs,
            data: &self.data,
            per_slot: self.per_slot,
        };
        (&mut self.wqes, view)
    }

    /// The buffers of the request in `slot` (none for inline data).
    pub(super) fn bufs(&self, slot: usize) -> impl Iterator<Item = SegRef<'_>> + '_ {
        self.view().bufs(slot)
    }

    /// The first `n` buffers of `slot`, as the request there was parsed.
    pub(super) fn bufs_n(&self, slot: usize, n: u32) -> impl Iterator<Item = SegRef<'_>> + '_ {
        self.view().bufs_n(slot, n)
    }

    /// A user QP's bytes for `slot`.
    pub(super) fn user_slot(&self, slot: usize) -> &[u8] {
        self.view().user_slot(slot)
    }

    /// The inline data copied for `slot`, if the request carried inline data.
    pub(super) fn inline(&self, slot: usize) -> Option<&[u8]> {
        let len = self.side.get(slot)?.inline_len? as usize;
        self.user_slot(slot).get(..len)
    }

    /// A native RC QP's record of the request in `slot`.
    pub(super) fn nslot(&self, slot: usize) -> NativeSlot {
        self.native.get(slot).copied().unwrap_or_default()
    }

    /// Records for the request in `slot` what only some QPs keep: the destination of a
    /// datagram, the native connection's view of a native RC QP's request.
    pub(super) fn set_extra(&mut self, slot: usize, av: Option<RoceAv>, native: NativeSlot) {
        if let Some(a) = self.avs.get_mut(slot) {
            *a = av;
        }
        if let Some(n) = self.native.get_mut(slot) {
            *n = native;
        }
    }

    /// Drops the kernel buffers of the requests up to `upto` (ring counter): they are done.
    pub(super) fn release_to(&mut self, upto: u32) {
        while self.released != upto && self.released != self.tail {
            let slot = self.slot(self.released);
            self.bufs.release(slot);
            self.released = self.released.wrapping_add(1);
        }
    }

    pub(super) fn reset(&mut self) {
        self.bufs.release_all();
        self.tail = 0;
        self.released = 0;
        self.ud_sent = 0;
        for w in self.wqes.iter_mut() {
            *w = pwr::SendWqe::default();
        }
    }
}
