//! Credit-based flow control (`spec-notes/link.md#flow-control`).
//!
//! Two loops, one per profile:
//!
//! * TL credits (UALink profile): four classes ([`CreditClass`]) per virtual channel and in a
//!   shared pool ([`CreditTarget`]). The receiver releases its buffers as credits
//!   ([`CreditReceiver`]), first all of them ("initial credit release", ended by "initial
//!   credit release complete"), then each buffer again when the upper layer frees it. The
//!   sender ([`CreditSender`]) spends them and never exceeds them. Returns travel in TL
//!   flow-control fields ([`TlFlowControl`]) over the lossless DL, so they are increments.
//! * CBFC (Ethernet profile, [`cbfc`]): per-VC *cumulative* counters, so a lost or reordered
//!   update heals itself with the next one.
//!
//! # OR-merge of flow-control fields (podlink's reading of protocol-facts §3)
//! "Where several flow-control fields arrive together they are OR-merged, not added." podlink
//! reads "together" as *in one TL flit for the same target*. The receiver ORs such fields
//! class by class ([`merge`]) and adds the result once. For this to be lossless the sender
//! puts at most one non-zero value per class and target into a TL flit, which
//! [`CreditReceiver::poll_return`] guarantees by emitting one field per target per call
//! (the TL packer takes at most one return per target per flit). With that rule OR equals
//! the sum, and a field repeated in the same flit (e.g. a NOP half copying the control
//! half's returns) is not counted twice. Which VC or pool a field returns credits for is not
//! in the public field layout; the TL flit packer carries it (`spec-notes/deviations.md`).

#![cfg_attr(not(test), deny(clippy::arithmetic_side_effects))]

pub mod cbfc;
mod credits;
mod grant;

pub use self::credits::{CreditSender, SenderStats};
pub use self::grant::{
    CreditOutput, CreditReceiver, ReceiverConfig, ReceiverStats, ReleaseError, Timer,
};

use crate::wire::{TlFlowControl, Vc};
use core::fmt;

/// The four TL credit classes (protocol-facts §3). One data credit is one 64 B buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CreditClass {
    /// Request command (6-bit return field).
    ReqCmd = 0,
    /// Response command (6-bit return field).
    RspCmd = 1,
    /// Request data (8-bit return field).
    ReqData = 2,
    /// Response data (8-bit return field).
    RspData = 3,
}

impl CreditClass {
    /// Every class, in field order.
    pub const ALL: [CreditClass; 4] = [
        CreditClass::ReqCmd,
        CreditClass::RspCmd,
        CreditClass::ReqData,
        CreditClass::RspData,
    ];

    /// The most one flow-control field can return for this class.
    pub const fn field_max(self) -> u16 {
        match self {
            CreditClass::ReqCmd | CreditClass::RspCmd => 63,
            CreditClass::ReqData | CreditClass::RspData => 255,
        }
    }
}

/// Where credits live: one virtual channel's own credits, or the shared pool (the TL
/// field's `pool` bit). Credits are returned to the target the request used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CreditTarget {
    /// Credits dedicated to one VC.
    Vc(Vc),
    /// The shared pool.
    Shared,
}

impl CreditTarget {
    /// Number of targets (4 VCs and the pool).
    pub const COUNT: usize = 5;

    /// Every target: VC 0..=3, then the pool.
    pub const ALL: [CreditTarget; 5] = [
        CreditTarget::Vc(Vc::from_bits_truncate(0)),
        CreditTarget::Vc(Vc::from_bits_truncate(1)),
        CreditTarget::Vc(Vc::from_bits_truncate(2)),
        CreditTarget::Vc(Vc::from_bits_truncate(3)),
        CreditTarget::Shared,
    ];

    /// Index 0..=4 (VC number, 4 for the pool).
    pub const fn index(self) -> usize {
        match self {
            CreditTarget::Vc(vc) => vc.get() as usize,
            CreditTarget::Shared => 4,
        }
    }

    /// The target of index 0..=4 (as carried by `TlMessage::CreditTarget`), `None` above.
    pub const fn from_index(i: u8) -> Option<CreditTarget> {
        match i {
            0..=3 => Some(CreditTarget::Vc(Vc::from_bits_truncate(i))),
            4 => Some(CreditTarget::Shared),
            _ => None,
        }
    }
}

/// A count per credit class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Credits(pub [u16; 4]);

impl Credits {
    /// No credits.
    pub const ZERO: Credits = Credits([0; 4]);

    /// One request command plus `data` request-data credits (a request with payload).
    pub const fn request(data: u16) -> Credits {
        Credits([1, 0, data, 0])
    }
    /// One response command plus `data` response-data credits.
    pub const fn response(data: u16) -> Credits {
        Credits([0, 1, 0, data])
    }
    /// The count of one class.
    pub fn get(&self, c: CreditClass) -> u16 {
        self.0.get(c as usize).copied().unwrap_or(0)
    }
    /// Set the count of one class.
    pub fn set(&mut self, c: CreditClass, v: u16) {
        if let Some(x) = self.0.get_mut(c as usize) {
            *x = v;
        }
    }
    /// All zero.
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 4]
    }
    /// The counts a flow-control field returns.
    pub fn from_field(f: &TlFlowControl) -> Credits {
        Credits([
            u16::from(f.req_cmd),
            u16::from(f.rsp_cmd),
            u16::from(f.req_data),
            u16::from(f.rsp_data),
        ])
    }
    /// As a flow-control field, each class capped at its field's maximum; also returns what
    /// did not fit.
    pub fn to_field(&self) -> (TlFlowControl, Credits) {
        let mut rest = *self;
        let mut take = |c: CreditClass| {
            let v = self.get(c).min(c.field_max());
            rest.set(c, self.get(c).saturating_sub(v));
            u8::try_from(v).unwrap_or(u8::MAX)
        };
        let f = TlFlowControl {
            req_cmd: take(CreditClass::ReqCmd),
            rsp_cmd: take(CreditClass::RspCmd),
            req_data: take(CreditClass::ReqData),
            rsp_data: take(CreditClass::RspData),
        };
        (f, rest)
    }
}

/// OR-merge flow-control fields that arrived together for one target (see the module docs).
pub fn merge<I: IntoIterator<Item = TlFlowControl>>(fields: I) -> TlFlowControl {
    fields
        .into_iter()
        .fold(TlFlowControl::default(), |a, f| TlFlowControl {
            req_cmd: a.req_cmd | f.req_cmd,
            rsp_cmd: a.rsp_cmd | f.rsp_cmd,
            req_data: a.req_data | f.req_data,
            rsp_data: a.rsp_data | f.rsp_data,
        })
}

/// Why a sender may not spend credits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CreditError {
    /// Not enough credits (counted as a credit stall); nothing was consumed.
    Insufficient {
        /// The target tried last.
        target: CreditTarget,
        /// The first class short of credits.
        class: CreditClass,
        /// Credits of that class available.
        available: u32,
        /// Credits needed.
        needed: u32,
    },
}

impl fmt::Display for CreditError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CreditError::Insufficient {
                target,
                class,
                available,
                needed,
            } => write!(
                f,
                "credit stall: {class:?} on {target:?}: {available} available, {needed} needed"
            ),
        }
    }
}

impl core::error::Error for CreditError {}

/// The peer sent more than the credits it held (a protocol error, never fatal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Overrun {
    /// Target of the input.
    pub target: CreditTarget,
    /// First class overrun.
    pub class: CreditClass,
    /// Credits the peer held.
    pub held: u32,
    /// Credits the input needed.
    pub needed: u32,
}

impl fmt::Display for Overrun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "credit overrun by the peer: {:?} on {:?}: held {}, needed {}",
            self.class, self.target, self.held, self.needed
        )
    }
}

impl core::error::Error for Overrun {}

/// A peer broke the credit protocol (never fatal: counted, reported, the input dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FlowEvent {
    /// The peer sent more than the credits it held: the input was refused.
    Overrun(Overrun),
    /// The peer returned more credits than it ever granted: the excess was discarded.
    ReturnAboveGrant {
        /// Target of the return.
        target: CreditTarget,
        /// Class.
        class: CreditClass,
        /// Credits discarded.
        excess: u32,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_is_or() {
        let a = TlFlowControl {
            req_cmd: 3,
            rsp_cmd: 0,
            req_data: 0,
            rsp_data: 16,
        };
        let b = TlFlowControl {
            req_cmd: 0,
            rsp_cmd: 2,
            req_data: 0,
            rsp_data: 16,
        };
        let m = merge([a, b]);
        assert_eq!(Credits::from_field(&m), Credits([3, 2, 0, 16]));
        assert_eq!(merge([]), TlFlowControl::default());
    }

    #[test]
    fn field_caps() {
        let (f, rest) = Credits([100, 5, 300, 255]).to_field();
        assert_eq!(Credits::from_field(&f), Credits([63, 5, 255, 255]));
        assert_eq!(rest, Credits([37, 0, 45, 0]));
        assert_eq!(CreditTarget::ALL[3].index(), 3);
        assert_eq!(CreditTarget::Shared.index(), 4);
        for t in CreditTarget::ALL {
            assert_eq!(CreditTarget::from_index(t.index() as u8), Some(t));
        }
        assert_eq!(CreditTarget::from_index(5), None);
    }
}
