// SPDX-License-Identifier: GPL-2.0
//! The authenticated mode's keys and MAC (`transport.rst`, section 13.1): a device whose netdev
//! has a fabric key in the keyring (`keyctl add logon metaroce:<netdev> <32 bytes> @u`) seals
//! every native packet with the kernel crypto library's XChaCha20-Poly1305 (empty plaintext: a
//! MAC), under keys derived from the fabric key with keyed BLAKE2s.

use crate::proto::auth::{DataSender, KeyId, PacketMac, KEY_LEN, NONCE_LEN, TAG_LEN};
use kernel::net::crypto::{self, SecretKey};
use kernel::prelude::*;

/// The MAC of the authenticated mode.
pub(crate) struct KernelMac;

impl PacketMac for KernelMac {
    fn tag(&self, key: &[u8; KEY_LEN], nonce: &[u8; NONCE_LEN], data: &[u8]) -> [u8; TAG_LEN] {
        crypto::xchacha20poly1305_tag(key, nonce, data)
    }
}

/// The derivation's label: keys of another protocol or version never equal ours.
const LABEL: &[u8; 16] = b"metaroce v1 key\0";

/// `K(sender, receiver, conn)`: the key of the data direction from GID `sender` to GID
/// `receiver` of connection `conn` (0: the link key).
fn derive(
    fabric: &SecretKey,
    sender: &[u8; 16],
    receiver: &[u8; 16],
    conn: u32,
) -> Result<SecretKey> {
    let mut input = [0u8; 16 + 16 + 16 + 4];
    input[..16].copy_from_slice(LABEL);
    input[16..32].copy_from_slice(sender);
    input[32..48].copy_from_slice(receiver);
    input[48..].copy_from_slice(&conn.to_be_bytes());
    crypto::blake2s_keyed(fabric.bytes(), &input)
}

/// The keys of one connection that never change: its own data direction's, and the two link
/// keys.
pub(crate) struct PeerKeys {
    fabric: SecretKey,
    sgid: [u8; 16],
    dgid: [u8; 16],
    own: u32,
    /// `K(us, peer, own)`: our DATA, the peer's ACKs of it.
    out: SecretKey,
    /// `K(us, peer, 0)`: the peer's CHALLENGEs to us, our PROOFs.
    link_us: SecretKey,
    /// `K(peer, us, 0)`: our CHALLENGEs, the peer's PROOFs.
    link_peer: SecretKey,
}

impl PeerKeys {
    /// The keys of our connection `own` from GID `sgid` to GID `dgid` under `fabric`.
    pub(crate) fn new(
        fabric: &SecretKey,
        sgid: &[u8; 16],
        dgid: &[u8; 16],
        own: u32,
    ) -> Result<Self> {
        Ok(Self {
            fabric: fabric.clone(),
            sgid: *sgid,
            dgid: *dgid,
            own,
            out: derive(fabric, sgid, dgid, own)?,
            link_us: derive(fabric, sgid, dgid, 0)?,
            link_peer: derive(fabric, dgid, sgid, 0)?,
        })
    }

    /// The key `k` names if it is one of the fixed ones; `None` for the peer's data direction
    /// (see [`PeerKeyCache`]) and for a connection of ours that is not this one.
    pub(crate) fn fixed(&self, k: KeyId) -> Option<&SecretKey> {
        match (k.sender, k.conn) {
            (DataSender::Us, 0) => Some(&self.link_us),
            (DataSender::Us, c) if c == self.own => Some(&self.out),
            (DataSender::Peer, 0) => Some(&self.link_peer),
            _ => None,
        }
    }

    /// Our connection's id.
    pub(crate) fn own(&self) -> u32 {
        self.own
    }

    /// `K(peer, us, conn)`.
    fn peer_key(&self, conn: u32) -> Result<SecretKey> {
        derive(&self.fabric, &self.dgid, &self.sgid, conn)
    }
}

/// The keys of the peer's data direction by its ConnId: its current one and the last other
/// one asked for (a restart candidate). Lives under the connection's lock.
pub(crate) struct PeerKeyCache {
    slots: [Option<(u32, SecretKey)>; 2],
    next: usize,
}

impl PeerKeyCache {
    /// An empty cache.
    pub(crate) const EMPTY: Self = Self {
        slots: [None, None],
        next: 0,
    };

    /// The key `k` names, derived (and kept) if needed. `ENOKEY` for a connection of ours that
    /// is not `keys`'.
    pub(crate) fn key(&mut self, keys: &PeerKeys, k: KeyId) -> Result<SecretKey> {
        if let Some(f) = keys.fixed(k) {
            return Ok(f.clone());
        }
        if k.sender == DataSender::Us {
            return Err(ENOKEY);
        }
        for (c, key) in self.slots.iter().flatten() {
            if *c == k.conn {
                return Ok(key.clone());
            }
        }
        let key = keys.peer_key(k.conn)?;
        let i = self.next % self.slots.len();
        self.next = i + 1;
        if let Some(s) = self.slots.get_mut(i) {
            *s = Some((k.conn, key.clone()));
        }
        Ok(key)
    }
}
