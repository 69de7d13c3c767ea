// SPDX-License-Identifier: GPL-2.0

//! Protection domains, completion queues, address handles and DMA memory regions of a
//! MetaRoCE device (kernel consumers; user objects come with the librxe rings).

use crate::device::{MetaRoceDev, MetaRoceDriver};
use core::sync::atomic::{
    AtomicU32,
    Ordering, //
};
use kernel::new_spinlock_irq;
use kernel::prelude::*;
use kernel::rdma::ah::{GidType, NewAh};
use kernel::rdma::cq::{Cq, CqArm, CqNotify, NewCq, WcArray, WcStatus, WorkCompletion};
use kernel::rdma::device::Device;
use kernel::rdma::mr::{AccessFlags, Mr, MrKeys};
use kernel::rdma::pd::{Origin, Pd};
use kernel::rdma::qp::QpId;
use kernel::sync::SpinLockIrq;

/// Most PDs per device.
pub(crate) const MAX_PD: u32 = 0x1_0000;
/// Most CQs per device.
pub(crate) const MAX_CQ: u32 = 0x4000;
/// Most entries per CQ.
pub(crate) const MAX_CQE: u32 = 0x7fff;
/// Most AHs per device.
pub(crate) const MAX_AH: u32 = 0x4000;
/// Most MRs per device (only DMA MRs exist so far).
pub(crate) const MAX_MR: u32 = 0x4000;

/// Takes one of `max` objects counted by `counter`, or fails with `ENOMEM`.
pub(crate) fn take(counter: &AtomicU32, max: u32) -> Result {
    counter
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < max).then_some(n + 1))
        .map(|_| ())
        .map_err(|_| ENOMEM)
}

/// Gives back an object taken with [`take`].
pub(crate) fn give(counter: &AtomicU32) {
    counter.fetch_sub(1, Ordering::Relaxed);
}

/// A protection domain: nothing beyond ib_core's own state yet (the transport checks that an
/// MR's PD matches its QP's through ib_core's pointers).
pub(crate) struct MetaRocePd;

pub(crate) fn alloc_pd(dev: &Device<MetaRoceDriver>, _origin: Origin) -> Result<MetaRocePd> {
    // A user PD exchanges no driver data with librxe, so both kinds are accepted.
    take(&dev.objects.pds, MAX_PD)?;
    Ok(MetaRocePd)
}

pub(crate) fn dealloc_pd(pd: &Pd<MetaRoceDriver>) {
    give(&pd.device().objects.pds);
}

/// The completions of a CQ and its notification state.
struct CqInner {
    /// Ring of completions; `None` in free slots.
    ring: KVec<Option<WorkCompletion>>,
    /// Oldest completion.
    head: usize,
    /// Completions held.
    len: usize,
    /// Armed by `req_notify_cq`, disarmed when the handler is called.
    armed: Option<CqArm>,
    /// Completions dropped because the CQ was full (the consumer sized it too small).
    overflows: u64,
}

/// A completion queue: a bounded ring of [`WorkCompletion`]s in driver memory.
#[pin_data]
pub(crate) struct MetaRoceCq {
    /// Capacity in completions (`ib_cq::cqe`).
    capacity: usize,
    #[pin]
    inner: SpinLockIrq<CqInner>,
}

/// Whether a completion was queued and whether the consumer must be notified.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum CqPush {
    /// Queued; call `notify_completion` once the locks are released.
    QueuedNotify,
    /// Queued; the CQ is not armed for it.
    Queued,
    /// The CQ is full: the completion was dropped (counted).
    Overflow,
}

impl MetaRoceCq {
    /// Appends a completion. `solicited`: the completion is for a solicited message.
    /// Any context (takes an IRQ-disabling spinlock); the caller calls
    /// [`Cq::notify_completion`] after releasing its own locks when told to.
    pub(crate) fn push(&self, wc: WorkCompletion, solicited: bool) -> CqPush {
        let mut g = self.inner.lock();
        if g.len == self.capacity {
            g.overflows += 1;
            return CqPush::Overflow;
        }
        let idx = (g.head + g.len) % self.capacity;
        g.ring[idx] = Some(wc);
        g.len += 1;
        let fire = match g.armed {
            Some(CqArm::NextComp) => true,
            Some(CqArm::Solicited) => solicited || wc.status != WcStatus::Success,
            None => false,
        };
        if fire {
            g.armed = None;
            CqPush::QueuedNotify
        } else {
            CqPush::Queued
        }
    }

    /// Removes every completion of `qp` (the QP is being destroyed), keeping the others in
    /// order.
    pub(crate) fn purge_qp(&self, qp: QpId) {
        let mut g = self.inner.lock();
        let inner = &mut *g;
        let (cap, head, len) = (self.capacity, inner.head, inner.len);
        let mut kept = 0;
        for i in 0..len {
            let from = (head + i) % cap;
            let wc = inner.ring[from].take();
            if let Some(wc) = wc.filter(|wc| wc.qp != qp) {
                inner.ring[(head + kept) % cap] = Some(wc);
                kept += 1;
            }
        }
        inner.len = kept;
    }
}

pub(crate) fn create_cq(cq: &mut NewCq<'_, MetaRoceDriver>) -> Result<impl PinInit<MetaRoceCq, Error>> {
    // User CQs need the librxe completion ring mapped into the process (the next step);
    // until then uverbs gets a clear EOPNOTSUPP.
    if cq.origin() == Origin::User {
        return Err(EOPNOTSUPP);
    }
    if cq.flags() != 0 {
        return Err(EOPNOTSUPP);
    }
    let want = cq.requested_cqe();
    if want == 0 || want > MAX_CQE {
        return Err(EINVAL);
    }
    let capacity = want as usize;
    let mut ring = KVec::with_capacity(capacity, GFP_KERNEL)?;
    for _ in 0..capacity {
        ring.push(None, GFP_KERNEL)?;
    }
    take(&cq.device().objects.cqs, MAX_CQ)?;
    Ok(try_pin_init!(MetaRoceCq {
        capacity,
        inner <- new_spinlock_irq!(
            CqInner {
                ring,
                head: 0,
                len: 0,
                armed: None,
                overflows: 0,
            },
            "metaroce_cq"
        ),
    }))
}

pub(crate) fn destroy_cq(cq: &Cq<MetaRoceDriver>) {
    let overflows = cq.inner.lock().overflows;
    if overflows != 0 {
        pr_warn!("a CQ of {} entries overflowed {overflows} time(s)\n", cq.capacity);
    }
    give(&cq.device().objects.cqs);
}

pub(crate) fn poll_cq(cq: &Cq<MetaRoceDriver>, out: &mut WcArray<'_>) -> Result {
    let mut g = cq.inner.lock();
    let inner = &mut *g;
    while inner.len > 0 && !out.is_full() {
        let slot = inner.ring[inner.head].take();
        inner.head = (inner.head + 1) % cq.capacity;
        inner.len -= 1;
        if let Some(wc) = slot {
            out.push(&wc);
        }
    }
    Ok(())
}

pub(crate) fn req_notify_cq(cq: &Cq<MetaRoceDriver>, notify: CqNotify) -> Result<bool> {
    let mut g = cq.inner.lock();
    // Asking for the next completion widens an earlier solicited-only arming, never the
    // other way round.
    if g.armed != Some(CqArm::NextComp) {
        g.armed = Some(notify.arm);
    }
    Ok(notify.report_missed && g.len > 0)
}

/// A RoCE address vector, copied out of `rdma_ah_attr` when the AH is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RoceAv {
    pub(crate) dgid: [u8; 16],
    pub(crate) sgid: [u8; 16],
    pub(crate) sgid_index: u8,
    pub(crate) dmac: [u8; 6],
    pub(crate) flow_label: u32,
    pub(crate) hop_limit: u8,
    pub(crate) traffic_class: u8,
    pub(crate) sl: u8,
}

/// An address handle: its RoCE v2 address vector.
pub(crate) struct MetaRoceAh {
    pub(crate) av: RoceAv,
}

/// Copies a RoCE v2 address vector; `EINVAL` for anything else (we speak RoCE v2 only).
pub(crate) fn roce_av(attr: &kernel::rdma::ah::AhAttr) -> Result<RoceAv> {
    let dmac = attr.dmac().ok_or(EINVAL)?;
    if !attr.has_grh() {
        return Err(EINVAL);
    }
    let (sgid, ty) = attr.sgid().ok_or(EINVAL)?;
    if ty != GidType::RoceV2 {
        return Err(EINVAL);
    }
    Ok(RoceAv {
        dgid: attr.dgid(),
        sgid,
        sgid_index: attr.sgid_index(),
        dmac,
        flow_label: attr.flow_label(),
        hop_limit: attr.hop_limit(),
        traffic_class: attr.traffic_class(),
        sl: attr.sl(),
    })
}

/// Creates an AH: may run in atomic context, so nothing is allocated (the data lives in the
/// object ib_core allocated with the creator's GFP flags).
pub(crate) fn create_ah(ah: &mut NewAh<'_, MetaRoceDriver>) -> Result<MetaRoceAh> {
    let av = roce_av(ah.attr())?;
    take(&ah.device().objects.ahs, MAX_AH)?;
    Ok(MetaRoceAh { av })
}

/// A DMA memory region: all of kernel memory under one key pair.
pub(crate) struct MetaRoceMr {
    /// Index in the device's MR table (`lkey == rkey == index << 8`).
    index: usize,
    /// Access rights.
    #[allow(dead_code)] // Checked by the transport (issue 6).
    pub(crate) access: AccessFlags,
}

pub(crate) fn get_dma_mr(
    pd: &Pd<MetaRoceDriver>,
    access: AccessFlags,
) -> Result<(MrKeys, MetaRoceMr)> {
    let dev: &MetaRoceDev = pd.device();
    let index = dev.alloc_mr_index()?;
    // Index 0 is never handed out, so no key is 0 (the device's `local_dma_lkey`).
    let key = (index as u32) << 8;
    Ok((MrKeys { lkey: key, rkey: key }, MetaRoceMr { index, access }))
}

pub(crate) fn dereg_mr(mr: &Mr<MetaRoceDriver>) {
    mr.device().free_mr_index(mr.index);
}
