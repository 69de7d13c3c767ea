// SPDX-License-Identifier: GPL-2.0

//! Pinned user memory (`struct ib_umem`).
//!
//! C header: [`include/rdma/ib_umem.h`](srctree/include/rdma/ib_umem.h)
//!
//! A [`Umem`] pins a user virtual address range for a device (7.3's `ib_umem_get_va`, an
//! inline over the exported `ib_umem_get_attr_or_va`) and releases it on drop. Its pages are
//! listed once at pinning, so [`Umem::copy_to`] and [`Umem::copy_from`] reach any byte offset
//! in constant time, map one page at a time with `kmap_local` and never sleep: the transport
//! calls them from softirq and work context to place received payload into a user MR and read
//! payload to send. Only pinning and release sleep.

use super::{device::Driver, mr::AccessFlags, pd::Pd};
use crate::{
    bindings,
    page::{
        BorrowedPage,
        PAGE_SIZE, //
    },
    prelude::*,
};
use core::ptr::NonNull;

/// User memory pinned for a device.
///
/// # Invariants
///
/// `raw` is a umem returned by `ib_umem_get_attr_or_va`, owned by this value and released on
/// drop; its pages stay pinned until then, and `range` lists them: page `i` backs user
/// addresses `[align_down(address) + i * PAGE_SIZE, +PAGE_SIZE)`.
pub struct Umem {
    raw: NonNull<bindings::ib_umem>,
    range: PageRange,
}

/// `len` bytes starting `first_offset` bytes into the first of a list of pages, addressed by
/// byte offset; the page walk of [`Umem::copy_to`] and [`Umem::copy_from`].
///
/// # Invariants
///
/// Every page of `pages` stays valid for as long as the value exists (its owner keeps them:
/// pinned user pages for a [`Umem`], allocated pages in the KUnit tests); `first_offset <
/// PAGE_SIZE` and `first_offset + len <= pages.len() * PAGE_SIZE`.
struct PageRange {
    pages: KVVec<NonNull<bindings::page>>,
    first_offset: usize,
    len: usize,
}

impl PageRange {
    /// Calls `f(page, offset_in_page, range_offset, n)` for each page piece of
    /// `offset..offset + len` after checking that it is inside the range.
    fn for_each_piece(
        &self,
        offset: usize,
        len: usize,
        mut f: impl FnMut(&BorrowedPage<'_>, usize, usize, usize) -> Result,
    ) -> Result {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > self.len {
            return Err(EINVAL);
        }
        let mut done = 0;
        while done < len {
            // No overflow: `first_offset < PAGE_SIZE` and `offset + done < len`, and the pages
            // of `len` bytes fit in the address space.
            let abs = self.first_offset + offset + done;
            let (index, in_page) = (abs / PAGE_SIZE, abs % PAGE_SIZE);
            let n = (PAGE_SIZE - in_page).min(len - done);
            let page = self.pages.get(index).ok_or(EINVAL)?;
            // SAFETY: The page stays valid for as long as `self` (type invariant).
            let page = unsafe { BorrowedPage::from_raw(*page) };
            f(&page, in_page, done, n)?;
            done += n;
        }
        Ok(())
    }

    fn copy_to(&self, offset: usize, src: &[u8]) -> Result {
        self.for_each_piece(offset, src.len(), |page, in_page, done, n| {
            // SAFETY: `src[done..done + n]` is readable; `in_page + n <= PAGE_SIZE` (checked
            // again by `write_raw`). The only other writers of a pinned user page are the
            // owning process and the device's own transfers into the same MR, whose
            // interleaving the verbs semantics leave undefined; the bytes are plain `u8`.
            unsafe { page.write_raw(src.as_ptr().add(done), in_page, n) }
        })
    }

    fn copy_from(&self, offset: usize, dst: &mut [u8]) -> Result {
        let p = dst.as_mut_ptr();
        self.for_each_piece(offset, dst.len(), |page, in_page, done, n| {
            // SAFETY: `dst[done..done + n]` is writable; see `copy_to` for concurrent access.
            unsafe { page.read_raw(p.add(done), in_page, n) }
        })
    }
}

// SAFETY: A umem may be used and released from any thread; the pages are pinned.
unsafe impl Send for Umem {}
// SAFETY: `&Umem` methods only read the fixed page list and copy bytes through `kmap_local`.
unsafe impl Sync for Umem {}

impl Umem {
    /// Pins `len` bytes of the calling process's memory at `addr` for the device of `pd`, with
    /// `access` (writable pinning if the rights include any write or atomic access). Process
    /// context of the owning process, may sleep. `EINVAL` for an empty range.
    pub fn pin<T: Driver>(pd: &Pd<T>, addr: u64, len: u64, access: AccessFlags) -> Result<Self> {
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        if len == 0 {
            return Err(EINVAL);
        }
        // SAFETY: The PD is live, so its device is; a null attribute bundle selects the plain
        // VA path. The function returns a umem or an `ERR_PTR`.
        let raw = unsafe {
            bindings::ib_umem_get_attr_or_va(
                (*pd.as_raw()).device,
                core::ptr::null(),
                0,
                addr,
                len,
                access.bits() as c_int,
            )
        };
        let raw = crate::error::from_err_ptr(raw)?;
        let raw = NonNull::new(raw).ok_or(ENOMEM)?;
        // SAFETY: `raw` is a valid umem we own.
        let (address, length) = unsafe { ((*raw.as_ptr()).address, (*raw.as_ptr()).length) };
        let first_offset = address & (PAGE_SIZE - 1);
        let npages = (first_offset + length).div_ceil(PAGE_SIZE);
        let res = (|| {
            let mut pages = KVVec::with_capacity(npages, GFP_KERNEL)?;
            // SAFETY: `pages` is a stand-in of `npages` slots the helper fills (it writes at
            // most `npages` entries and returns how many it wrote); `raw` is valid.
            let n = unsafe {
                bindings::ib_umem_pages(
                    raw.as_ptr(),
                    pages.spare_capacity_mut().as_mut_ptr().cast(),
                    npages,
                )
            };
            if n != npages {
                return Err(EFAULT);
            }
            // SAFETY: The helper initialised the first `npages` slots with non-null pages.
            unsafe { pages.inc_len(npages) };
            Ok(pages)
        })();
        match res {
            Ok(pages) => {
                // INVARIANT: `pages` lists the umem's pages in order and covers
                // `first_offset + length` bytes; they stay pinned while `raw` is held.
                Ok(Self {
                    raw,
                    range: PageRange {
                        pages,
                        first_offset,
                        len: length,
                    },
                })
            }
            Err(e) => {
                // SAFETY: We own `raw` and nothing refers to it.
                unsafe { bindings::ib_umem_release(raw.as_ptr()) };
                Err(e)
            }
        }
    }

    /// Length of the pinned range, in bytes.
    pub fn len(&self) -> usize {
        self.range.len
    }

    /// Whether the range is empty (never: pinning refuses 0).
    pub fn is_empty(&self) -> bool {
        self.range.len == 0
    }

    /// Offset of the first byte within the first page.
    pub fn first_offset(&self) -> usize {
        self.range.first_offset
    }

    /// Number of pages the range touches.
    pub fn page_count(&self) -> usize {
        self.range.pages.len()
    }

    /// The pages of the range, in address order (the first starts `first_offset()` bytes
    /// before the range).
    pub fn pages(&self) -> impl Iterator<Item = BorrowedPage<'_>> + '_ {
        self.range.pages.iter().map(|p| {
            // SAFETY: The page is pinned for as long as `self` (type invariant).
            unsafe { BorrowedPage::from_raw(*p) }
        })
    }

    /// Copies `src` into the region at byte `offset`. Never sleeps (one `kmap_local` mapping
    /// at a time): safe from softirq. `EINVAL` if the bytes are not all inside the range.
    pub fn copy_to(&self, offset: usize, src: &[u8]) -> Result {
        self.range.copy_to(offset, src)
    }

    /// Copies `dst.len()` bytes at byte `offset` of the region into `dst`. Never sleeps.
    /// `EINVAL` if the bytes are not all inside the range.
    pub fn copy_from(&self, offset: usize, dst: &mut [u8]) -> Result {
        self.range.copy_from(offset, dst)
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: We own the umem (type invariant); the page list is not used afterwards.
        unsafe { bindings::ib_umem_release(self.raw.as_ptr()) };
    }
}

#[macros::kunit_tests(rust_metaroce_umem)]
mod tests {
    use super::*;
    use crate::page::Page;

    /// Three zeroed pages and a range over them that starts 10 bytes before the end of the
    /// first and ends 20 bytes into the third (as a user MR at an unaligned address).
    fn three_pages() -> Result<(KVec<Page>, PageRange)> {
        let mut owned = KVec::new();
        let mut pages = KVVec::new();
        for _ in 0..3 {
            let page = Page::alloc_page(GFP_KERNEL | __GFP_ZERO)?;
            let ptr = NonNull::new(page.as_ptr()).ok_or(ENOMEM)?;
            pages.push(ptr, GFP_KERNEL)?;
            owned.push(page, GFP_KERNEL)?;
        }
        // INVARIANT: `owned` keeps the pages; the range fits in them.
        let range = PageRange {
            pages,
            first_offset: PAGE_SIZE - 10,
            len: PAGE_SIZE + 30,
        };
        Ok((owned, range))
    }

    /// Reads `len` bytes of page `page` at `offset` directly.
    fn peek(pages: &[Page], page: usize, offset: usize, len: usize) -> Result<KVec<u8>> {
        let mut v = KVec::from_elem(0u8, len, GFP_KERNEL)?;
        // SAFETY: `v` has `len` writable bytes; no one else uses the test's pages.
        unsafe { pages[page].read_raw(v.as_mut_ptr(), offset, len)? };
        Ok(v)
    }

    #[test]
    fn copies_cross_page_boundaries() -> Result {
        let (owned, range) = three_pages()?;
        // Bytes 5..45 of the range: the last 5 bytes of page 0, then 35 bytes of page 1.
        let data: [u8; 40] = core::array::from_fn(|i| i as u8 + 1);
        range.copy_to(5, &data)?;
        assert_eq!(&peek(&owned, 0, PAGE_SIZE - 5, 5)?[..], &data[..5]);
        assert_eq!(&peek(&owned, 1, 0, 35)?[..], &data[5..]);
        // The last 25 bytes of the range: 5 at the end of page 1, 20 at the start of page 2.
        let tail: [u8; 25] = core::array::from_fn(|i| 0xa0 + i as u8);
        range.copy_to(range.len - 25, &tail)?;
        assert_eq!(&peek(&owned, 1, PAGE_SIZE - 5, 5)?[..], &tail[..5]);
        assert_eq!(&peek(&owned, 2, 0, 20)?[..], &tail[5..]);
        // Nothing outside the range was touched.
        assert!(peek(&owned, 0, 0, PAGE_SIZE - 10)?.iter().all(|&b| b == 0));
        assert!(peek(&owned, 2, 20, PAGE_SIZE - 20)?.iter().all(|&b| b == 0));
        // And the same bytes read back through the range.
        let mut back = [0u8; 40];
        range.copy_from(5, &mut back)?;
        assert_eq!(back, data);
        let mut back = [0u8; 25];
        range.copy_from(range.len - 25, &mut back)?;
        assert_eq!(back, tail);
        Ok(())
    }

    #[test]
    fn bounds_are_checked() -> Result {
        let (owned, range) = three_pages()?;
        let len = range.len;
        // Straddling the end, past it, overflowing offsets: refused, nothing written.
        assert_eq!(range.copy_to(len - 1, &[1, 2]).err(), Some(EINVAL));
        assert_eq!(range.copy_to(len, &[1]).err(), Some(EINVAL));
        assert_eq!(range.copy_to(usize::MAX, &[1]).err(), Some(EINVAL));
        assert_eq!(
            range.copy_from(usize::MAX - 1, &mut [0; 4]).err(),
            Some(EINVAL)
        );
        for p in 0..3 {
            assert!(peek(&owned, p, 0, PAGE_SIZE)?.iter().all(|&b| b == 0));
        }
        // Empty copies at the end and the last byte are fine.
        range.copy_to(len, &[])?;
        range.copy_to(len - 1, &[7])?;
        assert_eq!(&peek(&owned, 2, 19, 1)?[..], &[7]);
        Ok(())
    }
}
