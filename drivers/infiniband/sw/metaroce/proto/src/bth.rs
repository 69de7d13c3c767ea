// SPDX-License-Identifier: GPL-2.0
//! Base Transport Header (IBTA 9.2): 12 bytes.
//!
//! ```text
//!  byte 0: OpCode
//!  byte 1: SE(7) | M(6) | PadCnt(5:4) | TVer(3:0)
//!  2..4:   P_Key
//!  byte 4: reserved (FECN(7)/BECN(6) on InfiniBand; RoCEv2 carries ECN
//!          in the IP header, the byte is kept raw here)
//!  5..8:   DestQP (24 bits)
//!  byte 8: AckReq(7) | reserved(6:0)
//!  9..12:  PSN (24 bits)
//! ```

use super::opcode::{is_unsupported, Opcode};
use super::packet::ParseError;
use super::psn::Psn;
use super::wire::{Reader, Writer};

/// Length of the BTH in bytes.
pub const BTH_LEN: usize = 12;

/// Mask of a 24-bit queue pair number.
pub const QPN_MASK: u32 = 0x00FF_FFFF;

/// A decoded Base Transport Header.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Bth {
    /// Operation code.
    pub opcode: Opcode,
    /// Solicited event.
    pub solicited: bool,
    /// Migration request / migration state bit.
    pub mig_req: bool,
    /// Number of pad bytes (0..=3) after the payload.
    pub pad: u8,
    /// Partition key.
    pub pkey: u16,
    /// The reserved byte after the P_Key, kept raw (InfiniBand FECN/BECN).
    pub resv8: u8,
    /// Destination queue pair number (24 bits; higher bits are dropped when
    /// encoding).
    pub dest_qp: u32,
    /// Acknowledge request.
    pub ack_req: bool,
    /// Packet sequence number.
    pub psn: Psn,
}

impl Bth {
    /// Decodes a BTH from the front of `r`.
    ///
    /// Rejects unknown and unsupported opcodes, a transport header version
    /// other than 0 and non-zero reserved bits after the AckReq bit.
    pub fn read(r: &mut Reader<'_>) -> Result<Bth, ParseError> {
        let op = r.u8().ok_or(ParseError::Truncated)?;
        let flags = r.u8().ok_or(ParseError::Truncated)?;
        let pkey = r.u16().ok_or(ParseError::Truncated)?;
        let resv8 = r.u8().ok_or(ParseError::Truncated)?;
        let dest_qp = r.u24().ok_or(ParseError::Truncated)?;
        let ack = r.u8().ok_or(ParseError::Truncated)?;
        let psn = r.u24().ok_or(ParseError::Truncated)?;

        let opcode = match Opcode::from_u8(op) {
            Some(o) => o,
            None if is_unsupported(op) => return Err(ParseError::UnsupportedOpcode(op)),
            None => return Err(ParseError::UnknownOpcode(op)),
        };
        if flags & 0x0F != 0 {
            return Err(ParseError::BadTver(flags & 0x0F));
        }
        if ack & 0x7F != 0 {
            return Err(ParseError::ReservedBits);
        }
        Ok(Bth {
            opcode,
            solicited: flags & 0x80 != 0,
            mig_req: flags & 0x40 != 0,
            pad: (flags >> 4) & 0x3,
            pkey,
            resv8,
            dest_qp,
            ack_req: ack & 0x80 != 0,
            psn: Psn::new(psn),
        })
    }

    /// Encodes the BTH (TVer 0); `None` if `w` has no room. `pad` is masked
    /// to two bits and `dest_qp` to 24 bits.
    pub fn write(&self, w: &mut Writer<'_>) -> Option<()> {
        let flags = (u8::from(self.solicited) << 7)
            | (u8::from(self.mig_req) << 6)
            | ((self.pad & 0x3) << 4);
        w.u8(self.opcode as u8)?;
        w.u8(flags)?;
        w.u16(self.pkey)?;
        w.u8(self.resv8)?;
        w.u24(self.dest_qp)?;
        w.u8(u8::from(self.ack_req) << 7)?;
        w.u24(self.psn.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        let bth = Bth {
            opcode: Opcode::UcSendOnly,
            solicited: false,
            mig_req: true,
            pad: 2,
            pkey: 0xFFFF,
            resv8: 0,
            dest_qp: 211,
            ack_req: false,
            psn: Psn::new(13_571_856),
        };
        let mut buf = [0u8; BTH_LEN];
        assert!(bth.write(&mut Writer::new(&mut buf)).is_some());
        // Same bytes as scapy's test/contrib/roce.uts UC example.
        assert_eq!(
            buf,
            [0x24, 0x60, 0xFF, 0xFF, 0, 0, 0, 0xD3, 0, 0xCF, 0x17, 0x10]
        );
        assert_eq!(Bth::read(&mut Reader::new(&buf)), Ok(bth));
    }

    #[test]
    fn rejects() {
        let good = [0x04, 0, 0xFF, 0xFF, 0, 0, 0, 1, 0x80, 0, 0, 1];
        assert!(Bth::read(&mut Reader::new(&good)).is_ok());
        let mut b = good;
        b[1] = 1;
        assert_eq!(Bth::read(&mut Reader::new(&b)), Err(ParseError::BadTver(1)));
        let mut b = good;
        b[8] = 0x81;
        assert_eq!(
            Bth::read(&mut Reader::new(&b)),
            Err(ParseError::ReservedBits)
        );
        let mut b = good;
        b[0] = 0x40;
        assert_eq!(
            Bth::read(&mut Reader::new(&b)),
            Err(ParseError::UnsupportedOpcode(0x40))
        );
        b[0] = 0x15;
        assert_eq!(
            Bth::read(&mut Reader::new(&b)),
            Err(ParseError::UnknownOpcode(0x15))
        );
        assert_eq!(
            Bth::read(&mut Reader::new(&good[..11])),
            Err(ParseError::Truncated)
        );
    }
}
