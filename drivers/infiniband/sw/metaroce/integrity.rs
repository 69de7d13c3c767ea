// SPDX-License-Identifier: GPL-2.0

//! The integrity fields of packets this host computes itself (no NIC offload): the protocol
//! core's rules (`proto::icrc`, `proto::offload`) over the fastest CRC-32 engine of the machine
//! ([`select_crc`]) and the kernel's internet checksum (`csum_partial`, which the UDP stack
//! uses too).

use crate::proto::icrc::{crc32_update, icrc_verify_with, icrc_write_with, CrcUpdate, IcrcError};
use crate::proto::offload::{ChecksumError, Integrity, Sealed};
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::net::checksum::{
    crc32_le, crc32_le_optimized, csum_ipv6_magic, csum_partial, csum_tcpudp_magic, Sum16, Wsum,
};
use kernel::prelude::*;
use kernel::time::{Instant, Monotonic};

/// Whether the ICRC uses the kernel's `crc32_le` (else the core's slice-by-8), as
/// [`select_crc`] measured.
static KERNEL_CRC: AtomicBool = AtomicBool::new(false);

/// The CRC-32 engine of the ICRC.
fn crc_engine() -> CrcUpdate {
    if KERNEL_CRC.load(Ordering::Relaxed) {
        crc32_le
    } else {
        crc32_update
    }
}

/// Bytes each engine is timed over, per round.
const SAMPLE_LEN: usize = 4096;
/// Rounds per timing, and timings per engine (the fastest counts).
const ROUNDS: u32 = 8;
const TRIES: u32 = 3;

/// Picks the faster of the two CRC-32 engines for the ICRC by timing both, as the kernel's
/// raid6 and xor code pick their routines at boot: the kernel's `crc32_le` is the
/// architecture's carry-less-multiply folding where the CPU has it (`CONFIG_CRC_OPTIMIZATIONS`)
/// and many times faster than a table on hardware, but under an emulator (QEMU's TCG runs
/// PCLMULQDQ as a helper call) or with the generic byte-table `crc32_le` the core's slice-by-8
/// wins. Both must agree on a sample first; if they do not, the core's is used. Module init,
/// a few milliseconds at most.
pub(crate) fn select_crc() {
    static SAMPLE: [u8; SAMPLE_LEN] = [0x5a; SAMPLE_LEN];
    let agree = crc32_le(!0, &SAMPLE) == crc32_update(!0, &SAMPLE);
    let time = |f: CrcUpdate| {
        let mut best = i64::MAX;
        for _ in 0..TRIES {
            let start = Instant::<Monotonic>::now();
            let mut c = !0u32;
            for _ in 0..ROUNDS {
                c = f(c, core::hint::black_box(&SAMPLE[..]));
            }
            core::hint::black_box(c);
            best = best.min(start.elapsed().as_nanos());
        }
        best.max(1)
    };
    let (kernel_ns, core_ns) = (time(crc32_le), time(crc32_update));
    let mbps = |ns: i64| (SAMPLE_LEN as i64 * i64::from(ROUNDS) * 1000) / ns;
    let kernel = agree && kernel_ns < core_ns;
    KERNEL_CRC.store(kernel, Ordering::Relaxed);
    pr_info!(
        "ICRC: kernel crc32_le{} {} MB/s, core slice-by-8 {} MB/s: using {}\n",
        if crc32_le_optimized() {
            " (arch)"
        } else {
            " (generic)"
        },
        mbps(kernel_ns),
        mbps(core_ns),
        if kernel { "crc32_le" } else { "slice-by-8" }
    );
    if !agree {
        pr_warn!("ICRC: crc32_le disagrees with the core's CRC-32; not used\n");
    }
}

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
        _ => csum_ipv6_magic(
            src.try_into().ok()?,
            dst.try_into().ok()?,
            len,
            IPPROTO_UDP,
            sum,
        ),
    })
}

impl Integrity for KernelIntegrity {
    fn seal_icrc(&mut self, ip: &[u8], udp: &[u8], ib: &mut [u8]) -> Result<Sealed, IcrcError> {
        icrc_write_with(crc_engine(), self.rxe_flush, ip, udp, ib).map(|()| Sealed::Done)
    }

    fn verify_icrc(&mut self, ip: &[u8], udp: &[u8], ib: &[u8]) -> Result<(), IcrcError> {
        icrc_verify_with(crc_engine(), ip, udp, ib)
    }

    fn seal_udp(
        &mut self,
        src: &[u8],
        dst: &[u8],
        udp: &mut [u8],
    ) -> Result<Sealed, ChecksumError> {
        udp.get_mut(6..8).ok_or(ChecksumError::Malformed)?.fill(0);
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
