// SPDX-License-Identifier: GPL-2.0

//! The user ABI the driver serves to the provider library of a process: what its rings hold
//! and what the uverbs commands carry beyond the core ones.
//!
//! Two ABIs, one per kernel build:
//! - MetaRoCE's own (include/uapi/rdma/metaroce-abi.h, [`own`]), with driver id
//!   `RDMA_DRIVER_METAROCE`, driven by libmetaroce (provider/metaroce);
//! - rdma_rxe's (include/uapi/rdma/rdma_user_rxe.h, [`rxe`]), with `RDMA_DRIVER_RXE`, driven
//!   by rdma-core's stock librxe: transitional, with `CONFIG_RDMA_METAROCE_RXE_ABI`.
//!
//! Both parse a *copy* of a ring slot into the same [`SendWqe`] or receive triple: nothing here
//! reads shared memory, and every field is checked before use (a process may write anything
//! into its rings). Everything above this module is the same for both.

mod own;
mod rxe;

use crate::proto::ring::Layout;
use crate::proto::wr as pwr;
use crate::qp::{Seg, SegRef};
use crate::uqueue::UQueue;
use kernel::prelude::*;
use kernel::rdma::cq::{WcOpcode, WorkCompletion};
use kernel::rdma::device::DriverId;
use kernel::rdma::udata::Udata;

/// Whether this kernel serves MetaRoCE's own ABI (else rdma_rxe's).
pub(crate) const OWN: bool = !cfg!(CONFIG_RDMA_METAROCE_RXE_ABI);

/// The driver id the devices report: user space picks the provider library by it.
pub(crate) const DRIVER_ID: DriverId = if OWN {
    DriverId::METAROCE
} else {
    DriverId::RXE
};

/// Where a ring's indices and slots lie.
pub(crate) const RING_LAYOUT: Layout = if OWN { Layout::METAROCE } else { Layout::RXE };

/// Bytes of a send WQE before its SGEs or inline data.
pub(crate) const SEND_WQE_HDR: usize = if OWN {
    own::SEND_WQE_HDR
} else {
    rxe::SEND_WQE_HDR
};

/// Bytes of a receive WQE before its SGEs.
pub(crate) const RECV_WQE_HDR: usize = if OWN {
    own::RECV_WQE_HDR
} else {
    rxe::RECV_WQE_HDR
};

/// Where a receive WQE's SGE count (u32) is.
const RECV_NUM_SGE: usize = if OWN {
    own::RECV_NUM_SGE
} else {
    rxe::RECV_NUM_SGE
};

/// Bytes of an SGE record (`addr` u64, `length` u32, `lkey` u32 in both ABIs).
pub(crate) const SGE_LEN: usize = 16;

/// Slot size of a user CQ ring: at least one completion of the ABI.
pub(crate) const CQE_SLOT: usize = if OWN { own::CQE_LEN } else { 64 };

/// Largest encoded completion.
const CQE_MAX: usize = 64;
const _: () = assert!(own::CQE_LEN <= CQE_MAX && kernel::rdma::cq::UVERBS_WC_LEN <= CQE_MAX);
const _: () = assert!(CQE_SLOT >= own::CQE_LEN || !OWN);
const _: () = assert!(CQE_SLOT >= kernel::rdma::cq::UVERBS_WC_LEN || OWN);

pub(crate) fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

pub(crate) fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

/// Reads `num` SGEs at `off` into `out` and returns their total length.
fn sges(b: &[u8], off: usize, num: usize, out: &mut [Seg]) -> Option<u32> {
    let mut total: u32 = 0;
    for (i, o) in out.iter_mut().enumerate().take(num) {
        let at = off + i * SGE_LEN;
        let addr = u64_at(b, at)?;
        let len = u32_at(b, at + 8)?;
        let lkey = u32_at(b, at + 12)?;
        *o = Seg::User { addr, len, lkey };
        total = total.checked_add(len)?;
    }
    Some(total)
}

/// The total length of the `num` SGE records at `off` of `b`, copied to `out` as they are (the
/// send ring's slot keeps them in this form, see [`sge_at`]). `None` if `b` or `out` is too
/// short or the lengths overflow.
fn copy_sges(b: &[u8], off: usize, num: usize, out: &mut [u8]) -> Option<u32> {
    let n = num.checked_mul(SGE_LEN)?;
    let src = b.get(off..off.checked_add(n)?)?;
    out.get_mut(..n)?.copy_from_slice(src);
    let mut total: u32 = 0;
    for i in 0..num {
        total = total.checked_add(u32_at(src, i * SGE_LEN + 8)?)?;
    }
    Some(total)
}

/// SGE record `i` of a send ring slot filled by [`parse_send`].
pub(crate) fn sge_at(slot: &[u8], i: usize) -> Option<SegRef<'static>> {
    let at = i.checked_mul(SGE_LEN)?;
    Some(Seg::User {
        addr: u64_at(slot, at)?,
        len: u32_at(slot, at + 8)?,
        lkey: u32_at(slot, at + 12)?,
    })
}

/// A parsed send WQE.
pub(crate) struct SendWqe {
    pub(crate) wr_id: u64,
    pub(crate) op: pwr::SendOp,
    pub(crate) wc_opcode: WcOpcode,
    pub(crate) signaled: bool,
    pub(crate) solicited: bool,
    pub(crate) fence: bool,
    /// Total length of the local data.
    pub(crate) len: u32,
    /// SGEs written to the caller's slice (0 for inline data).
    pub(crate) num_sge: u32,
    /// Inline data length, copied to the caller's buffer.
    pub(crate) inline_len: Option<u32>,
    /// UD QPs: the destination.
    pub(crate) ud: Option<UdWqe>,
    /// A local operation (the core sees `SendOp::Local`), carried out when the request is
    /// taken from the ring.
    pub(crate) local: Option<LocalWqe>,
}

/// The local operations a user send ring may hold.
pub(crate) enum LocalWqe {
    /// Invalidate the type 2 memory window of this R_Key.
    Invalidate { rkey: u32 },
    /// Bind a memory window (also what `ibv_bind_mw` posts for a type 1 window).
    Bind(crate::mr::Bind),
}

/// The destination fields of a UD send WQE. The address handle is named by the number the
/// driver returned when it was created (`ah_num`, never 0).
pub(crate) struct UdWqe {
    pub(crate) remote_qpn: u32,
    pub(crate) remote_qkey: u32,
    pub(crate) ah_num: u32,
}

/// Why a send WQE was refused.
#[derive(Debug)]
pub(crate) enum BadWqe {
    /// Unknown or unsupported opcode.
    Opcode,
    /// Too many SGEs, too much inline data, or inconsistent lengths.
    Length,
}

/// Parses a send WQE (a copy of its slot), copying its inline data or its SGE records (read
/// back with [`sge_at`]) to `data`, the kernel's slot for it; `ud` for a UD QP's ring (whose
/// WQEs carry a destination).
pub(crate) fn parse_send(
    b: &[u8],
    ud: bool,
    max_sge: u32,
    data: &mut [u8],
) -> Result<SendWqe, BadWqe> {
    if OWN {
        own::parse_send(b, ud, max_sge, data)
    } else {
        rxe::parse_send(b, ud, max_sge, data)
    }
}

/// The bytes of the send WQE whose header `hdr` is (a copy): the header and the SGE records or
/// inline data it names (saturating: the caller clamps to the slot).
pub(crate) fn send_wqe_len(hdr: &[u8]) -> usize {
    if OWN {
        own::send_wqe_len(hdr)
    } else {
        rxe::send_wqe_len(hdr)
    }
}

/// The bytes of the receive WQE whose header `hdr` is (a copy), as [`send_wqe_len`].
pub(crate) fn recv_wqe_len(hdr: &[u8]) -> usize {
    let num = u32_at(hdr, RECV_NUM_SGE).unwrap_or(u32::MAX) as usize;
    RECV_WQE_HDR.saturating_add(num.saturating_mul(SGE_LEN))
}

/// Parses a receive WQE (a copy of its slot): `(wr_id, num_sge, total length)`, its SGEs in
/// `out`. `None` if it names more SGEs than `max_sge` (or the slot holds) or the lengths
/// overflow.
pub(crate) fn parse_recv(b: &[u8], max_sge: u32, out: &mut [Seg]) -> Option<(u64, u32, u32)> {
    // Both ABIs: `wr_id` first, the SGE count at `RECV_NUM_SGE`, the records after the header.
    let wr_id = u64_at(b, 0)?;
    let num = u32_at(b, RECV_NUM_SGE)?;
    if num > max_sge || num as usize > out.len() {
        return None;
    }
    let len = sges(b, RECV_WQE_HDR, num as usize, out)?;
    Some((wr_id, num, len))
}

/// Bytes for a command's response, built up front to back.
pub(crate) struct Resp {
    buf: [u8; RESP_MAX],
    len: usize,
}

/// The longest response built here (`create_qp` in MetaRoCE's ABI: three 24-byte records).
const RESP_MAX: usize = 72;

impl Resp {
    fn new() -> Self {
        Self {
            buf: [0; RESP_MAX],
            len: 0,
        }
    }

    /// Appends `b` (a response never exceeds the buffer: no caller here appends more than
    /// [`RESP_MAX`] bytes; an overflow would only truncate).
    fn put(&mut self, b: &[u8]) -> &mut Self {
        let end = core::cmp::min(self.len + b.len(), self.buf.len());
        self.buf[self.len..end].copy_from_slice(&b[..end - self.len]);
        self.len = end;
        self
    }

    /// The response as the process reads it.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// Where the process maps `q` (`struct metaroce_ring_info`, or librxe's `struct mminfo`).
fn put_ring(r: &mut Resp, q: &UQueue) {
    let geo = q.geometry();
    // `buf_len` fits `u32` (`SharedBuf::new` refuses larger buffers).
    let size = q.mmap_size() as u32;
    r.put(&q.mmap_offset().to_ne_bytes())
        .put(&size.to_ne_bytes());
    if OWN {
        // Slots and slot size are powers of two up to 2^20 and 2^16 (`Geometry`).
        let slots = geo.mask() + 1;
        r.put(&slots.to_ne_bytes())
            .put(&(geo.elem_size() as u32).to_ne_bytes())
            .put(&[0; 4]);
    } else {
        r.put(&[0; 4]);
    }
}

/// The response of `create_cq` and `resize_cq`.
pub(crate) fn cq_resp(q: &UQueue) -> Resp {
    let mut r = Resp::new();
    put_ring(&mut r, q);
    r
}

/// The record of a ring that does not exist (all zero).
fn put_no_ring(r: &mut Resp) {
    r.put(&[0; 24][..if OWN { 24 } else { 16 }]);
}

/// The response of `create_qp`: the rings' mappings (`rq` is `None` with an SRQ) and, in
/// MetaRoCE's ABI, the stats page's (`mmap` offset and length; `None`: not a native QP).
pub(crate) fn qp_resp(sq: &UQueue, rq: Option<&UQueue>, stats: Option<(u64, usize)>) -> Resp {
    let mut r = Resp::new();
    // librxe's `struct rxe_create_qp_resp` has the receive ring first.
    if OWN {
        put_ring(&mut r, sq);
    }
    match rq {
        Some(q) => put_ring(&mut r, q),
        None => put_no_ring(&mut r),
    }
    if !OWN {
        put_ring(&mut r, sq);
    } else {
        match stats {
            // A page, not a ring: no slots. Its length is a page (fits `u32`).
            Some((offset, len)) => {
                r.put(&offset.to_ne_bytes())
                    .put(&(len as u32).to_ne_bytes())
                    .put(&[0; 12]);
            }
            None => put_no_ring(&mut r),
        }
    }
    r
}

/// The response of `create_srq`: its ring, its number, 4 reserved bytes.
pub(crate) fn srq_resp(q: &UQueue, srq_num: u32) -> Resp {
    let mut r = Resp::new();
    put_ring(&mut r, q);
    r.put(&srq_num.to_ne_bytes()).put(&[0; 4]);
    r
}

/// What `modify_srq` writes at the user address its request names when it resizes the ring.
pub(crate) fn srq_resize_info(q: &UQueue) -> Resp {
    cq_resp(q)
}

/// The response of `create_ah` for a user AH: its number, 4 reserved bytes (both ABIs).
pub(crate) fn ah_resp(ah_num: u32) -> Resp {
    let mut r = Resp::new();
    r.put(&ah_num.to_ne_bytes()).put(&[0; 4]);
    r
}

/// What the device tells a provider in the `get_context` handshake.
pub(crate) struct DeviceInfo {
    /// RC QPs use the native transport by default (a `metaroce-native` device).
    pub(crate) native: bool,
    /// Largest inline payload of a send WQE.
    pub(crate) max_inline: u32,
    /// Largest scatter list of a WQE.
    pub(crate) max_sge: u32,
    /// Most paths of a native connection.
    pub(crate) max_paths: u32,
}

/// A user context's handshake (`get_context`): librxe sends and expects nothing; libmetaroce
/// names the ABI version it speaks and learns the device's.
pub(crate) fn alloc_ucontext(udata: &Udata<'_>, info: &DeviceInfo) -> Result {
    if !OWN {
        return udata.expect_no_request();
    }
    own::alloc_ucontext(udata, info)
}

/// What a process asked of a QP it creates (`struct metaroce_create_qp_req`; librxe asks
/// nothing).
#[derive(Clone, Copy, Default)]
pub(crate) struct QpRequest {
    /// `Some(true)`: the native transport, `Some(false)`: RoCEv2, `None`: the device's default.
    pub(crate) native: Option<bool>,
    /// Paths of the native connection the QP is the first to need (0: the device's default).
    pub(crate) paths: u32,
    /// A native QP maps its connection's figures (`struct metaroce_conn_stats`).
    pub(crate) conn_stats: bool,
}

/// The request of a user `create_qp` (`EINVAL` for a malformed one).
pub(crate) fn qp_request(udata: &Udata<'_>) -> Result<QpRequest> {
    if !OWN {
        udata.expect_no_request()?;
        return Ok(QpRequest::default());
    }
    own::qp_request(udata)
}

/// A completion as the user CQ ring holds it.
pub(crate) struct Cqe {
    buf: [u8; CQE_MAX],
    len: usize,
}

impl Cqe {
    /// The completion's bytes.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// Encodes `wc` of QP number `qp_num` for a user CQ ring.
pub(crate) fn cqe(wc: &WorkCompletion, qp_num: u32) -> Cqe {
    let mut c = Cqe {
        buf: [0; CQE_MAX],
        len: 0,
    };
    if OWN {
        c.buf[..own::CQE_LEN].copy_from_slice(&own::cqe(wc, qp_num));
        c.len = own::CQE_LEN;
    } else {
        let w = wc.to_uverbs(qp_num);
        c.buf[..w.len()].copy_from_slice(&w);
        c.len = w.len();
    }
    c
}
