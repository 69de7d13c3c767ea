// SPDX-License-Identifier: GPL-2.0

//! Memory regions (`struct ib_mr`) allocated by the driver side.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! Unlike PDs, CQs, QPs and AHs, ib_core leaves MR allocation to the driver: the abstraction
//! allocates an [`Mr<T>`] (`KBox`, zeroed C part, [`Driver::MrData`] initialised in place) in
//! `get_dma_mr`/`reg_user_mr` and frees it in `dereg_mr`, after [`Driver::dereg_mr`].

use super::{
    device::{
        Adapter,
        Device,
        Driver, //
    },
    fastreg::MrLoan,
    pd::Pd,
    wr::MrPage,
};
use crate::{
    bindings,
    prelude::*,
    sync::Arc,
    types::Opaque, //
};
use core::{
    mem::MaybeUninit,
    ops::Deref, //
};

/// Access rights of a memory region or QP (`enum ib_access_flags`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AccessFlags(u32);

impl AccessFlags {
    /// No access beyond local read.
    pub const NONE: Self = Self(0);
    /// `IB_ACCESS_LOCAL_WRITE`.
    pub const LOCAL_WRITE: Self = Self(bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE);
    /// `IB_ACCESS_REMOTE_WRITE`.
    pub const REMOTE_WRITE: Self = Self(bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE);
    /// `IB_ACCESS_REMOTE_READ`.
    pub const REMOTE_READ: Self = Self(bindings::ib_access_flags_IB_ACCESS_REMOTE_READ);
    /// `IB_ACCESS_REMOTE_ATOMIC`.
    pub const REMOTE_ATOMIC: Self = Self(bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC);

    /// `IB_ACCESS_MW_BIND`: memory windows may be bound to the region.
    pub const MW_BIND: Self = Self(bindings::ib_access_flags_IB_ACCESS_MW_BIND);
    /// `IB_ZERO_BASED`: a memory window addressed from 0 rather than by virtual address.
    pub const ZERO_BASED: Self = Self(bindings::ib_access_flags_IB_ZERO_BASED);
    /// `IB_ACCESS_FLUSH_GLOBAL`: RDMA FLUSH may make writes to the region globally visible.
    pub const FLUSH_GLOBAL: Self = Self(bindings::ib_access_flags_IB_ACCESS_FLUSH_GLOBAL);
    /// `IB_ACCESS_FLUSH_PERSISTENT`: RDMA FLUSH may make writes to the region persistent.
    pub const FLUSH_PERSISTENT: Self = Self(bindings::ib_access_flags_IB_ACCESS_FLUSH_PERSISTENT);

    /// `IB_ACCESS_ON_DEMAND`: the region's pages are mapped on demand, not pinned
    /// ([`super::umem_odp::UmemOdp`]).
    pub const ON_DEMAND: Self = Self(bindings::ib_access_flags_IB_ACCESS_ON_DEMAND);
    /// `IB_ACCESS_HUGETLB`: an on-demand region lies in huge pages.
    pub const HUGETLB: Self = Self(bindings::ib_access_flags_IB_ACCESS_HUGETLB);

    /// The optional bits (`IB_ACCESS_OPTIONAL`, e.g. relaxed ordering): hints a device may
    /// ignore.
    pub const OPTIONAL: Self = Self(bindings::ib_access_flags_IB_ACCESS_OPTIONAL);

    /// The rights of C value `raw` (unknown bits kept).
    pub const fn from_raw(raw: u32) -> Self {
        Self(raw)
    }

    /// The raw bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// The rights of `self` and of `other`.
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// The rights of `self` that are not in `other`.
    pub const fn difference(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }

    /// Whether `self` and `other` share a right.
    pub const fn intersects(self, other: Self) -> bool {
        self.0 & other.0 != 0
    }

    /// Whether every right of `other` is in `self`.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for AccessFlags {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// The keys of a new memory region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrKeys {
    /// Local key (in SGEs).
    pub lkey: u32,
    /// Remote key (in RETHs and atomic headers).
    pub rkey: u32,
}

/// A user memory registration request (`reg_user_mr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UserMrRequest {
    /// Start of the user buffer.
    pub start: u64,
    /// Length in bytes.
    pub length: u64,
    /// The I/O virtual address the region is addressed by.
    pub iova: u64,
    /// Access rights.
    pub access: AccessFlags,
}

/// The kind of a memory region allocated by `alloc_mr` (`enum ib_mr_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MrType {
    /// `IB_MR_TYPE_MEM_REG`: registered by a fast-register work request over pages mapped
    /// with `ib_map_mr_sg` (page-aligned scatter/gather lists).
    MemReg,
    /// Any other type (SG_GAPS, integrity, ...), by its C value.
    Other(u32),
}

/// A memory region: the C `struct ib_mr` followed by the driver's data.
///
/// # Invariants
///
/// - Allocated by this module in a `KBox` with a zeroed `ibmr` whose `device` and `pd` are a
///   device and a PD of `T` (ib_core keeps the PD, and so the device, alive while the MR
///   exists).
/// - `data` is initialised for as long as a `&Mr<T>` exists: until `dereg_mr`.
/// - `loan` is `Some` exactly for a fast-register MR of a kernel PD: the loan of its pages
///   ([`super::fastreg`]), listed in its PD's `FastRegs` until the MR is deregistered.
#[repr(C)]
pub struct Mr<T: Driver> {
    ibmr: Opaque<bindings::ib_mr>,
    loan: Option<Arc<MrLoan>>,
    data: T::MrData,
}

// SAFETY: `struct ib_mr` may be used from any thread; `T::MrData` is `Send`.
unsafe impl<T: Driver> Send for Mr<T> {}
// SAFETY: `&Mr<T>` methods read fields fixed while the MR exists; `T::MrData` is `Sync`.
unsafe impl<T: Driver> Sync for Mr<T> {}

impl<T: Driver> Deref for Mr<T> {
    type Target = T::MrData;

    fn deref(&self) -> &T::MrData {
        &self.data
    }
}

impl<T: Driver> Mr<T> {
    /// The device of the MR.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: Set at allocation, a live device of `T` (type invariant).
        unsafe { Device::from_raw((*self.ibmr.get()).device) }
    }

    /// The identity of the MR's protection domain.
    pub fn pd_id(&self) -> super::pd::PdId {
        // SAFETY: Set at allocation and never changed by ib_core; a PD outlives its MRs.
        unsafe { Pd::<T>::from_raw((*self.ibmr.get()).pd) }.id()
    }

    /// The local key.
    pub fn lkey(&self) -> u32 {
        // SAFETY: Set at allocation and never changed by ib_core.
        unsafe { (*self.ibmr.get()).lkey }
    }

    /// The remote key.
    pub fn rkey(&self) -> u32 {
        // SAFETY: Set at allocation and never changed by ib_core.
        unsafe { (*self.ibmr.get()).rkey }
    }

    /// The I/O virtual address the region starts at. For a fast-register MR, set by
    /// `ib_map_mr_sg` and possibly changed by the consumer before it posts the registration
    /// (read it when executing that work request).
    pub fn iova(&self) -> u64 {
        // SAFETY: A plain integer field of the live MR; ib_core and consumers change it only
        // while no work request uses the MR (the verbs contract), so a read sees a whole value.
        unsafe { (*self.ibmr.get()).iova }
    }

    /// The region's length in bytes (for a fast-register MR, set by `ib_map_mr_sg`).
    pub fn length(&self) -> u64 {
        // SAFETY: As in `iova`.
        unsafe { (*self.ibmr.get()).length }
    }

    /// The page size of a fast-register MR's page list (set by `ib_map_mr_sg`).
    pub fn page_size(&self) -> u32 {
        // SAFETY: As in `iova`.
        unsafe { (*self.ibmr.get()).page_size }
    }

    /// The loan of a fast-register MR's pages.
    pub(super) fn loan(&self) -> Option<&Arc<MrLoan>> {
        self.loan.as_ref()
    }

    /// Converts a raw MR pointer of this driver back to its wrapper.
    ///
    /// # Safety
    ///
    /// `ibmr` is the `ibmr` field of a live `Mr<T>` allocated by this module, valid for `'a`.
    pub(super) unsafe fn from_raw<'a>(ibmr: *mut bindings::ib_mr) -> &'a Self {
        // SAFETY: By the function's requirements, `ibmr` is the first field of an `Mr<T>`.
        unsafe { &*crate::container_of!(Opaque::cast_from(ibmr), Mr<T>, ibmr) }
    }

    /// Allocates an MR of `pd` with `keys` and the driver data from `init` and hands it over
    /// to ib_core (freed by `dereg_mr_callback`).
    fn alloc(
        pd: &Pd<T>,
        keys: MrKeys,
        loan: Option<Arc<MrLoan>>,
        init: impl PinInit<T::MrData, Error>,
    ) -> Result<*mut bindings::ib_mr> {
        let b = KBox::<Self>::new_uninit(GFP_KERNEL)?;
        let mr = KBox::into_raw(b).cast::<Self>();
        // SAFETY: `mr` is a fresh allocation of `Self`; zero is a valid `ib_mr` (integers and
        // null pointers); `data` is initialised in place and never moves (the box is only
        // freed by `dereg_mr_callback` or below).
        let res = unsafe {
            let ibmr = Opaque::cast_into(&raw const (*mr).ibmr);
            ibmr.write(pin_init::zeroed());
            (*ibmr).device = (*pd.as_raw()).device;
            (*ibmr).pd = pd.as_raw();
            (*ibmr).lkey = keys.lkey;
            (*ibmr).rkey = keys.rkey;
            (&raw mut (*mr).loan).write(loan);
            pin_init::raw_try_init(&raw mut (*mr).data, init).map(|()| ibmr)
        };
        if res.is_err() {
            // SAFETY: `mr` came from `KBox::into_raw` above; `loan` was written, the data was
            // not initialised, so `loan` is dropped and the box freed as `MaybeUninit`.
            drop(unsafe {
                core::ptr::drop_in_place(&raw mut (*mr).loan);
                KBox::from_raw(mr.cast::<MaybeUninit<Self>>())
            });
        }
        res
    }
}

impl<T: Driver> Adapter<T> {
    /// # Safety
    ///
    /// `ibpd` is a live PD of this driver.
    pub(super) unsafe extern "C" fn get_dma_mr_callback(
        ibpd: *mut bindings::ib_pd,
        access: c_int,
    ) -> *mut bindings::ib_mr {
        // SAFETY: The PD is alive for the call.
        let pd = unsafe { Pd::<T>::from_raw(ibpd) };
        let res = T::get_dma_mr(pd, AccessFlags::from_raw(access as u32))
            .and_then(|(keys, init)| Mr::<T>::alloc(pd, keys, None, init));
        res.unwrap_or_else(|e| e.to_ptr())
    }

    /// # Safety
    ///
    /// `ibpd` is a live PD of this driver; `udata` is the system call's.
    pub(super) unsafe extern "C" fn reg_user_mr_callback(
        ibpd: *mut bindings::ib_pd,
        start: u64,
        length: u64,
        iova: u64,
        access: c_int,
        dmah: *mut bindings::ib_dmah,
        udata: *mut bindings::ib_udata,
    ) -> *mut bindings::ib_mr {
        let res = (|| {
            // DMA handles (TPH steering hints) are not supported.
            if !dmah.is_null() {
                return Err(EOPNOTSUPP);
            }
            // SAFETY: By the function's requirements.
            unsafe { super::pd::Origin::of_udata(udata)? };
            // SAFETY: The PD is alive for the call.
            let pd = unsafe { Pd::<T>::from_raw(ibpd) };
            let req = UserMrRequest {
                start,
                length,
                iova,
                access: AccessFlags::from_raw(access as u32),
            };
            let (keys, init) = T::reg_user_mr(pd, &req)?;
            Mr::<T>::alloc(pd, keys, None, init)
        })();
        res.unwrap_or_else(|e| e.to_ptr())
    }

    /// # Safety
    ///
    /// `ibpd` is a live PD of this driver.
    pub(super) unsafe extern "C" fn alloc_mr_callback(
        ibpd: *mut bindings::ib_pd,
        mr_type: bindings::ib_mr_type,
        max_num_sg: u32,
    ) -> *mut bindings::ib_mr {
        // SAFETY: The PD is alive for the call.
        let pd = unsafe { Pd::<T>::from_raw(ibpd) };
        let ty = match mr_type {
            bindings::ib_mr_type::IB_MR_TYPE_MEM_REG => MrType::MemReg,
            other => MrType::Other(other.0),
        };
        let res = (|| {
            // A kernel PD's fast-register MR lends its pages only while registered.
            let loan = match (ty, pd.fast_regs()) {
                (MrType::MemReg, Some(regs)) => {
                    let loan = MrLoan::new()?;
                    regs.add(&loan)?;
                    Some(loan)
                }
                _ => None,
            };
            let res = T::alloc_mr(pd, ty, max_num_sg)
                .and_then(|(keys, init)| Mr::<T>::alloc(pd, keys, loan.clone(), init));
            if let (Err(_), Some(l), Some(regs)) = (&res, &loan, pd.fast_regs()) {
                regs.remove(l);
            }
            res
        })();
        res.unwrap_or_else(|e| e.to_ptr())
    }

    /// # Safety
    ///
    /// `ibmr` is a live MR of this driver from `alloc_mr_callback`; `sg` holds `sg_nents`
    /// DMA-mapped entries and `sg_offset` is null or valid (ib_core's `ib_map_mr_sg` contract).
    pub(super) unsafe extern "C" fn map_mr_sg_callback(
        ibmr: *mut bindings::ib_mr,
        sg: *mut bindings::scatterlist,
        sg_nents: c_int,
        sg_offset: *mut c_uint,
    ) -> c_int {
        // SAFETY: By the function's requirements.
        let mr = unsafe { Mr::<T>::from_raw(ibmr) };
        // A new mapping: the pages of the earlier one are not lent any more.
        if let Some(Err(e)) = mr.loan().map(|l| l.remap()) {
            return e.to_errno();
        }
        let list = MrSgList {
            mr,
            sg,
            sg_nents,
            sg_offset,
        };
        match T::map_mr_sg(mr, list) {
            Ok(n) => n as c_int,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// `ibmr` was returned by `get_dma_mr_callback`, `reg_user_mr_callback` or
    /// `alloc_mr_callback` and is not used afterwards if the call succeeds.
    pub(super) unsafe extern "C" fn dereg_mr_callback(
        ibmr: *mut bindings::ib_mr,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: `ibmr` is the first field of a boxed `Mr<T>` with initialised data (function
        // requirement).
        let mr = unsafe { crate::container_of!(Opaque::cast_from(ibmr), Mr<T>, ibmr).cast_mut() };
        // SAFETY: As above; the MR stays alive for the call.
        let m = unsafe { &*mr };
        // The consumer takes the pages back when this returns: the loan ends first (and stays
        // ended if the driver refuses: the consumer must register again).
        if let Some(l) = m.loan() {
            l.end();
        }
        if let Err(e) = T::dereg_mr(m) {
            // ib_core keeps the MR, which stays as it was (still listed, for invalidations).
            return e.to_errno();
        }
        // SAFETY: The MR's PD outlives it (type invariant).
        let pd = unsafe { Pd::<T>::from_raw((*m.ibmr.get()).pd) };
        if let (Some(l), Some(regs)) = (m.loan(), pd.fast_regs()) {
            regs.remove(l);
        }
        // SAFETY: The driver let the MR go and nobody uses it after this call (function
        // requirement), so the box can be dropped, which drops the data and frees the memory.
        drop(unsafe { KBox::from_raw(mr) });
        0
    }
}

/// The scatter/gather list handed to [`Driver::map_mr_sg`], to be split into the pages of a
/// fast-register MR.
///
/// # Invariants
///
/// `sg`, `sg_nents` and `sg_offset` are the arguments of a `map_mr_sg` call on `mr`, valid
/// for its duration.
pub struct MrSgList<'a, T: Driver> {
    mr: &'a Mr<T>,
    sg: *mut bindings::scatterlist,
    sg_nents: c_int,
    sg_offset: *mut c_uint,
}

impl<T: Driver> MrSgList<'_, T> {
    /// Splits the list into pages of the MR's page size with `ib_sg_to_pages`, which sets the
    /// MR's I/O virtual address and length and calls [`Driver::mr_set_page`] once per page,
    /// in order; it stops at the first gap or when `mr_set_page` fails (the page list is
    /// full). Returns the number of list entries mapped. Process context, may not sleep
    /// inside `mr_set_page`.
    pub fn to_pages(self) -> Result<u32> {
        // SAFETY: The arguments are those of the `map_mr_sg` call (type invariant); the
        // callback only receives this MR.
        let n = unsafe {
            bindings::ib_sg_to_pages(
                Opaque::cast_into(&raw const self.mr.ibmr),
                self.sg,
                self.sg_nents,
                self.sg_offset,
                Some(set_page_callback::<T>),
            )
        };
        u32::try_from(n).map_err(|_| Error::from_errno(n))
    }
}

/// `ib_sg_to_pages`'s page callback: hands the page to the driver as an [`MrPage`].
///
/// # Safety
///
/// `ibmr` is a live MR of driver `T` from `alloc_mr_callback` whose `page_size` is set.
unsafe extern "C" fn set_page_callback<T: Driver>(ibmr: *mut bindings::ib_mr, addr: u64) -> c_int {
    // SAFETY: By the function's requirements.
    let mr = unsafe { Mr::<T>::from_raw(ibmr) };
    let res = mr
        .loan()
        .ok_or(EINVAL)
        .and_then(|l| MrPage::of_mr_page(addr, mr.page_size(), l, l.generation()))
        .and_then(|page| T::mr_set_page(mr, page));
    match res {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}
