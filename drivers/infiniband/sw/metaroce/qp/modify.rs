// SPDX-License-Identifier: GPL-2.0

//! `modify_qp` and `query_qp`: attribute changes and the transport engine they configure.

use super::*;

/// The core's configuration from the QP's attributes.
pub(super) fn engine_config(q: &MetaRoceQp, sq_depth: u32, a: &QpAttrs) -> QpConfig {
    let mut cfg = QpConfig::new(q.service(), q.qpn, a.dest_qpn);
    cfg.pmtu = Pmtu::from_bytes(a.path_mtu.bytes()).unwrap_or(Pmtu::Mtu1024);
    cfg.qkey = if q.qp_type == QpType::Gsi {
        QP1_QKEY
    } else {
        a.qkey
    };
    cfg.sq_psn = Psn::new(a.sq_psn);
    cfg.rq_psn = Psn::new(a.rq_psn);
    cfg.sq_depth = sq_depth;
    cfg.max_rd_atomic = core::cmp::max(a.max_rd_atomic, 1);
    cfg.timeout = a.timeout;
    cfg.retry_cnt = a.retry_cnt;
    cfg.rnr_retry = a.rnr_retry;
    cfg.min_rnr_timer = a.min_rnr_timer;
    // The requester's PSN window: 1024 by default, 8 times rdma_rxe's 128 (README, "Performance
    // work": under TCG a 128-packet window, two ACK intervals, left the sender waiting for ACKs).
    cfg.max_inflight = crate::module_parameters::rc_max_unacked
        .value()
        .clamp(1, crate::proto::req::MAX_MSG_PSNS);
    cfg.access = core_access(a.access);
    cfg
}

/// The responder's rights for the QP's access flags.
pub(super) fn core_access(flags: AccessFlags) -> pwr::Access {
    RIGHTS
        .into_iter()
        .filter(|(_, f)| flags.contains(*f))
        .fold(pwr::Access::NONE, |access, (r, _)| access.with(r))
}

pub(crate) fn modify_qp(qp: &Qp<MetaRoceDriver>, attr: &QpAttr, mask: QpAttrMask) -> Result {
    let mut n = Notify::default();
    // Datagram QPs have no path MTU attribute: their messages may be as long as the port's
    // active MTU (ibv_ud_pingpong sizes them by it), as rdma_rxe has it. Read before the QP
    // lock is taken (the netdev reference is under ib_core's port lock, IRQs on).
    let to_rtr = mask.contains(QpAttrMask::STATE) && matches!(attr.qp_state(), Ok(QpState::Rtr));
    let port_mtu = match qp.qp_type {
        QpType::Ud | QpType::Gsi if to_rtr => qp
            .device()
            .netdev(PORT)
            .and_then(|nd| Pmtu::from_bytes(crate::device::active_mtu(nd.mtu()).bytes())),
        _ => None,
    };
    // An RC QP of a native device that reaches RTR takes a stream of the connection to its
    // destination, bound before the QP lock is taken (the connection's lock comes first) and
    // given back if the transition fails.
    let native_rc = qp.native;
    let mut native_bind = if native_rc && to_rtr {
        let (state, attrs, bound) = {
            let g = qp.inner.lock();
            (
                g.state,
                g.attrs,
                g.transport.native().is_some_and(|s| s.stream.is_some()),
            )
        };
        let from = if mask.contains(QpAttrMask::CUR_STATE) {
            attr.cur_qp_state()?
        } else {
            state
        };
        if from == QpState::Init && !bound {
            let av = if mask.contains(QpAttrMask::AV) {
                Some(roce_av(attr.ah_attr())?)
            } else {
                attrs.av
            };
            let dest = if mask.contains(QpAttrMask::DEST_QPN) {
                attr.dest_qp_num()
            } else {
                attrs.dest_qpn
            };
            let av = av.ok_or(EINVAL)?;
            let mtu = qp.device().netdev(PORT).map_or(1500, |nd| nd.mtu());
            if !native::within_quota(qp.device(), qp, &av.sgid, &av.dgid) {
                return Err(EDQUOT);
            }
            let peer = native::peer(qp.device(), &av, mtu, qp.paths)?;
            let page = qp.stats.as_ref().map(|s| s.buf.clone());
            let idx = native::bind(&peer, qp.qpn, qp.ucontext_id(), dest, page)?;
            Some((peer, idx))
        } else {
            None
        }
    } else {
        None
    };
    let res = (|| -> Result {
        let mut g = qp.inner.lock();
        let inner = &mut *g;
        let cur = if mask.contains(QpAttrMask::CUR_STATE) {
            attr.cur_qp_state()?
        } else {
            inner.state
        };
        let next = if mask.contains(QpAttrMask::STATE) {
            attr.qp_state()?
        } else {
            cur
        };
        if !modify_is_ok(cur, next, qp.qp_type, mask) {
            return Err(EINVAL);
        }
        // Resizing queues is not offered; rate limits and alternate paths neither.
        if mask.contains(QpAttrMask::CAP)
            || mask.contains(QpAttrMask::RATE_LIMIT)
            || mask.contains(QpAttrMask::ALT_PATH)
        {
            return Err(EOPNOTSUPP);
        }
        // Validate everything before changing anything.
        let mut a = inner.attrs;
        if mask.contains(QpAttrMask::PORT) && attr.port_num() != PORT {
            return Err(EINVAL);
        }
        if mask.contains(QpAttrMask::PKEY_INDEX) {
            // One P_Key per port.
            if attr.pkey_index() != 0 {
                return Err(EINVAL);
            }
            a.pkey_index = 0;
        }
        if mask.contains(QpAttrMask::QKEY) {
            a.qkey = attr.qkey();
        }
        if mask.contains(QpAttrMask::SQ_PSN) {
            a.sq_psn = attr.sq_psn();
        }
        if mask.contains(QpAttrMask::RQ_PSN) {
            a.rq_psn = attr.rq_psn();
        }
        if mask.contains(QpAttrMask::DEST_QPN) {
            a.dest_qpn = attr.dest_qp_num();
        }
        if mask.contains(QpAttrMask::PATH_MTU) {
            a.path_mtu = attr.path_mtu()?;
        }
        if mask.contains(QpAttrMask::ACCESS_FLAGS) {
            a.access = attr.access_flags();
        }
        if mask.contains(QpAttrMask::TIMEOUT) {
            a.timeout = attr.timeout();
            if a.timeout > 31 {
                return Err(EINVAL);
            }
        }
        if mask.contains(QpAttrMask::RETRY_CNT) {
            a.retry_cnt = attr.retry_cnt();
            if a.retry_cnt > 7 {
                return Err(EINVAL);
            }
        }
        if mask.contains(QpAttrMask::RNR_RETRY) {
            a.rnr_retry = attr.rnr_retry();
            if a.rnr_retry > 7 {
                return Err(EINVAL);
            }
        }
        if mask.contains(QpAttrMask::MIN_RNR_TIMER) {
            a.min_rnr_timer = attr.min_rnr_timer();
            if a.min_rnr_timer > 31 {
                return Err(EINVAL);
            }
        }
        // Not above what query_device reports (`max_qp_init_rd_atom`, `max_qp_rd_atom`).
        if mask.contains(QpAttrMask::MAX_QP_RD_ATOMIC) {
            // The initiator depth is clamped to what we report (max_qp_init_rd_atom): fewer
            // READs/atomics in flight than allowed is always safe, and perftest sets it to the
            // peer's max_qp_rd_atom (rdma_rxe reports 128), which a refusal would make fail
            // against rdma_rxe (seen: interop/40-perftest, "Failed to modify QP to RTS").
            a.max_rd_atomic = core::cmp::min(usize::from(attr.max_rd_atomic()), RESP_RES) as u8;
        }
        if mask.contains(QpAttrMask::MAX_DEST_RD_ATOMIC) {
            a.max_dest_rd_atomic = attr.max_dest_rd_atomic();
            if usize::from(a.max_dest_rd_atomic) > RESP_RES {
                return Err(EINVAL);
            }
        }
        if mask.contains(QpAttrMask::AV) {
            a.av = Some(roce_av(attr.ah_attr())?);
        }
        // The transport state machines start when the QP can first receive (RTR); at RTS the
        // send side takes the attributes that come with that transition (send PSN, local ACK
        // timeout, retry counts), the responder keeping what it received in RTR.
        let rebuild = match (cur, next) {
            (QpState::Init, QpState::Rtr) => true,
            (QpState::Rtr, QpState::Rts) => inner.transport.roce().is_none(),
            _ => false,
        };
        if let (QpState::Rtr, QpState::Rts, Some(e)) = (cur, next, inner.transport.roce_mut()) {
            let send = pqp::SendAttrs {
                sq_psn: Psn::new(a.sq_psn),
                timeout: a.timeout,
                retry_cnt: a.retry_cnt,
                rnr_retry: a.rnr_retry,
                max_rd_atomic: core::cmp::max(a.max_rd_atomic, 1),
            };
            e.set_send_attrs(send, &inner.sq.wqes).map_err(|_| EINVAL)?;
            inner.sq.reset();
        }
        // New access rights on a running responder (RTR→RTS, RTS→RTS): the next request is
        // checked against them (revoking remote write on a live QP takes effect).
        if let (false, true, Some(e)) = (
            rebuild,
            mask.contains(QpAttrMask::ACCESS_FLAGS),
            inner.transport.roce_mut(),
        ) {
            e.set_access(core_access(a.access));
        }
        if rebuild && native_rc {
            inner.sq.reset();
            if let Some((peer, idx)) = native_bind.take() {
                inner.transport = Transport::Native(NativeState {
                    peer,
                    stream: Some(idx),
                    head: 0,
                    posted: 0,
                    rq_base: inner.rq.head,
                    local_error: false,
                });
            }
        } else if rebuild {
            let mut cfg = engine_config(qp, inner.sq.depth(), &a);
            if let Some(mtu) = port_mtu {
                cfg.pmtu = mtu;
            }
            let engine = Engine::new(cfg).map_err(|_| EINVAL)?;
            account(qp, inner);
            inner.transport = Transport::Roce(engine);
            inner.counted = pqp::Stats::default();
            inner.sq.reset();
        }
        inner.attrs = a;
        if next != cur {
            match next {
                // RESET empties both queues without completions.
                QpState::Reset => {
                    inner.rq.drain(|_, _| {});
                    inner.sq.reset();
                    account(qp, inner);
                    n.unbind = inner.transport.take_stream();
                    inner.counted = pqp::Stats::default();
                }
                QpState::Err => enter_error(qp, inner, &mut n),
                _ => {}
            }
        }
        inner.state = next;
        Ok(())
    })();
    if let Some((peer, idx)) = native_bind.take() {
        native::unbind(qp.device(), &peer, idx, qp.qpn);
    }
    res?;
    n.deliver(qp);
    // A QP with an SRQ that is put in the error state takes no more requests from it:
    // ib_drain_qp waits for this event (IBA 10.3.1) before draining the CQ.
    if qp.srq().is_some()
        && mask.contains(QpAttrMask::STATE)
        && matches!(attr.qp_state(), Ok(QpState::Err))
    {
        qp.dispatch_event(QpEvent::LastWqeReached);
    }
    if mask.contains(QpAttrMask::STATE) {
        // Make the QP reachable by the receive path once it can receive; it stays so until
        // it is destroyed.
        qp.device().publish_qp(qp);
        // Anything posted earlier (or flushed) may now be sendable.
        xmit::schedule(qp);
    }
    Ok(())
}

pub(crate) fn query_qp(
    qp: &Qp<MetaRoceDriver>,
    attr: &mut QpAttrOut,
    init: &mut QpInitAttrOut,
) -> Result {
    let (state, a) = {
        let g = qp.inner.lock();
        (g.state, g.attrs)
    };
    attr.qp_state(state)
        .path_mtu(a.path_mtu)
        .qkey(a.qkey)
        .rq_psn(a.rq_psn)
        .sq_psn(a.sq_psn)
        .dest_qp_num(a.dest_qpn)
        .access_flags(a.access)
        .cap(qp.cap)
        .pkey_index(a.pkey_index)
        .sq_draining(false)
        .max_rd_atomic(a.max_rd_atomic)
        .max_dest_rd_atomic(a.max_dest_rd_atomic)
        .min_rnr_timer(a.min_rnr_timer)
        .port_num(PORT)
        .timeout(a.timeout)
        .retry_cnt(a.retry_cnt)
        .rnr_retry(a.rnr_retry);
    init.cap(qp.cap).sq_sig_all(qp.sq_sig_all);
    Ok(())
}
