//! Connections whose state for packets in flight is lent (`flight.rs`, transport.rst section
//! 10.1), driven as the kernel glue drives them: a flight is taken from a pool when the
//! connection wants one, before it is polled, and given back to the pool when the connection
//! hands it back after its idle time. Only a connection with something to send holds one.

use metaroce_proto::cc::Aimd;
use metaroce_proto::conn::{Completion, Conn, ConnConfig, Flight, RxEvent, SendStatus};
use metaroce_proto::mrc_wire::MAX_HDR_LEN;
use metaroce_proto::stream::Stream;

mod common;
use common::{kernel_config, packets, write, Rand, MS, TICK};

type Lent = Option<Box<Flight<8, 512>>>;
/// The kernel's shape with a lent flight.
type LentConn = Conn<8, 512, 8, 16, 32, Aimd, [Stream<32>; 16], Lent>;

fn conn(cfg: ConnConfig) -> Box<LentConn> {
    Box::new(LentConn::new(cfg))
}

/// The device's pool: flights given back, and how many were ever made.
#[derive(Default)]
struct Pool {
    spare: Vec<Box<Flight<8, 512>>>,
    made: usize,
}

impl Pool {
    fn take(&mut self) -> Box<Flight<8, 512>> {
        self.spare.pop().unwrap_or_else(|| {
            self.made += 1;
            Box::new(Flight::EMPTY)
        })
    }
}

/// Every packet `c` sends at `now`, after lending it a flight if it wants one (as the glue's
/// `pull_tx` does).
fn pull<const S: usize>(
    c: &mut Conn<8, 512, 8, S, 32, Aimd, [Stream<32>; S], Lent>,
    pool: &mut Pool,
    now: u64,
) -> Vec<Vec<u8>> {
    if c.flight_wanted() {
        assert!(c.lend_flight(now, pool.take()).is_ok());
    }
    packets(c, now)
}

/// Two connections, `a` sending WRITEs to `b`, over a link that loses `loss` percent of the
/// packets each way and delays each by 20-220 us.
struct Pair {
    a: Box<LentConn>,
    b: Box<LentConn>,
    pool: Pool,
    r: Rand,
    loss: u64,
    now: u64,
    /// (arrival, to b, bytes).
    wire: Vec<(u64, bool, Vec<u8>)>,
    /// Payload bytes `b` placed, and `a`'s completions.
    placed: u64,
    done: Vec<(u32, SendStatus)>,
}

impl Pair {
    fn new(seed: u64, loss: u64, idle_ns: u64) -> Pair {
        let mut ca = kernel_config(0xA11CE);
        ca.flight_idle_ns = idle_ns;
        let mut cb = kernel_config(0xB0B);
        cb.flight_idle_ns = idle_ns;
        let mut a = conn(ca);
        let mut b = conn(cb);
        assert!(a.open_stream(0, 10, 20));
        assert!(b.open_stream(0, 20, 10));
        Pair {
            a,
            b,
            pool: Pool::default(),
            r: Rand(seed | 1),
            loss,
            now: 0,
            wire: Vec::new(),
            placed: 0,
            done: Vec::new(),
        }
    }

    /// Runs until `until` (or nothing is left to do), as the glue does: pull, deliver, run
    /// the timers on the tick, give back what the connections hand back.
    fn run(&mut self, until: u64) {
        loop {
            let now = self.now;
            for to_b in [true, false] {
                let c = if to_b { &mut self.a } else { &mut self.b };
                for bytes in pull(c, &mut self.pool, now) {
                    if self.r.pct(self.loss) {
                        continue;
                    }
                    let at = now + 20_000 + self.r.next() % 200_000;
                    self.wire.push((at, to_b, bytes));
                }
            }
            while let Some(c) = self.a.poll_completion() {
                if let Completion::Send { msn, status, .. } = c {
                    self.done.push((msn, status));
                }
            }
            while self.b.poll_completion().is_some() {}
            let arrival = self.wire.iter().map(|w| w.0).min();
            let timer = [self.a.next_deadline(), self.b.next_deadline()]
                .into_iter()
                .flatten()
                .min()
                .map(|d| d.div_ceil(TICK) * TICK);
            let Some(next) = [arrival, timer].into_iter().flatten().min() else {
                return;
            };
            if next > until {
                self.now = until;
                return;
            }
            let now = next.max(now);
            self.now = now;
            let (due, rest): (Vec<_>, Vec<_>) = self.wire.drain(..).partition(|w| w.0 <= now);
            self.wire = rest;
            for (_, to_b, bytes) in due {
                let c = if to_b { &mut self.b } else { &mut self.a };
                if let Ok(RxEvent::Data(p)) = c.on_packet(now, &bytes, false, 50_000, 0) {
                    self.placed += u64::from(p.len);
                }
            }
            for c in [&mut self.a, &mut self.b] {
                c.on_timer(now);
                if let Some(f) = c.reclaim_flight(now) {
                    self.pool.spare.push(f);
                }
            }
        }
    }
}

#[test]
fn a_flight_is_lent_on_demand_and_given_back_when_idle() {
    let mut p = Pair::new(1, 0, 100 * MS);
    assert!(!p.a.has_flight() && !p.a.flight_wanted());
    assert_eq!(p.a.next_deadline(), None);
    // A message to send: nothing leaves without a flight.
    p.a.post(0, write(64 * 1024)).unwrap();
    assert!(p.a.flight_wanted());
    let mut buf = [0u8; MAX_HDR_LEN];
    assert!(p.a.poll_transmit(0, &mut buf).is_none());
    p.run(50 * MS);
    assert_eq!(p.done, [(0, SendStatus::Ok)]);
    assert_eq!(p.placed, 64 * 1024);
    // Lent, and kept until it was idle for 100 ms after the last ACK.
    assert!(p.a.has_flight());
    assert_eq!((p.pool.made, p.a.stats.flights_lent), (1, 1));
    let release = p.a.next_deadline().expect("the release is a deadline");
    assert!(release > 100 * MS && release <= 150 * MS, "{release}");
    assert!(p.a.reclaim_flight(release - 1).is_none());
    p.run(release + TICK);
    assert!(!p.a.has_flight());
    assert_eq!(p.a.next_deadline(), None);
    assert_eq!((p.pool.spare.len(), p.a.stats.flights_returned), (1, 1));
    // The receiver only sent ACKs: it never held one.
    assert_eq!(p.b.stats.flights_lent, 0);
    // The next message takes the same flight back, given back empty.
    p.a.post(0, write(8 * 1024)).unwrap();
    p.run(p.now + 50 * MS);
    assert_eq!(p.done.len(), 2);
    assert_eq!(p.done[1], (1, SendStatus::Ok));
    assert_eq!(p.placed, 72 * 1024);
    assert_eq!((p.pool.made, p.a.stats.flights_lent), (1, 2));
}

#[test]
fn the_last_stream_closing_gives_the_flight_back_at_once() {
    let mut p = Pair::new(3, 0, 100 * MS);
    p.a.post(0, write(4096)).unwrap();
    p.run(20 * MS);
    assert_eq!(p.done, [(0, SendStatus::Ok)]);
    assert!(p.a.has_flight());
    // Not while a message waits to be sent.
    p.a.post(0, write(4096)).unwrap();
    assert!(p.a.release_flight().is_none());
    p.run(p.now + 20 * MS);
    assert_eq!(p.done.len(), 2);
    // The QP goes: nothing is in flight, so the flight goes back without waiting 100 ms.
    assert!(p.a.close_stream(0));
    let f = p.a.release_flight().expect("given back");
    assert!(!p.a.has_flight() && p.a.next_deadline().is_none());
    assert_eq!(p.a.stats.flights_returned, 1);
    // A stream opened again sends with a flight lent again.
    assert!(p.a.open_stream(0, 11, 20));
    p.pool.spare.push(f);
    p.a.post(0, write(4096)).unwrap();
    assert!(p.a.flight_wanted());
    p.run(p.now + 20 * MS);
    assert!(p.a.has_flight() && p.a.stats.flights_lent == 2);
}

#[test]
fn nothing_in_flight_is_given_back() {
    // A flight idle time shorter than an RTT: the flight still stays while packets are out.
    let mut p = Pair::new(7, 0, 1);
    p.a.post(0, write(256 * 1024)).unwrap();
    let mut buf = [0u8; MAX_HDR_LEN];
    let f = p.pool.take();
    assert!(p.a.lend_flight(0, f).is_ok());
    assert!(p.a.poll_transmit(0, &mut buf).is_some());
    // Lending a second one is refused: it comes back.
    let again = Box::new(Flight::EMPTY);
    assert!(p.a.lend_flight(0, again).is_err());
    for t in [0, 1, MS, 10 * MS] {
        assert!(p.a.reclaim_flight(t).is_none(), "at {t}");
    }
    assert!(p.a.release_flight().is_none());
    assert!(p.a.has_flight());
}

#[test]
fn lent_flights_come_and_go_under_loss() {
    // Bursts of WRITEs with idle spells longer than the flight idle time between them: the
    // sender's flight is given back and lent again many times, under 5 % loss each way.
    for seed in 1..=6u64 {
        let mut p = Pair::new(seed, 5, 20 * MS);
        let mut want = 0u64;
        let mut posted = 0;
        for burst in 0..12u32 {
            for k in 0..3u32 {
                let len = 1 + (burst * 7919 + k * 104_729) % (48 * 1024);
                p.a.post(0, write(len)).unwrap();
                want += u64::from(len);
                posted += 1;
            }
            let until = p.now + 400 * MS;
            p.run(until);
            assert_eq!(p.done.len(), posted, "seed {seed} burst {burst}");
        }
        assert!(p.done.iter().all(|d| d.1 == SendStatus::Ok), "seed {seed}");
        let msns: Vec<u32> = p.done.iter().map(|d| d.0).collect();
        assert_eq!(msns, (0..posted as u32).collect::<Vec<_>>(), "seed {seed}");
        // Every byte placed at least once (retransmissions may place some twice).
        assert!(p.placed >= want, "seed {seed}: {} < {want}", p.placed);
        // One flight served every burst: returned between bursts, lent again.
        let s = p.a.stats;
        assert_eq!(p.pool.made, 1, "seed {seed}");
        assert!(
            s.flights_lent >= 10 && s.flights_returned >= 10,
            "seed {seed}: {s:?}"
        );
        assert!(s.retransmits > 0, "seed {seed}: the loss was felt");
        assert_eq!(p.b.stats.flights_lent, 0, "seed {seed}");
    }
}

/// A connection of one stream with its flight lent (the kernel's shape otherwise).
type OneStream = Conn<8, 512, 8, 1, 32, Aimd, [Stream<32>; 1], Lent>;

/// One pair of [`many_connections_share_a_pool_sized_by_traffic`]: `a` sends one WRITE to `b`.
struct Link {
    a: Box<OneStream>,
    b: Box<OneStream>,
    /// The WRITE was posted (at the first `due`: the wave's start).
    posted: bool,
    /// (arrival, to b, bytes).
    wire: Vec<(u64, bool, Vec<u8>)>,
    /// When something is next due: the earliest arrival or deadline (`u64::MAX`: nothing).
    due: u64,
    placed: u64,
    done: Option<SendStatus>,
}

#[test]
fn many_connections_share_a_pool_sized_by_traffic() {
    // 4,096 connections on each side (issue 34, item 4): a new wave of 256 starts sending a
    // 16 KiB WRITE every 2 ms; each flight goes back 2 ms after its connection's last ACK.
    const N: usize = 4096;
    const WAVE: usize = 256;
    const LEN: u32 = 16 * 1024;
    let mut r = Rand(0x4096);
    let mut pool = Pool::default();
    let mut links: Vec<Link> = (0..N)
        .map(|i| {
            let mut ca = kernel_config(2 * i as u32 + 1);
            ca.flight_idle_ns = 2 * MS;
            let mut cb = kernel_config(2 * i as u32 + 2);
            cb.flight_idle_ns = 2 * MS;
            let mut a = Box::new(OneStream::new(ca));
            let mut b = Box::new(OneStream::new(cb));
            assert!(a.open_stream(0, 10, 20) && b.open_stream(0, 20, 10));
            let start = (i / WAVE) as u64 * 2 * MS;
            Link {
                a,
                b,
                posted: false,
                wire: Vec::new(),
                due: start,
                placed: 0,
                done: None,
            }
        })
        .collect();
    let step = 10_000;
    let mut peak = 0;
    let mut now = 0;
    while now < 200 * MS {
        for l in links.iter_mut().filter(|l| l.due <= now) {
            if !l.posted {
                l.a.post(0, write(LEN)).unwrap();
                l.posted = true;
            }
            let (due, rest): (Vec<_>, Vec<_>) = l.wire.drain(..).partition(|w| w.0 <= now);
            l.wire = rest;
            for (_, to_b, bytes) in due {
                let c = if to_b { &mut l.b } else { &mut l.a };
                if let Ok(RxEvent::Data(p)) = c.on_packet(now, &bytes, false, 50_000, 0) {
                    l.placed += u64::from(p.len);
                }
            }
            for c in [&mut l.a, &mut l.b] {
                c.on_timer(now);
                if let Some(f) = c.reclaim_flight(now) {
                    pool.spare.push(f);
                }
            }
            for to_b in [true, false] {
                let c = if to_b { &mut l.a } else { &mut l.b };
                for bytes in pull(c, &mut pool, now) {
                    l.wire
                        .push((now + 20_000 + r.next() % 200_000, to_b, bytes));
                }
            }
            while let Some(c) = l.a.poll_completion() {
                if let Completion::Send { status, .. } = c {
                    l.done = Some(status);
                }
            }
            while l.b.poll_completion().is_some() {}
            let timers = [l.a.next_deadline(), l.b.next_deadline()];
            l.due = [l.wire.iter().map(|w| w.0).min()]
                .into_iter()
                .chain(timers)
                .flatten()
                .min()
                .map_or(u64::MAX, |d| d.div_ceil(step) * step);
        }
        peak = peak.max(pool.made - pool.spare.len());
        if links.iter().all(|l| l.done.is_some() && l.due == u64::MAX) {
            break;
        }
        now += step;
    }
    for (i, l) in links.iter().enumerate() {
        assert_eq!(l.done, Some(SendStatus::Ok), "pair {i}");
        assert!(l.placed >= u64::from(LEN), "pair {i}: {} placed", l.placed);
        assert!(
            !l.a.has_flight() && !l.b.has_flight(),
            "pair {i} still holds a flight"
        );
        assert_eq!(
            (l.a.stats.flights_lent, l.b.stats.flights_lent),
            (1, 0),
            "pair {i}"
        );
    }
    // Every flight came back, and the pool holds about two waves' worth, not one per
    // connection.
    assert_eq!(pool.spare.len(), pool.made);
    assert!(
        pool.made <= 2 * WAVE,
        "{} flights made for {N} connections",
        pool.made
    );
    let idle = core::mem::size_of::<OneStream>();
    let flight = core::mem::size_of::<Flight<8, 512>>();
    println!(
        "{N} connections, {} flights made (peak lent {peak}); idle connection {idle} B, flight {flight} B",
        pool.made
    );
    assert!(idle < 16 * 1024 && flight > 60 * 1024);
}
