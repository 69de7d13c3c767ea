// SPDX-License-Identifier: GPL-2.0

//! The transmit side of a MetaRoCE device: a worker on the device's own work queue that pulls
//! packets from the QPs that have something to send and puts them on the wire.
//!
//! A kernel consumer's `post_send` may run with IRQs disabled (ib_mad posts under a spinlock),
//! so it only marks the QP and queues the worker ([`schedule`]); the worker runs in process
//! context, where routing and `ip_local_out` are allowed. A user QP's doorbell is a uverbs
//! command, process context, and may send the first packets itself ([`post_doorbell`]). One
//! context at a time sends for a QP (a claim in the QP, [`transmit`]). A QP is on the worker's
//! list at most once (its `tx_queued` flag), so the fixed-size list never overflows and
//! scheduling never allocates. The list holds counted QP references, so a QP being destroyed
//! waits for the worker to let go of it.
//!
//! Every packet sent is charged to the device's
//! [`TxBudget`](kernel::net::tx_budget::TxBudget) until the network stack frees it
//! (after the netdev took it, or when a queue dropped it). While those charges fill the budget
//! the worker stops with its QPs listed and the other contexts leave their data to it; a freed
//! packet that makes room queues it again ([`TxEngine::tx_space`]). A sender faster than its
//! link or qdisc thus waits, as a UDP socket waits for its send buffer, instead of overrunning
//! the queue and paying for the drops with retransmissions.

use crate::device::{Counter, MetaRoceDev, MetaRoceDriver};
use crate::native::Peer;
use crate::ns;
use crate::qp::{pull_tx, MAX_QP};
use crate::verbs::RoceAv;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::net::netdev::NetDevice;
use kernel::net::skbuff::SkBuff;
use kernel::net::tx_budget::TxSpace;
use kernel::new_spinlock_irq;
use kernel::prelude::*;
use kernel::rdma::qp::Qp;
use kernel::sync::aref::ARef;
use kernel::sync::{Arc, ArcBorrow, SpinLockIrq};
use kernel::workqueue::{impl_has_work, new_work, Work, WorkItem};

/// Packets pulled from one QP per batch (one QP lock hold).
const BATCH: usize = 16;
/// Batches per worker run.
const RUN_BATCHES: usize = 64;
/// Bytes reserved in front of the RoCE headers for the link, IP and UDP headers: the largest
/// link-layer header the kernel reserves for (`LL_MAX_HEADER`, 128 with tunnels) plus IPv6 and UDP.
pub(crate) const HEADROOM: usize = 128 + 40 + 8;

/// One packet pulled from the core, ready for the network: its RoCE payload (BTH to ICRC
/// slot) in an skb and where it goes.
pub(crate) struct OutPacket {
    pub(crate) skb: SkBuff,
    pub(crate) av: RoceAv,
    pub(crate) src_qpn: u32,
    pub(crate) dst_qpn: u32,
    /// A native packet (`native.rs`): its UDP source port (the path) and whether it is
    /// ECN-capable; the skb then holds the MetaRoCE header and payload.
    pub(crate) native: Option<(u16, bool)>,
}

impl OutPacket {
    /// A native packet from `peer`'s connection.
    pub(crate) fn native(skb: SkBuff, peer: &Peer, src_port: u16, ect: bool) -> Self {
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

/// An skb for a packet of `len` bytes (zeroed) with `headroom` bytes in front for the link,
/// IP and UDP headers: the one place both transports set up the skbs they send. Any context
/// (`GFP_ATOMIC`).
pub(crate) fn frame(headroom: usize, len: usize) -> Result<SkBuff> {
    let mut skb = SkBuff::alloc(headroom.checked_add(len).ok_or(EINVAL)?, GFP_ATOMIC)?;
    skb.reserve(headroom)?;
    skb.put(len)?;
    Ok(skb)
}

/// A FIFO of counted QP references with room for every QP of a device, so it never overflows
/// when each QP is listed at most once (the caller's per-QP flag). Never allocates after `new`.
pub(crate) struct QpList {
    slots: KVec<Option<ARef<Qp<MetaRoceDriver>>>>,
    head: usize,
    len: usize,
}

impl QpList {
    /// A list with room for every QP number plus the GSI QP. Process context.
    pub(crate) fn new() -> Result<Self> {
        let n = MAX_QP as usize + 1;
        let mut slots = KVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            slots.push(None, GFP_KERNEL)?;
        }
        Ok(Self {
            slots,
            head: 0,
            len: 0,
        })
    }

    /// Appends `qp`; gives it back if the list is full.
    pub(crate) fn push(
        &mut self,
        qp: ARef<Qp<MetaRoceDriver>>,
    ) -> core::result::Result<(), ARef<Qp<MetaRoceDriver>>> {
        if self.len == self.slots.len() {
            return Err(qp);
        }
        let idx = (self.head + self.len) % self.slots.len();
        self.slots[idx] = Some(qp);
        self.len += 1;
        Ok(())
    }

    /// Removes the oldest QP.
    pub(crate) fn pop(&mut self) -> Option<ARef<Qp<MetaRoceDriver>>> {
        if self.len == 0 {
            return None;
        }
        let qp = self.slots[self.head].take();
        self.head = (self.head + 1) % self.slots.len();
        self.len -= 1;
        qp
    }

    /// The oldest QP, still listed.
    pub(crate) fn first(&self) -> Option<ARef<Qp<MetaRoceDriver>>> {
        if self.len == 0 {
            return None;
        }
        self.slots[self.head].clone()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// Puts `qp` on `list` unless its flag `listed` says it is there already (each QP is listed at
/// most once, so the list never overflows). Returns whether the QP was listed now; the caller
/// then makes sure the list's worker runs. Any context: an IRQ-safe spinlock, no allocation.
pub(crate) fn list_once(
    list: &SpinLockIrq<QpList>,
    listed: &AtomicBool,
    qp: &Qp<MetaRoceDriver>,
) -> bool {
    if listed.swap(true, Ordering::AcqRel) {
        return false;
    }
    if list.lock().push(ARef::from(qp)).is_err() {
        // Unreachable while each QP is listed once: there are more slots than QP numbers.
        listed.store(false, Ordering::Release);
        kernel::pr_warn_once!("QP list full\n");
        return false;
    }
    true
}

/// The transmit worker of one device.
#[pin_data]
pub(crate) struct TxEngine {
    #[pin]
    ready: SpinLockIrq<QpList>,
    #[pin]
    work: Work<TxEngine>,
    /// The worker stopped with QPs listed because the device's packets in the network stack
    /// filled its budget ([`room`]); [`TxEngine::tx_space`] queues it again.
    waiting: AtomicBool,
}

impl_has_work! {
    impl HasWork<Self> for TxEngine { self.work }
}

impl TxEngine {
    /// A worker with room for every QP of a device. Process context.
    pub(crate) fn new() -> Result<Arc<Self>> {
        let list = QpList::new()?;
        Arc::pin_init(
            pin_init!(Self {
                ready <- new_spinlock_irq!(list, "metaroce_tx_ready"),
                work <- new_work!("metaroce_tx"),
                waiting: AtomicBool::new(false),
            }),
            GFP_KERNEL,
        )
    }
}

/// Puts `qp` on its device's transmit list (if not there yet) and queues the worker. Any
/// context: takes an IRQ-safe spinlock, never allocates or sleeps.
pub(crate) fn schedule(qp: &Qp<MetaRoceDriver>) {
    let dev = qp.device();
    let tx = dev.tx();
    if !list_once(&tx.ready, &qp.tx_queued, qp) {
        return;
    }
    // Already queued is fine: the worker drains the whole list.
    let _ = dev.tx_queue().enqueue(tx.clone());
}

impl TxSpace for TxEngine {
    /// A packet the device sent was freed with room left in its budget: a worker that stopped
    /// for room goes on. Any context (under RCU), called for every such packet.
    fn tx_space(this: ArcBorrow<'_, Self>) {
        if this.waiting.load(Ordering::Relaxed) && this.waiting.swap(false, Ordering::AcqRel) {
            requeue(this.into());
        }
    }
}

/// Whether `dev` may hand more packets to the network stack now. If not, the worker is marked
/// waiting and is queued again by [`TxEngine::tx_space`] when a packet is freed, so it stops
/// rather than polling. Any context.
fn room(dev: &MetaRoceDev, tx: &TxEngine) -> bool {
    let Some(budget) = dev.tx_budget() else {
        return true;
    };
    if budget.has_room() {
        return true;
    }
    tx.waiting.store(true, Ordering::SeqCst);
    // A packet freed between the check and the mark found nobody waiting: look again.
    if budget.has_room() && tx.waiting.swap(false, Ordering::AcqRel) {
        return true;
    }
    dev.count(Counter::TxBudgetWaits, 1);
    false
}

impl WorkItem for TxEngine {
    type Pointer = Arc<TxEngine>;

    fn run(this: Arc<TxEngine>) {
        // A bounded number of batches per run: requeueing lets the work queue reschedule
        // between runs, so a busy device cannot hog the CPU.
        for _ in 0..RUN_BATCHES {
            let Some(first) = this.ready.lock().first() else {
                return;
            };
            if !room(first.device(), &this) {
                // The QPs stay listed; `tx_space` queues the worker when there is room.
                return;
            }
            let Some(qp) = this.ready.lock().pop() else {
                return;
            };
            // Cleared before the batch, so work posted meanwhile schedules the QP again.
            qp.tx_queued.store(false, Ordering::Release);
            let dev = qp.device();
            if dev.native {
                // Spares for native connections that start sending (process context here).
                dev.flights.refill();
            }
            if transmit(&qp, 1, Pull::All) {
                // More to send: back to the end of the list.
                schedule(&qp);
            }
        }
        if this.ready.lock().len() > 0 {
            requeue(this);
        }
    }
}

/// Queues the worker again on the device's queue (reached through any listed QP).
fn requeue(this: Arc<TxEngine>) {
    let qp = this.ready.lock().first();
    if let Some(qp) = qp {
        let _ = qp.device().tx_queue().enqueue(this);
    }
}

/// Sends what `qp` has ready now (at most a few batches), from the caller's context: used when
/// the QP is destroyed, so that the acknowledgement of a message the consumer has already seen
/// is not lost with the QP (a ping-pong client exits as soon as its last receive completes,
/// before the transmit worker ran; the peer would then retry into a QP that is gone). If the
/// worker is sending for the QP at that moment, it sends them instead. Process context.
pub(crate) fn flush(qp: &Qp<MetaRoceDriver>) {
    transmit_claimed(qp, 4, Pull::All);
}

/// Sends from the posting process what a user QP's doorbell made ready, at most the
/// `tx_inline_batches` module parameter's number of batches, and leaves the rest to the worker.
/// The process that posts pays for its own packets, as with rdma_rxe, instead of competing for
/// the CPU with the worker while it busy-polls its completion queue; the worker still sends
/// everything that becomes ready later (the peer's ACKs open the window in softirq context).
/// Process context (the uverbs doorbell), no locks held.
pub(crate) fn post_doorbell(qp: &Qp<MetaRoceDriver>) {
    let batches = crate::module_parameters::tx_inline_batches.value() as usize;
    if batches == 0 || transmit(qp, batches, Pull::All) {
        schedule(qp);
    }
}

/// What a transmission pulls from a QP.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pull {
    /// Everything due, in the core's order.
    All,
    /// As `All`, but a native connection's coalesced ACKs wait for the worker (the receive
    /// path, `rx_transmit=2`).
    Receive,
    /// A native connection's control packets only (ACKs, CHALLENGE/PROOF); nothing from a
    /// RoCEv2 QP.
    Control,
}

/// Sends from the receive path what a packet made due for `qp`, as the `rx_transmit` module
/// parameter says: nothing (0), the native ACKs due at once and proofs (1), or one batch of
/// anything but coalesced ACKs (2), so that an ACK need not wait for the worker to be
/// scheduled; the worker sends the rest, `coalesced` ACKs of a native connection
/// (`native_ack_every`) included. If another context is transmitting for the QP, that one
/// sends them. Any context (the receive path's softirq).
pub(crate) fn from_receive(qp: &Qp<MetaRoceDriver>, coalesced: bool) {
    match crate::module_parameters::rx_transmit.value() {
        0 => schedule(qp),
        1 => {
            // Data may be due as well (an ACK opened a window): the worker sends it.
            transmit(qp, 1, Pull::Control);
            schedule(qp);
        }
        _ => {
            if transmit(qp, 1, Pull::Receive) || coalesced {
                schedule(qp);
            }
        }
    }
}

/// Sends up to `batches` batches of `qp`'s packets as the QP's only transmitter, so that a
/// QP's packets leave in the order the core numbered them whichever contexts want to send
/// (the worker, a posting process, the receive path, a QP being destroyed). A context that
/// finds the QP held asks the holder to look again when it lets go and returns: nothing waits,
/// nothing is lost. Returns whether the QP may have more to send. Data waits while the
/// device's packets fill its budget ([`room`]): then nothing is sent and `true` returned, so
/// the caller leaves the QP to the worker. Any context.
fn transmit(qp: &Qp<MetaRoceDriver>, batches: usize, pull: Pull) -> bool {
    let dev = qp.device();
    if pull != Pull::Control && !room(dev, dev.tx()) {
        // The worker sends it when there is room (the caller schedules the QP).
        return true;
    }
    transmit_claimed(qp, batches, pull)
}

/// [`transmit`] whether or not the device's budget has room (control packets, the last
/// packets of a QP being destroyed).
fn transmit_claimed(qp: &Qp<MetaRoceDriver>, batches: usize, pull: Pull) -> bool {
    // The claim: `tx_busy` set by its holder; `tx_again` set by whoever found it held. The
    // sequentially consistent order makes either the holder see `tx_again` after letting go,
    // or the other context see `tx_busy` clear and take the claim itself.
    while qp.tx_busy.swap(true, Ordering::SeqCst) {
        qp.tx_again.store(true, Ordering::SeqCst);
        if qp.tx_busy.load(Ordering::SeqCst) {
            return false;
        }
    }
    let mut more = false;
    for _ in 0..batches {
        more = transmit_batch(qp, pull);
        if !more {
            break;
        }
    }
    qp.tx_busy.store(false, Ordering::SeqCst);
    more | qp.tx_again.swap(false, Ordering::SeqCst)
}

/// Sends one batch of `qp`'s packets; returns whether it may have more. Any context, with the
/// QP's transmit claim held ([`transmit`]).
fn transmit_batch(qp: &Qp<MetaRoceDriver>, pull: Pull) -> bool {
    qp.device()
        .with_tx_netdev(|netdev| netdev.is_some_and(|netdev| transmit_batch_on(qp, netdev, pull)))
}

/// [`transmit_batch`] through `netdev`.
fn transmit_batch_on(qp: &Qp<MetaRoceDriver>, netdev: &NetDevice, pull: Pull) -> bool {
    let dev = qp.device();
    let mut batch: [Option<OutPacket>; BATCH] = [const { None }; BATCH];
    let mut n = pull_tx(qp, HEADROOM, &mut batch, pull);
    if dev.native && n < BATCH && pull != Pull::Control {
        // What native connections without a QP owe their peers travels with this QP's batch.
        n += crate::native::pull_orphans(dev, HEADROOM, &mut batch[n..]);
    }
    let pkts = batch.iter_mut().take(n).filter_map(Option::take);
    let gso = ns::send_batch(netdev, dev.tx_budget(), pkts, |len, res| match res {
        Ok(()) => {
            dev.count(Counter::SentPkts, 1);
            dev.count(Counter::SentBytes, len as u64);
        }
        Err(_) => dev.count(Counter::SendErr, 1),
    });
    if gso > 0 {
        dev.count(Counter::SentGsoBatches, gso);
    }
    n == BATCH
}
