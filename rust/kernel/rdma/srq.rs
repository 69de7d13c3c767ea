// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues (`struct ib_srq`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! An [`Srq<T>`] is allocated by ib_core (`ops.size_ib_srq`) and holds the C `struct ib_srq`
//! followed by [`Driver::SrqData`], initialised in place from [`Driver::create_srq`] and
//! dropped in `destroy_srq`. QPs created with an SRQ take their receive work requests from it
//! ([`Qp::srq`](super::qp::Qp::srq)); ib_core counts those QPs (`ib_srq::usecnt`) and refuses
//! to destroy an SRQ while any exists (`EBUSY`), so an SRQ outlives every QP using it.
//!
//! Only basic SRQs (`IB_SRQT_BASIC`) are offered: the abstraction refuses XRC and
//! tag-matching SRQs with `EOPNOTSUPP` before the driver is asked.

use super::{
    device::{
        Adapter,
        Device,
        Driver, //
    },
    pd::{
        Origin,
        Pd, //
    },
    ticket::{
        Lane,
        Ticket,
        WorkQueues, //
    },
    udata::Udata,
    wr::{
        RecvWr,
        RecvWrList, //
    },
};
use crate::{
    bindings,
    error::from_result,
    prelude::*,
    sync::Arc,
    types::Opaque, //
};
use core::{
    marker::PhantomData,
    ops::Deref, //
};

/// The sizes and limit of an SRQ (`struct ib_srq_attr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SrqAttr {
    /// Receive work requests the SRQ holds.
    pub max_wr: u32,
    /// SGEs per receive work request.
    pub max_sge: u32,
    /// The limit: when armed (non-zero), the SRQ raises [`SrqEvent::LimitReached`] once its
    /// number of posted work requests drops below it, and disarms (0).
    pub srq_limit: u32,
}

impl SrqAttr {
    fn from_raw(a: &bindings::ib_srq_attr) -> Self {
        Self {
            max_wr: a.max_wr,
            max_sge: a.max_sge,
            srq_limit: a.srq_limit,
        }
    }

    fn write(&self, a: &mut bindings::ib_srq_attr) {
        a.max_wr = self.max_wr;
        a.max_sge = self.max_sge;
        a.srq_limit = self.srq_limit;
    }
}

/// Which attributes a `modify_srq` call changes (`enum ib_srq_attr_mask`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqAttrMask(u32);

impl SrqAttrMask {
    /// `IB_SRQ_MAX_WR`: resize the SRQ to [`SrqAttr::max_wr`] (keeping the posted requests).
    pub const MAX_WR: Self = Self(bindings::ib_srq_attr_mask::IB_SRQ_MAX_WR.0);
    /// `IB_SRQ_LIMIT`: arm the limit at [`SrqAttr::srq_limit`].
    pub const LIMIT: Self = Self(bindings::ib_srq_attr_mask::IB_SRQ_LIMIT.0);

    /// Whether every attribute of `other` is in `self`.
    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether the mask holds attributes other than [`Self::MAX_WR`] and [`Self::LIMIT`].
    pub fn has_unknown(self) -> bool {
        self.0 & !(Self::MAX_WR.0 | Self::LIMIT.0) != 0
    }
}

/// An asynchronous SRQ event (`enum ib_event_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum SrqEvent {
    /// `IB_EVENT_SRQ_LIMIT_REACHED`: the posted requests dropped below the armed limit.
    LimitReached = bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED,
    /// `IB_EVENT_SRQ_ERR`: the SRQ failed and is unusable.
    Error = bindings::ib_event_type_IB_EVENT_SRQ_ERR,
}

/// A shared receive queue: the C `struct ib_srq` followed by the driver's data.
///
/// # Invariants
///
/// - Allocated by ib_core with `size_ib_srq == size_of::<Self>()`; `ibsrq.device` is a
///   [`Device<T>`] whose data outlives the SRQ, and `ibsrq.pd` a PD of `T` that outlives it
///   (ib_core counts its use).
/// - `data` and `work` are initialised for as long as a `&Srq<T>` exists: between a
///   successful `create_srq` and `destroy_srq`. ib_core destroys an SRQ only when no QP uses
///   it. `work` is `Some` exactly for a kernel SRQ: the numbering of its requests
///   ([`super::ticket`]), whose every request is retired when the SRQ is destroyed.
#[repr(C)]
pub struct Srq<T: Driver> {
    ibsrq: Opaque<bindings::ib_srq>,
    work: Option<Arc<WorkQueues>>,
    data: T::SrqData,
}

// SAFETY: `struct ib_srq` may be used from any thread; `T::SrqData` is `Send`.
unsafe impl<T: Driver> Send for Srq<T> {}
// SAFETY: `&Srq<T>` methods only read fields fixed while the SRQ exists or call the
// consumer's event handler, which may run concurrently; `T::SrqData` is `Sync`.
unsafe impl<T: Driver> Sync for Srq<T> {}

impl<T: Driver> Deref for Srq<T> {
    type Target = T::SrqData;

    fn deref(&self) -> &T::SrqData {
        &self.data
    }
}

impl<T: Driver> Srq<T> {
    /// # Safety
    ///
    /// `ptr` points to the `ib_srq` of an `Srq<T>` whose data is initialised and stays so for
    /// `'a`.
    pub(super) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_srq) -> &'a Self {
        // SAFETY: `ibsrq` is the first field of the `repr(C)` `Self`; the caller guarantees
        // the rest.
        unsafe { &*crate::container_of!(Opaque::cast_from(ptr), Self, ibsrq) }
    }

    fn as_raw(&self) -> *mut bindings::ib_srq {
        self.ibsrq.get()
    }

    /// The device of the SRQ.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: `device` is set before `create_srq` and never changes; the device's data
        // outlives the SRQ (type invariant).
        unsafe { Device::from_raw((*self.as_raw()).device) }
    }

    /// A ticket for a receive work request being posted to this kernel SRQ (see
    /// [`Qp::issue_send`](super::qp::Qp::issue_send)); a QP taking the request moves it to its
    /// own receive queue with [`Ticket::transfer`]. `EINVAL` for a user SRQ. Any context.
    pub fn issue(&self, wr: &RecvWr<'_>) -> Result<Ticket> {
        self.work
            .as_ref()
            .ok_or(EINVAL)?
            .issue(Lane::Recv, wr.wr_id())
    }

    /// Whether a kernel consumer or a user process owns the SRQ.
    pub fn origin(&self) -> Origin {
        // SAFETY: `uobject` is set before `create_srq` and never changes.
        if unsafe { (*self.as_raw()).uobject }.is_null() {
            Origin::Kernel
        } else {
            Origin::User
        }
    }

    /// The SRQ's protection domain.
    pub fn pd(&self) -> &Pd<T> {
        // SAFETY: `pd` is set before `create_srq`, never changes, and is a PD of this driver
        // kept alive by the SRQ (type invariant).
        unsafe { Pd::from_raw((*self.as_raw()).pd) }
    }

    /// Reports an asynchronous event on the SRQ to its consumer (`ib_srq::event_handler`).
    ///
    /// Any context, but never with a lock held that [`Driver::post_srq_recv`] takes (a
    /// consumer may post from its handler). A user SRQ's handler is uverbs', which only
    /// queues the event for the process under an IRQ-safe spinlock. A kernel consumer's
    /// handler is its own; ib_core states no context for it, and rdma_rxe raises the limit
    /// event from its responder, which ran as a tasklet (softirq) until 6.4, so kernel SRQ
    /// consumers' handlers do not sleep.
    pub fn dispatch_event(&self, event: SrqEvent) {
        let srq = self.as_raw();
        // SAFETY: The SRQ is valid; ib_core set `event_handler` and `srq_context` before
        // `create_srq` and they stay valid until `destroy_srq`, which cannot have run while
        // `&self` exists; the event lives on the stack for the synchronous call.
        unsafe {
            if let Some(handler) = (*srq).event_handler {
                let mut ev: bindings::ib_event = pin_init::zeroed();
                ev.device = (*srq).device;
                ev.element.srq = srq;
                ev.event = event as u32;
                handler(&mut ev, (*srq).srq_context);
            }
        }
    }
}

/// A shared receive queue being created, handed to [`Driver::create_srq`].
///
/// # Invariants
///
/// `srq` is the zeroed `Srq<T>` allocation ib_core is creating, with `device`, `pd`,
/// `uobject`, `event_handler`, `srq_context` and `srq_type` (basic) set; its data is not
/// initialised. `attr` is the creator's attributes, exclusively ours for the call.
pub struct NewSrq<'a, T: Driver> {
    srq: *mut bindings::ib_srq,
    attr: &'a mut bindings::ib_srq_init_attr,
    udata: Option<Udata<'a>>,
    _p: PhantomData<T>,
}

impl<'a, T: Driver> NewSrq<'a, T> {
    /// The device of the new SRQ.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: `device` is set by ib_core before `create_srq`; the device is live.
        unsafe { Device::from_raw((*self.srq).device) }
    }

    /// Who creates the SRQ.
    pub fn origin(&self) -> Origin {
        if self.udata.is_some() {
            Origin::User
        } else {
            Origin::Kernel
        }
    }

    /// The driver-specific data of a user SRQ's system call: the driver reads its request (or
    /// checks there is none) and writes its response (e.g. librxe's
    /// `struct rxe_create_srq_resp`). `None` for kernel SRQs.
    pub fn udata(&self) -> Option<&Udata<'a>> {
        self.udata.as_ref()
    }

    /// The SRQ's protection domain.
    pub fn pd(&self) -> &Pd<T> {
        // SAFETY: `pd` is a live PD of this driver set by ib_core (type invariant), which
        // counts the SRQ's use of it.
        unsafe { Pd::from_raw((*self.srq).pd) }
    }

    /// The requested sizes and limit.
    pub fn attr(&self) -> SrqAttr {
        SrqAttr::from_raw(&self.attr.attr)
    }

    /// Reports the granted sizes (at least the requested ones) and limit back to the creator.
    pub fn set_attr(&mut self, attr: SrqAttr) {
        attr.write(&mut self.attr.attr);
    }
}

impl<T: Driver> Adapter<T> {
    /// # Safety
    ///
    /// `ibsrq` is a zeroed allocation of `size_ib_srq` bytes prepared by ib_core's
    /// `ib_create_srq_user` for a live device of this driver; `attr` is valid; `udata` is null
    /// or the system call's.
    pub(super) unsafe extern "C" fn create_srq_callback(
        ibsrq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `attr` is valid and exclusively ours for the call.
            let attr = unsafe { &mut *attr };
            if attr.srq_type != bindings::ib_srq_type_IB_SRQT_BASIC {
                return Err(EOPNOTSUPP);
            }
            // SAFETY: `udata` is null or the system call's valid udata, for the call.
            let udata = unsafe { Udata::from_raw(udata) };
            let work = match udata {
                None => Some(WorkQueues::new_srq()?),
                Some(_) => None,
            };
            // INVARIANT: As prepared by ib_core; the type is basic.
            let mut new = NewSrq::<T> {
                srq: ibsrq,
                attr,
                udata,
                _p: PhantomData,
            };
            let init = T::create_srq(&mut new)?;
            // SAFETY: The allocation is an `Srq<T>` whose first field is `ibsrq`; `work` and
            // `data` are uninitialised until now and stay in place until `destroy_srq`
            // (`work` is written only once `data` is).
            // INVARIANT: `work` is `Some` for a kernel SRQ (no udata).
            unsafe {
                let srq = crate::container_of!(Opaque::cast_from(ibsrq), Srq<T>, ibsrq).cast_mut();
                pin_init::raw_try_init(&raw mut (*srq).data, init)?;
                (&raw mut (*srq).work).write(work);
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibsrq` was set up by a successful `create_srq_callback`, no QP uses it, and it is not
    /// used afterwards.
    pub(super) unsafe extern "C" fn destroy_srq_callback(
        ibsrq: *mut bindings::ib_srq,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: The data is initialised (function requirement); ib_core frees the memory
        // after this call without touching the driver part again. Every request still queued
        // is retired before the consumer learns the SRQ is gone.
        unsafe {
            let s = Srq::<T>::from_raw(ibsrq);
            T::destroy_srq(s);
            if let Some(w) = &s.work {
                w.close();
            }
            let srq = crate::container_of!(Opaque::cast_from(ibsrq), Srq<T>, ibsrq).cast_mut();
            core::ptr::drop_in_place(&raw mut (*srq).data);
            core::ptr::drop_in_place(&raw mut (*srq).work);
        }
        0
    }

    /// # Safety
    ///
    /// `ibsrq` is a live SRQ of this driver; `attr` is valid for writes and its `max_wr` and
    /// `srq_limit` for reads; `udata` is null or the system call's.
    pub(super) unsafe extern "C" fn modify_srq_callback(
        ibsrq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
        mask: bindings::ib_srq_attr_mask,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            let mask = SrqAttrMask(mask.0);
            if mask.has_unknown() {
                return Err(EINVAL);
            }
            // SAFETY: `udata` is null or the system call's valid udata, for the call.
            let udata = unsafe { Udata::from_raw(udata) };
            // SAFETY: The SRQ is alive for the call.
            let srq = unsafe { Srq::<T>::from_raw(ibsrq) };
            // uverbs fills only `max_wr` and `srq_limit` (its `max_sge` is uninitialised stack
            // memory), so only those two fields are read, by value, and no reference to the
            // whole structure is formed.
            // SAFETY: `attr` is valid for reads of its initialised fields (function
            // requirement).
            let mut a = unsafe {
                SrqAttr {
                    max_wr: (&raw const (*attr).max_wr).read(),
                    max_sge: 0,
                    srq_limit: (&raw const (*attr).srq_limit).read(),
                }
            };
            T::modify_srq(srq, &mut a, mask, udata.as_ref())?;
            // `ib_modify_srq` returns the resulting values to the caller.
            // SAFETY: `attr` is valid for writes (function requirement).
            unsafe {
                (&raw mut (*attr).max_wr).write(a.max_wr);
                (&raw mut (*attr).max_sge).write(a.max_sge);
                (&raw mut (*attr).srq_limit).write(a.srq_limit);
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibsrq` is a live SRQ of this driver; `attr` is valid for writes.
    pub(super) unsafe extern "C" fn query_srq_callback(
        ibsrq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The SRQ is alive for the call.
            let srq = unsafe { Srq::<T>::from_raw(ibsrq) };
            let a = T::query_srq(srq)?;
            let mut raw: bindings::ib_srq_attr = pin_init::zeroed();
            a.write(&mut raw);
            // SAFETY: `attr` is valid for writes (function requirement).
            unsafe { attr.write(raw) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibsrq` is a live SRQ of this driver; `wr` is a valid chain of receive work requests;
    /// `bad_wr` is valid for writes.
    pub(super) unsafe extern "C" fn post_srq_recv_callback(
        ibsrq: *mut bindings::ib_srq,
        wr: *const bindings::ib_recv_wr,
        bad_wr: *mut *const bindings::ib_recv_wr,
    ) -> c_int {
        // SAFETY: The SRQ is alive for the call.
        let srq = unsafe { Srq::<T>::from_raw(ibsrq) };
        // SAFETY: `wr` is a valid chain for the call (function requirement).
        let list = unsafe { RecvWrList::new(wr) };
        match T::post_srq_recv(srq, list) {
            Ok(()) => 0,
            Err(e) => {
                // SAFETY: `bad_wr` is valid for writes.
                unsafe { bad_wr.write(e.bad_wr.map_or(core::ptr::null(), |w| w.as_raw())) };
                e.error.to_errno()
            }
        }
    }
}
