// SPDX-License-Identifier: GPL-2.0

//! Completion queues (`struct ib_cq`) and work completions (`struct ib_wc`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! A [`Cq<T>`] is allocated by ib_core (`ops.size_ib_cq`) and holds the C `struct ib_cq`
//! followed by [`Driver::CqData`], initialised in place from [`Driver::create_cq`] and dropped
//! in `destroy_cq`. The driver keeps its completions in its data and copies them out in
//! [`Driver::poll_cq`] through a [`WcArray`]; [`Cq::notify_completion`] calls the consumer's
//! completion handler.
//!
//! Each CQ also has one high-resolution timer, for a driver that holds completion events back
//! (completion-event moderation, [`Driver::modify_cq`]): [`Cq::start_timer`] arms it and
//! [`Driver::cq_timer`] runs when it expires. The abstraction sets it up with the CQ and
//! cancels it (waiting for a callback in progress) in `destroy_cq` before the data is dropped.

use super::{
    device::{
        Adapter,
        Device,
        Driver, //
    },
    pd::Origin,
    qp::QpId,
    ticket::Ticket,
    udata::Udata,
};
use crate::{
    bindings,
    error::from_result,
    prelude::*,
    types::Opaque, //
};
use core::{
    marker::PhantomData,
    ops::Deref, //
};

/// A completion queue: the C `struct ib_cq` followed by the driver's data.
///
/// # Invariants
///
/// - Allocated by ib_core with `size_ib_cq == size_of::<Self>()`; `ibcq.device` is a
///   [`Device<T>`] whose data outlives the CQ.
/// - `data` is initialised for as long as a `&Cq<T>` exists: between a successful
///   `create_cq` and `destroy_cq`.
/// - `timer` is set up (`hrtimer_setup`, soft mode, callback `Adapter::cq_timer_callback`)
///   before `data` is initialised, and is not pending nor running once `destroy_cq` has
///   cancelled it, before `data` is dropped.
#[repr(C)]
pub struct Cq<T: Driver> {
    ibcq: Opaque<bindings::ib_cq>,
    timer: Opaque<bindings::hrtimer>,
    data: T::CqData,
}

// SAFETY: `struct ib_cq` may be used from any thread; `T::CqData` is `Send`.
unsafe impl<T: Driver> Send for Cq<T> {}
// SAFETY: `&Cq<T>` methods only read fields fixed while the CQ exists or call ib_core functions
// that may run concurrently; `T::CqData` is `Sync`.
unsafe impl<T: Driver> Sync for Cq<T> {}

impl<T: Driver> Deref for Cq<T> {
    type Target = T::CqData;

    fn deref(&self) -> &T::CqData {
        &self.data
    }
}

/// The CQ event a driver may report (`enum ib_event_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CqEvent {
    /// `IB_EVENT_CQ_ERR`: the CQ overflowed or failed; it is unusable.
    Error,
}

impl<T: Driver> Cq<T> {
    /// # Safety
    ///
    /// `ptr` points to the `ib_cq` of a `Cq<T>` whose data is initialised and stays so for `'a`.
    pub(super) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_cq) -> &'a Self {
        // SAFETY: `ibcq` is the first field of the `repr(C)` `Self`; the caller guarantees the
        // rest.
        unsafe { &*crate::container_of!(Opaque::cast_from(ptr), Self, ibcq) }
    }

    fn as_raw(&self) -> *mut bindings::ib_cq {
        self.ibcq.get()
    }

    /// The device of the CQ.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: `device` is set before `create_cq` and never changes; the device's data
        // outlives the CQ (type invariant).
        unsafe { Device::from_raw((*self.as_raw()).device) }
    }

    /// Arms the CQ's timer to expire `delay_ns` nanoseconds from now (on `CLOCK_MONOTONIC`);
    /// re-arms it if it is pending. [`Driver::cq_timer`] then runs once, in softirq context.
    /// Any context, does not sleep.
    pub fn start_timer(&self, delay_ns: u64) {
        let delay = i64::try_from(delay_ns).unwrap_or(i64::MAX);
        // SAFETY: The timer was set up before the data existed (type invariant) and the CQ is
        // alive while `&self` is; `destroy_cq` cancels it before the memory can go.
        unsafe {
            bindings::hrtimer_start_range_ns(
                self.timer.get(),
                delay,
                0,
                bindings::hrtimer_mode_HRTIMER_MODE_REL_SOFT,
            )
        };
    }

    /// Whether a kernel consumer or a user process owns the CQ.
    pub fn origin(&self) -> Origin {
        // SAFETY: `uobject` is set before `create_cq` and never changes.
        if unsafe { (*self.as_raw()).uobject }.is_null() {
            Origin::Kernel
        } else {
            Origin::User
        }
    }

    /// Calls the consumer's completion handler (`ib_cq::comp_handler`), if it has one.
    ///
    /// Call it when a completion arrives on an armed CQ (see [`Driver::req_notify_cq`]), once
    /// per arming. Any context: the handlers ib_core installs only schedule work or softirq
    /// polling, but older consumers poll the CQ from the handler, so never call it with a lock
    /// held that [`Driver::poll_cq`] takes. Do not call it concurrently for one CQ.
    pub fn notify_completion(&self) {
        let cq = self.as_raw();
        // SAFETY: The CQ is valid; ib_core sets `comp_handler` and `cq_context` when creating
        // the CQ (kernel CQs: right after `create_cq` returns, before the CQ is used) and they
        // stay valid until `destroy_cq`, which cannot have run while `&self` exists.
        unsafe {
            if let Some(handler) = (*cq).comp_handler {
                handler(cq, (*cq).cq_context);
            }
        }
    }

    /// Reports an asynchronous CQ event to the consumer (`ib_cq::event_handler`).
    ///
    /// Process context only (consumers expect their event handlers to run from a workqueue).
    pub fn dispatch_event(&self, event: CqEvent) {
        let cq = self.as_raw();
        let raw = match event {
            CqEvent::Error => bindings::ib_event_type_IB_EVENT_CQ_ERR,
        };
        // SAFETY: The CQ is valid; `event_handler` and `cq_context` are set by ib_core at
        // creation; the event lives on the stack for the synchronous call.
        unsafe {
            if let Some(handler) = (*cq).event_handler {
                let mut ev: bindings::ib_event = pin_init::zeroed();
                ev.device = (*cq).device;
                ev.element.cq = cq;
                ev.event = raw;
                handler(&mut ev, (*cq).cq_context);
            }
        }
    }
}

impl<T: Driver> Cq<T> {
    /// Reports an asynchronous event on a **user** CQ from any context, including softirq
    /// with locks held: uverbs' CQ event handler only queues the event for the process under
    /// an IRQ-safe spinlock. Returns `false` and does nothing for a kernel CQ (use
    /// [`Cq::dispatch_event`] from process context there).
    pub fn dispatch_user_event(&self, event: CqEvent) -> bool {
        if self.origin() != Origin::User {
            return false;
        }
        self.dispatch_event(event);
        true
    }

    /// Resizes hook support: the new size reported to ib_core (`ib_cq::cqe`).
    pub fn set_cqe(&self, cqe: u32) -> Result {
        let cqe = c_int::try_from(cqe).map_err(|_| EINVAL)?;
        // SAFETY: ib_core reads `cqe` only in the uverbs command that resizes (which holds the
        // CQ's uobject exclusively while the driver's `resize_cq` runs) and in queries.
        unsafe { (*self.as_raw()).cqe = cqe };
        Ok(())
    }
}

/// A completion queue being created, handed to [`Driver::create_cq`].
///
/// # Invariants
///
/// `cq` is the zeroed `Cq<T>` allocation ib_core is creating, with `device` set; its data is
/// not initialised.
pub struct NewCq<'a, T: Driver> {
    cq: *mut bindings::ib_cq,
    attr: &'a bindings::ib_cq_init_attr,
    udata: Option<Udata<'a>>,
    _p: PhantomData<T>,
}

impl<'a, T: Driver> NewCq<'a, T> {
    /// The device of the new CQ.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: `device` is set by ib_core before `create_cq`; the device is live.
        unsafe { Device::from_raw((*self.cq).device) }
    }

    /// Who creates the CQ.
    pub fn origin(&self) -> Origin {
        if self.udata.is_some() {
            Origin::User
        } else {
            Origin::Kernel
        }
    }

    /// The driver-specific data of a user CQ's system call: the driver reads its request (or
    /// checks there is none) and writes its response (e.g. the ring's `mmap` information).
    pub fn udata(&self) -> Option<&Udata<'a>> {
        self.udata.as_ref()
    }

    /// The number of entries asked for (at least 1 for kernel CQs).
    pub fn requested_cqe(&self) -> u32 {
        self.attr.cqe
    }

    /// The completion vector asked for.
    pub fn comp_vector(&self) -> u32 {
        self.attr.comp_vector
    }

    /// The creation flags (`IB_UVERBS_CQ_FLAGS_*`), 0 for the usual CQ.
    pub fn flags(&self) -> u32 {
        self.attr.flags
    }

    /// Reports the actual number of entries (`ib_cq::cqe`), if larger than requested.
    pub fn set_cqe(&mut self, cqe: u32) -> Result {
        let cqe = c_int::try_from(cqe).map_err(|_| EINVAL)?;
        // SAFETY: The allocation is ours until `create_cq` returns (type invariant).
        unsafe { (*self.cq).cqe = cqe };
        Ok(())
    }
}

/// How a CQ is armed (`enum ib_cq_notify_flags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CqArm {
    /// `IB_CQ_NEXT_COMP`: notify on the next completion.
    NextComp,
    /// `IB_CQ_SOLICITED`: notify on the next solicited completion (or error).
    Solicited,
}

/// The arguments of [`Driver::req_notify_cq`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqNotify {
    /// Which completion triggers the handler.
    pub arm: CqArm,
    /// `IB_CQ_REPORT_MISSED_EVENTS`: return `true` if the CQ already holds completions.
    pub report_missed: bool,
}

/// Work completion status (`enum ib_wc_status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum WcStatus {
    /// Success.
    Success = bindings::ib_wc_status_IB_WC_SUCCESS,
    /// Local length error.
    LocLenErr = bindings::ib_wc_status_IB_WC_LOC_LEN_ERR,
    /// Local QP operation error.
    LocQpOpErr = bindings::ib_wc_status_IB_WC_LOC_QP_OP_ERR,
    /// Local protection error.
    LocProtErr = bindings::ib_wc_status_IB_WC_LOC_PROT_ERR,
    /// Flushed: the QP is in the error state.
    WrFlushErr = bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR,
    /// Memory window bind error.
    MwBindErr = bindings::ib_wc_status_IB_WC_MW_BIND_ERR,
    /// Bad response.
    BadRespErr = bindings::ib_wc_status_IB_WC_BAD_RESP_ERR,
    /// Local access error.
    LocAccessErr = bindings::ib_wc_status_IB_WC_LOC_ACCESS_ERR,
    /// Remote invalid request.
    RemInvReqErr = bindings::ib_wc_status_IB_WC_REM_INV_REQ_ERR,
    /// Remote access error.
    RemAccessErr = bindings::ib_wc_status_IB_WC_REM_ACCESS_ERR,
    /// Remote operational error.
    RemOpErr = bindings::ib_wc_status_IB_WC_REM_OP_ERR,
    /// Transport retry counter exceeded.
    RetryExcErr = bindings::ib_wc_status_IB_WC_RETRY_EXC_ERR,
    /// RNR retry counter exceeded.
    RnrRetryExcErr = bindings::ib_wc_status_IB_WC_RNR_RETRY_EXC_ERR,
    /// Remote invalid RD request.
    RemInvRdReqErr = bindings::ib_wc_status_IB_WC_REM_INV_RD_REQ_ERR,
    /// Remote aborted.
    RemAbortErr = bindings::ib_wc_status_IB_WC_REM_ABORT_ERR,
    /// Fatal error.
    FatalErr = bindings::ib_wc_status_IB_WC_FATAL_ERR,
    /// Response timeout.
    RespTimeoutErr = bindings::ib_wc_status_IB_WC_RESP_TIMEOUT_ERR,
    /// General error.
    GeneralErr = bindings::ib_wc_status_IB_WC_GENERAL_ERR,
}

/// Work completion opcode (`enum ib_wc_opcode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum WcOpcode {
    /// A send (SEND, SEND with immediate or invalidate).
    Send = bindings::ib_wc_opcode_IB_WC_SEND,
    /// An RDMA WRITE (with or without immediate).
    RdmaWrite = bindings::ib_wc_opcode_IB_WC_RDMA_WRITE,
    /// An RDMA READ.
    RdmaRead = bindings::ib_wc_opcode_IB_WC_RDMA_READ,
    /// A compare-and-swap.
    CompSwap = bindings::ib_wc_opcode_IB_WC_COMP_SWAP,
    /// A fetch-and-add.
    FetchAdd = bindings::ib_wc_opcode_IB_WC_FETCH_ADD,
    /// An ATOMIC WRITE.
    AtomicWrite = bindings::ib_wc_opcode_IB_WC_ATOMIC_WRITE,
    /// RDMA FLUSH.
    Flush = bindings::ib_wc_opcode_IB_WC_FLUSH,
    /// A memory window bind.
    BindMw = bindings::ib_wc_opcode_IB_WC_BIND_MW,
    /// A local invalidate.
    LocalInv = bindings::ib_wc_opcode_IB_WC_LOCAL_INV,
    /// A fast memory registration.
    RegMr = bindings::ib_wc_opcode_IB_WC_REG_MR,
    /// A received SEND.
    Recv = bindings::ib_wc_opcode_IB_WC_RECV,
    /// A received RDMA WRITE with immediate data.
    RecvRdmaWithImm = bindings::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM,
}

/// Work completion flags (`enum ib_wc_flags`) other than those [`WorkCompletion`] derives
/// (`IB_WC_WITH_IMM`, `IB_WC_WITH_INVALIDATE`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WcFlags(u32);

impl WcFlags {
    /// None.
    pub const NONE: Self = Self(0);
    /// `IB_WC_GRH`: the first 40 bytes of the receive buffer hold a GRH (UD, GSI).
    pub const GRH: Self = Self(bindings::ib_wc_flags_IB_WC_GRH);
    /// `IB_WC_WITH_SMAC`: `smac` is valid.
    pub const WITH_SMAC: Self = Self(bindings::ib_wc_flags_IB_WC_WITH_SMAC);
    /// `IB_WC_WITH_VLAN`: `vlan_id` is valid.
    pub const WITH_VLAN: Self = Self(bindings::ib_wc_flags_IB_WC_WITH_VLAN);
    /// `IB_WC_WITH_NETWORK_HDR_TYPE`: `network_hdr_type` is valid.
    pub const WITH_NETWORK_HDR_TYPE: Self = Self(bindings::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE);
}

impl WcFlags {
    /// Whether every flag of `other` is set in `self`.
    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for WcFlags {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// A work completion as the driver keeps it; [`WcArray::push`] writes it into an `ib_wc`.
///
/// A completion of a kernel consumer's request carries the request's [`Ticket`]
/// ([`WorkCompletion::with_ticket`]): pushing it retires the request, so its buffers are out of
/// the driver's reach before the consumer can read the completion.
#[derive(Debug)]
pub struct WorkCompletion {
    /// The work request's `wr_id` (for kernel consumers often a `struct ib_cqe` pointer,
    /// returned as is).
    pub wr_id: u64,
    /// Status.
    pub status: WcStatus,
    /// Opcode.
    pub opcode: WcOpcode,
    /// Vendor error syndrome.
    pub vendor_err: u32,
    /// Bytes transferred (receives: including the 40-byte GRH area on UD/GSI).
    pub byte_len: u32,
    /// The QP the work request belonged to.
    pub qp: QpId,
    /// Immediate data in host order (sets `IB_WC_WITH_IMM`).
    pub imm: Option<u32>,
    /// R_Key invalidated by a SEND with invalidate (sets `IB_WC_WITH_INVALIDATE`); exclusive
    /// with `imm`, which wins.
    pub invalidate_rkey: Option<u32>,
    /// Source QP (UD, GSI).
    pub src_qp: u32,
    /// Source LID (0 on RoCE).
    pub slid: u32,
    /// Other flags.
    pub flags: WcFlags,
    /// P_Key index (GSI).
    pub pkey_index: u16,
    /// Service level.
    pub sl: u8,
    /// Source MAC (with [`WcFlags::WITH_SMAC`]).
    pub smac: [u8; 6],
    /// VLAN id (with [`WcFlags::WITH_VLAN`]).
    pub vlan_id: u16,
    /// `RDMA_NETWORK_*` (with [`WcFlags::WITH_NETWORK_HDR_TYPE`]).
    pub network_hdr_type: u8,
    /// Port number (only for directed-route SMPs on switches).
    pub port_num: u32,
    /// The request's ticket (kernel consumers).
    ticket: Option<Ticket>,
}

impl WorkCompletion {
    /// A completion of `wr_id` on `qp` with everything else zero.
    pub const fn new(wr_id: u64, status: WcStatus, opcode: WcOpcode, qp: QpId) -> Self {
        Self {
            wr_id,
            status,
            opcode,
            vendor_err: 0,
            byte_len: 0,
            qp,
            imm: None,
            invalidate_rkey: None,
            src_qp: 0,
            slid: 0,
            flags: WcFlags::NONE,
            pkey_index: 0,
            sl: 0,
            smac: [0; 6],
            vlan_id: 0,
            network_hdr_type: 0,
            port_num: 0,
            ticket: None,
        }
    }

    /// The completion of the kernel consumer's request of `ticket`: its `wr_id` is the
    /// ticket's.
    pub fn with_ticket(mut self, ticket: Ticket) -> Self {
        self.wr_id = ticket.wr_id();
        self.ticket = Some(ticket);
        self
    }
}

/// Bytes of `struct ib_uverbs_wc`, a completion as uverbs hands it to user space.
pub const UVERBS_WC_LEN: usize = size_of::<bindings::ib_uverbs_wc>();

impl WorkCompletion {
    /// The completion as `struct ib_uverbs_wc` of QP number `qp_num`, in the byte order of
    /// the running kernel (user rings, e.g. librxe's CQ, hold these): what uverbs' `poll_cq`
    /// copies out for an `ib_wc` (immediate data in network order, `slid` and `port_num`
    /// truncated to the user ABI's widths).
    pub fn to_uverbs(&self, qp_num: u32) -> [u8; UVERBS_WC_LEN] {
        use core::mem::offset_of;
        type W = bindings::ib_uverbs_wc;
        let mut b = [0u8; UVERBS_WC_LEN];
        let mut put = |off: usize, v: &[u8]| b[off..off + v.len()].copy_from_slice(v);
        let mut flags = self.flags.0;
        let mut ex = 0u32;
        if let Some(imm) = self.imm {
            ex = imm.to_be();
            flags |= bindings::ib_wc_flags_IB_WC_WITH_IMM;
        } else if let Some(rkey) = self.invalidate_rkey {
            ex = rkey;
            flags |= bindings::ib_wc_flags_IB_WC_WITH_INVALIDATE;
        }
        put(offset_of!(W, wr_id), &self.wr_id.to_ne_bytes());
        put(offset_of!(W, status), &(self.status as u32).to_ne_bytes());
        put(offset_of!(W, opcode), &(self.opcode as u32).to_ne_bytes());
        put(offset_of!(W, vendor_err), &self.vendor_err.to_ne_bytes());
        put(offset_of!(W, byte_len), &self.byte_len.to_ne_bytes());
        put(offset_of!(W, ex), &ex.to_ne_bytes());
        put(offset_of!(W, qp_num), &qp_num.to_ne_bytes());
        put(offset_of!(W, src_qp), &self.src_qp.to_ne_bytes());
        put(offset_of!(W, wc_flags), &flags.to_ne_bytes());
        put(offset_of!(W, pkey_index), &self.pkey_index.to_ne_bytes());
        put(offset_of!(W, slid), &(self.slid as u16).to_ne_bytes());
        put(offset_of!(W, sl), &[self.sl]);
        put(offset_of!(W, port_num), &[self.port_num as u8]);
        b
    }
}

/// The consumer's array of `struct ib_wc` that [`Driver::poll_cq`] fills.
///
/// # Invariants
///
/// `wc` is valid for writes of `cap` entries for `'a`; entries below `len` were written.
pub struct WcArray<'a> {
    wc: *mut bindings::ib_wc,
    cap: usize,
    len: usize,
    /// The CQ is a kernel consumer's: completions carry tickets.
    kernel: bool,
    _p: PhantomData<&'a mut [bindings::ib_wc]>,
}

impl WcArray<'_> {
    /// Room in the array, in entries.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Entries written so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no entry was written yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the array is full.
    pub fn is_full(&self) -> bool {
        self.len == self.cap
    }

    /// Appends a completion, or gives it back if the array is full.
    ///
    /// On a kernel consumer's CQ the completion must carry its request's ticket
    /// ([`WorkCompletion::with_ticket`]), which is retired before the entry is written: the
    /// request's buffers are out of the driver's reach before the consumer can see it. A
    /// completion without one names no request the abstraction knows of: it is dropped
    /// (written nowhere) with a warning.
    pub fn push(&mut self, c: WorkCompletion) -> Result<(), WorkCompletion> {
        if self.is_full() {
            return Err(c);
        }
        let wr_id = match (&c.ticket, self.kernel) {
            (Some(t), _) => {
                if let (None, Some(rkey)) = (c.imm, c.invalidate_rkey) {
                    t.invalidate(rkey);
                }
                t.retire();
                t.wr_id()
            }
            (None, false) => c.wr_id,
            (None, true) => {
                crate::pr_warn_once!("rdma: kernel completion without a ticket dropped\n");
                return Ok(());
            }
        };
        let mut wc: bindings::ib_wc = pin_init::zeroed();
        wc.__bindgen_anon_1.wr_id = wr_id;
        wc.status = c.status as u32;
        wc.opcode = c.opcode as u32;
        wc.vendor_err = c.vendor_err;
        wc.byte_len = c.byte_len;
        wc.qp = c.qp.0;
        let mut flags = c.flags.0;
        if let Some(imm) = c.imm {
            wc.ex.imm_data = imm.to_be();
            flags |= bindings::ib_wc_flags_IB_WC_WITH_IMM;
        } else if let Some(rkey) = c.invalidate_rkey {
            wc.ex.invalidate_rkey = rkey;
            flags |= bindings::ib_wc_flags_IB_WC_WITH_INVALIDATE;
        }
        wc.src_qp = c.src_qp;
        wc.slid = c.slid;
        wc.wc_flags = flags as c_int;
        wc.pkey_index = c.pkey_index;
        wc.sl = c.sl;
        wc.port_num = c.port_num;
        wc.smac = c.smac;
        wc.vlan_id = c.vlan_id;
        wc.network_hdr_type = c.network_hdr_type;
        // SAFETY: `len < cap`, so the entry is within the consumer's array (type invariant).
        unsafe { self.wc.add(self.len).write(wc) };
        self.len += 1;
        Ok(())
    }
}

impl<T: Driver> Adapter<T> {
    /// # Safety
    ///
    /// `ibcq` is a zeroed allocation of `size_ib_cq` bytes whose `device` is a live device of
    /// this driver; `attr` is valid; `attrs` is null or the system call's attribute bundle.
    pub(super) unsafe extern "C" fn create_cq_callback(
        ibcq: *mut bindings::ib_cq,
        attr: *const bindings::ib_cq_init_attr,
        attrs: *mut bindings::uverbs_attr_bundle,
    ) -> c_int {
        from_result(|| {
            let udata = if attrs.is_null() {
                core::ptr::null_mut()
            } else {
                // SAFETY: A non-null bundle is the system call's valid one.
                unsafe { &raw mut (*attrs).__bindgen_anon_1.__bindgen_anon_1.driver_udata }
            };
            // SAFETY: `udata` is null or the system call's valid udata, as above, for the call.
            let udata = unsafe { Udata::from_raw(udata) };
            // SAFETY: `attr` is valid for the call.
            let attr = unsafe { &*attr };
            let cqe = c_int::try_from(attr.cqe).map_err(|_| EINVAL)?;
            // SAFETY: The allocation is ours until we return.
            unsafe { (*ibcq).cqe = cqe };
            // INVARIANT: `ibcq` is the allocation being created; its data is uninitialised.
            let mut new = NewCq::<T> {
                cq: ibcq,
                attr,
                udata,
                _p: PhantomData,
            };
            let init = T::create_cq(&mut new)?;
            // SAFETY: The allocation is a `Cq<T>` whose first field is `ibcq`; the timer and
            // `data` are uninitialised until now and stay in place until `destroy_cq`. The
            // timer is set up first (nothing can start it before the data exists); if the data
            // fails to initialise, it was never started and the memory is freed as is.
            unsafe {
                let cq = crate::container_of!(Opaque::cast_from(ibcq), Cq<T>, ibcq).cast_mut();
                bindings::hrtimer_setup(
                    Opaque::cast_into(&raw const (*cq).timer),
                    Some(Self::cq_timer_callback),
                    bindings::CLOCK_MONOTONIC as i32,
                    bindings::hrtimer_mode_HRTIMER_MODE_REL_SOFT,
                );
                pin_init::raw_try_init(&raw mut (*cq).data, init)?;
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibcq` was set up by a successful `create_cq_callback` and is not used afterwards.
    pub(super) unsafe extern "C" fn destroy_cq_callback(
        ibcq: *mut bindings::ib_cq,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: The data is initialised (function requirement); ib_core frees the memory
        // after this call without touching the driver part again. The timer is cancelled (a
        // callback in progress finishes first, and one that re-armed it is cancelled too)
        // before the data its callback reads is dropped.
        unsafe {
            let cq = Cq::<T>::from_raw(ibcq);
            T::destroy_cq(cq);
            bindings::hrtimer_cancel(cq.timer.get());
            let cq = crate::container_of!(Opaque::cast_from(ibcq), Cq<T>, ibcq).cast_mut();
            core::ptr::drop_in_place(&raw mut (*cq).data);
        }
        0
    }

    /// The CQ timer's expiry (soft mode: softirq context).
    ///
    /// # Safety
    ///
    /// `timer` is the `timer` of a `Cq<T>` set up by `create_cq_callback` whose data is
    /// initialised.
    unsafe extern "C" fn cq_timer_callback(
        timer: *mut bindings::hrtimer,
    ) -> bindings::hrtimer_restart {
        // SAFETY: `timer` is the `timer` field of a `Cq<T>` (function requirement); the timer
        // only runs between a `start_timer`, which needs a `&Cq<T>` (so the data is
        // initialised), and `destroy_cq`, which cancels it before the data is dropped.
        let cq = unsafe { &*crate::container_of!(Opaque::cast_from(timer), Cq<T>, timer) };
        T::cq_timer(cq);
        bindings::hrtimer_restart::HRTIMER_NORESTART
    }

    /// # Safety
    ///
    /// `ibcq` is a CQ of this driver set up by `create_cq_callback` and not destroyed.
    pub(super) unsafe extern "C" fn modify_cq_callback(
        ibcq: *mut bindings::ib_cq,
        cq_count: u16,
        cq_period: u16,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The CQ is alive for the call (function requirement).
            let cq = unsafe { Cq::<T>::from_raw(ibcq) };
            T::modify_cq(cq, cq_count, cq_period)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibcq` is a CQ of this driver set up by `create_cq_callback` and not destroyed; `wc`
    /// is valid for `num_entries` writes.
    pub(super) unsafe extern "C" fn poll_cq_callback(
        ibcq: *mut bindings::ib_cq,
        num_entries: c_int,
        wc: *mut bindings::ib_wc,
    ) -> c_int {
        from_result(|| {
            let cap = usize::try_from(num_entries).map_err(|_| EINVAL)?;
            if cap > 0 && wc.is_null() {
                return Err(EINVAL);
            }
            // SAFETY: The CQ is alive for the call (function requirement).
            let cq = unsafe { Cq::<T>::from_raw(ibcq) };
            // INVARIANT: `wc` holds `cap` writable entries for the call.
            let mut array = WcArray {
                wc,
                cap,
                len: 0,
                kernel: cq.origin() == Origin::Kernel,
                _p: PhantomData,
            };
            T::poll_cq(cq, &mut array)?;
            // `len <= cap <= c_int::MAX`.
            Ok(array.len as c_int)
        })
    }

    /// # Safety
    ///
    /// `ibcq` is a user CQ of this driver set up by `create_cq_callback` and not destroyed;
    /// `udata` is the system call's.
    pub(super) unsafe extern "C" fn resize_user_cq_callback(
        ibcq: *mut bindings::ib_cq,
        cqe: c_uint,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `udata` is the system call's valid udata for the call.
            let udata = unsafe { Udata::from_raw(udata) }.ok_or(EINVAL)?;
            // SAFETY: The CQ is alive for the call (function requirement).
            let cq = unsafe { Cq::<T>::from_raw(ibcq) };
            T::resize_user_cq(cq, cqe, &udata)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibcq` is a CQ of this driver set up by `create_cq_callback` and not destroyed.
    pub(super) unsafe extern "C" fn req_notify_cq_callback(
        ibcq: *mut bindings::ib_cq,
        flags: bindings::ib_cq_notify_flags,
    ) -> c_int {
        from_result(|| {
            use bindings::ib_cq_notify_flags as F;
            let arm = match flags.0 & F::IB_CQ_SOLICITED_MASK.0 {
                x if x == F::IB_CQ_NEXT_COMP.0 => CqArm::NextComp,
                x if x == F::IB_CQ_SOLICITED.0 => CqArm::Solicited,
                _ => return Err(EINVAL),
            };
            let notify = CqNotify {
                arm,
                report_missed: flags.0 & F::IB_CQ_REPORT_MISSED_EVENTS.0 != 0,
            };
            // SAFETY: The CQ is alive for the call (function requirement).
            let cq = unsafe { Cq::<T>::from_raw(ibcq) };
            Ok(c_int::from(T::req_notify_cq(cq, notify)?))
        })
    }
}
