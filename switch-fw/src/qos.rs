//! Performance isolation at each egress (`spec-notes/switch.md#qos`): smooth weighted round
//! robin ([`SmoothWrr`]) first across VCs, then across the partitions within the chosen VC,
//! and an optional per-partition rate cap ([`Gcra`], a token bucket on explicit time).
//!
//! Weights count frames, not bytes. Under saturation (every class backlogged and eligible)
//! smooth WRR serves class `i` exactly `w_i` times in every `Σw` picks, interleaved rather
//! than in bursts, so one tenant's incast cannot starve another.

use crate::tables::RateCap;
use podlink_protocol::time::Instant;

/// Smooth weighted round robin over up to `N` classes (`N` ≤ 32).
///
/// Every pick adds each eligible class's weight to its running value and chooses the largest
/// (lowest index on a tie); the chosen class then gives back the sum of the eligible weights.
/// [`SmoothWrr::pick`] only looks; [`SmoothWrr::commit`] applies, so a pick that cannot be
/// served (no credit after all) leaves the state untouched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SmoothWrr<const N: usize> {
    current: [i32; N],
}

impl<const N: usize> Default for SmoothWrr<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> SmoothWrr<N> {
    /// All running values zero.
    pub const fn new() -> Self {
        SmoothWrr { current: [0; N] }
    }

    /// The class the next pick serves among `eligible` (bit `i` = class `i`), or `None`.
    /// `weight(i)` gives class `i`'s weight (≥ 1).
    pub fn pick(&self, eligible: u32, weight: impl Fn(usize) -> u8) -> Option<usize> {
        let mut best: Option<(usize, i32)> = None;
        for (i, &c) in self.current.iter().enumerate() {
            if eligible & (1u32 << (i & 31)) == 0 {
                continue;
            }
            let v = c.saturating_add(i32::from(weight(i)));
            if best.is_none_or(|(_, b)| v > b) {
                best = Some((i, v));
            }
        }
        best.map(|(i, _)| i)
    }

    /// Apply a pick of `chosen` among `eligible`.
    pub fn commit(&mut self, chosen: usize, eligible: u32, weight: impl Fn(usize) -> u8) {
        let mut total = 0i32;
        for (i, c) in self.current.iter_mut().enumerate() {
            if eligible & (1u32 << (i & 31)) != 0 {
                let w = i32::from(weight(i));
                *c = c.saturating_add(w);
                total = total.saturating_add(w);
            }
        }
        if let Some(c) = self.current.get_mut(chosen) {
            *c = c.saturating_sub(total);
        }
    }

    /// Forget the running values (after a weight change).
    pub fn reset(&mut self) {
        self.current = [0; N];
    }
}

/// A rate cap by the generic cell rate algorithm (virtual scheduling): the bucket is a
/// theoretical arrival time (TAT) on the caller's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Gcra {
    tat_ps: u64,
}

impl Gcra {
    /// A bucket that lets the full burst through now.
    pub const fn new() -> Gcra {
        Gcra { tat_ps: 0 }
    }

    fn ps_per_byte(cap: &RateCap) -> u64 {
        // bytes per µs → picoseconds per byte (rates above 1 TB/s cost nothing).
        1_000_000 / u64::from(cap.bytes_per_us.max(1))
    }

    fn tolerance_ps(cap: &RateCap) -> u64 {
        u64::from(cap.burst_bytes).saturating_mul(Self::ps_per_byte(cap))
    }

    /// A frame may leave at `now` without exceeding the cap.
    pub fn conforms(&self, cap: &RateCap, now: Instant) -> bool {
        self.tat_ps <= now.as_ps().saturating_add(Self::tolerance_ps(cap))
    }

    /// Charge a frame of `bytes` sent at `now`.
    pub fn charge(&mut self, cap: &RateCap, now: Instant, bytes: u16) {
        let cost = u64::from(bytes).saturating_mul(Self::ps_per_byte(cap));
        self.tat_ps = self.tat_ps.max(now.as_ps()).saturating_add(cost);
    }

    /// The earliest time a frame conforms again.
    pub fn next_conforming(&self, cap: &RateCap) -> Instant {
        Instant::from_ps(self.tat_ps.saturating_sub(Self::tolerance_ps(cap)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_wrr_exact_shares() {
        let w = [5u8, 3, 1, 1];
        let mut s = SmoothWrr::<4>::new();
        let mut n = [0u32; 4];
        for _ in 0..1000 {
            let i = s.pick(0b1111, |i| w[i]).unwrap();
            s.commit(i, 0b1111, |i| w[i]);
            n[i] += 1;
        }
        assert_eq!(n, [500, 300, 100, 100]);
        assert_eq!(s.pick(0, |i| w[i]), None);
    }

    #[test]
    fn test_wrr_interleaves() {
        let mut s = SmoothWrr::<2>::new();
        let mut seq = [0usize; 4];
        for slot in seq.iter_mut() {
            let i = s.pick(0b11, |_| 1).unwrap();
            s.commit(i, 0b11, |_| 1);
            *slot = i;
        }
        assert_eq!(seq, [0, 1, 0, 1]);
    }

    #[test]
    fn test_gcra_rate_and_burst() {
        let cap = RateCap {
            bytes_per_us: 100,
            burst_bytes: 200,
        }; // 10 ns per byte
        let mut g = Gcra::new();
        let t0 = Instant::from_ps(1_000_000);
        // Burst: 200 B of tolerance lets 3 frames of 100 B out at once (the third exceeds).
        let mut sent = 0;
        while g.conforms(&cap, t0) {
            g.charge(&cap, t0, 100);
            sent += 1;
        }
        assert_eq!(sent, 3);
        let next = g.next_conforming(&cap);
        assert!(g.conforms(&cap, next));
        assert!(!g.conforms(&cap, Instant::from_ps(next.as_ps() - 1)));
        // Long-run rate: over 1 ms, about 100 kB.
        let mut bytes = 0u64;
        let mut t = next;
        let end = Instant::from_ps(t0.as_ps() + 1_000_000_000);
        while t < end {
            if g.conforms(&cap, t) {
                g.charge(&cap, t, 64);
                bytes += 64;
            }
            t = Instant::from_ps(t.as_ps() + 10_000);
        }
        assert!((99_000..=101_000).contains(&bytes), "{bytes}");
    }
}
