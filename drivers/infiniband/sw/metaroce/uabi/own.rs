// SPDX-License-Identifier: GPL-2.0

//! MetaRoCE's own user ABI (include/uapi/rdma/metaroce-abi.h, version 1), which libmetaroce
//! speaks. Offsets, as `offsetof` reports them for the header on every Linux ABI (the
//! structures align their 64-bit fields explicitly; provider/metaroce asserts the same
//! numbers at compile time):
//!
//! ```text
//! metaroce_send_wqe  wr_id 0, opcode 8 (u8), flags 9 (u8), num_sge 10 (u16), imm_data 12,
//!                    length 16, rkey 20, remote_addr 24,
//!                    atomic {compare_add 32, swap 40},
//!                    ud {ah_num 32, remote_qpn 36, remote_qkey 40},
//!                    bind {length 32, mw_rkey 40, new_rkey 44, mr_lkey 48, access 52},
//!                    flush {placement 32 (u8), selectivity 33 (u8)}; SGEs or data at 64
//! metaroce_recv_wqe  wr_id 0, num_sge 8; SGEs at 16
//! metaroce_cqe       wr_id 0, byte_len 8, imm_or_rkey 12, qp_num 16, src_qp 20, status 24,
//!                    opcode 25, flags 26, sl 27 (u8 each), pkey_index 28 (u16),
//!                    vendor_err 30 (u8); 32 bytes
//! ```

use super::{copy_sges, u32_at, u64_at, BadWqe, LocalWqe, SendWqe, UdWqe, SGE_LEN};
use crate::proto::wr as pwr;
use kernel::prelude::*;
use kernel::rdma::cq::{WcFlags, WcOpcode, WorkCompletion};
use kernel::rdma::udata::Udata;

/// `METAROCE_ABI_VERSION`.
const ABI_VERSION: u32 = 1;
/// `enum metaroce_caps`.
const CAP_NATIVE: u32 = 1 << 0;
const CAP_QP_WIRE: u32 = 1 << 1;
/// `enum metaroce_qp_wire`.
const QP_WIRE_ROCEV2: u32 = 1 << 0;
const QP_WIRE_NATIVE: u32 = 1 << 1;
/// `enum metaroce_qp_flags`.
const QP_CONN_STATS: u32 = 1 << 0;

/// Bytes of `struct metaroce_send_wqe` before its SGEs or inline data.
pub(super) const SEND_WQE_HDR: usize = 64;
/// Bytes of `struct metaroce_recv_wqe` before its SGEs, and where its `num_sge` is.
pub(super) const RECV_WQE_HDR: usize = 16;
pub(super) const RECV_NUM_SGE: usize = 8;
/// Bytes of `struct metaroce_cqe`.
pub(super) const CQE_LEN: usize = 32;

/// `enum metaroce_wr_opcode`.
const WR_SEND: u8 = 1;
const WR_SEND_IMM: u8 = 2;
const WR_SEND_INV: u8 = 3;
const WR_RDMA_WRITE: u8 = 4;
const WR_RDMA_WRITE_IMM: u8 = 5;
const WR_RDMA_READ: u8 = 6;
const WR_ATOMIC_CMP_SWP: u8 = 7;
const WR_ATOMIC_FETCH_ADD: u8 = 8;
const WR_ATOMIC_WRITE: u8 = 9;
const WR_FLUSH: u8 = 10;
const WR_LOCAL_INV: u8 = 11;
const WR_BIND_MW: u8 = 12;

/// `enum metaroce_wqe_flags`.
const WQE_SIGNALED: u8 = 1 << 0;
const WQE_SOLICITED: u8 = 1 << 1;
const WQE_FENCE: u8 = 1 << 2;
const WQE_INLINE: u8 = 1 << 3;
const WQE_FLAGS: u8 = WQE_SIGNALED | WQE_SOLICITED | WQE_FENCE | WQE_INLINE;

/// `enum metaroce_cqe_opcode`.
fn cqe_opcode(op: WcOpcode) -> u8 {
    match op {
        WcOpcode::Send => 1,
        WcOpcode::RdmaWrite => 2,
        WcOpcode::RdmaRead => 3,
        WcOpcode::CompSwap => 4,
        WcOpcode::FetchAdd => 5,
        WcOpcode::BindMw => 6,
        WcOpcode::LocalInv => 7,
        WcOpcode::AtomicWrite => 8,
        WcOpcode::Flush => 9,
        WcOpcode::Recv => 10,
        WcOpcode::RecvRdmaWithImm => 11,
        // Fast registration is a kernel consumer's operation: no user ring carries it.
        WcOpcode::RegMr => 0,
    }
}

/// `enum metaroce_cqe_flags`.
const CQE_WITH_IMM: u8 = 1 << 0;
const CQE_WITH_INV: u8 = 1 << 1;
const CQE_GRH: u8 = 1 << 2;

/// Encodes `wc` as `struct metaroce_cqe`.
pub(super) fn cqe(wc: &WorkCompletion, qp_num: u32) -> [u8; CQE_LEN] {
    let mut b = [0u8; CQE_LEN];
    let (ex, mut flags) = match (wc.imm, wc.invalidate_rkey) {
        (Some(imm), _) => (imm.to_be(), CQE_WITH_IMM),
        (None, Some(rkey)) => (rkey, CQE_WITH_INV),
        (None, None) => (0, 0),
    };
    if wc.flags.contains(WcFlags::GRH) {
        flags |= CQE_GRH;
    }
    b[0..8].copy_from_slice(&wc.wr_id.to_ne_bytes());
    b[8..12].copy_from_slice(&wc.byte_len.to_ne_bytes());
    b[12..16].copy_from_slice(&ex.to_ne_bytes());
    b[16..20].copy_from_slice(&qp_num.to_ne_bytes());
    b[20..24].copy_from_slice(&wc.src_qp.to_ne_bytes());
    // Status values are below 32 (`enum ib_wc_status`).
    b[24] = wc.status as u32 as u8;
    b[25] = cqe_opcode(wc.opcode);
    b[26] = flags;
    b[27] = wc.sl;
    b[28..30].copy_from_slice(&wc.pkey_index.to_ne_bytes());
    b[30] = u8::try_from(wc.vendor_err).unwrap_or(u8::MAX);
    b
}

/// The `get_context` handshake: `struct metaroce_alloc_ucontext_req` names the version the
/// provider speaks (`EINVAL` for another); `struct metaroce_alloc_ucontext_resp` answers.
pub(super) fn alloc_ucontext(udata: &Udata<'_>, info: &super::DeviceInfo) -> Result {
    let mut req = [0u8; 8];
    udata.read_request(&mut req, 4)?;
    if u32_at(&req, 0) != Some(ABI_VERSION) {
        return Err(EINVAL);
    }
    let caps = CAP_QP_WIRE | if info.native { CAP_NATIVE } else { 0 };
    let mut resp = [0u8; 24];
    for (i, v) in [
        ABI_VERSION,
        caps,
        info.max_inline,
        info.max_sge,
        info.max_paths,
        0,
    ]
    .into_iter()
    .enumerate()
    {
        resp[i * 4..i * 4 + 4].copy_from_slice(&v.to_ne_bytes());
    }
    udata.write_response(&resp)
}

/// `struct metaroce_create_qp_req` (absent or short: zeros, the defaults): at most one wire
/// bit, no other; no unknown flag; `reserved` zero.
pub(super) fn qp_request(udata: &Udata<'_>) -> Result<super::QpRequest> {
    let mut req = [0u8; 16];
    udata.read_request(&mut req, 0)?;
    let field = |off| u32_at(&req, off).unwrap_or(0);
    let native = match field(0) {
        0 => None,
        QP_WIRE_ROCEV2 => Some(false),
        QP_WIRE_NATIVE => Some(true),
        _ => return Err(EINVAL),
    };
    let flags = field(8);
    if flags & !QP_CONN_STATS != 0 || field(12) != 0 {
        return Err(EINVAL);
    }
    Ok(super::QpRequest {
        native,
        paths: field(4),
        conn_stats: flags & QP_CONN_STATS != 0,
    })
}

/// See [`super::send_wqe_len`]: inline data (`length` bytes) or `num_sge` SGE records.
pub(super) fn send_wqe_len(hdr: &[u8]) -> usize {
    let flags = hdr.get(9).copied().unwrap_or(WQE_INLINE);
    let extra = if flags & WQE_INLINE != 0 {
        u32_at(hdr, 16).unwrap_or(u32::MAX) as usize
    } else {
        let num = hdr
            .get(10..12)
            .map_or(u16::MAX, |b| u16::from_ne_bytes([b[0], b[1]]));
        usize::from(num).saturating_mul(SGE_LEN)
    };
    SEND_WQE_HDR.saturating_add(extra)
}

/// Parses `struct metaroce_send_wqe` (see [`super::parse_send`]).
pub(super) fn parse_send(
    b: &[u8],
    ud: bool,
    max_sge: u32,
    data: &mut [u8],
) -> Result<SendWqe, BadWqe> {
    let field = |off| u32_at(b, off).ok_or(BadWqe::Length);
    let field64 = |off| u64_at(b, off).ok_or(BadWqe::Length);
    let byte = |off: usize| b.get(off).copied().ok_or(BadWqe::Length);
    let wr_id = field64(0)?;
    let opcode = byte(8)?;
    let flags = byte(9)?;
    let num_sge = u32::from(u16::from_ne_bytes([byte(10)?, byte(11)?]));
    // The immediate is stored in network order.
    let imm = u32::from_be(field(12)?);
    let length = field(16)?;
    let rkey = field(20)?;
    let va = field64(24)?;
    if flags & !WQE_FLAGS != 0 {
        return Err(BadWqe::Opcode);
    }
    let (op, wc_opcode) = match opcode {
        WR_SEND => (pwr::SendOp::Send, WcOpcode::Send),
        WR_SEND_IMM => (pwr::SendOp::SendImm { imm }, WcOpcode::Send),
        WR_SEND_INV => (pwr::SendOp::SendInv { rkey }, WcOpcode::Send),
        WR_RDMA_WRITE => (pwr::SendOp::Write { va, rkey }, WcOpcode::RdmaWrite),
        WR_RDMA_WRITE_IMM => (pwr::SendOp::WriteImm { va, rkey, imm }, WcOpcode::RdmaWrite),
        WR_RDMA_READ => (pwr::SendOp::Read { va, rkey }, WcOpcode::RdmaRead),
        WR_ATOMIC_CMP_SWP => (
            pwr::SendOp::Atomic {
                va,
                rkey,
                op: pwr::AtomicOp::CmpSwap {
                    compare: field64(32)?,
                    swap: field64(40)?,
                },
            },
            WcOpcode::CompSwap,
        ),
        WR_ATOMIC_FETCH_ADD => (
            pwr::SendOp::Atomic {
                va,
                rkey,
                op: pwr::AtomicOp::FetchAdd { add: field64(32)? },
            },
            WcOpcode::FetchAdd,
        ),
        WR_ATOMIC_WRITE => (pwr::SendOp::AtomicWrite { va, rkey }, WcOpcode::AtomicWrite),
        WR_FLUSH => (
            pwr::SendOp::Flush {
                va,
                rkey,
                len: length,
                placement: byte(32)?,
                selectivity: byte(33)?,
            },
            WcOpcode::Flush,
        ),
        WR_LOCAL_INV => (pwr::SendOp::Local, WcOpcode::LocalInv),
        WR_BIND_MW => (pwr::SendOp::Local, WcOpcode::BindMw),
        _ => return Err(BadWqe::Opcode),
    };
    let local = match opcode {
        WR_LOCAL_INV => Some(LocalWqe::Invalidate { rkey }),
        WR_BIND_MW => Some(LocalWqe::Bind(crate::mr::Bind {
            addr: va,
            length: field64(32)?,
            mw_rkey: field(40)?,
            rkey: field(44)?,
            mr_lkey: field(48)?,
            access: field(52)?,
        })),
        _ => None,
    };
    let inline = flags & WQE_INLINE != 0;
    // Local operations and FLUSH carry no local data and no destination; ATOMIC WRITE carries
    // its 8 bytes in the header.
    let no_data = local.is_some() || opcode == WR_FLUSH || opcode == WR_ATOMIC_WRITE;
    if no_data && (num_sge != 0 || inline || ud) {
        return Err(BadWqe::Length);
    }
    if local.is_some() && length != 0 {
        return Err(BadWqe::Length);
    }
    if opcode == WR_ATOMIC_WRITE && length != 8 {
        return Err(BadWqe::Length);
    }
    let (len, num, inline_len) = if opcode == WR_ATOMIC_WRITE {
        data.get_mut(..8)
            .ok_or(BadWqe::Length)?
            .copy_from_slice(b.get(32..40).ok_or(BadWqe::Length)?);
        (8, 0, Some(8))
    } else if no_data {
        (0, 0, None)
    } else if inline {
        let n = length as usize;
        let src = b
            .get(SEND_WQE_HDR..SEND_WQE_HDR.checked_add(n).ok_or(BadWqe::Length)?)
            .ok_or(BadWqe::Length)?;
        data.get_mut(..n)
            .ok_or(BadWqe::Length)?
            .copy_from_slice(src);
        (length, 0, Some(length))
    } else {
        if num_sge > max_sge {
            return Err(BadWqe::Length);
        }
        let total = copy_sges(b, SEND_WQE_HDR, num_sge as usize, data).ok_or(BadWqe::Length)?;
        (total, num_sge, None)
    };
    let ud = if ud {
        let w = UdWqe {
            ah_num: field(32)?,
            remote_qpn: field(36)? & 0xff_ffff,
            remote_qkey: field(40)?,
        };
        if w.ah_num == 0 {
            return Err(BadWqe::Length);
        }
        Some(w)
    } else {
        None
    };
    Ok(SendWqe {
        ud,
        local,
        wr_id,
        op,
        wc_opcode,
        signaled: flags & WQE_SIGNALED != 0,
        solicited: flags & WQE_SOLICITED != 0,
        fence: flags & WQE_FENCE != 0,
        len,
        num_sge: num,
        inline_len,
    })
}

const _: () = assert!(SGE_LEN == 16);
