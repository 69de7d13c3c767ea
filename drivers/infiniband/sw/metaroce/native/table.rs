// SPDX-License-Identifier: GPL-2.0

//! A device's native connections (`transport.rst`, section 7): one [`Peer`] per (our GID,
//! remote GID), found by the two GIDs in a red-black tree, created when a QP binds towards a
//! remote device the table does not hold yet and reaped once no QP is bound to it and it
//! failed or has been quiet for [`REAP_IDLE_NS`]. The table has no fixed size:
//! `native_max_peers` bounds it (memory), `native_ctx_peers` bounds what the QPs of one user
//! context may hold.
//!
//! Reaping runs when a connection is created and from the device's timer tick, at most once
//! per [`REAP_SCAN_NS`]. Connections are dropped with the table's lock released: the last
//! reference frees the connection's vmalloc'd state, which may sleep. A QP whose stream closed
//! (its connection failed) may hold the last reference after the table let go; it drops it
//! with its own lock released too (`qp.rs`, `Transport::take_stream`).
//!
//! Locking: the table's lock is taken before a peer's, never after.

use super::{new_peer, Peer, Pull, PATHS};
use crate::device::{Counter, MetaRoceDriver};
use crate::proto::cc::{RateAlloc, ACTIVE_NS};
use crate::verbs::RoceAv;
use crate::xmit::OutPacket;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNode};
use kernel::rdma::device::Device;
use kernel::rdma::qp::Qp;
use kernel::sync::{Arc, SpinLockIrq};

/// An unbound connection this long without DATA from its peer, and with nothing of its own in
/// flight, is reaped ([`Peer::reapable`]).
pub(super) const REAP_IDLE_NS: u64 = 2_000_000_000;
/// The timer tick looks for connections to reap at most this often.
const REAP_SCAN_NS: u64 = 500_000_000;
/// Connections taken out of the table per hold of its lock (they are dropped after it).
const BATCH: usize = 16;
/// Senders the receive side's fair share tells apart at once (spec 6.4): a device with more
/// senders maps them onto these slots as they send ([`RateAlloc::claim`]).
const RATE_SLOTS: usize = 64;

/// The identity the next connection gets (never 0: 0 marks a free rate slot).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The tree's key: our GID, then the remote GID.
type PeerKey = [u8; 32];

fn key(sgid: &[u8; 16], dgid: &[u8; 16]) -> PeerKey {
    let mut k = [0u8; 32];
    k[..16].copy_from_slice(sgid);
    k[16..].copy_from_slice(dgid);
    k
}

/// The peers of one device (empty on a RoCEv2 device).
pub(crate) struct PeerTable {
    by_gids: RBTree<PeerKey, Arc<Peer>>,
    len: usize,
    /// The receive side's fair-share allocator over the peers that send to us (spec 6.4), and
    /// the connection (its id) that holds each of its slots.
    alloc: RateAlloc<RATE_SLOTS>,
    rate_owner: [u64; RATE_SLOTS],
    /// When the table was last scanned for connections to reap (device clock, ns).
    scanned_ns: u64,
}

/// A device's native connections (shared with its debugfs view).
pub(crate) type Peers = SpinLockIrq<PeerTable>;

impl PeerTable {
    /// An empty table on a link of `link_kbps` (0: unknown, no rate hints) and MTU `eth_mtu`.
    pub(crate) fn new(link_kbps: u32, eth_mtu: u32) -> Self {
        Self {
            by_gids: RBTree::new(),
            len: 0,
            alloc: RateAlloc::new(link_kbps, ACTIVE_NS, u32::from(super::mss(eth_mtu))),
            rate_owner: [0; RATE_SLOTS],
            scanned_ns: 0,
        }
    }

    /// The number of connections.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Every connection, in GID order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<Peer>> {
        self.by_gids.values()
    }

    /// The connection from our GID `sgid` to the remote GID `dgid`.
    pub(crate) fn find(&self, sgid: &[u8; 16], dgid: &[u8; 16]) -> Option<Arc<Peer>> {
        self.by_gids.get(&key(sgid, dgid)).cloned()
    }

    /// The rate hint for a DATA packet from `peer` at `now` (which makes it active).
    pub(super) fn hint(&mut self, peer: &Peer, now: u64) -> u32 {
        if self.alloc.link_kbps() == 0 {
            return 0;
        }
        let held = peer.rate_slot.load(Ordering::Relaxed) as usize;
        let slot = if self.rate_owner.get(held) == Some(&peer.id) {
            held
        } else {
            let s = self.alloc.claim();
            self.rate_owner[s] = peer.id;
            peer.rate_slot.store(s as u32, Ordering::Relaxed);
            s
        };
        self.alloc.note(slot, now);
        self.alloc.share_kbps(now)
    }

    /// `peer` left the table: it no longer counts among the senders.
    fn forget(&mut self, peer: &Peer) {
        let held = peer.rate_slot.load(Ordering::Relaxed) as usize;
        if self.rate_owner.get(held) == Some(&peer.id) {
            self.rate_owner[held] = 0;
            self.alloc.forget(held);
        }
    }

    /// Takes out up to [`BATCH`] connections that are reapable at `now` into `out`; returns
    /// how many.
    fn take_reapable(&mut self, now: u64, out: &mut [Option<Arc<Peer>>; BATCH]) -> usize {
        let mut n = 0;
        let mut cur = self.by_gids.cursor_front_mut();
        while let Some(c) = cur {
            if n == BATCH {
                break;
            }
            if c.current().1.reapable(now) {
                let (next, node) = c.remove_current();
                out[n] = Some(node.to_key_value().1);
                n += 1;
                cur = next;
            } else {
                cur = c.move_next();
            }
        }
        self.len -= n;
        for p in out.iter().flatten() {
            self.forget(p);
        }
        n
    }
}

/// Whether the QP `qp` may bind to the connection from `sgid` to `dgid`: a user QP only if its
/// user context's QPs already hold that connection or fewer than `native_ctx_peers` others.
/// Process context (`modify_qp`).
pub(crate) fn within_quota(
    dev: &Device<MetaRoceDriver>,
    qp: &Qp<MetaRoceDriver>,
    sgid: &[u8; 16],
    dgid: &[u8; 16],
) -> bool {
    let Some(me) = qp.ucontext_id() else {
        return true;
    };
    let quota = crate::module_parameters::native_ctx_peers
        .value()
        .clamp(1, 65536) as usize;
    let t = dev.peers.lock();
    let mut held = 0;
    for p in t.iter() {
        if p.held_by(me) {
            if p.sgid == *sgid && p.dgid == *dgid {
                return true;
            }
            held += 1;
        }
    }
    held < quota
}

/// The connection of `dev` from `av.sgid` to `av.dgid`, created (with `paths` paths, 1 to
/// [`PATHS`]) if there is none or if the one there failed. Process context.
///
/// A failed connection stays with the QPs still bound to it (their requests have completed in
/// error, they only wait to be reset or destroyed) but leaves the table: a new connection (new
/// ConnId, fresh paths and windows) takes its place, and the peer's receive half accepts it as
/// a restarted sender (section 7).
pub(crate) fn peer(
    dev: &Device<MetaRoceDriver>,
    av: &RoceAv,
    eth_mtu: u32,
    paths: u8,
) -> Result<Arc<Peer>> {
    if let Some(p) = dev.peers.lock().find(&av.sgid, &av.dgid) {
        if !p.failed() {
            return Ok(p);
        }
    }
    reap_now_and_then(dev);
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let p = new_peer(dev, av, eth_mtu, paths.clamp(1, PATHS as u8), id)?;
    let node = RBTreeNode::new(key(&av.sgid, &av.dgid), p.clone(), GFP_KERNEL)?;
    let max = crate::module_parameters::native_max_peers
        .value()
        .clamp(1, 65536) as usize;
    let mut t = dev.peers.lock();
    if let Some(old) = t.find(&av.sgid, &av.dgid) {
        // Another QP may have created or replaced it meanwhile.
        if !old.failed() {
            drop(t);
            // Dropped with the lock released (the last reference of `p` frees its connection).
            drop(node);
            return Ok(old);
        }
        t.forget(&old);
        let replaced = t.by_gids.insert(node);
        // Possibly the last references (the connection is vfree'd): dropped with the lock
        // released.
        drop(t);
        drop((replaced, old));
        return Ok(p);
    }
    // Full: unbound, quiet connections give their places (a process that made connections
    // towards made-up destinations and let their QPs go does not keep the table full), else
    // the bind fails. The reaped ones are dropped with the lock released.
    let mut reaped: [Option<Arc<Peer>>; BATCH] = [const { None }; BATCH];
    let n = if t.len >= max {
        t.take_reapable(dev.now_ns(), &mut reaped)
    } else {
        0
    };
    if t.len >= max {
        drop(t);
        drop(node);
        return Err(ENOSPC);
    }
    t.by_gids.insert(node);
    t.len += 1;
    drop(t);
    if n > 0 {
        dev.count(Counter::NativePeersReaped, n as u64);
    }
    drop(reaped);
    Ok(p)
}

/// Reaps every connection of `dev` that is reapable at `now` ([`Peer::reapable`]). Process
/// context.
fn reap(dev: &Device<MetaRoceDriver>, now: u64) {
    loop {
        let mut out: [Option<Arc<Peer>>; BATCH] = [const { None }; BATCH];
        let n = dev.peers.lock().take_reapable(now, &mut out);
        if n == 0 {
            return;
        }
        dev.count(Counter::NativePeersReaped, n as u64);
        // The last references: the connections are freed here, with the lock released.
        drop(out);
        if n < BATCH {
            return;
        }
    }
}

/// Reaps what is reapable if the table was not scanned for [`REAP_SCAN_NS`]. Process context
/// (the device's timer tick, a connection's creation).
pub(crate) fn reap_now_and_then(dev: &Device<MetaRoceDriver>) {
    let now = dev.now_ns();
    {
        let mut t = dev.peers.lock();
        if t.len == 0 || now.saturating_sub(t.scanned_ns) < REAP_SCAN_NS {
            return;
        }
        t.scanned_ns = now;
    }
    reap(dev, now);
}

/// `peer` owes its peer packets while no QP is bound to it: the next transmission of any QP
/// sends them ([`pull_orphans`]). Any context.
pub(super) fn mark_orphan(dev: &Device<MetaRoceDriver>, peer: &Peer) {
    peer.orphan.store(true, Ordering::Release);
    dev.orphans.store(true, Ordering::Release);
}

/// Pulls up to `out.len()` packets from the connections no QP is bound to (marked by
/// [`mark_orphan`]): the ACKs they owe. Returns the number of packets. Called by whichever QP
/// transmits; a connection that may have more stays marked. Any context.
pub(crate) fn pull_orphans(
    dev: &Device<MetaRoceDriver>,
    headroom: usize,
    out: &mut [Option<OutPacket>],
) -> usize {
    if !dev.orphans.swap(false, Ordering::AcqRel) {
        return 0;
    }
    let mut marked: [Option<Arc<Peer>>; BATCH] = [const { None }; BATCH];
    let mut more = {
        let t = dev.peers.lock();
        let mut orphans = t.iter().filter(|p| p.orphan.load(Ordering::Acquire));
        // `zip` asks `marked` for a slot before `orphans` for a connection: once every slot
        // is filled, the next marked connection is still in `orphans`, to tell there are more.
        for (slot, p) in marked.iter_mut().zip(orphans.by_ref()) {
            p.orphan.store(false, Ordering::Release);
            *slot = Some(p.clone());
        }
        orphans.next().is_some()
    };
    let mut got = 0;
    for p in marked.iter().flatten() {
        if got < out.len() {
            // No QP is bound to an orphan: its deadlines wait for one (its ACKs need none).
            got += super::pull_tx(dev, p, None, headroom, &mut out[got..], Pull::All);
        }
        if got == out.len() {
            p.orphan.store(true, Ordering::Release);
            more = true;
        }
    }
    if more {
        dev.orphans.store(true, Ordering::Release);
    }
    got
}
