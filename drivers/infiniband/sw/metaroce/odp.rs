// SPDX-License-Identifier: GPL-2.0

//! Page faults of on-demand paging memory regions.
//!
//! The transport touches ODP memory where it cannot sleep (softirq, or a QP's lock held), so a
//! copy that finds a page missing fails (`mr.rs`: `MrError::NotPresent`) and asks for the
//! range here; what retries depends on who asked (Documentation/metaroce/abstractions.rst,
//! "Explicit on-demand paging"): the responder answers with an RNR NAK, so the peer sends
//! again after its RNR timer; a request packet that could not be built is dropped and
//! retransmitted; the posting process faults its own buffers in before the doorbell sends
//! ([`OdpFaults::run`]).
//!
//! Requests wait in a fixed-size queue (no allocation in softirq; when it is full a request is
//! dropped and counted, and the retry asks again) until the device's work queue or a posting
//! process faults them in, one at a time under `lock`. Deregistration takes the same lock
//! after the region left the table, and drops the requests still queued for it: once it holds
//! the lock nobody else holds the region's memory, which it may then release.

use crate::device::MetaRoceDev;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::rdma::umem_odp::UmemOdp;
use kernel::sync::{Arc, Mutex, SpinLockIrq};
use kernel::workqueue::{impl_has_work, new_work, Work, WorkItem};
use kernel::{new_mutex, new_spinlock_irq};

/// Fault requests waiting at most.
const QUEUE: usize = 64;

/// The memory of an ODP region.
pub(crate) struct OdpMem {
    pub(crate) umem: UmemOdp,
    /// A fault of this memory failed (the process has nothing mapped there, or nothing it may
    /// write): the next access that finds a page missing is refused (a remote access error, or
    /// a local protection error) instead of waiting for a fault that cannot succeed.
    failed: AtomicBool,
}

impl OdpMem {
    pub(crate) fn new(umem: UmemOdp) -> Result<Arc<Self>> {
        Ok(Arc::new(OdpMem { umem, failed: AtomicBool::new(false) }, GFP_KERNEL)?)
    }

    /// Whether a fault failed since the last call (and forgets it). Any context.
    pub(crate) fn take_failure(&self) -> bool {
        self.failed.swap(false, Ordering::Relaxed)
    }
}

/// `len` bytes at byte `offset` of an ODP region's memory, to fault in.
struct Fault {
    mem: Arc<OdpMem>,
    offset: usize,
    len: usize,
}

/// The waiting requests, oldest first.
struct Queue {
    reqs: KVec<Fault>,
}

/// The page-fault handling of one device.
#[pin_data]
pub(crate) struct OdpFaults {
    #[pin]
    queue: SpinLockIrq<Queue>,
    /// Held while a request is faulted in, and by deregistration (see the module docs).
    #[pin]
    lock: Mutex<()>,
    #[pin]
    work: Work<OdpFaults>,
    /// Ranges faulted in, faults that failed (the memory is not mapped in the process, or
    /// not writable), and requests dropped because the queue was full.
    pub(crate) done: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) dropped: AtomicU64,
}

impl_has_work! {
    impl HasWork<Self> for OdpFaults { self.work }
}

impl OdpFaults {
    /// Fault handling with room for [`QUEUE`] requests. Process context.
    pub(crate) fn new() -> Result<Arc<Self>> {
        let reqs = KVec::with_capacity(QUEUE, GFP_KERNEL)?;
        Arc::pin_init(
            pin_init!(Self {
                queue <- new_spinlock_irq!(Queue { reqs }, "metaroce_odp_faults"),
                lock <- new_mutex!((), "metaroce_odp_fault"),
                work <- new_work!("metaroce_odp"),
                done: AtomicU64::new(0),
                failed: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
            }),
            GFP_KERNEL,
        )
    }

    /// Queues a fault of `len` bytes at byte `offset` of `umem` unless one covering it waits
    /// already. Returns `false` if the queue is full (the request is dropped). Any context:
    /// an IRQ-safe spinlock, no allocation (the queue's capacity was reserved).
    fn push(&self, mem: &Arc<OdpMem>, offset: usize, len: usize) -> bool {
        let mut q = self.queue.lock();
        let end = offset.saturating_add(len);
        if q.reqs.iter().any(|f| {
            Arc::ptr_eq(&f.mem, mem) && f.offset <= offset && f.offset.saturating_add(f.len) >= end
        }) {
            return true;
        }
        if q.reqs.len() == q.reqs.capacity() {
            return false;
        }
        // Within the capacity reserved in `new`: no allocation happens.
        q.reqs.push(Fault { mem: mem.clone(), offset, len }, GFP_ATOMIC).is_ok()
    }

    /// Faults in every waiting request, from the caller's context (the device's work queue,
    /// or a posting process before its doorbell sends). Process context, may sleep; no
    /// spinlock held.
    pub(crate) fn run(&self) {
        loop {
            let _g = self.lock.lock();
            let f = {
                let mut q = self.queue.lock();
                if q.reqs.is_empty() {
                    return;
                }
                q.reqs.remove(0)
            };
            let Ok(f) = f else { return };
            let c = match f.mem.umem.populate(f.offset, f.len, true) {
                Ok(()) => &self.done,
                Err(_) => {
                    f.mem.failed.store(true, Ordering::Relaxed);
                    &self.failed
                }
            };
            c.fetch_add(1, Ordering::Relaxed);
            // `f` (its reference to the memory) goes before the lock: see the module docs.
            drop(f);
        }
    }

    /// Drops the waiting requests for `umem` and waits for a fault in progress to end; then no
    /// one but the caller refers to the memory through this queue. Process context.
    pub(crate) fn forget(&self, mem: &Arc<OdpMem>) {
        let _g = self.lock.lock();
        let mut q = self.queue.lock();
        // Not the last references (the caller holds one): dropping them under the spinlock
        // releases nothing.
        q.reqs.retain(|f| !Arc::ptr_eq(&f.mem, mem));
    }
}

impl MetaRoceDev {
    /// Asks for `len` bytes at byte `offset` of `umem` to be faulted in by the device's work
    /// queue. Any context, never sleeps.
    pub(crate) fn odp_fault_later(&self, mem: &Arc<OdpMem>, offset: usize, len: usize) {
        let faults = self.odp_faults();
        if !faults.push(mem, offset, len) {
            faults.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // Already queued is fine: the run drains the whole queue.
        let _ = self.tx_queue().enqueue(faults.clone());
    }
}

impl WorkItem for OdpFaults {
    type Pointer = Arc<OdpFaults>;

    fn run(this: Arc<OdpFaults>) {
        this.run();
    }
}
