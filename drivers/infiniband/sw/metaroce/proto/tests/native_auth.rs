//! The authenticated mode of the native transport (`transport.rst`, section 13.1): two
//! connections whose packets are sealed and opened the way the kernel glue does it, with a test
//! MAC (keyed SipHash; the kernel uses XChaCha20-Poly1305) and a test key derivation.

use metaroce_proto::auth::{
    open, seal, tag_into, verify, DataSender, KeyId, PacketMac, KEY_LEN, NONCE_LEN, TAG_LEN,
    TRAILER_LEN,
};
use metaroce_proto::conn::{Conn, ConnConfig, RxDrop, RxEvent};
use metaroce_proto::mrc_wire::DATA_HDR_LEN;
use metaroce_proto::restart::siphash24;

mod common;
use common::send;

type C = Conn<4, 128, 2, 2, 8>;

/// A MAC for tests only: two SipHash-2-4 passes under the key's halves and the nonce.
struct TestMac;

impl PacketMac for TestMac {
    fn tag(&self, key: &[u8; KEY_LEN], nonce: &[u8; NONCE_LEN], data: &[u8]) -> [u8; TAG_LEN] {
        let w = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap());
        let k0 = [
            w(&key[..8]) ^ w(&nonce[..8]),
            w(&key[8..16]) ^ w(&nonce[8..16]),
        ];
        let k1 = [w(&key[16..24]) ^ w(&nonce[16..24]), w(&key[24..]) ^ 1];
        let mut t = [0u8; TAG_LEN];
        t[..8].copy_from_slice(&siphash24(k0, data).to_le_bytes());
        t[8..].copy_from_slice(&siphash24(k1, data).to_le_bytes());
        t
    }
}

/// A device at address `me`: the fabric key's stand-in is `fabric`.
struct Dev {
    me: u64,
    fabric: u64,
}

impl Dev {
    /// `K(data sender, data receiver, conn)`.
    fn key(&self, peer: u64, k: KeyId) -> [u8; KEY_LEN] {
        let (s, r) = match k.sender {
            DataSender::Us => (self.me, peer),
            DataSender::Peer => (peer, self.me),
        };
        let mut out = [0u8; KEY_LEN];
        for (i, c) in out.chunks_mut(8).enumerate() {
            let h = siphash24(
                [self.fabric, i as u64],
                &[s, r, u64::from(k.conn)].map(u64::to_le_bytes).concat(),
            );
            c.copy_from_slice(&h.to_le_bytes());
        }
        out
    }
}

const A: u64 = 1;
const B: u64 = 2;

fn conn(id: u32) -> Box<C> {
    let mut cfg = ConnConfig::new(id);
    cfg.mss = 1024;
    cfg.paths = 4;
    cfg.auth = true;
    cfg.restart_key = [u64::from(id), 3];
    Box::new(C::new(cfg))
}

fn pair() -> (Box<C>, Box<C>) {
    let (mut a, mut b) = (conn(11), conn(22));
    for s in 0..2 {
        assert!(a.open_stream(s, 100 + s as u32, 200 + s as u32));
        assert!(b.open_stream(s, 200 + s as u32, 100 + s as u32));
    }
    (a, b)
}

/// Every packet `from` (on device `dev`, towards `peer`) has to send, sealed.
fn sealed(from: &mut C, dev: &Dev, peer: u64, now: u64) -> Vec<Vec<u8>> {
    let mut hdr = [0u8; DATA_HDR_LEN + 16];
    let mut out = Vec::new();
    while let Some(t) = from.poll_transmit(now, &mut hdr) {
        let len = t.hdr_len + t.payload.map_or(0, |p| usize::from(p.len));
        let mut b = vec![0u8; len + TRAILER_LEN];
        b[..t.hdr_len].copy_from_slice(&hdr[..t.hdr_len]);
        let id = from.config().conn_id;
        let (total, k, n) = seal(&mut b, len, id, t.seq).unwrap();
        tag_into(&TestMac, &dev.key(peer, k), &n, &mut b, total).unwrap();
        out.push(b);
    }
    out
}

/// What `to` (on device `dev`, from `peer`) makes of `pkt`; `Err(None)`: the tag is wrong.
fn take(to: &mut C, dev: &Dev, peer: u64, pkt: &[u8], now: u64) -> Result<RxEvent, Option<RxDrop>> {
    let s = open(pkt).map_err(|_| None)?;
    if !verify(&TestMac, &dev.key(peer, s.key), &s) {
        return Err(None);
    }
    to.on_sealed(now, &s, false, 50_000, 0).map_err(Some)
}

const DA: Dev = Dev { me: A, fabric: 77 };
const DB: Dev = Dev { me: B, fabric: 77 };

fn a_to_b(a: &mut C, b: &mut C, now: u64) -> Vec<Result<RxEvent, Option<RxDrop>>> {
    sealed(a, &DA, B, now)
        .iter()
        .map(|p| take(b, &DB, A, p, now))
        .collect()
}

fn b_to_a(b: &mut C, a: &mut C, now: u64) -> Vec<Result<RxEvent, Option<RxDrop>>> {
    sealed(b, &DB, A, now)
        .iter()
        .map(|p| take(a, &DA, B, p, now))
        .collect()
}

fn placed(r: &[Result<RxEvent, Option<RxDrop>>]) -> usize {
    r.iter()
        .filter(|x| matches!(x, Ok(RxEvent::Data(_))))
        .count()
}

#[test]
fn sealed_messages_are_placed_and_acknowledged() {
    let (mut a, mut b) = pair();
    a.post(0, send(3000)).unwrap();
    b.post(1, send(100)).unwrap();
    let got = a_to_b(&mut a, &mut b, 0);
    assert_eq!(placed(&got), 3, "{got:?}");
    let back = b_to_a(&mut b, &mut a, 10);
    assert_eq!(placed(&back), 1, "{back:?}");
    assert!(back.iter().all(|r| r.is_ok()), "{back:?}");
    let acks = a_to_b(&mut a, &mut b, 20);
    assert!(acks.iter().all(|r| r.is_ok()), "{acks:?}");
    assert!(std::iter::from_fn(|| a.poll_completion()).count() >= 1);
    assert!(std::iter::from_fn(|| b.poll_completion()).count() >= 1);
}

#[test]
fn a_wrong_key_a_changed_byte_or_a_plain_packet_is_refused() {
    let (mut a, mut b) = pair();
    a.post(0, send(100)).unwrap();
    let pkts = sealed(&mut a, &DA, B, 0);
    let other = Dev { me: B, fabric: 78 };
    assert_eq!(
        take(&mut b, &other, A, &pkts[0], 0),
        Err(None),
        "another fabric key"
    );
    for at in [
        0,
        1,
        9,
        30,
        DATA_HDR_LEN + 5,
        pkts[0].len() - 20,
        pkts[0].len() - 1,
    ] {
        let mut p = pkts[0].clone();
        p[at] ^= 0x40;
        assert!(take(&mut b, &DB, A, &p, 0).is_err(), "byte {at} changed");
    }
    // The plain codec's packet (no AUTH flag, no trailer) at an authenticated connection.
    let mut plain_cfg = ConnConfig::new(11);
    plain_cfg.mss = 1024;
    plain_cfg.paths = 4;
    let mut p = Box::new(C::new(plain_cfg));
    assert!(p.open_stream(0, 100, 200));
    p.post(0, send(10)).unwrap();
    let mut buf = [0u8; DATA_HDR_LEN];
    let t = p.poll_transmit(0, &mut buf).unwrap();
    let mut bytes = buf[..t.hdr_len].to_vec();
    bytes.resize(t.hdr_len + 10, 0);
    assert_eq!(
        b.on_packet(0, &bytes, false, 1, 0),
        Err(RxDrop::Unauthenticated)
    );
    assert!(open(&bytes).is_err());
    // The genuine packet is still taken.
    assert!(matches!(
        take(&mut b, &DB, A, &pkts[0], 0),
        Ok(RxEvent::Data(_))
    ));
}

#[test]
fn a_replayed_ack_is_refused() {
    let (mut a, mut b) = pair();
    a.post(0, send(100)).unwrap();
    assert_eq!(placed(&a_to_b(&mut a, &mut b, 0)), 1);
    let acks = sealed(&mut b, &DB, A, 10);
    assert_eq!(acks.len(), 1);
    assert_eq!(take(&mut a, &DA, B, &acks[0], 10), Ok(RxEvent::Ack));
    assert_eq!(
        take(&mut a, &DA, B, &acks[0], 11),
        Err(Some(RxDrop::Replay))
    );
    // Replayed DATA is a duplicate (acknowledged, never placed again).
    let mut a2 = conn(11);
    assert!(a2.open_stream(0, 100, 200));
    a2.post(0, send(100)).unwrap();
    let d = sealed(&mut a2, &DA, B, 0);
    assert_eq!(take(&mut b, &DB, A, &d[0], 20), Ok(RxEvent::Duplicate));
}

#[test]
fn an_old_incarnations_data_replayed_after_quiet_is_not_placed() {
    let (mut a, mut b) = pair();
    a.post(0, send(100)).unwrap();
    let first = sealed(&mut a, &DA, B, 0);
    assert!(matches!(
        take(&mut b, &DB, A, &first[0], 0),
        Ok(RxEvent::Data(_))
    ));
    b_to_a(&mut b, &mut a, 5);
    // `a` restarts as 33; its old packets (ConnId 11) are recorded by an on-path host. `b`
    // talks to 33 for a while, goes quiet, and the old packets are replayed.
    let mut a2 = conn(33);
    assert!(a2.open_stream(0, 100, 200));
    a2.post(0, send(100)).unwrap();
    let quiet = 2_000_000_000;
    assert_eq!(
        a_to_b(&mut a2, &mut b, quiet),
        [Err(Some(RxDrop::Unproven))]
    );
    // The challenge goes to a2's address: a2 proves 33.
    assert!(b_to_a(&mut b, &mut a2, quiet + 1)
        .iter()
        .all(|r| r == &Ok(RxEvent::Probe)));
    assert!(a_to_b(&mut a2, &mut b, quiet + 2)
        .iter()
        .all(|r| r == &Ok(RxEvent::Probe)));
    assert_eq!(b.peer_conn(), Some(33));
    let later = 2 * quiet + 10;
    assert_eq!(
        take(&mut b, &DB, A, &first[0], later),
        Err(Some(RxDrop::Unproven)),
        "a replay of ConnId 11 after 33 went quiet is a candidate, never placed"
    );
    // The challenge it causes is answered by the real a2, which names 33: nothing changes.
    for p in sealed(&mut b, &DB, A, later) {
        assert_eq!(take(&mut a2, &DA, B, &p, later), Ok(RxEvent::Probe));
    }
    for p in sealed(&mut a2, &DA, B, later + 1) {
        let r = take(&mut b, &DB, A, &p, later + 1);
        assert!(r.is_ok() || r == Err(None), "{r:?}");
    }
    assert_eq!(b.peer_conn(), Some(33));
}

#[test]
fn a_restarted_receiver_is_proven_through_its_acks() {
    let (mut a, mut b) = pair();
    a.post(0, send(100)).unwrap();
    assert_eq!(placed(&a_to_b(&mut a, &mut b, 0)), 1);
    b_to_a(&mut b, &mut a, 5);
    // `b` restarts as 44 (its QPs too) and a QP of `a` talks to a new QP of it.
    let mut b2 = conn(44);
    assert!(b2.open_stream(1, 201, 101));
    assert!(a.close_stream(1) && a.open_stream(1, 101, 201));
    let quiet = 2_000_000_000;
    a.post(1, send(100)).unwrap();
    assert_eq!(placed(&a_to_b(&mut a, &mut b2, quiet)), 1);
    // b2's ACK names 44, not the 22 `a` knew: proven by a round trip first.
    let acks = b_to_a(&mut b2, &mut a, quiet + 1);
    assert_eq!(acks, [Err(Some(RxDrop::Unproven))]);
    let ch = sealed(&mut a, &DA, B, quiet + 2);
    assert_eq!(ch.len(), 1, "one challenge");
    assert_eq!(take(&mut b2, &DB, A, &ch[0], quiet + 2), Ok(RxEvent::Probe));
    let proof = b_to_a(&mut b2, &mut a, quiet + 3);
    assert_eq!(proof, [Ok(RxEvent::Probe)]);
    assert_eq!(a.peer_conn(), Some(44));
    // From then on its ACKs are taken and the message completes.
    let mut done = 0;
    for k in 1..200u64 {
        let t = quiet + k * 10_000_000;
        a.on_timer(t);
        a_to_b(&mut a, &mut b2, t);
        b_to_a(&mut b2, &mut a, t + 1);
        done += std::iter::from_fn(|| a.poll_completion()).count();
        if done > 1 {
            break;
        }
    }
    // The first message (acknowledged before the restart) and the one to the new receiver.
    assert_eq!(done, 2, "the message to the restarted receiver completed");
}
