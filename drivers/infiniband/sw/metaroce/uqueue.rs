// SPDX-License-Identifier: GPL-2.0

//! A user queue: a header followed by a power-of-two number of power-of-two-sized slots,
//! shared with the process through `mmap`, in the layout of the user ABI the driver serves
//! ([`crate::uabi::RING_LAYOUT`]).
//!
//! The layouts and their index arithmetic are the protocol core's [`crate::proto::ring`]
//! (tested on the host with hostile indices and long wrapping runs).
//!
//! The kernel keeps a private copy of the index it owns (the producer of a CQ, the consumer of
//! an SQ, RQ or SRQ) and never trusts the copy in shared memory; the other side's index is
//! read from shared memory and masked, so a hostile process can at worst make the kernel see a
//! wrong number of entries, never reach outside the ring. Entries are copied out of the ring
//! before they are looked at.

use kernel::prelude::*;
use kernel::rdma::mmap::{SharedBuf, UserMapping};
use kernel::rdma::udata::Udata;
use kernel::sync::Arc;

use crate::proto::ring::Geometry;
use crate::proto::ring::{OFF_INDEX_MASK, OFF_LOG2_ELEM_SIZE};
use crate::uabi::RING_LAYOUT;

/// Offsets of the indices in the header.
const OFF_PRODUCER: usize = RING_LAYOUT.producer;
const OFF_CONSUMER: usize = RING_LAYOUT.consumer;

/// Which side of the ring the kernel is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// The kernel produces entries, the process consumes them (CQ).
    KernelProduces,
    /// The process produces entries, the kernel consumes them (SQ, RQ, SRQ).
    KernelConsumes,
}

/// The ring was full (producing) or empty (consuming).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RingFull;

/// A queue in the user ABI's layout, mapped by the process that created its object.
///
/// The `&mut self` methods change the kernel's index: call them under the owning object's
/// lock.
pub(crate) struct UQueue {
    buf: Arc<SharedBuf>,
    mapping: UserMapping,
    geo: Geometry,
    role: Role,
    /// The kernel's private copy of the index it owns.
    own: u32,
}

impl UQueue {
    /// Allocates a queue of at least `entries` entries of `elem_size` bytes for the object
    /// the current system call creates, and offers it for `mmap`. Process context, may sleep.
    pub(crate) fn new(
        udata: &Udata<'_>,
        entries: u32,
        elem_size: usize,
        role: Role,
    ) -> Result<Self> {
        let geo = Geometry::for_entries(entries, elem_size)
            .ok_or(EINVAL)?
            .in_layout(RING_LAYOUT);
        let buf = SharedBuf::new(geo.buf_len())?;
        if RING_LAYOUT.geometry_in_header {
            buf.store_relaxed_u32(OFF_LOG2_ELEM_SIZE, geo.log2_elem_size())?;
            buf.store_relaxed_u32(OFF_INDEX_MASK, geo.mask())?;
        }
        // Indices start at 0 (the buffer is zeroed).
        let mapping = UserMapping::new(udata, buf.clone())?;
        Ok(Self {
            buf,
            mapping,
            geo,
            role,
            own: 0,
        })
    }

    /// The queue's geometry.
    pub(crate) fn geometry(&self) -> Geometry {
        self.geo
    }

    /// Entries the queue holds.
    pub(crate) fn capacity(&self) -> u32 {
        self.geo.capacity()
    }

    /// The offset the process passes to `mmap` for this queue.
    pub(crate) fn mmap_offset(&self) -> u64 {
        self.mapping.offset()
    }

    /// Bytes the process maps.
    pub(crate) fn mmap_size(&self) -> usize {
        self.mapping.size()
    }

    /// The producer index: the kernel's copy when it produces, else the process's (masked).
    fn producer(&self) -> u32 {
        match self.role {
            Role::KernelProduces => self.own,
            // The offset is in the header: the load cannot fail.
            Role::KernelConsumes => {
                self.buf.load_acquire_u32(OFF_PRODUCER).unwrap_or(0) & self.geo.mask()
            }
        }
    }

    /// The consumer index: the kernel's copy when it consumes, else the process's (masked).
    fn consumer(&self) -> u32 {
        match self.role {
            Role::KernelConsumes => self.own,
            Role::KernelProduces => {
                self.buf.load_acquire_u32(OFF_CONSUMER).unwrap_or(0) & self.geo.mask()
            }
        }
    }

    /// Entries in the queue now.
    pub(crate) fn count(&self) -> u32 {
        self.geo.count(self.producer(), self.consumer())
    }

    /// Whether the queue holds no entry.
    pub(crate) fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// Appends `entry` (at most a slot; the rest of the slot is left as it was) and publishes
    /// it. Only for [`Role::KernelProduces`] (`EINVAL` otherwise). `Err(RingFull)` when the
    /// process has not consumed enough.
    pub(crate) fn produce(&mut self, entry: &[u8]) -> Result<Result<(), RingFull>> {
        if self.role != Role::KernelProduces || entry.len() > self.geo.elem_size() {
            return Err(EINVAL);
        }
        if self.geo.next(self.own) == self.consumer() {
            return Ok(Err(RingFull));
        }
        self.buf.write(self.geo.slot_offset(self.own), entry)?;
        self.own = self.geo.next(self.own);
        // Release: the process sees the entry once it sees the index.
        self.buf.store_release_u32(OFF_PRODUCER, self.own)?;
        Ok(Ok(()))
    }

    /// Copies the oldest entry into `out` as far as it reaches: its first `hdr` bytes, then as
    /// many more as `len_of` says the entry has after looking at that copy of its header
    /// (clamped to `out` and the slot). Each byte is copied once: what the header names is
    /// taken from the copy `len_of` saw, whatever the process writes meanwhile. Returns the
    /// bytes copied. Only for [`Role::KernelConsumes`] (`EINVAL` otherwise); `Err(RingFull)` if
    /// the queue is empty.
    pub(crate) fn peek_entry(
        &self,
        out: &mut [u8],
        hdr: usize,
        len_of: impl FnOnce(&[u8]) -> usize,
    ) -> Result<Result<usize, RingFull>> {
        let max = core::cmp::min(out.len(), self.geo.elem_size());
        let hdr = core::cmp::min(hdr, max);
        if self.role != Role::KernelConsumes {
            return Err(EINVAL);
        }
        if self.is_empty() {
            return Ok(Err(RingFull));
        }
        let at = self.geo.slot_offset(self.own);
        self.buf.read(at, &mut out[..hdr])?;
        let len = len_of(&out[..hdr]).clamp(hdr, max);
        if len > hdr {
            self.buf.read(at + hdr, &mut out[hdr..len])?;
        }
        Ok(Ok(len))
    }

    /// Consumes the oldest entry (after [`UQueue::peek_entry`]) and publishes the new consumer
    /// index. Only for [`Role::KernelConsumes`]; `Err(RingFull)` if the queue is empty.
    pub(crate) fn consume(&mut self) -> Result<Result<(), RingFull>> {
        if self.role != Role::KernelConsumes {
            return Err(EINVAL);
        }
        if self.is_empty() {
            return Ok(Err(RingFull));
        }
        self.own = self.geo.next(self.own);
        // Release: the slot may be reused by the process once it sees the index.
        self.buf.store_release_u32(OFF_CONSUMER, self.own)?;
        Ok(Ok(()))
    }

    /// Moves every entry of `old` (a queue with the same role and a slot size not above ours)
    /// into this fresh queue, oldest first, and makes its indices this queue's (resize).
    /// `EINVAL` if they do not fit or this queue is not empty.
    pub(crate) fn take_entries(&mut self, old: &UQueue) -> Result {
        if self.role != old.role || old.geo.elem_size() > self.geo.elem_size() || !self.is_empty() {
            return Err(EINVAL);
        }
        let n = old.count();
        if n > self.capacity() {
            return Err(EINVAL);
        }
        let mut slot = [0u8; 256];
        let elem = old.geo.elem_size();
        let mut from = old.consumer();
        for i in 0..n {
            // Copy a slot in chunks of the stack buffer.
            let mut done = 0;
            while done < elem {
                let k = (elem - done).min(slot.len());
                old.buf
                    .read(old.geo.slot_offset(from) + done, &mut slot[..k])?;
                self.buf.write(self.geo.slot_offset(i) + done, &slot[..k])?;
                done += k;
            }
            from = old.geo.next(from);
        }
        match self.role {
            Role::KernelProduces => {
                self.own = n & self.geo.mask();
                self.buf.store_release_u32(OFF_PRODUCER, self.own)?;
            }
            Role::KernelConsumes => {
                self.buf
                    .store_release_u32(OFF_PRODUCER, n & self.geo.mask())?;
            }
        }
        Ok(())
    }
}
