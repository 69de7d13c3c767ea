// SPDX-License-Identifier: GPL-2.0
//! Target `mrc_packet`: arbitrary bytes (a UDP payload on the native port)
//! into the MetaRoCE native parser (`mrc_wire::parse`, which holds the DATA
//! and ACK decoders) and the header encoders.
//!
//! The bytes are also decoded by an independent reference reader written
//! from `Documentation/metaroce/transport.rst`, section 3 (byte offsets,
//! big-endian fields, the "checks on receive"), and the two must agree:
//! * a packet the parser accepts is one the reference accepts, field by
//!   field; its payload is exactly `PayloadLen` bytes right after the
//!   60-byte header; trailing bytes are ignored; re-encoding the header
//!   (`DataHdr::write`, `AckPkt::write`) gives back the same bytes and
//!   parses to the same packet; a buffer one byte short is refused;
//! * a packet the parser refuses is one the reference refuses, and the
//!   error names a rule the bytes really break. The spec does not order
//!   the checks, so when several rules are broken any of them may be
//!   reported. Where it is silent the reference follows the parser's
//!   reading order and says so: fewer than the 8 common bytes is
//!   `Truncated`, then the version, then the type; a DATA header shorter
//!   than 60 bytes is `Truncated` before any of its fields is judged;
//! * every prefix of an accepted packet shorter than header + payload is
//!   refused as `Truncated`.

use metaroce_proto::mrc_wire::{
    parse, AckPkt, DataHdr, MrcError, MrcOp, MrcPacket, ProbeKind, ProbePkt, ACK_LEN,
    DATA_HDR_LEN, MAX_MSG_LEN, MAX_PAYLOAD, PROBE_LEN, VERSION,
};

/// Runs one input.
pub fn run(data: &[u8]) {
    let got = parse(data);
    let want = reference(data);
    match (&got, &want) {
        (Ok(p), Ok(r)) => {
            assert_eq!(p, r, "parser and spec decode differently");
            check_accepted(data, p);
        }
        (Err(e), Err(errs)) => {
            assert!(
                errs.contains(e),
                "parser says {e:?}, the spec's rules broken are {errs:?}"
            );
        }
        (Ok(p), Err(errs)) => panic!("parser accepted {p:?}, the spec refuses it: {errs:?}"),
        (Err(e), Ok(r)) => panic!("parser refused ({e:?}) a packet the spec accepts: {r:?}"),
    }
    // The opcode decoder on every byte value present.
    if let Some(&b) = data.get(3) {
        match MrcOp::from_u8(b) {
            Some(op) => assert_eq!(op.to_u8(), b),
            None => assert!(b > 10),
        }
    }
}

fn be16(d: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([d[at], d[at + 1]])
}

fn be32(d: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(d[at..at + 4].try_into().unwrap())
}

fn be64(d: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(d[at..at + 8].try_into().unwrap())
}

/// The spec's reading of `d`: the packet, or every rule the bytes break.
fn reference(d: &[u8]) -> Result<MrcPacket<'_>, Vec<MrcError>> {
    // The 8 common bytes (version/type, flags, path, opcode, ConnId).
    if d.len() < 8 {
        return Err(vec![MrcError::Truncated]);
    }
    let version = d[0] >> 4;
    if version != VERSION {
        return Err(vec![MrcError::BadVersion(version)]);
    }
    let (flags, path, opb, conn) = (d[1], d[2], d[3], be32(d, 4));
    match d[0] & 0x0F {
        1 => {}
        2 => {
            let mut errs = Vec::new();
            // ACK byte 1: the RNR flag (0x40, section 5.6), the rest and byte 3 reserved.
            if flags & !0x40 != 0 || opb != 0 {
                errs.push(MrcError::Reserved);
            }
            if d.len() < ACK_LEN {
                errs.push(MrcError::Truncated);
            }
            if !errs.is_empty() {
                return Err(errs);
            }
            let sack = [be64(d, 24), be64(d, 32), be64(d, 40), be64(d, 48)];
            return Ok(MrcPacket::Ack(AckPkt {
                path,
                conn,
                cum: be32(d, 8),
                ack_seq: be32(d, 12),
                rate_hint_kbps: be32(d, 16),
                ce_count: be32(d, 20),
                sack,
                rnr: flags & 0x40 != 0,
            }));
        }
        t @ (3 | 4) => {
            // CHALLENGE and PROOF (section 7.1): flags, PathId and byte 3 reserved, and a
            // CHALLENGE's ConnId; then the 8-byte cookie.
            let mut errs = Vec::new();
            if flags != 0 || path != 0 || opb != 0 || (t == 3 && conn != 0) {
                errs.push(MrcError::Reserved);
            }
            if d.len() < PROBE_LEN {
                errs.push(MrcError::Truncated);
            }
            if !errs.is_empty() {
                return Err(errs);
            }
            let kind = if t == 3 {
                ProbeKind::Challenge
            } else {
                ProbeKind::Proof
            };
            return Ok(MrcPacket::Probe(ProbePkt {
                kind,
                conn,
                cookie: be64(d, 8),
            }));
        }
        t => return Err(vec![MrcError::BadType(t)]),
    }
    // DATA: the whole 60-byte header is needed before any field is judged
    // (the spec is silent on the order; the parser reads the header first).
    if d.len() < DATA_HDR_LEN {
        return Err(vec![MrcError::Truncated]);
    }
    let mut errs = Vec::new();
    let op = MrcOp::from_u8(opb);
    if op.is_none() {
        errs.push(MrcError::BadOpcode(opb));
    }
    let stream = be32(d, 16);
    let (rsn, msg_len, offset) = (be32(d, 28), be32(d, 32), be32(d, 36));
    let (va, rkey, imm, len) = (be64(d, 40), be32(d, 48), be32(d, 52), be16(d, 56));
    // Flags bits 5:0, StreamId bits 31:24 and bytes 58-59 are reserved.
    if flags & 0x3F != 0 || stream >> 24 != 0 || be16(d, 58) != 0 {
        errs.push(MrcError::Reserved);
    }
    // Offset + PayloadLen <= MsgLen (checked arithmetic), MsgLen <= 2^31,
    // PayloadLen <= 4096.
    let end = u64::from(offset) + u64::from(len);
    if end > u64::from(msg_len) || msg_len > MAX_MSG_LEN || len > MAX_PAYLOAD {
        errs.push(MrcError::BadLength);
    }
    // Section 3.1's fixed lengths: READ Offset = PayloadLen = 0; NAK
    // MsgLen = 0; CMP_SWAP/FETCH_ADD MsgLen = PayloadLen = 16, Offset 0;
    // ATOMIC_RESP MsgLen 8, Offset = PayloadLen = 0.
    let fixed_len_bad = match opb {
        4 => offset != 0 || len != 0,
        6 => msg_len != 0,
        7 | 8 => msg_len != 16 || offset != 0 || len != 16,
        9 => msg_len != 8 || offset != 0 || len != 0,
        _ => false,
    };
    if fixed_len_bad {
        errs.push(MrcError::BadLength);
    }
    if let Some(op) = op {
        // Sends carry RemoteVa = 0 and, but for SEND_INV (its key), RKey =
        // 0, WRITE carries Rsn = 0, Imm = 0 unless the opcode carries one;
        // READ and atomic requests Rsn = 0; READ_RESP and NAK Rsn = RemoteVa
        // = RKey = 0; ATOMIC_RESP Rsn = RKey = 0; a NAK's Imm is a code
        // 1..=3.
        let bad = match opb {
            0 | 1 => va != 0 || rkey != 0,
            10 => va != 0,
            2 | 4 | 7 | 8 => rsn != 0,
            3 => false,
            5 => rsn != 0 || va != 0 || rkey != 0,
            6 => rsn != 0 || va != 0 || rkey != 0 || !(1..=3).contains(&imm),
            _ => rsn != 0 || rkey != 0,
        } || (!matches!(opb, 1 | 3 | 6) && imm != 0);
        if bad {
            errs.push(MrcError::BadPlacement);
        }
        let _ = op;
    }
    // Fewer payload bytes than PayloadLen: Truncated; more are ignored.
    if d.len() - DATA_HDR_LEN < usize::from(len) {
        errs.push(MrcError::Truncated);
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    let hdr = DataHdr {
        retx: flags & 0x80 != 0,
        se: flags & 0x40 != 0,
        path,
        op: op.unwrap(),
        conn,
        path_seq: be32(d, 8),
        path_floor: be32(d, 12),
        stream,
        dsn: be32(d, 20),
        msn: be32(d, 24),
        rsn,
        msg_len,
        offset,
        va,
        rkey,
        imm,
        len,
    };
    Ok(MrcPacket::Data(
        hdr,
        &d[DATA_HDR_LEN..DATA_HDR_LEN + usize::from(len)],
    ))
}

fn check_accepted(data: &[u8], p: &MrcPacket<'_>) {
    match p {
        MrcPacket::Data(h, payload) => {
            let n = DATA_HDR_LEN + usize::from(h.len);
            assert_eq!(payload.len(), usize::from(h.len));
            assert_eq!(
                payload.as_ptr() as usize - data.as_ptr() as usize,
                DATA_HDR_LEN,
                "payload not after the header"
            );
            let mut out = [0xEEu8; DATA_HDR_LEN + 1];
            assert_eq!(h.write(&mut out), Some(DATA_HDR_LEN));
            assert_eq!(
                &out[..DATA_HDR_LEN],
                &data[..DATA_HDR_LEN],
                "DATA header re-encodes differently"
            );
            assert_eq!(out[DATA_HDR_LEN], 0xEE, "header write past its 60 bytes");
            assert_eq!(
                h.write(&mut out[..DATA_HDR_LEN - 1]),
                None,
                "short buffer accepted"
            );
            // The exact packet (no trailing bytes) parses to the same thing,
            // and every shorter prefix is truncated.
            assert_eq!(parse(&data[..n]).as_ref(), Ok(p));
            let mut re = out[..DATA_HDR_LEN].to_vec();
            re.extend_from_slice(payload);
            assert_eq!(parse(&re).as_ref(), Ok(p));
            for cut in [0, 7, 8, DATA_HDR_LEN - 1, DATA_HDR_LEN, n.saturating_sub(1)] {
                if cut < n {
                    assert_eq!(
                        parse(&data[..cut]).err(),
                        Some(MrcError::Truncated),
                        "prefix of {cut} bytes"
                    );
                }
            }
        }
        MrcPacket::Ack(a) => {
            let mut out = [0xEEu8; ACK_LEN + 1];
            assert_eq!(a.write(&mut out), Some(ACK_LEN));
            assert_eq!(
                &out[..ACK_LEN],
                &data[..ACK_LEN],
                "ACK re-encodes differently"
            );
            assert_eq!(out[ACK_LEN], 0xEE, "ACK write past its 56 bytes");
            assert_eq!(
                a.write(&mut out[..ACK_LEN - 1]),
                None,
                "short buffer accepted"
            );
            assert_eq!(parse(&data[..ACK_LEN]).as_ref(), Ok(p));
            for cut in [0, 7, 8, ACK_LEN - 1] {
                assert_eq!(
                    parse(&data[..cut]).err(),
                    Some(MrcError::Truncated),
                    "prefix of {cut} bytes"
                );
            }
        }
        MrcPacket::Probe(q) => {
            let mut out = [0xEEu8; PROBE_LEN + 1];
            assert_eq!(q.write(&mut out), Some(PROBE_LEN));
            assert_eq!(&out[..PROBE_LEN], &data[..PROBE_LEN], "probe re-encodes differently");
            assert_eq!(out[PROBE_LEN], 0xEE, "probe write past its 16 bytes");
            assert_eq!(q.write(&mut out[..PROBE_LEN - 1]), None, "short buffer accepted");
            assert_eq!(parse(&data[..PROBE_LEN]).as_ref(), Ok(p));
            for cut in [0, 7, 8, PROBE_LEN - 1] {
                assert_eq!(
                    parse(&data[..cut]).err(),
                    Some(MrcError::Truncated),
                    "prefix of {cut} bytes"
                );
            }
        }
    }
}
