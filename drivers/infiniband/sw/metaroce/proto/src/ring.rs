// SPDX-License-Identifier: GPL-2.0
//! Index arithmetic of the user queues a provider shares with the kernel, in the two layouts
//! the driver serves ([`Layout`]): rdma_rxe's (`struct rxe_queue_buf` in
//! include/uapi/rdma/rdma_user_rxe.h, which the stock librxe provider reads) and MetaRoCE's own
//! (include/uapi/rdma/metaroce-abi.h: producer at 0, consumer at 64, slots from 128, the
//! geometry only in the create response). rdma_rxe's:
//!
//! ```text
//! offset   0  log2_elem_size  (written once by the kernel)
//!          4  index_mask      (slots - 1, written once by the kernel)
//!        128  producer_index  (in [0, index_mask])
//!        256  consumer_index  (in [0, index_mask])
//!        384  slot 0, slot 1, ... (1 << log2_elem_size bytes each)
//! ```
//!
//! One slot is always left empty, so a queue of `slots` slots holds `slots - 1` entries: empty
//! when producer == consumer, full when (producer + 1) & mask == consumer. Every index that
//! comes from shared memory may hold anything a process wrote there: each function masks the
//! indices it is given, so no value can name a byte outside the queue. The kernel side (the
//! driver's `uqueue.rs`) keeps its own copy of the geometry and of the index it owns and never
//! reads them back from the shared header.

/// Offset of `log2_elem_size` in the header.
pub const OFF_LOG2_ELEM_SIZE: usize = 0;
/// Offset of `index_mask` in the header.
pub const OFF_INDEX_MASK: usize = 4;
/// Offset of the producer index.
pub const OFF_PRODUCER: usize = 128;
/// Offset of the consumer index.
pub const OFF_CONSUMER: usize = 256;
/// Size of the header before slot 0.
pub const HEADER_LEN: usize = 384;
/// Largest number of slots of a queue (so every index fits comfortably in a `u32`).
pub const MAX_SLOTS: u32 = 1 << 20;
/// Largest slot, in bytes.
pub const MAX_ELEM_SIZE: usize = 1 << 16;

/// Where a queue's indices and its first slot lie, in one of the user ABIs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Offset of the producer index.
    pub producer: usize,
    /// Offset of the consumer index.
    pub consumer: usize,
    /// Offset of slot 0.
    pub header_len: usize,
    /// The header carries `log2_elem_size` and `index_mask` ([`OFF_LOG2_ELEM_SIZE`],
    /// [`OFF_INDEX_MASK`]) for the process to read.
    pub geometry_in_header: bool,
}

impl Layout {
    /// rdma_rxe's `struct rxe_queue_buf`.
    pub const RXE: Self = Self {
        producer: OFF_PRODUCER,
        consumer: OFF_CONSUMER,
        header_len: HEADER_LEN,
        geometry_in_header: true,
    };
    /// MetaRoCE's (`METAROCE_RING_*`): each index on a 64-byte line of its own.
    pub const METAROCE: Self = Self {
        producer: 0,
        consumer: 64,
        header_len: 128,
        geometry_in_header: false,
    };
}

/// The geometry of a queue: slot count and size and its header's length, from which every
/// offset follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    log2_elem_size: u32,
    /// `slots - 1`; slots is a power of two.
    mask: u32,
    /// Bytes before slot 0 ([`Layout::header_len`]; [`HEADER_LEN`] unless set).
    header_len: u32,
}

impl Geometry {
    /// The smallest geometry holding at least `entries` entries of `elem_size` bytes:
    /// `entries + 1` slots rounded up to a power of two, the slot size rounded up to one.
    /// `None` for 0 entries, a 0 slot size, or a queue above [`MAX_SLOTS`] slots or
    /// [`MAX_ELEM_SIZE`]-byte slots.
    pub fn for_entries(entries: u32, elem_size: usize) -> Option<Self> {
        if entries == 0 || elem_size == 0 || elem_size > MAX_ELEM_SIZE {
            return None;
        }
        let slots = entries
            .checked_add(1)
            .and_then(u32::checked_next_power_of_two)
            .filter(|s| *s <= MAX_SLOTS)?;
        let elem = elem_size.next_power_of_two();
        Some(Self {
            log2_elem_size: elem.trailing_zeros(),
            mask: slots - 1,
            header_len: HEADER_LEN as u32,
        })
    }

    /// The same queue with the header of `layout` (at most 4 KiB, else [`HEADER_LEN`]).
    pub fn in_layout(self, layout: Layout) -> Self {
        let header_len = u32::try_from(layout.header_len)
            .ok()
            .filter(|h| *h <= 4096)
            .unwrap_or(HEADER_LEN as u32);
        Self { header_len, ..self }
    }

    /// `log2_elem_size` as the header carries it.
    pub fn log2_elem_size(&self) -> u32 {
        self.log2_elem_size
    }

    /// `index_mask` as the header carries it (`slots - 1`).
    pub fn mask(&self) -> u32 {
        self.mask
    }

    /// Entries the queue holds (one slot stays empty).
    pub fn capacity(&self) -> u32 {
        self.mask
    }

    /// Bytes per slot.
    pub fn elem_size(&self) -> usize {
        1 << self.log2_elem_size
    }

    /// Bytes of the whole buffer (header and slots). No overflow: at most 2^20 slots of 2^16
    /// bytes after at most 4 KiB.
    pub fn buf_len(&self) -> usize {
        self.header_len as usize + ((self.mask as usize + 1) << self.log2_elem_size)
    }

    /// Byte offset of the slot of `index` (masked first): the slot lies inside
    /// [`Geometry::buf_len`] whatever `index` is.
    pub fn slot_offset(&self, index: u32) -> usize {
        self.header_len as usize + (((index & self.mask) as usize) << self.log2_elem_size)
    }

    /// Entries between `consumer` and `producer` (both masked first): at most
    /// [`Geometry::capacity`].
    pub fn count(&self, producer: u32, consumer: u32) -> u32 {
        (producer & self.mask).wrapping_sub(consumer & self.mask) & self.mask
    }

    /// The index after `index` (masked).
    pub fn next(&self, index: u32) -> u32 {
        index.wrapping_add(1) & self.mask
    }

    /// Whether a producer at `producer` may add an entry while the consumer is at `consumer`.
    pub fn has_room(&self, producer: u32, consumer: u32) -> bool {
        self.next(producer) != consumer & self.mask
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metaroce_layout_puts_slots_after_two_lines() {
        let g = Geometry::for_entries(3, 64)
            .unwrap()
            .in_layout(Layout::METAROCE);
        assert_eq!(
            (g.slot_offset(0), g.slot_offset(5), g.buf_len()),
            (128, 192, 128 + 256)
        );
        // The rxe layout stays the default.
        let r = Geometry::for_entries(3, 64).unwrap();
        assert_eq!(r.in_layout(Layout::RXE), r);
        assert_eq!(r.slot_offset(0), HEADER_LEN);
        // A header beyond 4 KiB is not taken.
        let huge = Layout {
            header_len: 1 << 20,
            ..Layout::METAROCE
        };
        assert_eq!(r.in_layout(huge), r);
    }

    #[test]
    fn sizes_round_up_and_limits_hold() {
        let g = Geometry::for_entries(1, 1).unwrap();
        assert_eq!(
            (g.capacity(), g.elem_size(), g.buf_len()),
            (1, 1, HEADER_LEN + 2)
        );
        // 4 entries need 5 slots: 8.
        let g = Geometry::for_entries(4, 100).unwrap();
        assert_eq!((g.mask(), g.elem_size(), g.log2_elem_size()), (7, 128, 7));
        // 7 entries fit 8 slots exactly.
        assert_eq!(Geometry::for_entries(7, 64).unwrap().mask(), 7);
        assert_eq!(Geometry::for_entries(8, 64).unwrap().mask(), 15);
        assert_eq!(
            Geometry::for_entries(MAX_SLOTS - 1, 64).unwrap().mask(),
            MAX_SLOTS - 1
        );
        assert_eq!(Geometry::for_entries(MAX_SLOTS, 64), None);
        assert_eq!(Geometry::for_entries(u32::MAX, 64), None);
        assert_eq!(Geometry::for_entries(0, 64), None);
        assert_eq!(Geometry::for_entries(1, 0), None);
        assert_eq!(Geometry::for_entries(1, MAX_ELEM_SIZE + 1), None);
        let big = Geometry::for_entries(MAX_SLOTS - 1, MAX_ELEM_SIZE).unwrap();
        assert_eq!(big.buf_len(), HEADER_LEN + (1 << 36));
    }

    #[test]
    fn indices_wrap() {
        let g = Geometry::for_entries(3, 32).unwrap();
        assert_eq!(g.mask(), 3);
        assert_eq!(g.next(3), 0);
        assert_eq!(g.next(u32::MAX), 0);
        assert_eq!(g.count(0, 3), 1);
        assert_eq!(g.count(2, 3), 3);
        assert!(g.has_room(1, 3));
        assert!(!g.has_room(2, 3));
        // Hostile values are masked: 7 is 3, 0x8000_0001 is 1.
        assert_eq!(g.count(7, 0x8000_0001), 2);
        assert_eq!(g.slot_offset(0xffff_fffd), HEADER_LEN + 32);
    }
}
