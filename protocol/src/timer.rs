//! A fixed table of deadlines indexed by a machine's `Timer` enum (quinn-proto's
//! `connection/timer.rs` model): `poll_timeout` is the minimum entry, `handle_timeout`
//! fires only the entries that have expired, so a spurious call does nothing.

#![cfg_attr(not(test), deny(clippy::arithmetic_side_effects))]

use crate::time::Instant;

/// Deadlines of `N` timers; `None` is a stopped timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimerTable<const N: usize> {
    at: [Option<Instant>; N],
}

impl<const N: usize> TimerTable<N> {
    /// All timers stopped.
    pub(crate) const fn new() -> Self {
        TimerTable { at: [None; N] }
    }

    /// Arm timer `i` to fire at `t` (replacing any earlier deadline).
    pub(crate) fn set(&mut self, i: usize, t: Instant) {
        if let Some(slot) = self.at.get_mut(i) {
            *slot = Some(t);
        }
    }

    /// Arm timer `i` only if it is stopped.
    pub(crate) fn set_if_stopped(&mut self, i: usize, t: Instant) {
        if let Some(slot) = self.at.get_mut(i) {
            if slot.is_none() {
                *slot = Some(t);
            }
        }
    }

    /// Stop timer `i`.
    pub(crate) fn stop(&mut self, i: usize) {
        if let Some(slot) = self.at.get_mut(i) {
            *slot = None;
        }
    }

    /// Deadline of timer `i`.
    pub(crate) fn get(&self, i: usize) -> Option<Instant> {
        self.at.get(i).copied().flatten()
    }

    /// Stop every timer.
    pub(crate) fn stop_all(&mut self) {
        self.at = [None; N];
    }

    /// The earliest deadline. (Branch-free over the table: machines poll it after every
    /// event.)
    pub(crate) fn next(&self) -> Option<Instant> {
        let mut any = false;
        let mut min = u64::MAX;
        for t in &self.at {
            any |= t.is_some();
            min = min.min(t.map_or(u64::MAX, Instant::as_ps));
        }
        any.then_some(Instant::from_ps(min))
    }

    /// If timer `i` has expired at `now`, stop it and return `true`.
    pub(crate) fn take_expired(&mut self, i: usize, now: Instant) -> bool {
        match self.at.get_mut(i) {
            Some(slot) if slot.is_some_and(|t| t <= now) => {
                *slot = None;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_and_expiry() {
        let mut t = TimerTable::<3>::new();
        assert_eq!(t.next(), None);
        t.set(0, Instant::from_ps(50));
        t.set(2, Instant::from_ps(20));
        t.set_if_stopped(2, Instant::from_ps(99));
        assert_eq!(t.next(), Some(Instant::from_ps(20)));
        assert!(!t.take_expired(0, Instant::from_ps(20)));
        assert!(t.take_expired(2, Instant::from_ps(20)));
        assert!(!t.take_expired(2, Instant::from_ps(20)));
        assert_eq!(t.get(0), Some(Instant::from_ps(50)));
        t.set(7, Instant::ZERO); // out of range: ignored
        t.stop_all();
        assert_eq!(t.next(), None);
        // A deadline at the far end of time is still a deadline.
        t.set(1, Instant::NEVER);
        assert_eq!(t.next(), Some(Instant::NEVER));
        t.set(0, Instant::from_ps(7));
        assert_eq!(t.next(), Some(Instant::from_ps(7)));
    }
}
