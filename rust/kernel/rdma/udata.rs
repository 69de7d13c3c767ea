// SPDX-License-Identifier: GPL-2.0

//! Driver-specific system call data (`struct ib_udata`).
//!
//! C header: [`include/rdma/uverbs_ioctl.h`](srctree/include/rdma/uverbs_ioctl.h)
//!
//! A uverbs command carries a driver-specific request (user memory `inbuf`, `inlen` bytes) and
//! a driver-specific response buffer (`outbuf`, `outlen` bytes), whose layouts the provider
//! library and the driver agree on (`include/uapi/rdma/rdma_user_*.h`). [`Udata`] reads the
//! request with ib_core's compatibility rules (`_ib_copy_validate_udata_in`) and writes the
//! response truncated to the user's buffer (`_ib_respond_udata`). Requests and responses are
//! plain bytes: the driver encodes and decodes its structures explicitly, so no driver type
//! needs to be `FromBytes`/`AsBytes`.

use crate::{
    bindings,
    error::to_result,
    prelude::*, //
};
use core::marker::PhantomData;

/// The driver-specific data of the current uverbs system call.
///
/// # Invariants
///
/// `raw` is the valid, non-null `ib_udata` of the system call running on this thread, embedded
/// in its `uverbs_attr_bundle` (`driver_udata`), for `'a`.
pub struct Udata<'a> {
    raw: *mut bindings::ib_udata,
    _p: PhantomData<&'a mut bindings::ib_udata>,
}

impl<'a> Udata<'a> {
    /// Wraps `raw`, or `None` for a kernel caller (null udata).
    ///
    /// # Safety
    ///
    /// `raw` is null or the valid `driver_udata` of the uverbs system call running on this
    /// thread, and stays valid for `'a`.
    pub(crate) unsafe fn from_raw(raw: *mut bindings::ib_udata) -> Option<Self> {
        if raw.is_null() {
            None
        } else {
            // INVARIANT: Non-null, valid by the function's requirements.
            Some(Self {
                raw,
                _p: PhantomData,
            })
        }
    }

    /// Length of the user's request, in bytes.
    pub fn in_len(&self) -> usize {
        // SAFETY: Valid by the type invariant; ib_core does not change it during the call.
        unsafe { (*self.raw).inlen }
    }

    /// Length of the user's response buffer, in bytes.
    pub fn out_len(&self) -> usize {
        // SAFETY: As in `in_len`.
        unsafe { (*self.raw).outlen }
    }

    /// Copies the request into `req` (the driver's request structure as bytes).
    ///
    /// A request shorter than `req` is zero-filled (an older provider) unless it is shorter
    /// than `min_len` (`EINVAL`); a longer one is accepted only if every byte beyond `req` is
    /// zero (a newer provider asking for nothing we do not know), `EOPNOTSUPP` otherwise.
    /// `EFAULT` for an unreadable buffer. May sleep (user memory).
    pub fn read_request(&self, req: &mut [u8], min_len: usize) -> Result {
        if min_len > req.len() {
            return Err(EINVAL);
        }
        // SAFETY: `raw` is valid (type invariant); `req` is valid for writes of `req.len()`
        // bytes; the function copies at most that much and zero-fills the rest.
        to_result(unsafe {
            bindings::_ib_copy_validate_udata_in(
                self.raw,
                req.as_mut_ptr().cast(),
                req.len(),
                min_len,
            )
        })
    }

    /// Checks that the request is empty or all zeros (`EOPNOTSUPP` otherwise), for commands
    /// that take no driver-specific input.
    pub fn expect_no_request(&self) -> Result {
        if self.in_len() == 0 {
            return Ok(());
        }
        self.read_request(&mut [], 0)
    }

    /// Writes the response `resp`, truncated to the user's buffer; any rest of the buffer is
    /// zeroed. `EFAULT` for an unwritable buffer. May sleep (user memory).
    pub fn write_response(&self, resp: &[u8]) -> Result {
        // SAFETY: `raw` is valid (type invariant); `resp` is valid for reads of its length.
        to_result(unsafe {
            bindings::_ib_respond_udata(self.raw, resp.as_ptr().cast(), resp.len())
        })
    }

    /// Writes `data` to address `addr` of the calling process, for the few provider ABIs that
    /// return data outside the response buffer (librxe's SRQ resize: `struct mminfo` at the
    /// address its `rxe_modify_srq_cmd` names). `EFAULT` for an unwritable range. May sleep
    /// (user memory).
    pub fn write_user_at(&self, addr: u64, data: &[u8]) -> Result {
        let addr = usize::try_from(addr).map_err(|_| EFAULT)?;
        // A `Udata` exists only during the system call, on the calling process's thread, so
        // the address is resolved in that process's address space.
        crate::uaccess::UserSlice::new(crate::uaccess::UserPtr::from_addr(addr), data.len())
            .writer()
            .write_slice(data)
    }

    /// The user context of the system call (`rdma_udata_to_drv_context`).
    pub(crate) fn ucontext_raw(&self) -> *mut bindings::ib_ucontext {
        // SAFETY: `raw` is the `driver_udata` of a `uverbs_attr_bundle` (type invariant).
        unsafe { bindings::rdma_udata_to_ucontext(self.raw) }
    }
}
