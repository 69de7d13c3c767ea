//! Property tests for the header codecs, the packet parser and PSN math.

mod common;

use common::headers;
use metaroce_proto::packet::{build, pad_for, parse, wire_len, ParseError};
use metaroce_proto::psn::{Psn, PSN_MASK};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn round_trip_every_opcode(mut h in headers(), len in 0usize..300, fill in any::<u8>()) {
        let len = if h.bth.opcode.info().payload { len } else { 0 };
        h.bth.pad = pad_for(len);
        let payload = vec![fill; len];
        let mut buf = vec![0u8; 512];
        let n = build(&h, &payload, &mut buf).unwrap();
        prop_assert_eq!(Some(n), wire_len(&h, len));
        prop_assert_eq!(n % 4, 0);
        let p = parse(&buf[..n]).unwrap();
        prop_assert_eq!(p.hdr, h);
        prop_assert_eq!(p.payload, &payload[..]);
        // Any shorter buffer must fail cleanly, never panic.
        for cut in 0..n {
            let _ = parse(&buf[..cut]);
        }
    }

    #[test]
    fn parse_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..128)) {
        if let Ok(p) = parse(&bytes) {
            let hlen = p.hdr.hdr_len();
            prop_assert_eq!(hlen + p.payload.len() + usize::from(p.hdr.bth.pad) + 4, bytes.len());
        }
    }

    #[test]
    fn mutated_packets_never_panic(h in headers(), flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..6)) {
        let mut h = h;
        let len = if h.bth.opcode.info().payload { 5 } else { 0 };
        h.bth.pad = pad_for(len);
        let mut buf = vec![0u8; 128];
        let n = build(&h, &[7; 5][..len], &mut buf).unwrap();
        let buf = &mut buf[..n];
        for (at, x) in flips {
            buf[at % n] ^= x;
        }
        let _ = parse(buf);
    }

    #[test]
    fn psn_add_sub_inverse(a in 0..=PSN_MASK, n in any::<u32>()) {
        let p = Psn::new(a);
        prop_assert_eq!(p.add(n).sub(n), p);
        prop_assert!(p.add(n).get() <= PSN_MASK);
    }

    #[test]
    fn psn_diff_in_window(a in 0..=PSN_MASK, n in 0..(1u32 << 23)) {
        let p = Psn::new(a);
        let q = p.add(n);
        prop_assert_eq!(q.diff(p), n as i32);
        prop_assert_eq!(p.diff(q), -(n as i32));
        prop_assert_eq!(q.since(p), n);
        prop_assert_eq!(q.is_after(p), n != 0);
        prop_assert_eq!(p.is_before(q), n != 0);
    }

    #[test]
    fn psn_near_wrap(off in 0..64u32, n in 0..64u32) {
        // Start just below the wrap so that q lands on the other side of 0.
        let p = Psn::new(PSN_MASK - off);
        let q = p.add(n);
        prop_assert_eq!(q.diff(p), n as i32);
        prop_assert_eq!(q.sub(n), p);
    }

    #[test]
    fn psn_diff_antisymmetric(a in 0..=PSN_MASK, b in 0..=PSN_MASK) {
        let (p, q) = (Psn::new(a), Psn::new(b));
        let d = p.diff(q);
        prop_assert!((-(1 << 23)..(1 << 23)).contains(&d));
        if d != -(1 << 23) {
            prop_assert_eq!(q.diff(p), -d);
        }
        prop_assert_eq!(q.add(d as u32), p);
    }
}

#[test]
fn reserved_syndrome_rejected_in_packet() {
    let ack = [
        0x11, 0, 0xFF, 0xFF, 0, 0, 0, 1, 0, 0, 0, 1, 0x40, 0, 0, 1, 0, 0, 0, 0,
    ];
    assert_eq!(parse(&ack), Err(ParseError::BadSyndrome(0x40)));
}
