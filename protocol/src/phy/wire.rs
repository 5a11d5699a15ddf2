//! A one-way wire: a bounded delay line whose frames pass through a [`FaultInjector`].

use super::FaultInjector;
use crate::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    at: Instant,
    order: u64,
    len: usize,
}

/// Counters of a [`Wire`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WireStats {
    /// Frames offered to the wire.
    pub sent: u64,
    /// Frames (copies) handed to the receiver.
    pub delivered: u64,
    /// Frames lost because `SLOTS` were in flight already.
    pub overflow: u64,
    /// Frames longer than `MTU` (dropped).
    pub too_long: u64,
    /// Frames in flight when the link went down (lost).
    pub lost_in_flight: u64,
}

/// A one-way wire with fixed latency, up to `SLOTS` frames of up to `MTU` bytes in flight,
/// and a [`FaultInjector`] on every frame. Frames arrive in order of arrival time, ties in
/// the order sent, so only the injector's delays reorder them.
#[derive(Debug, Clone)]
pub struct Wire<const SLOTS: usize, const MTU: usize> {
    injector: FaultInjector,
    latency: Duration,
    bufs: [[u8; MTU]; SLOTS],
    meta: [Option<Slot>; SLOTS],
    order: u64,
    stats: WireStats,
}

impl<const SLOTS: usize, const MTU: usize> Wire<SLOTS, MTU> {
    /// An empty wire.
    pub fn new(injector: FaultInjector, latency: Duration) -> Self {
        Wire {
            injector,
            latency,
            bufs: [[0; MTU]; SLOTS],
            meta: [None; SLOTS],
            order: 0,
            stats: WireStats::default(),
        }
    }

    /// The injector (for its counters, or to change its link state directly).
    pub fn injector(&self) -> &FaultInjector {
        &self.injector
    }
    /// The injector, mutably.
    pub fn injector_mut(&mut self) -> &mut FaultInjector {
        &mut self.injector
    }
    /// Counters.
    pub fn stats(&self) -> &WireStats {
        &self.stats
    }
    /// Frames in flight.
    pub fn in_flight(&self) -> usize {
        self.meta.iter().flatten().count()
    }
    /// The wire's latency.
    pub fn latency(&self) -> Duration {
        self.latency
    }

    /// Put a frame on the wire at `now`. Returns how many copies will arrive (0, 1 or 2).
    pub fn send(&mut self, now: Instant, frame: &[u8]) -> u8 {
        self.stats.sent = self.stats.sent.saturating_add(1);
        if frame.len() > MTU {
            self.stats.too_long = self.stats.too_long.saturating_add(1);
            return 0;
        }
        let Some(first) = self.meta.iter().position(Option::is_none) else {
            self.stats.overflow = self.stats.overflow.saturating_add(1);
            return 0;
        };
        let Some(buf) = self.bufs.get_mut(first) else {
            return 0;
        };
        let (dst, _) = buf.split_at_mut(frame.len());
        dst.copy_from_slice(frame);
        let v = self.injector.apply(dst);
        if v.copies == 0 {
            return 0;
        }
        let at = now
            .saturating_add(self.latency)
            .saturating_add(v.extra_delay);
        self.place(first, at, frame.len());
        if v.copies == 2 {
            match self.meta.iter().position(Option::is_none) {
                Some(second) => {
                    // Both indices come from `position` over `meta`, which has SLOTS entries.
                    self.bufs.copy_within(first..=first, second);
                    self.place(second, at, frame.len());
                }
                None => {
                    self.stats.overflow = self.stats.overflow.saturating_add(1);
                    return 1;
                }
            }
        }
        v.copies
    }

    fn place(&mut self, i: usize, at: Instant, len: usize) {
        if let Some(m) = self.meta.get_mut(i) {
            *m = Some(Slot {
                at,
                order: self.order,
                len,
            });
            self.order = self.order.wrapping_add(1);
        }
    }

    /// When the next frame arrives.
    pub fn next_arrival(&self) -> Option<Instant> {
        self.meta.iter().flatten().map(|s| s.at).min()
    }

    /// Hand the next frame that has arrived by `now` to `f` (no copy).
    pub fn recv_with<R>(&mut self, now: Instant, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        let (i, slot) = self
            .meta
            .iter()
            .enumerate()
            .filter_map(|(i, m)| m.map(|s| (i, s)))
            .filter(|(_, s)| s.at <= now)
            .min_by_key(|(_, s)| (s.at, s.order))?;
        if let Some(m) = self.meta.get_mut(i) {
            *m = None;
        }
        self.stats.delivered = self.stats.delivered.saturating_add(1);
        let bytes = self.bufs.get(i).and_then(|b| b.get(..slot.len))?;
        Some(f(bytes))
    }

    /// Take the link down (every frame in flight is lost, new ones are dropped) or up.
    pub fn set_link_up(&mut self, up: bool) {
        self.injector.set_link_up(up);
        if !up {
            let n = u64::try_from(self.in_flight()).unwrap_or(u64::MAX);
            self.stats.lost_in_flight = self.stats.lost_in_flight.saturating_add(n);
            self.meta = [None; SLOTS];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phy::{FaultConfig, Probability};

    #[test]
    fn delivers_in_order_after_latency() {
        let mut w = Wire::<4, 16>::new(
            FaultInjector::new(FaultConfig::default(), 1),
            Duration::from_ns(10),
        );
        let t0 = Instant::ZERO;
        assert_eq!(w.send(t0, &[1, 2]), 1);
        assert_eq!(w.send(t0, &[3]), 1);
        assert_eq!(w.next_arrival(), Some(t0 + Duration::from_ns(10)));
        assert_eq!(w.recv_with(t0, |b| b.to_vec()), None);
        let t1 = t0 + Duration::from_ns(10);
        assert_eq!(w.recv_with(t1, |b| b.to_vec()), Some(std::vec![1, 2]));
        assert_eq!(w.recv_with(t1, |b| b.to_vec()), Some(std::vec![3]));
        assert_eq!(w.recv_with(t1, |b| b.len()), None);
        assert_eq!(w.send(t0, &[0; 17]), 0);
        assert_eq!(w.stats().too_long, 1);
        for _ in 0..4 {
            assert_eq!(w.send(t1, &[9]), 1);
        }
        assert_eq!(w.send(t1, &[9]), 0);
        assert_eq!(w.stats().overflow, 1);
        w.set_link_up(false);
        assert_eq!(w.in_flight(), 0);
        assert_eq!(w.stats().lost_in_flight, 4);
        assert_eq!(w.send(t1, &[9]), 0);
        w.set_link_up(true);
        assert_eq!(w.send(t1, &[9]), 1);
    }

    #[test]
    fn duplicates_arrive_twice() {
        let cfg = FaultConfig {
            duplicate_rate: Probability::ALWAYS,
            ..FaultConfig::default()
        };
        let mut w = Wire::<4, 8>::new(FaultInjector::new(cfg, 1), Duration::ZERO);
        assert_eq!(w.send(Instant::ZERO, &[7, 7]), 2);
        assert_eq!(
            w.recv_with(Instant::ZERO, |b| b.to_vec()),
            Some(std::vec![7, 7])
        );
        assert_eq!(
            w.recv_with(Instant::ZERO, |b| b.to_vec()),
            Some(std::vec![7, 7])
        );
    }
}
