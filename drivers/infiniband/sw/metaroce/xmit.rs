// SPDX-License-Identifier: GPL-2.0

//! The transmit side of a MetaRoCE device: a worker on the device's own work queue that pulls
//! packets from the QPs that have something to send and puts them on the wire.
//!
//! `post_send` may run with IRQs disabled (ib_mad posts under a spinlock), so it only marks the
//! QP and queues the worker ([`schedule`]); the worker runs in process context, where routing
//! and `ip_local_out` are allowed. A QP is on the worker's list at most once (its `tx_queued`
//! flag), so the fixed-size list never overflows and scheduling never allocates. The list holds
//! counted QP references, so a QP being destroyed waits for the worker to let go of it.

use crate::device::{Counter, MetaRoceDriver};
use crate::ns;
use crate::qp::{pull_tx, OutPacket, MAX_QP};
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::new_spinlock_irq;
use kernel::prelude::*;
use kernel::rdma::qp::Qp;
use kernel::sync::aref::ARef;
use kernel::sync::{Arc, SpinLockIrq};
use kernel::workqueue::{impl_has_work, new_work, Work, WorkItem};

/// Packets pulled from one QP per batch (one QP lock hold).
const BATCH: usize = 16;
/// Batches per worker run.
const RUN_BATCHES: usize = 64;
/// Bytes reserved in front of the RoCE headers for the link, IP and UDP headers: the largest
/// link-layer header the kernel reserves for (`LL_MAX_HEADER`, 128 with tunnels) plus IPv6 and UDP.
pub(crate) const HEADROOM: usize = 128 + 40 + 8;

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
        Ok(Self { slots, head: 0, len: 0 })
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

impl WorkItem for TxEngine {
    type Pointer = Arc<TxEngine>;

    fn run(this: Arc<TxEngine>) {
        // A bounded number of batches per run: requeueing lets the work queue reschedule
        // between runs, so a busy device cannot hog the CPU.
        for _ in 0..RUN_BATCHES {
            let Some(qp) = this.ready.lock().pop() else { return };
            // Cleared before the batch, so work posted meanwhile schedules the QP again.
            qp.tx_queued.store(false, Ordering::Release);
            if transmit_batch(&qp) {
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
/// before the transmit worker ran; the peer would then retry into a QP that is gone). Process
/// context.
pub(crate) fn flush(qp: &Qp<MetaRoceDriver>) {
    for _ in 0..4 {
        if !transmit_batch(qp) {
            return;
        }
    }
}

/// Sends one batch of `qp`'s packets; returns whether it may have more. Process context.
fn transmit_batch(qp: &Qp<MetaRoceDriver>) -> bool {
    let dev = qp.device();
    let Some(netdev) = dev.netdev(crate::device::PORT) else {
        return false;
    };
    let mut batch: [Option<OutPacket>; BATCH] = [const { None }; BATCH];
    let n = pull_tx(qp, HEADROOM, &mut batch);
    for p in batch.iter_mut().take(n) {
        let Some(p) = p.take() else { continue };
        let len = p.skb.len() as u64;
        match ns::send(&netdev, p) {
            Ok(()) => {
                dev.count(Counter::SentPkts, 1);
                dev.count(Counter::SentBytes, len);
            }
            Err(_) => dev.count(Counter::SendErr, 1),
        }
    }
    n == BATCH
}
