// SPDX-License-Identifier: GPL-2.0

//! Tracepoints of the MetaRoCE native transport.
//!
//! C header: [`include/trace/events/metaroce.h`](srctree/include/trace/events/metaroce.h)
//!
//! The events are defined in vmlinux (`drivers/infiniband/sw/metaroce/metaroce_trace.c`,
//! built with the abstractions) and reached here through safe functions taking the [`Device`]
//! they concern, so a driver needs no `unsafe` to emit them. Each function may be called in any
//! context, with or without IRQs disabled; a disabled event costs one static-key test.
//! [`path_enabled`] lets a caller skip gathering what only an enabled event would print.
//!
//! The events appear under `/sys/kernel/tracing/events/metaroce/`:
//! `metaroce_path` (one per path event: a loss found by a SACK gap, an RTO, an ECN echo, a
//! source-port change, a path state change) and `metaroce_rate_hint` (the fair-share rate a
//! receiver's ACKs give a connection changed).

use crate::{
    bindings,
    rdma::device::{Device, Driver},
    tracepoint::declare_trace,
};

declare_trace! {
    /// # Safety
    ///
    /// `ibdev` points to a valid `struct ib_device` for the duration of the call.
    // The C event's eight fields; the macro passes the arguments straight through to C.
    #[allow(clippy::too_many_arguments, clippy::macro_metavars_in_unsafe)]
    unsafe fn metaroce_path(
        ibdev: *const bindings::ib_device,
        conn: u32,
        path: u8,
        event: u8,
        count: u32,
        port: u16,
        cwnd: u32,
        srtt_us: u32,
    );
    /// # Safety
    ///
    /// `ibdev` points to a valid `struct ib_device` for the duration of the call.
    #[allow(clippy::macro_metavars_in_unsafe)]
    unsafe fn metaroce_rate_hint(ibdev: *const bindings::ib_device, conn: u32, old_kbps: u32, new_kbps: u32);
}

/// What happened to a path (the `metaroce_path` event's symbolic field; the values are the
/// header's `METAROCE_PATH_EVENTS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PathEvent {
    /// Transmissions found lost by a gap in the path's SACK bitmap.
    Loss = 0,
    /// Retransmission timeouts.
    Timeout = 1,
    /// ACKs whose ECN echo count grew (the network marked the path's packets).
    Ecn = 2,
    /// The path moved to another UDP source port.
    Repath = 3,
    /// The path carries data within its window again.
    Active = 4,
    /// The path is recovering after an RTO.
    Recovering = 5,
    /// The path failed (several RTOs in a row).
    Failed = 6,
}

/// One `metaroce_path` event.
#[derive(Clone, Copy, Debug)]
pub struct PathRecord {
    /// The connection's id.
    pub conn: u32,
    /// The path's index within the connection.
    pub path: u8,
    /// What happened.
    pub event: PathEvent,
    /// How many times it happened since the previous event of this kind on this path.
    pub count: u32,
    /// The path's UDP source port (after a [`PathEvent::Repath`]: the new one).
    pub port: u16,
    /// The path's congestion window in bytes.
    pub cwnd: u32,
    /// The path's smoothed RTT in microseconds.
    pub srtt_us: u32,
}

/// Whether the `metaroce_path` event is enabled (a caller may skip gathering records if not).
pub fn path_enabled() -> bool {
    #[cfg(CONFIG_TRACEPOINTS)]
    {
        // SAFETY: `__tracepoint_metaroce_path` is a tracepoint defined by C, whose static key
        // may always be queried.
        unsafe {
            crate::jump_label::static_branch_unlikely!(
                bindings::__tracepoint_metaroce_path,
                bindings::tracepoint,
                key
            )
        }
    }
    #[cfg(not(CONFIG_TRACEPOINTS))]
    {
        false
    }
}

/// Emits a `metaroce_path` event for `dev`.
pub fn path<T: Driver>(dev: &Device<T>, r: &PathRecord) {
    // SAFETY: `dev` is a valid device for the duration of the call (by `Device`'s invariant).
    unsafe {
        metaroce_path(
            dev.as_raw(),
            r.conn,
            r.path,
            r.event as u8,
            r.count,
            r.port,
            r.cwnd,
            r.srtt_us,
        )
    };
}

/// Emits a `metaroce_rate_hint` event for `dev`: connection `conn`'s rate hint changed from
/// `old_kbps` to `new_kbps` (0: no hint).
pub fn rate_hint<T: Driver>(dev: &Device<T>, conn: u32, old_kbps: u32, new_kbps: u32) {
    // SAFETY: `dev` is a valid device for the duration of the call (by `Device`'s invariant).
    unsafe { metaroce_rate_hint(dev.as_raw(), conn, old_kbps, new_kbps) };
}
