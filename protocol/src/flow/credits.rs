//! The sending side of TL credits: what this end may still send to its peer.

use super::{CreditClass, CreditError, CreditTarget, Credits, FlowEvent};
use crate::wire::{TlFlowControl, Vc};
use heapless::Deque;

/// Counters of a [`CreditSender`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SenderStats {
    /// Spends refused for lack of credits.
    pub credit_stalls: u64,
    /// Spends that fell back to the shared pool.
    pub pool_spends: u64,
    /// Flow-control fields applied.
    pub returns: u64,
    /// Returns that exceeded the grant (peer protocol errors).
    pub return_above_grant: u64,
    /// Events lost because the queue was full.
    pub events_dropped: u64,
}

const EVENTS: usize = 8;

/// Credits this end holds toward its peer, per target and class.
///
/// Credits arrive with [`CreditSender::handle_return`]. Until
/// [`CreditSender::handle_initial_release_complete`] they also raise the *grant* (the
/// peer's buffer count); after it, a return that would lift the credits above the grant is a
/// peer error: the excess is discarded, counted and reported, so the credits are never
/// negative nor above the grant.
#[derive(Debug, Clone)]
pub struct CreditSender {
    avail: [[u32; 4]; CreditTarget::COUNT],
    grant: [[u32; 4]; CreditTarget::COUNT],
    init_complete: bool,
    stats: SenderStats,
    events: Deque<FlowEvent, EVENTS>,
}

impl Default for CreditSender {
    fn default() -> Self {
        Self::new()
    }
}

fn cell(t: &[[u32; 4]; CreditTarget::COUNT], target: CreditTarget, c: CreditClass) -> u32 {
    t.get(target.index())
        .and_then(|r| r.get(c as usize))
        .copied()
        .unwrap_or(0)
}

fn cell_mut(
    t: &mut [[u32; 4]; CreditTarget::COUNT],
    target: CreditTarget,
    c: CreditClass,
) -> Option<&mut u32> {
    t.get_mut(target.index())
        .and_then(|r| r.get_mut(c as usize))
}

impl CreditSender {
    /// No credits yet; waiting for the peer's initial release.
    pub const fn new() -> Self {
        CreditSender {
            avail: [[0; 4]; CreditTarget::COUNT],
            grant: [[0; 4]; CreditTarget::COUNT],
            init_complete: false,
            stats: SenderStats {
                credit_stalls: 0,
                pool_spends: 0,
                returns: 0,
                return_above_grant: 0,
                events_dropped: 0,
            },
            events: Deque::new(),
        }
    }

    /// Credits available.
    pub fn available(&self, target: CreditTarget, class: CreditClass) -> u32 {
        cell(&self.avail, target, class)
    }
    /// The peer's grant (credits after the initial release).
    pub fn grant(&self, target: CreditTarget, class: CreditClass) -> u32 {
        cell(&self.grant, target, class)
    }
    /// The peer said its initial release is complete.
    pub fn initial_release_complete(&self) -> bool {
        self.init_complete
    }
    /// Counters.
    pub fn stats(&self) -> &SenderStats {
        &self.stats
    }

    /// Apply a flow-control field (already OR-merged, see [`super::merge`]) for `target`.
    pub fn handle_return(&mut self, target: CreditTarget, fc: &TlFlowControl) {
        self.stats.returns = self.stats.returns.saturating_add(1);
        let add = Credits::from_field(fc);
        for c in CreditClass::ALL {
            let n = u32::from(add.get(c));
            if n == 0 {
                continue;
            }
            let grant = cell(&self.grant, target, c);
            let Some(a) = cell_mut(&mut self.avail, target, c) else {
                continue;
            };
            if !self.init_complete {
                *a = a.saturating_add(n);
                if let Some(g) = cell_mut(&mut self.grant, target, c) {
                    *g = g.saturating_add(n);
                }
                continue;
            }
            let want = a.saturating_add(n);
            if want > grant {
                *a = grant;
                self.stats.return_above_grant = self.stats.return_above_grant.saturating_add(1);
                self.push(FlowEvent::ReturnAboveGrant {
                    target,
                    class: c,
                    excess: want.saturating_sub(grant),
                });
            } else {
                *a = want;
            }
        }
    }

    /// The peer's "initial credit release complete": the grant is now fixed.
    pub fn handle_initial_release_complete(&mut self) {
        self.init_complete = true;
    }

    /// Spend `needs` from `target`, all classes or none.
    ///
    /// # Errors
    /// [`CreditError::Insufficient`] (counted as a credit stall); nothing is consumed.
    pub fn consume(&mut self, target: CreditTarget, needs: Credits) -> Result<(), CreditError> {
        if let Err(e) = self.check(target, needs) {
            self.stats.credit_stalls = self.stats.credit_stalls.saturating_add(1);
            return Err(e);
        }
        for c in CreditClass::ALL {
            if let Some(a) = cell_mut(&mut self.avail, target, c) {
                *a = a.saturating_sub(u32::from(needs.get(c)));
            }
        }
        Ok(())
    }

    /// Spend `needs` from `vc`'s own credits, or else from the shared pool; returns the
    /// target used (send it as the TL `pool` bit; credits come back there).
    ///
    /// # Errors
    /// [`CreditError::Insufficient`] for the pool (counted as one stall); nothing consumed.
    pub fn consume_vc_or_pool(
        &mut self,
        vc: Vc,
        needs: Credits,
    ) -> Result<CreditTarget, CreditError> {
        let own = CreditTarget::Vc(vc);
        if self.check(own, needs).is_ok() {
            self.consume(own, needs)?;
            return Ok(own);
        }
        self.consume(CreditTarget::Shared, needs)?;
        self.stats.pool_spends = self.stats.pool_spends.saturating_add(1);
        Ok(CreditTarget::Shared)
    }

    fn check(&self, target: CreditTarget, needs: Credits) -> Result<(), CreditError> {
        for c in CreditClass::ALL {
            let available = self.available(target, c);
            let needed = u32::from(needs.get(c));
            if needed > available {
                return Err(CreditError::Insufficient {
                    target,
                    class: c,
                    available,
                    needed,
                });
            }
        }
        Ok(())
    }

    /// Forget every credit (link reset); the peer will release again.
    pub fn reset(&mut self) {
        self.avail = [[0; 4]; CreditTarget::COUNT];
        self.grant = [[0; 4]; CreditTarget::COUNT];
        self.init_complete = false;
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

    fn fc(a: u8, b: u8, c: u8, d: u8) -> TlFlowControl {
        TlFlowControl {
            req_cmd: a,
            rsp_cmd: b,
            req_data: c,
            rsp_data: d,
        }
    }
    const VC1: CreditTarget = CreditTarget::ALL[1];

    #[test]
    fn spend_within_credits_only() {
        let mut s = CreditSender::new();
        assert!(matches!(
            s.consume(VC1, Credits::request(0)),
            Err(CreditError::Insufficient {
                available: 0,
                needed: 1,
                ..
            })
        ));
        s.handle_return(VC1, &fc(2, 0, 4, 0));
        s.handle_initial_release_complete();
        assert_eq!(s.consume(VC1, Credits::request(4)), Ok(()));
        // Not enough data for the second: nothing is consumed.
        assert_eq!(
            s.consume(VC1, Credits::request(1)),
            Err(CreditError::Insufficient {
                target: VC1,
                class: CreditClass::ReqData,
                available: 0,
                needed: 1
            })
        );
        assert_eq!(s.available(VC1, CreditClass::ReqCmd), 1);
        assert_eq!(s.stats().credit_stalls, 2);
    }

    #[test]
    fn falls_back_to_the_pool() {
        let mut s = CreditSender::new();
        s.handle_return(CreditTarget::Shared, &fc(1, 1, 8, 8));
        s.handle_return(VC1, &fc(1, 0, 0, 0));
        let vc = Vc::new(1).unwrap();
        assert_eq!(s.consume_vc_or_pool(vc, Credits::request(0)), Ok(VC1));
        assert_eq!(
            s.consume_vc_or_pool(vc, Credits::request(2)),
            Ok(CreditTarget::Shared)
        );
        assert!(s.consume_vc_or_pool(vc, Credits::request(0)).is_err());
        assert_eq!(s.stats().pool_spends, 1);
    }

    #[test]
    fn returns_above_the_grant_are_discarded() {
        let mut s = CreditSender::new();
        s.handle_return(VC1, &fc(4, 0, 0, 0));
        s.handle_return(VC1, &fc(4, 0, 0, 0));
        s.handle_initial_release_complete();
        assert_eq!(s.grant(VC1, CreditClass::ReqCmd), 8);
        s.consume(VC1, Credits([3, 0, 0, 0])).unwrap();
        s.handle_return(VC1, &fc(5, 0, 0, 0));
        assert_eq!(s.available(VC1, CreditClass::ReqCmd), 8);
        assert_eq!(s.stats().return_above_grant, 1);
        assert_eq!(
            s.poll_event(),
            Some(FlowEvent::ReturnAboveGrant {
                target: VC1,
                class: CreditClass::ReqCmd,
                excess: 2
            })
        );
        s.reset();
        assert_eq!(s.available(VC1, CreditClass::ReqCmd), 0);
    }
}
