//! The forwarding logic of a simulated switch (`spec-notes/simulator.md#switches`).
//!
//! Every switch runs [`podlink_switch::Switch`] unchanged: its route lookup, isolation checks,
//! ordering rule, adaptive choice, egress queues, per-VC / per-partition weighted round robin,
//! rate caps and health monitor, with tables built from [`Fabric`] by
//! [`crate::export::switch_tables`] (the tables `podlink-sim export` writes). The library's
//! port capacity is a compile-time parameter; the simulator picks the smallest of its
//! instances that holds the switch: the firmware's own `Switch<64, u8>`, `Switch<128, u8>`
//! (NVL72-like 72-port switches), `Switch<1024, u16>` (the planes of `ualink-1024`) and
//! `Switch<4096, u16>` (the largest switch a pod file can describe: 1024 accelerators × 4
//! ports). A switch the library cannot hold at all (more than
//! [`podlink_switch::MAX_PARTITIONS`] partitions) is refused before the run.
//!
//! Frames wait in the switch until the egress port's transmitter pulls them while it packs a
//! DL flit, so arbitration happens at the serialisation point.

use super::port::{Frame, PortState};
use crate::pod::config::PodFile;
use crate::pod::topology::Fabric;
use podlink_protocol::time::{Duration, Instant};
use podlink_protocol::wire::Vc;
use podlink_switch::event::PortCounters;
use podlink_switch::header::Header;
use podlink_switch::health::TransceiverReading;
use podlink_switch::{
    DropReason, Event, Forwarded, Health, HealthPolicy, PortIndex, Switch, Tables, Transmit,
};

/// Frames one switch buffers (the library's egress queue capacity).
pub const QUEUE_CAPACITY: usize = podlink_switch::QUEUE_SLOTS;

/// What the simulator asks of a switch instance, whatever its capacity (object-safe: the
/// simulator's ports are [`PortState`]). Each method is the library's method of that name.
pub trait SwitchOps {
    /// [`Switch::queued_frames`].
    fn queued_frames(&self) -> u16;
    /// [`Switch::has_room`].
    fn has_room(&self, ingress: u16, h: &Header) -> bool;
    /// [`Switch::queue_depth`].
    fn queue_depth(&self, port: u16, vc: Vc) -> u16;
    /// [`Switch::refresh_port`].
    fn refresh_port(&mut self, port: u16, link: &PortState);
    /// [`Switch::forward_aged`].
    ///
    /// # Errors
    /// Why the frame was dropped.
    fn forward_aged(
        &mut self,
        now: Instant,
        arrived: Instant,
        ingress: u16,
        frame: podlink_switch::Frame,
        ports: &mut [PortState],
    ) -> Result<Forwarded, DropReason>;
    /// [`Switch::set_max_residence`].
    fn set_max_residence(&mut self, limit: Option<Duration>);
    /// [`Switch::discarded_frames`].
    fn discarded_frames(&self) -> u16;
    /// [`Switch::poll_transmit_port`].
    fn poll_transmit_port(
        &mut self,
        now: Instant,
        port: u16,
        link: &mut PortState,
    ) -> Option<Transmit>;
    /// The sum of [`Switch::counters`] over all ports.
    fn total_counters(&self) -> PortCounters;
    /// Frames sent on `port` ([`Switch::counters`]).
    fn tx_frames(&self, port: usize) -> u32;
    /// [`Switch::set_health_policy`].
    fn set_health_policy(&mut self, p: HealthPolicy);
    /// [`Switch::health`].
    fn health(&self, port: u16) -> Health;
    /// [`Switch::force_health`].
    fn force_health(&mut self, port: u16, state: Health);
    /// [`Switch::set_transceiver`].
    fn set_transceiver(&mut self, port: u16, r: TransceiverReading);
    /// [`Switch::handle_timeout`].
    fn handle_timeout(&mut self, now: Instant, ports: &[PortState]);
    /// [`Switch::poll_event`].
    fn poll_event(&mut self) -> Option<Event>;
    /// [`Switch::poll_discarded`].
    fn poll_discarded(&mut self) -> Option<u32>;
    /// The instance's port capacity (`PORTS`).
    fn capacity(&self) -> usize;
}

impl<const PORTS: usize, P: PortIndex> SwitchOps for Switch<PORTS, P> {
    fn queued_frames(&self) -> u16 {
        Switch::queued_frames(self)
    }
    fn has_room(&self, ingress: u16, h: &Header) -> bool {
        Switch::has_room(self, ingress, h)
    }
    fn queue_depth(&self, port: u16, vc: Vc) -> u16 {
        Switch::queue_depth(self, port, vc)
    }
    fn refresh_port(&mut self, port: u16, link: &PortState) {
        Switch::refresh_port(self, port, link);
    }
    fn forward_aged(
        &mut self,
        now: Instant,
        arrived: Instant,
        ingress: u16,
        frame: podlink_switch::Frame,
        ports: &mut [PortState],
    ) -> Result<Forwarded, DropReason> {
        Switch::forward_aged(self, now, arrived, ingress, frame, ports)
    }
    fn set_max_residence(&mut self, limit: Option<Duration>) {
        Switch::set_max_residence(self, limit);
    }
    fn discarded_frames(&self) -> u16 {
        Switch::discarded_frames(self)
    }
    fn poll_transmit_port(
        &mut self,
        now: Instant,
        port: u16,
        link: &mut PortState,
    ) -> Option<Transmit> {
        Switch::poll_transmit_port(self, now, port, link)
    }
    fn total_counters(&self) -> PortCounters {
        self.counters().total()
    }
    fn tx_frames(&self, port: usize) -> u32 {
        self.counters().ports.get(port).map_or(0, |c| c.tx_frames)
    }
    fn set_health_policy(&mut self, p: HealthPolicy) {
        Switch::set_health_policy(self, p);
    }
    fn health(&self, port: u16) -> Health {
        Switch::health(self, port)
    }
    fn force_health(&mut self, port: u16, state: Health) {
        Switch::force_health(self, port, state);
    }
    fn set_transceiver(&mut self, port: u16, r: TransceiverReading) {
        Switch::set_transceiver(self, port, r);
    }
    fn handle_timeout(&mut self, now: Instant, ports: &[PortState]) {
        Switch::handle_timeout(self, now, ports);
    }
    fn poll_event(&mut self) -> Option<Event> {
        Switch::poll_event(self)
    }
    fn poll_discarded(&mut self) -> Option<u32> {
        Switch::poll_discarded(self)
    }
    fn capacity(&self) -> usize {
        PORTS
    }
}

/// The health policy of every switch of `pod`: the library's defaults, closing a health
/// window every `window_ps` if given, and ports settling after a change for the
/// accelerators' request timeout plus the switches' residence limit: a request diverted
/// while a port joins may wait that long in the switch's queue, and a request timeout on the
/// link after it (`spec-notes/switch.md#settling`; pod 128197 of `tests/pod_mix.rs`).
pub(crate) fn policy(pod: &PodFile, window_ps: Option<u64>) -> HealthPolicy {
    let d = HealthPolicy::default();
    HealthPolicy {
        window: window_ps.map_or(d.window, |w| Duration::from_ps(w.max(1))),
        settle: Duration::from_ps(pod.hop_residence_ps()),
        ..d
    }
}

/// The forwarding logic of one switch: a [`Switch`] instance that holds it.
pub struct Forwarder {
    sw: Box<dyn SwitchOps + Send>,
}

/// Build the library instance `Switch<PORTS, P>` on the heap with tables `t`, committed.
fn instance<const PORTS: usize, P: PortIndex>(
    pod: &PodFile,
    fabric: &Fabric,
    s: usize,
) -> Result<Box<dyn SwitchOps + Send>, String> {
    // The same tables `podlink-sim export` writes for the firmware.
    let tables: Tables<PORTS, P> =
        crate::export::switch_tables(pod, fabric, s as u32).map_err(|e| e.to_string())?;
    // A wide instance is megabytes: build it on a thread with a stack that holds it even
    // in an unoptimised build (the value is moved into its box).
    let build = move || {
        let mut sw = Box::new(Switch::<PORTS, P>::empty());
        sw.stage_with(|t: &mut Tables<PORTS, P>| {
            t.clone_from(&tables);
            Ok(())
        })
        .map_err(|e| e.to_string())?;
        sw.commit().map_err(|e| format!("{e:?}"))?;
        while sw.poll_event().is_some() {}
        Ok::<_, String>(sw)
    };
    let stack = 4 * core::mem::size_of::<Switch<PORTS, P>>() + (8 << 20);
    let sw = std::thread::Builder::new()
        .stack_size(stack)
        .spawn(build)
        .map_err(|e| format!("cannot start a thread to build the switch: {e}"))?
        .join()
        .map_err(|_| "building the switch failed".to_string())??;
    Ok(sw)
}

impl Forwarder {
    /// Build switch `s` of `fabric` in the smallest library instance that holds it.
    ///
    /// # Errors
    /// What makes the switch unbuildable (more ports than the widest instance, more
    /// partitions than the library holds, tables the library refuses), in words.
    pub fn build(pod: &PodFile, fabric: &Fabric, s: usize) -> Result<Forwarder, String> {
        let n = fabric.switches.get(s).map_or(0, |x| x.ports.len());
        let sw = if n <= 64 {
            instance::<64, u8>(pod, fabric, s)?
        } else if n <= 128 {
            instance::<128, u8>(pod, fabric, s)?
        } else if n <= 1024 {
            instance::<1024, u16>(pod, fabric, s)?
        } else {
            instance::<{ podlink_switch::WIDE_PORTS }, u16>(pod, fabric, s)?
        };
        let mut f = Forwarder { sw };
        f.sw.set_health_policy(policy(pod, None));
        f.sw.set_max_residence(Some(Duration::from_ps(pod.max_residence_ps())));
        Ok(f)
    }

    /// Which logic this is (always the library: "podlink-switch").
    pub fn kind(&self) -> &'static str {
        "podlink-switch"
    }

    /// The library instance's port capacity.
    pub fn capacity(&self) -> usize {
        self.sw.capacity()
    }

    /// The library switch.
    pub fn switch(&mut self) -> &mut (dyn SwitchOps + Send) {
        &mut *self.sw
    }

    /// The library switch, to read.
    pub fn switch_ref(&self) -> &(dyn SwitchOps + Send) {
        &*self.sw
    }

    /// Frames dropped from the queues (flushed, or past the residence limit) whose handles
    /// have not been taken back yet.
    pub fn discarded(&self) -> u16 {
        self.sw.discarded_frames()
    }

    /// Frames buffered.
    pub fn queued(&self) -> usize {
        usize::from(self.sw.queued_frames())
    }

    /// Whether a frame with header `h` arriving on switch port `ingress` finds room in the
    /// switch's queues (requests only within their share, so that responses always find
    /// room, and frames going up within theirs: [`Switch::has_room`]).
    pub fn has_room(&self, ingress: u32, h: &Header) -> bool {
        u16::try_from(ingress).is_ok_and(|i| self.sw.has_room(i, h))
    }

    /// Whether frames wait for egress `port`.
    pub fn backlog(&self, port: u32) -> bool {
        let Ok(port) = u16::try_from(port) else {
            return false;
        };
        (0..4u8).any(|vc| self.sw.queue_depth(port, Vc::from_bits_truncate(vc)) > 0)
    }

    /// The port's link state or credits changed.
    pub fn refresh(&mut self, port: u32, ports: &[PortState]) {
        if let (Ok(p16), Some(p)) = (u16::try_from(port), ports.get(port as usize)) {
            self.sw.refresh_port(p16, p);
        }
    }

    /// Decide and queue a frame that arrived on `ingress` at `arrived`; returns the egress
    /// port.
    ///
    /// # Errors
    /// Why the frame was dropped.
    pub fn forward(
        &mut self,
        now: Instant,
        arrived: Instant,
        ingress: u32,
        handle: u32,
        f: &Frame,
        ports: &mut [PortState],
    ) -> Result<u32, DropReason> {
        let frame = podlink_switch::Frame {
            handle,
            header: Header::from_tl(&f.field),
            bytes: f.wire_bytes(),
        };
        let ingress = u16::try_from(ingress).map_err(|_| DropReason::BadIngress)?;
        self.sw
            .forward_aged(now, arrived, ingress, frame, ports)
            .map(|r| u32::from(r.port()))
    }

    /// The next frame for egress `port` that may go now (its credits taken), if any.
    pub fn pull(&mut self, now: Instant, port: u32, ports: &mut [PortState]) -> Option<u32> {
        let port16 = u16::try_from(port).ok()?;
        // The library's choice for this port alone (as its `poll_transmit` with every other
        // port unavailable).
        let p = ports.get_mut(port as usize)?;
        p.accepting = true;
        let tx = self.sw.poll_transmit_port(now, port16, p);
        p.accepting = false;
        let tx = tx?;
        debug_assert_eq!(u32::from(tx.port), port, "frame pulled for another port");
        Some(tx.handle)
    }

    /// Drops counted by the forwarding logic, by reason name.
    pub fn drops(&self) -> Vec<(&'static str, u64)> {
        let t = self.sw.total_counters();
        vec![
            ("spoofed", u64::from(t.spoofed)),
            ("cross-partition", u64::from(t.cross_partition)),
            ("no-route", u64::from(t.no_route)),
            ("unreachable", u64::from(t.unreachable)),
            ("queue-full", u64::from(t.queue_full)),
            ("flushed", u64::from(t.flushed)),
            ("pin-lost", u64::from(t.pin_lost)),
            ("expired", u64::from(t.expired)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::presets;

    #[test]
    fn forwarder_instances_per_preset() {
        for (name, cap) in [
            ("single-switch-16", 64),
            ("ualink-64x4", 64),
            ("two-tier-384", 64),
            ("nvl72-like", 128),
            ("ualink-1024", 1024),
        ] {
            let pod = presets::load(name).unwrap();
            let f = Fabric::build(&pod);
            let fwd = Forwarder::build(&pod, &f, 0).unwrap();
            assert_eq!(
                (fwd.kind(), fwd.capacity()),
                ("podlink-switch", cap),
                "{name}"
            );
        }
        // The largest switch a pod file describes: 1024 accelerators × 2 ports, 2048 ports.
        use crate::pod::config::Topology;
        let mut pod = presets::load("single-switch-16").unwrap();
        pod.topology = Topology::SingleSwitch {
            accelerators: 1024,
            ports_per_accel: 2,
        };
        let f = Fabric::build(&pod);
        assert_eq!(f.switches[0].ports.len(), 2048);
        let fwd = Forwarder::build(&pod, &f, 0).unwrap();
        assert_eq!(fwd.capacity(), podlink_switch::WIDE_PORTS);
    }

    /// Memory of each instance the simulator uses (printed for `spec-notes/simulator.md`;
    /// the figures only grow with the port capacity).
    #[test]
    fn instance_sizes() {
        let sizes = [
            core::mem::size_of::<Switch<64, u8>>(),
            core::mem::size_of::<Switch<128, u8>>(),
            core::mem::size_of::<Switch<1024, u16>>(),
            core::mem::size_of::<Switch<{ podlink_switch::WIDE_PORTS }, u16>>(),
        ];
        println!("size_of Switch<64,u8> <128,u8> <1024,u16> <4096,u16>: {sizes:?}");
        assert!(sizes.windows(2).all(|w| w[0] < w[1]), "{sizes:?}");
    }

    /// More partitions than the library holds: refused, naming the cause.
    #[test]
    fn too_many_partitions_refused() {
        let mut pod = presets::load("single-switch-16").unwrap();
        pod.partitions = (0..=podlink_switch::MAX_PARTITIONS as u16)
            .map(|k| crate::pod::config::Partition {
                id: k + 1,
                accelerators: k.to_string(),
                weight: 1,
                rate_cap_gbps: None,
            })
            .collect();
        let f = Fabric::build(&pod);
        let e = Forwarder::build(&pod, &f, 0).err().unwrap();
        assert!(e.contains("TooManyPartitions"), "{e}");
    }
}
