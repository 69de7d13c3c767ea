// SPDX-License-Identifier: GPL-2.0

//! On-demand paging user memory (`struct ib_umem_odp`).
//!
//! C header: [`include/rdma/ib_umem_odp.h`](srctree/include/rdma/ib_umem_odp.h)
//!
//! An [`UmemOdp`] registers a user virtual address range with the owning process's MMU
//! notifiers instead of pinning it: pages are mapped on demand ([`UmemOdp::populate`], which
//! faults them in and may sleep) and unmapped whenever the kernel invalidates them (the
//! process unmaps or `madvise`s them, or the mm migrates, swaps or frees them).
//!
//! The transport copies to and from the memory in softirq, where neither a page fault nor the
//! umem's `umem_mutex` is allowed. So the value keeps its own table of the pages that are
//! present, under a spinlock that never sleeps (the *shadow*):
//!
//! * [`UmemOdp::populate`] faults a range in with `ib_umem_odp_map_dma_and_lock`, which returns
//!   with `umem_mutex` held and the notifier sequence current, and copies the valid entries of
//!   the pfn list into the shadow before it drops the mutex.
//! * The invalidate callback takes `umem_mutex` (so it cannot run between the fault and the
//!   copy), clears the range in the shadow under the spinlock, then lets ib_core unmap it. The
//!   mm frees or moves a page only after the callback returned.
//! * [`UmemOdp::copy_to`] and [`UmemOdp::copy_from`] hold the spinlock for the whole copy: a
//!   page they find in the shadow stays valid until they let go. A page that is missing makes
//!   them fail with `EAGAIN` before anything is copied; the caller populates and retries.

use super::{device::Driver, mr::AccessFlags, pd::Pd};
use crate::{
    bindings, new_spinlock_irq,
    page::{
        BorrowedPage,
        PAGE_SIZE, //
    },
    prelude::*,
    sync::SpinLockIrq,
};
use core::ptr::NonNull;

/// One page of the range in the shadow table.
#[derive(Clone, Copy)]
struct Slot {
    /// The page backing it now, if present.
    page: Option<NonNull<bindings::page>>,
    /// The page is mapped writable.
    writable: bool,
}

impl Slot {
    const EMPTY: Self = Slot {
        page: None,
        writable: false,
    };
}

/// The pages of the range that may be accessed now, one slot per `PAGE_SIZE` page from
/// `ib_umem_start()` (the range's start aligned down to the umem's page size).
///
/// # Invariants
///
/// A present slot holds a page the owning mm maps at that address; it stays valid until the
/// invalidate callback clears the slot (under the lock that guards this value).
struct Shadow {
    slots: KVVec<Slot>,
}

/// User memory of an on-demand paging memory region.
///
/// # Invariants
///
/// `raw` is an ODP umem returned by `ib_umem_odp_get` with `OPS` as its notifier operations,
/// owned by this value and released on drop. Its `private` field is null or points to
/// `shadow`, whose slots cover `[ib_umem_start, ib_umem_end)` page by page. `start` is
/// `ib_umem_start` and `addr`, `len` the registered range (`addr >= start`, `addr + len <=
/// ib_umem_end`).
pub struct UmemOdp {
    raw: NonNull<bindings::ib_umem_odp>,
    shadow: Pin<KBox<SpinLockIrq<Shadow>>>,
    start: u64,
    addr: u64,
    len: usize,
    writable: bool,
}

// SAFETY: The umem may be used and released from any thread; the shadow is behind a lock.
unsafe impl Send for UmemOdp {}
// SAFETY: `&UmemOdp` methods lock the shadow (or take `umem_mutex` through ib_core).
unsafe impl Sync for UmemOdp {}

/// The notifier operations of every [`UmemOdp`].
static OPS: bindings::mmu_interval_notifier_ops = bindings::mmu_interval_notifier_ops {
    invalidate: Some(invalidate),
    // SAFETY: All-zero is a valid value of the other members (no callbacks).
    ..unsafe { core::mem::zeroed() }
};

/// `mmu_interval_notifier_ops.invalidate`: the mm is about to unmap `range`.
///
/// # Safety
///
/// Called by the mm with `mni` the notifier of a live ODP umem registered with [`OPS`] and a
/// valid `range`.
unsafe extern "C" fn invalidate(
    mni: *mut bindings::mmu_interval_notifier,
    range: *const bindings::mmu_notifier_range,
    cur_seq: c_ulong,
) -> bool {
    // SAFETY: `mni` is the `notifier` field of an `ib_umem_odp` (the function's contract).
    let odp = unsafe { crate::container_of!(mni, bindings::ib_umem_odp, notifier) };
    // SAFETY: `range` is valid for the call.
    if !unsafe { bindings::mmu_notifier_range_blockable(range) } {
        // `umem_mutex` may sleep: ask the mm to try again where it can block.
        return false;
    }
    // SAFETY: `odp` is live for the call; its mutex was initialised by `ib_umem_odp_get`.
    unsafe { bindings::mutex_lock(&raw mut (*odp).umem_mutex) };
    // SAFETY: Under `umem_mutex`, as the notifier contract asks.
    unsafe { bindings::mmu_interval_set_seq(mni, cur_seq) };
    // SAFETY: `odp` and `range` are valid; the interval is fixed at registration.
    let (ustart, uend, rstart, rend) = unsafe {
        let it = &(*odp).notifier.interval_tree;
        let r = &*range;
        (
            it.start as u64,
            it.last.wrapping_add(1) as u64,
            r.start as u64,
            r.end as u64,
        )
    };
    let start = ustart.max(rstart);
    let end = uend.min(rend);
    // SAFETY: `private` is written under `umem_mutex` (held), so this read is ordered after it.
    let shadow = unsafe { (*odp).private }.cast::<SpinLockIrq<Shadow>>();
    if !shadow.is_null() && start < end {
        let first = ((start - ustart) as usize) / PAGE_SIZE;
        let last = ((end - ustart) as usize).div_ceil(PAGE_SIZE);
        // SAFETY: A non-null `private` points to the shadow of the `UmemOdp` that owns the
        // umem, which outlives the notifier (`Drop` releases the umem first).
        let mut s = unsafe { &*shadow }.lock();
        let n = s.slots.len();
        for slot in &mut s.slots[first.min(n)..last.min(n)] {
            // INVARIANT: The page goes from the shadow before the mm may free it.
            *slot = Slot::EMPTY;
        }
    }
    if start < end {
        // SAFETY: `umem_mutex` is held, the range is inside the umem.
        unsafe { bindings::ib_umem_odp_unmap_dma_pages(odp, start, end) };
    }
    // SAFETY: Locked above.
    unsafe { bindings::mutex_unlock(&raw mut (*odp).umem_mutex) };
    true
}

impl UmemOdp {
    /// Registers `len` bytes of the calling process's memory at `addr` for on-demand paging by
    /// the device of `pd`, with `access` (which must include [`AccessFlags::ON_DEMAND`]).
    /// Nothing is faulted in; pages the process has mapped already are entered (a snapshot,
    /// as rdma_rxe takes). Process context of the owning process, may sleep. `EINVAL` for an
    /// empty range.
    pub fn get<T: Driver>(pd: &Pd<T>, addr: u64, len: u64, access: AccessFlags) -> Result<Self> {
        let ulen = usize::try_from(len).map_err(|_| EINVAL)?;
        if ulen == 0 || !access.contains(AccessFlags::ON_DEMAND) {
            return Err(EINVAL);
        }
        let uaddr = c_ulong::try_from(addr).map_err(|_| EINVAL)?;
        // SAFETY: The PD is live, so its device is; `OPS` is static. The function returns an
        // ODP umem or an `ERR_PTR`.
        let raw = unsafe {
            let dev = (*pd.as_raw()).device;
            bindings::ib_umem_odp_get(dev, uaddr, ulen, access.bits() as c_int, &OPS)
        };
        let raw = NonNull::new(crate::error::from_err_ptr(raw)?).ok_or(ENOMEM)?;
        // SAFETY: `raw` is a valid umem we own; the interval is fixed at registration.
        let (start, end, writable) = unsafe {
            let r = raw.as_ptr();
            let it = &(*r).notifier.interval_tree;
            (
                it.start as u64,
                it.last.wrapping_add(1) as u64,
                (*r).umem.writable() != 0,
            )
        };
        let shadow = (|| {
            let n = usize::try_from(end.wrapping_sub(start)).map_err(|_| EINVAL)? / PAGE_SIZE;
            let mut slots = KVVec::with_capacity(n, GFP_KERNEL_ACCOUNT)?;
            for _ in 0..n {
                slots.push(Slot::EMPTY, GFP_KERNEL_ACCOUNT)?;
            }
            KBox::pin_init(
                new_spinlock_irq!(Shadow { slots }, "metaroce_odp_shadow"),
                GFP_KERNEL,
            )
        })();
        let shadow = match shadow {
            Ok(s) => s,
            Err(e) => {
                // SAFETY: We own `raw` and nothing refers to it.
                unsafe { bindings::ib_umem_odp_release(raw.as_ptr()) };
                return Err(e);
            }
        };
        // SAFETY: `raw` is valid; `private` is written under `umem_mutex`, which the
        // invalidate callback holds when it reads it. The shadow is pinned and outlives the
        // umem (`Drop`).
        unsafe {
            bindings::mutex_lock(&raw mut (*raw.as_ptr()).umem_mutex);
            (*raw.as_ptr()).private = (&raw const *shadow).cast_mut().cast();
            bindings::mutex_unlock(&raw mut (*raw.as_ptr()).umem_mutex);
        }
        // INVARIANT: `raw` came from `ib_umem_odp_get` with `OPS`; `private` points to
        // `shadow`, sized for the umem's interval; the range lies in it.
        let this = Self {
            raw,
            shadow,
            start,
            addr,
            len: ulen,
            writable,
        };
        // What the process has mapped already (rdma_rxe does the same); failing that, the
        // pages are faulted in on first use.
        let _ = this.populate(0, ulen, false);
        Ok(this)
    }

    /// Length of the range, in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the range is empty (never: registration refuses 0).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the pages are mapped for writing (the registration asked for a write right).
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// The shadow slots covering `len` bytes at byte `offset` of the range, or `EINVAL` if
    /// they are not all inside it.
    fn slots(&self, offset: usize, len: usize) -> Result<core::ops::Range<usize>> {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > self.len {
            return Err(EINVAL);
        }
        // No overflow: the range lies in the umem's interval (type invariant).
        let base = (self.addr - self.start) as usize;
        Ok((base + offset) / PAGE_SIZE..(base + end).div_ceil(PAGE_SIZE))
    }

    /// Maps the pages of `len` bytes at byte `offset` of the range: faulting them in (writable
    /// if the registration asked for a write right) if `fault`, or taking only those the
    /// process has mapped already if not. Process context, may sleep; any process (the umem
    /// remembers its mm). `EINVAL` outside the range, `EFAULT` (or the mm's error) if the
    /// process cannot fault the memory in (unmapped, or read-only for a writable region).
    pub fn populate(&self, offset: usize, len: usize, fault: bool) -> Result {
        let range = self.slots(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        // Whole pages, so every slot of `range` is refreshed.
        let va = self.start + (range.start * PAGE_SIZE) as u64;
        let bytes = ((range.end - range.start) * PAGE_SIZE) as u64;
        // SAFETY: `raw` is valid (type invariant); the range is inside the umem.
        let ret = unsafe {
            bindings::ib_umem_odp_map_dma_and_lock(
                self.raw.as_ptr(),
                va,
                bytes,
                if self.writable {
                    bindings::hmm_pfn_flags_HMM_PFN_WRITE as u64
                } else {
                    0
                },
                fault,
            )
        };
        crate::error::to_result(ret)?;
        // `umem_mutex` is held now and the pfn list of the range is current: no invalidation
        // can run until it is dropped below.
        {
            let mut s = self.shadow.lock();
            for i in range {
                // SAFETY: `raw` is valid; its pfn list has an entry per page of the interval
                // (`i` is below the shadow's length, which is that count); it is stable under
                // `umem_mutex`.
                let pfn = unsafe { *(*self.raw.as_ptr()).map.pfn_list.add(i) };
                let mut writable = false;
                // SAFETY: Called under `umem_mutex` after a successful map.
                let page = unsafe { bindings::hmm_pfn_to_page_valid(pfn, &mut writable) };
                if let Some(slot) = s.slots.get_mut(i) {
                    // INVARIANT: The mm maps `page` here now; an invalidation must take
                    // `umem_mutex` and clear the slot before the page can go.
                    *slot = Slot {
                        page: NonNull::new(page),
                        writable,
                    };
                }
            }
        }
        // SAFETY: Held since the successful map above.
        unsafe { bindings::mutex_unlock(&raw mut (*self.raw.as_ptr()).umem_mutex) };
        Ok(())
    }

    /// Whether every page of `len` bytes at byte `offset` is present (and writable if
    /// `write`). Any context, never sleeps. False outside the range.
    pub fn is_present(&self, offset: usize, len: usize, write: bool) -> bool {
        let Ok(range) = self.slots(offset, len) else {
            return false;
        };
        let s = self.shadow.lock();
        s.slots.get(range).is_some_and(|r| {
            r.iter()
                .all(|sl| sl.page.is_some() && (sl.writable || !write))
        })
    }

    /// Calls `f(page, offset in page, offset in the caller's buffer, n)` for each page piece of
    /// `len` bytes at byte `offset`, all under the shadow lock, after checking that every page
    /// is present (and writable if `write`): `EAGAIN` (nothing done) if one is not.
    fn with_pages(
        &self,
        offset: usize,
        len: usize,
        write: bool,
        mut f: impl FnMut(&BorrowedPage<'_>, usize, usize, usize) -> Result,
    ) -> Result {
        let range = self.slots(offset, len)?;
        let s = self.shadow.lock();
        let slots = s.slots.get(range.clone()).ok_or(EINVAL)?;
        if !slots
            .iter()
            .all(|sl| sl.page.is_some() && (sl.writable || !write))
        {
            return Err(EAGAIN);
        }
        let base = (self.addr - self.start) as usize;
        let mut done = 0;
        while done < len {
            let abs = base + offset + done;
            let (index, in_page) = (abs / PAGE_SIZE, abs % PAGE_SIZE);
            let n = (PAGE_SIZE - in_page).min(len - done);
            let page = s.slots.get(index).and_then(|sl| sl.page).ok_or(EAGAIN)?;
            // SAFETY: The page is present in the shadow, which we hold locked: the invalidate
            // callback cannot clear it, so the mm cannot free it, until we let go.
            let page = unsafe { BorrowedPage::from_raw(page) };
            f(&page, in_page, done, n)?;
            done += n;
        }
        Ok(())
    }

    /// Copies `src` into the range at byte `offset`. Any context, never sleeps (one
    /// `kmap_local` mapping at a time, under a spinlock). `EAGAIN` (nothing copied) if a page
    /// is not present or not writable: [`UmemOdp::populate`] it and retry. `EINVAL` outside
    /// the range.
    pub fn copy_to(&self, offset: usize, src: &[u8]) -> Result {
        self.with_pages(offset, src.len(), true, |page, in_page, done, n| {
            // SAFETY: `src[done..done + n]` is readable; `in_page + n <= PAGE_SIZE`. The page
            // is mapped writable in the owning process, which may access it concurrently
            // (verbs leave such interleaving undefined); the bytes are plain `u8`.
            unsafe { page.write_raw(src.as_ptr().add(done), in_page, n) }
        })
    }

    /// Copies `dst.len()` bytes at byte `offset` of the range into `dst`. Any context, never
    /// sleeps. `EAGAIN` (nothing copied) if a page is not present. `EINVAL` outside the range.
    pub fn copy_from(&self, offset: usize, dst: &mut [u8]) -> Result {
        let p = dst.as_mut_ptr();
        self.with_pages(offset, dst.len(), false, |page, in_page, done, n| {
            // SAFETY: `dst[done..done + n]` is writable; see `copy_to` for concurrent access.
            unsafe { page.read_raw(p.add(done), in_page, n) }
        })
    }
}

impl Drop for UmemOdp {
    fn drop(&mut self) {
        // SAFETY: We own the umem (type invariant). Releasing it removes the notifier, waiting
        // for a running invalidation, before `shadow` (which `private` points to) is freed.
        unsafe { bindings::ib_umem_odp_release(self.raw.as_ptr()) };
    }
}
