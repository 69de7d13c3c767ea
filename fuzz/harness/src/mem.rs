// SPDX-License-Identifier: GPL-2.0
//! An honest model of the glue's memory regions and receive queue.
//!
//! [`Mem`] answers `MemAccess::check` truthfully for two memory regions and
//! records every range it approved, so the responder target can assert that
//! data is only ever placed in, or read from, memory that was checked.
//! Atomics run on a sparse word map; the model asserts the core's own
//! preconditions (8-byte alignment) instead of checking them itself.
//! FLUSH is checked like the rest (key, rights, range unless the whole
//! region is asked for) and every approved one is recorded.

use metaroce_proto::resp::{AccessError, MemAccess, RecvQueue};
use metaroce_proto::wr::{Access, AtomicOp, RecvWqe};
use std::collections::{BTreeMap, VecDeque};

/// A memory region.
#[derive(Clone, Copy, Debug)]
pub struct Mr {
    /// Remote key.
    pub rkey: u32,
    /// First byte.
    pub base: u64,
    /// Length in bytes.
    pub len: u64,
    /// Rights.
    pub access: Access,
}

/// The two regions: a read/write/atomic one that may also be flushed to
/// global visibility (not to persistence), and a read-only one that ends at
/// the top of the 64-bit address space.
pub const MRS: [Mr; 2] = [
    Mr {
        rkey: 0x100,
        base: 0x1_0000,
        len: 0x4000,
        access: Access::READ
            .with(Access::WRITE)
            .with(Access::ATOMIC)
            .with(Access::FLUSH_GLOBAL),
    },
    Mr {
        rkey: 0x200,
        base: 0xFFFF_FFFF_FFFF_E000,
        len: 0x2000,
        access: Access::READ,
    },
];

/// True if `[va, va + len)` lies inside `mr` (no overflow: 128-bit maths).
pub fn inside(mr: &Mr, va: u64, len: u64) -> bool {
    let (va, len, base, mlen) = (
        u128::from(va),
        u128::from(len),
        u128::from(mr.base),
        u128::from(mr.len),
    );
    va >= base && va + len <= base + mlen
}

/// A checked range.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Range {
    /// Key.
    pub rkey: u32,
    /// Start.
    pub va: u64,
    /// Length.
    pub len: u32,
}

impl Range {
    /// True if `[va, va + len)` is within this range.
    pub fn covers(&self, rkey: u32, va: u64, len: u32) -> bool {
        let (s, e) = (
            u128::from(self.va),
            u128::from(self.va) + u128::from(self.len),
        );
        rkey == self.rkey && u128::from(va) >= s && u128::from(va) + u128::from(len) <= e
    }
}

/// An approved FLUSH, as the core asked for it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Flush {
    /// Key.
    pub rkey: u32,
    /// Start (not checked if `whole_mr`).
    pub va: u64,
    /// Length, possibly 0 (not checked if `whole_mr`).
    pub len: u32,
    /// The whole region of `rkey`.
    pub whole_mr: bool,
    /// Rights asked: `FLUSH_GLOBAL` and/or `FLUSH_PERSISTENT`.
    pub access: Access,
}

/// The rights a FLUSH may ask for.
pub const FLUSH_RIGHTS: Access = Access::FLUSH_GLOBAL.with(Access::FLUSH_PERSISTENT);

/// Memory model.
#[derive(Default, Debug)]
pub struct Mem {
    /// Fail the next check or atomic with an operational error.
    pub fail_next: bool,
    /// Approved WRITE checks, latest last.
    pub writes: Vec<Range>,
    /// Approved READ checks.
    pub reads: Vec<Range>,
    /// Atomics executed: (rkey, va, original value).
    pub atomics: Vec<(u32, u64, u64)>,
    /// ATOMIC WRITEs executed: (rkey, va, value).
    pub atomic_writes: Vec<(u32, u64, u64)>,
    /// FLUSHes approved, oldest first.
    pub flushes: Vec<Flush>,
    /// Memory calls made (checks, atomics and flushes, approved or not).
    pub calls: u64,
    words: BTreeMap<u64, u64>,
}

impl MemAccess for Mem {
    fn check(&mut self, rkey: u32, va: u64, len: u32, access: Access) -> Result<(), AccessError> {
        self.calls += 1;
        assert!(len > 0, "check of an empty range");
        assert!(
            access == Access::READ || access == Access::WRITE,
            "check for {access:?}"
        );
        if std::mem::take(&mut self.fail_next) {
            return Err(AccessError::Operational);
        }
        let ok = MRS
            .iter()
            .any(|m| m.rkey == rkey && m.access.contains(access) && inside(m, va, u64::from(len)));
        if !ok {
            return Err(AccessError::Access);
        }
        let r = Range { rkey, va, len };
        if access == Access::WRITE {
            self.writes.push(r);
        } else {
            self.reads.push(r);
        }
        Ok(())
    }

    fn atomic(&mut self, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, AccessError> {
        self.calls += 1;
        assert_eq!(va % 8, 0, "atomic on an unaligned address");
        if std::mem::take(&mut self.fail_next) {
            return Err(AccessError::Operational);
        }
        if !MRS
            .iter()
            .any(|m| m.rkey == rkey && m.access.contains(Access::ATOMIC) && inside(m, va, 8))
        {
            return Err(AccessError::Access);
        }
        let w = self.words.entry(va).or_insert(0);
        let orig = *w;
        *w = match op {
            AtomicOp::CmpSwap { compare, swap } => {
                if orig == compare {
                    swap
                } else {
                    orig
                }
            }
            AtomicOp::FetchAdd { add } => orig.wrapping_add(add),
        };
        self.atomics.push((rkey, va, orig));
        Ok(orig)
    }
    fn atomic_write(&mut self, rkey: u32, va: u64, value: [u8; 8]) -> Result<(), AccessError> {
        self.calls += 1;
        assert_eq!(va % 8, 0, "atomic write to an unaligned address");
        if std::mem::take(&mut self.fail_next) {
            return Err(AccessError::Operational);
        }
        if !MRS
            .iter()
            .any(|m| m.rkey == rkey && m.access.contains(Access::WRITE) && inside(m, va, 8))
        {
            return Err(AccessError::Access);
        }
        let v = u64::from_ne_bytes(value);
        self.words.insert(va, v);
        self.atomic_writes.push((rkey, va, v));
        Ok(())
    }
    fn flush(
        &mut self,
        rkey: u32,
        va: u64,
        len: u32,
        whole_mr: bool,
        access: Access,
    ) -> Result<(), AccessError> {
        self.calls += 1;
        assert!(
            access != Access::NONE && FLUSH_RIGHTS.contains(access),
            "flush asking for {access:?}"
        );
        if std::mem::take(&mut self.fail_next) {
            return Err(AccessError::Operational);
        }
        let ok = MRS.iter().any(|m| {
            m.rkey == rkey
                && m.access.contains(access)
                && (whole_mr || inside(m, va, u64::from(len)))
        });
        if !ok {
            return Err(AccessError::Access);
        }
        self.flushes.push(Flush {
            rkey,
            va,
            len,
            whole_mr,
            access,
        });
        Ok(())
    }
}

/// Receive queue model: FIFO of posted WQEs; remembers what was taken.
#[derive(Default, Debug)]
pub struct Rq {
    /// Posted, not taken.
    pub posted: VecDeque<RecvWqe>,
    /// Taken by the responder and not yet returned, oldest first, with the
    /// bytes placed so far in the current message.
    pub out: VecDeque<(RecvWqe, u32)>,
    /// Next WQE id.
    pub next_id: u64,
    /// WQEs taken so far.
    pub taken: u64,
}

impl Rq {
    /// Posts a WQE of `len` bytes.
    pub fn post(&mut self, len: u32) {
        self.posted.push_back(RecvWqe {
            id: self.next_id,
            len,
        });
        self.next_id += 1;
    }
}

impl RecvQueue for Rq {
    fn take(&mut self) -> Option<RecvWqe> {
        let w = self.posted.pop_front()?;
        self.out.push_back((w, 0));
        self.taken += 1;
        Some(w)
    }
}
