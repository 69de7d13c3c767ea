// SPDX-License-Identifier: GPL-2.0
//! BTH opcodes and the per-opcode header table (IBTA 9.2, table 35 ff.).
//!
//! The upper three opcode bits select the transport (RC, UC, RD, UD, CNP,
//! XRC), the lower five the operation. For every supported opcode
//! [`Opcode::info`] tells which extended transport headers follow the BTH,
//! whether a payload follows, the packet's position inside its message and
//! whether it is a request or a response.

/// Transport service selected by the top three opcode bits.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Transport {
    /// Reliable Connected.
    Rc,
    /// Unreliable Connected.
    Uc,
    /// Unreliable Datagram.
    Ud,
    /// RoCEv2 Congestion Notification Packet (IBTA Annex A17).
    Cnp,
}

/// What a packet does.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum OpKind {
    /// SEND request (consumes a receive WQE at the responder).
    Send,
    /// RDMA WRITE request.
    Write,
    /// RDMA READ request.
    ReadReq,
    /// RDMA READ response.
    ReadResp,
    /// ACKNOWLEDGE (ACK, NAK or RNR NAK).
    Ack,
    /// ATOMIC ACKNOWLEDGE.
    AtomicAck,
    /// COMPARE & SWAP request.
    CmpSwap,
    /// FETCH & ADD request.
    FetchAdd,
    /// ATOMIC WRITE request (IBTA 1.5 A19: 8 bytes written as one unit,
    /// answered like a zero-length READ).
    AtomicWrite,
    /// FLUSH request (IBTA 1.5 A19: makes earlier writes to a range or
    /// memory region visible or persistent, answered like a zero-length
    /// READ).
    Flush,
    /// Congestion notification.
    Cnp,
}

impl OpKind {
    /// True for packets sent by a requester, false for responses and CNPs.
    pub const fn is_request(self) -> bool {
        matches!(
            self,
            OpKind::Send
                | OpKind::Write
                | OpKind::ReadReq
                | OpKind::CmpSwap
                | OpKind::FetchAdd
                | OpKind::AtomicWrite
                | OpKind::Flush
        )
    }
}

/// Position of a packet inside its message.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Position {
    /// First packet of a multi-packet message.
    First,
    /// Neither first nor last.
    Middle,
    /// Last packet of a multi-packet message.
    Last,
    /// The only packet of a message.
    Only,
}

impl Position {
    /// True for `First` and `Only`: the packet starts a message.
    pub const fn is_start(self) -> bool {
        matches!(self, Position::First | Position::Only)
    }

    /// True for `Last` and `Only`: the packet ends a message.
    pub const fn is_end(self) -> bool {
        matches!(self, Position::Last | Position::Only)
    }
}

/// A set of extended transport headers.
///
/// On the wire the headers present always appear in the order FETH, DETH,
/// RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH, which is the IBTA
/// header order restricted to RoCEv2 RC/UC/UD (FETH, the only one after
/// bit 6, precedes the RETH of a FLUSH).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ExtSet(u8);

impl ExtSet {
    /// No extended header.
    pub const EMPTY: ExtSet = ExtSet(0);
    /// Datagram ETH.
    pub const DETH: ExtSet = ExtSet(1 << 0);
    /// RDMA ETH.
    pub const RETH: ExtSet = ExtSet(1 << 1);
    /// Atomic ETH.
    pub const ATOMIC_ETH: ExtSet = ExtSet(1 << 2);
    /// ACK ETH.
    pub const AETH: ExtSet = ExtSet(1 << 3);
    /// Atomic ACK ETH.
    pub const ATOMIC_ACK_ETH: ExtSet = ExtSet(1 << 4);
    /// Immediate data.
    pub const IMM: ExtSet = ExtSet(1 << 5);
    /// Invalidate ETH.
    pub const IETH: ExtSet = ExtSet(1 << 6);
    /// FLUSH ETH.
    pub const FETH: ExtSet = ExtSet(1 << 7);

    /// Union of two sets.
    pub const fn with(self, other: ExtSet) -> ExtSet {
        ExtSet(self.0 | other.0)
    }

    /// True if every header of `other` is in `self`.
    pub const fn contains(self, other: ExtSet) -> bool {
        self.0 & other.0 == other.0
    }

    /// Total length in bytes of the headers in the set.
    pub const fn len(self) -> usize {
        use super::ext::{Aeth, AtomicAckEth, AtomicEth, Deth, Feth, Reth, IETH_LEN, IMM_LEN};
        const LENS: [(ExtSet, usize); 8] = [
            (ExtSet::FETH, Feth::LEN),
            (ExtSet::DETH, Deth::LEN),
            (ExtSet::RETH, Reth::LEN),
            (ExtSet::ATOMIC_ETH, AtomicEth::LEN),
            (ExtSet::AETH, Aeth::LEN),
            (ExtSet::ATOMIC_ACK_ETH, AtomicAckEth::LEN),
            (ExtSet::IMM, IMM_LEN),
            (ExtSet::IETH, IETH_LEN),
        ];
        let mut total = 0;
        let mut i = 0;
        while i < LENS.len() {
            if self.contains(LENS[i].0) {
                total += LENS[i].1;
            }
            i += 1;
        }
        total
    }

    /// True if the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// Static description of an opcode.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct OpInfo {
    /// Transport service.
    pub transport: Transport,
    /// Operation.
    pub kind: OpKind,
    /// Position inside the message.
    pub pos: Position,
    /// Extended headers following the BTH.
    pub exts: ExtSet,
    /// True if a payload may follow the headers.
    pub payload: bool,
}

macro_rules! opcodes {
    ($($doc:literal $name:ident = $val:literal: $tr:ident $kind:ident $pos:ident
       [$($ext:ident)*] $pay:literal;)*) => {
        /// A supported BTH opcode.
        #[derive(Clone, Copy, PartialEq, Eq, Debug)]
        #[repr(u8)]
        pub enum Opcode {
            $(#[doc = $doc] $name = $val,)*
        }

        impl Opcode {
            /// Decodes a BTH opcode byte; `None` if it is not supported.
            pub const fn from_u8(v: u8) -> Option<Opcode> {
                match v {
                    $($val => Some(Opcode::$name),)*
                    _ => None,
                }
            }

            /// Returns the static description of the opcode.
            pub const fn info(self) -> OpInfo {
                match self {
                    $(Opcode::$name => OpInfo {
                        transport: Transport::$tr,
                        kind: OpKind::$kind,
                        pos: Position::$pos,
                        exts: ExtSet::EMPTY$(.with(ExtSet::$ext))*,
                        payload: $pay,
                    },)*
                }
            }
        }
    };
}

opcodes! {
    "RC SEND First" RcSendFirst = 0x00: Rc Send First [] true;
    "RC SEND Middle" RcSendMiddle = 0x01: Rc Send Middle [] true;
    "RC SEND Last" RcSendLast = 0x02: Rc Send Last [] true;
    "RC SEND Last with Immediate" RcSendLastImm = 0x03: Rc Send Last [IMM] true;
    "RC SEND Only" RcSendOnly = 0x04: Rc Send Only [] true;
    "RC SEND Only with Immediate" RcSendOnlyImm = 0x05: Rc Send Only [IMM] true;
    "RC RDMA WRITE First" RcWriteFirst = 0x06: Rc Write First [RETH] true;
    "RC RDMA WRITE Middle" RcWriteMiddle = 0x07: Rc Write Middle [] true;
    "RC RDMA WRITE Last" RcWriteLast = 0x08: Rc Write Last [] true;
    "RC RDMA WRITE Last with Immediate" RcWriteLastImm = 0x09: Rc Write Last [IMM] true;
    "RC RDMA WRITE Only" RcWriteOnly = 0x0A: Rc Write Only [RETH] true;
    "RC RDMA WRITE Only with Immediate" RcWriteOnlyImm = 0x0B: Rc Write Only [RETH IMM] true;
    "RC RDMA READ Request" RcReadRequest = 0x0C: Rc ReadReq Only [RETH] false;
    "RC RDMA READ Response First" RcReadRespFirst = 0x0D: Rc ReadResp First [AETH] true;
    "RC RDMA READ Response Middle" RcReadRespMiddle = 0x0E: Rc ReadResp Middle [] true;
    "RC RDMA READ Response Last" RcReadRespLast = 0x0F: Rc ReadResp Last [AETH] true;
    "RC RDMA READ Response Only" RcReadRespOnly = 0x10: Rc ReadResp Only [AETH] true;
    "RC Acknowledge" RcAck = 0x11: Rc Ack Only [AETH] false;
    "RC ATOMIC Acknowledge" RcAtomicAck = 0x12: Rc AtomicAck Only [AETH ATOMIC_ACK_ETH] false;
    "RC CmpSwap" RcCmpSwap = 0x13: Rc CmpSwap Only [ATOMIC_ETH] false;
    "RC FetchAdd" RcFetchAdd = 0x14: Rc FetchAdd Only [ATOMIC_ETH] false;
    "RC SEND Last with Invalidate" RcSendLastInv = 0x16: Rc Send Last [IETH] true;
    "RC SEND Only with Invalidate" RcSendOnlyInv = 0x17: Rc Send Only [IETH] true;
    "RC FLUSH" RcFlush = 0x1C: Rc Flush Only [FETH RETH] false;
    "RC ATOMIC WRITE" RcAtomicWrite = 0x1D: Rc AtomicWrite Only [RETH] true;
    "UC SEND First" UcSendFirst = 0x20: Uc Send First [] true;
    "UC SEND Middle" UcSendMiddle = 0x21: Uc Send Middle [] true;
    "UC SEND Last" UcSendLast = 0x22: Uc Send Last [] true;
    "UC SEND Last with Immediate" UcSendLastImm = 0x23: Uc Send Last [IMM] true;
    "UC SEND Only" UcSendOnly = 0x24: Uc Send Only [] true;
    "UC SEND Only with Immediate" UcSendOnlyImm = 0x25: Uc Send Only [IMM] true;
    "UC RDMA WRITE First" UcWriteFirst = 0x26: Uc Write First [RETH] true;
    "UC RDMA WRITE Middle" UcWriteMiddle = 0x27: Uc Write Middle [] true;
    "UC RDMA WRITE Last" UcWriteLast = 0x28: Uc Write Last [] true;
    "UC RDMA WRITE Last with Immediate" UcWriteLastImm = 0x29: Uc Write Last [IMM] true;
    "UC RDMA WRITE Only" UcWriteOnly = 0x2A: Uc Write Only [RETH] true;
    "UC RDMA WRITE Only with Immediate" UcWriteOnlyImm = 0x2B: Uc Write Only [RETH IMM] true;
    "UD SEND Only" UdSendOnly = 0x64: Ud Send Only [DETH] true;
    "UD SEND Only with Immediate" UdSendOnlyImm = 0x65: Ud Send Only [DETH IMM] true;
    "RoCEv2 CNP (16 reserved payload bytes)" Cnp = 0x81: Cnp Cnp Only [] true;
}

/// True for opcodes that are defined by the IBTA (or Linux) but that this
/// core deliberately does not implement: the whole RD (0x40-0x5F) and XRC
/// (0xA0-0xBF) transports. The parser reports them
/// separately from garbage so the kernel can count them apart.
pub const fn is_unsupported(v: u8) -> bool {
    matches!(v, 0x40..=0x5F | 0xA0..=0xBF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        for v in 0..=255u8 {
            let Some(op) = Opcode::from_u8(v) else {
                continue;
            };
            assert_eq!(op as u8, v);
            assert!(!is_unsupported(v));
            let i = op.info();
            let tr = match v >> 5 {
                0 => Transport::Rc,
                1 => Transport::Uc,
                3 => Transport::Ud,
                4 => Transport::Cnp,
                _ => unreachable!(),
            };
            assert_eq!(i.transport, tr, "{op:?}");
            // Only a few headers may appear with a non-start packet.
            if !i.pos.is_start() {
                assert!(!i.exts.contains(ExtSet::RETH), "{op:?}");
            }
            // Immediate data and invalidate only on message ends.
            if i.exts.contains(ExtSet::IMM) || i.exts.contains(ExtSet::IETH) {
                assert!(i.pos.is_end(), "{op:?}");
            }
        }
    }

    #[test]
    fn header_lengths() {
        assert_eq!(Opcode::RcWriteOnlyImm.info().exts.len(), 20);
        assert_eq!(Opcode::RcAtomicAck.info().exts.len(), 12);
        assert_eq!(Opcode::RcCmpSwap.info().exts.len(), 28);
        assert_eq!(Opcode::UdSendOnlyImm.info().exts.len(), 12);
        assert!(Opcode::RcSendMiddle.info().exts.is_empty());
    }

    #[test]
    fn counts() {
        let n = (0..=255u8)
            .filter(|v| Opcode::from_u8(*v).is_some())
            .count();
        assert_eq!(n, 25 + 12 + 2 + 1);
        assert!(!is_unsupported(0x1C) && !is_unsupported(0x1D) && !is_unsupported(0x15));
        assert_eq!(Opcode::RcAtomicWrite.info().exts.len(), 16);
        assert_eq!(Opcode::RcFlush.info().exts.len(), 20);
    }
}
