// SPDX-License-Identifier: GPL-2.0

//! Per-namespace state: the RoCEv2 UDP sockets (port 4791, IPv4 and IPv6) of each network
//! namespace that carries a MetaRoCE device, and the receive entry point.
//!
//! The sockets are created by the first `rdma link add` in a namespace (so a namespace whose
//! port is taken by someone else still works for everything but MetaRoCE) and released when the
//! namespace is dismantled or the module unloads: a kernel socket holds no reference on its
//! namespace, so it must not outlive the pernet exit hook.

use crate::device::{Counter, MetaRoceDriver};
use crate::proto::{icrc, packet};
use kernel::net::namespace::{Net, Pernet, PernetOps};
use kernel::net::netdev::NetDevice;
use kernel::net::udp_tunnel::{Family, RxPacket, UdpTunnelReceiver, UdpTunnelSocket};
use kernel::prelude::*;
use kernel::rdma::device::Device;
use kernel::sync::{new_mutex, Mutex};

/// The IANA-assigned RoCEv2 UDP destination port.
pub(crate) const ROCE_V2_PORT: u16 = 4791;

/// The per-namespace operations.
pub(crate) struct MetaRoceNs;

static PERNET: Pernet<MetaRoceNs> = Pernet::new();

/// The sockets of one namespace.
struct Sockets {
    _v4: UdpTunnelSocket<RoceRx>,
    _v6: UdpTunnelSocket<RoceRx>,
}

/// The state of one namespace.
#[pin_data]
pub(crate) struct NsState {
    /// `None` until the first device of the namespace is created.
    #[pin]
    sockets: Mutex<Option<Sockets>>,
}

impl PernetOps for MetaRoceNs {
    type Data = NsState;

    fn pernet() -> &'static Pernet<Self> {
        &PERNET
    }

    fn init(_net: &Net) -> impl PinInit<NsState, Error> {
        try_pin_init!(NsState {
            sockets <- new_mutex!(None),
        })
    }

    fn exit(net: &Net, data: &NsState) {
        if data.sockets.lock().take().is_some() {
            pr_info!(
                "net namespace {}: released UDP port {ROCE_V2_PORT}\n",
                net.inum()
            );
        }
    }
}

/// Registers the per-namespace state (module init).
pub(crate) fn register() -> Result<kernel::net::namespace::PernetRegistration<MetaRoceNs>> {
    PERNET.register()
}

/// Runs `f` (the creation of a device on `netdev`) with the namespace of `netdev` locked and
/// its RoCEv2 sockets open: `rdma link add`s in one namespace run one after the other, so the
/// "netdev already carries a device" check and the registration cannot interleave.
///
/// Opening the sockets fails with `EADDRINUSE` (and says so) when another socket holds UDP port
/// 4791 in that namespace. Process context, may sleep.
pub(crate) fn with_sockets(name: &str, netdev: &NetDevice, f: impl FnOnce() -> Result) -> Result {
    let net = netdev.net().ok_or(ENODEV)?;
    let state = PERNET.get(&net).ok_or(ENODEV)?;
    let mut sockets = state.sockets.lock();
    if sockets.is_none() {
        let open = |family, what| {
            UdpTunnelSocket::<RoceRx>::new(&net, family, ROCE_V2_PORT).inspect_err(|e| {
                let why = if *e == EADDRINUSE {
                    " (already bound by another socket)"
                } else {
                    ""
                };
                pr_err!(
                    "{name}: cannot bind {what} UDP port {ROCE_V2_PORT} in net namespace {}: error {}{why}\n",
                    net.inum(),
                    e.to_errno()
                );
            })
        };
        let v4 = open(Family::Ipv4, "IPv4")?;
        let v6 = open(Family::Ipv6, "IPv6")?;
        *sockets = Some(Sockets { _v4: v4, _v6: v6 });
        pr_info!(
            "net namespace {}: listening on UDP port {ROCE_V2_PORT}\n",
            net.inum()
        );
    }
    f()
}

/// The receive side of the sockets: the first stage of the receive path (netdev → parser).
struct RoceRx;

impl UdpTunnelReceiver for RoceRx {
    fn receive(pkt: RxPacket) {
        // Packets for netdevs without a MetaRoCE device are not ours to count.
        let Some(netdev) = pkt.dev() else { return };
        let Some(dev) = Device::<MetaRoceDriver>::find_by_netdev(netdev) else {
            return;
        };
        let Some(h) = pkt.headers() else {
            dev.count(Counter::RcvdMalformed, 1);
            return;
        };
        if packet::parse(h.payload).is_err() {
            dev.count(Counter::RcvdMalformed, 1);
            return;
        }
        if icrc::icrc_verify(h.ip, h.udp, h.payload).is_err() {
            dev.count(Counter::RcvdIcrcErr, 1);
            return;
        }
        dev.count(Counter::RcvdPkts, 1);
        dev.count(Counter::RcvdBytes, h.payload.len() as u64);
        // No queue pairs exist yet (the verbs objects come with the data path): every valid
        // packet is addressed to a QP this device does not have, and is dropped and counted.
        dev.count(Counter::RcvdNoQp, 1);
    }
}
