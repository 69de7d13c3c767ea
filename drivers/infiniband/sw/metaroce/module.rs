// SPDX-License-Identifier: GPL-2.0

//! Module state: the netdev notifier and the `metaroce` and `metaroce-native` link types.

use crate::device::MetaRoceDriver;
use crate::link::{MetaRoceLink, MetaRoceNativeLink};
use crate::net::MetaRoceNetdevNotifier;
use crate::ns::{self, MetaRoceNs, ROCE_V2_PORT};
use kernel::net::namespace::PernetRegistration;
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
    #[pin]
    native_link: LinkRegistration<MetaRoceNativeLink>,
}

/// The loaded module.
///
/// Initialisation order: the per-namespace state first (devices need their namespace's
/// sockets), then the notifier, so that every device ever created is covered by
/// it (a device must give its netdev back on `NETDEV_UNREGISTER`), then the link type.
/// Teardown (`drop`): the link type first (no new device; waits for `newlink` in progress),
/// then every device, queued unregistrations included, then the notifier, then the per-namespace
/// state (releasing every namespace's sockets).
pub(crate) struct MetaRoceModule {
    regs: Pin<KBox<Registrations>>,
    _pernet: PernetRegistration<MetaRoceNs>,
}

impl kernel::Module for MetaRoceModule {
    fn init(_module: &'static kernel::ThisModule) -> Result<Self> {
        let port = ns::native_port();
        if port == 0 || port == ROCE_V2_PORT {
            pr_err!("native_port {port} refused: the native transport needs its own UDP port, not 0 or RoCEv2's {ROCE_V2_PORT}\n");
            return Err(EINVAL);
        }
        crate::integrity::select_crc();
        let pernet = ns::register()?;
        let regs = KBox::try_pin_init(
            try_pin_init!(Registrations {
                notifier <- NetdevNotifierRegistration::new(),
                link <- LinkRegistration::new(c"metaroce"),
                native_link <- LinkRegistration::new(c"metaroce-native"),
            }),
            GFP_KERNEL,
        )?;
        pr_info!("loaded\n");
        Ok(Self {
            regs,
            _pernet: pernet,
        })
    }
}

impl Drop for MetaRoceModule {
    fn drop(&mut self) {
        self.regs.link.unregister();
        self.regs.native_link.unregister();
        // `ib_unregister_driver` removes every device with our driver id: RDMA_DRIVER_METAROCE,
        // or with CONFIG_RDMA_METAROCE_RXE_ABI rdma_rxe's, which is then ours only because
        // Kconfig keeps RDMA_RXE out of that kernel.
        unregister_driver::<MetaRoceDriver>();
        pr_info!("unloaded\n");
        // The fields drop after this, in order: `regs` (the notifier), then `_pernet`.
    }
}
