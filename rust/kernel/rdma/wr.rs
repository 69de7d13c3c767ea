// SPDX-License-Identifier: GPL-2.0

//! Work requests: safe views of the `struct ib_send_wr` and `struct ib_recv_wr` chains handed
//! to `post_send` and `post_recv`, and their scatter/gather lists (`struct ib_sge`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! The chains belong to the caller and are valid only for the duration of the call: drivers
//! copy what they need (SGE lists included) before returning. A send work request is embedded
//! in a larger structure chosen by its opcode and the QP type (`ib_rdma_wr`, `ib_atomic_wr`,
//! `ib_ud_wr`); [`SendWr::op`] and [`SendWr::ud`] read only the one that applies.

use super::{
    ah::Ah,
    device::Driver,
    fastreg::MrLoan,
    mr::{
        AccessFlags,
        Mr, //
    },
    qp::QpType,
    ticket::{
        Owner,
        Ticket, //
    }, //
};
use crate::{
    bindings,
    prelude::*,
    sync::Arc, //
};
use core::marker::PhantomData;

/// A scatter/gather element (`struct ib_sge`).
///
/// For kernel QPs of a device without a DMA device, `addr` is a kernel virtual address and
/// `lkey` the PD's `local_dma_lkey` (or an MR's lkey); for user QPs, `addr` is a user address
/// within the MR named by `lkey`.
#[derive(Clone, Copy, Default)]
#[repr(transparent)]
pub struct Sge(bindings::ib_sge);

impl Sge {
    /// An SGE of `length` bytes at `addr` under `lkey`.
    pub const fn new(addr: u64, length: u32, lkey: u32) -> Self {
        Self(bindings::ib_sge { addr, length, lkey })
    }

    /// The address.
    pub const fn addr(&self) -> u64 {
        self.0.addr
    }

    /// The length in bytes.
    pub const fn length(&self) -> u32 {
        self.0.length
    }

    /// The local key.
    pub const fn lkey(&self) -> u32 {
        self.0.lkey
    }
}

/// `len` bytes at a kernel virtual address in the direct mapping, which the device may access
/// for as long as the owner of this value says ([`KernelBuf`], [`MrPage`]).
///
/// # Invariants
///
/// `addr..addr + len` lies in the kernel's direct mapping (both ends checked with
/// `virt_addr_valid` at creation) unless `len` is zero.
#[derive(Clone, Copy, Debug)]
struct DirectRange {
    addr: usize,
    len: u32,
}

impl DirectRange {
    const EMPTY: Self = Self { addr: 0, len: 0 };

    fn new(addr: u64, len: u32) -> Result<Self> {
        let addr = usize::try_from(addr).map_err(|_| EINVAL)?;
        if len != 0 {
            let last = addr.checked_add(len as usize - 1).ok_or(EINVAL)?;
            // SAFETY: `virt_addr_valid` only computes on the address values.
            let ok = unsafe { bindings::virt_addr_valid(addr) && bindings::virt_addr_valid(last) };
            if !ok {
                return Err(EINVAL);
            }
        }
        // INVARIANT: Checked above.
        Ok(Self { addr, len })
    }

    fn range(&self, offset: usize, n: usize) -> Result<usize> {
        let end = offset.checked_add(n).ok_or(EINVAL)?;
        if end > self.len as usize {
            return Err(EINVAL);
        }
        Ok(self.addr + offset)
    }

    /// # Safety
    ///
    /// The memory must be reserved for the device (its owner does not use it) for the call.
    unsafe fn read_at(&self, offset: usize, out: &mut [u8]) -> Result {
        let src = self.range(offset, out.len())?;
        if out.is_empty() {
            return Ok(());
        }
        // SAFETY: The range is inside the buffer, direct-mapped kernel memory (type invariant)
        // reserved for the device (function requirement); `out` is ours.
        unsafe { core::ptr::copy_nonoverlapping(src as *const u8, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// # Safety
    ///
    /// As for [`DirectRange::read_at`].
    unsafe fn write_at(&self, offset: usize, data: &[u8]) -> Result {
        let dst = self.range(offset, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        // SAFETY: As in `read_at`: the device may write the buffer while it is reserved.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), dst as *mut u8, data.len()) };
        Ok(())
    }
}

/// A buffer of a kernel consumer named by an SGE of a work request: `len` bytes at a kernel
/// virtual address.
///
/// On a device without a DMA device (`INFINIBAND_VIRT_DMA`), `ib_dma_map_single`/`_page`/`_sg`
/// hand kernel consumers the kernel virtual address of their memory as its "DMA address", so
/// the SGEs of kernel QPs carry direct-mapped addresses that the driver copies to and from,
/// the way a DMA engine would.
///
/// The memory belongs to the consumer, lent to the device from posting the work request until
/// the consumer learns that the request completed (or its queue was reset or destroyed). A
/// `KernelBuf` carries its request's [`Ticket`] number, and every access copies under the
/// queue state's lock only while the request is not retired: once its completion was handed to
/// the consumer (or the queue was reset or destroyed) the buffer answers `EINVAL` (see
/// [`super::ticket`]). Neither `Copy` nor `Clone`: a driver keeps it where it queues the
/// request and drops it when the request is done.
///
/// # Invariants
///
/// Either `owner` is `None` and `buf` is empty, or `buf` is the buffer of one SGE of the work
/// request numbered `owner` (of a kernel QP or SRQ), lent to the device while that request is
/// not retired.
#[derive(Debug)]
pub struct KernelBuf {
    buf: DirectRange,
    owner: Option<Owner>,
}

impl Default for KernelBuf {
    fn default() -> Self {
        Self::empty()
    }
}

impl KernelBuf {
    /// No buffer: zero bytes, which no access reaches (a placeholder in a free queue slot).
    pub const fn empty() -> Self {
        // INVARIANT: Empty.
        Self {
            buf: DirectRange::EMPTY,
            owner: None,
        }
    }

    /// The buffer of `sge` of the request of `ticket`. `EINVAL` if the range is not
    /// direct-mapped kernel memory (an address from user space, vmalloc space or nowhere).
    pub fn from_sge(ticket: &Ticket, sge: &Sge) -> Result<Self> {
        // INVARIANT: An SGE of the request `ticket` numbers, which is not retired while the
        // ticket exists unretired (and is checked at every access).
        Ok(Self {
            buf: DirectRange::new(sge.addr(), sge.length())?,
            owner: Some(ticket.owner().clone()),
        })
    }

    pub(super) fn owner(&self) -> Option<&Owner> {
        self.owner.as_ref()
    }

    /// Gives the buffer to another request (an SRQ request taken by a QP), which the caller
    /// checked owns it now.
    pub(super) fn set_owner(&mut self, owner: &Owner) {
        // INVARIANT: The caller moves the request, buffers included, to `owner`.
        self.owner = Some(owner.clone());
    }

    /// The length in bytes.
    pub fn len(&self) -> u32 {
        self.buf.len
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.buf.len == 0
    }

    /// Copies `out.len()` bytes at byte `offset` of the buffer into `out`; `EINVAL` past its
    /// end or once the request is retired. Any context.
    pub fn read_at(&self, offset: usize, out: &mut [u8]) -> Result {
        let Some(o) = &self.owner else {
            // Empty (type invariant): only an empty copy fits.
            return self.buf.range(offset, out.len()).map(|_| ());
        };
        // SAFETY: `while_live` runs the copy under the queue state's lock while the request
        // is not retired, so its memory is lent to the device (type invariant).
        o.while_live(|| unsafe { self.buf.read_at(offset, out) })?
    }

    /// Copies `data` to byte `offset` of the buffer; `EINVAL` past its end or once the request
    /// is retired. Any context.
    pub fn write_at(&self, offset: usize, data: &[u8]) -> Result {
        let Some(o) = &self.owner else {
            return self.buf.range(offset, data.len()).map(|_| ());
        };
        // SAFETY: As in `read_at`.
        o.while_live(|| unsafe { self.buf.write_at(offset, data) })?
    }
}

/// A page of a fast-register MR of a kernel consumer, as `ib_sg_to_pages` reports it:
/// `page_size` bytes at the "DMA address" `addr` (a kernel virtual address on a device without
/// a DMA device).
///
/// The page is lent to the device while the mapping it belongs to is registered: from the
/// registration work request until the consumer learns that the registration ended (see
/// [`super::fastreg`]). A page carries its MR's loan and its mapping's generation, and every
/// access copies under the loan's lock only while that generation is registered; otherwise it
/// answers `EINVAL`. One mapping may be registered again and again (`ib_map_mr_sg` once,
/// several `IB_WR_REG_MR`), so a page is `Clone`: the driver keeps the mapped list and the
/// registered one.
///
/// # Invariants
///
/// `page` is a page of the mapping of generation `gen` of the fast-register MR whose loan is
/// `loan`, lent to the device while `loan` has that generation registered.
#[derive(Clone, Debug)]
pub struct MrPage {
    page: DirectRange,
    loan: Arc<MrLoan>,
    gen: u64,
}

impl MrPage {
    /// The page at `addr` of `page_size` bytes of the mapping `gen` of the MR whose loan is
    /// `loan` (`EINVAL` for 0 or memory outside the direct mapping).
    pub(super) fn of_mr_page(
        addr: u64,
        page_size: u32,
        loan: &Arc<MrLoan>,
        gen: u64,
    ) -> Result<Self> {
        if page_size == 0 {
            return Err(EINVAL);
        }
        // INVARIANT: Called from `ib_sg_to_pages`'s page callback in the mapping `gen`.
        Ok(Self {
            page: DirectRange::new(addr, page_size)?,
            loan: loan.clone(),
            gen,
        })
    }

    /// Copies `out.len()` bytes at byte `offset` of the page into `out`; `EINVAL` past its end
    /// or when the page is not lent. Any context.
    pub fn read_at(&self, offset: usize, out: &mut [u8]) -> Result {
        self.loan.while_lent(self.gen, || {
            // SAFETY: `while_lent` runs the copy under the loan's lock while the page's mapping
            // is registered, so the page is lent to the device (type invariant).
            unsafe { self.page.read_at(offset, out) }
        })?
    }

    /// Copies `data` to byte `offset` of the page; `EINVAL` past its end or when the page is
    /// not lent. Any context.
    pub fn write_at(&self, offset: usize, data: &[u8]) -> Result {
        self.loan.while_lent(self.gen, || {
            // SAFETY: As in `read_at`.
            unsafe { self.page.write_at(offset, data) }
        })?
    }
}

impl core::fmt::Debug for Sge {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Sge")
            .field("addr", &self.addr())
            .field("length", &self.length())
            .field("lkey", &self.lkey())
            .finish()
    }
}

/// # Safety
///
/// If `num` is positive, `list` points to `num` valid SGEs that stay valid for `'a`.
unsafe fn sge_slice<'a>(list: *const bindings::ib_sge, num: c_int) -> Result<&'a [Sge]> {
    let n = usize::try_from(num).map_err(|_| EINVAL)?;
    if n == 0 {
        return Ok(&[]);
    }
    if list.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: `list` holds `n` SGEs valid for `'a` (function requirement); `Sge` is
    // `repr(transparent)`.
    Ok(unsafe { core::slice::from_raw_parts(list.cast::<Sge>(), n) })
}

/// Send flags (`enum ib_send_flags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendFlags(u32);

impl SendFlags {
    /// `IB_SEND_FENCE`: wait for earlier READs and atomics.
    pub fn fence(self) -> bool {
        self.0 & bindings::ib_send_flags_IB_SEND_FENCE as u32 != 0
    }

    /// `IB_SEND_SIGNALED`: generate a completion on success.
    pub fn signaled(self) -> bool {
        self.0 & bindings::ib_send_flags_IB_SEND_SIGNALED as u32 != 0
    }

    /// `IB_SEND_SOLICITED`: set the solicited event bit.
    pub fn solicited(self) -> bool {
        self.0 & bindings::ib_send_flags_IB_SEND_SOLICITED as u32 != 0
    }

    /// `IB_SEND_INLINE`: the SGEs' data is copied at post time.
    pub fn inline(self) -> bool {
        self.0 & bindings::ib_send_flags_IB_SEND_INLINE as u32 != 0
    }

    /// The raw bits.
    pub fn bits(self) -> u32 {
        self.0
    }
}

/// The operation of a send work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    /// `IB_WR_SEND`.
    Send,
    /// `IB_WR_SEND_WITH_IMM`, immediate data in host order.
    SendWithImm {
        /// Immediate data.
        imm: u32,
    },
    /// `IB_WR_SEND_WITH_INV`.
    SendWithInv {
        /// R_Key the responder invalidates.
        rkey: u32,
    },
    /// `IB_WR_RDMA_WRITE`.
    RdmaWrite {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// `IB_WR_RDMA_WRITE_WITH_IMM`.
    RdmaWriteWithImm {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Immediate data in host order.
        imm: u32,
    },
    /// `IB_WR_RDMA_READ`.
    RdmaRead {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// `IB_WR_ATOMIC_CMP_AND_SWP`.
    CmpSwap {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Compare operand.
        compare: u64,
        /// Swap operand.
        swap: u64,
    },
    /// `IB_WR_ATOMIC_FETCH_AND_ADD`.
    FetchAdd {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Addend.
        add: u64,
    },
    /// `IB_WR_REG_MR`: registers the pages mapped into a fast-register MR (see
    /// [`SendWr::reg_mr`] for the MR) under `key` with `access`.
    RegMr {
        /// The new key (L_Key and R_Key; its low 8 bits are the consumer's).
        key: u32,
        /// The access rights.
        access: AccessFlags,
    },
    /// `IB_WR_LOCAL_INV`: invalidates the MR or memory window of `rkey`.
    LocalInv {
        /// The key to invalidate.
        rkey: u32,
    },
    /// Any other opcode (masked atomics, flush, ...), by its C value; its structure is not
    /// read.
    Other(u32),
}

/// The destination of a send on a datagram QP (`struct ib_ud_wr`).
pub struct UdDest<'a, T: Driver> {
    /// The address handle (valid for the call; copy what is needed from it).
    pub ah: &'a Ah<T>,
    /// Destination QP number.
    pub remote_qpn: u32,
    /// Q_Key; if its top bit is set the QP's own Q_Key is used instead.
    pub remote_qkey: u32,
    /// P_Key index (GSI only).
    pub pkey_index: u16,
}

/// One send work request of a chain.
///
/// # Invariants
///
/// `wr` is valid for `'a` and embedded in the structure its opcode and `qp_type` call for;
/// on a datagram QP its `ah` is an AH of driver `T`.
pub struct SendWr<'a, T: Driver> {
    wr: &'a bindings::ib_send_wr,
    qp_type: QpType,
    _p: PhantomData<T>,
}

impl<'a, T: Driver> SendWr<'a, T> {
    pub(super) fn as_raw(&self) -> *const bindings::ib_send_wr {
        self.wr
    }

    /// The consumer's identifier, returned in the completion.
    pub fn wr_id(&self) -> u64 {
        // SAFETY: Both union members are 64-bit values; reading the bits as `u64` is valid.
        unsafe { self.wr.__bindgen_anon_1.wr_id }
    }

    /// The scatter/gather list (`EINVAL` for a negative count or a missing list).
    pub fn sges(&self) -> Result<&'a [Sge]> {
        // SAFETY: The chain's SGE lists are valid for the call (type invariant).
        unsafe { sge_slice(self.wr.sg_list, self.wr.num_sge) }
    }

    /// The flags.
    pub fn flags(&self) -> SendFlags {
        SendFlags(self.wr.send_flags as u32)
    }

    /// The C opcode.
    pub fn opcode(&self) -> u32 {
        self.wr.opcode
    }

    /// The operation and its arguments.
    pub fn op(&self) -> SendOp {
        let wr: *const bindings::ib_send_wr = self.wr;
        let imm = || {
            // SAFETY: Both union members are 32-bit integers.
            u32::from_be(unsafe { self.wr.ex.imm_data })
        };
        // SAFETY (RDMA and atomic arms): ib_core's contract: a work request with an RDMA
        // opcode is the `wr` field (offset 0) of a `struct ib_rdma_wr`, one with an atomic
        // opcode that of a `struct ib_atomic_wr` (type invariant).
        match self.wr.opcode {
            bindings::ib_wr_opcode_IB_WR_SEND => SendOp::Send,
            bindings::ib_wr_opcode_IB_WR_SEND_WITH_IMM => SendOp::SendWithImm { imm: imm() },
            bindings::ib_wr_opcode_IB_WR_SEND_WITH_INV => SendOp::SendWithInv {
                // SAFETY: Both union members are 32-bit integers.
                rkey: unsafe { self.wr.ex.invalidate_rkey },
            },
            op @ (bindings::ib_wr_opcode_IB_WR_RDMA_WRITE
            | bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM
            | bindings::ib_wr_opcode_IB_WR_RDMA_READ) => {
                // SAFETY: See above.
                let r = unsafe { &*wr.cast::<bindings::ib_rdma_wr>() };
                let (remote_addr, rkey) = (r.remote_addr, r.rkey);
                match op {
                    bindings::ib_wr_opcode_IB_WR_RDMA_WRITE => {
                        SendOp::RdmaWrite { remote_addr, rkey }
                    }
                    bindings::ib_wr_opcode_IB_WR_RDMA_READ => {
                        SendOp::RdmaRead { remote_addr, rkey }
                    }
                    _ => SendOp::RdmaWriteWithImm {
                        remote_addr,
                        rkey,
                        imm: imm(),
                    },
                }
            }
            bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP => {
                // SAFETY: See above.
                let a = unsafe { &*wr.cast::<bindings::ib_atomic_wr>() };
                SendOp::CmpSwap {
                    remote_addr: a.remote_addr,
                    rkey: a.rkey,
                    compare: a.compare_add,
                    swap: a.swap,
                }
            }
            bindings::ib_wr_opcode_IB_WR_REG_MR => {
                // SAFETY: ib_core's contract: a REG_MR work request is the `wr` field (offset
                // 0) of a `struct ib_reg_wr` (type invariant).
                let r = unsafe { &*wr.cast::<bindings::ib_reg_wr>() };
                SendOp::RegMr {
                    key: r.key,
                    access: AccessFlags::from_raw(r.access as u32),
                }
            }
            bindings::ib_wr_opcode_IB_WR_LOCAL_INV => SendOp::LocalInv {
                // SAFETY: Both union members are 32-bit integers.
                rkey: unsafe { self.wr.ex.invalidate_rkey },
            },
            bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => {
                // SAFETY: See above.
                let a = unsafe { &*wr.cast::<bindings::ib_atomic_wr>() };
                SendOp::FetchAdd {
                    remote_addr: a.remote_addr,
                    rkey: a.rkey,
                    add: a.compare_add,
                }
            }
            other => SendOp::Other(other),
        }
    }

    /// The MR of a registration work request (`IB_WR_REG_MR`): `None` for other opcodes;
    /// `EINVAL` if the request names no MR.
    pub fn reg_mr(&self) -> Result<Option<&'a Mr<T>>> {
        if self.wr.opcode != bindings::ib_wr_opcode_IB_WR_REG_MR {
            return Ok(None);
        }
        let wr: *const bindings::ib_send_wr = self.wr;
        // SAFETY: A REG_MR work request is embedded in a `struct ib_reg_wr` (type invariant).
        let r = unsafe { &*wr.cast::<bindings::ib_reg_wr>() };
        if r.mr.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: A kernel consumer registers an MR it allocated on this device (driver `T`)
        // and keeps it for the call.
        Ok(Some(unsafe { Mr::from_raw(r.mr) }))
    }

    /// The destination, on a datagram QP (UD, GSI, SMI); `None` on connected QPs. `EINVAL`
    /// if the work request names no AH.
    pub fn ud(&self) -> Result<Option<UdDest<'a, T>>> {
        if !self.qp_type.is_datagram() {
            return Ok(None);
        }
        let wr: *const bindings::ib_send_wr = self.wr;
        // SAFETY: On a datagram QP every send work request is the `wr` field (offset 0) of a
        // `struct ib_ud_wr` valid for `'a` (type invariant).
        let ud = unsafe { &*wr.cast::<bindings::ib_ud_wr>() };
        if ud.ah.is_null() {
            return Err(EINVAL);
        }
        Ok(Some(UdDest {
            // SAFETY: A non-null `ah` is a live AH of driver `T` that the consumer keeps for
            // the call (type invariant).
            ah: unsafe { Ah::from_raw(ud.ah) },
            remote_qpn: ud.remote_qpn & 0xff_ffff,
            remote_qkey: ud.remote_qkey,
            pkey_index: ud.pkey_index,
        }))
    }
}

/// A chain of send work requests, iterated in posting order.
///
/// # Invariants
///
/// `next` is null or the next request of a chain valid for `'a`, every request embedded as
/// its opcode and `qp_type` call for.
pub struct SendWrList<'a, T: Driver> {
    next: *const bindings::ib_send_wr,
    qp_type: QpType,
    _p: PhantomData<(&'a bindings::ib_send_wr, T)>,
}

impl<'a, T: Driver> SendWrList<'a, T> {
    /// # Safety
    ///
    /// `first` is null or a chain of send work requests valid for `'a`, posted on a QP of
    /// `qp_type` of driver `T` (ib_core's `post_send` contract).
    pub(super) unsafe fn new(first: *const bindings::ib_send_wr, qp_type: QpType) -> Self {
        Self {
            next: first,
            qp_type,
            _p: PhantomData,
        }
    }
}

impl<'a, T: Driver> Iterator for SendWrList<'a, T> {
    type Item = SendWr<'a, T>;

    fn next(&mut self) -> Option<SendWr<'a, T>> {
        // SAFETY: `next` is null or valid for `'a` (type invariant).
        let wr = unsafe { self.next.as_ref() }?;
        self.next = wr.next;
        Some(SendWr {
            wr,
            qp_type: self.qp_type,
            _p: PhantomData,
        })
    }
}

/// One receive work request of a chain.
///
/// # Invariants
///
/// `wr` and its SGE list are valid for `'a`.
pub struct RecvWr<'a> {
    wr: &'a bindings::ib_recv_wr,
}

impl<'a> RecvWr<'a> {
    pub(super) fn as_raw(&self) -> *const bindings::ib_recv_wr {
        self.wr
    }

    /// The consumer's identifier, returned in the completion.
    pub fn wr_id(&self) -> u64 {
        // SAFETY: Both union members are 64-bit values.
        unsafe { self.wr.__bindgen_anon_1.wr_id }
    }

    /// The scatter list (`EINVAL` for a negative count or a missing list).
    pub fn sges(&self) -> Result<&'a [Sge]> {
        // SAFETY: The SGE list is valid for `'a` (type invariant).
        unsafe { sge_slice(self.wr.sg_list, self.wr.num_sge) }
    }
}

/// A chain of receive work requests, iterated in posting order.
///
/// # Invariants
///
/// `next` is null or the next request of a chain valid for `'a`.
pub struct RecvWrList<'a> {
    next: *const bindings::ib_recv_wr,
    _p: PhantomData<&'a bindings::ib_recv_wr>,
}

impl<'a> RecvWrList<'a> {
    /// # Safety
    ///
    /// `first` is null or a chain of receive work requests valid for `'a`.
    pub(super) unsafe fn new(first: *const bindings::ib_recv_wr) -> Self {
        Self {
            next: first,
            _p: PhantomData,
        }
    }
}

impl<'a> Iterator for RecvWrList<'a> {
    type Item = RecvWr<'a>;

    fn next(&mut self) -> Option<RecvWr<'a>> {
        // SAFETY: `next` is null or valid for `'a` (type invariant).
        let wr = unsafe { self.next.as_ref() }?;
        self.next = wr.next;
        Some(RecvWr { wr })
    }
}

/// A failed post: the error and the first work request that was not posted (`bad_wr`).
pub struct PostError<W> {
    /// The error returned to the consumer.
    pub error: Error,
    /// The first request not posted; those before it were. `None` when the chain was empty
    /// (a user QP's doorbell: uverbs `POST_SEND` without requests), so there is none to name.
    pub bad_wr: Option<W>,
}
