// SPDX-License-Identifier: GPL-2.0
//! Restart proof (`Documentation/metaroce/transport.rst`, section 7.1).
//!
//! A connection's receiving half accepts the first ConnId it sees. Later DATA with another
//! ConnId is either a restarted peer or a forgery: an off-path host that knows the two
//! addresses and a QP number can send it. Before the receiving half forgets its peer it asks
//! the peer's *address* for a round trip: a CHALLENGE carrying a cookie goes to the source
//! address of the DATA; the device at that address answers with a PROOF that echoes the cookie
//! and names its *own* current ConnId. A forger that spoofs the peer's address never sees the
//! cookie, and the real peer names its own ConnId, never the forger's, so a forgery can neither
//! take the receiving half over nor make it drop a live peer.
//!
//! The cookie is SipHash-2-4 of a per-connection epoch under a per-connection random key
//! (given by the caller, [`super::conn::ConnConfig::restart_key`]); the epoch moves on after
//! every accepted proof and whenever a challenge is issued after the last one expired, so a
//! cookie is never good for long. The challenge does not depend on the ConnId that caused it:
//! a flood of forged ConnIds cannot crowd out the challenge a real restart needs.

use super::mrc_wire::{ProbeKind, ProbePkt};

/// SipHash-2-4 of `msg` under `key` (Aumasson and Bernstein, 2012), 64-bit output.
pub fn siphash24(key: [u64; 2], msg: &[u8]) -> u64 {
    let mut v = [
        key[0] ^ 0x736f_6d65_7073_6575,
        key[1] ^ 0x646f_7261_6e64_6f6d,
        key[0] ^ 0x6c79_6765_6e65_7261,
        key[1] ^ 0x7465_6462_7974_6573,
    ];
    let mut chunks = msg.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        compress(&mut v, u64::from_le_bytes(w));
    }
    let rest = chunks.remainder();
    let mut last = [0u8; 8];
    last[..rest.len()].copy_from_slice(rest);
    // The length's low byte goes into the top byte of the last word.
    last[7] = msg.len() as u8;
    compress(&mut v, u64::from_le_bytes(last));
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

fn compress(v: &mut [u64; 4], m: u64) {
    v[3] ^= m;
    round(v);
    round(v);
    v[0] ^= m;
}

fn round(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13);
    v[1] ^= v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16);
    v[3] ^= v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21);
    v[3] ^= v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17);
    v[1] ^= v[2];
    v[2] = v[2].rotate_left(32);
}

/// Smallest time between two CHALLENGEs of one connection (**our choice**): a forged DATA
/// flood makes at most this many reflections towards the peer's address.
pub const CHALLENGE_GAP_NS: u64 = 1_000_000;
/// How long a CHALLENGE's cookie is accepted (**our choice**).
pub const CHALLENGE_TTL_NS: u64 = 1_000_000_000;
/// PROOFs owed to challengers that a connection keeps until it transmits them.
const PROOFS: usize = 4;

/// Counters of the restart proof.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct RestartStats {
    /// DATA packets with an unproven ConnId (dropped, unacknowledged).
    pub unproven: u64,
    /// CHALLENGEs sent.
    pub challenges_sent: u64,
    /// PROOFs sent (answers to CHALLENGEs).
    pub proofs_sent: u64,
    /// PROOFs refused: a wrong or expired cookie, or no challenge outstanding.
    pub proofs_refused: u64,
    /// Restarts accepted (the receiving half now talks to a new ConnId; counted by the
    /// connection, which decides).
    pub restarts: u64,
}

impl RestartStats {
    /// All counters zero.
    pub const ZERO: RestartStats = RestartStats {
        unproven: 0,
        challenges_sent: 0,
        proofs_sent: 0,
        proofs_refused: 0,
        restarts: 0,
    };
}

/// What a PROOF did ([`RestartGuard::on_proof`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Proven {
    /// The cookie is good and names a new ConnId: the receiving half restarts with it.
    Restart(u32),
    /// The cookie is good and names the current peer: it did not restart (the DATA that
    /// caused the challenge was forged or stray); nothing changes.
    SamePeer,
}

/// The restart-proof state of one connection: the challenger's (receiving half) and the
/// prover's (sending half).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RestartGuard {
    key: [u64; 2],
    epoch: u64,
    /// When the outstanding challenge was first issued (its cookie is good until
    /// [`CHALLENGE_TTL_NS`] after), if one is.
    issued: Option<u64>,
    /// When the last CHALLENGE was sent, if one was.
    last_sent: Option<u64>,
    /// A CHALLENGE is waiting for the transmitter.
    due: bool,
    /// Cookies of CHALLENGEs received, to answer (newest last, oldest overwritten).
    proofs: [u64; PROOFS],
    nproofs: usize,
    /// Counters.
    pub stats: RestartStats,
}

impl RestartGuard {
    /// A guard whose cookies are keyed with `key` (random, per connection).
    pub const fn new(key: [u64; 2]) -> Self {
        RestartGuard {
            key,
            epoch: 0,
            issued: None,
            last_sent: None,
            due: false,
            proofs: [0; PROOFS],
            nproofs: 0,
            stats: RestartStats::ZERO,
        }
    }

    fn cookie(&self) -> u64 {
        siphash24(self.key, &self.epoch.to_le_bytes())
    }

    fn live(&self, now: u64) -> bool {
        self.issued
            .is_some_and(|t| now.saturating_sub(t) <= CHALLENGE_TTL_NS)
    }

    /// DATA with an unproven ConnId arrived at `now`: a CHALLENGE is queued unless one was
    /// sent less than [`CHALLENGE_GAP_NS`] ago.
    pub fn unproven(&mut self, now: u64) {
        self.stats.unproven = self.stats.unproven.saturating_add(1);
        if !self.live(now) {
            // A fresh cookie for a fresh challenge: an old one is never good again.
            self.epoch = self.epoch.wrapping_add(1);
            self.issued = Some(now);
        }
        if self
            .last_sent
            .is_none_or(|t| now.saturating_sub(t) >= CHALLENGE_GAP_NS)
        {
            self.due = true;
        }
    }

    /// The CHALLENGE to send at `now`, if one is due.
    pub fn poll_challenge(&mut self, now: u64) -> Option<ProbePkt> {
        if !self.due {
            return None;
        }
        self.due = false;
        if !self.live(now) {
            return None;
        }
        self.last_sent = Some(now);
        self.stats.challenges_sent = self.stats.challenges_sent.saturating_add(1);
        Some(ProbePkt {
            kind: ProbeKind::Challenge,
            conn: 0,
            cookie: self.cookie(),
        })
    }

    /// A PROOF naming ConnId `conn` with `cookie` arrived at `now`; `peer` is the ConnId the
    /// receiving half talks to. `None`: refused (counted).
    pub fn on_proof(
        &mut self,
        now: u64,
        conn: u32,
        cookie: u64,
        peer: Option<u32>,
    ) -> Option<Proven> {
        if !self.live(now) || cookie != self.cookie() || conn == 0 {
            self.stats.proofs_refused = self.stats.proofs_refused.saturating_add(1);
            return None;
        }
        // Used: the next challenge carries another cookie.
        self.issued = None;
        self.due = false;
        self.epoch = self.epoch.wrapping_add(1);
        if peer == Some(conn) {
            return Some(Proven::SamePeer);
        }
        Some(Proven::Restart(conn))
    }

    /// A CHALLENGE with `cookie` arrived: a PROOF is owed to the challenger.
    pub fn on_challenge(&mut self, cookie: u64) {
        if self.nproofs == PROOFS {
            self.proofs.copy_within(1.., 0);
            self.nproofs -= 1;
        }
        if let Some(p) = self.proofs.get_mut(self.nproofs) {
            *p = cookie;
            self.nproofs += 1;
        }
    }

    /// The PROOF to send for our ConnId `conn`, if one is owed.
    pub fn poll_proof(&mut self, conn: u32) -> Option<ProbePkt> {
        if self.nproofs == 0 {
            return None;
        }
        let cookie = self.proofs.first().copied()?;
        self.proofs.copy_within(1.., 0);
        self.nproofs -= 1;
        self.stats.proofs_sent = self.stats.proofs_sent.saturating_add(1);
        Some(ProbePkt {
            kind: ProbeKind::Proof,
            conn,
            cookie,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siphash_reference_vector() {
        // The paper's appendix A: key 00..0f, message 00..0e.
        let key = [
            u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7]),
            u64::from_le_bytes([8, 9, 10, 11, 12, 13, 14, 15]),
        ];
        let msg: [u8; 15] = core::array::from_fn(|i| i as u8);
        assert_eq!(siphash24(key, &msg), 0xa129_ca61_49be_45e5);
    }

    #[test]
    fn a_cookie_is_good_once() {
        let mut g = RestartGuard::new([1, 2]);
        g.unproven(10);
        let c = g.poll_challenge(10).unwrap();
        assert_eq!(
            g.on_proof(20, 7, c.cookie, Some(5)),
            Some(Proven::Restart(7))
        );
        assert_eq!(g.on_proof(21, 7, c.cookie, Some(7)), None);
        assert_eq!(g.stats.proofs_refused, 1);
    }

    #[test]
    fn wrong_and_expired_cookies_are_refused() {
        let mut g = RestartGuard::new([3, 4]);
        assert_eq!(
            g.on_proof(0, 7, 0, Some(5)),
            None,
            "no challenge outstanding"
        );
        g.unproven(0);
        let c = g.poll_challenge(0).unwrap();
        assert_eq!(g.on_proof(5, 7, c.cookie ^ 1, Some(5)), None);
        assert_eq!(g.on_proof(CHALLENGE_TTL_NS + 1, 7, c.cookie, Some(5)), None);
        // A new challenge after expiry carries a new cookie.
        g.unproven(CHALLENGE_TTL_NS + 2);
        let d = g.poll_challenge(CHALLENGE_TTL_NS + 2).unwrap();
        assert_ne!(c.cookie, d.cookie);
        assert_eq!(g.stats.proofs_refused, 3);
    }

    #[test]
    fn challenges_are_rate_limited() {
        let mut g = RestartGuard::new([5, 6]);
        let mut sent = 0;
        for t in 0..1000u64 {
            g.unproven(t * 10_000);
            sent += usize::from(g.poll_challenge(t * 10_000).is_some());
        }
        // 10 ms of forged DATA, one packet each 10 us: one challenge per ms.
        assert_eq!(sent, 10);
        assert_eq!(g.stats.unproven, 1000);
    }

    #[test]
    fn owed_proofs_keep_the_newest() {
        let mut g = RestartGuard::new([0, 0]);
        for c in 1..=6 {
            g.on_challenge(c);
        }
        let got: [u64; 4] = core::array::from_fn(|_| g.poll_proof(9).unwrap().cookie);
        assert_eq!(got, [3, 4, 5, 6]);
        assert_eq!(g.poll_proof(9), None);
    }
}
