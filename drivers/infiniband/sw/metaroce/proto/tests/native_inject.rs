// SPDX-License-Identifier: GPL-2.0
//! The packets of `tools/testing/selftests/drivers/infiniband/metaroce/native_inject.py` (its `--emit` output,
//! `tests/fixtures/native-inject.txt`) through the codec: each must be refused
//! for the reason the injector built it for, and each well-formed one must
//! decode to fields that encode back to the same bytes (the injector's field
//! offsets are the codec's). The injector's self-check compares its builders
//! with the same file, so neither side can drift alone.

use metaroce_proto::conn::{Completion, Conn, ConnConfig, RxDrop, RxEvent, SendStatus};
use metaroce_proto::mrc_wire::{
    parse, MrcError, MrcOp, MrcPacket, NakCode, ProbeKind, ACK_LEN, DATA_HDR_LEN, PROBE_LEN,
};
use metaroce_proto::stream::StreamDrop;

mod common;
use common::write;

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

/// `(kind, index, expected, packet)` of every fixture line.
fn fixture() -> Vec<(String, u32, String, Vec<u8>)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../../../tools/testing/selftests/drivers/infiniband/metaroce/fixtures/native-inject.txt"
    );
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f.len(), 4, "{l}");
            (
                f[0].to_owned(),
                f[1].parse().unwrap(),
                f[2].to_owned(),
                unhex(f[3]),
            )
        })
        .collect()
}

#[test]
fn injector_packets_decode_as_built() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../../../tools/testing/selftests/drivers/infiniband/metaroce/fixtures/native-inject.txt"
    );
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
                assert_eq!(
                    &buf[..],
                    &pkt[..DATA_HDR_LEN],
                    "{kind} #{}: header re-encoded",
                    f[1]
                );
                assert_eq!(payload.len(), usize::from(h.len));
                "DATA"
            }
            Ok(MrcPacket::Ack(a)) => {
                let mut buf = [0u8; ACK_LEN];
                assert_eq!(a.write(&mut buf), Some(ACK_LEN));
                assert_eq!(&buf[..], &pkt[..], "{kind} #{}: ACK re-encoded", f[1]);
                "ACK"
            }
            Ok(MrcPacket::Probe(p)) => {
                let mut buf = [0u8; PROBE_LEN];
                assert_eq!(p.write(&mut buf), Some(PROBE_LEN));
                assert_eq!(&buf[..], &pkt[..], "{kind} #{}: probe re-encoded", f[1]);
                match p.kind {
                    ProbeKind::Challenge => "CHALLENGE",
                    ProbeKind::Proof => "PROOF",
                }
            }
            Err(e) => class(e),
        };
        assert_eq!(got, want, "{kind} #{}: {}", f[1], f[3]);
        kinds.insert(kind.to_owned());
        n += 1;
    }
    assert!(
        n >= 300 && kinds.len() >= 22,
        "{n} packets of {} kinds",
        kinds.len()
    );
}

/// The kernel's path count (`native.rs`, `PATHS`); small windows otherwise.
type C = Conn<8, 128, 2, 2, 8>;
/// The ids `--emit` uses: `conn=0x12345678` for both ends (ACKs carry the
/// receiver's own id, DATA the sender's), `stream=0x11`.
const ID: u32 = 0x1234_5678;
const QPN: u32 = 0x11;

fn conn() -> Box<C> {
    let mut cfg = ConnConfig::new(ID);
    cfg.mss = 1024;
    cfg.paths = 8;
    Box::new(C::new(cfg))
}

/// Every packet `from` has for `to` now, delivered.
fn deliver(from: &mut C, to: &mut C, now: u64) -> usize {
    let mut buf = [0u8; DATA_HDR_LEN];
    let mut n = 0;
    while let Some(t) = from.poll_transmit(now, &mut buf) {
        let mut bytes = buf[..t.hdr_len].to_vec();
        if let Some(p) = t.payload {
            bytes.resize(t.hdr_len + usize::from(p.len), 0);
        }
        let _ = to.on_packet(now, &bytes, false, 50_000, 9_687_500);
        n += 1;
    }
    n
}

/// What 56-native-inject.sh expects of each live kind, through the
/// protocol core: `rx` (mra0) receives WRITEs from `tx` (mrb0) and never
/// sends DATA itself; `tx` has data in flight when its forged ACKs arrive.
#[test]
fn live_kinds_do_what_the_selftest_expects() {
    let (mut rx, mut tx) = (conn(), conn());
    assert!(rx.open_stream(0, QPN, 0x22));
    assert!(tx.open_stream(0, 0x22, QPN));
    // Earlier traffic: 20 packets delivered and acknowledged.
    for _ in 0..5 {
        tx.post(0, write(4096)).unwrap();
    }
    let mut sent = 0;
    for t in 0..20 {
        sent += deliver(&mut tx, &mut rx, t * 1000);
        deliver(&mut rx, &mut tx, t * 1000 + 500);
    }
    assert_eq!(sent, 20);
    // Now packets in flight (sent, not yet delivered).
    tx.post(0, write(4096)).unwrap();
    let mut buf = [0u8; DATA_HDR_LEN];
    let mut flight = Vec::new();
    while let Some(t) = tx.poll_transmit(30_000, &mut buf) {
        let mut b = buf[..t.hdr_len].to_vec();
        b.resize(t.hdr_len + usize::from(t.payload.map_or(0, |p| p.len)), 0);
        flight.push(b);
    }
    assert!(!flight.is_empty());
    let hint0 = tx.conn_window().1;
    assert_eq!(hint0, 9_687_500);
    let acks = |c: &C| (0..8).map(|i| c.path_info(i).unwrap().2.acks).sum::<u64>();
    let bad_acks = |c: &C| {
        (0..8)
            .map(|i| c.path_info(i).unwrap().2.bad_acks)
            .sum::<u64>()
    };
    let (rx_acks0, rx_bad0, tx_bad0) = (acks(&rx), bad_acks(&rx), bad_acks(&tx));
    let mut counted = std::collections::BTreeMap::<String, usize>::new();
    for (kind, i, _, mut pkt) in fixture() {
        let live = kind.starts_with("ack-")
            || kind.starts_with("data-")
            || kind.starts_with("write-")
            || kind == "atomic-unaligned";
        if !live {
            continue;
        }
        if kind == "data-msn-far" {
            // The selftest's dsn= lands near the receiver's Dsn point: a new Dsn.
            pkt[20..24].copy_from_slice(&(20 + i).to_be_bytes());
        }
        let got = rx.on_packet(30_001, &pkt, false, 50_000, 9_687_500);
        let want: Result<RxEvent, RxDrop> = match kind.as_str() {
            "ack-cum-ahead" => Err(RxDrop::BadAck),
            "ack-wrong-conn" | "data-restart" => Err(RxDrop::WrongConn),
            "ack-bad-path" | "data-bad-path" => Err(RxDrop::BadPath),
            "ack-sack-unsent" => Ok(RxEvent::Ack),
            "data-path-window" => Err(RxDrop::PathWindow),
            "data-dsn-far" => Err(RxDrop::DsnWindow),
            "data-msn-far" => Err(RxDrop::Stream(StreamDrop::MsnWindow)),
            _ => Ok(RxEvent::Duplicate),
        };
        assert_eq!(got, want, "{kind} #{i}");
        *counted.entry(kind.clone()).or_default() += 1;
        // Forged ACKs to the live sender: all dropped before the hint is read.
        if kind.starts_with("ack-") && kind != "ack-sack-unsent" {
            assert!(
                tx.on_packet(30_001, &pkt, false, 50_000, 0).is_err(),
                "{kind} #{i} at the sender"
            );
        }
    }
    assert_eq!(counted.len(), 14);
    let n = |k: &str| counted[k] as u64;
    // The exact counters of the selftest.
    assert_eq!(bad_acks(&rx) - rx_bad0, n("ack-cum-ahead"));
    assert_eq!(bad_acks(&tx) - tx_bad0, n("ack-cum-ahead"));
    assert_eq!(acks(&rx) - rx_acks0, n("ack-sack-unsent"));
    assert_eq!(rx.stats.rate_hint_changes, n("ack-sack-unsent"));
    assert_eq!(
        rx.conn_window().1,
        0,
        "the last forged hint (index 15) is 0"
    );
    assert_eq!(rx.stats.data_sent, 0);
    assert_eq!(
        tx.conn_window().1,
        hint0,
        "a dropped ACK's hint is not taken"
    );
    // The forged packets changed nothing the transfer needs: the packets
    // in flight arrive, are placed, and complete the sender's message.
    for b in &flight {
        assert!(matches!(
            rx.on_packet(30_002, b, false, 50_000, 9_687_500),
            Ok(RxEvent::Data(_))
        ));
    }
    for t in 0..20 {
        deliver(&mut rx, &mut tx, 30_003 + t * 1000);
        deliver(&mut tx, &mut rx, 30_500 + t * 1000);
    }
    let mut ok = 0;
    while let Some(c) = tx.poll_completion() {
        if let Completion::Send { status, .. } = c {
            assert_eq!(status, SendStatus::Ok);
            ok += 1;
        }
    }
    assert_eq!(ok, 6, "every WRITE completed");
    assert_eq!(tx.stats.retransmits, 0);
    assert_eq!(tx.conn_window().1, hint0);
}

/// 56-native-inject's canary phase through the core: on a connection that
/// has seen no DATA, forged packets with Dsn k and Msn k (k = 0..3) reach
/// placement: the bad-key and past-the-end WRITEs come out as data for the
/// glue to refuse, the unaligned FETCH_ADD is refused by the core, and the
/// valid WRITE after them is data to place.
#[test]
fn canary_packets_reach_placement() {
    let mut rx = conn();
    assert!(rx.open_stream(0, QPN, 0x123));
    let fx = fixture();
    let first = |kind: &str| {
        fx.iter()
            .find(|f| f.0 == kind && f.1 == 0)
            .unwrap()
            .3
            .clone()
    };
    let kinds = [
        "write-bad-rkey",
        "write-past-end",
        "atomic-unaligned",
        "write-valid",
    ];
    for (k, kind) in kinds.iter().enumerate() {
        let mut pkt = first(kind);
        pkt[20..24].copy_from_slice(&(k as u32).to_be_bytes());
        pkt[24..28].copy_from_slice(&(k as u32).to_be_bytes());
        match (k, rx.on_packet(10 + k as u64, &pkt, false, 50_000, 0)) {
            (0 | 1, Ok(RxEvent::Data(p))) => {
                assert_eq!((p.op, p.msn, p.len), (MrcOp::Write, k as u32, 64));
                assert!(rx.refuse(p.stream, p.msn, NakCode::RemoteAccess), "{kind}");
            }
            (2, Ok(RxEvent::Refused(NakCode::InvalidRequest))) => {}
            (3, Ok(RxEvent::Data(p))) => assert_eq!((p.op, p.msn, p.len), (MrcOp::Write, 3, 64)),
            (_, got) => panic!("{kind}: {got:?}"),
        }
    }
    assert_eq!(rx.peer_conn(), Some(ID));
    assert_eq!(rx.stats.drops, 0);
}
