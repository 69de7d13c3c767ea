// SPDX-License-Identifier: GPL-2.0

//! Memory access of a QP: copies to and from the buffers its work requests name.

use super::*;

/// One scatter/gather element of a queued work request: owned by the queue slot (`K` =
/// [`KernelBuf`], neither `Copy` nor `Clone`) or borrowed from it ([`SegRef`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Seg<K = KernelBuf> {
    /// A kernel consumer's buffer.
    Kernel(K),
    /// `len` bytes at `addr` of the user memory region of L_Key `lkey`.
    User { addr: u64, len: u32, lkey: u32 },
}

/// A [`Seg`] borrowed from its queue slot: it cannot outlive the borrow of the queue (taken
/// under the QP's lock), and the slot drops its kernel buffer when the request completes.
pub(crate) type SegRef<'a> = Seg<&'a KernelBuf>;

impl Default for Seg {
    fn default() -> Self {
        Seg::Kernel(KernelBuf::empty())
    }
}

impl Seg {
    /// The element, borrowed.
    pub(crate) fn as_ref(&self) -> SegRef<'_> {
        match self {
            Seg::Kernel(b) => Seg::Kernel(b),
            Seg::User { addr, len, lkey } => Seg::User {
                addr: *addr,
                len: *len,
                lkey: *lkey,
            },
        }
    }
}

impl SegRef<'_> {
    fn len(&self) -> usize {
        match self {
            Seg::Kernel(b) => b.len() as usize,
            Seg::User { len, .. } => *len as usize,
        }
    }
}

/// The error of a local copy: `EAGAIN` for on-demand paging memory that is not present yet
/// (a fault was asked for), `EFAULT` for anything else.
pub(super) fn mr_errno(e: crate::mr::MrError) -> Error {
    match e {
        crate::mr::MrError::NotPresent => EAGAIN,
        _ => EFAULT,
    }
}

/// Whether the user buffers `segs` of PD `pd` can be written now: false if pages of an
/// on-demand paging region among them are not present (a fault was asked for). Invalid
/// buffers pass (the placement reports them). Any context.
pub(super) fn recv_ready(dev: &MetaRoceDev, pd: Option<PdId>, segs: &[Seg]) -> bool {
    let Some(pd) = pd else { return true };
    segs.iter().all(|s| match *s {
        Seg::User { addr, len, lkey } if len > 0 => !matches!(
            dev.mr_check(
                lkey,
                KeyKind::Local,
                pd,
                addr,
                len as usize,
                AccessFlags::LOCAL_WRITE
            ),
            Err(crate::mr::MrError::NotPresent)
        ),
        _ => true,
    })
}

/// Copies `out.len()` bytes at byte `offset` of the concatenation of `segs` into `out`.
pub(super) fn gather<'s>(
    m: &MemCtx<'_>,
    segs: impl IntoIterator<Item = SegRef<'s>>,
    mut offset: usize,
    mut out: &mut [u8],
) -> Result {
    for b in segs {
        if out.is_empty() {
            break;
        }
        let len = b.len();
        if offset >= len {
            offset -= len;
            continue;
        }
        let n = core::cmp::min(len - offset, out.len());
        let (now, rest) = out.split_at_mut(n);
        m.read(b, offset, now)?;
        out = rest;
        offset = 0;
    }
    if out.is_empty() {
        Ok(())
    } else {
        Err(EINVAL)
    }
}

/// A placement made while the device has on-demand paging regions: `data` copied to byte
/// `offset` of `segs` now, in one go with the check that their pages are present. `Ok(true)`
/// placed, `NotPresent` (a fault was asked for; the core refuses the packet and it comes
/// again), and other errors `Ok(false)`: left to the core's `Place`, which fails the same way
/// and reports it.
pub(super) fn place_now<'s>(
    m: &MemCtx<'_>,
    segs: impl IntoIterator<Item = SegRef<'s>>,
    offset: u32,
    data: &[u8],
) -> Result<bool, AccessError> {
    match scatter(m, segs, offset as usize, data) {
        Ok(()) => Ok(true),
        Err(e) if e == EAGAIN => Err(AccessError::NotPresent),
        Err(_) => Ok(false),
    }
}

/// Copies `data` to byte `offset` of the concatenation of `segs`.
pub(super) fn scatter<'s>(
    m: &MemCtx<'_>,
    segs: impl IntoIterator<Item = SegRef<'s>>,
    mut offset: usize,
    mut data: &[u8],
) -> Result {
    for b in segs {
        if data.is_empty() {
            break;
        }
        let len = b.len();
        if offset >= len {
            offset -= len;
            continue;
        }
        let n = core::cmp::min(len - offset, data.len());
        m.write(b, offset, &data[..n])?;
        data = &data[n..];
        offset = 0;
    }
    if data.is_empty() {
        Ok(())
    } else {
        Err(EINVAL)
    }
}

/// The buffers of an SGE list of the kernel request of `ticket`, checked against `max_sge`,
/// the local DMA key and the kernel's direct mapping; returns them in `out` with the total
/// length.
pub(super) fn kernel_bufs(
    ticket: &Ticket,
    sges: &[Sge],
    max_sge: u32,
    out: &mut [Seg],
) -> Result<u32> {
    if sges.len() > max_sge as usize || sges.len() > out.len() {
        return Err(EINVAL);
    }
    let mut total: u32 = 0;
    for (s, o) in sges.iter().zip(out.iter_mut()) {
        if s.lkey() != LOCAL_DMA_LKEY {
            return Err(EINVAL);
        }
        *o = Seg::Kernel(KernelBuf::from_sge(ticket, s)?);
        total = total.checked_add(s.length()).ok_or(EINVAL)?;
    }
    Ok(total)
}
