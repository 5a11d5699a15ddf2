//! The forwarding logic of a simulated switch (`spec-notes/simulator.md#switches`).
//!
//! A switch of at most 64 ports, 16 partitions and 8 ways per destination runs
//! [`podlink_switch::Switch`] unchanged: its route lookup, isolation checks, ordering pin,
//! adaptive choice, egress queues and per-VC / per-partition weighted round robin, with
//! tables built from [`Fabric`] by [`podlink_switch::Tables`]. Larger switches (NVL72-like 72
//! ports, the 1024-port planes of `ualink-1024`) exceed the library's fixed capacities; they
//! use [`Wide`], the same decision rules over the fabric's route table with per-VC FIFOs
//! served round robin (no per-partition weights or rate caps).
//!
//! Either way frames wait in the switch until the egress port's transmitter pulls them while
//! it packs a DL flit, so arbitration happens at the serialisation point.

use super::port::{flow_of, Frame, PortState};
use crate::pod::config::PodFile;
use crate::pod::topology::{Attach, Fabric};
use podlink_protocol::time::Instant;
use podlink_protocol::txn::Flow;
use podlink_switch::header::{FrameKind, Header};
use podlink_switch::{DropReason, Forwarded, Switch, Tables, MAX_PARTITIONS, MAX_PORTS};
use std::collections::VecDeque;

/// Frames one switch buffers (the library's egress queue capacity; also used for [`Wide`]).
pub const QUEUE_CAPACITY: usize = podlink_switch::QUEUE_SLOTS;

/// The forwarding logic of one switch.
pub enum Forwarder {
    /// The podlink-switch library.
    Podlink(Box<Switch>),
    /// The simulator's wide-switch forwarder.
    Wide(Box<Wide>),
}

impl Forwarder {
    /// Build switch `s` of `fabric`.
    pub fn build(pod: &PodFile, fabric: &Fabric, s: usize) -> Forwarder {
        let node = &fabric.switches[s];
        let parts = pod.partitions.len().max(1);
        if node.ports.len() <= MAX_PORTS && parts <= MAX_PARTITIONS {
            if let Some(sw) = podlink(pod, fabric, s) {
                return Forwarder::Podlink(sw);
            }
        }
        Forwarder::Wide(Box::new(Wide::new(pod, fabric, s)))
    }

    /// Which logic this is ("podlink-switch" or "wide").
    pub fn kind(&self) -> &'static str {
        match self {
            Forwarder::Podlink(_) => "podlink-switch",
            Forwarder::Wide(_) => "wide",
        }
    }

    /// Frames buffered.
    pub fn queued(&self) -> usize {
        match self {
            Forwarder::Podlink(s) => usize::from(s.queued_frames()),
            Forwarder::Wide(w) => w.queued,
        }
    }

    /// Whether a frame with header `h` finds room in the switch's queues (requests only
    /// within their share, so that responses always find room: the library's
    /// [`Switch::has_room`] rule, kept by [`Wide`] too).
    pub fn has_room(&self, h: &Header) -> bool {
        match self {
            Forwarder::Podlink(s) => s.has_room(h),
            Forwarder::Wide(w) => w.has_room(h),
        }
    }

    /// Whether frames wait for egress `port`.
    pub fn backlog(&self, port: u32) -> bool {
        match self {
            Forwarder::Podlink(s) => (0..4u8).any(|vc| {
                s.queue_depth(
                    port as u8,
                    podlink_protocol::wire::Vc::from_bits_truncate(vc),
                ) > 0
            }),
            Forwarder::Wide(w) => w.backlog.get(port as usize).is_some_and(|&n| n > 0),
        }
    }

    /// The port's link state or credits changed.
    pub fn refresh(&mut self, port: u32, ports: &[PortState]) {
        if let (Forwarder::Podlink(s), Some(p)) = (self, ports.get(port as usize)) {
            s.refresh_port(port as u8, p);
        }
    }

    /// Decide and queue a frame that arrived on `ingress`; returns the egress port.
    ///
    /// # Errors
    /// Why the frame was dropped.
    pub fn forward(
        &mut self,
        now: Instant,
        ingress: u32,
        handle: u32,
        f: &Frame,
        ports: &mut [PortState],
    ) -> Result<u32, DropReason> {
        let header = Header::from_tl(&f.field);
        match self {
            Forwarder::Podlink(s) => {
                let frame = podlink_switch::Frame {
                    handle,
                    header,
                    bytes: f.wire_bytes(),
                };
                s.forward(now, ingress as u8, frame, ports)
                    .map(|r: Forwarded| u32::from(r.port()))
            }
            Forwarder::Wide(w) => w.forward(ingress, handle, header, f.beats(), ports),
        }
    }

    /// The next frame for egress `port` that may go now (credits taken), if any. `beats_of`
    /// gives a handle's data beats (to refund the library's worst-case reservation).
    pub fn pull(
        &mut self,
        now: Instant,
        port: u32,
        ports: &mut [PortState],
        beats_of: impl Fn(u32) -> (Flow, u32),
    ) -> Option<u32> {
        match self {
            Forwarder::Podlink(s) => {
                // The library's choice for this port alone (as its `poll_transmit` with every
                // other port unavailable).
                let p = ports.get_mut(port as usize)?;
                p.accepting = true;
                let tx = s.poll_transmit_port(now, port as u8, p);
                p.accepting = false;
                let tx = tx?;
                debug_assert_eq!(u32::from(tx.port), port, "frame pulled for another port");
                let (flow, beats) = beats_of(tx.handle);
                if let Some(p) = ports.get_mut(tx.port as usize) {
                    let vc = usize::from(tx.header.vc.get());
                    p.credits
                        .give(flow, vc, 0, super::port::MAX_BEATS.saturating_sub(beats));
                    s.refresh_port(tx.port, p);
                }
                Some(tx.handle)
            }
            Forwarder::Wide(w) => w.pull(port, ports),
        }
    }

    /// Drops counted by the forwarding logic, by reason name.
    pub fn drops(&self) -> Vec<(&'static str, u64)> {
        match self {
            Forwarder::Podlink(s) => {
                let t = s.counters().total();
                vec![
                    ("spoofed", u64::from(t.spoofed)),
                    ("cross-partition", u64::from(t.cross_partition)),
                    ("no-route", u64::from(t.no_route)),
                    ("unreachable", u64::from(t.unreachable)),
                    ("queue-full", u64::from(t.queue_full)),
                    ("flushed", u64::from(t.flushed)),
                ]
            }
            Forwarder::Wide(w) => w.drops.clone(),
        }
    }
}

fn podlink(pod: &PodFile, fabric: &Fabric, s: usize) -> Option<Box<Switch>> {
    // The same tables `podlink-sim export` writes for the firmware.
    let tables = crate::export::switch_tables(pod, fabric, s as u32).ok()?;
    let mut sw = Box::new(Switch::new());
    sw.stage_with(|t: &mut Tables| {
        *t = tables;
        Ok(())
    })
    .ok()?;
    sw.commit().ok()?;
    while sw.poll_event().is_some() {}
    Some(sw)
}

#[derive(Debug, Clone, Copy)]
struct Queued {
    handle: u32,
    flow: Flow,
    beats: u32,
}

/// The forwarder of switches too large for the library: the same route lookup, source check
/// on accelerator ports and partition check; requests go by deterministic hash over their
/// destination's usable ways (it keeps no answer counts, so it cannot prove a pin free, and a
/// time-based pin is unsound under back-pressure: `spec-notes/switch.md#ordering-rule`);
/// responses take the least-loaded way when adaptive. Per-(port, VC) FIFOs served round robin
/// over VCs, each two lanes (responses first, then requests) with the library's request share
/// of the queue capacity. (The presets that use it, `nvl72-like` and `ualink-1024`, have one
/// way per destination on each plane, so there is no choice to make.)
pub struct Wide {
    routes: Vec<Vec<u32>>,
    attach: Vec<Option<u32>>,
    part_of: Vec<u16>,
    adaptive: bool,
    queues: Vec<VecDeque<Queued>>,
    backlog: Vec<u32>,
    rr: Vec<u8>,
    queued: usize,
    /// Requests queued (at most `QUEUE_CAPACITY - RESPONSE_RESERVE`).
    requests: usize,
    drops: Vec<(&'static str, u64)>,
}

/// The queue of (port, VC, lane): lane 0 responses, 1 requests.
fn queue_index(port: u32, vc: usize, flow: Flow) -> usize {
    ((port as usize * 4 + (vc & 3)) << 1) | usize::from(flow == Flow::Request)
}

fn flow_hash(h: &Header) -> u32 {
    let src = u32::from(h.src.map_or(0x3ff, |s| s.get()));
    let key = (src << 12) | (u32::from(h.dst.get()) << 2) | u32::from(h.vc.get());
    let x = key.wrapping_mul(0x9e37_79b1) ^ h.region.wrapping_mul(0x85eb_ca77);
    x ^ (x >> 15)
}

impl Wide {
    fn new(pod: &PodFile, fabric: &Fabric, s: usize) -> Wide {
        let node = &fabric.switches[s];
        let n = node.ports.len();
        Wide {
            routes: node.routes.clone(),
            attach: node
                .ports
                .iter()
                .map(|a| match *a {
                    Attach::Accel { accel, .. } => Some(accel),
                    Attach::Switch { .. } => None,
                })
                .collect(),
            part_of: fabric.partition_of.clone(),
            adaptive: pod.switch.adaptive,
            queues: (0..n * 8).map(|_| VecDeque::new()).collect(),
            backlog: vec![0; n],
            rr: vec![0; n],
            queued: 0,
            requests: 0,
            drops: [
                "spoofed",
                "cross-partition",
                "no-route",
                "unreachable",
                "queue-full",
                "flushed",
            ]
            .iter()
            .map(|&k| (k, 0))
            .collect(),
        }
    }

    fn has_room(&self, h: &Header) -> bool {
        self.queued < QUEUE_CAPACITY
            && (h.kind != FrameKind::Request
                || self.requests < QUEUE_CAPACITY - podlink_switch::RESPONSE_RESERVE)
    }

    fn drop(&mut self, r: DropReason) -> DropReason {
        let k = match r {
            DropReason::Spoofed => 0,
            DropReason::CrossPartition => 1,
            DropReason::NoRoute => 2,
            DropReason::QueueFull => 4,
            DropReason::Flushed => 5,
            _ => 3,
        };
        if let Some(d) = self.drops.get_mut(k) {
            d.1 += 1;
        }
        r
    }

    fn decide(&self, ingress: u32, h: &Header, ports: &[PortState]) -> Result<u32, DropReason> {
        let d = u32::from(h.dst.get());
        let ways = self.routes.get(d as usize).ok_or(DropReason::NoRoute)?;
        let src = match (self.attach.get(ingress as usize), h.src) {
            (None, _) => return Err(DropReason::BadIngress),
            (Some(Some(a)), Some(s)) if u32::from(s.get()) != *a => {
                return Err(DropReason::Spoofed)
            }
            (Some(Some(a)), _) => *a,
            (Some(None), Some(s)) => u32::from(s.get()),
            (Some(None), None) => d,
        };
        if self.part_of.get(src as usize) != self.part_of.get(d as usize) {
            return Err(DropReason::CrossPartition);
        }
        if ways.is_empty() {
            return Err(DropReason::NoRoute);
        }
        let hash = flow_hash(h);
        let vc = usize::from(h.vc.get());
        let usable = |p: u32| ports.get(p as usize).is_some_and(|s| s.up);
        let port = if self.adaptive && h.kind != FrameKind::Request {
            let score = |p: u32| {
                let c = ports.get(p as usize).map_or(0, |s| {
                    use podlink_switch::port::PortLink;
                    i64::from(s.tx_credits(h.vc))
                });
                let q = [Flow::Response, Flow::Request]
                    .iter()
                    .filter_map(|&f| self.queues.get(queue_index(p, vc, f)))
                    .map(|q| q.len() as i64)
                    .sum::<i64>();
                c - q
            };
            ways.iter()
                .copied()
                .filter(|&p| usable(p))
                .max_by_key(|&p| (score(p), std::cmp::Reverse(p)))
        } else {
            let n = ways.len();
            let start = ((u64::from(hash) * n as u64) >> 32) as usize;
            (0..n).map(|k| ways[(start + k) % n]).find(|&p| usable(p))
        };
        port.ok_or(DropReason::Unreachable)
    }

    fn forward(
        &mut self,
        ingress: u32,
        handle: u32,
        h: Header,
        beats: u32,
        ports: &[PortState],
    ) -> Result<u32, DropReason> {
        if h.kind == FrameKind::LinkLocal {
            return Err(DropReason::LinkLocal);
        }
        let port = match self.decide(ingress, &h, ports) {
            Ok(x) => x,
            Err(r) => return Err(self.drop(r)),
        };
        if !self.has_room(&h) {
            return Err(self.drop(DropReason::QueueFull));
        }
        let flow = if h.kind == FrameKind::Request {
            Flow::Request
        } else {
            Flow::Response
        };
        let vc = usize::from(h.vc.get());
        if flow == Flow::Request {
            self.requests += 1;
        }
        if let Some(q) = self.queues.get_mut(queue_index(port, vc, flow)) {
            q.push_back(Queued {
                handle,
                flow,
                beats,
            });
        }
        if let Some(b) = self.backlog.get_mut(port as usize) {
            *b += 1;
        }
        self.queued += 1;
        Ok(port)
    }

    fn pull(&mut self, port: u32, ports: &mut [PortState]) -> Option<u32> {
        if self.backlog.get(port as usize).is_none_or(|&b| b == 0) {
            return None;
        }
        let p = ports.get_mut(port as usize)?;
        if !p.up {
            return None;
        }
        let start = *self.rr.get(port as usize)?;
        for k in 0..8u8 {
            let vc = usize::from((start + k / 2) & 3);
            // Responses first: a response never waits behind a request.
            let flow = if k % 2 == 0 {
                Flow::Response
            } else {
                Flow::Request
            };
            let Some(q) = self.queues.get_mut(queue_index(port, vc, flow)) else {
                continue;
            };
            let Some(head) = q.front().copied() else {
                continue;
            };
            if !p.credits.has(head.flow, vc, head.beats) {
                continue;
            }
            p.credits.take(head.flow, vc, head.beats);
            q.pop_front();
            if flow == Flow::Request {
                self.requests -= 1;
            }
            if let Some(r) = self.rr.get_mut(port as usize) {
                *r = (vc as u8 + 1) & 3;
            }
            if let Some(b) = self.backlog.get_mut(port as usize) {
                *b -= 1;
            }
            self.queued -= 1;
            return Some(head.handle);
        }
        None
    }
}

/// The credit flow and beats of a frame (for [`Forwarder::pull`]).
pub fn frame_cost(f: &Frame) -> (Flow, u32) {
    (flow_of(&f.field), f.beats())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::presets;

    #[test]
    fn forwarder_kinds_per_preset() {
        for (name, kind) in [
            ("single-switch-16", "podlink-switch"),
            ("ualink-64x4", "podlink-switch"),
            ("two-tier-384", "podlink-switch"),
            ("nvl72-like", "wide"),
        ] {
            let pod = presets::load(name).unwrap();
            let f = Fabric::build(&pod);
            assert_eq!(Forwarder::build(&pod, &f, 0).kind(), kind, "{name}");
        }
    }

    /// A switch over 64 ports with two ways per destination: requests of one flow go the
    /// same way whatever the load (deterministic hash, no time-based pin); responses take
    /// the least-loaded way; a down way is avoided.
    #[test]
    fn wide_hashes_requests_and_balances_responses() {
        use crate::pod::config::Topology;
        let mut pod = presets::load("single-switch-16").unwrap();
        pod.topology = Topology::SingleSwitch {
            accelerators: 40,
            ports_per_accel: 2,
        };
        let fabric = Fabric::build(&pod);
        let mut fwd = Forwarder::build(&pod, &fabric, 0);
        assert_eq!(fwd.kind(), "wide");
        let Forwarder::Wide(w) = &mut fwd else {
            unreachable!()
        };
        let n = fabric.switches[0].ports.len();
        let mut ports: Vec<PortState> = (0..n)
            .map(|_| PortState {
                up: true,
                credits: crate::sim::port::Credits::all(8),
                ..PortState::default()
            })
            .collect();
        let ways = fabric.switches[0].routes[7].clone();
        assert_eq!(ways.len(), 2);
        // Source 3 on its first port, requests of one flow to 7.
        let ingress = fabric.accel_ports[3][0].1;
        let req = Header::request(
            podlink_protocol::wire::AccelId::new(3).unwrap(),
            podlink_protocol::wire::AccelId::new(7).unwrap(),
            podlink_protocol::wire::Vc::new(0).unwrap(),
            0x4000,
        );
        let first = w.forward(ingress, 1, req, 1, &ports).unwrap();
        for k in 0..20 {
            // Load the chosen way heavily: the flow still goes there.
            assert_eq!(w.forward(ingress, 2 + k, req, 1, &ports), Ok(first));
        }
        // Responses to 7 avoid the loaded way.
        let rsp = Header::response(
            Some(podlink_protocol::wire::AccelId::new(3).unwrap()),
            podlink_protocol::wire::AccelId::new(7).unwrap(),
            podlink_protocol::wire::Vc::new(0).unwrap(),
        );
        let other = w.forward(ingress, 100, rsp, 1, &ports).unwrap();
        assert_ne!(other, first);
        assert!(ways.contains(&other));
        // The hashed way goes down: the flow moves to the usable one.
        ports[first as usize].up = false;
        assert_eq!(w.forward(ingress, 101, req, 1, &ports), Ok(other));
    }
}
