// SPDX-License-Identifier: GPL-2.0

//! Queue memory shared with a user process through `mmap` of the uverbs file.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/linux/vmalloc.h`](srctree/include/linux/vmalloc.h)
//!
//! - [`SharedBuf`]: zeroed `vmalloc_user` memory, reference counted ([`Arc`]). The kernel side
//!   reaches it only through bounds-checked accessors: acquire/release loads and stores of
//!   32-bit indices and byte-range copies in and out. User space may write any byte at any
//!   time, so nothing in it is ever borrowed as a Rust reference: entries are copied out first
//!   and validated afterwards.
//! - [`UserMapping`]: a [`SharedBuf`] offered to the process as an `rdma_user_mmap_entry` of its
//!   user context. [`UserMapping::offset`] and [`UserMapping::size`] are what the provider
//!   passes to `mmap(2)` (e.g. rdma_rxe's `struct mminfo`).
//!
//! A user context keeps the list of its mappings still offered (`ContextMaps`): removing an
//! entry needs the context, so the mappings a driver still holds when the context is
//! deallocated are removed then, and their later drop does nothing.
//!
//! The device's `mmap` hook (installed with user contexts) looks the entry up by page offset
//! and maps the whole buffer with `remap_vmalloc_range`; ib_core's `rdma_umap_ops` stay the
//! VMA's operations and `vm_private_data` stays null, so the core neither tracks nor zaps the
//! mapping. That is safe because the mapping holds its own page references: when the object
//! is destroyed, dropping the [`UserMapping`] removes the entry (no new `mmap`), `mmap_free`
//! drops the entry's buffer reference, and the pages of a still-mapped buffer stay allocated
//! until the process unmaps them (`vfree` only drops the allocation's references).

use super::udata::Udata;
use crate::{
    bindings,
    error::to_result,
    new_mutex,
    prelude::*,
    sync::{
        Arc,
        Mutex, //
    },
    types::Opaque, //
};
use core::{
    ptr::NonNull,
    sync::atomic::{
        AtomicU32,
        Ordering, //
    },
};

/// Memory shared with user space: a zeroed `vmalloc_user` allocation, charged to the memory
/// cgroup of the process that asked for it (`__GFP_ACCOUNT`).
///
/// # Invariants
///
/// `ptr` is a `vmalloc_user` allocation of at least `len` bytes (page-aligned start, size
/// rounded up to whole pages, `VM_USERMAP`), owned by this value and freed on drop.
pub struct SharedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: The memory may be accessed and freed from any thread; every access goes through
// atomics or volatile copies.
unsafe impl Send for SharedBuf {}
// SAFETY: `&SharedBuf` only permits atomic and volatile accesses, which may run concurrently.
unsafe impl Sync for SharedBuf {}

impl SharedBuf {
    /// Allocates `len` zeroed bytes (rounded up to whole pages) that can be mapped into user
    /// space. Process context, may sleep. `EINVAL` for 0 or a size above `u32::MAX` (what
    /// `struct mminfo` can report), `ENOMEM` if the allocation fails.
    pub fn new(len: usize) -> Result<Arc<Self>> {
        if len == 0 || len > u32::MAX as usize {
            return Err(EINVAL);
        }
        // SAFETY: Plain allocation; the helper zeroes the memory and marks it for user mapping.
        let ptr = unsafe { bindings::vmalloc_user_account(len as c_ulong) };
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(ENOMEM)?;
        // INVARIANT: `ptr` is a fresh `vmalloc_user` allocation of `len` bytes.
        let buf = Self { ptr, len };
        Ok(Arc::new(buf, GFP_KERNEL)?)
    }

    /// The size asked for, in bytes (the allocation is rounded up to pages).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty (never: the constructor refuses 0).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Pointer to `off`, after checking that `off..off + n` is inside the buffer.
    fn at(&self, off: usize, n: usize) -> Result<*mut u8> {
        let end = off.checked_add(n).ok_or(EINVAL)?;
        if end > self.len {
            return Err(EINVAL);
        }
        // SAFETY: `off < len` or `n == 0` with `off <= len`: within or one past the allocation.
        Ok(unsafe { self.ptr.as_ptr().add(off) })
    }

    fn atomic_at(&self, off: usize) -> Result<&AtomicU32> {
        if off % 4 != 0 {
            return Err(EINVAL);
        }
        let p = self.at(off, 4)?;
        // SAFETY: `p` is 4-byte aligned (the allocation is page-aligned and `off` a multiple of
        // 4), inside the buffer, and lives as long as `&self`; user space accesses the index
        // words only with atomic operations (the provider's contract), and the kernel only
        // through this accessor.
        Ok(unsafe { AtomicU32::from_ptr(p.cast::<u32>()) })
    }

    /// Loads the `u32` at byte offset `off` (4-byte aligned) with acquire ordering: reads of
    /// the buffer after it see what user space wrote before its release store.
    pub fn load_acquire_u32(&self, off: usize) -> Result<u32> {
        Ok(self.atomic_at(off)?.load(Ordering::Acquire))
    }

    /// Loads the `u32` at `off` with no ordering (an index only the kernel writes).
    pub fn load_relaxed_u32(&self, off: usize) -> Result<u32> {
        Ok(self.atomic_at(off)?.load(Ordering::Relaxed))
    }

    /// Stores `v` at byte offset `off` (4-byte aligned) with release ordering: user space that
    /// loads it with acquire sees every earlier write of the kernel to the buffer.
    pub fn store_release_u32(&self, off: usize, v: u32) -> Result {
        self.atomic_at(off)?.store(v, Ordering::Release);
        Ok(())
    }

    /// Stores `v` at `off` with no ordering (e.g. constant header fields before publication).
    pub fn store_relaxed_u32(&self, off: usize, v: u32) -> Result {
        self.atomic_at(off)?.store(v, Ordering::Relaxed);
        Ok(())
    }

    /// Copies `dst.len()` bytes at `off` out of the buffer. The bytes are a snapshot that user
    /// space may change at any time: validate the copy, never the buffer.
    pub fn read(&self, off: usize, dst: &mut [u8]) -> Result {
        let src = self.at(off, dst.len())?;
        for (i, d) in dst.iter_mut().enumerate() {
            // SAFETY: `src..src + dst.len()` is inside the buffer (checked by `at`); a volatile
            // byte read of memory another party may write yields some byte value.
            *d = unsafe { src.add(i).read_volatile() };
        }
        Ok(())
    }

    /// Copies `src` into the buffer at `off`.
    pub fn write(&self, off: usize, src: &[u8]) -> Result {
        let dst = self.at(off, src.len())?;
        for (i, s) in src.iter().enumerate() {
            // SAFETY: `dst..dst + src.len()` is inside the buffer (checked by `at`); volatile
            // byte writes to memory user space may read concurrently.
            unsafe { dst.add(i).write_volatile(*s) };
        }
        Ok(())
    }
}

impl Drop for SharedBuf {
    fn drop(&mut self) {
        // SAFETY: `ptr` is our `vmalloc_user` allocation (type invariant) and nobody uses it
        // after the last `Arc` reference goes; pages still mapped into a process keep their own
        // references.
        unsafe { bindings::vfree(self.ptr.as_ptr().cast()) };
    }
}

/// The driver part of an `rdma_user_mmap_entry`: the entry and the buffer it maps.
///
/// # Invariants
///
/// Allocated in a `KBox` by [`UserMapping::new`] and freed by `mmap_free_callback` once
/// ib_core drops the entry's last reference.
#[repr(C)]
struct MmapEntry {
    entry: Opaque<bindings::rdma_user_mmap_entry>,
    buf: Arc<SharedBuf>,
}

/// A pointer to a [`MmapEntry`] still inserted in its context's mmap table.
struct LiveEntry(NonNull<MmapEntry>);

// SAFETY: Only the owner of the insertion reference removes the entry, from any thread.
unsafe impl Send for LiveEntry {}

/// The mappings of one user context that are still offered, shared by the context
/// ([`super::device`]'s `Ucontext`) and each [`UserMapping`] made for it.
///
/// A mapping's owner may drop it after its user context is gone (nothing ties where a driver
/// keeps a [`UserMapping`] to the context's life), but removing an entry dereferences the
/// context (`entry->ucontext`). So whichever comes first removes the entry, under `live`'s
/// lock: the mapping's drop while the context exists, or the context's teardown
/// ([`ContextMaps::revoke_all`]) for the mappings still alive then.
///
/// # Invariants
///
/// While `live` holds `Some(list)`, the context exists and `list` holds every entry inserted
/// into it by [`UserMapping::new`] and not yet removed; each is owned (its insertion reference)
/// by the list, the [`UserMapping`] only naming it. Once `live` is `None` (the context is being
/// deallocated) every entry has been removed.
#[pin_data]
pub(super) struct ContextMaps {
    #[pin]
    live: Mutex<Option<KVec<LiveEntry>>>,
}

impl ContextMaps {
    /// The mapping list of a new user context. May sleep.
    pub(super) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                live <- new_mutex!(Some(KVec::new()), "metaroce_ucontext_maps"),
            }),
            GFP_KERNEL,
        )
    }

    /// Removes the entries of every mapping still alive: called once, when the user context is
    /// deallocated (after ib_core destroyed all its objects), before its memory is freed. The
    /// mappings' later drops then leave their entries alone. May sleep.
    pub(super) fn revoke_all(&self) {
        let Some(list) = self.live.lock().take() else {
            return;
        };
        for e in list.iter() {
            // SAFETY: `e` is inserted and its insertion reference is the list's (type
            // invariant), taken out of the list here; the context is still allocated (this
            // runs in its `dealloc_ucontext`).
            unsafe {
                bindings::rdma_user_mmap_entry_remove(Opaque::cast_into(
                    &raw const (*e.0.as_ptr()).entry,
                ))
            };
        }
        // INVARIANT: `live` is `None` and every entry is removed.
    }
}

/// A [`SharedBuf`] the process that created an object may `mmap` through its uverbs file.
///
/// Create it in the object's create hook (from the call's [`Udata`]) and keep it in the
/// object's data: dropping it (when the object is destroyed) revokes the offset. A mapping
/// that outlives its user context (dropped after ib_core deallocated it) was revoked by the
/// context's teardown (`ContextMaps`), and its drop does nothing then.
///
/// Dropping it may sleep (it takes mutexes): drop it in process context.
///
/// # Invariants
///
/// `maps` is the `ContextMaps` of the user context `entry` was inserted into; the entry is in
/// its list until removed by this value's drop or by the context's teardown. `offset` and
/// `size` are the entry's, fixed at insertion.
pub struct UserMapping {
    entry: NonNull<MmapEntry>,
    maps: Arc<ContextMaps>,
    offset: u64,
    size: usize,
}

// SAFETY: The entry is removed (drop) under `maps`' lock from any thread; the other fields are
// plain data and an `Arc`.
unsafe impl Send for UserMapping {}
// SAFETY: `&UserMapping` only reads fields fixed at insertion.
unsafe impl Sync for UserMapping {}

impl UserMapping {
    /// Offers `buf` for mapping to the process making the current system call. Process
    /// context, may sleep.
    pub fn new(udata: &Udata<'_>, buf: Arc<SharedBuf>) -> Result<Self> {
        let ucontext = udata.ucontext_raw();
        if ucontext.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: `ucontext` is the live context of the system call, of a device driven by
        // `super::device` (only those make a `Udata`), whose user contexts are all
        // `Ucontext`s.
        let maps = unsafe { super::device::ucontext_maps(ucontext) }.clone();
        let size = buf.len();
        let b = KBox::new(
            MmapEntry {
                entry: Opaque::zeroed(),
                buf,
            },
            GFP_KERNEL,
        )?;
        let mut guard = maps.live.lock();
        // `None`: the context is being deallocated, impossible during one of its system calls.
        let list = Option::as_mut(&mut *guard).ok_or(EINVAL)?;
        let p = KBox::into_raw(b);
        // SAFETY: `p` came from `KBox::into_raw`, never null.
        let entry = unsafe { NonNull::new_unchecked(p) };
        // Listed before insertion, under the lock: nobody sees the list until it is true again.
        if let Err(e) = list.push(LiveEntry(entry), GFP_KERNEL) {
            // SAFETY: Not inserted: the box is ours again.
            drop(unsafe { KBox::from_raw(p) });
            return Err(e.into());
        }
        // SAFETY: `p` is a valid `MmapEntry` with a zeroed C entry, as insertion expects;
        // `ucontext` is the live context of the system call.
        let ret = unsafe {
            bindings::rdma_user_mmap_entry_insert(
                ucontext,
                Opaque::cast_into(&raw const (*p).entry),
                size,
            )
        };
        if let Err(e) = to_result(ret) {
            list.pop();
            // SAFETY: Insertion failed, so ib_core holds no reference: the box is ours again.
            drop(unsafe { KBox::from_raw(p) });
            return Err(e);
        }
        // INVARIANT: Inserted, and listed: the list owns the insertion reference.
        // SAFETY: The entry was just inserted and is alive; `start_pgoff` is set at insertion
        // and never changed.
        let pgoff = unsafe { (*Opaque::cast_into(&raw const (*p).entry)).start_pgoff };
        drop(guard);
        Ok(Self {
            entry,
            maps,
            offset: (pgoff as u64) << crate::page::PAGE_SHIFT,
            size,
        })
    }

    /// The offset to pass to `mmap(2)` (`rdma_user_mmap_get_offset`).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The length to pass to `mmap(2)`, in bytes.
    pub fn size(&self) -> usize {
        self.size
    }
}

impl Drop for UserMapping {
    fn drop(&mut self) {
        let mut guard = self.maps.live.lock();
        // `None`: the context is gone and its teardown removed the entry.
        let Some(list) = Option::as_mut(&mut *guard) else {
            return;
        };
        let Some(i) = list.iter().position(|e| e.0 == self.entry) else {
            return;
        };
        let Ok(e) = list.remove(i) else { return };
        // SAFETY: The entry is inserted and the list's reference to it was just taken out
        // (type invariants), so it is removed once; the context is alive while its list is
        // (`ContextMaps` invariant), and stays so while we hold the lock. After this call the
        // entry is freed by `mmap_free_callback` once any `mmap` in progress dropped its own.
        unsafe {
            bindings::rdma_user_mmap_entry_remove(Opaque::cast_into(
                &raw const (*e.0.as_ptr()).entry,
            ))
        };
    }
}

/// # Safety
///
/// `ibuc` is a live user context of a device whose mmap entries are all `MmapEntry`s, `vma` the
/// VMA being set up by `ib_uverbs_mmap` for it.
pub(super) unsafe extern "C" fn mmap_callback(
    ibuc: *mut bindings::ib_ucontext,
    vma: *mut bindings::vm_area_struct,
) -> c_int {
    // SAFETY: Both pointers are valid for the call (function requirements); the lookup checks
    // `VM_SHARED` and that the VMA length equals the entry's page count, and takes a reference.
    let entry = unsafe { bindings::rdma_user_mmap_entry_get(ibuc, vma) };
    if entry.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: Every entry of this device is the first field of a `MmapEntry` (function
    // requirement), kept alive by the reference just taken.
    let me = unsafe { &*crate::container_of!(Opaque::cast_from(entry), MmapEntry, entry) };
    // SAFETY: The buffer is a `vmalloc_user` allocation of at least `npages` pages (the entry
    // was inserted with the buffer's size, and the allocation is rounded up to pages) and the
    // VMA is exactly that long; `remap_vmalloc_range` takes page references for the mapping.
    let ret = unsafe { bindings::remap_vmalloc_range(vma, me.buf.ptr.as_ptr().cast(), 0) };
    // SAFETY: Drops the reference taken by the lookup.
    unsafe { bindings::rdma_user_mmap_entry_put(entry) };
    ret
}

/// # Safety
///
/// Called by ib_core once the last reference of `entry`, a `MmapEntry` of this device, is gone.
pub(super) unsafe extern "C" fn mmap_free_callback(entry: *mut bindings::rdma_user_mmap_entry) {
    // SAFETY: The entry is the first field of a `MmapEntry` allocated with `KBox` by
    // `UserMapping::new`; nobody uses it any more.
    drop(unsafe {
        KBox::from_raw(crate::container_of!(Opaque::cast_from(entry), MmapEntry, entry).cast_mut())
    });
}

#[macros::kunit_tests(rust_metaroce_shared_buf)]
mod tests {
    use super::*;
    use crate::page::PAGE_SIZE;

    #[test]
    fn accessors_round_trip() -> Result {
        let buf = SharedBuf::new(PAGE_SIZE + 100)?;
        assert_eq!(buf.len(), PAGE_SIZE + 100);
        // Zeroed at allocation.
        assert_eq!(buf.load_acquire_u32(PAGE_SIZE + 96)?, 0);
        buf.store_release_u32(128, 0xdead_beef)?;
        assert_eq!(buf.load_acquire_u32(128)?, 0xdead_beef);
        buf.store_relaxed_u32(PAGE_SIZE + 96, 7)?;
        assert_eq!(buf.load_relaxed_u32(PAGE_SIZE + 96)?, 7);
        // A copy across the page boundary.
        let data: [u8; 40] = core::array::from_fn(|i| i as u8 + 1);
        buf.write(PAGE_SIZE - 20, &data)?;
        let mut back = [0u8; 40];
        buf.read(PAGE_SIZE - 20, &mut back)?;
        assert_eq!(back, data);
        Ok(())
    }

    #[test]
    fn bounds_are_checked() -> Result {
        assert_eq!(SharedBuf::new(0).err(), Some(EINVAL));
        let buf = SharedBuf::new(100)?;
        // Past the end, straddling the end, misaligned, overflowing offsets: all refused,
        // although the allocation itself is a whole page.
        assert_eq!(buf.load_acquire_u32(100).err(), Some(EINVAL));
        assert_eq!(buf.load_acquire_u32(98).err(), Some(EINVAL));
        assert_eq!(buf.store_release_u32(2, 1).err(), Some(EINVAL));
        assert_eq!(buf.write(96, &[0; 5]).err(), Some(EINVAL));
        assert_eq!(buf.read(usize::MAX, &mut [0; 2]).err(), Some(EINVAL));
        assert!(buf.write(100, &[]).is_ok());
        assert!(buf.read(96, &mut [0; 4]).is_ok());
        Ok(())
    }
}
