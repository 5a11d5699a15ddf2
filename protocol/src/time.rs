//! Time as a value (`spec-notes/link.md#time`): podlink never reads a clock.
//!
//! [`Instant`] and [`Duration`] count picoseconds in a `u64` (about 213 days of range).
//! Adapters convert their own clock at the edge: a cycle counter in firmware,
//! `std::time::Instant` in the host driver, simulated time in the simulator.

use core::fmt;
use core::ops::{Add, AddAssign, Sub};

/// A span of time in picoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(u64);

impl Duration {
    /// Zero.
    pub const ZERO: Duration = Duration(0);
    /// The longest representable span.
    pub const MAX: Duration = Duration(u64::MAX);

    /// From picoseconds.
    pub const fn from_ps(ps: u64) -> Self {
        Duration(ps)
    }
    /// From nanoseconds (saturating).
    pub const fn from_ns(ns: u64) -> Self {
        Duration(ns.saturating_mul(1_000))
    }
    /// From microseconds (saturating).
    pub const fn from_us(us: u64) -> Self {
        Duration(us.saturating_mul(1_000_000))
    }
    /// From milliseconds (saturating).
    pub const fn from_ms(ms: u64) -> Self {
        Duration(ms.saturating_mul(1_000_000_000))
    }
    /// Picoseconds.
    pub const fn as_ps(self) -> u64 {
        self.0
    }
    /// Whole nanoseconds.
    pub const fn as_ns(self) -> u64 {
        self.0 / 1_000
    }
    /// Saturating sum.
    pub const fn saturating_add(self, o: Duration) -> Duration {
        Duration(self.0.saturating_add(o.0))
    }
    /// Saturating product with an integer.
    pub const fn saturating_mul(self, n: u64) -> Duration {
        Duration(self.0.saturating_mul(n))
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ps", self.0)
    }
}

/// A point in time: picoseconds since an arbitrary epoch chosen by the caller.
///
/// Callers must pass monotonically non-decreasing instants to a state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The epoch.
    pub const ZERO: Instant = Instant(0);
    /// The far future (used for "never").
    pub const NEVER: Instant = Instant(u64::MAX);

    /// From picoseconds since the epoch.
    pub const fn from_ps(ps: u64) -> Self {
        Instant(ps)
    }
    /// Picoseconds since the epoch.
    pub const fn as_ps(self) -> u64 {
        self.0
    }
    /// Time elapsed since `earlier` (zero if `earlier` is later).
    pub const fn saturating_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
    /// `self + d`, saturating at [`Instant::NEVER`].
    pub const fn saturating_add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }
}

/// The earlier of two optional deadlines (`None`: no deadline), as `[a, b].into_iter()
/// .flatten().min()` but without the iterator (timers are polled after every event).
#[inline]
pub fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        self.saturating_add(d)
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = self.saturating_add(d);
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_since(earlier)
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t={} ps", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_of_optional_deadlines() {
        let (a, b) = (Some(Instant::from_ps(5)), Some(Instant::from_ps(3)));
        assert_eq!(earliest(a, b), b);
        assert_eq!(earliest(b, a), b);
        assert_eq!(earliest(a, None), a);
        assert_eq!(earliest(None, b), b);
        assert_eq!(earliest(None, None), None);
        assert_eq!(earliest(Some(Instant::NEVER), a), a);
    }

    #[test]
    fn arithmetic_saturates() {
        let t = Instant::from_ps(10) + Duration::from_ns(1);
        assert_eq!(t.as_ps(), 1_010);
        assert_eq!(Instant::NEVER + Duration::from_ms(1), Instant::NEVER);
        assert_eq!(Instant::ZERO - t, Duration::ZERO);
        assert_eq!(Duration::from_us(1).as_ns(), 1_000);
    }
}
