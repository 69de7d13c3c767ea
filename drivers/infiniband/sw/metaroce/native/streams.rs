// SPDX-License-Identifier: GPL-2.0

//! Where a connection keeps the streams of its bound QPs: one allocation per bound QP
//! ([`Bound`]: the core's state of the stream, the QP's user context and its stats page), made
//! before the connection's lock is taken and freed after it is released. A connection with no
//! QP bound holds nothing here but the slots' pointers.

use super::{MSGS, STREAMS};
use crate::proto::stream::{Stream, StreamStore};
use kernel::prelude::*;
use kernel::rdma::mmap::SharedBuf;
use kernel::rdma::qp::UcontextId;
use kernel::rdma::{init_const, ConstValue};
use kernel::sync::Arc;

/// The stream of one bound QP.
pub(crate) struct Bound {
    stream: Stream<MSGS>,
    /// The QP's user context (`None`: a kernel QP), for the per-context quota
    /// ([`super::within_quota`]).
    owner: Option<UcontextId>,
    /// The QP's stats page, if it has one (`super::telemetry::publish`).
    page: Option<Arc<SharedBuf>>,
}

/// A stream never used, copied into each new allocation in place ([`init_const`]: about 6 KiB,
/// never on a stack).
struct Blank;

impl ConstValue for Blank {
    type Target = Bound;
    const VALUE: Bound = Bound {
        stream: Stream::EMPTY,
        owner: None,
        page: None,
    };
}

impl Bound {
    /// A stream for a QP of user context `owner` with stats page `page`. Process context.
    pub(crate) fn new(
        owner: Option<UcontextId>,
        page: Option<Arc<SharedBuf>>,
    ) -> Result<KBox<Self>> {
        let mut b = KBox::init(init_const::<Blank>(), GFP_KERNEL)?;
        b.owner = owner;
        b.page = page;
        Ok(b)
    }
}

/// The streams of one connection, by slot.
pub(crate) struct Bindings {
    slots: [Option<KBox<Bound>>; STREAMS],
    /// How many of the bound QPs have a stats page: the transmit and receive paths ask on
    /// every poll whether there is one to publish to ([`Bindings::has_pages`]), which must
    /// not walk the slots.
    pages: usize,
}

impl StreamStore<MSGS> for Bindings {
    type Slot = KBox<Bound>;
    const EMPTY: Self = Bindings {
        slots: [const { None }; STREAMS],
        pages: 0,
    };

    fn slot(&self, i: usize) -> Option<&Stream<MSGS>> {
        self.slots.get(i)?.as_deref().map(|b| &b.stream)
    }

    fn slot_mut(&mut self, i: usize) -> Option<&mut Stream<MSGS>> {
        self.slots.get_mut(i)?.as_deref_mut().map(|b| &mut b.stream)
    }

    fn put(&mut self, i: usize, s: KBox<Bound>) -> core::result::Result<(), KBox<Bound>> {
        match self.slots.get_mut(i) {
            Some(e @ None) => {
                self.pages += usize::from(s.page.is_some());
                *e = Some(s);
                Ok(())
            }
            _ => Err(s),
        }
    }

    fn take(&mut self, i: usize) -> Option<KBox<Bound>> {
        let b = self.slots.get_mut(i)?.take()?;
        self.pages -= usize::from(b.page.is_some());
        Some(b)
    }
}

impl Bindings {
    /// The first slot that holds no stream.
    pub(crate) fn free(&self) -> Option<usize> {
        self.slots.iter().position(Option::is_none)
    }

    /// Whether a QP of user context `ctx` is bound.
    pub(crate) fn held_by(&self, ctx: UcontextId) -> bool {
        self.slots.iter().flatten().any(|b| b.owner == Some(ctx))
    }

    /// Whether any bound QP has a stats page.
    pub(crate) fn has_pages(&self) -> bool {
        self.pages != 0
    }

    /// The stats pages of the bound QPs that have one (the walk stops at the last).
    pub(crate) fn pages(&self) -> impl Iterator<Item = &Arc<SharedBuf>> {
        self.slots
            .iter()
            .flatten()
            .filter_map(|b| b.page.as_ref())
            .take(self.pages)
    }
}
