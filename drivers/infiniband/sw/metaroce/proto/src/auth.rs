// SPDX-License-Identifier: GPL-2.0
//! Authenticated native packets (`Documentation/metaroce/transport.rst`, section 13.1): the
//! framing, the nonces, which key a packet is tagged with, and the ACK replay window. The MAC
//! itself and the key derivation are the caller's (the kernel: the crypto library's
//! XChaCha20-Poly1305 with an empty plaintext, and BLAKE2s), given through [`PacketMac`].
//!
//! In the authenticated mode every native packet carries the AUTH flag and ends with a trailer
//! that the UDP length covers:
//!
//! ```text
//! SenderId (4) | Seq (8) | Tag (16)
//! ```
//!
//! SenderId is the sending connection's own ConnId, Seq a counter of every packet it sent
//! (never repeating), and Tag the MAC of every byte before it. The key is the one of the data
//! direction the packet belongs to: `K(data sender, data receiver, ConnId)` for DATA and the
//! ACKs of that DATA, `K(data sender, data receiver, 0)` (the link key) for CHALLENGE and PROOF.
//! The nonce is (type, direction, SenderId, Seq): two packets under one key never share it.

use super::mrc_wire::MrcError;

/// Bytes of the trailer.
pub const TRAILER_LEN: usize = 28;
/// Bytes of the tag (the trailer's end).
pub const TAG_LEN: usize = 16;
/// Bytes of a nonce.
pub const NONCE_LEN: usize = 24;
/// Bytes of a key.
pub const KEY_LEN: usize = 32;
/// The AUTH flag of a DATA packet (flags bit 5).
pub const FLAG_AUTH_DATA: u8 = 0x20;
/// The AUTH flag of ACK, CHALLENGE and PROOF (flags bit 7).
pub const FLAG_AUTH: u8 = 0x80;

const TYPE_DATA: u8 = 1;
const TYPE_ACK: u8 = 2;
const TYPE_CHALLENGE: u8 = 3;
const TYPE_PROOF: u8 = 4;

/// The MAC of the authenticated mode.
pub trait PacketMac {
    /// The tag of `data` under `key` and `nonce`.
    fn tag(&self, key: &[u8; KEY_LEN], nonce: &[u8; NONCE_LEN], data: &[u8]) -> [u8; TAG_LEN];
}

/// Which device sends the data of the direction a key belongs to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum DataSender {
    /// This device (our DATA and PROOFs; the peer's ACKs and CHALLENGEs to us).
    Us,
    /// The peer (its DATA and PROOFs; our ACKs and CHALLENGEs to it).
    Peer,
}

/// The key a packet is tagged with: `K(data sender, data receiver, conn)`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct KeyId {
    /// Who sends the data of that direction.
    pub sender: DataSender,
    /// The data sender's ConnId; 0 for the link key (CHALLENGE and PROOF).
    pub conn: u32,
}

/// An authenticated packet, split.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Sealed<'a> {
    /// The packet proper (the bytes before the trailer), AUTH flag set.
    pub packet: &'a [u8],
    /// The bytes the tag covers (the packet, SenderId and Seq).
    pub covered: &'a [u8],
    /// The key to check the tag with.
    pub key: KeyId,
    /// The nonce.
    pub nonce: [u8; NONCE_LEN],
    /// The tag.
    pub tag: [u8; TAG_LEN],
    /// The sending connection's ConnId.
    pub sender_id: u32,
    /// The sending connection's packet counter.
    pub seq: u64,
}

/// The nonce of a packet of `ty` (the MRH type) sent by the data sender (`by_sender`) or the
/// data receiver of its direction, from connection `sender_id`, its `seq`-th.
pub fn nonce(ty: u8, by_sender: bool, sender_id: u32, seq: u64) -> [u8; NONCE_LEN] {
    let mut n = [0u8; NONCE_LEN];
    n[0] = ty;
    n[1] = u8::from(by_sender);
    n[4..8].copy_from_slice(&sender_id.to_be_bytes());
    n[8..16].copy_from_slice(&seq.to_be_bytes());
    n
}

/// The key and whether the data sender sends it, for a packet of type `ty` whose ConnId field
/// holds `conn`, received (`incoming`) or sent.
fn key_of(ty: u8, conn: u32, incoming: bool) -> Result<(KeyId, bool), MrcError> {
    let (by_sender, conn) = match ty {
        TYPE_DATA => (true, conn),
        TYPE_ACK => (false, conn),
        TYPE_CHALLENGE => (false, 0),
        TYPE_PROOF => (true, 0),
        other => return Err(MrcError::BadType(other)),
    };
    // A packet the data sender sends comes from the peer if it is incoming.
    let sender = if by_sender == incoming {
        DataSender::Peer
    } else {
        DataSender::Us
    };
    Ok((KeyId { sender, conn }, by_sender))
}

fn auth_flag(ty: u8) -> u8 {
    if ty == TYPE_DATA {
        FLAG_AUTH_DATA
    } else {
        FLAG_AUTH
    }
}

/// Splits a received datagram (the UDP payload) of the authenticated mode: its packet, the
/// bytes its tag covers, the key and nonce to check the tag with. Checks only the framing (the
/// AUTH flag, the length, a DATA packet's SenderId equal to its ConnId); the caller checks the
/// tag before anything else reads the packet.
pub fn open(buf: &[u8]) -> Result<Sealed<'_>, MrcError> {
    let plen = buf
        .len()
        .checked_sub(TRAILER_LEN)
        .ok_or(MrcError::Truncated)?;
    let (packet, trailer) = buf.split_at(plen);
    if packet.len() < 8 {
        return Err(MrcError::Truncated);
    }
    let ty = packet[0] & 0x0F;
    if packet[1] & auth_flag(ty) == 0 {
        return Err(MrcError::Reserved);
    }
    let conn = u32::from_be_bytes([packet[4], packet[5], packet[6], packet[7]]);
    let (key, by_sender) = key_of(ty, conn, true)?;
    let mut id = [0u8; 4];
    id.copy_from_slice(&trailer[..4]);
    let sender_id = u32::from_be_bytes(id);
    let mut s = [0u8; 8];
    s.copy_from_slice(&trailer[4..12]);
    let seq = u64::from_be_bytes(s);
    if ty == TYPE_DATA && sender_id != conn {
        return Err(MrcError::BadPlacement);
    }
    let mut tag = [0u8; TAG_LEN];
    tag.copy_from_slice(&trailer[12..]);
    Ok(Sealed {
        packet,
        covered: &buf[..plen + 12],
        key,
        nonce: nonce(ty, by_sender, sender_id, seq),
        tag,
        sender_id,
        seq,
    })
}

/// Seals the packet in `buf[..len]` (written with the AUTH flag) for sending: writes the
/// trailer's SenderId and Seq after it and returns the length with the trailer, the key and
/// the nonce. The caller writes the tag of `buf[..len + 12]` to the last [`TAG_LEN`] bytes.
pub fn seal(
    buf: &mut [u8],
    len: usize,
    sender_id: u32,
    seq: u64,
) -> Result<(usize, KeyId, [u8; NONCE_LEN]), MrcError> {
    let total = len.checked_add(TRAILER_LEN).ok_or(MrcError::BadLength)?;
    if len < 8 || buf.len() < total {
        return Err(MrcError::Truncated);
    }
    let ty = buf[0] & 0x0F;
    let conn = u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]);
    let (key, by_sender) = key_of(ty, conn, false)?;
    buf[len..len + 4].copy_from_slice(&sender_id.to_be_bytes());
    buf[len + 4..len + 12].copy_from_slice(&seq.to_be_bytes());
    Ok((total, key, nonce(ty, by_sender, sender_id, seq)))
}

/// The key an outgoing packet whose header starts `hdr` is tagged with (the one [`seal`]
/// returns), known before the trailer is written.
pub fn key_out(hdr: &[u8]) -> Result<KeyId, MrcError> {
    if hdr.len() < 8 {
        return Err(MrcError::Truncated);
    }
    let conn = u32::from_be_bytes([hdr[4], hdr[5], hdr[6], hdr[7]]);
    key_of(hdr[0] & 0x0F, conn, false).map(|(k, _)| k)
}

/// Tags a packet sealed with [`seal`]: `buf[..total]`.
pub fn tag_into(
    mac: &impl PacketMac,
    key: &[u8; KEY_LEN],
    nonce: &[u8; NONCE_LEN],
    buf: &mut [u8],
    total: usize,
) -> Result<(), MrcError> {
    let at = total.checked_sub(TAG_LEN).ok_or(MrcError::Truncated)?;
    let t = mac.tag(key, nonce, buf.get(..at).ok_or(MrcError::Truncated)?);
    buf.get_mut(at..total)
        .ok_or(MrcError::Truncated)?
        .copy_from_slice(&t);
    Ok(())
}

/// Whether `s`'s tag is right under `key`, in time independent of where it differs.
pub fn verify(mac: &impl PacketMac, key: &[u8; KEY_LEN], s: &Sealed<'_>) -> bool {
    let t = mac.tag(key, &s.nonce, s.covered);
    t.iter()
        .zip(s.tag.iter())
        .fold(0u8, |d, (a, b)| d | (a ^ b))
        == 0
}

/// Sets the AUTH flag of the packet written to `buf`.
pub fn mark(buf: &mut [u8]) {
    if let Some(&b0) = buf.first() {
        let f = auth_flag(b0 & 0x0F);
        if let Some(b1) = buf.get_mut(1) {
            *b1 |= f;
        }
    }
}

/// The ACKs of one peer connection already taken, by Seq: a replayed ACK is refused
/// (IPsec's anti-replay window, RFC 4303 section 3.4.3, 64 deep).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct ReplayWindow {
    /// The highest Seq taken, if any.
    top: Option<u64>,
    /// Bit `i`: `top - i` taken.
    bits: u64,
}

impl ReplayWindow {
    /// An empty window.
    pub const EMPTY: ReplayWindow = ReplayWindow { top: None, bits: 0 };

    /// Takes `seq` if it is new and not too old; `false`: a replay (or too old to tell).
    pub fn take(&mut self, seq: u64) -> bool {
        let Some(top) = self.top else {
            self.top = Some(seq);
            self.bits = 1;
            return true;
        };
        if seq > top {
            let shift = seq - top;
            self.bits = if shift >= 64 { 0 } else { self.bits << shift };
            self.bits |= 1;
            self.top = Some(seq);
            return true;
        }
        let back = top - seq;
        if back >= 64 || self.bits & (1 << back) != 0 {
            return false;
        }
        self.bits |= 1 << back;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Sum;
    impl PacketMac for Sum {
        fn tag(&self, key: &[u8; KEY_LEN], nonce: &[u8; NONCE_LEN], data: &[u8]) -> [u8; 16] {
            let k = [
                u64::from_le_bytes(key[..8].try_into().unwrap()),
                u64::from_le_bytes(nonce[8..16].try_into().unwrap()) ^ u64::from(nonce[0]),
            ];
            let h = super::super::restart::siphash24(k, data);
            let mut t = [0u8; 16];
            t[..8].copy_from_slice(&h.to_le_bytes());
            t
        }
    }

    #[test]
    fn seal_then_open() {
        // A DATA header: type 1, the AUTH flag, ConnId 7.
        let mut buf = [0u8; 64 + TRAILER_LEN];
        buf[0] = 0x11;
        buf[7] = 7;
        mark(&mut buf);
        assert_eq!(buf[1], FLAG_AUTH_DATA);
        let (total, key, n) = seal(&mut buf, 64, 7, 42).unwrap();
        assert_eq!(total, 64 + TRAILER_LEN);
        assert_eq!(
            key,
            KeyId {
                sender: DataSender::Us,
                conn: 7
            }
        );
        let k = [9u8; KEY_LEN];
        tag_into(&Sum, &k, &n, &mut buf, total).unwrap();
        let s = open(&buf).unwrap();
        assert_eq!(
            s.key,
            KeyId {
                sender: DataSender::Peer,
                conn: 7
            }
        );
        assert_eq!((s.sender_id, s.seq, s.nonce), (7, 42, n));
        assert_eq!(s.packet, &buf[..64]);
        assert!(verify(&Sum, &k, &s));
        let mut bad = buf;
        bad[10] ^= 1;
        assert!(!verify(&Sum, &k, &open(&bad).unwrap()));
        assert!(!verify(&Sum, &[8u8; KEY_LEN], &s));
        // A DATA packet's SenderId is its ConnId.
        let mut other = buf;
        other[64 + 3] = 8;
        assert_eq!(open(&other).err(), Some(MrcError::BadPlacement));
        // No AUTH flag: refused before any key is looked up.
        let mut plain = buf;
        plain[1] = 0;
        assert_eq!(open(&plain).err(), Some(MrcError::Reserved));
        assert_eq!(
            open(&buf[..TRAILER_LEN + 7]).err(),
            Some(MrcError::Truncated)
        );
    }

    #[test]
    fn keys_and_nonces_by_type() {
        // ACK (type 2, ConnId 5): the key of the data its sender receives.
        let mut b = [0u8; 56 + TRAILER_LEN];
        b[0] = 0x12;
        b[7] = 5;
        mark(&mut b);
        assert_eq!(b[1], FLAG_AUTH);
        let (_, k, n_ack) = seal(&mut b, 56, 9, 1).unwrap();
        assert_eq!(
            k,
            KeyId {
                sender: DataSender::Peer,
                conn: 5
            }
        );
        assert_eq!(
            open(&b).unwrap().key,
            KeyId {
                sender: DataSender::Us,
                conn: 5
            }
        );
        // CHALLENGE and PROOF: the link key; the challenger is the data receiver.
        let mut c = [0u8; 16 + TRAILER_LEN];
        c[0] = 0x13;
        mark(&mut c);
        let (_, k, n_ch) = seal(&mut c, 16, 9, 1).unwrap();
        assert_eq!(
            k,
            KeyId {
                sender: DataSender::Peer,
                conn: 0
            }
        );
        let mut p = c;
        p[0] = 0x14;
        let (_, k, n_pr) = seal(&mut p, 16, 9, 1).unwrap();
        assert_eq!(
            k,
            KeyId {
                sender: DataSender::Us,
                conn: 0
            }
        );
        // Same sender and Seq, other types or directions: other nonces.
        assert_ne!(n_ack, n_ch);
        assert_ne!(n_ch, n_pr);
        assert_ne!(nonce(1, true, 9, 1), nonce(1, false, 9, 1));
    }

    #[test]
    fn replay_window() {
        let mut w = ReplayWindow::EMPTY;
        assert!(w.take(100));
        assert!(!w.take(100));
        assert!(w.take(98));
        assert!(w.take(101));
        assert!(!w.take(98));
        assert!(w.take(99));
        assert!(w.take(200));
        assert!(!w.take(136), "64 behind the top: too old");
        assert!(w.take(137));
        assert!(w.take(u64::MAX));
        assert!(!w.take(u64::MAX));
    }
}
