// SPDX-License-Identifier: GPL-2.0

//! The MetaRoCE RDMA device: its data and its ib_core hooks (queries and user contexts).

use crate::mr::MrTable;
use crate::native::{ConnView, FlightPool, PeerTable, Peers};
use crate::odp::OdpFaults;
use crate::proto::mcast::McastTable;
use crate::qp::{MetaRoceQp, MAX_QP, MAX_QP_WR, MAX_SGE, MIN_QPN};
use crate::srq::{MetaRoceSrq, MAX_SRQ, MAX_SRQ_SGE, MAX_SRQ_WR};
use crate::timer::Timers;
use crate::verbs::{
    give, take, MetaRoceAh, MetaRoceCq, MetaRoceMr, MetaRoceMw, MetaRocePd, RoceAv, UserAh, MAX_AH,
    MAX_CQ, MAX_CQE, MAX_MR, MAX_MW, MAX_PD,
};
use crate::xmit::TxEngine;
use core::sync::atomic::{
    AtomicBool,
    AtomicU32,
    AtomicU64,
    Ordering, //
};
use kernel::debugfs::{Dir, File};
use kernel::id_pool::IdPool;
use kernel::net::crypto::SecretKey;
use kernel::net::netdev::NetDevice;
use kernel::net::tx_budget::TxBudget;
use kernel::new_mutex;
use kernel::new_spinlock_irq;
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNode};
use kernel::rdma::ah::{Ah, NewAh, RoceAhAttr};
use kernel::rdma::cq::{Cq, CqNotify, NewCq, WcArray};
use kernel::rdma::device::{
    AtomicCap, CoreCaps, Device, DeviceAttr, DeviceCaps, DriverId, KernelCaps, LinkLayer, Mtu,
    OdpGeneral, OdpOps, PhysState, PortAttr, PortImmutable, PortState, StatDesc, UserCommands,
    DEFAULT_PKEY_FULL,
};
use kernel::rdma::mr::{AccessFlags, Mr, MrKeys, MrSgList, MrType, UserMrRequest};
use kernel::rdma::mw::{Mw, MwType};
use kernel::rdma::pd::{Origin, Pd, PdId};
use kernel::rdma::qp::{NewQp, Qp, QpAttr, QpAttrMask, QpAttrOut, QpInitAttrOut};
use kernel::rdma::srq::{NewSrq, Srq, SrqAttr, SrqAttrMask};
use kernel::rdma::udata::Udata;
use kernel::rdma::workqueue::OwnedQueue;
use kernel::rdma::wr::{MrPage, PostError, RecvWr, RecvWrList, SendWr, SendWrList};
use kernel::revocable::Revocable;
use kernel::str::CString;
use kernel::sync::aref::ARef;
use kernel::sync::rcu;
use kernel::sync::{Arc, Mutex, SpinLockIrq};
use kernel::time::{Instant, Monotonic};
use kernel::workqueue::Queue;

/// The only port of a MetaRoCE device (IB ports are numbered from 1).
pub(crate) const PORT: u32 = 1;

/// Vendor id reported to user space: rdma_rxe's (no IEEE OUI), since librxe drives the device.
const VENDOR_ID: u32 = 0x00ff_ffff;
/// GID table entries per port; ib_core fills them from the netdev's addresses (a RoCE v2 GID for
/// each IPv4 and IPv6 address, two default link-local ones). 256, as a ConnectX port: ib_core
/// gives each entry three sysfs files, and with rdma_rxe's 1024 a device's creation and deletion
/// under the test kernel took ~40 % longer (`rdma link add` + `delete` 39 s against 24 s, four
/// guests on two cores, 2026-12-07).
const GID_TBL_LEN: i32 = 256;
/// One P_Key (the default full-membership one), as for any RoCE port.
const PKEY_TBL_LEN: u16 = 1;
/// Largest message of the transport, rdma_rxe's limit (8 MiB).
const MAX_MSG_SZ: u32 = 0x80_0000;
/// Local CA ack delay, as rdma_rxe reports it (4.096 µs × 2^15).
const LOCAL_CA_ACK_DELAY: u8 = 15;
/// Page sizes memory regions may be described with: every power of two from 4 KiB to 2 GiB.
const PAGE_SIZE_CAP: u64 = 0xffff_f000;
/// Bytes of an Ethernet frame's payload taken by RoCE v2 headers at worst: IPv6 (40), UDP (8),
/// BTH (12), the largest extended header set (RETH+AETH+AtomicETH, 28) and ICRC (4).
const ROCE_HDR_MAX: u32 = 40 + 8 + 12 + 28 + 4;
/// Open user contexts allowed per device (rdma_rxe's limit).
const MAX_UCONTEXT: u32 = 512;

mod counters;

pub(crate) use counters::Counter;
use counters::{COUNTER_DESCS, NUM_COUNTERS};

/// The MetaRoCE driver's ib_core operations.
pub(crate) struct MetaRoceDriver;

/// Verbs objects of a device, counted against the limits `query_device` reports.
pub(crate) struct ObjectCounts {
    pub(crate) pds: AtomicU32,
    pub(crate) cqs: AtomicU32,
    pub(crate) ahs: AtomicU32,
    pub(crate) srqs: AtomicU32,
    pub(crate) mrs: AtomicU32,
    pub(crate) mws: AtomicU32,
    /// Memory regions with on-demand paging (part of `mrs`): while there are none, the
    /// transport skips the checks for missing pages.
    pub(crate) odp_mrs: AtomicU32,
}

/// The driver data of one MetaRoCE device.
#[pin_data]
pub(crate) struct MetaRoceDev {
    /// EUI-64 derived from the netdev's MAC address, network byte order (node and system image
    /// GUID, as rdma_rxe derives them).
    guid_be: u64,
    /// Open user contexts.
    ucontexts: AtomicU32,
    /// Whether the port was last seen active (for `link_downed`).
    port_active: AtomicBool,
    /// Port counters, indexed by [`Counter`].
    counters: [AtomicU64; NUM_COUNTERS],
    /// Verbs objects in use.
    pub(crate) objects: ObjectCounts,
    /// Whether the GSI QP (QP1) exists.
    gsi: AtomicBool,
    /// QP numbers in use (below [`MAX_QP`]; 0 and 1 are never taken from it).
    #[pin]
    qpns: Mutex<IdPool>,
    /// Memory region and window indices in use (below [`MAX_MR`] + [`MAX_MW`]; index 0 is
    /// never taken).
    #[pin]
    mr_indices: Mutex<IdPool>,
    /// The QPs the receive path can reach, indexed by QP number: published when a QP first
    /// changes state, removed when it is destroyed.
    #[pin]
    qps: SpinLockIrq<KVec<Option<ARef<Qp<MetaRoceDriver>>>>>,
    /// The bound on packet memory the device has queued in the network stack (the
    /// `tx_budget_kb` module parameter; `None`: no bound). Dropped before the work queue: its
    /// owner, the transmit worker, may queue itself when a freed packet makes room.
    tx_budget: Option<TxBudget>,
    /// The device's own work queue (drained when the device is freed, before the module can
    /// go away).
    txq: OwnedQueue,
    /// The transmit worker.
    tx: Arc<TxEngine>,
    /// Page faults of on-demand paging memory regions (run on `txq`).
    odp: Arc<OdpFaults>,
    /// The retransmission and RNR timers.
    timers: Arc<Timers>,
    /// Time zero of the transport's clock.
    epoch: Instant<Monotonic>,
    /// User and fast-register memory regions by index (`crate::mr`); any context.
    #[pin]
    pub(crate) mrs: SpinLockIrq<MrTable>,
    /// Numbers of user AHs in use (below [`MAX_AH`] + 1; 0 is never taken).
    #[pin]
    ah_nums: Mutex<IdPool>,
    /// User AHs by number, for UD work requests taken from send rings; any context.
    #[pin]
    user_ahs: SpinLockIrq<RBTree<u32, UserAh>>,
    /// UD multicast groups and the QPs attached to each (`crate::mcast`); any context.
    #[pin]
    pub(crate) mcast: SpinLockIrq<McastTable>,
    /// Serialises attaching and detaching, held across the netdev's IP join or leave.
    #[pin]
    pub(crate) mcast_update: Mutex<()>,
    /// A `metaroce-native` device: its RC QPs use the native transport.
    pub(crate) native: bool,
    /// The fabric key of the authenticated mode (`transport.rst` 13.1; `None`: plain packets).
    pub(crate) auth: Option<SecretKey>,
    /// The native connections, one per (our GID, remote GID); any context.
    pub(crate) peers: Arc<Peers>,
    /// The native connections' state for packets in flight, lent while they send.
    #[pin]
    pub(crate) flights: FlightPool,
    /// Some native connection owes its peer packets while no QP is bound to it; the next
    /// transmission of any QP sends those ([`crate::native::pull_orphans`]).
    pub(crate) orphans: AtomicBool,
    /// `/sys/kernel/debug/metaroce_DEV/connections`: the native connections and their paths.
    _debugfs: Pin<KBox<File<ConnView>>>,
    /// The netdev packets leave through, held for the transmit path, which reads it under RCU
    /// from any context (ib_core's `ib_device_get_netdev` takes a lock that softirqs must not
    /// take). Revoked when the netdev unregisters ([`MetaRoceDev::release_netdev`]), so the
    /// device never delays that.
    #[pin]
    tx_netdev: Revocable<ARef<NetDevice>>,
}

impl MetaRoceDev {
    /// Runs `f` with the netdev packets leave through, unless it is unregistering (`None`).
    /// Any context; `f` runs inside an RCU read-side section and must not sleep.
    pub(crate) fn with_tx_netdev<R>(&self, f: impl FnOnce(Option<&NetDevice>) -> R) -> R {
        let rcu = rcu::read_lock();
        f(self.tx_netdev.try_access_with_guard(&rcu).map(|n| &**n))
    }

    /// Drops the transmit path's reference on the netdev (its `NETDEV_UNREGISTER`): waits until
    /// no sender uses it. Process context.
    pub(crate) fn release_netdev(&self) {
        self.tx_netdev.revoke();
    }

    /// Data for a device on a netdev with MAC address `mac`.
    ///
    /// The device's debugfs directory is `metaroce_NAME` (created here: it lives as long as the
    /// data; a name already taken, or no debugfs, leaves it out without failing).
    pub(crate) fn new(
        mac: &[u8; 6],
        netdev: &NetDevice,
        native: bool,
        auth: Option<SecretKey>,
        link_kbps: u32,
        name: &str,
    ) -> Result<impl PinInit<Self, Error>> {
        let guid_be = eui64_from_mac(mac);
        let active = PortState::of_netdev(netdev) == PortState::Active;
        let peers = Arc::pin_init(
            new_spinlock_irq!(PeerTable::new(link_kbps, netdev.mtu()), "metaroce_peers"),
            GFP_KERNEL,
        )?;
        let dir = Dir::new(&CString::try_from_fmt(fmt!("metaroce_{name}"))?);
        let debugfs = KBox::pin_init(
            dir.read_only_file(c"connections", ConnView(peers.clone())),
            GFP_KERNEL,
        )?;
        let held: ARef<NetDevice> = netdev.into();
        let flights = FlightPool::new()?;
        let tx = TxEngine::new()?;
        let kb = crate::module_parameters::tx_budget_kb.value();
        let tx_budget = match kb {
            0 => None,
            kb => Some(TxBudget::new(kb.clamp(16, 65536) * 1024, tx.clone())?),
        };
        Ok(try_pin_init!(Self {
            tx_netdev <- Revocable::new(held),
            guid_be,
            ucontexts: AtomicU32::new(0),
            port_active: AtomicBool::new(active),
            counters: [const { AtomicU64::new(0) }; NUM_COUNTERS],
            objects: ObjectCounts {
                pds: AtomicU32::new(0),
                cqs: AtomicU32::new(0),
                ahs: AtomicU32::new(0),
                srqs: AtomicU32::new(0),
                mrs: AtomicU32::new(0),
                mws: AtomicU32::new(0),
                odp_mrs: AtomicU32::new(0),
            },
            gsi: AtomicBool::new(false),
            qpns <- new_mutex!(IdPool::with_capacity(MAX_QP as usize, GFP_KERNEL)?, "metaroce_qpns"),
            mr_indices <- new_mutex!(
                IdPool::with_capacity((MAX_MR + MAX_MW) as usize, GFP_KERNEL)?,
                "metaroce_mr_indices"
            ),
            qps <- new_spinlock_irq!(qp_table()?, "metaroce_qps"),
            txq: OwnedQueue::with_priority(
                c"metaroce_tx",
                crate::module_parameters::tx_highpri.value() != 0
            )?,
            tx_budget,
            tx,
            odp: OdpFaults::new()?,
            timers: Timers::new()?,
            epoch: Instant::now(),
            mrs <- new_spinlock_irq!(RBTree::new(), "metaroce_mrs"),
            ah_nums <- new_mutex!(
                IdPool::with_capacity(MAX_AH as usize + 1, GFP_KERNEL)?,
                "metaroce_ah_nums"
            ),
            user_ahs <- new_spinlock_irq!(RBTree::new(), "metaroce_user_ahs"),
            mcast <- new_spinlock_irq!(crate::mcast::table(), "metaroce_mcast"),
            mcast_update <- new_mutex!((), "metaroce_mcast_update"),
            native,
            auth,
            peers,
            flights <- flights,
            orphans: AtomicBool::new(false),
            _debugfs: debugfs,
        }))
    }

    /// Allocates a QP number: 1 for the GSI QP (one per device, `EBUSY` for a second),
    /// otherwise the lowest free number from [`MIN_QPN`] (`ENOMEM` when all are taken).
    /// Process context (takes a mutex).
    pub(crate) fn alloc_qpn(&self, gsi: bool) -> Result<u32> {
        if gsi {
            return if self.gsi.swap(true, Ordering::AcqRel) {
                Err(EBUSY)
            } else {
                Ok(1)
            };
        }
        let mut pool = self.qpns.lock();
        let id = pool.find_unused_id(MIN_QPN as usize).ok_or(ENOMEM)?;
        if id.as_u32() >= MAX_QP {
            return Err(ENOMEM);
        }
        Ok(id.acquire() as u32)
    }

    /// Gives back a QP number from [`MetaRoceDev::alloc_qpn`]. Process context.
    pub(crate) fn free_qpn(&self, qpn: u32) {
        if qpn == 1 {
            self.gsi.store(false, Ordering::Release);
        } else {
            self.qpns.lock().release_id(qpn as usize);
        }
    }

    /// Makes `qp` reachable by the receive path (idempotent). Any context.
    pub(crate) fn publish_qp(&self, qp: &Qp<MetaRoceDriver>) {
        let mut t = self.qps.lock();
        if let Some(slot) = t.get_mut(qp.qp_num() as usize) {
            if slot.is_none() {
                *slot = Some(ARef::from(qp));
            }
        }
    }

    /// Removes QP `qpn` from the receive path's table (its `destroy_qp`).
    pub(crate) fn unpublish_qp(&self, qpn: u32) {
        let old = self.qps.lock().get_mut(qpn as usize).and_then(Option::take);
        // The reference is dropped outside the lock.
        drop(old);
    }

    /// A counted reference to QP `qpn`, if it exists and was published. Any context.
    pub(crate) fn lookup_qp(&self, qpn: u32) -> Option<ARef<Qp<MetaRoceDriver>>> {
        self.qps.lock().get(qpn as usize).and_then(Clone::clone)
    }

    /// A published QP to carry a transmission that belongs to no QP: the lowest-numbered, the
    /// GSI QP (QP1) while it exists. Any context.
    pub(crate) fn any_qp(&self) -> Option<ARef<Qp<MetaRoceDriver>>> {
        self.qps.lock().iter().flatten().next().cloned()
    }

    /// Nanoseconds since the device was created (the transport's monotonic clock).
    pub(crate) fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(0)
    }

    /// The transmit worker.
    pub(crate) fn tx(&self) -> &Arc<TxEngine> {
        &self.tx
    }

    /// The bound on packet memory queued in the network stack, if the device has one.
    pub(crate) fn tx_budget(&self) -> Option<&TxBudget> {
        self.tx_budget.as_ref()
    }

    /// Whether the device has on-demand paging memory regions. Any context.
    pub(crate) fn has_odp(&self) -> bool {
        self.objects.odp_mrs.load(Ordering::Relaxed) != 0
    }

    /// The page-fault handling of ODP memory regions.
    pub(crate) fn odp_faults(&self) -> &Arc<OdpFaults> {
        &self.odp
    }

    /// The timer list and tick.
    pub(crate) fn timers(&self) -> &Arc<Timers> {
        &self.timers
    }

    /// The device's work queue.
    pub(crate) fn tx_queue(&self) -> &Queue {
        &self.txq
    }

    /// Allocates an index (never 0) of the space memory regions and windows share.
    fn alloc_index(&self) -> Result<usize> {
        let mut pool = self.mr_indices.lock();
        let id = pool.find_unused_id(1).ok_or(ENOMEM)?;
        if id.as_u32() >= MAX_MR + MAX_MW {
            return Err(ENOMEM);
        }
        Ok(id.acquire())
    }

    /// Allocates a memory region index (never 0), at most `MAX_MR - 1` at a time (`max_mr`).
    /// Process context.
    pub(crate) fn alloc_mr_index(&self) -> Result<usize> {
        take(&self.objects.mrs, MAX_MR - 1)?;
        self.alloc_index().inspect_err(|_| give(&self.objects.mrs))
    }

    /// Allocates a memory window index (never 0), at most [`MAX_MW`] at a time (`max_mw`).
    /// Process context.
    pub(crate) fn alloc_mw_index(&self) -> Result<usize> {
        take(&self.objects.mws, MAX_MW)?;
        self.alloc_index().inspect_err(|_| give(&self.objects.mws))
    }

    /// Gives back an index from [`MetaRoceDev::alloc_mw_index`]. Process context.
    pub(crate) fn free_mw_index(&self, index: usize) {
        self.mr_indices.lock().release_id(index);
        give(&self.objects.mws);
    }

    /// Numbers a new user AH and enters it in the table; returns its number (never 0).
    /// Process context.
    pub(crate) fn add_user_ah(&self, ah: UserAh) -> Result<u32> {
        let num = {
            let mut pool = self.ah_nums.lock();
            let id = pool.find_unused_id(1).ok_or(ENOMEM)?;
            if id.as_u32() > MAX_AH {
                return Err(ENOMEM);
            }
            id.acquire() as u32
        };
        match RBTreeNode::new(num, ah, GFP_KERNEL) {
            Ok(node) => {
                // The number was free, so nothing is replaced.
                drop(self.user_ahs.lock().insert(node));
                Ok(num)
            }
            Err(e) => {
                self.ah_nums.lock().release_id(num as usize);
                Err(e)
            }
        }
    }

    /// Takes user AH `num` out of the table and frees its number. Process context.
    pub(crate) fn remove_user_ah(&self, num: u32) {
        // Dropped outside the lock.
        let old = self.user_ahs.lock().remove_node(&num);
        drop(old);
        self.ah_nums.lock().release_id(num as usize);
    }

    /// The address vector of user AH `num` if it exists and belongs to PD `pd`. Any context.
    pub(crate) fn user_ah(&self, num: u32, pd: PdId) -> Option<RoceAv> {
        self.user_ahs
            .lock()
            .get(&num)
            .filter(|a| a.pd == pd)
            .map(|a| a.av)
    }

    /// Gives back an index from [`MetaRoceDev::alloc_mr_index`]. Process context.
    pub(crate) fn free_mr_index(&self, index: usize) {
        self.mr_indices.lock().release_id(index);
        give(&self.objects.mrs);
    }

    /// Adds `n` to counter `c` (no atomic operation for 0: the QP glue adds the core's
    /// statistics' differences on every packet, most of them 0).
    pub(crate) fn count(&self, c: Counter, n: u64) {
        if n != 0 {
            self.counters[c as usize].fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Records the port state of the netdev after an event; counts active → down transitions.
    pub(crate) fn port_state_changed(&self, state: PortState) {
        let active = state == PortState::Active;
        if self.port_active.swap(active, Ordering::Relaxed) && !active {
            self.count(Counter::LinkDowned, 1);
        }
    }

    /// The node GUID (network byte order).
    pub(crate) fn guid_be(&self) -> u64 {
        self.guid_be
    }
}

/// An empty QP table with a slot for every QP number.
fn qp_table() -> Result<KVec<Option<ARef<Qp<MetaRoceDriver>>>>> {
    let mut t = KVec::with_capacity(MAX_QP as usize, GFP_KERNEL)?;
    for _ in 0..MAX_QP {
        t.push(None, GFP_KERNEL)?;
    }
    Ok(t)
}

/// The modified EUI-64 of a MAC address (`addrconf_addr_eui48`), as a network-order `u64`.
fn eui64_from_mac(mac: &[u8; 6]) -> u64 {
    let eui = [
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ];
    // The GUID fields are `__be64`: keep the byte sequence as it is in memory.
    u64::from_ne_bytes(eui)
}

/// The IB path MTU a RoCE v2 port gets from an Ethernet MTU.
pub(crate) fn active_mtu(eth_mtu: u32) -> Mtu {
    Mtu::floor(eth_mtu.saturating_sub(ROCE_HDR_MAX)).unwrap_or(Mtu::Mtu256)
}

fn check_port(port: u32) -> Result {
    if port == PORT {
        Ok(())
    } else {
        Err(EINVAL)
    }
}

/// The driver data of one user context: it accounts the context against [`MAX_UCONTEXT`].
pub(crate) struct UserContext;

#[vtable]
impl kernel::rdma::device::Driver for MetaRoceDriver {
    type OwnerModule = crate::module::MetaRoceModule;
    type Data = MetaRoceDev;
    type UcontextData = UserContext;
    type PdData = MetaRocePd;
    type CqData = MetaRoceCq;
    type QpData = MetaRoceQp;
    type AhData = MetaRoceAh;
    type MrData = MetaRoceMr;
    type MwData = MetaRoceMw;
    type SrqData = MetaRoceSrq;

    // MetaRoCE's own id and ABI (libmetaroce), or, with CONFIG_RDMA_METAROCE_RXE_ABI,
    // rdma_rxe's, so that the stock librxe provider drives it; Kconfig then keeps RDMA_RXE out
    // of the same kernel.
    const DRIVER_ID: DriverId = crate::uabi::DRIVER_ID;
    // The version a provider's `match_*_abi_version` compare: METAROCE_ABI_VERSION, or
    // rdma_rxe's RXE_UVERBS_ABI_VERSION.
    const UVERBS_ABI_VER: u32 = if crate::uabi::OWN { 1 } else { 2 };
    // Both providers arm CQs through the kernel (the rings carry no arming state).
    const USER_COMMANDS: UserCommands = UserCommands::REQ_NOTIFY_CQ.union(UserCommands::POST_SEND);
    const PORT_COUNTERS: &'static [StatDesc] = &COUNTER_DESCS;

    fn query_device(dev: &Device<Self>, attr: &mut DeviceAttr) -> Result {
        attr.vendor_id(VENDOR_ID)
            .sys_image_guid(dev.guid_be)
            .max_pkeys(PKEY_TBL_LEN)
            .local_ca_ack_delay(LOCAL_CA_ACK_DELAY)
            .device_caps(
                DeviceCaps::PORT_ACTIVE_EVENT
                    | DeviceCaps::SYS_IMAGE_GUID
                    | DeviceCaps::RC_RNR_NAK_GEN
                    | DeviceCaps::SRQ_RESIZE
                    | DeviceCaps::MEM_MGT_EXTENSIONS
                    | DeviceCaps::MEM_WINDOW
                    | DeviceCaps::MEM_WINDOW_TYPE_2B
                    // RDMA FLUSH is a RoCEv2 request: the native transport has no FLUSH.
                    | if dev.native { DeviceCaps::NONE } else { DeviceCaps::FLUSH_GLOBAL },
            )
            // Remote atomics are serialised by the device's MR table lock, not against the
            // CPUs' own accesses to the memory (`mr_atomic`).
            .atomic_cap(AtomicCap::Hca)
            .max_qp(MAX_QP - MIN_QPN)
            .max_qp_wr(MAX_QP_WR)
            .max_send_sge(MAX_SGE)
            .max_recv_sge(MAX_SGE)
            .max_sge_rd(MAX_SGE)
            .max_cq(MAX_CQ)
            .max_cqe(MAX_CQE)
            .cq_moderation_caps(
                crate::proto::cqmod::MAX_COUNT,
                crate::proto::cqmod::MAX_PERIOD_US,
            )
            .max_pd(MAX_PD)
            .max_ah(MAX_AH)
            .max_srq(MAX_SRQ)
            .max_srq_wr(MAX_SRQ_WR)
            .max_srq_sge(MAX_SRQ_SGE)
            .max_mr(MAX_MR - 1)
            .max_mw(MAX_MW)
            .max_fast_reg_page_list_len(crate::mr::MAX_FAST_REG_PAGES)
            .max_mcast_grp(crate::mcast::LIMITS.0)
            .max_mcast_qp_attach(crate::mcast::LIMITS.1)
            .max_total_mcast_qp_attach(crate::mcast::LIMITS.2)
            .max_mr_size(u64::MAX)
            // User MRs are pinned page by page, so any power-of-two page size from 4 KiB
            // (to 2 GiB, as rdma_rxe reports) describes them.
            .page_size_cap(PAGE_SIZE_CAP)
            // Incoming and outgoing READs/atomics in flight per QP (the core's responder
            // resources).
            .max_qp_rd_atom(crate::qp::RESP_RES as u32)
            .max_qp_init_rd_atom(crate::qp::RESP_RES as u32)
            .max_res_rd_atom(crate::qp::RESP_RES as u32 * (MAX_QP - MIN_QPN))
            // `rdma link delete` may remove the device; kernel consumers address memory by
            // kernel virtual address under the device's `local_dma_lkey` (0).
            .kernel_caps(
                KernelCaps::ALLOW_USER_UNREG
                    | KernelCaps::LOCAL_DMA_LKEY
                    | if dev.native {
                        KernelCaps::NONE
                    } else {
                        KernelCaps::ON_DEMAND_PAGING
                    },
            );
        if !dev.native {
            // Explicit on-demand paging on RoCEv2 devices (rdma_rxe's set): the responder
            // answers a missing page with an RNR NAK, which RC requesters retry (`odp.rs`).
            // The native transport has no RNR NAK for placement yet.
            let rc = OdpOps::SEND
                | OdpOps::RECV
                | OdpOps::WRITE
                | OdpOps::READ
                | OdpOps::ATOMIC
                | OdpOps::SRQ_RECV
                | OdpOps::FLUSH
                | OdpOps::ATOMIC_WRITE;
            attr.odp_caps(
                OdpGeneral::SUPPORT,
                rc,
                OdpOps::NONE,
                OdpOps::SEND | OdpOps::RECV,
            );
        }
        Ok(())
    }

    fn query_port(dev: &Device<Self>, port: u32, attr: &mut PortAttr) -> Result {
        check_port(port)?;
        let netdev = dev.netdev(port).ok_or(ENODEV)?;
        let speed = dev.eth_speed(port)?;
        attr.state(PortState::of_netdev(&netdev))
            .phys_state(PhysState::of_netdev(&netdev))
            .max_mtu(Mtu::Mtu4096)
            .active_mtu(active_mtu(netdev.mtu()))
            .phys_mtu(netdev.mtu())
            .gid_tbl_len(GID_TBL_LEN)
            .pkey_tbl_len(PKEY_TBL_LEN)
            .max_msg_sz(MAX_MSG_SZ)
            .eth_speed(speed);
        Ok(())
    }

    fn get_port_immutable(_dev: &Device<Self>, port: u32, imm: &mut PortImmutable) -> Result {
        check_port(port)?;
        imm.core_caps(CoreCaps::ROCE_UDP_ENCAP)
            .pkey_tbl_len(PKEY_TBL_LEN.into())
            .gid_tbl_len(GID_TBL_LEN)
            .standard_mad_size();
        Ok(())
    }

    fn get_link_layer(_dev: &Device<Self>, _port: u32) -> LinkLayer {
        LinkLayer::Ethernet
    }

    fn query_pkey(_dev: &Device<Self>, port: u32, index: u16) -> Result<u16> {
        check_port(port)?;
        if index != 0 {
            return Err(EINVAL);
        }
        Ok(DEFAULT_PKEY_FULL)
    }

    fn get_hw_stats(dev: &Device<Self>, port: u32, values: &mut [u64]) -> Result {
        check_port(port)?;
        for (v, c) in values.iter_mut().zip(dev.counters.iter()) {
            *v = c.load(Ordering::Relaxed);
        }
        // The RTT gauges are read off the connections now, the flight gauges off the pool.
        let (min_ns, avg_ns) = crate::native::rtt_figures(&dev.peers);
        let (made, lent) = dev.flights.figures();
        for (c, v) in [
            (Counter::NativeRttMinUs, min_ns / 1000),
            (Counter::NativeRttAvgUs, avg_ns / 1000),
            (Counter::NativeFlights, made),
            (Counter::NativeFlightsLent, lent),
        ] {
            if let Some(x) = values.get_mut(c as usize) {
                *x = v;
            }
        }
        // The fault handler counts for itself (its work item holds no device).
        let odp = dev.odp_faults();
        for (c, n) in [
            (Counter::OdpFaults, &odp.done),
            (Counter::OdpFaultErrors, &odp.failed),
            (Counter::OdpFaultDrops, &odp.dropped),
        ] {
            if let Some(v) = values.get_mut(c as usize) {
                *v = n.load(Ordering::Relaxed);
            }
        }
        Ok(())
    }

    fn alloc_ucontext(dev: &Device<Self>, udata: &Udata<'_>) -> Result<UserContext> {
        crate::uabi::alloc_ucontext(
            udata,
            &crate::uabi::DeviceInfo {
                native: dev.native,
                max_inline: crate::qp::USER_MAX_INLINE,
                max_sge: crate::qp::MAX_SGE,
                max_paths: crate::native::PATHS as u32,
            },
        )?;
        dev.ucontexts
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < MAX_UCONTEXT).then_some(n + 1)
            })
            .map_err(|_| ENOMEM)?;
        Ok(UserContext)
    }

    fn dealloc_ucontext(dev: &Device<Self>, _ctx: &UserContext) {
        dev.ucontexts.fetch_sub(1, Ordering::Relaxed);
    }

    fn alloc_pd(dev: &Device<Self>, origin: Origin) -> Result<impl PinInit<MetaRocePd, Error>> {
        // Plain data initialises in place through `Result<T, Error>: PinInit<T, Error>`.
        crate::verbs::alloc_pd(dev, origin).map(Ok::<_, Error>)
    }

    fn dealloc_pd(pd: &Pd<Self>) {
        crate::verbs::dealloc_pd(pd)
    }

    fn create_cq(cq: &mut NewCq<'_, Self>) -> Result<impl PinInit<MetaRoceCq, Error>> {
        crate::verbs::create_cq(cq)
    }

    fn resize_user_cq(cq: &Cq<Self>, cqe: u32, udata: &Udata<'_>) -> Result {
        crate::verbs::resize_cq(cq, cqe, udata)
    }

    fn destroy_cq(cq: &Cq<Self>) {
        crate::verbs::destroy_cq(cq)
    }

    fn poll_cq(cq: &Cq<Self>, wc: &mut WcArray<'_>) -> Result {
        crate::verbs::poll_cq(cq, wc)
    }

    fn req_notify_cq(cq: &Cq<Self>, notify: CqNotify) -> Result<bool> {
        crate::verbs::req_notify_cq(cq, notify)
    }

    fn modify_cq(cq: &Cq<Self>, cq_count: u16, cq_period: u16) -> Result {
        crate::verbs::modify_cq(cq, cq_count, cq_period)
    }

    fn cq_timer(cq: &Cq<Self>) {
        crate::verbs::cq_timer(cq)
    }

    fn create_qp(qp: &mut NewQp<'_, Self>) -> Result<impl PinInit<MetaRoceQp, Error>> {
        crate::qp::create_qp(qp)
    }

    fn destroy_qp(qp: &Qp<Self>) {
        crate::qp::destroy_qp(qp)
    }

    fn modify_qp(qp: &Qp<Self>, attr: &QpAttr, mask: QpAttrMask) -> Result {
        crate::qp::modify_qp(qp, attr, mask)
    }

    fn query_qp(qp: &Qp<Self>, attr: &mut QpAttrOut, init: &mut QpInitAttrOut) -> Result {
        crate::qp::query_qp(qp, attr, init)
    }

    fn attach_mcast(qp: &Qp<Self>, gid: &[u8; 16], _lid: u16) -> Result {
        crate::mcast::attach(qp, gid)
    }

    fn detach_mcast(qp: &Qp<Self>, gid: &[u8; 16], _lid: u16) -> Result {
        crate::mcast::detach(qp, gid)
    }

    fn post_send<'a>(
        qp: &Qp<Self>,
        wrs: SendWrList<'a, Self>,
    ) -> Result<(), PostError<SendWr<'a, Self>>> {
        crate::qp::post_send(qp, wrs)
    }

    fn post_recv<'a>(qp: &Qp<Self>, wrs: RecvWrList<'a>) -> Result<(), PostError<RecvWr<'a>>> {
        crate::qp::post_recv(qp, wrs)
    }

    fn create_srq(srq: &mut NewSrq<'_, Self>) -> Result<impl PinInit<MetaRoceSrq, Error>> {
        crate::srq::create_srq(srq)
    }

    fn destroy_srq(srq: &Srq<Self>) {
        crate::srq::destroy_srq(srq)
    }

    fn modify_srq(
        srq: &Srq<Self>,
        attr: &mut SrqAttr,
        mask: SrqAttrMask,
        udata: Option<&Udata<'_>>,
    ) -> Result {
        crate::srq::modify_srq(srq, attr, mask, udata)
    }

    fn query_srq(srq: &Srq<Self>) -> Result<SrqAttr> {
        crate::srq::query_srq(srq)
    }

    fn post_srq_recv<'a>(
        srq: &Srq<Self>,
        wrs: RecvWrList<'a>,
    ) -> Result<(), PostError<RecvWr<'a>>> {
        crate::srq::post_srq_recv(srq, wrs)
    }

    fn create_ah(ah: &mut NewAh<'_, Self>) -> Result<impl PinInit<MetaRoceAh, Error>> {
        crate::verbs::create_ah(ah).map(Ok::<_, Error>)
    }

    fn query_ah(ah: &Ah<Self>) -> Result<RoceAhAttr> {
        let av = &ah.av;
        Ok(RoceAhAttr {
            port_num: PORT,
            sl: av.sl,
            dgid: av.dgid,
            sgid_index: av.sgid_index,
            flow_label: av.flow_label,
            hop_limit: av.hop_limit,
            traffic_class: av.traffic_class,
            dmac: av.dmac,
        })
    }

    fn create_user_ah(ah: &mut NewAh<'_, Self>) -> Result<impl PinInit<MetaRoceAh, Error>> {
        crate::verbs::create_user_ah(ah).map(Ok::<_, Error>)
    }

    fn destroy_ah(ah: &Ah<Self>, _may_sleep: bool) {
        crate::verbs::destroy_ah(ah)
    }

    fn get_dma_mr(
        pd: &Pd<Self>,
        access: AccessFlags,
    ) -> Result<(MrKeys, impl PinInit<MetaRoceMr, Error>)> {
        crate::verbs::get_dma_mr(pd, access)
    }

    fn reg_user_mr(
        pd: &Pd<Self>,
        req: &UserMrRequest,
    ) -> Result<(MrKeys, impl PinInit<MetaRoceMr, Error>)> {
        crate::mr::reg_user_mr(pd, req)
    }

    fn alloc_mr(
        pd: &Pd<Self>,
        mr_type: MrType,
        max_num_sg: u32,
    ) -> Result<(MrKeys, impl PinInit<MetaRoceMr, Error>)> {
        crate::mr::alloc_mr(pd, mr_type, max_num_sg)
    }

    fn map_mr_sg(mr: &Mr<Self>, sg: MrSgList<'_, Self>) -> Result<u32> {
        crate::mr::map_mr_sg(mr, sg)
    }

    fn mr_set_page(mr: &Mr<Self>, page: MrPage) -> Result {
        crate::mr::mr_set_page(mr, page)
    }

    fn dereg_mr(mr: &Mr<Self>) -> Result {
        crate::verbs::dereg_mr(mr)
    }

    fn alloc_mw(pd: &Pd<Self>, ty: MwType) -> Result<(u32, impl PinInit<MetaRoceMw, Error>)> {
        let rkey = crate::mr::alloc_mw(pd, ty)?;
        Ok((
            rkey,
            Ok::<_, Error>(MetaRoceMw {
                index: (rkey >> 8) as usize,
            }),
        ))
    }

    fn dealloc_mw(mw: &Mw<Self>) {
        crate::mr::dealloc_mw(mw, mw.index)
    }
}

/// Reads the 6-byte MAC address of `netdev`, or fails with `EINVAL` for a netdev without one.
pub(crate) fn netdev_mac(netdev: &NetDevice) -> Result<[u8; 6]> {
    let mut buf = [0u8; 32];
    let len = netdev.hw_addr(&mut buf)?;
    if len != 6 {
        return Err(EINVAL);
    }
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&buf[..6]);
    Ok(mac)
}
