// SPDX-License-Identifier: GPL-2.0

//! Loans of fast-register MR pages: what keeps a kernel consumer's pages out of the driver's
//! reach once the consumer may take them back.
//!
//! A kernel consumer maps pages into a fast-register MR (`ib_map_mr_sg`), registers them with
//! an `IB_WR_REG_MR` work request and hands the R_Key to a peer. The pages are lent to the
//! device from the registration until the consumer learns that the registration ended: its
//! `IB_WR_LOCAL_INV` was posted (the abstraction ends the loan when the request is posted,
//! before it can complete), a receive completion reports a remote invalidation
//! (`IB_WC_WITH_INVALIDATE`, ended when the completion is pushed to the consumer's array), or
//! the MR is deregistered. A new mapping also ends the pages of the old one.
//!
//! Each fast-register MR has a [`MrLoan`]: a mapping generation and the generation that is
//! registered, if any. Its pages ([`MrPage`](super::wr::MrPage)) carry the generation they were
//! mapped in and copy only while that generation is registered, under the loan's lock. The MRs
//! of a PD are listed in the PD's [`FastRegs`] (kernel PDs), where invalidations find them by
//! key.

use crate::{
    new_spinlock_irq,
    prelude::*,
    sync::{
        Arc,
        SpinLockIrq, //
    }, //
};

/// The state of a fast-register MR's loan.
#[derive(Debug, Default)]
struct LoanState {
    /// The mapping generation: raised by each `map_mr_sg`, and to end everything.
    gen: u64,
    /// The generation registered (its pages are lent), with its key.
    live: Option<(u64, u32)>,
}

/// The loan of a fast-register MR's pages (see the module documentation).
#[pin_data]
pub struct MrLoan {
    #[pin]
    state: SpinLockIrq<LoanState>,
}

impl core::fmt::Debug for MrLoan {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("MrLoan")
    }
}

impl MrLoan {
    /// The loan of a new fast-register MR: nothing mapped, nothing lent. Process context.
    pub(super) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                state <- new_spinlock_irq!(LoanState::default(), "rdma_mr_loan"),
            }),
            GFP_KERNEL,
        )
    }

    /// Starts a new mapping (`map_mr_sg`): the pages of earlier ones are not lent any more.
    /// Returns the new generation, which the mapped pages carry.
    pub(super) fn remap(&self) -> Result<u64> {
        let mut g = self.state.lock();
        g.gen = g.gen.checked_add(1).ok_or(EOVERFLOW)?;
        g.live = None;
        Ok(g.gen)
    }

    /// The current mapping generation.
    pub(super) fn generation(&self) -> u64 {
        self.state.lock().gen
    }

    /// The current mapping is registered under `key` (an `IB_WR_REG_MR` being posted).
    pub(super) fn register(&self, key: u32) {
        let mut g = self.state.lock();
        g.live = Some((g.gen, key));
    }

    /// Ends the loan (invalidation, a refused registration, deregistration).
    pub(super) fn end(&self) {
        self.state.lock().live = None;
    }

    /// Ends the loan if it is registered under `key`.
    fn end_key(&self, key: u32) {
        let mut g = self.state.lock();
        if g.live.is_some_and(|(_, k)| k == key) {
            g.live = None;
        }
    }

    /// Runs `f` while the pages of generation `gen` are lent, under the lock (so the loan
    /// cannot end meanwhile); `EINVAL` otherwise. Any context.
    pub(super) fn while_lent<R>(&self, gen: u64, f: impl FnOnce() -> R) -> Result<R> {
        let g = self.state.lock();
        if g.live.is_none_or(|(l, _)| l != gen) {
            return Err(EINVAL);
        }
        Ok(f())
    }
}

/// The fast-register MRs of a kernel PD, found by key when a registration is invalidated.
#[pin_data]
pub struct FastRegs {
    #[pin]
    list: SpinLockIrq<KVec<Arc<MrLoan>>>,
}

impl core::fmt::Debug for FastRegs {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("FastRegs")
    }
}

impl FastRegs {
    /// An empty list. Process context.
    pub(super) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                list <- new_spinlock_irq!(KVec::new(), "rdma_pd_fast_regs"),
            }),
            GFP_KERNEL,
        )
    }

    /// Lists a new MR's loan.
    pub(super) fn add(&self, loan: &Arc<MrLoan>) -> Result {
        self.list.lock().push(loan.clone(), GFP_ATOMIC)?;
        Ok(())
    }

    /// Takes a deregistered MR's loan off the list.
    pub(super) fn remove(&self, loan: &Arc<MrLoan>) {
        self.list.lock().retain(|l| !Arc::ptr_eq(l, loan));
    }

    /// Ends the loan of every MR registered under `key` (a local or remote invalidation). Any
    /// context. Linear in the PD's fast-register MRs.
    pub(super) fn invalidate(&self, key: u32) {
        for l in self.list.lock().iter() {
            l.end_key(key);
        }
    }
}

#[macros::kunit_tests(rust_metaroce_fastreg)]
mod tests {
    use super::*;

    #[test]
    fn a_loan_lasts_from_registration_to_invalidation() -> Result {
        let regs = FastRegs::new()?;
        let (a, b) = (MrLoan::new()?, MrLoan::new()?);
        regs.add(&a)?;
        regs.add(&b)?;
        let ga = a.remap()?;
        // Mapped but not registered: not lent.
        assert_eq!(a.while_lent(ga, || ()), Err(EINVAL));
        a.register(0x101);
        a.while_lent(ga, || ())?;
        let gb = b.remap()?;
        b.register(0x202);
        // Invalidating one key ends that loan only.
        regs.invalidate(0x101);
        assert_eq!(a.while_lent(ga, || ()), Err(EINVAL));
        b.while_lent(gb, || ())?;
        // Registering again lends the same mapping again; a new mapping ends the old pages.
        a.register(0x102);
        a.while_lent(ga, || ())?;
        let ga2 = a.remap()?;
        a.register(0x103);
        assert_eq!(a.while_lent(ga, || ()), Err(EINVAL));
        a.while_lent(ga2, || ())?;
        // Deregistration: ended and off the list.
        b.end();
        regs.remove(&b);
        assert_eq!(b.while_lent(gb, || ()), Err(EINVAL));
        assert_eq!(regs.list.lock().len(), 1);
        Ok(())
    }
}
