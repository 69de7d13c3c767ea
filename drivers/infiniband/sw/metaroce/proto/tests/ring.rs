// SPDX-License-Identifier: GPL-2.0
//! Property tests of the user-queue index arithmetic (`ring.rs`): whatever a process writes into
//! the shared indices, every slot named lies inside the queue; an honest producer and consumer
//! see their entries in order across any number of index wraps.

use metaroce_proto::ring::{Geometry, HEADER_LEN};
use proptest::prelude::*;
use std::collections::VecDeque;

proptest! {
    #[test]
    fn hostile_indices_stay_inside_the_queue(
        entries in 1u32..5000,
        elem in 1usize..4096,
        p in any::<u32>(),
        c in any::<u32>(),
    ) {
        let g = Geometry::for_entries(entries, elem).unwrap();
        prop_assert!(g.capacity() >= entries);
        prop_assert!(g.elem_size() >= elem);
        for i in [p, c, g.next(p), g.next(c)] {
            let off = g.slot_offset(i);
            prop_assert!(off >= HEADER_LEN);
            prop_assert!(off + g.elem_size() <= g.buf_len());
        }
        prop_assert!(g.count(p, c) <= g.capacity());
        prop_assert!(g.next(p) <= g.mask());
        prop_assert_eq!(g.has_room(p, c), g.count(p, c) < g.capacity());
    }

    /// A producer and a consumer over a byte buffer, as the kernel and librxe share one: each
    /// entry carries its sequence number; a run of produce/consume steps wraps the indices many
    /// times (small queues, long runs).
    #[test]
    fn entries_arrive_in_order_across_wraps(
        entries in 1u32..9,
        elem in 4usize..40,
        steps in proptest::collection::vec((any::<bool>(), 1u32..12), 1..200),
    ) {
        let g = Geometry::for_entries(entries, elem).unwrap();
        let mut buf = vec![0u8; g.buf_len()];
        let (mut prod, mut cons) = (0u32, 0u32);
        let mut model = VecDeque::new();
        let mut next_seq = 0u32;
        for (produce, k) in steps {
            for _ in 0..k {
                if produce {
                    if !g.has_room(prod, cons) {
                        prop_assert_eq!(model.len() as u32, g.capacity());
                        break;
                    }
                    let off = g.slot_offset(prod);
                    buf[off..off + 4].copy_from_slice(&next_seq.to_le_bytes());
                    model.push_back(next_seq);
                    next_seq += 1;
                    prod = g.next(prod);
                } else {
                    if g.count(prod, cons) == 0 {
                        prop_assert!(model.is_empty());
                        break;
                    }
                    let off = g.slot_offset(cons);
                    let seq = u32::from_le_bytes(buf[off..off + 4].try_into().unwrap());
                    prop_assert_eq!(Some(seq), model.pop_front());
                    cons = g.next(cons);
                }
                prop_assert_eq!(g.count(prod, cons) as usize, model.len());
            }
        }
    }
}
