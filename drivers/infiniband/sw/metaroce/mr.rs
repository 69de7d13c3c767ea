// SPDX-License-Identifier: GPL-2.0

//! Memory regions the transport can address by key: user MRs (registration over pinned user
//! memory) and fast-register MRs of kernel consumers (pages mapped with `ib_map_mr_sg`, made
//! valid by a REG_MR work request and invalid again by a local invalidate or a SEND with
//! invalidate), memory windows of user processes (an R_Key for a range of a user MR, set by a
//! bind work request), and the lookup the transport uses to validate an (L_Key or R_Key, PD,
//! virtual address, length, access) tuple and move bytes at a virtual address of the region.
//!
//! Memory windows follow rdma_rxe (type 1 and type 2B): a type 1 window is valid from its
//! allocation, bound and re-bound by `ibv_bind_mw` (length 0 leaves it bound to nothing) and
//! cannot be invalidated; a type 2 window is free until a bind work request binds it, can then
//! be used only through the QP that bound it, and is free again after a local invalidate, a
//! SEND with invalidate naming it, or the destruction of that QP. A window is an entry of the
//! same table as the regions; it names its MR by index, and an MR with windows bound to it
//! cannot be deregistered (`EBUSY`), so the index stays good while the window is bound.
//!
//! Regions live in the device's table, keyed by their index (`key >> 8`), under an
//! IRQ-disabling spinlock. Lookups copy while holding it and never hand the region out, so
//! deregistration and invalidation (which change the table under the lock) know nobody is
//! still copying; pinned user memory is released in process context.

use crate::device::{MetaRoceDev, MetaRoceDriver};
use crate::odp::OdpMem;
use crate::verbs::MetaRoceMr;
use core::num::NonZeroUsize;
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNode};
use kernel::rdma::mr::{AccessFlags, Mr, MrKeys, MrSgList, MrType, UserMrRequest};
use kernel::rdma::mw::{Mw, MwType};
use kernel::rdma::pd::{Pd, PdId};
use kernel::rdma::umem::Umem;
use kernel::rdma::umem_odp::UmemOdp;
use kernel::rdma::wr::MrPage;
use kernel::sync::Arc;

/// The access rights a MetaRoCE MR may have (beyond the optional hints, which are ignored).
/// ib_core grants `FLUSH_GLOBAL` only on devices that report `IB_DEVICE_FLUSH_GLOBAL` (RoCEv2
/// devices); `FLUSH_PERSISTENT` is never offered: MetaRoCE cannot make memory persistent.
const SUPPORTED: AccessFlags = AccessFlags::LOCAL_WRITE
    .union(AccessFlags::REMOTE_WRITE)
    .union(AccessFlags::REMOTE_READ)
    .union(AccessFlags::REMOTE_ATOMIC)
    .union(AccessFlags::MW_BIND)
    .union(AccessFlags::FLUSH_GLOBAL);

/// The rights a bind work request may give a memory window (rdma_rxe's set: an MR's rights,
/// of which only the remote ones mean anything for a window, and zero-based addressing).
const WINDOW_RIGHTS: AccessFlags = SUPPORTED
    .union(AccessFlags::ZERO_BASED)
    .union(AccessFlags::OPTIONAL);

/// The remote rights.
const REMOTE: AccessFlags = AccessFlags::REMOTE_READ
    .union(AccessFlags::REMOTE_WRITE)
    .union(AccessFlags::REMOTE_ATOMIC);

/// Most pages of a fast-register MR (`max_fast_reg_page_list_len`; rdma_rxe's figure).
pub(crate) const MAX_FAST_REG_PAGES: u32 = 512;

/// The memory behind a region.
enum Backing {
    /// Pinned user memory.
    User(Umem),
    /// On-demand paging user memory (`IB_ACCESS_ON_DEMAND`): a page that is not present fails
    /// a copy with [`MrError::NotPresent`] and is faulted in later (`odp.rs`).
    Odp(Arc<OdpMem>),
    /// The pages of a kernel consumer's fast-register MR, as its last registration mapped
    /// them; `first_off` is the region's offset in the first page.
    Fast {
        pages: KVec<MrPage>,
        page_size: usize,
        first_off: usize,
    },
    /// A memory window: no memory of its own, the range `iova..iova + len` (virtual addresses
    /// of the MR it is bound to) of that MR's.
    Window(Window),
}

/// A memory window's binding.
struct Window {
    ty: MwType,
    /// The index of the MR the window is bound to; `None` while unbound (a type 1 window
    /// re-bound with length 0, a free type 2 window).
    mr: Option<u32>,
    /// Type 2: the number of the QP that bound it, the only one it may be used through.
    qpn: u32,
    /// Requests address the window from 0 (`IB_ZERO_BASED`) instead of by the MR's virtual
    /// addresses.
    zero_based: bool,
}

/// An addressable memory region, or a memory window.
pub(crate) struct Region {
    /// 0 for a window (it has no L_Key).
    lkey: u32,
    /// 0 when the region grants no remote access (the R_Key is then unusable).
    rkey: u32,
    pd: PdId,
    access: AccessFlags,
    iova: u64,
    len: u64,
    /// Fast-register MRs are invalid (unusable) until registered and after invalidation;
    /// user MRs are always valid. Windows: a type 1 window is valid from its allocation, a
    /// type 2 window while it is bound.
    valid: bool,
    mem: Backing,
}

/// The device's addressable memory regions, by index.
pub(crate) type MrTable = RBTree<u32, Region>;

/// Which key of a region a request names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyKind {
    /// An L_Key, from a local SGE.
    Local,
    /// An R_Key, from a RETH or an AtomicETH received by QP `qpn` (a type 2 memory window
    /// answers only the QP that bound it).
    Remote { qpn: u32 },
}

/// Why a memory access was refused (the transport maps it to a completion status or NAK).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MrError {
    /// No valid region has this key (or it names a region of another kind).
    BadKey,
    /// The region belongs to another PD.
    BadPd,
    /// The region does not grant the access.
    Access,
    /// The bytes are not all inside the region, or the address is misaligned for an atomic.
    Range,
    /// The region is valid and grants the access, but pages of an on-demand paging region
    /// are not present: a fault was asked for (`odp.rs`); retry later.
    NotPresent,
}

/// Checks rights asked for a new region, as ib_core does, plus what MetaRoCE implements
/// (on-demand paging only for user regions, `odp_ok`).
fn check_access(access: AccessFlags, odp_ok: bool) -> Result {
    let mut mandatory = access.difference(AccessFlags::OPTIONAL);
    if odp_ok && mandatory.contains(AccessFlags::ON_DEMAND) {
        mandatory = mandatory.difference(AccessFlags::ON_DEMAND.union(AccessFlags::HUGETLB));
    }
    if mandatory.intersects(AccessFlags::REMOTE_WRITE.union(AccessFlags::REMOTE_ATOMIC))
        && !mandatory.contains(AccessFlags::LOCAL_WRITE)
    {
        return Err(EINVAL);
    }
    if !SUPPORTED.contains(mandatory) {
        // Persistent memory, and on-demand paging but for user regions: not implemented.
        return Err(EOPNOTSUPP);
    }
    Ok(())
}

/// A new key for table index `index`: the index in the upper 24 bits, a random byte below, so
/// that a key deregistered and its index reused does not name the new region (a remote peer
/// holding the old R_Key has a 1 in 256 chance, as with rdma_rxe's keys, instead of a
/// certainty). Index 0 is never handed out, so no key is 0.
fn new_key(index: usize) -> u32 {
    ((index as u32) << 8) | (kernel::rdma::get_random_u32() & 0xff)
}

/// Enters `region` in the device's table under a new index; returns the index and the key.
fn insert(dev: &MetaRoceDev, make: impl FnOnce(u32) -> Region) -> Result<(usize, u32)> {
    let index = dev.alloc_mr_index()?;
    let key = new_key(index);
    let node = match RBTreeNode::new(index as u32, make(key), GFP_KERNEL) {
        Ok(node) => node,
        Err(e) => {
            dev.free_mr_index(index);
            return Err(e);
        }
    };
    // The index was free, so nothing is replaced.
    let old = dev.mrs.lock().insert(node);
    drop(old);
    Ok((index, key))
}

/// Registers user memory (`reg_user_mr`): pins it, takes a key and enters the region in the
/// device's table. Process context of the owning process, may sleep.
pub(crate) fn reg_user_mr(
    pd: &Pd<MetaRoceDriver>,
    req: &UserMrRequest,
) -> Result<(MrKeys, impl PinInit<MetaRoceMr, Error>)> {
    let dev = pd.device();
    // ib_core refuses IB_ACCESS_ON_DEMAND on devices that do not report on-demand paging
    // (native devices); checked again.
    check_access(req.access, !dev.native)?;
    if req.length == 0 || req.iova.checked_add(req.length).is_none() {
        return Err(EINVAL);
    }
    let mem = if req.access.contains(AccessFlags::ON_DEMAND) {
        // Implicit ODP (the whole address space from 0) is not implemented, as in rdma_rxe.
        if req.start == 0 && req.length == u64::MAX {
            return Err(EOPNOTSUPP);
        }
        Backing::Odp(OdpMem::new(
            UmemOdp::get(pd, req.start, req.length, req.access)?,
            pd.id(),
            dev.odp_faults(),
        )?)
    } else {
        Backing::User(Umem::pin(pd, req.start, req.length, req.access)?)
    };
    let remote = req.access.intersects(REMOTE);
    let odp = matches!(mem, Backing::Odp(_));
    let (index, lkey) = insert(dev, |key| Region {
        lkey: key,
        rkey: if remote { key } else { 0 },
        pd: pd.id(),
        access: req.access,
        iova: req.iova,
        len: req.length,
        valid: true,
        mem,
    })?;
    if odp {
        dev.objects
            .odp_mrs
            .fetch_add(1, core::sync::atomic::Ordering::Relaxed);
    }
    Ok((
        MrKeys {
            lkey,
            rkey: if remote { lkey } else { 0 },
        },
        MetaRoceMr::new(index, req.access, true, KVec::new()),
    ))
}

/// Allocates a fast-register MR (`alloc_mr`) with room for `max_num_sg` pages: an invalid
/// region in the table until a REG_MR work request registers it. Process context.
pub(crate) fn alloc_mr(
    pd: &Pd<MetaRoceDriver>,
    mr_type: MrType,
    max_num_sg: u32,
) -> Result<(MrKeys, impl PinInit<MetaRoceMr, Error>)> {
    if mr_type != MrType::MemReg {
        return Err(EINVAL);
    }
    if max_num_sg == 0 || max_num_sg > MAX_FAST_REG_PAGES {
        return Err(EINVAL);
    }
    let n = max_num_sg as usize;
    // The registered list and the one `map_mr_sg` fills next, both allocated here so that
    // neither mapping nor registering allocates.
    let pages = KVec::with_capacity(n, GFP_KERNEL)?;
    let staging = KVec::with_capacity(n, GFP_KERNEL)?;
    let (index, key) = insert(pd.device(), |key| Region {
        lkey: key,
        rkey: key,
        pd: pd.id(),
        access: AccessFlags::NONE,
        iova: 0,
        len: 0,
        valid: false,
        mem: Backing::Fast {
            pages,
            page_size: 0,
            first_off: 0,
        },
    })?;
    Ok((
        MrKeys {
            lkey: key,
            rkey: key,
        },
        MetaRoceMr::new(index, AccessFlags::NONE, true, staging),
    ))
}

/// Maps a scatter/gather list into a fast-register MR's next page list (`map_mr_sg`).
pub(crate) fn map_mr_sg(mr: &Mr<MetaRoceDriver>, sg: MrSgList<'_, MetaRoceDriver>) -> Result<u32> {
    mr.staging.lock().clear();
    sg.to_pages()
}

/// Appends a page to the list `map_mr_sg` is filling; `ENOMEM` when it is full.
pub(crate) fn mr_set_page(mr: &Mr<MetaRoceDriver>, page: MrPage) -> Result {
    let mut st = mr.staging.lock();
    if st.len() == st.capacity() {
        return Err(ENOMEM);
    }
    // Within the capacity reserved at allocation: no allocation happens.
    st.push(page, GFP_ATOMIC).map_err(|_| ENOMEM)
}

/// Executes a REG_MR work request of a kernel QP of PD `pd`: the MR's mapped pages become
/// a valid region under `key` with `access`, at the MR's I/O virtual address and length as
/// they are now. The MR must be invalid (`EINVAL` otherwise, as for a foreign PD, a key
/// whose index is not the MR's, or rights MetaRoCE does not offer). Any context.
pub(crate) fn register(mr: &Mr<MetaRoceDriver>, pd: PdId, key: u32, access: AccessFlags) -> Result {
    check_access(access, false)?;
    let page_size = mr.page_size() as usize;
    let (iova, len) = (mr.iova(), mr.length());
    if key >> 8 != mr.index as u32 || mr.pd_id() != pd || !page_size.is_power_of_two() {
        return Err(EINVAL);
    }
    let first_off = (iova & (page_size as u64 - 1)) as usize;
    let staging = mr.staging.lock();
    let span = (first_off as u64).checked_add(len).ok_or(EINVAL)?;
    if span > (staging.len() as u64).saturating_mul(page_size as u64) {
        return Err(EINVAL);
    }
    let mut table = mr.device().mrs.lock();
    let r = table.get_mut(&(mr.index as u32)).ok_or(EINVAL)?;
    let Backing::Fast {
        pages,
        page_size: ps,
        first_off: fo,
    } = &mut r.mem
    else {
        return Err(EINVAL);
    };
    if r.valid {
        return Err(EINVAL);
    }
    pages.clear();
    // The capacity of both lists is `max_num_sg`: no allocation happens.
    pages.extend_from_slice(&staging, GFP_ATOMIC)?;
    *ps = page_size;
    *fo = first_off;
    r.lkey = key;
    r.rkey = if access.intersects(REMOTE) { key } else { 0 };
    r.access = access;
    r.iova = iova;
    r.len = len;
    r.valid = true;
    Ok(())
}

/// Takes a region out of the table (`dereg_mr`); pinned user memory is unpinned when the
/// returned value drops, outside the table lock. `EBUSY` (and nothing changes) while memory
/// windows are bound to it. Process context.
pub(crate) fn remove(mr: &Mr<MetaRoceDriver>) -> Result {
    let dev = mr.device();
    let index = mr.index as u32;
    let taken = {
        let mut table = dev.mrs.lock();
        let windows = dev.objects.mws.load(core::sync::atomic::Ordering::Relaxed) != 0;
        if windows
            && table
                .values()
                .any(|r| matches!(&r.mem, Backing::Window(w) if w.mr == Some(index)))
        {
            return Err(EBUSY);
        }
        table.remove(&index)
    };
    // No copy reaches the region now; a fault in progress may still hold its memory.
    if let Some(Backing::Odp(umem)) = taken.as_ref().map(|r| &r.mem) {
        dev.odp_faults().forget(umem);
        dev.objects
            .odp_mrs
            .fetch_sub(1, core::sync::atomic::Ordering::Relaxed);
    }
    drop(taken);
    Ok(())
}

/// Allocates a memory window of `pd` (`alloc_mw`): a type 1 window is valid (bound to
/// nothing), a type 2 window free. Returns its R_Key. Process context.
pub(crate) fn alloc_mw(pd: &Pd<MetaRoceDriver>, ty: MwType) -> Result<u32> {
    let dev = pd.device();
    let index = dev.alloc_mw_index()?;
    let key = new_key(index);
    let region = Region {
        lkey: 0,
        rkey: key,
        pd: pd.id(),
        access: AccessFlags::NONE,
        iova: 0,
        len: 0,
        valid: ty == MwType::Type1,
        mem: Backing::Window(Window {
            ty,
            mr: None,
            qpn: 0,
            zero_based: false,
        }),
    };
    match RBTreeNode::new(index as u32, region, GFP_KERNEL) {
        Ok(node) => {
            // The index was free, so nothing is replaced.
            drop(dev.mrs.lock().insert(node));
            Ok(key)
        }
        Err(e) => {
            dev.free_mw_index(index);
            Err(e)
        }
    }
}

/// Deallocates a memory window (`dealloc_mw`), bound or not; its MR may then go. Process
/// context.
pub(crate) fn dealloc_mw(mw: &Mw<MetaRoceDriver>, index: usize) {
    let dev = mw.device();
    let taken = dev.mrs.lock().remove(&(index as u32));
    drop(taken);
    dev.free_mw_index(index);
}

/// A bind work request (`IB_WR_BIND_MW`) as librxe writes it into a send ring.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bind {
    /// Start of the window: a virtual address of the MR.
    pub(crate) addr: u64,
    /// Length of the window; 0 unbinds a type 1 window.
    pub(crate) length: u64,
    /// L_Key of the MR.
    pub(crate) mr_lkey: u32,
    /// The window's current R_Key.
    pub(crate) mw_rkey: u32,
    /// The R_Key after binding: its low byte replaces the window's key byte.
    pub(crate) rkey: u32,
    /// The window's rights (`enum ib_access_flags`).
    pub(crate) access: u32,
}

/// Why a bind work request failed (its completion carries `IB_WC_MW_BIND_ERR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BindError {
    /// No window has this R_Key, or no MR this L_Key.
    BadKey,
    /// The window, MR and QP are not all of one PD (C10-72).
    BadPd,
    /// The window is in the wrong state for its type (a bound type 2 window, o10-37.2.30), or a
    /// type 2 bind names no memory (o10-37.2.40), or a type 1 window asks for zero-based
    /// addressing (o10-36.2.2).
    State,
    /// Rights MetaRoCE does not offer, an MR without `IB_ACCESS_MW_BIND` (C10-73), or a
    /// writable window over an MR without local write (C10-74).
    Access,
    /// The window is not inside the MR (C10-75).
    Range,
}

impl MetaRoceDev {
    /// Executes a bind work request posted to QP `qpn` of PD `pd`. Any context.
    pub(crate) fn mw_bind(&self, qpn: u32, pd: PdId, b: &Bind) -> Result<(), BindError> {
        let access = AccessFlags::from_raw(b.access);
        if !WINDOW_RIGHTS.contains(access) {
            return Err(BindError::Access);
        }
        let zero_based = access.contains(AccessFlags::ZERO_BASED);
        let mut table = self.mrs.lock();
        let w = table.get(&(b.mw_rkey >> 8)).ok_or(BindError::BadKey)?;
        let Backing::Window(win) = &w.mem else {
            return Err(BindError::BadKey);
        };
        if w.rkey != b.mw_rkey {
            return Err(BindError::BadKey);
        }
        match win.ty {
            MwType::Type1 if zero_based => return Err(BindError::State),
            MwType::Type1 => {}
            MwType::Type2 if w.valid || b.length == 0 => return Err(BindError::State),
            MwType::Type2 => {}
        }
        if w.pd != pd {
            return Err(BindError::BadPd);
        }
        let mr = if b.length == 0 {
            None
        } else {
            let m = table.get(&(b.mr_lkey >> 8)).ok_or(BindError::BadKey)?;
            if matches!(m.mem, Backing::Window(_)) || m.lkey != b.mr_lkey || !m.valid {
                return Err(BindError::BadKey);
            }
            if m.pd != pd {
                return Err(BindError::BadPd);
            }
            let writable = AccessFlags::REMOTE_WRITE.union(AccessFlags::REMOTE_ATOMIC);
            if !m.access.contains(AccessFlags::MW_BIND)
                || (access.intersects(writable) && !m.access.contains(AccessFlags::LOCAL_WRITE))
            {
                return Err(BindError::Access);
            }
            let end = b.addr.checked_add(b.length).ok_or(BindError::Range)?;
            if b.addr < m.iova || end > m.iova.checked_add(m.len).ok_or(BindError::Range)? {
                return Err(BindError::Range);
            }
            Some(b.mr_lkey >> 8)
        };
        let w = table.get_mut(&(b.mw_rkey >> 8)).ok_or(BindError::BadKey)?;
        let Backing::Window(win) = &mut w.mem else {
            return Err(BindError::BadKey);
        };
        win.mr = mr;
        win.qpn = qpn;
        win.zero_based = zero_based;
        w.rkey = (w.rkey & !0xff) | (b.rkey & 0xff);
        w.access = access;
        w.iova = b.addr;
        w.len = b.length;
        w.valid = true;
        Ok(())
    }

    /// Frees the type 2 windows QP `qpn` bound (the QP is being destroyed; its number may be
    /// reused). Process context.
    pub(crate) fn mw_unbind_qp(&self, qpn: u32) {
        let mut table = self.mrs.lock();
        for r in table.values_mut() {
            if let Backing::Window(w) = &mut r.mem {
                if w.ty == MwType::Type2 && r.valid && w.qpn == qpn {
                    w.mr = None;
                    r.valid = false;
                    r.access = AccessFlags::NONE;
                    r.len = 0;
                }
            }
        }
    }
}

/// Calls `f(page, offset in the page, range of the caller's buffer)` for each piece of the `len`
/// bytes at byte `off` of a fast-register region's pages.
fn fast_pieces(
    pages: &[MrPage],
    page_size: usize,
    first_off: usize,
    off: usize,
    len: usize,
    mut f: impl FnMut(&MrPage, usize, core::ops::Range<usize>) -> Result,
) -> Result {
    let ps = NonZeroUsize::new(page_size).ok_or(EINVAL)?;
    let mut pos = first_off.checked_add(off).ok_or(EINVAL)?;
    let mut done = 0;
    while done < len {
        let (page, at) = (pos / ps, pos % ps);
        let n = core::cmp::min(ps.get() - at, len - done);
        f(pages.get(page).ok_or(EINVAL)?, at, done..done + n)?;
        done += n;
        pos += n;
    }
    Ok(())
}

/// An ODP copy's error: `EAGAIN` (a page is not present) is [`MrError::NotPresent`].
fn odp_err(e: Error) -> MrError {
    if e == EAGAIN {
        MrError::NotPresent
    } else {
        MrError::Range
    }
}

impl Backing {
    /// Copies `data` to byte `off` of the region's memory (checked against the region).
    fn copy_to(&self, off: usize, data: &[u8]) -> Result<(), MrError> {
        match self {
            Backing::Odp(m) => m.umem.copy_to(off, data).map_err(odp_err),
            _ => self.copy_to_pinned(off, data).map_err(|_| MrError::Range),
        }
    }

    /// Copies bytes at byte `off` of the region's memory into `out`.
    fn copy_from(&self, off: usize, out: &mut [u8]) -> Result<(), MrError> {
        match self {
            Backing::Odp(m) => m.umem.copy_from(off, out).map_err(odp_err),
            _ => self.copy_from_pinned(off, out).map_err(|_| MrError::Range),
        }
    }

    /// Whether `len` bytes at byte `off` may be accessed now without a fault (and written, if
    /// `write`): always for pinned memory; [`MrError::NotPresent`] if not.
    fn ready(&self, off: usize, len: usize, write: bool) -> Result<(), MrError> {
        match self {
            Backing::Odp(m) if !m.umem.is_present(off, len, write) => Err(MrError::NotPresent),
            _ => Ok(()),
        }
    }

    fn copy_to_pinned(&self, off: usize, data: &[u8]) -> Result {
        match self {
            Backing::User(umem) => umem.copy_to(off, data),
            Backing::Odp(_) => Err(EINVAL),
            // `resolve` hands out the window's MR, never the window.
            Backing::Window(_) => Err(EINVAL),
            Backing::Fast {
                pages,
                page_size,
                first_off,
            } => fast_pieces(
                pages,
                *page_size,
                *first_off,
                off,
                data.len(),
                |p, at, r| p.write_at(at, &data[r]),
            ),
        }
    }

    fn copy_from_pinned(&self, off: usize, out: &mut [u8]) -> Result {
        match self {
            Backing::User(umem) => umem.copy_from(off, out),
            Backing::Odp(_) => Err(EINVAL),
            Backing::Window(_) => Err(EINVAL),
            Backing::Fast {
                pages,
                page_size,
                first_off,
            } => {
                let len = out.len();
                fast_pieces(pages, *page_size, *first_off, off, len, |p, at, r| {
                    p.read_at(at, &mut out[r])
                })
            }
        }
    }
}

impl Region {
    /// Validates a request for `len` bytes at `va` needing `need`, and returns the offset of
    /// `va` in the region.
    fn check(
        &self,
        key: u32,
        kind: KeyKind,
        pd: PdId,
        va: u64,
        len: usize,
        need: AccessFlags,
    ) -> Result<usize, MrError> {
        let ok_key = match kind {
            KeyKind::Local => self.lkey != 0 && self.lkey == key,
            KeyKind::Remote { .. } => self.rkey != 0 && self.rkey == key,
        };
        if matches!(self.mem, Backing::Window(_)) {
            // A window's key is resolved by `resolve`, never used as a region's.
            return Err(MrError::BadKey);
        }
        if !ok_key || !self.valid {
            return Err(MrError::BadKey);
        }
        if self.pd != pd {
            return Err(MrError::BadPd);
        }
        if !self.access.contains(need) {
            return Err(MrError::Access);
        }
        let off = va.checked_sub(self.iova).ok_or(MrError::Range)?;
        let end = off.checked_add(len as u64).ok_or(MrError::Range)?;
        if end > self.len {
            return Err(MrError::Range);
        }
        usize::try_from(off).map_err(|_| MrError::Range)
    }
}

/// The rights a write into a region needs for a key of `kind`.
fn write_right(kind: KeyKind) -> AccessFlags {
    match kind {
        KeyKind::Local => AccessFlags::LOCAL_WRITE,
        KeyKind::Remote { .. } => AccessFlags::REMOTE_WRITE,
    }
}

/// The rights a read from a region needs for a key of `kind` (local reads are always
/// allowed).
fn read_right(kind: KeyKind) -> AccessFlags {
    match kind {
        KeyKind::Local => AccessFlags::NONE,
        KeyKind::Remote { .. } => AccessFlags::REMOTE_READ,
    }
}

/// Validates a request for `len` bytes at `va` needing `need` under `key`, and returns the
/// region whose memory it reaches with the request's offset in it: the region of `key`, or for
/// a memory window's R_Key the MR the window is bound to.
fn resolve(
    table: &MrTable,
    key: u32,
    kind: KeyKind,
    pd: PdId,
    va: u64,
    len: usize,
    need: AccessFlags,
) -> Result<(&Region, usize), MrError> {
    let r = table.get(&(key >> 8)).ok_or(MrError::BadKey)?;
    let Backing::Window(w) = &r.mem else {
        return r.check(key, kind, pd, va, len, need).map(|off| (r, off));
    };
    let KeyKind::Remote { qpn } = kind else {
        return Err(MrError::BadKey);
    };
    if r.rkey != key || !r.valid || (w.ty == MwType::Type2 && w.qpn != qpn) {
        return Err(MrError::BadKey);
    }
    let mr = w.mr.ok_or(MrError::BadKey)?;
    if r.pd != pd {
        return Err(MrError::BadPd);
    }
    if !r.access.contains(need) {
        return Err(MrError::Access);
    }
    let woff = if w.zero_based {
        va
    } else {
        va.checked_sub(r.iova).ok_or(MrError::Range)?
    };
    let end = woff.checked_add(len as u64).ok_or(MrError::Range)?;
    if end > r.len {
        return Err(MrError::Range);
    }
    // The MR cannot go while the window is bound to it (`remove`), and the window lies inside
    // it (checked at binding; a user MR never changes): checked again all the same.
    let m = table.get(&mr).ok_or(MrError::BadKey)?;
    let moff = r
        .iova
        .checked_sub(m.iova)
        .and_then(|o| o.checked_add(woff))
        .ok_or(MrError::Range)?;
    if !m.valid || moff.checked_add(len as u64).is_none_or(|e| e > m.len) {
        return Err(MrError::Range);
    }
    Ok((m, usize::try_from(moff).map_err(|_| MrError::Range)?))
}

impl MetaRoceDev {
    /// Runs `f` on the region a request for `len` bytes at `va` under `key` reaches and the
    /// request's offset in it, with the table locked.
    #[allow(clippy::too_many_arguments)]
    fn with_region<R>(
        &self,
        key: u32,
        kind: KeyKind,
        pd: PdId,
        va: u64,
        len: usize,
        need: AccessFlags,
        f: impl FnOnce(&Region, usize) -> Result<R, MrError>,
    ) -> Result<R, MrError> {
        let table = self.mrs.lock();
        let (r, off) = resolve(&table, key, kind, pd, va, len, need)?;
        let res = f(r, off);
        if let (Err(MrError::NotPresent), Backing::Odp(m)) = (&res, &r.mem) {
            // A fault of this memory failed since: refused, not waited for again.
            if m.take_failure() {
                return Err(MrError::Range);
            }
            self.odp_fault_later(m, off, len);
        }
        res
    }

    /// Checks that `key` (of `kind`) names a user region of `pd` that covers `len` bytes at
    /// `va` and grants `need`, and that the bytes are present (on-demand paging:
    /// [`MrError::NotPresent`] after asking for a fault). Any context, never sleeps.
    pub(crate) fn mr_check(
        &self,
        key: u32,
        kind: KeyKind,
        pd: PdId,
        va: u64,
        len: usize,
        need: AccessFlags,
    ) -> Result<(), MrError> {
        let write = need.intersects(
            AccessFlags::LOCAL_WRITE
                .union(AccessFlags::REMOTE_WRITE)
                .union(AccessFlags::REMOTE_ATOMIC),
        );
        self.with_region(key, kind, pd, va, len, need, |r, off| {
            r.mem.ready(off, len, write)
        })
    }

    /// RDMA FLUSH through R_Key `rkey` (used by QP `qpn` of PD `pd`): checks that the key names
    /// a region (or a window) of `pd` granting `need` (the FLUSH rights its placement type asks)
    /// and, unless `whole`, covering `len` bytes (possibly none) at `va`; with `whole` the
    /// key's own range is checked instead. Every placement into user memory is a CPU copy made
    /// under the table lock before the responder executes the next request, and the responder
    /// executes requests in PSN order, so what the FLUSH covers is in memory already: a full
    /// barrier (rdma_rxe's `wmb()`) orders it before the FLUSH's response. Any context.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn mr_flush(
        &self,
        rkey: u32,
        qpn: u32,
        pd: PdId,
        va: u64,
        len: usize,
        whole: bool,
        need: AccessFlags,
    ) -> Result<(), MrError> {
        let kind = KeyKind::Remote { qpn };
        {
            let table = self.mrs.lock();
            let (va, len) = if whole {
                let r = table.get(&(rkey >> 8)).ok_or(MrError::BadKey)?;
                let zero_based = matches!(&r.mem, Backing::Window(w) if w.zero_based);
                let len = usize::try_from(r.len).map_err(|_| MrError::Range)?;
                (if zero_based { 0 } else { r.iova }, len)
            } else {
                (va, len)
            };
            resolve(&table, rkey, kind, pd, va, len, need)?;
        }
        kernel::sync::barrier::smp_mb(kernel::sync::barrier::Full);
        Ok(())
    }

    /// Copies `data` into the user region of `key` at `va`, after checking PD, bounds and the
    /// write right of `kind` (local write for an L_Key, remote write for an R_Key). Any
    /// context (softirq, work), never sleeps.
    pub(crate) fn mr_copy_to(
        &self,
        key: u32,
        kind: KeyKind,
        pd: PdId,
        va: u64,
        data: &[u8],
    ) -> Result<(), MrError> {
        self.with_region(
            key,
            kind,
            pd,
            va,
            data.len(),
            write_right(kind),
            |mr, off| mr.mem.copy_to(off, data),
        )
    }

    /// Checks that `len` bytes at `va` lie in the user region of L_Key `lkey` of PD `pd`,
    /// with local write access if `write`. Pages of an on-demand paging region that are not
    /// present are queued for a fault (the posting process runs it, `odp.rs`), and the check
    /// passes: `Ok(true)` says a fault was queued. Any context.
    pub(crate) fn mr_check_local(
        &self,
        lkey: u32,
        pd: PdId,
        va: u64,
        len: usize,
        write: bool,
    ) -> Result<bool, MrError> {
        let need = if write {
            AccessFlags::LOCAL_WRITE
        } else {
            AccessFlags::NONE
        };
        let res = self.with_region(lkey, KeyKind::Local, pd, va, len, need, |r, off| {
            r.mem.ready(off, len, write)
        });
        match res {
            Ok(()) => Ok(false),
            Err(MrError::NotPresent) => Ok(true),
            Err(e) => Err(e),
        }
    }

    /// Copies bytes at `va` of the region of `key` into `out`, after checking PD, bounds
    /// and the read right of `kind` (none for an L_Key, remote read for an R_Key). Any context,
    /// never sleeps.
    pub(crate) fn mr_copy_from(
        &self,
        key: u32,
        kind: KeyKind,
        pd: PdId,
        va: u64,
        out: &mut [u8],
    ) -> Result<(), MrError> {
        self.with_region(key, kind, pd, va, out.len(), read_right(kind), |mr, off| {
            mr.mem.copy_from(off, out)
        })
    }

    /// Applies an atomic operation to the 8-byte word at `va` (8-byte aligned) of the user
    /// region of R_Key `rkey`: reads it, stores `op(old)` if that is `Some`, and returns the
    /// old value (host byte order of the word as stored). Requires the `need` rights
    /// (remote atomic for atomics, remote write for ATOMIC WRITE).
    /// Atomic with respect to every other access of the device to user regions (all go
    /// through the table lock), not to the process's own CPU accesses. Any context.
    pub(crate) fn mr_atomic(
        &self,
        rkey: u32,
        qpn: u32,
        pd: PdId,
        va: u64,
        need: AccessFlags,
        op: impl FnOnce(u64) -> Option<u64>,
    ) -> Result<u64, MrError> {
        if va % 8 != 0 {
            return Err(MrError::Range);
        }
        self.with_region(rkey, KeyKind::Remote { qpn }, pd, va, 8, need, |mr, off| {
            // Through a zero-based window, the word's own address must be aligned too.
            if mr.iova.wrapping_add(off as u64) % 8 != 0 {
                return Err(MrError::Range);
            }
            // Both halves need the page writable: checked first, so that an on-demand paging
            // region never reads without writing (the table lock keeps the page present in
            // between unless the mm invalidates it; then the write fails and the peer retries).
            mr.mem.ready(off, 8, true)?;
            let mut b = [0u8; 8];
            mr.mem.copy_from(off, &mut b)?;
            let old = u64::from_ne_bytes(b);
            if let Some(new) = op(old) {
                mr.mem.copy_to(off, &new.to_ne_bytes())?;
            }
            Ok(old)
        })
    }
}

/// Why an invalidation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InvalidateError {
    /// No region has this key, or it is not valid.
    BadKey,
    /// The region cannot be invalidated (a user MR or a type 1 window: only fast-register MRs
    /// and type 2 windows can).
    NotInvalidatable,
    /// The region belongs to another PD.
    BadPd,
}

impl MetaRoceDev {
    /// Invalidates the fast-register MR or the type 2 memory window of `rkey` (a LOCAL_INV
    /// work request, or a received SEND with invalidate) for a QP of PD `pd`: later accesses
    /// with its keys fail until it is registered (bound) again. Any context.
    pub(crate) fn mr_invalidate(&self, rkey: u32, pd: PdId) -> Result<(), InvalidateError> {
        let mut table = self.mrs.lock();
        let r = table.get_mut(&(rkey >> 8)).ok_or(InvalidateError::BadKey)?;
        let key = match &r.mem {
            Backing::Fast { .. } => r.lkey,
            Backing::Window(w) if w.ty == MwType::Type2 => r.rkey,
            Backing::Window(_) | Backing::User(_) | Backing::Odp(_) => {
                return Err(InvalidateError::NotInvalidatable)
            }
        };
        if !r.valid || key != rkey {
            return Err(InvalidateError::BadKey);
        }
        if r.pd != pd {
            return Err(InvalidateError::BadPd);
        }
        r.valid = false;
        if let Backing::Window(w) = &mut r.mem {
            w.mr = None;
            r.access = AccessFlags::NONE;
            r.len = 0;
        }
        Ok(())
    }
}
