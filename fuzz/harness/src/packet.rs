// SPDX-License-Identifier: GPL-2.0
//! Target `packet`: the parser on arbitrary bytes (a UDP payload, BTH to
//! ICRC), and every header codec on the same bytes.
//!
//! Invariants checked for bytes that parse:
//! * the headers present are exactly those of the opcode, and headers,
//!   payload, pad and ICRC add up to the buffer, 4-byte aligned;
//! * the payload is the slice right after the headers, the ICRC the last
//!   four bytes (little-endian), opcodes without payload have none;
//! * re-encoding (`build`, `write_headers`, `wire_len`) gives back the same
//!   bytes (the pad as zeros) and parsing those gives the same packet.
//!
//! Each header reader (BTH, RETH, AETH, AtomicETH, AtomicAckETH, DETH,
//! FETH) is also run on the front of the bytes: what it accepts must
//! re-encode to the identical bytes (for the FETH: only bits 0-5 may be
//! set, placement in 0-15, selectivity in 0-3).

use metaroce_proto::bth::{Bth, BTH_LEN};
use metaroce_proto::ext::{Aeth, AtomicAckEth, AtomicEth, Deth, Feth, Reth, Syndrome};
use metaroce_proto::opcode::Opcode;
use metaroce_proto::packet::{
    build, pad_for, parse, wire_len, write_headers, Packet, ParseError, ICRC_LEN,
};
use metaroce_proto::wire::{Reader, Writer};

/// Runs one input.
pub fn run(data: &[u8]) {
    codecs(data);
    match parse(data) {
        Ok(p) => check_parsed(data, &p),
        Err(e) => check_error(data, e),
    }
}

/// Checks a successfully parsed packet against its bytes (also used by the
/// other targets).
pub fn check_parsed(data: &[u8], p: &Packet<'_>) {
    let info = p.hdr.bth.opcode.info();
    assert_eq!(p.hdr.exts(), info.exts, "headers do not match the opcode");
    let hlen = p.hdr.hdr_len();
    let pad = usize::from(p.hdr.bth.pad);
    let plen = p.payload.len();
    assert_eq!(
        hlen + plen + pad + ICRC_LEN,
        data.len(),
        "lengths do not add up"
    );
    assert_eq!((hlen + plen + pad) % 4, 0, "not 4-byte aligned");
    assert!(pad < 4);
    assert_eq!(
        pad,
        usize::from(pad_for(plen)),
        "pad is not the one of the payload"
    );
    if !info.payload {
        assert!(plen == 0 && pad == 0, "payload on an opcode without one");
    }
    // The payload borrows the bytes right after the headers.
    assert_eq!(
        p.payload.as_ptr() as usize - data.as_ptr() as usize,
        hlen,
        "payload is not right after the headers"
    );
    let tail: [u8; 4] = data[data.len() - ICRC_LEN..].try_into().unwrap();
    assert_eq!(p.icrc, u32::from_le_bytes(tail));
    // Re-encode.
    assert_eq!(wire_len(&p.hdr, plen), Some(data.len()));
    let mut out = vec![0xEEu8; data.len() + 8];
    assert_eq!(write_headers(&p.hdr, plen, &mut out), Ok(hlen));
    assert_eq!(&out[..hlen], &data[..hlen], "headers re-encode differently");
    let mut out = vec![0xEEu8; data.len()];
    assert_eq!(build(&p.hdr, p.payload, &mut out), Ok(data.len()));
    let end = hlen + plen;
    assert_eq!(&out[..end], &data[..end], "packet re-encodes differently");
    assert!(
        out[end..].iter().all(|&b| b == 0),
        "pad and ICRC slot not zeroed"
    );
    // A buffer one byte short is refused.
    let mut short = vec![0u8; data.len() - 1];
    assert!(build(&p.hdr, p.payload, &mut short).is_err());
    // And the re-encoded packet parses to the same thing.
    out[data.len() - ICRC_LEN..].copy_from_slice(&data[data.len() - ICRC_LEN..]);
    let q = parse(&out).expect("re-encoded packet does not parse");
    assert_eq!(q.hdr, p.hdr);
    assert_eq!(q.payload, p.payload);
    assert_eq!(q.icrc, p.icrc);
}

fn check_error(data: &[u8], e: ParseError) {
    match e {
        ParseError::Truncated => {}
        ParseError::UnknownOpcode(op) | ParseError::UnsupportedOpcode(op) => {
            assert_eq!(Some(&op), data.first(), "opcode error names another byte");
            assert!(
                Opcode::from_u8(op).is_none(),
                "supported opcode {op:#x} refused as {e:?}"
            );
        }
        ParseError::BadTver(v) => assert!(v != 0 && v < 16),
        ParseError::BadSyndrome(s) => assert!(Syndrome::decode(s).is_err()),
        ParseError::ReservedBits
        | ParseError::Misaligned
        | ParseError::BadPad
        | ParseError::UnexpectedPayload => {}
    }
}

fn same_bytes<const N: usize>(data: &[u8], write: impl Fn(&mut Writer<'_>) -> Option<()>) {
    let mut out = [0u8; N];
    let mut w = Writer::new(&mut out);
    assert!(write(&mut w).is_some(), "encoder refused a decoded header");
    assert_eq!(w.written(), N);
    assert_eq!(&out[..], &data[..N], "header re-encodes differently");
    // One byte too few is refused, never a panic.
    let mut small = [0u8; N];
    assert!(write(&mut Writer::new(&mut small[..N - 1])).is_none());
}

/// Runs every header reader on the front of `data`.
fn codecs(data: &[u8]) {
    if let Ok(b) = Bth::read(&mut Reader::new(data)) {
        same_bytes::<BTH_LEN>(data, |w| b.write(w));
    }
    if let Ok(h) = Reth::read(&mut Reader::new(data)) {
        same_bytes::<{ Reth::LEN }>(data, |w| h.write(w));
    }
    if let Ok(h) = Aeth::read(&mut Reader::new(data)) {
        same_bytes::<{ Aeth::LEN }>(data, |w| h.write(w));
        assert_eq!(h.msn >> 24, 0);
    }
    if let Ok(h) = AtomicEth::read(&mut Reader::new(data)) {
        same_bytes::<{ AtomicEth::LEN }>(data, |w| h.write(w));
    }
    if let Ok(h) = AtomicAckEth::read(&mut Reader::new(data)) {
        same_bytes::<{ AtomicAckEth::LEN }>(data, |w| h.write(w));
    }
    if let Ok(h) = Deth::read(&mut Reader::new(data)) {
        same_bytes::<{ Deth::LEN }>(data, |w| h.write(w));
    }
    // FETH: accepted exactly when the reserved bits (31-6) are zero.
    let feth = Feth::read(&mut Reader::new(data));
    match data.get(..Feth::LEN) {
        None => assert_eq!(feth, Err(ParseError::Truncated)),
        Some(b) => {
            let v = u32::from_be_bytes(b.try_into().unwrap());
            if v & !0x3F != 0 {
                assert_eq!(feth, Err(ParseError::ReservedBits), "FETH {v:#x}");
            } else {
                let h = feth.expect("FETH with clear reserved bits refused");
                assert_eq!(
                    (h.placement, h.selectivity),
                    ((v & 0xF) as u8, (v >> 4) as u8)
                );
                same_bytes::<{ Feth::LEN }>(data, |w| h.write(w));
            }
        }
    }
    if let Some(&b) = data.first() {
        match Syndrome::decode(b) {
            Ok(s) => assert_eq!(s.encode(), b),
            Err(e) => assert_eq!(e, ParseError::BadSyndrome(b)),
        }
    }
}
