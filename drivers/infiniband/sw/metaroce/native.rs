// SPDX-License-Identifier: GPL-2.0

//! The MetaRoCE native transport of a `metaroce-native` device
//! (`Documentation/metaroce/transport.rst`).
//!
//! A device keeps one [`Peer`] per (local GID, remote GID) pair its RC QPs talk to: a protocol
//! core connection ([`NativeConn`]: paths, SACK, retransmission, congestion control, streams)
//! and the QP number of each of its stream slots. An RC QP that reaches RTR is bound to a
//! stream of its peer's connection (section 8) and stays bound until it is reset, put in the
//! error state or destroyed, when its stream is closed (its unacknowledged messages are
//! abandoned; the QP flushes their work requests).
//!
//! The QP glue (`qp.rs`) keeps each QP's work requests as for RoCEv2; this module moves them
//! into the connection, writes packets from it, places received data and turns the
//! connection's completions into work completions. Packets still flow one way each: the
//! transmit worker pulls from a QP's peer ([`pull_tx`]), the receive path hands datagrams of
//! the native port to [`receive`]; timers run through the device's timer list (`timer.rs`),
//! whichever bound QP listed them.
//!
//! Locking: a peer's lock is taken before the lock of any QP bound to it, never after (the QP
//! glue never takes a peer lock while it holds a QP lock: it defers binding changes to
//! [`crate::qp::Notify::deliver`]). Completion handlers run after both are released. Packets
//! are polled from the connection under its lock but built (skb, payload copy under the
//! sending QP's lock only) after it is dropped.
//!
//! UD and UC QPs (QP1 included, so rdma_cm works) of a native device use the RoCEv2 wire.

use crate::device::{Counter, MetaRoceDriver};
use crate::proto::auth::{self as sealing, TRAILER_LEN};
use crate::proto::conn::{Completion, Conn, ConnConfig, ConnState, RxDrop, RxEvent};
use crate::proto::mrc_wire::{self, MrcPacket, DATA_HDR_LEN, MAX_HDR_LEN};
use crate::proto::offload::{native_rx, NicIntegrity};
use crate::proto::packet;
use crate::qp::{self, Notify};
use crate::timer;
use crate::verbs::RoceAv;
use crate::xmit::{self, BuildError, OutPacket, Pull};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use kernel::new_spinlock_irq;
use kernel::prelude::*;
use kernel::rdma::device::Device;
use kernel::rdma::mmap::SharedBuf;
use kernel::rdma::qp::{Qp, UcontextId};
use kernel::rdma::{init_const, ConstValue};
use kernel::sync::aref::ARef;
use kernel::sync::{Arc, SpinLockIrq};

mod auth;
mod flight;
mod streams;
mod table;
mod telemetry;

use auth::{KernelMac, PeerKeyCache, PeerKeys};
pub(crate) use flight::FlightPool;
use streams::{Bindings, Bound};

pub(crate) use table::{peer, pull_orphans, reap_now_and_then, within_quota, PeerTable, Peers};
use telemetry::{account, Figures, PathSeen};
pub(crate) use telemetry::{rtt_figures, ConnView, StatsPage};

/// Paths per connection (section 10).
pub(crate) const PATHS: usize = 8;
/// Dsn descriptors per connection (packets in flight), a multiple of 64.
const DESCS: usize = 512;
/// Streams (RC QPs) per connection; each bound one is an allocation of its own
/// ([`streams::Bound`]).
pub(crate) const STREAMS: usize = 256;
/// Messages per stream outstanding (`K`).
pub(crate) const MSGS: usize = 32;
/// Completions handled per peer lock hold (their QPs are notified after it).
const NOTES: usize = 16;
/// A connection whose peer sent no DATA for this long asks a peer that sends with a new
/// connection id to prove it (section 7.1, `IDLE_REAP`).
const RESTART_IDLE_NS: u64 = 1_000_000_000;

/// The protocol core's connection in the kernel's shape: about 4.5 KiB plus its streams'
/// pointers ([`Bindings`]), never on a stack; its state for packets in flight is lent from the
/// device's pool while it sends ([`flight`]).
pub(crate) type NativeConn = Conn<
    PATHS,
    DESCS,
    { DESCS / 64 },
    STREAMS,
    MSGS,
    crate::proto::cc::Aimd,
    Bindings,
    Option<flight::Lent>,
>;

/// A connection that was never used, copied into each new allocation (in place, from
/// read-only data: [`init_const`]) and then configured.
struct Blank;

impl ConstValue for Blank {
    type Target = NativeConn;
    const VALUE: NativeConn = NativeConn::new(ConnConfig::new(1));
}

/// IP, UDP and MetaRoCE header (and authentication trailer) bytes in an Ethernet frame's
/// payload at worst (IPv6).
const NATIVE_HDR_MAX: u32 = 40 + 8 + DATA_HDR_LEN as u32 + TRAILER_LEN as u32;

/// The payload bytes per DATA packet on a netdev of MTU `eth_mtu`: whatever fits with the
/// headers at worst (transport.rst, section 2), at least 256 and at most the wire's
/// `MAX_PAYLOAD` (not an IB MTU: the native wire has no reason to round down to one).
pub(crate) fn mss(eth_mtu: u32) -> u16 {
    let fits = eth_mtu.saturating_sub(NATIVE_HDR_MAX);
    fits.clamp(256, u32::from(mrc_wire::MAX_PAYLOAD)) as u16
}

/// A connection's mutable state.
pub(crate) struct PeerInner {
    /// Inline: with the rest of the peer one allocation of under 8 KiB.
    pub(crate) conn: NativeConn,
    /// The authenticated mode: keys of the peer's data direction.
    peer_keys: PeerKeyCache,
    /// DATA packets dropped because the destination QP had no receive request posted.
    rnr_drops: u64,
    /// The figures already added to the device's counters ([`account`]).
    counted: Figures,
    /// Each path as the last path tracepoints saw it (`telemetry::trace_paths`); valid while
    /// `tracing`.
    traced: [PathSeen; PATHS],
    /// `metaroce_path` was enabled at the last `telemetry::trace_paths`.
    tracing: bool,
    /// The rate hint the last `metaroce_rate_hint` event reported.
    traced_hint: u32,
    /// When the pages were last rewritten (ns, 0: never), their sequence number (even) and how
    /// many rewrites there were.
    published_ns: u64,
    stats_seq: u32,
    publishes: u64,
}

/// The connection to one remote device, shared by every RC QP between the two GIDs.
#[pin_data]
pub(crate) struct Peer {
    /// Our GID (source address of the packets).
    pub(crate) sgid: [u8; 16],
    /// The remote device's GID.
    pub(crate) dgid: [u8; 16],
    /// The connection's identity in its device's table (non-zero, never reused).
    id: u64,
    /// The table's fair-share slot this connection last held ([`PeerTable`]; valid while the
    /// table says it holds it).
    rate_slot: AtomicU32,
    /// No QP is bound, yet the connection owes its peer packets ([`table::mark_orphan`]).
    orphan: AtomicBool,
    /// The authenticated mode's fixed keys (`None`: the plain mode).
    keys: Option<PeerKeys>,
    /// Streams (bit `i % 64` of word `i / 64`: stream `i`) whose QPs may have work requests
    /// the connection has not taken yet: set by the posting side without the connection's
    /// lock ([`want_feed`]), taken by [`feed`] under it, so that a transmission visits only the
    /// QPs that posted.
    feed: [AtomicU64; FEED_WORDS],
    #[pin]
    pub(crate) inner: SpinLockIrq<PeerInner>,
}

/// Words of `Peer::feed`, one bit per stream.
const FEED_WORDS: usize = STREAMS.div_ceil(64);

/// Stream `idx` of `peer` has work requests for the connection to take ([`feed`]). Any
/// context, no lock needed.
pub(crate) fn want_feed(peer: &Peer, idx: usize) {
    if let Some(w) = peer.feed.get(idx / 64) {
        w.fetch_or(1 << (idx % 64), Ordering::AcqRel);
    }
}

/// A connection id (section 7): random and non-zero, so that an off-path host cannot predict
/// the id of the next connection this device makes (it is the first thing a receiver checks).
fn conn_id() -> u32 {
    loop {
        let x = kernel::rdma::get_random_u32();
        if x != 0 {
            return x;
        }
    }
}

impl Peer {
    /// Whether the connection failed (a packet exceeded its retransmissions): it carries
    /// nothing more, and the next QP bound towards its peer gets a new connection ([`peer`]).
    fn failed(&self) -> bool {
        self.inner.lock().conn.state() == ConnState::Failed
    }

    /// Whether the table may drop this connection at `now`: no QP is bound to it, and it
    /// failed or is quiet (nothing in flight, no timer, no DATA from its peer for
    /// [`table::REAP_IDLE_NS`]). A peer that later sends again finds no connection (counted
    /// `rcvd_no_qp`) until a QP of ours binds towards it; its new ConnId is then taken as a
    /// restart. QPs that still hold a reference keep the connection alive, outside the table.
    fn reapable(&self, now: u64) -> bool {
        let g = self.inner.lock();
        g.conn.streams_hi() == 0
            && (g.conn.state() == ConnState::Failed
                || (g.conn.timer_deadline().is_none()
                    && g.conn
                        .last_rx()
                        .is_none_or(|t| now.saturating_sub(t) > table::REAP_IDLE_NS)))
    }

    /// Whether a QP of user context `ctx` is bound to this connection.
    fn held_by(&self, ctx: UcontextId) -> bool {
        self.inner.lock().conn.store().held_by(ctx)
    }
}

/// A new connection from `av.sgid` to `av.dgid` with `paths` paths and identity `id`, configured
/// from the module's parameters ([`table::peer`] enters it in the table). Process context.
fn new_peer(
    dev: &Device<MetaRoceDriver>,
    av: &RoceAv,
    eth_mtu: u32,
    paths: u8,
    id: u64,
) -> Result<Arc<Peer>> {
    let mut cfg = ConnConfig::new(conn_id());
    cfg.mss = mss(eth_mtu);
    cfg.paths = paths;
    // Deadlines fire on the device's timer tick (`timer.rs`): an RTO shorter than two ticks
    // only fires late or spuriously (a software peer's ACKs wait for its transmit worker,
    // several ms under load), and every spurious RTO collapses a path's window and moves
    // it. Loss is found by SACK gaps within an RTT; the RTO is the backstop.
    let tick = u64::from(timer::TICK_MS) * 1_000_000;
    let rto_min_ms = crate::module_parameters::native_rto_min_ms
        .value()
        .clamp(timer::TICK_MS, 2000);
    cfg.rto_min_ns = u64::from(rto_min_ms) * 1_000_000;
    cfg.rto_init_ns = cfg.rto_min_ns.max(4 * tick);
    cfg.delay_target_ns =
        u64::from(crate::module_parameters::native_delay_target_us.value()) * 1000;
    cfg.late_acks = crate::module_parameters::native_late_acks.value() != 0;
    cfg.silence_probes = crate::module_parameters::native_silence_probes.value() != 0;
    cfg.ack_train_ns = u64::from(
        crate::module_parameters::native_ack_train_us
            .value()
            .min(100_000),
    ) * 1000;
    cfg.pto_min_ns = tick;
    // The pacer is polled on ACKs, doorbells and the timer tick: with no credit a sender
    // polled late (after its gap ended) sends one packet per poll, one per ACK. A tick of
    // credit (the default) keeps the hinted rate at the tick's granularity.
    cfg.pace_burst_ns = u64::from(crate::module_parameters::native_pace_burst_us.value()) * 1000;
    // A software device may sit behind slow or deeply queued links (or a loaded host): an RTO
    // capped at the core's 100 ms fires on every packet once the RTT exceeds it (seen: 1464
    // RTOs for 1793 packets over four 300 kbit/s links, whose queues hold 400 ms).
    cfg.rto_max_ns = 2_000_000_000;
    // ACKs the receive path (rx_transmit 1 or 2) sends at once; the worker sends the rest.
    cfg.ack_every = crate::module_parameters::native_ack_every
        .value()
        .clamp(1, u32::from(u16::MAX)) as u16;
    cfg.restart_idle_ns = RESTART_IDLE_NS;
    // A lent flight goes back after this long idle; given back at a tick, so at least two.
    cfg.flight_idle_ns = u64::from(
        crate::module_parameters::native_flight_idle_ms
            .value()
            .clamp(2 * timer::TICK_MS, 60_000),
    ) * 1_000_000;
    // Runs of packets per path that the transmit batch hands the stack as one GSO packet.
    cfg.path_run = crate::module_parameters::native_path_run
        .value()
        .clamp(1, 64) as u8;
    let key = || {
        u64::from(kernel::rdma::get_random_u32()) << 32 | u64::from(kernel::rdma::get_random_u32())
    };
    cfg.restart_key = [key(), key()];
    cfg.auth = dev.auth.is_some();
    let keys = match &dev.auth {
        Some(fabric) => Some(PeerKeys::new(fabric, &av.sgid, &av.dgid, cfg.conn_id)?),
        None => None,
    };
    let p = Arc::pin_init(
        pin_init!(Peer {
            sgid: av.sgid,
            dgid: av.dgid,
            id,
            rate_slot: AtomicU32::new(u32::MAX),
            orphan: AtomicBool::new(false),
            keys,
            feed: [const { AtomicU64::new(0) }; FEED_WORDS],
            // In place: the connection is too large for a stack.
            inner <- new_spinlock_irq!(
                init!(PeerInner {
                    conn <- init_const::<Blank>(),
                    peer_keys: PeerKeyCache::EMPTY,
                    rnr_drops: 0,
                    counted: Figures::default(),
                    traced: [PathSeen::NONE; PATHS],
                    tracing: false,
                    traced_hint: 0,
                    published_ns: 0,
                    stats_seq: 0,
                    publishes: 0,
                }),
                "metaroce_peer"
            ),
        }),
        GFP_KERNEL,
    )?;
    if !p.inner.lock().conn.set_config(cfg) {
        return Err(EINVAL);
    }
    Ok(p)
}

/// Binds QP `local_qpn` of user context `owner` (`None`: a kernel QP), talking to the peer's QP
/// `remote_qpn`, with its stats page if it has one, to a free stream of `peer`; returns the
/// stream's index. `ENOSPC` if every stream is taken. Any context.
pub(crate) fn bind(
    peer: &Peer,
    local_qpn: u32,
    owner: Option<UcontextId>,
    remote_qpn: u32,
    page: Option<Arc<SharedBuf>>,
) -> Result<usize> {
    // Given back if it is not taken: freed (with its page reference) after the lock.
    let mut b = Some(Bound::new(owner, page)?);
    let idx = {
        let mut g = peer.inner.lock();
        let inner = &mut *g;
        match (inner.conn.store().free(), b.take()) {
            (Some(i), Some(s)) => match inner.conn.open_stream_in(i, local_qpn, remote_qpn, s) {
                Ok(()) => {
                    // The new page gets the figures at the next chance.
                    inner.published_ns = 0;
                    Ok(i)
                }
                Err(s) => {
                    b = Some(s);
                    Err(EINVAL)
                }
            },
            (_, s) => {
                b = s;
                Err(ENOSPC)
            }
        }
    };
    drop(b);
    let idx = idx?;
    // Requests posted before the QP was bound wait for the connection too.
    want_feed(peer, idx);
    Ok(idx)
}

/// Closes stream `idx` of `peer`, a connection of `dev`, if QP `qpn` still holds it. Any
/// context; the caller holds no QP lock.
pub(crate) fn unbind(dev: &Device<MetaRoceDriver>, peer: &Peer, idx: usize, qpn: u32) {
    let (bound, back) = {
        let mut g = peer.inner.lock();
        if g.conn.stream_qpn(idx) != Some(qpn) {
            return;
        }
        let bound = g.conn.close_stream_out(idx);
        // The last QP went: nothing is sent before another binds (and no QP's tick would give
        // the flight back), so it goes back now if nothing is in flight.
        let back = match g.conn.streams_hi() {
            0 => g.conn.release_flight(),
            _ => None,
        };
        (bound, back)
    };
    // Outside the lock: the last reference frees the page (vfree), a flight the pool does not
    // keep is freed.
    drop(bound);
    if let Some(f) = back {
        drop(dev.flights.give(f));
    }
}

/// QPs whose completions or errors were produced under a peer lock, notified after it.
struct Notes {
    qps: [Option<(ARef<Qp<MetaRoceDriver>>, Notify)>; NOTES],
    len: usize,
    /// The storage of streams closed under the lock ([`close`]), freed after it (a stats
    /// page's last reference must not go under a spinlock). One QP is bound to one stream, and
    /// a stream is closed only for a QP listed here: `NOTES` entries suffice.
    closed: [Option<KBox<Bound>>; NOTES],
}

impl Notes {
    fn new() -> Self {
        Self {
            qps: [const { None }; NOTES],
            len: 0,
            closed: [const { None }; NOTES],
        }
    }

    fn full(&self) -> bool {
        self.len == NOTES
    }

    /// The notification record of `qp` (one per QP).
    fn of(&mut self, qp: &ARef<Qp<MetaRoceDriver>>) -> Option<&mut Notify> {
        let at = self.qps[..self.len]
            .iter()
            .position(|e| e.as_ref().is_some_and(|(q, _)| core::ptr::eq(&**q, &**qp)));
        let at = match at {
            Some(i) => i,
            None if self.len < NOTES => {
                self.qps[self.len] = Some((qp.clone(), Notify::default()));
                self.len += 1;
                self.len - 1
            }
            None => return None,
        };
        self.qps[at].as_mut().map(|(_, n)| n)
    }

    /// Notifies every listed QP; arms its timer if `timed` (the connection waits for a
    /// deadline) — listing every QP keeps the timer running while any of them lives.
    fn deliver(self, timed: bool) {
        for (qp, n) in self.qps.into_iter().flatten() {
            n.deliver(&qp);
            if timed {
                timer::arm(&qp);
            }
        }
    }
}

/// The QP bound to stream `idx`, if it is still published.
fn stream_qp(
    dev: &Device<MetaRoceDriver>,
    inner: &PeerInner,
    idx: usize,
) -> Option<ARef<Qp<MetaRoceDriver>>> {
    inner
        .conn
        .stream_qpn(idx)
        .and_then(|qpn| dev.lookup_qp(qpn))
}

/// Hands the connection's completions to their QPs (as many as `notes` has room for).
fn reap(dev: &Device<MetaRoceDriver>, inner: &mut PeerInner, notes: &mut Notes) {
    while !notes.full() {
        let Some(c) = inner.conn.poll_completion() else {
            return;
        };
        let idx = match c {
            Completion::Send { stream, .. } | Completion::Recv { stream, .. } => stream,
        };
        let Some(q) = stream_qp(dev, inner, idx) else {
            continue;
        };
        let Some(n) = notes.of(&q) else { return };
        if !qp::native_completion(&q, idx, &c, n) {
            // The QP broke (its stream is closed at once; the binding was taken).
            close(inner, idx, notes);
        }
    }
}

/// Closes stream `idx` under the connection's lock; its storage waits in `notes`, freed after
/// the lock.
fn close(inner: &mut PeerInner, idx: usize, notes: &mut Notes) {
    if let Some(b) = inner.conn.close_stream_out(idx) {
        match notes.closed.iter_mut().find(|c| c.is_none()) {
            Some(c) => *c = Some(b),
            // Not reached (see `Notes::closed`): its QP, listed, still holds the page.
            None => drop(b),
        }
    }
}

/// Moves the work requests posted to the QPs that asked for it ([`want_feed`]) into the
/// connection. A QP whose requests do not all fit (the connection's message window is full)
/// stays marked, and the next transmission, after completions made room, tries again.
fn feed(dev: &Device<MetaRoceDriver>, peer: &Peer, inner: &mut PeerInner, notes: &mut Notes) {
    for (w, word) in peer.feed.iter().enumerate() {
        let mut bits = word.swap(0, Ordering::AcqRel);
        while bits != 0 {
            let idx = w * 64 + bits.trailing_zeros() as usize;
            let Some(q) = stream_qp(dev, inner, idx) else {
                bits &= bits - 1;
                continue;
            };
            let Some(n) = notes.of(&q) else {
                // No room to note more QPs: the rest waits for the next transmission.
                word.fetch_or(bits, Ordering::AcqRel);
                return;
            };
            bits &= bits - 1;
            match qp::native_feed(&q, idx, &mut inner.conn, n) {
                Some(false) => {}
                Some(true) => want_feed(peer, idx),
                None => close(inner, idx, notes),
            }
        }
    }
}

/// Packets polled from a connection per hold of its lock ([`pull_tx`]).
const POLL_CHUNK: usize = 4;

/// A packet polled from the connection under its lock, built after the lock is dropped.
struct Polled {
    t: crate::proto::conn::Transmit,
    hdr: [u8; MAX_HDR_LEN],
    /// The QP bound to the payload's stream when the packet was polled (DATA packets).
    qp: Option<ARef<Qp<MetaRoceDriver>>>,
    /// The authenticated mode: the key of an ACK (the peer's data direction), taken from the
    /// cache under the connection's lock.
    ack_key: Option<kernel::net::crypto::SecretKey>,
}

/// Builds the skb of `p`: its header, then its payload copied from the sending QP's request
/// (or, for a READ response, from the local MR it names). Runs without the connection's lock:
/// the QP glue finds the message by stream and Msn under the QP's own lock, so a message
/// completed or a stream closed since the packet was polled is `Drop` (the transport no longer
/// needs that packet).
fn build(peer: &Peer, headroom: usize, p: &Polled) -> core::result::Result<OutPacket, BuildError> {
    let t = &p.t;
    let plen = t.payload.map_or(0, |pl| usize::from(pl.len));
    let len = t.hdr_len.checked_add(plen).ok_or(EINVAL)?;
    let total = if peer.keys.is_some() {
        len.checked_add(TRAILER_LEN).ok_or(EINVAL)?
    } else {
        len
    };
    let mut skb = xmit::frame(headroom, total)?;
    let buf = skb.data_mut()?;
    buf[..t.hdr_len].copy_from_slice(p.hdr.get(..t.hdr_len).ok_or(EINVAL)?);
    if let Some(pl) = t.payload {
        let q = p.qp.as_ref().ok_or(ENOENT)?;
        qp::native_payload(
            q,
            pl.stream,
            pl.msn,
            pl.offset,
            pl.mr,
            &mut buf[t.hdr_len..len],
        )?;
    }
    if let Some(keys) = &peer.keys {
        // The trailer and the tag (section 13.1), over the whole packet.
        let own = keys.own();
        let (total, k, nonce) = sealing::seal(buf, len, own, t.seq).map_err(|_| EINVAL)?;
        let key = match keys.fixed(k) {
            Some(key) => key,
            None => p.ack_key.as_ref().ok_or(EINVAL)?,
        };
        sealing::tag_into(&KernelMac, key.bytes(), &nonce, buf, total).map_err(|_| EINVAL)?;
    }
    Ok(OutPacket::native(skb, peer, t.src_port, t.ect))
}

/// The local data of the request behind `p` could not be read: if `q` still holds the stream,
/// the request fails with a local protection error, the QP breaks and its stream closes.
fn local_error(
    dev: &Device<MetaRoceDriver>,
    peer: &Peer,
    q: &ARef<Qp<MetaRoceDriver>>,
    stream: usize,
    msn: u32,
    notes: &mut Notes,
) {
    let mut g = peer.inner.lock();
    let inner = &mut *g;
    // The stream may have been closed and bound to another QP since the packet was polled.
    if !stream_qp(dev, inner, stream).is_some_and(|s| core::ptr::eq(&*s, &**q)) {
        return;
    }
    let Some(n) = notes.of(q) else { return };
    if !qp::native_local_error(q, stream, msn, n) {
        close(inner, stream, notes);
    }
}

/// Pulls up to `out.len()` packets from `peer`'s connection (those of every QP sharing it)
/// and hands out the completions that became ready; `via`, a QP bound to the connection that
/// transmits them, gets its timer armed if the connection then waits for a deadline (a QP
/// with nothing fed or completed is not among the notified ones). Returns the number of
/// packets. Any context (GFP_ATOMIC skbs).
///
/// The connection's lock (interrupts off) is held only to poll [`POLL_CHUNK`] packet
/// descriptors at a time and for the completion bookkeeping; skbs are allocated and payloads
/// copied after it is dropped.
pub(crate) fn pull_tx(
    dev: &Device<MetaRoceDriver>,
    peer: &Arc<Peer>,
    via: Option<&Qp<MetaRoceDriver>>,
    headroom: usize,
    out: &mut [Option<OutPacket>],
    pull: Pull,
) -> usize {
    let mut notes = Notes::new();
    let mut got = 0;
    // New messages are taken in once, before the first poll; not for control packets only.
    let mut feed_first = pull != Pull::Control;
    // A flight the connection did not take, given back after the lock.
    let mut unused = None;
    loop {
        let mut polled: [Option<Polled>; POLL_CHUNK] = [const { None }; POLL_CHUNK];
        let want = POLL_CHUNK.min(out.len() - got);
        let mut n = 0;
        let mut timed = None;
        {
            let mut g = peer.inner.lock();
            let inner = &mut *g;
            if feed_first {
                feed(dev, peer, inner, &mut notes);
                feed_first = false;
            }
            let now = dev.now_ns();
            // New data waits for a flight: a spare from the pool, else one the timer tick
            // makes (the deadline below arms it).
            if pull != Pull::Control && inner.conn.flight_wanted() {
                if let Some(f) = dev.flights.take() {
                    unused = inner.conn.lend_flight(now, f).err();
                }
            }
            while n < want {
                // Room for an atomic request's operands after the header.
                let mut hdr = [0u8; MAX_HDR_LEN];
                let next = match pull {
                    Pull::All => inner.conn.poll_transmit(now, &mut hdr),
                    Pull::Receive => inner.conn.poll_receive_path(now, &mut hdr),
                    Pull::Control => inner.conn.poll_control(now, &mut hdr),
                };
                let Some(t) = next else {
                    break;
                };
                let qp = match t.payload {
                    Some(pl) => match stream_qp(dev, inner, pl.stream) {
                        Some(q) => Some(q),
                        None => {
                            // The stream's QP is gone: nothing to send from.
                            dev.count(Counter::SendErr, 1);
                            continue;
                        }
                    },
                    None => None,
                };
                // A key that is not one of the fixed ones (an ACK's: the peer's data
                // direction's) comes from the cache, under the lock.
                let ack_key = match (&peer.keys, sealing::key_out(&hdr[..t.hdr_len])) {
                    (Some(keys), Ok(k)) if keys.fixed(k).is_none() => {
                        inner.peer_keys.key(keys, k).ok()
                    }
                    _ => None,
                };
                polled[n] = Some(Polled {
                    t,
                    hdr,
                    qp,
                    ack_key,
                });
                n += 1;
            }
            if n < want || got + n == out.len() {
                reap(dev, inner, &mut notes);
                feed(dev, peer, inner, &mut notes);
                account(dev, inner);
                timed = Some(inner.conn.next_deadline().is_some() || inner.conn.flight_wanted());
            }
        }
        if let Some(f) = unused.take() {
            drop(dev.flights.give(f));
        }
        for p in polled.iter().flatten() {
            match build(peer, headroom, p) {
                Ok(pkt) => {
                    out[got] = Some(pkt);
                    got += 1;
                }
                // The connection resends what it never got acknowledged...
                Err(BuildError::Drop) => dev.count(Counter::SendErr, 1),
                // ...but not what the sending QP can no longer read: that request fails with a
                // local protection error and breaks its QP, whose stream closes.
                Err(BuildError::Gather) => {
                    dev.count(Counter::SendErr, 1);
                    if let (Some(pl), Some(q)) = (p.t.payload, p.qp.as_ref()) {
                        local_error(dev, peer, q, pl.stream, pl.msn, &mut notes);
                    }
                }
            }
        }
        // Dropped references to QPs are released here, outside the lock.
        drop(polled);
        if let Some(timed) = timed {
            notes.deliver(timed);
            if let (true, Some(q)) = (timed, via) {
                timer::arm(q);
            }
            return got;
        }
    }
}

/// Runs the connection's timers if one is due, lends it a flight if it waits for one (made
/// here if the pool has none) and takes back the flight of a connection idle for long enough.
/// Returns whether there is something to send (the caller schedules the transmission) and
/// whether a deadline is still pending. Process context (the device's timer tick), through any
/// QP bound to `peer`.
pub(crate) fn on_tick(dev: &Device<MetaRoceDriver>, peer: &Peer) -> (bool, bool) {
    let wanted = peer.inner.lock().conn.flight_wanted();
    // Made before the lock is taken (vmalloc sleeps).
    let mut lend = if wanted {
        dev.flights.take_or_make()
    } else {
        None
    };
    let mut fired = false;
    let (back, pending) = {
        let mut g = peer.inner.lock();
        let now = dev.now_ns();
        if let Some(f) = lend.take() {
            match g.conn.lend_flight(now, f) {
                Ok(()) => fired = true,
                Err(f) => lend = Some(f),
            }
        }
        if g.conn.timer_deadline().is_some_and(|d| d <= now) {
            g.conn.on_timer(now);
            fired = true;
        }
        let back = g.conn.reclaim_flight(now);
        if fired || back.is_some() {
            account(dev, &mut g);
        }
        let pending = g.conn.next_deadline().is_some() || g.conn.flight_wanted();
        (back, pending)
    };
    // Kept as spares or freed, with no lock held.
    for f in [lend, back].into_iter().flatten() {
        drop(dev.flights.give(f));
    }
    (fired, pending)
}

/// Whether the IP header says Congestion Experienced.
fn ce(ip: &[u8]) -> bool {
    match ip.first().map(|b| b >> 4) {
        Some(4) => ip.get(1).is_some_and(|b| b & 3 == 3),
        Some(6) => ip.get(1).is_some_and(|b| (b >> 4) & 3 == 3),
        _ => false,
    }
}

/// Handles one datagram of the native port for `dev`. Softirq context.
pub(crate) fn receive(dev: &Device<MetaRoceDriver>, ip: &[u8], udp: &[u8], payload: &[u8]) {
    // The checksum is mandatory (section 2): 0 ("none", IPv4 only) is refused. The UDP layer
    // verified a present one before handing the datagram to the tunnel socket
    // (`udp_lib_checksum_complete` ahead of `encap_rcv`), in software or through the NIC's
    // `CHECKSUM_UNNECESSARY`: the offload boundary (section 12) is told it was checked.
    let mut stack = NicIntegrity {
        udp_checked: true,
        ..NicIntegrity::default()
    };
    if native_rx(&mut stack, ip, udp).is_err() {
        dev.count(Counter::RcvdMalformed, 1);
        return;
    }
    // The authenticated mode (section 13.1): the trailer is split off here and the tag checked
    // once the connection (its keys) is known, before anything reads the packet's fields.
    let sealed = if dev.auth.is_some() {
        match sealing::open(payload) {
            Ok(s) => Some(s),
            Err(_) => {
                dev.count(Counter::NativeAuthErrors, 1);
                return;
            }
        }
    } else {
        None
    };
    let parsed = match &sealed {
        Some(s) => mrc_wire::parse_auth(s.packet),
        None => mrc_wire::parse(payload),
    };
    let pkt = match parsed {
        Ok(p) => p,
        Err(_) => {
            dev.count(Counter::RcvdMalformed, 1);
            return;
        }
    };
    let (Some(src), Some(dst)) = (packet::ip_gid(ip, true), packet::ip_gid(ip, false)) else {
        dev.count(Counter::RcvdMalformed, 1);
        return;
    };
    let now = dev.now_ns();
    // Receive state exists only towards devices our QPs talk to. A DATA packet makes its
    // sender active in the fair share that every ACK carries (spec 6.4).
    let Some(peer) = dev.peers.lock().find(&dst, &src) else {
        dev.count(Counter::RcvdNoQp, 1);
        return;
    };
    if let Some(s) = &sealed {
        let key = match &peer.keys {
            Some(keys) => peer.inner.lock().peer_keys.key(keys, s.key).ok(),
            None => None,
        };
        if !key.is_some_and(|k| sealing::verify(&KernelMac, k.bytes(), s)) {
            dev.count(Counter::NativeAuthErrors, 1);
            return;
        }
    }
    let hint = match pkt {
        MrcPacket::Data(..) => dev.peers.lock().hint(&peer, now),
        MrcPacket::Ack(_) | MrcPacket::Probe(_) => 0,
    };
    dev.count(Counter::RcvdPkts, 1);
    dev.count(Counter::RcvdBytes, payload.len() as u64);
    let sport = u16::from_be_bytes([udp[0], udp[1]]);
    let mut notes = Notes::new();
    let timed;
    let coalesced;
    let mut kick: Option<ARef<Qp<MetaRoceDriver>>> = None;
    let take = |c: &mut NativeConn| match &sealed {
        Some(s) => c.on_sealed(now, s, ce(ip), sport, hint),
        None => c.on_packet(now, payload, ce(ip), sport, hint),
    };
    {
        let mut g = peer.inner.lock();
        let inner = &mut *g;
        let res = match pkt {
            MrcPacket::Data(h, data) => {
                let idx = inner.conn.stream_of(h.stream);
                let q = idx.and_then(|i| stream_qp(dev, inner, i));
                match (idx, q) {
                    (Some(idx), Some(q)) => {
                        // A receive-consuming message needs its posted receive, checked
                        // before the connection takes the packet: a packet it took is
                        // acknowledged and never resent (section 5.6: receiver not ready).
                        // Only a packet the connection admits may take one (a forged or
                        // unproven one is dropped by `on_packet` below, taking nothing).
                        let admitted = inner.conn.admits(now, &h).is_ok();
                        let ready = notes
                            .of(&q)
                            .map(|n| (!admitted || qp::native_ready(&q, &h, n), n));
                        let r = match ready {
                            Some((true, n)) => {
                                let r = take(&mut inner.conn);
                                match &r {
                                    Ok(RxEvent::Data(place)) => {
                                        match qp::native_place(&q, idx, place, data, n) {
                                            qp::Placed::Done => {}
                                            // Nothing written: the requester's message completes
                                            // in error through the NAK (section 9.1).
                                            qp::Placed::Refuse(code) => {
                                                inner.conn.refuse(idx, place.msn, code);
                                            }
                                            qp::Placed::Broken => close(inner, idx, &mut notes),
                                        }
                                    }
                                    // Answered before the lock is released (the core
                                    // then sends the response like any data).
                                    Ok(RxEvent::Request(req)) => {
                                        let answer = qp::native_request(&q, idx, req);
                                        inner.conn.respond(req.stream, req.msn, answer);
                                    }
                                    _ => {}
                                }
                                r.map_err(Some)
                            }
                            // Receiver not ready (an admitted packet: an unadmitted one
                            // is ready above): dropped, and the sender told at once by an
                            // RNR ACK, so that it resends without counting towards its
                            // retransmission limit (section 5.6).
                            _ => {
                                inner.rnr_drops += 1;
                                inner.conn.not_ready(&h, sport);
                                Err(None)
                            }
                        };
                        kick = Some(q);
                        r
                    }
                    // No such stream: the connection acknowledges and drops it.
                    _ => take(&mut inner.conn).map_err(Some),
                }
            }
            MrcPacket::Ack(_) | MrcPacket::Probe(_) => take(&mut inner.conn).map_err(Some),
        };
        match res {
            Ok(_) | Err(None) => {}
            Err(Some(RxDrop::Malformed(_))) => dev.count(Counter::RcvdMalformed, 1),
            Err(Some(RxDrop::NoStream)) => dev.count(Counter::RcvdNoQp, 1),
            Err(Some(_)) => dev.count(Counter::RcvdDropped, 1),
        }
        reap(dev, inner, &mut notes);
        // Someone must send the ACK this packet is owed and the data an ACK made room for:
        // the receiving QP, else any QP of the connection.
        if kick.is_none() {
            kick = (0..inner.conn.streams_hi()).find_map(|i| stream_qp(dev, inner, i));
        }
        account(dev, inner);
        timed = inner.conn.next_deadline().is_some();
        coalesced = inner.conn.acks_coalesced();
    }
    notes.deliver(timed);
    if let Some(q) = kick {
        if timed {
            timer::arm(&q);
        }
        xmit::from_receive(&q, coalesced);
    } else if let Some(q) = dev.any_qp() {
        // No QP is bound to the connection any more (a ping-pong client exits after its last
        // receive), yet it owes the ACK: the peer retransmits when that message's ACK was lost
        // or came after an RTO, and without an answer fails its own QP after `max_retx`.
        table::mark_orphan(dev, &peer);
        xmit::schedule(&q);
    }
}
