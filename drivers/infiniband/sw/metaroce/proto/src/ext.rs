// SPDX-License-Identifier: GPL-2.0
//! Extended transport headers (IBTA 9.3): RETH, AETH, AtomicETH,
//! AtomicAckETH, DETH, ImmDt, IETH and the FLUSH ETH (IBTA 1.5 A19). All
//! fields are big-endian.

use super::packet::ParseError;
use super::wire::{Reader, Writer};

/// Length of the Immediate Data header (4 opaque bytes, carried here as a
/// big-endian `u32`; verbs' `imm_data` is that value in network order).
pub const IMM_LEN: usize = 4;

/// Length of the Invalidate ETH (the R_Key to invalidate).
pub const IETH_LEN: usize = 4;

/// RDMA Extended Transport Header: 16 bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Reth {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// DMA length of the whole operation in bytes.
    pub len: u32,
}

impl Reth {
    /// Encoded length.
    pub const LEN: usize = 16;

    /// Decodes from the front of `r`.
    pub fn read(r: &mut Reader<'_>) -> Result<Self, ParseError> {
        let va = r.u64().ok_or(ParseError::Truncated)?;
        let rkey = r.u32().ok_or(ParseError::Truncated)?;
        let len = r.u32().ok_or(ParseError::Truncated)?;
        Ok(Reth { va, rkey, len })
    }

    /// Encodes into `w`.
    pub fn write(&self, w: &mut Writer<'_>) -> Option<()> {
        w.u64(self.va)?;
        w.u32(self.rkey)?;
        w.u32(self.len)
    }
}

/// NAK codes carried in an AETH syndrome (IBTA table 43).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum NakCode {
    /// PSN sequence error: the requester must retransmit from the NAK's PSN.
    PsnSeqErr = 0,
    /// Invalid request.
    InvalidRequest = 1,
    /// Remote access error.
    RemoteAccess = 2,
    /// Remote operational error.
    RemoteOperational = 3,
    /// Invalid RD request (RD only; never sent by this core).
    InvalidRdRequest = 4,
}

/// The 8-bit AETH syndrome.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Syndrome {
    /// Positive acknowledgement with an end-to-end credit count (0x1F:
    /// credits are not used).
    Ack {
        /// 5-bit credit count.
        credits: u8,
    },
    /// Receiver Not Ready NAK.
    Rnr {
        /// 5-bit RNR timer code (see [`super::timer::rnr_timer_ns`]).
        timer: u8,
    },
    /// Negative acknowledgement.
    Nak(NakCode),
}

/// Credit count meaning "end-to-end credits not used" (rdma_rxe's
/// `AETH_ACK_UNLIMITED`).
pub const CREDITS_UNLIMITED: u8 = 0x1F;

impl Syndrome {
    /// Decodes the syndrome byte. Bit 7 is reserved and the type `0b10` is
    /// reserved; NAK codes above 4 are reserved.
    pub fn decode(b: u8) -> Result<Self, ParseError> {
        let val = b & 0x1F;
        match b >> 5 {
            0b000 => Ok(Syndrome::Ack { credits: val }),
            0b001 => Ok(Syndrome::Rnr { timer: val }),
            0b011 => Ok(Syndrome::Nak(match val {
                0 => NakCode::PsnSeqErr,
                1 => NakCode::InvalidRequest,
                2 => NakCode::RemoteAccess,
                3 => NakCode::RemoteOperational,
                4 => NakCode::InvalidRdRequest,
                _ => return Err(ParseError::BadSyndrome(b)),
            })),
            _ => Err(ParseError::BadSyndrome(b)),
        }
    }

    /// Encodes the syndrome byte (5-bit values are masked).
    pub const fn encode(self) -> u8 {
        match self {
            Syndrome::Ack { credits } => credits & 0x1F,
            Syndrome::Rnr { timer } => 0x20 | (timer & 0x1F),
            Syndrome::Nak(code) => 0x60 | code as u8,
        }
    }
}

/// ACK Extended Transport Header: 4 bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Aeth {
    /// Syndrome.
    pub syndrome: Syndrome,
    /// Message sequence number (24 bits).
    pub msn: u32,
}

impl Aeth {
    /// Encoded length.
    pub const LEN: usize = 4;

    /// Decodes from the front of `r`.
    pub fn read(r: &mut Reader<'_>) -> Result<Self, ParseError> {
        let syn = r.u8().ok_or(ParseError::Truncated)?;
        let msn = r.u24().ok_or(ParseError::Truncated)?;
        Ok(Aeth {
            syndrome: Syndrome::decode(syn)?,
            msn,
        })
    }

    /// Encodes into `w`; the MSN is masked to 24 bits.
    pub fn write(&self, w: &mut Writer<'_>) -> Option<()> {
        w.u8(self.syndrome.encode())?;
        w.u24(self.msn)
    }
}

/// Atomic Extended Transport Header: 28 bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct AtomicEth {
    /// Remote virtual address (must be 8-byte aligned).
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap value (CmpSwap) or addend (FetchAdd).
    pub swap_add: u64,
    /// Compare value (CmpSwap only).
    pub compare: u64,
}

impl AtomicEth {
    /// Encoded length.
    pub const LEN: usize = 28;

    /// Decodes from the front of `r`.
    pub fn read(r: &mut Reader<'_>) -> Result<Self, ParseError> {
        let va = r.u64().ok_or(ParseError::Truncated)?;
        let rkey = r.u32().ok_or(ParseError::Truncated)?;
        let swap_add = r.u64().ok_or(ParseError::Truncated)?;
        let compare = r.u64().ok_or(ParseError::Truncated)?;
        Ok(AtomicEth {
            va,
            rkey,
            swap_add,
            compare,
        })
    }

    /// Encodes into `w`.
    pub fn write(&self, w: &mut Writer<'_>) -> Option<()> {
        w.u64(self.va)?;
        w.u32(self.rkey)?;
        w.u64(self.swap_add)?;
        w.u64(self.compare)
    }
}

/// Atomic ACK Extended Transport Header: 8 bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct AtomicAckEth {
    /// Value of the target location before the atomic operation.
    pub orig: u64,
}

impl AtomicAckEth {
    /// Encoded length.
    pub const LEN: usize = 8;

    /// Decodes from the front of `r`.
    pub fn read(r: &mut Reader<'_>) -> Result<Self, ParseError> {
        Ok(AtomicAckEth {
            orig: r.u64().ok_or(ParseError::Truncated)?,
        })
    }

    /// Encodes into `w`.
    pub fn write(&self, w: &mut Writer<'_>) -> Option<()> {
        w.u64(self.orig)
    }
}

/// FLUSH placement type bit: make the range globally visible.
pub const FLUSH_GLOBAL: u8 = 1 << 0;
/// FLUSH placement type bit: make the range persistent.
pub const FLUSH_PERSISTENT: u8 = 1 << 1;
/// FLUSH selectivity level: the RETH's range.
pub const FLUSH_RANGE: u8 = 0;
/// FLUSH selectivity level: the whole memory region of the RETH's R_Key
/// (its address and length are not checked).
pub const FLUSH_MR: u8 = 1;

/// FLUSH Extended Transport Header (IBTA 1.5 A19): 4 bytes, placement type
/// in bits 3-0, selectivity level in bits 5-4, the rest reserved.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Feth {
    /// Placement type (4 bits): [`FLUSH_GLOBAL`], [`FLUSH_PERSISTENT`].
    pub placement: u8,
    /// Selectivity level (2 bits): [`FLUSH_RANGE`] or [`FLUSH_MR`].
    pub selectivity: u8,
}

impl Feth {
    /// Encoded length.
    pub const LEN: usize = 4;

    /// Decodes from the front of `r`; the reserved bits must be zero.
    pub fn read(r: &mut Reader<'_>) -> Result<Self, ParseError> {
        let v = r.u32().ok_or(ParseError::Truncated)?;
        if v & !0x3F != 0 {
            return Err(ParseError::ReservedBits);
        }
        Ok(Feth {
            placement: (v & 0xF) as u8,
            selectivity: ((v >> 4) & 0x3) as u8,
        })
    }

    /// Encodes into `w`; the fields are masked to their widths.
    pub fn write(&self, w: &mut Writer<'_>) -> Option<()> {
        w.u32(u32::from(self.placement & 0xF) | u32::from(self.selectivity & 0x3) << 4)
    }
}

/// Datagram Extended Transport Header: 8 bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Deth {
    /// Queue key.
    pub qkey: u32,
    /// Source queue pair number (24 bits).
    pub src_qp: u32,
}

impl Deth {
    /// Encoded length.
    pub const LEN: usize = 8;

    /// Decodes from the front of `r`; the reserved byte must be zero.
    pub fn read(r: &mut Reader<'_>) -> Result<Self, ParseError> {
        let qkey = r.u32().ok_or(ParseError::Truncated)?;
        let resv = r.u8().ok_or(ParseError::Truncated)?;
        let src_qp = r.u24().ok_or(ParseError::Truncated)?;
        if resv != 0 {
            return Err(ParseError::ReservedBits);
        }
        Ok(Deth { qkey, src_qp })
    }

    /// Encodes into `w`; `src_qp` is masked to 24 bits.
    pub fn write(&self, w: &mut Writer<'_>) -> Option<()> {
        w.u32(self.qkey)?;
        w.u8(0)?;
        w.u24(self.src_qp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syndrome_round_trip() {
        for b in 0..=255u8 {
            match Syndrome::decode(b) {
                Ok(s) => assert_eq!(s.encode(), b),
                Err(e) => {
                    assert_eq!(e, ParseError::BadSyndrome(b));
                    assert!(b & 0x80 != 0 || b >> 5 == 0b010 || (b >> 5 == 0b011 && b & 0x1F > 4));
                }
            }
        }
        assert_eq!(Syndrome::Nak(NakCode::RemoteAccess).encode(), 0x62);
        assert_eq!(Syndrome::Rnr { timer: 14 }.encode(), 0x2E);
    }

    #[test]
    fn headers_round_trip() {
        let mut buf = [0u8; 28];
        let a = AtomicEth {
            va: 0x0102_0304_0506_0708,
            rkey: 0x1122_3344,
            swap_add: 5,
            compare: 6,
        };
        assert!(a.write(&mut Writer::new(&mut buf)).is_some());
        assert_eq!(
            &buf[..12],
            &[1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44]
        );
        assert_eq!(AtomicEth::read(&mut Reader::new(&buf)), Ok(a));
        let d = Deth {
            qkey: 0x8001_0000,
            src_qp: 0xAB_CDEF,
        };
        assert!(d.write(&mut Writer::new(&mut buf)).is_some());
        assert_eq!(&buf[..8], &[0x80, 1, 0, 0, 0, 0xAB, 0xCD, 0xEF]);
        assert_eq!(Deth::read(&mut Reader::new(&buf)), Ok(d));
        buf[4] = 1;
        assert_eq!(
            Deth::read(&mut Reader::new(&buf)),
            Err(ParseError::ReservedBits)
        );
        let r = Reth {
            va: u64::MAX,
            rkey: 7,
            len: 1 << 31,
        };
        assert!(r.write(&mut Writer::new(&mut buf)).is_some());
        assert_eq!(Reth::read(&mut Reader::new(&buf[..16])), Ok(r));
        assert_eq!(
            Reth::read(&mut Reader::new(&buf[..15])),
            Err(ParseError::Truncated)
        );
    }
}
