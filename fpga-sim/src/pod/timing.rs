//! Analytic timing of links, switch pipelines and endpoints (`spec-notes/simulator.md#timing`).
//!
//! All times are integer picoseconds so that the event-driven model and this analytic sum agree
//! exactly. Each DL flit (640 B) travels in exactly one RS(544,514) codeword of 680 B \[pub\].

use super::config::{AccelParams, LinkParams, PodFile, SwitchParams};
use podlink_protocol::time::Duration;

/// Bytes on the wire per DL flit: one RS(544,514) codeword of 10-bit symbols.
pub const CODEWORD_BYTES: u64 = 680;
/// Bits per codeword.
pub const CODEWORD_BITS: u64 = CODEWORD_BYTES * 8;

/// Nanoseconds (float) to whole picoseconds, rounded to nearest.
pub fn ns(v: f64) -> Duration {
    Duration::from_ps((v * 1000.0).round().max(0.0) as u64)
}

/// Per-link timing derived from [`LinkParams`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkTiming {
    /// Serialisation of one codeword (one DL flit) at the port's rate.
    pub serialisation: Duration,
    /// Transmit PCS/PMA.
    pub phy_tx: Duration,
    /// Cable propagation.
    pub cable: Duration,
    /// FEC accumulation beyond one codeword (interleave − 1 codewords) plus decoding.
    pub fec: Duration,
    /// Receive PCS/PMA.
    pub phy_rx: Duration,
}

impl LinkTiming {
    /// From the pod file's link parameters.
    pub fn new(p: &LinkParams) -> Self {
        let gbps = p.lane_gbps * f64::from(p.lanes);
        // ps = bits / (Gb/s) * 1000
        let ser_ps = (CODEWORD_BITS as f64 * 1000.0 / gbps).round() as u64;
        let serialisation = Duration::from_ps(ser_ps);
        LinkTiming {
            serialisation,
            phy_tx: ns(p.phy_tx_ns),
            cable: ns(p.cable_m * p.ns_per_m),
            fec: Duration::from_ps(
                ser_ps.saturating_mul(u64::from(p.fec_interleave.saturating_sub(1))),
            )
            .saturating_add(ns(p.fec_decode_ns)),
            phy_rx: ns(p.phy_rx_ns),
        }
    }

    /// From the start of transmission of a DL flit to its availability, decoded, at the far end.
    pub fn flit_latency(&self) -> Duration {
        self.phy_tx
            .saturating_add(self.serialisation)
            .saturating_add(self.cable)
            .saturating_add(self.fec)
            .saturating_add(self.phy_rx)
    }

    /// Port rate in bytes per picosecond × 1e-3 (i.e. GB/s) — for utilisation figures.
    pub fn flits_per_us(&self) -> f64 {
        1e6 / self.serialisation.as_ps().max(1) as f64
    }
}

/// Switch pipeline timing derived from [`SwitchParams`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchTiming {
    /// One core clock cycle.
    pub cycle: Duration,
    /// Parse.
    pub parse: Duration,
    /// Route lookup.
    pub route: Duration,
    /// Arbitration.
    pub arb: Duration,
    /// Crossbar.
    pub xbar: Duration,
    /// Egress.
    pub egress: Duration,
    /// Extra wait for the whole TL flit when store-and-forward (0 when cut-through).
    pub store_and_forward: Duration,
}

impl SwitchTiming {
    /// From the pod file's switch parameters.
    pub fn new(p: &SwitchParams) -> Self {
        let cycle_ps = (1e6 / p.clock_mhz).round() as u64;
        let c = |n: u32| Duration::from_ps(cycle_ps.saturating_mul(u64::from(n)));
        // A 64 B TL flit crosses the datapath in ceil(64 / width) cycles; cut-through forwards
        // after the first (header) beat.
        let beats = 64u32.div_ceil(p.datapath_bytes.max(1));
        SwitchTiming {
            cycle: Duration::from_ps(cycle_ps),
            parse: c(p.parse_cycles),
            route: c(p.route_cycles),
            arb: c(p.arb_cycles),
            xbar: c(p.xbar_cycles),
            egress: c(p.egress_cycles),
            store_and_forward: if p.cut_through {
                Duration::ZERO
            } else {
                c(beats.saturating_sub(1))
            },
        }
    }

    /// The pipeline from a decoded TL flit at ingress to its hand-off to the egress DL.
    pub fn pipeline(&self) -> Duration {
        self.store_and_forward
            .saturating_add(self.parse)
            .saturating_add(self.route)
            .saturating_add(self.arb)
            .saturating_add(self.xbar)
            .saturating_add(self.egress)
    }
}

/// One named stage of a path, for breakdowns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    /// Where (e.g. "req link 1", "switch 0 route").
    pub name: String,
    /// How long.
    pub time: Duration,
}

/// The zero-load breakdown of a 64 B remote read across `switch_hops` switches each way.
pub fn read_breakdown(pod: &PodFile, switch_hops: u32) -> Vec<Stage> {
    let l = LinkTiming::new(&pod.link);
    let s = SwitchTiming::new(&pod.switch);
    let a: &AccelParams = &pod.accelerator;
    let mut out = Vec::new();
    let mut push = |name: String, time: Duration| out.push(Stage { name, time });
    for (dir, first) in [("request", "requester"), ("response", "completer")] {
        push(format!("{dir}: {first} endpoint tx"), ns(a.endpoint_ns));
        for hop in 0..=switch_hops {
            push(format!("{dir}: link {hop} phy tx"), l.phy_tx);
            push(format!("{dir}: link {hop} serialisation"), l.serialisation);
            push(format!("{dir}: link {hop} cable"), l.cable);
            push(format!("{dir}: link {hop} fec"), l.fec);
            push(format!("{dir}: link {hop} phy rx"), l.phy_rx);
            if hop < switch_hops {
                push(
                    format!("{dir}: switch {hop} store-and-forward"),
                    s.store_and_forward,
                );
                push(format!("{dir}: switch {hop} parse"), s.parse);
                push(format!("{dir}: switch {hop} route"), s.route);
                push(format!("{dir}: switch {hop} arbitration"), s.arb);
                push(format!("{dir}: switch {hop} crossbar"), s.xbar);
                push(format!("{dir}: switch {hop} egress"), s.egress);
            }
        }
        let last = if dir == "request" {
            "completer"
        } else {
            "requester"
        };
        push(format!("{dir}: {last} endpoint rx"), ns(a.endpoint_ns));
        if dir == "request" {
            push("completer memory access".to_string(), ns(a.completer_ns));
        }
    }
    out
}

/// Zero-load switch port-to-port latency: decoded-flit availability excluded, i.e. from the
/// first bit at the ingress pins to the first bit at the egress pins.
pub fn switch_port_to_port(pod: &PodFile) -> Duration {
    let l = LinkTiming::new(&pod.link);
    let s = SwitchTiming::new(&pod.switch);
    l.serialisation
        .saturating_add(l.fec)
        .saturating_add(l.phy_rx)
        .saturating_add(s.pipeline())
        .saturating_add(l.phy_tx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::presets;

    #[test]
    fn x4_codeword_is_6_4_ns() {
        let t = LinkTiming::new(&LinkParams::default());
        assert_eq!(t.serialisation.as_ps(), 6_400);
        let x1 = LinkTiming::new(&LinkParams {
            lanes: 1,
            ..LinkParams::default()
        });
        assert_eq!(x1.serialisation.as_ps(), 25_600);
        let i4 = LinkTiming::new(&LinkParams {
            fec_interleave: 4,
            ..LinkParams::default()
        });
        assert_eq!(i4.fec.as_ps(), 3 * 6_400 + 10_000);
    }

    #[test]
    fn default_budgets_hold_analytically() {
        let pod = presets::load(presets::DEFAULT).unwrap();
        let rtt: u64 = read_breakdown(&pod, 1).iter().map(|s| s.time.as_ps()).sum();
        assert!(rtt < 1_000_000, "rtt {rtt} ps");
        assert!(switch_port_to_port(&pod).as_ps() <= 100_000);
    }
}
