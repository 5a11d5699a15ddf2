//! Counters and events (`spec-notes/switch.md#counters-and-events`).
//!
//! Every drop is counted on its ingress port and raised as an [`Event`]; events wait in a
//! bounded queue read with [`crate::Switch::poll_event`], and an event that finds the queue
//! full is counted in [`Counters::events_lost`] instead.

use crate::config::ConfigError;
use crate::health::Health;
use crate::tables::Attachment;
use crate::MAX_PORTS;
use core::fmt;
use podlink_protocol::wire::AccelId;

/// Why a frame was not forwarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum DropReason {
    /// A link-local field (flow control / NOP) reached the forwarding logic.
    LinkLocal,
    /// The ingress port is out of range or has nothing attached.
    BadIngress,
    /// The source ID does not belong to the ingress port's attachment.
    Spoofed,
    /// Source and destination are not in the same partition (or not in any).
    CrossPartition,
    /// The destination has no route.
    NoRoute,
    /// Every egress port of the destination is down or failed.
    Unreachable,
    /// The egress queues are full.
    QueueFull,
    /// The frame was queued on a port that went down or failed, and was flushed.
    Flushed,
    /// A request whose flow is pinned to a port that went down or failed while requests of
    /// the flow may still be in flight beyond it: sending it another way could overtake them
    /// (`spec-notes/switch.md#ordering-rule`). Dropped until the pin expires.
    PinLost,
    /// The frame stayed in the switch longer than its residence limit
    /// ([`crate::Switch::set_max_residence`]): its requester has given up on it, and sending
    /// it on now could overtake what was sent since (`spec-notes/switch.md#residence-limit`).
    Expired,
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DropReason::LinkLocal => "link-local field",
            DropReason::BadIngress => "unattached ingress port",
            DropReason::Spoofed => "spoofed source",
            DropReason::CrossPartition => "cross-partition",
            DropReason::NoRoute => "no route",
            DropReason::Unreachable => "no usable egress port",
            DropReason::QueueFull => "egress queues full",
            DropReason::Flushed => "flushed from a failed port",
            DropReason::PinLost => "pinned port lost with the flow in flight",
            DropReason::Expired => "older than the residence limit",
        })
    }
}

/// Something the control plane should know about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A frame was dropped.
    Dropped {
        /// Ingress port.
        port: u16,
        /// Why.
        reason: DropReason,
        /// Source ID the frame carried, if any.
        src: Option<AccelId>,
        /// Destination ID.
        dst: AccelId,
    },
    /// Frames queued at a port were flushed because it went down or failed.
    Flushed {
        /// The egress port.
        port: u16,
        /// How many frames.
        frames: u32,
    },
    /// A port's health state changed.
    HealthChanged {
        /// The port.
        port: u16,
        /// Old state.
        from: Health,
        /// New state.
        to: Health,
    },
    /// A port's link came up.
    LinkUp {
        /// The port.
        port: u16,
    },
    /// A port's link went down.
    LinkDown {
        /// The port.
        port: u16,
    },
    /// A new configuration is in force.
    ConfigCommitted {
        /// Its generation.
        generation: u32,
    },
    /// A configuration was refused; the old one stays in force.
    ConfigRefused {
        /// Why.
        error: ConfigError,
    },
    /// Bring-up (the link's device ID exchange) changed what a port is attached to; the
    /// tables with the new attachment are in force.
    AttachmentLearned {
        /// The port.
        port: u16,
        /// What its peer identified as.
        attach: Attachment,
    },
}

/// Counters of one port. Drops are counted on the ingress port, transmissions on the egress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortCounters {
    /// Frames received into the forwarding logic.
    pub rx_frames: u32,
    /// Frames transmitted (cut-through or from the queues).
    pub tx_frames: u32,
    /// Of those, cut through without queueing.
    pub cut_through: u32,
    /// Frames queued at this egress.
    pub queued: u32,
    /// Drops: link-local fields.
    pub link_local: u32,
    /// Drops: unattached ingress.
    pub bad_ingress: u32,
    /// Drops: spoofed source.
    pub spoofed: u32,
    /// Drops: cross-partition.
    pub cross_partition: u32,
    /// Drops: no route.
    pub no_route: u32,
    /// Drops: no usable egress.
    pub unreachable: u32,
    /// Drops: egress queues full.
    pub queue_full: u32,
    /// Frames flushed from this egress when it went down or failed.
    pub flushed: u32,
    /// Drops: requests whose pinned port was lost while their flow was in flight.
    pub pin_lost: u32,
    /// Frames dropped for staying longer than the residence limit: counted on the ingress
    /// port when a frame is already too old there, on the egress port when it aged in its
    /// queue.
    pub expired: u32,
}

impl PortCounters {
    pub(crate) fn count_drop(&mut self, r: DropReason) {
        let c = match r {
            DropReason::LinkLocal => &mut self.link_local,
            DropReason::BadIngress => &mut self.bad_ingress,
            DropReason::Spoofed => &mut self.spoofed,
            DropReason::CrossPartition => &mut self.cross_partition,
            DropReason::NoRoute => &mut self.no_route,
            DropReason::Unreachable => &mut self.unreachable,
            DropReason::QueueFull => &mut self.queue_full,
            DropReason::Flushed => &mut self.flushed,
            DropReason::PinLost => &mut self.pin_lost,
            DropReason::Expired => &mut self.expired,
        };
        *c = c.wrapping_add(1);
    }

    /// All drops of this port.
    pub fn drops(&self) -> u32 {
        [
            self.link_local,
            self.bad_ingress,
            self.spoofed,
            self.cross_partition,
            self.no_route,
            self.unreachable,
            self.queue_full,
            self.flushed,
            self.pin_lost,
            self.expired,
        ]
        .iter()
        .fold(0u32, |a, &b| a.wrapping_add(b))
    }
}

/// All counters of a switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counters<const PORTS: usize = MAX_PORTS> {
    /// Per port.
    pub ports: [PortCounters; PORTS],
    /// Events lost because the event queue was full.
    pub events_lost: u32,
    /// Configurations committed.
    pub commits: u32,
    /// Configurations refused.
    pub refusals: u32,
}

impl<const PORTS: usize> Default for Counters<PORTS> {
    fn default() -> Self {
        Self::zero()
    }
}

impl Counters {
    /// All zero (the default instance; [`Counters::zero`] for any).
    pub const fn new() -> Counters {
        Counters::zero()
    }
}

impl<const PORTS: usize> Counters<PORTS> {
    /// All zero.
    pub const fn zero() -> Self {
        Counters {
            ports: [PortCounters {
                rx_frames: 0,
                tx_frames: 0,
                cut_through: 0,
                queued: 0,
                link_local: 0,
                bad_ingress: 0,
                spoofed: 0,
                cross_partition: 0,
                no_route: 0,
                unreachable: 0,
                queue_full: 0,
                flushed: 0,
                pin_lost: 0,
                expired: 0,
            }; PORTS],
            events_lost: 0,
            commits: 0,
            refusals: 0,
        }
    }

    /// The sum over all ports.
    pub fn total(&self) -> PortCounters {
        let mut t = PortCounters::default();
        for p in &self.ports {
            t.rx_frames = t.rx_frames.wrapping_add(p.rx_frames);
            t.tx_frames = t.tx_frames.wrapping_add(p.tx_frames);
            t.cut_through = t.cut_through.wrapping_add(p.cut_through);
            t.queued = t.queued.wrapping_add(p.queued);
            t.link_local = t.link_local.wrapping_add(p.link_local);
            t.bad_ingress = t.bad_ingress.wrapping_add(p.bad_ingress);
            t.spoofed = t.spoofed.wrapping_add(p.spoofed);
            t.cross_partition = t.cross_partition.wrapping_add(p.cross_partition);
            t.no_route = t.no_route.wrapping_add(p.no_route);
            t.unreachable = t.unreachable.wrapping_add(p.unreachable);
            t.queue_full = t.queue_full.wrapping_add(p.queue_full);
            t.flushed = t.flushed.wrapping_add(p.flushed);
            t.pin_lost = t.pin_lost.wrapping_add(p.pin_lost);
            t.expired = t.expired.wrapping_add(p.expired);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_count_drop_and_total() {
        let mut c = Counters::new();
        c.ports[1].count_drop(DropReason::Spoofed);
        c.ports[2].count_drop(DropReason::Spoofed);
        c.ports[2].count_drop(DropReason::Flushed);
        assert_eq!(c.total().spoofed, 2);
        assert_eq!(c.ports[2].drops(), 2);
        assert_eq!(DropReason::QueueFull.to_string(), "egress queues full");
    }
}
