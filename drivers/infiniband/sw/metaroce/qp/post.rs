// SPDX-License-Identifier: GPL-2.0

//! Posting work requests: kernel posts, librxe's send doorbell and the user receive ring.

use super::*;

/// The core's form of a send work request's operation.
pub(super) fn core_op(op: &SendOp) -> Result<pwr::SendOp> {
    Ok(match *op {
        SendOp::Send => pwr::SendOp::Send,
        SendOp::SendWithImm { imm } => pwr::SendOp::SendImm { imm },
        SendOp::SendWithInv { rkey } => pwr::SendOp::SendInv { rkey },
        SendOp::RdmaWrite { remote_addr, rkey } => pwr::SendOp::Write {
            va: remote_addr,
            rkey,
        },
        SendOp::RdmaWriteWithImm {
            remote_addr,
            rkey,
            imm,
        } => pwr::SendOp::WriteImm {
            va: remote_addr,
            rkey,
            imm,
        },
        SendOp::RdmaRead { remote_addr, rkey } => pwr::SendOp::Read {
            va: remote_addr,
            rkey,
        },
        SendOp::CmpSwap {
            remote_addr,
            rkey,
            compare,
            swap,
        } => pwr::SendOp::Atomic {
            va: remote_addr,
            rkey,
            op: pwr::AtomicOp::CmpSwap { compare, swap },
        },
        SendOp::FetchAdd {
            remote_addr,
            rkey,
            add,
        } => pwr::SendOp::Atomic {
            va: remote_addr,
            rkey,
            op: pwr::AtomicOp::FetchAdd { add },
        },
        // Carried out by `post_one` before the core queues them.
        SendOp::RegMr { .. } | SendOp::LocalInv { .. } => pwr::SendOp::Local,
        // Masked atomics, flush and other work requests are not offered.
        SendOp::Other(_) => return Err(EINVAL),
    })
}

/// Validates one send work request and hands it to the core.
pub(super) fn post_one(
    qp: &Qp<MetaRoceDriver>,
    inner: &mut QpInner,
    wr: &SendWr<'_, MetaRoceDriver>,
    n: &mut Notify,
) -> Result {
    let op = wr.op();
    let flags = wr.flags();
    let signaled = qp.sq_sig_all || flags.signaled();
    let sges = wr.sges()?;
    // The request's number: its buffers and its completion carry it.
    let ticket = qp.issue_send(wr)?;
    match inner.state {
        QpState::Rts | QpState::Sqd => {}
        // Posting to a QP in error completes the request as flushed (which is how
        // ib_drain_sq learns the queue is empty).
        QpState::Err | QpState::Sqe => {
            let wc = WorkCompletion::new(
                wr.wr_id(),
                WcStatus::WrFlushErr,
                send_wc_opcode(&op),
                qp.id(),
            )
            .with_ticket(ticket);
            n.send |= complete(qp, qp.send_cq(), wc, false);
            return Ok(());
        }
        _ => return Err(EINVAL),
    }
    if flags.inline() {
        return Err(EINVAL);
    }
    let cop = core_op(&op)?;
    let (ud, av) = match wr.ud()? {
        Some(d) => (
            Some(pwr::UdDest {
                qpn: d.remote_qpn,
                qkey: d.remote_qkey,
            }),
            Some(d.ah.av),
        ),
        None => (None, None),
    };
    let slot = inner.sq.slot(inner.sq.tail);
    let max_sge = qp.cap.max_send_sge;
    // The buffers go to the slot only once the request is accepted: a full queue's tail slot
    // is its oldest request's, whose buffers must stay.
    let mut bufs: [Seg; MAX_SGE as usize] = core::array::from_fn(|_| Seg::default());
    let len = kernel_bufs(&ticket, sges, max_sge, &mut bufs)?;
    if u64::from(len) > MAX_MSG_SZ {
        return Err(EINVAL);
    }
    let used = match &inner.transport {
        Transport::Native(s) => inner.sq.tail.wrapping_sub(s.head),
        Transport::Roce(e) => e.sq_used(),
        Transport::None => return Err(EINVAL),
    };
    if inner.transport.native().is_some()
        && (used >= inner.sq.depth() || native_msg(&cop, len, false).is_err())
    {
        // What the native wire cannot carry (see `native_op`).
        return Err(if used >= inner.sq.depth() {
            ENOMEM
        } else {
            EOPNOTSUPP
        });
    }
    if cop == pwr::SendOp::Local {
        // Registration and local invalidate take effect now, in posting order with the
        // requests around them (a consumer may hand out a key only in a later request); the
        // core reports the completion in order. Everything that could refuse the request is
        // checked first, so a refused request has had no effect.
        let connected = matches!(qp.qp_type, QpType::Rc | QpType::Uc);
        if !connected || len != 0 || used >= inner.sq.depth() {
            return Err(if connected && len == 0 {
                ENOMEM
            } else {
                EINVAL
            });
        }
        let pd = qp.pd().ok_or(EINVAL)?.id();
        match op {
            SendOp::RegMr { key, access } => {
                let mr = wr.reg_mr()?.ok_or(EINVAL)?;
                crate::mr::register(mr, pd, key, access)?;
            }
            SendOp::LocalInv { rkey } => {
                qp.device().mr_invalidate(rkey, pd).map_err(|_| EINVAL)?;
            }
            _ => return Err(EINVAL),
        }
    }
    let cwr = pwr::SendWr {
        wr_id: wr.wr_id(),
        op: cop,
        len,
        signaled,
        fence: flags.fence(),
        solicited: flags.solicited(),
        ud,
    };
    let native = if inner.transport.native().is_some() {
        native_slot(&cwr).map_err(|()| EOPNOTSUPP)?
    } else {
        let engine = inner.transport.roce_mut().ok_or(EINVAL)?;
        engine
            .post_send(&mut inner.sq.wqes, cwr)
            .map_err(|e| match e {
                crate::proto::req::PostError::QueueFull => ENOMEM,
                _ => EINVAL,
            })?;
        NativeSlot::default()
    };
    for (to, from) in inner.sq.bufs.slot_mut(slot).iter_mut().zip(&mut bufs) {
        *to = core::mem::take(from);
    }
    inner.sq.bufs.set_ticket(slot, ticket);
    inner.sq.side[slot] = SqSide {
        opcode: Some(send_wc_opcode(&op)),
        num_sge: sges.len() as u32,
        inline_len: None,
    };
    inner.sq.set_extra(slot, av, native);
    inner.sq.tail = inner.sq.tail.wrapping_add(1);
    Ok(())
}

/// Posts send work requests. A kernel consumer's post may run with IRQs disabled: no
/// allocation, no sleeping, no transmission (the device's transmit worker sends). A user QP's
/// doorbell comes from the uverbs command in process context and may send some packets itself
/// (`xmit::post_doorbell`).
pub(crate) fn post_send<'a>(
    qp: &Qp<MetaRoceDriver>,
    wrs: SendWrList<'a, MetaRoceDriver>,
) -> Result<(), PostError<SendWr<'a, MetaRoceDriver>>> {
    let mut n = Notify::default();
    let mut res = Ok(());
    let user;
    let mut prefault = false;
    {
        let mut g = qp.inner.lock();
        user = g.sq.user.is_some();
        if user {
            // librxe's doorbell: an empty list; the requests are in the send ring. Before RTS
            // the doorbell fails (librxe's `ibv_post_send` returns the error, as rdma_rxe's).
            match g.state {
                QpState::Rts | QpState::Sqd | QpState::Err | QpState::Sqe => {
                    prefault = drain_user_sq(qp, &mut g, &mut n)
                }
                _ => {
                    res = Err(PostError {
                        error: EINVAL,
                        bad_wr: None,
                    })
                }
            }
        }
        for wr in wrs {
            if let Err(error) = post_one(qp, &mut g, &wr, &mut n) {
                res = Err(PostError {
                    error,
                    bad_wr: Some(wr),
                });
                break;
            }
        }
        // A native QP's requests wait for its connection to take them.
        if let Some((peer, Some(idx))) = g.transport.native().map(|s| (&s.peer, s.stream)) {
            native::want_feed(peer, idx);
        }
    }
    n.deliver(qp);
    if user {
        // librxe's doorbell: the uverbs command, process context, no locks held. Pages of
        // on-demand paging buffers the new requests use that were not present are faulted
        // in first, so that the packets can be built.
        if prefault {
            if let Some(pd) = qp.pd() {
                qp.device().odp_faults().run_pd(pd.id());
            }
        }
        xmit::post_doorbell(qp);
    } else {
        xmit::schedule(qp);
    }
    res
}

/// Moves the requests librxe wrote into a user QP's send ring to the core, oldest first, while
/// the core has room (the rest wait in the ring for the next doorbell or completion). A
/// malformed request completes with `IB_WC_LOC_QP_OP_ERR` and moves the QP to the error state.
/// Returns whether faults of on-demand paging buffers were queued for the requests.
pub(super) fn drain_user_sq(qp: &Qp<MetaRoceDriver>, inner: &mut QpInner, n: &mut Notify) -> bool {
    let mut prefault = false;
    drain_user_sq_into(qp, inner, n, &mut prefault);
    prefault
}

pub(super) fn drain_user_sq_into(
    qp: &Qp<MetaRoceDriver>,
    inner: &mut QpInner,
    n: &mut Notify,
    prefault: &mut bool,
) {
    let mut raw = [0u8; crate::uabi::SEND_WQE_HDR + USER_MAX_INLINE as usize];
    // At most one ring's worth of entries per call: the process may keep moving the producer
    // index (shared memory) while this runs under the QP's IRQ-off lock. What is left waits for
    // the next doorbell.
    let mut budget = inner.sq.user.as_ref().map_or(0, |q| q.capacity());
    loop {
        if budget == 0 {
            return;
        }
        budget -= 1;
        match inner.state {
            QpState::Rts | QpState::Sqd | QpState::Err | QpState::Sqe => {}
            _ => return,
        }
        let used = match &inner.transport {
            Transport::Native(s) => inner.sq.tail.wrapping_sub(s.head),
            Transport::Roce(e) => e.sq_used(),
            Transport::None => return,
        };
        if used >= inner.sq.depth() {
            return;
        }
        let Some(q) = inner.sq.user.as_ref() else {
            return;
        };
        // The header, then only the SGE records or inline data it names (not the whole slot).
        let Ok(Ok(len)) = q.peek_entry(
            &mut raw,
            crate::uabi::SEND_WQE_HDR,
            crate::uabi::send_wqe_len,
        ) else {
            return;
        };
        let slot = inner.sq.slot(inner.sq.tail);
        let max_sge = qp.cap.max_send_sge;
        let per = inner.sq.per_slot;
        let parsed = {
            let data = inner
                .sq
                .data
                .get_mut(slot * per..(slot + 1) * per)
                .unwrap_or(&mut []);
            crate::uabi::parse_send(&raw[..len], qp.qp_type == QpType::Ud, max_sge, data)
        };
        if let Some(q) = inner.sq.user.as_mut() {
            let _ = q.consume();
        }
        // A request refused here completes with its error and moves the QP to the error
        // state; the loop then flushes every request behind it in the ring (as rdma_rxe's
        // `flush_send_queue`): none waits for another doorbell.
        let flushing = matches!(inner.state, QpState::Err | QpState::Sqe);
        let w = match parsed {
            Ok(w) => w,
            Err(_) => {
                let wr_id = u64::from_ne_bytes(raw[..8].try_into().unwrap_or([0; 8]));
                let status = if flushing {
                    WcStatus::WrFlushErr
                } else {
                    WcStatus::LocQpOpErr
                };
                let wc = WorkCompletion::new(wr_id, status, WcOpcode::Send, qp.id());
                n.send |= complete(qp, qp.send_cq(), wc, false);
                if !flushing {
                    enter_error(qp, inner, n);
                }
                continue;
            }
        };
        if flushing {
            let wc = WorkCompletion::new(w.wr_id, WcStatus::WrFlushErr, w.wc_opcode, qp.id());
            n.send |= complete(qp, qp.send_cq(), wc, false);
            continue;
        }
        // The port's largest message, as for kernel posts.
        if u64::from(w.len) > MAX_MSG_SZ {
            let wc = WorkCompletion::new(w.wr_id, WcStatus::LocLenErr, w.wc_opcode, qp.id());
            n.send |= complete(qp, qp.send_cq(), wc, false);
            enter_error(qp, inner, n);
            continue;
        }
        // The local buffers must be registered to the QP's PD, writable where a READ or an
        // atomic places its result: checked now, before anything is sent (a bad L_Key
        // completes with IB_WC_LOC_PROT_ERR and the QP enters the error state).
        let write = matches!(w.op, pwr::SendOp::Read { .. } | pwr::SendOp::Atomic { .. });
        // Pages of on-demand paging buffers that are missing are queued for a fault, which the
        // doorbell runs before it sends.
        let sges_ok = w.inline_len.is_some()
            || inner.sq.bufs_n(slot, w.num_sge).count() == w.num_sge as usize
                && inner.sq.bufs_n(slot, w.num_sge).all(|s| match s {
                    Seg::User { addr, len, lkey } => {
                        len == 0
                            || qp.pd().is_some_and(|pd| {
                                match qp.device().mr_check_local(
                                    lkey,
                                    pd.id(),
                                    addr,
                                    len as usize,
                                    write,
                                ) {
                                    Ok(queued) => {
                                        *prefault |= queued;
                                        true
                                    }
                                    Err(_) => false,
                                }
                            })
                    }
                    Seg::Kernel(_) => false,
                });
        if !sges_ok {
            let wc = WorkCompletion::new(w.wr_id, WcStatus::LocProtErr, w.wc_opcode, qp.id());
            n.send |= complete(qp, qp.send_cq(), wc, false);
            enter_error(qp, inner, n);
            continue;
        }
        // Binding a memory window and local invalidate take effect now, in ring order (as
        // kernel QPs' local operations in `post_one`); the core completes them in order. A
        // refused one completes with its error and moves the QP to the error state, as in
        // rdma_rxe.
        if let Some(local) = &w.local {
            let pd = qp.pd().map(|p| p.id());
            let done = match (local, pd) {
                _ if !matches!(qp.qp_type, QpType::Rc | QpType::Uc) => Err(WcStatus::LocQpOpErr),
                (_, None) => Err(WcStatus::LocQpOpErr),
                (crate::uabi::LocalWqe::Invalidate { rkey }, Some(pd)) => qp
                    .device()
                    .mr_invalidate(*rkey, pd)
                    .map_err(|_| WcStatus::LocQpOpErr),
                (crate::uabi::LocalWqe::Bind(b), Some(pd)) => qp
                    .device()
                    .mw_bind(qp.qpn, pd, b)
                    .map_err(|_| WcStatus::MwBindErr),
            };
            if let Err(status) = done {
                let wc = WorkCompletion::new(w.wr_id, status, w.wc_opcode, qp.id());
                n.send |= complete(qp, qp.send_cq(), wc, false);
                enter_error(qp, inner, n);
                continue;
            }
        }
        // A UD request names a user AH of the QP's PD; its address vector is copied now, so
        // the AH may be destroyed while the request is in flight.
        let (ud, av) = match &w.ud {
            None => (None, None),
            Some(d) => match qp
                .pd()
                .and_then(|pd| qp.device().user_ah(d.ah_num, pd.id()))
            {
                Some(av) => (
                    Some(pwr::UdDest {
                        qpn: d.remote_qpn,
                        qkey: d.remote_qkey,
                    }),
                    Some(av),
                ),
                None => {
                    let wc =
                        WorkCompletion::new(w.wr_id, WcStatus::LocQpOpErr, w.wc_opcode, qp.id());
                    n.send |= complete(qp, qp.send_cq(), wc, false);
                    enter_error(qp, inner, n);
                    continue;
                }
            },
        };
        let cwr = pwr::SendWr {
            wr_id: w.wr_id,
            op: w.op,
            len: w.len,
            signaled: qp.sq_sig_all || w.signaled,
            fence: w.fence,
            solicited: w.solicited,
            ud,
        };
        let native = if inner.transport.native().is_some() {
            // What the native wire cannot carry (see `native_op`) completes in error.
            native_slot(&cwr).ok()
        } else {
            let Some(engine) = inner.transport.roce_mut() else {
                return;
            };
            engine
                .post_send(&mut inner.sq.wqes, cwr)
                .is_ok()
                .then(NativeSlot::default)
        };
        let Some(native) = native else {
            let wc = WorkCompletion::new(w.wr_id, WcStatus::LocQpOpErr, w.wc_opcode, qp.id());
            n.send |= complete(qp, qp.send_cq(), wc, false);
            enter_error(qp, inner, n);
            continue;
        };
        inner.sq.side[slot] = SqSide {
            opcode: Some(w.wc_opcode),
            num_sge: w.num_sge,
            inline_len: w.inline_len,
        };
        inner.sq.set_extra(slot, av, native);
        inner.sq.tail = inner.sq.tail.wrapping_add(1);
    }
}

/// Posts receive work requests. Runs with IRQs possibly disabled: no allocation, no sleeping.
pub(crate) fn post_recv<'a>(
    qp: &Qp<MetaRoceDriver>,
    wrs: RecvWrList<'a>,
) -> Result<(), PostError<RecvWr<'a>>> {
    let mut n = Notify::default();
    let mut res = Ok(());
    {
        let mut g = qp.inner.lock();
        let inner = &mut *g;
        for wr in wrs {
            let posted = (|| {
                // A QP with an SRQ takes its receive requests from the SRQ only.
                if qp.srq().is_some() {
                    return Err(EINVAL);
                }
                let sges = wr.sges()?;
                let ticket = qp.issue_recv(&wr)?;
                match inner.state {
                    QpState::Reset => Err(EINVAL),
                    QpState::Err => {
                        let wc = WorkCompletion::new(
                            wr.wr_id(),
                            WcStatus::WrFlushErr,
                            WcOpcode::Recv,
                            qp.id(),
                        )
                        .with_ticket(ticket);
                        n.recv |= complete(qp, qp.recv_cq(), wc, false);
                        Ok(())
                    }
                    _ => {
                        if inner.rq.is_full() {
                            return Err(ENOMEM);
                        }
                        let slot = inner.rq.slot(inner.rq.tail);
                        let len = kernel_bufs(
                            &ticket,
                            sges,
                            qp.cap.max_recv_sge,
                            inner.rq.bufs.slot_mut(slot),
                        )
                        // The free slot keeps no buffer of the refused request.
                        .inspect_err(|_| inner.rq.bufs.release(slot))?;
                        inner.rq.bufs.set_ticket(slot, ticket);
                        inner.rq.append(slot, wr.wr_id(), sges.len() as u32, len);
                        Ok(())
                    }
                }
            })();
            if let Err(error) = posted {
                res = Err(PostError {
                    error,
                    bad_wr: Some(wr),
                });
                break;
            }
        }
    }
    n.deliver(qp);
    res
}
