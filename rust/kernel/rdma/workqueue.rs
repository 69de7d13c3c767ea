// SPDX-License-Identifier: GPL-2.0

//! A work queue owned by a driver (`alloc_workqueue`/`destroy_workqueue`).
//!
//! C header: [`include/linux/workqueue.h`](srctree/include/linux/workqueue.h)
//!
//! Work items of a loadable module must not run after the module's code is gone. Queueing them
//! on a queue the module owns and destroys at unload (which drains it) gives that guarantee;
//! the shared system queues do not.

use crate::{
    bindings,
    prelude::*,
    workqueue::Queue, //
};
use core::ptr::NonNull;

/// An owned, unbound work queue with a rescuer (`WQ_UNBOUND | WQ_MEM_RECLAIM`, plus
/// `WQ_HIGHPRI` if asked), destroyed (after running every queued item) when dropped.
///
/// # Invariants
///
/// `wq` is a live workqueue this value owns.
pub struct OwnedQueue {
    wq: NonNull<bindings::workqueue_struct>,
}

// SAFETY: A workqueue may be used and destroyed from any thread.
unsafe impl Send for OwnedQueue {}
// SAFETY: Queueing is thread-safe.
unsafe impl Sync for OwnedQueue {}

impl OwnedQueue {
    /// Allocates a queue named `name`. Process context, may sleep.
    pub fn new(name: &'static CStr) -> Result<Self> {
        Self::with_priority(name, false)
    }

    /// Allocates a queue named `name` whose workers run at high priority (`WQ_HIGHPRI`: the
    /// kernel's nice -20 worker pools) if `high` is set. Process context, may sleep.
    pub fn with_priority(name: &'static CStr, high: bool) -> Result<Self> {
        let mut flags = bindings::wq_flags_WQ_UNBOUND | bindings::wq_flags_WQ_MEM_RECLAIM;
        if high {
            flags |= bindings::wq_flags_WQ_HIGHPRI;
        }
        // SAFETY: The format is "%s" with one NUL-terminated string argument, `name`, which
        // lives for the queue's lifetime (`'static`).
        let wq = unsafe {
            bindings::alloc_workqueue_noprof(c"%s".as_char_ptr(), flags, 0, name.as_char_ptr())
        };
        let wq = NonNull::new(wq).ok_or(ENOMEM)?;
        // INVARIANT: Allocated above, owned by us.
        Ok(Self { wq })
    }
}

impl core::ops::Deref for OwnedQueue {
    type Target = Queue;

    fn deref(&self) -> &Queue {
        // SAFETY: The queue is live for as long as `self` (type invariant).
        unsafe { Queue::from_raw(self.wq.as_ptr()) }
    }
}

impl Drop for OwnedQueue {
    fn drop(&mut self) {
        // SAFETY: We own the queue (type invariant); `destroy_workqueue` drains it first.
        unsafe { bindings::destroy_workqueue(self.wq.as_ptr()) };
    }
}
