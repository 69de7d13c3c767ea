// SPDX-License-Identifier: GPL-2.0

//! Kernel queue pairs of a MetaRoCE device: the verbs state machine, receive queue and the
//! send queue the transport will drain.
//!
//! Nothing is transmitted yet (the RoCE v2 transport lands in issue 6): `post_send` validates
//! each work request, copies it with its SGE list and address vector into the QP's
//! [`QpInner::tx_pending`] queue, which the transmit side will drain in posting order, and
//! completes it only when the QP is flushed (error state). Receive work requests wait in
//! [`QpInner::rq`] for incoming messages the same way.

use crate::device::{MetaRoceDriver, PORT};
use crate::verbs::{roce_av, CqPush, RoceAv};
use kernel::new_spinlock_irq;
use kernel::prelude::*;
use kernel::rdma::cq::{Cq, WcOpcode, WcStatus, WorkCompletion};
use kernel::rdma::device::Mtu;
use kernel::rdma::mr::AccessFlags;
use kernel::rdma::pd::Origin;
use kernel::rdma::qp::{
    modify_is_ok, NewQp, Qp, QpAttr, QpAttrMask, QpAttrOut, QpCap, QpInitAttrOut, QpState,
    QpType,
};
use kernel::rdma::wr::{PostError, RecvWr, RecvWrList, SendFlags, SendOp, SendWr, SendWrList, Sge};
use kernel::sync::SpinLockIrq;

/// Most work requests per queue.
pub(crate) const MAX_QP_WR: u32 = 0x4000;
/// Most SGEs per work request.
pub(crate) const MAX_SGE: u32 = 32;
/// Most QPs per device (QP numbers below this).
pub(crate) const MAX_QP: u32 = 0x1000;
/// First QP number handed to RC/UC/UD QPs (0 and 1 are the special QPs).
pub(crate) const MIN_QPN: u32 = 16;
/// Largest message (rdma_rxe's limit, 8 MiB).
pub(crate) const MAX_MSG_SZ: u64 = 0x80_0000;
/// The local key of kernel memory addressed by kernel virtual address: the device's
/// `local_dma_lkey` (ib_core's `IBK_LOCAL_DMA_LKEY`), which every kernel PD reports.
pub(crate) const LOCAL_DMA_LKEY: u32 = 0;

/// A fixed-capacity FIFO of work requests, each with up to `max_sge` SGEs, allocated when
/// the QP is created so that posting never allocates.
struct WqRing<E> {
    slots: KVec<Option<E>>,
    sges: KVec<Sge>,
    max_sge: usize,
    head: usize,
    len: usize,
}

impl<E> WqRing<E> {
    fn new(depth: u32, max_sge: u32) -> Result<Self> {
        let depth = depth as usize;
        let max_sge = max_sge as usize;
        let mut slots = KVec::with_capacity(depth, GFP_KERNEL)?;
        for _ in 0..depth {
            slots.push(None, GFP_KERNEL)?;
        }
        let n = depth.checked_mul(max_sge).ok_or(EINVAL)?;
        let mut sges = KVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            sges.push(Sge::default(), GFP_KERNEL)?;
        }
        Ok(Self {
            slots,
            sges,
            max_sge,
            head: 0,
            len: 0,
        })
    }

    fn is_full(&self) -> bool {
        self.len == self.slots.len()
    }

    /// Appends `e` with a copy of `sges` (the caller checked `sges.len() <= max_sge` and that
    /// the ring is not full).
    fn push(&mut self, e: E, sges: &[Sge]) -> Result {
        if self.is_full() || sges.len() > self.max_sge {
            return Err(ENOMEM);
        }
        let idx = (self.head + self.len) % self.slots.len();
        let base = idx * self.max_sge;
        self.sges[base..base + sges.len()].copy_from_slice(sges);
        self.slots[idx] = Some(e);
        self.len += 1;
        Ok(())
    }

    /// Removes the oldest entry.
    fn pop(&mut self) -> Option<E> {
        if self.len == 0 {
            return None;
        }
        let e = self.slots[self.head].take();
        self.head = (self.head + 1) % self.slots.len();
        self.len -= 1;
        e
    }

    /// Drops every entry.
    fn clear(&mut self) {
        while self.pop().is_some() {}
        self.head = 0;
    }
}

/// A receive work request waiting for a message.
struct RecvWqe {
    wr_id: u64,
    /// SGEs used in the ring slot.
    #[allow(dead_code)] // Read by the responder (issue 6).
    num_sge: u32,
    /// Total bytes the scatter list holds.
    #[allow(dead_code)] // Read by the responder (issue 6).
    len: u64,
}

/// The destination of a datagram send, copied from the work request and its AH.
#[allow(dead_code)] // Read by the transmit side (issue 6).
struct UdDest {
    av: RoceAv,
    remote_qpn: u32,
    remote_qkey: u32,
    pkey_index: u16,
}

/// A validated send work request waiting for the transmit side.
#[allow(dead_code)] // Fields read by the transmit side (issue 6).
struct SendWqe {
    wr_id: u64,
    op: SendOp,
    flags: SendFlags,
    /// Generate a completion on success (`IB_SEND_SIGNALED` or an all-signalled QP).
    signaled: bool,
    num_sge: u32,
    /// Total bytes of the local SGEs.
    len: u64,
    /// Datagram QPs only.
    ud: Option<UdDest>,
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
    #[allow(dead_code)] // Read by the transport (issue 6).
    av: Option<RoceAv>,
}

/// The mutable state of a QP.
struct QpInner {
    state: QpState,
    attrs: QpAttrs,
    /// Posted receive work requests, oldest first.
    rq: WqRing<RecvWqe>,
    /// Validated send work requests waiting for the transmit side (issue 6), which drains
    /// them in order; only a flush (error state) completes them before that.
    tx_pending: WqRing<SendWqe>,
}

/// A kernel queue pair.
#[pin_data]
pub(crate) struct MetaRoceQp {
    qpn: u32,
    qp_type: QpType,
    sq_sig_all: bool,
    cap: QpCap,
    #[pin]
    inner: SpinLockIrq<QpInner>,
}

pub(crate) fn create_qp(qp: &mut NewQp<'_, MetaRoceDriver>) -> Result<impl PinInit<MetaRoceQp, Error>> {
    // User QPs need librxe's send and receive rings mapped into the process (the next
    // step); until then uverbs gets a clear EOPNOTSUPP.
    if qp.origin() == Origin::User {
        return Err(EOPNOTSUPP);
    }
    let qp_type = qp.qp_type();
    match qp_type {
        QpType::Gsi => {
            if qp.port_num() != PORT {
                return Err(EINVAL);
            }
        }
        QpType::Rc | QpType::Uc | QpType::Ud => {}
        // RoCE has no QP0; raw packet and XRC QPs are not offered.
        _ => return Err(EOPNOTSUPP),
    }
    if qp.has_srq() || qp.create_flags() != 0 {
        return Err(EOPNOTSUPP);
    }
    if qp.send_cq().is_none() || qp.recv_cq().is_none() {
        return Err(EINVAL);
    }
    let cap = qp.cap();
    if cap.max_send_wr > MAX_QP_WR
        || cap.max_recv_wr > MAX_QP_WR
        || cap.max_send_sge > MAX_SGE
        || cap.max_recv_sge > MAX_SGE
    {
        return Err(EINVAL);
    }
    // Inline data would be copied from kernel virtual addresses at post time, which needs the
    // memory-access abstraction of the transport step.
    if cap.max_inline_data != 0 {
        return Err(EINVAL);
    }
    let rq = WqRing::new(cap.max_recv_wr, cap.max_recv_sge)?;
    let tx_pending = WqRing::new(cap.max_send_wr, cap.max_send_sge)?;
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
                tx_pending,
            },
            "metaroce_qp"
        ),
    }))
}

pub(crate) fn destroy_qp(qp: &Qp<MetaRoceDriver>) {
    // Consumers must not find completions of a QP that no longer exists.
    if let Some(cq) = qp.send_cq() {
        cq.purge_qp(qp.id());
    }
    if let Some(cq) = qp.recv_cq() {
        cq.purge_qp(qp.id());
    }
    qp.device().free_qpn(qp.qpn);
}

/// Completions produced by a flush, delivered after the QP lock is released.
#[derive(Default)]
struct Notify {
    send: bool,
    recv: bool,
}

impl Notify {
    fn deliver(self, qp: &Qp<MetaRoceDriver>) {
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
    }
}

/// Queues a completion on `cq`; returns whether the consumer must be notified.
fn complete(cq: Option<&Cq<MetaRoceDriver>>, wc: WorkCompletion) -> bool {
    match cq.map(|cq| cq.push(wc, false)) {
        Some(CqPush::QueuedNotify) => true,
        Some(CqPush::Queued) => false,
        Some(CqPush::Overflow) | None => {
            pr_warn!("completion of a flushed work request dropped: CQ full\n");
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
        _ => WcOpcode::Send,
    }
}

/// Flushes every queued work request with `IB_WC_WR_FLUSH_ERR` (error state).
fn flush(qp: &Qp<MetaRoceDriver>, inner: &mut QpInner, n: &mut Notify) {
    while let Some(w) = inner.tx_pending.pop() {
        let wc = WorkCompletion::new(w.wr_id, WcStatus::WrFlushErr, send_wc_opcode(&w.op), qp.id());
        n.send |= complete(qp.send_cq(), wc);
    }
    while let Some(w) = inner.rq.pop() {
        let wc = WorkCompletion::new(w.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, qp.id());
        n.recv |= complete(qp.recv_cq(), wc);
    }
}

pub(crate) fn modify_qp(qp: &Qp<MetaRoceDriver>, attr: &QpAttr, mask: QpAttrMask) -> Result {
    let mut n = Notify::default();
    {
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
        if mask.contains(QpAttrMask::MAX_QP_RD_ATOMIC) {
            a.max_rd_atomic = attr.max_rd_atomic();
        }
        if mask.contains(QpAttrMask::MAX_DEST_RD_ATOMIC) {
            a.max_dest_rd_atomic = attr.max_dest_rd_atomic();
        }
        if mask.contains(QpAttrMask::AV) {
            a.av = Some(roce_av(attr.ah_attr())?);
        }
        inner.attrs = a;
        if next != cur {
            match next {
                // RESET empties both queues without completions.
                QpState::Reset => {
                    inner.rq.clear();
                    inner.tx_pending.clear();
                }
                QpState::Err => flush(qp, inner, &mut n),
                _ => {}
            }
        }
        inner.state = next;
    }
    n.deliver(qp);
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

/// Checks an SGE list against the QP's limit and returns its total length. Kernel QPs
/// address memory by kernel virtual address under the device's local DMA key; memory regions
/// registered through the MR verbs are not accepted in SGEs yet.
fn sge_total(sges: &[Sge], max_sge: u32) -> Result<u64> {
    if sges.len() > max_sge as usize {
        return Err(EINVAL);
    }
    let mut total: u64 = 0;
    for s in sges {
        if s.lkey() != LOCAL_DMA_LKEY {
            return Err(EINVAL);
        }
        total = total.checked_add(u64::from(s.length())).ok_or(EINVAL)?;
    }
    Ok(total)
}

/// Validates one send work request for `qp` and builds its queue entry.
fn send_wqe(q: &MetaRoceQp, wr: &SendWr<'_, MetaRoceDriver>) -> Result<SendWqe> {
    let sges = wr.sges()?;
    let len = sge_total(sges, q.cap.max_send_sge)?;
    if len > MAX_MSG_SZ {
        return Err(EINVAL);
    }
    let op = wr.op();
    let allowed = match q.qp_type {
        QpType::Gsi | QpType::Ud => matches!(op, SendOp::Send | SendOp::SendWithImm { .. }),
        QpType::Uc => matches!(
            op,
            SendOp::Send
                | SendOp::SendWithImm { .. }
                | SendOp::RdmaWrite { .. }
                | SendOp::RdmaWriteWithImm { .. }
        ),
        QpType::Rc => !matches!(op, SendOp::Other(_)),
        _ => false,
    };
    if !allowed {
        return Err(EINVAL);
    }
    if matches!(op, SendOp::CmpSwap { .. } | SendOp::FetchAdd { .. }) && (len != 8 || sges.len() != 1) {
        return Err(EINVAL);
    }
    let flags = wr.flags();
    if flags.inline() && len > u64::from(q.cap.max_inline_data) {
        return Err(EINVAL);
    }
    let ud = match wr.ud()? {
        Some(d) => Some(UdDest {
            av: d.ah.av,
            remote_qpn: d.remote_qpn,
            remote_qkey: d.remote_qkey,
            pkey_index: d.pkey_index,
        }),
        None => None,
    };
    Ok(SendWqe {
        wr_id: wr.wr_id(),
        op,
        flags,
        signaled: q.sq_sig_all || flags.signaled(),
        num_sge: sges.len() as u32,
        len,
        ud,
    })
}

/// Posts send work requests. Runs with IRQs possibly disabled: no allocation, no sleeping.
pub(crate) fn post_send<'a>(
    qp: &Qp<MetaRoceDriver>,
    wrs: SendWrList<'a, MetaRoceDriver>,
) -> Result<(), PostError<SendWr<'a, MetaRoceDriver>>> {
    let mut n = Notify::default();
    let mut res = Ok(());
    {
        let mut g = qp.inner.lock();
        for wr in wrs {
            let posted = (|| {
                match g.state {
                    QpState::Rts | QpState::Sqd => {}
                    // Posting to a QP in error completes the request as flushed (which is how
                    // ib_drain_sq learns the queue is empty).
                    QpState::Err | QpState::Sqe => {
                        let wqe = send_wqe(qp, &wr)?;
                        let wc = WorkCompletion::new(
                            wqe.wr_id,
                            WcStatus::WrFlushErr,
                            send_wc_opcode(&wqe.op),
                            qp.id(),
                        );
                        n.send |= complete(qp.send_cq(), wc);
                        return Ok(());
                    }
                    _ => return Err(EINVAL),
                }
                if g.tx_pending.is_full() {
                    return Err(ENOMEM);
                }
                let wqe = send_wqe(qp, &wr)?;
                g.tx_pending.push(wqe, wr.sges()?)
            })();
            if let Err(error) = posted {
                res = Err(PostError { error, bad_wr: wr });
                break;
            }
        }
    }
    n.deliver(qp);
    res
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
        for wr in wrs {
            let posted = (|| {
                let sges = wr.sges()?;
                let len = sge_total(sges, qp.cap.max_recv_sge)?;
                match g.state {
                    QpState::Reset => Err(EINVAL),
                    QpState::Err => {
                        let wc =
                            WorkCompletion::new(wr.wr_id(), WcStatus::WrFlushErr, WcOpcode::Recv, qp.id());
                        n.recv |= complete(qp.recv_cq(), wc);
                        Ok(())
                    }
                    _ => {
                        let wqe = RecvWqe {
                            wr_id: wr.wr_id(),
                            num_sge: sges.len() as u32,
                            len,
                        };
                        g.rq.push(wqe, sges)
                    }
                }
            })();
            if let Err(error) = posted {
                res = Err(PostError { error, bad_wr: wr });
                break;
            }
        }
    }
    n.deliver(qp);
    res
}
