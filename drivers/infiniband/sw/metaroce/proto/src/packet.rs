// SPDX-License-Identifier: GPL-2.0
//! Whole-packet parsing and building, path MTU rules and transmit
//! descriptors.
//!
//! A RoCEv2 packet, as seen here, is the UDP payload:
//!
//! ```text
//! BTH | extended headers (per opcode) | payload | pad (0..3) | ICRC (4)
//! ```
//!
//! The parser validates the header layout only; whether a packet is
//! acceptable for a queue pair (PSN, length against the PMTU, keys) is
//! decided by the transport state machines.

use super::bth::{Bth, BTH_LEN};
use super::ext::{Aeth, AtomicAckEth, AtomicEth, Deth, Feth, Reth};
use super::opcode::{ExtSet, Position};
use super::wire::{Reader, Writer};

/// Length of the invariant CRC trailer.
pub const ICRC_LEN: usize = 4;

/// Why a packet was rejected by [`parse`]. Every variant is a distinct drop
/// reason for the kernel's counters.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ParseError {
    /// The buffer ends inside the headers (or has no room for the ICRC).
    Truncated,
    /// Opcode not defined by the IBTA.
    UnknownOpcode(u8),
    /// Opcode defined by the IBTA but not implemented (RD, XRC, FLUSH,
    /// ATOMIC WRITE).
    UnsupportedOpcode(u8),
    /// Transport header version other than 0.
    BadTver(u8),
    /// A reserved field (BTH bits after AckReq, DETH byte 4) is not zero.
    ReservedBits,
    /// Reserved AETH syndrome.
    BadSyndrome(u8),
    /// Headers, payload and pad do not add up to a multiple of 4 bytes.
    Misaligned,
    /// The pad count exceeds the bytes following the headers.
    BadPad,
    /// An opcode that carries no payload is followed by payload or pad.
    UnexpectedPayload,
}

/// Why [`build`] or [`write_headers`] refused to encode a packet.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BuildError {
    /// The output buffer is too small.
    NoRoom,
    /// The extended headers present do not match the opcode.
    HeaderMismatch,
    /// A payload was given for an opcode that carries none.
    UnexpectedPayload,
    /// `bth.pad` differs from [`pad_for`] of the payload length.
    BadPad,
}

/// Number of pad bytes needed after a payload of `len` bytes.
pub const fn pad_for(len: usize) -> u8 {
    ((4 - len % 4) % 4) as u8
}

/// BTH plus extended headers of one packet.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Headers {
    /// Base transport header.
    pub bth: Bth,
    /// FLUSH ETH.
    pub feth: Option<Feth>,
    /// Datagram ETH.
    pub deth: Option<Deth>,
    /// RDMA ETH.
    pub reth: Option<Reth>,
    /// Atomic ETH.
    pub atomic_eth: Option<AtomicEth>,
    /// ACK ETH.
    pub aeth: Option<Aeth>,
    /// Atomic ACK ETH.
    pub atomic_ack_eth: Option<AtomicAckEth>,
    /// Immediate data.
    pub imm: Option<u32>,
    /// Invalidate ETH: the R_Key to invalidate.
    pub ieth: Option<u32>,
}

impl Headers {
    /// Headers with the given BTH and no extended header.
    pub const fn new(bth: Bth) -> Self {
        Headers {
            bth,
            feth: None,
            deth: None,
            reth: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack_eth: None,
            imm: None,
            ieth: None,
        }
    }

    /// The set of extended headers present.
    pub fn exts(&self) -> ExtSet {
        let mut s = ExtSet::EMPTY;
        for (present, e) in [
            (self.feth.is_some(), ExtSet::FETH),
            (self.deth.is_some(), ExtSet::DETH),
            (self.reth.is_some(), ExtSet::RETH),
            (self.atomic_eth.is_some(), ExtSet::ATOMIC_ETH),
            (self.aeth.is_some(), ExtSet::AETH),
            (self.atomic_ack_eth.is_some(), ExtSet::ATOMIC_ACK_ETH),
            (self.imm.is_some(), ExtSet::IMM),
            (self.ieth.is_some(), ExtSet::IETH),
        ] {
            if present {
                s = s.with(e);
            }
        }
        s
    }

    /// Encoded length of the headers in bytes.
    pub fn hdr_len(&self) -> usize {
        BTH_LEN + self.exts().len()
    }

    fn read(r: &mut Reader<'_>) -> Result<Headers, ParseError> {
        let mut h = Headers::new(Bth::read(r)?);
        let exts = h.bth.opcode.info().exts;
        if exts.contains(ExtSet::FETH) {
            h.feth = Some(Feth::read(r)?);
        }
        if exts.contains(ExtSet::DETH) {
            h.deth = Some(Deth::read(r)?);
        }
        if exts.contains(ExtSet::RETH) {
            h.reth = Some(Reth::read(r)?);
        }
        if exts.contains(ExtSet::ATOMIC_ETH) {
            h.atomic_eth = Some(AtomicEth::read(r)?);
        }
        if exts.contains(ExtSet::AETH) {
            h.aeth = Some(Aeth::read(r)?);
        }
        if exts.contains(ExtSet::ATOMIC_ACK_ETH) {
            h.atomic_ack_eth = Some(AtomicAckEth::read(r)?);
        }
        if exts.contains(ExtSet::IMM) {
            h.imm = Some(r.u32().ok_or(ParseError::Truncated)?);
        }
        if exts.contains(ExtSet::IETH) {
            h.ieth = Some(r.u32().ok_or(ParseError::Truncated)?);
        }
        Ok(h)
    }

    fn write(&self, w: &mut Writer<'_>) -> Option<()> {
        self.bth.write(w)?;
        if let Some(f) = &self.feth {
            f.write(w)?;
        }
        if let Some(d) = &self.deth {
            d.write(w)?;
        }
        if let Some(r) = &self.reth {
            r.write(w)?;
        }
        if let Some(a) = &self.atomic_eth {
            a.write(w)?;
        }
        if let Some(a) = &self.aeth {
            a.write(w)?;
        }
        if let Some(a) = &self.atomic_ack_eth {
            a.write(w)?;
        }
        if let Some(i) = self.imm {
            w.u32(i)?;
        }
        if let Some(k) = self.ieth {
            w.u32(k)?;
        }
        Some(())
    }
}

/// A parsed packet borrowing its payload from the receive buffer.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Packet<'a> {
    /// Headers.
    pub hdr: Headers,
    /// Payload without the pad bytes.
    pub payload: &'a [u8],
    /// The ICRC trailer, read little-endian so that it compares equal to
    /// [`super::icrc::icrc_compute`] (see the byte-order note there).
    pub icrc: u32,
}

/// Parses a RoCEv2 packet (the UDP payload: BTH to ICRC inclusive).
///
/// Checks that the headers required by the opcode are all present, that
/// TVer is 0 and reserved bits are clear, that headers + payload + pad are
/// 4-byte aligned, that the pad fits, and that opcodes without payload have
/// none. Never panics.
pub fn parse(buf: &[u8]) -> Result<Packet<'_>, ParseError> {
    let (body, icrc) = buf
        .split_last_chunk::<ICRC_LEN>()
        .ok_or(ParseError::Truncated)?;
    let mut r = Reader::new(body);
    let hdr = Headers::read(&mut r)?;
    let rest = r.rest();
    let pad = usize::from(hdr.bth.pad);
    if !hdr.bth.opcode.info().payload && (!rest.is_empty() || pad != 0) {
        return Err(ParseError::UnexpectedPayload);
    }
    if rest.len() % 4 != 0 {
        return Err(ParseError::Misaligned);
    }
    let len = rest.len().checked_sub(pad).ok_or(ParseError::BadPad)?;
    let payload = rest.get(..len).ok_or(ParseError::BadPad)?;
    Ok(Packet {
        hdr,
        payload,
        icrc: u32::from_le_bytes(*icrc),
    })
}

/// Checks `hdr` against its opcode and a payload of `payload_len` bytes and
/// writes the headers to the front of `out`. Returns the header length.
/// The caller then places the payload, `pad_for(payload_len)` zero bytes and
/// the ICRC after them.
pub fn write_headers(
    hdr: &Headers,
    payload_len: usize,
    out: &mut [u8],
) -> Result<usize, BuildError> {
    let info = hdr.bth.opcode.info();
    if hdr.exts() != info.exts {
        return Err(BuildError::HeaderMismatch);
    }
    if !info.payload && payload_len != 0 {
        return Err(BuildError::UnexpectedPayload);
    }
    if hdr.bth.pad != pad_for(payload_len) {
        return Err(BuildError::BadPad);
    }
    let mut w = Writer::new(out);
    hdr.write(&mut w).ok_or(BuildError::NoRoom)?;
    Ok(w.written())
}

/// Total packet length (headers, payload, pad and ICRC) for `hdr` with a
/// payload of `payload_len` bytes; `None` on overflow.
pub fn wire_len(hdr: &Headers, payload_len: usize) -> Option<usize> {
    hdr.hdr_len()
        .checked_add(payload_len)?
        .checked_add(usize::from(pad_for(payload_len)))?
        .checked_add(ICRC_LEN)
}

/// Builds a complete packet into `out`: headers, payload, zeroed pad and a
/// zeroed ICRC slot (fill it with [`super::icrc::icrc_write`]). Returns the
/// total length.
pub fn build(hdr: &Headers, payload: &[u8], out: &mut [u8]) -> Result<usize, BuildError> {
    let total = wire_len(hdr, payload.len()).ok_or(BuildError::NoRoom)?;
    let hlen = write_headers(hdr, payload.len(), out)?;
    let end = hlen.checked_add(payload.len()).ok_or(BuildError::NoRoom)?;
    // The range has exactly `payload.len()` bytes, so the copy cannot panic.
    out.get_mut(hlen..end)
        .ok_or(BuildError::NoRoom)?
        .copy_from_slice(payload);
    out.get_mut(end..total).ok_or(BuildError::NoRoom)?.fill(0);
    Ok(total)
}

/// Path MTU, with the values of the verbs `ib_mtu` enumeration.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum Pmtu {
    /// 256 bytes.
    Mtu256 = 1,
    /// 512 bytes.
    Mtu512 = 2,
    /// 1024 bytes.
    Mtu1024 = 3,
    /// 2048 bytes.
    Mtu2048 = 4,
    /// 4096 bytes.
    Mtu4096 = 5,
}

impl Pmtu {
    /// Payload bytes per packet.
    pub const fn bytes(self) -> u32 {
        128 << self as u32
    }

    /// The PMTU of exactly `bytes` bytes.
    pub const fn from_bytes(bytes: u32) -> Option<Pmtu> {
        match bytes {
            256 => Some(Pmtu::Mtu256),
            512 => Some(Pmtu::Mtu512),
            1024 => Some(Pmtu::Mtu1024),
            2048 => Some(Pmtu::Mtu2048),
            4096 => Some(Pmtu::Mtu4096),
            _ => None,
        }
    }

    /// Number of packets (and PSNs) a message of `len` bytes needs; a
    /// zero-length message still needs one.
    pub const fn packets(self, len: u32) -> u32 {
        if len == 0 {
            1
        } else {
            (len - 1) / self.bytes() + 1
        }
    }

    /// IBTA payload length rule: first and middle packets carry exactly one
    /// PMTU, last and only packets at most one PMTU.
    pub const fn payload_ok(self, pos: Position, len: usize) -> bool {
        let mtu = self.bytes() as usize;
        match pos {
            Position::First | Position::Middle => len == mtu,
            Position::Last | Position::Only => len <= mtu,
        }
    }
}

/// Where the payload of a packet to transmit comes from. The core never
/// touches payload bytes: the kernel copies them (or maps them) itself.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PayloadRef {
    /// No payload.
    None,
    /// Bytes `offset..offset + len` of the local data (scatter/gather list)
    /// of send queue slot `slot`.
    Sq {
        /// Send queue slot.
        slot: u32,
        /// Byte offset inside the work request's data.
        offset: u32,
        /// Length in bytes.
        len: u32,
    },
    /// `len` bytes at `va` in the memory region of `rkey` (READ responses).
    Mr {
        /// Remote key used by the peer.
        rkey: u32,
        /// Virtual address.
        va: u64,
        /// Length in bytes.
        len: u32,
    },
}

impl PayloadRef {
    /// Payload length in bytes.
    pub const fn len(&self) -> u32 {
        match *self {
            PayloadRef::None => 0,
            PayloadRef::Sq { len, .. } | PayloadRef::Mr { len, .. } => len,
        }
    }

    /// True if there is no payload.
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A packet to transmit: complete headers (with `bth.pad` already matching
/// the payload length) and a reference to its payload.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TxDesc {
    /// Headers.
    pub hdr: Headers,
    /// Payload source.
    pub payload: PayloadRef,
}

/// The IP address of a packet's IP header `ip` as a GID: the source
/// (`src`) or the destination; an IPv4 address is IPv4-mapped
/// (`::ffff:a.b.c.d`, the form of RoCEv2's IPv4 GIDs). `None` for a header
/// that is neither a whole IPv4 nor a whole IPv6 header.
pub fn ip_gid(ip: &[u8], src: bool) -> Option<[u8; 16]> {
    let mut g = [0u8; 16];
    match ip.first().map(|b| b >> 4) {
        Some(4) => {
            let a = ip.get(if src { 12..16 } else { 16..20 })?;
            g[10] = 0xff;
            g[11] = 0xff;
            g[12..].copy_from_slice(a);
        }
        Some(6) => g.copy_from_slice(ip.get(if src { 8..24 } else { 24..40 })?),
        _ => return None,
    }
    Some(g)
}

/// Whether a packet with IP header `ip` came from `remote` to `local`
/// (GIDs): what a connected QP (RC, UC) requires of every packet it takes,
/// as the address vector it was given names its peer (rdma_rxe's
/// `check_addr` does the same). Any other packet is an off-path injection
/// or misrouted, and is dropped.
pub fn from_peer(ip: &[u8], local: &[u8; 16], remote: &[u8; 16]) -> bool {
    ip_gid(ip, true).as_ref() == Some(remote) && ip_gid(ip, false).as_ref() == Some(local)
}

#[cfg(test)]
mod tests {
    use super::super::opcode::Opcode;
    use super::super::psn::Psn;
    use super::*;

    #[test]
    fn pmtu_math() {
        assert_eq!(Pmtu::Mtu256.bytes(), 256);
        assert_eq!(Pmtu::Mtu4096.bytes(), 4096);
        assert_eq!(Pmtu::from_bytes(1024), Some(Pmtu::Mtu1024));
        assert_eq!(Pmtu::from_bytes(1000), None);
        assert_eq!(Pmtu::Mtu1024.packets(0), 1);
        assert_eq!(Pmtu::Mtu1024.packets(1024), 1);
        assert_eq!(Pmtu::Mtu1024.packets(1025), 2);
        assert_eq!(Pmtu::Mtu256.packets(u32::MAX), 1 << 24);
        assert!(Pmtu::Mtu256.payload_ok(Position::Middle, 256));
        assert!(!Pmtu::Mtu256.payload_ok(Position::First, 255));
        assert!(Pmtu::Mtu256.payload_ok(Position::Only, 0));
        assert!(!Pmtu::Mtu256.payload_ok(Position::Last, 257));
    }

    #[test]
    fn pad_and_alignment() {
        assert_eq!([0, 1, 2, 3, 4, 5].map(pad_for), [0, 3, 2, 1, 0, 3]);
        // SEND_ONLY, pad 3, 4 bytes after the BTH: payload of 1 byte.
        let mut b = [
            0x04, 0x30, 0xFF, 0xFF, 0, 0, 0, 1, 0, 0, 0, 1, 0xAA, 0, 0, 0, 9, 9, 9, 9,
        ];
        let p = parse(&b).unwrap();
        assert_eq!(p.payload, &[0xAA]);
        assert_eq!(p.icrc, 0x0909_0909);
        // Pad larger than the remainder.
        assert_eq!(parse(&b[..16]), Err(ParseError::BadPad));
        // Remainder not a multiple of four.
        b[1] = 0;
        assert_eq!(parse(&b[..18]), Err(ParseError::Misaligned));
        // ACK with trailing bytes.
        let ack = [
            0x11, 0, 0xFF, 0xFF, 0, 0, 0, 1, 0, 0, 0, 1, 0x1F, 0, 0, 1, 0, 0, 0, 0, 1, 2, 3, 4,
        ];
        assert_eq!(parse(&ack), Err(ParseError::UnexpectedPayload));
        assert!(parse(&ack[4..]).is_err());
        assert!(parse(&[0xff; 3]).is_err());
    }

    #[test]
    fn build_checks() {
        let bth = Bth {
            opcode: Opcode::RcWriteOnly,
            solicited: false,
            mig_req: false,
            pad: 0,
            pkey: 0xFFFF,
            resv8: 0,
            dest_qp: 0x12,
            ack_req: true,
            psn: Psn::new(7),
        };
        let mut h = Headers::new(bth);
        let mut out = [0u8; 64];
        assert_eq!(build(&h, &[], &mut out), Err(BuildError::HeaderMismatch));
        h.reth = Some(Reth {
            va: 1,
            rkey: 2,
            len: 3,
        });
        assert_eq!(build(&h, &[1, 2, 3], &mut out), Err(BuildError::BadPad));
        h.bth.pad = 1;
        assert_eq!(
            build(&h, &[1, 2, 3], &mut out[..34]),
            Err(BuildError::NoRoom)
        );
        assert_eq!(build(&h, &[1, 2, 3], &mut out), Ok(36));
        let p = parse(&out[..36]).unwrap();
        assert_eq!(p.hdr, h);
        assert_eq!(p.payload, &[1, 2, 3]);
        h.bth.opcode = Opcode::RcReadRequest;
        h.bth.pad = 0;
        assert_eq!(
            build(&h, &[1], &mut out),
            Err(BuildError::UnexpectedPayload)
        );
    }

    #[test]
    fn ip_gids_and_the_peer_check() {
        let mut v4 = [0u8; 20];
        v4[0] = 0x45;
        v4[12..16].copy_from_slice(&[192, 0, 2, 1]);
        v4[16..20].copy_from_slice(&[192, 0, 2, 2]);
        let mapped = |a: [u8; 4]| {
            let mut g = [0u8; 16];
            g[10] = 0xff;
            g[11] = 0xff;
            g[12..].copy_from_slice(&a);
            g
        };
        let (one, two, three) = (
            mapped([192, 0, 2, 1]),
            mapped([192, 0, 2, 2]),
            mapped([192, 0, 2, 3]),
        );
        assert_eq!(ip_gid(&v4, true), Some(one));
        assert_eq!(ip_gid(&v4, false), Some(two));
        assert!(from_peer(&v4, &two, &one));
        assert!(!from_peer(&v4, &one, &two), "reversed");
        assert!(!from_peer(&v4, &two, &three), "another source");
        assert!(!from_peer(&v4, &three, &one), "another destination");
        assert!(!from_peer(&v4[..19], &two, &one), "truncated");
        let mut v6 = [0u8; 40];
        v6[0] = 0x60;
        v6[8] = 0x20;
        v6[9] = 0x01;
        v6[10] = 0x0d;
        v6[11] = 0xb8;
        v6[23] = 1;
        v6.copy_within(8..24, 24);
        v6[39] = 2;
        let (s6, d6) = (ip_gid(&v6, true).unwrap(), ip_gid(&v6, false).unwrap());
        assert_eq!((s6[0], s6[15], d6[15]), (0x20, 1, 2));
        assert!(from_peer(&v6, &d6, &s6));
        assert!(!from_peer(&v6, &d6, &one));
        assert_eq!(ip_gid(&[0x50; 40], true), None);
        assert_eq!(ip_gid(&[], true), None);
    }
}
