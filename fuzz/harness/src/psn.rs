// SPDX-License-Identifier: GPL-2.0
//! Target `psn`: invariants of the 24-bit PSN arithmetic and of the length
//! maths built on it (path MTU segmentation, pad, timers).
//!
//! * values stay within 24 bits; `add`/`sub` are inverse; `next` is `add(1)`;
//! * `since` is the forward distance: `from.add(a.since(from)) == a`;
//! * `diff` is the signed distance in `[-2^23, 2^23)`: `b.add(a.diff(b))
//!   == a`, antisymmetric except at the antipode, and `is_before`,
//!   `is_after` and equality are a trichotomy consistent with it;
//! * `Pmtu::packets(len)` is the ceiling of `len / mtu` (1 for 0), never
//!   more than 2^24, and `payload_ok` follows the IBTA rule;
//! * `pad_for` makes any length a multiple of four with at most 3 bytes;
//! * timer codes map to their tables without panicking, monotonically.

use arbitrary::{Result, Unstructured};
use metaroce_proto::opcode::Position;
use metaroce_proto::packet::{pad_for, Pmtu};
use metaroce_proto::psn::{Psn, PSN_MASK};
use metaroce_proto::timer::{ack_timeout_ns, rnr_timer_ns};

/// The input: two raw 32-bit values, a step and a length.
#[derive(Clone, Copy, Debug, Default)]
pub struct Input {
    /// First PSN (masked by `Psn::new`).
    pub a: u32,
    /// Second PSN.
    pub b: u32,
    /// A step.
    pub n: u32,
    /// A message length.
    pub len: u32,
    /// A timer code and path MTU selector.
    pub code: u8,
}

impl Input {
    fn decode(u: &mut Unstructured<'_>) -> Result<Self> {
        Ok(Input {
            a: u.arbitrary()?,
            b: u.arbitrary()?,
            n: u.arbitrary()?,
            len: u.arbitrary()?,
            code: u.arbitrary()?,
        })
    }
}

const PMTUS: [Pmtu; 5] = [
    Pmtu::Mtu256,
    Pmtu::Mtu512,
    Pmtu::Mtu1024,
    Pmtu::Mtu2048,
    Pmtu::Mtu4096,
];

/// Runs one input.
pub fn run(data: &[u8]) {
    let Ok(i) = Input::decode(&mut Unstructured::new(data)) else {
        return;
    };
    let a = Psn::new(i.a);
    let b = Psn::new(i.b);
    assert_eq!(a.get(), i.a & PSN_MASK);
    assert!(a.add(i.n).get() <= PSN_MASK && a.sub(i.n).get() <= PSN_MASK);
    assert_eq!(a.add(i.n).sub(i.n), a);
    assert_eq!(a.sub(i.n).add(i.n), a);
    assert_eq!(a.next(), a.add(1));
    assert_eq!(a.add(i.n), a.add(i.n & PSN_MASK));
    assert_eq!(a.add(i.n).since(a), i.n & PSN_MASK);

    let s = a.since(b);
    assert!(s <= PSN_MASK);
    assert_eq!(b.add(s), a);
    let d = a.diff(b);
    assert!(
        (-(1 << 23)..(1 << 23)).contains(&d),
        "diff {d} out of the window"
    );
    assert_eq!(b.add(d as u32), a, "diff is not a distance");
    assert_eq!(d.rem_euclid(1 << 24) as u32, s);
    let e = b.diff(a);
    if d == -(1 << 23) {
        assert_eq!(e, -(1 << 23), "antipode");
    } else {
        assert_eq!(e, -d, "diff is not antisymmetric");
    }
    let rel = [a.is_before(b), a.is_after(b), a == b];
    assert_eq!(
        rel.iter().filter(|&&x| x).count(),
        1,
        "not a trichotomy: {rel:?}"
    );
    assert_eq!(a.is_before(b), d < 0);
    assert_eq!(a.is_after(b), d > 0);
    if d != -(1 << 23) {
        assert_eq!(a.is_before(b), b.is_after(a));
    }
    // Shifting both keeps the relation.
    assert_eq!(a.add(i.n).diff(b.add(i.n)), d);

    let pmtu = PMTUS[usize::from(i.code) % PMTUS.len()];
    let mtu = pmtu.bytes();
    assert_eq!(Pmtu::from_bytes(mtu), Some(pmtu));
    let k = pmtu.packets(i.len);
    assert!(k >= 1 && k <= 1 << 24);
    if i.len == 0 {
        assert_eq!(k, 1);
    } else {
        let (k, len, mtu) = (u64::from(k), u64::from(i.len), u64::from(mtu));
        assert!(
            k * mtu >= len && (k - 1) * mtu < len,
            "packets({len}) = {k} at {mtu}"
        );
    }
    let l = i.len as usize;
    assert_eq!(pmtu.payload_ok(Position::Middle, l), l == mtu as usize);
    assert_eq!(pmtu.payload_ok(Position::First, l), l == mtu as usize);
    assert_eq!(pmtu.payload_ok(Position::Last, l), l <= mtu as usize);
    assert_eq!(pmtu.payload_ok(Position::Only, l), l <= mtu as usize);
    let pad = usize::from(pad_for(l));
    assert!(pad < 4 && (l + pad) % 4 == 0);

    let c = i.code;
    let t = rnr_timer_ns(c);
    assert_eq!(t, rnr_timer_ns(c & 0x1F));
    if c & 0x1F >= 2 {
        assert!(rnr_timer_ns((c & 0x1F) - 1) < t);
    }
    match ack_timeout_ns(c) {
        None => assert_eq!(c & 0x1F, 0),
        Some(ns) => {
            assert_eq!(ns, 4096u64 << (c & 0x1F));
            assert!(ns >= 8192);
        }
    }
}
