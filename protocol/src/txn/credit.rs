//! The transaction layer's view of TL credits (`spec-notes/transactions.md#credits`).
//!
//! The link layer owns the credit counters (four classes per VC plus a shared pool). The
//! transaction layer only asks, through [`CreditGate`], whether an item may be sent — taking
//! its credits all at once — and tells the gate when it has consumed a received item, so
//! that the item's credits go back to the peer on the pool and VC it used.

use crate::wire::Vc;

/// Which way an item flows: requests spend request-command and request-data credits,
/// responses the response classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flow {
    /// Requester → completer.
    Request,
    /// Completer → requester.
    Response,
}

/// The pool an item's credits came from: the item's `pool` bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Pool {
    /// The item's own VC (`pool` = 0).
    #[default]
    PerVc,
    /// The shared pool (`pool` = 1).
    Shared,
}

impl Pool {
    /// The `pool` bit.
    pub const fn bit(self) -> bool {
        matches!(self, Pool::Shared)
    }

    /// The pool of a `pool` bit.
    pub const fn from_bit(b: bool) -> Pool {
        if b {
            Pool::Shared
        } else {
            Pool::PerVc
        }
    }
}

/// Credits between the transaction layer and the link.
///
/// An item costs one command credit and one data credit per 64 B beat of its flow's classes.
pub trait CreditGate {
    /// Take the credits for one item of `flow` on `vc` with `data_beats` beats, all or
    /// nothing. Returns the pool they came from, or `None` (nothing taken) when short.
    ///
    /// Callers rely on refusals being monotonic: until credits are returned, an item of the
    /// same flow and VC with at least as many beats as a refused one is refused too.
    fn try_consume(&mut self, flow: Flow, vc: Vc, data_beats: u8) -> Option<Pool>;

    /// A received item of `flow` on `vc` has been consumed: return its credits to the peer.
    fn release(&mut self, flow: Flow, vc: Vc, pool: Pool, data_beats: u8);
}

/// No flow control: every item may go, nothing is returned (loopback, tests, benchmarks).
#[derive(Debug, Clone, Copy, Default)]
pub struct Unlimited;

impl CreditGate for Unlimited {
    fn try_consume(&mut self, _flow: Flow, _vc: Vc, _data_beats: u8) -> Option<Pool> {
        Some(Pool::PerVc)
    }
    fn release(&mut self, _flow: Flow, _vc: Vc, _pool: Pool, _data_beats: u8) {}
}

impl<G: CreditGate + ?Sized> CreditGate for &mut G {
    fn try_consume(&mut self, flow: Flow, vc: Vc, data_beats: u8) -> Option<Pool> {
        (**self).try_consume(flow, vc, data_beats)
    }
    fn release(&mut self, flow: Flow, vc: Vc, pool: Pool, data_beats: u8) {
        (**self).release(flow, vc, pool, data_beats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_and_pool() {
        assert_eq!(Pool::from_bit(true), Pool::Shared);
        assert!(!Pool::PerVc.bit());
        fn through<G: CreditGate>(mut g: G) -> Option<Pool> {
            g.release(Flow::Response, Vc::default(), Pool::Shared, 1);
            g.try_consume(Flow::Request, Vc::default(), 4)
        }
        let mut u = Unlimited;
        assert_eq!(through(&mut u), Some(Pool::PerVc));
    }
}
