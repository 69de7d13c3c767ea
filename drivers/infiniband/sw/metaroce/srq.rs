// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: receive work requests that several QPs take from, for kernel
//! consumers (posted with `post_srq_recv`) and for processes (librxe's receive ring layout,
//! which the process fills without a system call, exactly like a QP's receive ring).
//!
//! A QP created with an SRQ has no receive queue of its own: when a message arrives, the QP's
//! responder takes the oldest request of the SRQ ([`MetaRoceSrq::take`]) into the QP's small
//! private ring of requests in progress, which completes (or flushes) it on the QP's receive
//! CQ. The lock order is the QP's lock, then the SRQ's; the SRQ's is never held while a QP's is
//! taken. Requests still in the SRQ belong to it: a QP entering the error state flushes only
//! those it had taken.
//!
//! The limit (`IB_SRQ_LIMIT`, armed by `modify_srq`) fires once, when a request taken leaves
//! fewer than `limit` requests in the SRQ: it disarms and the QP that took the request raises
//! `IB_EVENT_SRQ_LIMIT_REACHED` once its lock is released.

use crate::device::MetaRoceDriver;
use crate::qp::{Seg, MAX_QP_WR, MAX_SGE};
use crate::uabi::{parse_recv, RECV_WQE_HDR, SGE_LEN};
use crate::uqueue::{Role, UQueue};
use crate::verbs::{give, take};
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::prelude::*;
use kernel::rdma::srq::{NewSrq, Srq, SrqAttr, SrqAttrMask};
use kernel::rdma::ticket::Ticket;
use kernel::rdma::udata::Udata;
use kernel::rdma::wr::{KernelBuf, PostError, RecvWr, RecvWrList};
use kernel::sync::{Mutex, SpinLockIrq};
use kernel::{new_mutex, new_spinlock_irq};

/// Most SRQs per device.
pub(crate) const MAX_SRQ: u32 = 0x4000;
/// Most receive work requests per SRQ.
pub(crate) const MAX_SRQ_WR: u32 = MAX_QP_WR;
/// Most SGEs per SRQ receive work request.
pub(crate) const MAX_SRQ_SGE: u32 = MAX_SGE;
/// Largest receive WQE slot read from a user SRQ ring.
const WQE_MAX: usize = RECV_WQE_HDR + MAX_SRQ_SGE as usize * SGE_LEN;

/// Numbers reported to librxe (`srq_num`, meaningful for XRC SRQs only, which are not
/// offered): unique enough to tell SRQs apart in traces.
static NEXT_SRQ_NUM: AtomicU32 = AtomicU32::new(1);

/// A receive request posted by a kernel consumer.
#[derive(Clone, Copy, Default)]
struct Posted {
    wr_id: u64,
    num_sge: u32,
    len: u32,
}

/// A kernel SRQ's requests: `head..tail` (ring counters over a power-of-two depth) are posted.
struct KernelRing {
    entries: KVec<Posted>,
    /// Each entry's ticket (`kernel::rdma::ticket`): it goes with the request to the QP that
    /// takes it.
    tickets: KVec<Option<Ticket>>,
    /// `max_sge` segments per entry.
    segs: KVec<Seg>,
    head: u32,
    tail: u32,
}

impl KernelRing {
    fn new(max_wr: u32, max_sge: u32) -> Result<Self> {
        let depth = max_wr.checked_next_power_of_two().ok_or(EINVAL)? as usize;
        let mut entries = KVec::with_capacity(depth, GFP_KERNEL_ACCOUNT)?;
        let mut tickets = KVec::with_capacity(depth, GFP_KERNEL_ACCOUNT)?;
        for _ in 0..depth {
            entries.push(Posted::default(), GFP_KERNEL_ACCOUNT)?;
            tickets.push(None, GFP_KERNEL_ACCOUNT)?;
        }
        let n = depth.checked_mul(max_sge as usize).ok_or(EINVAL)?;
        let mut segs = KVec::with_capacity(n, GFP_KERNEL_ACCOUNT)?;
        for _ in 0..n {
            segs.push(Seg::default(), GFP_KERNEL_ACCOUNT)?;
        }
        Ok(Self {
            entries,
            tickets,
            segs,
            head: 0,
            tail: 0,
        })
    }

    fn depth(&self) -> u32 {
        self.entries.len() as u32
    }

    fn count(&self) -> u32 {
        self.tail.wrapping_sub(self.head)
    }

    fn slot(&self, idx: u32) -> usize {
        idx as usize & (self.entries.len() - 1)
    }

    fn segs_mut(&mut self, slot: usize, max_sge: u32) -> &mut [Seg] {
        let base = slot * max_sge as usize;
        &mut self.segs[base..base + max_sge as usize]
    }

    /// Moves every posted entry of `old` here, oldest first (resize). `EINVAL` if they do not
    /// fit.
    fn take_entries(&mut self, old: &mut KernelRing, max_sge: u32) -> Result {
        let n = old.count();
        if n > self.depth() {
            return Err(EINVAL);
        }
        for i in 0..n {
            let from = old.slot(old.head.wrapping_add(i));
            let to = self.slot(i);
            self.entries[to] = old.entries[from];
            self.tickets[to] = old.tickets[from].take();
            let m = max_sge as usize;
            let (fb, tb) = (from * m, to * m);
            // Moved: the old ring keeps no buffer of a request posted here.
            for (t, f) in self.segs[tb..tb + m]
                .iter_mut()
                .zip(&mut old.segs[fb..fb + m])
            {
                *t = core::mem::take(f);
            }
        }
        self.head = 0;
        self.tail = n;
        Ok(())
    }
}

/// Where an SRQ keeps its requests.
enum Ring {
    Kernel(KernelRing),
    /// librxe's receive ring, filled by the process.
    User(UQueue),
}

impl Ring {
    fn count(&self) -> u32 {
        match self {
            Ring::Kernel(k) => k.count(),
            Ring::User(q) => q.count(),
        }
    }

    fn capacity(&self) -> u32 {
        match self {
            Ring::Kernel(k) => k.depth(),
            Ring::User(q) => q.capacity(),
        }
    }
}

struct SrqInner {
    ring: Ring,
    /// The armed limit, 0 when disarmed.
    limit: u32,
    /// Malformed requests found in a user ring (each broke the QP that took it).
    malformed: u64,
}

/// A shared receive queue.
#[pin_data]
pub(crate) struct MetaRoceSrq {
    /// SGEs per request (fixed at creation).
    pub(crate) max_sge: u32,
    #[pin]
    inner: SpinLockIrq<SrqInner>,
    /// Serialises `modify_srq` calls (uverbs runs them concurrently on one SRQ).
    #[pin]
    modify: Mutex<()>,
}

/// What [`MetaRoceSrq::take`] found.
pub(crate) enum Taken {
    /// No request is posted.
    Empty,
    /// The oldest request, its segments written to the caller's slice (and a kernel
    /// request's ticket, which the QP moves to its own receive queue).
    Entry {
        wr_id: u64,
        num_sge: u32,
        len: u32,
        ticket: Option<Ticket>,
    },
    /// The oldest entry of a user ring was malformed (too many SGEs, lengths overflowing); it
    /// was consumed.
    Malformed,
}

impl MetaRoceSrq {
    /// Takes the oldest request into `out` (at least `max_sge` segments). Returns what was
    /// found and whether the limit fired (the caller raises the event once its own locks are
    /// released). Any context; called with the taking QP's lock held.
    pub(crate) fn take(&self, out: &mut [Seg]) -> (Taken, bool) {
        let max_sge = self.max_sge;
        let mut g = self.inner.lock();
        let inner = &mut *g;
        let taken = match &mut inner.ring {
            Ring::Kernel(k) => {
                if k.count() == 0 {
                    return (Taken::Empty, false);
                }
                let slot = k.slot(k.head);
                let e = k.entries[slot];
                let n = e.num_sge as usize;
                let ticket = k.tickets[slot].take();
                // Moved out (or dropped): the SRQ keeps no buffer of a request it handed out.
                let segs = k.segs_mut(slot, max_sge);
                if n > out.len() {
                    // Cannot happen (posting checks `max_sge`); never trusted.
                    segs.iter_mut().for_each(|s| *s = Seg::default());
                    k.head = k.head.wrapping_add(1);
                    Taken::Malformed
                } else {
                    for (o, s) in out[..n].iter_mut().zip(segs.iter_mut()) {
                        *o = core::mem::take(s);
                    }
                    k.head = k.head.wrapping_add(1);
                    Taken::Entry {
                        wr_id: e.wr_id,
                        num_sge: e.num_sge,
                        len: e.len,
                        ticket,
                    }
                }
            }
            Ring::User(q) => {
                let mut raw = [0u8; WQE_MAX];
                let Ok(Ok(n)) = q.peek_entry(&mut raw, RECV_WQE_HDR, crate::uabi::recv_wqe_len)
                else {
                    return (Taken::Empty, false);
                };
                let _ = q.consume();
                match parse_recv(&raw[..n], max_sge, out) {
                    Some((wr_id, num_sge, len)) => Taken::Entry {
                        wr_id,
                        num_sge,
                        len,
                        ticket: None,
                    },
                    None => {
                        inner.malformed += 1;
                        Taken::Malformed
                    }
                }
            }
        };
        let fired = inner.limit != 0 && inner.ring.count() < inner.limit;
        if fired {
            inner.limit = 0;
        }
        (taken, fired)
    }
}

pub(crate) fn create_srq(
    srq: &mut NewSrq<'_, MetaRoceDriver>,
) -> Result<impl PinInit<MetaRoceSrq, Error>> {
    let want = srq.attr();
    if want.max_wr == 0 || want.max_wr > MAX_SRQ_WR || want.max_sge > MAX_SRQ_SGE {
        return Err(EINVAL);
    }
    let max_sge = core::cmp::max(want.max_sge, 1);
    let ring = match srq.udata() {
        None => Ring::Kernel(KernelRing::new(want.max_wr, max_sge)?),
        Some(udata) => {
            // No request; the response is the ring's mapping, `srq_num`, 4 reserved bytes.
            udata.expect_no_request()?;
            let elem = RECV_WQE_HDR + max_sge as usize * SGE_LEN;
            let q = UQueue::new(udata, want.max_wr, elem, Role::KernelConsumes)?;
            let num = NEXT_SRQ_NUM.fetch_add(1, Ordering::Relaxed);
            udata.write_response(crate::uabi::srq_resp(&q, num).as_bytes())?;
            Ring::User(q)
        }
    };
    // The limit given at creation is ignored (as the verbs specification says of
    // `ibv_create_srq`); `modify_srq` arms it.
    srq.set_attr(SrqAttr {
        max_wr: ring.capacity(),
        max_sge,
        srq_limit: 0,
    });
    take(&srq.device().objects.srqs, MAX_SRQ)?;
    Ok(try_pin_init!(MetaRoceSrq {
        max_sge,
        inner <- new_spinlock_irq!(
            SrqInner {
                ring,
                limit: 0,
                malformed: 0,
            },
            "metaroce_srq"
        ),
        modify <- new_mutex!((), "metaroce_srq_modify"),
    }))
}

pub(crate) fn destroy_srq(srq: &Srq<MetaRoceDriver>) {
    let malformed = srq.inner.lock().malformed;
    if malformed != 0 {
        pr_debug!("SRQ destroyed after {malformed} malformed request(s)\n");
    }
    give(&srq.device().objects.srqs);
}

/// Resizes the SRQ to at least `max_wr` requests, keeping those posted (`EINVAL` if they do
/// not fit). A user SRQ gets a new ring whose mapping is written where the request's address
/// points (both user ABIs: `modify_srq` has no driver response); the provider
/// holds its SRQ lock across the command, so the process does not post meanwhile. Returns the
/// new capacity.
fn resize(srq: &Srq<MetaRoceDriver>, max_wr: u32, udata: Option<&Udata<'_>>) -> Result<u32> {
    let max_sge = srq.max_sge;
    let user = matches!(srq.inner.lock().ring, Ring::User(_));
    match (user, udata) {
        (true, Some(udata)) => {
            let mut cmd = [0u8; 8];
            udata.read_request(&mut cmd, 8)?;
            let addr = u64::from_ne_bytes(cmd);
            let elem = RECV_WQE_HDR + max_sge as usize * SGE_LEN;
            let mut new = UQueue::new(udata, max_wr, elem, Role::KernelConsumes)?;
            udata.write_user_at(addr, crate::uabi::srq_resize_info(&new).as_bytes())?;
            let capacity = new.capacity();
            let old = {
                let mut g = srq.inner.lock();
                let Ring::User(q) = &mut g.ring else {
                    return Err(EINVAL);
                };
                // Fails with EINVAL if more requests are posted than the new ring holds.
                new.take_entries(q)?;
                core::mem::replace(q, new)
            };
            // The old ring's mapping is revoked outside the spinlock (it takes a mutex).
            drop(old);
            Ok(capacity)
        }
        (false, None) => {
            let mut new = KernelRing::new(max_wr, max_sge)?;
            let capacity = new.depth();
            let old = {
                let mut g = srq.inner.lock();
                let Ring::Kernel(k) = &mut g.ring else {
                    return Err(EINVAL);
                };
                new.take_entries(k, max_sge)?;
                core::mem::replace(k, new)
            };
            drop(old);
            Ok(capacity)
        }
        // A user SRQ resized without the provider's request, or the reverse.
        _ => Err(EINVAL),
    }
}

pub(crate) fn modify_srq(
    srq: &Srq<MetaRoceDriver>,
    attr: &mut SrqAttr,
    mask: SrqAttrMask,
    udata: Option<&Udata<'_>>,
) -> Result {
    let _serial = srq.modify.lock();
    let (limit, capacity) = {
        let g = srq.inner.lock();
        (g.limit, g.ring.capacity())
    };
    // Validate everything before changing anything (as rdma_rxe does).
    if mask.contains(SrqAttrMask::MAX_WR)
        && (attr.max_wr == 0 || attr.max_wr > MAX_SRQ_WR || (limit != 0 && attr.max_wr < limit))
    {
        return Err(EINVAL);
    }
    if mask.contains(SrqAttrMask::LIMIT) && attr.srq_limit > capacity {
        return Err(EINVAL);
    }
    if !mask.contains(SrqAttrMask::MAX_WR) {
        if let Some(udata) = udata {
            // librxe always sends its command; anything else must be empty or zero.
            let mut cmd = [0u8; 8];
            udata.read_request(&mut cmd, 0)?;
        }
    }
    let capacity = if mask.contains(SrqAttrMask::MAX_WR) {
        resize(srq, attr.max_wr, udata)?
    } else {
        capacity
    };
    let limit = {
        let mut g = srq.inner.lock();
        if mask.contains(SrqAttrMask::LIMIT) {
            g.limit = attr.srq_limit;
        }
        g.limit
    };
    *attr = SrqAttr {
        max_wr: capacity,
        max_sge: srq.max_sge,
        srq_limit: limit,
    };
    Ok(())
}

pub(crate) fn query_srq(srq: &Srq<MetaRoceDriver>) -> Result<SrqAttr> {
    let g = srq.inner.lock();
    Ok(SrqAttr {
        max_wr: g.ring.capacity(),
        max_sge: srq.max_sge,
        srq_limit: g.limit,
    })
}

/// Posts receive requests to a kernel SRQ. Runs with IRQs possibly disabled: no allocation,
/// no sleeping. A user SRQ is posted to through its ring (`EINVAL` here).
pub(crate) fn post_srq_recv<'a>(
    srq: &Srq<MetaRoceDriver>,
    wrs: RecvWrList<'a>,
) -> Result<(), PostError<RecvWr<'a>>> {
    let max_sge = srq.max_sge;
    let mut g = srq.inner.lock();
    for wr in wrs {
        let posted = (|| {
            let Ring::Kernel(k) = &mut g.ring else {
                return Err(EINVAL);
            };
            let sges = wr.sges()?;
            if sges.len() > max_sge as usize {
                return Err(EINVAL);
            }
            if k.count() >= k.depth() {
                return Err(ENOMEM);
            }
            let ticket = srq.issue(&wr)?;
            let slot = k.slot(k.tail);
            let out = k.segs_mut(slot, max_sge);
            let mut len: u32 = 0;
            let filled = sges.iter().zip(out.iter_mut()).try_for_each(|(s, o)| {
                if s.lkey() != crate::qp::LOCAL_DMA_LKEY {
                    return Err(EINVAL);
                }
                *o = Seg::Kernel(KernelBuf::from_sge(&ticket, s)?);
                len = len.checked_add(s.length()).ok_or(EINVAL)?;
                Ok(())
            });
            if let Err(e) = filled {
                // The free slot keeps no buffer of the refused request.
                out.iter_mut().for_each(|s| *s = Seg::default());
                return Err(e);
            }
            k.entries[slot] = Posted {
                wr_id: wr.wr_id(),
                num_sge: sges.len() as u32,
                len,
            };
            k.tickets[slot] = Some(ticket);
            k.tail = k.tail.wrapping_add(1);
            Ok(())
        })();
        if let Err(error) = posted {
            return Err(PostError {
                error,
                bad_wr: Some(wr),
            });
        }
    }
    Ok(())
}
