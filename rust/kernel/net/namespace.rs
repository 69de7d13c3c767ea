// SPDX-License-Identifier: GPL-2.0

//! Network namespaces (`struct net`) and per-namespace state (`struct pernet_operations`).
//!
//! C header: [`include/net/net_namespace.h`](srctree/include/net/net_namespace.h)
//!
//! A [`Pernet`] lives in a `static` and gives every network namespace one value of
//! [`PernetOps::Data`], stored in the memory the core allocates per namespace (`ops.size`,
//! reached with `net_generic`). The value is initialised in place when a namespace is created (or,
//! for existing namespaces, when the registration is made) and dropped when the namespace is
//! dismantled, after [`PernetOps::exit`]. A kernel socket created in a namespace holds no
//! reference on it, so such sockets belong in this state and are released in `exit`.

use crate::{
    bindings,
    prelude::*,
    sync::aref::AlwaysRefCounted,
    time::{delay::fsleep, Delta},
    types::Opaque, //
};
use core::{
    marker::PhantomData,
    ops::Deref,
    ptr::NonNull,
    sync::atomic::{
        AtomicUsize,
        Ordering, //
    },
};

/// A network namespace.
///
/// # Invariants
///
/// A `&Net` points to a live `struct net` for the lifetime of the reference.
#[repr(transparent)]
pub struct Net(Opaque<bindings::net>);

// SAFETY: `struct net` is used from any thread; the methods only read immutable fields.
unsafe impl Send for Net {}
// SAFETY: As above.
unsafe impl Sync for Net {}

impl Net {
    /// Creates a reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a live `struct net` that stays alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::net) -> &'a Self {
        // SAFETY: `Net` is a transparent wrapper; liveness is the caller's promise.
        unsafe { &*ptr.cast() }
    }

    /// The raw pointer.
    pub(crate) fn as_raw(&self) -> *mut bindings::net {
        self.0.get()
    }

    /// The initial namespace.
    pub fn init_net() -> &'static Self {
        // SAFETY: `init_net` is a static that is never dismantled.
        unsafe { Self::from_raw(&raw mut bindings::init_net) }
    }

    /// The namespace's inode number, as `ip netns identify` and `/proc/PID/ns/net` show it.
    pub fn inum(&self) -> u32 {
        // SAFETY: The namespace is alive (type invariant) and `ns.inum` never changes.
        unsafe { (*self.as_raw()).ns.inum }
    }
}

// SAFETY: `get_net`/`put_net` manage the namespace's reference count (`ns.__ns_ref`); a shared
// reference implies the namespace is alive, so taking one more reference is allowed.
unsafe impl AlwaysRefCounted for Net {
    fn inc_ref(&self) {
        // SAFETY: The namespace is alive (type invariant).
        unsafe { bindings::get_net(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns one reference, released here.
        unsafe { bindings::put_net(obj.cast::<bindings::net>().as_ptr()) };
    }
}

/// The per-namespace state of a subsystem.
pub trait PernetOps: Sized + 'static {
    /// The value each namespace holds.
    type Data: Send + Sync;

    /// Returns the [`Pernet`] `static` that registers these operations.
    fn pernet() -> &'static Pernet<Self>;

    /// Initialises the value of a new namespace (or of an existing one at registration).
    ///
    /// Runs in process context, may sleep, under the core's `pernet_ops_rwsem`; an error fails
    /// the namespace's creation (or the registration), so prefer lazily created resources.
    fn init(net: &Net) -> impl PinInit<Self::Data, Error>;

    /// Called first when the namespace is dismantled (or at unregistration), while its network
    /// devices still exist: release here whatever holds references on them, since the core
    /// waits for those before it calls [`PernetOps::exit`]. A kernel UDP socket is such a thing:
    /// it caches the input route of datagrams it received (`sk_rx_dst`; a multicast datagram's
    /// refers to the loopback device) until it is released. May sleep; `data` stays valid and
    /// shared (other code may still use it until `exit`).
    fn pre_exit(_net: &Net, _data: &Self::Data) {}

    /// Called when the namespace is dismantled (or at unregistration), before `data` is dropped:
    /// no network device remains in the namespace. May sleep.
    fn exit(_net: &Net, _data: &Self::Data) {}
}

/// Bit of [`Pernet::users`] set while registered; the bits below count [`PernetData`] guards.
const REGISTERED: usize = 1 << (usize::BITS - 1);

/// The `pernet_operations` of `T`, to be placed in a `static`.
///
/// # Invariants
///
/// - While `users` has `REGISTERED`, `ops` is registered with `register_pernet_subsys` and
///   `id` holds the id the core assigned, so every live namespace has an initialised
///   `T::Data` at `net_generic(net, id)`.
/// - `users` counts the live [`PernetData`] guards; unregistration waits for it to drop to zero.
pub struct Pernet<T: PernetOps> {
    ops: Opaque<bindings::pernet_operations>,
    id: Opaque<c_uint>,
    users: AtomicUsize,
    _t: PhantomData<T>,
}

// SAFETY: The C side synchronises registration; `users` is atomic; the data is `Send + Sync`.
unsafe impl<T: PernetOps> Sync for Pernet<T> {}
// SAFETY: As above.
unsafe impl<T: PernetOps> Send for Pernet<T> {}

impl<T: PernetOps> Pernet<T> {
    /// Creates the unregistered operations (for a `static`).
    pub const fn new() -> Self {
        Self {
            // All-zero (no hooks) until filled in at registration.
            ops: Opaque::zeroed(),
            id: Opaque::new(0),
            users: AtomicUsize::new(0),
            _t: PhantomData,
        }
    }

    /// Registers the operations (`register_pernet_subsys`): every existing namespace gets its
    /// value now, every new one when it is created. `EBUSY` if already registered. May sleep.
    pub fn register(&'static self) -> Result<PernetRegistration<T>> {
        if self
            .users
            .compare_exchange(0, REGISTERED, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(EBUSY);
        }
        // SAFETY: Not registered (we won the exchange from 0), so nobody else uses `ops`.
        unsafe {
            self.ops.get().write(bindings::pernet_operations {
                init: Some(Self::init_callback),
                pre_exit: Some(Self::pre_exit_callback),
                exit: Some(Self::exit_callback),
                id: self.id.get(),
                size: core::mem::size_of::<T::Data>(),
                ..core::mem::zeroed()
            })
        };
        // `net_generic` memory comes from `kzalloc`, whose alignment (ARCH_KMALLOC_MINALIGN) is
        // at least that of `u64` on every architecture.
        const { assert!(core::mem::align_of::<T::Data>() <= core::mem::align_of::<u64>()) };
        // SAFETY: `ops` is filled in and lives in a `static`; it is unregistered by
        // `PernetRegistration::drop`.
        let ret = unsafe { bindings::register_pernet_subsys(self.ops.get()) };
        if ret != 0 {
            self.users.store(0, Ordering::Release);
            return Err(Error::from_errno(ret));
        }
        // INVARIANT: Registered, `REGISTERED` set.
        Ok(PernetRegistration { pernet: self })
    }

    /// The value of namespace `net`, or `None` if the operations are not registered.
    ///
    /// The guard keeps the operations registered (unregistration waits for it): do not hold
    /// it across anything unregistration itself waits for.
    pub fn get<'a>(&'static self, net: &'a Net) -> Option<PernetData<'a, T>> {
        let mut cur = self.users.load(Ordering::Acquire);
        loop {
            if cur & REGISTERED == 0 {
                return None;
            }
            match self.users.compare_exchange_weak(
                cur,
                cur + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => cur = now,
            }
        }
        // SAFETY: Registered (checked while taking a user count, which keeps it so), and `net`
        // is alive for `'a`, so `net_generic` returns its initialised value (type invariant).
        let data = unsafe { bindings::net_generic(net.as_raw(), *self.id.get()) };
        Some(PernetData {
            pernet: self,
            // SAFETY: See above; the value is pinned in the namespace's memory and only shared.
            data: unsafe { &*data.cast::<T::Data>() },
        })
    }

    fn data_of(net: *mut bindings::net) -> *mut T::Data {
        let pernet = T::pernet();
        // SAFETY: Called from the core's hooks with a live `net` while registered, when
        // `net_generic` holds the memory the core allocated with `ops.size`.
        unsafe { bindings::net_generic(net, *pernet.id.get()) }.cast()
    }

    /// # Safety
    ///
    /// Called by the core with a live namespace whose zeroed `size` bytes were just allocated.
    unsafe extern "C" fn init_callback(net: *mut bindings::net) -> c_int {
        let slot = Self::data_of(net);
        // SAFETY: `net` is live for the call.
        let netref = unsafe { Net::from_raw(net) };
        // SAFETY: `slot` is valid, aligned (checked in `register`) uninitialised memory that
        // stays put until the core frees it after `exit_callback`; on error the core frees it
        // without calling `exit` and pin-init leaves nothing initialised.
        match unsafe { pin_init::raw_try_init(slot, T::init(netref)) } {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the core for a namespace whose `init_callback` succeeded, once, before
    /// `exit_callback`.
    unsafe extern "C" fn pre_exit_callback(net: *mut bindings::net) {
        let slot = Self::data_of(net);
        // SAFETY: `net` is live for the call.
        let netref = unsafe { Net::from_raw(net) };
        // SAFETY: `slot` holds the value `init_callback` initialised, dropped only later by
        // `exit_callback`; it is only shared.
        T::pre_exit(netref, unsafe { &*slot });
    }

    /// # Safety
    ///
    /// Called by the core for a namespace whose `init_callback` succeeded, once.
    unsafe extern "C" fn exit_callback(net: *mut bindings::net) {
        let slot = Self::data_of(net);
        // SAFETY: `net` is live for the call.
        let netref = unsafe { Net::from_raw(net) };
        // SAFETY: `slot` holds the value `init_callback` initialised; no guard refers to it:
        // guards exist for live namespaces only in callers holding the namespace (`get` takes a
        // `&'a Net`), and the core dismantles a namespace only after its last reference.
        T::exit(netref, unsafe { &*slot });
        // SAFETY: As above; the value is dropped exactly once, before the core frees the memory.
        unsafe { core::ptr::drop_in_place(slot) };
    }
}

impl<T: PernetOps> Default for Pernet<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// A registration of a [`Pernet`]; unregisters on drop (which may sleep).
pub struct PernetRegistration<T: PernetOps> {
    pernet: &'static Pernet<T>,
}

impl<T: PernetOps> Drop for PernetRegistration<T> {
    fn drop(&mut self) {
        let p = self.pernet;
        p.users.fetch_and(!REGISTERED, Ordering::AcqRel);
        // New `get`s fail from now on; wait for the guards still out (short critical sections of
        // the owner's own code, so rare and brief at unregistration).
        while p.users.load(Ordering::Acquire) != 0 {
            fsleep(Delta::from_millis(1));
        }
        // SAFETY: Registered by `register` (type invariant) and no guard remains.
        unsafe { bindings::unregister_pernet_subsys(p.ops.get()) };
    }
}

/// Access to one namespace's value, keeping the operations registered.
pub struct PernetData<'a, T: PernetOps> {
    pernet: &'static Pernet<T>,
    data: &'a T::Data,
}

impl<T: PernetOps> Deref for PernetData<'_, T> {
    type Target = T::Data;

    fn deref(&self) -> &T::Data {
        self.data
    }
}

impl<T: PernetOps> Drop for PernetData<'_, T> {
    fn drop(&mut self) {
        self.pernet.users.fetch_sub(1, Ordering::AcqRel);
    }
}
