//! Ethernet-profile credit-based flow control (CBFC) with cumulative counters
//! (`spec-notes/link.md#cbfc`).
//!
//! Per VC (up to `VCS`, 32 allowed by CBFC) the receiver advertises an absolute, wrapping
//! 32-bit *credit limit* = credits freed so far + its buffer ([`CbfcConfig::limit_credits`]).
//! The sender may send while its cumulative credits consumed stay at or below the latest
//! limit. Because every update is absolute, a lost update is healed by the next one and a
//! reordered (older) one is recognised and ignored; the receiver re-advertises every VC
//! every [`CbfcConfig::update_interval`].
//!
//! A frame costs `ceil((frame_len + overhead_bytes) / credit_bytes)` credits, computed the
//! same way at both ends.

use crate::time::{Duration, Instant};
use crate::timer::TimerTable;
use core::fmt;
use heapless::Deque;

/// CBFC parameters; both ends must agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CbfcConfig {
    /// Bytes per credit (≥ 1).
    pub credit_bytes: u32,
    /// Receive buffer per VC, in credits.
    pub limit_credits: u32,
    /// Bytes charged per frame on top of its length (preamble, IFG, headers not counted).
    pub overhead_bytes: u32,
    /// Re-advertise every VC this often.
    pub update_interval: Duration,
}

impl Default for CbfcConfig {
    fn default() -> Self {
        CbfcConfig {
            credit_bytes: 64,
            limit_credits: 512,
            overhead_bytes: 24,
            update_interval: Duration::from_us(1),
        }
    }
}

impl CbfcConfig {
    /// Credits a frame of `frame_len` bytes costs.
    pub fn credits_for(&self, frame_len: usize) -> u32 {
        let len = u32::try_from(frame_len).unwrap_or(u32::MAX);
        let bytes = len.saturating_add(self.overhead_bytes);
        let size = self.credit_bytes.max(1);
        bytes.div_ceil(size)
    }
}

/// A credit update: the receiver's cumulative limit for one VC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CbfcUpdate {
    /// VC index.
    pub vc: u8,
    /// Cumulative credit limit (wrapping).
    pub limit: u32,
}

/// Why a CBFC sender may not send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CbfcError {
    /// Not enough credits (a credit stall); nothing consumed.
    Insufficient {
        /// VC.
        vc: u8,
        /// Credits available.
        available: u32,
        /// Credits the frame needs.
        needed: u32,
    },
    /// The VC index is not below `VCS`.
    NoSuchVc(u8),
}

impl fmt::Display for CbfcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CbfcError::Insufficient {
                vc,
                available,
                needed,
            } => write!(
                f,
                "CBFC stall on VC {vc}: {available} credits, {needed} needed"
            ),
            CbfcError::NoSuchVc(vc) => write!(f, "no CBFC VC {vc}"),
        }
    }
}

impl core::error::Error for CbfcError {}

/// The peer sent a frame beyond the advertised limit (a protocol error, never fatal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CbfcOverrun {
    /// VC.
    pub vc: u8,
    /// Credits of buffer left.
    pub space: u32,
    /// Credits the frame needed.
    pub needed: u32,
}

impl fmt::Display for CbfcOverrun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CBFC overrun on VC {}: {} credits of space, frame needs {}",
            self.vc, self.space, self.needed
        )
    }
}

impl core::error::Error for CbfcOverrun {}

/// Counters of a [`CbfcSender`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CbfcSenderStats {
    /// Frames refused for lack of credits.
    pub credit_stalls: u64,
    /// Updates applied.
    pub updates: u64,
    /// Updates older than the current limit (reordered), ignored.
    pub stale_updates: u64,
    /// Updates granting more than the buffer or less than consumed (protocol errors).
    pub invalid_updates: u64,
}

/// Signed distance `a - b` in the wrapping 32-bit counter space.
fn diff(a: u32, b: u32) -> i64 {
    i64::from(a.wrapping_sub(b) as i32)
}

/// The sending side of CBFC for `VCS` VCs.
#[derive(Debug, Clone)]
pub struct CbfcSender<const VCS: usize> {
    cfg: CbfcConfig,
    consumed: [u32; VCS],
    limit: [u32; VCS],
    stats: CbfcSenderStats,
}

impl<const VCS: usize> CbfcSender<VCS> {
    /// No credits until the first update.
    pub fn new(cfg: CbfcConfig) -> Self {
        CbfcSender {
            cfg,
            consumed: [0; VCS],
            limit: [0; VCS],
            stats: CbfcSenderStats::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &CbfcConfig {
        &self.cfg
    }
    /// Counters.
    pub fn stats(&self) -> &CbfcSenderStats {
        &self.stats
    }
    /// Credits available on `vc` (0 for an unknown VC).
    pub fn available(&self, vc: u8) -> u32 {
        let i = usize::from(vc);
        match (self.limit.get(i), self.consumed.get(i)) {
            (Some(&l), Some(&c)) => u32::try_from(diff(l, c).max(0)).unwrap_or(0),
            _ => 0,
        }
    }

    /// Spend the credits of a frame of `frame_len` bytes on `vc`; returns the credits spent.
    ///
    /// # Errors
    /// [`CbfcError::Insufficient`] (counted as a stall; nothing consumed) or `NoSuchVc`.
    pub fn try_send(&mut self, vc: u8, frame_len: usize) -> Result<u32, CbfcError> {
        let needed = self.cfg.credits_for(frame_len);
        let available = self.available(vc);
        let c = self
            .consumed
            .get_mut(usize::from(vc))
            .ok_or(CbfcError::NoSuchVc(vc))?;
        if needed > available {
            self.stats.credit_stalls = self.stats.credit_stalls.saturating_add(1);
            return Err(CbfcError::Insufficient {
                vc,
                available,
                needed,
            });
        }
        *c = c.wrapping_add(needed);
        Ok(needed)
    }

    /// Apply an update from the receiver. Returns whether it was applied.
    pub fn handle_update(&mut self, u: &CbfcUpdate) -> bool {
        let i = usize::from(u.vc);
        let (Some(limit), Some(&consumed)) = (self.limit.get_mut(i), self.consumed.get(i)) else {
            self.stats.invalid_updates = self.stats.invalid_updates.saturating_add(1);
            return false;
        };
        if diff(u.limit, *limit) <= 0 {
            if u.limit != *limit {
                self.stats.stale_updates = self.stats.stale_updates.saturating_add(1);
            }
            return false;
        }
        let grant = diff(u.limit, consumed);
        if grant < 0 || grant > i64::from(self.cfg.limit_credits) {
            self.stats.invalid_updates = self.stats.invalid_updates.saturating_add(1);
            return false;
        }
        *limit = u.limit;
        self.stats.updates = self.stats.updates.saturating_add(1);
        true
    }
}

/// Counters of a [`CbfcReceiver`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CbfcReceiverStats {
    /// Frames accepted.
    pub frames: u64,
    /// Frames refused: the peer overran its credits (protocol errors).
    pub overruns: u64,
    /// Updates emitted.
    pub updates_sent: u64,
    /// Releases refused (more than received; a local bug).
    pub bad_releases: u64,
    /// Events lost because the queue was full.
    pub events_dropped: u64,
}

/// The timers of a [`CbfcReceiver`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CbfcTimer {
    /// Re-advertise every VC.
    Refresh = 0,
}

/// The receiving side of CBFC for `VCS` VCs.
///
/// Sans-IO: [`CbfcReceiver::handle_frame`] per arriving frame, [`CbfcReceiver::release`]
/// when its buffer is freed, [`CbfcReceiver::poll_update`] until `None`,
/// [`CbfcReceiver::poll_timeout`] / [`CbfcReceiver::handle_timeout`] for the refresh.
#[derive(Debug, Clone)]
pub struct CbfcReceiver<const VCS: usize> {
    cfg: CbfcConfig,
    received: [u32; VCS],
    freed: [u32; VCS],
    dirty: [bool; VCS],
    timers: TimerTable<1>,
    stats: CbfcReceiverStats,
    events: Deque<CbfcOverrun, 8>,
}

impl<const VCS: usize> CbfcReceiver<VCS> {
    /// Empty buffers; every VC's first advertisement is pending, the refresh timer runs
    /// from `now`.
    pub fn new(cfg: CbfcConfig, now: Instant) -> Self {
        let mut timers = TimerTable::new();
        timers.set(
            CbfcTimer::Refresh as usize,
            now.saturating_add(cfg.update_interval),
        );
        CbfcReceiver {
            cfg,
            received: [0; VCS],
            freed: [0; VCS],
            dirty: [true; VCS],
            timers,
            stats: CbfcReceiverStats::default(),
            events: Deque::new(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> &CbfcReceiverStats {
        &self.stats
    }
    /// Credits of buffer occupied on `vc`.
    pub fn occupied(&self, vc: u8) -> u32 {
        let i = usize::from(vc);
        match (self.received.get(i), self.freed.get(i)) {
            (Some(&r), Some(&f)) => r.wrapping_sub(f),
            _ => 0,
        }
    }
    /// The limit currently advertised for `vc`.
    pub fn limit(&self, vc: u8) -> u32 {
        self.freed
            .get(usize::from(vc))
            .map_or(0, |f| f.wrapping_add(self.cfg.limit_credits))
    }

    /// A frame of `frame_len` bytes arrived on `vc`; returns the credits it occupies.
    ///
    /// # Errors
    /// [`CbfcOverrun`] when it does not fit the advertised limit (or the VC is unknown):
    /// counted, reported as an event; nothing changes and the caller drops the frame.
    pub fn handle_frame(&mut self, vc: u8, frame_len: usize) -> Result<u32, CbfcOverrun> {
        let needed = self.cfg.credits_for(frame_len);
        let limit = self.limit(vc);
        let i = usize::from(vc);
        let space = match self.received.get(i) {
            Some(&r) => u32::try_from(diff(limit, r).max(0)).unwrap_or(0),
            None => 0,
        };
        match self.received.get_mut(i) {
            Some(r) if needed <= space => {
                *r = r.wrapping_add(needed);
                self.stats.frames = self.stats.frames.saturating_add(1);
                Ok(needed)
            }
            _ => {
                let o = CbfcOverrun { vc, space, needed };
                self.stats.overruns = self.stats.overruns.saturating_add(1);
                if self.events.is_full() {
                    self.events.pop_front();
                    self.stats.events_dropped = self.stats.events_dropped.saturating_add(1);
                }
                let _ = self.events.push_back(o);
                Err(o)
            }
        }
    }

    /// `credits` of `vc`'s buffer were freed (the value [`CbfcReceiver::handle_frame`]
    /// returned). Returns `false` (and changes nothing) if that is more than occupied.
    pub fn release(&mut self, vc: u8, credits: u32) -> bool {
        let occupied = self.occupied(vc);
        let i = usize::from(vc);
        match (self.freed.get_mut(i), self.dirty.get_mut(i)) {
            (Some(f), Some(d)) if credits <= occupied => {
                *f = f.wrapping_add(credits);
                *d = true;
                true
            }
            _ => {
                self.stats.bad_releases = self.stats.bad_releases.saturating_add(1);
                false
            }
        }
    }

    /// The next update to send (changed VCs first; all VCs after each refresh).
    #[must_use]
    pub fn poll_update(&mut self) -> Option<CbfcUpdate> {
        let i = self.dirty.iter().position(|d| *d)?;
        if let Some(d) = self.dirty.get_mut(i) {
            *d = false;
        }
        let vc = u8::try_from(i).ok()?;
        self.stats.updates_sent = self.stats.updates_sent.saturating_add(1);
        Some(CbfcUpdate {
            vc,
            limit: self.limit(vc),
        })
    }

    /// The earliest timer deadline.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// Fire expired timers (spurious calls do nothing).
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.timers.take_expired(CbfcTimer::Refresh as usize, now) {
            self.dirty = [true; VCS];
            self.timers.set(
                CbfcTimer::Refresh as usize,
                now.saturating_add(self.cfg.update_interval),
            );
        }
    }

    /// Re-advertise every VC at the next [`CbfcReceiver::poll_update`] (e.g. after link up).
    pub fn refresh_all(&mut self) {
        self.dirty = [true; VCS];
    }

    /// The next overrun event, if any.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<CbfcOverrun> {
        self.events.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> CbfcConfig {
        CbfcConfig {
            credit_bytes: 64,
            limit_credits: 10,
            overhead_bytes: 20,
            update_interval: Duration::from_us(1),
        }
    }

    #[test]
    fn credit_size_and_overhead() {
        let c = cfg();
        assert_eq!(c.credits_for(44), 1);
        assert_eq!(c.credits_for(45), 2);
        assert_eq!(c.credits_for(0), 1);
        let z = CbfcConfig {
            credit_bytes: 0,
            overhead_bytes: 0,
            ..c
        };
        assert_eq!(z.credits_for(7), 7);
    }

    #[test]
    fn lost_update_heals() {
        let t0 = Instant::ZERO;
        let mut rx = CbfcReceiver::<2>::new(cfg(), t0);
        let mut tx = CbfcSender::<2>::new(cfg());
        assert!(matches!(
            tx.try_send(0, 100),
            Err(CbfcError::Insufficient { available: 0, .. })
        ));
        while let Some(u) = rx.poll_update() {
            assert!(tx.handle_update(&u));
        }
        assert_eq!(tx.available(0), 10);
        // Send 5 frames of 2 credits: buffer full.
        for _ in 0..5 {
            let n = tx.try_send(0, 100).unwrap();
            assert_eq!(rx.handle_frame(0, 100), Ok(n));
        }
        assert!(tx.try_send(0, 1).is_err());
        // Free two; the update is lost.
        assert!(rx.release(0, 2));
        assert!(rx.release(0, 2));
        let lost = rx.poll_update().unwrap();
        assert_eq!(lost, CbfcUpdate { vc: 0, limit: 14 });
        assert_eq!(rx.poll_update(), None);
        // Free one more: the next update carries all three.
        assert!(rx.release(0, 2));
        let u = rx.poll_update().unwrap();
        assert!(tx.handle_update(&u));
        assert_eq!(tx.available(0), 6);
        // The lost one arriving late is stale.
        assert!(!tx.handle_update(&lost));
        assert_eq!(tx.stats().stale_updates, 1);
        // Refresh re-advertises everything.
        rx.handle_timeout(Instant::ZERO + Duration::from_us(1));
        assert_eq!(rx.poll_update().map(|u| u.vc), Some(0));
        assert_eq!(rx.poll_update().map(|u| u.vc), Some(1));
    }

    #[test]
    fn overrun_and_invalid_updates() {
        let mut rx = CbfcReceiver::<1>::new(cfg(), Instant::ZERO);
        for _ in 0..5 {
            rx.handle_frame(0, 100).unwrap();
        }
        let o = rx.handle_frame(0, 100).unwrap_err();
        assert_eq!(
            o,
            CbfcOverrun {
                vc: 0,
                space: 0,
                needed: 2
            }
        );
        assert_eq!(rx.poll_event(), Some(o));
        assert_eq!(rx.stats().overruns, 1);
        assert!(rx.handle_frame(3, 1).is_err());
        assert!(!rx.release(0, 11));
        let mut tx = CbfcSender::<1>::new(cfg());
        assert!(!tx.handle_update(&CbfcUpdate { vc: 0, limit: 11 }));
        assert!(!tx.handle_update(&CbfcUpdate { vc: 4, limit: 1 }));
        assert_eq!(tx.stats().invalid_updates, 2);
        assert_eq!(tx.try_send(9, 1), Err(CbfcError::NoSuchVc(9)));
    }

    #[test]
    fn counters_wrap() {
        let mut rx = CbfcReceiver::<1>::new(cfg(), Instant::ZERO);
        let mut tx = CbfcSender::<1>::new(cfg());
        // Start both near the wrap point.
        rx.received = [u32::MAX - 3];
        rx.freed = [u32::MAX - 3];
        tx.consumed = [u32::MAX - 3];
        tx.limit = [u32::MAX - 3];
        let u = rx.poll_update().unwrap();
        assert!(tx.handle_update(&u));
        for _ in 0..20 {
            let n = tx.try_send(0, 100).unwrap();
            rx.handle_frame(0, 100).unwrap();
            assert!(rx.release(0, n));
            let u = rx.poll_update().unwrap();
            assert!(tx.handle_update(&u));
        }
        assert_eq!(tx.available(0), 10);
    }
}
