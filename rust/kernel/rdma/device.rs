// SPDX-License-Identifier: GPL-2.0

//! RDMA devices (`struct ib_device`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! # Lifetime
//!
//! A [`Device<T>`] is one allocation made by ib_core (`_ib_alloc_device`) holding the C
//! `struct ib_device` followed by the driver's [`Driver::Data`], initialised in place with
//! pin-init. Its life has three phases:
//!
//! 1. **Unregistered** ([`UnregisteredDevice`], owned by the driver): created by
//!    [`Device::alloc`], configured, then either registered or dropped (`ib_dealloc_device`).
//! 2. **Registered**: after [`UnregisteredDevice::register`] succeeds, ib_core owns the device.
//!    It can be unregistered at any time by `rdma link delete`, by
//!    [`DeviceRef::unregister_queued`] or by [`unregister_driver`]; drivers reach it again only
//!    through callbacks (`&Device<T>`) or lookups that take a registration reference
//!    ([`DeviceRef`]).
//! 3. **Released**: unregistration calls `dealloc_driver`, the last driver callback, which drops
//!    [`Driver::Data`]; ib_core then frees the memory when the last `struct device` reference
//!    goes (`kfree_rcu`).
//!
//! ib_core exposes two reference counts. `get_device`/`put_device` only keep the memory, not the
//! driver data (dropped in `dealloc_driver`), so no Rust handle is built on it: `ARef<Device<T>>`
//! would let the data be used after it was dropped. The registration count (`ib_device_try_get`,
//! `ib_device_put`) keeps the device registered and so its data alive; it may fail (device being
//! unregistered) and blocks unregistration while held, so it is the short-lived [`DeviceRef`],
//! not an `AlwaysRefCounted` implementation.

use crate::{
    bindings,
    error::{
        from_result,
        to_result,
        VTABLE_DEFAULT_ERROR, //
    },
    module::{
        this_module,
        ModuleMetadata, //
    },
    net::netdev::NetDevice,
    prelude::*,
    rdma::{
        ah::{
            Ah,
            NewAh,
            RoceAhAttr, //
        },
        cq::{
            Cq,
            CqNotify,
            NewCq,
            WcArray, //
        },
        mmap::ContextMaps,
        mr::{
            AccessFlags,
            Mr,
            MrKeys,
            MrSgList,
            MrType,
            UserMrRequest, //
        },
        mw::{
            Mw,
            MwType, //
        },
        pd::{
            Origin,
            Pd, //
        },
        qp::{
            NewQp,
            Qp,
            QpAttr,
            QpAttrMask,
            QpAttrOut,
            QpInitAttrOut, //
        },
        srq::{
            NewSrq,
            Srq,
            SrqAttr,
            SrqAttrMask, //
        },
        udata::Udata,
        wr::{
            MrPage,
            PostError,
            RecvWr,
            RecvWrList,
            SendWr,
            SendWrList, //
        },
    },
    sync::{
        aref::ARef,
        Arc, //
    },
    types::Opaque, //
};
use core::{
    marker::PhantomData,
    ops::Deref,
    ptr::NonNull, //
};

/// An RDMA driver identifier (`enum rdma_driver_id`), which user space uses to pick its
/// provider library.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DriverId(bindings::rdma_driver_id);

impl DriverId {
    /// `RDMA_DRIVER_RXE`: the user ABI of `include/uapi/rdma/rdma_user_rxe.h`, driven by
    /// rdma-core's `librxe`.
    pub const RXE: Self = Self(bindings::rdma_driver_id_RDMA_DRIVER_RXE);
    /// `RDMA_DRIVER_METAROCE`: the user ABI of `include/uapi/rdma/metaroce-abi.h`, driven by
    /// the `libmetaroce` provider.
    pub const METAROCE: Self = Self(bindings::rdma_driver_id_RDMA_DRIVER_METAROCE);
}

/// Legacy uverbs write commands a device enables beyond ib_core's default set
/// (`ib_device::uverbs_cmd_mask`; ib_core refuses the others with `EOPNOTSUPP` even when the
/// hook exists).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct UserCommands(u64);

impl UserCommands {
    /// None beyond the default set.
    pub const NONE: Self = Self(0);
    /// `IB_USER_VERBS_CMD_REQ_NOTIFY_CQ`: arming a CQ (providers that do not arm in user space,
    /// such as librxe).
    pub const REQ_NOTIFY_CQ: Self =
        Self(1 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);
    /// `IB_USER_VERBS_CMD_POST_SEND`: librxe's send doorbell (a post with no work request).
    pub const POST_SEND: Self =
        Self(1 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND);

    /// Both sets (usable in constants).
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

impl core::ops::BitOr for UserCommands {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// The state of a port (`enum ib_port_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum PortState {
    /// `IB_PORT_DOWN`.
    Down = bindings::ib_port_state_IB_PORT_DOWN,
    /// `IB_PORT_ACTIVE`.
    Active = bindings::ib_port_state_IB_PORT_ACTIVE,
}

impl PortState {
    /// The state a RoCE port on `netdev` has: active when the interface is running and has
    /// carrier (ib_core's `ib_get_curr_port_state`).
    pub fn of_netdev(netdev: &NetDevice) -> Self {
        if netdev.is_running() && netdev.has_carrier() {
            Self::Active
        } else {
            Self::Down
        }
    }
}

/// The physical state of a port (`enum ib_port_phys_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PhysState {
    /// `IB_PORT_PHYS_STATE_POLLING`: enabled, no link.
    Polling = bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_POLLING as u8,
    /// `IB_PORT_PHYS_STATE_DISABLED`: administratively down.
    Disabled = bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED as u8,
    /// `IB_PORT_PHYS_STATE_LINK_UP`.
    LinkUp = bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP as u8,
}

impl PhysState {
    /// The physical state of a RoCE port on `netdev` (as rdma_rxe reports it).
    pub fn of_netdev(netdev: &NetDevice) -> Self {
        if PortState::of_netdev(netdev) == PortState::Active {
            Self::LinkUp
        } else if netdev.is_running() {
            Self::Polling
        } else {
            Self::Disabled
        }
    }
}

/// An InfiniBand path MTU (`enum ib_mtu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u32)]
pub enum Mtu {
    /// 256 bytes.
    Mtu256 = bindings::ib_mtu_IB_MTU_256,
    /// 512 bytes.
    Mtu512 = bindings::ib_mtu_IB_MTU_512,
    /// 1024 bytes.
    Mtu1024 = bindings::ib_mtu_IB_MTU_1024,
    /// 2048 bytes.
    Mtu2048 = bindings::ib_mtu_IB_MTU_2048,
    /// 4096 bytes.
    Mtu4096 = bindings::ib_mtu_IB_MTU_4096,
}

impl Mtu {
    /// The largest MTU not above `bytes`, or `None` if `bytes < 256`.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::rdma::device::Mtu;
    ///
    /// assert_eq!(Mtu::floor(1500 - 92), Some(Mtu::Mtu1024));
    /// assert_eq!(Mtu::floor(4096), Some(Mtu::Mtu4096));
    /// assert_eq!(Mtu::floor(9000), Some(Mtu::Mtu4096));
    /// assert_eq!(Mtu::floor(255), None);
    /// assert_eq!(Mtu::Mtu256.bytes(), 256);
    /// assert_eq!(Mtu::Mtu4096.bytes(), 4096);
    /// ```
    pub fn floor(bytes: u32) -> Option<Self> {
        Some(match bytes {
            4096.. => Self::Mtu4096,
            2048.. => Self::Mtu2048,
            1024.. => Self::Mtu1024,
            512.. => Self::Mtu512,
            256.. => Self::Mtu256,
            _ => return None,
        })
    }

    /// The MTU in bytes.
    pub fn bytes(self) -> u32 {
        128 << (self as u32)
    }
}

/// The link layer of a port (`enum rdma_link_layer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum LinkLayer {
    /// `IB_LINK_LAYER_INFINIBAND`.
    Infiniband = bindings::rdma_link_layer::IB_LINK_LAYER_INFINIBAND.0,
    /// `IB_LINK_LAYER_ETHERNET` (RoCE).
    Ethernet = bindings::rdma_link_layer::IB_LINK_LAYER_ETHERNET.0,
}

/// Kernel-only device capabilities (`enum ib_kernel_cap_flags`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct KernelCaps(u64);

impl KernelCaps {
    /// No capability.
    pub const NONE: Self = Self(0);
    /// `IBK_ALLOW_USER_UNREG`: `rdma link delete` may unregister the device.
    pub const ALLOW_USER_UNREG: Self =
        Self(bindings::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG as u64);
    /// `IBK_LOCAL_DMA_LKEY`: kernel consumers use the device's `local_dma_lkey` (0 unless set)
    /// for local access to kernel memory, so a PD needs no DMA MR (`get_dma_mr`).
    pub const LOCAL_DMA_LKEY: Self = Self(bindings::ib_kernel_cap_flags_IBK_LOCAL_DMA_LKEY as u64);
    /// `IBK_ON_DEMAND_PAGING`: user memory regions may be registered with
    /// `IB_ACCESS_ON_DEMAND` (ib_core refuses them with `EOPNOTSUPP` otherwise).
    pub const ON_DEMAND_PAGING: Self =
        Self(bindings::ib_kernel_cap_flags_IBK_ON_DEMAND_PAGING as u64);
}

impl core::ops::BitOr for KernelCaps {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// General on-demand paging capabilities (`enum ib_odp_general_cap_bits`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct OdpGeneral(u64);

impl OdpGeneral {
    /// No on-demand paging.
    pub const NONE: Self = Self(0);
    /// `IB_ODP_SUPPORT`: explicit on-demand paging MRs.
    pub const SUPPORT: Self = Self(bindings::ib_odp_general_cap_bits_IB_ODP_SUPPORT as u64);
}

/// Operations of one transport that may use on-demand paging memory (`enum
/// ib_odp_transport_cap_bits`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct OdpOps(u32);

impl OdpOps {
    /// None.
    pub const NONE: Self = Self(0);
    /// `IB_ODP_SUPPORT_SEND`.
    pub const SEND: Self = Self(bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SEND);
    /// `IB_ODP_SUPPORT_RECV`.
    pub const RECV: Self = Self(bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_RECV);
    /// `IB_ODP_SUPPORT_WRITE`.
    pub const WRITE: Self = Self(bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_WRITE);
    /// `IB_ODP_SUPPORT_READ`.
    pub const READ: Self = Self(bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_READ);
    /// `IB_ODP_SUPPORT_ATOMIC`.
    pub const ATOMIC: Self = Self(bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_ATOMIC);
    /// `IB_ODP_SUPPORT_SRQ_RECV`.
    pub const SRQ_RECV: Self = Self(bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SRQ_RECV);
    /// `IB_ODP_SUPPORT_FLUSH`.
    pub const FLUSH: Self = Self(bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_FLUSH);
    /// `IB_ODP_SUPPORT_ATOMIC_WRITE`.
    pub const ATOMIC_WRITE: Self =
        Self(bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_ATOMIC_WRITE);
}

impl core::ops::BitOr for OdpOps {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// Device capabilities (`enum ib_device_cap_flags`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DeviceCaps(u64);

impl DeviceCaps {
    /// No capability.
    pub const NONE: Self = Self(0);
    /// `IB_DEVICE_PORT_ACTIVE_EVENT`: the device generates port active/error events.
    pub const PORT_ACTIVE_EVENT: Self =
        Self(bindings::ib_device_cap_flags_IB_DEVICE_PORT_ACTIVE_EVENT as u64);
    /// `IB_DEVICE_SYS_IMAGE_GUID`: the system image GUID is meaningful.
    pub const SYS_IMAGE_GUID: Self =
        Self(bindings::ib_device_cap_flags_IB_DEVICE_SYS_IMAGE_GUID as u64);
    /// `IB_DEVICE_RC_RNR_NAK_GEN`: RC responders send RNR NAKs when no receive is posted.
    pub const RC_RNR_NAK_GEN: Self =
        Self(bindings::ib_device_cap_flags_IB_DEVICE_RC_RNR_NAK_GEN as u64);
    /// `IB_DEVICE_SRQ_RESIZE`: shared receive queues can be resized (`IB_SRQ_MAX_WR`).
    pub const SRQ_RESIZE: Self = Self(bindings::ib_device_cap_flags_IB_DEVICE_SRQ_RESIZE as u64);
    /// `IB_DEVICE_MEM_MGT_EXTENSIONS`: fast registration (`alloc_mr`, `map_mr_sg`,
    /// `IB_WR_REG_MR`), local invalidate and SEND with invalidate.
    pub const MEM_MGT_EXTENSIONS: Self =
        Self(bindings::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS as u64);
    /// `IB_DEVICE_MEM_WINDOW`: memory windows ([`Driver::alloc_mw`]).
    pub const MEM_WINDOW: Self = Self(bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW as u64);
    /// `IB_DEVICE_MEM_WINDOW_TYPE_2B`: type 2 windows, each usable through the QP that bound
    /// it only.
    pub const MEM_WINDOW_TYPE_2B: Self =
        Self(bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW_TYPE_2B as u64);
    /// `IB_DEVICE_FLUSH_GLOBAL`: RDMA FLUSH to global visibility; memory regions may carry
    /// [`super::mr::AccessFlags::FLUSH_GLOBAL`] (ib_core refuses that right otherwise).
    pub const FLUSH_GLOBAL: Self =
        Self(bindings::ib_device_cap_flags_IB_DEVICE_FLUSH_GLOBAL as u64);
}

/// Atomicity guarantee of RDMA atomic operations (`enum ib_atomic_cap`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub enum AtomicCap {
    /// No atomic operations.
    None = bindings::ib_atomic_cap_IB_ATOMIC_NONE,
    /// Atomic with respect to other atomics of this device only (`IB_ATOMIC_HCA`).
    Hca = bindings::ib_atomic_cap_IB_ATOMIC_HCA,
    /// Atomic with respect to every agent, the CPUs included (`IB_ATOMIC_GLOB`).
    Glob = bindings::ib_atomic_cap_IB_ATOMIC_GLOB,
}

impl core::ops::BitOr for DeviceCaps {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// Core port capabilities (`RDMA_CORE_PORT_*`), reported in [`PortImmutable`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct CoreCaps(u32);

impl CoreCaps {
    /// `RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP`: RoCE v2 (and v1) over UDP, GIDs from the netdev.
    pub const ROCE_UDP_ENCAP: Self = Self(bindings::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP);
}

/// Generates chaining setters for plain integer fields of a `repr(transparent)` attribute
/// wrapper.
macro_rules! attr_setters {
    ($ty:ident { $($(#[$m:meta])* $name:ident : $t:ty),* $(,)? }) => {
        impl $ty {
            $(
                $(#[$m])*
                pub fn $name(&mut self, value: $t) -> &mut Self {
                    self.0.$name = value;
                    self
                }
            )*
        }
    };
}

/// Device attributes (`struct ib_device_attr`) being filled by [`Driver::query_device`].
///
/// ib_core zeroes the structure before the call; fields the driver leaves alone read as zero.
#[repr(transparent)]
pub struct DeviceAttr(bindings::ib_device_attr);

attr_setters!(DeviceAttr {
    /// Firmware version.
    fw_ver: u64,
    /// IEEE OUI of the vendor.
    vendor_id: u32,
    /// Vendor part id.
    vendor_part_id: u32,
    /// Hardware version.
    hw_ver: u32,
    /// Largest memory region, in bytes.
    max_mr_size: u64,
    /// Supported page sizes (bit n set: 2^n bytes).
    page_size_cap: u64,
    /// Maximum number of queue pairs.
    max_qp: u32,
    /// Maximum work requests per queue.
    max_qp_wr: u32,
    /// Maximum scatter/gather entries per send work request.
    max_send_sge: u32,
    /// Maximum scatter/gather entries per receive work request.
    max_recv_sge: u32,
    /// Maximum scatter/gather entries for RDMA reads.
    max_sge_rd: u32,
    /// Maximum number of completion queues.
    max_cq: u32,
    /// Maximum entries per completion queue.
    max_cqe: u32,
    /// Maximum number of memory regions.
    max_mr: u32,
    /// Maximum number of protection domains.
    max_pd: u32,
    /// Maximum outstanding RDMA reads/atomics a QP responds to.
    max_qp_rd_atom: u32,
    /// Maximum outstanding RDMA reads/atomics responded to, device-wide.
    max_res_rd_atom: u32,
    /// Maximum outstanding RDMA reads/atomics a QP initiates.
    max_qp_init_rd_atom: u32,
    /// Maximum number of memory windows.
    max_mw: u32,
    /// Maximum number of address handles.
    max_ah: u32,
    /// Maximum number of shared receive queues.
    max_srq: u32,
    /// Maximum work requests per shared receive queue.
    max_srq_wr: u32,
    /// Maximum scatter/gather entries per shared receive queue work request.
    max_srq_sge: u32,
    /// Maximum number of P_Keys.
    max_pkeys: u16,
    /// Maximum pages of a fast-register MR.
    max_fast_reg_page_list_len: u32,
    /// Local CA ack delay (4.096 µs × 2^value).
    local_ca_ack_delay: u8,
    /// Maximum number of multicast groups (0: no multicast).
    max_mcast_grp: u32,
    /// Maximum QPs attached to one multicast group.
    max_mcast_qp_attach: u32,
    /// Maximum QP attachments to multicast groups, device-wide.
    max_total_mcast_qp_attach: u32,
});

impl DeviceAttr {
    /// Sets the system image GUID (network byte order, as the C field).
    pub fn sys_image_guid(&mut self, guid_be: u64) -> &mut Self {
        self.0.sys_image_guid = guid_be;
        self
    }

    /// Sets the atomicity guarantee of RDMA atomic operations.
    pub fn atomic_cap(&mut self, cap: AtomicCap) -> &mut Self {
        self.0.atomic_cap = cap as u32;
        self
    }

    /// Sets the limits of completion-event moderation (`struct ib_cq_caps`): the largest
    /// `cq_count` and `cq_period` (microseconds) [`Driver::modify_cq`] takes. User space reads
    /// them from `ibv_query_device_ex` (`cq_mod_caps`).
    pub fn cq_moderation_caps(&mut self, max_count: u16, max_period_us: u16) -> &mut Self {
        self.0.cq_caps.max_cq_moderation_count = max_count;
        self.0.cq_caps.max_cq_moderation_period = max_period_us;
        self
    }

    /// Sets the device capabilities.
    pub fn device_caps(&mut self, caps: DeviceCaps) -> &mut Self {
        self.0.device_cap_flags = caps.0;
        self
    }

    /// Sets the on-demand paging capabilities (`struct ib_odp_caps`): `general` of `enum
    /// ib_odp_general_cap_bits`, and per transport the operations (`enum
    /// ib_odp_transport_cap_bits`) that may use on-demand paging memory.
    pub fn odp_caps(
        &mut self,
        general: OdpGeneral,
        rc: OdpOps,
        uc: OdpOps,
        ud: OdpOps,
    ) -> &mut Self {
        self.0.odp_caps.general_caps = general.0;
        self.0.odp_caps.per_transport_caps.rc_odp_caps = rc.0;
        self.0.odp_caps.per_transport_caps.uc_odp_caps = uc.0;
        self.0.odp_caps.per_transport_caps.ud_odp_caps = ud.0;
        self
    }

    /// Sets the kernel-only capabilities. ib_core copies the attributes from
    /// [`Driver::query_device`] at registration, so [`KernelCaps::ALLOW_USER_UNREG`] must be
    /// reported here (setting it anywhere else is overwritten).
    pub fn kernel_caps(&mut self, caps: KernelCaps) -> &mut Self {
        self.0.kernel_cap_flags = caps.0;
        self
    }
}

/// Port attributes (`struct ib_port_attr`) being filled by [`Driver::query_port`].
///
/// ib_core zeroes the structure before the call (`ib_query_port`), then overwrites
/// `subnet_prefix` from the GID table for RoCE ports.
#[repr(transparent)]
pub struct PortAttr(bindings::ib_port_attr);

attr_setters!(PortAttr {
    /// Size of the GID table.
    gid_tbl_len: i32,
    /// Port capability flags (`IB_PORT_*`).
    port_cap_flags: u32,
    /// Largest message, in bytes.
    max_msg_sz: u32,
    /// Size of the P_Key table.
    pkey_tbl_len: u16,
    /// Underlying link MTU, in bytes.
    phys_mtu: u32,
});

impl PortAttr {
    /// Sets the logical port state.
    pub fn state(&mut self, state: PortState) -> &mut Self {
        self.0.state = state as u32;
        self
    }

    /// Sets the physical port state.
    pub fn phys_state(&mut self, state: PhysState) -> &mut Self {
        self.0.phys_state = state as u8;
        self
    }

    /// Sets the largest supported path MTU.
    pub fn max_mtu(&mut self, mtu: Mtu) -> &mut Self {
        self.0.max_mtu = mtu as u32;
        self
    }

    /// Sets the active path MTU.
    pub fn active_mtu(&mut self, mtu: Mtu) -> &mut Self {
        self.0.active_mtu = mtu as u32;
        self
    }

    /// Sets speed and width from an [`EthSpeed`].
    pub fn eth_speed(&mut self, speed: EthSpeed) -> &mut Self {
        self.0.active_speed = speed.speed;
        self.0.active_width = speed.width;
        self
    }
}

/// Immutable port attributes (`struct ib_port_immutable`) being filled by
/// [`Driver::get_port_immutable`].
#[repr(transparent)]
pub struct PortImmutable(bindings::ib_port_immutable);

impl PortImmutable {
    /// Sets the core capabilities of the port.
    pub fn core_caps(&mut self, caps: CoreCaps) -> &mut Self {
        self.0.core_cap_flags = caps.0;
        self
    }

    /// Sets the P_Key table size.
    pub fn pkey_tbl_len(&mut self, len: i32) -> &mut Self {
        self.0.pkey_tbl_len = len;
        self
    }

    /// Sets the GID table size.
    pub fn gid_tbl_len(&mut self, len: i32) -> &mut Self {
        self.0.gid_tbl_len = len;
        self
    }

    /// Sets the MAD size to the standard management datagram size (`IB_MGMT_MAD_SIZE`).
    pub fn standard_mad_size(&mut self) -> &mut Self {
        self.0.max_mad_size = bindings::IB_MGMT_MAD_SIZE;
        self
    }
}

/// The default full-membership P_Key (`IB_DEFAULT_PKEY_FULL`).
pub const DEFAULT_PKEY_FULL: u16 = bindings::IB_DEFAULT_PKEY_FULL as u16;

/// Speed and width of an Ethernet port as IB encodes them (from `ib_get_eth_speed`).
#[derive(Clone, Copy)]
pub struct EthSpeed {
    speed: u16,
    width: u8,
}

/// The descriptor of one hardware counter (`struct rdma_stat_desc`): its name in
/// `rdma statistic` and sysfs (`hw_counters/`).
#[repr(transparent)]
pub struct StatDesc(bindings::rdma_stat_desc);

// SAFETY: The descriptor only points to `'static` immutable data.
unsafe impl Sync for StatDesc {}

impl StatDesc {
    /// A counter named `name`.
    pub const fn new(name: &'static CStr) -> Self {
        Self(bindings::rdma_stat_desc {
            name: crate::str::as_char_ptr_in_const_context(name),
            flags: 0,
            priv_: core::ptr::null(),
        })
    }
}

/// The operations of an RDMA driver: its `ib_device_ops`.
///
/// Only the hooks a driver implements are installed in the C table (`T::HAS_*`); ib_core treats
/// a missing hook as unsupported.
///
/// # Calling contexts
///
/// Unless stated otherwise, every hook runs in process context and may sleep. Hooks run only
/// while the device's data is alive: from [`UnregisteredDevice::register`] (which queries the
/// device and ports) until unregistration has finished calling hooks, before `dealloc_driver`.
#[vtable]
pub trait Driver: Sized + 'static {
    /// The module that owns the hooks (`ops.owner`).
    type OwnerModule: ModuleMetadata;

    /// The driver's data in each device, dropped when the device is released.
    type Data: Send + Sync;

    /// The driver's data in each user context.
    type UcontextData: Send + Sync;

    /// The driver id reported to user space, which selects the provider library.
    const DRIVER_ID: DriverId;

    /// The uverbs ABI version of that provider library.
    const UVERBS_ABI_VER: u32;

    /// Legacy uverbs write commands enabled beyond ib_core's default set.
    const USER_COMMANDS: UserCommands = UserCommands::NONE;

    /// The per-port hardware counters, in the order [`Driver::get_hw_stats`] fills them.
    const PORT_COUNTERS: &'static [StatDesc] = &[];

    /// Reports the device attributes (`query_device`).
    ///
    /// Called once at registration (its result is cached in `ib_device::attrs`) and for user
    /// queries. May sleep. Any driver-specific user input is rejected and any driver-specific
    /// output zeroed by the abstraction.
    fn query_device(dev: &Device<Self>, attr: &mut DeviceAttr) -> Result;

    /// Reports the attributes of port `port` (`query_port`, 1-based).
    ///
    /// May sleep; called with no ib_core lock that [`Device::eth_speed`] (RTNL) would invert.
    fn query_port(dev: &Device<Self>, port: u32, attr: &mut PortAttr) -> Result;

    /// Reports the immutable attributes of port `port` (`get_port_immutable`).
    ///
    /// Called once per port during registration, may sleep.
    fn get_port_immutable(dev: &Device<Self>, port: u32, imm: &mut PortImmutable) -> Result;

    /// Reports the link layer of port `port` (`get_link_layer`). Must not sleep: ib_core calls it
    /// from atomic contexts (e.g. under the GID cache lock).
    fn get_link_layer(_dev: &Device<Self>, _port: u32) -> LinkLayer {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Returns the P_Key at `index` of port `port` (`query_pkey`). May sleep.
    fn query_pkey(_dev: &Device<Self>, _port: u32, _index: u16) -> Result<u16> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Reads the per-port counters of port `port` into `values` (one per
    /// [`Driver::PORT_COUNTERS`] entry) (`get_hw_stats`).
    ///
    /// Implementing it installs `alloc_hw_port_stats` too. Runs in process context with the
    /// counter block's mutex held (sysfs reads, `rdma statistic`), may sleep.
    fn get_hw_stats(_dev: &Device<Self>, _port: u32, _values: &mut [u64]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates the driver data of a new user context (`alloc_ucontext`), for a process opening
    /// the device through uverbs. May sleep.
    ///
    /// Implementing it also installs `dealloc_ucontext` (dropping the data after
    /// [`Driver::dealloc_ucontext`]) and `disassociate_ucontext` (calling
    /// [`Driver::disassociate_ucontext`]): with the latter present, unregistration revokes user
    /// contexts instead of waiting for processes to close their files.
    ///
    /// `udata` carries the provider's request (the bytes after the core `get_context` command)
    /// and takes the driver's response; a driver that exchanges nothing calls
    /// [`Udata::expect_no_request`].
    fn alloc_ucontext(_dev: &Device<Self>, _udata: &Udata<'_>) -> Result<Self::UcontextData> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Called before a user context's data is dropped (`dealloc_ucontext`). May sleep.
    fn dealloc_ucontext(_dev: &Device<Self>, _ctx: &Self::UcontextData) {}

    /// Called when the device goes away while a process still has the context open
    /// (`disassociate_ucontext`): release whatever would keep the device from unregistering.
    /// ib_core itself zaps the user mappings made through `rdma_user_mmap_entry`. May sleep.
    fn disassociate_ucontext(_dev: &Device<Self>, _ctx: &Self::UcontextData) {}

    // Verbs objects (`kernel::rdma::{pd, cq, qp, srq, ah, mr, wr}`). Each object is allocated by
    // ib_core (MRs: by the abstraction) with the driver data after the C struct; the data is
    // initialised in place by the `create`/`alloc` hook's initialiser and dropped by the
    // matching destroy, after the optional driver hook of that name ran.

    /// The driver's data in each protection domain ([`Pd`]).
    type PdData: Send + Sync;

    /// The driver's data in each completion queue ([`Cq`]).
    type CqData: Send + Sync;

    /// The driver's data in each queue pair ([`Qp`]).
    type QpData: Send + Sync;

    /// The driver's data in each address handle ([`Ah`]).
    type AhData: Send + Sync;

    /// The driver's data in each shared receive queue ([`Srq`]).
    type SrqData: Send + Sync;

    /// The driver's data in each memory region ([`Mr`]).
    type MrData: Send + Sync;

    /// The driver's data in each memory window ([`Mw`]).
    type MwData: Send + Sync;

    /// Creates the data of a new protection domain (`alloc_pd`). Process context, may sleep.
    ///
    /// Implementing it installs `dealloc_pd`, which calls [`Driver::dealloc_pd`] and drops the
    /// data. Kernel PDs need either [`KernelCaps::LOCAL_DMA_LKEY`] or [`Driver::get_dma_mr`]
    /// (ib_core asks for a DMA MR otherwise); the abstraction refuses the PD with `EOPNOTSUPP`
    /// when neither is there, and likewise `IB_PD_UNSAFE_GLOBAL_RKEY` without `get_dma_mr`.
    fn alloc_pd(_dev: &Device<Self>, _origin: Origin) -> Result<impl PinInit<Self::PdData, Error>> {
        vtable_default::<Result<Self::PdData>>()
    }

    /// Called before a PD's data is dropped (`dealloc_pd`). Process context, may sleep. ib_core
    /// only deallocates a PD that no object uses any more.
    fn dealloc_pd(_pd: &Pd<Self>) {}

    /// Creates the data of a new completion queue (`create_cq`). Process context, may sleep.
    ///
    /// The abstraction sets the CQ's size (`ib_cq::cqe`) to the requested one before the call;
    /// [`NewCq::set_cqe`] reports a larger one. Implementing it installs `destroy_cq`, which
    /// calls [`Driver::destroy_cq`] and drops the data. For user CQs ([`Origin::User`]) the
    /// driver handles the driver-specific request and response ([`NewCq::udata`]).
    fn create_cq(_cq: &mut NewCq<'_, Self>) -> Result<impl PinInit<Self::CqData, Error>> {
        vtable_default::<Result<Self::CqData>>()
    }

    /// Resizes a user CQ to at least `cqe` entries (`resize_user_cq`), keeping the
    /// completions it holds; reports the new size with [`Cq::set_cqe`] and writes any
    /// driver-specific response (e.g. the new ring's `mmap` information) to `udata`. Process
    /// context, may sleep; uverbs serialises it with other commands on the CQ, not with
    /// completions arriving.
    fn resize_user_cq(_cq: &Cq<Self>, _cqe: u32, _udata: &Udata<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Called before a CQ's data is dropped (`destroy_cq`). Process context, may sleep. ib_core
    /// destroys a CQ only once no QP uses it; for kernel CQs it has stopped polling first.
    fn destroy_cq(_cq: &Cq<Self>) {}

    /// Moves up to `wc.capacity()` completions into `wc` (`poll_cq`).
    ///
    /// **Must not sleep**: consumers poll from softirq (`IB_POLL_SOFTIRQ`), from their
    /// completion handler, and with spinlocks held and IRQs disabled.
    fn poll_cq(_cq: &Cq<Self>, _wc: &mut WcArray<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Arms the CQ's completion notification (`req_notify_cq`).
    ///
    /// Returns whether completions may have been missed: `true` only when
    /// `notify.report_missed` is set and the CQ is not empty (then ib_core's consumer polls
    /// again instead of waiting for the handler). **Must not sleep** (same contexts as
    /// [`Driver::poll_cq`]).
    fn req_notify_cq(_cq: &Cq<Self>, _notify: CqNotify) -> Result<bool> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Sets the CQ's completion-event moderation (`modify_cq`): at most `cq_count`
    /// completions or `cq_period` microseconds between a completion and its event (user
    /// space's `ibv_modify_cq`, ib_core's `rdma_set_cq_moderation` and DIM). The driver reports
    /// its limits in [`DeviceAttr::cq_moderation_caps`]. Process context for user CQs; ib_core's
    /// DIM calls it from a work item.
    fn modify_cq(_cq: &Cq<Self>, _cq_count: u16, _cq_period: u16) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// The CQ's timer, armed by [`Cq::start_timer`], expired. Softirq context: must not sleep.
    /// A driver that never arms it need not implement it.
    fn cq_timer(_cq: &Cq<Self>) {}

    /// Creates the data of a new queue pair (`create_qp`). Process context, may sleep.
    ///
    /// The driver assigns the QP number ([`NewQp::set_qp_num`]; 1 for GSI, 0 for SMI) and
    /// reports the capabilities it granted ([`NewQp::set_cap`]). Implementing it installs
    /// `destroy_qp`, which calls [`Driver::destroy_qp`] and drops the data. For user QPs the
    /// driver handles the driver-specific request and response ([`NewQp::udata`]).
    fn create_qp(_qp: &mut NewQp<'_, Self>) -> Result<impl PinInit<Self::QpData, Error>> {
        vtable_default::<Result<Self::QpData>>()
    }

    /// Called before a QP's data is dropped (`destroy_qp`). Process context, may sleep.
    /// Completions naming the QP that are still in CQs should be removed here: consumers must
    /// not see a destroyed QP.
    fn destroy_qp(_qp: &Qp<Self>) {}

    /// Modifies a QP (`modify_qp`): only the attributes in `mask` are meaningful. Process
    /// context, may sleep. [`modify_is_ok`](crate::rdma::qp::modify_is_ok) checks a transition against the IB spec's table.
    fn modify_qp(_qp: &Qp<Self>, _attr: &QpAttr, _mask: QpAttrMask) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Reports a QP's attributes (`query_qp`); both outputs are zeroed before the call.
    /// Process context, may sleep (`rdma res show qp`, uverbs, ib_cm).
    fn query_qp(_qp: &Qp<Self>, _attr: &mut QpAttrOut, _init: &mut QpInitAttrOut) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Attaches a UD QP to the multicast group of `gid` (`attach_mcast`, `ibv_attach_mcast`):
    /// packets sent to `gid` are then delivered to it too. `lid` is 0 on RoCE. ib_core checks
    /// the QP type (UD) and that `gid` is a multicast GID; uverbs refuses a second attach of the
    /// same QP and group itself. Process context, may sleep. Kernel consumers detach before they
    /// destroy a QP; uverbs detaches a user QP's groups when it destroys the QP.
    fn attach_mcast(_qp: &Qp<Self>, _gid: &[u8; 16], _lid: u16) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Detaches a QP from the multicast group of `gid` (`detach_mcast`). Process context, may
    /// sleep. Implementing [`Driver::attach_mcast`] requires implementing this.
    fn detach_mcast(_qp: &Qp<Self>, _gid: &[u8; 16], _lid: u16) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Posts a chain of send work requests (`post_send`).
    ///
    /// **Must not sleep or allocate with `GFP_KERNEL`**: kernel consumers post with spinlocks
    /// held and IRQs disabled (ib_mad posts under a spinlock taken with `spin_lock_irqsave`).
    /// On error, report the first request not posted; the ones before it stay posted.
    fn post_send<'a>(
        _qp: &Qp<Self>,
        _wrs: SendWrList<'a, Self>,
    ) -> Result<(), PostError<SendWr<'a, Self>>> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Posts a chain of receive work requests (`post_recv`). **Must not sleep** (same contexts
    /// as [`Driver::post_send`]).
    fn post_recv<'a>(_qp: &Qp<Self>, _wrs: RecvWrList<'a>) -> Result<(), PostError<RecvWr<'a>>> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates the data of a new shared receive queue (`create_srq`). Process context, may
    /// sleep.
    ///
    /// Only basic SRQs reach the hook (the abstraction refuses XRC and tag-matching ones with
    /// `EOPNOTSUPP`). The driver reports the sizes it granted ([`NewSrq::set_attr`]).
    /// Implementing it installs `destroy_srq`, which calls [`Driver::destroy_srq`] and drops
    /// the data. For user SRQs the driver handles the driver-specific request and response
    /// ([`NewSrq::udata`]).
    fn create_srq(_srq: &mut NewSrq<'_, Self>) -> Result<impl PinInit<Self::SrqData, Error>> {
        vtable_default::<Result<Self::SrqData>>()
    }

    /// Called before an SRQ's data is dropped (`destroy_srq`). Process context, may sleep.
    /// ib_core destroys an SRQ only once no QP uses it.
    fn destroy_srq(_srq: &Srq<Self>) {}

    /// Modifies an SRQ (`modify_srq`): with [`SrqAttrMask::MAX_WR`] resizes it to at least
    /// `attr.max_wr` requests (keeping those posted), with [`SrqAttrMask::LIMIT`] arms the
    /// limit at `attr.srq_limit` (`attr.max_sge` reads 0: uverbs does not pass it); the driver
    /// writes the resulting values back into `attr`.
    /// `udata` is the system call's for a user SRQ (e.g. librxe's `rxe_modify_srq_cmd`, whose
    /// new ring information is written with [`Udata::write_user_at`]), `None` for a kernel
    /// caller. Process context, may sleep. uverbs does not serialise it with other
    /// `modify_srq` calls on the same SRQ (it looks the SRQ up for reading only), nor with
    /// receive work requests being taken.
    fn modify_srq(
        _srq: &Srq<Self>,
        _attr: &mut SrqAttr,
        _mask: SrqAttrMask,
        _udata: Option<&Udata<'_>>,
    ) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Reports an SRQ's sizes and current limit (`query_srq`). Process context, may sleep.
    fn query_srq(_srq: &Srq<Self>) -> Result<SrqAttr> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Posts a chain of receive work requests to an SRQ (`post_srq_recv`). **Must not
    /// sleep** (same contexts as [`Driver::post_recv`]: kernel consumers post with spinlocks
    /// held and IRQs disabled, and from their completion handlers). On error, report the
    /// first request not posted.
    fn post_srq_recv<'a>(
        _srq: &Srq<Self>,
        _wrs: RecvWrList<'a>,
    ) -> Result<(), PostError<RecvWr<'a>>> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates the data of a new kernel address handle (`create_ah`).
    ///
    /// **May be called in atomic context** (ib_cm, ib_sa and ib_mad create AHs under spinlocks):
    /// [`NewAh::may_sleep`] tells (`RDMA_CREATE_AH_SLEEPABLE`), and any allocation must use
    /// [`NewAh::gfp`]. ib_core allocated the object itself accordingly. Implementing it
    /// installs `destroy_ah`, which calls [`Driver::destroy_ah`] and drops the data.
    fn create_ah(_ah: &mut NewAh<'_, Self>) -> Result<impl PinInit<Self::AhData, Error>> {
        vtable_default::<Result<Self::AhData>>()
    }

    /// Creates the data of a new user address handle (`create_user_ah`, uverbs'
    /// `CREATE_AH`). Process context, may sleep; [`NewAh::udata`] is the system call's.
    /// Only installed together with [`Driver::create_ah`] (which provides `destroy_ah`);
    /// without it uverbs does not offer the command.
    fn create_user_ah(_ah: &mut NewAh<'_, Self>) -> Result<impl PinInit<Self::AhData, Error>> {
        vtable_default::<Result<Self::AhData>>()
    }

    /// Called before an AH's data is dropped (`destroy_ah`). May be in atomic context unless
    /// `may_sleep` (`RDMA_DESTROY_AH_SLEEPABLE`).
    fn destroy_ah(_ah: &Ah<Self>, _may_sleep: bool) {}

    /// Reports the address vector of an AH (`query_ah`). Any context (ib_mad calls it under a
    /// spinlock to match a response to its request).
    fn query_ah(_ah: &Ah<Self>) -> Result<RoceAhAttr> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates a DMA memory region of `pd` covering all of kernel memory (`get_dma_mr`), for
    /// `IB_PD_UNSAFE_GLOBAL_RKEY` PDs (and kernel PDs of a device without
    /// [`KernelCaps::LOCAL_DMA_LKEY`]). Process context, may sleep. Returns the region's keys
    /// and the initialiser of its data; the abstraction allocates the object.
    fn get_dma_mr(
        _pd: &Pd<Self>,
        _access: AccessFlags,
    ) -> Result<(MrKeys, impl PinInit<Self::MrData, Error>)> {
        vtable_default::<(MrKeys, Result<Self::MrData>)>()
    }

    /// Registers user memory as a memory region (`reg_user_mr`). Process context, may sleep.
    fn reg_user_mr(
        _pd: &Pd<Self>,
        _req: &UserMrRequest,
    ) -> Result<(MrKeys, impl PinInit<Self::MrData, Error>)> {
        vtable_default::<(MrKeys, Result<Self::MrData>)>()
    }

    /// Allocates a fast-register MR of `pd` (`alloc_mr`, kernel consumers only) able to hold
    /// `max_num_sg` pages; it becomes usable once a registration work request
    /// ([`super::wr::SendOp::RegMr`]) of pages mapped by [`Driver::map_mr_sg`] executes.
    /// Process context, may sleep.
    fn alloc_mr(
        _pd: &Pd<Self>,
        _mr_type: MrType,
        _max_num_sg: u32,
    ) -> Result<(MrKeys, impl PinInit<Self::MrData, Error>)> {
        vtable_default::<(MrKeys, Result<Self::MrData>)>()
    }

    /// Maps a scatter/gather list into the pages of a fast-register MR (`map_mr_sg`); a driver
    /// typically resets its page list and calls [`MrSgList::to_pages`], which calls
    /// [`Driver::mr_set_page`] per page. Returns the number of list entries mapped. Process
    /// context (consumers call it from any context that may not sleep as well: no sleeping).
    fn map_mr_sg(_mr: &Mr<Self>, _sg: MrSgList<'_, Self>) -> Result<u32> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Appends one page (of the MR's page size) to a fast-register MR's page list, for
    /// [`MrSgList::to_pages`]; fails when the list is full. Must not sleep.
    fn mr_set_page(_mr: &Mr<Self>, _page: MrPage) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Called before an MR's data is dropped and its object freed (`dereg_mr`). Process
    /// context, may sleep. An error keeps the MR (and its data) as it is and is returned to the
    /// caller (an MR that memory windows are bound to cannot go, `EBUSY`); ib_core retries a
    /// failed destruction when a process's objects are cleaned up, after destroying the rest.
    fn dereg_mr(_mr: &Mr<Self>) -> Result {
        Ok(())
    }

    /// Creates the data of a new memory window of `pd` (`alloc_mw`, user processes only),
    /// returning the window's initial R_Key. Process context, may sleep.
    ///
    /// Implementing it installs `dealloc_mw`, which calls [`Driver::dealloc_mw`] and drops the
    /// data. The initialiser should not fail: the abstraction has no hook to undo what
    /// `alloc_mw` did if it does.
    fn alloc_mw(_pd: &Pd<Self>, _ty: MwType) -> Result<(u32, impl PinInit<Self::MwData, Error>)> {
        vtable_default::<(u32, Result<Self::MwData>)>()
    }

    /// Called before a memory window's data is dropped (`dealloc_mw`). Process context, may
    /// sleep. The window may still be bound.
    fn dealloc_mw(_mw: &Mw<Self>) {}
}

/// The body of a default `#[vtable]` method returning `Result<impl ...>`: it names a concrete
/// type for the opaque return type and fails the build if it is ever called (the hook is not
/// installed unless the driver implements it).
fn vtable_default<R>() -> Result<R> {
    build_error!(VTABLE_DEFAULT_ERROR)
}

/// A typed RDMA device: the C `struct ib_device` followed by the driver's data.
///
/// # Invariants
///
/// - `ibdev` was allocated by `_ib_alloc_device` with the size of `Self`, and `data` is
///   initialised for as long as a `&Device<T>` exists (it is dropped in `dealloc_driver`, the
///   last driver callback, after which no reference is handed out).
/// - The ops of `ibdev` are `Adapter::<T>::OPS` once `data` is initialised.
#[repr(C)]
pub struct Device<T: Driver> {
    ibdev: Opaque<bindings::ib_device>,
    data: T::Data,
}

// SAFETY: `struct ib_device` may be used and released from any thread, and `T::Data` is `Send`.
unsafe impl<T: Driver> Send for Device<T> {}
// SAFETY: All `&self` methods are thread-safe (ib_core synchronises them), and `T::Data` is
// `Sync`.
unsafe impl<T: Driver> Sync for Device<T> {}

impl<T: Driver> Deref for Device<T> {
    type Target = T::Data;

    fn deref(&self) -> &T::Data {
        &self.data
    }
}

impl<T: Driver> Device<T> {
    /// Allocates a device in the network namespace of `netdev` with `ports` ports and
    /// initialises its driver data in place.
    ///
    /// In ib_core's shared namespace mode (the default) the device is created in `init_net`
    /// whatever `netdev`'s namespace; in exclusive mode it lives in `netdev`'s. May sleep.
    /// (`_ib_alloc_device`; the device is owned as an [`UnregisteredDevice`] until registered.)
    pub fn alloc(
        netdev: &NetDevice,
        ports: u32,
        data: impl PinInit<T::Data, Error>,
    ) -> Result<UnregisteredDevice<T>> {
        const {
            // `_ib_alloc_device` uses `kzalloc`, which guarantees `ARCH_KMALLOC_MINALIGN`
            // (the alignment of `u64`) whatever the size.
            assert!(align_of::<Self>() <= align_of::<u64>());
        };
        if ports == 0 {
            return Err(EINVAL);
        }
        // SAFETY: The size covers `Self`; the namespace of a device the caller holds stays valid
        // until registration completes (RTNL or the caller's reference keeps the device there
        // for the calls ib_core makes with it).
        let raw = unsafe { bindings::_ib_alloc_device(size_of::<Self>(), netdev.raw_net()) };
        let raw = NonNull::new(raw.cast::<Self>()).ok_or(ENOMEM)?;
        let ibdev = Opaque::cast_into(
            // SAFETY: `raw` is a valid allocation of `Self`.
            unsafe { &raw const (*raw.as_ptr()).ibdev },
        );

        // SAFETY: `raw` is valid and not yet shared; `data` is uninitialised memory that stays
        // pinned until `dealloc_driver` drops it.
        let init = unsafe { pin_init::raw_try_init(&raw mut (*raw.as_ptr()).data, data) };
        if let Err(e) = init {
            // SAFETY: No ops are set, so `ib_dealloc_device` does not call `dealloc_driver`
            // and the uninitialised data is not dropped; the device was never registered.
            unsafe { bindings::ib_dealloc_device(ibdev) };
            return Err(e);
        }

        // SAFETY: The device is private to this function; `OPS` is a valid table whose hooks
        // expect `Self`, and `ib_set_device_ops` copies it. Setting the port count before
        // `ib_device_set_netdev` is what ib_core expects.
        unsafe {
            bindings::ib_set_device_ops(ibdev, &Adapter::<T>::OPS);
            (*ibdev).node_type = bindings::RDMA_NODE_IB_CA as u8;
            (*ibdev).phys_port_cnt = ports;
            (*ibdev).num_comp_vectors = 1;
            (*ibdev).uverbs_cmd_mask |= T::USER_COMMANDS.0;
        }

        // INVARIANT: Allocated with our size, data initialised, ops installed; not registered.
        Ok(UnregisteredDevice {
            dev: raw,
            _p: PhantomData,
        })
    }

    /// Returns the raw `struct ib_device` pointer.
    pub(crate) fn as_raw(&self) -> *mut bindings::ib_device {
        self.ibdev.get()
    }

    /// # Safety
    ///
    /// `ptr` must point to the `ib_device` of a `Device<T>` whose data is initialised and stays
    /// so for `'a` (e.g. a driver callback's argument).
    pub(super) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_device) -> &'a Self {
        // SAFETY: `ibdev` is the first field of the `repr(C)` `Self`, so the container is at the
        // same address; validity is guaranteed by the caller.
        unsafe { &*crate::container_of!(Opaque::cast_from(ptr), Self, ibdev) }
    }

    /// The device name (e.g. `mr0`), copied into `buf` and returned as a `&str`.
    pub fn name<'a>(&self, buf: &'a mut [u8; bindings::IB_DEVICE_NAME_MAX as usize]) -> &'a str {
        // SAFETY: `name` is an inline array of the valid device; it is set before registration
        // and only changed by `rdma dev set NAME name` under ib_core's locks: a racing rename
        // yields a mix of bytes, still a string within the array.
        let name = unsafe { &raw const (*self.as_raw()).name };
        let mut len = 0;
        while len < buf.len() - 1 {
            // SAFETY: `len < IB_DEVICE_NAME_MAX`, within the array.
            let c = unsafe { core::ptr::read_volatile(name.cast::<u8>().add(len)) };
            if c == 0 {
                break;
            }
            buf[len] = c;
            len += 1;
        }
        core::str::from_utf8(&buf[..len]).unwrap_or("?")
    }

    /// Returns the network device bound to `port` (`ib_device_get_netdev`), if any.
    ///
    /// Not from softirq or hard IRQ context: ib_core takes the port's `netdev_lock` with a plain
    /// spinlock, which process context holds with softirqs enabled (a driver's transmit path
    /// that runs in softirq keeps its own reference, read under RCU).
    pub fn netdev(&self, port: u32) -> Option<ARef<NetDevice>> {
        // SAFETY: The device is valid; the function returns a held reference or null.
        unsafe { NetDevice::from_raw_owned(bindings::ib_device_get_netdev(self.as_raw(), port)) }
    }

    /// Queries the speed and width of an Ethernet port from its netdev (`ib_get_eth_speed`).
    ///
    /// Takes RTNL: must not be called from a netdev notifier or with ib_core locks held that
    /// RTNL nests in; fine from [`Driver::query_port`].
    pub fn eth_speed(&self, port: u32) -> Result<EthSpeed> {
        let mut speed = EthSpeed { speed: 0, width: 0 };
        // SAFETY: The device is valid, the out pointers point to locals.
        to_result(unsafe {
            bindings::ib_get_eth_speed(self.as_raw(), port, &mut speed.speed, &mut speed.width)
        })?;
        Ok(speed)
    }

    /// Reports the port state of `netdev`'s port to ib_core consumers (`IB_EVENT_PORT_ACTIVE`
    /// or `IB_EVENT_PORT_ERR`, only when the state changed; `ib_dispatch_port_state_event`).
    ///
    /// ib_core's own netdev notifier already does this on `NETDEV_UP`, `NETDEV_DOWN` and
    /// `NETDEV_CHANGE` for every device with a netdev; drivers call it for other triggers. Runs
    /// in any process context (takes a spinning lock with IRQs disabled, and the event handler
    /// semaphore).
    pub fn dispatch_port_state_event(&self, netdev: &NetDevice) {
        // SAFETY: Both devices are valid; the function ignores a netdev not bound to a port.
        unsafe { bindings::ib_dispatch_port_state_event(self.as_raw(), netdev.as_raw()) };
    }

    /// Finds the registered device of driver `T` bound to `netdev` and takes a registration
    /// reference on it (`ib_device_get_by_netdev`).
    ///
    /// Devices of other drivers with the same driver id are not returned (their
    /// `dealloc_driver` hook differs). May be called from any context, including a netdev
    /// notifier and softirq receive paths: the lookup runs under RCU and the reference is a
    /// `refcount_t` whose release only signals a completion.
    pub fn find_by_netdev(netdev: &NetDevice) -> Option<DeviceRef<T>> {
        // SAFETY: `netdev` is valid; a non-null result carries a registration reference.
        let raw = unsafe { bindings::ib_device_get_by_netdev(netdev.as_raw(), T::DRIVER_ID.0) };
        if raw.is_null() {
            return None;
        }
        // SAFETY: `raw` is a registered device (we hold a registration reference).
        let dealloc = unsafe { (*raw).ops.dealloc_driver };
        let ours = Adapter::<T>::dealloc_driver_callback as *const () as usize;
        if dealloc.map(|f| f as *const () as usize) != Some(ours) {
            // SAFETY: Releases the reference taken above.
            unsafe { bindings::ib_device_put(raw) };
            return None;
        }
        // INVARIANT: `raw` carries the `dealloc_driver` hook of `Adapter::<T>`, which is only
        // installed by `Device::<T>::alloc`, so it is embedded in a `Device<T>`; we own a
        // registration reference.
        Some(DeviceRef {
            // SAFETY: See above; `ibdev` is at offset 0 of `Device<T>`.
            dev: unsafe { NonNull::from(Self::from_raw(raw)) },
        })
    }
}

/// Unregisters every device whose driver id is `T::DRIVER_ID` and waits for each to be released
/// (`ib_unregister_driver`), including queued unregistrations.
///
/// Call it in module exit after the last path that creates devices is closed, so that no hook
/// of the module runs afterwards. Devices of *other* drivers with the same driver id would be
/// unregistered too: a driver sharing a driver id must be exclusive with its twin (Kconfig).
/// May sleep for as long as unregistration takes.
pub fn unregister_driver<T: Driver>() {
    // SAFETY: Plain call; ib_core synchronises with concurrent (un)registration.
    unsafe { bindings::ib_unregister_driver(T::DRIVER_ID.0) };
}

/// A device allocated by [`Device::alloc`] and not yet registered.
///
/// Dropping it frees the device (`ib_dealloc_device`, which drops the driver data).
///
/// # Invariants
///
/// `dev` is a valid `Device<T>` with initialised data and installed ops, owned exclusively by
/// this value and not registered.
pub struct UnregisteredDevice<T: Driver> {
    dev: NonNull<Device<T>>,
    _p: PhantomData<Device<T>>,
}

// SAFETY: The unregistered device may be moved to and freed on any thread.
unsafe impl<T: Driver> Send for UnregisteredDevice<T> {}

impl<T: Driver> Deref for UnregisteredDevice<T> {
    type Target = Device<T>;

    fn deref(&self) -> &Device<T> {
        // SAFETY: Valid by the type invariant.
        unsafe { self.dev.as_ref() }
    }
}

impl<T: Driver> UnregisteredDevice<T> {
    fn raw(&self) -> *mut bindings::ib_device {
        self.as_raw()
    }

    /// Binds `netdev` to port `port` (`ib_device_set_netdev`): ib_core then fills the RoCE GID
    /// table from its addresses and follows its state. The device keeps a reference on
    /// `netdev` until it is unregistered. May sleep.
    pub fn set_netdev(&mut self, netdev: &NetDevice, port: u32) -> Result {
        // SAFETY: The device is valid and unregistered (type invariant), the netdev is valid.
        to_result(unsafe { bindings::ib_device_set_netdev(self.raw(), netdev.as_raw(), port) })
    }

    /// Sets the node GUID (network byte order, as the C field).
    pub fn set_node_guid(&mut self, guid_be: u64) {
        // SAFETY: The device is exclusively ours (type invariant).
        unsafe { (*self.raw()).node_guid = guid_be };
    }

    /// Sets the node description (truncated to 63 bytes).
    pub fn set_node_desc(&mut self, desc: &str) {
        // SAFETY: The device is exclusively ours (type invariant).
        let dst = unsafe { &mut (*self.raw()).node_desc };
        dst.fill(0);
        let max = dst.len() - 1;
        for (d, s) in dst.iter_mut().zip(desc.bytes().take(max)) {
            *d = s as c_char;
        }
    }

    /// Sets the number of completion vectors (at least 1).
    pub fn set_num_comp_vectors(&mut self, n: u32) -> Result {
        let n = i32::try_from(n).map_err(|_| EINVAL)?;
        if n == 0 {
            return Err(EINVAL);
        }
        // SAFETY: The device is exclusively ours (type invariant).
        unsafe { (*self.raw()).num_comp_vectors = n };
        Ok(())
    }

    /// Registers the device under `name` with no DMA device (ib_core uses virtual addresses in
    /// SGEs), handing it over to ib_core.
    ///
    /// Fails with ib_core's error (e.g. `ENFILE` for a name taken in the namespace), in which
    /// case the device is freed. On success the device may be unregistered (and freed) by
    /// another thread as soon as this returns. May sleep; calls the query hooks.
    pub fn register(self, name: &CStr) -> Result {
        let raw = self.raw();
        // SAFETY: The device is valid and unregistered; `name` is a valid C string.
        let ret =
            unsafe { bindings::ib_register_device(raw, name.as_char_ptr(), core::ptr::null_mut()) };
        if ret != 0 {
            // `self` drops here: on failure the caller must `ib_dealloc_device`.
            return Err(Error::from_errno(ret));
        }
        // Ownership passed to ib_core, which calls `dealloc_driver` when unregistering.
        core::mem::forget(self);
        Ok(())
    }
}

impl<T: Driver> Drop for UnregisteredDevice<T> {
    fn drop(&mut self) {
        // SAFETY: The device is ours and not registered (type invariant); `ib_dealloc_device`
        // calls `dealloc_driver`, dropping the data, then releases the initial reference.
        unsafe { bindings::ib_dealloc_device(self.raw()) };
    }
}

/// A registration reference on a registered [`Device<T>`] (`ib_device_try_get`/`ib_device_put`).
///
/// While it exists the device stays registered and its data alive. Unregistration waits for it,
/// so it is meant to be short-lived: never keep one across a wait for unregistration (e.g. in a
/// workqueue the unregistration flushes), and never store it.
///
/// # Invariants
///
/// `dev` is a registered `Device<T>` on which this value owns one registration reference.
pub struct DeviceRef<T: Driver> {
    dev: NonNull<Device<T>>,
}

// SAFETY: The reference may be released on any thread.
unsafe impl<T: Driver> Send for DeviceRef<T> {}
// SAFETY: `Device<T>` is `Sync`.
unsafe impl<T: Driver> Sync for DeviceRef<T> {}

impl<T: Driver> Deref for DeviceRef<T> {
    type Target = Device<T>;

    fn deref(&self) -> &Device<T> {
        // SAFETY: Registered with a reference held: valid, data alive.
        unsafe { self.dev.as_ref() }
    }
}

impl<T: Driver> Device<T> {
    /// Takes a registration reference, if the device is still registered (`ib_device_try_get`).
    pub fn try_get(&self) -> Option<DeviceRef<T>> {
        // SAFETY: The device is valid.
        if unsafe { bindings::ib_device_try_get(self.as_raw()) } {
            // INVARIANT: The reference was just taken.
            Some(DeviceRef {
                dev: NonNull::from(self),
            })
        } else {
            None
        }
    }
}

impl<T: Driver> DeviceRef<T> {
    /// Schedules unregistration of the device on ib_core's unregistration workqueue
    /// (`ib_unregister_device_queued`) and drops this reference; the device is released once
    /// every registration reference is gone.
    ///
    /// Safe from any process context, including with RTNL held (netdev notifiers), where the
    /// synchronous unregistration would deadlock. [`unregister_driver`] waits for it.
    pub fn unregister_queued(self) {
        // SAFETY: We hold a registration reference (refcount non-zero) and the ops carry
        // `dealloc_driver`, as the function requires.
        unsafe { bindings::ib_unregister_device_queued(self.as_raw()) };
    }
}

impl<T: Driver> Drop for DeviceRef<T> {
    fn drop(&mut self) {
        // SAFETY: We own one registration reference (type invariant).
        unsafe { bindings::ib_device_put(self.as_raw()) };
    }
}

/// The part of every user context of this abstraction that does not depend on the driver:
/// `struct ib_ucontext` and the list of its mappings (`kernel::rdma::mmap`).
#[repr(C)]
struct UcontextHead {
    ibuc: Opaque<bindings::ib_ucontext>,
    maps: Arc<ContextMaps>,
}

/// A user context (`struct ib_ucontext`, [`UcontextHead`]) followed by the driver's data.
///
/// # Invariants
///
/// Allocated by ib_core with `size_ib_ucontext == size_of::<Self>()`; `head.maps` and `data`
/// are initialised between a successful `alloc_ucontext` and `dealloc_ucontext`.
#[repr(C)]
struct Ucontext<T: Driver> {
    head: UcontextHead,
    data: T::UcontextData,
}

/// The mapping list of the user context `ibuc`.
///
/// # Safety
///
/// `ibuc` is a user context of a device of this abstraction (of some driver `T` with
/// `alloc_ucontext`) set up by `alloc_ucontext_callback` and not deallocated for `'a`.
pub(super) unsafe fn ucontext_maps<'a>(ibuc: *mut bindings::ib_ucontext) -> &'a Arc<ContextMaps> {
    // SAFETY: Every such context is a `Ucontext<T>`, which starts with a `UcontextHead` whose
    // `maps` is initialised until `dealloc_ucontext` (type invariant, function requirements).
    unsafe { &(*crate::container_of!(Opaque::cast_from(ibuc), UcontextHead, ibuc)).maps }
}

/// The `ib_device_ops` adapters of driver `T`.
pub(super) struct Adapter<T: Driver>(PhantomData<T>);

impl<T: Driver> Adapter<T> {
    const OPS: bindings::ib_device_ops = {
        const {
            assert!(align_of::<Ucontext<T>>() <= align_of::<u64>());
        };
        let mut ops: bindings::ib_device_ops = pin_init::zeroed();
        ops.owner = this_module::<T::OwnerModule>().as_ptr();
        ops.driver_id = T::DRIVER_ID.0;
        ops.uverbs_abi_ver = T::UVERBS_ABI_VER;
        ops.dealloc_driver = Some(Self::dealloc_driver_callback);
        ops.query_device = Some(Self::query_device_callback);
        ops.query_port = Some(Self::query_port_callback);
        ops.get_port_immutable = Some(Self::get_port_immutable_callback);
        ops.get_link_layer = if T::HAS_GET_LINK_LAYER {
            Some(Self::get_link_layer_callback)
        } else {
            None
        };
        ops.query_pkey = if T::HAS_QUERY_PKEY {
            Some(Self::query_pkey_callback)
        } else {
            None
        };
        if T::HAS_GET_HW_STATS {
            assert!(!T::PORT_COUNTERS.is_empty() && T::PORT_COUNTERS.len() <= i32::MAX as usize);
            ops.alloc_hw_port_stats = Some(Self::alloc_hw_port_stats_callback);
            ops.get_hw_stats = Some(Self::get_hw_stats_callback);
        }
        if T::HAS_ALLOC_UCONTEXT {
            ops.alloc_ucontext = Some(Self::alloc_ucontext_callback);
            ops.dealloc_ucontext = Some(Self::dealloc_ucontext_callback);
            ops.disassociate_ucontext = Some(Self::disassociate_ucontext_callback);
            ops.size_ib_ucontext = size_of::<Ucontext<T>>();
            // Queue memory shared with processes (`kernel::rdma::mmap`): every mmap entry of
            // the device is made by `UserMapping`.
            ops.mmap = Some(super::mmap::mmap_callback);
            ops.mmap_free = Some(super::mmap::mmap_free_callback);
        }
        Self::fill_verbs_ops(&mut ops);
        ops
    };

    /// # Safety
    ///
    /// Called by ib_core once, as the last hook, for a device made by `Device::<T>::alloc`.
    unsafe extern "C" fn dealloc_driver_callback(ibdev: *mut bindings::ib_device) {
        // SAFETY: `ibdev` is embedded in a `Device<T>` whose data is initialised (ops are only
        // installed after initialisation); no hook runs after this one and no `&Device<T>` is
        // handed out any more, so the data can be dropped in place.
        unsafe {
            let dev = crate::container_of!(Opaque::cast_from(ibdev), Device<T>, ibdev).cast_mut();
            core::ptr::drop_in_place(&raw mut (*dev).data);
        }
    }

    /// # Safety
    ///
    /// Called by ib_core with a device of this driver and valid `attr` (and `udata` or null).
    unsafe extern "C" fn query_device_callback(
        ibdev: *mut bindings::ib_device,
        attr: *mut bindings::ib_device_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `udata` is null or the system call's valid udata.
            to_result(unsafe { bindings::ib_no_udata_io(udata) })?;
            // SAFETY: Hooks run only while the data is alive; `attr` is a valid, exclusive
            // pointer for the call and `DeviceAttr` is `repr(transparent)`.
            let (dev, attr) = unsafe { (Device::<T>::from_raw(ibdev), &mut *attr.cast()) };
            T::query_device(dev, attr)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by ib_core with a device of this driver and a valid `attr`.
    unsafe extern "C" fn query_port_callback(
        ibdev: *mut bindings::ib_device,
        port: u32,
        attr: *mut bindings::ib_port_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As in `query_device_callback`.
            let (dev, attr) = unsafe { (Device::<T>::from_raw(ibdev), &mut *attr.cast()) };
            T::query_port(dev, port, attr)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by ib_core with a device of this driver and a valid `imm`.
    unsafe extern "C" fn get_port_immutable_callback(
        ibdev: *mut bindings::ib_device,
        port: u32,
        imm: *mut bindings::ib_port_immutable,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As in `query_device_callback`.
            let (dev, imm) = unsafe { (Device::<T>::from_raw(ibdev), &mut *imm.cast()) };
            T::get_port_immutable(dev, port, imm)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by ib_core with a device of this driver.
    unsafe extern "C" fn get_link_layer_callback(
        ibdev: *mut bindings::ib_device,
        port: u32,
    ) -> bindings::rdma_link_layer {
        // SAFETY: Hooks run only while the data is alive.
        let dev = unsafe { Device::<T>::from_raw(ibdev) };
        bindings::rdma_link_layer(T::get_link_layer(dev, port) as u32)
    }

    /// # Safety
    ///
    /// Called by ib_core with a device of this driver and a valid `pkey`.
    unsafe extern "C" fn query_pkey_callback(
        ibdev: *mut bindings::ib_device,
        port: u32,
        index: u16,
        pkey: *mut u16,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Hooks run only while the data is alive.
            let dev = unsafe { Device::<T>::from_raw(ibdev) };
            let value = T::query_pkey(dev, port, index)?;
            // SAFETY: `pkey` is valid for writes for the call.
            unsafe { pkey.write(value) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by ib_core with a device of this driver.
    unsafe extern "C" fn alloc_hw_port_stats_callback(
        _ibdev: *mut bindings::ib_device,
        _port: u32,
    ) -> *mut bindings::rdma_hw_stats {
        // SAFETY: The descriptors are `'static` and their number fits `c_int` (checked when
        // `OPS` is built); ib_core frees the block with `rdma_free_hw_stats_struct`.
        unsafe {
            bindings::rdma_alloc_hw_stats_struct(
                T::PORT_COUNTERS.as_ptr().cast(),
                T::PORT_COUNTERS.len() as c_int,
                bindings::RDMA_HW_STATS_DEFAULT_LIFESPAN as c_ulong,
            )
        }
    }

    /// # Safety
    ///
    /// Called by ib_core with a device of this driver and a counter block made by
    /// `alloc_hw_port_stats_callback`, whose mutex it holds.
    unsafe extern "C" fn get_hw_stats_callback(
        ibdev: *mut bindings::ib_device,
        stats: *mut bindings::rdma_hw_stats,
        port: u32,
        _index: c_int,
    ) -> c_int {
        from_result(|| {
            if stats.is_null() || port == 0 {
                return Err(EINVAL);
            }
            // SAFETY: Hooks run only while the data is alive.
            let dev = unsafe { Device::<T>::from_raw(ibdev) };
            // SAFETY: `stats` is valid and its `value` array holds `num_counters` entries;
            // ib_core's mutex on the block makes the access exclusive.
            let values = unsafe {
                let n = usize::try_from((*stats).num_counters).map_err(|_| EINVAL)?;
                core::slice::from_raw_parts_mut((&raw mut (*stats).value).cast::<u64>(), n)
            };
            T::get_hw_stats(dev, port, values)?;
            // All counters were updated, whatever `index` asked for.
            Ok(values.len() as c_int)
        })
    }

    /// # Safety
    ///
    /// `ibuc` points to a zeroed `Ucontext<T>` allocation whose `device` is a device of this
    /// driver; `udata` is the system call's.
    unsafe extern "C" fn alloc_ucontext_callback(
        ibuc: *mut bindings::ib_ucontext,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `udata` is the system call's valid `driver_udata` for this call (ib_core
            // allocates user contexts only from uverbs' get_context).
            let udata = unsafe { Udata::from_raw(udata) }.ok_or(EINVAL)?;
            // SAFETY: `device` was set by ib_core to a live device of this driver.
            let dev = unsafe { Device::<T>::from_raw((*ibuc).device) };
            let maps = ContextMaps::new()?;
            let data = T::alloc_ucontext(dev, &udata)?;
            // SAFETY: The allocation is `size_of::<Ucontext<T>>()` bytes (`size_ib_ucontext`)
            // and `ibuc` is its first field; `maps` and `data` are uninitialised until now.
            // INVARIANT: Both are initialised from here to `dealloc_ucontext`.
            unsafe {
                let uc = crate::container_of!(Opaque::cast_from(ibuc), Ucontext<T>, head.ibuc)
                    .cast_mut();
                (&raw mut (*uc).head.maps).write(maps);
                (&raw mut (*uc).data).write(data);
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibuc` was successfully set up by `alloc_ucontext_callback` and is not used afterwards.
    unsafe extern "C" fn dealloc_ucontext_callback(ibuc: *mut bindings::ib_ucontext) {
        // SAFETY: By the function's requirements `maps` and the data are initialised, and
        // ib_core frees the memory after this call without touching the driver part again. It
        // destroyed the context's objects before: mappings their data still holds (kept beyond
        // the object) are removed here, while the context exists, as ib_core expects.
        unsafe {
            let uc =
                crate::container_of!(Opaque::cast_from(ibuc), Ucontext<T>, head.ibuc).cast_mut();
            let dev = Device::<T>::from_raw((*ibuc).device);
            T::dealloc_ucontext(dev, &(*uc).data);
            core::ptr::drop_in_place(&raw mut (*uc).data);
            (*uc).head.maps.revoke_all();
            core::ptr::drop_in_place(&raw mut (*uc).head.maps);
        }
    }

    /// # Safety
    ///
    /// `ibuc` was successfully set up by `alloc_ucontext_callback` and not yet deallocated.
    unsafe extern "C" fn disassociate_ucontext_callback(ibuc: *mut bindings::ib_ucontext) {
        // SAFETY: By the function's requirements the data is initialised.
        unsafe {
            let uc = crate::container_of!(Opaque::cast_from(ibuc), Ucontext<T>, head.ibuc);
            let dev = Device::<T>::from_raw((*ibuc).device);
            T::disassociate_ucontext(dev, &(*uc).data);
        }
    }
}

impl<T: Driver> Adapter<T> {
    /// Installs the verbs-object hooks the driver implements, with the object sizes ib_core
    /// allocates for them.
    const fn fill_verbs_ops(ops: &mut bindings::ib_device_ops) {
        // ib_core allocates the objects with `kzalloc`, which guarantees the alignment of `u64`.
        assert!(align_of::<Pd<T>>() <= align_of::<u64>());
        assert!(align_of::<Cq<T>>() <= align_of::<u64>());
        assert!(align_of::<Qp<T>>() <= align_of::<u64>());
        assert!(align_of::<Ah<T>>() <= align_of::<u64>());
        assert!(align_of::<Srq<T>>() <= align_of::<u64>());
        assert!(align_of::<Mw<T>>() <= align_of::<u64>());
        if T::HAS_ALLOC_PD {
            ops.alloc_pd = Some(Self::alloc_pd_callback);
            ops.dealloc_pd = Some(Self::dealloc_pd_callback);
            ops.size_ib_pd = size_of::<Pd<T>>();
        }
        if T::HAS_CREATE_CQ {
            ops.create_cq = Some(Self::create_cq_callback);
            ops.destroy_cq = Some(Self::destroy_cq_callback);
            ops.size_ib_cq = size_of::<Cq<T>>();
        }
        if T::HAS_POLL_CQ {
            ops.poll_cq = Some(Self::poll_cq_callback);
        }
        if T::HAS_RESIZE_USER_CQ {
            ops.resize_user_cq = Some(Self::resize_user_cq_callback);
        }
        if T::HAS_REQ_NOTIFY_CQ {
            ops.req_notify_cq = Some(Self::req_notify_cq_callback);
        }
        if T::HAS_MODIFY_CQ {
            ops.modify_cq = Some(Self::modify_cq_callback);
        }
        if T::HAS_CREATE_QP {
            ops.create_qp = Some(Self::create_qp_callback);
            ops.destroy_qp = Some(Self::destroy_qp_callback);
            ops.size_ib_qp = size_of::<Qp<T>>();
        }
        if T::HAS_MODIFY_QP {
            ops.modify_qp = Some(Self::modify_qp_callback);
        }
        if T::HAS_QUERY_QP {
            ops.query_qp = Some(Self::query_qp_callback);
        }
        if T::HAS_ATTACH_MCAST {
            assert!(T::HAS_DETACH_MCAST, "attach_mcast needs detach_mcast");
            ops.attach_mcast = Some(Self::attach_mcast_callback);
            ops.detach_mcast = Some(Self::detach_mcast_callback);
        }
        if T::HAS_POST_SEND {
            ops.post_send = Some(Self::post_send_callback);
        }
        if T::HAS_POST_RECV {
            ops.post_recv = Some(Self::post_recv_callback);
        }
        if T::HAS_CREATE_SRQ {
            ops.create_srq = Some(Self::create_srq_callback);
            ops.destroy_srq = Some(Self::destroy_srq_callback);
            ops.size_ib_srq = size_of::<Srq<T>>();
        }
        if T::HAS_MODIFY_SRQ {
            ops.modify_srq = Some(Self::modify_srq_callback);
        }
        if T::HAS_QUERY_SRQ {
            ops.query_srq = Some(Self::query_srq_callback);
        }
        if T::HAS_POST_SRQ_RECV {
            ops.post_srq_recv = Some(Self::post_srq_recv_callback);
        }
        if T::HAS_CREATE_AH {
            ops.create_ah = Some(Self::create_ah_callback);
            ops.destroy_ah = Some(Self::destroy_ah_callback);
            ops.size_ib_ah = size_of::<Ah<T>>();
            if T::HAS_CREATE_USER_AH {
                ops.create_user_ah = Some(Self::create_user_ah_callback);
            }
        }
        if T::HAS_QUERY_AH {
            ops.query_ah = Some(Ah::<T>::query_ah_callback);
        }
        if T::HAS_GET_DMA_MR {
            ops.get_dma_mr = Some(Self::get_dma_mr_callback);
        }
        if T::HAS_REG_USER_MR {
            ops.reg_user_mr = Some(Self::reg_user_mr_callback);
        }
        if T::HAS_ALLOC_MR {
            ops.alloc_mr = Some(Self::alloc_mr_callback);
        }
        if T::HAS_MAP_MR_SG {
            ops.map_mr_sg = Some(Self::map_mr_sg_callback);
        }
        if T::HAS_GET_DMA_MR || T::HAS_REG_USER_MR || T::HAS_ALLOC_MR {
            ops.dereg_mr = Some(Self::dereg_mr_callback);
        }
        if T::HAS_ALLOC_MW {
            ops.alloc_mw = Some(Self::alloc_mw_callback);
            ops.dealloc_mw = Some(Self::dealloc_mw_callback);
            ops.size_ib_mw = size_of::<Mw<T>>();
        }
    }
}
