// SPDX-License-Identifier: GPL-2.0

//! rdma_rxe's user ABI (transitional, `CONFIG_RDMA_METAROCE_RXE_ABI`): the work queue entries
//! the stock librxe provider writes into a user QP's rings (`struct
//! rxe_send_wqe` and `struct rxe_recv_wqe` of include/uapi/rdma/rdma_user_rxe.h), parsed from
//! a copy of the ring slot: nothing here reads shared memory, and every field is checked
//! before use (a process may write anything into its rings).
//!
//! Offsets (x86_64 and every other Linux ABI: the structures use explicitly aligned 64-bit
//! fields), as `offsetof` reports them for the 7.3 header:
//!
//! ```text
//! rxe_send_wqe  wr.wr_id 0, wr.opcode 12, wr.send_flags 16, wr.ex 20,
//!               wr.wr.rdma {remote_addr 24, rkey 32},
//!               wr.wr.atomic {remote_addr 24, compare_add 32, swap 40, rkey 48},
//!               wr.wr.ud {remote_qpn 24, remote_qkey 28, pkey_index 32, ah_num 36},
//!               wr.wr.mw {addr 24, length 32, mr_lkey 40, mw_rkey 44, rkey 48, access 52},
//!               dma.length 184, dma.num_sge 196,
//!               dma.sge[] / dma.inline_data[] / dma.atomic_wr[] 208
//! rxe_recv_wqe  wr_id 0, dma.length 16, dma.num_sge 28, dma.sge[] 40
//! rxe_sge       addr 0, length 8, lkey 12 (16 bytes)
//! ```

use super::{copy_sges, u32_at, u64_at, BadWqe, LocalWqe, SendWqe, UdWqe};
use crate::proto::wr as pwr;
use kernel::rdma::cq::WcOpcode;

/// Size of `struct rxe_send_wqe` before its SGEs or inline data.
pub(super) const SEND_WQE_HDR: usize = 208;
/// Size of `struct rxe_recv_wqe` before its SGEs, and where its `dma.num_sge` is.
pub(super) const RECV_WQE_HDR: usize = 40;
pub(super) const RECV_NUM_SGE: usize = 28;

/// `enum ibv_wr_opcode` values librxe stores in `wr.opcode`.
const WR_RDMA_WRITE: u32 = 0;
const WR_RDMA_WRITE_WITH_IMM: u32 = 1;
const WR_SEND: u32 = 2;
const WR_SEND_WITH_IMM: u32 = 3;
const WR_RDMA_READ: u32 = 4;
const WR_ATOMIC_CMP_AND_SWP: u32 = 5;
const WR_ATOMIC_FETCH_AND_ADD: u32 = 6;
const WR_LOCAL_INV: u32 = 7;
const WR_BIND_MW: u32 = 8;
const WR_SEND_WITH_INV: u32 = 9;
const WR_FLUSH: u32 = 14;
const WR_ATOMIC_WRITE: u32 = 15;

/// `enum ibv_send_flags`.
const SEND_FENCE: u32 = 1;
const SEND_SIGNALED: u32 = 2;
const SEND_SOLICITED: u32 = 4;
const SEND_INLINE: u32 = 8;

/// See [`super::send_wqe_len`]: inline data (`dma.length` bytes, also for ATOMIC WRITE) or
/// `dma.num_sge` SGE records.
pub(super) fn send_wqe_len(hdr: &[u8]) -> usize {
    let inline = u32_at(hdr, 16).is_none_or(|f| f & SEND_INLINE != 0)
        || u32_at(hdr, 12) == Some(WR_ATOMIC_WRITE);
    let extra = if inline {
        u32_at(hdr, 184).unwrap_or(u32::MAX) as usize
    } else {
        (u32_at(hdr, 196).unwrap_or(u32::MAX) as usize).saturating_mul(super::SGE_LEN)
    };
    SEND_WQE_HDR.saturating_add(extra)
}

/// Parses a send WQE, copying its inline data or its SGE records (read back with
/// [`super::sge_at`]) to `data`, the kernel's slot for it; `ud` for a UD QP's ring (whose WQEs
/// carry a destination).
pub(super) fn parse_send(
    b: &[u8],
    ud: bool,
    max_sge: u32,
    data: &mut [u8],
) -> Result<SendWqe, BadWqe> {
    let field = |off| u32_at(b, off).ok_or(BadWqe::Length);
    let field64 = |off| u64_at(b, off).ok_or(BadWqe::Length);
    let wr_id = field64(0)?;
    let opcode = field(12)?;
    let flags = field(16)?;
    let ex = field(20)?;
    let remote_addr = field64(24)?;
    let (op, wc_opcode) = match opcode {
        WR_SEND => (pwr::SendOp::Send, WcOpcode::Send),
        // The immediate is stored in network order.
        WR_SEND_WITH_IMM => (
            pwr::SendOp::SendImm {
                imm: u32::from_be(ex),
            },
            WcOpcode::Send,
        ),
        WR_SEND_WITH_INV => (pwr::SendOp::SendInv { rkey: ex }, WcOpcode::Send),
        WR_RDMA_WRITE => (
            pwr::SendOp::Write {
                va: remote_addr,
                rkey: field(32)?,
            },
            WcOpcode::RdmaWrite,
        ),
        WR_RDMA_WRITE_WITH_IMM => (
            pwr::SendOp::WriteImm {
                va: remote_addr,
                rkey: field(32)?,
                imm: u32::from_be(ex),
            },
            WcOpcode::RdmaWrite,
        ),
        WR_RDMA_READ => (
            pwr::SendOp::Read {
                va: remote_addr,
                rkey: field(32)?,
            },
            WcOpcode::RdmaRead,
        ),
        WR_ATOMIC_CMP_AND_SWP => (
            pwr::SendOp::Atomic {
                va: remote_addr,
                rkey: field(48)?,
                op: pwr::AtomicOp::CmpSwap {
                    compare: field64(32)?,
                    swap: field64(40)?,
                },
            },
            WcOpcode::CompSwap,
        ),
        WR_ATOMIC_FETCH_AND_ADD => (
            pwr::SendOp::Atomic {
                va: remote_addr,
                rkey: field(48)?,
                op: pwr::AtomicOp::FetchAdd { add: field64(32)? },
            },
            WcOpcode::FetchAdd,
        ),
        // The 8 bytes to write are in `dma.atomic_wr`, where inline data goes.
        WR_ATOMIC_WRITE => (
            pwr::SendOp::AtomicWrite {
                va: remote_addr,
                rkey: field(32)?,
            },
            WcOpcode::AtomicWrite,
        ),
        // `wr.flush`: the range's address, its R_Key, placement type and selectivity level; its
        // length is `dma.length` (rdma_rxe puts `dma.resid` in the RETH), and the union's own
        // `length` is not read, as in rdma_rxe. No local data.
        WR_FLUSH => (
            pwr::SendOp::Flush {
                va: remote_addr,
                rkey: field(36)?,
                len: field(184)?,
                placement: *b.get(40).ok_or(BadWqe::Length)?,
                selectivity: *b.get(41).ok_or(BadWqe::Length)?,
            },
            WcOpcode::Flush,
        ),
        WR_LOCAL_INV => (pwr::SendOp::Local, WcOpcode::LocalInv),
        WR_BIND_MW => (pwr::SendOp::Local, WcOpcode::BindMw),
        _ => return Err(BadWqe::Opcode),
    };
    let local = match opcode {
        WR_LOCAL_INV => Some(LocalWqe::Invalidate { rkey: ex }),
        WR_BIND_MW => Some(LocalWqe::Bind(crate::mr::Bind {
            addr: remote_addr,
            length: field64(32)?,
            mr_lkey: field(40)?,
            mw_rkey: field(44)?,
            rkey: field(48)?,
            access: field(52)?,
        })),
        _ => None,
    };
    let length = field(184)?;
    let num_sge = field(196)?;
    // Local operations carry no data (librxe refuses SGEs on a bind) and no destination.
    if local.is_some() && (length != 0 || num_sge != 0 || ud) {
        return Err(BadWqe::Length);
    }
    let atomic_write = opcode == WR_ATOMIC_WRITE;
    if atomic_write && length != 8 {
        return Err(BadWqe::Length);
    }
    let is_inline = flags & SEND_INLINE != 0 || atomic_write;
    let (len, num, inline_len) = if opcode == WR_FLUSH {
        // Its `length` is the remote range's: nothing local is read or written.
        if num_sge != 0 || flags & SEND_INLINE != 0 || ud {
            return Err(BadWqe::Length);
        }
        (0, 0, None)
    } else if is_inline {
        let n = length as usize;
        let src = b
            .get(SEND_WQE_HDR..SEND_WQE_HDR + n)
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
            remote_qpn: field(24)? & 0xff_ffff,
            remote_qkey: field(28)?,
            ah_num: field(36)?,
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
        signaled: flags & SEND_SIGNALED != 0,
        solicited: flags & SEND_SOLICITED != 0,
        fence: flags & SEND_FENCE != 0,
        len,
        num_sge: num,
        inline_len,
    })
}
