// SPDX-License-Identifier: GPL-2.0

//! rdma_rxe's user queue layout, which the stock librxe provider reads and writes
//! (`struct rxe_queue_buf` in include/uapi/rdma/rdma_user_rxe.h): a header followed by a
//! power-of-two number of power-of-two-sized slots, shared with the process through `mmap`.
//!
//! ```text
//! offset   0  log2_elem_size  (written once by the kernel)
//!          4  index_mask      (slots - 1, written once by the kernel)
//!        128  producer_index  (in [0, index_mask])
//!        256  consumer_index  (in [0, index_mask])
//!        384  slot 0, slot 1, ... (1 << log2_elem_size bytes each)
//! ```
//!
//! One slot is always left empty, so a queue of `slots` slots holds `slots - 1` entries:
//! empty when producer == consumer, full when (producer + 1) & mask == consumer. Each side
//! publishes its index with a release store and reads the other's with an acquire load.
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

const OFF_LOG2_ELEM_SIZE: usize = 0;
const OFF_INDEX_MASK: usize = 4;
const OFF_PRODUCER: usize = 128;
const OFF_CONSUMER: usize = 256;
/// Size of the header before slot 0.
pub(crate) const HEADER_LEN: usize = 384;
/// Largest number of slots of a queue (so every index fits comfortably in a `u32`).
const MAX_SLOTS: u32 = 1 << 20;

/// Which side of the ring the kernel is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// The kernel produces entries, the process consumes them (CQ).
    KernelProduces,
    /// The process produces entries, the kernel consumes them (SQ, RQ, SRQ).
    KernelConsumes,
}

/// The geometry of a queue: slot count and size, from which every offset follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    log2_elem_size: u32,
    /// `slots - 1`; slots is a power of two.
    mask: u32,
}

impl Geometry {
    /// The smallest geometry holding at least `entries` entries of `elem_size` bytes:
    /// `entries + 1` slots rounded up to a power of two, the slot size rounded up to one.
    /// `EINVAL` for 0 entries, a 0 slot size or a queue above the limits.
    pub(crate) fn for_entries(entries: u32, elem_size: usize) -> Result<Self> {
        if entries == 0 || elem_size == 0 || elem_size > 1 << 16 {
            return Err(EINVAL);
        }
        let slots = entries
            .checked_add(1)
            .and_then(u32::checked_next_power_of_two)
            .filter(|s| *s <= MAX_SLOTS)
            .ok_or(EINVAL)?;
        let elem = elem_size.next_power_of_two();
        Ok(Self {
            log2_elem_size: elem.trailing_zeros(),
            mask: slots - 1,
        })
    }

    /// Entries the queue holds (one slot stays empty).
    pub(crate) fn capacity(&self) -> u32 {
        self.mask
    }

    /// Bytes per slot.
    pub(crate) fn elem_size(&self) -> usize {
        1 << self.log2_elem_size
    }

    /// Bytes of the whole buffer (header and slots). No overflow: at most 2^20 slots of 2^16
    /// bytes.
    pub(crate) fn buf_len(&self) -> usize {
        HEADER_LEN + ((self.mask as usize + 1) << self.log2_elem_size)
    }

    /// Byte offset of the slot of `index` (masked first).
    pub(crate) fn slot_offset(&self, index: u32) -> usize {
        HEADER_LEN + (((index & self.mask) as usize) << self.log2_elem_size)
    }

    /// Entries between `consumer` and `producer` (both masked first).
    pub(crate) fn count(&self, producer: u32, consumer: u32) -> u32 {
        (producer & self.mask).wrapping_sub(consumer & self.mask) & self.mask
    }

    /// The index after `index`.
    pub(crate) fn next(&self, index: u32) -> u32 {
        index.wrapping_add(1) & self.mask
    }
}

/// The ring was full (producing) or empty (consuming).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RingFull;

/// A queue in librxe's layout, mapped by the process that created its object.
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
        let geo = Geometry::for_entries(entries, elem_size)?;
        let buf = SharedBuf::new(geo.buf_len())?;
        buf.store_relaxed_u32(OFF_LOG2_ELEM_SIZE, geo.log2_elem_size)?;
        buf.store_relaxed_u32(OFF_INDEX_MASK, geo.mask)?;
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

    /// librxe's `struct mminfo` for this queue (`__aligned_u64 offset; __u32 size; __u32
    /// pad`), in the process's (native) byte order, for a create or resize response.
    pub(crate) fn mminfo(&self) -> [u8; 16] {
        let mut mi = [0u8; 16];
        mi[..8].copy_from_slice(&self.mapping.offset().to_ne_bytes());
        // `buf_len` fits `u32` (`SharedBuf::new` refuses larger buffers).
        mi[8..12].copy_from_slice(&(self.mapping.size() as u32).to_ne_bytes());
        mi
    }

    /// The producer index: the kernel's copy when it produces, else the process's (masked).
    fn producer(&self) -> u32 {
        match self.role {
            Role::KernelProduces => self.own,
            // The offset is in the header: the load cannot fail.
            Role::KernelConsumes => {
                self.buf.load_acquire_u32(OFF_PRODUCER).unwrap_or(0) & self.geo.mask
            }
        }
    }

    /// The consumer index: the kernel's copy when it consumes, else the process's (masked).
    fn consumer(&self) -> u32 {
        match self.role {
            Role::KernelConsumes => self.own,
            Role::KernelProduces => {
                self.buf.load_acquire_u32(OFF_CONSUMER).unwrap_or(0) & self.geo.mask
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

    /// Copies the oldest entry into `out` (at most a slot) without consuming it. Only for
    /// [`Role::KernelConsumes`] (`EINVAL` otherwise). `Err(RingFull)` if the queue is empty.
    pub(crate) fn peek(&self, out: &mut [u8]) -> Result<Result<(), RingFull>> {
        if self.role != Role::KernelConsumes || out.len() > self.geo.elem_size() {
            return Err(EINVAL);
        }
        if self.is_empty() {
            return Ok(Err(RingFull));
        }
        self.buf.read(self.geo.slot_offset(self.own), out)?;
        Ok(Ok(()))
    }

    /// Consumes the oldest entry (after [`UQueue::peek`]) and publishes the new consumer
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
                self.own = n & self.geo.mask;
                self.buf.store_release_u32(OFF_PRODUCER, self.own)?;
            }
            Role::KernelConsumes => {
                self.buf
                    .store_release_u32(OFF_PRODUCER, n & self.geo.mask)?;
            }
        }
        Ok(())
    }
}
