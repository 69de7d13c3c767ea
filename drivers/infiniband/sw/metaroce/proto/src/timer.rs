// SPDX-License-Identifier: GPL-2.0
//! Transport timer values: the local ACK timeout and the RNR NAK timer.
//!
//! All times in this crate are `u64` nanoseconds on a clock supplied by the
//! caller; the core never reads a clock itself.

/// RNR NAK timer field (5 bits) to nanoseconds, IBTA table 45.
const RNR_NS: [u64; 32] = [
    655_360_000,
    10_000,
    20_000,
    30_000,
    40_000,
    60_000,
    80_000,
    120_000,
    160_000,
    240_000,
    320_000,
    480_000,
    640_000,
    960_000,
    1_280_000,
    1_920_000,
    2_560_000,
    3_840_000,
    5_120_000,
    7_680_000,
    10_240_000,
    15_360_000,
    20_480_000,
    30_720_000,
    40_960_000,
    61_440_000,
    81_920_000,
    122_880_000,
    163_840_000,
    245_760_000,
    327_680_000,
    491_520_000,
];

/// Minimum delay, in nanoseconds, that an RNR NAK carrying timer `code`
/// asks the requester to wait. Only the low five bits of `code` are used.
pub const fn rnr_timer_ns(code: u8) -> u64 {
    RNR_NS[(code & 0x1F) as usize]
}

/// Local ACK timeout for the QP attribute `timeout` (5 bits): 4.096 us *
/// 2^timeout, or `None` for 0, which disables the timer.
pub const fn ack_timeout_ns(timeout: u8) -> Option<u64> {
    if timeout & 0x1F == 0 {
        None
    } else {
        Some(4096 << (timeout & 0x1F))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values() {
        assert_eq!(rnr_timer_ns(0), 655_360_000);
        assert_eq!(rnr_timer_ns(1), 10_000);
        assert_eq!(rnr_timer_ns(14), 1_280_000);
        assert_eq!(rnr_timer_ns(31), 491_520_000);
        assert_eq!(rnr_timer_ns(32 + 1), 10_000);
        assert!(RNR_NS.windows(2).skip(1).all(|w| w[0] < w[1]));
        assert_eq!(ack_timeout_ns(0), None);
        assert_eq!(ack_timeout_ns(1), Some(8_192));
        assert_eq!(ack_timeout_ns(14), Some(67_108_864));
        assert_eq!(ack_timeout_ns(31), Some(4096 << 31));
    }
}
