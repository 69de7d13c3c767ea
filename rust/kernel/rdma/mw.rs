// SPDX-License-Identifier: GPL-2.0

//! Memory windows (`struct ib_mw`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! A memory window is a remote key for a range of a memory region, bound and re-bound by work
//! requests posted to a QP (`IB_WR_BIND_MW`). Only user processes have memory windows
//! (`ibv_alloc_mw`; ib_core offers kernel consumers no window verbs), so binding happens in
//! the driver's handling of the send ring; this module carries only the object.
//!
//! A [`Mw<T>`] is allocated by ib_core (`rdma_zalloc_drv_obj`, `ops.size_ib_mw`) and holds the
//! C `struct ib_mw` followed by [`Driver::MwData`], initialised in place by the initialiser
//! [`Driver::alloc_mw`] returns and dropped in `dealloc_mw`, after which ib_core frees the
//! memory.

use super::{
    device::{
        Adapter,
        Device,
        Driver, //
    },
    pd::{
        Origin,
        Pd,
        PdId, //
    },
};
use crate::{
    bindings,
    error::from_result,
    prelude::*,
    types::Opaque, //
};
use core::ops::Deref;

/// The type of a memory window (`enum ib_mw_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MwType {
    /// Type 1: bound with `ibv_bind_mw` (a bind work request librxe posts), not tied to a QP;
    /// re-binding with length 0 leaves it unusable; cannot be invalidated.
    Type1,
    /// Type 2: bound by a bind work request, usable only through the QP that bound it, made
    /// free again by a local invalidate or a received SEND with invalidate.
    Type2,
}

/// A memory window: the C `struct ib_mw` followed by the driver's data.
///
/// # Invariants
///
/// - Allocated by ib_core with `size_ib_mw == size_of::<Self>()`; `ibmw.device` is a
///   [`Device<T>`] and `ibmw.pd` a [`Pd<T>`], both alive while the window exists (ib_core holds
///   a use count on the PD, and deallocates every window before the device goes away).
/// - `ibmw.type` is [`MwType::Type1`] or [`MwType::Type2`] (ib_core refuses other types before
///   `alloc_mw`).
/// - `data` is initialised for as long as a `&Mw<T>` exists: between a successful `alloc_mw`
///   and `dealloc_mw`.
#[repr(C)]
pub struct Mw<T: Driver> {
    ibmw: Opaque<bindings::ib_mw>,
    data: T::MwData,
}

// SAFETY: ib_core's `struct ib_mw` may be used from any thread; `T::MwData` is `Send`.
unsafe impl<T: Driver> Send for Mw<T> {}
// SAFETY: `&Mw<T>` only reads fields that do not change while the window exists, and
// `T::MwData` is `Sync`.
unsafe impl<T: Driver> Sync for Mw<T> {}

impl<T: Driver> Deref for Mw<T> {
    type Target = T::MwData;

    fn deref(&self) -> &T::MwData {
        &self.data
    }
}

impl<T: Driver> Mw<T> {
    /// # Safety
    ///
    /// `ptr` points to the `ib_mw` of an `Mw<T>` whose data is initialised and stays so for
    /// `'a`.
    unsafe fn from_raw<'a>(ptr: *mut bindings::ib_mw) -> &'a Self {
        // SAFETY: `ibmw` is the first field of the `repr(C)` `Self`; the caller guarantees the
        // rest.
        unsafe { &*crate::container_of!(Opaque::cast_from(ptr), Self, ibmw) }
    }

    fn as_raw(&self) -> *mut bindings::ib_mw {
        self.ibmw.get()
    }

    /// The device of the window.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: `device` is set by ib_core before `alloc_mw` and never changes; the device
        // outlives the window (type invariant).
        unsafe { Device::from_raw((*self.as_raw()).device) }
    }

    /// The identity of the window's protection domain.
    pub fn pd_id(&self) -> PdId {
        // SAFETY: `pd` is set by ib_core before `alloc_mw`, never changes, and the PD outlives
        // the window (type invariant).
        unsafe { Pd::<T>::from_raw((*self.as_raw()).pd) }.id()
    }

    /// The window's type.
    pub fn mw_type(&self) -> MwType {
        // SAFETY: Set by ib_core before `alloc_mw` and never changed.
        match unsafe { (*self.as_raw()).type_ } {
            bindings::ib_mw_type_IB_MW_TYPE_1 => MwType::Type1,
            // The only other type ib_core lets through (type invariant).
            _ => MwType::Type2,
        }
    }
}

impl<T: Driver> Adapter<T> {
    /// # Safety
    ///
    /// `ibmw` is a zeroed allocation of `size_ib_mw` bytes whose `device`, `pd` and `type`
    /// ib_core has set (`device` a live device of this driver, `pd` a live PD of it); `udata`
    /// is null or the system call's.
    pub(super) unsafe extern "C" fn alloc_mw_callback(
        ibmw: *mut bindings::ib_mw,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the function's requirements.
            unsafe { Origin::of_udata(udata)? };
            // SAFETY: Set by ib_core before the call (function requirements).
            let (ibpd, ty) = unsafe { ((*ibmw).pd, (*ibmw).type_) };
            let ty = match ty {
                bindings::ib_mw_type_IB_MW_TYPE_1 => MwType::Type1,
                bindings::ib_mw_type_IB_MW_TYPE_2 => MwType::Type2,
                _ => return Err(EINVAL),
            };
            // SAFETY: The PD is alive for the call (function requirements).
            let pd = unsafe { Pd::<T>::from_raw(ibpd) };
            let (rkey, init) = T::alloc_mw(pd, ty)?;
            // SAFETY: The allocation is an `Mw<T>` (`size_ib_mw`) whose first field is `ibmw`;
            // `data` is uninitialised until now and stays in place until `dealloc_mw`; ib_core
            // reads `rkey` only after a successful return.
            unsafe {
                let mw = crate::container_of!(Opaque::cast_from(ibmw), Mw<T>, ibmw).cast_mut();
                pin_init::raw_try_init(&raw mut (*mw).data, init)?;
                (*ibmw).rkey = rkey;
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibmw` was set up by a successful `alloc_mw_callback` and is not used afterwards.
    pub(super) unsafe extern "C" fn dealloc_mw_callback(ibmw: *mut bindings::ib_mw) -> c_int {
        // SAFETY: The data is initialised (function requirement); ib_core frees the memory
        // after this call without touching the driver part again.
        unsafe {
            let mw = Mw::<T>::from_raw(ibmw);
            T::dealloc_mw(mw);
            let mw = crate::container_of!(Opaque::cast_from(ibmw), Mw<T>, ibmw).cast_mut();
            core::ptr::drop_in_place(&raw mut (*mw).data);
        }
        0
    }
}
