// SPDX-License-Identifier: GPL-2.0
//! Receive windows over 32-bit wrapping sequence numbers: a cumulative
//! point plus a bitmap of the sequence numbers after it.
//!
//! [`SeqWindow<4>`] is the per-path 256-bit SACK state of the MetaRoCE
//! receiver (`transport.rst`, section 4); a larger `SeqWindow<W>` is the
//! connection's Dsn deduplication window. Bit `i` of the bitmap (word
//! `i / 64`, bit `i % 64`) stands for sequence number `cum + 1 + i`; `cum`
//! itself is never received (the window slides past it as soon as it is).
//! Sequence numbers are compared by their signed 32-bit distance, so the
//! window works across the wrap as long as live numbers stay within 2^31 of
//! each other.

/// Signed distance `a - b` of two wrapping sequence numbers.
pub const fn seq_diff(a: u32, b: u32) -> i32 {
    a.wrapping_sub(b) as i32
}

/// True if `a` is strictly after `b`.
pub const fn seq_after(a: u32, b: u32) -> bool {
    seq_diff(a, b) > 0
}

/// What [`SeqWindow::mark`] found.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mark {
    /// First arrival.
    New,
    /// Already received (bit set, or before the cumulative point).
    Duplicate,
    /// Beyond the bitmap: not recorded.
    TooFar,
}

/// A cumulative point and a bitmap of `64 * W` sequence numbers after it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SeqWindow<const W: usize> {
    cum: u32,
    bits: [u64; W],
}

impl<const W: usize> Default for SeqWindow<W> {
    fn default() -> Self {
        Self::new(0)
    }
}

impl<const W: usize> SeqWindow<W> {
    /// Bits in the bitmap.
    pub const SPAN: u32 = (W as u32).saturating_mul(64);

    /// An empty window expecting `cum` next.
    pub const fn new(cum: u32) -> Self {
        SeqWindow { cum, bits: [0; W] }
    }

    /// The first sequence number not received.
    pub const fn cum(&self) -> u32 {
        self.cum
    }

    /// The bitmap (bit `i`: `cum + 1 + i` received).
    pub const fn bits(&self) -> &[u64; W] {
        &self.bits
    }

    /// True if bit `i` is set (false beyond the bitmap).
    pub fn bit(&self, i: u32) -> bool {
        bit_of(&self.bits, i)
    }

    /// Would [`Self::mark`] record `seq` (i.e. not [`Mark::TooFar`])?
    pub fn fits(&self, seq: u32) -> bool {
        let d = seq_diff(seq, self.cum);
        d <= 0 || d.unsigned_abs() <= Self::SPAN
    }

    /// True if `seq` was received (or is before the cumulative point).
    pub fn contains(&self, seq: u32) -> bool {
        match seq_diff(seq, self.cum) {
            d if d < 0 => true,
            0 => false,
            d => self.bit(d.unsigned_abs() - 1),
        }
    }

    /// Records the arrival of `seq`.
    pub fn mark(&mut self, seq: u32) -> Mark {
        let d = seq_diff(seq, self.cum);
        if d < 0 {
            return Mark::Duplicate;
        }
        if d == 0 {
            self.slide_past_received(1);
            return Mark::New;
        }
        let i = d.unsigned_abs() - 1;
        if i >= Self::SPAN {
            return Mark::TooFar;
        }
        if self.bit(i) {
            return Mark::Duplicate;
        }
        set_bit(&mut self.bits, i);
        Mark::New
    }

    /// Declares every sequence number before `floor` settled: the window
    /// moves up to `floor` if it is behind it (and on past any received
    /// numbers that follow).
    pub fn advance_to(&mut self, floor: u32) {
        let d = seq_diff(floor, self.cum);
        if d <= 0 {
            return;
        }
        let d = d.unsigned_abs();
        // Is `floor` itself already received? It is bit d - 1.
        let floor_received = self.bit(d - 1);
        shift_down(&mut self.bits, d);
        self.cum = floor;
        if floor_received {
            self.slide_past_received(1);
        }
    }

    /// `cum` has just been received: moves past it (`skip` = 1) and every
    /// received number that follows.
    fn slide_past_received(&mut self, skip: u32) {
        let ones = trailing_ones(&self.bits);
        let n = ones.saturating_add(skip);
        shift_down(&mut self.bits, n);
        self.cum = self.cum.wrapping_add(n);
    }
}

/// Bit `i` of a bitmap (false beyond it).
pub fn bit_of(bits: &[u64], i: u32) -> bool {
    let w = (i / 64) as usize;
    bits.get(w).is_some_and(|word| word >> (i % 64) & 1 == 1)
}

fn set_bit(bits: &mut [u64], i: u32) {
    if let Some(word) = bits.get_mut((i / 64) as usize) {
        *word |= 1 << (i % 64);
    }
}

/// Indices of the set bits, ascending.
pub fn set_bits(bits: &[u64]) -> impl Iterator<Item = u32> + '_ {
    (0u32..).zip(bits.iter()).flat_map(|(w, &word)| {
        let mut rest = word;
        core::iter::from_fn(move || {
            if rest == 0 {
                return None;
            }
            let i = w.saturating_mul(64).saturating_add(rest.trailing_zeros());
            rest &= rest - 1;
            Some(i)
        })
    })
}

/// Index of the highest set bit, if any.
pub fn highest_bit(bits: &[u64]) -> Option<u32> {
    let mut top = None;
    for (w, word) in bits.iter().enumerate() {
        if *word != 0 {
            let w = u32::try_from(w).ok()?;
            top = Some(
                w.saturating_mul(64)
                    .saturating_add(63 - word.leading_zeros()),
            );
        }
    }
    top
}

fn trailing_ones(bits: &[u64]) -> u32 {
    let mut n = 0u32;
    for word in bits {
        let t = word.trailing_ones();
        n = n.saturating_add(t);
        if t < 64 {
            break;
        }
    }
    n
}

/// Shifts a little-endian multi-word bitmap down by `n` bits (towards bit 0).
fn shift_down(bits: &mut [u64], n: u32) {
    let len = bits.len();
    let words = (n / 64) as usize;
    let sh = n % 64;
    for i in 0..len {
        let lo = i
            .checked_add(words)
            .and_then(|j| bits.get(j))
            .copied()
            .unwrap_or(0);
        let hi = i
            .checked_add(words)
            .and_then(|j| j.checked_add(1))
            .and_then(|j| bits.get(j))
            .copied()
            .unwrap_or(0);
        let v = if sh == 0 {
            lo
        } else {
            lo >> sh | hi << (64 - sh)
        };
        if let Some(w) = bits.get_mut(i) {
            *w = v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_bits_in_order() {
        let bits = [1u64 | 1 << 63, 0, 1 << 5, 1 << 63];
        let mut got = [0u32; 8];
        let mut n = 0;
        for i in set_bits(&bits) {
            got[n] = i;
            n += 1;
        }
        assert_eq!(&got[..n], &[0, 63, 133, 255]);
        assert_eq!(set_bits(&[0u64; 4]).count(), 0);
        for i in 0..256u32 {
            assert!(
                set_bits(&bits).any(|b| b == i) == bit_of(&bits, i),
                "bit {i}"
            );
        }
    }

    /// A naive model: a set of received numbers relative to a start.
    fn check(w: &SeqWindow<4>, start: u32, rcv: &[bool]) {
        // cum is the first not-received at or after start's settled prefix
        for i in 0..300u32 {
            let s = start.wrapping_add(i);
            let want = rcv.get(i as usize).copied().unwrap_or(false);
            if seq_diff(s, w.cum()) >= 0 && seq_diff(s, w.cum()) <= 256 {
                assert_eq!(w.contains(s), want, "seq +{i} cum {}", w.cum());
            }
        }
        assert!(!w.contains(w.cum()));
    }

    #[test]
    fn in_order_and_gaps_across_wrap() {
        let start = u32::MAX - 100;
        let mut w = SeqWindow::<4>::new(start);
        let mut rcv = [false; 300];
        // Receive everything but +5 and +70, in a scrambled order.
        let mut order: [u32; 200] = core::array::from_fn(|i| i as u32);
        order.reverse();
        order.swap(3, 150);
        for i in order {
            if i == 5 || i == 70 {
                continue;
            }
            assert_eq!(w.mark(start.wrapping_add(i)), Mark::New);
            rcv[i as usize] = true;
            check(&w, start, &rcv);
        }
        assert_eq!(w.cum(), start.wrapping_add(5));
        assert_eq!(w.mark(start.wrapping_add(6)), Mark::Duplicate);
        assert_eq!(w.mark(start.wrapping_add(4)), Mark::Duplicate);
        // Bit for +70 is clear, bits around it set.
        assert!(!w.bit(70 - 5 - 1));
        assert!(w.bit(70 - 5));
        assert_eq!(highest_bit(w.bits()), Some(199 - 5 - 1));
        // Filling +5 slides to +70.
        assert_eq!(w.mark(start.wrapping_add(5)), Mark::New);
        assert_eq!(w.cum(), start.wrapping_add(70));
        assert_eq!(w.mark(start.wrapping_add(70 + 257)), Mark::TooFar);
        assert!(!w.fits(start.wrapping_add(70 + 257)));
        assert!(w.fits(start.wrapping_add(70 + 256)));
        // A floor past the hole skips it and the received run after it.
        w.advance_to(start.wrapping_add(71));
        assert_eq!(w.cum(), start.wrapping_add(200));
        assert_eq!(*w.bits(), [0; 4]);
    }

    #[test]
    fn floor_far_ahead_clears() {
        let mut w = SeqWindow::<4>::new(10);
        w.mark(12);
        w.advance_to(5000);
        assert_eq!(w.cum(), 5000);
        assert_eq!(*w.bits(), [0; 4]);
        w.advance_to(4000); // behind: no effect
        assert_eq!(w.cum(), 5000);
        // A floor onto a received number moves past it.
        w.mark(5002);
        w.advance_to(5002);
        assert_eq!(w.cum(), 5003);
    }

    #[test]
    fn shift_across_words() {
        let mut b = [0u64, 1, 0, 1 << 63];
        shift_down(&mut b, 65);
        assert_eq!(b, [0, 0, 1 << 62, 0]);
        let mut b = [u64::MAX; 4];
        shift_down(&mut b, 256);
        assert_eq!(b, [0; 4]);
        assert_eq!(trailing_ones(&[u64::MAX, 3]), 66);
    }
}
