//! Physical-layer helpers (`spec-notes/link.md#fault-injection`): a deterministic
//! [`FaultInjector`] for flits and frames, and a [`Wire`] (a delay line that runs every
//! frame through an injector) for tests, the simulator and bring-up.
//!
//! Everything is seeded and integer-only: the same seed and inputs give the same faults on
//! every host and target.

#![cfg_attr(not(test), deny(clippy::arithmetic_side_effects))]

mod wire;

pub use self::wire::{Wire, WireStats};

use crate::time::Duration;

/// xorshift64* pseudo-random numbers: tiny, seeded, deterministic. Not cryptographic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Xorshift64(u64);

impl Xorshift64 {
    /// A generator from `seed` (0 is replaced by a fixed non-zero constant).
    pub const fn new(seed: u64) -> Self {
        Xorshift64(if seed == 0 {
            0x9e37_79b9_7f4a_7c15
        } else {
            seed
        })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        let wide = u128::from(self.next_u64()).wrapping_mul(u128::from(n));
        u64::try_from(wide >> 64).unwrap_or(0)
    }

    /// `true` with probability `p`.
    pub fn chance(&mut self, p: Probability) -> bool {
        p.0 != 0 && self.next_u64() < p.0
    }
}

/// A probability in units of 2⁻⁶⁴ (so from 0 up to 1 − 2⁻⁶⁴).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Probability(pub u64);

impl Probability {
    /// Never.
    pub const ZERO: Probability = Probability(0);
    /// Almost surely (1 − 2⁻⁶⁴).
    pub const ALWAYS: Probability = Probability(u64::MAX);

    /// From a float in `[0, 1]` (clamped; NaN is zero).
    pub fn from_f64(p: f64) -> Self {
        if p.is_nan() || p <= 0.0 {
            Probability::ZERO
        } else if p >= 1.0 {
            Probability::ALWAYS
        } else {
            // Exact enough: 2^64 as f64, then a saturating cast.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            Probability((p * 18_446_744_073_709_551_616.0) as u64)
        }
    }

    /// `n` in a million.
    pub const fn per_million(n: u32) -> Self {
        // n < 2^32, so n << 64 fits in u128; the quotient fits in u64 unless n ≥ 10^6.
        let v = ((n as u128) << 64) / 1_000_000;
        Probability(if v > u64::MAX as u128 {
            u64::MAX
        } else {
            v as u64
        })
    }

    /// As a float (for reports).
    #[allow(clippy::cast_precision_loss)]
    pub fn as_f64(self) -> f64 {
        self.0 as f64 / 18_446_744_073_709_551_616.0
    }
}

/// The faults a [`FaultInjector`] applies. All zero (the default) is a perfect wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FaultConfig {
    /// Independent bit flips, per bit.
    pub bit_error_rate: Probability,
    /// A burst error in a frame, per frame.
    pub burst_rate: Probability,
    /// Length of a burst in bits (first and last bit flipped, those between at random).
    pub burst_len: u32,
    /// A frame vanishes, per frame.
    pub drop_rate: Probability,
    /// A frame arrives twice, per frame.
    pub duplicate_rate: Probability,
    /// A frame is held back, per frame (it may then arrive after later frames).
    pub delay_rate: Probability,
    /// Longest extra delay (uniform from zero).
    pub max_delay: Duration,
}

/// What happens to one frame after [`FaultInjector::apply`] (its bytes may be corrupted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Copies to deliver: 0 (dropped), 1, or 2 (duplicated).
    pub copies: u8,
    /// Extra delay on top of the wire's latency.
    pub extra_delay: Duration,
}

/// Counters of a [`FaultInjector`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FaultStats {
    /// Frames seen.
    pub frames: u64,
    /// Bits flipped (random errors and bursts).
    pub bits_flipped: u64,
    /// Frames with at least one flipped bit.
    pub frames_corrupted: u64,
    /// Burst errors.
    pub bursts: u64,
    /// Frames dropped by `drop_rate`.
    pub dropped: u64,
    /// Frames dropped because the link was down.
    pub dropped_link_down: u64,
    /// Frames duplicated.
    pub duplicated: u64,
    /// Frames delayed.
    pub delayed: u64,
}

/// Seeded fault injection for frames or flits (model: smoltcp's `phy::FaultInjector`):
/// bit errors at a bit error rate (with geometric skipping, so a low rate costs nothing per
/// bit), burst errors, drops, duplicates, delays, and link down/up.
#[derive(Debug, Clone)]
pub struct FaultInjector {
    cfg: FaultConfig,
    rng: Xorshift64,
    /// `q^(2^i)` for `q = 1 - bit_error_rate`, in units of 2⁻⁶⁴ scaled to `1 << 64`.
    pow: [u128; 64],
    /// Good bits before the next random bit error.
    gap: u64,
    link_up: bool,
    stats: FaultStats,
}

const ONE: u128 = 1 << 64;

impl FaultInjector {
    /// An injector applying `cfg`, seeded with `seed`; the link starts up.
    pub fn new(cfg: FaultConfig, seed: u64) -> Self {
        let mut pow = [ONE; 64];
        let mut q = ONE.saturating_sub(u128::from(cfg.bit_error_rate.0));
        for p in pow.iter_mut() {
            *p = q;
            q = q.saturating_mul(q) >> 64;
        }
        let mut f = FaultInjector {
            cfg,
            rng: Xorshift64::new(seed),
            pow,
            gap: 0,
            link_up: true,
            stats: FaultStats::default(),
        };
        f.gap = f.sample_gap();
        f
    }

    /// The configuration.
    pub fn config(&self) -> &FaultConfig {
        &self.cfg
    }
    /// Counters.
    pub fn stats(&self) -> &FaultStats {
        &self.stats
    }
    /// The link is up.
    pub fn is_link_up(&self) -> bool {
        self.link_up
    }
    /// Take the link down (every frame is dropped) or bring it back up.
    pub fn set_link_up(&mut self, up: bool) {
        self.link_up = up;
    }
    /// The injector's generator (to draw further decisions from the same seed).
    pub fn rng(&mut self) -> &mut Xorshift64 {
        &mut self.rng
    }

    /// Geometric: good bits before the next error, `P(gap ≥ k) = q^k`.
    fn sample_gap(&mut self) -> u64 {
        if self.cfg.bit_error_rate.0 == 0 {
            return u64::MAX;
        }
        let u = u128::from(self.rng.next_u64()).saturating_add(1); // (0, 1]
        let mut acc = ONE;
        let mut k = 0u64;
        for i in (0..64u32).rev() {
            let cand = acc.saturating_mul(self.pow.get(i as usize).copied().unwrap_or(0)) >> 64;
            if cand >= u {
                acc = cand;
                k |= 1u64 << i;
            }
        }
        k
    }

    fn flip(frame: &mut [u8], bit: u64) -> bool {
        let byte = usize::try_from(bit >> 3).unwrap_or(usize::MAX);
        match frame.get_mut(byte) {
            Some(b) => {
                *b ^= 0x80 >> (bit & 7);
                true
            }
            None => false,
        }
    }

    /// Decide the fate of one frame and corrupt it in place.
    pub fn apply(&mut self, frame: &mut [u8]) -> Verdict {
        self.stats.frames = self.stats.frames.saturating_add(1);
        let dropped = Verdict {
            copies: 0,
            extra_delay: Duration::ZERO,
        };
        if !self.link_up {
            self.stats.dropped_link_down = self.stats.dropped_link_down.saturating_add(1);
            return dropped;
        }
        let bits = u64::try_from(frame.len())
            .unwrap_or(u64::MAX)
            .saturating_mul(8);
        let mut flipped = 0u64;
        // Random bit errors: walk the gaps.
        let mut pos = 0u64;
        while self.gap < bits.saturating_sub(pos) {
            pos = pos.saturating_add(self.gap);
            if Self::flip(frame, pos) {
                flipped = flipped.saturating_add(1);
            }
            pos = pos.saturating_add(1);
            self.gap = self.sample_gap();
        }
        self.gap = self.gap.saturating_sub(bits.saturating_sub(pos));
        // Burst.
        if self.cfg.burst_len > 0 && bits > 0 && self.rng.chance(self.cfg.burst_rate) {
            self.stats.bursts = self.stats.bursts.saturating_add(1);
            let start = self.rng.below(bits);
            let len = u64::from(self.cfg.burst_len).min(bits.saturating_sub(start));
            for i in 0..len {
                let edge = i == 0 || i.saturating_add(1) == len;
                if (edge || self.rng.next_u64() & 1 == 1)
                    && Self::flip(frame, start.saturating_add(i))
                {
                    flipped = flipped.saturating_add(1);
                }
            }
        }
        if flipped > 0 {
            self.stats.bits_flipped = self.stats.bits_flipped.saturating_add(flipped);
            self.stats.frames_corrupted = self.stats.frames_corrupted.saturating_add(1);
        }
        if self.rng.chance(self.cfg.drop_rate) {
            self.stats.dropped = self.stats.dropped.saturating_add(1);
            return dropped;
        }
        let mut v = Verdict {
            copies: 1,
            extra_delay: Duration::ZERO,
        };
        if self.rng.chance(self.cfg.duplicate_rate) {
            self.stats.duplicated = self.stats.duplicated.saturating_add(1);
            v.copies = 2;
        }
        if self.rng.chance(self.cfg.delay_rate) {
            self.stats.delayed = self.stats.delayed.saturating_add(1);
            let max = self.cfg.max_delay.as_ps();
            v.extra_delay = Duration::from_ps(self.rng.below(max.saturating_add(1)));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xorshift_is_deterministic() {
        let mut a = Xorshift64::new(42);
        let mut b = Xorshift64::new(42);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        assert!(a.below(10) < 10);
        assert_eq!(a.below(0), 0);
        assert_ne!(Xorshift64::new(0).next_u64(), 0);
    }

    #[test]
    fn probability_conversions() {
        assert_eq!(Probability::from_f64(0.0), Probability::ZERO);
        assert_eq!(Probability::from_f64(2.0), Probability::ALWAYS);
        assert_eq!(Probability::from_f64(f64::NAN), Probability::ZERO);
        assert!((Probability::from_f64(0.25).as_f64() - 0.25).abs() < 1e-12);
        assert!((Probability::per_million(1).as_f64() - 1e-6).abs() < 1e-15);
    }

    #[test]
    fn perfect_wire_changes_nothing() {
        let mut f = FaultInjector::new(FaultConfig::default(), 1);
        let mut frame = [0xa5u8; 640];
        for _ in 0..1000 {
            assert_eq!(f.apply(&mut frame).copies, 1);
        }
        assert_eq!(frame, [0xa5; 640]);
        assert_eq!(f.stats().bits_flipped, 0);
    }

    #[test]
    fn bit_error_rate_is_about_right() {
        let cfg = FaultConfig {
            bit_error_rate: Probability::from_f64(1e-4),
            ..FaultConfig::default()
        };
        let mut f = FaultInjector::new(cfg, 7);
        let mut frame = [0u8; 640];
        for _ in 0..10_000 {
            f.apply(&mut frame);
        }
        // 10_000 × 5120 bits × 1e-4 = 5120 expected flips.
        let n = f.stats().bits_flipped;
        assert!((4700..5500).contains(&n), "{n}");
        // Flips land in the frame: each set bit is an odd number of flips.
        assert!(frame.iter().map(|b| b.count_ones()).sum::<u32>() > 0);
    }

    #[test]
    fn bursts_drops_duplicates_delays_and_link_down() {
        let cfg = FaultConfig {
            burst_rate: Probability::ALWAYS,
            burst_len: 16,
            drop_rate: Probability::from_f64(0.1),
            duplicate_rate: Probability::from_f64(0.1),
            delay_rate: Probability::from_f64(0.1),
            max_delay: Duration::from_ns(100),
            ..FaultConfig::default()
        };
        let mut f = FaultInjector::new(cfg, 3);
        let (mut drops, mut dups) = (0, 0);
        for _ in 0..1000 {
            let mut frame = [0u8; 64];
            let v = f.apply(&mut frame);
            let ones: u32 = frame.iter().map(|b| b.count_ones()).sum();
            assert!((1..=16).contains(&ones));
            assert!(v.extra_delay <= Duration::from_ns(100));
            drops += u32::from(v.copies == 0);
            dups += u32::from(v.copies == 2);
        }
        assert!((50..150).contains(&drops));
        assert!((50..150).contains(&dups));
        assert_eq!(f.stats().bursts, 1000);
        f.set_link_up(false);
        assert_eq!(f.apply(&mut [0u8; 8]).copies, 0);
        assert_eq!(f.stats().dropped_link_down, 1);
    }
}
