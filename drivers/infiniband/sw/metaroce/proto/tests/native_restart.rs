//! The restart proof of the native transport (`transport.rst`, section 7.1): DATA with a new
//! ConnId from a quiet peer's address is placed only after the device at that address proved
//! the ConnId in a round trip; a forger that spoofs the address never can.

use metaroce_proto::conn::{Conn, ConnConfig, RxDrop, RxEvent};
use metaroce_proto::mrc_wire::{parse, DataHdr, MrcPacket, ProbeKind, ProbePkt, PROBE_LEN};
use metaroce_proto::stream::StreamDrop;

mod common;
use common::{packets, send};

type C = Conn<4, 128, 2, 2, 8>;

/// After this the peer counts as quiet (`ConnConfig::restart_idle_ns`, 1 s).
const QUIET: u64 = 2_000_000_000;

fn conn(id: u32, key: u64) -> Box<C> {
    let mut cfg = ConnConfig::new(id);
    cfg.mss = 1024;
    cfg.paths = 4;
    cfg.restart_key = [key, !key];
    Box::new(C::new(cfg))
}

/// `a` (id 11) and `b` (id 22) with streams 0 and 1 open both ways.
fn pair() -> (Box<C>, Box<C>) {
    let mut a = conn(11, 1);
    let mut b = conn(22, 2);
    for s in 0..2 {
        assert!(a.open_stream(s, 100 + s as u32, 200 + s as u32));
        assert!(b.open_stream(s, 200 + s as u32, 100 + s as u32));
    }
    (a, b)
}

/// A sender that talks to `b` as `a` did (same stream numbers) with connection id `id`: a
/// restarted `a`, or a forger that spoofs `a`'s address.
fn like_a(id: u32) -> Box<C> {
    let mut c = conn(id, u64::from(id));
    assert!(c.open_stream(0, 100, 200));
    c
}

fn deliver(from: &mut C, to: &mut C, now: u64) -> Vec<Result<RxEvent, RxDrop>> {
    packets(from, now)
        .iter()
        .map(|p| to.on_packet(now, p, false, 50_000, 0))
        .collect()
}

fn placed(got: &[Result<RxEvent, RxDrop>]) -> usize {
    got.iter()
        .filter(|r| matches!(r, Ok(RxEvent::Data(_))))
        .count()
}

/// `a` sent one SEND to `b`, acknowledged, and then went quiet.
fn quiet_pair() -> (Box<C>, Box<C>) {
    let (mut a, mut b) = pair();
    a.post(0, send(10)).unwrap();
    assert_eq!(placed(&deliver(&mut a, &mut b, 0)), 1);
    deliver(&mut b, &mut a, 10);
    assert_eq!(b.peer_conn(), Some(11));
    (a, b)
}

#[test]
fn forged_conn_id_after_quiet_is_not_placed_and_the_peer_keeps_its_connection() {
    let (mut a, mut b) = quiet_pair();
    let mut f = like_a(99);
    f.post(0, send(10)).unwrap();
    // Before the fix the receiving half restarted with the forger's id and placed its SEND.
    assert_eq!(deliver(&mut f, &mut b, QUIET), [Err(RxDrop::Unproven)]);
    assert_eq!(b.peer_conn(), Some(11));
    // The challenge goes to the address of `a` (the forger spoofed it, it never sees it):
    // `a` names its own id, so nothing changes.
    let ch = packets(&mut b, QUIET);
    assert_eq!(ch.len(), 1);
    assert!(matches!(
        parse(&ch[0]),
        Ok(MrcPacket::Probe(ProbePkt {
            kind: ProbeKind::Challenge,
            conn: 0,
            ..
        }))
    ));
    assert_eq!(a.on_packet(QUIET, &ch[0], false, 1, 0), Ok(RxEvent::Probe));
    let proof = deliver(&mut a, &mut b, QUIET + 1);
    assert_eq!(proof, [Ok(RxEvent::Probe)]);
    assert_eq!(b.peer_conn(), Some(11));
    assert_eq!(b.restart_stats().restarts, 0);
    // The forger's retransmissions stay unproven; `a`'s next message is placed.
    for k in 1..20u64 {
        let t = QUIET + k * 100_000_000;
        f.on_timer(t);
        for r in deliver(&mut f, &mut b, t) {
            assert_eq!(r, Err(RxDrop::Unproven));
        }
    }
    a.post(0, send(10)).unwrap();
    let got = deliver(&mut a, &mut b, 2 * QUIET);
    assert!(
        got.iter()
            .any(|r| matches!(r, Ok(RxEvent::Data(p)) if p.msn == 1 && p.rsn == 1)),
        "{got:?}"
    );
    assert_eq!(b.restart_stats().restarts, 0);
    assert!(b.restart_stats().unproven >= 2);
}

#[test]
fn a_real_restart_is_placed_after_its_proof() {
    let (_, mut b) = quiet_pair();
    // `a` restarted: a new connection, a new id, its streams start over.
    let mut a2 = like_a(33);
    a2.post(0, send(10)).unwrap();
    assert_eq!(deliver(&mut a2, &mut b, QUIET), [Err(RxDrop::Unproven)]);
    // The challenge reaches `a2` (it is at the address), which proves its id.
    assert_eq!(deliver(&mut b, &mut a2, QUIET + 1), [Ok(RxEvent::Probe)]);
    assert_eq!(deliver(&mut a2, &mut b, QUIET + 2), [Ok(RxEvent::Probe)]);
    assert_eq!(b.peer_conn(), Some(33));
    assert_eq!(b.restart_stats().restarts, 1);
    // Its DATA, dropped unacknowledged, is resent and placed.
    let mut got = Vec::new();
    for k in 1..100u64 {
        let t = QUIET + k * 10_000_000;
        a2.on_timer(t);
        got.extend(deliver(&mut a2, &mut b, t));
        deliver(&mut b, &mut a2, t);
        if placed(&got) > 0 {
            break;
        }
    }
    assert!(
        got.iter()
            .any(|r| matches!(r, Ok(RxEvent::Data(p)) if p.msn == 0 && p.rsn == 0)),
        "{got:?}"
    );
}

#[test]
fn guessed_proofs_are_refused() {
    let (_, mut b) = quiet_pair();
    let mut f = like_a(99);
    f.post(0, send(10)).unwrap();
    assert_eq!(deliver(&mut f, &mut b, QUIET), [Err(RxDrop::Unproven)]);
    assert_eq!(
        packets(&mut b, QUIET).len(),
        1,
        "one challenge, to the peer's address"
    );
    let mut buf = [0u8; PROBE_LEN];
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..10_000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let n = ProbePkt {
            kind: ProbeKind::Proof,
            conn: 99,
            cookie: if i == 0 { 0 } else { x },
        }
        .write(&mut buf)
        .unwrap();
        assert_eq!(
            b.on_packet(QUIET + i, &buf[..n], false, 1, 0),
            Err(RxDrop::BadProof)
        );
    }
    assert_eq!(b.peer_conn(), Some(11));
    assert_eq!(b.restart_stats().proofs_refused, 10_000);
    assert_eq!(b.restart_stats().restarts, 0);
}

#[test]
fn a_new_conn_id_while_the_peer_is_active_is_refused_without_a_challenge() {
    let (_, mut b) = quiet_pair();
    let mut f = like_a(99);
    f.post(0, send(10)).unwrap();
    assert_eq!(deliver(&mut f, &mut b, 1000), [Err(RxDrop::WrongConn)]);
    assert!(
        packets(&mut b, 1000).is_empty(),
        "no challenge for an active peer"
    );
    assert_eq!(b.restart_stats().challenges_sent, 0);
}

#[test]
fn a_flood_of_forged_data_makes_a_challenge_per_millisecond_at_most() {
    let (mut a, mut b) = quiet_pair();
    let mut f = like_a(99);
    f.post(0, send(10)).unwrap();
    let forged = packets(&mut f, QUIET).remove(0);
    let mut challenges = Vec::new();
    // 10 ms of forged DATA, one every 10 us.
    for k in 0..1000u64 {
        let t = QUIET + k * 10_000;
        assert_eq!(b.on_packet(t, &forged, false, 1, 0), Err(RxDrop::Unproven));
        challenges.extend(packets(&mut b, t));
    }
    assert_eq!(challenges.len(), 10);
    // Each is answered by the real peer, which keeps its connection.
    for c in &challenges {
        assert_eq!(a.on_packet(QUIET, c, false, 1, 0), Ok(RxEvent::Probe));
    }
    for r in deliver(&mut a, &mut b, QUIET + 10_000_000) {
        assert!(
            matches!(r, Ok(RxEvent::Probe) | Err(RxDrop::BadProof)),
            "{r:?}"
        );
    }
    assert_eq!(b.peer_conn(), Some(11));
}

#[test]
fn admits_checks_without_changing_anything() {
    let (mut a, mut b) = quiet_pair();
    let mut f = like_a(99);
    f.post(0, send(10)).unwrap();
    let forged = packets(&mut f, QUIET).remove(0);
    let Ok(MrcPacket::Data(h, _)) = parse(&forged) else {
        panic!("not DATA");
    };
    assert_eq!(b.admits(QUIET, &h), Err(RxDrop::Unproven));
    assert!(
        packets(&mut b, QUIET).is_empty(),
        "admits queued a challenge"
    );
    assert_eq!(b.restart_stats().unproven, 0);
    // The peer's own DATA naming a receive far beyond its messages.
    a.post(0, send(10)).unwrap();
    let real = packets(&mut a, QUIET).remove(0);
    let Ok(MrcPacket::Data(mut h, _)) = parse(&real) else {
        panic!("not DATA");
    };
    assert_eq!(b.admits(QUIET, &h), Ok(()));
    h.rsn = 1000;
    assert_eq!(
        b.admits(QUIET, &h),
        Err(RxDrop::Stream(StreamDrop::RsnWindow))
    );
    let _: DataHdr = h;
}
