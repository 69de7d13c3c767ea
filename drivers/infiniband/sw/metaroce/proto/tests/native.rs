//! The MetaRoCE native connection (`conn`) without a network model: two
//! connections joined by a queue that drops, duplicates and reorders, and
//! property tests that no input makes a connection panic.

use metaroce_proto::conn::{Completion, Conn, ConnConfig, ConnState, RxEvent, SendStatus};
use metaroce_proto::mrc_wire::{parse, AckPkt, MrcOp, MrcPacket, DATA_HDR_LEN};
use metaroce_proto::stream::MsgDesc;
use proptest::prelude::*;

type C = Conn<4, 128, 2, 2, 8>;

fn pair() -> (Box<C>, Box<C>) {
    let mut cfg = ConnConfig::new(11);
    cfg.mss = 1024;
    cfg.paths = 4;
    let mut a = Box::new(C::new(cfg));
    cfg.conn_id = 22;
    let mut b = Box::new(C::new(cfg));
    for s in 0..2 {
        assert!(a.open_stream(s, 100 + s as u32, 200 + s as u32));
        assert!(b.open_stream(s, 200 + s as u32, 100 + s as u32));
    }
    (a, b)
}

fn msg(op: MrcOp, len: u32) -> MsgDesc {
    MsgDesc {
        op,
        len,
        va: if op.is_write() { 0x1000 } else { 0 },
        rkey: if op.is_write() { 5 } else { 0 },
        imm: if op.has_imm() { 0xABCD } else { 0 },
        se: false,
    }
}

/// xorshift64 for the loopback impairments.
struct Rand(u64);
impl Rand {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pct(&mut self, p: u64) -> bool {
        self.next() % 100 < p
    }
}

/// Runs `a` -> `b` with `loss`% loss, duplication and reordering in both
/// directions until every message completed; returns (send completions,
/// receive completions, retransmissions).
/// Send completions (stream, msn), receive completions (stream, msn, len),
/// retransmissions.
type Outcome = (Vec<(usize, u32)>, Vec<(usize, u32, u32)>, u64);

fn loopback(seed: u64, loss: u64, msgs: &[(usize, MrcOp, u32)]) -> Outcome {
    let (mut a, mut b) = pair();
    let mut r = Rand(seed | 1);
    let mut pending = msgs
        .iter()
        .copied()
        .collect::<std::collections::VecDeque<_>>();
    let mut wire: Vec<(u64, bool, Vec<u8>)> = Vec::new(); // (arrival, to_b, bytes)
    let mut now = 0u64;
    let mut sends = Vec::new();
    let mut recvs = Vec::new();
    let total = msgs.len();
    while sends.len() < total || recvs.len() < total {
        assert!(
            now < 10_000_000_000,
            "stuck: {} sent, {} received",
            sends.len(),
            recvs.len()
        );
        while let Some(&(s, op, len)) = pending.front() {
            match a.post(s, msg(op, len)) {
                Ok(_) => {
                    pending.pop_front();
                }
                Err(_) => break,
            }
        }
        for (from_a, c) in [(true, &mut a), (false, &mut b)] {
            let mut buf = [0u8; DATA_HDR_LEN];
            while let Some(t) = c.poll_transmit(now, &mut buf) {
                let mut bytes = buf[..t.hdr_len].to_vec();
                if let Some(p) = t.payload {
                    bytes.resize(t.hdr_len + usize::from(p.len), 0x5A);
                }
                if r.pct(loss) {
                    continue;
                }
                let delay = 2_000 + if r.pct(loss) { r.next() % 5_000 } else { 0 };
                if r.pct(loss) {
                    wire.push((now + delay + 700, from_a, bytes.clone()));
                }
                wire.push((now + delay, from_a, bytes));
            }
        }
        // Next event: the earliest arrival or timer.
        let next_arrival = wire.iter().map(|w| w.0).min();
        let next_timer = [a.next_deadline(), b.next_deadline()]
            .into_iter()
            .flatten()
            .min();
        now = match (next_arrival, next_timer) {
            (Some(x), Some(y)) => x.min(y),
            (x, y) => x.or(y).expect("nothing in flight and no timer"),
        }
        .max(now);
        let (due, rest): (Vec<_>, Vec<_>) = wire.drain(..).partition(|w| w.0 <= now);
        wire = rest;
        for (_, to_b, bytes) in due {
            let c = if to_b { &mut b } else { &mut a };
            match c.on_packet(now, &bytes, false, 50_000, 1_000_000) {
                Ok(RxEvent::Data(p)) => {
                    assert!(to_b && p.len as usize + DATA_HDR_LEN == bytes.len())
                }
                Ok(_) => {}
                Err(e) => panic!("dropped a valid packet: {e:?}"),
            }
        }
        a.on_timer(now);
        b.on_timer(now);
        while let Some(c) = a.poll_completion() {
            match c {
                Completion::Send {
                    stream,
                    msn,
                    status,
                } => {
                    assert_eq!(status, SendStatus::Ok);
                    sends.push((stream, msn));
                }
                Completion::Recv { .. } => panic!("receive completion at the sender"),
            }
        }
        while let Some(c) = b.poll_completion() {
            match c {
                Completion::Recv { stream, done } => recvs.push((stream, done.msn, done.len)),
                Completion::Send { .. } => panic!("send completion at the receiver"),
            }
        }
    }
    (sends, recvs, a.stats.retransmits)
}

fn workload() -> Vec<(usize, MrcOp, u32)> {
    let ops = [MrcOp::Send, MrcOp::Write, MrcOp::SendImm, MrcOp::WriteImm];
    (0..60u32)
        .map(|i| ((i % 2) as usize, ops[(i % 4) as usize], (i * 377) % 5000))
        .collect()
}

fn check_order(msgs: &[(usize, MrcOp, u32)], sends: &[(usize, u32)], recvs: &[(usize, u32, u32)]) {
    for s in 0..2 {
        let want: Vec<u32> = msgs.iter().filter(|m| m.0 == s).map(|m| m.2).collect();
        let sent: Vec<u32> = sends.iter().filter(|c| c.0 == s).map(|c| c.1).collect();
        let got: Vec<(u32, u32)> = recvs
            .iter()
            .filter(|c| c.0 == s)
            .map(|c| (c.1, c.2))
            .collect();
        assert_eq!(
            sent,
            (0..want.len() as u32).collect::<Vec<_>>(),
            "send order, stream {s}"
        );
        let expect: Vec<(u32, u32)> = want
            .iter()
            .enumerate()
            .map(|(i, &l)| (i as u32, l))
            .collect();
        assert_eq!(got, expect, "receive order and lengths, stream {s}");
    }
}

#[test]
fn lossless_loopback_in_order() {
    let w = workload();
    let (sends, recvs, retx) = loopback(1, 0, &w);
    check_order(&w, &sends, &recvs);
    assert_eq!(retx, 0);
}

#[test]
fn lossy_loopback_completes_in_verbs_order() {
    let w = workload();
    for seed in 1..=20 {
        let (sends, recvs, retx) = loopback(seed, 10, &w);
        check_order(&w, &sends, &recvs);
        assert!(retx > 0, "seed {seed}: 10% loss without a retransmission");
    }
}

#[test]
fn dead_peer_fails_the_connection_in_order() {
    let (mut a, _b) = pair();
    for _ in 0..3 {
        a.post(0, msg(MrcOp::Send, 3000)).unwrap();
    }
    let mut now = 0;
    let mut buf = [0u8; DATA_HDR_LEN];
    for _ in 0..10_000 {
        while a.poll_transmit(now, &mut buf).is_some() {}
        match a.next_deadline() {
            Some(t) => now = t.max(now),
            None => break,
        }
        a.on_timer(now);
        if a.state() == ConnState::Failed {
            break;
        }
    }
    while a.poll_transmit(now, &mut buf).is_some() {}
    assert_eq!(a.state(), ConnState::Failed);
    let c: Vec<Completion> = std::iter::from_fn(|| a.poll_completion()).collect();
    let st: Vec<SendStatus> = c
        .iter()
        .map(|c| match c {
            Completion::Send { status, .. } => *status,
            _ => panic!(),
        })
        .collect();
    assert_eq!(
        st,
        [
            SendStatus::RetryExceeded,
            SendStatus::Flushed,
            SendStatus::Flushed
        ]
    );
    assert!(a.post(0, msg(MrcOp::Send, 1)).is_err());
}

/// Moves every packet `from` has for `to` now; returns the receiver's results.
fn deliver(from: &mut C, to: &mut C, now: u64) -> Vec<Result<RxEvent, metaroce_proto::conn::RxDrop>> {
    let mut buf = [0u8; DATA_HDR_LEN];
    let mut out = Vec::new();
    while let Some(t) = from.poll_transmit(now, &mut buf) {
        let mut bytes = buf[..t.hdr_len].to_vec();
        if let Some(p) = t.payload {
            bytes.resize(t.hdr_len + usize::from(p.len), 0);
        }
        out.push(to.on_packet(now, &bytes, false, 50_000, 0));
    }
    out
}

#[test]
fn set_config_in_place_equals_new() {
    let mut cfg = ConnConfig::new(77);
    cfg.mss = 1024;
    cfg.paths = 3;
    let fresh = C::new(cfg);
    let mut c = Box::new(C::new(ConnConfig::new(1)));
    assert!(c.set_config(cfg));
    assert_eq!(c.config(), fresh.config());
    for i in 0..4 {
        assert_eq!(c.path_info(i), fresh.path_info(i));
        assert_eq!(c.path_rtt(i), fresh.path_rtt(i));
    }
    assert_eq!(c.conn_window(), fresh.conn_window());
    // A used connection keeps its configuration.
    assert!(c.open_stream(0, 1, 2));
    assert!(!c.set_config(ConnConfig::new(5)));
    assert_eq!(c.config().conn_id, 77);
}

#[test]
fn closed_stream_is_abandoned_and_its_data_acknowledged() {
    let (mut a, mut b) = pair();
    // Stream 0's receiver is gone: b acknowledges its data (the path moves on) but drops it.
    assert!(b.close_stream(0));
    a.post(0, msg(MrcOp::Send, 3000)).unwrap();
    let got = deliver(&mut a, &mut b, 0);
    assert_eq!(got.len(), 3);
    assert!(got.iter().all(|r| *r == Err(metaroce_proto::conn::RxDrop::NoStream)));
    let acks = deliver(&mut b, &mut a, 10);
    assert!(!acks.is_empty() && acks.iter().all(|r| *r == Ok(RxEvent::Ack)));
    assert_eq!(a.stats.retransmits, 0);
    // Stream 1's sender closes with messages in flight: they are never resent, the
    // connection does not fail, and stream 0 still works.
    a.post(1, msg(MrcOp::Send, 2000)).unwrap();
    let mut buf = [0u8; DATA_HDR_LEN];
    while a.poll_transmit(20, &mut buf).is_some() {}
    assert_eq!(a.outstanding(1), 1);
    assert!(a.close_stream(1));
    assert_eq!(a.outstanding(1), 0);
    let mut now = 20;
    for _ in 0..200 {
        match a.next_deadline() {
            Some(t) => now = t.max(now),
            None => break,
        }
        a.on_timer(now);
        while a.poll_transmit(now, &mut buf).is_some() {}
    }
    assert_eq!(a.state(), ConnState::Active);
    assert_eq!(a.stats.retransmits, 0, "an abandoned message was resent");
    assert!(b.open_stream(0, 200, 100));
    a.post(0, msg(MrcOp::Send, 100)).unwrap();
    let got = deliver(&mut a, &mut b, now);
    assert!(matches!(got.as_slice(), [Ok(RxEvent::Data(_))]), "{got:?}");
    deliver(&mut b, &mut a, now + 10);
    let done: Vec<Completion> = std::iter::from_fn(|| a.poll_completion()).collect();
    assert_eq!(done.len(), 2, "{done:?}");
}

#[test]
fn restarted_peer_is_accepted_after_reset_receiver() {
    let (mut a, mut b) = pair();
    a.post(0, msg(MrcOp::Send, 10)).unwrap();
    assert!(matches!(deliver(&mut a, &mut b, 0).as_slice(), [Ok(RxEvent::Data(_))]));
    assert_eq!(b.peer_conn(), Some(11));
    // `a` restarts: a new connection with a new id and the same streams.
    let mut cfg = ConnConfig::new(33);
    cfg.mss = 1024;
    cfg.paths = 4;
    let mut a2 = Box::new(C::new(cfg));
    assert!(a2.open_stream(0, 100, 200));
    a2.post(0, msg(MrcOp::Send, 10)).unwrap();
    let got = deliver(&mut a2, &mut b, 10);
    assert_eq!(got, [Err(metaroce_proto::conn::RxDrop::WrongConn)]);
    b.reset_receiver();
    a2.on_timer(50_000_000);
    let got = deliver(&mut a2, &mut b, 50_000_000);
    assert!(got.iter().any(|r| matches!(r, Ok(RxEvent::Data(p)) if p.msn == 0)), "{got:?}");
    assert_eq!(b.peer_conn(), Some(33));
    // b's sending half kept its state: its stream to a still works for the old peer's ids.
    assert_eq!(b.state(), ConnState::Active);
}

#[test]
fn ack_for_another_connection_is_dropped() {
    let (mut a, _) = pair();
    let mut buf = [0u8; 64];
    let n = AckPkt {
        conn: 99,
        ..AckPkt::default()
    }
    .write(&mut buf)
    .unwrap();
    assert!(a.on_packet(0, &buf[..n], false, 1, 0).is_err());
    assert_eq!(a.stats.drops, 1);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Arbitrary bytes never make a connection panic, in any state.
    #[test]
    fn noise_never_panics(pkts in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..120), 1..20), busy in any::<bool>()) {
        let (mut a, _) = pair();
        if busy {
            a.post(0, msg(MrcOp::Write, 9000)).unwrap();
        }
        let mut buf = [0u8; DATA_HDR_LEN];
        let mut now = 0;
        for p in &pkts {
            now += 1000;
            let _ = a.on_packet(now, p, true, 7, 5);
            while a.poll_transmit(now, &mut buf).is_some() {}
            a.on_timer(now);
            while a.poll_completion().is_some() {}
        }
    }

    /// Valid headers with mutated fields never make a connection panic.
    #[test]
    fn mutated_traffic_never_panics(seed in any::<u64>(), flips in prop::collection::vec((0usize..60, any::<u8>()), 1..4)) {
        let (mut a, mut b) = pair();
        a.post(0, msg(MrcOp::Send, 5000)).unwrap();
        a.post(1, msg(MrcOp::WriteImm, 2000)).unwrap();
        let mut buf = [0u8; DATA_HDR_LEN];
        let mut r = Rand(seed | 1);
        for round in 0..30u64 {
            let now = round * 3000;
            while let Some(t) = a.poll_transmit(now, &mut buf) {
                let mut bytes = buf[..t.hdr_len].to_vec();
                bytes.resize(t.hdr_len + t.payload.map_or(0, |p| usize::from(p.len)), 0);
                if r.pct(30) {
                    for &(at, v) in &flips {
                        if let Some(x) = bytes.get_mut(at) {
                            *x ^= v;
                        }
                    }
                }
                let _ = b.on_packet(now, &bytes, r.pct(20), 9, 100);
            }
            while let Some(t) = b.poll_transmit(now, &mut buf) {
                let mut bytes = buf[..t.hdr_len].to_vec();
                if r.pct(30) {
                    for &(at, v) in &flips {
                        if let Some(x) = bytes.get_mut(at) {
                            *x ^= v;
                        }
                    }
                }
                if let Ok(MrcPacket::Ack(_)) = parse(&bytes) {}
                let _ = a.on_packet(now, &bytes, false, 9, 0);
            }
            a.on_timer(now);
            b.on_timer(now);
            while a.poll_completion().is_some() {}
            while b.poll_completion().is_some() {}
        }
    }
}
