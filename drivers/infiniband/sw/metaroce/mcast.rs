// SPDX-License-Identifier: GPL-2.0

//! Multicast groups of UD QPs (`attach_mcast`/`detach_mcast`).
//!
//! On RoCE v2 a multicast group is an IP multicast address, as its GID: `ff00::/8`, or an
//! IPv4-mapped `224.0.0.0/4` address. A datagram for a group is sent to that IP address and QP
//! number 0xFFFFFF; the receive path hands a copy to every UD QP of the device attached to the
//! group of the packet's destination address (the IP stack has already refused groups this
//! host did not join: rdma_cm joins the IP group for its users, as for rdma_rxe).
//!
//! The device keeps its groups in a table under an IRQ-disabling spinlock (the receive path
//! reads it in softirq context); attach and detach are serialised by a mutex, so that the
//! netdev's link-layer multicast filter (`dev_mc_add`, once per group) changes in step with the
//! table.

use crate::device::{MetaRoceDev, MetaRoceDriver, PORT};
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNode};
use kernel::rdma::qp::Qp;

/// Most multicast groups of a device (`max_mcast_grp`; rdma_rxe's figure).
pub(crate) const MAX_MCAST_GRP: u32 = 8192;
/// Most QPs attached to one group (`max_mcast_qp_attach`; rdma_rxe's figure).
pub(crate) const MAX_MCAST_QP_ATTACH: u32 = 56;
/// Most attachments of a device (`max_total_mcast_qp_attach`).
pub(crate) const MAX_TOTAL_MCAST_QP_ATTACH: u32 = MAX_MCAST_GRP * MAX_MCAST_QP_ATTACH;

/// The destination QP number of multicast datagrams.
pub(crate) const MCAST_QPN: u32 = 0xFF_FFFF;

/// The QPs attached to one group (capacity [`MAX_MCAST_QP_ATTACH`], reserved when the group is
/// created, so attaching never allocates under the lock).
struct Group {
    qpns: KVec<u32>,
}

/// A device's multicast groups by GID.
pub(crate) struct McastTable {
    groups: RBTree<[u8; 16], Group>,
    /// Groups in `groups`.
    count: u32,
    /// Attachments over all groups.
    attached: u32,
}

impl McastTable {
    pub(crate) fn new() -> Self {
        Self { groups: RBTree::new(), count: 0, attached: 0 }
    }
}

/// The Ethernet multicast address of a multicast GID (RFC 1112 for IPv4, RFC 2464 for IPv6).
fn mac_of(gid: &[u8; 16]) -> [u8; 6] {
    if is_v4_mapped(gid) {
        [0x01, 0x00, 0x5e, gid[13] & 0x7f, gid[14], gid[15]]
    } else {
        [0x33, 0x33, gid[12], gid[13], gid[14], gid[15]]
    }
}

fn is_v4_mapped(gid: &[u8; 16]) -> bool {
    gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff
}

/// The destination address of an IPv4 or IPv6 header as a GID, if it is a multicast one.
pub(crate) fn dest_group(ip: &[u8]) -> Option<[u8; 16]> {
    let mut gid = [0u8; 16];
    match ip.first().map(|b| b >> 4) {
        Some(4) => {
            let dst = ip.get(16..20)?;
            gid[10] = 0xff;
            gid[11] = 0xff;
            gid[12..].copy_from_slice(dst);
            (dst[0] & 0xf0 == 0xe0).then_some(gid)
        }
        Some(6) => {
            gid.copy_from_slice(ip.get(24..40)?);
            (gid[0] == 0xff).then_some(gid)
        }
        _ => None,
    }
}

/// Attaches `qp` to the group of `gid`; attaching twice is not an error. Process context.
pub(crate) fn attach(qp: &Qp<MetaRoceDriver>, gid: &[u8; 16]) -> Result {
    let dev = qp.device();
    let qpn = qp.qpn();
    let netdev = dev.netdev(PORT).ok_or(ENODEV)?;
    let _serial = dev.mcast_mutex.lock();
    // A new group's node, allocated before the table is locked (dropped unused if the group
    // exists; locals drop after the lock guard).
    let mut qpns = KVec::with_capacity(MAX_MCAST_QP_ATTACH as usize, GFP_KERNEL)?;
    qpns.push(qpn, GFP_KERNEL)?;
    let node = RBTreeNode::new(*gid, Group { qpns }, GFP_KERNEL)?;
    let new_group = {
        let mut guard = dev.mcast.lock();
        let t = &mut *guard;
        if t.attached >= MAX_TOTAL_MCAST_QP_ATTACH {
            return Err(ENOMEM);
        }
        match t.groups.get_mut(gid) {
            Some(g) if g.qpns.contains(&qpn) => return Ok(()),
            Some(g) if g.qpns.len() >= MAX_MCAST_QP_ATTACH as usize => return Err(ENOMEM),
            // Within the capacity reserved with the group: no allocation.
            Some(g) => {
                g.qpns.push(qpn, GFP_ATOMIC)?;
                t.attached += 1;
                false
            }
            None if t.count >= MAX_MCAST_GRP => return Err(ENOMEM),
            None => {
                // The GID was not in the table, so nothing is replaced.
                drop(t.groups.insert(node));
                t.count += 1;
                t.attached += 1;
                true
            }
        }
    };
    if new_group {
        if let Err(e) = netdev.mc_add(&mac_of(gid)) {
            remove(dev, gid, qpn);
            return Err(e);
        }
    }
    Ok(())
}

/// Takes `qpn` out of the group of `gid`; returns whether it was there and whether the group
/// is gone (it was the group's last QP).
fn remove(dev: &MetaRoceDev, gid: &[u8; 16], qpn: u32) -> (bool, bool) {
    let gone = {
        let mut guard = dev.mcast.lock();
        let t = &mut *guard;
        let Some(g) = t.groups.get_mut(gid) else {
            return (false, false);
        };
        let Some(i) = g.qpns.iter().position(|&q| q == qpn) else {
            return (false, false);
        };
        // In bounds: found just now.
        let _ = g.qpns.remove(i);
        let empty = g.qpns.is_empty();
        t.attached -= 1;
        if empty {
            t.count -= 1;
            t.groups.remove(gid)
        } else {
            None
        }
    };
    let last = gone.is_some();
    // The group's memory is freed outside the lock.
    drop(gone);
    (true, last)
}

/// Detaches `qp` from the group of `gid` (`EINVAL` if it is not attached). Process context.
pub(crate) fn detach(qp: &Qp<MetaRoceDriver>, gid: &[u8; 16]) -> Result {
    let dev = qp.device();
    let _serial = dev.mcast_mutex.lock();
    match remove(dev, gid, qp.qpn()) {
        (false, _) => Err(EINVAL),
        (true, last) => {
            if last {
                if let Some(netdev) = dev.netdev(PORT) {
                    // Only fails if the netdev lost the address already (it is going away).
                    let _ = netdev.mc_del(&mac_of(gid));
                }
            }
            Ok(())
        }
    }
}

/// Detaches QP `qpn` from every group (the QP is being destroyed). Process context.
pub(crate) fn detach_all(dev: &MetaRoceDev, qpn: u32) {
    let _serial = dev.mcast_mutex.lock();
    loop {
        let gid = {
            let t = dev.mcast.lock();
            if t.attached == 0 {
                return;
            }
            match t.groups.iter().find(|(_, g)| g.qpns.contains(&qpn)) {
                Some((gid, _)) => *gid,
                None => return,
            }
        };
        if let (_, true) = remove(dev, &gid, qpn) {
            if let Some(netdev) = dev.netdev(PORT) {
                let _ = netdev.mc_del(&mac_of(&gid));
            }
        }
    }
}

impl MetaRoceDev {
    /// Copies the numbers of the QPs attached to the group of `gid` into `out`; returns how
    /// many. Any context.
    pub(crate) fn mcast_qpns(&self, gid: &[u8; 16], out: &mut [u32; MAX_MCAST_QP_ATTACH as usize]) -> usize {
        let t = self.mcast.lock();
        let Some(g) = t.groups.get(gid) else { return 0 };
        let n = core::cmp::min(g.qpns.len(), out.len());
        out[..n].copy_from_slice(&g.qpns[..n]);
        n
    }
}
