// SPDX-License-Identifier: GPL-2.0

//! The RoCEv2 receive path of a QP, and the memory checks its responder asks for.

use super::*;

/// The responder's answer to a refused memory access: RNR for on-demand paging memory that is
/// being faulted in, a remote access error for anything else.
pub(super) fn access_error(e: crate::mr::MrError) -> AccessError {
    match e {
        crate::mr::MrError::NotPresent => AccessError::NotPresent,
        _ => AccessError::Access,
    }
}

/// Memory regions as the responder sees them: R_Keys of user memory regions of the QP's PD
/// (kernel DMA MRs are not in the table: remote operations on them get a remote access NAK).
impl MemAccess for MemCtx<'_> {
    fn check(
        &mut self,
        rkey: u32,
        va: u64,
        len: u32,
        access: pwr::Access,
    ) -> Result<(), AccessError> {
        let pd = self.pd.ok_or(AccessError::Access)?;
        let need = mr_rights(access);
        self.dev
            .mr_check(
                rkey,
                KeyKind::Remote { qpn: self.qpn },
                pd,
                va,
                len as usize,
                need,
            )
            .map_err(access_error)
    }

    /// While the device has on-demand paging regions, READ responses and atomic results are
    /// placed here in the QP's own buffers, in one go with the check that their pages are
    /// present (the core asks again for a response it could not place).
    fn place_response(&mut self, slot: u32, offset: u32, data: &[u8]) -> Result<bool, AccessError> {
        match self.own {
            Some(own) if self.dev.has_odp() => {
                place_now(self, own.bufs(slot as usize), offset, data)
            }
            _ => Ok(false),
        }
    }

    /// While the device has on-demand paging regions, every WRITE packet is placed here, in
    /// one go with the check that its pages are present (a page could go between a separate
    /// check and the copy).
    fn place_write(&mut self, rkey: u32, va: u64, data: &[u8]) -> Result<bool, AccessError> {
        if !self.dev.has_odp() {
            return Ok(false);
        }
        let Some(pd) = self.pd else { return Ok(false) };
        match self
            .dev
            .mr_copy_to(rkey, KeyKind::Remote { qpn: self.qpn }, pd, va, data)
        {
            Ok(()) => Ok(true),
            Err(crate::mr::MrError::NotPresent) => Err(AccessError::NotPresent),
            // Left to the placement, which fails the same way and reports it.
            Err(_) => Ok(false),
        }
    }

    fn atomic(&mut self, rkey: u32, va: u64, op: pwr::AtomicOp) -> Result<u64, AccessError> {
        let pd = self.pd.ok_or(AccessError::Access)?;
        self.dev
            .mr_atomic(
                rkey,
                self.qpn,
                pd,
                va,
                AccessFlags::REMOTE_ATOMIC,
                |old| match op {
                    pwr::AtomicOp::CmpSwap { compare, swap } => (old == compare).then_some(swap),
                    pwr::AtomicOp::FetchAdd { add } => Some(old.wrapping_add(add)),
                },
            )
            .map_err(access_error)
    }

    fn atomic_write(&mut self, rkey: u32, va: u64, value: [u8; 8]) -> Result<(), AccessError> {
        let pd = self.pd.ok_or(AccessError::Access)?;
        self.dev
            .mr_atomic(rkey, self.qpn, pd, va, AccessFlags::REMOTE_WRITE, |_| {
                Some(u64::from_ne_bytes(value))
            })
            .map(|_| ())
            .map_err(access_error)
    }

    fn flush(
        &mut self,
        rkey: u32,
        va: u64,
        len: u32,
        whole: bool,
        access: pwr::Access,
    ) -> Result<(), AccessError> {
        let pd = self.pd.ok_or(AccessError::Access)?;
        self.dev
            .mr_flush(
                rkey,
                self.qpn,
                pd,
                va,
                len as usize,
                whole,
                mr_rights(access),
            )
            .map_err(|_| AccessError::Access)
    }
}

/// The core's remote rights and the `ib_access_flags` bit of each, for QPs and MRs alike.
pub(super) const RIGHTS: [(pwr::Access, AccessFlags); 5] = [
    (pwr::Access::READ, AccessFlags::REMOTE_READ),
    (pwr::Access::WRITE, AccessFlags::REMOTE_WRITE),
    (pwr::Access::ATOMIC, AccessFlags::REMOTE_ATOMIC),
    (pwr::Access::FLUSH_GLOBAL, AccessFlags::FLUSH_GLOBAL),
    (pwr::Access::FLUSH_PERSISTENT, AccessFlags::FLUSH_PERSISTENT),
];

/// The memory region rights that grant the core's remote `access`.
pub(super) fn mr_rights(access: pwr::Access) -> AccessFlags {
    RIGHTS
        .into_iter()
        .filter(|(a, _)| access.contains(*a))
        .fold(AccessFlags::NONE, |need, (_, f)| need.union(f))
}

/// The network header of a received packet as a UD receive buffer's 40-byte GRH area holds it:
/// an IPv6 header as is, an IPv4 header in the last 20 bytes (`union rdma_network_hdr`).
pub(super) fn grh_area(ip: &[u8]) -> Option<([u8; GRH_LEN as usize], u8)> {
    let mut grh = [0u8; GRH_LEN as usize];
    match ip.first().map(|b| b >> 4) {
        Some(4) if ip.len() >= 20 => {
            grh[20..].copy_from_slice(&ip[..20]);
            Some((grh, RDMA_NETWORK_IPV4))
        }
        Some(6) if ip.len() >= 40 => {
            grh.copy_from_slice(&ip[..40]);
            Some((grh, RDMA_NETWORK_IPV6))
        }
        _ => None,
    }
}

/// `RDMA_NETWORK_IPV4` / `RDMA_NETWORK_IPV6` of `enum rdma_network_type`.
pub(super) const RDMA_NETWORK_IPV4: u8 = 2;
pub(super) const RDMA_NETWORK_IPV6: u8 = 3;

/// The `sl` of a UD receive completion: RoCE carries no service level, so the field reports the
/// packet's type as ConnectX adapters do (bits 2:0 the network header, 1 IPv6 or 2 IPv4; bit 3 set
/// for a UDP-encapsulated, RoCEv2 packet). A user-space `ibv_wc` has no `network_hdr_type`, and
/// engines read this instead: UCX's UD transport takes the GRH area's destination as an IPv4
/// address only when `sl & 7 == 2`, and drops every packet whose destination it does not own.
pub(super) fn roce_packet_type(network_type: u8) -> u8 {
    const UDP: u8 = 1 << 3;
    match network_type {
        RDMA_NETWORK_IPV4 => UDP | 2,
        _ => UDP | 1,
    }
}

/// Delivers one received packet (ICRC verified) to `qp`. Softirq context.
///
/// Returns `false` if the packet was dropped without effect (the caller counts it).
pub(crate) fn receive(qp: &Qp<MetaRoceDriver>, pkt: &Packet<'_>, ip: &[u8]) -> bool {
    let mut n = Notify::default();
    let mut ok = true;
    let timed;
    {
        let mut g = qp.inner.lock();
        let inner = &mut *g;
        let broken = match inner.state {
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe => false,
            // Only a retransmission of the request that broke it gets an answer (below).
            QpState::Err if qp.service() == Service::Rc => true,
            _ => return false,
        };
        // One P_Key per port, the default one; its membership bit may differ.
        if pkt.hdr.bth.pkey & 0x7fff != 0x7fff {
            return false;
        }
        // A connected QP takes packets from its peer's address to its own only (a QP number
        // and PSN are easy to guess: an off-path host must not inject into it).
        if matches!(qp.service(), Service::Rc | Service::Uc) {
            let from_peer = inner
                .attrs
                .av
                .as_ref()
                .is_some_and(|av| packet::from_peer(ip, &av.sgid, &av.dgid));
            if !from_peer {
                qp.device().count(Counter::RcvdBadAddr, 1);
                return false;
            }
        }
        let Some(engine) = inner.transport.roce_mut() else {
            return false;
        };
        if broken {
            // The NAK that broke the QP may have been lost: answer the peer's retransmission
            // of that request with it again (bounded by the core), so its requester completes
            // with the error instead of exhausting its retries. The packet is dropped.
            let again = engine.repeat_nak(pkt);
            drop(g);
            if again {
                xmit::schedule(qp);
            }
            return false;
        }
        let now = qp.device().now_ns();
        let mem = MemCtx::of(qp);
        let srq = qp.srq();
        let mut src = RecvSource::new(qp, &mut inner.rq, srq);
        let (wqes, own) = inner.sq.split();
        let out = engine.receive(
            now,
            pkt,
            wqes,
            &mut MemCtx {
                own: Some(own),
                ..mem
            },
            &mut src,
        );
        n.srq_limit |= src.srq_limit;
        // Receive requests of an SRQ name memory of the SRQ's protection domain.
        let rmem = match srq {
            Some(s) => MemCtx {
                pd: Some(s.pd().id()),
                ..mem
            },
            None => mem,
        };
        let ud = qp.service() == Service::Ud;
        let mut network_type = 0;
        let mut place_failed = false;
        if let Some(place) = out.place {
            let placed = match place {
                pwr::Place::Recv { id, offset, len } => {
                    // (Outstanding by the responder's order; checked all the same.)
                    let bufs = inner
                        .rq
                        .outstanding(id as u32)
                        .map(|(_, b)| b)
                        .ok_or(EINVAL);
                    let data = pkt.payload.get(..len as usize).ok_or(EINVAL);
                    data.and_then(|d| {
                        scatter(&rmem, bufs?.iter().map(Seg::as_ref), offset as usize, d)
                    })
                }
                pwr::Place::ReadResp { slot, offset, len } => {
                    let bufs = inner.sq.bufs(slot as usize & (inner.sq.wqes.len() - 1));
                    let data = pkt.payload.get(..len as usize).ok_or(EINVAL);
                    data.and_then(|d| scatter(&mem, bufs, offset as usize, d))
                }
                pwr::Place::AtomicResult { slot, value } => {
                    let bufs = inner.sq.bufs(slot as usize & (inner.sq.wqes.len() - 1));
                    scatter(&mem, bufs, 0, &value.to_ne_bytes())
                }
                // Checked by `MemCtx::check` when the WRITE began.
                pwr::Place::Rdma { rkey, va, len } => {
                    match (mem.pd, pkt.payload.get(..len as usize)) {
                        (Some(pd), Some(d)) => mem
                            .dev
                            .mr_copy_to(rkey, KeyKind::Remote { qpn: mem.qpn }, pd, va, d)
                            .map_err(|_| EFAULT),
                        _ => Err(EINVAL),
                    }
                }
            };
            if placed.is_err() {
                qp.device().count(Counter::SendErr, 1);
                place_failed = true;
                // The peer learns why instead of retrying into a broken QP: a receive WQE it
                // could not use is a remote operational error, RDMA memory that became unusable
                // after its check a remote access error (READ responses and atomic results are
                // this QP's own requests: a local error only).
                let code = match place {
                    pwr::Place::Recv { .. } => Some(RoceNak::RemoteOperational),
                    pwr::Place::Rdma { .. } => Some(RoceNak::RemoteAccess),
                    _ => None,
                };
                if let (Some(code), Some(engine)) = (code, inner.transport.roce_mut()) {
                    engine.placement_failed(pkt.hdr.bth.psn, code);
                }
                // Our own READ or atomic lost its local buffers: it fails with a local
                // protection error (rdma_rxe's completer does the same), not as flushed.
                if let (
                    pwr::Place::ReadResp { slot, .. } | pwr::Place::AtomicResult { slot, .. },
                    Some(engine),
                ) = (place, inner.transport.roce_mut())
                {
                    engine.response_failed(slot, pwr::WcStatus::LocProtErr, &mut inner.sq.wqes);
                }
            }
        }
        if let Some(c) = out.completion {
            let (entry, bufs) = inner.rq.entry(c.id);
            let mut wc = WorkCompletion::new(
                entry.wr_id,
                wc_status(c.status),
                match c.kind {
                    pwr::RecvKind::Send => WcOpcode::Recv,
                    pwr::RecvKind::WriteImm => WcOpcode::RecvRdmaWithImm,
                },
                qp.id(),
            );
            wc.byte_len = c.byte_len;
            wc.imm = c.imm;
            if place_failed && wc.status == WcStatus::Success {
                wc.status = WcStatus::LocProtErr;
            }
            // SEND with invalidate: the named fast-register MR of this QP's PD becomes
            // invalid before the consumer sees the completion. A key that cannot be
            // invalidated fails the receive and breaks the QP (rdma_rxe does the same).
            if let (Some(rkey), WcStatus::Success) = (c.invalidate, wc.status) {
                let done = mem.pd.map(|pd| qp.device().mr_invalidate(rkey, pd));
                if matches!(done, Some(Ok(()))) {
                    wc.invalidate_rkey = Some(rkey);
                } else {
                    wc.status = WcStatus::RemInvReqErr;
                    place_failed = true;
                }
            }
            if ud {
                wc.src_qp = c.src_qp.unwrap_or(0);
                wc.pkey_index = 0;
                if c.status == pwr::WcStatus::Success {
                    match grh_area(ip) {
                        Some((grh, ty)) => {
                            network_type = ty;
                            if scatter(&rmem, bufs.iter().map(Seg::as_ref), 0, &grh).is_err() {
                                wc.status = WcStatus::LocLenErr;
                            }
                        }
                        None => wc.status = WcStatus::GeneralErr,
                    }
                    wc.flags = WcFlags::GRH | WcFlags::WITH_NETWORK_HDR_TYPE;
                    wc.network_hdr_type = network_type;
                    wc.sl = roce_packet_type(network_type);
                }
            }
            // The buffers go before the completion: its ticket retires them as it is polled.
            let wc = with_ticket(wc, inner.rq.complete(c.id));
            qp.device().count(Counter::RdmaRecvs, 1);
            n.recv |= complete(qp, qp.recv_cq(), wc, pkt.hdr.bth.solicited);
        }
        if out.drop.is_some() && out.completion.is_none() && out.place.is_none() {
            ok = false;
        }
        // A malformed entry in a user receive ring, or payload that could not be placed,
        // breaks the QP (as a local QP operation / protection error would).
        if inner.rq.user_errors > 0 || place_failed {
            // A malformed receive WQE: the request that needed it is answered with a NAK
            // (remote operational error), not an RNR NAK the peer would retry.
            if inner.rq.user_errors > 0 {
                if let Some(engine) = inner.transport.roce_mut() {
                    engine.placement_failed(pkt.hdr.bth.psn, RoceNak::RemoteOperational);
                }
            }
            inner.rq.user_errors = 0;
            if inner.state != QpState::Err {
                enter_error(qp, inner, &mut n);
            }
        }
        timed = settle(qp, inner, &mut n);
    }
    n.deliver(qp);
    if timed {
        timer::arm(qp);
    }
    // Acknowledgements and responses leave from here, or through the transmit worker.
    if qp.service() != Service::Ud {
        xmit::from_receive(qp, false);
    }
    ok
}
