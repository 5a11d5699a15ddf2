//! The per-hop breakdown of one traced operation (`spec-notes/simulator.md#breakdown`).
//!
//! While a trace is on, the model marks every point where the operation's frames change
//! hands: issued, submitted to the requester, pulled into a TL packer (the start of the DL
//! flit that carries it), delivered by a receiver, out of a switch pipeline, handled by the
//! completer, done. Consecutive marks telescope, so the stages always sum exactly to the
//! simulated round trip. A link stage is split into the parts the model adds up for it
//! (PHY, serialisation, cable, FEC, PHY, endpoint), a switch stage into its pipeline stages;
//! whatever a segment took beyond those parts is reported as a wait (zero at zero load).

use super::{Options, Owner, Sim};
use crate::pod::timing::{ns, LinkTiming, Stage, SwitchTiming};
use crate::pod::PodFile;
use crate::report::OpClass;
use crate::workload::{window_base, OpSpec};
use podlink_protocol::time::Duration;

/// A point on the traced operation's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// Issued by the workload.
    Issue,
    /// Handed to the requester (after the endpoint's transmit latency).
    Submit,
    /// Pulled into end `e`'s TL packer (its DL flit starts now).
    Pull(u32),
    /// Delivered by end `r`'s receiver.
    Deliver(u32),
    /// Out of the pipeline of switch ingress end `r`.
    PipeOut(u32),
    /// Handled by the completer at end `r`.
    Handle(u32),
    /// Completed.
    Done,
}

/// The marks of a traced operation.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// (time in ps, mark), in order.
    pub marks: Vec<(u64, Mark)>,
}

impl Trace {
    /// Record a mark.
    pub fn mark(&mut self, t: u64, m: Mark) {
        self.marks.push((t, m));
    }
}

/// Whether a stage is a wait (zero at zero load) rather than a modelled latency.
pub fn is_wait(s: &Stage) -> bool {
    s.name.ends_with(" wait")
}

struct Builder<'a> {
    l: LinkTiming,
    s: SwitchTiming,
    endpoint: Duration,
    completer: Duration,
    out: Vec<Stage>,
    sim: &'a Sim,
}

impl Builder<'_> {
    fn push(&mut self, name: String, time: Duration) {
        self.out.push(Stage { name, time });
    }

    /// Split `d` into `parts` and a trailing wait named `wait`.
    fn split(&mut self, d: u64, parts: Vec<(String, Duration)>, wait: String) {
        let sum: u64 = parts.iter().map(|(_, t)| t.as_ps()).sum();
        let mut left = d;
        for (n, t) in parts {
            let t = t.as_ps().min(left);
            left -= t;
            self.push(n, Duration::from_ps(t));
        }
        let _ = sum;
        self.push(wait, Duration::from_ps(left));
    }

    fn link(&mut self, dir: &str, k: u32, d: u64, rx_accel: Option<&str>) {
        let l = self.l;
        let mut parts = vec![
            (format!("{dir}: link {k} phy tx"), l.phy_tx),
            (format!("{dir}: link {k} serialisation"), l.serialisation),
            (format!("{dir}: link {k} cable"), l.cable),
            (format!("{dir}: link {k} fec"), l.fec),
            (format!("{dir}: link {k} phy rx"), l.phy_rx),
        ];
        if let Some(who) = rx_accel {
            parts.push((format!("{dir}: {who} endpoint rx"), self.endpoint));
        }
        self.split(d, parts, format!("{dir}: link {k} wait"));
    }

    fn switch(&mut self, dir: &str, k: u32, d: u64) {
        let s = self.s;
        let parts = vec![
            (
                format!("{dir}: switch {k} store-and-forward"),
                s.store_and_forward,
            ),
            (format!("{dir}: switch {k} parse"), s.parse),
            (format!("{dir}: switch {k} route"), s.route),
            (format!("{dir}: switch {k} arbitration"), s.arb),
            (format!("{dir}: switch {k} crossbar"), s.xbar),
            (format!("{dir}: switch {k} egress"), s.egress),
        ];
        self.split(d, parts, format!("{dir}: switch {k} pipeline wait"));
    }
}

impl Sim {
    /// The breakdown of the traced operation, or `None` when its marks are incomplete.
    pub fn breakdown(&self) -> Option<Vec<Stage>> {
        let marks = &self.trace.as_ref()?.marks;
        let mut b = Builder {
            l: LinkTiming::new(&self.pod.link),
            s: SwitchTiming::new(&self.pod.switch),
            endpoint: ns(self.pod.accelerator.endpoint_ns),
            completer: ns(self.pod.accelerator.completer_ns),
            out: Vec::new(),
            sim: self,
        };
        let (t0, first) = *marks.first()?;
        if first != Mark::Issue {
            return None;
        }
        let mut prev = t0;
        let mut dir = "request";
        let mut k = 0u32;
        let mut done = false;
        for &(t, m) in marks.iter().skip(1) {
            let d = t.checked_sub(prev)?;
            match m {
                Mark::Submit => b.push(
                    "request: requester endpoint tx".into(),
                    Duration::from_ps(d),
                ),
                Mark::Pull(e) => {
                    let what = match (b.sim.owner.get(e as usize)?, dir) {
                        (Owner::Switch { .. }, _) => format!("{dir}: switch {} egress wait", k - 1),
                        (Owner::Accel { .. }, "request") => "request: requester queue wait".into(),
                        _ => "response: completer queue wait".into(),
                    };
                    b.push(what, Duration::from_ps(d));
                }
                Mark::Deliver(r) => {
                    let rx_accel = match b.sim.owner.get(r as usize)? {
                        Owner::Accel { .. } if dir == "request" => Some("completer"),
                        Owner::Accel { .. } => Some("requester"),
                        Owner::Switch { .. } => None,
                    };
                    b.link(dir, k, d, rx_accel);
                    k += 1;
                }
                Mark::PipeOut(_) => b.switch(dir, k - 1, d),
                Mark::Handle(_) => {
                    let parts = vec![
                        ("completer memory access".to_string(), b.completer),
                        ("response: completer endpoint tx".to_string(), b.endpoint),
                    ];
                    b.split(d, parts, "completer wait".into());
                    dir = "response";
                    k = 0;
                }
                Mark::Done => {
                    b.push(
                        "response: requester completion wait".into(),
                        Duration::from_ps(d),
                    );
                    done = true;
                    break;
                }
                Mark::Issue => return None,
            }
            prev = t;
        }
        done.then_some(b.out)
    }
}

/// When the traced read is issued: after link bring-up and the DL control exchange.
pub const TRACE_AT: u64 = 5_000_000;

impl Sim {
    /// Issue one 64 B read between the pod's probe pair (`Fabric::probe_pair`: from
    /// accelerator 0 to its farthest peer) at `t0` on an idle pod and run until it
    /// completes; returns the breakdown, the simulated round trip (ps) and the switch hops
    /// each way, or `None` if the read did not complete within 1 ms or failed (a fault, a
    /// timeout, an unreachable destination: there is no round trip to break down). Tracing
    /// stops when it returns.
    pub fn trace_read(&mut self, t0: u64) -> Option<(Vec<Stage>, u64, u32)> {
        // No accelerator has a peer: accelerator 0 reads from itself, as the probe always
        // did when it found no destination.
        let (src, dst, hops) = self.fabric().probe_pair().unwrap_or((0, 0, 1));
        self.trace = Some(Trace::default());
        self.run_to(t0);
        let op = self.issue(
            OpSpec {
                src,
                dst,
                class: OpClass::Read,
                bytes: 64,
                addr: window_base(src),
                vc: 0,
            },
            t0,
        );
        let limit = t0 + 1_000_000_000;
        while !matches!(
            self.trace.as_ref().and_then(|t| t.marks.last()),
            Some((_, Mark::Done))
        ) {
            match self.next_event() {
                Some(t) if t <= limit => {
                    self.run_to(t);
                }
                _ => break,
            }
        }
        let done = matches!(
            self.trace.as_ref().and_then(|t| t.marks.last()),
            Some((_, Mark::Done))
        );
        // Nothing else runs on the idle pod: the operation's slot still holds its outcome.
        let ok = done && self.accels.ops.get(op as usize).is_some_and(|o| !o.failed);
        let stages = self.breakdown();
        let rtt = self
            .trace
            .as_ref()
            .and_then(|t| t.marks.last())
            .map(|&(t, _)| t - t0);
        self.trace = None;
        if !ok {
            return None;
        }
        Some((stages?, rtt?, hops))
    }
}

/// Simulate one 64 B read between the pod's probe pair (`Fabric::probe_pair`) on an idle
/// pod; returns the breakdown, the simulated round trip (ps) and the switch hops each way.
pub fn zero_load_read(pod: &PodFile) -> Option<(Vec<Stage>, u64, u32)> {
    let opts = Options {
        traffic: false,
        ..Options::default()
    };
    Sim::new(pod, &opts).ok()?.trace_read(TRACE_AT)
}
