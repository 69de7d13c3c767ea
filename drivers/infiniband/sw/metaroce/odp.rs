// SPDX-License-Identifier: GPL-2.0

//! Page faults of on-demand paging memory regions.
//!
//! The transport touches ODP memory where it cannot sleep (softirq, or a QP's lock held), so a
//! copy that finds a page missing fails (`mr.rs`: `MrError::NotPresent`) and asks for the
//! range here; what retries depends on who asked (Documentation/metaroce/abstractions.rst,
//! "Explicit on-demand paging"): the responder answers with an RNR NAK, so the peer sends
//! again after its RNR timer; a request packet that could not be built is dropped and
//! retransmitted; the posting process faults its own buffers in before the doorbell sends
//! ([`OdpFaults::run_pd`]).
//!
//! Requests wait in a fixed-size device-wide queue (no allocation in softirq; when it is full a
//! request is dropped and counted, and the retry asks again). Each region has its own work item,
//! queued on the device's work queue (unbound: regions are faulted in concurrently), which
//! faults in the requests for that region; a posting process faults in, before its doorbell
//! sends, only the requests for regions of its QP's protection domain. Each region serialises
//! its own faults under its own mutex (`fault`): a mapping whose fault blocks (a FUSE file, a
//! process holding its mmap lock) stalls that region only, never another process's doorbell or
//! another region's deregistration (issue 32, finding 10). Deregistration marks the region gone,
//! takes its mutex (waiting for a fault of this region in progress) and drops the requests still
//! queued for it; the region's memory is released with the last reference (a queued work item
//! may hold one; it then finds nothing to do).

use crate::device::MetaRoceDev;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::rdma::pd::PdId;
use kernel::rdma::umem_odp::UmemOdp;
use kernel::sync::{Arc, Mutex, SpinLockIrq};
use kernel::workqueue::{impl_has_work, new_work, Work, WorkItem};
use kernel::{new_mutex, new_spinlock_irq};

/// Fault requests waiting at most (per device).
const QUEUE: usize = 64;

/// The memory of an ODP region.
#[pin_data]
pub(crate) struct OdpMem {
    pub(crate) umem: UmemOdp,
    /// The protection domain of the region (a doorbell faults in its own PD's regions only).
    pd: PdId,
    /// The device's fault queue and counters.
    faults: Arc<OdpFaults>,
    /// A fault of this memory failed (the process has nothing mapped there, or nothing it may
    /// write): the next access that finds a page missing is refused (a remote access error, or
    /// a local protection error) instead of waiting for a fault that cannot succeed.
    failed: AtomicBool,
    /// The region was deregistered: nothing is faulted in any more.
    gone: AtomicBool,
    /// Held while a fault of this region runs, and by deregistration.
    #[pin]
    fault: Mutex<()>,
    #[pin]
    work: Work<OdpMem>,
}

impl_has_work! {
    impl HasWork<Self> for OdpMem { self.work }
}

impl OdpMem {
    /// The memory of a new ODP region of protection domain `pd`, faulted in through `faults`
    /// (the device's). Process context.
    pub(crate) fn new(umem: UmemOdp, pd: PdId, faults: &Arc<OdpFaults>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(OdpMem {
                umem,
                pd,
                faults: faults.clone(),
                failed: AtomicBool::new(false),
                gone: AtomicBool::new(false),
                fault <- new_mutex!((), "metaroce_odp_region"),
                work <- new_work!("metaroce_odp_region"),
            }),
            GFP_KERNEL,
        )
    }

    /// Whether a fault failed since the last call (and forgets it). Any context.
    pub(crate) fn take_failure(&self) -> bool {
        self.failed.swap(false, Ordering::Relaxed)
    }

    /// Faults in one request for this region, under the region's mutex. Process context, may
    /// sleep.
    fn populate(&self, offset: usize, len: usize) {
        let _g = self.fault.lock();
        if self.gone.load(Ordering::Acquire) {
            return;
        }
        let c = match self.umem.populate(offset, len, true) {
            Ok(()) => &self.faults.done,
            Err(_) => {
                self.failed.store(true, Ordering::Relaxed);
                &self.faults.failed
            }
        };
        c.fetch_add(1, Ordering::Relaxed);
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

/// The page-fault queue and counters of one device.
#[pin_data]
pub(crate) struct OdpFaults {
    #[pin]
    queue: SpinLockIrq<Queue>,
    /// Ranges faulted in, faults that failed (the memory is not mapped in the process, or
    /// not writable), and requests dropped because the queue was full.
    pub(crate) done: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) dropped: AtomicU64,
}

impl OdpFaults {
    /// Fault handling with room for [`QUEUE`] requests. Process context.
    pub(crate) fn new() -> Result<Arc<Self>> {
        let reqs = KVec::with_capacity(QUEUE, GFP_KERNEL)?;
        Arc::pin_init(
            pin_init!(Self {
                queue <- new_spinlock_irq!(Queue { reqs }, "metaroce_odp_faults"),
                done: AtomicU64::new(0),
                failed: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
            }),
            GFP_KERNEL,
        )
    }

    /// Queues a fault of `len` bytes at byte `offset` of `mem` unless one covering it waits
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
        q.reqs
            .push(
                Fault {
                    mem: mem.clone(),
                    offset,
                    len,
                },
                GFP_ATOMIC,
            )
            .is_ok()
    }

    /// The oldest waiting request that `which` selects, taken off the queue.
    fn pop(&self, which: impl Fn(&OdpMem) -> bool) -> Option<Fault> {
        let mut q = self.queue.lock();
        let i = q.reqs.iter().position(|f| which(&f.mem))?;
        q.reqs.remove(i).ok()
    }

    /// Faults in the waiting requests for regions of protection domain `pd`: a posting process
    /// before its doorbell sends. Process context, may sleep; no spinlock held. A region whose
    /// fault blocks stalls only the callers that need that region.
    pub(crate) fn run_pd(&self, pd: PdId) {
        while let Some(f) = self.pop(|m| m.pd == pd) {
            f.mem.populate(f.offset, f.len);
        }
    }

    /// Drops the waiting requests for `mem` and waits for its fault in progress, if any, to end;
    /// from then on nothing is faulted in for it. Process context.
    pub(crate) fn forget(&self, mem: &Arc<OdpMem>) {
        mem.gone.store(true, Ordering::Release);
        let _g = mem.fault.lock();
        let mut q = self.queue.lock();
        // Not the last references (the caller holds one): dropping them under the spinlock
        // releases nothing.
        q.reqs.retain(|f| !Arc::ptr_eq(&f.mem, mem));
    }
}

impl MetaRoceDev {
    /// Asks for `len` bytes at byte `offset` of `mem` to be faulted in by the region's work
    /// item on the device's work queue. Any context, never sleeps.
    pub(crate) fn odp_fault_later(&self, mem: &Arc<OdpMem>, offset: usize, len: usize) {
        let faults = self.odp_faults();
        if !faults.push(mem, offset, len) {
            faults.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // Already queued is fine: the run takes every request of the region.
        let _ = self.tx_queue().enqueue(mem.clone());
    }
}

impl WorkItem for OdpMem {
    type Pointer = Arc<OdpMem>;

    fn run(this: Arc<OdpMem>) {
        while let Some(f) = this.faults.pop(|m| core::ptr::eq(m, &*this)) {
            f.mem.populate(f.offset, f.len);
        }
    }
}
