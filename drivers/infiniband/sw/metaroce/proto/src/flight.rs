// SPDX-License-Identifier: GPL-2.0
//! A connection's state for packets in flight (`transport.rst`, section 10.1): the Dsn
//! descriptors, the retransmission queue and each path's transmission slots, most of a
//! connection's memory. A connection needs it only while it has packets to send or in
//! flight, so it need not live inside the connection: a [`FlightStore`] says where it is.
//!
//! * Inline ([`Flight`] itself: the host's tests and simulators): always there.
//! * Lent (`Option<B>` for an owning pointer `B`, the kernel's pool): the caller lends one
//!   when the connection wants to send ([`super::conn::Conn::flight_wanted`],
//!   [`super::conn::Conn::lend_flight`]) and takes it back, emptied, once the connection
//!   has had nothing in flight for a while ([`super::conn::Conn::reclaim_flight`]). An idle
//!   connection then costs only its own state.
//!
//! The core never hands out a flight that is not empty, and nothing outside it can change
//! one: a pool holds only empty flights.

use super::path::SlotWindow;
use core::ops::DerefMut;

/// Where a Dsn descriptor stands.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum DescState {
    Unacked,
    Lost,
    Acked,
}

/// What the sender knows of one Dsn: the segment it carries and its latest transmission.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Desc {
    pub(super) stream: u16,
    /// A response packet (of the stream's `RespRing`), not of our message.
    pub(super) resp: bool,
    pub(super) msn: u32,
    pub(super) offset: u32,
    pub(super) len: u16,
    pub(super) path: u8,
    pub(super) seq: u32,
    pub(super) tx_count: u8,
    pub(super) state: DescState,
}

/// A descriptor no packet uses.
pub(super) const FREE_DESC: Desc = Desc {
    stream: 0,
    resp: false,
    msn: 0,
    offset: 0,
    len: 0,
    path: 0,
    seq: 0,
    tx_count: 0,
    state: DescState::Acked,
};

/// The Dsns waiting for retransmission, oldest first (a ring of `D`: each Dsn in the
/// descriptor window is queued at most once per loss).
#[derive(Clone, Debug)]
pub(super) struct RetxQueue<const D: usize> {
    q: [u32; D],
    head: usize,
    len: usize,
}

impl<const D: usize> RetxQueue<D> {
    const EMPTY: Self = RetxQueue {
        q: [0; D],
        head: 0,
        len: 0,
    };

    /// The oldest queued Dsn.
    pub(super) fn front(&self) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        self.q.get(self.head).copied()
    }

    /// Queues `dsn` (dropped if the ring is full, which a window of `D` Dsns cannot make it).
    pub(super) fn push(&mut self, dsn: u32) {
        if self.len >= D {
            return;
        }
        let at = self.head.wrapping_add(self.len) % D.max(1);
        if let Some(slot) = self.q.get_mut(at) {
            *slot = dsn;
            self.len = self.len.saturating_add(1);
        }
    }

    /// Removes the oldest queued Dsn.
    pub(super) fn pop(&mut self) {
        if self.len > 0 {
            self.head = self.head.wrapping_add(1) % D.max(1);
            self.len = self.len.saturating_sub(1);
        }
    }

    /// Empties the queue.
    pub(super) fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }

    /// Whether nothing is queued.
    pub(super) const fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The state of the packets in flight of a connection of `P` paths and `D` Dsn descriptors.
/// Its fields belong to the connection: from outside it can only be created empty, lent and
/// taken back.
pub struct Flight<const P: usize, const D: usize> {
    pub(super) descs: [Desc; D],
    pub(super) retx: RetxQueue<D>,
    pub(super) slots: [SlotWindow; P],
}

impl<const P: usize, const D: usize> Flight<P, D> {
    /// Nothing in flight.
    pub const EMPTY: Self = Flight {
        descs: [FREE_DESC; D],
        retx: RetxQueue::EMPTY,
        slots: [SlotWindow::EMPTY; P],
    };

    /// Makes it [`Self::EMPTY`] again, one element at a time (no temporary of its size).
    pub(super) fn clear(&mut self) {
        for d in self.descs.iter_mut() {
            *d = FREE_DESC;
        }
        self.retx.clear();
        for w in self.slots.iter_mut() {
            w.clear();
        }
    }
}

/// Where a connection's [`Flight`] is.
pub trait FlightStore<const P: usize, const D: usize> {
    /// What the caller lends and takes back (`()` for the inline store, which never lends).
    type Lent;
    /// The store of a new connection (inline: an empty flight; lent: none yet).
    const EMPTY: Self;
    /// Whether the flight comes and goes: only then does the connection give it back.
    const LENDS: bool;
    /// The flight, if one is there.
    fn get(&self) -> Option<&Flight<P, D>>;
    /// The flight, if one is there.
    fn get_mut(&mut self) -> Option<&mut Flight<P, D>>;
    /// Stores `f`; gives it back if a flight is there already.
    fn put(&mut self, f: Self::Lent) -> Result<(), Self::Lent>;
    /// Takes the flight out (`None`: there is none, or the store never lends).
    fn take(&mut self) -> Option<Self::Lent>;
}

/// Inline: the flight is always there.
impl<const P: usize, const D: usize> FlightStore<P, D> for Flight<P, D> {
    type Lent = ();
    const EMPTY: Self = Flight::EMPTY;
    const LENDS: bool = false;

    fn get(&self) -> Option<&Flight<P, D>> {
        Some(self)
    }

    fn get_mut(&mut self) -> Option<&mut Flight<P, D>> {
        Some(self)
    }

    fn put(&mut self, f: ()) -> Result<(), ()> {
        Err(f)
    }

    fn take(&mut self) -> Option<()> {
        None
    }
}

/// Lent through an owning pointer `B` (a `Box` on the host, the kernel's `VBox`).
impl<const P: usize, const D: usize, B: DerefMut<Target = Flight<P, D>>> FlightStore<P, D>
    for Option<B>
{
    type Lent = B;
    const EMPTY: Self = None;
    const LENDS: bool = true;

    fn get(&self) -> Option<&Flight<P, D>> {
        self.as_deref()
    }

    fn get_mut(&mut self) -> Option<&mut Flight<P, D>> {
        self.as_deref_mut()
    }

    fn put(&mut self, f: B) -> Result<(), B> {
        if self.is_some() {
            return Err(f);
        }
        *self = Some(f);
        Ok(())
    }

    fn take(&mut self) -> Option<B> {
        Option::take(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retx_queue_is_a_bounded_ring() {
        let mut q = RetxQueue::<4>::EMPTY;
        assert!(q.is_empty());
        for d in 10..16 {
            q.push(d);
        }
        // Full at 4: the rest is dropped.
        assert_eq!(q.front(), Some(10));
        q.pop();
        q.push(20);
        let mut seen = [0u32; 4];
        for s in seen.iter_mut() {
            *s = q.front().unwrap_or(0);
            q.pop();
        }
        assert_eq!(seen, [11, 12, 13, 20]);
        assert!(q.is_empty());
        assert_eq!(q.front(), None);
        q.pop();
        assert!(q.is_empty());
    }

    #[test]
    fn an_inline_flight_is_never_lent() {
        let mut f = Flight::<2, 64>::EMPTY;
        assert!(FlightStore::get(&f).is_some());
        assert_eq!(FlightStore::take(&mut f), None);
        assert_eq!(FlightStore::put(&mut f, ()), Err(()));
    }
}
