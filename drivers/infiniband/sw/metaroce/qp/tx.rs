// SPDX-License-Identifier: GPL-2.0

//! The transmit side of a QP: packets pulled for the netdev, timers and packet building.

use super::*;
use crate::xmit::{BuildError, OutPacket, Pull};

/// Pulls up to `out.len()` packets from the QP's core into `out` (the transmit worker's
/// batch) and reports the send completions that became ready; with [`Pull::Control`], only a
/// native connection's control packets. Returns the number pulled.
/// Any context (GFP_ATOMIC skbs under the QP lock).
pub(crate) fn pull_tx(
    qp: &Qp<MetaRoceDriver>,
    headroom: usize,
    out: &mut [Option<OutPacket>],
    pull: Pull,
) -> usize {
    if let Some(peer) = native_peer(qp) {
        return native::pull_tx(qp.device(), &peer, Some(qp), headroom, out, pull);
    }
    if pull == Pull::Control {
        return 0;
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
            let Some(engine) = inner.transport.roce_mut() else {
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
                        (e, d.payload, inner.transport.roce_mut())
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
    if inner.transport.roce().is_some_and(|e| e.is_error()) && inner.state != QpState::Err {
        enter_error(qp, inner, n);
    }
    inner
        .transport
        .roce()
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
        if let Some(engine) = inner.transport.roce_mut() {
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

/// Where a packet's payload comes from.
#[derive(Clone, Copy)]
pub(super) enum PayloadSrc {
    /// Bytes at `offset` of the request in send queue slot `slot`: its inline data or buffers.
    Request { slot: usize, offset: usize },
    /// A READ response: the QP's memory at remote key `rkey`, address `va`.
    Mr { rkey: u32, va: u64 },
}

/// Copies a packet's payload into `out`: the one place where either transport reads local
/// memory for the wire. A READ response's memory is checked again (the region may have changed
/// since the request was accepted). Called with the QP's lock held (`sq` is under it), which
/// keeps a request's kernel buffers reserved while they are read.
pub(super) fn copy_payload(
    qp: &Qp<MetaRoceDriver>,
    sq: &SendRing,
    src: PayloadSrc,
    out: &mut [u8],
) -> core::result::Result<(), BuildError> {
    let mem = MemCtx::of(qp);
    match src {
        PayloadSrc::Request { slot, offset } => match sq.inline(slot) {
            Some(data) => {
                let end = offset.checked_add(out.len()).ok_or(EINVAL)?;
                out.copy_from_slice(data.get(offset..end).ok_or(EINVAL)?);
                Ok(())
            }
            // On-demand paging memory that is not present (a fault was asked for): the packet
            // is dropped and the transport's retry sends it again.
            None => gather(&mem, sq.bufs(slot), offset, out).map_err(|e| {
                if e == EAGAIN {
                    BuildError::Drop
                } else {
                    BuildError::Gather
                }
            }),
        },
        // A zero-length READ's one response reads nothing (its key was never checked: C9-88).
        PayloadSrc::Mr { .. } if out.is_empty() => Ok(()),
        PayloadSrc::Mr { rkey, va } => {
            let pd = mem.pd.ok_or(EINVAL)?;
            let kind = KeyKind::Remote { qpn: qp.qpn };
            mem.dev
                .mr_check(rkey, kind, pd, va, out.len(), AccessFlags::REMOTE_READ)
                .map_err(|_| EACCES)?;
            Ok(mem
                .dev
                .mr_copy_from(rkey, kind, pd, va, out)
                .map_err(|_| EFAULT)?)
        }
    }
}

pub(super) fn build_packet(
    qp: &Qp<MetaRoceDriver>,
    inner: &mut QpInner,
    d: &TxDesc,
    headroom: usize,
) -> core::result::Result<OutPacket, BuildError> {
    let plen = d.payload.len() as usize;
    let (av, dst_qpn) = if qp.service() == Service::Ud {
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
    let mut skb = xmit::frame(headroom, total)?;
    let buf = skb.data_mut()?;
    let hl = crate::proto::packet::write_headers(&d.hdr, plen, buf).map_err(|_| EINVAL)?;
    let end = hl.checked_add(plen).ok_or(EINVAL)?;
    let src = match d.payload {
        PayloadRef::None => None,
        PayloadRef::Sq {
            slot,
            offset,
            len: _,
        } => Some(PayloadSrc::Request {
            slot: inner.sq.slot(slot),
            offset: offset as usize,
        }),
        PayloadRef::Mr { rkey, va, len: _ } => Some(PayloadSrc::Mr { rkey, va }),
    };
    if let Some(src) = src {
        copy_payload(qp, &inner.sq, src, buf.get_mut(hl..end).ok_or(EINVAL)?)?;
    }
    // Pad and ICRC slot: left zero by `xmit::frame`.
    Ok(OutPacket {
        skb,
        av,
        src_qpn: qp.qpn,
        dst_qpn,
        native: None,
    })
}

// Native RC QPs (`native.rs`): the QP keeps its work requests; the connection moves them.
