// SPDX-License-Identifier: GPL-2.0
//! Bounds-checked big-endian cursors over byte slices.
//!
//! Every header codec goes through these two types, so no header code ever
//! indexes a slice: running out of bytes is reported as `None` and turned
//! into a typed error by the caller.

/// Reads fixed-size big-endian fields from the front of a byte slice.
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Creates a reader over `buf`.
    pub const fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    /// Takes the next `N` bytes.
    pub fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, tail) = self.buf.split_first_chunk::<N>()?;
        self.buf = tail;
        Some(*head)
    }

    /// Takes a byte.
    pub fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|[b]| b)
    }

    /// Takes a big-endian `u16`.
    pub fn u16(&mut self) -> Option<u16> {
        self.take().map(u16::from_be_bytes)
    }

    /// Takes a big-endian `u32`.
    pub fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_be_bytes)
    }

    /// Takes a big-endian 24-bit value.
    pub fn u24(&mut self) -> Option<u32> {
        self.take::<3>()
            .map(|[a, b, c]| u32::from_be_bytes([0, a, b, c]))
    }

    /// Takes a big-endian `u64`.
    pub fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_be_bytes)
    }

    /// Returns the bytes not consumed yet.
    pub const fn rest(&self) -> &'a [u8] {
        self.buf
    }
}

/// Writes fixed-size big-endian fields to the front of a byte slice.
pub struct Writer<'a> {
    buf: &'a mut [u8],
    written: usize,
}

impl<'a> Writer<'a> {
    /// Creates a writer over `buf`.
    pub fn new(buf: &'a mut [u8]) -> Self {
        Writer { buf, written: 0 }
    }

    /// Appends `N` bytes; `None` if they do not fit (the writer is then
    /// left empty and every further write fails too).
    pub fn put<const N: usize>(&mut self, v: [u8; N]) -> Option<()> {
        let buf = core::mem::take(&mut self.buf);
        let (head, tail) = buf.split_first_chunk_mut::<N>()?;
        *head = v;
        self.buf = tail;
        self.written = self.written.checked_add(N)?;
        Some(())
    }

    /// Appends a byte.
    pub fn u8(&mut self, v: u8) -> Option<()> {
        self.put([v])
    }

    /// Appends a big-endian `u16`.
    pub fn u16(&mut self, v: u16) -> Option<()> {
        self.put(v.to_be_bytes())
    }

    /// Appends a big-endian `u32`.
    pub fn u32(&mut self, v: u32) -> Option<()> {
        self.put(v.to_be_bytes())
    }

    /// Appends the low 24 bits of `v`, big-endian.
    pub fn u24(&mut self, v: u32) -> Option<()> {
        let [_, a, b, c] = v.to_be_bytes();
        self.put([a, b, c])
    }

    /// Appends a big-endian `u64`.
    pub fn u64(&mut self, v: u64) -> Option<()> {
        self.put(v.to_be_bytes())
    }

    /// Number of bytes written so far.
    pub const fn written(&self) -> usize {
        self.written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_bounds() {
        let mut buf = [0u8; 9];
        let mut w = Writer::new(&mut buf);
        assert!(w.u24(0xAB_CDEF).is_some());
        assert!(w.u16(0x1234).is_some());
        assert!(w.u32(0x5678_9ABC).is_some());
        assert_eq!(w.written(), 9);
        assert!(w.u8(1).is_none());
        let mut r = Reader::new(&buf);
        assert_eq!(r.u24(), Some(0xAB_CDEF));
        assert_eq!(r.u16(), Some(0x1234));
        assert_eq!(r.u8(), Some(0x56));
        assert_eq!(r.u64(), None);
        assert_eq!(r.rest(), &[0x78, 0x9A, 0xBC]);
    }
}
