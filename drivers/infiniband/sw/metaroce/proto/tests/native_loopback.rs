//! A native device talking to itself (`native.rs`: one peer for local GID ==
//! remote GID, so one connection whose DATA and ACKs come back to it), with
//! the kernel's connection shape and timers, driven as the glue drives it:
//! a WRITE whose target memory goes away mid-message is refused packet by
//! packet (`Conn::refuse` on each `RxEvent::Data` it cannot place, result
//! ignored), and the requester's stream is closed at its first completion
//! that is not `Ok`.

use metaroce_proto::conn::{Completion, ConnState, RxEvent, SendStatus};
use metaroce_proto::mrc_wire::{parse, DataHdr, MrcPacket, NakCode, MAX_HDR_LEN};

mod common;
use common::{kernel_config, write, NativeConn, Rand, MS, TICK};

fn kernel_conn() -> Box<NativeConn> {
    Box::new(NativeConn::new(kernel_config(0x5EED)))
}

/// What happened to the requester's messages.
#[derive(Debug)]
struct Run {
    sends: Vec<(u32, SendStatus)>,
    state: ConnState,
}

/// The device: the connection, the packets on their way back to it, the clock.
struct Dev {
    c: Box<NativeConn>,
    seed: u64,
    r: Rand,
    now: u64,
    loss: u64,
    /// DATA packets lost on purpose at a time.
    lose: fn(u64, &DataHdr) -> bool,
    /// (arrival, bytes).
    wire: Vec<(u64, Vec<u8>)>,
    /// Arrival of the last packet of each path's DATA and ACK lanes.
    fifo: [u64; 16],
}

impl Dev {
    fn new(seed: u64, loss: u64) -> Dev {
        Dev {
            c: kernel_conn(),
            seed,
            r: Rand(seed | 1),
            now: 0,
            loss,
            lose: |_, _| false,
            wire: Vec::new(),
            fifo: [0; 16],
        }
    }

    /// The device's loop: pulls every packet the connection has, delivers
    /// each back to it after a delay, runs the timers on the tick. The
    /// glue's receive: `place` says whether a WRITE packet of stream `rx`
    /// can be placed at time `now`; if not, its message is refused.
    /// Requester stream `tx` is closed at its first completion that is not
    /// `Ok`. Runs until `want` completions of `tx` (or `tx` closed and
    /// drained) or `limit` ns.
    fn drive(
        &mut self,
        (tx, rx): (usize, usize),
        want: usize,
        limit: u64,
        place: impl Fn(u64) -> bool,
    ) -> Run {
        let c = &mut self.c;
        let mut sends = Vec::new();
        let mut closed = false;
        let mut buf = [0u8; MAX_HDR_LEN];
        while sends.len() < want && self.now < limit {
            let now = self.now;
            while let Some(t) = c.poll_transmit(now, &mut buf) {
                let mut bytes = buf[..t.hdr_len].to_vec();
                if let Some(p) = t.payload {
                    bytes.resize(t.hdr_len + usize::from(p.len), 0xA5);
                }
                let lose =
                    matches!(parse(&bytes), Ok(MrcPacket::Data(h, _)) if (self.lose)(now, &h));
                if lose || self.r.pct(self.loss) {
                    continue;
                }
                // A software device: tens to hundreds of us; one path (DATA
                // or ACKs) keeps its order.
                let lane = usize::from(t.path) * 2 + usize::from(t.payload.is_none());
                let delay = 20_000 + u64::from(t.path) * 15_000 + self.r.next() % 200_000;
                let at = (now + delay).max(self.fifo[lane]);
                self.fifo[lane] = at;
                self.wire.push((at, bytes));
            }
            let arrival = self.wire.iter().map(|w| w.0).min();
            // Deadlines fire on the next tick after they are due.
            let timer = c.next_deadline().map(|d| d.div_ceil(TICK) * TICK);
            let Some(next) = [arrival, timer].into_iter().flatten().min() else {
                break;
            };
            let now = next.max(now);
            self.now = now;
            let (due, rest): (Vec<_>, Vec<_>) = self.wire.drain(..).partition(|w| w.0 <= now);
            self.wire = rest;
            for (_, bytes) in due {
                if let Ok(RxEvent::Data(p)) = c.on_packet(now, &bytes, false, 50_000, 0) {
                    if p.stream == rx && p.op.is_write() && !place(now) {
                        // native.rs: `Placed::Refuse(code) => { conn.refuse(..); }`.
                        let _ = c.refuse(p.stream, p.msn, NakCode::RemoteAccess);
                    }
                }
            }
            c.on_timer(now);
            while let Some(done) = c.poll_completion() {
                if let Completion::Send {
                    stream,
                    msn,
                    status,
                } = done
                {
                    assert_eq!(stream, tx, "{done:?}");
                    sends.push((msn, status));
                    if status != SendStatus::Ok && !closed {
                        // native_completion returned false: the glue closes the stream.
                        assert!(c.close_stream(tx));
                        closed = true;
                    }
                }
            }
            if closed && c.outstanding(tx) == 0 {
                break;
            }
        }
        Run {
            sends,
            state: c.state(),
        }
    }
}

/// 16 WRITEs of 1 MiB from QP a to QP b of the same device; b's memory is
/// deregistered `dereg` ns after posting. a's first unfinished WRITE
/// completes with RemoteAccess (the ones before it Ok), the connection
/// stays up, and a fresh QP pair on it then works.
fn refused_mid_transfer(seed: u64, dereg: u64, loss: u64) {
    refused_mid_transfer_on(Dev::new(seed, loss), dereg);
}

fn refused_mid_transfer_on(mut d: Dev, dereg: u64) {
    let (seed, loss) = (d.seed, d.loss);
    // QP a (100) on stream 0, QP b (200) on stream 1: each names the other.
    assert!(d.c.open_stream(0, 100, 200));
    assert!(d.c.open_stream(1, 200, 100));
    for _ in 0..16 {
        d.c.post(0, write(1 << 20)).unwrap();
    }
    let run = d.drive((0, 1), 16, 120_000 * MS, |now| now < dereg);
    let ctx = format!("seed {seed} dereg {} ms loss {loss}%: {run:?}", dereg / MS);
    assert_eq!(run.state, ConnState::Active, "{ctx}");
    let bad = run.sends.iter().position(|s| s.1 != SendStatus::Ok);
    let bad = bad.unwrap_or_else(|| panic!("no error completion: {ctx}"));
    assert_eq!(run.sends[bad].1, SendStatus::RemoteAccess, "{ctx}");
    assert!(
        run.sends[..bad]
            .iter()
            .enumerate()
            .all(|(i, s)| s.0 == i as u32),
        "{ctx}"
    );
    // (The glue flushes the rest of a's requests: its QP is in the error state.)
    // A fresh QP pair on the same connection.
    assert!(d.c.open_stream(2, 300, 400));
    assert!(d.c.open_stream(3, 400, 300));
    d.c.post(2, write(256 << 10)).unwrap();
    let limit = d.now + 10_000 * MS;
    let fresh = d.drive((2, 3), 1, limit, |_| true);
    assert_eq!(fresh.sends, [(0, SendStatus::Ok)], "fresh pair after {ctx}");
}

/// The VM's case: the target memory goes away while the WRITEs are on
/// their way (here the whole transfer takes about 19 ms without loss), in
/// the first message or a later one, with and without loss. Before the fix
/// a lost packet that completed a refused message, or was the oldest in
/// flight, could be held for a NAK that never got a Dsn, until the whole
/// connection failed (RetryExceeded, then every later QP flushed); and
/// packets lost when the requester's stream closed left the Dsn window
/// stuck, so that the next QP pair's data was dropped.
#[test]
fn loopback_write_refused_mid_transfer_completes_with_remote_access() {
    for loss in [0, 1, 3] {
        for seed in 1..=10 {
            let dereg = MS / 2 + (seed * 7_919_000) % (15 * MS);
            refused_mid_transfer(seed, dereg, loss);
        }
    }
}

/// The packet that completes a's first WRITE is lost until the Dsn window
/// (512 descriptors) is full behind it; then b's memory goes away and the
/// packet arrives. It completes a message b must refuse: before the fix b
/// took back its acknowledgement until its NAK was acknowledged, but the
/// NAK needed a Dsn of that same full window, so the packet was resent
/// until a's stream (or, before streams could fail alone, the whole
/// connection) failed with RetryExceeded.
#[test]
fn loopback_refusal_behind_a_full_dsn_window() {
    const GONE: u64 = 60 * MS;
    let mut d = Dev::new(1, 0);
    d.lose = |now, h| h.stream == 200 && h.msn == 0 && h.offset == (1 << 20) - 1024 && now < GONE;
    refused_mid_transfer_on(d, GONE);
}
