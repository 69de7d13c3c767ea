// SPDX-License-Identifier: GPL-2.0

//! Protection domains (`struct ib_pd`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! A [`Pd<T>`] is allocated by ib_core (`rdma_zalloc_drv_obj`, `ops.size_ib_pd`) and holds the
//! C `struct ib_pd` followed by [`Driver::PdData`], initialised in place by the initialiser
//! [`Driver::alloc_pd`] returns and dropped in `dealloc_pd`, after which ib_core frees the
//! memory.

use super::{
    device::{
        Adapter,
        Device,
        Driver, //
    },
    fastreg::FastRegs,
};
use crate::{
    bindings,
    error::{
        from_result,
        to_result, //
    },
    prelude::*,
    sync::Arc,
    types::Opaque,
};
use core::ops::Deref;

/// Who creates a verbs object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A kernel consumer (ib_mad, rdma_cm, storage and file-system ULPs): there is no udata,
    /// and SGEs carry kernel virtual addresses (the device has no DMA device).
    Kernel,
    /// A user process through uverbs. Driver-specific udata is not abstracted yet: the
    /// abstraction rejects any driver-specific input and zeroes driver-specific output
    /// (`ib_no_udata_io`) before the hook runs.
    User,
}

impl Origin {
    /// The origin of an object whose create hook received `udata`, after checking that no
    /// driver-specific data is exchanged.
    ///
    /// # Safety
    ///
    /// `udata` is null or the valid udata of the current system call.
    pub(super) unsafe fn of_udata(udata: *mut bindings::ib_udata) -> Result<Self> {
        if udata.is_null() {
            return Ok(Self::Kernel);
        }
        // SAFETY: `udata` is the system call's valid udata (function requirement).
        to_result(unsafe { bindings::ib_no_udata_io(udata) })?;
        Ok(Self::User)
    }
}

/// The identity of a protection domain, to compare an MR's PD with a QP's (never
/// dereferenced; only meaningful while the PD exists).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PdId(*mut bindings::ib_pd);

// SAFETY: A plain identity, never dereferenced.
unsafe impl Send for PdId {}
// SAFETY: A plain identity, never dereferenced.
unsafe impl Sync for PdId {}

/// A protection domain: the C `struct ib_pd` followed by the driver's data.
///
/// # Invariants
///
/// - Allocated by ib_core with `size_ib_pd == size_of::<Self>()`, `ibpd.device` a
///   [`Device<T>`] whose data outlives the PD (ib_core deallocates every PD before
///   `dealloc_driver`).
/// - `data` and `fast_regs` are initialised for as long as a `&Pd<T>` exists: between a
///   successful `alloc_pd` and `dealloc_pd`. `fast_regs` is `Some` exactly for a kernel PD.
#[repr(C)]
pub struct Pd<T: Driver> {
    ibpd: Opaque<bindings::ib_pd>,
    fast_regs: Option<Arc<FastRegs>>,
    data: T::PdData,
}

// SAFETY: ib_core's `struct ib_pd` may be used from any thread; `T::PdData` is `Send`.
unsafe impl<T: Driver> Send for Pd<T> {}
// SAFETY: `&Pd<T>` only reads fields ib_core does not change while the PD exists, and
// `T::PdData` is `Sync`.
unsafe impl<T: Driver> Sync for Pd<T> {}

impl<T: Driver> Deref for Pd<T> {
    type Target = T::PdData;

    fn deref(&self) -> &T::PdData {
        &self.data
    }
}

impl<T: Driver> Pd<T> {
    /// # Safety
    ///
    /// `ptr` points to the `ib_pd` of a `Pd<T>` whose data is initialised and stays so for
    /// `'a`.
    pub(super) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_pd) -> &'a Self {
        // SAFETY: `ibpd` is the first field of the `repr(C)` `Self`; the caller guarantees the
        // rest.
        unsafe { &*crate::container_of!(Opaque::cast_from(ptr), Self, ibpd) }
    }

    /// Returns the raw `struct ib_pd` pointer.
    pub(crate) fn as_raw(&self) -> *mut bindings::ib_pd {
        self.ibpd.get()
    }

    /// The PD's identity.
    pub fn id(&self) -> PdId {
        PdId(self.as_raw())
    }

    /// The device of the PD.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: `device` is set by ib_core before `alloc_pd` and never changes; the device's
        // data outlives the PD (type invariant).
        unsafe { Device::from_raw((*self.as_raw()).device) }
    }

    /// The fast-register MRs of a kernel PD ([`super::fastreg`]).
    pub(super) fn fast_regs(&self) -> Option<&Arc<FastRegs>> {
        self.fast_regs.as_ref()
    }

    /// Whether a kernel consumer or a user process owns the PD.
    pub fn origin(&self) -> Origin {
        // SAFETY: `uobject` is set by ib_core before `alloc_pd` and never changes.
        if unsafe { (*self.as_raw()).uobject }.is_null() {
            Origin::Kernel
        } else {
            Origin::User
        }
    }
}

impl<T: Driver> Adapter<T> {
    /// # Safety
    ///
    /// `ibpd` is a zeroed allocation of `size_ib_pd` bytes whose `device` is a live device of
    /// this driver; `udata` is null or the system call's.
    pub(super) unsafe extern "C" fn alloc_pd_callback(
        ibpd: *mut bindings::ib_pd,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the function's requirements.
            let origin = unsafe { Origin::of_udata(udata)? };
            // SAFETY: `device` and `flags` were set by ib_core before the call.
            let (ibdev, flags) = unsafe { ((*ibpd).device, (*ibpd).flags) };
            // SAFETY: The device is live: hooks run only while its data is.
            let dev = unsafe { Device::<T>::from_raw(ibdev) };
            // SAFETY: `attrs` was filled at registration and is not written afterwards.
            let kcaps = unsafe { (*ibdev).attrs.kernel_cap_flags };
            let local_lkey =
                kcaps & u64::from(bindings::ib_kernel_cap_flags_IBK_LOCAL_DMA_LKEY) != 0;
            let global_rkey = flags & bindings::ib_pd_flags_IB_PD_UNSAFE_GLOBAL_RKEY != 0;
            // Without these, ib_core would call a missing `get_dma_mr` hook after we return.
            if origin == Origin::Kernel && (!local_lkey || global_rkey) && !T::HAS_GET_DMA_MR {
                return Err(EOPNOTSUPP);
            }
            let fast_regs = match origin {
                Origin::Kernel => Some(FastRegs::new()?),
                Origin::User => None,
            };
            let init = T::alloc_pd(dev, origin)?;
            // SAFETY: The allocation is a `Pd<T>` (`size_ib_pd`) whose first field is `ibpd`;
            // `fast_regs` and `data` are uninitialised until now and stay in place until
            // `dealloc_pd` (`fast_regs` is written only once `data` is).
            // INVARIANT: `fast_regs` is `Some` for a kernel PD.
            unsafe {
                let pd = crate::container_of!(Opaque::cast_from(ibpd), Pd<T>, ibpd).cast_mut();
                pin_init::raw_try_init(&raw mut (*pd).data, init)?;
                (&raw mut (*pd).fast_regs).write(fast_regs);
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibpd` was set up by a successful `alloc_pd_callback` and is not used afterwards.
    pub(super) unsafe extern "C" fn dealloc_pd_callback(
        ibpd: *mut bindings::ib_pd,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: The data is initialised (function requirement); ib_core frees the memory
        // after this call without touching the driver part again.
        unsafe {
            let pd = Pd::<T>::from_raw(ibpd);
            T::dealloc_pd(pd);
            let pd = crate::container_of!(Opaque::cast_from(ibpd), Pd<T>, ibpd).cast_mut();
            core::ptr::drop_in_place(&raw mut (*pd).data);
            core::ptr::drop_in_place(&raw mut (*pd).fast_regs);
        }
        0
    }
}
