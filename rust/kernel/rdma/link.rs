// SPDX-License-Identifier: GPL-2.0

//! RDMA link types (`struct rdma_link_ops`): `rdma link add NAME type TYPE netdev DEV`.
//!
//! C header: [`include/rdma/rdma_netlink.h`](srctree/include/rdma/rdma_netlink.h)
//!
//! ib_core loads a missing link type with `request_module("rdma-link-TYPE")`: a module
//! providing type `foo` declares `alias: ["rdma-link-foo"]` in its `module!` (the C
//! `MODULE_ALIAS_RDMA_LINK("foo")`).

use crate::{
    bindings,
    net::netdev::NetDevice,
    prelude::*,
    str::CStrExt,
    types::Opaque, //
};
use core::{
    marker::PhantomData,
    sync::atomic::{
        AtomicBool,
        Ordering, //
    },
};

/// The operations of an RDMA link type.
///
/// # Calling context
///
/// [`LinkOps::newlink`] runs in process context from the `RDMA_NLDEV_CMD_NEWLINK` netlink
/// command, may sleep, holds ib_core's link-ops semaphore for reading (so it must not register
/// or unregister link types) and does not hold RTNL.
#[vtable]
pub trait LinkOps: 'static {
    /// Creates and registers a device named `name` on `netdev`.
    ///
    /// ib_core has already resolved `netdev` in the caller's namespace (`ENODEV` for an unknown
    /// name) and holds a reference on it for the call. The error code is returned to `rdma`.
    fn newlink(name: &CStr, netdev: &NetDevice) -> Result;
}

/// A registered RDMA link type.
///
/// # Invariants
///
/// `ops` is registered with `rdma_link_register` from initialisation until it is unregistered,
/// by [`LinkRegistration::unregister`] or on drop, exactly once (`registered`).
#[pin_data(PinnedDrop)]
pub struct LinkRegistration<T: LinkOps> {
    #[pin]
    ops: Opaque<bindings::rdma_link_ops>,
    registered: AtomicBool,
    _t: PhantomData<T>,
}

// SAFETY: Registration and unregistration may happen on any thread.
unsafe impl<T: LinkOps> Send for LinkRegistration<T> {}
// SAFETY: `unregister` is synchronised through `registered` and ib_core's semaphore.
unsafe impl<T: LinkOps> Sync for LinkRegistration<T> {}

impl<T: LinkOps> LinkRegistration<T> {
    /// Registers link type `kind` (e.g. `c"metaroce"`). Link type names are at most 15 bytes
    /// (`IFNAMSIZ - 1`, what `rdma` can pass); a longer one is `EINVAL`.
    pub fn new(kind: &'static CStr) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            ops <- Opaque::try_ffi_init(move |slot: *mut bindings::rdma_link_ops| {
                if kind.to_bytes().is_empty() || kind.to_bytes().len() >= bindings::IFNAMSIZ as usize {
                    return Err(EINVAL);
                }
                // SAFETY: `slot` is valid for writes.
                unsafe {
                    slot.write(bindings::rdma_link_ops {
                        type_: kind.as_char_ptr(),
                        newlink: Some(Self::newlink_callback),
                        dellink: None,
                        ..pin_init::zeroed()
                    })
                };
                // SAFETY: `slot` is pinned, `kind` is `'static`, and the ops are unregistered
                // before the memory goes away (`unregister`/drop).
                // INVARIANT: Registered here; `registered` is initialised to true below.
                unsafe { bindings::rdma_link_register(slot) };
                Ok::<(), Error>(())
            }),
            registered: AtomicBool::new(true),
            _t: PhantomData,
        })
    }

    /// Unregisters the link type now (`rdma_link_unregister`), waiting for `newlink` calls in
    /// progress. Later calls (and drop) do nothing. May sleep; must not be called from
    /// [`LinkOps::newlink`].
    pub fn unregister(&self) {
        if self.registered.swap(false, Ordering::AcqRel) {
            // SAFETY: Registered until now (type invariant); `registered` makes this the only
            // unregistration.
            unsafe { bindings::rdma_link_unregister(self.ops.get()) };
        }
    }

    /// # Safety
    ///
    /// Called by ib_core with a valid C string and a netdev it holds a reference on.
    unsafe extern "C" fn newlink_callback(
        name: *const c_char,
        ndev: *mut bindings::net_device,
    ) -> c_int {
        // SAFETY: `name` is a NUL-terminated buffer of ib_core's for the call.
        let name = unsafe { CStr::from_char_ptr(name) };
        // SAFETY: ib_core holds a reference on `ndev` for the duration of the call.
        let netdev = unsafe { NetDevice::from_raw(ndev) };
        match T::newlink(name, netdev) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }
}

#[pinned_drop]
impl<T: LinkOps> PinnedDrop for LinkRegistration<T> {
    fn drop(self: Pin<&mut Self>) {
        self.unregister();
    }
}
