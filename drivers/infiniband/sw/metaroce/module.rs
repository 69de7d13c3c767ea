// SPDX-License-Identifier: GPL-2.0

//! Module state: the netdev notifier and the `metaroce` link type.

use crate::device::MetaRoceDriver;
use crate::link::MetaRoceLink;
use crate::net::MetaRoceNetdevNotifier;
use kernel::net::netdev::NetdevNotifierRegistration;
use kernel::prelude::*;
use kernel::rdma::device::unregister_driver;
use kernel::rdma::link::LinkRegistration;

/// The registrations of the loaded module.
#[pin_data]
struct Registrations {
    #[pin]
    notifier: NetdevNotifierRegistration<MetaRoceNetdevNotifier>,
    #[pin]
    link: LinkRegistration<MetaRoceLink>,
}

/// The loaded module.
///
/// Initialisation order: the notifier first, so that every device ever created is covered by
/// it (a device must give its netdev back on `NETDEV_UNREGISTER`), then the link type.
/// Teardown (`drop`): the link type first (no new device; waits for `newlink` in progress),
/// then every device, queued unregistrations included, then the notifier.
pub(crate) struct MetaRoceModule {
    regs: Pin<KBox<Registrations>>,
}

impl kernel::Module for MetaRoceModule {
    fn init(_module: &'static kernel::ThisModule) -> Result<Self> {
        let regs = KBox::try_pin_init(
            try_pin_init!(Registrations {
                notifier <- NetdevNotifierRegistration::new(),
                link <- LinkRegistration::new(c"metaroce"),
            }),
            GFP_KERNEL,
        )?;
        pr_info!("loaded\n");
        Ok(Self { regs })
    }
}

impl Drop for MetaRoceModule {
    fn drop(&mut self) {
        self.regs.link.unregister();
        // `ib_unregister_driver(RDMA_DRIVER_RXE)` removes every device with rdma_rxe's driver
        // id, which is ours only because Kconfig keeps RDMA_RXE out of any kernel with
        // MetaRoCE (`depends on RDMA_RXE=n`).
        unregister_driver::<MetaRoceDriver>();
        pr_info!("unloaded\n");
        // `regs` drops after this: the notifier is unregistered last.
    }
}
