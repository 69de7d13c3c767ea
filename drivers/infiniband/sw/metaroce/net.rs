// SPDX-License-Identifier: GPL-2.0

//! Netdev events: a MetaRoCE device follows the network device it was created on.

use crate::device::{active_mtu, MetaRoceDriver};
use kernel::net::netdev::{NetDevice, NetdevEvent, NetdevNotifier};
use kernel::prelude::*;
use kernel::rdma::device::{Device, PortState};

/// The driver's netdev notifier (runs with RTNL held).
pub(crate) struct MetaRoceNetdevNotifier;

impl NetdevNotifier for MetaRoceNetdevNotifier {
    fn event(event: NetdevEvent, netdev: &NetDevice) {
        let interesting = matches!(
            event,
            NetdevEvent::Up
                | NetdevEvent::Down
                | NetdevEvent::Change
                | NetdevEvent::ChangeMtu
                | NetdevEvent::Unregister
        );
        if !interesting {
            return;
        }
        let Some(dev) = Device::<MetaRoceDriver>::find_by_netdev(netdev) else {
            return;
        };
        let mut name = [0u8; 64];
        let mut ifname = [0u8; 16];
        match event {
            NetdevEvent::Unregister => {
                pr_info!(
                    "{}: netdev {} is going away, removing the device\n",
                    dev.name(&mut name),
                    netdev.name_str(&mut ifname)
                );
                // The netdev waits for its references once the notifiers ran: the transmit
                // path's goes now. Synchronous unregistration would deadlock on RTNL, which
                // we hold.
                dev.release_netdev();
                dev.unregister_queued();
            }
            NetdevEvent::ChangeMtu => {
                pr_info!(
                    "{}: netdev {} MTU {}, active path MTU {}\n",
                    dev.name(&mut name),
                    netdev.name_str(&mut ifname),
                    netdev.mtu(),
                    active_mtu(netdev.mtu()).bytes()
                );
            }
            // ib_core's own notifier reports these too; the dispatch only emits an event when
            // the port state actually changed, so the second call is a no-op.
            _ => {
                dev.port_state_changed(PortState::of_netdev(netdev));
                dev.dispatch_port_state_event(netdev);
            }
        }
    }
}
