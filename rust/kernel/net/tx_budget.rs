// SPDX-License-Identifier: GPL-2.0

//! A bound on the memory of the packets a driver has handed to the network stack and the stack
//! has not freed yet: socket write-memory accounting (`skb_set_owner_w`, `sk_wmem_alloc`,
//! `sk_write_space`) for a sender that is not a socket.
//!
//! C header: [`include/net/sock.h`](srctree/include/net/sock.h)
//!
//! A UDP application is held back by its socket's send buffer when a queue below it (a qdisc, a
//! slower link) fills; a driver that builds its own packets and hands them to `ip_local_out`
//! is not, and overruns the queue instead. A [`TxBudget`] gives such a driver the same
//! back-pressure: every packet sent with it is charged to a private kernel socket (its `truesize`
//! counts in the socket's write memory until the stack frees the skb, wherever that happens),
//! [`TxBudget::has_room`] says whether the charges are below the budget, and the owner's
//! [`TxSpace::tx_space`] is called whenever a freed packet leaves them below it, so a sender
//! that stopped knows when to go on.
//!
//! The socket's fields are set through a C helper: bindgen's layout of `struct sock` differs
//! from C's (`scripts/bindgen-layout.sh`), so no field of it is touched from Rust.
//!
//! The socket lives in the initial namespace and is never bound: it only owns skbs, which are
//! routed and sent in whatever namespace their sender uses.

use crate::{
    bindings,
    error::to_result,
    net::namespace::Net,
    prelude::*,
    sync::{rcu, Arc, ArcBorrow},
};
use core::{ffi::c_void, ptr::NonNull};

/// The owner of a [`TxBudget`], told when the budget has room again.
pub trait TxSpace: Send + Sync + 'static {
    /// Called when a packet charged to the budget was freed and the charges left are below the
    /// budget. Called for every such packet, so it must be cheap when nobody waits. Any
    /// context (the stack frees transmitted skbs in softirq context), inside an RCU read-side
    /// critical section: must not sleep.
    fn tx_space(this: ArcBorrow<'_, Self>);
}

/// What the socket's `sk_user_data` points to while the budget exists: the owner and the
/// function that calls its [`TxSpace::tx_space`].
struct Hook {
    /// `Arc::into_raw` of the owner.
    owner: *const c_void,
    /// Calls the owner's [`TxSpace::tx_space`].
    space: unsafe fn(*const c_void),
    /// Drops the owner's reference (`Arc::from_raw`).
    release: unsafe fn(*const c_void),
}

/// # Safety
///
/// `owner` must come from `Arc::<T>::into_raw` and its reference must still be held.
unsafe fn space_of<T: TxSpace>(owner: *const c_void) {
    // SAFETY: By the function's safety requirements the `Arc<T>` behind `owner` is alive.
    T::tx_space(unsafe { ArcBorrow::from_raw(owner.cast::<T>()) });
}

/// # Safety
///
/// `owner` must come from `Arc::<T>::into_raw`; its reference is given up.
unsafe fn release_of<T: TxSpace>(owner: *const c_void) {
    // SAFETY: By the function's safety requirements.
    drop(unsafe { Arc::from_raw(owner.cast::<T>()) });
}

/// The socket's `sk_write_space` callback, called by `sock_wfree` for each freed skb charged to
/// it. It is part of the kernel image, not of a module, so it may outlive the budget: the
/// socket (and the callback pointer in it) lives on until the last charged skb is freed, while
/// the owner's code and data are reached only through `sk_user_data`, which [`TxBudget`]'s drop
/// clears and waits an RCU grace period for.
///
/// # Safety
///
/// `sk` must be the `struct sock` of a [`TxBudget`]'s socket; its `sk_user_data` is null or
/// points to the budget's [`Hook`].
unsafe extern "C" fn write_space(sk: *mut bindings::sock) {
    let _rcu = rcu::read_lock();
    // SAFETY: `sk` is valid (the caller frees an skb charged to it, which holds a write-memory
    // reference on it); its user data is null or our hook (function's safety requirements).
    let hook = unsafe { bindings::rcu_dereference_sk_user_data(sk) }.cast::<Hook>();
    if hook.is_null() {
        return;
    }
    // SAFETY: `sk` is valid, as above.
    if !unsafe { bindings::sock_writeable(sk) } {
        return;
    }
    // SAFETY: The hook was published before any skb was charged and is freed only after the
    // user data is cleared and a grace period passed; we are inside a read-side section.
    let hook = unsafe { &*hook };
    // SAFETY: `hook.owner` is the owner's `Arc::into_raw`, released only after the grace period.
    unsafe { (hook.space)(hook.owner) };
}

/// A budget of socket write memory for a driver's transmitted packets (see the module
/// documentation).
///
/// # Invariants
///
/// `sock` is a kernel UDP socket created by [`TxBudget::new`] and owned by this value, whose
/// `sk_write_space` is `write_space` and whose `sk_user_data` points to `hook` until drop.
pub struct TxBudget {
    sock: NonNull<bindings::socket>,
    hook: KBox<Hook>,
}

// SAFETY: The socket is used through atomic operations and RCU only; the hook is read-only and
// its owner is `Send + Sync`.
unsafe impl Send for TxBudget {}
// SAFETY: As above: nothing is mutated through a shared reference but the socket's atomic
// write-memory count.
unsafe impl Sync for TxBudget {}

impl TxBudget {
    /// A budget of `bytes` of skb memory (`truesize`, the packets' buffers and bookkeeping, about
    /// twice their length for MTU-sized packets), whose `owner` hears when it has room again.
    /// Process context.
    pub fn new<T: TxSpace>(bytes: u32, owner: Arc<T>) -> Result<Self> {
        // The socket is writeable below half of its send buffer (`sock_writeable`).
        let sndbuf = bytes
            .checked_mul(2)
            .and_then(|b| i32::try_from(b).ok())
            .ok_or(EINVAL)?;
        let mut sock: *mut bindings::socket = core::ptr::null_mut();
        // SAFETY: `init_net` is never dismantled; `sock` is valid for writes.
        to_result(unsafe {
            bindings::sock_create_kern(
                Net::init_net().as_raw(),
                bindings::AF_INET as i32,
                bindings::sock_type_SOCK_DGRAM as i32,
                bindings::IPPROTO_UDP as i32,
                &mut sock,
            )
        })?;
        let sock = NonNull::new(sock).ok_or(EINVAL)?;
        let owner = Arc::into_raw(owner).cast::<c_void>();
        let hook = match KBox::new(
            Hook {
                owner,
                space: space_of::<T>,
                release: release_of::<T>,
            },
            GFP_KERNEL,
        ) {
            Ok(hook) => hook,
            Err(e) => {
                // SAFETY: `owner` came from `Arc::into_raw` just above; `sock` is ours and
                // nothing was charged to it.
                unsafe {
                    release_of::<T>(owner);
                    bindings::sock_release(sock.as_ptr());
                }
                return Err(e.into());
            }
        };
        // SAFETY: The socket was just created and is ours (`sk` is set for a created socket);
        // nothing is charged to it yet. The user data is published with release ordering, and
        // `write_space` finds null before it.
        unsafe {
            let sk = (*sock.as_ptr()).sk;
            bindings::sk_set_write_space(sk, Some(write_space), sndbuf);
            bindings::rcu_assign_sk_user_data(sk, (&raw const *hook).cast_mut().cast());
        }
        // INVARIANT: Created, callback and user data set above.
        Ok(Self { sock, hook })
    }

    fn sk(&self) -> *mut bindings::sock {
        // SAFETY: `sock` is valid (type invariant) and its `sk` is set for a created socket.
        unsafe { (*self.sock.as_ptr()).sk }
    }

    /// Whether the packets charged and not yet freed use less than the budget. Any context.
    pub fn has_room(&self) -> bool {
        // SAFETY: `sk` is valid (type invariant); `sock_writeable` reads the atomic write-memory
        // count and the send buffer size set in `new` (twice the budget).
        unsafe { bindings::sock_writeable(self.sk()) }
    }

    /// Bytes of skb memory charged and not yet freed. Any context.
    pub fn in_use(&self) -> usize {
        // SAFETY: As for `has_room`.
        usize::try_from(unsafe { bindings::sk_wmem_alloc_get(self.sk()) }).unwrap_or(0)
    }

    /// Charges `skb` to the budget until the stack frees it (`skb_set_owner_w`; a previous
    /// owner is released first).
    ///
    /// # Safety
    ///
    /// `skb` must be a valid skb the caller owns and is about to hand to the stack, whose size
    /// (`truesize`) no longer changes: in particular no skb may be added to its frag_list later.
    pub(crate) unsafe fn charge(&self, skb: *mut bindings::sk_buff) {
        // SAFETY: `skb` is valid and ours (function's safety requirements); `sk` is a full
        // socket that lives until the skb's destructor has run (the charge holds it).
        unsafe { bindings::skb_set_owner_w(skb, self.sk()) };
    }
}

impl Drop for TxBudget {
    /// Process context: waits for an RCU grace period.
    fn drop(&mut self) {
        let sk = self.sk();
        // SAFETY: `sk` is valid; clearing the user data stops `write_space` from reaching the
        // owner.
        unsafe { bindings::rcu_assign_sk_user_data(sk, core::ptr::null_mut()) };
        // Callbacks that read the hook before it was cleared finish first.
        rcu::synchronize_rcu();
        // SAFETY: The socket is ours (type invariant); skbs still charged to it keep its
        // `struct sock` until they are freed, and then find no user data.
        unsafe { bindings::sock_release(self.sock.as_ptr()) };
        // SAFETY: Nothing reaches the hook any more; `owner` is the reference taken in `new`.
        unsafe { (self.hook.release)(self.hook.owner) };
    }
}

#[macros::kunit_tests(rust_metaroce_tx_budget)]
mod tests {
    use super::*;
    use crate::net::skbuff::SkBuff;
    use core::sync::atomic::{AtomicUsize, Ordering};

    struct Owner {
        woken: AtomicUsize,
    }

    impl TxSpace for Owner {
        fn tx_space(this: ArcBorrow<'_, Self>) {
            this.woken.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn owner() -> Result<Arc<Owner>> {
        Ok(Arc::new(
            Owner {
                woken: AtomicUsize::new(0),
            },
            GFP_KERNEL,
        )?)
    }

    fn charged(budget: &TxBudget) -> Result<SkBuff> {
        let skb = SkBuff::alloc(1500, GFP_KERNEL)?;
        // SAFETY: A fresh skb of ours whose size does not change afterwards.
        unsafe { budget.charge(skb.as_raw()) };
        Ok(skb)
    }

    /// Charged skbs count until they are freed; the owner hears of room only once the charges
    /// fall below half of the budget, and nothing is left charged at the end.
    #[test]
    fn charges_count_until_freed_and_room_is_told() -> Result {
        let owner = owner()?;
        // The memory one packet is charged for (its `truesize`).
        let probe = TxBudget::new(1 << 20, owner.clone())?;
        let one = {
            let _skb = charged(&probe)?;
            probe.in_use()
        };
        assert!(one >= 1500);
        assert_eq!(probe.in_use(), 0);
        drop(probe);
        // Room for two and a half packets' memory: the third charge goes over.
        let budget = TxBudget::new(u32::try_from(2 * one + one / 2)?, owner.clone())?;
        assert!(budget.has_room());
        let mut held = KVec::new();
        for _ in 0..4 {
            held.push(charged(&budget)?, GFP_KERNEL)?;
        }
        assert_eq!(budget.in_use(), 4 * one);
        assert!(!budget.has_room());
        let woken = owner.woken.load(Ordering::Relaxed);
        // 3 left: still over the budget, nobody told.
        drop(held.pop());
        assert_eq!(owner.woken.load(Ordering::Relaxed), woken);
        assert!(!budget.has_room());
        // 2, 1 and then 0 left: below the budget, told each time.
        drop(held.pop());
        assert_eq!(owner.woken.load(Ordering::Relaxed), woken + 1);
        assert!(budget.has_room());
        drop(held.pop());
        drop(held.pop());
        assert_eq!(owner.woken.load(Ordering::Relaxed), woken + 3);
        assert_eq!(budget.in_use(), 0);
        Ok(())
    }

    /// An skb freed after its budget was dropped neither reaches the owner nor leaks the owner's
    /// reference.
    #[test]
    fn an_skb_outliving_its_budget_is_harmless() -> Result {
        let owner = owner()?;
        let budget = TxBudget::new(1 << 20, owner.clone())?;
        let skb = charged(&budget)?;
        drop(budget);
        drop(skb);
        assert_eq!(owner.woken.load(Ordering::Relaxed), 0);
        // Only our own reference is left.
        assert!(Arc::into_unique_or_drop(owner).is_some());
        Ok(())
    }
}
