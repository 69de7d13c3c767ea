// SPDX-License-Identifier: GPL-2.0

//! A device's pool of flights: the state of a connection's packets in flight
//! (`proto::flight`: Dsn descriptors, retransmission queue, path slots, about 60 KiB), lent to a
//! connection while it sends and given back once it has been idle (transport.rst, section
//! 10.1), so that an idle connection costs only its own few KiB.
//!
//! A connection that wants to send takes a spare under its own lock ([`FlightPool::take`]: any
//! context, no allocation). Spares are made in process context: by the transmit worker when
//! the pool ran short ([`FlightPool::refill`]), and by the timer tick for a connection that
//! found none ([`super::on_tick`]: it waits at most a tick). Flights given back are kept as
//! spares up to [`KEEP`] and freed beyond that, after every lock is released. A flight whose
//! connection goes away with it (reaped, failed) is freed with the connection; every flight
//! counts itself in its pool's figures while it exists ([`Lent`]).

use super::{DESCS, PATHS};
use crate::proto::flight::Flight;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use kernel::alloc::VBox;
use kernel::new_spinlock_irq;
use kernel::prelude::*;
use kernel::rdma::{init_const, ConstValue};
use kernel::sync::{Arc, SpinLockIrq};

/// The flight of a native connection.
pub(crate) type NativeFlight = Flight<PATHS, DESCS>;

/// A flight, lent to a connection or kept spare, counted in its pool's figures until it is
/// freed (wherever that happens: given back beyond [`KEEP`], or with its connection).
pub(crate) struct Lent {
    f: VBox<NativeFlight>,
    made: Arc<AtomicU64>,
}

impl Deref for Lent {
    type Target = NativeFlight;

    fn deref(&self) -> &NativeFlight {
        &self.f
    }
}

impl DerefMut for Lent {
    fn deref_mut(&mut self) -> &mut NativeFlight {
        &mut self.f
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        self.made.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Spares the transmit worker keeps ready for connections that start sending.
const LOW: usize = 2;
/// Spares kept at most; flights given back beyond that are freed.
const KEEP: usize = 8;

/// An empty flight, copied into each new allocation in place ([`init_const`]).
struct Blank;

impl ConstValue for Blank {
    type Target = NativeFlight;
    const VALUE: NativeFlight = Flight::EMPTY;
}

/// The spare flights.
struct Spares {
    spare: [Option<Lent>; KEEP],
    len: usize,
}

/// The pool of one device.
#[pin_data]
pub(crate) struct FlightPool {
    #[pin]
    spares: SpinLockIrq<Spares>,
    /// Fewer than [`LOW`] spares are left: the transmit worker makes more.
    short: AtomicBool,
    /// Flights that exist (lent or spare), shared with each of them.
    made: Arc<AtomicU64>,
}

impl FlightPool {
    /// An empty pool (it fills on first use). Process context.
    pub(crate) fn new() -> Result<impl PinInit<Self>> {
        let made = Arc::new(AtomicU64::new(0), GFP_KERNEL)?;
        Ok(pin_init!(Self {
            spares <- new_spinlock_irq!(
                Spares {
                    spare: [const { None }; KEEP],
                    len: 0,
                },
                "metaroce_flights"
            ),
            short: AtomicBool::new(true),
            made,
        }))
    }

    /// Makes an empty flight. Process context.
    fn make(&self) -> Result<Lent> {
        let f = VBox::init(init_const::<Blank>(), GFP_KERNEL)?;
        self.made.fetch_add(1, Ordering::Relaxed);
        Ok(Lent {
            f,
            made: self.made.clone(),
        })
    }

    /// A spare flight for a connection that wants one, if there is one; a pool left with fewer
    /// than [`LOW`] is marked short. Any context (a leaf spinlock, no allocation).
    pub(crate) fn take(&self) -> Option<Lent> {
        let mut s = self.spares.lock();
        let f = match s.len.checked_sub(1) {
            Some(i) => {
                s.len = i;
                s.spare.get_mut(i).and_then(Option::take)
            }
            None => None,
        };
        if s.len < LOW {
            self.short.store(true, Ordering::Release);
        }
        f
    }

    /// A spare, else a new flight, for a connection that wants one. Process context.
    pub(crate) fn take_or_make(&self) -> Option<Lent> {
        self.take().or_else(|| self.make().ok())
    }

    /// Takes back flight `f` that a connection gave back (or did not take): kept as a spare,
    /// or returned for the caller to free once it holds no lock. Any context.
    #[must_use]
    pub(crate) fn give(&self, f: Lent) -> Option<Lent> {
        let mut s = self.spares.lock();
        let i = s.len;
        match s.spare.get_mut(i) {
            Some(slot) => {
                *slot = Some(f);
                s.len = i + 1;
                None
            }
            None => Some(f),
        }
    }

    /// Makes spares up to [`LOW`] if the pool ran short. Process context (the transmit worker).
    pub(crate) fn refill(&self) {
        if !self.short.swap(false, Ordering::AcqRel) {
            return;
        }
        while self.spares.lock().len < LOW {
            let Ok(f) = self.make() else {
                // Tried again when the pool next runs short.
                return;
            };
            let mut s = self.spares.lock();
            let i = s.len;
            match s.spare.get_mut(i) {
                Some(slot) => {
                    *slot = Some(f);
                    s.len = i + 1;
                }
                None => {
                    // Filled meanwhile by flights given back: this one is freed, unlocked.
                    drop(s);
                    drop(f);
                    return;
                }
            }
        }
    }

    /// Flights that exist (lent or spare) and flights lent now (all but the spares).
    pub(crate) fn figures(&self) -> (u64, u64) {
        let spare = self.spares.lock().len as u64;
        let made = self.made.load(Ordering::Relaxed);
        (made, made.saturating_sub(spare))
    }
}
