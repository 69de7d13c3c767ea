// SPDX-License-Identifier: GPL-2.0

//! The kernel's checksum and CRC routines, in their architecture-optimised forms.
//!
//! C headers: [`include/linux/crc32.h`](srctree/include/linux/crc32.h),
//! [`include/net/checksum.h`](srctree/include/net/checksum.h),
//! [`include/net/ip6_checksum.h`](srctree/include/net/ip6_checksum.h)
//!
//! Each function is named after the C function it calls and has its semantics: no pre- or
//! post-inversion in [`crc32_le`], sums in the kernel's `__wsum`/`__sum16` conventions (a
//! [`Sum16`] is stored into a header as [`Sum16::to_bytes`] gives it). All of them are pure
//! computations on their arguments: any context.

use crate::bindings;

/// `crc32_le()`: the reflected IEEE CRC-32 (polynomial 0xEDB88320) register after `data`, starting
/// from register `crc` (no inversion on either side). The architecture's implementation when the
/// kernel has one (`CONFIG_CRC_OPTIMIZATIONS`; see [`crc32_le_optimized`]).
pub fn crc32_le(crc: u32, data: &[u8]) -> u32 {
    if data.is_empty() {
        return crc;
    }
    // SAFETY: `data` is readable for `data.len()` bytes; the function only reads them.
    unsafe { bindings::crc32_le(crc, data.as_ptr().cast(), data.len()) }
}

/// Whether [`crc32_le`] runs an architecture-optimised implementation on this machine
/// (`crc32_optimizations() & CRC32_LE_OPTIMIZATION`).
#[cfg(CONFIG_CRC_OPTIMIZATIONS)]
pub fn crc32_le_optimized() -> bool {
    // SAFETY: Reads a flag set at boot.
    let flags = unsafe { bindings::crc32_optimizations() };
    flags & bindings::CRC32_LE_OPTIMIZATION != 0
}

/// Whether [`crc32_le`] runs an architecture-optimised implementation: never without
/// `CONFIG_CRC_OPTIMIZATIONS` (the generic byte-table code).
#[cfg(not(CONFIG_CRC_OPTIMIZATIONS))]
pub fn crc32_le_optimized() -> bool {
    false
}

/// An unfolded 32-bit ones'-complement sum (`__wsum`), in the kernel's byte-order convention.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wsum(u32);

/// A folded 16-bit internet checksum (`__sum16`), in network byte order in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sum16(u16);

impl Sum16 {
    /// The two bytes to store in a header's checksum field.
    pub fn to_bytes(self) -> [u8; 2] {
        self.0.to_ne_bytes()
    }

    /// Whether the checksum is zero (for UDP, "no checksum": a computed zero is sent as
    /// `0xffff`, `CSUM_MANGLED_0`).
    pub fn is_zero(self) -> bool {
        self.0 == 0
    }
}

/// `csum_partial()`: adds the ones'-complement sum of `data` to `sum`. `data` is summed as if it
/// started at an even offset of the datagram.
pub fn csum_partial(data: &[u8], sum: Wsum) -> Wsum {
    let Ok(len) = i32::try_from(data.len()) else {
        // No datagram is that long; sum it in pieces of even length.
        let (a, b) = data.split_at(0x4000_0000);
        return csum_partial(b, csum_partial(a, sum));
    };
    // SAFETY: `data` is readable for `len` bytes; the function only reads them.
    Wsum(unsafe { bindings::csum_partial(data.as_ptr().cast(), len, sum.0) })
}

/// `csum_tcpudp_magic()`: the folded checksum of an IPv4 pseudo header (addresses in network
/// order, `len` bytes of protocol `proto`) plus `sum`, complemented: the value of a UDP or TCP
/// checksum field.
pub fn csum_tcpudp_magic(saddr: [u8; 4], daddr: [u8; 4], len: u32, proto: u8, sum: Wsum) -> Sum16 {
    // SAFETY: A computation on its arguments.
    Sum16(unsafe {
        bindings::csum_tcpudp_magic(
            u32::from_ne_bytes(saddr),
            u32::from_ne_bytes(daddr),
            len,
            proto,
            sum.0,
        )
    })
}

/// `csum_ipv6_magic()`: as [`csum_tcpudp_magic`] for an IPv6 pseudo header.
pub fn csum_ipv6_magic(
    saddr: &[u8; 16],
    daddr: &[u8; 16],
    len: u32,
    proto: u8,
    sum: Wsum,
) -> Sum16 {
    let in6 = |a: &[u8; 16]| bindings::in6_addr {
        in6_u: bindings::in6_addr__bindgen_ty_1 { u6_addr8: *a },
    };
    let (s, d) = (in6(saddr), in6(daddr));
    // SAFETY: `s` and `d` are valid addresses for the call.
    Sum16(unsafe { bindings::csum_ipv6_magic(&s, &d, len, proto, sum.0) })
}

#[macros::kunit_tests(rust_metaroce_checksum)]
mod tests {
    use super::*;

    #[test]
    fn crc32_le_matches_reference() {
        assert_eq!(!crc32_le(!0, b"123456789"), 0xCBF4_3926);
        let mut buf = [0u8; 300];
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3];
        }
        // The register after each slice from RoCEv2's seed, computed with zlib's CRC-32 (Python's
        // `zlib.crc32`) outside the kernel.
        for (off, len, want) in [
            (0, 0, 0xDEBB20E3),
            (1, 7, 0x47408469),
            (3, 64, 0x36910AAB),
            (5, 255, 0x99C368F2),
            (0, 300, 0xA188DFBE),
        ] {
            assert_eq!(crc32_le(0xDEBB_20E3, &buf[off..off + len]), want);
        }
    }

    /// RFC 768 by hand: the folded, complemented sum of pseudo header and datagram.
    fn udp4_ref(s: [u8; 4], d: [u8; 4], udp: &[u8]) -> [u8; 2] {
        let mut sum: u32 = 0;
        let mut add = |b: &[u8]| {
            for c in b.chunks(2) {
                sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
            }
        };
        add(&s);
        add(&d);
        add(&[0, 17]);
        add(&(udp.len() as u16).to_be_bytes());
        add(udp);
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        (!(sum as u16)).to_be_bytes()
    }

    #[test]
    fn udp4_checksum_matches_rfc768() {
        let mut udp = [0u8; 37];
        for (i, b) in udp.iter_mut().enumerate() {
            *b = (i * 37 + 11) as u8;
        }
        udp[6] = 0;
        udp[7] = 0;
        let (s, d) = ([192, 0, 2, 1], [192, 0, 2, 2]);
        let c = csum_tcpudp_magic(
            s,
            d,
            udp.len() as u32,
            17,
            csum_partial(&udp, Wsum::default()),
        );
        assert_eq!(c.to_bytes(), udp4_ref(s, d, &udp));
    }
}
