// SPDX-License-Identifier: GPL-2.0

//! The integrity fields of packets this host computes itself (no NIC offload): the protocol
//! core's rules (`proto::icrc`, `proto::offload`) over the kernel's architecture-optimised
//! routines (`crc32_le`, `csum_partial`), the same ones rdma_rxe and the UDP stack use.

use crate::proto::icrc::{icrc_verify_with, icrc_write_with, IcrcError};
use crate::proto::offload::{ChecksumError, Integrity, Sealed};
use kernel::net::checksum::{crc32_le, csum_ipv6_magic, csum_partial, csum_tcpudp_magic, Sum16, Wsum};

/// IP protocol number of UDP.
const IPPROTO_UDP: u8 = 17;

/// Software integrity through the kernel's routines.
#[derive(Clone, Copy, Default)]
pub(crate) struct KernelIntegrity {
    /// Seal FLUSH requests with rdma_rxe's ICRC (the `flush_icrc_rxe` module parameter; see
    /// `proto::icrc::icrc_compute_rxe_flush`). Received packets are checked alike either way.
    pub(crate) rxe_flush: bool,
}

/// The complemented ones'-complement sum of the pseudo header between `src` and `dst` and of
/// `udp` (datagram, header first): the checksum field's value when the field was zero, zero when
/// the field holds the right checksum. `None` for addresses of unknown or mixed families or an
/// oversized datagram.
fn udp_sum(src: &[u8], dst: &[u8], udp: &[u8]) -> Option<Sum16> {
    let len = u32::from(u16::try_from(udp.len()).ok()?);
    let sum = csum_partial(udp, Wsum::default());
    Some(match (<[u8; 4]>::try_from(src), <[u8; 4]>::try_from(dst)) {
        (Ok(s), Ok(d)) => csum_tcpudp_magic(s, d, len, IPPROTO_UDP, sum),
        _ => csum_ipv6_magic(src.try_into().ok()?, dst.try_into().ok()?, len, IPPROTO_UDP, sum),
    })
}

impl Integrity for KernelIntegrity {
    fn seal_icrc(&mut self, ip: &[u8], udp: &[u8], ib: &mut [u8]) -> Result<Sealed, IcrcError> {
        icrc_write_with(crc32_le, self.rxe_flush, ip, udp, ib).map(|()| Sealed::Done)
    }

    fn verify_icrc(&mut self, ip: &[u8], udp: &[u8], ib: &[u8]) -> Result<(), IcrcError> {
        icrc_verify_with(crc32_le, ip, udp, ib)
    }

    fn seal_udp(
        &mut self,
        src: &[u8],
        dst: &[u8],
        udp: &mut [u8],
    ) -> Result<Sealed, ChecksumError> {
        udp.get_mut(6..8)
            .ok_or(ChecksumError::Malformed)?
            .fill(0);
        let c = udp_sum(src, dst, udp).ok_or(ChecksumError::Malformed)?;
        // A computed 0 goes out as 0xffff (RFC 768: 0 means "no checksum").
        let field = if c.is_zero() { [0xff; 2] } else { c.to_bytes() };
        udp[6..8].copy_from_slice(&field);
        Ok(Sealed::Done)
    }

    fn verify_udp(&mut self, src: &[u8], dst: &[u8], udp: &[u8]) -> Result<(), ChecksumError> {
        match udp_sum(src, dst, udp) {
            Some(c) if c.is_zero() => Ok(()),
            Some(_) => Err(ChecksumError::Mismatch),
            None => Err(ChecksumError::Malformed),
        }
    }
}
