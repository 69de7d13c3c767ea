// SPDX-License-Identifier: GPL-2.0
//! Requester: turns posted send work requests into request packet
//! descriptors (the role of rdma_rxe's `rxe_req.c`).
//!
//! The send queue is a ring of caller-owned [`SendWqe`] slots addressed by
//! free-running `u32` indices (slot = index modulo the power-of-two queue
//! size). Three indices walk it, always in this order:
//!
//! ```text
//! completer.head <= completer.una_idx <= requester.cur <= requester.tail
//!  (next to report)  (oldest not done)   (next to send)   (next free)
//! ```
//!
//! `cur` moves back to `una_idx` when the completer asks for a go-back-N
//! retransmission and forward past `una_idx` when a late ACK acknowledges
//! WQEs that were rewound but not yet resent. PSNs are assigned when a WQE
//! is first sent and are the same on every retransmission, because the
//! segmentation depends only on the length and the path MTU.

use super::bth::Bth;
use super::comp::Completer;
use super::ext::{AtomicEth, Deth, Feth, Reth, FLUSH_GLOBAL, FLUSH_MR, FLUSH_PERSISTENT};
use super::opcode::{Opcode, Position, Transport};
use super::packet::{pad_for, Headers, PayloadRef, TxDesc};
use super::psn::Psn;
use super::qp::QpConfig;
use super::wr::{slot_of, wqe, wqe_mut, AtomicOp, SendOp, SendWqe, SendWr, WcStatus};

/// Largest message, in bytes (IBTA: 2^31).
pub const MAX_MSG_LEN: u32 = 1 << 31;

/// Largest number of PSNs one message may use. Together with the
/// `max_inflight` limit this keeps every PSN in flight within half of the
/// 2^23 comparison window, so PSN comparisons stay unambiguous. With a
/// 256-byte path MTU this limits messages to 1 GiB.
pub const MAX_MSG_PSNS: u32 = 1 << 22;

/// Why a work request was not posted.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PostError {
    /// The send queue is full.
    QueueFull,
    /// The send queue slice does not have the configured size.
    BadQueue,
    /// The operation is not available on this transport.
    InvalidOp,
    /// Bad length: too long, longer than the path MTU on UD, or not 8 for
    /// an atomic.
    InvalidLength,
    /// A UD work request without a destination.
    MissingDest,
}

/// Requester counters.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct ReqStats {
    /// Request packets produced, retransmissions included.
    pub packets: u64,
    /// Request packets produced for a PSN that had been sent before.
    pub retransmits: u64,
}

/// Requester state of one QP.
#[derive(Clone, Debug)]
pub struct Requester {
    cfg: QpConfig,
    /// PSN of the next packet to send.
    pub(super) psn: Psn,
    /// One past the highest PSN ever sent: responses at or beyond it are
    /// bogus.
    pub(super) hi_psn: Psn,
    /// Index of the WQE being sent.
    pub(super) cur: u32,
    /// Byte offset inside WQE `cur` of the next packet (for READs: of the
    /// next READ request, which restarts mid-message after a retry).
    off: u32,
    /// Index of the next free slot.
    pub(super) tail: u32,
    /// READ/atomic WQEs in `[completer.una_idx, cur)`.
    pub(super) rd_atomic: u32,
    /// Packets sent since the last one with AckReq set.
    noack: u32,
    /// Counters.
    pub(super) stats: ReqStats,
}

impl Requester {
    /// A requester about to send its first packet with `cfg.sq_psn`.
    pub(super) fn new(cfg: QpConfig) -> Self {
        Requester {
            cfg,
            psn: cfg.sq_psn,
            hi_psn: cfg.sq_psn,
            cur: 0,
            off: 0,
            tail: 0,
            rd_atomic: 0,
            noack: 0,
            stats: ReqStats::default(),
        }
    }

    /// Appends `wr` to the send queue; `head` is the completer's report
    /// index; `blocked`: the completer blocks transmission (error state or
    /// RNR wait), so local WQEs are not passed now (in the error state they
    /// are flushed instead).
    pub(super) fn post(
        &mut self,
        head: u32,
        sq: &mut [SendWqe],
        wr: SendWr,
        blocked: bool,
    ) -> Result<(), PostError> {
        if self.tail.wrapping_sub(head) as usize >= sq.len() {
            return Err(PostError::QueueFull);
        }
        self.validate(&wr)?;
        *wqe_mut(sq, self.tail).ok_or(PostError::BadQueue)? = SendWqe::new(wr);
        self.tail = self.tail.wrapping_add(1);
        // An idle requester passes it at once (nothing may poll it soon),
        // unless transmission is blocked, as `poll_tx` would.
        if !blocked {
            self.skip_local(sq);
        }
        Ok(())
    }

    fn validate(&self, wr: &SendWr) -> Result<(), PostError> {
        use SendOp::*;
        let ok = match self.cfg.transport {
            Transport::Rc => true,
            Transport::Uc => matches!(
                wr.op,
                Send | SendImm { .. } | Write { .. } | WriteImm { .. } | Local
            ),
            Transport::Ud => matches!(wr.op, Send | SendImm { .. }),
            Transport::Cnp => false,
        };
        if !ok {
            return Err(PostError::InvalidOp);
        }
        let pmtu = self.cfg.pmtu;
        if wr.len > MAX_MSG_LEN || pmtu.packets(wr.len) > MAX_MSG_PSNS {
            return Err(PostError::InvalidLength);
        }
        if matches!(wr.op, Atomic { .. } | AtomicWrite { .. }) && wr.len != 8 {
            return Err(PostError::InvalidLength);
        }
        if (wr.op == Local || matches!(wr.op, Flush { .. })) && wr.len != 0 {
            return Err(PostError::InvalidLength);
        }
        if let Flush {
            placement,
            selectivity,
            ..
        } = wr.op
        {
            let known = FLUSH_GLOBAL | FLUSH_PERSISTENT;
            if placement == 0 || placement & !known != 0 || selectivity > FLUSH_MR {
                return Err(PostError::InvalidOp);
            }
        }
        if self.cfg.transport == Transport::Ud {
            if wr.ud.is_none() {
                return Err(PostError::MissingDest);
            }
            if wr.len > pmtu.bytes() {
                return Err(PostError::InvalidLength);
            }
        }
        Ok(())
    }

    /// Moves the send position to WQE `idx` at `psn`, which must lie in
    /// that WQE's PSN range (or be its future first PSN). Used for go-back-N
    /// retries and to skip WQEs acknowledged while rewound; `idx` is always
    /// the completer's `una_idx`, so no READ/atomic is outstanding after.
    pub(super) fn seek(&mut self, idx: u32, psn: Psn, sq: &[SendWqe]) {
        self.cur = idx;
        self.psn = psn;
        self.rd_atomic = 0;
        self.noack = 0;
        self.off = match wqe(sq, idx) {
            Some(w) if idx != self.tail && w.started => {
                let pkts = psn.since(w.first_psn);
                pkts.checked_mul(self.cfg.pmtu.bytes())
                    .map_or(w.wr.len, |o| o.min(w.wr.len))
            }
            _ => 0,
        };
    }

    /// Moves the send position past local WQEs: each is given an empty PSN
    /// range at the current PSN (`last_psn` just before `first_psn`), so the
    /// RC completer retires it as soon as everything before it is
    /// acknowledged; UC ones are done at once, like UC sends.
    fn skip_local(&mut self, sq: &mut [SendWqe]) {
        while self.cur != self.tail && self.off == 0 {
            let Some(w) = wqe_mut(sq, self.cur) else {
                return;
            };
            if w.wr.op != SendOp::Local {
                return;
            }
            w.first_psn = self.psn;
            w.last_psn = self.psn.sub(1);
            w.started = true;
            if self.cfg.transport != Transport::Rc {
                w.status = Some(WcStatus::Success);
            }
            self.cur = self.cur.wrapping_add(1);
        }
    }

    /// Produces the next request packet, if the send queue has one that the
    /// flow-control limits allow: READ/atomic limit (`max_rd_atomic`),
    /// fences, the PSN window (`max_inflight`, RC only) and the completer's
    /// RNR wait, error state or halt at a WQE that failed locally.
    pub(super) fn poll_tx(&mut self, comp: &Completer, sq: &mut [SendWqe]) -> Option<TxDesc> {
        if comp.blocks_tx() || comp.halts(self.cur) {
            return None;
        }
        self.skip_local(sq);
        if self.cur == self.tail {
            return None;
        }
        let idx = self.cur;
        let mut w = *wqe(sq, idx)?;
        let wr = w.wr;
        let rc = self.cfg.transport == Transport::Rc;
        let pmtu = self.cfg.pmtu;
        let remaining = wr.len.saturating_sub(self.off);

        if wr.op.needs_response() && self.rd_atomic >= u32::from(self.cfg.max_rd_atomic) {
            return None;
        }
        if wr.fence && self.off == 0 && self.rd_atomic > 0 {
            return None;
        }
        if rc {
            let need = if matches!(wr.op, SendOp::Read { .. }) {
                pmtu.packets(remaining)
            } else {
                1
            };
            // A request leaves while its first PSN is inside the window. A READ's
            // responses take `need` PSNs that the responder, not this window, paces:
            // like rdma_rxe's requester, the next READ leaves as soon as the window
            // has room for its first PSN, so the responder has it before the previous
            // response stream ends (no round trip between long READs). The span
            // still never exceeds MAX_MSG_PSNS (2^22): a longer one waits until
            // nothing is in flight.
            let inflight = self.psn.since(comp.una);
            if inflight > 0
                && (inflight >= self.cfg.max_inflight
                    || inflight.saturating_add(need) > MAX_MSG_PSNS)
            {
                return None;
            }
        }
        if self.off == 0 {
            w.first_psn = self.psn;
            w.last_psn = self.psn.add(pmtu.packets(wr.len) - 1);
            w.started = true;
        }

        let psn = self.psn;
        let slot = slot_of(idx, sq.len()) as u32;
        let dest_qp = wr.ud.map_or(self.cfg.dest_qpn, |d| d.qpn);
        let mut hdr = Headers::new(Bth {
            opcode: Opcode::RcReadRequest,
            solicited: false,
            mig_req: false,
            pad: 0,
            pkey: self.cfg.pkey,
            resv8: 0,
            dest_qp,
            ack_req: false,
            psn,
        });
        let mut payload = PayloadRef::None;
        let (npsn, done) = match wr.op {
            SendOp::Read { va, rkey } => {
                hdr.reth = Some(Reth {
                    va: va.wrapping_add(u64::from(self.off)),
                    rkey,
                    len: remaining,
                });
                (pmtu.packets(remaining), true)
            }
            SendOp::Atomic { va, rkey, op } => {
                let (opcode, swap_add, compare) = match op {
                    AtomicOp::CmpSwap { compare, swap } => (Opcode::RcCmpSwap, swap, compare),
                    AtomicOp::FetchAdd { add } => (Opcode::RcFetchAdd, add, 0),
                };
                hdr.bth.opcode = opcode;
                hdr.atomic_eth = Some(AtomicEth {
                    va,
                    rkey,
                    swap_add,
                    compare,
                });
                (1, true)
            }
            SendOp::Flush {
                va,
                rkey,
                len,
                placement,
                selectivity,
            } => {
                hdr.bth.opcode = Opcode::RcFlush;
                hdr.feth = Some(Feth {
                    placement,
                    selectivity,
                });
                hdr.reth = Some(Reth { va, rkey, len });
                (1, true)
            }
            SendOp::AtomicWrite { va, rkey } => {
                hdr.bth.opcode = Opcode::RcAtomicWrite;
                hdr.reth = Some(Reth { va, rkey, len: 8 });
                payload = PayloadRef::Sq {
                    slot,
                    offset: 0,
                    len: 8,
                };
                (1, true)
            }
            op => {
                let plen = remaining.min(pmtu.bytes());
                let last = plen == remaining;
                let pos = match (self.off == 0, last) {
                    (true, true) => Position::Only,
                    (true, false) => Position::First,
                    (false, false) => Position::Middle,
                    (false, true) => Position::Last,
                };
                let (write, reth, imm, inv) = match op {
                    SendOp::SendImm { imm } => (false, None, Some(imm), None),
                    SendOp::SendInv { rkey } => (false, None, None, Some(rkey)),
                    SendOp::Write { va, rkey } => (
                        true,
                        Some(Reth {
                            va,
                            rkey,
                            len: wr.len,
                        }),
                        None,
                        None,
                    ),
                    SendOp::WriteImm { va, rkey, imm } => (
                        true,
                        Some(Reth {
                            va,
                            rkey,
                            len: wr.len,
                        }),
                        Some(imm),
                        None,
                    ),
                    _ => (false, None, None, None),
                };
                let imm = imm.filter(|_| last);
                let inv = inv.filter(|_| last);
                hdr.bth.opcode =
                    data_opcode(self.cfg.transport, write, pos, imm.is_some(), inv.is_some())?;
                hdr.bth.solicited = wr.solicited && last && (!write || imm.is_some());
                hdr.bth.pad = pad_for(plen as usize);
                hdr.reth = reth.filter(|_| pos.is_start());
                hdr.imm = imm;
                hdr.ieth = inv;
                if let Some(ud) = wr.ud {
                    let qkey = if ud.qkey & 0x8000_0000 != 0 {
                        self.cfg.qkey
                    } else {
                        ud.qkey
                    };
                    hdr.deth = Some(Deth {
                        qkey,
                        src_qp: self.cfg.qpn,
                    });
                }
                if plen > 0 {
                    payload = PayloadRef::Sq {
                        slot,
                        offset: self.off,
                        len: plen,
                    };
                }
                self.off = self.off.saturating_add(plen);
                (1, last)
            }
        };

        if rc {
            self.noack = self.noack.saturating_add(1);
            if done || self.noack >= self.cfg.ack_req_every {
                hdr.bth.ack_req = true;
                self.noack = 0;
            }
        }
        self.stats.packets = self.stats.packets.saturating_add(1);
        if psn.is_before(self.hi_psn) {
            self.stats.retransmits = self.stats.retransmits.saturating_add(1);
        }
        self.psn = psn.add(npsn);
        if self.psn.is_after(self.hi_psn) {
            self.hi_psn = self.psn;
        }
        if done {
            self.cur = idx.wrapping_add(1);
            self.off = 0;
            if wr.op.needs_response() {
                self.rd_atomic = self.rd_atomic.saturating_add(1);
            }
            if !rc {
                // UC and UD complete on transmission.
                w.status = Some(WcStatus::Success);
            }
        }
        *wqe_mut(sq, idx)? = w;
        Some(TxDesc { hdr, payload })
    }
}

/// Opcode of a SEND or RDMA WRITE packet at `pos`; `imm`/`inv` tell whether
/// that packet carries immediate data / an IETH.
fn data_opcode(tr: Transport, write: bool, pos: Position, imm: bool, inv: bool) -> Option<Opcode> {
    use Position::*;
    let op = match (write, pos, imm, inv) {
        (false, First, ..) => 0x00,
        (false, Middle, ..) => 0x01,
        (false, Last, false, false) => 0x02,
        (false, Last, true, false) => 0x03,
        (false, Last, false, true) => 0x16,
        (false, Only, false, false) => 0x04,
        (false, Only, true, false) => 0x05,
        (false, Only, false, true) => 0x17,
        (true, First, ..) => 0x06,
        (true, Middle, ..) => 0x07,
        (true, Last, false, false) => 0x08,
        (true, Last, true, false) => 0x09,
        (true, Only, false, false) => 0x0A,
        (true, Only, true, false) => 0x0B,
        _ => return None,
    };
    let transport = match tr {
        Transport::Rc => 0x00,
        Transport::Uc => 0x20,
        Transport::Ud => 0x60,
        Transport::Cnp => return None,
    };
    // UC has no SEND with invalidate and UD only SEND Only: `from_u8`
    // rejects those combinations.
    Opcode::from_u8(op | transport)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_opcodes() {
        use Position::*;
        assert_eq!(
            data_opcode(Transport::Rc, false, Last, false, true),
            Some(Opcode::RcSendLastInv)
        );
        assert_eq!(
            data_opcode(Transport::Uc, true, Only, true, false),
            Some(Opcode::UcWriteOnlyImm)
        );
        assert_eq!(
            data_opcode(Transport::Ud, false, Only, true, false),
            Some(Opcode::UdSendOnlyImm)
        );
        assert_eq!(data_opcode(Transport::Uc, false, Only, false, true), None);
        assert_eq!(data_opcode(Transport::Ud, false, First, false, false), None);
        assert_eq!(data_opcode(Transport::Rc, true, Last, false, true), None);
    }
}
