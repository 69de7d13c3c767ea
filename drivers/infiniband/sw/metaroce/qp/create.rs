// SPDX-License-Identifier: GPL-2.0

//! Creating and destroying QPs.

use super::*;

pub(crate) fn create_qp(
    qp: &mut NewQp<'_, MetaRoceDriver>,
) -> Result<impl PinInit<MetaRoceQp, Error>> {
    let user = qp.origin() == Origin::User;
    let qp_type = qp.qp_type();
    // A user GSI QP does not exist (ib_core's MAD layer owns QP1).
    if user && !matches!(qp_type, QpType::Rc | QpType::Uc | QpType::Ud) {
        return Err(EOPNOTSUPP);
    }
    match qp_type {
        QpType::Gsi => {
            if qp.port_num() != PORT {
                return Err(EINVAL);
            }
        }
        // A native device's RC QPs use the native transport, its UC and UD QPs RoCEv2
        // (transport.rst, section 1).
        QpType::Rc | QpType::Uc | QpType::Ud => {}
        // RoCE has no QP0; raw packet and XRC QPs are not offered.
        _ => return Err(EOPNOTSUPP),
    }
    if qp.create_flags() != 0 {
        return Err(EOPNOTSUPP);
    }
    // A QP with an SRQ takes its receive requests from it (RC, UC, UD); QP1 has its own.
    let srq_sge = qp.srq().map(|srq| srq.max_sge);
    if srq_sge.is_some() && qp_type == QpType::Gsi {
        return Err(EINVAL);
    }
    if qp.send_cq().is_none() || qp.recv_cq().is_none() {
        return Err(EINVAL);
    }
    let mut cap = qp.cap();
    if srq_sge.is_some() {
        // The SRQ's sizes apply; the QP has no receive queue of its own.
        cap.max_recv_wr = 0;
        cap.max_recv_sge = 0;
    }
    if cap.max_send_wr > MAX_QP_WR
        || cap.max_recv_wr > MAX_QP_WR
        || cap.max_send_sge > MAX_SGE
        || cap.max_recv_sge > MAX_SGE
    {
        return Err(EINVAL);
    }
    // Kernel consumers' buffers stay valid until completion, so inline data is offered to
    // user QPs only (copied out of the ring when the request is taken).
    if !user && cap.max_inline_data != 0 {
        return Err(EINVAL);
    }
    let datagram = !matches!(qp_type, QpType::Rc | QpType::Uc);
    // A native device's RC QPs use the native transport unless the process asks for RoCEv2;
    // no other QP can have it. A request that names no paths takes all of them.
    let req = match qp.udata() {
        Some(udata) => crate::uabi::qp_request(udata)?,
        None => crate::uabi::QpRequest::default(),
    };
    let can_native = qp.device().native && qp_type == QpType::Rc;
    let native = match req.native {
        None => can_native,
        Some(false) => false,
        Some(true) if can_native => true,
        Some(true) => return Err(EINVAL),
    };
    let paths = match req.paths {
        0 => native::PATHS as u8,
        n if n as usize <= native::PATHS && native => n as u8,
        _ => return Err(EINVAL),
    };
    // The private ring of a QP with an SRQ holds the requests it took and has not completed:
    // in native mode every message a stream may have outstanding (packets sprayed over paths
    // arrive out of order, and receives complete in order), else the one being received.
    let (rq_depth, rq_sge) = match srq_sge {
        Some(sge) if native => (crate::native::MSGS as u32, sge),
        Some(sge) => (SRQ_IN_PROGRESS, sge),
        None => (cap.max_recv_wr, cap.max_recv_sge),
    };
    let (mut rq, mut sq) = if user {
        // A send slot holds the SGEs or the inline data, whichever is larger (as rdma_rxe
        // sizes it); report what fits.
        let data = core::cmp::max(
            cap.max_send_sge * crate::uabi::SGE_LEN as u32,
            cap.max_inline_data,
        );
        let data = core::cmp::max(data, USER_MIN_INLINE);
        if data > USER_MAX_INLINE {
            return Err(EINVAL);
        }
        cap.max_inline_data = data;
        cap.max_send_sge = core::cmp::min(data / crate::uabi::SGE_LEN as u32, MAX_SGE);
        (
            RecvRing::new(rq_depth, rq_sge, false)?,
            SendRing::new(cap.max_send_wr, cap.max_send_sge, data, datagram, native)?,
        )
    } else {
        (
            RecvRing::new(rq_depth, rq_sge, true)?,
            SendRing::new(cap.max_send_wr, cap.max_send_sge, 0, datagram, native)?,
        )
    };
    let mut stats = None;
    if let Some(udata) = qp.udata() {
        // The request was read above; the response maps the rings (the receive ring's record
        // is zero for a QP with an SRQ, and the provider then maps none).
        let sq_elem = crate::uabi::SEND_WQE_HDR + cap.max_inline_data as usize;
        let urq = if srq_sge.is_none() {
            let rq_elem =
                crate::uabi::RECV_WQE_HDR + cap.max_recv_sge as usize * crate::uabi::SGE_LEN;
            Some(UQueue::new(
                udata,
                core::cmp::max(cap.max_recv_wr, 1),
                rq_elem,
                Role::KernelConsumes,
            )?)
        } else {
            None
        };
        let usq = UQueue::new(
            udata,
            core::cmp::max(cap.max_send_wr, 1),
            sq_elem,
            Role::KernelConsumes,
        )?;
        stats = if native && req.conn_stats {
            Some(native::StatsPage::new(udata)?)
        } else {
            None
        };
        let page = stats
            .as_ref()
            .map(|s| (s.mapping.offset(), s.mapping.size()));
        udata.write_response(crate::uabi::qp_resp(&usq, urq.as_ref(), page).as_bytes())?;
        // The rings may hold more than asked for; report their capacity.
        if let Some(urq) = &urq {
            cap.max_recv_wr = urq.capacity();
        }
        cap.max_send_wr = usq.capacity();
        rq.user = urq;
        sq.user = Some(usq);
    }
    let sq_sig_all = qp.sq_sig_all();

    // Last fallible step: from here on, `destroy_qp` gives the number back.
    let qpn = qp.device().alloc_qpn(qp_type == QpType::Gsi)?;
    qp.set_qp_num(qpn);
    qp.set_cap(cap);
    Ok(try_pin_init!(MetaRoceQp {
        qpn,
        qp_type,
        native,
        paths,
        stats,
        sq_sig_all,
        cap,
        tx_queued: AtomicBool::new(false),
        tx_busy: AtomicBool::new(false),
        tx_again: AtomicBool::new(false),
        timer_listed: AtomicBool::new(false),
        inner <- new_spinlock_irq!(
            QpInner {
                state: QpState::Reset,
                attrs: QpAttrs {
                    qkey: 0,
                    pkey_index: 0,
                    sq_psn: 0,
                    rq_psn: 0,
                    dest_qpn: 0,
                    path_mtu: Mtu::Mtu1024,
                    access: AccessFlags::NONE,
                    timeout: 0,
                    retry_cnt: 0,
                    rnr_retry: 0,
                    min_rnr_timer: 0,
                    max_rd_atomic: 0,
                    max_dest_rd_atomic: 0,
                    av: None,
                },
                rq,
                sq,
                counted: pqp::Stats::default(),
                transport: Transport::None,
            },
            "metaroce_qp"
        ),
    }))
}

pub(crate) fn destroy_qp(qp: &Qp<MetaRoceDriver>) {
    // Acknowledgements and responses already due leave first.
    xmit::flush(qp);
    // A native QP gives its stream back (its unacknowledged messages are abandoned).
    let bound = {
        let mut g = qp.inner.lock();
        g.transport.take_stream()
    };
    if let Some((peer, Some(idx))) = &bound {
        native::unbind(qp.device(), peer, *idx, qp.qpn);
    }
    // No new packet or transmit run can find the QP after this; the abstraction then waits
    // for the ones in progress.
    qp.device().unpublish_qp(qp.qpn);
    // Consumers must not find completions of a QP that no longer exists.
    if let Some(cq) = qp.send_cq() {
        cq.purge_qp(qp.id());
    }
    if let Some(cq) = qp.recv_cq() {
        cq.purge_qp(qp.id());
    }
    // Type 2 windows bound through this QP are freed before its number can be reused.
    if qp
        .device()
        .objects
        .mws
        .load(core::sync::atomic::Ordering::Relaxed)
        != 0
    {
        qp.device().mw_unbind_qp(qp.qpn);
    }
    qp.device().free_qpn(qp.qpn);
}
