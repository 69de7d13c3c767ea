// SPDX-License-Identifier: GPL-2.0

//! Socket buffers (`struct sk_buff`) owned by Rust code.
//!
//! C header: [`include/linux/skbuff.h`](srctree/include/linux/skbuff.h)
//!
//! An [`SkBuff`] is the only owner of one reference to an skb: it is freed (`kfree_skb`) when
//! dropped unless handed back to C with `SkBuff::into_raw`. Its data may be shared with clones
//! made by others (e.g. a packet socket tapping the interface), so writing is only offered where
//! the head is private ([`SkBuff::put`], [`SkBuff::push`] refuse cloned skbs, and
//! [`SkBuff::data_mut`] unshares first).
//!
//! Every length is checked before the C helpers see it: they `BUG()` or warn on overruns, which
//! no caller input may reach.

use crate::{
    alloc::Flags,
    bindings,
    error::to_result,
    net::netdev::NetDevice,
    prelude::*, //
};
use core::ptr::NonNull;

/// An owned socket buffer.
///
/// # Invariants
///
/// `ptr` points to a valid `struct sk_buff` on which this value owns one reference; no other
/// Rust value refers to it.
pub struct SkBuff {
    ptr: NonNull<bindings::sk_buff>,
}

// SAFETY: An skb may be passed between threads and freed from any context.
unsafe impl Send for SkBuff {}
// SAFETY: Shared references only read the skb.
unsafe impl Sync for SkBuff {}

impl SkBuff {
    /// Allocates an skb with `size` bytes of linear buffer, all of it tailroom (`alloc_skb`).
    ///
    /// With `GFP_ATOMIC` it may be called from any context.
    pub fn alloc(size: usize, flags: Flags) -> Result<Self> {
        let size = u32::try_from(size).map_err(|_| EINVAL)?;
        // SAFETY: `alloc_skb` may be called with any size and flags; it returns null on failure.
        let ptr = unsafe { bindings::alloc_skb(size, flags.as_raw()) };
        // INVARIANT: A new skb with one reference, ours.
        NonNull::new(ptr).map(|ptr| Self { ptr }).ok_or(ENOMEM)
    }

    /// Takes ownership of a reference to an skb.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a valid skb, and the caller must transfer one reference on it to the
    /// returned value (it must not use or free `ptr` afterwards).
    pub(crate) unsafe fn from_raw(ptr: NonNull<bindings::sk_buff>) -> Self {
        // INVARIANT: Ownership of one reference is transferred by the caller.
        Self { ptr }
    }

    /// Gives the reference back to C (e.g. to a transmit function that consumes skbs).
    pub(crate) fn into_raw(self) -> NonNull<bindings::sk_buff> {
        let ptr = self.ptr;
        core::mem::forget(self);
        ptr
    }

    fn raw(&self) -> *mut bindings::sk_buff {
        self.ptr.as_ptr()
    }

    /// The skb, for the networking abstractions' C calls; it stays owned by `self`.
    pub(crate) fn as_raw(&self) -> *mut bindings::sk_buff {
        self.raw()
    }

    /// Total bytes of data, linear part and fragments (`skb->len`).
    pub fn len(&self) -> usize {
        // SAFETY: The skb is valid (type invariant).
        unsafe { (*self.raw()).len as usize }
    }

    /// Whether the skb holds no data.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of data in the linear part (`skb_headlen`).
    pub fn headlen(&self) -> usize {
        // SAFETY: The skb is valid (type invariant).
        unsafe { bindings::skb_headlen(self.raw()) as usize }
    }

    /// Free bytes before the data (`skb_headroom`).
    pub fn headroom(&self) -> usize {
        // SAFETY: The skb is valid (type invariant).
        unsafe { bindings::skb_headroom(self.raw()) as usize }
    }

    /// Free bytes after the linear data (`skb_tailroom`; zero once the skb has fragments).
    pub fn tailroom(&self) -> usize {
        // SAFETY: The skb is valid (type invariant).
        let room = unsafe { bindings::skb_tailroom(self.raw()) };
        usize::try_from(room).unwrap_or(0)
    }

    /// Whether the data head is shared with a clone (`skb_cloned`).
    pub fn is_cloned(&self) -> bool {
        // SAFETY: The skb is valid (type invariant).
        unsafe { bindings::skb_cloned(self.raw()) != 0 }
    }

    /// Moves the start of an empty skb's data `len` bytes forward, making headroom
    /// (`skb_reserve`). `EINVAL` if the skb has data or too little tailroom.
    pub fn reserve(&mut self, len: usize) -> Result {
        if !self.is_empty() || len > self.tailroom() {
            return Err(EINVAL);
        }
        // SAFETY: The skb is valid and empty, and `len` fits its tailroom (checked above), so
        // `len` also fits in an `int`.
        unsafe { bindings::skb_reserve(self.raw(), len as c_int) };
        Ok(())
    }

    /// Appends `len` bytes to the linear data and returns them, zeroed (`skb_put_zero`).
    /// `EINVAL` if the tailroom is too small or the head is shared.
    pub fn put(&mut self, len: usize) -> Result<&mut [u8]> {
        if len > self.tailroom() || self.is_cloned() {
            return Err(EINVAL);
        }
        // SAFETY: The skb is valid, its head private and `len` fits the tailroom (checked), so
        // `skb_put_zero` cannot overrun; `len` < `u32::MAX` since the tailroom is an `int`.
        let p = unsafe { bindings::skb_put_zero(self.raw(), len as u32) };
        // SAFETY: `skb_put_zero` returned the start of `len` initialised bytes of linear data,
        // owned by this skb and borrowed mutably with it.
        Ok(unsafe { core::slice::from_raw_parts_mut(p.cast::<u8>(), len) })
    }

    /// Prepends `len` bytes to the data and returns them, zeroed (`skb_push`). `EINVAL` if the
    /// headroom is too small or the head is shared.
    pub fn push(&mut self, len: usize) -> Result<&mut [u8]> {
        if len > self.headroom() || self.is_cloned() {
            return Err(EINVAL);
        }
        // SAFETY: The skb is valid, its head private and `len` fits the headroom (checked).
        let p = unsafe { bindings::skb_push(self.raw(), len as u32) };
        // SAFETY: `skb_push` returned the new start of the linear data, `len` bytes of which
        // lie in this skb's private head buffer (headroom may hold stale bytes: zero them).
        let s = unsafe { core::slice::from_raw_parts_mut(p.cast::<u8>(), len) };
        s.fill(0);
        Ok(s)
    }

    /// Removes `len` bytes from the start of the data (`skb_pull`). `EINVAL` if the linear
    /// part is shorter (call [`SkBuff::linearize`] first for headers that may span fragments).
    pub fn pull(&mut self, len: usize) -> Result {
        if len > self.headlen() {
            return Err(EINVAL);
        }
        // SAFETY: The skb is valid and `len` is within its linear data (checked).
        let p = unsafe { bindings::skb_pull(self.raw(), len as u32) };
        if p.is_null() {
            return Err(EINVAL);
        }
        Ok(())
    }

    /// Makes all the data linear (`skb_linearize`). `ENOMEM` if it needs a copy and allocation
    /// fails. May be called from any context (it allocates with `GFP_ATOMIC`).
    pub fn linearize(&mut self) -> Result {
        // SAFETY: The skb is valid and owned by us.
        to_result(unsafe { bindings::skb_linearize(self.raw()) })
    }

    /// The linear data (`skb->data`, [`SkBuff::headlen`] bytes).
    pub fn data(&self) -> &[u8] {
        let len = self.headlen();
        // SAFETY: `skb->data` is valid for `skb_headlen` bytes of initialised packet data,
        // which nobody writes while we own the reference and borrow `self`: a clone's owner
        // only reads a shared head.
        unsafe { core::slice::from_raw_parts((*self.raw()).data, len) }
    }

    /// The linear data, writable: a shared head is copied first (`skb_ensure_writable`).
    pub fn data_mut(&mut self) -> Result<&mut [u8]> {
        let len = self.headlen();
        // SAFETY: The skb is valid and `len` is its linear length.
        to_result(unsafe { bindings::skb_ensure_writable(self.raw(), len as u32) })?;
        // SAFETY: After `skb_ensure_writable` the first `len` bytes are private to this skb
        // and initialised; the slice borrows `self` mutably.
        Ok(unsafe { core::slice::from_raw_parts_mut((*self.raw()).data, len) })
    }

    /// The bytes from the network (IP) header to the end of the linear data, with the offset of
    /// [`SkBuff::data`] in them; `None` if the header does not lie before the data inside the
    /// head buffer.
    ///
    /// # Safety
    ///
    /// The network header must have been set over initialised bytes (as the IP receive path
    /// does before handing an skb to a UDP socket); a fresh skb's head is uninitialised.
    pub(crate) unsafe fn network_header_and_data(&self) -> Option<(&[u8], usize)> {
        // SAFETY: The skb is valid.
        let off = unsafe { bindings::skb_network_offset(self.raw()) };
        let back = usize::try_from(off.checked_neg()?).ok()?;
        if back > self.headroom() {
            return None;
        }
        let len = back.checked_add(self.headlen())?;
        // SAFETY: The network header lies `back` bytes before `skb->data` inside the head
        // buffer (checked against the headroom); those bytes are initialised (caller) and so
        // is the linear data, and nobody writes them while `self` is borrowed.
        let s =
            unsafe { core::slice::from_raw_parts(bindings::skb_network_header(self.raw()), len) };
        Some((s, back))
    }

    /// The device the skb arrived on or leaves through (`skb->dev`), if any.
    ///
    /// An skb holds no reference on its device: `skb->dev` is only kept alive by the context
    /// that hands the skb around (the receive path under its RCU read-side section, a transmit
    /// path that holds the device), which an owned [`SkBuff`] may outlive.
    ///
    /// # Safety
    ///
    /// The device `skb->dev` points to (if any) must stay valid (allocated, with a non-zero
    /// reference count or protected by an RCU read-side section the caller is in) for `'a`.
    pub(crate) unsafe fn dev<'a>(&self) -> Option<&'a NetDevice> {
        // SAFETY: The skb is valid.
        let dev = unsafe { bindings::skb_dev(self.raw()) };
        if dev.is_null() {
            return None;
        }
        // SAFETY: The device stays valid for `'a` (function requirement).
        Some(unsafe { NetDevice::from_raw(dev) })
    }
}

impl Drop for SkBuff {
    fn drop(&mut self) {
        // SAFETY: We own one reference (type invariant); it is not used again.
        unsafe { bindings::kfree_skb(self.raw()) };
    }
}

#[macros::kunit_tests(rust_metaroce_skbuff)]
mod tests {
    use super::*;

    #[test]
    fn build_and_parse_round_trip() -> Result {
        let mut skb = SkBuff::alloc(256, GFP_KERNEL)?;
        assert!(skb.is_empty());
        skb.reserve(64)?;
        assert_eq!(skb.headroom(), 64);
        skb.put(12)?.copy_from_slice(b"payload-1234");
        skb.push(4)?.copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(skb.len(), 16);
        assert_eq!(&skb.data()[..4], &[0xde, 0xad, 0xbe, 0xef]);
        skb.pull(4)?;
        assert_eq!(skb.data(), b"payload-1234");
        skb.data_mut()?[0] = b'P';
        assert_eq!(&skb.data()[..3], b"Pay");
        skb.linearize()?;
        assert_eq!(skb.headlen(), 12);
        Ok(())
    }

    #[test]
    fn bounds_are_checked() -> Result {
        let mut skb = SkBuff::alloc(64, GFP_KERNEL)?;
        let room = skb.tailroom();
        assert!(room >= 64);
        assert_eq!(skb.push(1).err(), Some(EINVAL));
        assert_eq!(skb.put(room + 1).err(), Some(EINVAL));
        assert_eq!(skb.pull(1).err(), Some(EINVAL));
        skb.put(8)?;
        assert_eq!(skb.reserve(1).err(), Some(EINVAL));
        assert_eq!(skb.pull(9).err(), Some(EINVAL));
        skb.pull(8)?;
        assert!(skb.is_empty());
        // SAFETY: A fresh skb has no device (`skb->dev` is null), so nothing is borrowed.
        assert!(unsafe { skb.dev() }.is_none());
        Ok(())
    }
}
