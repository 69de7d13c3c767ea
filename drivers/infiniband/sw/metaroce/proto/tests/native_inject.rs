// SPDX-License-Identifier: GPL-2.0
//! The packets of `selftests/metaroce/native_inject.py` (its `--emit` output,
//! `tests/fixtures/native-inject.txt`) through the codec: each must be refused
//! for the reason the injector built it for, and each well-formed one must
//! decode to fields that encode back to the same bytes (the injector's field
//! offsets are the codec's). The injector's self-check compares its builders
//! with the same file, so neither side can drift alone.

use metaroce_proto::mrc_wire::{parse, MrcError, MrcPacket, ACK_LEN, DATA_HDR_LEN};

fn class(e: MrcError) -> &'static str {
    match e {
        MrcError::Truncated => "Truncated",
        MrcError::BadVersion(_) => "BadVersion",
        MrcError::BadType(_) => "BadType",
        MrcError::BadOpcode(_) => "BadOpcode",
        MrcError::Reserved => "Reserved",
        MrcError::BadLength => "BadLength",
        MrcError::BadPlacement => "BadPlacement",
    }
}

fn unhex(s: &str) -> Vec<u8> {
    if s == "-" {
        return Vec::new();
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn injector_packets_decode_as_built() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/native-inject.txt");
    let text = std::fs::read_to_string(path).unwrap();
    let mut n = 0;
    let mut kinds = std::collections::BTreeSet::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split(' ').collect();
        assert_eq!(f.len(), 4, "{line}");
        let (kind, want, pkt) = (f[0], f[2], unhex(f[3]));
        let got = match parse(&pkt) {
            Ok(MrcPacket::Data(h, payload)) => {
                let mut buf = [0u8; DATA_HDR_LEN];
                assert_eq!(h.write(&mut buf), Some(DATA_HDR_LEN));
                assert_eq!(&buf[..], &pkt[..DATA_HDR_LEN], "{kind} #{}: header re-encoded", f[1]);
                assert_eq!(payload.len(), usize::from(h.len));
                "DATA"
            }
            Ok(MrcPacket::Ack(a)) => {
                let mut buf = [0u8; ACK_LEN];
                assert_eq!(a.write(&mut buf), Some(ACK_LEN));
                assert_eq!(&buf[..], &pkt[..], "{kind} #{}: ACK re-encoded", f[1]);
                "ACK"
            }
            Err(e) => class(e),
        };
        assert_eq!(got, want, "{kind} #{}: {}", f[1], f[3]);
        kinds.insert(kind.to_owned());
        n += 1;
    }
    assert!(n >= 300 && kinds.len() >= 21, "{n} packets of {} kinds", kinds.len());
}
