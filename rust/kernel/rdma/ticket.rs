// SPDX-License-Identifier: GPL-2.0

//! Tickets: what ties a kernel consumer's buffers to the life of the work request that lent
//! them to the device.
//!
//! A kernel consumer's work request lends the memory its SGEs name to the device from posting
//! until the consumer learns that the request completed: through a completion it polls, or
//! because the queue was reset or destroyed (then no completion comes and the memory is the
//! consumer's again). After that the consumer frees or reuses it, so a device that still wrote
//! there would corrupt memory that is no longer its.
//!
//! The abstraction sees each of those moments, so it keeps the rule itself rather than
//! trusting the driver to drop its copies in time:
//! - every kernel QP (its send and its receive queue, each a lane) and every kernel SRQ has a
//!   [`WorkQueues`] state, kept by the abstraction in the object;
//! - a posted request gets a [`Ticket`] ([`Qp::issue_send`](super::qp::Qp::issue_send),
//!   [`Qp::issue_recv`](super::qp::Qp::issue_recv), [`Srq::issue`](super::srq::Srq::issue)):
//!   a sequence number in its lane, its `wr_id`, and a reference to the state;
//! - its buffers ([`KernelBuf::from_sge`]) carry the ticket's lane and sequence, and each
//!   access copies under the state's lock, only while the lane's retired watermark is below
//!   that sequence;
//! - a completion of a kernel CQ carries the ticket
//!   ([`WorkCompletion::with_ticket`](super::cq::WorkCompletion::with_ticket)), which
//!   [`WcArray::push`](super::cq::WcArray::push) retires (raising the watermark to it) before
//!   the consumer can read the completion; its `wr_id` is the ticket's;
//! - a move to RESET, `destroy_qp` and `destroy_srq` retire everything issued in the object.
//!
//! The watermark retires every earlier request of the lane too, which is what a send queue's
//! unsignalled requests need (they complete with the next signalled one) and what a QP's
//! receive queue does (it completes in order). An SRQ's requests complete in any order, on the
//! QPs that take them: a QP taking one moves its ticket into its own receive lane
//! ([`Ticket::transfer`]). A driver that completes requests out of order, or keeps a buffer past
//! its completion, gets `EINVAL` from the buffer instead of writing into memory it lost.

use super::{
    device::Driver,
    fastreg::FastRegs,
    qp::Qp,
    wr::KernelBuf, //
};
use crate::{
    new_spinlock_irq,
    prelude::*,
    sync::{
        Arc,
        SpinLockIrq, //
    }, //
};

/// A queue of a kernel QP or SRQ whose requests are numbered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lane {
    /// A QP's send queue.
    Send = 0,
    /// A QP's receive queue, or an SRQ.
    Recv = 1,
}

/// The numbering of one lane.
#[derive(Default, Debug)]
struct LaneState {
    /// The sequence number of the last request issued (the first is 1).
    issued: u64,
    /// Every request up to this sequence number is retired: its buffers are the consumer's.
    retired: u64,
}

/// The lanes of one kernel QP (send and receive queue) or SRQ (its receive lane), kept by the
/// abstraction in the object and referenced by its tickets and buffers.
#[pin_data]
pub struct WorkQueues {
    #[pin]
    lanes: SpinLockIrq<[LaneState; 2]>,
    /// A QP's PD's fast-register MRs, which a completion reporting a remote invalidation
    /// ends the loan of.
    fast_regs: Option<Arc<FastRegs>>,
    /// An SRQ's (whose requests move to QPs), not a QP's.
    srq: bool,
}

impl core::fmt::Debug for WorkQueues {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("WorkQueues")
    }
}

impl WorkQueues {
    /// The state of a new kernel QP of a PD with the fast-register MRs `fast_regs`. Process
    /// context.
    pub(super) fn new_qp(fast_regs: Option<Arc<FastRegs>>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                lanes <- new_spinlock_irq!(<[LaneState; 2]>::default(), "rdma_qp_work_queues"),
                fast_regs,
                srq: false,
            }),
            GFP_KERNEL,
        )
    }

    /// The state of a new kernel SRQ: a lock class apart from the QPs', as
    /// [`Ticket::transfer`] holds an SRQ's lock while it issues in a QP's lane. Process
    /// context.
    pub(super) fn new_srq() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                lanes <- new_spinlock_irq!(<[LaneState; 2]>::default(), "rdma_srq_work_queues"),
                fast_regs: None,
                srq: true,
            }),
            GFP_KERNEL,
        )
    }

    /// A ticket for the next request of `lane`. Any context.
    pub(super) fn issue(self: &Arc<Self>, lane: Lane, wr_id: u64) -> Result<Ticket> {
        let mut g = self.lanes.lock();
        Self::issue_locked(self, &mut g[lane as usize], lane, wr_id)
    }

    fn issue_locked(this: &Arc<Self>, l: &mut LaneState, lane: Lane, wr_id: u64) -> Result<Ticket> {
        // Sequence numbers never wrap (a wrapped number would name a retired request as live).
        l.issued = l.issued.checked_add(1).ok_or(EOVERFLOW)?;
        // INVARIANT: `seq` was just issued in `lane` of `q`.
        Ok(Ticket {
            owner: Owner {
                q: this.clone(),
                lane,
                seq: l.issued,
            },
            wr_id,
        })
    }

    /// Retires every request issued so far in every lane: the queue was reset or destroyed,
    /// and its requests' memory is the consumer's again. Any context.
    pub(super) fn close(&self) {
        let mut g = self.lanes.lock();
        for l in g.iter_mut() {
            l.retired = l.issued;
        }
    }
}

/// Where a request's number lives: its lane of a queue state and its sequence number there.
#[derive(Clone, Debug)]
pub(super) struct Owner {
    q: Arc<WorkQueues>,
    lane: Lane,
    seq: u64,
}

impl Owner {
    /// Runs `f` while the request is not retired, under the state's lock (so no completion of
    /// it can reach the consumer meanwhile); `EINVAL` if it is retired. Any context.
    pub(super) fn while_live<R>(&self, f: impl FnOnce() -> R) -> Result<R> {
        let g = self.q.lanes.lock();
        if g[self.lane as usize].retired >= self.seq {
            return Err(EINVAL);
        }
        Ok(f())
    }

    fn same(&self, o: &Owner) -> bool {
        Arc::ptr_eq(&self.q, &o.q) && self.lane == o.lane && self.seq == o.seq
    }
}

/// A posted work request of a kernel QP or SRQ, from posting until its completion is handed to
/// the consumer (or the driver drops it). Neither `Copy` nor `Clone`: a request has one.
///
/// # Invariants
///
/// `owner.seq` was issued in `owner.lane` of `owner.q` for a request whose `wr_id` is `wr_id`.
#[derive(Debug)]
pub struct Ticket {
    owner: Owner,
    wr_id: u64,
}

impl Ticket {
    /// The request's `wr_id`, as the consumer posted it.
    pub fn wr_id(&self) -> u64 {
        self.wr_id
    }

    /// What the request's buffers carry.
    pub(super) fn owner(&self) -> &Owner {
        &self.owner
    }

    /// Retires this request and every earlier one of its lane: the consumer is about to learn
    /// of its completion. Any context.
    pub(super) fn retire(&self) {
        let o = &self.owner;
        let mut g = o.q.lanes.lock();
        let l = &mut g[o.lane as usize];
        l.retired = core::cmp::max(l.retired, o.seq);
    }

    /// The completion of this request reports that the peer invalidated `rkey`: the loan of
    /// the QP's PD's fast-register MR registered under it ends. Any context.
    pub(super) fn invalidate(&self, rkey: u32) {
        if let Some(r) = &self.owner.q.fast_regs {
            r.invalidate(rkey);
        }
    }

    /// Moves a request taken from an SRQ to the receive lane of `qp` (a kernel QP using the
    /// SRQ), with its buffers `bufs`: the request's buffers now belong to the new ticket, any
    /// other is emptied. `EINVAL` (and every buffer emptied) if the request was retired
    /// meanwhile (its SRQ was destroyed), is not an SRQ's, or `qp` is a user QP. Any context.
    pub fn transfer<'b, T: Driver>(
        self,
        qp: &Qp<T>,
        bufs: impl IntoIterator<Item = &'b mut KernelBuf>,
    ) -> Result<Ticket> {
        self.transfer_to(qp.work_queues(), bufs)
    }

    fn transfer_to<'b>(
        self,
        to: Option<&Arc<WorkQueues>>,
        bufs: impl IntoIterator<Item = &'b mut KernelBuf>,
    ) -> Result<Ticket> {
        // The SRQ's lock is held until the buffers carry the new ticket, so the request cannot
        // be retired in between; the QP's lock class is another (`WorkQueues::new_srq`).
        let g = self.owner.q.lanes.lock();
        let new = match to {
            // Only SRQ to QP: the one order in which two states' locks nest.
            Some(to)
                if self.owner.q.srq
                    && !to.srq
                    && g[self.owner.lane as usize].retired < self.owner.seq =>
            {
                let mut t = to.lanes.lock();
                WorkQueues::issue_locked(to, &mut t[Lane::Recv as usize], Lane::Recv, self.wr_id)
            }
            _ => Err(EINVAL),
        };
        for b in bufs {
            match &new {
                Ok(n) if b.owner().is_some_and(|o| o.same(&self.owner)) => b.set_owner(n.owner()),
                _ => *b = KernelBuf::empty(),
            }
        }
        drop(g);
        new
    }
}

#[macros::kunit_tests(rust_metaroce_ticket)]
mod tests {
    use super::*;
    use crate::rdma::wr::Sge;

    /// A zeroed kernel buffer of `n` bytes and an SGE naming it.
    fn buffer(n: usize) -> Result<(KVec<u8>, Sge)> {
        let v = KVec::from_elem(0u8, n, GFP_KERNEL)?;
        let sge = Sge::new(v.as_ptr() as u64, n as u32, 0);
        Ok((v, sge))
    }

    #[test]
    fn a_completion_retires_its_request_and_every_earlier_one() -> Result {
        let q = WorkQueues::new_qp(None)?;
        let (v1, s1) = buffer(16)?;
        let (v2, s2) = buffer(16)?;
        let (t1, t2) = (q.issue(Lane::Send, 11)?, q.issue(Lane::Send, 12)?);
        let (b1, b2) = (
            KernelBuf::from_sge(&t1, &s1)?,
            KernelBuf::from_sge(&t2, &s2)?,
        );
        b1.write_at(0, &[1, 2, 3])?;
        b2.write_at(13, &[4, 5, 6])?;
        assert_eq!(b2.write_at(14, &[0; 3]), Err(EINVAL));
        // The second (signalled) request completes: the first (unsignalled) one with it.
        assert_eq!(t2.wr_id(), 12);
        t2.retire();
        assert_eq!(b1.write_at(0, &[9]), Err(EINVAL));
        assert_eq!(b2.write_at(0, &[9]), Err(EINVAL));
        assert_eq!(b1.read_at(0, &mut [0; 1]), Err(EINVAL));
        assert_eq!(&v1[..4], &[1, 2, 3, 0]);
        assert_eq!(&v2[12..], &[0, 4, 5, 6]);
        // The receive lane is another queue, and a later send request is live.
        let r = q.issue(Lane::Recv, 21)?;
        KernelBuf::from_sge(&r, &s1)?.write_at(3, &[7])?;
        let t3 = q.issue(Lane::Send, 13)?;
        KernelBuf::from_sge(&t3, &s2)?.write_at(0, &[8])?;
        assert_eq!((v1[3], v2[0]), (7, 8));
        Ok(())
    }

    #[test]
    fn reset_and_destroy_retire_everything_issued() -> Result {
        let q = WorkQueues::new_qp(None)?;
        let (v, s) = buffer(8)?;
        let t = q.issue(Lane::Recv, 1)?;
        let b = KernelBuf::from_sge(&t, &s)?;
        let mut out = [0u8; 8];
        b.read_at(0, &mut out)?;
        q.close();
        assert_eq!(b.write_at(0, &[1]), Err(EINVAL));
        assert_eq!(b.read_at(0, &mut out), Err(EINVAL));
        assert!(v.iter().all(|&x| x == 0));
        // Requests posted after a reset are live.
        let t = q.issue(Lane::Recv, 2)?;
        KernelBuf::from_sge(&t, &s)?.write_at(7, &[5])?;
        assert_eq!(v[7], 5);
        // An empty buffer reaches nothing.
        assert_eq!(KernelBuf::empty().write_at(0, &[1]), Err(EINVAL));
        KernelBuf::empty().write_at(0, &[])?;
        Ok(())
    }

    #[test]
    fn a_taken_srq_request_moves_to_the_qp() -> Result {
        let srq = WorkQueues::new_srq()?;
        let qp = WorkQueues::new_qp(None)?;
        let (v, s) = buffer(8)?;
        let (_, s_other) = buffer(8)?;
        let (a, b) = (srq.issue(Lane::Recv, 1)?, srq.issue(Lane::Recv, 2)?);
        let ba = KernelBuf::from_sge(&a, &s)?;
        let mut bb = [
            KernelBuf::from_sge(&b, &s)?,
            KernelBuf::from_sge(&a, &s_other)?,
        ];
        // `b` is taken first (SRQ requests complete in any order); a buffer of another
        // request handed along is emptied, not moved.
        let b = b.transfer_to(Some(&qp), bb.iter_mut())?;
        assert_eq!(b.wr_id(), 2);
        assert!(bb[1].is_empty());
        bb[0].write_at(0, &[3])?;
        b.retire();
        assert_eq!(bb[0].write_at(0, &[4]), Err(EINVAL));
        // Retiring on the QP left the SRQ's other request live.
        ba.write_at(1, &[6])?;
        assert_eq!(&v[..2], &[3, 6]);
        // The SRQ is destroyed: its requests cannot be moved (or reached) any more.
        srq.close();
        let mut left = [ba];
        assert_eq!(
            a.transfer_to(Some(&qp), left.iter_mut()).err(),
            Some(EINVAL)
        );
        assert!(left[0].is_empty());
        // Only an SRQ's requests move, and only to a QP.
        let own = qp.issue(Lane::Recv, 9)?;
        assert_eq!(
            own.transfer_to(Some(&qp), core::iter::empty()).err(),
            Some(EINVAL)
        );
        let c = WorkQueues::new_srq()?.issue(Lane::Recv, 10)?;
        assert_eq!(c.transfer_to(None, core::iter::empty()).err(), Some(EINVAL));
        Ok(())
    }
}
