//! The receiving side of TL credits: buffers this end granted its peer, and the returns.

use super::{CreditClass, CreditTarget, Credits, FlowEvent, Overrun};
use crate::time::{Duration, Instant};
use crate::timer::TimerTable;
use crate::wire::TlFlowControl;
use core::fmt;
use heapless::Deque;

/// Parameters of a [`CreditReceiver`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiverConfig {
    /// Buffers per target (indexed by [`CreditTarget::index`]), released at start.
    pub capacity: [Credits; CreditTarget::COUNT],
    /// Return credits at once when a class has this many pending (≥ 1).
    pub return_threshold: u16,
    /// … otherwise this long after the first pending credit.
    pub return_delay: Duration,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        let per_vc = Credits([16, 16, 64, 64]);
        ReceiverConfig {
            capacity: [per_vc, per_vc, per_vc, per_vc, Credits([32, 32, 128, 128])],
            return_threshold: 8,
            return_delay: Duration::from_ns(100),
        }
    }
}

/// The timers of a [`CreditReceiver`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Timer {
    /// Coalesced credit return is due.
    CreditReturn = 0,
}

/// What [`CreditReceiver::poll_return`] asks the TL packer to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CreditOutput {
    /// A flow-control field returning credits of `target`.
    Return {
        /// Target the credits belong to.
        target: CreditTarget,
        /// The field.
        fc: TlFlowControl,
    },
    /// The TL message "initial credit release complete" (sent once, after the initial
    /// release).
    InitialReleaseComplete,
}

/// The upper layer freed more buffers than it held (a local bug; nothing changed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReleaseError {
    /// Target.
    pub target: CreditTarget,
    /// Class.
    pub class: CreditClass,
    /// Buffers in use.
    pub in_use: u32,
    /// Buffers the caller tried to free.
    pub released: u32,
}

impl fmt::Display for ReleaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "released {} {:?} buffers on {:?} with {} in use",
            self.released, self.class, self.target, self.in_use
        )
    }
}

impl core::error::Error for ReleaseError {}

/// Counters of a [`CreditReceiver`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReceiverStats {
    /// Flow-control fields emitted.
    pub returns_sent: u64,
    /// Credits returned (all classes).
    pub credits_returned: u64,
    /// Inputs refused because the peer overran its credits (protocol errors).
    pub overruns: u64,
    /// Local over-releases refused.
    pub bad_releases: u64,
    /// Events lost because the queue was full.
    pub events_dropped: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Releasing,
    Done,
}

type Table = [[u32; 4]; CreditTarget::COUNT];

fn at(t: &Table, target: CreditTarget, c: CreditClass) -> u32 {
    t.get(target.index())
        .and_then(|r| r.get(c as usize))
        .copied()
        .unwrap_or(0)
}

fn at_mut(t: &mut Table, target: CreditTarget, c: CreditClass) -> Option<&mut u32> {
    t.get_mut(target.index())
        .and_then(|r| r.get_mut(c as usize))
}

/// Buffers this end granted its peer, per target and class, with the invariant
/// `peer_holds + in_use + pending == capacity`:
///
/// * `peer_holds`: credits the peer may still spend;
/// * `in_use`: buffers holding the peer's requests or data;
/// * `pending`: freed buffers whose credits are not yet returned.
///
/// Sans-IO: [`CreditReceiver::handle_consumed`] for each arriving request or response,
/// [`CreditReceiver::release`] when the upper layer frees it, [`CreditReceiver::poll_return`]
/// until `None` for the returns to send, [`CreditReceiver::poll_timeout`] /
/// [`CreditReceiver::handle_timeout`] for the coalescing timer. `now` never decreases.
#[derive(Debug, Clone)]
pub struct CreditReceiver {
    cfg: ReceiverConfig,
    peer_holds: Table,
    in_use: Table,
    pending: Table,
    phase: Phase,
    return_due: bool,
    /// Targets (bit per [`CreditTarget::index`]) whose freed buffers are kept, not returned.
    #[cfg(feature = "withhold")]
    withheld: u8,
    timers: TimerTable<1>,
    stats: ReceiverStats,
    events: Deque<FlowEvent, 8>,
}

impl CreditReceiver {
    /// Every buffer free and pending its initial release.
    pub fn new(cfg: ReceiverConfig) -> Self {
        let mut r = CreditReceiver {
            cfg,
            peer_holds: [[0; 4]; CreditTarget::COUNT],
            in_use: [[0; 4]; CreditTarget::COUNT],
            pending: [[0; 4]; CreditTarget::COUNT],
            phase: Phase::Releasing,
            return_due: false,
            #[cfg(feature = "withhold")]
            withheld: 0,
            timers: TimerTable::new(),
            stats: ReceiverStats::default(),
            events: Deque::new(),
        };
        r.reset();
        r
    }

    /// Back to the initial release (link reset).
    pub fn reset(&mut self) {
        for target in CreditTarget::ALL {
            let cap = self
                .cfg
                .capacity
                .get(target.index())
                .copied()
                .unwrap_or_default();
            for c in CreditClass::ALL {
                if let Some(p) = at_mut(&mut self.pending, target, c) {
                    *p = u32::from(cap.get(c));
                }
            }
        }
        self.peer_holds = [[0; 4]; CreditTarget::COUNT];
        self.in_use = [[0; 4]; CreditTarget::COUNT];
        self.phase = Phase::Releasing;
        self.return_due = false;
        self.timers.stop_all();
    }

    /// Credits the peer may still spend.
    pub fn peer_holds(&self, target: CreditTarget, class: CreditClass) -> u32 {
        at(&self.peer_holds, target, class)
    }
    /// Buffers in use.
    pub fn in_use(&self, target: CreditTarget, class: CreditClass) -> u32 {
        at(&self.in_use, target, class)
    }
    /// Freed buffers not yet returned.
    pub fn pending(&self, target: CreditTarget, class: CreditClass) -> u32 {
        at(&self.pending, target, class)
    }
    /// Configured buffers.
    pub fn capacity(&self, target: CreditTarget, class: CreditClass) -> u32 {
        self.cfg
            .capacity
            .get(target.index())
            .map_or(0, |c| u32::from(c.get(class)))
    }
    /// The initial release (and its "complete" message) went out.
    pub fn initial_release_done(&self) -> bool {
        self.phase == Phase::Done
    }
    /// Counters.
    pub fn stats(&self) -> &ReceiverStats {
        &self.stats
    }

    /// A request or response arrived that occupies `needs` buffers of `target`.
    ///
    /// # Errors
    /// [`Overrun`] when the peer did not hold the credits: a protocol error, counted and
    /// reported as an event; nothing changes and the caller drops the input.
    pub fn handle_consumed(&mut self, target: CreditTarget, needs: Credits) -> Result<(), Overrun> {
        for class in CreditClass::ALL {
            let held = at(&self.peer_holds, target, class);
            let needed = u32::from(needs.get(class));
            if needed > held {
                let o = Overrun {
                    target,
                    class,
                    held,
                    needed,
                };
                self.stats.overruns = self.stats.overruns.saturating_add(1);
                self.push(FlowEvent::Overrun(o));
                return Err(o);
            }
        }
        for class in CreditClass::ALL {
            let n = u32::from(needs.get(class));
            if let Some(h) = at_mut(&mut self.peer_holds, target, class) {
                *h = h.saturating_sub(n);
            }
            if let Some(u) = at_mut(&mut self.in_use, target, class) {
                *u = u.saturating_add(n);
            }
        }
        Ok(())
    }

    /// The upper layer freed `credits` buffers of `target`: their credits will be returned.
    ///
    /// # Errors
    /// [`ReleaseError`] when more are freed than are in use (nothing changes).
    pub fn release(
        &mut self,
        now: Instant,
        target: CreditTarget,
        credits: Credits,
    ) -> Result<(), ReleaseError> {
        for class in CreditClass::ALL {
            let in_use = at(&self.in_use, target, class);
            let released = u32::from(credits.get(class));
            if released > in_use {
                self.stats.bad_releases = self.stats.bad_releases.saturating_add(1);
                return Err(ReleaseError {
                    target,
                    class,
                    in_use,
                    released,
                });
            }
        }
        let threshold = u32::from(self.cfg.return_threshold.max(1));
        for class in CreditClass::ALL {
            let n = u32::from(credits.get(class));
            if let Some(u) = at_mut(&mut self.in_use, target, class) {
                *u = u.saturating_sub(n);
            }
            if let Some(p) = at_mut(&mut self.pending, target, class) {
                *p = p.saturating_add(n);
                if *p >= threshold {
                    self.return_due = true;
                }
            }
        }
        if !credits.is_zero() {
            self.timers.set_if_stopped(
                Timer::CreditReturn as usize,
                now.saturating_add(self.cfg.return_delay),
            );
        }
        Ok(())
    }

    /// Keep (`true`) or return again (`false`) the freed buffers of `target`: a receiver
    /// that stops returning one VC's credits, as a congested or faulty device would, so
    /// that the peer runs out of them (a test and fault-injection control; the initial
    /// release too waits, and its "complete" message with it). Kept credits stay pending
    /// and go back when the target is released.
    #[cfg(feature = "withhold")]
    pub fn set_withheld(&mut self, target: CreditTarget, withheld: bool) {
        let bit = 1u8 << target.index();
        if withheld {
            self.withheld |= bit;
        } else if self.withheld & bit != 0 {
            self.withheld &= !bit;
            if self.has_pending(target) {
                self.return_due = true;
            }
        }
    }

    /// Whether `target`'s returns are kept (`CreditReceiver::set_withheld`, feature
    /// `withhold`; without it, never).
    pub fn is_withheld(&self, target: CreditTarget) -> bool {
        #[cfg(feature = "withhold")]
        {
            self.withheld & (1u8 << target.index()) != 0
        }
        #[cfg(not(feature = "withhold"))]
        {
            let _ = target;
            false
        }
    }

    /// Whether [`CreditReceiver::poll_return`] has something to give now: a return that is
    /// due (or part of the initial release) of a target not withheld, or the "initial credit
    /// release complete" message.
    pub fn has_return(&self) -> bool {
        let releasing = self.phase == Phase::Releasing;
        let pending = CreditTarget::ALL
            .iter()
            .any(|&t| !self.is_withheld(t) && self.has_pending(t));
        (pending && (releasing || self.return_due)) || (releasing && !self.holds_back())
    }

    /// Whether `target` has freed credits not yet returned.
    fn has_pending(&self, target: CreditTarget) -> bool {
        self.pending
            .get(target.index())
            .is_some_and(|r| r.iter().any(|&n| n > 0))
    }

    /// Whether a withheld target has credits pending.
    fn holds_back(&self) -> bool {
        #[cfg(not(feature = "withhold"))]
        {
            false
        }
        #[cfg(feature = "withhold")]
        CreditTarget::ALL
            .iter()
            .any(|&t| self.is_withheld(t) && self.has_pending(t))
    }

    /// The next credit return (or the "initial credit release complete" message) to send.
    /// One field per target per call: take at most one per target into a TL flit.
    #[must_use]
    pub fn poll_return(&mut self) -> Option<CreditOutput> {
        let releasing = self.phase == Phase::Releasing;
        if releasing || self.return_due {
            for target in CreditTarget::ALL {
                if self.is_withheld(target) {
                    continue;
                }
                let Some(row) = self.pending.get_mut(target.index()) else {
                    continue;
                };
                let mut want = Credits::ZERO;
                for class in CreditClass::ALL {
                    let v = row.get(class as usize).copied().unwrap_or(0);
                    want.set(class, u16::try_from(v).unwrap_or(u16::MAX));
                }
                if want.is_zero() {
                    continue;
                }
                let (fc, _) = want.to_field();
                let sent = Credits::from_field(&fc);
                for class in CreditClass::ALL {
                    let n = u32::from(sent.get(class));
                    if let Some(p) = at_mut(&mut self.pending, target, class) {
                        *p = p.saturating_sub(n);
                    }
                    if let Some(h) = at_mut(&mut self.peer_holds, target, class) {
                        *h = h.saturating_add(n);
                    }
                    self.stats.credits_returned =
                        self.stats.credits_returned.saturating_add(u64::from(n));
                }
                self.stats.returns_sent = self.stats.returns_sent.saturating_add(1);
                return Some(CreditOutput::Return { target, fc });
            }
            self.return_due = false;
            self.timers.stop(Timer::CreditReturn as usize);
        }
        if releasing && !self.holds_back() {
            self.phase = Phase::Done;
            return Some(CreditOutput::InitialReleaseComplete);
        }
        None
    }

    /// The earliest timer deadline.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// Fire expired timers (spurious calls do nothing).
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.timers.take_expired(Timer::CreditReturn as usize, now) {
            self.return_due = true;
        }
    }

    /// The next event, if any.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<FlowEvent> {
        self.events.pop_front()
    }

    fn push(&mut self, e: FlowEvent) {
        if self.events.is_full() {
            self.events.pop_front();
            self.stats.events_dropped = self.stats.events_dropped.saturating_add(1);
        }
        let _ = self.events.push_back(e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::CreditSender;
    use std::vec::Vec;

    const VC0: CreditTarget = CreditTarget::ALL[0];

    fn small() -> ReceiverConfig {
        ReceiverConfig {
            capacity: [
                Credits([2, 0, 300, 0]),
                Credits::ZERO,
                Credits::ZERO,
                Credits::ZERO,
                Credits([0, 1, 0, 0]),
            ],
            return_threshold: 2,
            return_delay: Duration::from_ns(100),
        }
    }

    fn drain(r: &mut CreditReceiver) -> Vec<CreditOutput> {
        core::iter::from_fn(|| r.poll_return()).collect()
    }

    #[test]
    fn initial_release_then_complete() {
        let mut r = CreditReceiver::new(small());
        let out = drain(&mut r);
        assert_eq!(out.len(), 4);
        assert_eq!(
            out[0],
            CreditOutput::Return {
                target: VC0,
                fc: TlFlowControl {
                    req_cmd: 2,
                    rsp_cmd: 0,
                    req_data: 255,
                    rsp_data: 0
                }
            }
        );
        assert!(matches!(out[1], CreditOutput::Return { target: VC0, fc } if fc.req_data == 45));
        assert!(matches!(
            out[2],
            CreditOutput::Return {
                target: CreditTarget::Shared,
                ..
            }
        ));
        assert_eq!(out[3], CreditOutput::InitialReleaseComplete);
        assert!(r.initial_release_done());
        assert_eq!(r.peer_holds(VC0, CreditClass::ReqData), 300);
        // Feed them to a sender: the grant matches the capacity.
        let mut s = CreditSender::new();
        for o in out {
            match o {
                CreditOutput::Return { target, fc } => s.handle_return(target, &fc),
                CreditOutput::InitialReleaseComplete => s.handle_initial_release_complete(),
            }
        }
        assert_eq!(s.grant(VC0, CreditClass::ReqData), 300);
        assert!(s.initial_release_complete());
    }

    #[test]
    fn overrun_by_the_peer_is_refused_and_counted() {
        let mut r = CreditReceiver::new(small());
        let _ = drain(&mut r);
        assert_eq!(r.handle_consumed(VC0, Credits::request(100)), Ok(()));
        assert_eq!(r.handle_consumed(VC0, Credits::request(100)), Ok(()));
        let e = r.handle_consumed(VC0, Credits::request(1)).unwrap_err();
        assert_eq!(
            e,
            Overrun {
                target: VC0,
                class: CreditClass::ReqCmd,
                held: 0,
                needed: 1
            }
        );
        assert_eq!(r.stats().overruns, 1);
        assert_eq!(r.poll_event(), Some(FlowEvent::Overrun(e)));
        assert_eq!(r.in_use(VC0, CreditClass::ReqData), 200);
        assert_eq!(r.peer_holds(VC0, CreditClass::ReqData), 100);
    }

    #[cfg(feature = "withhold")]
    #[test]
    fn withheld_credits_stay_until_released() {
        let vc1 = CreditTarget::ALL[1];
        let mut cfg = small();
        cfg.capacity[1] = Credits([1, 0, 4, 0]);
        let mut r = CreditReceiver::new(cfg);
        // Withheld from the start: VC 1's initial release, and "complete", wait.
        r.set_withheld(vc1, true);
        assert!(r.has_return());
        let out = drain(&mut r);
        assert!(out
            .iter()
            .all(|o| !matches!(o, CreditOutput::Return { target, .. } if *target == vc1)));
        assert!(!out.contains(&CreditOutput::InitialReleaseComplete));
        assert!(!r.has_return(), "only withheld credits left");
        r.set_withheld(vc1, false);
        assert!(r.has_return());
        let out = drain(&mut r);
        assert!(matches!(
            out[..],
            [
                CreditOutput::Return { target, fc },
                CreditOutput::InitialReleaseComplete
            ] if target == vc1 && fc.req_cmd == 1 && fc.req_data == 4
        ));
        // In use, freed while withheld: kept; VC 0's still go; released: returned.
        r.handle_consumed(vc1, Credits::request(2)).unwrap();
        r.handle_consumed(VC0, Credits::request(0)).unwrap();
        r.handle_consumed(VC0, Credits::request(0)).unwrap();
        r.set_withheld(vc1, true);
        assert!(r.is_withheld(vc1));
        let t0 = Instant::from_ps(1_000);
        r.release(t0, vc1, Credits::request(2)).unwrap();
        r.release(t0, VC0, Credits::request(0)).unwrap();
        r.release(t0, VC0, Credits::request(0)).unwrap();
        assert!(r.has_return());
        let out = drain(&mut r);
        assert!(
            matches!(out[..], [CreditOutput::Return { target, .. }] if target == VC0),
            "{out:?}"
        );
        assert!(!r.has_return());
        assert_eq!(r.pending(vc1, CreditClass::ReqData), 2);
        r.set_withheld(vc1, false);
        let out = drain(&mut r);
        assert!(matches!(
            out[..],
            [CreditOutput::Return { target, fc }] if target == vc1 && fc.req_cmd == 1 && fc.req_data == 2
        ));
        assert_eq!(r.peer_holds(vc1, CreditClass::ReqData), 4);
    }

    #[test]
    fn coalesced_returns() {
        let mut r = CreditReceiver::new(small());
        let _ = drain(&mut r);
        r.handle_consumed(VC0, Credits::request(1)).unwrap();
        r.handle_consumed(VC0, Credits::request(1)).unwrap();
        let t0 = Instant::from_ps(1_000);
        r.release(t0, VC0, Credits([1, 0, 0, 0])).unwrap();
        assert_eq!(r.poll_return(), None); // below threshold: wait
        assert_eq!(r.poll_timeout(), Some(t0 + Duration::from_ns(100)));
        r.release(t0, VC0, Credits([1, 0, 1, 0])).unwrap(); // 2 req_cmd: due now
        assert!(
            matches!(r.poll_return(), Some(CreditOutput::Return { fc, .. }) if fc.req_cmd == 2 && fc.req_data == 1)
        );
        assert_eq!(r.poll_return(), None);
        assert_eq!(r.poll_timeout(), None);
        // Timer path.
        r.handle_consumed(VC0, Credits::request(0)).unwrap();
        r.release(t0, VC0, Credits::request(0)).unwrap();
        assert_eq!(r.poll_return(), None);
        r.handle_timeout(t0 + Duration::from_ns(100));
        assert!(r.poll_return().is_some());
        // Over-release refused.
        assert!(r.release(t0, VC0, Credits::request(0)).is_err());
        assert_eq!(r.stats().bad_releases, 1);
    }
}
