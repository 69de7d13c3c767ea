// SPDX-License-Identifier: GPL-2.0

//! The transmit side of a QP: packets pulled for the netdev, timers and packet building.

use super::*;

/// One packet pulled from the core, ready for the network: its RoCE payload (BTH to ICRC
/// slot) in an skb and where it goes.
pub(crate) struct OutPacket {
    pub(crate) skb: kernel::net::skbuff::SkBuff,
    pub(crate) av: RoceAv,
    pub(crate) src_qpn: u32,
    pub(crate) dst_qpn: u32,
    /// A native packet (`native.rs`): its UDP source port (the path) and whether it is
    /// ECN-capable; the skb then holds the MetaRoCE header and payload.
    pub(crate) native: Option<(u16, bool)>,
}

impl OutPacket {
    /// A native packet from `peer`'s connection.
    pub(crate) fn native(
        skb: kernel::net::skbuff::SkBuff,
        peer: &Peer,
        src_port: u16,
        ect: bool,
    ) -> Self {
        let av = RoceAv {
            dgid: peer.dgid,
            sgid: peer.sgid,
            sgid_index: 0,
            dmac: [0; 6],
            flow_label: 0,
            hop_limit: 64,
            traffic_class: 0,
            sl: 0,
        };
        Self {
            skb,
            av,
            src_qpn: 0,
            dst_qpn: 0,
            native: Some((src_port, ect)),
        }
    }
}

/// Pulls up to `out.len()` packets from the QP's core into `out` (the transmit worker's
/// batch) and reports the send completions that became ready. Returns the number pulled.
/// Any context (GFP_ATOMIC skbs under the QP lock).
pub(crate) fn pull_tx(
    qp: &Qp<MetaRoceDriver>,
    headroom: usize,
    out: &mut [Option<OutPacket>],
) -> usize {
    if let Some(peer) = native_peer(qp) {
        return native::pull_tx(qp.device(), &peer, headroom, out);
    }
    let mut n = Notify::default();
    let mut got = 0;
    let timed;
    {
        let mut g = qp.inner.lock();
        let inner = &mut *g;
        if !matches!(
            inner.state,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Err | QpState::Sqe
        ) {
            return 0;
        }
        let now = qp.device().now_ns();
        while got < out.len() {
            let Some(engine) = inner.engine.as_mut() else {
                break;
            };
            let Some(d) = engine.poll_tx(now, &mut inner.sq.wqes) else {
                break;
            };
            match build_packet(qp, inner, &d, headroom) {
                Ok(p) => {
                    out[got] = Some(p);
                    got += 1;
                }
                Err(e) => {
                    qp.device().count(Counter::SendErr, 1);
                    if let (BuildError::Gather, PayloadRef::Sq { slot, .. }, Some(engine)) =
                        (e, d.payload, inner.engine.as_mut())
                    {
                        engine.local_error(slot, pwr::WcStatus::LocProtErr, &mut inner.sq.wqes);
                    }
                }
            }
        }
        timed = settle(qp, inner, &mut n);
    }
    n.deliver(qp);
    if timed {
        timer::arm(qp);
    }
    got
}

/// After the core ran (a packet in, packets out, a timer): reports the send completions it has
/// ready, moves the QP to the error state if the core entered it, and returns whether the core
/// waits for a deadline (local ACK timeout or RNR retry), i.e. whether the QP needs the timer.
pub(super) fn settle(qp: &Qp<MetaRoceDriver>, inner: &mut QpInner, n: &mut Notify) -> bool {
    reap_send(qp, inner, n);
    if inner.engine.as_ref().is_some_and(|e| e.is_error()) && inner.state != QpState::Err {
        enter_error(qp, inner, n);
    }
    inner
        .engine
        .as_ref()
        .is_some_and(|e| e.next_deadline().is_some())
}

/// Runs the QP's core timers if a deadline passed and lets the transmit worker send what they
/// queued (retransmissions), reporting the completions they produced (retry exhaustion). Called
/// by the device's timer tick (`timer.rs`), process context. Returns whether a deadline is still
/// pending.
pub(crate) fn on_tick(qp: &Qp<MetaRoceDriver>) -> bool {
    if let Some(peer) = native_peer(qp) {
        let (fired, pending) = native::on_tick(qp.device(), &peer);
        if fired {
            xmit::schedule(qp);
        }
        return pending;
    }
    let mut n = Notify::default();
    let mut fired = false;
    let timed;
    {
        let mut g = qp.inner.lock();
        let inner = &mut *g;
        let now = qp.device().now_ns();
        if let Some(engine) = inner.engine.as_mut() {
            if engine.next_deadline().is_some_and(|d| d <= now) {
                engine.on_timer(now, &mut inner.sq.wqes);
                fired = true;
            }
        }
        timed = settle(qp, inner, &mut n);
    }
    n.deliver(qp);
    if fired {
        xmit::schedule(qp);
    }
    timed
}

/// Why no packet was built.
#[derive(Clone, Copy)]
pub(crate) enum BuildError {
    /// The send request's local data could not be read: its memory region was deregistered
    /// (or lost local access) after the request was posted. The request fails with a local
    /// protection error.
    Gather,
    /// Anything else (no memory for the skb): the packet is dropped and sent again by the
    /// transport's retry.
    Drop,
}

impl From<Error> for BuildError {
    fn from(_: Error) -> Self {
        BuildError::Drop
    }
}

pub(super) fn build_packet(
    qp: &Qp<MetaRoceDriver>,
    inner: &mut QpInner,
    d: &TxDesc,
    headroom: usize,
) -> core::result::Result<OutPacket, BuildError> {
    let plen = d.payload.len() as usize;
    let (av, dst_qpn) = if qp.transport() == Transport::Ud {
        // One packet per datagram work request, in posting order.
        let slot = inner.sq.slot(inner.sq.ud_sent);
        inner.sq.ud_sent = inner.sq.ud_sent.wrapping_add(1);
        (
            inner.sq.avs.get(slot).copied().flatten().ok_or(EINVAL)?,
            d.hdr.bth.dest_qp,
        )
    } else {
        (inner.attrs.av.ok_or(EINVAL)?, d.hdr.bth.dest_qp)
    };
    let total = crate::proto::packet::wire_len(&d.hdr, plen).ok_or(EINVAL)?;
    let mut skb = kernel::net::skbuff::SkBuff::alloc(headroom + total, GFP_ATOMIC)?;
    skb.reserve(headroom)?;
    let buf = skb.put(total)?;
    let hl = crate::proto::packet::write_headers(&d.hdr, plen, buf).map_err(|_| EINVAL)?;
    let end = hl.checked_add(plen).ok_or(EINVAL)?;
    let mem = MemCtx::of(qp);
    match d.payload {
        PayloadRef::None => {}
        PayloadRef::Sq {
            slot,
            offset,
            len: _,
        } => {
            let slot = slot as usize & (inner.sq.wqes.len() - 1);
            match inner.sq.inline(slot) {
                Some(data) => {
                    let src = data
                        .get(offset as usize..offset as usize + plen)
                        .ok_or(EINVAL)?;
                    buf[hl..end].copy_from_slice(src);
                }
                // On-demand paging memory that is not present (a fault was asked for): the
                // packet is dropped and the transport's retry sends it again.
                None => gather(
                    &mem,
                    inner.sq.bufs(slot),
                    offset as usize,
                    &mut buf[hl..end],
                )
                .map_err(|e| {
                    if e == EAGAIN {
                        BuildError::Drop
                    } else {
                        BuildError::Gather
                    }
                })?,
            }
        }
        // READ response data, from memory `MemCtx::check` approved when the READ arrived.
        PayloadRef::Mr { rkey, va, len: _ } => {
            let pd = mem.pd.ok_or(EINVAL)?;
            mem.dev
                .mr_copy_from(
                    rkey,
                    KeyKind::Remote { qpn: mem.qpn },
                    pd,
                    va,
                    &mut buf[hl..end],
                )
                .map_err(|_| EFAULT)?;
        }
    }
    // Pad and ICRC slot.
    buf[end..].fill(0);
    Ok(OutPacket {
        skb,
        av,
        src_qpn: qp.qpn,
        dst_qpn,
        native: None,
    })
}

// Native RC QPs (`native.rs`): the QP keeps its work requests; the connection moves them.
