// SPDX-License-Identifier: GPL-2.0

//! Network devices: references and the netdev notifier chain.
//!
//! C header: [`include/linux/netdevice.h`](srctree/include/linux/netdevice.h)

use crate::{
    bindings,
    error::to_result,
    net::{namespace::Net, udp_tunnel::IpAddr},
    prelude::*,
    sync::aref::{
        ARef,
        AlwaysRefCounted, //
    },
    types::Opaque, //
};
use core::{
    marker::PhantomData,
    ptr::NonNull, //
};

/// A network device (`struct net_device`).
///
/// Instances are only ever reached by reference: `&NetDevice` for the duration of a callback the
/// C side calls with a device it keeps alive, or [`ARef<NetDevice>`] for a counted reference
/// (`dev_hold`/`dev_put`, untracked).
///
/// A reference keeps the `struct net_device` allocated and delays the completion of its
/// unregistration (`netdev_wait_allrefs`): owners of an [`ARef<NetDevice>`] must drop it when
/// they learn about [`NetdevEvent::Unregister`].
///
/// # Invariants
///
/// `self.0` is a valid, initialised `struct net_device` whose reference count is non-zero for as
/// long as a `&NetDevice` exists.
#[repr(transparent)]
pub struct NetDevice(Opaque<bindings::net_device>);

// SAFETY: `struct net_device` may be referenced and released from any thread; the fields this
// type reads are either immutable after registration or read with `READ_ONCE` semantics.
unsafe impl Send for NetDevice {}
// SAFETY: See `Send`; every `&self` method is safe to call concurrently.
unsafe impl Sync for NetDevice {}

impl NetDevice {
    /// Creates a reference to a [`NetDevice`] from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a valid `struct net_device` whose reference count stays non-zero for
    /// the lifetime `'a`.
    pub unsafe fn from_raw<'a>(ptr: *mut bindings::net_device) -> &'a Self {
        // SAFETY: `NetDevice` is `repr(transparent)` over `Opaque<net_device>`, and the caller
        // guarantees validity for `'a`.
        unsafe { &*ptr.cast() }
    }

    /// Takes ownership of one reference the C side handed over (e.g. from `dev_get_by_name` or
    /// `ib_device_get_netdev`), or returns `None` for a null pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must be null or point to a valid `struct net_device` on which the caller owns one
    /// untracked reference (`dev_hold`), which the returned [`ARef`] takes over.
    pub unsafe fn from_raw_owned(ptr: *mut bindings::net_device) -> Option<ARef<Self>> {
        let ptr = NonNull::new(ptr.cast::<Self>())?;
        // SAFETY: The caller hands over one reference, which `ARef` now owns.
        Some(unsafe { ARef::from_raw(ptr) })
    }

    /// Returns the raw `struct net_device` pointer.
    pub(crate) fn as_raw(&self) -> *mut bindings::net_device {
        self.0.get()
    }

    /// A counted reference to the namespace the device is in now, or `None` if that namespace
    /// is being dismantled. (A device may move between namespaces under RTNL; the reference
    /// keeps the namespace it was in alive, whatever happens to the device.)
    pub fn net(&self) -> Option<ARef<Net>> {
        // SAFETY: The device is valid; the helper reads its namespace under RCU and takes a
        // reference only if the namespace's count is not already zero.
        let net = unsafe { bindings::dev_maybe_get_net(self.as_raw()) };
        // SAFETY: A non-null result carries one reference for us.
        NonNull::new(net).map(|n| unsafe { ARef::from_raw(n.cast::<Net>()) })
    }

    /// The interface index (`ifindex`), unique within the device's network namespace.
    pub fn ifindex(&self) -> i32 {
        // SAFETY: `ifindex` is set before registration and never changes afterwards; the type
        // invariant guarantees that the device is valid.
        unsafe { (*self.as_raw()).ifindex }
    }

    /// The current MTU in bytes.
    ///
    /// The MTU may change at any time (`NETDEV_CHANGEMTU` follows); the value is read once.
    pub fn mtu(&self) -> u32 {
        // SAFETY: The device is valid by the type invariant. `mtu` is written under RTNL and
        // read locklessly with `READ_ONCE` by the C side too; a volatile read is Rust's
        // equivalent.
        unsafe { core::ptr::read_volatile(&raw const (*self.as_raw()).mtu) }
    }

    /// The link speed in Mbit/s its driver reports through ethtool (`get_link_ksettings`), or
    /// `None` if it reports none (no ethtool operation, an error, 0 or `SPEED_UNKNOWN`).
    ///
    /// The speed may change at any time (`NETDEV_CHANGE` follows); the value is read once.
    /// Takes RTNL: process context only, and the caller must hold neither RTNL (netdev
    /// notifier callbacks do) nor a lock that an RTNL holder may wait for.
    pub fn link_speed_mbps(&self) -> Option<u32> {
        let mut ks = core::mem::MaybeUninit::<bindings::ethtool_link_ksettings>::zeroed();
        // SAFETY: `rtnl_lock` may sleep; the documented context of this method allows it.
        unsafe { bindings::rtnl_lock() };
        // SAFETY: The device is valid by the type invariant, RTNL is held as the function
        // asserts, and `ks` is writable storage of the function's output type.
        let ret = unsafe { bindings::__ethtool_get_link_ksettings(self.as_raw(), ks.as_mut_ptr()) };
        // SAFETY: Taken above, by this thread.
        unsafe { bindings::rtnl_unlock() };
        if ret != 0 {
            return None;
        }
        // SAFETY: `ks` was zero-initialised (a valid value of this plain C struct: integers and
        // bitmaps) and then written by the driver, which leaves it valid.
        let speed = unsafe { ks.assume_init_ref() }.base.speed;
        // `SPEED_UNKNOWN` is -1 in the `u32` field.
        (speed != 0 && speed != u32::MAX).then_some(speed)
    }

    /// Joins the IP multicast group `group` on this device, as a socket's `IP_ADD_MEMBERSHIP`
    /// or `IPV6_ADD_MEMBERSHIP` would: the IP layer accepts the group's datagrams from the
    /// device, adds the group's link-layer address to the device's filter and announces the
    /// membership (IGMP/MLD). Memberships are counted: every join needs one
    /// [`NetDevice::leave_multicast`].
    ///
    /// Fails with `EINVAL` for a unicast address and `ENODEV` if the device has no IPv4 or
    /// IPv6 configuration (yet or any more). An IPv4 join takes RTNL: process context only, and
    /// the caller must hold neither RTNL nor a lock an RTNL holder may wait for.
    pub fn join_multicast(&self, group: &IpAddr) -> Result {
        match *group {
            IpAddr::V4(a) => {
                if a[0] & 0xf0 != 0xe0 {
                    return Err(EINVAL);
                }
                self.with_in_device(|in_dev| {
                    // SAFETY: `in_dev` is the device's live `in_device` and RTNL is held
                    // (`with_in_device`); the address is in network byte order.
                    unsafe { bindings::ip_mc_inc_group(in_dev, u32::from_ne_bytes(a)) };
                })
            }
            IpAddr::V6(a) => {
                if a[0] != 0xff {
                    return Err(EINVAL);
                }
                let addr = bindings::in6_addr {
                    in6_u: bindings::in6_addr__bindgen_ty_1 { u6_addr8: a },
                };
                // SAFETY: The device is valid (type invariant), `addr` is a valid address for
                // the call; the function takes its own locks (the device's `mc_lock`).
                to_result(unsafe { bindings::ipv6_dev_mc_inc(self.as_raw(), &addr) })
            }
        }
    }

    /// Leaves a group joined with [`NetDevice::join_multicast`] (one membership of it). Same
    /// contexts and errors; IPv6 also reports `ENOENT` if the device has no such membership
    /// (IPv4 ignores a leave without a join).
    pub fn leave_multicast(&self, group: &IpAddr) -> Result {
        match *group {
            IpAddr::V4(a) => {
                if a[0] & 0xf0 != 0xe0 {
                    return Err(EINVAL);
                }
                self.with_in_device(|in_dev| {
                    // SAFETY: As in `join_multicast`.
                    unsafe {
                        bindings::__ip_mc_dec_group(
                            in_dev,
                            u32::from_ne_bytes(a),
                            bindings::GFP_KERNEL,
                        )
                    };
                })
            }
            IpAddr::V6(a) => {
                if a[0] != 0xff {
                    return Err(EINVAL);
                }
                let addr = bindings::in6_addr {
                    in6_u: bindings::in6_addr__bindgen_ty_1 { u6_addr8: a },
                };
                // SAFETY: As in `join_multicast`.
                to_result(unsafe { bindings::ipv6_dev_mc_dec(self.as_raw(), &addr) })
            }
        }
    }

    /// Runs `f` with RTNL held on the device's IPv4 configuration (`in_device`); `ENODEV` if it
    /// has none.
    fn with_in_device(&self, f: impl FnOnce(*mut bindings::in_device)) -> Result {
        // SAFETY: `rtnl_lock` may sleep; the callers' documented context allows it.
        unsafe { bindings::rtnl_lock() };
        // SAFETY: The device is valid (type invariant); `ip_ptr` is only replaced under RTNL,
        // which is held, so the plain read is `rtnl_dereference`'s and the object stays alive
        // until RTNL is released.
        let in_dev = unsafe { (*self.as_raw()).ip_ptr };
        let ret = if in_dev.is_null() {
            Err(ENODEV)
        } else {
            f(in_dev);
            Ok(())
        };
        // SAFETY: Taken above, by this thread.
        unsafe { bindings::rtnl_unlock() };
        ret
    }

    /// Whether the device is registered (`reg_state == NETREG_REGISTERED`).
    ///
    /// Unregistration sets another state under RTNL, then waits for an RCU grace period
    /// (`synchronize_net`) before delivering [`NetdevEvent::Unregister`]. So code that publishes
    /// an object the notifier looks up and *then* sees the device still registered knows the
    /// notifier will find the object; code that sees it unregistering must clean up itself.
    pub fn is_registered(&self) -> bool {
        // SAFETY: The device is valid by the type invariant; `reg_state` is written under RTNL
        // and read locklessly (`READ_ONCE`) by the C side too.
        let state = unsafe { core::ptr::read_volatile(&raw const (*self.as_raw()).reg_state) };
        u32::from(state) == bindings::netdev_reg_state_NETREG_REGISTERED
    }

    /// Whether this is a loopback device (`IFF_LOOPBACK`).
    pub fn is_loopback(&self) -> bool {
        // SAFETY: The device is valid by the type invariant; `flags` is a plain word the C side
        // also reads without locks.
        let flags = unsafe { core::ptr::read_volatile(&raw const (*self.as_raw()).flags) };
        flags & bindings::net_device_flags_IFF_LOOPBACK != 0
    }

    /// Whether the interface is administratively up (`netif_running`).
    pub fn is_running(&self) -> bool {
        // SAFETY: The device is valid by the type invariant.
        unsafe { bindings::netif_running(self.as_raw()) }
    }

    /// Whether the interface has carrier (`netif_carrier_ok`).
    pub fn has_carrier(&self) -> bool {
        // SAFETY: The device is valid by the type invariant.
        unsafe { bindings::netif_carrier_ok(self.as_raw()) }
    }

    /// Copies the device's hardware address into `buf` and returns its length (`addr_len`), or
    /// `EINVAL` if `buf` is too small.
    ///
    /// The address may change concurrently (`NETDEV_CHANGEADDR`) unless the caller holds RTNL;
    /// the copy is then a snapshot that may mix old and new bytes.
    pub fn hw_addr(&self, buf: &mut [u8]) -> Result<usize> {
        let raw = self.as_raw();
        // SAFETY: The device is valid by the type invariant; `addr_len` is fixed at setup.
        let len = usize::from(unsafe { (*raw).addr_len });
        if len > buf.len() {
            return Err(EINVAL);
        }
        // SAFETY: `dev_addr` points to at least `addr_len` bytes for a registered device (it is
        // allocated by `dev_addr_init` before registration and freed after the last reference).
        let addr = unsafe { (*raw).dev_addr };
        if addr.is_null() {
            return Ok(0);
        }
        for (i, b) in buf.iter_mut().take(len).enumerate() {
            // SAFETY: `i < addr_len`, see above; volatile because writers hold RTNL, not us.
            *b = unsafe { core::ptr::read_volatile(addr.add(i)) };
        }
        Ok(len)
    }

    /// Copies the interface name (NUL-terminated) into a buffer of `IFNAMSIZ` bytes.
    ///
    /// Names may change concurrently (`NETDEV_CHANGENAME`); the result is a snapshot, meant for
    /// messages.
    pub fn name(&self) -> [u8; bindings::IFNAMSIZ as usize] {
        let mut out = [0u8; bindings::IFNAMSIZ as usize];
        // SAFETY: The device is valid by the type invariant; `name` is an inline array.
        let name = unsafe { &raw const (*self.as_raw()).name };
        for (i, b) in out
            .iter_mut()
            .enumerate()
            .take(bindings::IFNAMSIZ as usize - 1)
        {
            // SAFETY: `i < IFNAMSIZ`, in bounds of the inline `name` array.
            let c = unsafe { core::ptr::read_volatile(name.cast::<u8>().add(i)) };
            if c == 0 {
                break;
            }
            *b = c;
        }
        out
    }

    /// The interface name as a `&str` within `buf` (see [`NetDevice::name`]).
    pub fn name_str<'a>(&self, buf: &'a mut [u8; bindings::IFNAMSIZ as usize]) -> &'a str {
        *buf = self.name();
        let len = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
        core::str::from_utf8(&buf[..len]).unwrap_or("?")
    }

    /// Returns the raw pointer to the network namespace the device currently lives in.
    ///
    /// Only valid while the caller keeps the device in that namespace or holds RTNL.
    pub(crate) fn raw_net(&self) -> *mut bindings::net {
        // SAFETY: The device is valid by the type invariant.
        unsafe { bindings::dev_net(self.as_raw()) }
    }
}

// SAFETY: `dev_hold`/`dev_put` manage the reference count of `struct net_device`; a shared
// reference implies a non-zero count (type invariant), so incrementing is always allowed.
unsafe impl AlwaysRefCounted for NetDevice {
    fn inc_ref(&self) {
        // SAFETY: The reference count is non-zero by the type invariant.
        unsafe { bindings::dev_hold(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns one reference, which is released here.
        unsafe { bindings::dev_put(obj.cast::<bindings::net_device>().as_ptr()) };
    }
}

/// An event delivered on the netdev notifier chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetdevEvent {
    /// The interface was brought up (`NETDEV_UP`).
    Up,
    /// The interface went down (`NETDEV_DOWN`).
    Down,
    /// Carrier or other state changed (`NETDEV_CHANGE`).
    Change,
    /// The MTU changed (`NETDEV_CHANGEMTU`); the new value is [`NetDevice::mtu`].
    ChangeMtu,
    /// The interface is being unregistered or moved to another namespace (`NETDEV_UNREGISTER`):
    /// drop every reference to it.
    Unregister,
    /// Any other `enum netdev_cmd` value, passed through.
    Other(u64),
}

impl NetdevEvent {
    fn from_raw(event: u64) -> Self {
        match event as u32 {
            bindings::netdev_cmd_NETDEV_UP => Self::Up,
            bindings::netdev_cmd_NETDEV_DOWN => Self::Down,
            bindings::netdev_cmd_NETDEV_CHANGE => Self::Change,
            bindings::netdev_cmd_NETDEV_CHANGEMTU => Self::ChangeMtu,
            bindings::netdev_cmd_NETDEV_UNREGISTER => Self::Unregister,
            _ => Self::Other(event),
        }
    }
}

/// A handler on the netdev notifier chain (`register_netdevice_notifier`).
///
/// # Calling context
///
/// [`NetdevNotifier::event`] runs in process context with RTNL held, for devices of every
/// network namespace. It may sleep but must not take RTNL (or anything ordered before it, e.g.
/// ib_core's unregistration paths): defer such work, e.g. with
/// `kernel::rdma::device::DeviceRef::unregister_queued`.
pub trait NetdevNotifier: Sync + 'static {
    /// Called for each event on each network device.
    fn event(event: NetdevEvent, dev: &NetDevice);
}

/// A registration of a [`NetdevNotifier`] on the netdev notifier chain.
///
/// Registration replays `NETDEV_REGISTER` and `NETDEV_UP` for existing devices; dropping the
/// registration replays `NETDEV_GOING_DOWN`, `NETDEV_DOWN` and `NETDEV_UNREGISTER` for devices
/// that are up, as `unregister_netdevice_notifier` does.
///
/// # Invariants
///
/// `nb` is registered with `register_netdevice_notifier` from initialisation until drop.
#[pin_data(PinnedDrop)]
pub struct NetdevNotifierRegistration<T: NetdevNotifier> {
    #[pin]
    nb: Opaque<bindings::notifier_block>,
    _t: PhantomData<T>,
}

// SAFETY: Unregistration may happen on any thread.
unsafe impl<T: NetdevNotifier> Send for NetdevNotifierRegistration<T> {}
// SAFETY: There are no `&self` methods that touch the notifier block.
unsafe impl<T: NetdevNotifier> Sync for NetdevNotifierRegistration<T> {}

impl<T: NetdevNotifier> NetdevNotifierRegistration<T> {
    /// Registers `T` on the netdev notifier chain. May sleep (takes RTNL).
    pub fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            nb <- Opaque::try_ffi_init(|slot: *mut bindings::notifier_block| {
                // SAFETY: `slot` is valid for writes; a zeroed notifier block with a callback is
                // a valid one.
                unsafe {
                    slot.write(bindings::notifier_block {
                        notifier_call: Some(Self::notifier_callback),
                        ..pin_init::zeroed()
                    })
                };
                // SAFETY: `slot` is pinned and stays registered until `drop`, which unregisters
                // it before the memory can go away.
                // INVARIANT: On success the block is registered.
                to_result(unsafe { bindings::register_netdevice_notifier(slot) })
            }),
            _t: PhantomData,
        })
    }

    /// # Safety
    ///
    /// Called by the notifier chain with `ptr` pointing to a `struct netdev_notifier_info`.
    unsafe extern "C" fn notifier_callback(
        _nb: *mut bindings::notifier_block,
        action: c_ulong,
        ptr: *mut c_void,
    ) -> c_int {
        // SAFETY: For the netdev chain, `ptr` is a `struct netdev_notifier_info` (or a structure
        // starting with one) naming a device that stays valid for the duration of the call.
        let dev = unsafe { NetDevice::from_raw(bindings::netdev_notifier_info_to_dev(ptr.cast())) };
        T::event(NetdevEvent::from_raw(action as u64), dev);
        bindings::NOTIFY_DONE as c_int
    }
}

#[pinned_drop]
impl<T: NetdevNotifier> PinnedDrop for NetdevNotifierRegistration<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: The block is registered by the type invariant. The return value only reports
        // a block that was not registered, which cannot happen.
        unsafe { bindings::unregister_netdevice_notifier(self.nb.get()) };
    }
}
