// SPDX-License-Identifier: GPL-2.0
//! The captured packets of the selftests' `fixtures/` (IP header to ICRC),
//! compiled in so that the fuzz targets need no files at run time.

use metaroce_proto::icrc::{IPV4_HDR_LEN, IPV6_HDR_LEN, UDP_HDR_LEN};
use std::sync::OnceLock;

const HEX: &[(&str, &str)] = &[
    ("cx4lx-cnp-ipv4.hex", include_str!("../../../tools/testing/selftests/drivers/infiniband/metaroce/fixtures/cx4lx-cnp-ipv4.hex")),
    ("rxe-op00-ipv4.hex", include_str!("../../../tools/testing/selftests/drivers/infiniband/metaroce/fixtures/rxe-op00-ipv4.hex")),
    ("rxe-op01-ipv4.hex", include_str!("../../../tools/testing/selftests/drivers/infiniband/metaroce/fixtures/rxe-op01-ipv4.hex")),
    ("rxe-op02-ipv4.hex", include_str!("../../../tools/testing/selftests/drivers/infiniband/metaroce/fixtures/rxe-op02-ipv4.hex")),
    ("rxe-op0c-ipv4.hex", include_str!("../../../tools/testing/selftests/drivers/infiniband/metaroce/fixtures/rxe-op0c-ipv4.hex")),
    ("rxe-op0d-ipv4.hex", include_str!("../../../tools/testing/selftests/drivers/infiniband/metaroce/fixtures/rxe-op0d-ipv4.hex")),
    ("rxe-op0e-ipv4.hex", include_str!("../../../tools/testing/selftests/drivers/infiniband/metaroce/fixtures/rxe-op0e-ipv4.hex")),
    ("rxe-op0f-ipv4.hex", include_str!("../../../tools/testing/selftests/drivers/infiniband/metaroce/fixtures/rxe-op0f-ipv4.hex")),
    ("rxe-op11-ipv4.hex", include_str!("../../../tools/testing/selftests/drivers/infiniband/metaroce/fixtures/rxe-op11-ipv4.hex")),
    ("rxe-op12-ipv4.hex", include_str!("../../../tools/testing/selftests/drivers/infiniband/metaroce/fixtures/rxe-op12-ipv4.hex")),
    ("rxe-op14-ipv4.hex", include_str!("../../../tools/testing/selftests/drivers/infiniband/metaroce/fixtures/rxe-op14-ipv4.hex")),
    ("scapy-uc-send-only-ipv4.hex", include_str!("../../../tools/testing/selftests/drivers/infiniband/metaroce/fixtures/scapy-uc-send-only-ipv4.hex")),
];

/// One captured RoCEv2 packet.
pub struct Fixture {
    /// File name.
    pub name: &'static str,
    /// The whole packet, IP header to ICRC.
    pub raw: Vec<u8>,
    /// Length of the IP header.
    pub ip_len: usize,
}

impl Fixture {
    /// IP header.
    pub fn ip(&self) -> &[u8] {
        &self.raw[..self.ip_len]
    }
    /// UDP header.
    pub fn udp(&self) -> &[u8] {
        &self.raw[self.ip_len..self.ip_len + UDP_HDR_LEN]
    }
    /// UDP payload: BTH to ICRC.
    pub fn ib(&self) -> &[u8] {
        &self.raw[self.ip_len + UDP_HDR_LEN..]
    }
}

fn decode_hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .flat_map(|l| l.bytes().filter(|c| !c.is_ascii_whitespace()))
        .collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

/// Every fixture, in file-name order.
pub fn all() -> &'static [Fixture] {
    static ALL: OnceLock<Vec<Fixture>> = OnceLock::new();
    ALL.get_or_init(|| {
        HEX.iter()
            .map(|&(name, text)| {
                let raw = decode_hex(text);
                let ip_len = if raw[0] >> 4 == 6 {
                    IPV6_HDR_LEN
                } else {
                    IPV4_HDR_LEN
                };
                Fixture { name, raw, ip_len }
            })
            .collect()
    })
}
