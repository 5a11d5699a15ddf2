//! The port abstraction the switch logic runs on (`spec-notes/switch.md#ports`).
//!
//! # For firmware authors
//! The switch never drives a link itself. Whatever owns a port's link implements
//! [`PortLink`], and the caller passes the ports as a slice (index = port number) to
//! [`crate::Switch::refresh_port`], [`crate::Switch::forward`] and
//! [`crate::Switch::poll_transmit`]. Two implementations ship here:
//!
//! * [`LinkPort`]: the real thing. One protocol-crate `UaLink` (bring-up, DL messages,
//!   replay), the protocol's TL credit machinery (`CreditSender` toward the peer,
//!   `CreditReceiver` for what this end grants), the protocol's TL packer and unpacker, and
//!   the receive buffers the grant stands for. [`crate::fabric`] moves frames between
//!   `LinkPort`s and the switch.
//! * [`SimPort`]: an up flag, one credit per frame per VC and injectable counters, for unit
//!   tests of the switch logic alone.
//!
//! # For link implementers
//! * [`PortLink::tx_credits`] reports how many frames of a VC the far end can take now,
//!   by the link's own credit rules; the switch only compares the figure between ports.
//! * [`PortLink::try_consume_credit`] is called exactly once per frame the switch sends on
//!   the port; it must apply the link's flow-control rules for that frame (credit class, data
//!   units, pool) and return `false`, changing nothing, if the frame may not go now.
//! * [`PortLink::stats`] returns cumulative, wrapping counters; the switch takes deltas.

mod link;
mod rx;

pub use self::link::{
    GrantError, LinkPort, LinkPortConfig, LinkPortStats, PeerIdentity, SendError,
    DEVICE_TYPE_ACCELERATOR, DEVICE_TYPE_SWITCH,
};
pub use self::rx::RxFrame;

use crate::header::{FrameKind, Header};
use crate::NUM_VCS;
use podlink_protocol::wire::Vc;

/// Cumulative health inputs of a link (wrapping counters since link creation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LinkStats {
    /// DL flits received with a bad CRC.
    pub crc_errors: u32,
    /// Replays (replay requests sent or honoured).
    pub replays: u32,
    /// Times the link went down.
    pub flaps: u32,
}

/// One switch port's link, as the switch logic sees it.
pub trait PortLink {
    /// The link is up (DL state Up) and may carry frames.
    fn is_up(&self) -> bool;
    /// Frames of virtual channel `vc` the far end can accept now, of either flow: an upper
    /// bound used to compare ports. It must be nonzero whenever a frame of either flow could
    /// go (the egress skips a VC at 0, so a bound that hid one flow's credits behind the
    /// other's would block it).
    fn tx_credits(&self, vc: Vc) -> u32;
    /// Take the credit the frame `h` needs; `false` (and no change) when it is not there.
    fn try_consume_credit(&mut self, h: &Header) -> bool;
    /// Cumulative health counters.
    fn stats(&self) -> LinkStats;
}

/// A minimal in-memory port: a credit counter per VC (one credit per frame), an up flag and
/// injectable health counters, for unit tests of the switch logic (the firmware and the
/// link tests use [`LinkPort`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SimPort {
    up: bool,
    credits: [u32; NUM_VCS],
    stats: LinkStats,
    sent: [u32; NUM_VCS],
    sent_requests: u32,
}

impl SimPort {
    /// A port that is up with `credits` frame credits on every VC.
    pub const fn up_with_credits(credits: u32) -> SimPort {
        SimPort {
            up: true,
            credits: [credits; NUM_VCS],
            stats: LinkStats {
                crc_errors: 0,
                replays: 0,
                flaps: 0,
            },
            sent: [0; NUM_VCS],
            sent_requests: 0,
        }
    }

    /// Bring the link up or down (a down transition counts one flap).
    pub fn set_up(&mut self, up: bool) {
        if self.up && !up {
            self.stats.flaps = self.stats.flaps.wrapping_add(1);
        }
        self.up = up;
    }

    /// The far end returns `n` credits on `vc`.
    pub fn grant(&mut self, vc: Vc, n: u32) {
        if let Some(c) = self.credits.get_mut(usize::from(vc.get())) {
            *c = c.saturating_add(n);
        }
    }

    /// Set the credits of `vc`.
    pub fn set_credits(&mut self, vc: Vc, n: u32) {
        if let Some(c) = self.credits.get_mut(usize::from(vc.get())) {
            *c = n;
        }
    }

    /// Count `n` CRC errors.
    pub fn inject_crc_errors(&mut self, n: u32) {
        self.stats.crc_errors = self.stats.crc_errors.wrapping_add(n);
    }

    /// Count `n` replays.
    pub fn inject_replays(&mut self, n: u32) {
        self.stats.replays = self.stats.replays.wrapping_add(n);
    }

    /// Frames sent on `vc` so far.
    pub fn sent(&self, vc: Vc) -> u32 {
        self.sent.get(usize::from(vc.get())).copied().unwrap_or(0)
    }

    /// Frames sent on all VCs so far.
    pub fn sent_total(&self) -> u32 {
        self.sent.iter().fold(0u32, |a, &b| a.wrapping_add(b))
    }

    /// Requests sent so far.
    pub fn sent_requests(&self) -> u32 {
        self.sent_requests
    }
}

impl PortLink for SimPort {
    fn is_up(&self) -> bool {
        self.up
    }

    fn tx_credits(&self, vc: Vc) -> u32 {
        self.credits
            .get(usize::from(vc.get()))
            .copied()
            .unwrap_or(0)
    }

    fn try_consume_credit(&mut self, h: &Header) -> bool {
        let i = usize::from(h.vc.get());
        match (self.up, self.credits.get_mut(i), self.sent.get_mut(i)) {
            (true, Some(c), Some(s)) if *c > 0 => {
                *c -= 1;
                *s = s.wrapping_add(1);
                if h.kind == FrameKind::Request {
                    self.sent_requests = self.sent_requests.wrapping_add(1);
                }
                true
            }
            _ => false,
        }
    }

    fn stats(&self) -> LinkStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use podlink_protocol::wire::AccelId;

    #[test]
    fn test_sim_port_credits_and_flaps() {
        let vc = Vc::new(1).unwrap();
        let h = Header::response(None, AccelId::new(1).unwrap(), vc);
        let mut p = SimPort::up_with_credits(1);
        assert!(p.try_consume_credit(&h));
        assert!(!p.try_consume_credit(&h));
        p.grant(vc, 2);
        assert_eq!(p.tx_credits(vc), 2);
        p.set_up(false);
        assert!(!p.try_consume_credit(&h));
        p.set_up(true);
        assert_eq!(p.stats().flaps, 1);
        assert_eq!(p.sent(vc), 1);
        assert_eq!(p.sent_total(), 1);
        p.inject_crc_errors(3);
        p.inject_replays(2);
        assert_eq!(
            p.stats(),
            LinkStats {
                crc_errors: 3,
                replays: 2,
                flaps: 1
            }
        );
    }
}

#[cfg(test)]
mod link_tests;
