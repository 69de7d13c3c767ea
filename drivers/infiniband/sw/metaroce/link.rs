// SPDX-License-Identifier: GPL-2.0

//! The link types: `rdma link add NAME type metaroce netdev DEV` (RoCEv2 on the wire) and
//! `type metaroce-native` (the MetaRoCE native transport for RC QPs, `transport.rst`).
//! One device per netdev, of either type.

use crate::device::{netdev_mac, MetaRoceDev, MetaRoceDriver, PORT};
use kernel::net::crypto::{logon_key, SecretKey, KEY_LEN};
use kernel::net::netdev::NetDevice;
use kernel::prelude::*;
use kernel::rdma::device::Device;
use kernel::rdma::link::LinkOps;
use kernel::str::CString;

/// The `metaroce` link type.
pub(crate) struct MetaRoceLink;

#[vtable]
impl LinkOps for MetaRoceLink {
    fn newlink(name: &CStr, netdev: &NetDevice) -> Result {
        newlink(name, netdev, false)
    }
}

/// The `metaroce-native` link type.
pub(crate) struct MetaRoceNativeLink;

#[vtable]
impl LinkOps for MetaRoceNativeLink {
    fn newlink(name: &CStr, netdev: &NetDevice) -> Result {
        newlink(name, netdev, true)
    }
}

fn newlink(name: &CStr, netdev: &NetDevice, native: bool) -> Result {
    let name_str = name.to_str().unwrap_or("?");
    let mut ifname = [0u8; 16];
    let ifname = netdev.name_str(&mut ifname);
    // Read before any lock of ours is taken: it takes RTNL.
    let link_kbps = if native { native_link_kbps(netdev) } else { 0 };
    let auth = if native {
        fabric_key(name_str, ifname)?
    } else {
        None
    };
    crate::ns::with_sockets(name_str, netdev, native, || {
        add(name, name_str, netdev, ifname, native, auth, link_kbps)
    })
}

/// The fabric key of the authenticated mode (`transport.rst` 13.1): the `logon` key
/// `metaroce:<netdev>` the calling process can find (`keyctl add logon metaroce:eth0 <32 bytes>
/// @u`), `None` if there is none (the plain mode). Process context.
fn fabric_key(name_str: &str, ifname: &str) -> Result<Option<SecretKey>> {
    let desc = CString::try_from_fmt(fmt!("metaroce:{ifname}"))?;
    let mut key = [0u8; KEY_LEN];
    let res = match logon_key(&desc, &mut key) {
        Ok(KEY_LEN) => Ok(Some(SecretKey::new(key))),
        Ok(n) => {
            pr_err!("{name_str}: key metaroce:{ifname} has {n} bytes, the authenticated mode takes {KEY_LEN}\n");
            Err(EINVAL)
        }
        Err(e) if e == ENOKEY => Ok(None),
        Err(e) => {
            pr_err!(
                "{name_str}: key metaroce:{ifname}: error {}\n",
                e.to_errno()
            );
            Err(e)
        }
    };
    // The copy on the stack is wiped (the key's own copy is wiped when the device goes).
    drop(SecretKey::new(key));
    res
}

/// The link rate a native device hands out in rate hints (spec 6.4): the `native_link_kbps`
/// module parameter, else the netdev's ethtool speed, else 0 (none known: no hints).
fn native_link_kbps(netdev: &NetDevice) -> u32 {
    match crate::module_parameters::native_link_kbps.value() {
        0 => netdev
            .link_speed_mbps()
            .map_or(0, |m| m.saturating_mul(1000)),
        kbps => kbps,
    }
}

/// `newlink` with the netdev's namespace locked.
fn add(
    name: &CStr,
    name_str: &str,
    netdev: &NetDevice,
    ifname: &str,
    native: bool,
    auth: Option<SecretKey>,
    link_kbps: u32,
) -> Result {
    if !netdev.is_registered() {
        pr_err!("{name_str}: netdev {ifname} is being removed\n");
        return Err(ENODEV);
    }
    if let Some(existing) = Device::<MetaRoceDriver>::find_by_netdev(netdev) {
        let mut buf = [0u8; 64];
        pr_err!(
            "{name_str}: netdev {ifname} already carries MetaRoCE device {}\n",
            existing.name(&mut buf)
        );
        return Err(EEXIST);
    }
    let mac = netdev_mac(netdev)
        .inspect_err(|_| pr_err!("{name_str}: netdev {ifname} has no 6-byte Ethernet address\n"))?;

    let mut dev = Device::<MetaRoceDriver>::alloc(
        netdev,
        1,
        MetaRoceDev::new(&mac, netdev, native, auth.clone(), link_kbps, name_str)?,
    )?;
    let guid = dev.guid_be();
    dev.set_node_guid(guid);
    dev.set_node_desc("metaroce");
    dev.set_netdev(netdev, PORT)?;
    dev.register(name).inspect_err(|e| {
        let hint = if *e == ENFILE {
            " (name already in use)"
        } else {
            ""
        };
        pr_err!(
            "{name_str}: registration on {ifname} failed: error {}{hint}\n",
            e.to_errno()
        );
    })?;
    // A netdev unregistered while we registered: its NETDEV_UNREGISTER may have run before
    // our device was visible to the notifier's lookup, so nobody else would give the netdev
    // back (its unregistration would wait forever). `is_registered` documents why checking
    // after registration closes that window.
    if !netdev.is_registered() {
        if let Some(dev) = Device::<MetaRoceDriver>::find_by_netdev(netdev) {
            dev.unregister_queued();
        }
        pr_err!("{name_str}: netdev {ifname} was removed during registration\n");
        return Err(ENODEV);
    }
    if !native {
        pr_info!("{name_str}: added on netdev {ifname} (RoCEv2)\n");
    } else {
        // The plain mode's line is what it always was (scripts match it).
        let (pre, key) = if auth.is_some() {
            (", authenticated with key metaroce:", ifname)
        } else {
            ("", "")
        };
        if link_kbps == 0 {
            pr_info!("{name_str}: added on netdev {ifname} (MetaRoCE native{pre}{key}; link rate unknown: no rate hints)\n");
        } else {
            pr_info!("{name_str}: added on netdev {ifname} (MetaRoCE native{pre}{key}; rate hints share {link_kbps} kbit/s)\n");
        }
    }
    Ok(())
}
