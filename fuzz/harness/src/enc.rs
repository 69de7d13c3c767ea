// SPDX-License-Identifier: GPL-2.0
//! The byte encoding shared by decoders and seed encoders.

use arbitrary::{Result, Unstructured};

/// Writes values in the order and format in which [`Unstructured`] reads
/// them back (`u.arbitrary::<uN>()` is little-endian, a `bool` is the low
/// bit of one byte).
#[derive(Default)]
pub struct Enc(pub Vec<u8>);

impl Enc {
    /// A byte.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    /// A little-endian `u16`.
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// A little-endian `u32`.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// A little-endian `u64`.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// A boolean.
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.u8(u8::from(v))
    }
    /// A length-prefixed (one byte) byte string, at most 255 bytes.
    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        let n = v.len().min(255);
        self.u8(n as u8);
        self.0.extend_from_slice(&v[..n]);
        self
    }
}

/// Reads a length-prefixed (one byte) byte string; short input gives a
/// shorter string.
pub fn bytes<'a>(u: &mut Unstructured<'a>) -> Result<&'a [u8]> {
    let n: u8 = u.arbitrary()?;
    let n = usize::from(n).min(u.len());
    u.bytes(n)
}

/// A value that has a byte encoding.
pub trait Wire: Sized {
    /// Reads one value.
    fn decode(u: &mut Unstructured<'_>) -> Result<Self>;
    /// Writes one value so that `decode` reads it back.
    fn encode(&self, e: &mut Enc);
}

/// Reads steps until the input is exhausted (at most `max`).
pub fn steps<T: Wire>(u: &mut Unstructured<'_>, max: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    while !u.is_empty() && v.len() < max {
        v.push(T::decode(u)?);
    }
    Ok(v)
}
