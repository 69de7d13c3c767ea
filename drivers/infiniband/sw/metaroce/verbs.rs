// SPDX-License-Identifier: GPL-2.0

//! Protection domains, completion queues (kernel rings and the provider's shared user rings),
//! address handles and DMA memory regions of a MetaRoCE device.

use crate::device::{MetaRoceDev, MetaRoceDriver};
use crate::proto::cqmod::{Event, Moderator};
use crate::uqueue::{Role, UQueue};
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
use kernel::rdma::pd::{Origin, Pd, PdId};
use kernel::rdma::qp::QpId;
use kernel::rdma::udata::Udata;
use kernel::rdma::wr::MrPage;
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
/// Most memory windows of a device (rdma_rxe's figure is 0x1000 as well).
pub(crate) const MAX_MW: u32 = 0x1000;

/// Takes one of `max` objects counted by `counter`, or fails with `ENOMEM`.
pub(crate) fn take(counter: &AtomicU32, max: u32) -> Result {
    counter
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n < max).then_some(n + 1)
        })
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
    // A user PD exchanges no driver data with the provider, so both kinds are accepted.
    take(&dev.objects.pds, MAX_PD)?;
    Ok(MetaRocePd)
}

pub(crate) fn dealloc_pd(pd: &Pd<MetaRoceDriver>) {
    give(&pd.device().objects.pds);
}

/// Slot size of a user CQ ring: one completion of the user ABI.
const USER_CQE_SLOT: usize = crate::uabi::CQE_SLOT;

/// Where a CQ keeps its completions.
enum CqRing {
    /// A kernel consumer's CQ: completions in driver memory, copied out by `poll_cq`.
    Kernel {
        /// Ring of completions; `None` in free slots.
        ring: KVec<Option<WorkCompletion>>,
        /// Oldest completion.
        head: usize,
        /// Completions held.
        len: usize,
    },
    /// A process's CQ: completions in the user ABI's form in a ring shared with it, which the
    /// process polls itself.
    User(UQueue),
}

/// The completions of a CQ and its notification state.
struct CqInner {
    ring: CqRing,
    /// Armed by `req_notify_cq`, disarmed when the handler is called.
    armed: Option<CqArm>,
    /// Completion-event moderation (`modify_cq`): events of an armed CQ held back.
    moderation: Moderator,
    /// Completions dropped because the CQ was full (the consumer sized it too small).
    overflows: u64,
    /// An overflow was reported (`IB_EVENT_CQ_ERR`) and no completion was queued since: the
    /// consumer has not polled, or resized, yet. Later overflows are counted, not reported
    /// again (each report is a GFP_ATOMIC entry on the uverbs event list).
    overflow_reported: bool,
}

impl CqInner {
    /// Completions held.
    fn len(&self) -> usize {
        match &self.ring {
            CqRing::Kernel { len, .. } => *len,
            CqRing::User(q) => q.count() as usize,
        }
    }
}

/// A completion queue: a bounded ring of completions, in driver memory for kernel consumers
/// and in a ring shared with the process for user CQs.
#[pin_data]
pub(crate) struct MetaRoceCq {
    #[pin]
    inner: SpinLockIrq<CqInner>,
}

/// Whether a completion was queued and whether the consumer must be notified.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum CqPush {
    /// Queued; call `notify_completion` once the locks are released.
    QueuedNotify,
    /// Queued; the CQ is not armed for it, or holds its event (moderation).
    Queued,
    /// Queued; the CQ holds its event (moderation) until the CQ's timer, which the caller
    /// starts ([`Cq::start_timer`]) to expire after this many nanoseconds.
    QueuedStartTimer(u64),
    /// The CQ is full: the completion was dropped (counted; a user CQ's process gets an
    /// `IB_EVENT_CQ_ERR` from [`cq_post`]), the first time since the consumer last made room.
    Overflow,
    /// The CQ is still full and its overflow was reported already: dropped and counted only.
    OverflowAgain,
}

impl MetaRoceCq {
    /// Appends a completion of QP number `qp_num`. `solicited`: the completion is for a
    /// solicited message. Any context (takes an IRQ-disabling spinlock); the caller calls
    /// [`Cq::notify_completion`] after releasing its own locks when told to, and reports an
    /// overflow of a user CQ with [`Cq::dispatch_user_event`] ([`cq_post`] does both).
    pub(crate) fn push_qpn(&self, wc: WorkCompletion, qp_num: u32, solicited: bool) -> CqPush {
        let mut g = self.inner.lock();
        let inner = &mut *g;
        let failed = wc.status != WcStatus::Success;
        let queued = match &mut inner.ring {
            CqRing::Kernel { ring, head, len } => {
                let cap = ring.len();
                if *len == cap {
                    false
                } else {
                    ring[(*head + *len) % cap] = Some(wc);
                    *len += 1;
                    true
                }
            }
            // `Err` (not a producer ring, entry too long) cannot happen for a CQ ring built by
            // `create_cq`; it is counted as an overflow rather than trusted.
            CqRing::User(q) => matches!(
                q.produce(crate::uabi::cqe(&wc, qp_num).as_bytes()),
                Ok(Ok(()))
            ),
        };
        if !queued {
            inner.overflows += 1;
            if core::mem::replace(&mut inner.overflow_reported, true) {
                return CqPush::OverflowAgain;
            }
            return CqPush::Overflow;
        }
        // There was room: the consumer polled (or the CQ was resized) since any report.
        inner.overflow_reported = false;
        let fire = match inner.armed {
            Some(CqArm::NextComp) => true,
            Some(CqArm::Solicited) => solicited || failed,
            None => false,
        };
        if !fire {
            return CqPush::Queued;
        }
        match inner.moderation.on_completion(failed) {
            Event::Notify => {
                inner.armed = None;
                CqPush::QueuedNotify
            }
            Event::StartTimer(ns) => CqPush::QueuedStartTimer(ns),
            Event::Hold => CqPush::Queued,
        }
    }

    /// The CQ's timer expired: whether the consumer must now be told of the completions whose
    /// event moderation held (then the CQ is disarmed). Any context.
    pub(crate) fn moderation_timer(&self) -> bool {
        let mut g = self.inner.lock();
        let tell = g.moderation.on_timer() && g.armed.is_some();
        if tell {
            g.armed = None;
        }
        tell
    }

    /// Removes every completion of `qp` (the QP is being destroyed), keeping the others in
    /// order. A user CQ's ring belongs to the process, which may be reading it: its entries
    /// stay (as with rdma_rxe), and librxe ignores completions of QPs it destroyed.
    pub(crate) fn purge_qp(&self, qp: QpId) {
        let mut g = self.inner.lock();
        let CqRing::Kernel { ring, head, len } = &mut g.ring else {
            return;
        };
        let (cap, h, n) = (ring.len(), *head, *len);
        let mut kept = 0;
        for i in 0..n {
            let from = (h + i) % cap;
            let wc = ring[from].take();
            if let Some(wc) = wc.filter(|wc| wc.qp != qp) {
                ring[(h + kept) % cap] = Some(wc);
                kept += 1;
            }
        }
        *len = kept;
    }
}

pub(crate) fn create_cq(
    cq: &mut NewCq<'_, MetaRoceDriver>,
) -> Result<impl PinInit<MetaRoceCq, Error>> {
    if cq.flags() != 0 {
        return Err(EOPNOTSUPP);
    }
    let want = cq.requested_cqe();
    if want == 0 || want > MAX_CQE {
        return Err(EINVAL);
    }
    let ring = match cq.udata() {
        None => {
            let capacity = want as usize;
            let mut ring = KVec::with_capacity(capacity, GFP_KERNEL_ACCOUNT)?;
            for _ in 0..capacity {
                ring.push(None, GFP_KERNEL_ACCOUNT)?;
            }
            CqRing::Kernel {
                ring,
                head: 0,
                len: 0,
            }
        }
        Some(udata) => {
            // No request; the response is the ring's mapping.
            udata.expect_no_request()?;
            let q = UQueue::new(udata, want, USER_CQE_SLOT, Role::KernelProduces)?;
            udata.write_response(crate::uabi::cq_resp(&q).as_bytes())?;
            CqRing::User(q)
        }
    };
    if let CqRing::User(q) = &ring {
        // The ring may hold more than asked for (power-of-two slots); report it, as rxe does.
        cq.set_cqe(q.capacity())?;
    }
    take(&cq.device().objects.cqs, MAX_CQ)?;
    Ok(try_pin_init!(MetaRoceCq {
        inner <- new_spinlock_irq!(
            CqInner {
                ring,
                armed: None,
                moderation: Moderator::new(),
                overflows: 0,
                overflow_reported: false,
            },
            "metaroce_cq"
        ),
    }))
}

pub(crate) fn destroy_cq(cq: &Cq<MetaRoceDriver>) {
    let (overflows, len) = {
        let g = cq.inner.lock();
        (g.overflows, g.len())
    };
    if overflows != 0 && cq.origin() == Origin::Kernel {
        pr_warn!("a kernel CQ overflowed {overflows} time(s) ({len} completions left)\n");
    }
    give(&cq.device().objects.cqs);
}

/// Resizes a user CQ: a new ring of at least `cqe` entries (`EINVAL` below the completions
/// held), the pending completions moved over in order, the new ring's mminfo in the
/// response. The providers hold their CQ lock across the command, so the
/// process does not poll meanwhile; completions arriving meanwhile go to the old or new ring
/// under the CQ lock.
pub(crate) fn resize_cq(cq: &Cq<MetaRoceDriver>, cqe: u32, udata: &Udata<'_>) -> Result {
    udata.expect_no_request()?;
    if cqe == 0 || cqe > MAX_CQE {
        return Err(EINVAL);
    }
    // Shrinking below the completions held is an error, as in rdma_rxe.
    if (cqe as usize) < cq.inner.lock().len() {
        return Err(EINVAL);
    }
    let mut new = UQueue::new(udata, cqe, USER_CQE_SLOT, Role::KernelProduces)?;
    udata.write_response(crate::uabi::cq_resp(&new).as_bytes())?;
    let capacity = new.capacity();
    let old = {
        let mut g = cq.inner.lock();
        let CqRing::User(q) = &mut g.ring else {
            return Err(EINVAL);
        };
        // Fails with EINVAL if completions arrived meanwhile beyond the new size.
        new.take_entries(q)?;
        core::mem::replace(q, new)
    };
    // The old ring's mapping is revoked outside the spinlock (it takes a mutex).
    drop(old);
    cq.set_cqe(capacity)
}

pub(crate) fn poll_cq(cq: &Cq<MetaRoceDriver>, out: &mut WcArray<'_>) -> Result {
    let mut g = cq.inner.lock();
    let CqRing::Kernel { ring, head, len } = &mut g.ring else {
        // A process polls its ring itself; uverbs' poll command has no ring to read from.
        return Err(EOPNOTSUPP);
    };
    let cap = ring.len();
    while *len > 0 && !out.is_full() {
        let slot = ring[*head].take();
        *head = (*head + 1) % cap;
        *len -= 1;
        if let Some(wc) = slot {
            // Not full (checked above): always taken.
            let _ = out.push(wc);
        }
    }
    Ok(())
}

/// Sets a CQ's completion-event moderation (`ibv_modify_cq`, ib_core's DIM): events held until
/// `count` completions or for `period_us` after the first of them (`proto::cqmod`; every u16
/// value is in range: the device reports the u16 maximum as its limits).
pub(crate) fn modify_cq(cq: &Cq<MetaRoceDriver>, count: u16, period_us: u16) -> Result {
    cq.inner.lock().moderation.set(count, period_us);
    Ok(())
}

/// The CQ's moderation timer expired: tells the consumer of the held completions, if any.
/// Softirq context.
pub(crate) fn cq_timer(cq: &Cq<MetaRoceDriver>) {
    if cq.moderation_timer() {
        cq.notify_completion();
    }
}

pub(crate) fn req_notify_cq(cq: &Cq<MetaRoceDriver>, notify: CqNotify) -> Result<bool> {
    let mut g = cq.inner.lock();
    // Asking for the next completion widens an earlier solicited-only arming, never the
    // other way round.
    if g.armed != Some(CqArm::NextComp) {
        g.armed = Some(notify.arm);
    }
    Ok(notify.report_missed && g.len() > 0)
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

/// An address handle: its RoCE v2 address vector, and for a user AH the number the provider puts in
/// its UD work requests (`ah_num`; 0 for kernel AHs, which are named by pointer).
pub(crate) struct MetaRoceAh {
    pub(crate) av: RoceAv,
    pub(crate) num: u32,
}

/// A user AH as the device's table keeps it for the send path: its PD (a UD QP may only use
/// AHs of its own PD) and its address vector.
#[derive(Clone, Copy)]
pub(crate) struct UserAh {
    pub(crate) pd: PdId,
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
    Ok(MetaRoceAh { av, num: 0 })
}

/// Creates a user AH (`create_user_ah`): numbered in the device's table and the number
/// returned to the provider (`ah_num`, then 4 reserved bytes, in both user ABIs), which
/// names the AH in every UD work request it writes to a send ring. Process context.
pub(crate) fn create_user_ah(ah: &mut NewAh<'_, MetaRoceDriver>) -> Result<MetaRoceAh> {
    let udata = ah.udata().ok_or(EINVAL)?;
    udata.expect_no_request()?;
    let av = roce_av(ah.attr())?;
    let dev: &MetaRoceDev = ah.device();
    take(&dev.objects.ahs, MAX_AH)?;
    let num = match dev.add_user_ah(UserAh {
        pd: ah.pd().id(),
        av,
    }) {
        Ok(num) => num,
        Err(e) => {
            give(&dev.objects.ahs);
            return Err(e);
        }
    };
    if let Err(e) = udata.write_response(crate::uabi::ah_resp(num).as_bytes()) {
        dev.remove_user_ah(num);
        give(&dev.objects.ahs);
        return Err(e);
    }
    Ok(MetaRoceAh { av, num })
}

/// Destroys an AH: a user AH leaves the device's table (work requests already taken from the
/// ring carry a copy of its address vector).
pub(crate) fn destroy_ah(ah: &kernel::rdma::ah::Ah<MetaRoceDriver>) {
    let dev: &MetaRoceDev = ah.device();
    if ah.num != 0 {
        dev.remove_user_ah(ah.num);
    }
    give(&dev.objects.ahs);
}

/// A memory region: a DMA MR (all of kernel memory under one key pair, local only), a user MR
/// (pinned user memory) or a fast-register MR of a kernel consumer; the last two have a region
/// in the device's table (`crate::mr`).
#[pin_data]
pub(crate) struct MetaRoceMr {
    /// Index of the keys (`key >> 8`).
    pub(crate) index: usize,
    /// Access rights at creation (fast-register MRs get theirs at each registration).
    #[allow(dead_code)] // Checked through the region table.
    pub(crate) access: AccessFlags,
    /// Whether the MR has a region in the device's table.
    pub(crate) in_table: bool,
    /// Fast-register MRs: the page list `map_mr_sg` fills for the next registration
    /// (capacity `max_num_sg`, reserved at allocation); empty for other MRs.
    #[pin]
    pub(crate) staging: SpinLockIrq<KVec<MrPage>>,
}

impl MetaRoceMr {
    pub(crate) fn new(
        index: usize,
        access: AccessFlags,
        in_table: bool,
        staging: KVec<MrPage>,
    ) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            index,
            access,
            in_table,
            staging <- new_spinlock_irq!(staging, "metaroce_mr_staging"),
        }? Error)
    }
}

/// A DMA MR with local rights only. ib_core asks for one with remote rights for an
/// `IB_PD_UNSAFE_GLOBAL_RKEY` PD (MetaRoCE reports `IBK_LOCAL_DMA_LKEY`, so that is the only
/// reason it calls this hook): such a key would let any peer that learns it read and write any
/// kernel address, which MetaRoCE does not offer. Those PDs fail with `EOPNOTSUPP`; kernel
/// consumers register memory for remote access through their own MRs instead.
pub(crate) fn get_dma_mr(
    pd: &Pd<MetaRoceDriver>,
    access: AccessFlags,
) -> Result<(MrKeys, impl PinInit<MetaRoceMr, Error>)> {
    let remote = AccessFlags::REMOTE_READ
        .union(AccessFlags::REMOTE_WRITE)
        .union(AccessFlags::REMOTE_ATOMIC);
    if access.intersects(remote) {
        return Err(EOPNOTSUPP);
    }
    let dev: &MetaRoceDev = pd.device();
    let index = dev.alloc_mr_index()?;
    // Index 0 is never handed out, so no key is 0 (the device's `local_dma_lkey`).
    let key = (index as u32) << 8;
    Ok((
        MrKeys { lkey: key, rkey: 0 },
        MetaRoceMr::new(index, access, false, KVec::new()),
    ))
}

pub(crate) fn dereg_mr(mr: &Mr<MetaRoceDriver>) -> Result {
    if mr.in_table {
        crate::mr::remove(mr)?;
    }
    mr.device().free_mr_index(mr.index);
    Ok(())
}

/// A memory window: its state is an entry of the device's region table (`crate::mr`).
pub(crate) struct MetaRoceMw {
    /// Index of the window's R_Key (`rkey >> 8`).
    pub(crate) index: usize,
}
