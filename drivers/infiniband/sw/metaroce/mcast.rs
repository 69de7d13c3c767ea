// SPDX-License-Identifier: GPL-2.0

//! UD multicast: QPs attached to groups (`attach_mcast`/`detach_mcast`), the netdev's IP
//! memberships kept in step with the groups that have members, and delivery of a received
//! multicast datagram to every QP attached to its group.
//!
//! The group table is the protocol core's [`McastTable`] under the device's `mcast` lock (taken
//! by the receive path, any context). Attaching and detaching are serialised by the device's
//! `mcast_update` mutex, held across the IP join or leave, so a group's network membership
//! always matches whether it has members: a group gets one membership when its first QP
//! attaches and loses it when its last QP goes. A QP is never destroyed attached: ib_core
//! refuses (`EBUSY`, the QP's use count) and uverbs detaches a user QP's groups itself when the
//! process or the device goes.

use crate::device::{MetaRoceDev, MetaRoceDriver, PORT};
use crate::ns::gid_ip;
use crate::proto::mcast::{Attached, McastError, McastTable, MAX_GROUPS, MAX_QPS_PER_GROUP};
use crate::proto::packet::Packet;
use kernel::net::netdev::NetDevice;
use kernel::prelude::*;
use kernel::rdma::device::Device;
use kernel::rdma::qp::Qp;

pub(crate) use crate::proto::mcast::MCAST_QPN;

fn errno(e: McastError) -> Error {
    match e {
        McastError::NotMulticast | McastError::NotAttached => EINVAL,
        McastError::TooManyGroups | McastError::GroupFull => ENOMEM,
    }
}

/// The destination GID of a received datagram, from its IP header (IPv4 as `::ffff:a.b.c.d`).
fn dst_gid(ip: &[u8]) -> Option<[u8; 16]> {
    let mut gid = [0u8; 16];
    match ip.first()? >> 4 {
        4 => {
            gid[10] = 0xff;
            gid[11] = 0xff;
            gid[12..].copy_from_slice(ip.get(16..20)?);
        }
        6 => gid.copy_from_slice(ip.get(24..40)?),
        _ => return None,
    }
    Some(gid)
}

/// A new, empty group table.
pub(crate) const fn table() -> McastTable {
    McastTable::new()
}

/// Device limits: groups, QPs per group, attachments in all.
pub(crate) const LIMITS: (u32, u32, u32) = (
    MAX_GROUPS as u32,
    MAX_QPS_PER_GROUP as u32,
    (MAX_GROUPS * MAX_QPS_PER_GROUP) as u32,
);

/// Gives up the netdev's membership of a group that lost its last QP. A netdev that is going
/// away (`None`) drops its memberships itself.
fn leave(netdev: Option<&NetDevice>, gid: &[u8; 16]) {
    if let Some(nd) = netdev {
        if let Err(e) = nd.leave_multicast(&gid_ip(gid)) {
            pr_warn!("metaroce: leaving a multicast group failed: {:?}\n", e);
        }
    }
}

/// `attach_mcast`: process context.
pub(crate) fn attach(qp: &Qp<MetaRoceDriver>, gid: &[u8; 16]) -> Result {
    let dev: &MetaRoceDev = qp.device();
    let netdev = qp.device().netdev(PORT).ok_or(ENODEV)?;
    let _serial = dev.mcast_update.lock();
    let attached = dev.mcast.lock().attach(gid, qp.qpn).map_err(errno)?;
    if attached == Attached::NewGroup {
        if let Err(e) = netdev.join_multicast(&gid_ip(gid)) {
            let _ = dev.mcast.lock().detach(gid, qp.qpn);
            return Err(e);
        }
    }
    Ok(())
}

/// `detach_mcast`: process context.
pub(crate) fn detach(qp: &Qp<MetaRoceDriver>, gid: &[u8; 16]) -> Result {
    let dev: &MetaRoceDev = qp.device();
    let netdev = qp.device().netdev(PORT);
    let _serial = dev.mcast_update.lock();
    if dev.mcast.lock().detach(gid, qp.qpn).map_err(errno)? {
        leave(netdev.as_deref(), gid);
    }
    Ok(())
}

/// Delivers a received datagram addressed to the multicast QPN to every QP attached to the
/// group of its destination address; whether any QP took it. Any context.
pub(crate) fn deliver(dev: &Device<MetaRoceDriver>, pkt: &Packet<'_>, ip: &[u8]) -> bool {
    let Some(gid) = dst_gid(ip) else { return false };
    let mut qpns = [0u32; MAX_QPS_PER_GROUP];
    let n = dev.mcast.lock().members(&gid, &mut qpns);
    let mut taken = false;
    for &qpn in qpns.iter().take(n) {
        if let Some(qp) = dev.lookup_qp(qpn) {
            taken |= crate::qp::receive(&qp, pkt, ip);
        }
    }
    taken
}
