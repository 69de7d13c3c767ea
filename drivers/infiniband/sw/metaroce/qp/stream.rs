// SPDX-License-Identifier: GPL-2.0

//! The glue between a QP and its stream of a native connection (`crate::native`).

use super::*;
use crate::xmit::BuildError;

/// The connection of a native RC QP (also after its stream closed: its transmit runs and
/// timer ticks still drive the connection).
pub(super) fn native_peer(qp: &Qp<MetaRoceDriver>) -> Option<Arc<Peer>> {
    if !qp.native {
        return None;
    }
    qp.inner.lock().transport.native().map(|s| s.peer.clone())
}

/// The connection's form of a send request: the message, or `None` for a local operation
/// (done when posted). `Err` for what the native wire does not carry yet.
pub(super) fn native_msg(
    op: &pwr::SendOp,
    len: u32,
    solicited: bool,
) -> core::result::Result<Option<MsgDesc>, ()> {
    Ok(native_op(op, len, solicited)?.map(|(m, _)| m))
}

/// A native message and an atomic's operands (compare/swap or add, 0 otherwise).
pub(super) type NativeDesc = (MsgDesc, (u64, u64));

/// The message and an atomic's operands.
pub(super) fn native_op(
    op: &pwr::SendOp,
    len: u32,
    solicited: bool,
) -> core::result::Result<Option<NativeDesc>, ()> {
    let (op, va, rkey, imm, operands) = match *op {
        pwr::SendOp::Send => (MrcOp::Send, 0, 0, 0, (0, 0)),
        pwr::SendOp::SendImm { imm } => (MrcOp::SendImm, 0, 0, imm, (0, 0)),
        pwr::SendOp::Write { va, rkey } => (MrcOp::Write, va, rkey, 0, (0, 0)),
        pwr::SendOp::WriteImm { va, rkey, imm } => (MrcOp::WriteImm, va, rkey, imm, (0, 0)),
        pwr::SendOp::Read { va, rkey } => (MrcOp::Read, va, rkey, 0, (0, 0)),
        // The 8-byte result lands in the request's local buffer.
        pwr::SendOp::Atomic {
            va,
            rkey,
            op: pwr::AtomicOp::CmpSwap { compare, swap },
        } if len == 8 => (MrcOp::CmpSwap, va, rkey, 0, (compare, swap)),
        pwr::SendOp::Atomic {
            va,
            rkey,
            op: pwr::AtomicOp::FetchAdd { add },
        } if len == 8 => (MrcOp::FetchAdd, va, rkey, 0, (add, 0)),
        // ATOMIC WRITE: one 8-byte packet, placed by a single copy of the aligned word.
        pwr::SendOp::AtomicWrite { va, rkey } if len == 8 && va % 8 == 0 => {
            (MrcOp::Write, va, rkey, 0, (0, 0))
        }
        // The key to invalidate travels in the RKey field (transport.rst, section 9.2).
        pwr::SendOp::SendInv { rkey } => (MrcOp::SendInv, 0, rkey, 0, (0, 0)),
        pwr::SendOp::Local => return Ok(None),
        // UD-only and malformed requests (an atomic whose buffer is not 8 bytes, an unaligned
        // ATOMIC WRITE) have no native form, nor has FLUSH (native devices do not report
        // IB_DEVICE_FLUSH_GLOBAL, so no MR of theirs grants it).
        _ => return Err(()),
    };
    Ok(Some((
        MsgDesc {
            op,
            len,
            va,
            rkey,
            imm,
            se: solicited,
        },
        operands,
    )))
}

pub(super) fn native_slot(w: &pwr::SendWr) -> core::result::Result<NativeSlot, ()> {
    let m = native_op(&w.op, w.len, w.solicited)?;
    Ok(NativeSlot {
        wr_id: w.wr_id,
        signaled: w.signaled,
        msg: m.map(|(m, _)| m),
        operands: m.map_or((0, 0), |(_, o)| o),
        msn: 0,
        done: if m.is_none() {
            Some(WcStatus::Success)
        } else {
            None
        },
    })
}

/// Reports the send requests that are done, oldest first (posting order). Returns whether it
/// reported the request that failed locally ([`NativeState::local_error`]): the caller then
/// moves the QP to the error state.
pub(super) fn native_retire(qp: &Qp<MetaRoceDriver>, inner: &mut QpInner, n: &mut Notify) -> bool {
    let QpInner { transport, sq, .. } = inner;
    let Some(s) = transport.native_mut() else {
        return false;
    };
    while s.head != s.posted {
        let slot = sq.slot(s.head);
        let Some(status) = sq.nslot(slot).done else {
            break;
        };
        report_native_send(qp, sq, slot, status, n);
        s.head = s.head.wrapping_add(1);
        if s.local_error && status == WcStatus::LocProtErr {
            return true;
        }
    }
    false
}

/// Reports the request in `slot` of a native QP's send queue done with `status` (a completion
/// if it is signalled or failed) and drops its buffers.
pub(super) fn report_native_send(
    qp: &Qp<MetaRoceDriver>,
    sq: &mut SendRing,
    slot: usize,
    status: WcStatus,
    n: &mut Notify,
) {
    let dev = qp.device();
    let ns = sq.nslot(slot);
    match status {
        WcStatus::Success if ns.msg.is_some() => dev.count(Counter::RdmaSends, 1),
        WcStatus::RetryExcErr => dev.count(Counter::RetryExceededErr, 1),
        _ => {}
    }
    if ns.signaled || status != WcStatus::Success {
        let opcode = sq
            .side
            .get(slot)
            .and_then(|s| s.opcode)
            .unwrap_or(WcOpcode::Send);
        let mut wc = with_ticket(
            WorkCompletion::new(ns.wr_id, status, opcode, qp.id()),
            sq.bufs.take_ticket(slot),
        );
        wc.byte_len = ns.msg.map_or(0, |m| m.len);
        n.send |= complete(qp, qp.send_cq(), wc, false);
    }
    sq.bufs.release(slot);
}

/// The error state of a native QP: completions already known are reported, every other
/// request is flushed, in posting order, a later one that failed meanwhile too (IBA: after an
/// error completion every later request completes flushed); the stream is given back (by `n`).
pub(super) fn native_flush(qp: &Qp<MetaRoceDriver>, inner: &mut QpInner, n: &mut Notify) {
    native_retire(qp, inner, n);
    let QpInner { transport, sq, .. } = inner;
    let Some(s) = transport.native_mut() else {
        return;
    };
    while s.head != sq.tail {
        let slot = sq.slot(s.head);
        report_native_send(qp, sq, slot, WcStatus::WrFlushErr, n);
        s.head = s.head.wrapping_add(1);
    }
    s.posted = s.head;
    if let Some(idx) = s.stream.take() {
        n.unbind = Some((s.peer.clone(), Some(idx)));
    }
}

/// Hands the requests posted to `qp` (stream `idx`) to the connection, as far as it takes
/// them, and reports those done. Returns whether requests are left that the connection did
/// not take (its message window is full), or `None` if the QP is not on that stream any more
/// (or broke now): the caller closes the stream. Called under the connection's lock.
pub(crate) fn native_feed(
    qp: &Qp<MetaRoceDriver>,
    idx: usize,
    conn: &mut native::NativeConn,
    n: &mut Notify,
) -> Option<bool> {
    let mut g = qp.inner.lock();
    let inner = &mut *g;
    if inner
        .transport
        .native()
        .is_none_or(|s| s.stream != Some(idx))
    {
        return None;
    }
    if inner.sq.user.is_some() {
        drain_user_sq(qp, inner, n);
    }
    let mut broke = false;
    let left;
    {
        let QpInner { transport, sq, .. } = &mut *inner;
        let s = transport.native_mut().filter(|s| s.stream == Some(idx))?;
        // After a local error nothing more goes to the connection (the rest is flushed).
        while s.posted != sq.tail && !s.local_error {
            let slot = sq.slot(s.posted);
            let Some(side) = sq.native.get_mut(slot) else {
                broke = true;
                break;
            };
            if let Some(m) = side.msg {
                let posted = if m.op.is_atomic() {
                    conn.post_atomic(idx, m.op, m.va, m.rkey, side.operands.0, side.operands.1)
                } else {
                    conn.post(idx, m)
                };
                match posted {
                    Ok(msn) => side.msn = msn,
                    // `K` messages in flight: the rest waits for completions.
                    Err(NativePostError::Full) => break,
                    Err(_) => {
                        broke = true;
                        break;
                    }
                }
            }
            s.posted = s.posted.wrapping_add(1);
        }
        left = s.posted != sq.tail && !s.local_error;
    }
    if native_retire(qp, inner, n) || broke {
        enter_error(qp, inner, n);
        return None;
    }
    Some(left)
}

/// Copies `out.len()` bytes at `offset` of message `msn` of `qp` (stream `idx`) into `out`.
///
/// A READ response (`mr`) is read from the QP's memory at the key and address the core names
/// (checked when the request arrived; checked again here, as the region may have changed).
pub(crate) fn native_payload(
    qp: &Qp<MetaRoceDriver>,
    idx: usize,
    msn: u32,
    offset: u32,
    mr: Option<MrRef>,
    out: &mut [u8],
) -> core::result::Result<(), BuildError> {
    let g = qp.inner.lock();
    let s = g
        .transport
        .native()
        .filter(|s| s.stream == Some(idx))
        .ok_or(ENOENT)?;
    let src = match mr {
        Some(m) => PayloadSrc::Mr {
            rkey: m.rkey,
            va: m.va,
        },
        None => PayloadSrc::Request {
            slot: native_msg_slot(s, &g.sq, msn, |_| true).ok_or(ENOENT)?,
            offset: offset as usize,
        },
    };
    copy_payload(qp, &g.sq, src, out)
}

/// The local data of message `msn` of `qp` (stream `idx`) could not be read
/// ([`BuildError::Gather`]): the request completes with a local protection error and the QP
/// enters the error state (flushing the rest) once every request before it has completed;
/// until then nothing more goes to the connection ([`NativeState::local_error`]). A later
/// request failing meanwhile is flushed with the rest. Returns `false` if the QP left the
/// stream (it did now, or had before): the caller closes the stream. Called under the
/// connection's lock.
pub(crate) fn native_local_error(
    qp: &Qp<MetaRoceDriver>,
    idx: usize,
    msn: u32,
    n: &mut Notify,
) -> bool {
    let mut g = qp.inner.lock();
    let inner = &mut *g;
    let Some(s) = inner.transport.native().filter(|s| s.stream == Some(idx)) else {
        return false;
    };
    if s.local_error {
        return true;
    }
    let waiting = native_msg_slot(s, &inner.sq, msn, |_| true).filter(|&slot| {
        inner
            .sq
            .native
            .get(slot)
            .is_some_and(|ns| ns.done.is_none())
    });
    // Not among the requests waiting (or done already): the QP breaks now, as before.
    let now = waiting.is_none_or(|slot| fail_in_order(qp, inner, slot, n));
    if now {
        enter_error(qp, inner, n);
        return false;
    }
    true
}

/// Marks the request in `slot` failed with a local protection error (kept if it failed
/// already) and reports what is done in posting order: the QP is to break once every request
/// before it has completed ([`NativeState::local_error`]). Returns whether that is now, after
/// which the caller moves the QP to the error state.
fn fail_in_order(
    qp: &Qp<MetaRoceDriver>,
    inner: &mut QpInner,
    slot: usize,
    n: &mut Notify,
) -> bool {
    if let Some(ns) = inner.sq.native.get_mut(slot) {
        ns.done.get_or_insert(WcStatus::LocProtErr);
    }
    if let Some(s) = inner.transport.native_mut() {
        s.local_error = true;
    }
    native_retire(qp, inner, n)
}

/// The send queue slot of message `msn` among the requests handed to the connection and not
/// completed, if its message passes `what`.
pub(super) fn native_msg_slot(
    s: &NativeState,
    sq: &SendRing,
    msn: u32,
    what: impl Fn(&MsgDesc) -> bool,
) -> Option<usize> {
    let mut i = s.head;
    while i != s.posted {
        let slot = sq.slot(i);
        let side = sq.nslot(slot);
        if side.msg.is_some_and(|m| what(&m)) && side.msn == msn {
            return Some(slot);
        }
        i = i.wrapping_add(1);
    }
    None
}

/// Whether `qp` can take the DATA packet `h` now: a receive-consuming message needs its
/// posted receive (taken from the receive ring or SRQ here, in order). Without one the
/// packet is dropped unacknowledged and sent again later (receiver not ready).
pub(crate) fn native_ready(qp: &Qp<MetaRoceDriver>, h: &DataHdr, n: &mut Notify) -> bool {
    if !h.op.consumes_recv() {
        return true;
    }
    let mut g = qp.inner.lock();
    let inner = &mut *g;
    let Some(base) = inner.transport.native().map(|s| s.rq_base) else {
        return true;
    };
    let id = base.wrapping_add(h.rsn);
    let srq = qp.srq();
    let mut src = RecvSource::new(qp, &mut inner.rq, srq);
    // Taken already (or completed: a duplicate, which the connection recognises).
    let mut ok = (id.wrapping_sub(src.rq.taken) as i32) < 0;
    while !ok {
        if src.take().is_none() {
            break;
        }
        ok = (id.wrapping_sub(src.rq.taken) as i32) < 0;
    }
    n.srq_limit |= src.srq_limit;
    if inner.rq.user_errors > 0 {
        inner.rq.user_errors = 0;
        enter_error(qp, inner, n);
        return false;
    }
    if !ok {
        qp.device().count(Counter::SendRnrErr, 1);
    }
    ok
}

/// How a new DATA packet of a native QP was placed.
pub(crate) enum Placed {
    /// Its payload is in place.
    Done,
    /// The peer's request is refused with this code (a WRITE's key, range or rights, a SEND
    /// longer than its receive): nothing was written; the caller NAKs the message.
    Refuse(NakCode),
    /// The QP broke (a receive request naming bad memory, our own response buffers): it
    /// entered the error state; the caller closes its stream.
    Broken,
}

/// Places the payload of a new DATA packet of `qp` (stream `idx`).
pub(crate) fn native_place(
    qp: &Qp<MetaRoceDriver>,
    idx: usize,
    p: &NativePlace,
    data: &[u8],
    n: &mut Notify,
) -> Placed {
    let mut g = qp.inner.lock();
    let inner = &mut *g;
    let Some(base) = inner
        .transport
        .native()
        .filter(|s| s.stream == Some(idx))
        .map(|s| s.rq_base)
    else {
        return Placed::Broken;
    };
    let mut refuse = None;
    let mem = MemCtx::of(qp);
    let placed = (|| -> Result {
        let d = data.get(..usize::from(p.len)).ok_or(EINVAL)?;
        if matches!(p.op, MrcOp::ReadResp | MrcOp::AtomicResp) {
            // The response to our READ or atomic `msn`: into that request's local buffers.
            let s = inner.transport.native().ok_or(EINVAL)?;
            let is_request = |m: &MsgDesc| m.op == MrcOp::Read || m.op.is_atomic();
            let slot = native_msg_slot(s, &inner.sq, p.msn, is_request).ok_or(ENOENT)?;
            let placed = if p.op == MrcOp::ReadResp {
                scatter(&mem, inner.sq.bufs(slot), p.offset as usize, d)
            } else {
                scatter(&mem, inner.sq.bufs(slot), 0, &p.va.to_ne_bytes())
            };
            // Its local buffers went away: the request fails with a local protection error,
            // reported in posting order as for a request whose data could not be read
            // ([`native_local_error`]): the QP breaks (below) once every request before it
            // has completed. Responses to several READs may arrive interleaved (per-packet
            // placement over several paths), so an earlier READ may still be incomplete; its
            // own responses complete it, or fail it the same way.
            if placed.is_err() && !fail_in_order(qp, inner, slot, n) {
                return Ok(());
            }
            return placed;
        }
        if p.op.is_write() {
            // The QP must allow remote writes, and the key name writable memory.
            refuse = Some(NakCode::RemoteAccess);
            if !inner.attrs.access.contains(AccessFlags::REMOTE_WRITE) {
                return Err(EACCES);
            }
            let pd = mem.pd.ok_or(EINVAL)?;
            let va = p.va.wrapping_add(u64::from(p.offset));
            let kind = KeyKind::Remote { qpn: mem.qpn };
            // The whole message's range, on every packet: a message that does not fit is refused
            // by each of its packets, whatever order they come in, and nothing of it is written
            // (this packet's bytes lie within it: the parser checked offset + len <= msg_len).
            // A zero-length WRITE names no memory: its key and address are not checked (IBTA
            // C9-88, as the RoCEv2 responder does; UCX flushes an RC QP with one, key 0).
            let whole = usize::try_from(p.msg_len).map_err(|_| EINVAL)?;
            if whole == 0 {
                return Ok(());
            }
            mem.dev
                .mr_check(p.rkey, kind, pd, p.va, whole, AccessFlags::REMOTE_WRITE)
                .map_err(|_| EACCES)?;
            return mem
                .dev
                .mr_copy_to(p.rkey, kind, pd, va, d)
                .map_err(|_| EFAULT);
        }
        let id = base.wrapping_add(p.rsn);
        // Only a receive handed to the connection and not completed may be written: a
        // completed one's buffers are the consumer's again (the stream's Rsn window keeps a
        // genuine peer inside this range; anything else breaks the QP).
        let (entry, bufs) = inner.rq.outstanding(id).ok_or(EINVAL)?;
        // The whole message must fit its receive (checked on every packet, as for writes).
        let end = u64::from(p.offset) + d.len() as u64;
        if end > u64::from(entry.len) || u64::from(p.msg_len) > u64::from(entry.len) {
            refuse = Some(NakCode::InvalidRequest);
            return Err(EMSGSIZE);
        }
        let rmem = match qp.srq() {
            Some(s) => MemCtx {
                pd: Some(s.pd().id()),
                ..mem
            },
            None => mem,
        };
        // A receive whose buffers cannot be written (their MR was deregistered): the message
        // is refused as a remote operational error, as on the RoCEv2 path, rather than
        // breaking the QP silently (its stream would then acknowledge the rest unplaced).
        refuse = Some(NakCode::RemoteOperation);
        scatter(&rmem, bufs.iter().map(Seg::as_ref), p.offset as usize, d)?;
        // SEND with invalidate: the packet that completed the message names the key, once
        // (section 9.2); it becomes invalid before the connection lock is released, so before
        // the receive completes and before any later message of the peer is placed. A key
        // this QP may not invalidate refuses the message (the receive completes in error).
        if let Some(rkey) = p.invalidate {
            refuse = Some(NakCode::InvalidRequest);
            let pd = mem.pd.ok_or(EINVAL)?;
            mem.dev.mr_invalidate(rkey, pd).map_err(|_| EINVAL)?;
        }
        Ok(())
    })();
    match (placed, refuse) {
        (Ok(()), _) => Placed::Done,
        (Err(_), Some(code)) => {
            qp.device().count(Counter::RcvdDropped, 1);
            Placed::Refuse(code)
        }
        (Err(_), None) => {
            qp.device().count(Counter::RcvdDropped, 1);
            enter_error(qp, inner, n);
            Placed::Broken
        }
    }
}

/// Turns a completion of the connection for `qp` (stream `idx`) into a work completion.
/// Returns `false` if the QP is not on that stream any more or broke now (a send that
/// exhausted its retries): the caller closes the stream.
pub(crate) fn native_completion(
    qp: &Qp<MetaRoceDriver>,
    idx: usize,
    c: &NativeCompletion,
    n: &mut Notify,
) -> bool {
    let mut g = qp.inner.lock();
    let inner = &mut *g;
    let Some((head, posted, rq_base)) = inner
        .transport
        .native()
        .filter(|s| s.stream == Some(idx))
        .map(|s| (s.head, s.posted, s.rq_base))
    else {
        return false;
    };
    match *c {
        NativeCompletion::Send { msn, status, .. } => {
            let mut i = head;
            while i != posted {
                let slot = inner.sq.slot(i);
                let Some(side) = inner.sq.native.get_mut(slot) else {
                    break;
                };
                if side.msg.is_some() && side.done.is_none() {
                    if side.msn == msn {
                        side.done = Some(match status {
                            SendStatus::Ok => WcStatus::Success,
                            SendStatus::RetryExceeded => WcStatus::RetryExcErr,
                            SendStatus::Flushed => WcStatus::WrFlushErr,
                            SendStatus::RemoteAccess => WcStatus::RemAccessErr,
                            SendStatus::RemoteInvalid => WcStatus::RemInvReqErr,
                            SendStatus::RemoteOperation => WcStatus::RemOpErr,
                        });
                    }
                    break;
                }
                i = i.wrapping_add(1);
            }
            if native_retire(qp, inner, n) || status != SendStatus::Ok {
                enter_error(qp, inner, n);
                return false;
            }
            true
        }
        NativeCompletion::Recv { done, .. } => {
            // A plain WRITE holds the order but completes nothing here (also when refused:
            // the requester got the NAK).
            if !done.op.consumes_recv() {
                return true;
            }
            // A refused SEND (too long) or WRITE with immediate (bad key) completes its
            // receive in error and breaks the QP, as a responder error does in verbs.
            if let Some(code) = done.refused {
                let id = rq_base.wrapping_add(done.rsn);
                if id == inner.rq.head && inner.rq.head != inner.rq.taken {
                    let (entry, _) = inner.rq.entry(u64::from(id));
                    let status = match code {
                        // A SEND with invalidate that fitted was refused for its key.
                        NakCode::InvalidRequest
                            if done.op.invalidates() && done.len <= entry.len =>
                        {
                            WcStatus::RemInvReqErr
                        }
                        NakCode::InvalidRequest => WcStatus::LocLenErr,
                        _ => WcStatus::LocProtErr,
                    };
                    let opcode = if done.op.is_write() {
                        WcOpcode::RecvRdmaWithImm
                    } else {
                        WcOpcode::Recv
                    };
                    let wc = with_ticket(
                        WorkCompletion::new(entry.wr_id, status, opcode, qp.id()),
                        inner.rq.complete(u64::from(id)),
                    );
                    n.recv |= complete(qp, qp.recv_cq(), wc, false);
                }
                enter_error(qp, inner, n);
                return false;
            }
            let id = rq_base.wrapping_add(done.rsn);
            if id != inner.rq.head || inner.rq.head == inner.rq.taken {
                // Receive completions come in Rsn order from requests taken in order.
                qp.device().count(Counter::RcvdDropped, 1);
                enter_error(qp, inner, n);
                return false;
            }
            let (entry, _) = inner.rq.entry(u64::from(id));
            let opcode = if done.op.is_write() {
                WcOpcode::RecvRdmaWithImm
            } else {
                WcOpcode::Recv
            };
            let mut wc = with_ticket(
                WorkCompletion::new(entry.wr_id, WcStatus::Success, opcode, qp.id()),
                inner.rq.complete(u64::from(id)),
            );
            wc.byte_len = done.len;
            wc.imm = done.op.has_imm().then_some(done.imm);
            wc.invalidate_rkey = done.invalidated;
            qp.device().count(Counter::RdmaRecvs, 1);
            n.recv |= complete(qp, qp.recv_cq(), wc, done.se);
            true
        }
    }
}

/// The responder's answer to the peer's READ or atomic request on `qp` (stream `idx`): the QP
/// must allow the access and the key name memory with that right; an atomic is carried out
/// here (the word's original value goes back). Called under the connection's lock.
pub(crate) fn native_request(
    qp: &Qp<MetaRoceDriver>,
    idx: usize,
    r: &NativeRequest,
) -> NativeResponse {
    let g = qp.inner.lock();
    if g.transport.native().is_none_or(|s| s.stream != Some(idx)) {
        return NativeResponse::Nak(NakCode::RemoteOperation);
    }
    let (need, qp_ok) = if r.op == MrcOp::Read {
        (
            AccessFlags::REMOTE_READ,
            g.attrs.access.contains(AccessFlags::REMOTE_READ),
        )
    } else {
        (
            AccessFlags::REMOTE_ATOMIC,
            g.attrs.access.contains(AccessFlags::REMOTE_ATOMIC),
        )
    };
    drop(g);
    let Some(pd) = qp.pd().map(|p| p.id()) else {
        return NativeResponse::Nak(NakCode::RemoteOperation);
    };
    if !qp_ok {
        return NativeResponse::Nak(NakCode::RemoteAccess);
    }
    let dev = qp.device();
    let kind = KeyKind::Remote { qpn: qp.qpn };
    match r.op {
        // A zero-length READ names no memory (C9-88): answered without a key check.
        MrcOp::Read if r.len == 0 => NativeResponse::Read,
        MrcOp::Read => match dev.mr_check(r.rkey, kind, pd, r.va, r.len as usize, need) {
            Ok(()) => NativeResponse::Read,
            Err(_) => NativeResponse::Nak(NakCode::RemoteAccess),
        },
        MrcOp::CmpSwap | MrcOp::FetchAdd => {
            let (op, a, b) = (r.op, r.compare_add, r.swap);
            let done = dev.mr_atomic(r.rkey, qp.qpn, pd, r.va, need, |old| match op {
                MrcOp::CmpSwap => (old == a).then_some(b),
                _ => Some(old.wrapping_add(a)),
            });
            match done {
                Ok(old) => NativeResponse::Atomic(old),
                Err(_) => NativeResponse::Nak(NakCode::RemoteAccess),
            }
        }
        _ => NativeResponse::Nak(NakCode::InvalidRequest),
    }
}
