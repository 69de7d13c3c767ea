// SPDX-License-Identifier: GPL-2.0

//! Kernel queue pairs of a MetaRoCE device: the verbs state machine, the send and receive
//! queues, and the glue between them and the protocol core's transport state machines.
//!
//! Data flows one way each: `post_send` validates a work request, hands it to the core's
//! requester ([`Engine`]) and schedules the QP on the device's transmit worker (`xmit.rs`),
//! which pulls packets from the core, copies their payload out of the consumer's buffers and
//! sends them. The receive path (`ns.rs`) hands each packet for the QP to [`receive`], which
//! lets the core decide where its payload goes and which work request completed, copies the
//! payload and queues the completions. Responses and acknowledgements the core produces on
//! receive leave through the same transmit worker.
//!
//! Kernel consumers address their buffers by kernel virtual address under the device's local
//! DMA key ([`KernelBuf`], reachable only until the request's ticket is retired by its
//! completion, `kernel::rdma::ticket`; the queues are in `qp/ring.rs`); user QPs (driven by the
//! provider library through their rings, `uqueue.rs`, `uabi.rs`) by address and L_Key of their
//! registered memory regions (`mr.rs`). Remote operations (RDMA READ/WRITE/atomics targeting a
//! QP) resolve R_Keys of user memory regions; kernel DMA
//! MRs are not in that table, so a remote operation on kernel memory gets a remote access NAK.
//! Whenever the core of an RC QP holds a deadline (local ACK timeout, RNR retry), the QP is on
//! the device's timer list (`timer.rs`), whose tick runs the core's timers ([`on_tick`]);
//! datagram QPs need none.

use crate::device::MetaRoceDev;
use crate::device::{Counter, MetaRoceDriver, PORT};
use crate::mr::KeyKind;
use crate::native::{self, Peer};
use crate::proto::conn::{
    Completion as NativeCompletion, MrRef, NakCode, Place as NativePlace, Request as NativeRequest,
    Response as NativeResponse, SendStatus,
};
use crate::proto::ext::NakCode as RoceNak;
use crate::proto::mrc_wire::{DataHdr, MrcOp};
use crate::proto::opcode::Transport as Service;
use crate::proto::packet::Packet;
use crate::proto::packet::{self, PayloadRef, Pmtu, TxDesc};
use crate::proto::psn::Psn;
use crate::proto::qp::{self as pqp, QpConfig};
use crate::proto::resp::{AccessError, MemAccess, RecvQueue, GRH_LEN};
use crate::proto::stream::{MsgDesc, PostError as NativePostError};
use crate::proto::wr as pwr;
use crate::srq::Taken;
use crate::timer;
use crate::uqueue::{Role, UQueue};
use crate::verbs::{roce_av, CqPush, RoceAv};
use crate::xmit;
use core::sync::atomic::AtomicBool;
use kernel::new_spinlock_irq;
use kernel::prelude::*;
use kernel::rdma::cq::{Cq, CqEvent, WcFlags, WcOpcode, WcStatus, WorkCompletion};
use kernel::rdma::device::Mtu;
use kernel::rdma::mr::AccessFlags;
use kernel::rdma::pd::{Origin, PdId};
use kernel::rdma::qp::{
    modify_is_ok, NewQp, Qp, QpAttr, QpAttrMask, QpAttrOut, QpCap, QpEvent, QpInitAttrOut, QpState,
    QpType,
};
use kernel::rdma::srq::{Srq, SrqEvent};
use kernel::rdma::ticket::Ticket;
use kernel::rdma::wr::{KernelBuf, PostError, RecvWr, RecvWrList, SendOp, SendWr, SendWrList, Sge};
use kernel::sync::Arc;
use kernel::sync::SpinLockIrq;

mod create;
mod mem;
mod modify;
mod post;
mod ring;
mod rx;
mod stream;
mod tx;

pub(crate) use create::*;
use mem::*;
pub(crate) use mem::{Seg, SegRef};
pub(crate) use modify::*;
pub(crate) use post::*;
use ring::*;
pub(crate) use rx::*;
pub(crate) use stream::*;
pub(crate) use tx::*;

/// Most work requests per queue.
pub(crate) const MAX_QP_WR: u32 = 0x4000;
/// Most SGEs per work request.
pub(crate) const MAX_SGE: u32 = 32;
/// Most QPs per device (QP numbers below this).
pub(crate) const MAX_QP: u32 = 0x1000;
/// First QP number handed to RC/UC/UD QPs (0 and 1 are the special QPs).
pub(crate) const MIN_QPN: u32 = 16;
/// Largest message (the port's `max_msg_sz`, 8 MiB; rdma_rxe reports 2 GiB), enforced on
/// kernel and user posts alike.
pub(crate) const MAX_MSG_SZ: u64 = 0x80_0000;
/// The local key of kernel memory addressed by kernel virtual address: the device's
/// `local_dma_lkey` (ib_core's `IBK_LOCAL_DMA_LKEY`), which every kernel PD reports.
pub(crate) const LOCAL_DMA_LKEY: u32 = 0;
/// Responder resources of a QP (incoming READs and atomics in flight): the most
/// `max_dest_rd_atomic` accepts.
pub(crate) const RESP_RES: usize = 16;
/// Largest receive WQE slot read from a user ring (header and `MAX_SGE` SGEs).
const RECV_WQE_MAX: usize = crate::uabi::RECV_WQE_HDR + MAX_SGE as usize * crate::uabi::SGE_LEN;
/// Inline data a user QP's send WQE slot holds at least (the issue asks for 236 bytes or more).
const USER_MIN_INLINE: u32 = 256;
/// Most inline data (and SGE bytes) a user QP's send WQE slot holds.
pub(crate) const USER_MAX_INLINE: u32 = 512;
/// Requests a QP with an SRQ holds at once, taken from the SRQ and not yet completed: the
/// message being received (RC, UC) and the one a UC QP keeps from a dropped message.
const SRQ_IN_PROGRESS: u32 = 4;
/// The Q_Key of the GSI QP (`IB_QP1_QKEY`).
const QP1_QKEY: u32 = 0x8001_0000;

/// The protocol core's state of one QP.
pub(crate) type Engine = pqp::Qp<RESP_RES>;

/// Where user segments are resolved: the device's memory region table, for the QP's PD.
#[derive(Clone, Copy)]
struct MemCtx<'a> {
    dev: &'a MetaRoceDev,
    pd: Option<PdId>,
    /// The QP's number (type 2 memory windows answer only the QP that bound them).
    qpn: u32,
    /// The QP's own send buffers, for READ responses and atomic results placed by the core
    /// (`MemAccess::place_response`); `None` where nothing needs them.
    own: Option<SqBufs<'a>>,
}

impl<'a> MemCtx<'a> {
    /// The memory `qp` sees: its PD's regions (and its own send buffers left out).
    fn of(qp: &'a Qp<MetaRoceDriver>) -> Self {
        MemCtx {
            dev: qp.device(),
            pd: qp.pd().map(|p| p.id()),
            qpn: qp.qpn,
            own: None,
        }
    }

    fn read(&self, seg: SegRef<'_>, offset: usize, out: &mut [u8]) -> Result {
        match seg {
            Seg::Kernel(b) => b.read_at(offset, out),
            Seg::User { addr, lkey, .. } => {
                let pd = self.pd.ok_or(EINVAL)?;
                self.dev
                    .mr_copy_from(
                        lkey,
                        KeyKind::Local,
                        pd,
                        addr.wrapping_add(offset as u64),
                        out,
                    )
                    .map_err(mr_errno)
            }
        }
    }

    fn write(&self, seg: SegRef<'_>, offset: usize, data: &[u8]) -> Result {
        match seg {
            Seg::Kernel(b) => b.write_at(offset, data),
            Seg::User { addr, lkey, .. } => {
                let pd = self.pd.ok_or(EINVAL)?;
                self.dev
                    .mr_copy_to(
                        lkey,
                        KeyKind::Local,
                        pd,
                        addr.wrapping_add(offset as u64),
                        data,
                    )
                    .map_err(mr_errno)
            }
        }
    }
}

/// Attributes set through `modify_qp`.
#[derive(Clone, Copy)]
struct QpAttrs {
    qkey: u32,
    pkey_index: u16,
    sq_psn: u32,
    rq_psn: u32,
    dest_qpn: u32,
    path_mtu: Mtu,
    access: AccessFlags,
    timeout: u8,
    retry_cnt: u8,
    rnr_retry: u8,
    min_rnr_timer: u8,
    max_rd_atomic: u8,
    max_dest_rd_atomic: u8,
    /// The primary path of a connected QP.
    av: Option<RoceAv>,
}

/// The mutable state of a QP.
struct QpInner {
    state: QpState,
    attrs: QpAttrs,
    rq: RecvRing,
    sq: SendRing,
    /// What carries the QP's messages: set up when the QP enters RTR, dropped on RESET.
    transport: Transport,
    /// The RoCEv2 engine's counters already added to the device's (`account`).
    counted: pqp::Stats,
}

/// The transport of a QP: the protocol core's RoCEv2 state machines, or a stream of a native
/// connection (RC QPs of a native device). Every place that treats the two differently asks
/// this, and nothing else, which one the QP runs.
// The RoCEv2 engine is much larger than a native stream's place. It stays inline: the QP's
// locked state is allocated once with the QP, and a box would add an allocation per QP and a
// pointer chase on every packet.
#[allow(clippy::large_enum_variant)]
enum Transport {
    /// RESET and INIT: none yet.
    None,
    /// RoCEv2 (RC, UC, UD; every QP of a RoCEv2 device).
    Roce(Engine),
    /// The QP's place on its native connection (`native.rs`).
    Native(NativeState),
}

impl Transport {
    fn roce(&self) -> Option<&Engine> {
        match self {
            Transport::Roce(e) => Some(e),
            _ => None,
        }
    }

    fn roce_mut(&mut self) -> Option<&mut Engine> {
        match self {
            Transport::Roce(e) => Some(e),
            _ => None,
        }
    }

    fn native(&self) -> Option<&NativeState> {
        match self {
            Transport::Native(s) => Some(s),
            _ => None,
        }
    }

    fn native_mut(&mut self) -> Option<&mut NativeState> {
        match self {
            Transport::Native(s) => Some(s),
            _ => None,
        }
    }

    /// Drops the transport; returns a native QP's connection and the stream it still held (to
    /// give back once the QP lock is released). The caller drops the connection's reference
    /// with the lock released too: it may be the last one (the table reaped the connection),
    /// and freeing the connection may sleep.
    fn take_stream(&mut self) -> Option<(Arc<Peer>, Option<usize>)> {
        match core::mem::replace(self, Transport::None) {
            Transport::Native(s) => Some((s.peer, s.stream)),
            _ => None,
        }
    }
}

/// A kernel queue pair.
#[pin_data]
pub(crate) struct MetaRoceQp {
    /// The QP number.
    pub(crate) qpn: u32,
    qp_type: QpType,
    /// An RC QP of a native device that carries its messages over the native transport (the
    /// device's default; a process may ask for RoCEv2 instead).
    pub(crate) native: bool,
    /// Paths of the native connection this QP creates if it is the first to need it.
    paths: u8,
    /// A native user QP's view of its connection (MetaRoCE's user ABI).
    stats: Option<native::StatsPage>,
    sq_sig_all: bool,
    cap: QpCap,
    /// Whether the QP waits on the device's transmit worker's list.
    pub(crate) tx_queued: AtomicBool,
    /// Whether a context is pulling and sending the QP's packets (`xmit::transmit`).
    pub(crate) tx_busy: AtomicBool,
    /// Whether a context found `tx_busy` set and wants its holder to look again.
    pub(crate) tx_again: AtomicBool,
    /// Whether the QP is on the device's timer list.
    pub(crate) timer_listed: AtomicBool,
    #[pin]
    inner: SpinLockIrq<QpInner>,
}

impl MetaRoceQp {
    /// The IBA service (RC, UC, UD) of the QP's RoCEv2 packets.
    fn service(&self) -> Service {
        match self.qp_type {
            QpType::Rc => Service::Rc,
            QpType::Uc => Service::Uc,
            _ => Service::Ud,
        }
    }
}

/// Completions produced under the QP lock, delivered after it is released.
#[derive(Default)]
pub(crate) struct Notify {
    send: bool,
    recv: bool,
    /// The QP's SRQ reached its limit.
    srq_limit: bool,
    /// A native QP's stream to close (taken from the QP under its lock; closed once the lock
    /// is released, as the connection's lock comes first), or only the QP's reference to its
    /// connection, dropped then.
    unbind: Option<(Arc<Peer>, Option<usize>)>,
}

impl Notify {
    pub(crate) fn deliver(self, qp: &Qp<MetaRoceDriver>) {
        if let Some((peer, Some(idx))) = &self.unbind {
            native::unbind(qp.device(), peer, *idx, qp.qpn);
        }
        if self.send {
            if let Some(cq) = qp.send_cq() {
                cq.notify_completion();
            }
        }
        if self.recv {
            if let Some(cq) = qp.recv_cq() {
                cq.notify_completion();
            }
        }
        if self.srq_limit {
            if let Some(srq) = qp.srq() {
                srq.dispatch_event(SrqEvent::LimitReached);
            }
        }
    }
}

/// `wc` carrying a kernel request's ticket (`None`: a user QP's request).
fn with_ticket(wc: WorkCompletion, ticket: Option<Ticket>) -> WorkCompletion {
    match ticket {
        Some(t) => wc.with_ticket(t),
        None => wc,
    }
}

/// Queues a completion of `qp` on `cq` (a kernel CQ or a user CQ's ring); returns whether the
/// consumer must be notified. A full user ring is reported to the process as a CQ error event.
fn complete(
    qp: &Qp<MetaRoceDriver>,
    cq: Option<&Cq<MetaRoceDriver>>,
    wc: WorkCompletion,
    solicited: bool,
) -> bool {
    let Some(cq) = cq else { return false };
    match cq.push_qpn(wc, qp.qp_num(), solicited) {
        CqPush::QueuedNotify => true,
        CqPush::QueuedStartTimer(ns) => {
            cq.start_timer(ns);
            false
        }
        CqPush::Queued | CqPush::OverflowAgain => false,
        CqPush::Overflow => {
            cq.dispatch_user_event(CqEvent::Error);
            kernel::pr_warn_once!("work completion dropped: CQ full\n");
            false
        }
    }
}

fn send_wc_opcode(op: &SendOp) -> WcOpcode {
    match op {
        SendOp::RdmaWrite { .. } | SendOp::RdmaWriteWithImm { .. } => WcOpcode::RdmaWrite,
        SendOp::RdmaRead { .. } => WcOpcode::RdmaRead,
        SendOp::CmpSwap { .. } => WcOpcode::CompSwap,
        SendOp::FetchAdd { .. } => WcOpcode::FetchAdd,
        SendOp::RegMr { .. } => WcOpcode::RegMr,
        SendOp::LocalInv { .. } => WcOpcode::LocalInv,
        _ => WcOpcode::Send,
    }
}

fn wc_status(s: pwr::WcStatus) -> WcStatus {
    match s {
        pwr::WcStatus::Success => WcStatus::Success,
        pwr::WcStatus::LocLenErr => WcStatus::LocLenErr,
        pwr::WcStatus::LocQpOpErr => WcStatus::LocQpOpErr,
        pwr::WcStatus::LocProtErr => WcStatus::LocProtErr,
        pwr::WcStatus::WrFlushErr => WcStatus::WrFlushErr,
        pwr::WcStatus::BadRespErr => WcStatus::BadRespErr,
        pwr::WcStatus::LocAccessErr => WcStatus::LocAccessErr,
        pwr::WcStatus::RemInvReqErr => WcStatus::RemInvReqErr,
        pwr::WcStatus::RemAccessErr => WcStatus::RemAccessErr,
        pwr::WcStatus::RemOpErr => WcStatus::RemOpErr,
        pwr::WcStatus::RetryExcErr => WcStatus::RetryExcErr,
        pwr::WcStatus::RnrRetryExcErr => WcStatus::RnrRetryExcErr,
    }
}

/// Adds what the core counted since the last call to the device's port counters (rdma_rxe's
/// names and meanings).
fn account(qp: &Qp<MetaRoceDriver>, inner: &mut QpInner) {
    let Some(engine) = inner.transport.roce() else {
        return;
    };
    let now = engine.stats();
    let was = core::mem::replace(&mut inner.counted, now);
    let dev = qp.device();
    let d = |a: u64, b: u64| a.wrapping_sub(b);
    // Requests the responder saw twice, and those that arrived out of sequence (NAKed).
    dev.count(
        Counter::DuplicateRequest,
        d(now.resp.duplicates, was.resp.duplicates),
    );
    dev.count(
        Counter::OutOfSeqRequest,
        d(now.resp.seq_naks, was.resp.seq_naks),
    );
    // RNR NAKs received by the completer and sent by the responder.
    dev.count(Counter::RcvdRnrErr, d(now.comp.rnr_naks, was.comp.rnr_naks));
    dev.count(Counter::SendRnrErr, d(now.resp.rnr_naks, was.resp.rnr_naks));
    // Sequence error NAKs received, and retries (timeouts and NAKs) the completer started.
    dev.count(Counter::RcvdSeqErr, d(now.comp.seq_naks, was.comp.seq_naks));
    dev.count(
        Counter::CompleterRetryErr,
        d(now.comp.retries, was.comp.retries),
    );
    dev.count(
        Counter::LocalAckTimeouts,
        d(now.comp.timeouts, was.comp.timeouts),
    );
    dev.count(
        Counter::Retransmits,
        d(now.req.retransmits, was.req.retransmits),
    );
    dev.count(
        Counter::OdpResponseWaits,
        d(now.comp.sink_waits, was.comp.sink_waits),
    );
}

/// Reports the send completions the core has ready.
fn reap_send(qp: &Qp<MetaRoceDriver>, inner: &mut QpInner, n: &mut Notify) {
    account(qp, inner);
    let Some(engine) = inner.transport.roce_mut() else {
        return;
    };
    while let Some(c) = engine.poll_send_completion(&mut inner.sq.wqes) {
        // The completed request is the last one retired: completions come in posting order.
        let retired = inner.sq.tail.wrapping_sub(engine.sq_used());
        let slot = inner.sq.slot(retired.wrapping_sub(1));
        let opcode = inner.sq.side[slot].opcode.unwrap_or(WcOpcode::Send);
        let mut wc = with_ticket(
            WorkCompletion::new(c.wr_id, wc_status(c.status), opcode, qp.id()),
            inner.sq.bufs.take_ticket(slot),
        );
        wc.byte_len = c.byte_len;
        match c.status {
            pwr::WcStatus::Success => qp.device().count(Counter::RdmaSends, 1),
            pwr::WcStatus::RetryExcErr => qp.device().count(Counter::RetryExceededErr, 1),
            pwr::WcStatus::RnrRetryExcErr => qp.device().count(Counter::RetryRnrExceededErr, 1),
            _ => {}
        }
        n.send |= complete(qp, qp.send_cq(), wc, false);
    }
    // Requests the core retired (reported or not signaled) are done: their buffers go. (A
    // native QP's requests are retired by its connection: `native_retire`.)
    let retired = inner.sq.tail.wrapping_sub(engine.sq_used());
    inner.sq.release_to(retired);
}

/// Moves the QP to the error state: the core flushes its send queue, the receive queue is
/// flushed here.
fn enter_error(qp: &Qp<MetaRoceDriver>, inner: &mut QpInner, n: &mut Notify) {
    inner.state = QpState::Err;
    if let Some(engine) = inner.transport.roce_mut() {
        engine.set_error();
    }
    reap_send(qp, inner, n);
    native_flush(qp, inner, n);
    let mut flushed = |wr_id, ticket| {
        let wc = with_ticket(
            WorkCompletion::new(wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, qp.id()),
            ticket,
        );
        n.recv |= complete(qp, qp.recv_cq(), wc, false);
    };
    inner.rq.drain(&mut flushed);
}
