// SPDX-License-Identifier: GPL-2.0

//! Retransmission and RNR timers of a MetaRoCE device.
//!
//! The protocol core keeps each QP's deadlines (local ACK timeout, RNR retry) as plain numbers on
//! the device clock; this module makes them fire. A QP with a pending deadline is listed once
//! (its `timer_listed` flag) on the device's timer list, and one delayed work item on the device's
//! own work queue ticks every [`TICK_MS`] while the list is not empty: it hands each listed QP to
//! [`qp::on_tick`], which runs the core's timer if the deadline passed and lets the transmit
//! worker send what the core wants to retransmit. Timers only schedule work; nothing is sent from
//! the tick itself.
//!
//! Deadlines are thus honoured to within one tick, which is far below the smallest local ACK
//! timeout a consumer normally sets (`timeout` 14 is 67 ms) and adds at most one tick to an RNR
//! wait. A QP that is destroyed leaves the list at the next tick (its destruction waits for
//! that, as it waits for the transmit worker). While the work is pending the list is not empty,
//! so a listed QP keeps the device, and with it the work queue, alive.

use crate::device::MetaRoceDriver;
use crate::qp;
use crate::xmit::{list_once, QpList};
use core::sync::atomic::Ordering;
use kernel::new_spinlock_irq;
use kernel::prelude::*;
use kernel::rdma::qp::Qp;
use kernel::sync::{Arc, SpinLockIrq};
use kernel::time::msecs_to_jiffies;
use kernel::workqueue::{impl_has_delayed_work, new_delayed_work, DelayedWork, WorkItem};

/// The timer granularity, in milliseconds.
pub(crate) const TICK_MS: u32 = 5;

/// The timer list and tick of one device.
#[pin_data]
pub(crate) struct Timers {
    #[pin]
    listed: SpinLockIrq<QpList>,
    #[pin]
    work: DelayedWork<Timers>,
}

impl_has_delayed_work! {
    impl HasDelayedWork<Self> for Timers { self.work }
}

impl Timers {
    /// An empty timer list. Process context.
    pub(crate) fn new() -> Result<Arc<Self>> {
        let list = QpList::new()?;
        Arc::pin_init(
            pin_init!(Self {
                listed <- new_spinlock_irq!(list, "metaroce_timers"),
                work <- new_delayed_work!("metaroce_timer"),
            }),
            GFP_KERNEL,
        )
    }
}

/// Lists `qp` for the tick (if it is not listed yet) and makes sure the tick is pending. Any
/// context: an IRQ-safe spinlock, no allocation, no sleeping.
pub(crate) fn arm(qp: &Qp<MetaRoceDriver>) {
    let dev = qp.device();
    let timers = dev.timers();
    if !list_once(&timers.listed, &qp.timer_listed, qp) {
        return;
    }
    // Already pending is fine: the tick visits every listed QP.
    let _ = dev
        .tx_queue()
        .enqueue_delayed(timers.clone(), msecs_to_jiffies(TICK_MS));
}

impl WorkItem for Timers {
    type Pointer = Arc<Timers>;

    fn run(this: Arc<Timers>) {
        // Only the QPs listed now: those armed again below wait for the next tick.
        let n = this.listed.lock().len();
        let mut reaped = false;
        for _ in 0..n {
            let Some(qp) = this.listed.lock().pop() else {
                break;
            };
            // Cleared first, so a deadline armed meanwhile lists the QP again.
            qp.timer_listed.store(false, Ordering::Release);
            let dev = qp.device();
            // Idle native connections go once in a while (`native::reap_now_and_then`).
            if !reaped && dev.native {
                crate::native::reap_now_and_then(dev);
                reaped = true;
            }
            // A destroyed QP (no longer published) is let go.
            let live = dev
                .lookup_qp(qp.qp_num())
                .is_some_and(|q| core::ptr::eq(&*q, &*qp));
            if live && qp::on_tick(&qp) {
                arm(&qp);
            }
        }
    }
}
