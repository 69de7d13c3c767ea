// SPDX-License-Identifier: GPL-2.0
//! MetaRoCE native header (MRH) codecs: DATA and ACK packets.
//!
//! Byte layouts are in `Documentation/metaroce/transport.rst`, section 3.
//! Decoding never panics: every field is read through the bounds-checked
//! [`Reader`], and every inconsistency is a [`MrcError`] the caller counts.

use super::wire::{Reader, Writer};

/// Native UDP destination port (module parameter default).
pub const NATIVE_PORT: u16 = 19791;
/// Protocol version carried in every header.
pub const VERSION: u8 = 1;
/// Length of a DATA header in bytes.
pub const DATA_HDR_LEN: usize = 60;
/// Length of an ACK packet in bytes.
pub const ACK_LEN: usize = 56;
/// Length of a CHALLENGE or PROOF packet in bytes.
pub const PROBE_LEN: usize = 16;
/// Largest payload of one DATA packet: what a 9000-byte jumbo frame could carry (a sender
/// fills its netdev's MTU, section 2; more is refused as `BadLength`).
pub const MAX_PAYLOAD: u16 = 9000;
/// Largest message length.
pub const MAX_MSG_LEN: u32 = 1 << 31;
/// Bytes of an atomic request's operand block (Compare, then SwapAdd, each a
/// big-endian `u64`): its MsgLen and PayloadLen.
pub const ATOMIC_OPERANDS_LEN: u16 = 16;
/// Width of the word an atomic operates on: the MsgLen of an ATOMIC_RESP
/// and the length of the requester's message.
pub const ATOMIC_LEN: u32 = 8;
/// Largest number of header bytes [`super::conn::Conn::poll_transmit`]
/// writes (a DATA header and an atomic's operand block).
pub const MAX_HDR_LEN: usize = DATA_HDR_LEN + ATOMIC_OPERANDS_LEN as usize;

const TYPE_DATA: u8 = 1;
const TYPE_ACK: u8 = 2;
const TYPE_CHALLENGE: u8 = 3;
const TYPE_PROOF: u8 = 4;
const FLAG_RETX: u8 = 0x80;
const FLAG_SE: u8 = 0x40;
/// ACK flag: the DATA packet `ack_seq` names was refused, its receive not posted (section 5.6).
const FLAG_RNR: u8 = 0x40;

/// Why a packet was not decoded.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MrcError {
    /// Shorter than its header or its declared payload.
    Truncated,
    /// Version other than [`VERSION`].
    BadVersion(u8),
    /// Unknown packet type.
    BadType(u8),
    /// Unknown DATA opcode.
    BadOpcode(u8),
    /// A reserved field or bit is not zero.
    Reserved,
    /// Offset/length fields inconsistent (beyond the message, too long).
    BadLength,
    /// Placement fields that do not belong to the opcode.
    BadPlacement,
}

/// DATA opcodes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MrcOp {
    /// Send, consumes a posted receive.
    Send,
    /// Send with immediate data.
    SendImm,
    /// RDMA write, placed by remote address and key.
    Write,
    /// RDMA write with immediate data, also consumes a posted receive.
    WriteImm,
    /// RDMA READ request: asks the responder for MsgLen bytes at
    /// (RKey, RemoteVa); no payload.
    Read,
    /// READ response data, placed by (StreamId, Msn, Offset) in the
    /// requester's READ.
    ReadResp,
    /// Negative response to a READ or atomic request: Imm carries the
    /// [`NakCode`]; completes the request with an error.
    Nak,
    /// Atomic compare and swap request on the 8-byte word at
    /// (RKey, RemoteVa); payload: Compare, Swap.
    CmpSwap,
    /// Atomic fetch and add request; payload: Add, 0.
    FetchAdd,
    /// Atomic response: RemoteVa carries the word's original value.
    AtomicResp,
    /// Send with invalidate: a SEND whose RKey names a key of the
    /// responder to invalidate once the whole message is placed (section
    /// 3.1); consumes a posted receive.
    SendInv,
}

/// Why a responder refused a request (the Imm field of a NAK).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum NakCode {
    /// The key, range or access rights do not allow the access.
    RemoteAccess,
    /// A malformed request (an atomic's address not 8-byte aligned).
    InvalidRequest,
    /// The responder could not carry it out.
    RemoteOperation,
}

impl NakCode {
    /// Wire value.
    pub const fn to_u32(self) -> u32 {
        match self {
            NakCode::RemoteAccess => 1,
            NakCode::InvalidRequest => 2,
            NakCode::RemoteOperation => 3,
        }
    }

    /// Decodes a wire value.
    pub const fn from_u32(v: u32) -> Option<NakCode> {
        match v {
            1 => Some(NakCode::RemoteAccess),
            2 => Some(NakCode::InvalidRequest),
            3 => Some(NakCode::RemoteOperation),
            _ => None,
        }
    }
}

impl MrcOp {
    /// Wire value.
    pub const fn to_u8(self) -> u8 {
        match self {
            MrcOp::Send => 0,
            MrcOp::SendImm => 1,
            MrcOp::Write => 2,
            MrcOp::WriteImm => 3,
            MrcOp::Read => 4,
            MrcOp::ReadResp => 5,
            MrcOp::Nak => 6,
            MrcOp::CmpSwap => 7,
            MrcOp::FetchAdd => 8,
            MrcOp::AtomicResp => 9,
            MrcOp::SendInv => 10,
        }
    }

    /// Decodes a wire value.
    pub const fn from_u8(v: u8) -> Option<MrcOp> {
        match v {
            0 => Some(MrcOp::Send),
            1 => Some(MrcOp::SendImm),
            2 => Some(MrcOp::Write),
            3 => Some(MrcOp::WriteImm),
            4 => Some(MrcOp::Read),
            5 => Some(MrcOp::ReadResp),
            6 => Some(MrcOp::Nak),
            7 => Some(MrcOp::CmpSwap),
            8 => Some(MrcOp::FetchAdd),
            9 => Some(MrcOp::AtomicResp),
            10 => Some(MrcOp::SendInv),
            _ => None,
        }
    }

    /// True for opcodes placed by remote address and key.
    pub const fn is_write(self) -> bool {
        matches!(self, MrcOp::Write | MrcOp::WriteImm)
    }

    /// True for opcodes carrying immediate data.
    pub const fn has_imm(self) -> bool {
        matches!(self, MrcOp::SendImm | MrcOp::WriteImm)
    }

    /// True for opcodes that consume a posted receive.
    pub const fn consumes_recv(self) -> bool {
        matches!(
            self,
            MrcOp::Send | MrcOp::SendImm | MrcOp::WriteImm | MrcOp::SendInv
        )
    }

    /// True for opcodes whose RKey names a key the responder invalidates
    /// (SEND_INV); such an opcode carries no RemoteVa.
    pub const fn invalidates(self) -> bool {
        matches!(self, MrcOp::SendInv)
    }

    /// True for requests the responder answers (READ, atomics).
    pub const fn is_request(self) -> bool {
        matches!(self, MrcOp::Read | MrcOp::CmpSwap | MrcOp::FetchAdd)
    }

    /// True for atomic requests.
    pub const fn is_atomic(self) -> bool {
        matches!(self, MrcOp::CmpSwap | MrcOp::FetchAdd)
    }

    /// True for responses (READ_RESP, NAK, ATOMIC_RESP): they name a
    /// message of the *receiver's* sending half.
    pub const fn is_response(self) -> bool {
        matches!(self, MrcOp::ReadResp | MrcOp::Nak | MrcOp::AtomicResp)
    }

    /// True for opcodes that carry a remote address and key.
    pub const fn has_remote(self) -> bool {
        self.is_write() || self.is_request()
    }
}

/// A DATA header.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct DataHdr {
    /// This transmission is a retransmission.
    pub retx: bool,
    /// Solicited event.
    pub se: bool,
    /// Sender's path index.
    pub path: u8,
    /// Operation.
    pub op: MrcOp,
    /// Data sender's connection id.
    pub conn: u32,
    /// Per-path sequence number of this transmission.
    pub path_seq: u32,
    /// Every path sequence number below this one is resolved at the sender.
    pub path_floor: u32,
    /// Destination QP number (24 bits).
    pub stream: u32,
    /// Connection data sequence number (kept by retransmissions).
    pub dsn: u32,
    /// Stream message sequence number.
    pub msn: u32,
    /// Receive sequence number (receive-consuming opcodes), else 0.
    pub rsn: u32,
    /// Message length.
    pub msg_len: u32,
    /// Offset of the payload within the message.
    pub offset: u32,
    /// Remote virtual address of message byte 0 (writes, READ and atomic
    /// requests); the original value (ATOMIC_RESP); else 0.
    pub va: u64,
    /// Remote key (writes, READ and atomic requests); the key to
    /// invalidate (SEND_INV, in every packet of the message); else 0.
    pub rkey: u32,
    /// Immediate data; the [`NakCode`] (NAK); else 0.
    pub imm: u32,
    /// Payload length.
    pub len: u16,
}

/// An ACK packet.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct AckPkt {
    /// Path of the acknowledged DATA packets.
    pub path: u8,
    /// The data sender's connection id.
    pub conn: u32,
    /// First path sequence number not received (all below are settled).
    pub cum: u32,
    /// Path sequence number of the newest DATA packet acknowledged.
    pub ack_seq: u32,
    /// Receiver fair share for this sender in kbit/s; 0: no hint.
    pub rate_hint_kbps: u32,
    /// CE-marked DATA packets received on this path, wrapping.
    pub ce_count: u32,
    /// Bit `i` (word `i / 64`, bit `i % 64`): `cum + 1 + i` received.
    pub sack: [u64; 4],
    /// RNR flag: the packet `ack_seq` names arrived but was refused, its receive not posted
    /// (section 5.6); it is not acknowledged, and its sender resends it without counting that
    /// towards its retransmission limit.
    pub rnr: bool,
}

/// Which restart-proof packet (section 7.1).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ProbeKind {
    /// A data receiver asks the device at the data's source address to prove the ConnId it
    /// sends with.
    Challenge,
    /// The answer: the prover's own ConnId and the challenge's cookie.
    Proof,
}

/// A CHALLENGE or PROOF packet.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ProbePkt {
    /// CHALLENGE or PROOF.
    pub kind: ProbeKind,
    /// CHALLENGE: 0. PROOF: the prover's connection id (the data sender's, as in an ACK).
    pub conn: u32,
    /// The challenger's cookie, echoed by the PROOF.
    pub cookie: u64,
}

/// A decoded packet; DATA borrows its payload from the input buffer.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MrcPacket<'a> {
    /// DATA header and payload.
    Data(DataHdr, &'a [u8]),
    /// ACK.
    Ack(AckPkt),
    /// CHALLENGE or PROOF.
    Probe(ProbePkt),
}

fn common(r: &mut Reader<'_>) -> Result<(u8, u8, u8, u8, u32), MrcError> {
    let vt = r.u8().ok_or(MrcError::Truncated)?;
    let flags = r.u8().ok_or(MrcError::Truncated)?;
    let path = r.u8().ok_or(MrcError::Truncated)?;
    let op = r.u8().ok_or(MrcError::Truncated)?;
    let conn = r.u32().ok_or(MrcError::Truncated)?;
    if vt >> 4 != VERSION {
        return Err(MrcError::BadVersion(vt >> 4));
    }
    Ok((vt & 0x0F, flags, path, op, conn))
}

/// Decodes a MetaRoCE packet (the UDP payload) of the plain mode.
pub fn parse(buf: &[u8]) -> Result<MrcPacket<'_>, MrcError> {
    parse_mode(buf, false)
}

/// Decodes the packet of an authenticated datagram (`super::auth::Sealed::packet`, its
/// trailer cut off): as [`parse`], but the AUTH flag must be set (section 13.1).
pub fn parse_auth(buf: &[u8]) -> Result<MrcPacket<'_>, MrcError> {
    parse_mode(buf, true)
}

fn parse_mode(buf: &[u8], auth: bool) -> Result<MrcPacket<'_>, MrcError> {
    let mut r = Reader::new(buf);
    let (ty, mut flags, path, op, conn) = common(&mut r)?;
    if auth {
        let bit = if ty == TYPE_DATA {
            super::auth::FLAG_AUTH_DATA
        } else {
            super::auth::FLAG_AUTH
        };
        if flags & bit == 0 {
            return Err(MrcError::Reserved);
        }
        flags &= !bit;
    }
    match ty {
        TYPE_DATA => parse_data(&mut r, flags, path, op, conn),
        TYPE_ACK => {
            if flags & !FLAG_RNR != 0 || op != 0 {
                return Err(MrcError::Reserved);
            }
            let t = MrcError::Truncated;
            let cum = r.u32().ok_or(t)?;
            let ack_seq = r.u32().ok_or(t)?;
            let rate_hint_kbps = r.u32().ok_or(t)?;
            let ce_count = r.u32().ok_or(t)?;
            let mut sack = [0u64; 4];
            for w in sack.iter_mut() {
                *w = r.u64().ok_or(t)?;
            }
            Ok(MrcPacket::Ack(AckPkt {
                path,
                conn,
                cum,
                ack_seq,
                rate_hint_kbps,
                ce_count,
                sack,
                rnr: flags & FLAG_RNR != 0,
            }))
        }
        TYPE_CHALLENGE | TYPE_PROOF => {
            let kind = if ty == TYPE_CHALLENGE {
                ProbeKind::Challenge
            } else {
                ProbeKind::Proof
            };
            // Flags, PathId and byte 3 are reserved; a CHALLENGE's ConnId too.
            if flags != 0 || path != 0 || op != 0 || (kind == ProbeKind::Challenge && conn != 0) {
                return Err(MrcError::Reserved);
            }
            let cookie = r.u64().ok_or(MrcError::Truncated)?;
            Ok(MrcPacket::Probe(ProbePkt { kind, conn, cookie }))
        }
        other => Err(MrcError::BadType(other)),
    }
}

impl ProbePkt {
    /// Writes the 16-byte packet to the front of `buf`; returns its length, or `None` if
    /// `buf` is too short.
    pub fn write(&self, buf: &mut [u8]) -> Option<usize> {
        let ty = match self.kind {
            ProbeKind::Challenge => TYPE_CHALLENGE,
            ProbeKind::Proof => TYPE_PROOF,
        };
        let mut w = Writer::new(buf);
        w.u8(VERSION << 4 | ty)?;
        w.u8(0)?;
        w.u8(0)?;
        w.u8(0)?;
        w.u32(self.conn)?;
        w.u64(self.cookie)?;
        Some(PROBE_LEN)
    }
}

fn parse_data<'a>(
    r: &mut Reader<'a>,
    flags: u8,
    path: u8,
    op: u8,
    conn: u32,
) -> Result<MrcPacket<'a>, MrcError> {
    let t = MrcError::Truncated;
    let path_seq = r.u32().ok_or(t)?;
    let path_floor = r.u32().ok_or(t)?;
    let stream = r.u32().ok_or(t)?;
    let dsn = r.u32().ok_or(t)?;
    let msn = r.u32().ok_or(t)?;
    let rsn = r.u32().ok_or(t)?;
    let msg_len = r.u32().ok_or(t)?;
    let offset = r.u32().ok_or(t)?;
    let va = r.u64().ok_or(t)?;
    let rkey = r.u32().ok_or(t)?;
    let imm = r.u32().ok_or(t)?;
    let len = r.u16().ok_or(t)?;
    let resv = r.u16().ok_or(t)?;
    let op = MrcOp::from_u8(op).ok_or(MrcError::BadOpcode(op))?;
    if flags & !(FLAG_RETX | FLAG_SE) != 0 || resv != 0 || stream >> 24 != 0 {
        return Err(MrcError::Reserved);
    }
    let end = offset
        .checked_add(u32::from(len))
        .ok_or(MrcError::BadLength)?;
    if len > MAX_PAYLOAD || msg_len > MAX_MSG_LEN || end > msg_len {
        return Err(MrcError::BadLength);
    }
    // Fixed lengths of the request and response opcodes (section 3.1).
    let length_ok = match op {
        MrcOp::Read => offset == 0 && len == 0,
        MrcOp::Nak => msg_len == 0,
        MrcOp::CmpSwap | MrcOp::FetchAdd => {
            msg_len == u32::from(ATOMIC_OPERANDS_LEN) && offset == 0 && len == ATOMIC_OPERANDS_LEN
        }
        MrcOp::AtomicResp => msg_len == ATOMIC_LEN && offset == 0 && len == 0,
        _ => true,
    };
    if !length_ok {
        return Err(MrcError::BadLength);
    }
    let placement_ok = match op {
        MrcOp::Send | MrcOp::SendImm => va == 0 && rkey == 0,
        MrcOp::SendInv => va == 0,
        MrcOp::Write => rsn == 0,
        MrcOp::WriteImm => true,
        MrcOp::Read | MrcOp::CmpSwap | MrcOp::FetchAdd => rsn == 0,
        MrcOp::ReadResp => rsn == 0 && va == 0 && rkey == 0,
        MrcOp::Nak => rsn == 0 && va == 0 && rkey == 0 && NakCode::from_u32(imm).is_some(),
        MrcOp::AtomicResp => rsn == 0 && rkey == 0,
    };
    let imm_ok = op.has_imm() || op == MrcOp::Nak || imm == 0;
    if !placement_ok || !imm_ok {
        return Err(MrcError::BadPlacement);
    }
    let payload = r.rest().get(..usize::from(len)).ok_or(t)?;
    Ok(MrcPacket::Data(
        DataHdr {
            retx: flags & FLAG_RETX != 0,
            se: flags & FLAG_SE != 0,
            path,
            op,
            conn,
            path_seq,
            path_floor,
            stream,
            dsn,
            msn,
            rsn,
            msg_len,
            offset,
            va,
            rkey,
            imm,
            len,
        },
        payload,
    ))
}

impl DataHdr {
    /// Writes the 60-byte header to the front of `buf`; returns its length,
    /// or `None` if `buf` is too short.
    pub fn write(&self, buf: &mut [u8]) -> Option<usize> {
        let mut w = Writer::new(buf);
        let mut flags = 0;
        if self.retx {
            flags |= FLAG_RETX;
        }
        if self.se {
            flags |= FLAG_SE;
        }
        w.u8(VERSION << 4 | TYPE_DATA)?;
        w.u8(flags)?;
        w.u8(self.path)?;
        w.u8(self.op.to_u8())?;
        w.u32(self.conn)?;
        w.u32(self.path_seq)?;
        w.u32(self.path_floor)?;
        w.u32(self.stream & 0x00FF_FFFF)?;
        w.u32(self.dsn)?;
        w.u32(self.msn)?;
        w.u32(self.rsn)?;
        w.u32(self.msg_len)?;
        w.u32(self.offset)?;
        w.u64(self.va)?;
        w.u32(self.rkey)?;
        w.u32(self.imm)?;
        w.u16(self.len)?;
        w.u16(0)?;
        Some(w.written())
    }
}

impl AckPkt {
    /// Writes the 56-byte ACK to the front of `buf`; returns its length, or
    /// `None` if `buf` is too short.
    pub fn write(&self, buf: &mut [u8]) -> Option<usize> {
        let mut w = Writer::new(buf);
        w.u8(VERSION << 4 | TYPE_ACK)?;
        w.u8(if self.rnr { FLAG_RNR } else { 0 })?;
        w.u8(self.path)?;
        w.u8(0)?;
        w.u32(self.conn)?;
        w.u32(self.cum)?;
        w.u32(self.ack_seq)?;
        w.u32(self.rate_hint_kbps)?;
        w.u32(self.ce_count)?;
        for word in self.sack {
            w.u64(word)?;
        }
        Some(w.written())
    }
}

/// Adds `b` as big-endian 16-bit words (an odd last byte padded with zero) to a
/// ones'-complement accumulator.
fn sum_words(mut sum: u64, b: &[u8]) -> u64 {
    // Eight bytes at a time: as 2^16 = 1 modulo 2^16 - 1, a big-endian
    // 32-bit word adds the same as its two 16-bit halves. Each step adds less
    // than 2^33, so a UDP datagram (at most 65535 bytes) cannot carry out of
    // the accumulator.
    let add = |sum: u64, w: [u8; 8]| {
        let v = u64::from_be_bytes(w);
        sum.wrapping_add(v >> 32).wrapping_add(v & 0xFFFF_FFFF)
    };
    let mut it = b.chunks_exact(8);
    for w in &mut it {
        sum = add(sum, w.try_into().unwrap_or([0; 8]));
    }
    let rest = it.remainder();
    if !rest.is_empty() {
        // An odd trailing byte is the high half of a word padded with zero.
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        sum = add(sum, last);
    }
    sum
}

/// Folds a ones'-complement accumulator to 16 bits.
fn fold(mut sum: u64) -> u16 {
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    // The loop leaves `sum <= 0xFFFF`.
    sum as u16
}

/// The accumulator of the UDP pseudo-header: `src`, `dst`, protocol 17 and
/// the UDP length `len`; `None` if the addresses differ in length or are
/// neither 4 nor 16 bytes.
fn pseudo_header(src: &[u8], dst: &[u8], len: u16) -> Option<u64> {
    if src.len() != dst.len() || !(src.len() == 4 || src.len() == 16) {
        return None;
    }
    let sum = sum_words(sum_words(0, src), dst);
    Some(sum_words(sum_words(sum, &[0, 17]), &len.to_be_bytes()))
}

/// The folded (not inverted) sum of the UDP pseudo-header of a datagram of
/// `len` bytes between `src` and `dst`: what a sender that leaves the checksum to
/// the NIC stores in the checksum field (Linux `CHECKSUM_PARTIAL`); the NIC then
/// sums the datagram from its UDP header on and stores the inverted result.
pub fn udp_pseudo_sum(src: &[u8], dst: &[u8], len: u16) -> Option<u16> {
    pseudo_header(src, dst, len).map(fold)
}

/// The UDP checksum (RFC 768) of `udp` (the UDP header, its checksum field zero, and the
/// payload) between IP addresses `src` and `dst` (4 bytes each for IPv4, 16 for IPv6):
/// the value to store in the header, never 0 (an all-zero sum is sent as 0xFFFF).
/// `None` if the addresses differ in length or the datagram is longer than 65535 bytes.
pub fn udp_checksum(src: &[u8], dst: &[u8], udp: &[u8]) -> Option<u16> {
    let len = u16::try_from(udp.len()).ok()?;
    let c = !fold(sum_words(pseudo_header(src, dst, len)?, udp));
    Some(if c == 0 { 0xFFFF } else { c })
}

/// Whether the checksum field of the received datagram `udp` (header first) is right:
/// the sum over pseudo-header and datagram, checksum included, is all ones. A field of
/// 0 ("no checksum") is not right. `None` as for [`udp_checksum`].
pub fn udp_checksum_ok(src: &[u8], dst: &[u8], udp: &[u8]) -> Option<bool> {
    let len = u16::try_from(udp.len()).ok()?;
    let sum = fold(sum_words(pseudo_header(src, dst, len)?, udp));
    Some(sum == 0xFFFF && udp.get(6..8).is_some_and(|f| f != [0, 0]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_checksum_vectors() {
        // Values from an independent implementation of RFC 768 (Python, by hand).
        let mut udp = [0u8; 11];
        udp[0..2].copy_from_slice(&49152u16.to_be_bytes());
        udp[2..4].copy_from_slice(&NATIVE_PORT.to_be_bytes());
        udp[4..6].copy_from_slice(&11u16.to_be_bytes());
        udp[8..].copy_from_slice(b"abc");
        assert_eq!(
            udp_checksum(&[192, 0, 2, 1], &[192, 0, 2, 2], &udp),
            Some(0xAA21)
        );
        let mut a = [0u8; 16];
        a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        let mut b = a;
        a[15] = 1;
        b[15] = 2;
        assert_eq!(udp_checksum(&a, &b, &udp), Some(0xD2B0));
        // Stored, the sum over everything verifies (all ones).
        udp[6..8].copy_from_slice(&0xAA21u16.to_be_bytes());
        assert_eq!(
            udp_checksum(&[192, 0, 2, 1], &[192, 0, 2, 2], &udp),
            Some(0xFFFF)
        );
        assert_eq!(udp_checksum(&[1, 2, 3, 4], &a, &udp), None);
        let (s4, d4) = ([192, 0, 2, 1], [192, 0, 2, 2]);
        assert_eq!(udp_checksum_ok(&s4, &d4, &udp), Some(true));
        assert_eq!(udp_checksum_ok(&s4, &a, &udp), None);
        udp[9] ^= 0x40;
        assert_eq!(udp_checksum_ok(&s4, &d4, &udp), Some(false));
        udp[9] ^= 0x40;
        udp[6..8].copy_from_slice(&[0, 0]);
        assert_eq!(udp_checksum_ok(&s4, &d4, &udp), Some(false));
        // The pseudo-header sum by hand: c000 + 0201 + c000 + 0202 + 0011
        // + 000b = 1841f, folded 8420.
        assert_eq!(udp_pseudo_sum(&s4, &d4, 11), Some(0x8420));
        assert_eq!(udp_pseudo_sum(&s4, &a, 11), None);
    }

    fn data() -> DataHdr {
        DataHdr {
            retx: true,
            se: false,
            path: 7,
            op: MrcOp::WriteImm,
            conn: 0xDEAD_BEEF,
            path_seq: 0xFFFF_FFFF,
            path_floor: 0xFFFF_FFF0,
            stream: 0x12_3456,
            dsn: 99,
            msn: 3,
            rsn: 2,
            msg_len: 10_000,
            offset: 8192,
            va: 0x1122_3344_5566_7788,
            rkey: 0xABCD,
            imm: 0x0102_0304,
            len: 1808,
        }
    }

    #[test]
    fn data_round_trip_and_layout() {
        let h = data();
        let mut buf = [0u8; DATA_HDR_LEN + 1808];
        assert_eq!(h.write(&mut buf), Some(DATA_HDR_LEN));
        assert_eq!(buf[0], 0x11);
        assert_eq!(buf[2], 7);
        assert_eq!(buf[3], 3);
        assert_eq!(&buf[16..20], &[0, 0x12, 0x34, 0x56]);
        assert_eq!(&buf[56..58], &1808u16.to_be_bytes());
        match parse(&buf) {
            Ok(MrcPacket::Data(d, p)) => {
                assert_eq!(d, h);
                assert_eq!(p.len(), 1808);
            }
            other => panic!("{other:?}"),
        }
        // Truncated payload, and every truncated header.
        assert_eq!(parse(&buf[..DATA_HDR_LEN + 1807]), Err(MrcError::Truncated));
        for n in 0..DATA_HDR_LEN {
            assert_eq!(parse(&buf[..n]), Err(MrcError::Truncated), "{n}");
        }
        assert_eq!(h.write(&mut [0u8; DATA_HDR_LEN - 1]), None);
    }

    #[test]
    fn ack_round_trip() {
        let a = AckPkt {
            path: 255,
            conn: 1,
            cum: 0xFFFF_FFFE,
            ack_seq: 3,
            rate_hint_kbps: 25_000_000,
            ce_count: 17,
            sack: [1, 0, u64::MAX, 1 << 63],
            rnr: false,
        };
        let mut buf = [0u8; ACK_LEN];
        assert_eq!(a.write(&mut buf), Some(ACK_LEN));
        assert_eq!(parse(&buf), Ok(MrcPacket::Ack(a)));
        // The RNR flag (section 5.6) is the one flag an ACK may carry.
        let r = AckPkt { rnr: true, ..a };
        assert_eq!(r.write(&mut buf), Some(ACK_LEN));
        assert_eq!(buf[1], FLAG_RNR);
        assert_eq!(parse(&buf), Ok(MrcPacket::Ack(r)));
        buf[1] = FLAG_RNR | 0x20;
        assert_eq!(parse(&buf), Err(MrcError::Reserved));
        assert_eq!(a.write(&mut buf), Some(ACK_LEN));
        assert_eq!(&buf[24..32], &1u64.to_be_bytes());
        assert_eq!(parse(&buf[..ACK_LEN - 1]), Err(MrcError::Truncated));
    }

    #[test]
    fn probe_round_trip_and_layout() {
        let mut buf = [0u8; PROBE_LEN + 4];
        let p = ProbePkt {
            kind: ProbeKind::Proof,
            conn: 0x0102_0304,
            cookie: 0x1122_3344_5566_7788,
        };
        assert_eq!(p.write(&mut buf), Some(PROBE_LEN));
        assert_eq!(
            &buf[..PROBE_LEN],
            &[0x14, 0, 0, 0, 1, 2, 3, 4, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]
        );
        assert_eq!(parse(&buf), Ok(MrcPacket::Probe(p)));
        assert_eq!(parse(&buf[..PROBE_LEN - 1]), Err(MrcError::Truncated));
        assert_eq!(p.write(&mut buf[..PROBE_LEN - 1]), None);
        let c = ProbePkt {
            kind: ProbeKind::Challenge,
            conn: 0,
            cookie: 7,
        };
        c.write(&mut buf).unwrap();
        assert_eq!(buf[0], 0x13);
        assert_eq!(parse(&buf), Ok(MrcPacket::Probe(c)));
        // A CHALLENGE names no ConnId; flags, PathId and byte 3 are reserved in both.
        for (at, v) in [(4, 1), (1, 0x80), (2, 1), (3, 1)] {
            let mut b = buf;
            b[at] = v;
            assert_eq!(parse(&b), Err(MrcError::Reserved), "byte {at}");
        }
    }

    #[test]
    fn malformed() {
        let mut buf = [0u8; DATA_HDR_LEN + 1808];
        data().write(&mut buf).unwrap();
        let bad = |f: &dyn Fn(&mut [u8])| {
            let mut b = buf;
            f(&mut b);
            parse(&b).map(|_| ())
        };
        assert_eq!(bad(&|b| b[0] = 0x21), Err(MrcError::BadVersion(2)));
        assert_eq!(bad(&|b| b[0] = 0x15), Err(MrcError::BadType(5)));
        assert_eq!(bad(&|b| b[3] = 11), Err(MrcError::BadOpcode(11)));
        assert_eq!(bad(&|b| b[1] = 1), Err(MrcError::Reserved));
        assert_eq!(bad(&|b| b[16] = 1), Err(MrcError::Reserved));
        assert_eq!(bad(&|b| b[59] = 1), Err(MrcError::Reserved));
        // offset + len beyond the message, offset overflowing.
        assert_eq!(bad(&|b| b[35] = 0), Err(MrcError::BadLength));
        assert_eq!(bad(&|b| b[36] = 0xFF), Err(MrcError::BadLength));
        // payload above the largest MTU
        assert_eq!(bad(&|b| b[56] = 0x20), Err(MrcError::BadLength));
        // a SEND carrying a remote address
        assert_eq!(bad(&|b| b[3] = 0), Err(MrcError::BadPlacement));
        // immediate data on a WRITE
        assert_eq!(
            bad(&|b| {
                b[3] = 2;
                b[31] = 0;
                b[30] = 0;
            }),
            Err(MrcError::BadPlacement)
        );
        // ACK with a reserved byte set
        let mut ack = [0u8; ACK_LEN];
        AckPkt::default().write(&mut ack).unwrap();
        ack[3] = 1;
        assert_eq!(parse(&ack), Err(MrcError::Reserved));
    }

    #[test]
    fn request_and_response_opcodes() {
        let base = DataHdr {
            retx: false,
            se: false,
            path: 1,
            op: MrcOp::Read,
            conn: 5,
            path_seq: 1,
            path_floor: 0,
            stream: 9,
            dsn: 4,
            msn: 3,
            rsn: 0,
            msg_len: 70_000,
            offset: 0,
            va: 0x1000,
            rkey: 7,
            imm: 0,
            len: 0,
        };
        let resp = DataHdr {
            op: MrcOp::ReadResp,
            offset: 4096,
            len: 100,
            va: 0,
            rkey: 0,
            ..base
        };
        let nak = DataHdr {
            op: MrcOp::Nak,
            msg_len: 0,
            va: 0,
            rkey: 0,
            imm: NakCode::RemoteAccess.to_u32(),
            ..base
        };
        let cas = DataHdr {
            op: MrcOp::CmpSwap,
            msg_len: 16,
            len: 16,
            ..base
        };
        let ares = DataHdr {
            op: MrcOp::AtomicResp,
            msg_len: 8,
            va: u64::MAX,
            rkey: 0,
            ..base
        };
        let mut buf = [0u8; DATA_HDR_LEN + 100];
        for h in [base, resp, nak, cas, ares] {
            let n = h.write(&mut buf).unwrap() + usize::from(h.len);
            match parse(&buf[..n]) {
                Ok(MrcPacket::Data(d, p)) => assert_eq!((d, p.len()), (h, usize::from(h.len))),
                other => panic!("{h:?}: {other:?}"),
            }
        }
        let mut bad = |h: DataHdr| {
            let n = h.write(&mut buf).unwrap();
            parse(&buf[..n + usize::from(h.len)]).map(|_| ())
        };
        assert_eq!(
            bad(DataHdr {
                len: 1,
                msg_len: 1,
                ..base
            }),
            Err(MrcError::BadLength)
        );
        assert_eq!(bad(DataHdr { offset: 1, ..base }), Err(MrcError::BadLength));
        assert_eq!(bad(DataHdr { rsn: 1, ..base }), Err(MrcError::BadPlacement));
        assert_eq!(bad(DataHdr { imm: 1, ..base }), Err(MrcError::BadPlacement));
        assert_eq!(
            bad(DataHdr { rkey: 1, ..resp }),
            Err(MrcError::BadPlacement)
        );
        assert_eq!(bad(DataHdr { va: 1, ..resp }), Err(MrcError::BadPlacement));
        assert_eq!(bad(DataHdr { imm: 4, ..nak }), Err(MrcError::BadPlacement));
        assert_eq!(bad(DataHdr { imm: 0, ..nak }), Err(MrcError::BadPlacement));
        assert_eq!(bad(DataHdr { msg_len: 1, ..nak }), Err(MrcError::BadLength));
        assert_eq!(bad(DataHdr { len: 8, ..cas }), Err(MrcError::BadLength));
        assert_eq!(
            bad(DataHdr {
                msg_len: 8,
                len: 8,
                ..cas
            }),
            Err(MrcError::BadLength)
        );
        assert_eq!(
            bad(DataHdr {
                msg_len: 16,
                ..ares
            }),
            Err(MrcError::BadLength)
        );
        assert_eq!(
            bad(DataHdr { rkey: 1, ..ares }),
            Err(MrcError::BadPlacement)
        );
        for v in 0..=255u8 {
            if let Some(op) = MrcOp::from_u8(v) {
                assert_eq!(op.to_u8(), v);
                // Exactly one of: plain data, request, response.
                let kinds = [
                    op.is_request(),
                    op.is_response(),
                    !op.is_request() && !op.is_response(),
                ];
                assert_eq!(kinds.iter().filter(|&&k| k).count(), 1);
                assert!(!(op.consumes_recv() && (op.is_request() || op.is_response())));
            } else {
                assert!(v > 10);
            }
        }
    }

    #[test]
    fn send_inv_carries_its_key_in_rkey() {
        let h = DataHdr {
            op: MrcOp::SendInv,
            rsn: 4,
            va: 0,
            rkey: 0x1234_5601,
            imm: 0,
            ..data()
        };
        let mut buf = [0u8; DATA_HDR_LEN + 1808];
        h.write(&mut buf).unwrap();
        assert_eq!(buf[3], 10);
        assert_eq!(&buf[48..52], &0x1234_5601u32.to_be_bytes());
        match parse(&buf) {
            Ok(MrcPacket::Data(d, _)) => assert_eq!(d, h),
            other => panic!("{other:?}"),
        }
        assert!(h.op.consumes_recv() && h.op.invalidates() && !h.op.has_imm());
        assert!(!h.op.has_remote() && !h.op.is_request() && !h.op.is_response());
        // Key 0 is a key like any other on the wire (the glue refuses it).
        let zero = DataHdr { rkey: 0, ..h };
        zero.write(&mut buf).unwrap();
        assert!(parse(&buf).is_ok());
        let mut bad = |h: DataHdr| {
            h.write(&mut buf).unwrap();
            parse(&buf).map(|_| ())
        };
        // No RemoteVa and no immediate data.
        assert_eq!(bad(DataHdr { va: 8, ..h }), Err(MrcError::BadPlacement));
        assert_eq!(bad(DataHdr { imm: 1, ..h }), Err(MrcError::BadPlacement));
        for op in [MrcOp::Send, MrcOp::SendImm, MrcOp::ReadResp] {
            assert!(!op.invalidates());
        }
    }

    #[test]
    fn never_panics_on_noise() {
        // A small deterministic fuzz: xorshift noise with a valid first byte
        // half of the time.
        let mut x: u64 = 0x1234_5678;
        let mut buf = [0u8; 200];
        for i in 0..20_000 {
            for b in buf.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            if i % 2 == 0 {
                buf[0] = 0x11 + (i as u8 & 1);
            }
            let _ = parse(&buf[..(x as usize % 200)]);
        }
    }

    /// The sum as RFC 768 states it: one 16-bit word at a time.
    fn sum_words_16(mut sum: u64, b: &[u8]) -> u64 {
        for w in b.chunks(2) {
            let hi = u64::from(w[0]) << 8;
            sum += hi + w.get(1).map_or(0, |&lo| u64::from(lo));
        }
        sum
    }

    proptest::proptest! {
        #[test]
        fn wide_sum_matches_16_bit_words(
            seed: u64,
            data in proptest::collection::vec(proptest::num::u8::ANY, 0..9100),
            v6: bool,
        ) {
            let a: &[u8] = if v6 { &[0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1] } else { &[192, 0, 2, 1] };
            let seed = seed % (1 << 40);
            proptest::prop_assert_eq!(fold(sum_words(seed, &data)), fold(sum_words_16(seed, &data)));
            let len = u16::try_from(data.len()).unwrap();
            let reference = !fold(sum_words_16(pseudo_header(a, a, len).unwrap(), &data));
            let reference = if reference == 0 { 0xFFFF } else { reference };
            proptest::prop_assert_eq!(udp_checksum(a, a, &data), Some(reference));
        }
    }
}
