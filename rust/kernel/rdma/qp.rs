// SPDX-License-Identifier: GPL-2.0

//! Queue pairs (`struct ib_qp`) and their attributes.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! A [`Qp<T>`] is allocated by ib_core (`ops.size_ib_qp`) and holds the C `struct ib_qp`
//! followed by [`Driver::QpData`], initialised in place from [`Driver::create_qp`] and dropped
//! in `destroy_qp`. ib_core keeps the QP's PD and CQs alive (use counts) while it exists.

use super::{
    ah::AhAttr,
    cq::Cq,
    device::{
        Adapter,
        Device,
        Driver,
        Mtu, //
    },
    mr::AccessFlags,
    pd::{
        Origin,
        Pd, //
    },
    srq::Srq,
    ticket::{
        Lane,
        Ticket,
        WorkQueues, //
    },
    wr::{
        RecvWr,
        RecvWrList,
        SendOp,
        SendWr,
        SendWrList, //
    },
};
use crate::{
    bindings,
    error::from_result,
    prelude::*,
    sync::{
        aref::AlwaysRefCounted,
        Arc,
        Completion,
        Refcount, //
    },
    types::Opaque, //
};
use core::{
    marker::PhantomData,
    ops::Deref, //
    ptr::NonNull,
};

/// The type of a QP (`enum ib_qp_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpType {
    /// `IB_QPT_SMI`: QP0 (InfiniBand subnet management; never on RoCE).
    Smi,
    /// `IB_QPT_GSI`: QP1, general services (MADs: CM on RoCE), UD semantics.
    Gsi,
    /// `IB_QPT_RC`: reliable connected.
    Rc,
    /// `IB_QPT_UC`: unreliable connected.
    Uc,
    /// `IB_QPT_UD`: unreliable datagram.
    Ud,
    /// Any other type (raw packet, XRC, driver-specific), by its C value.
    Other(u32),
}

impl QpType {
    fn from_raw(raw: bindings::ib_qp_type) -> Self {
        match raw {
            bindings::ib_qp_type_IB_QPT_SMI => Self::Smi,
            bindings::ib_qp_type_IB_QPT_GSI => Self::Gsi,
            bindings::ib_qp_type_IB_QPT_RC => Self::Rc,
            bindings::ib_qp_type_IB_QPT_UC => Self::Uc,
            bindings::ib_qp_type_IB_QPT_UD => Self::Ud,
            other => Self::Other(other),
        }
    }

    fn raw(self) -> bindings::ib_qp_type {
        match self {
            Self::Smi => bindings::ib_qp_type_IB_QPT_SMI,
            Self::Gsi => bindings::ib_qp_type_IB_QPT_GSI,
            Self::Rc => bindings::ib_qp_type_IB_QPT_RC,
            Self::Uc => bindings::ib_qp_type_IB_QPT_UC,
            Self::Ud => bindings::ib_qp_type_IB_QPT_UD,
            Self::Other(raw) => raw,
        }
    }

    /// Whether send work requests carry a UD destination (`struct ib_ud_wr`): UD, GSI, SMI.
    pub fn is_datagram(self) -> bool {
        matches!(self, Self::Ud | Self::Gsi | Self::Smi)
    }
}

/// The state of a QP (`enum ib_qp_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum QpState {
    /// `IB_QPS_RESET`.
    Reset = bindings::ib_qp_state_IB_QPS_RESET,
    /// `IB_QPS_INIT`.
    Init = bindings::ib_qp_state_IB_QPS_INIT,
    /// `IB_QPS_RTR`: ready to receive.
    Rtr = bindings::ib_qp_state_IB_QPS_RTR,
    /// `IB_QPS_RTS`: ready to send.
    Rts = bindings::ib_qp_state_IB_QPS_RTS,
    /// `IB_QPS_SQD`: send queue drained.
    Sqd = bindings::ib_qp_state_IB_QPS_SQD,
    /// `IB_QPS_SQE`: send queue error.
    Sqe = bindings::ib_qp_state_IB_QPS_SQE,
    /// `IB_QPS_ERR`.
    Err = bindings::ib_qp_state_IB_QPS_ERR,
}

impl QpState {
    /// The state of C value `raw`, or `EINVAL`.
    pub fn from_raw(raw: u32) -> Result<Self> {
        Ok(match raw {
            bindings::ib_qp_state_IB_QPS_RESET => Self::Reset,
            bindings::ib_qp_state_IB_QPS_INIT => Self::Init,
            bindings::ib_qp_state_IB_QPS_RTR => Self::Rtr,
            bindings::ib_qp_state_IB_QPS_RTS => Self::Rts,
            bindings::ib_qp_state_IB_QPS_SQD => Self::Sqd,
            bindings::ib_qp_state_IB_QPS_SQE => Self::Sqe,
            bindings::ib_qp_state_IB_QPS_ERR => Self::Err,
            _ => return Err(EINVAL),
        })
    }
}

/// Whether moving a QP of type `ty` from `cur` to `next` with attributes `mask` is allowed by
/// the IB specification's table (`ib_modify_qp_is_ok`): the required attributes are present
/// and no forbidden one is. Any context.
pub fn modify_is_ok(cur: QpState, next: QpState, ty: QpType, mask: QpAttrMask) -> bool {
    // SAFETY: A pure function of its arguments.
    unsafe { bindings::ib_modify_qp_is_ok(cur as u32, next as u32, ty.raw(), mask.0) }
}

impl Mtu {
    /// The MTU of C value `raw` (`enum ib_mtu`), or `EINVAL`.
    pub fn from_raw(raw: u32) -> Result<Self> {
        Ok(match raw {
            bindings::ib_mtu_IB_MTU_256 => Self::Mtu256,
            bindings::ib_mtu_IB_MTU_512 => Self::Mtu512,
            bindings::ib_mtu_IB_MTU_1024 => Self::Mtu1024,
            bindings::ib_mtu_IB_MTU_2048 => Self::Mtu2048,
            bindings::ib_mtu_IB_MTU_4096 => Self::Mtu4096,
            _ => return Err(EINVAL),
        })
    }
}

/// The attributes a `modify_qp` call carries (`enum ib_qp_attr_mask`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpAttrMask(u32);

macro_rules! mask_consts {
    ($($(#[$m:meta])* $name:ident = $c:ident,)*) => {
        impl QpAttrMask {
            $(
                $(#[$m])*
                pub const $name: Self = Self(bindings::$c);
            )*
        }
    };
}

mask_consts! {
    /// `IB_QP_STATE`.
    STATE = ib_qp_attr_mask_IB_QP_STATE,
    /// `IB_QP_CUR_STATE`.
    CUR_STATE = ib_qp_attr_mask_IB_QP_CUR_STATE,
    /// `IB_QP_EN_SQD_ASYNC_NOTIFY`.
    EN_SQD_ASYNC_NOTIFY = ib_qp_attr_mask_IB_QP_EN_SQD_ASYNC_NOTIFY,
    /// `IB_QP_ACCESS_FLAGS`.
    ACCESS_FLAGS = ib_qp_attr_mask_IB_QP_ACCESS_FLAGS,
    /// `IB_QP_PKEY_INDEX`.
    PKEY_INDEX = ib_qp_attr_mask_IB_QP_PKEY_INDEX,
    /// `IB_QP_PORT`.
    PORT = ib_qp_attr_mask_IB_QP_PORT,
    /// `IB_QP_QKEY`.
    QKEY = ib_qp_attr_mask_IB_QP_QKEY,
    /// `IB_QP_AV`: the primary path (address vector).
    AV = ib_qp_attr_mask_IB_QP_AV,
    /// `IB_QP_PATH_MTU`.
    PATH_MTU = ib_qp_attr_mask_IB_QP_PATH_MTU,
    /// `IB_QP_TIMEOUT`.
    TIMEOUT = ib_qp_attr_mask_IB_QP_TIMEOUT,
    /// `IB_QP_RETRY_CNT`.
    RETRY_CNT = ib_qp_attr_mask_IB_QP_RETRY_CNT,
    /// `IB_QP_RNR_RETRY`.
    RNR_RETRY = ib_qp_attr_mask_IB_QP_RNR_RETRY,
    /// `IB_QP_RQ_PSN`.
    RQ_PSN = ib_qp_attr_mask_IB_QP_RQ_PSN,
    /// `IB_QP_MAX_QP_RD_ATOMIC`.
    MAX_QP_RD_ATOMIC = ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC,
    /// `IB_QP_ALT_PATH`.
    ALT_PATH = ib_qp_attr_mask_IB_QP_ALT_PATH,
    /// `IB_QP_MIN_RNR_TIMER`.
    MIN_RNR_TIMER = ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER,
    /// `IB_QP_SQ_PSN`.
    SQ_PSN = ib_qp_attr_mask_IB_QP_SQ_PSN,
    /// `IB_QP_MAX_DEST_RD_ATOMIC`.
    MAX_DEST_RD_ATOMIC = ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC,
    /// `IB_QP_PATH_MIG_STATE`.
    PATH_MIG_STATE = ib_qp_attr_mask_IB_QP_PATH_MIG_STATE,
    /// `IB_QP_CAP`.
    CAP = ib_qp_attr_mask_IB_QP_CAP,
    /// `IB_QP_DEST_QPN`.
    DEST_QPN = ib_qp_attr_mask_IB_QP_DEST_QPN,
    /// `IB_QP_RATE_LIMIT`.
    RATE_LIMIT = ib_qp_attr_mask_IB_QP_RATE_LIMIT,
}

impl QpAttrMask {
    /// Whether every attribute of `other` is in `self`.
    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// The raw bits.
    pub fn bits(self) -> u32 {
        self.0
    }
}

/// Queue sizes of a QP (`struct ib_qp_cap`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpCap {
    /// Send work requests.
    pub max_send_wr: u32,
    /// Receive work requests.
    pub max_recv_wr: u32,
    /// SGEs per send work request.
    pub max_send_sge: u32,
    /// SGEs per receive work request.
    pub max_recv_sge: u32,
    /// Inline data bytes per send work request.
    pub max_inline_data: u32,
}

impl QpCap {
    fn from_raw(c: &bindings::ib_qp_cap) -> Self {
        Self {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
        }
    }

    fn write(&self, c: &mut bindings::ib_qp_cap) {
        c.max_send_wr = self.max_send_wr;
        c.max_recv_wr = self.max_recv_wr;
        c.max_send_sge = self.max_send_sge;
        c.max_recv_sge = self.max_recv_sge;
        c.max_inline_data = self.max_inline_data;
    }
}

/// A QP's identity, for [`WorkCompletion::qp`](super::cq::WorkCompletion::qp).
///
/// It is never dereferenced by Rust; it only ends up in `ib_wc::qp`, where consumers expect
/// the QP to still exist (drivers remove a destroyed QP's completions, see
/// [`Driver::destroy_qp`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpId(pub(super) *mut bindings::ib_qp);

// SAFETY: A plain identity, never dereferenced.
unsafe impl Send for QpId {}
// SAFETY: A plain identity, never dereferenced.
unsafe impl Sync for QpId {}

/// An asynchronous QP event (`enum ib_event_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum QpEvent {
    /// `IB_EVENT_QP_FATAL`.
    Fatal = bindings::ib_event_type_IB_EVENT_QP_FATAL,
    /// `IB_EVENT_QP_REQ_ERR`.
    ReqErr = bindings::ib_event_type_IB_EVENT_QP_REQ_ERR,
    /// `IB_EVENT_QP_ACCESS_ERR`.
    AccessErr = bindings::ib_event_type_IB_EVENT_QP_ACCESS_ERR,
    /// `IB_EVENT_COMM_EST`: first packet received in RTR.
    CommEst = bindings::ib_event_type_IB_EVENT_COMM_EST,
    /// `IB_EVENT_SQ_DRAINED`.
    SqDrained = bindings::ib_event_type_IB_EVENT_SQ_DRAINED,
    /// `IB_EVENT_PATH_MIG`.
    PathMig = bindings::ib_event_type_IB_EVENT_PATH_MIG,
    /// `IB_EVENT_QP_LAST_WQE_REACHED`.
    LastWqeReached = bindings::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED,
}

/// A queue pair: the C `struct ib_qp` followed by the driver's data.
///
/// # Invariants
///
/// - Allocated by ib_core with `size_ib_qp == size_of::<Self>()`; `ibqp.device` is a
///   [`Device<T>`] whose data outlives the QP, and its PD and CQs (if any) are objects of `T`
///   that outlive it (ib_core counts their uses).
/// - `data` and `work` are initialised for as long as a `&Qp<T>` exists: between a successful
///   `create_qp` and `destroy_qp`. `work` is `Some` exactly for a kernel QP: the numbering of
///   its requests ([`super::ticket`]), whose every request is retired when the QP moves to
///   RESET and when it is destroyed.
/// - `users` counts the [`ARef<Qp<T>>`](crate::sync::aref::ARef)s plus one held by ib_core from creation until
///   `destroy_qp`, which waits on `idle` (completed when `users` drops to zero) before it drops
///   `data` and lets ib_core free the memory.
///
/// # Counted references
///
/// ib_core destroys a QP whenever its owner asks, while the driver's receive path (softirq)
/// and transmit worker may be in the middle of using it. A driver keeps the QPs its data path
/// can reach as [`ARef<Qp<T>>`](crate::sync::aref::ARef) (taken with
/// `ARef::from(&qp)`), gives up its table entries in [`Driver::destroy_qp`], and the abstraction
/// then waits until every other reference is gone. Taking a reference inside `destroy_qp` and
/// keeping it deadlocks the destroying task (never a use after free).
#[repr(C)]
pub struct Qp<T: Driver> {
    ibqp: Opaque<bindings::ib_qp>,
    users: Refcount,
    idle: Completion,
    work: Option<Arc<WorkQueues>>,
    data: T::QpData,
}

/// The identity of a user context ([`Qp::ucontext_id`]): comparable, nothing else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UcontextId(usize);

// SAFETY: `users` counts the references (type invariant): `inc_ref` is called with a live QP (a
// `&Qp<T>` exists) and `dec_ref` on zero wakes `destroy_qp`, which alone frees the QP after that.
unsafe impl<T: Driver> AlwaysRefCounted for Qp<T> {
    fn inc_ref(&self) {
        self.users.inc();
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns a reference, so the QP is still alive.
        let qp = unsafe { obj.as_ref() };
        if qp.users.dec_and_test() {
            // The last access: `destroy_qp` may free the QP as soon as it is woken.
            qp.idle.complete_all();
        }
    }
}

// SAFETY: `struct ib_qp` may be used from any thread; `T::QpData` is `Send`.
unsafe impl<T: Driver> Send for Qp<T> {}
// SAFETY: `&Qp<T>` methods read fields fixed while the QP exists; `T::QpData` is `Sync`.
unsafe impl<T: Driver> Sync for Qp<T> {}

impl<T: Driver> Deref for Qp<T> {
    type Target = T::QpData;

    fn deref(&self) -> &T::QpData {
        &self.data
    }
}

impl<T: Driver> Qp<T> {
    /// # Safety
    ///
    /// `ptr` points to the `ib_qp` of a `Qp<T>` whose data is initialised and stays so for
    /// `'a`.
    pub(super) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_qp) -> &'a Self {
        // SAFETY: `ibqp` is the first field of the `repr(C)` `Self`; the caller guarantees the
        // rest.
        unsafe { &*crate::container_of!(Opaque::cast_from(ptr), Self, ibqp) }
    }

    fn as_raw(&self) -> *mut bindings::ib_qp {
        self.ibqp.get()
    }

    /// The device of the QP.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: `device` is set before `create_qp` and never changes (type invariant).
        unsafe { Device::from_raw((*self.as_raw()).device) }
    }

    /// The QP's identity, to put in work completions.
    pub fn id(&self) -> QpId {
        QpId(self.as_raw())
    }

    /// The QP number.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: Set by the driver in `create_qp`, never changed afterwards.
        unsafe { (*self.as_raw()).qp_num }
    }

    /// The QP's type.
    pub fn qp_type(&self) -> QpType {
        // SAFETY: Set before `create_qp`, never changed.
        QpType::from_raw(unsafe { (*self.as_raw()).qp_type })
    }

    /// Whether a kernel consumer or a user process owns the QP.
    pub fn origin(&self) -> Origin {
        // SAFETY: `uobject` is set before `create_qp` and never changes.
        if unsafe { (*self.as_raw()).uobject }.is_null() {
            Origin::Kernel
        } else {
            Origin::User
        }
    }

    /// A ticket for a send work request being posted to this kernel QP, which its buffers
    /// ([`KernelBuf::from_sge`](super::wr::KernelBuf::from_sge)) and its completion
    /// ([`WorkCompletion::with_ticket`](super::cq::WorkCompletion::with_ticket)) need. `EINVAL`
    /// for a user QP. Any context.
    pub fn issue_send(&self, wr: &SendWr<'_, T>) -> Result<Ticket> {
        self.work
            .as_ref()
            .ok_or(EINVAL)?
            .issue(Lane::Send, wr.wr_id())
    }

    /// A ticket for a receive work request being posted to this kernel QP; as
    /// [`Qp::issue_send`].
    pub fn issue_recv(&self, wr: &RecvWr<'_>) -> Result<Ticket> {
        self.work
            .as_ref()
            .ok_or(EINVAL)?
            .issue(Lane::Recv, wr.wr_id())
    }

    pub(super) fn work_queues(&self) -> Option<&Arc<WorkQueues>> {
        self.work.as_ref()
    }

    /// The identity of the user context that created the QP (`None`: a kernel QP). Two live QPs
    /// give equal values if and only if one user context created both; it is only for
    /// comparing (a per-process quota), nothing can be reached through it.
    pub fn ucontext_id(&self) -> Option<UcontextId> {
        if self.origin() == Origin::Kernel {
            return None;
        }
        // SAFETY: A user QP's `pd` is its user PD, set before `create_qp`, never changed and
        // kept alive by the QP (`usecnt`). Its uverbs object was allocated with `context` set
        // before the PD was created, and is cleared and freed only after the PD is destroyed,
        // which cannot happen while the QP exists (`&self`).
        let ctx = unsafe {
            let pd = (*self.as_raw()).pd;
            if pd.is_null() || (*pd).uobject.is_null() {
                return None;
            }
            (*(*pd).uobject).context
        };
        (!ctx.is_null()).then_some(UcontextId(ctx as usize))
    }

    /// The QP's protection domain.
    pub fn pd(&self) -> Option<&Pd<T>> {
        // SAFETY: `pd` is null or a PD of this driver kept alive by the QP (type invariant);
        // kernel QPs never change it.
        let pd = unsafe { (*self.as_raw()).pd };
        // SAFETY: As above.
        (!pd.is_null()).then(|| unsafe { Pd::from_raw(pd) })
    }

    /// The CQ of the send queue.
    pub fn send_cq(&self) -> Option<&Cq<T>> {
        // SAFETY: Set by ib_core at creation, a CQ of this driver kept alive by the QP.
        let cq = unsafe { (*self.as_raw()).send_cq };
        // SAFETY: As above.
        (!cq.is_null()).then(|| unsafe { Cq::from_raw(cq) })
    }

    /// The CQ of the receive queue.
    pub fn recv_cq(&self) -> Option<&Cq<T>> {
        // SAFETY: Set by ib_core at creation, a CQ of this driver kept alive by the QP.
        let cq = unsafe { (*self.as_raw()).recv_cq };
        // SAFETY: As above.
        (!cq.is_null()).then(|| unsafe { Cq::from_raw(cq) })
    }

    /// The shared receive queue the QP takes its receive work requests from, if it was
    /// created with one.
    pub fn srq(&self) -> Option<&Srq<T>> {
        // SAFETY: `srq` is set by ib_core before `create_qp` and never changes; a non-null one
        // is an SRQ of this driver that ib_core keeps alive while the QP exists (its `usecnt`
        // makes `ib_destroy_srq_user` fail with `EBUSY`).
        let srq = unsafe { (*self.as_raw()).srq };
        // SAFETY: As above.
        (!srq.is_null()).then(|| unsafe { Srq::from_raw(srq) })
    }

    /// Reports an asynchronous event on the QP to its consumer (`ib_qp::event_handler`).
    ///
    /// Process context only, with no driver lock held: consumers' handlers expect workqueue
    /// context (`struct ib_qp_init_attr`), and some call back into the driver.
    pub fn dispatch_event(&self, event: QpEvent) {
        let qp = self.as_raw();
        // SAFETY: The QP is valid; ib_core set `event_handler` (its own dispatcher) and
        // `qp_context` at creation; the event lives on the stack for the synchronous call.
        unsafe {
            if let Some(handler) = (*qp).event_handler {
                let mut ev: bindings::ib_event = pin_init::zeroed();
                ev.device = (*qp).device;
                ev.element.qp = qp;
                ev.event = event as u32;
                handler(&mut ev, (*qp).qp_context);
            }
        }
    }
}

/// A queue pair being created, handed to [`Driver::create_qp`].
///
/// # Invariants
///
/// `qp` is the zeroed `Qp<T>` allocation ib_core is creating, with `device`, `pd`, `qp_type`,
/// `send_cq`, `recv_cq` and `uobject` set; its data is not initialised. `attr` is the
/// creator's attributes, exclusively ours for the call.
pub struct NewQp<'a, T: Driver> {
    qp: *mut bindings::ib_qp,
    attr: &'a mut bindings::ib_qp_init_attr,
    origin: Origin,
    udata: Option<super::udata::Udata<'a>>,
    _p: PhantomData<T>,
}

impl<'a, T: Driver> NewQp<'a, T> {
    /// The driver-specific data of a user QP's system call: the driver reads its request (or
    /// checks there is none, [`Udata::expect_no_request`](super::udata::Udata::expect_no_request))
    /// and writes its response (e.g. librxe's `struct rxe_create_qp_resp`, the rings' `mmap`
    /// information). `None` for kernel QPs.
    pub fn udata(&self) -> Option<&super::udata::Udata<'a>> {
        self.udata.as_ref()
    }

    /// The device of the new QP.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: `device` is set before `create_qp`; the device is live.
        unsafe { Device::from_raw((*self.qp).device) }
    }

    /// Who creates the QP.
    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// The QP's protection domain.
    pub fn pd(&self) -> Option<&Pd<T>> {
        // SAFETY: `pd` is null or a live PD of this driver (the creator holds it).
        let pd = unsafe { (*self.qp).pd };
        // SAFETY: As above.
        (!pd.is_null()).then(|| unsafe { Pd::from_raw(pd) })
    }

    /// The requested type.
    pub fn qp_type(&self) -> QpType {
        QpType::from_raw(self.attr.qp_type)
    }

    /// The requested queue sizes.
    pub fn cap(&self) -> QpCap {
        QpCap::from_raw(&self.attr.cap)
    }

    /// Reports the granted queue sizes (at least the requested ones) back to the creator.
    pub fn set_cap(&mut self, cap: QpCap) {
        cap.write(&mut self.attr.cap);
    }

    /// Whether every send work request generates a completion (`IB_SIGNAL_ALL_WR`), rather
    /// than only those with `IB_SEND_SIGNALED`.
    pub fn sq_sig_all(&self) -> bool {
        self.attr.sq_sig_type == bindings::ib_sig_type_IB_SIGNAL_ALL_WR
    }

    /// The CQ of the send queue.
    pub fn send_cq(&self) -> Option<&Cq<T>> {
        let cq = self.attr.send_cq;
        // SAFETY: A CQ of this driver the creator holds (ib_core checked it belongs to the
        // device).
        (!cq.is_null()).then(|| unsafe { Cq::from_raw(cq) })
    }

    /// The CQ of the receive queue.
    pub fn recv_cq(&self) -> Option<&Cq<T>> {
        let cq = self.attr.recv_cq;
        // SAFETY: As in `send_cq`.
        (!cq.is_null()).then(|| unsafe { Cq::from_raw(cq) })
    }

    /// Whether the QP receives through a shared receive queue.
    pub fn has_srq(&self) -> bool {
        !self.attr.srq.is_null()
    }

    /// The shared receive queue the QP will take its receive work requests from, if any.
    pub fn srq(&self) -> Option<&Srq<T>> {
        let srq = self.attr.srq;
        // SAFETY: ib_core (uverbs: `create_qp` with the SRQ's object looked up for reading)
        // checked that the SRQ belongs to the device, so it is an `Srq<T>`; the creator holds
        // it for the call, and afterwards ib_core counts the QP's use of it.
        (!srq.is_null()).then(|| unsafe { Srq::from_raw(srq) })
    }

    /// The creation flags (`IB_QP_CREATE_*`).
    pub fn create_flags(&self) -> u32 {
        self.attr.create_flags
    }

    /// The port (special QPs and RW API users only; 0 otherwise).
    pub fn port_num(&self) -> u32 {
        self.attr.port_num
    }

    /// Sets the QP number (1 for GSI, 0 for SMI, unique per device otherwise).
    pub fn set_qp_num(&mut self, qpn: u32) {
        // SAFETY: The allocation is ours until `create_qp` returns (type invariant).
        unsafe { (*self.qp).qp_num = qpn };
    }
}

/// The attributes of a `modify_qp` call (`struct ib_qp_attr`); only those in the call's
/// [`QpAttrMask`] are meaningful.
#[repr(transparent)]
pub struct QpAttr(bindings::ib_qp_attr);

impl QpAttr {
    /// The new state ([`QpAttrMask::STATE`]).
    pub fn qp_state(&self) -> Result<QpState> {
        QpState::from_raw(self.0.qp_state)
    }

    /// The state the consumer believes the QP is in ([`QpAttrMask::CUR_STATE`]).
    pub fn cur_qp_state(&self) -> Result<QpState> {
        QpState::from_raw(self.0.cur_qp_state)
    }

    /// The path MTU ([`QpAttrMask::PATH_MTU`]).
    pub fn path_mtu(&self) -> Result<Mtu> {
        Mtu::from_raw(self.0.path_mtu)
    }

    /// The Q_Key ([`QpAttrMask::QKEY`]).
    pub fn qkey(&self) -> u32 {
        self.0.qkey
    }

    /// The receive PSN ([`QpAttrMask::RQ_PSN`]), 24 bits.
    pub fn rq_psn(&self) -> u32 {
        self.0.rq_psn & 0xff_ffff
    }

    /// The send PSN ([`QpAttrMask::SQ_PSN`]), 24 bits.
    pub fn sq_psn(&self) -> u32 {
        self.0.sq_psn & 0xff_ffff
    }

    /// The destination QP number ([`QpAttrMask::DEST_QPN`]), 24 bits.
    pub fn dest_qp_num(&self) -> u32 {
        self.0.dest_qp_num & 0xff_ffff
    }

    /// Remote access rights ([`QpAttrMask::ACCESS_FLAGS`]).
    pub fn access_flags(&self) -> AccessFlags {
        AccessFlags::from_raw(self.0.qp_access_flags as u32)
    }

    /// Queue sizes ([`QpAttrMask::CAP`]).
    pub fn cap(&self) -> QpCap {
        QpCap::from_raw(&self.0.cap)
    }

    /// The primary path ([`QpAttrMask::AV`]); for RoCE ib_core has resolved the destination MAC.
    pub fn ah_attr(&self) -> &AhAttr {
        AhAttr::from_ref(&self.0.ah_attr)
    }

    /// The P_Key index ([`QpAttrMask::PKEY_INDEX`]).
    pub fn pkey_index(&self) -> u16 {
        self.0.pkey_index
    }

    /// Whether to report `IB_EVENT_SQ_DRAINED` ([`QpAttrMask::EN_SQD_ASYNC_NOTIFY`]).
    pub fn en_sqd_async_notify(&self) -> bool {
        self.0.en_sqd_async_notify != 0
    }

    /// Outstanding RDMA READs/atomics as requester ([`QpAttrMask::MAX_QP_RD_ATOMIC`]).
    pub fn max_rd_atomic(&self) -> u8 {
        self.0.max_rd_atomic
    }

    /// Outstanding RDMA READs/atomics as responder ([`QpAttrMask::MAX_DEST_RD_ATOMIC`]).
    pub fn max_dest_rd_atomic(&self) -> u8 {
        self.0.max_dest_rd_atomic
    }

    /// The RNR NAK timer code ([`QpAttrMask::MIN_RNR_TIMER`]).
    pub fn min_rnr_timer(&self) -> u8 {
        self.0.min_rnr_timer
    }

    /// The port ([`QpAttrMask::PORT`]).
    pub fn port_num(&self) -> u32 {
        self.0.port_num
    }

    /// The local ACK timeout exponent ([`QpAttrMask::TIMEOUT`]).
    pub fn timeout(&self) -> u8 {
        self.0.timeout
    }

    /// Transport retries ([`QpAttrMask::RETRY_CNT`]).
    pub fn retry_cnt(&self) -> u8 {
        self.0.retry_cnt
    }

    /// RNR retries ([`QpAttrMask::RNR_RETRY`]).
    pub fn rnr_retry(&self) -> u8 {
        self.0.rnr_retry
    }
}

/// Generates chaining setters for plain fields of a `repr(transparent)` output wrapper.
macro_rules! out_setters {
    ($ty:ident { $($(#[$m:meta])* $name:ident : $t:ty),* $(,)? }) => {
        impl $ty {
            $(
                $(#[$m])*
                pub fn $name(&mut self, value: $t) -> &mut Self {
                    self.0.$name = value;
                    self
                }
            )*
        }
    };
}

/// A QP's attributes being reported by [`Driver::query_qp`] (zeroed before the call).
#[repr(transparent)]
pub struct QpAttrOut(bindings::ib_qp_attr);

out_setters!(QpAttrOut {
    /// Q_Key.
    qkey: u32,
    /// Receive PSN.
    rq_psn: u32,
    /// Send PSN.
    sq_psn: u32,
    /// Destination QP number.
    dest_qp_num: u32,
    /// P_Key index.
    pkey_index: u16,
    /// Outstanding RDMA READs/atomics as requester.
    max_rd_atomic: u8,
    /// Outstanding RDMA READs/atomics as responder.
    max_dest_rd_atomic: u8,
    /// RNR NAK timer code.
    min_rnr_timer: u8,
    /// Port.
    port_num: u32,
    /// Local ACK timeout exponent.
    timeout: u8,
    /// Transport retries.
    retry_cnt: u8,
    /// RNR retries.
    rnr_retry: u8,
});

impl QpAttrOut {
    /// Sets the current state (also as `cur_qp_state`).
    pub fn qp_state(&mut self, state: QpState) -> &mut Self {
        self.0.qp_state = state as u32;
        self.0.cur_qp_state = state as u32;
        self
    }

    /// Sets the path MTU.
    pub fn path_mtu(&mut self, mtu: Mtu) -> &mut Self {
        self.0.path_mtu = mtu as u32;
        self
    }

    /// Sets the remote access rights.
    pub fn access_flags(&mut self, access: AccessFlags) -> &mut Self {
        self.0.qp_access_flags = access.bits() as c_int;
        self
    }

    /// Sets the queue sizes.
    pub fn cap(&mut self, cap: QpCap) -> &mut Self {
        cap.write(&mut self.0.cap);
        self
    }

    /// Sets whether the send queue is draining (SQD).
    pub fn sq_draining(&mut self, draining: bool) -> &mut Self {
        self.0.sq_draining = u8::from(draining);
        self
    }
}

/// A QP's creation attributes being reported by [`Driver::query_qp`] (zeroed before the call).
#[repr(transparent)]
pub struct QpInitAttrOut(bindings::ib_qp_init_attr);

impl QpInitAttrOut {
    /// Sets the queue sizes.
    pub fn cap(&mut self, cap: QpCap) -> &mut Self {
        cap.write(&mut self.0.cap);
        self
    }

    /// Sets whether every send work request is signalled.
    pub fn sq_sig_all(&mut self, all: bool) -> &mut Self {
        self.0.sq_sig_type = if all {
            bindings::ib_sig_type_IB_SIGNAL_ALL_WR
        } else {
            bindings::ib_sig_type_IB_SIGNAL_REQ_WR
        };
        self
    }
}

impl<T: Driver> Adapter<T> {
    /// # Safety
    ///
    /// `ibqp` is a zeroed allocation of `size_ib_qp` bytes prepared by ib_core's `create_qp`
    /// for a live device of this driver; `attr` is valid; `udata` is null or the system
    /// call's.
    pub(super) unsafe extern "C" fn create_qp_callback(
        ibqp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `udata` is null or the system call's valid udata, for the call. The
            // driver handles a user QP's request and response itself (`NewQp::udata`).
            let udata = unsafe { super::udata::Udata::from_raw(udata) };
            let origin = if udata.is_some() {
                Origin::User
            } else {
                Origin::Kernel
            };
            // INVARIANT: As prepared by ib_core; `attr` is exclusively ours for the call.
            let mut new = NewQp::<T> {
                qp: ibqp,
                // SAFETY: `attr` is valid for the call.
                attr: unsafe { &mut *attr },
                origin,
                udata,
                _p: PhantomData,
            };
            let work = match origin {
                Origin::Kernel => Some(WorkQueues::new_qp(
                    new.pd().and_then(|pd| pd.fast_regs()).cloned(),
                )?),
                Origin::User => None,
            };
            let init = T::create_qp(&mut new)?;
            // SAFETY: The allocation is a `Qp<T>` whose first field is `ibqp`; `users`, `idle`,
            // `work` and `data` are uninitialised until now and stay in place until
            // `destroy_qp` (`work` is written only once `data` is, so a failure leaks nothing).
            // INVARIANT: ib_core's reference is the one count `users` starts with; `work` is
            // `Some` for a kernel QP.
            unsafe {
                let qp = crate::container_of!(Opaque::cast_from(ibqp), Qp<T>, ibqp).cast_mut();
                (&raw mut (*qp).users).write(Refcount::new(1));
                pin_init::raw_init(&raw mut (*qp).idle, Completion::new());
                pin_init::raw_try_init(&raw mut (*qp).data, init)?;
                (&raw mut (*qp).work).write(work);
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibqp` was set up by a successful `create_qp_callback` and is not used afterwards.
    pub(super) unsafe extern "C" fn destroy_qp_callback(
        ibqp: *mut bindings::ib_qp,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: The data is initialised (function requirement); ib_core frees the memory
        // after this call without touching the driver part again. Once the driver gave up its
        // references, ib_core's own is dropped and we wait for the data path's last one (type
        // invariant), so nothing can reach the QP when `data` is dropped. Every request is
        // retired before the consumer learns the QP is gone (and may free their buffers);
        // tickets and buffers the driver still holds keep `work` alive, not the QP.
        unsafe {
            let q = Qp::<T>::from_raw(ibqp);
            T::destroy_qp(q);
            if !q.users.dec_and_test() {
                q.idle.wait_for_completion();
            }
            if let Some(w) = &q.work {
                w.close();
            }
            let qp = crate::container_of!(Opaque::cast_from(ibqp), Qp<T>, ibqp).cast_mut();
            core::ptr::drop_in_place(&raw mut (*qp).data);
            core::ptr::drop_in_place(&raw mut (*qp).work);
        }
        0
    }

    /// # Safety
    ///
    /// `ibqp` is a live QP of this driver; `gid` is valid for reads.
    pub(super) unsafe extern "C" fn attach_mcast_callback(
        ibqp: *mut bindings::ib_qp,
        gid: *mut bindings::ib_gid,
        lid: u16,
    ) -> c_int {
        // SAFETY: The QP is alive for the call and `gid` readable (function requirements);
        // every member of `union ib_gid` is 16 plain bytes.
        let (qp, gid) = unsafe { (Qp::<T>::from_raw(ibqp), (*gid).raw) };
        from_result(|| T::attach_mcast(qp, &gid, lid).map(|()| 0))
    }

    /// # Safety
    ///
    /// `ibqp` is a live QP of this driver; `gid` is valid for reads.
    pub(super) unsafe extern "C" fn detach_mcast_callback(
        ibqp: *mut bindings::ib_qp,
        gid: *mut bindings::ib_gid,
        lid: u16,
    ) -> c_int {
        // SAFETY: As in `attach_mcast_callback`.
        let (qp, gid) = unsafe { (Qp::<T>::from_raw(ibqp), (*gid).raw) };
        from_result(|| T::detach_mcast(qp, &gid, lid).map(|()| 0))
    }

    /// # Safety
    ///
    /// `ibqp` is a live QP of this driver; `attr` is valid; `udata` null or the system call's.
    pub(super) unsafe extern "C" fn modify_qp_callback(
        ibqp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        mask: c_int,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the function's requirements.
            unsafe { Origin::of_udata(udata)? };
            // SAFETY: The QP is alive for the call; `attr` is valid and `QpAttr` is
            // `repr(transparent)`.
            let (qp, attr) = unsafe { (Qp::<T>::from_raw(ibqp), &*attr.cast::<QpAttr>()) };
            let mask = QpAttrMask(mask as u32);
            T::modify_qp(qp, attr, mask)?;
            // RESET discards the queued requests without completions: their buffers are the
            // consumer's again.
            if mask.contains(QpAttrMask::STATE) && matches!(attr.qp_state(), Ok(QpState::Reset)) {
                if let Some(w) = &qp.work {
                    w.close();
                }
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibqp` is a live QP of this driver; `attr` and `init` are valid for writes.
    pub(super) unsafe extern "C" fn query_qp_callback(
        ibqp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        _mask: c_int,
        init: *mut bindings::ib_qp_init_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `attr` and `init` are valid for writes (function requirement); all-zero
            // is a valid value of both (integers and null pointers), and callers may pass
            // uninitialised memory (`rdma res show qp` does).
            let (attr, init) = unsafe {
                attr.write(pin_init::zeroed());
                init.write(pin_init::zeroed());
                (
                    &mut *attr.cast::<QpAttrOut>(),
                    &mut *init.cast::<QpInitAttrOut>(),
                )
            };
            // SAFETY: The QP is alive for the call.
            let qp = unsafe { Qp::<T>::from_raw(ibqp) };
            T::query_qp(qp, attr, init)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibqp` is a live QP of this driver; `wr` is a valid chain of send work requests of the
    /// structure its opcode and the QP type call for; `bad_wr` is valid for writes.
    pub(super) unsafe extern "C" fn post_send_callback(
        ibqp: *mut bindings::ib_qp,
        wr: *const bindings::ib_send_wr,
        bad_wr: *mut *const bindings::ib_send_wr,
    ) -> c_int {
        // SAFETY: The QP is alive for the call.
        let qp = unsafe { Qp::<T>::from_raw(ibqp) };
        // Fast registration: a registration lends its MR's pages from now on, an invalidation
        // ends the loan of the MR registered under its key, both before the driver sees them
        // (and before any completion of theirs can reach the consumer).
        // SAFETY: `wr` is a valid chain for the call (function requirement).
        for w in unsafe { SendWrList::<T>::new(wr, qp.qp_type()) } {
            match w.op() {
                SendOp::RegMr { key, .. } => {
                    if let Some(l) = w.reg_mr().ok().flatten().and_then(|mr| mr.loan()) {
                        l.register(key);
                    }
                }
                SendOp::LocalInv { rkey } => {
                    if let Some(r) = qp.pd().and_then(|pd| pd.fast_regs()) {
                        r.invalidate(rkey);
                    }
                }
                _ => {}
            }
        }
        // SAFETY: As above.
        let list = unsafe { SendWrList::new(wr, qp.qp_type()) };
        match T::post_send(qp, list) {
            Ok(()) => 0,
            Err(e) => {
                // The registrations from the first request not posted on did not happen.
                if let Some(bad) = e.bad_wr.as_ref().map(|w| w.as_raw()) {
                    let mut past = false;
                    // SAFETY: As above.
                    for w in unsafe { SendWrList::<T>::new(wr, qp.qp_type()) } {
                        past |= w.as_raw() == bad;
                        if let Some(l) = w.reg_mr().ok().flatten().and_then(|mr| mr.loan()) {
                            if past {
                                l.end();
                            }
                        }
                    }
                }
                // SAFETY: `bad_wr` is valid for writes.
                unsafe { bad_wr.write(e.bad_wr.map_or(core::ptr::null(), |w| w.as_raw())) };
                e.error.to_errno()
            }
        }
    }

    /// # Safety
    ///
    /// `ibqp` is a live QP of this driver; `wr` is a valid chain of receive work requests;
    /// `bad_wr` is valid for writes.
    pub(super) unsafe extern "C" fn post_recv_callback(
        ibqp: *mut bindings::ib_qp,
        wr: *const bindings::ib_recv_wr,
        bad_wr: *mut *const bindings::ib_recv_wr,
    ) -> c_int {
        // SAFETY: The QP is alive for the call.
        let qp = unsafe { Qp::<T>::from_raw(ibqp) };
        // SAFETY: `wr` is a valid chain for the call (function requirement).
        let list = unsafe { RecvWrList::new(wr) };
        match T::post_recv(qp, list) {
            Ok(()) => 0,
            Err(e) => {
                // SAFETY: `bad_wr` is valid for writes.
                unsafe { bad_wr.write(e.bad_wr.map_or(core::ptr::null(), |w| w.as_raw())) };
                e.error.to_errno()
            }
        }
    }
}
