// SPDX-License-Identifier: GPL-2.0

//! RDMA (ib_core) support.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/rdma_netlink.h`](srctree/include/rdma/rdma_netlink.h).
//!
//! - [`device`]: typed `struct ib_device` with driver data, its `ib_device_ops` table built from a
//!   `#[vtable]` trait, registration and (queued) unregistration, user contexts.
//! - [`link`]: `rdma_link_ops` registration (`rdma link add NAME type TYPE netdev DEV`).
//! - [`pd`], [`cq`], [`qp`], [`srq`], [`ah`], [`mr`], [`mw`]: verbs objects with the driver's data inside the memory
//!   ib_core allocates (MRs: allocated by the abstraction), created and destroyed through the
//!   `Driver` hooks; [`wr`]: safe views of work-request chains and SGEs; [`ticket`]: the
//!   numbering that keeps a kernel consumer's buffers out of the driver's reach once their
//!   request completed; [`fastreg`]: the same for fast-register MR pages once their
//!   registration ended.
//! - [`udata`]: driver-specific request and response of a uverbs call; [`mmap`]: queue memory
//!   shared with a process through the uverbs file; [`umem`]: pinned user memory with
//!   non-sleeping byte copies; [`umem_odp`]: on-demand paging user memory (MMU notifiers)
//!   with the same copies over the pages that are present.
//! - [`trace`]: the MetaRoCE transport's tracepoints behind safe functions.
//! - [`ConstValue`], [`init_const`]: in-place initialisation from a constant, for values too
//!   large for a stack (e.g. into a `VBox` with `VBox::init`).
//!
//! The design (who owns and frees what, which context may call which method) is described in
//! `Documentation/metaroce/abstractions.rst`.

pub mod ah;
pub mod cq;
pub mod device;
pub mod fastreg;
pub mod link;
pub mod mmap;
pub mod mr;
pub mod mw;
pub mod pd;
pub mod qp;
pub mod srq;
pub mod ticket;
pub mod trace;
pub mod udata;
pub mod umem;
pub mod umem_odp;
pub mod workqueue;
pub mod wr;

/// A random 32-bit value from the kernel's CRNG (`get_random_u32()`): for what a remote peer
/// must not predict, such as the variable byte of a memory key or a connection id. Any context.
pub fn get_random_u32() -> u32 {
    // SAFETY: `get_random_u32` has no preconditions: it may be called from any context and
    // only reads and updates the per-CPU CRNG state it owns.
    unsafe { crate::bindings::get_random_u32() }
}

use pin_init::Init;

/// A value known at compile time, named by an implementing (marker) type.
///
/// With [`init_const`] the value is written straight into its final memory: the constant's
/// bytes are copied from read-only data, so no function builds or passes the value on its
/// stack (`VBox::new(CONST, flags)` takes it by value).
pub trait ConstValue {
    /// The type of the value.
    type Target;
    /// The value.
    const VALUE: Self::Target;
}

/// An initialiser that writes [`ConstValue::VALUE`] of `C` in place; it cannot fail.
///
/// ```ignore
/// struct Blank;
/// impl ConstValue for Blank {
///     type Target = [u64; 16384];
///     const VALUE: [u64; 16384] = [0; 16384];
/// }
/// let b = VBox::init(init_const::<Blank>(), GFP_KERNEL)?;
/// ```
pub fn init_const<C: ConstValue>() -> impl Init<C::Target> {
    let write = |slot: *mut C::Target| {
        // SAFETY: `slot` is valid for writing a `C::Target` (contract of `__init`, the only
        // caller of the closure).
        unsafe { slot.write(C::VALUE) };
        Ok(())
    };
    // SAFETY: The closure initialises `*slot` completely (a write of a whole value) and always
    // succeeds. The written value is a fresh use of the constant, as if the caller had named
    // it: `C::VALUE` is an operand of the write itself, which compiles to a copy from the
    // constant's read-only allocation into `slot`.
    unsafe { pin_init::init_from_closure(write) }
}
