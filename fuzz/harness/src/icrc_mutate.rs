// SPDX-License-Identifier: GPL-2.0
//! Target `icrc_mutate`: the captured fixture packets with bit flips, a
//! burst error, truncation or extra bytes, through the receive path the
//! kernel glue uses (verify the ICRC, then parse).
//!
//! * Up to three flipped bits, or one burst of up to 32 bits, anywhere in
//!   the bytes the ICRC covers (IP and UDP headers except their variant
//!   fields, BTH, extended headers, payload, pad, ICRC): the check must fail
//!   and the packet never reaches the parser. CRC-32 detects every such
//!   error at these lengths (Hamming distance 4 below 91,607 bits).
//! * The same changes confined to the variant fields (IPv4 TOS, TTL and
//!   checksum, IPv6 traffic class, flow label and hop limit, UDP checksum,
//!   BTH byte 4): the check must pass and the packet parse as before except
//!   for the BTH reserved byte.
//! * A truncated packet (with the original IP and UDP headers) must fail
//!   the check; a packet with bytes appended may pass only if it then also
//!   parses consistently.
//! * Whatever the mutation, recomputing the ICRC (`icrc_write`) makes the
//!   check pass.

use super::enc::bytes;
use super::fixtures::{all, Fixture};
use super::packet::check_parsed;
use arbitrary::{Result, Unstructured};
use metaroce_proto::icrc::{icrc_verify, icrc_write, IcrcError, IPV4_HDR_LEN, UDP_HDR_LEN};
use metaroce_proto::packet::{parse, Packet, ParseError};

/// Why the receive path refused a packet.
#[derive(Debug, PartialEq, Eq)]
pub enum Reject {
    /// ICRC check.
    Icrc(IcrcError),
    /// Parser.
    Parse(ParseError),
}

/// The glue's receive path: the ICRC is checked before the parser runs.
pub fn receive_checked<'a>(
    ip: &[u8],
    udp: &[u8],
    ib: &'a [u8],
) -> core::result::Result<Packet<'a>, Reject> {
    icrc_verify(ip, udp, ib).map_err(Reject::Icrc)?;
    parse(ib).map_err(Reject::Parse)
}

/// True for the bits of `fx.raw[pos]` the ICRC does not cover.
pub fn masked_bits(fx: &Fixture, pos: usize) -> u8 {
    let ip = fx.ip_len;
    if ip == IPV4_HDR_LEN {
        if matches!(pos, 1 | 8 | 10 | 11) {
            return 0xFF;
        }
    } else {
        match pos {
            0 => return 0x0F,
            1..=3 | 7 => return 0xFF,
            _ => {}
        }
    }
    if pos == ip + 6 || pos == ip + 7 || pos == ip + UDP_HDR_LEN + 4 {
        return 0xFF;
    }
    0
}

enum Mutation {
    Flips(Vec<(u16, u8)>),
    Burst(u16, u32),
    Truncate(u16),
    Extend(Vec<u8>),
}

fn decode(u: &mut Unstructured<'_>) -> Result<(usize, Mutation)> {
    let fx: u8 = u.arbitrary()?;
    let mode: u8 = u.arbitrary()?;
    let m = match mode % 4 {
        0 => {
            let n: u8 = u.arbitrary()?;
            let mut v = Vec::new();
            for _ in 0..=(n % 3) {
                v.push((u.arbitrary()?, u.arbitrary()?));
            }
            Mutation::Flips(v)
        }
        1 => Mutation::Burst(u.arbitrary()?, u.arbitrary()?),
        2 => Mutation::Truncate(u.arbitrary()?),
        _ => Mutation::Extend(bytes(u)?.to_vec()),
    };
    Ok((usize::from(fx), m))
}

/// Runs one input.
pub fn run(data: &[u8]) {
    let Ok((sel, mutation)) = decode(&mut Unstructured::new(data)) else {
        return;
    };
    let fixtures = all();
    let fx = &fixtures[sel % fixtures.len()];
    let hdrs = fx.ip_len + UDP_HDR_LEN;
    let orig = parse(fx.ib()).expect("fixture does not parse");
    assert_eq!(receive_checked(fx.ip(), fx.udp(), fx.ib()), Ok(orig));
    let mut raw = fx.raw.clone();
    let bounded = match mutation {
        Mutation::Flips(v) => {
            for (pos, bit) in v {
                let pos = usize::from(pos) % raw.len();
                raw[pos] ^= 1 << (bit % 8);
            }
            true
        }
        Mutation::Burst(pos, pattern) => {
            let pos = usize::from(pos) % raw.len();
            for (i, b) in pattern.max(1).to_le_bytes().iter().enumerate() {
                if let Some(x) = raw.get_mut(pos + i) {
                    *x ^= b;
                }
            }
            true
        }
        Mutation::Truncate(n) => {
            let ib_len = raw.len() - hdrs;
            let cut = 1 + usize::from(n) % ib_len;
            raw.truncate(raw.len() - cut);
            let (ip, rest) = raw.split_at(fx.ip_len);
            let (udp, ib) = rest.split_at(UDP_HDR_LEN);
            assert!(
                receive_checked(ip, udp, ib).is_err(),
                "{}: truncated by {cut} bytes accepted",
                fx.name
            );
            false
        }
        Mutation::Extend(extra) => {
            raw.extend_from_slice(&extra);
            false
        }
    };
    let (ip, rest) = raw.split_at(fx.ip_len);
    let (udp, ib) = rest.split_at(UDP_HDR_LEN);
    let got = receive_checked(ip, udp, ib);
    if let Ok(p) = &got {
        check_parsed(ib, p);
    }
    if bounded {
        let covered_change = raw
            .iter()
            .zip(&fx.raw)
            .enumerate()
            .any(|(i, (a, b))| (a ^ b) & !masked_bits(fx, i) != 0);
        if covered_change {
            assert!(
                matches!(got, Err(Reject::Icrc(_))),
                "{}: corrupted packet passed the ICRC check: {got:?}",
                fx.name
            );
        } else {
            let mut want = orig;
            want.hdr.bth.resv8 = ib[4];
            assert_eq!(got, Ok(want), "{}: change in variant fields only", fx.name);
        }
    }
    // Recomputing the ICRC always makes the packet pass the check.
    if raw.len() >= hdrs + 4 {
        let mut fixed = raw.clone();
        let (ip, rest) = fixed.split_at_mut(fx.ip_len);
        let (udp, ib) = rest.split_at_mut(UDP_HDR_LEN);
        match icrc_write(ip, udp, ib) {
            Ok(()) => assert_eq!(icrc_verify(ip, udp, ib), Ok(())),
            Err(e) => assert!(
                matches!(e, IcrcError::BadIpHeader | IcrcError::Truncated),
                "{}: {e:?}",
                fx.name
            ),
        }
    }
}
