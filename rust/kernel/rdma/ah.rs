// SPDX-License-Identifier: GPL-2.0

//! Address handles (`struct ib_ah`) and address vectors (`struct rdma_ah_attr`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! An [`Ah<T>`] is allocated by ib_core (`ops.size_ib_ah`) with `GFP_ATOMIC` unless the creator
//! may sleep, and holds the C `struct ib_ah` followed by [`Driver::AhData`], initialised in place
//! from [`Driver::create_ah`] (kernel AHs) or [`Driver::create_user_ah`] (user AHs, process
//! context, with the system call's [`Udata`]) and dropped in `destroy_ah`. Kernel AHs may be
//! created and destroyed in atomic context.

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
    udata::Udata,
};
use crate::{
    alloc::Flags,
    bindings,
    error::from_result,
    prelude::*,
    types::Opaque, //
};
use core::{
    marker::PhantomData,
    ops::Deref, //
};

/// The type of a GID (`enum ib_gid_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GidType {
    /// InfiniBand, or RoCE v1.
    Ib,
    /// RoCE v2 (`IB_GID_TYPE_ROCE_UDP_ENCAP`).
    RoceV2,
    /// Another type, by its C value.
    Other(u32),
}

/// An address vector (`struct rdma_ah_attr`), read-only.
#[repr(transparent)]
pub struct AhAttr(bindings::rdma_ah_attr);

impl AhAttr {
    pub(super) fn from_ref(attr: &bindings::rdma_ah_attr) -> &Self {
        // SAFETY: `Self` is `repr(transparent)` over `rdma_ah_attr`.
        unsafe { &*core::ptr::from_ref(attr).cast::<Self>() }
    }

    /// Whether this is a RoCE address (`RDMA_AH_ATTR_TYPE_ROCE`): it then has a GRH and a
    /// destination MAC.
    pub fn is_roce(&self) -> bool {
        self.0.type_ == bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE
    }

    /// Whether the global route header fields are valid (`IB_AH_GRH`).
    pub fn has_grh(&self) -> bool {
        u32::from(self.0.ah_flags) & bindings::ib_ah_flags_IB_AH_GRH != 0
    }

    /// The destination GID (for RoCE v2: an IPv6 address, or IPv4-mapped `::ffff:a.b.c.d`).
    pub fn dgid(&self) -> [u8; 16] {
        // SAFETY: Every member of `union ib_gid` is 16 plain bytes.
        unsafe { self.0.grh.dgid.raw }
    }

    /// The source GID and its type, from the GID table entry ib_core resolved (`sgid_attr`),
    /// if any.
    pub fn sgid(&self) -> Option<([u8; 16], GidType)> {
        let attr = self.0.grh.sgid_attr;
        if attr.is_null() {
            return None;
        }
        // SAFETY: A non-null `sgid_attr` is a GID table entry ib_core holds a reference on for
        // as long as the attribute (and the object it describes) exists.
        let (gid, ty) = unsafe { ((*attr).gid.raw, (*attr).gid_type) };
        let ty = match ty {
            bindings::ib_gid_type_IB_GID_TYPE_IB => GidType::Ib,
            bindings::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP => GidType::RoceV2,
            other => GidType::Other(other),
        };
        Some((gid, ty))
    }

    /// The source GID table index.
    pub fn sgid_index(&self) -> u8 {
        self.0.grh.sgid_index
    }

    /// The flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        self.0.grh.flow_label & 0xf_ffff
    }

    /// The hop limit (IP TTL).
    pub fn hop_limit(&self) -> u8 {
        self.0.grh.hop_limit
    }

    /// The traffic class (IP DSCP and ECN bits).
    pub fn traffic_class(&self) -> u8 {
        self.0.grh.traffic_class
    }

    /// The service level.
    pub fn sl(&self) -> u8 {
        self.0.sl
    }

    /// The port.
    pub fn port_num(&self) -> u32 {
        self.0.port_num
    }

    /// The static rate (`enum ib_rate`).
    pub fn static_rate(&self) -> u8 {
        self.0.static_rate
    }

    /// The destination MAC of a RoCE address.
    pub fn dmac(&self) -> Option<[u8; 6]> {
        if !self.is_roce() {
            return None;
        }
        // SAFETY: For a RoCE address the `roce` member is the active one (plain bytes).
        Some(unsafe { self.0.__bindgen_anon_1.roce.dmac })
    }
}

/// The RoCE address vector a driver reports for an address handle (`query_ah`): everything
/// ib_core and its users (ib_mad's response matching) read back.
#[derive(Clone, Copy, Debug, Default)]
pub struct RoceAhAttr {
    /// Port number.
    pub port_num: u32,
    /// Service level.
    pub sl: u8,
    /// Destination GID.
    pub dgid: [u8; 16],
    /// Source GID table index.
    pub sgid_index: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Destination MAC.
    pub dmac: [u8; 6],
}

impl RoceAhAttr {
    /// Writes `self` into a zeroed `rdma_ah_attr` (type RoCE, with a GRH).
    pub(super) fn write(&self, out: &mut bindings::rdma_ah_attr) {
        // SAFETY: All-zero is a valid `rdma_ah_attr` (no `sgid_attr`, no union member set).
        *out = unsafe { core::mem::zeroed() };
        out.type_ = bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
        out.port_num = self.port_num;
        out.sl = self.sl;
        out.ah_flags = bindings::ib_ah_flags_IB_AH_GRH as u8;
        out.grh.dgid.raw = self.dgid;
        out.grh.sgid_index = self.sgid_index;
        out.grh.flow_label = self.flow_label & 0xf_ffff;
        out.grh.hop_limit = self.hop_limit;
        out.grh.traffic_class = self.traffic_class;
        // Writing a union field is safe: this makes `roce` the active member (RoCE address).
        out.__bindgen_anon_1.roce.dmac = self.dmac;
    }
}

/// An address handle: the C `struct ib_ah` followed by the driver's data.
///
/// # Invariants
///
/// - Allocated by ib_core with `size_ib_ah == size_of::<Self>()`; `ibah.device` is a
///   [`Device<T>`] whose data outlives the AH; `ibah.pd` a PD of `T` that outlives it.
/// - `data` is initialised for as long as a `&Ah<T>` exists: between a successful `create_ah`
///   and `destroy_ah`.
#[repr(C)]
pub struct Ah<T: Driver> {
    ibah: Opaque<bindings::ib_ah>,
    data: T::AhData,
}

// SAFETY: `struct ib_ah` may be used from any thread; `T::AhData` is `Send`.
unsafe impl<T: Driver> Send for Ah<T> {}
// SAFETY: `&Ah<T>` methods read fields fixed while the AH exists; `T::AhData` is `Sync`.
unsafe impl<T: Driver> Sync for Ah<T> {}

impl<T: Driver> Deref for Ah<T> {
    type Target = T::AhData;

    fn deref(&self) -> &T::AhData {
        &self.data
    }
}

impl<T: Driver> Ah<T> {
    /// # Safety
    ///
    /// `ptr` points to the `ib_ah` of an `Ah<T>` whose data is initialised and stays so for
    /// `'a`.
    pub(super) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_ah) -> &'a Self {
        // SAFETY: `ibah` is the first field of the `repr(C)` `Self`; the caller guarantees the
        // rest.
        unsafe { &*crate::container_of!(Opaque::cast_from(ptr), Self, ibah) }
    }

    /// The device of the AH.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: `device` is set before `create_ah` and never changes (type invariant).
        unsafe { Device::from_raw((*self.ibah.get()).device) }
    }

    /// The AH's protection domain.
    pub fn pd(&self) -> &Pd<T> {
        // SAFETY: `pd` is set before `create_ah`, a PD of `T` outliving the AH.
        unsafe { Pd::from_raw((*self.ibah.get()).pd) }
    }
}

/// An address handle being created, handed to [`Driver::create_ah`].
///
/// # Invariants
///
/// `ah` is the zeroed `Ah<T>` allocation ib_core is creating, with `device`, `pd`, `type` and
/// `sgid_attr` set; `init` is valid for `'a`; `udata` is the system call's for a user AH.
pub struct NewAh<'a, T: Driver> {
    ah: *mut bindings::ib_ah,
    init: &'a bindings::rdma_ah_init_attr,
    udata: Option<Udata<'a>>,
    _p: PhantomData<T>,
}

impl<'a, T: Driver> NewAh<'a, T> {
    /// Who creates the AH.
    pub fn origin(&self) -> Origin {
        if self.udata.is_some() {
            Origin::User
        } else {
            Origin::Kernel
        }
    }

    /// The driver-specific data of a user AH's system call (the driver writes its response,
    /// e.g. the AH's number); `None` for a kernel AH.
    pub fn udata(&self) -> Option<&Udata<'a>> {
        self.udata.as_ref()
    }

    /// The device of the new AH.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: Set by ib_core before `create_ah`; the device is live.
        unsafe { Device::from_raw((*self.ah).device) }
    }

    /// The AH's protection domain.
    pub fn pd(&self) -> &Pd<T> {
        // SAFETY: Set by ib_core before `create_ah`; a live PD of this driver.
        unsafe { Pd::from_raw((*self.ah).pd) }
    }

    /// The address vector.
    pub fn attr(&self) -> &AhAttr {
        // SAFETY: `ah_attr` is valid for the call (type invariant).
        AhAttr::from_ref(unsafe { &*self.init.ah_attr })
    }

    /// Whether the creator may sleep (`RDMA_CREATE_AH_SLEEPABLE`).
    pub fn may_sleep(&self) -> bool {
        self.init.flags & bindings::rdma_create_ah_flags_RDMA_CREATE_AH_SLEEPABLE != 0
    }

    /// The allocation flags any allocation in [`Driver::create_ah`] must use: `GFP_KERNEL`
    /// if the creator may sleep, `GFP_ATOMIC` otherwise.
    pub fn gfp(&self) -> Flags {
        if self.may_sleep() {
            GFP_KERNEL
        } else {
            GFP_ATOMIC
        }
    }
}

impl<T: Driver> Adapter<T> {
    /// # Safety
    ///
    /// `ibah` is a zeroed allocation of `size_ib_ah` bytes prepared by ib_core for a live
    /// device of this driver; `init` is valid; `udata` is null (uverbs calls
    /// `create_user_ah_callback` instead).
    pub(super) unsafe extern "C" fn create_ah_callback(
        ibah: *mut bindings::ib_ah,
        init: *mut bindings::rdma_ah_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the function's requirements.
            if unsafe { Origin::of_udata(udata)? } != Origin::Kernel {
                return Err(EOPNOTSUPP);
            }
            // SAFETY: By the function's requirements.
            let mut new = unsafe { Self::new_ah(ibah, init, None)? };
            let data = T::create_ah(&mut new)?;
            // SAFETY: By the function's requirements.
            unsafe { Self::store_ah(ibah, data) }
        })
    }

    /// # Safety
    ///
    /// As for `create_ah_callback`, except that `udata` is the non-null `driver_udata` of the
    /// uverbs system call running on this thread (process context).
    pub(super) unsafe extern "C" fn create_user_ah_callback(
        ibah: *mut bindings::ib_ah,
        init: *mut bindings::rdma_ah_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `udata` is the system call's valid udata for the call.
            let udata = unsafe { Udata::from_raw(udata) }.ok_or(EINVAL)?;
            // SAFETY: By the function's requirements.
            let mut new = unsafe { Self::new_ah(ibah, init, Some(udata))? };
            let data = T::create_user_ah(&mut new)?;
            // SAFETY: By the function's requirements.
            unsafe { Self::store_ah(ibah, data) }
        })
    }

    /// The [`NewAh`] handed to a driver's constructor.
    ///
    /// # Safety
    ///
    /// `ibah` and `init` as for `create_ah_callback`, valid for `'a`; `udata` is the system
    /// call's for a user AH.
    unsafe fn new_ah<'a>(
        ibah: *mut bindings::ib_ah,
        init: *mut bindings::rdma_ah_init_attr,
        udata: Option<Udata<'a>>,
    ) -> Result<NewAh<'a, T>> {
        // SAFETY: `init` is valid for `'a` (function requirement).
        let init = unsafe { &*init };
        if init.ah_attr.is_null() {
            return Err(EINVAL);
        }
        // INVARIANT: As prepared by ib_core; `udata` as required.
        Ok(NewAh {
            ah: ibah,
            init,
            udata,
            _p: PhantomData,
        })
    }

    /// Initialises the driver data of ib_core's AH allocation.
    ///
    /// # Safety
    ///
    /// `ibah` is the `Ah<T>` allocation of `create_ah_callback`, its data uninitialised.
    unsafe fn store_ah(
        ibah: *mut bindings::ib_ah,
        data: impl PinInit<T::AhData, Error>,
    ) -> Result<c_int> {
        // SAFETY: The allocation is an `Ah<T>` whose first field is `ibah`; `data` is
        // uninitialised until now and stays in place until `destroy_ah`.
        unsafe {
            let ah = crate::container_of!(Opaque::cast_from(ibah), Ah<T>, ibah).cast_mut();
            pin_init::raw_try_init(&raw mut (*ah).data, data)?;
        }
        Ok(0)
    }

    /// # Safety
    ///
    /// `ibah` was set up by a successful `create_ah_callback` or `create_user_ah_callback` and
    /// is not used afterwards.
    pub(super) unsafe extern "C" fn destroy_ah_callback(
        ibah: *mut bindings::ib_ah,
        flags: u32,
    ) -> c_int {
        let may_sleep = flags & bindings::rdma_destroy_ah_flags_RDMA_DESTROY_AH_SLEEPABLE != 0;
        // SAFETY: The data is initialised (function requirement); ib_core frees the memory
        // after this call without touching the driver part again.
        unsafe {
            T::destroy_ah(Ah::<T>::from_raw(ibah), may_sleep);
            let ah = crate::container_of!(Opaque::cast_from(ibah), Ah<T>, ibah).cast_mut();
            core::ptr::drop_in_place(&raw mut (*ah).data);
        }
        0
    }
}

impl<T: Driver> Ah<T> {
    /// # Safety
    ///
    /// `ibah` is a live AH of this driver; `attr` is valid for writes.
    pub(super) unsafe extern "C" fn query_ah_callback(
        ibah: *mut bindings::ib_ah,
        attr: *mut bindings::rdma_ah_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: By the function's requirements.
            let ah = unsafe { Ah::<T>::from_raw(ibah) };
            let roce = T::query_ah(ah)?;
            // SAFETY: `attr` is valid for writes (function requirement).
            roce.write(unsafe { &mut *attr });
            Ok(0)
        })
    }
}
