// SPDX-License-Identifier: GPL-2.0

//! Per-namespace state: the RoCEv2 UDP sockets (port 4791, IPv4 and IPv6) of each network
//! namespace that carries a MetaRoCE device, and the receive entry point.
//!
//! The sockets are created by the first `rdma link add` in a namespace (so a namespace whose
//! port is taken by someone else still works for everything but MetaRoCE) and released when the
//! namespace is dismantled or the module unloads: a kernel socket holds no reference on its
//! namespace, so it must not outlive the pernet exit hook.
//!
//! Senders reach the sockets under RCU (as rdma_rxe does), never through a sleeping lock, so a
//! packet may leave from any context, the receive path's softirq included: each socket is set
//! once (`SetOnce`) and all of them are revoked together (`Revocable`, which waits for an RCU
//! grace period before it releases them) when the namespace goes.

use crate::device::{Counter, MetaRoceDriver};
use crate::integrity::KernelIntegrity;
use crate::proto::offload::{roce_rx, Integrity, RoceRxError};
use crate::xmit::OutPacket;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::net::namespace::{Net, Pernet, PernetOps};
use kernel::net::netdev::NetDevice;
use kernel::net::tx_budget::TxBudget;
use kernel::net::udp_tunnel::{
    Family, IpAddr, IpBatch, IpPacket, Route, RxPacket, UdpHeader, UdpTunnelReceiver,
    UdpTunnelSocket, BATCH_MAX_SEGS,
};
use kernel::prelude::*;
use kernel::rdma::device::{Device, DeviceRef};
use kernel::revocable::Revocable;
use kernel::sync::{new_mutex, rcu, Mutex, SetOnce};

/// The IANA-assigned RoCEv2 UDP destination port.
pub(crate) const ROCE_V2_PORT: u16 = 4791;

/// The per-namespace operations.
pub(crate) struct MetaRoceNs;

static PERNET: Pernet<MetaRoceNs> = Pernet::new();

/// The UDP destination port of the MetaRoCE native transport (`transport.rst`, section 2).
/// The native transport's UDP port: the `native_port` module parameter (default
/// [`crate::proto::mrc_wire::NATIVE_PORT`], 19791; never 4791, refused at load).
pub(crate) fn native_port() -> u16 {
    crate::module_parameters::native_port.value()
}

/// The sockets of one namespace, each opened once.
#[derive(Default)]
struct Sockets {
    /// Opened by the namespace's first device.
    roce: SetOnce<RoceSockets>,
    /// The native port's, opened by the namespace's first `metaroce-native` device.
    native: SetOnce<(UdpTunnelSocket<NativeRx>, UdpTunnelSocket<NativeRx>)>,
}

/// The RoCEv2 port's sockets.
struct RoceSockets {
    v4: UdpTunnelSocket<RoceRx>,
    v6: UdpTunnelSocket<RoceRx>,
    /// FLUSH requests are sealed with rdma_rxe's ICRC ([`KernelIntegrity::rxe_flush`]): the
    /// `flush_icrc_rxe` module parameter when the sockets were opened.
    flush_icrc_rxe: bool,
}

/// The state of one namespace.
#[pin_data]
pub(crate) struct NsState {
    /// Serialises the devices' creation in the namespace (sockets are opened under it) and its
    /// dismantling.
    #[pin]
    setup: Mutex<()>,
    /// Read under RCU by senders; revoked when the namespace is being dismantled.
    #[pin]
    sockets: Revocable<Sockets>,
    /// Set (under `setup`) when the namespace starts being dismantled: no socket is opened any
    /// more.
    dying: AtomicBool,
}

impl PernetOps for MetaRoceNs {
    type Data = NsState;

    fn pernet() -> &'static Pernet<Self> {
        &PERNET
    }

    fn init(_net: &Net) -> impl PinInit<NsState, Error> {
        try_pin_init!(NsState {
            setup <- new_mutex!(()),
            sockets <- Revocable::new(Sockets::default()),
            dying: AtomicBool::new(false),
        })
    }

    // The sockets go before the namespace's network devices: a UDP socket keeps the input route
    // of the datagrams it received (a multicast datagram's refers to the loopback device), and
    // the core waits for every reference on the devices before it calls `exit` (seen: "waiting
    // for lo to become free" forever after multicast had arrived). Devices of the namespace
    // that still exist meanwhile find no socket: their packets fail with ENODEV.
    fn pre_exit(net: &Net, data: &NsState) {
        let _setup = data.setup.lock();
        data.dying.store(true, Ordering::Relaxed);
        let open = data
            .sockets
            .try_access_with(|s| (s.roce.as_ref().is_some(), s.native.as_ref().is_some()));
        // Waits until no sender reads them any more, then closes them.
        data.sockets.revoke();
        let (roce, native) = open.unwrap_or((false, false));
        if roce {
            pr_info!(
                "net namespace {}: released UDP port {ROCE_V2_PORT}\n",
                net.inum()
            );
        }
        if native {
            pr_info!(
                "net namespace {}: released UDP port {}\n",
                net.inum(),
                native_port()
            );
        }
    }
}

/// Registers the per-namespace state (module init).
pub(crate) fn register() -> Result<kernel::net::namespace::PernetRegistration<MetaRoceNs>> {
    PERNET.register()
}

/// Runs `f` (the creation of a device on `netdev`) with the namespace of `netdev` locked and
/// its RoCEv2 sockets open, and for a native device (`native`) also the native port's:
/// `rdma link add`s in one namespace run one after the other, so the "netdev already carries
/// a device" check and the registration cannot interleave.
///
/// Opening the sockets fails with `EADDRINUSE` (and says so) when another socket holds UDP port
/// 4791 (or the native port) in that namespace. Process context, may sleep.
pub(crate) fn with_sockets(
    name: &str,
    netdev: &NetDevice,
    native: bool,
    f: impl FnOnce() -> Result,
) -> Result {
    let net = netdev.net().ok_or(ENODEV)?;
    let state = PERNET.get(&net).ok_or(ENODEV)?;
    let _setup = state.setup.lock();
    if state.dying.load(Ordering::Relaxed) {
        return Err(ENODEV);
    }
    // Which sockets are open (not revoked: the namespace is not dying, checked under `setup`).
    let (has_roce, has_native) = state
        .sockets
        .try_access_with(|s| (s.roce.as_ref().is_some(), s.native.as_ref().is_some()))
        .ok_or(ENODEV)?;
    let why = |e: &Error, port: u16, what: &str| {
        let why = if *e == EADDRINUSE {
            " (already bound by another socket)"
        } else {
            ""
        };
        pr_err!(
            "{name}: cannot bind {what} UDP port {port} in net namespace {}: error {}{why}\n",
            net.inum(),
            e.to_errno()
        );
    };
    if !has_roce {
        let open = |family, what| {
            UdpTunnelSocket::<RoceRx>::new(&net, family, ROCE_V2_PORT)
                .inspect_err(|e| why(e, ROCE_V2_PORT, what))
        };
        let v4 = open(Family::Ipv4, "IPv4")?;
        // UD multicast reaches the QPs of this host attached to the group too, as an HCA
        // loops it back (IPv6 sockets loop by default).
        v4.set_ipv4_multicast_loop(true)?;
        let v6 = open(Family::Ipv6, "IPv6")?;
        let flush_icrc_rxe = crate::module_parameters::flush_icrc_rxe.value() != 0;
        populate(
            &state,
            |s| &s.roce,
            RoceSockets {
                v4,
                v6,
                flush_icrc_rxe,
            },
        )?;
        pr_info!(
            "net namespace {}: listening on UDP port {ROCE_V2_PORT}\n",
            net.inum()
        );
    }
    if native && !has_native {
        let open = |family, what| {
            UdpTunnelSocket::<NativeRx>::new(&net, family, native_port())
                .inspect_err(|e| why(e, native_port(), what))
        };
        let v4 = open(Family::Ipv4, "IPv4")?;
        let v6 = open(Family::Ipv6, "IPv6")?;
        populate(&state, |s| &s.native, (v4, v6))?;
        pr_info!(
            "net namespace {}: listening on UDP port {}\n",
            net.inum(),
            native_port()
        );
    }
    f()
}

/// Sets the socket(s) `which` of `state` to `value`. Called under `setup` with the namespace
/// not dying and the slot empty; should that not hold, `value` is handed back and closed here,
/// outside the RCU read section (closing a socket sleeps), and the call fails.
fn populate<T>(state: &NsState, which: impl Fn(&Sockets) -> &SetOnce<T>, value: T) -> Result {
    let unused = state.sockets.try_access_with(move |s| {
        let slot = which(s);
        if slot.as_ref().is_some() {
            return Some(value);
        }
        slot.populate(value);
        None
    });
    match unused {
        Some(None) => Ok(()),
        Some(Some(value)) => {
            drop(value);
            Err(EBUSY)
        }
        None => Err(ENODEV),
    }
}

/// The receive side of the sockets: the first stage of the receive path (netdev → parser).
struct RoceRx;

/// The MetaRoCE device a received datagram belongs to. Packets for netdevs without a MetaRoCE
/// device are not ours to count. Traffic to one of the host's own addresses (a device's own
/// GID, or another local device's) arrives on the loopback device: it belongs to the device
/// whose netdev owns the address.
fn rx_device(pkt: &RxPacket<'_>) -> Option<DeviceRef<MetaRoceDriver>> {
    let rx_dev = pkt.dev()?;
    let rcu = rcu::read_lock();
    let netdev = if rx_dev.is_loopback() {
        pkt.local_dev(&rcu)?
    } else {
        rx_dev
    };
    Device::<MetaRoceDriver>::find_by_netdev(netdev)
}

impl UdpTunnelReceiver for RoceRx {
    fn receive(pkt: RxPacket<'_>) {
        let Some(dev) = rx_device(&pkt) else { return };
        let Some(h) = pkt.headers() else {
            dev.count(Counter::RcvdMalformed, 1);
            return;
        };
        // Software computes the ICRC: no NIC of ours checked it (the offload boundary of
        // transport.rst section 12).
        let pkt = match roce_rx(&mut KernelIntegrity::default(), h.ip, h.udp, h.payload) {
            Ok(pkt) => pkt,
            Err(RoceRxError::Malformed(_)) => {
                dev.count(Counter::RcvdMalformed, 1);
                return;
            }
            Err(RoceRxError::Icrc(_)) => {
                dev.count(Counter::RcvdIcrcErr, 1);
                return;
            }
        };
        dev.count(Counter::RcvdPkts, 1);
        dev.count(Counter::RcvdBytes, h.payload.len() as u64);
        // Multicast: every QP attached to the destination group takes a copy.
        if pkt.hdr.bth.dest_qp == crate::mcast::MCAST_QPN {
            if !crate::mcast::deliver(&dev, &pkt, h.ip) {
                dev.count(Counter::RcvdNoQp, 1);
            }
            return;
        }
        match dev.lookup_qp(pkt.hdr.bth.dest_qp) {
            Some(qp) => {
                if !crate::qp::receive(&qp, &pkt, h.ip) {
                    dev.count(Counter::RcvdDropped, 1);
                }
            }
            None => dev.count(Counter::RcvdNoQp, 1),
        }
    }
}

/// The receive side of the native port's sockets: the first stage of a native device's
/// receive path (netdev → parser → `native::receive`).
struct NativeRx;

impl UdpTunnelReceiver for NativeRx {
    fn receive(pkt: RxPacket<'_>) {
        let Some(dev) = rx_device(&pkt) else { return };
        if !dev.native {
            return;
        }
        let Some(h) = pkt.headers() else {
            dev.count(Counter::RcvdMalformed, 1);
            return;
        };
        crate::native::receive(&dev, h.ip, h.udp, h.payload);
    }
}

/// The IP address a RoCE v2 GID stands for: IPv4-mapped GIDs (`::ffff:a.b.c.d`) are IPv4.
pub(crate) fn gid_ip(gid: &[u8; 16]) -> IpAddr {
    if gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff {
        IpAddr::V4([gid[12], gid[13], gid[14], gid[15]])
    } else {
        IpAddr::V6(*gid)
    }
}

/// The UDP source port of a flow between two QPs: RoCE v2 leaves it to the sender as ECMP
/// entropy in 0xC000..=0xFFFF; one value per QP pair keeps a connection on one path.
fn udp_sport(src_qpn: u32, dst_qpn: u32) -> u16 {
    let h = src_qpn.wrapping_mul(0x9E37_79B1) ^ dst_qpn.wrapping_mul(0x85EB_CA77);
    0xC000 | ((h >> 16) as u16 & 0x3FFF)
}

/// The route of the batch's last packet, and the family socket, addresses and port kind it was
/// looked up for: a batch is mostly one QP's (or one connection's) packets, all between the same
/// two addresses, so one lookup serves them all.
type RouteCache = Option<((bool, IpAddr, IpAddr), Route)>;

/// The route from `src` to `dst` through `sock` (`native`: a native-port socket), from `cache`
/// when the batch's last packet took the same one.
fn route<'c, T: UdpTunnelReceiver>(
    cache: &'c mut RouteCache,
    sock: &UdpTunnelSocket<T>,
    native: bool,
    oif: Option<&NetDevice>,
    src: IpAddr,
    dst: IpAddr,
) -> Result<&'c Route> {
    let key = (native, src, dst);
    if !matches!(cache, Some((k, _)) if *k == key) {
        *cache = Some((key, sock.route(oif, src, dst)?));
    }
    cache.as_ref().map(|(_, r)| r).ok_or(EINVAL)
}

/// Puts a batch of packets on the wire from `netdev`'s namespace: route, IP/UDP headers,
/// integrity fields, send, each charged to the device's `budget` (if any) until the stack frees
/// it. The namespace's sockets are found once per batch (under RCU), and packets between the
/// same addresses share a route lookup. Consecutive native packets of one path leave as one
/// fraglist GSO packet ([`IpBatch`]) unless the `tx_gso` module parameter is 0. `done` hears
/// each packet's length and result, in order. Returns the GSO packets of two or more datagrams
/// sent. Any context.
pub(crate) fn send_batch(
    netdev: &NetDevice,
    budget: Option<&TxBudget>,
    pkts: impl Iterator<Item = OutPacket>,
    mut done: impl FnMut(usize, Result),
) -> u64 {
    let net = netdev.net();
    let state = net.as_ref().and_then(|n| PERNET.get(n));
    let rcu = rcu::read_lock();
    let s = state
        .as_ref()
        .and_then(|st| st.sockets.try_access_with_guard(&rcu));
    let Some(s) = s else {
        pkts.for_each(|p| done(p.skb.len(), Err(ENODEV)));
        return 0;
    };
    let gso = crate::module_parameters::tx_gso.value() != 0;
    let mut cache = None;
    let mut held = Held::new(budget);
    for p in pkts {
        let len = p.skb.len();
        if p.native.is_none() {
            // RoCEv2 packets leave one by one: their ICRC covers the IP ID, which
            // segmentation counts up.
            held.flush(&mut done);
            done(len, send_roce(netdev, s, &mut cache, budget, p));
            continue;
        }
        match build_native(netdev, s, &mut cache, p) {
            Ok((sock, pkt)) => held.add(sock, pkt, len, gso, &mut done),
            Err(e) => {
                held.flush(&mut done);
                done(len, Err(e));
            }
        }
    }
    held.flush(&mut done);
    held.gso_sent
}

/// Native packets held back to leave together: their socket, the batch and each packet's
/// length (for [`send_batch`]'s `done`, in order).
struct Held<'s> {
    budget: Option<&'s TxBudget>,
    batch: Option<(&'s UdpTunnelSocket<NativeRx>, IpBatch)>,
    lens: [usize; BATCH_MAX_SEGS],
    n: usize,
    /// Batches of two or more datagrams sent.
    gso_sent: u64,
}

impl<'s> Held<'s> {
    fn new(budget: Option<&'s TxBudget>) -> Self {
        Self {
            budget,
            batch: None,
            lens: [0; BATCH_MAX_SEGS],
            n: 0,
            gso_sent: 0,
        }
    }

    /// Adds `pkt` (`len` bytes of MetaRoCE header and payload) to the held batch if `gso` and
    /// it is of the batch's flow; else sends what is held and holds `pkt` alone.
    fn add(
        &mut self,
        sock: &'s UdpTunnelSocket<NativeRx>,
        pkt: IpPacket,
        len: usize,
        gso: bool,
        done: &mut impl FnMut(usize, Result),
    ) {
        let pkt = match &mut self.batch {
            Some((_, b)) if gso => match b.push(pkt) {
                Ok(()) => {
                    // `push` keeps a batch within `BATCH_MAX_SEGS` packets.
                    if let Some(l) = self.lens.get_mut(self.n) {
                        *l = len;
                    }
                    self.n += 1;
                    return;
                }
                Err(pkt) => pkt,
            },
            _ => pkt,
        };
        self.flush(done);
        self.batch = Some((sock, IpBatch::new(pkt)));
        self.lens[0] = len;
        self.n = 1;
    }

    /// Sends the held batch, if any; each of its packets hears the batch's result.
    fn flush(&mut self, done: &mut impl FnMut(usize, Result)) {
        if let Some((sock, b)) = self.batch.take() {
            let gso = b.datagrams() > 1;
            let res = sock.send_batch(b, self.budget);
            if gso && res.is_ok() {
                self.gso_sent += 1;
            }
            for &len in self.lens.iter().take(self.n) {
                done(len, res);
            }
        }
        self.n = 0;
    }
}

/// The native socket of `dst`'s family.
fn native_socket(s: &Sockets, dst: IpAddr) -> Result<&UdpTunnelSocket<NativeRx>> {
    let (n4, n6) = s.native.as_ref().ok_or(ENODEV)?;
    Ok(match dst {
        IpAddr::V4(_) => n4,
        IpAddr::V6(_) => n6,
    })
}

/// The route of `p` leaving through `netdev`: packets to the device's own GID are looked up
/// unbound (a lookup bound to the netdev would send them onto the wire, as IPv6 does; an
/// unbound one delivers them through the loopback device, after which the receive path maps
/// them back).
fn addresses<'n>(netdev: &'n NetDevice, p: &OutPacket) -> (IpAddr, IpAddr, Option<&'n NetDevice>) {
    let (src, dst) = (gid_ip(&p.av.sgid), gid_ip(&p.av.dgid));
    let oif = if src == dst { None } else { Some(netdev) };
    (src, dst, oif)
}

/// A native packet, headers and UDP checksum in place, and the socket it leaves through.
fn build_native<'s>(
    netdev: &NetDevice,
    s: &'s Sockets,
    cache: &mut RouteCache,
    p: OutPacket,
) -> Result<(&'s UdpTunnelSocket<NativeRx>, IpPacket)> {
    let (src_port, ect) = p.native.ok_or(EINVAL)?;
    let (src, dst, oif) = addresses(netdev, &p);
    let sock = native_socket(s, dst)?;
    let route = route(cache, sock, true, oif, src, dst)?;
    let hdr = UdpHeader {
        src_port,
        dst_port: native_port(),
        // ECT(0) on DATA (section 3.3), Not-ECT on ACKs.
        dscp_ecn: if ect { 0b10 } else { 0 },
        ttl: 64,
    };
    let mut pkt = IpPacket::build(p.skb, route, &hdr)?;
    let ip_len = pkt.ip_header_len();
    let data = pkt.data_mut()?;
    let udp = data.get_mut(ip_len..).ok_or(EINVAL)?;
    // The UDP checksum is mandatory on the native port (section 2), over the addresses the IP
    // header was built with; computed here (no checksum offload is asked for).
    let sealed = match (route.src(), route.dst()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => KernelIntegrity::default().seal_udp(&s, &d, udp),
        (IpAddr::V6(s), IpAddr::V6(d)) => KernelIntegrity::default().seal_udp(&s, &d, udp),
        _ => return Err(EINVAL),
    };
    sealed.map_err(|_| EINVAL)?;
    Ok((sock, pkt))
}

/// Puts one RoCEv2 packet on the wire through the namespace's sockets `s`.
fn send_roce(
    netdev: &NetDevice,
    s: &Sockets,
    cache: &mut RouteCache,
    budget: Option<&TxBudget>,
    p: OutPacket,
) -> Result {
    let roce = s.roce.as_ref().ok_or(ENODEV)?;
    let (src, dst, oif) = addresses(netdev, &p);
    let sock = match dst {
        IpAddr::V4(_) => &roce.v4,
        IpAddr::V6(_) => &roce.v6,
    };
    let route = route(cache, sock, false, oif, src, dst)?;
    let hdr = UdpHeader {
        src_port: udp_sport(p.src_qpn, p.dst_qpn),
        dst_port: ROCE_V2_PORT,
        dscp_ecn: p.av.traffic_class,
        ttl: if p.av.hop_limit == 0 {
            64
        } else {
            p.av.hop_limit
        },
    };
    let mut pkt = IpPacket::build(p.skb, route, &hdr)?;
    let ip_len = pkt.ip_header_len();
    let data = pkt.data_mut()?;
    if data.len() < ip_len + UDP_HLEN {
        return Err(EINVAL);
    }
    let (ip, rest) = data.split_at_mut(ip_len);
    let (udp, ib) = rest.split_at_mut(UDP_HLEN);
    KernelIntegrity {
        rxe_flush: roce.flush_icrc_rxe,
    }
    .seal_icrc(ip, udp, ib)
    .map_err(|_| EINVAL)?;
    sock.send(pkt, budget)
}

/// Length of a UDP header.
const UDP_HLEN: usize = 8;
