// SPDX-License-Identifier: GPL-2.0
//! RoCEv2 invariant CRC (IBTA Annex A17.3.3), computed the way Linux
//! rdma_rxe does (`drivers/infiniband/sw/rxe/rxe_icrc.c`).
//!
//! The ICRC is the standard reflected CRC-32 (polynomial 0xEDB88320, register
//! initialised to all ones, result inverted) over:
//!
//! 1. eight 0xFF bytes standing in for the masked InfiniBand LRH,
//! 2. the IP header with the variant fields set to all ones: IPv4 TOS, TTL
//!    and header checksum; IPv6 traffic class, flow label and hop limit,
//! 3. the UDP header with the checksum set to 0xFFFF,
//! 4. the BTH with its reserved byte 4 (InfiniBand FECN/BECN) set to 0xFF,
//! 5. the rest of the packet: extended headers, payload and pad.
//!
//! rxe starts from the constant 0xDEBB20E3, the raw CRC register after step
//! 1, and uses the kernel's `crc32_le()`, which neither pre- nor
//! post-inverts; `MASKED_LRH_CRC` below is that constant computed.
//!
//! Byte order on the wire: rxe stores `~crc` through a `__be32 *` without
//! any byte swap (the `__force` casts only silence sparse), so the trailer
//! holds the CRC in CPU memory order, i.e. least significant byte first on
//! the little-endian machines rxe runs on. That is also the order of the
//! Ethernet FCS and of RoCE NICs: the ConnectX-4 Lx capture in
//! `tests/fixtures/` carries CRC 0x2A00FD82 as bytes `82 fd 00 2a`. This
//! module therefore defines the ICRC value as the `u32` whose
//! little-endian bytes are the trailer; [`super::packet::Packet::icrc`]
//! reads the trailer the same way.

use super::bth::BTH_LEN;
use super::packet::ICRC_LEN;

/// Length of an IPv4 header without options.
pub const IPV4_HDR_LEN: usize = 20;
/// Length of an IPv6 header.
pub const IPV6_HDR_LEN: usize = 40;
/// Length of a UDP header.
pub const UDP_HDR_LEN: usize = 8;

/// Slice-by-8 tables: `TABLES[0]` is the classic byte-at-a-time table of the
/// reflected polynomial 0xEDB88320; `TABLES[k][i]` is the register after
/// byte `i` followed by `k` zero bytes, so eight table look-ups advance the
/// register by eight bytes at once (8 KiB of read-only data).
const fn make_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xFF) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

static TABLES: [[u32; 256]; 8] = make_tables();

/// Feeds `data` into a raw CRC-32 register (no pre- or post-inversion),
/// like Linux's `crc32_le()`.
///
/// Slice-by-8: eight bytes per step with eight independent table look-ups,
/// then byte at a time for the tail (2.9 instead of 6.5 host instructions
/// per byte under callgrind). The bit-at-a-time reference it must agree
/// with lives in the tests.
pub fn crc32_update(mut crc: u32, data: &[u8]) -> u32 {
    let t = &TABLES;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        // `chunks_exact(8)` yields 8-byte slices, so these indices are in
        // bounds; every table index is masked to 0..=255.
        let lo = crc ^ u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        let hi = u32::from_le_bytes([c[4], c[5], c[6], c[7]]);
        crc = t[7][(lo & 0xFF) as usize]
            ^ t[6][((lo >> 8) & 0xFF) as usize]
            ^ t[5][((lo >> 16) & 0xFF) as usize]
            ^ t[4][(lo >> 24) as usize]
            ^ t[3][(hi & 0xFF) as usize]
            ^ t[2][((hi >> 8) & 0xFF) as usize]
            ^ t[1][((hi >> 16) & 0xFF) as usize]
            ^ t[0][(hi >> 24) as usize];
    }
    for &b in chunks.remainder() {
        crc = t[0][((crc ^ u32::from(b)) & 0xFF) as usize] ^ (crc >> 8);
    }
    crc
}

/// Standard CRC-32 (as in Ethernet, zlib): `crc32(b"123456789") ==
/// 0xCBF43926`.
pub fn crc32(data: &[u8]) -> u32 {
    !crc32_update(!0, data)
}

/// Why an ICRC could not be computed or did not match.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum IcrcError {
    /// Not a 20-byte IPv4 header (no options) or a 40-byte IPv6 header.
    BadIpHeader,
    /// The UDP header is not 8 bytes long.
    BadUdpHeader,
    /// The InfiniBand part is shorter than a BTH (plus ICRC).
    Truncated,
    /// The trailer does not match the computed ICRC.
    Mismatch,
}

/// A CRC-32 engine: the reflected register (polynomial 0xEDB88320, no
/// inversion) after `data`, starting from the given register, as
/// [`crc32_update`] computes it. A host with a faster one (the kernel's
/// architecture-optimised `crc32_le`) passes it to the `_with` functions.
pub type CrcUpdate = fn(u32, &[u8]) -> u32;

/// Computes the ICRC of a RoCEv2 packet.
///
/// `ip_hdr` and `udp_hdr` are the headers as sent (their lengths must
/// already account for the ICRC trailer); `ib` runs from the BTH to the end
/// of the pad, without the trailer. Returns the value whose little-endian
/// bytes form the trailer.
pub fn icrc_compute(ip_hdr: &[u8], udp_hdr: &[u8], ib: &[u8]) -> Result<u32, IcrcError> {
    icrc_register(crc32_update, ip_hdr, udp_hdr, ib).map(|crc| !crc)
}

/// The ICRC rdma_rxe (Linux up to at least 7.3) gives a FLUSH request: its
/// opcode table has no payload offset for `IB_OPCODE_RC_FLUSH`, so its
/// "payload" starts at the BTH and the CRC runs over the packet's headers a
/// second time, as they are on the wire (BTH unmasked, FETH, RETH), after
/// the masked ones. No other opcode is affected.
pub fn icrc_compute_rxe_flush(ip_hdr: &[u8], udp_hdr: &[u8], ib: &[u8]) -> Result<u32, IcrcError> {
    icrc_register(crc32_update, ip_hdr, udp_hdr, ib).map(|crc| !crc32_update(crc, ib))
}

/// True if `ib` (from the BTH) is a FLUSH request.
fn is_flush(ib: &[u8]) -> bool {
    ib.first() == Some(&(super::opcode::Opcode::RcFlush as u8))
}

/// The raw CRC register after the masked headers and the rest of `ib`.
fn icrc_register(
    update: CrcUpdate,
    ip_hdr: &[u8],
    udp_hdr: &[u8],
    ib: &[u8],
) -> Result<u32, IcrcError> {
    // Raw CRC register after the eight 0xFF bytes of the masked LRH
    // (rxe hard-codes it as 0xdebb20e3).
    let mut crc = update(!0, &[0xFF; 8]);

    if let Ok(mut h) = <[u8; IPV4_HDR_LEN]>::try_from(ip_hdr) {
        if h[0] != 0x45 {
            return Err(IcrcError::BadIpHeader);
        }
        h[1] = 0xFF; // TOS (DSCP + ECN)
        h[8] = 0xFF; // TTL
        h[10] = 0xFF; // header checksum
        h[11] = 0xFF;
        crc = update(crc, &h);
    } else if let Ok(mut h) = <[u8; IPV6_HDR_LEN]>::try_from(ip_hdr) {
        if h[0] >> 4 != 6 {
            return Err(IcrcError::BadIpHeader);
        }
        h[0] |= 0x0F; // traffic class, high nibble
        h[1] = 0xFF; // traffic class low nibble, flow label
        h[2] = 0xFF;
        h[3] = 0xFF;
        h[7] = 0xFF; // hop limit
        crc = update(crc, &h);
    } else {
        return Err(IcrcError::BadIpHeader);
    }

    let mut udp = <[u8; UDP_HDR_LEN]>::try_from(udp_hdr).map_err(|_| IcrcError::BadUdpHeader)?;
    udp[6] = 0xFF; // checksum
    udp[7] = 0xFF;
    crc = update(crc, &udp);

    let (bth, rest) = ib
        .split_first_chunk::<BTH_LEN>()
        .ok_or(IcrcError::Truncated)?;
    let mut bth = *bth;
    bth[4] = 0xFF; // reserved / FECN / BECN
    crc = update(crc, &bth);
    crc = update(crc, rest);
    Ok(crc)
}

/// Checks the trailer of `pkt` (BTH to ICRC inclusive). A FLUSH request may
/// also carry rdma_rxe's ICRC ([`icrc_compute_rxe_flush`]).
pub fn icrc_verify(ip_hdr: &[u8], udp_hdr: &[u8], pkt: &[u8]) -> Result<(), IcrcError> {
    icrc_verify_with(crc32_update, ip_hdr, udp_hdr, pkt)
}

/// [`icrc_verify`] with the CRC engine `update`.
pub fn icrc_verify_with(
    update: CrcUpdate,
    ip_hdr: &[u8],
    udp_hdr: &[u8],
    pkt: &[u8],
) -> Result<(), IcrcError> {
    let (ib, trailer) = pkt
        .split_last_chunk::<ICRC_LEN>()
        .ok_or(IcrcError::Truncated)?;
    let got = u32::from_le_bytes(*trailer);
    let crc = icrc_register(update, ip_hdr, udp_hdr, ib)?;
    if !crc == got || (is_flush(ib) && !update(crc, ib) == got) {
        Ok(())
    } else {
        Err(IcrcError::Mismatch)
    }
}

/// Like [`icrc_write`], but a FLUSH request gets rdma_rxe's ICRC
/// ([`icrc_compute_rxe_flush`]), which rdma_rxe requires.
pub fn icrc_write_rxe_flush(
    ip_hdr: &[u8],
    udp_hdr: &[u8],
    pkt: &mut [u8],
) -> Result<(), IcrcError> {
    icrc_write_with(crc32_update, true, ip_hdr, udp_hdr, pkt)
}

/// Computes the ICRC of `pkt` (BTH to ICRC inclusive) and stores it in its
/// last four bytes.
pub fn icrc_write(ip_hdr: &[u8], udp_hdr: &[u8], pkt: &mut [u8]) -> Result<(), IcrcError> {
    icrc_write_with(crc32_update, false, ip_hdr, udp_hdr, pkt)
}

/// [`icrc_write`] with the CRC engine `update`; with `rxe_flush`, as
/// [`icrc_write_rxe_flush`].
pub fn icrc_write_with(
    update: CrcUpdate,
    rxe_flush: bool,
    ip_hdr: &[u8],
    udp_hdr: &[u8],
    pkt: &mut [u8],
) -> Result<(), IcrcError> {
    let (ib, trailer) = pkt
        .split_last_chunk_mut::<ICRC_LEN>()
        .ok_or(IcrcError::Truncated)?;
    let crc = icrc_register(update, ip_hdr, udp_hdr, ib)?;
    let crc = if rxe_flush && is_flush(ib) {
        update(crc, ib)
    } else {
        crc
    };
    *trailer = (!crc).to_le_bytes();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    /// Bit-at-a-time CRC-32 register update: the definition the tables
    /// encode.
    fn crc32_bitwise(mut crc: u32, data: &[u8]) -> u32 {
        for &b in data {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    0xEDB8_8320 ^ (crc >> 1)
                } else {
                    crc >> 1
                };
            }
        }
        crc
    }

    #[test]
    fn slice_by_8_matches_bitwise() {
        // Every length 0..=64 at every alignment 0..8, from several seeds,
        // so the 8-byte steps, the tail and their seams are all covered.
        let mut buf = [0u8; 80];
        let mut x = 0x1234_5678u32;
        for b in buf.iter_mut() {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            *b = (x >> 16) as u8;
        }
        for seed in [0u32, !0, 0xDEBB_20E3, 0x8000_0001] {
            for off in 0..8 {
                for len in 0..=64 {
                    let d = &buf[off..off + len];
                    assert_eq!(
                        crc32_update(seed, d),
                        crc32_bitwise(seed, d),
                        "{seed:x} {off} {len}"
                    );
                }
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn slice_by_8_matches_bitwise_prop(seed: u32, data in proptest::collection::vec(proptest::num::u8::ANY, 0..4200), split in 0usize..4200) {
            proptest::prop_assert_eq!(crc32_update(seed, &data), crc32_bitwise(seed, &data));
            // Feeding in two pieces gives the same register as one.
            let s = split.min(data.len());
            proptest::prop_assert_eq!(crc32_update(crc32_update(seed, &data[..s]), &data[s..]), crc32_bitwise(seed, &data));
        }
    }

    /// Another CRC engine through the `_with` functions gives the same
    /// trailers as the built-in one, for FLUSH (both forms) and other
    /// opcodes, and each verifies the other's.
    #[test]
    fn engines_agree() {
        let ip = [
            0x45, 0, 0, 60, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0, 192, 0, 2, 1, 192, 0, 2, 2,
        ];
        let udp = [0xc0, 0x01, 0x12, 0xb7, 0, 40, 0, 0];
        for opcode in [0x04u8, super::super::opcode::Opcode::RcFlush as u8] {
            let mut pkt = [0u8; 32];
            for (i, b) in pkt.iter_mut().enumerate() {
                *b = (i as u8).wrapping_mul(29).wrapping_add(3);
            }
            pkt[0] = opcode;
            for rxe_flush in [false, true] {
                let mut a = pkt;
                let mut b = pkt;
                icrc_write_with(crc32_update, rxe_flush, &ip, &udp, &mut a).unwrap();
                icrc_write_with(crc32_bitwise, rxe_flush, &ip, &udp, &mut b).unwrap();
                assert_eq!(a, b);
                let mut c = pkt;
                if rxe_flush {
                    icrc_write_rxe_flush(&ip, &udp, &mut c).unwrap();
                } else {
                    icrc_write(&ip, &udp, &mut c).unwrap();
                }
                assert_eq!(a, c);
                assert_eq!(icrc_verify_with(crc32_bitwise, &ip, &udp, &a), Ok(()));
                a[20] ^= 1;
                assert_eq!(
                    icrc_verify_with(crc32_bitwise, &ip, &udp, &a),
                    Err(IcrcError::Mismatch)
                );
            }
        }
    }

    #[test]
    fn rxe_seed() {
        assert_eq!(crc32_update(!0, &[0xFF; 8]), 0xDEBB_20E3);
    }

    #[test]
    fn rejects_bad_headers() {
        let ip = [0x45u8; 20];
        let udp = [0u8; 8];
        let ib = [0u8; 12];
        assert!(icrc_compute(&ip, &udp, &ib).is_ok());
        assert_eq!(
            icrc_compute(&ip[..19], &udp, &ib),
            Err(IcrcError::BadIpHeader)
        );
        assert_eq!(
            icrc_compute(&[0x46; 20], &udp, &ib),
            Err(IcrcError::BadIpHeader)
        );
        assert_eq!(
            icrc_compute(&[0x45; 40], &udp, &ib),
            Err(IcrcError::BadIpHeader)
        );
        assert_eq!(
            icrc_compute(&ip, &udp[..7], &ib),
            Err(IcrcError::BadUdpHeader)
        );
        assert_eq!(
            icrc_compute(&ip, &udp, &ib[..11]),
            Err(IcrcError::Truncated)
        );
        assert_eq!(icrc_verify(&ip, &udp, &ib[..3]), Err(IcrcError::Truncated));
    }

    #[test]
    fn masked_fields_do_not_matter() {
        let mut ip = [0u8; 40];
        ip[0] = 0x60;
        let udp = [1u8; 8];
        let mut pkt = [0u8; 20];
        pkt[0] = 0x04;
        assert!(icrc_write(&ip, &udp, &mut pkt).is_ok());
        let mut ip2 = ip;
        ip2[0] = 0x6A;
        ip2[1] = 0x12;
        ip2[3] = 0x34;
        ip2[7] = 9;
        let mut udp2 = udp;
        udp2[6] = 0;
        let mut pkt2 = pkt;
        pkt2[4] = 0x40;
        assert_eq!(icrc_verify(&ip2, &udp2, &pkt2), Ok(()));
        pkt2[5] = 1;
        assert_eq!(icrc_verify(&ip2, &udp2, &pkt2), Err(IcrcError::Mismatch));
    }
}
