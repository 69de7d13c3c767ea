//! Streams kept outside the connection ([`StreamStore`]), as the kernel keeps them: a slot
//! holds storage only while its QP is bound, so an unbound connection costs nothing for its
//! streams, and a connection carries hundreds of QPs.

use metaroce_proto::conn::{Completion, Conn, ConnConfig, RxDrop, RxEvent, SendStatus};
use metaroce_proto::stream::{Stream, StreamStore};

mod common;
use common::{packets, send};

const K: usize = 8;
/// The kernel's streams per connection.
const S: usize = 256;

/// One allocation per open stream, as the kernel's store (`native.rs`) makes them.
struct Boxed([Option<Box<Stream<K>>>; S]);

impl StreamStore<K> for Boxed {
    type Slot = Box<Stream<K>>;
    const EMPTY: Self = Boxed([const { None }; S]);

    fn slot(&self, i: usize) -> Option<&Stream<K>> {
        self.0.get(i)?.as_deref()
    }

    fn slot_mut(&mut self, i: usize) -> Option<&mut Stream<K>> {
        self.0.get_mut(i)?.as_deref_mut()
    }

    fn put(&mut self, i: usize, s: Self::Slot) -> Result<(), Self::Slot> {
        match self.0.get_mut(i) {
            Some(e @ None) => {
                *e = Some(s);
                Ok(())
            }
            _ => Err(s),
        }
    }

    fn take(&mut self, i: usize) -> Option<Self::Slot> {
        self.0.get_mut(i)?.take()
    }
}

impl Boxed {
    fn held(&self) -> usize {
        self.0.iter().filter(|s| s.is_some()).count()
    }
}

type C = Conn<4, 512, 8, S, K, metaroce_proto::cc::Aimd, Boxed>;

fn conn(id: u32) -> Box<C> {
    let mut cfg = ConnConfig::new(id);
    cfg.mss = 1024;
    cfg.paths = 4;
    let mut c = Box::new(C::new(ConnConfig::new(1)));
    assert!(c.set_config(cfg));
    c
}

fn slot() -> Box<Stream<K>> {
    Box::new(Stream::EMPTY)
}

/// Every packet `from` has now, handed to `to`; what `to` made of them.
fn deliver(from: &mut C, to: &mut C, now: u64) -> Vec<Result<RxEvent, RxDrop>> {
    packets(from, now)
        .iter()
        .map(|b| to.on_packet(now, b, false, 50_000, 0))
        .collect()
}

fn completions(c: &mut C) -> Vec<Completion> {
    core::iter::from_fn(|| c.poll_completion()).collect()
}

/// 256 QP pairs on one connection: each stream's SEND is placed on its own stream and
/// completes on both sides; closing every stream gives every allocation back.
#[test]
fn a_connection_carries_256_streams_in_slots_of_their_own() {
    let (mut a, mut b) = (conn(11), conn(22));
    assert_eq!(
        a.store().held(),
        0,
        "an unbound connection holds no stream storage"
    );
    for s in 0..S {
        let q = u32::try_from(s).unwrap();
        assert!(a.open_stream_in(s, 1000 + q, 5000 + q, slot()).is_ok());
        assert!(b.open_stream_in(s, 5000 + q, 1000 + q, slot()).is_ok());
        assert_eq!(a.stream_qpn(s), Some(1000 + q));
    }
    assert_eq!(a.store().held(), S);
    // An open stream is not opened again: its storage comes back.
    assert!(a.open_stream_in(7, 1, 2, slot()).is_err());
    assert!(a.open_stream_in(S, 1, 2, slot()).is_err());
    for s in 0..S {
        // 3 packets each, sent in rounds (the connection's window is smaller than 768).
        a.post(s, send(2500 + u32::try_from(s).unwrap())).unwrap();
    }
    let mut placed = vec![0u32; S];
    let mut now = 0;
    for _ in 0..10_000 {
        now += 10_000;
        for ev in deliver(&mut a, &mut b, now) {
            if let Ok(RxEvent::Data(p)) = ev {
                placed[p.stream] += u32::from(p.len);
            }
        }
        deliver(&mut b, &mut a, now);
        if placed
            .iter()
            .enumerate()
            .all(|(s, &n)| n == 2500 + s as u32)
        {
            break;
        }
    }
    for (s, &n) in placed.iter().enumerate() {
        assert_eq!(n, 2500 + s as u32, "stream {s}");
    }
    deliver(&mut b, &mut a, now + 1);
    let mut sent = vec![false; S];
    for c in completions(&mut a) {
        if let Completion::Send {
            stream,
            msn,
            status,
        } = c
        {
            assert_eq!((msn, status), (0, SendStatus::Ok), "stream {stream}");
            sent[stream] = true;
        }
    }
    assert!(sent.iter().all(|&d| d), "every stream's SEND completed");
    let mut recvd = vec![false; S];
    for c in completions(&mut b) {
        if let Completion::Recv { stream, done } = c {
            assert_eq!(done.len, 2500 + stream as u32);
            recvd[stream] = true;
        }
    }
    assert!(recvd.iter().all(|&d| d), "every stream's receive completed");
    assert_eq!(a.streams_hi(), S);
    assert!(a.close_stream_out(100).is_some());
    assert_eq!((a.streams_hi(), a.stream_of(1100)), (S, None));
    assert_eq!(a.stream_of(1101), Some(101));
    for s in (0..S).rev().filter(|&s| s != 100) {
        assert!(a.close_stream_out(s).is_some());
        assert_eq!(
            a.streams_hi(),
            if s == 101 { 100 } else { s },
            "after closing {s}"
        );
        assert!(
            a.close_stream_out(s).is_none(),
            "a closed slot holds nothing"
        );
    }
    assert_eq!((a.store().held(), a.streams_hi()), (0, 0));
}

/// DATA for a stream whose QP is gone (its slot holds no storage) is dropped and counted,
/// never placed; the stream opened again in new storage starts from nothing.
#[test]
fn data_for_a_stream_without_storage_is_dropped() {
    let (mut a, mut b) = (conn(11), conn(22));
    assert!(a.open_stream_in(3, 103, 203, slot()).is_ok());
    assert!(b.open_stream_in(3, 203, 103, slot()).is_ok());
    a.post(3, send(100)).unwrap();
    let gone = b.close_stream_out(3).expect("its storage");
    drop(gone);
    let evs = deliver(&mut a, &mut b, 1);
    assert_eq!(evs, [Err(RxDrop::NoStream)]);
    assert!(completions(&mut b).is_empty());
    assert!(
        b.post(3, send(1)).is_err(),
        "nothing is posted to a closed stream"
    );
    // A new QP on the slot.
    assert!(b.open_stream_in(3, 203, 103, slot()).is_ok());
    a.post(3, send(200)).unwrap();
    let mut now = 1;
    let mut got = Vec::new();
    for _ in 0..100 {
        now += 1_000_000;
        got.extend(deliver(&mut a, &mut b, now));
        deliver(&mut b, &mut a, now);
        if got.iter().any(|e| matches!(e, Ok(RxEvent::Data(_)))) {
            break;
        }
    }
    let lens: Vec<u16> = got
        .iter()
        .filter_map(|e| match e {
            Ok(RxEvent::Data(p)) => Some(p.len),
            _ => None,
        })
        .collect();
    assert_eq!(lens, [200], "{got:?}");
}
