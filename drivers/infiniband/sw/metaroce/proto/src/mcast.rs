// SPDX-License-Identifier: GPL-2.0
//! Multicast groups of UD QPs (IBTA 1.4 section 10.5, RoCE v2 annex A17.4.5.2).
//!
//! A device keeps one [`McastTable`]: for each multicast GID some UD QP attached to
//! (`ibv_attach_mcast`), the QP numbers attached. A packet sent to a multicast GID carries the
//! multicast QPN ([`MCAST_QPN`]) and is delivered to every QP attached to its destination GID.
//! The table is fixed-size storage owned by the caller (no allocation; the device's limits
//! `max_mcast_grp` and `max_mcast_qp_attach` are [`MAX_GROUPS`] and [`MAX_QPS_PER_GROUP`]).
//! Which GIDs are multicast ([`is_multicast_gid`]) follows ib_core's `rdma_is_multicast_addr`:
//! IPv6 `ff00::/8`, or an IPv4-mapped address in `224.0.0.0/4`.

/// The destination QPN of every multicast packet (IBTA 1.4, 10.5.2.1).
pub const MCAST_QPN: u32 = 0x00FF_FFFF;
/// Groups a device can have members in at once (`max_mcast_grp`). **Our choice.**
pub const MAX_GROUPS: usize = 32;
/// QPs one group can hold (`max_mcast_qp_attach`). **Our choice.**
pub const MAX_QPS_PER_GROUP: usize = 16;

/// Whether `gid` is a multicast GID: `ff00::/8`, or `::ffff:a.b.c.d` with `a.b.c.d` in
/// `224.0.0.0/4`.
pub fn is_multicast_gid(gid: &[u8; 16]) -> bool {
    let v4_mapped = gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff;
    if v4_mapped {
        gid[12] & 0xf0 == 0xe0
    } else {
        gid[0] == 0xff
    }
}

/// Why an attach or detach was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McastError {
    /// The GID is not a multicast GID (EINVAL).
    NotMulticast,
    /// Every group slot holds a group already (ENOMEM).
    TooManyGroups,
    /// The group holds [`MAX_QPS_PER_GROUP`] QPs already (ENOMEM).
    GroupFull,
    /// The QP is not attached to that group (EINVAL, as rdma_rxe answers).
    NotAttached,
}

/// What an attach did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attached {
    /// The QP is the group's first member: the caller joins the group on the network.
    NewGroup,
    /// The QP joined a group that had members.
    Added,
    /// The QP was a member already; nothing changed.
    Already,
}

#[derive(Clone, Copy)]
struct Group {
    gid: [u8; 16],
    qpns: [u32; MAX_QPS_PER_GROUP],
    /// Members: `qpns[..n]`, never 0 (a group without members is removed).
    n: usize,
}

impl Group {
    fn members(&self) -> &[u32] {
        self.qpns.get(..self.n).unwrap_or(&[])
    }

    /// Removes `qpn` if it is a member (order of the others is not kept); whether it was.
    fn remove(&mut self, qpn: u32) -> bool {
        let Some(i) = self.members().iter().position(|&q| q == qpn) else {
            return false;
        };
        self.n -= 1;
        self.qpns[i] = self.qpns[self.n];
        true
    }
}

/// The multicast groups of one device and the QPs attached to each.
pub struct McastTable {
    groups: [Option<Group>; MAX_GROUPS],
}

impl Default for McastTable {
    fn default() -> Self {
        Self::new()
    }
}

impl McastTable {
    /// An empty table.
    pub const fn new() -> Self {
        Self {
            groups: [None; MAX_GROUPS],
        }
    }

    fn find(&self, gid: &[u8; 16]) -> Option<&Group> {
        self.groups.iter().flatten().find(|g| g.gid == *gid)
    }

    /// Attaches QP `qpn` to the group of `gid`, creating the group if it has no members yet.
    pub fn attach(&mut self, gid: &[u8; 16], qpn: u32) -> Result<Attached, McastError> {
        if !is_multicast_gid(gid) {
            return Err(McastError::NotMulticast);
        }
        if let Some(g) = self.groups.iter_mut().flatten().find(|g| g.gid == *gid) {
            if g.members().contains(&qpn) {
                return Ok(Attached::Already);
            }
            let slot = g.qpns.get_mut(g.n).ok_or(McastError::GroupFull)?;
            *slot = qpn;
            g.n += 1;
            return Ok(Attached::Added);
        }
        let slot = self
            .groups
            .iter_mut()
            .find(|g| g.is_none())
            .ok_or(McastError::TooManyGroups)?;
        let mut qpns = [0; MAX_QPS_PER_GROUP];
        qpns[0] = qpn;
        *slot = Some(Group {
            gid: *gid,
            qpns,
            n: 1,
        });
        Ok(Attached::NewGroup)
    }

    /// Detaches QP `qpn` from the group of `gid`; `Ok(true)` if that removed the group's last
    /// member (the caller leaves the group on the network).
    pub fn detach(&mut self, gid: &[u8; 16], qpn: u32) -> Result<bool, McastError> {
        let slot = self
            .groups
            .iter_mut()
            .find(|g| g.as_ref().is_some_and(|g| g.gid == *gid))
            .ok_or(McastError::NotAttached)?;
        let g = slot.as_mut().ok_or(McastError::NotAttached)?;
        if !g.remove(qpn) {
            return Err(McastError::NotAttached);
        }
        if g.n == 0 {
            *slot = None;
            return Ok(true);
        }
        Ok(false)
    }

    /// Copies the QPs attached to the group of `gid` to `out`; returns how many (0 if there is
    /// no such group).
    pub fn members(&self, gid: &[u8; 16], out: &mut [u32; MAX_QPS_PER_GROUP]) -> usize {
        let Some(g) = self.find(gid) else { return 0 };
        let m = g.members();
        out[..m.len()].copy_from_slice(m);
        m.len()
    }

    /// Groups with members.
    pub fn groups(&self) -> usize {
        self.groups.iter().flatten().count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(a: u8, b: u8, c: u8, d: u8) -> [u8; 16] {
        let mut g = [0; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&[a, b, c, d]);
        g
    }

    fn v6_mc(last: u8) -> [u8; 16] {
        let mut g = [0; 16];
        g[0] = 0xff;
        g[1] = 0x0e;
        g[15] = last;
        g
    }

    #[test]
    fn multicast_gids() {
        assert!(is_multicast_gid(&v4(224, 0, 0, 1)));
        assert!(is_multicast_gid(&v4(239, 255, 255, 255)));
        assert!(!is_multicast_gid(&v4(240, 0, 0, 1)));
        assert!(!is_multicast_gid(&v4(192, 0, 2, 1)));
        assert!(is_multicast_gid(&v6_mc(1)));
        let mut u = v6_mc(1);
        u[0] = 0x20;
        assert!(!is_multicast_gid(&u));
        // An IPv4-compatible (not mapped) address with 0xe0 in byte 12 is not multicast.
        let mut c = v4(224, 0, 0, 1);
        c[10] = 0;
        c[11] = 0;
        assert!(!is_multicast_gid(&c));
    }

    #[test]
    fn attach_detach_and_members() {
        let mut t = McastTable::new();
        let g = v4(239, 1, 1, 1);
        assert_eq!(
            t.attach(&v4(192, 0, 2, 1), 5),
            Err(McastError::NotMulticast)
        );
        assert_eq!(t.attach(&g, 5), Ok(Attached::NewGroup));
        assert_eq!(t.attach(&g, 5), Ok(Attached::Already));
        assert_eq!(t.attach(&g, 6), Ok(Attached::Added));
        let mut out = [0; MAX_QPS_PER_GROUP];
        assert_eq!(t.members(&g, &mut out), 2);
        assert_eq!(&out[..2], &[5, 6]);
        assert_eq!(t.members(&v4(239, 1, 1, 2), &mut out), 0);
        assert_eq!(t.detach(&g, 7), Err(McastError::NotAttached));
        assert_eq!(t.detach(&v4(239, 1, 1, 2), 5), Err(McastError::NotAttached));
        assert_eq!(t.detach(&g, 5), Ok(false));
        assert_eq!(t.members(&g, &mut out), 1);
        assert_eq!(out[0], 6);
        assert_eq!(t.detach(&g, 6), Ok(true));
        assert_eq!(t.groups(), 0);
        assert_eq!(t.detach(&g, 6), Err(McastError::NotAttached));
    }

    #[test]
    fn limits() {
        let mut t = McastTable::new();
        let g = v6_mc(1);
        for q in 0..MAX_QPS_PER_GROUP as u32 {
            assert!(t.attach(&g, 100 + q).is_ok());
        }
        assert_eq!(t.attach(&g, 1), Err(McastError::GroupFull));
        for i in 1..MAX_GROUPS as u8 {
            assert_eq!(t.attach(&v6_mc(1 + i), 1), Ok(Attached::NewGroup));
        }
        assert_eq!(t.groups(), MAX_GROUPS);
        assert_eq!(t.attach(&v6_mc(200), 1), Err(McastError::TooManyGroups));
        // A freed slot is reused.
        assert_eq!(t.detach(&v6_mc(2), 1), Ok(true));
        assert_eq!(t.attach(&v6_mc(200), 1), Ok(Attached::NewGroup));
    }
}
