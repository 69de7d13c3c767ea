// SPDX-License-Identifier: GPL-2.0

//! What the native connections report: the path and rate-hint tracepoints, the device counters
//! they add to, the RTT gauges, the debugfs `connections` view and the stats pages processes
//! map (`struct metaroce_conn_stats`).

use super::{Peer, PeerInner, Peers, PATHS};
use crate::device::{Counter, MetaRoceDriver};
use crate::proto::conn::ConnStats;
use crate::proto::path::{PathState, PathStats};
use crate::proto::restart::RestartStats;
use kernel::prelude::*;
use kernel::rdma::device::Device;
use kernel::rdma::mmap::{SharedBuf, UserMapping};
use kernel::rdma::trace::{self, PathEvent};
use kernel::rdma::udata::Udata;
use kernel::sync::barrier::{smp_mb, Write};
use kernel::sync::Arc;

/// Bytes of a stats page (one page; `struct metaroce_conn_stats` fills the first 472).
const STATS_PAGE_LEN: usize = 4096;
/// `struct metaroce_conn_stats`: `seq`, `paths`, `window`, `rate_hint_kbps` (u32), `updates`
/// (u64), then `path[8]` of `struct metaroce_path_stats` (56 bytes each).
const CONN_STATS_LEN: usize = 24 + PATHS * PATH_STATS_LEN;
const PATH_STATS_LEN: usize = 56;
const _: () = assert!(PATHS == 8 && CONN_STATS_LEN <= STATS_PAGE_LEN);
/// Rewrites are at most this often (ns).
const PUBLISH_NS: u64 = 10_000_000;

/// A native RC QP's stats page: the figures of the connection it is bound to, which its
/// process maps (include/uapi/rdma/metaroce-abi.h). The kernel only writes it.
pub(crate) struct StatsPage {
    pub(crate) buf: Arc<SharedBuf>,
    pub(crate) mapping: UserMapping,
}

impl StatsPage {
    /// A zeroed page offered for `mmap` to the process of the current system call. Process
    /// context, may sleep.
    pub(crate) fn new(udata: &Udata<'_>) -> Result<Self> {
        let buf = SharedBuf::new(STATS_PAGE_LEN)?;
        let mapping = UserMapping::new(udata, buf.clone())?;
        Ok(Self { buf, mapping })
    }
}

/// Rewrites the stats pages of the QPs bound to the connection (at most every
/// [`PUBLISH_NS`]), as a sequence lock: `seq` odd, the figures, `seq` even again (release).
/// Any context, under the connection's lock.
fn publish(dev: &Device<MetaRoceDriver>, inner: &mut PeerInner) {
    if !inner.conn.store().has_pages() {
        return;
    }
    let now = dev.now_ns();
    if inner.published_ns != 0 && now.wrapping_sub(inner.published_ns) < PUBLISH_NS {
        return;
    }
    inner.published_ns = now.max(1);
    inner.publishes = inner.publishes.wrapping_add(1);
    let conn = &inner.conn;
    let npaths = usize::from(conn.config().paths).clamp(1, PATHS);
    let (window, hint) = conn.conn_window();
    let mut b = [0u8; CONN_STATS_LEN];
    // `npaths` is at most 8.
    b[4..8].copy_from_slice(&(npaths as u32).to_ne_bytes());
    b[8..12].copy_from_slice(&window.to_ne_bytes());
    b[12..16].copy_from_slice(&hint.to_ne_bytes());
    b[16..24].copy_from_slice(&inner.publishes.to_ne_bytes());
    for i in 0..npaths {
        let (Some((port, state, st)), Some((cwnd, srtt, min, _))) =
            (conn.path_info(i), conn.path_rtt(i))
        else {
            continue;
        };
        let p = &mut b[24 + i * PATH_STATS_LEN..24 + (i + 1) * PATH_STATS_LEN];
        p[0..2].copy_from_slice(&port.to_ne_bytes());
        p[2] = match state {
            PathState::Active => 0,
            PathState::Recovering => 1,
            PathState::Failed => 2,
        };
        p[4..8].copy_from_slice(&cwnd.to_ne_bytes());
        for (k, v) in [
            srtt,
            min,
            st.sent,
            st.retransmits,
            st.ecn_echoes,
            st.timeouts,
        ]
        .into_iter()
        .enumerate()
        {
            p[8 + k * 8..16 + k * 8].copy_from_slice(&v.to_ne_bytes());
        }
    }
    inner.stats_seq = inner.stats_seq.wrapping_add(2) & !1;
    let seq = inner.stats_seq;
    for page in inner.conn.store().pages() {
        // Offsets within the page: these cannot fail.
        let _ = page.store_relaxed_u32(0, seq.wrapping_sub(1));
        // The odd `seq` is visible before any of the new figures.
        smp_mb(Write);
        let _ = page.write(4, &b[4..]);
        let _ = page.store_release_u32(0, seq);
    }
}

/// What the path tracepoints last reported of a path.
#[derive(Clone, Copy)]
pub(super) struct PathSeen {
    port: u16,
    state: PathState,
    sack_losses: u64,
    timeouts: u64,
    ecn_echoes: u64,
}

impl PathSeen {
    pub(super) const NONE: PathSeen = PathSeen {
        port: 0,
        state: PathState::Active,
        sack_losses: 0,
        timeouts: 0,
        ecn_echoes: 0,
    };

    fn of(port: u16, state: PathState, st: &PathStats) -> Self {
        PathSeen {
            port,
            state,
            sack_losses: st.sack_losses,
            timeouts: st.timeouts,
            ecn_echoes: st.ecn_echoes,
        }
    }
}

/// Emits a `metaroce_path` event for each path's losses, RTOs, ECN echoes, port and state
/// changes since the last call, and a `metaroce_rate_hint` event if the hint changed.
fn trace_paths(dev: &Device<MetaRoceDriver>, inner: &mut PeerInner) {
    let conn = inner.conn.config().conn_id;
    let hint = inner.conn.conn_window().1;
    if hint != inner.traced_hint {
        trace::rate_hint(dev, conn, inner.traced_hint, hint);
        inner.traced_hint = hint;
    }
    // Nothing per packet while the event is off; when it comes on, the paths are taken as
    // they are then (counted from there: no burst of old events).
    let was_tracing = core::mem::replace(&mut inner.tracing, trace::path_enabled());
    if !inner.tracing {
        return;
    }
    for (i, seen) in inner.traced.iter_mut().enumerate() {
        let (Some((port, state, st)), Some((cwnd, srtt, _, _))) =
            (inner.conn.path_info(i), inner.conn.path_rtt(i))
        else {
            continue;
        };
        let now = PathSeen::of(port, state, &st);
        let was = core::mem::replace(seen, now);
        if !was_tracing {
            continue;
        }
        let emit = |event, count: u64| {
            if count != 0 {
                let r = trace::PathRecord {
                    conn,
                    path: i as u8,
                    event,
                    count: u32::try_from(count).unwrap_or(u32::MAX),
                    port,
                    cwnd,
                    srtt_us: u32::try_from(srtt / 1000).unwrap_or(u32::MAX),
                };
                trace::path(dev, &r);
            }
        };
        emit(
            PathEvent::Loss,
            now.sack_losses.wrapping_sub(was.sack_losses),
        );
        emit(PathEvent::Timeout, now.timeouts.wrapping_sub(was.timeouts));
        emit(PathEvent::Ecn, now.ecn_echoes.wrapping_sub(was.ecn_echoes));
        emit(
            PathEvent::Repath,
            u64::from(now.port != was.port && was.port != 0),
        );
        if now.state != was.state {
            let ev = match now.state {
                PathState::Active => PathEvent::Active,
                PathState::Recovering => PathEvent::Recovering,
                PathState::Failed => PathEvent::Failed,
            };
            emit(ev, 1);
        }
    }
}

/// What a connection counted, as the device's counters add it up.
#[derive(Clone, Copy, Default)]
pub(super) struct Figures {
    stats: ConnStats,
    sack_losses: u64,
    timeouts: u64,
    ecn_echoes: u64,
    late_acks: u64,
    spurious_rtos: u64,
    silences: u64,
    rnr_drops: u64,
    restart: RestartStats,
}

/// Adds what the connection counted since the last call to the device's counters.
pub(super) fn account(dev: &Device<MetaRoceDriver>, inner: &mut PeerInner) {
    let mut now = Figures {
        stats: inner.conn.stats,
        rnr_drops: inner.rnr_drops,
        restart: *inner.conn.restart_stats(),
        ..Figures::default()
    };
    for i in 0..PATHS {
        if let Some((_, _, p)) = inner.conn.path_info(i) {
            now.sack_losses = now.sack_losses.wrapping_add(p.sack_losses);
            now.timeouts = now.timeouts.wrapping_add(p.timeouts);
            now.ecn_echoes = now.ecn_echoes.wrapping_add(p.ecn_echoes);
            now.late_acks = now.late_acks.wrapping_add(p.late_acks);
            now.spurious_rtos = now.spurious_rtos.wrapping_add(p.spurious_rtos);
            now.silences = now.silences.wrapping_add(p.silences);
        }
    }
    let was = core::mem::replace(&mut inner.counted, now);
    let d = |a: u64, b: u64| a.wrapping_sub(b);
    let (n, w) = (&now.stats, &was.stats);
    dev.count(Counter::NativeDataSent, d(n.data_sent, w.data_sent));
    dev.count(Counter::Retransmits, d(n.retransmits, w.retransmits));
    dev.count(Counter::NativeAcksSent, d(n.acks_sent, w.acks_sent));
    dev.count(Counter::NativeRepaths, d(n.repaths, w.repaths));
    dev.count(Counter::NativeDuplicates, d(n.duplicates, w.duplicates));
    dev.count(Counter::NativeDrops, d(n.drops, w.drops));
    dev.count(
        Counter::NativeEcnDecreases,
        d(n.conn_ecn_decreases, w.conn_ecn_decreases),
    );
    dev.count(
        Counter::NativeSackLosses,
        d(now.sack_losses, was.sack_losses),
    );
    dev.count(Counter::NativeTimeouts, d(now.timeouts, was.timeouts));
    dev.count(Counter::NativeRnrDrops, d(now.rnr_drops, was.rnr_drops));
    dev.count(Counter::NativeEcnEchoes, d(now.ecn_echoes, was.ecn_echoes));
    dev.count(
        Counter::NativeRateHintChanges,
        d(n.rate_hint_changes, w.rate_hint_changes),
    );
    dev.count(
        Counter::NativeFlightsTaken,
        d(n.flights_lent, w.flights_lent),
    );
    dev.count(
        Counter::NativeFlightsReturned,
        d(n.flights_returned, w.flights_returned),
    );
    dev.count(
        Counter::NativeDelaySignals,
        d(n.delay_signals, w.delay_signals),
    );
    dev.count(Counter::NativeLateAcks, d(now.late_acks, was.late_acks));
    dev.count(
        Counter::NativeSpuriousRtos,
        d(now.spurious_rtos, was.spurious_rtos),
    );
    dev.count(Counter::NativeSilences, d(now.silences, was.silences));
    let (n, w) = (&now.restart, &was.restart);
    dev.count(Counter::NativeUnproven, d(n.unproven, w.unproven));
    dev.count(
        Counter::NativeChallenges,
        d(n.challenges_sent, w.challenges_sent),
    );
    dev.count(
        Counter::NativeBadProofs,
        d(n.proofs_refused, w.proofs_refused),
    );
    dev.count(Counter::NativeRestarts, d(n.restarts, w.restarts));
    trace_paths(dev, inner);
    publish(dev, inner);
}

/// The smallest RTT sample of any path of `peers` and the mean of the paths' mean RTTs, in ns
/// (0 without samples). Any context.
pub(crate) fn rtt_figures(peers: &Peers) -> (u64, u64) {
    let (mut min, mut sum, mut n) = (u64::MAX, 0u64, 0u64);
    let t = peers.lock();
    for p in t.iter() {
        let g = p.inner.lock();
        for i in 0..PATHS {
            if let Some((_, _, pmin, pavg)) = g.conn.path_rtt(i).filter(|r| r.2 != 0) {
                min = min.min(pmin);
                sum = sum.saturating_add(pavg);
                n += 1;
            }
        }
    }
    match sum.checked_div(n) {
        Some(avg) => (min, avg),
        None => (0, 0),
    }
}

/// The `connections` file of a device's debugfs directory (`/sys/kernel/debug/metaroce_DEV/`):
/// every connection with its streams, window and counters, and each path in use with its source
/// port, state, window, RTT and counters.
pub(crate) struct ConnView(pub(crate) Arc<Peers>);

/// Open streams whose QP numbers the view lists per connection.
const SHOWN_STREAMS: usize = 16;

/// What the view prints of one connection, copied under its lock.
struct Snapshot {
    conn_id: u32,
    state: crate::proto::conn::ConnState,
    window: (u32, u32),
    stats: ConnStats,
    /// The QP numbers of the first [`SHOWN_STREAMS`] open streams, and how many are open.
    streams: [u32; SHOWN_STREAMS],
    open: usize,
    rnr_drops: u64,
    restarts: u64,
    /// The connection holds a flight (`super::flight`).
    flight: bool,
    paths: [Option<PathSnapshot>; PATHS],
}

/// One path of a [`Snapshot`]: source port, state, counters, and the RTT figures of
/// `Conn::path_rtt`.
type PathSnapshot = (
    u16,
    crate::proto::path::PathState,
    crate::proto::path::PathStats,
    (u32, u64, u64, u64),
);

/// A GID as the address it stands for.
struct Gid<'a>(&'a [u8; 16]);

impl core::fmt::Display for Gid<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let g = self.0;
        if g[..10].iter().all(|&b| b == 0) && g[10] == 0xff && g[11] == 0xff {
            return write!(f, "{}.{}.{}.{}", g[12], g[13], g[14], g[15]);
        }
        for i in 0..8 {
            let w = u16::from_be_bytes([g[2 * i], g[2 * i + 1]]);
            write!(f, "{}{w:x}", if i == 0 { "" } else { ":" })?;
        }
        Ok(())
    }
}

impl core::fmt::Debug for ConnView {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // The connections as they are now (those created after the count was taken wait for
        // the next read); each is printed from a copy taken under its own lock.
        // What a connection, a flight and a bound QP's stream take (allocation sizes).
        writeln!(
            f,
            "# bytes: connection {}, flight {}, stream of a bound QP {}",
            core::mem::size_of::<Peer>(),
            core::mem::size_of::<super::flight::NativeFlight>(),
            core::mem::size_of::<super::streams::Bound>(),
        )?;
        let n = self.0.lock().len();
        let mut peers: KVec<Arc<Peer>> =
            KVec::with_capacity(n, GFP_KERNEL).map_err(|_| core::fmt::Error)?;
        for p in self.0.lock().iter() {
            if peers.push_within_capacity(p.clone()).is_err() {
                break;
            }
        }
        for p in peers.iter() {
            let s = {
                let g = p.inner.lock();
                let c = &g.conn;
                // The first QPNs and the count, in one pass over the open streams.
                let mut shown = [0; SHOWN_STREAMS];
                let mut open = 0;
                for q in (0..c.streams_hi()).filter_map(|i| c.stream_qpn(i)) {
                    if let Some(d) = shown.get_mut(open) {
                        *d = q;
                    }
                    open += 1;
                }
                Snapshot {
                    conn_id: c.config().conn_id,
                    state: c.state(),
                    window: c.conn_window(),
                    stats: c.stats,
                    streams: shown,
                    open,
                    rnr_drops: g.rnr_drops,
                    restarts: c.restart_stats().restarts,
                    flight: c.has_flight(),
                    // The paths in use (the connection's `paths`, at most `PATHS`).
                    paths: core::array::from_fn(|i| {
                        c.path_info(i)
                            .zip(c.path_rtt(i))
                            .filter(|_| i < usize::from(c.config().paths))
                            .map(|((port, st, ps), rtt)| (port, st, ps, rtt))
                    }),
                }
            };
            writeln!(
                f,
                "connection {:#010x} {} -> {} {:?} window {} B rate hint {} kbit/s rnr drops {} peer restarts {} flight {}",
                s.conn_id,
                Gid(&p.sgid),
                Gid(&p.dgid),
                s.state,
                s.window.0,
                s.window.1,
                s.rnr_drops,
                s.restarts,
                if s.flight { "lent" } else { "none" }
            )?;
            write!(f, "  streams (QPN):")?;
            for q in s.streams.iter().take(s.open) {
                write!(f, " {q}")?;
            }
            // More than are listed: how many.
            if s.open > SHOWN_STREAMS {
                write!(f, " ... ({} in all)", s.open)?;
            }
            writeln!(f)?;
            writeln!(f, "  {:?}", s.stats)?;
            for (i, path) in s.paths.iter().enumerate() {
                if let Some((port, st, ps, (cwnd, srtt, min, avg))) = path {
                    writeln!(
                        f,
                        "  path {i} port {port} {st:?} cwnd {cwnd} B srtt {srtt} ns min {min} ns avg {avg} ns {ps:?}"
                    )?;
                }
            }
        }
        Ok(())
    }
}
