// SPDX-License-Identifier: GPL-2.0
//! Completion-event moderation of a CQ: the `cq_count` and `cq_period` that
//! `ibv_modify_cq` (and ib_core's `rdma_set_cq_moderation`, which DIM uses
//! for kernel consumers) set.
//!
//! An armed CQ normally tells its consumer of the next completion at once.
//! With moderation it holds the event until `count` completions arrived
//! since it was armed, or `period` microseconds passed since the first of
//! them, whichever comes first, so a consumer woken by events takes fewer
//! interrupts on a bulk transfer. Only events are held: completions are
//! queued and pollable as they arrive.
//!
//! Our choices where the verbs leave it open: a count of 0 or 1 means every
//! completion (moderation off, the default); a period of 0 means no time
//! bound, so a CQ waits for `count` completions however long that takes
//! (as a consumer that sets only a count asks). The period runs from the
//! first completion held, not from the arming. A completion in error is
//! told at once with whatever is held, so a QP that fails is never left
//! waiting for a count that will not come.
//!
//! The state machine is pure: the caller keeps it under the CQ's lock,
//! owns the timer and reports its expiry ([`Moderator::on_timer`]).

/// Largest `cq_count` (the verbs' field is 16 bits).
pub const MAX_COUNT: u16 = u16::MAX;
/// Largest `cq_period` in microseconds (16 bits: about 65 ms).
pub const MAX_PERIOD_US: u16 = u16::MAX;

/// What the CQ does about a completion its arming asks to be told of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Tell the consumer now (the CQ is disarmed).
    Notify,
    /// Hold the event and start the CQ's timer to expire after this many
    /// nanoseconds; [`Moderator::on_timer`] then says whether to tell.
    StartTimer(u64),
    /// Hold the event (the timer runs already, or there is no period).
    Hold,
}

/// One CQ's moderation settings and the events it holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Moderator {
    count: u16,
    period_us: u16,
    /// Completions held since the consumer was last told.
    held: u16,
    /// The timer was started for the held completions and has not been
    /// reported expired.
    timing: bool,
}

impl Moderator {
    /// No moderation: every completion is told at once.
    pub const fn new() -> Self {
        Self {
            count: 0,
            period_us: 0,
            held: 0,
            timing: false,
        }
    }

    /// Sets the moderation (`cq_count`, `cq_period` in microseconds). Takes
    /// effect from the next completion; events already held stay held until
    /// it or the running timer releases them.
    pub fn set(&mut self, count: u16, period_us: u16) {
        self.count = count;
        self.period_us = period_us;
    }

    /// The settings: (`cq_count`, `cq_period`).
    pub fn settings(&self) -> (u16, u16) {
        (self.count, self.period_us)
    }

    /// Completions held now.
    pub fn held(&self) -> u16 {
        self.held
    }

    /// A completion arrived that the CQ's arming asks to be told of;
    /// `failed`: it completed in error.
    pub fn on_completion(&mut self, failed: bool) -> Event {
        if self.count <= 1 || failed {
            self.reset();
            return Event::Notify;
        }
        self.held = self.held.saturating_add(1);
        if self.held >= self.count {
            self.reset();
            return Event::Notify;
        }
        if self.period_us == 0 || self.timing {
            return Event::Hold;
        }
        self.timing = true;
        Event::StartTimer(u64::from(self.period_us) * 1000)
    }

    /// The CQ's timer expired: whether to tell the consumer of the events
    /// held (then the caller disarms the CQ). A timer that outlived the
    /// events it was started for (they were told at the count) tells
    /// nothing.
    pub fn on_timer(&mut self) -> bool {
        let tell = self.timing && self.held > 0;
        self.timing = false;
        if tell {
            self.held = 0;
        }
        tell
    }

    /// Forgets the events held (the consumer was told, or disarmed the CQ).
    /// A running timer then expires into nothing.
    pub fn reset(&mut self) {
        self.held = 0;
        self.timing = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_by_default_and_at_a_count_of_one() {
        let mut m = Moderator::new();
        assert_eq!(m.on_completion(false), Event::Notify);
        m.set(1, 100);
        assert_eq!(m.on_completion(false), Event::Notify);
        assert_eq!(m.held(), 0);
    }

    #[test]
    fn the_count_tells_and_the_first_held_completion_starts_the_timer_once() {
        let mut m = Moderator::new();
        m.set(4, 50);
        assert_eq!(m.on_completion(false), Event::StartTimer(50_000));
        assert_eq!(m.on_completion(false), Event::Hold);
        assert_eq!(m.on_completion(false), Event::Hold);
        assert_eq!(m.held(), 3);
        assert_eq!(m.on_completion(false), Event::Notify);
        assert_eq!(m.held(), 0);
        // The timer started for those expires into nothing.
        assert!(!m.on_timer());
        // The next round starts its own timer.
        assert_eq!(m.on_completion(false), Event::StartTimer(50_000));
    }

    #[test]
    fn the_period_tells_what_the_count_did_not_reach() {
        let mut m = Moderator::new();
        m.set(100, 20);
        assert_eq!(m.on_completion(false), Event::StartTimer(20_000));
        assert_eq!(m.on_completion(false), Event::Hold);
        assert!(m.on_timer());
        assert_eq!(m.held(), 0);
        // Nothing held: a second expiry (a restarted timer) tells nothing.
        assert!(!m.on_timer());
    }

    #[test]
    fn no_period_waits_for_the_count() {
        let mut m = Moderator::new();
        m.set(3, 0);
        assert_eq!(m.on_completion(false), Event::Hold);
        assert_eq!(m.on_completion(false), Event::Hold);
        assert!(!m.on_timer());
        assert_eq!(m.on_completion(false), Event::Notify);
    }

    #[test]
    fn a_reset_drops_the_held_events_and_the_timer() {
        let mut m = Moderator::new();
        m.set(8, 10);
        assert_eq!(m.on_completion(false), Event::StartTimer(10_000));
        m.reset();
        assert!(!m.on_timer());
        assert_eq!(m.on_completion(false), Event::StartTimer(10_000));
    }

    #[test]
    fn lowering_the_count_releases_at_the_next_completion() {
        let mut m = Moderator::new();
        m.set(10, 0);
        for _ in 0..5 {
            assert_eq!(m.on_completion(false), Event::Hold);
        }
        m.set(4, 0);
        assert_eq!(m.settings(), (4, 0));
        assert_eq!(m.on_completion(false), Event::Notify);
    }

    #[test]
    fn an_error_is_told_at_once_with_what_is_held() {
        let mut m = Moderator::new();
        m.set(16, 0);
        assert_eq!(m.on_completion(false), Event::Hold);
        assert_eq!(m.on_completion(true), Event::Notify);
        assert_eq!(m.held(), 0);
        assert_eq!(m.on_completion(false), Event::Hold);
    }

    #[test]
    fn the_largest_settings_do_not_overflow() {
        let mut m = Moderator::new();
        m.set(MAX_COUNT, MAX_PERIOD_US);
        assert_eq!(m.on_completion(false), Event::StartTimer(65_535_000));
        for _ in 2..MAX_COUNT {
            assert_eq!(m.on_completion(false), Event::Hold);
        }
        assert_eq!(m.on_completion(false), Event::Notify);
    }
}
