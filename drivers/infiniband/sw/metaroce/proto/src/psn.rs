// SPDX-License-Identifier: GPL-2.0
//! 24-bit packet sequence numbers (IBTA 9.7.1).
//!
//! PSNs live in a 24-bit circular space. Two PSNs are compared through their
//! signed distance, which is unambiguous as long as the two are less than
//! 2^23 apart: the IBTA splits the space around the expected PSN into a
//! "valid" half ahead of it and a "duplicate" half behind it. The transport
//! state machines keep every live PSN within that window (the requester
//! never has more than 2^22 PSNs unacknowledged).

/// Mask of the 24 PSN bits.
pub const PSN_MASK: u32 = 0x00FF_FFFF;

/// A 24-bit packet sequence number.
///
/// Invariant: the inner value never exceeds [`PSN_MASK`]. All arithmetic
/// wraps modulo 2^24.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Psn(u32);

impl Psn {
    /// Creates a PSN from the low 24 bits of `v`; higher bits are discarded.
    pub const fn new(v: u32) -> Self {
        Psn(v & PSN_MASK)
    }

    /// Returns the 24-bit value.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// Returns `self + n` modulo 2^24.
    pub const fn add(self, n: u32) -> Self {
        Psn(self.0.wrapping_add(n) & PSN_MASK)
    }

    /// Returns `self - n` modulo 2^24.
    pub const fn sub(self, n: u32) -> Self {
        Psn(self.0.wrapping_sub(n) & PSN_MASK)
    }

    /// Returns the PSN following `self`.
    pub const fn next(self) -> Self {
        self.add(1)
    }

    /// Returns the forward distance from `from` to `self`, i.e. the `n` in
    /// `[0, 2^24)` for which `from.add(n) == self`.
    pub const fn since(self, from: Psn) -> u32 {
        self.0.wrapping_sub(from.0) & PSN_MASK
    }

    /// Signed distance `self - other` in `[-2^23, 2^23)`.
    ///
    /// Positive means `self` is after `other`, negative means before.
    pub const fn diff(self, other: Psn) -> i32 {
        // Move the 24-bit difference into the top of an i32 and shift it
        // back arithmetically to sign-extend bit 23.
        ((self.since(other) << 8) as i32) >> 8
    }

    /// True if `self` comes strictly before `other` in the 2^23 window.
    pub const fn is_before(self, other: Psn) -> bool {
        self.diff(other) < 0
    }

    /// True if `self` comes strictly after `other` in the 2^23 window.
    pub const fn is_after(self, other: Psn) -> bool {
        self.diff(other) > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_at_24_bits() {
        let top = Psn::new(PSN_MASK);
        assert_eq!(top.next(), Psn::new(0));
        assert_eq!(Psn::new(0).sub(1), top);
        assert_eq!(Psn::new(0x1FF_FFFF), top);
        assert_eq!(top.add(5).get(), 4);
    }

    #[test]
    fn signed_difference_across_wrap() {
        let a = Psn::new(0xFF_FFFE);
        let b = Psn::new(3);
        assert_eq!(b.diff(a), 5);
        assert_eq!(a.diff(b), -5);
        assert!(a.is_before(b));
        assert!(b.is_after(a));
        assert_eq!(b.since(a), 5);
        assert_eq!(a.since(b), 0xFF_FFFB);
    }

    #[test]
    fn window_edges() {
        let z = Psn::new(0);
        assert_eq!(Psn::new(0x7F_FFFF).diff(z), 0x7F_FFFF);
        assert_eq!(Psn::new(0x80_0000).diff(z), -0x80_0000);
        assert!(!z.is_after(z) && !z.is_before(z));
    }
}
