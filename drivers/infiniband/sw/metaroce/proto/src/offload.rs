// SPDX-License-Identifier: GPL-2.0
//! The offload boundary of the protocol core (`transport.rst`, section 12;
//! `protocol-core.rst`, "Offload boundary"): the parts of the transport a
//! NIC driver may take over, each behind a trait whose software
//! implementation is what the core does itself.
//!
//! What a NIC may take over:
//!
//! * **Congestion engine** ([`CongestionEngine`]): the window reactions
//!   of the native transport to acknowledged bytes, ECN echoes and
//!   retransmission timeouts, per path and per connection. [`super::conn::Conn`]
//!   and [`super::path::TxPath`] are generic over it; the default is the
//!   software [`Aimd`] of `transport.rst` sections 6.2 and 6.3. Loss
//!   detection (SACK gaps, RTO), retransmission, the paths' sequence
//!   spaces, repathing and the rate-hint pacer stay in the core: they are
//!   the transport's reliability, not its congestion policy.
//! * **Integrity** ([`Integrity`]): the RoCEv2 ICRC and the native port's
//!   UDP checksum, computed when a packet is sealed and checked when one
//!   is received. [`SoftIntegrity`] computes both ([`RxeFlushIntegrity`]
//!   the same but for rdma_rxe's ICRC on FLUSH requests); [`NicIntegrity`] takes
//!   the NIC's per-packet verdict (checked on receive, inserted on
//!   transmit) and falls back to software where the NIC did nothing.
//!   [`roce_rx`] and [`native_rx`] are the receive checks every caller
//!   runs before handing a packet to the core.
//! * **Placement** has no trait of its own: it already is a caller-side
//!   boundary. The RoCEv2 responder reaches memory only through
//!   [`super::resp::MemAccess`] and tells the caller where to copy through
//!   [`super::wr::Place`]; the native receive returns
//!   [`super::conn::Place`] events and never touches payload bytes. A NIC
//!   that places data directly implements `MemAccess` (RoCEv2) or consumes
//!   `Place` (native) in its driver, with no change to the core.
//!
//! What stays in software: **segmentation and packetizing**. Both cores cut
//! a message into MSS-sized packets one at a time (`TxStream::next_segment`
//! under `Conn::poll_transmit`, the requester under `Qp::poll_tx`), and every packet gets its own state
//! before its header is written: a native packet its Dsn descriptor, path
//! slot, PathSeq and send time (for SACK, RTT and the pacer); a RoCEv2
//! packet its PSN and retry position. A TSO-like offload (one large
//! segment, the NIC writes the per-packet headers) would need the core to
//! reserve `n` consecutive Dsns and PathSeqs on one path at once, hand out
//! a header template with per-packet increments (Dsn, PathSeq, Offset and
//! PSN `+1`, Offset `+MSS`), and pace the burst as one; that is a new
//! transmit API, not a seam in the present one, so it is not offered here.

use super::bth::BTH_LEN;
use super::cc::{Aimd, MD_ECN_CONN, MD_ECN_PATH};
use super::icrc::{icrc_verify, icrc_write, icrc_write_rxe_flush, IcrcError, IPV4_HDR_LEN};
use super::mrc_wire::{udp_checksum, udp_checksum_ok, udp_pseudo_sum};
use super::packet::{parse, Packet, ParseError, ICRC_LEN};

/// Which window a [`CongestionEngine`] value governs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Window {
    /// One path's window (`transport.rst`, section 6.2).
    Path,
    /// The connection's window over all paths (section 6.3).
    Conn,
}

/// A congestion engine: one window in bytes that grows with acknowledged
/// bytes and shrinks on congestion signals.
///
/// The core owns one per path and one per connection, calls the hooks
/// below as the events happen and reads [`Self::cwnd`] before every new
/// packet (bytes in flight may not exceed it). An engine never sees a
/// packet: a NIC-resident engine gets the same events from its driver.
pub trait CongestionEngine {
    /// A fresh engine for `window`: `init_pkts` packets of `mss` bytes,
    /// at most `max_pkts` packets.
    fn start(window: Window, mss: u32, init_pkts: u32, max_pkts: u32) -> Self
    where
        Self: Sized;

    /// The window in bytes. At least one MSS; the core lets a path with
    /// nothing in flight send one packet whatever it says.
    fn cwnd(&self) -> u32;

    /// `bytes` payload bytes were acknowledged at `now` (per path: every
    /// acknowledged transmission; per connection: each Dsn the first time).
    fn on_ack(&mut self, now: u64, bytes: u32);

    /// An ACK echoed new ECN marks at `now`; `rtt_ns` is the round-trip
    /// time the caller holds decreases apart by. Returns true if the
    /// window decreased (the connection's then also slows its pacer).
    fn on_congestion(&mut self, now: u64, rtt_ns: u64) -> bool;

    /// The path's retransmission timer fired (path windows only: the
    /// connection's window sees no timeouts).
    fn on_timeout(&mut self);

    /// The timeouts since the last [`Self::on_ack`] proved spurious (an
    /// original transmission was acknowledged before anything sent after
    /// them): the window from before the first of them comes back, unless
    /// a congestion signal came since.
    fn undo_timeout(&mut self);
}

/// The software engine: the AIMD of `transport.rst`, sections 6.2–6.3.
impl CongestionEngine for Aimd {
    fn start(window: Window, mss: u32, init_pkts: u32, max_pkts: u32) -> Self {
        let md = match window {
            Window::Path => MD_ECN_PATH,
            Window::Conn => MD_ECN_CONN,
        };
        Aimd::new(mss, init_pkts, max_pkts, md)
    }

    fn cwnd(&self) -> u32 {
        Aimd::cwnd(self)
    }

    fn on_ack(&mut self, _now: u64, bytes: u32) {
        Aimd::on_ack(self, bytes);
    }

    fn on_congestion(&mut self, now: u64, rtt_ns: u64) -> bool {
        Aimd::on_congestion(self, now, rtt_ns)
    }

    fn on_timeout(&mut self) {
        Aimd::on_timeout(self);
    }

    fn undo_timeout(&mut self) {
        Aimd::undo_timeout(self);
    }
}

/// Who finished sealing a packet.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Sealed {
    /// The field holds its final value.
    Done,
    /// The NIC completes it on transmit. For the UDP checksum the field
    /// holds the pseudo-header sum (the kernel's `CHECKSUM_PARTIAL`,
    /// checksum start at the UDP header, offset 6); for the ICRC the
    /// trailer is zero and the NIC's RoCE engine writes it.
    ByNic,
}

/// Why a native datagram's UDP checksum was refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ChecksumError {
    /// Not a UDP header, addresses of different or unknown length, or a
    /// datagram over 65535 bytes.
    Malformed,
    /// Checksum 0 ("none"): the native port requires one (section 2).
    Missing,
    /// The checksum does not match.
    Mismatch,
}

/// Computes and checks the integrity fields of RoCEv2 and native packets.
///
/// RoCEv2 arguments are the IP header, the UDP header and the InfiniBand
/// part from the BTH to the ICRC trailer inclusive (as in
/// [`super::icrc::icrc_verify`]); native arguments are the IP source and
/// destination addresses (4 or 16 bytes) and the UDP datagram, header
/// first (as in [`super::mrc_wire::udp_checksum`]).
pub trait Integrity {
    /// Fills the ICRC trailer of an outgoing RoCEv2 packet.
    fn seal_icrc(&mut self, ip: &[u8], udp: &[u8], ib: &mut [u8]) -> Result<Sealed, IcrcError>;

    /// Checks the ICRC of a received RoCEv2 packet.
    fn verify_icrc(&mut self, ip: &[u8], udp: &[u8], ib: &[u8]) -> Result<(), IcrcError>;

    /// Fills the checksum field of an outgoing native datagram (whose
    /// checksum field is zero).
    fn seal_udp(&mut self, src: &[u8], dst: &[u8], udp: &mut [u8])
        -> Result<Sealed, ChecksumError>;

    /// Checks the checksum of a received native datagram (not 0, see
    /// [`ChecksumError::Missing`], which [`native_rx`] checks first).
    fn verify_udp(&mut self, src: &[u8], dst: &[u8], udp: &[u8]) -> Result<(), ChecksumError>;
}

/// Writes the UDP header's checksum field (bytes 6..8).
fn put_udp_checksum(udp: &mut [u8], value: u16) -> Result<(), ChecksumError> {
    udp.get_mut(6..8)
        .ok_or(ChecksumError::Malformed)?
        .copy_from_slice(&value.to_be_bytes());
    Ok(())
}

/// The software implementation: computes every field.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct SoftIntegrity;

impl Integrity for SoftIntegrity {
    fn seal_icrc(&mut self, ip: &[u8], udp: &[u8], ib: &mut [u8]) -> Result<Sealed, IcrcError> {
        icrc_write(ip, udp, ib).map(|()| Sealed::Done)
    }

    fn verify_icrc(&mut self, ip: &[u8], udp: &[u8], ib: &[u8]) -> Result<(), IcrcError> {
        icrc_verify(ip, udp, ib)
    }

    fn seal_udp(
        &mut self,
        src: &[u8],
        dst: &[u8],
        udp: &mut [u8],
    ) -> Result<Sealed, ChecksumError> {
        let c = udp_checksum(src, dst, udp).ok_or(ChecksumError::Malformed)?;
        put_udp_checksum(udp, c)?;
        Ok(Sealed::Done)
    }

    fn verify_udp(&mut self, src: &[u8], dst: &[u8], udp: &[u8]) -> Result<(), ChecksumError> {
        match udp_checksum_ok(src, dst, udp) {
            Some(true) => Ok(()),
            Some(false) => Err(ChecksumError::Mismatch),
            None => Err(ChecksumError::Malformed),
        }
    }
}

/// Software like [`SoftIntegrity`], but a FLUSH request it seals gets the
/// ICRC rdma_rxe computes for one ([`icrc_write_rxe_flush`]: Linux 7.3's
/// rdma_rxe runs the CRC over a FLUSH request's headers twice and drops a
/// FLUSH carrying the IBTA ICRC). Which of the two a device seals with is
/// the driver's choice (the kernel's `flush_icrc_rxe` module parameter);
/// received packets are checked alike ([`icrc_verify`] takes either form on
/// a FLUSH request).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct RxeFlushIntegrity;

impl Integrity for RxeFlushIntegrity {
    fn seal_icrc(&mut self, ip: &[u8], udp: &[u8], ib: &mut [u8]) -> Result<Sealed, IcrcError> {
        icrc_write_rxe_flush(ip, udp, ib).map(|()| Sealed::Done)
    }

    fn verify_icrc(&mut self, ip: &[u8], udp: &[u8], ib: &[u8]) -> Result<(), IcrcError> {
        SoftIntegrity.verify_icrc(ip, udp, ib)
    }

    fn seal_udp(
        &mut self,
        src: &[u8],
        dst: &[u8],
        udp: &mut [u8],
    ) -> Result<Sealed, ChecksumError> {
        SoftIntegrity.seal_udp(src, dst, udp)
    }

    fn verify_udp(&mut self, src: &[u8], dst: &[u8], udp: &[u8]) -> Result<(), ChecksumError> {
        SoftIntegrity.verify_udp(src, dst, udp)
    }
}

/// A NIC's integrity offload for one packet: what the NIC reported for a
/// received packet and what it does for a transmitted one. Where it did
/// nothing, [`SoftIntegrity`] does the work.
///
/// The kernel builds one from the skb: `udp_checked` from `ip_summed ==
/// CHECKSUM_UNNECESSARY`, `udp_insert` when the netdev offers
/// `NETIF_F_HW_CSUM` (then it marks the skb `CHECKSUM_PARTIAL`);
/// `icrc_checked` and `icrc_insert` only from a driver whose NIC runs a
/// RoCE engine (no Linux flag says so for a plain UDP socket).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct NicIntegrity {
    /// The NIC verified the ICRC of this received packet: not checked again.
    pub icrc_checked: bool,
    /// The NIC verified the UDP checksum of this received datagram.
    pub udp_checked: bool,
    /// The NIC writes the ICRC of this outgoing packet.
    pub icrc_insert: bool,
    /// The NIC completes the UDP checksum of this outgoing datagram.
    pub udp_insert: bool,
}

impl Integrity for NicIntegrity {
    fn seal_icrc(&mut self, ip: &[u8], udp: &[u8], ib: &mut [u8]) -> Result<Sealed, IcrcError> {
        if !self.icrc_insert {
            return SoftIntegrity.seal_icrc(ip, udp, ib);
        }
        // As short a packet as software refuses (BTH and trailer at least).
        if ib.len() < BTH_LEN + ICRC_LEN {
            return Err(IcrcError::Truncated);
        }
        let (_, trailer) = ib
            .split_last_chunk_mut::<ICRC_LEN>()
            .ok_or(IcrcError::Truncated)?;
        *trailer = [0; ICRC_LEN];
        Ok(Sealed::ByNic)
    }

    fn verify_icrc(&mut self, ip: &[u8], udp: &[u8], ib: &[u8]) -> Result<(), IcrcError> {
        if self.icrc_checked {
            return Ok(());
        }
        SoftIntegrity.verify_icrc(ip, udp, ib)
    }

    fn seal_udp(
        &mut self,
        src: &[u8],
        dst: &[u8],
        udp: &mut [u8],
    ) -> Result<Sealed, ChecksumError> {
        if !self.udp_insert {
            return SoftIntegrity.seal_udp(src, dst, udp);
        }
        let len = u16::try_from(udp.len()).map_err(|_| ChecksumError::Malformed)?;
        let seed = udp_pseudo_sum(src, dst, len).ok_or(ChecksumError::Malformed)?;
        put_udp_checksum(udp, seed)?;
        Ok(Sealed::ByNic)
    }

    fn verify_udp(&mut self, src: &[u8], dst: &[u8], udp: &[u8]) -> Result<(), ChecksumError> {
        if self.udp_checked {
            return Ok(());
        }
        SoftIntegrity.verify_udp(src, dst, udp)
    }
}

/// Why a received RoCEv2 packet was refused by [`roce_rx`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RoceRxError {
    /// Not a well-formed RoCEv2 packet.
    Malformed(ParseError),
    /// Its ICRC is wrong (or the IP/UDP headers cannot carry one).
    Icrc(IcrcError),
}

/// The receive check of a RoCEv2 datagram: parses `ib` (BTH to ICRC
/// inclusive), then checks its ICRC through `integ`. The packet may go
/// to the responder or requester only if this returns it.
pub fn roce_rx<'a, I: Integrity + ?Sized>(
    integ: &mut I,
    ip: &[u8],
    udp: &[u8],
    ib: &'a [u8],
) -> Result<Packet<'a>, RoceRxError> {
    let pkt = parse(ib).map_err(RoceRxError::Malformed)?;
    integ.verify_icrc(ip, udp, ib).map_err(RoceRxError::Icrc)?;
    Ok(pkt)
}

/// The receive check of a native datagram (`transport.rst`, section 2):
/// the UDP checksum must be present (not 0, which IPv4 allows to mean
/// "none") and correct, checked through `integ`. `ip` is the IP header
/// (the addresses are taken from it), `udp` the datagram, header first.
/// The payload after the UDP header may go to [`super::conn::Conn::on_packet`]
/// only if this returns `Ok`.
pub fn native_rx<I: Integrity + ?Sized>(
    integ: &mut I,
    ip: &[u8],
    udp: &[u8],
) -> Result<(), ChecksumError> {
    let field = udp.get(6..8).ok_or(ChecksumError::Malformed)?;
    if field == [0, 0] {
        return Err(ChecksumError::Missing);
    }
    let (src, dst) = match ip.first().map(|b| b >> 4) {
        Some(4) if ip.len() >= IPV4_HDR_LEN => (ip.get(12..16), ip.get(16..20)),
        Some(6) => (ip.get(8..24), ip.get(24..40)),
        _ => (None, None),
    };
    let (Some(src), Some(dst)) = (src, dst) else {
        return Err(ChecksumError::Malformed);
    };
    integ.verify_udp(src, dst, udp)
}
