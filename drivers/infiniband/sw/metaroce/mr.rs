// SPDX-License-Identifier: GPL-2.0

//! User memory regions: registration over pinned user memory, and the lookup the transport
//! uses to validate an (L_Key or R_Key, PD, virtual address, length, access) tuple and move
//! bytes at a virtual address of the region.
//!
//! Registered regions live in the device's table, keyed by their index (`key >> 8`), under an
//! IRQ-disabling spinlock. Lookups copy while holding it and never hand the region out, so
//! deregistration (which takes the region out of the table under the lock) knows nobody is
//! still copying, and the pinned memory is released in process context.

use crate::device::{MetaRoceDev, MetaRoceDriver};
use crate::verbs::MetaRoceMr;
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNode};
use kernel::rdma::mr::{AccessFlags, Mr, MrKeys, UserMrRequest};
use kernel::rdma::pd::{Pd, PdId};
use kernel::rdma::umem::Umem;

/// The access rights a MetaRoCE MR may have (beyond the optional hints, which are ignored).
const SUPPORTED: AccessFlags = AccessFlags::LOCAL_WRITE
    .union(AccessFlags::REMOTE_WRITE)
    .union(AccessFlags::REMOTE_READ)
    .union(AccessFlags::REMOTE_ATOMIC);

/// A registered user memory region.
pub(crate) struct UserMr {
    lkey: u32,
    /// 0 when the region grants no remote access (the R_Key is then unusable).
    rkey: u32,
    pd: PdId,
    access: AccessFlags,
    iova: u64,
    len: u64,
    umem: Umem,
}

/// The device's user memory regions, by index.
pub(crate) type MrTable = RBTree<u32, UserMr>;

/// Which key of a region a request names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyKind {
    /// An L_Key, from a local SGE.
    Local,
    /// An R_Key, from a RETH or an AtomicETH.
    Remote,
}

/// Why a memory access was refused (the transport maps it to a completion status or NAK).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MrError {
    /// No user region has this key (or it names a region of another kind).
    BadKey,
    /// The region belongs to another PD.
    BadPd,
    /// The region does not grant the access.
    Access,
    /// The bytes are not all inside the region, or the address is misaligned for an atomic.
    Range,
}

/// Checks rights asked for a new region, as ib_core does, plus what MetaRoCE implements.
fn check_access(access: AccessFlags) -> Result {
    let mandatory = access.difference(AccessFlags::OPTIONAL);
    if mandatory.intersects(AccessFlags::REMOTE_WRITE.union(AccessFlags::REMOTE_ATOMIC))
        && !mandatory.contains(AccessFlags::LOCAL_WRITE)
    {
        return Err(EINVAL);
    }
    if !SUPPORTED.contains(mandatory) {
        // Memory windows, on-demand paging, flush: not implemented.
        return Err(EOPNOTSUPP);
    }
    Ok(())
}

/// Registers user memory (`reg_user_mr`): pins it, takes a key and enters the region in the
/// device's table. Process context of the owning process, may sleep.
pub(crate) fn reg_user_mr(
    pd: &Pd<MetaRoceDriver>,
    req: &UserMrRequest,
) -> Result<(MrKeys, MetaRoceMr)> {
    check_access(req.access)?;
    if req.length == 0 || req.iova.checked_add(req.length).is_none() {
        return Err(EINVAL);
    }
    let umem = Umem::pin(pd, req.start, req.length, req.access)?;
    let dev: &MetaRoceDev = pd.device();
    let index = dev.alloc_mr_index()?;
    // Index 0 is never handed out, so no key is 0.
    let lkey = (index as u32) << 8;
    let remote = req.access.intersects(
        AccessFlags::REMOTE_READ
            .union(AccessFlags::REMOTE_WRITE)
            .union(AccessFlags::REMOTE_ATOMIC),
    );
    let rkey = if remote { lkey } else { 0 };
    let mr = UserMr {
        lkey,
        rkey,
        pd: pd.id(),
        access: req.access,
        iova: req.iova,
        len: req.length,
        umem,
    };
    let node = match RBTreeNode::new(index as u32, mr, GFP_KERNEL) {
        Ok(node) => node,
        Err(e) => {
            dev.free_mr_index(index);
            return Err(e);
        }
    };
    // The index was free, so nothing is replaced.
    let old = dev.user_mrs.lock().insert(node);
    drop(old);
    Ok((
        MrKeys { lkey, rkey },
        MetaRoceMr {
            index,
            access: req.access,
            user: true,
        },
    ))
}

/// Takes a user region out of the table (`dereg_mr`); its memory is unpinned when the
/// returned value drops, outside the table lock. Process context.
pub(crate) fn dereg_user_mr(mr: &Mr<MetaRoceDriver>) {
    let dev = mr.device();
    let taken = dev.user_mrs.lock().remove(&(mr.index as u32));
    drop(taken);
}

impl UserMr {
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
            KeyKind::Local => self.lkey == key,
            KeyKind::Remote => self.rkey != 0 && self.rkey == key,
        };
        if !ok_key {
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
        KeyKind::Remote => AccessFlags::REMOTE_WRITE,
    }
}

/// The rights a read from a region needs for a key of `kind` (local reads are always
/// allowed).
fn read_right(kind: KeyKind) -> AccessFlags {
    match kind {
        KeyKind::Local => AccessFlags::NONE,
        KeyKind::Remote => AccessFlags::REMOTE_READ,
    }
}

impl MetaRoceDev {
    /// Runs `f` on the user region of `key`, with the table locked.
    fn with_user_mr<R>(
        &self,
        key: u32,
        f: impl FnOnce(&UserMr) -> Result<R, MrError>,
    ) -> Result<R, MrError> {
        let table = self.user_mrs.lock();
        let mr = table.get(&(key >> 8)).ok_or(MrError::BadKey)?;
        f(mr)
    }

    /// Checks that `key` (of `kind`) names a user region of `pd` that covers `len` bytes at
    /// `va` and grants `need`. Any context, never sleeps.
    pub(crate) fn mr_check(
        &self,
        key: u32,
        kind: KeyKind,
        pd: PdId,
        va: u64,
        len: usize,
        need: AccessFlags,
    ) -> Result<(), MrError> {
        self.with_user_mr(key, |mr| mr.check(key, kind, pd, va, len, need).map(|_| ()))
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
        self.with_user_mr(key, |mr| {
            let off = mr.check(key, kind, pd, va, data.len(), write_right(kind))?;
            mr.umem.copy_to(off, data).map_err(|_| MrError::Range)
        })
    }

    /// Copies bytes at `va` of the user region of `key` into `out`, after checking PD, bounds
    /// and the read right of `kind` (none for an L_Key, remote read for an R_Key). Any context,
    /// never sleeps.
    /// Checks that `len` bytes at `va` lie in the user region of L_Key `lkey` of PD `pd`,
    /// with local write access if `write`. Any context.
    pub(crate) fn mr_check_local(
        &self,
        lkey: u32,
        pd: PdId,
        va: u64,
        len: usize,
        write: bool,
    ) -> Result<(), MrError> {
        let need = if write { AccessFlags::LOCAL_WRITE } else { AccessFlags::NONE };
        self.with_user_mr(lkey, |mr| mr.check(lkey, KeyKind::Local, pd, va, len, need).map(|_| ()))
    }

    pub(crate) fn mr_copy_from(
        &self,
        key: u32,
        kind: KeyKind,
        pd: PdId,
        va: u64,
        out: &mut [u8],
    ) -> Result<(), MrError> {
        self.with_user_mr(key, |mr| {
            let off = mr.check(key, kind, pd, va, out.len(), read_right(kind))?;
            mr.umem.copy_from(off, out).map_err(|_| MrError::Range)
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
        pd: PdId,
        va: u64,
        need: AccessFlags,
        op: impl FnOnce(u64) -> Option<u64>,
    ) -> Result<u64, MrError> {
        if va % 8 != 0 {
            return Err(MrError::Range);
        }
        self.with_user_mr(rkey, |mr| {
            let off = mr.check(rkey, KeyKind::Remote, pd, va, 8, need)?;
            let mut b = [0u8; 8];
            mr.umem.copy_from(off, &mut b).map_err(|_| MrError::Range)?;
            let old = u64::from_ne_bytes(b);
            if let Some(new) = op(old) {
                mr.umem
                    .copy_to(off, &new.to_ne_bytes())
                    .map_err(|_| MrError::Range)?;
            }
            Ok(old)
        })
    }
}
