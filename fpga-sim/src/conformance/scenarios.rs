//! The scenarios: their pods (small pods derived from the presets), fault plans and runs.
//! The criteria are in [`super::judge`].

use super::judge;
use super::Outcome;
use crate::pod::config::{Partition, Pattern, RouteOverride, Topology, Workload};
use crate::pod::{presets, PodFile};
use crate::sim::fault::{Fault, FaultKind, FaultPlan, PortRef};
use crate::sim::results::{run, Report};
use crate::sim::{Options, SimError};
use crate::workload::{ATOMIC_COUNTER_ADDR, WINDOW_BYTES};

/// Injection time of a scenario run, ps.
pub const DURATION_PS: u64 = 10_000_000;
/// One microsecond, ps.
pub const US: u64 = 1_000_000;
/// Bit error rates of the sweep.
pub const BERS: [f64; 4] = [0.0, 1e-7, 1e-6, 4e-6];
/// Where rogue writes land: past every workload window and the atomic counters, a range
/// no legitimate operation touches (so any change there is the rogue's).
pub const ROGUE_ADDR: u64 = ATOMIC_COUNTER_ADDR + WINDOW_BYTES;
/// Rogue writes per injection scenario.
pub const ROGUE_WRITES: u32 = 32;

/// A scenario's pod and run options.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The pod.
    pub pod: PodFile,
    /// The options, with the fault plan.
    pub opts: Options,
}

impl Setup {
    /// Run it.
    ///
    /// # Errors
    /// As [`run`].
    pub fn run(&self) -> Result<Report, SimError> {
        run(&self.pod, &self.opts, |_, _| {})
    }
}

fn workload(pattern: Pattern, load: f64) -> Workload {
    Workload {
        pattern,
        partition: None,
        message_bytes: 64,
        offered_load: load,
        read: 0.5,
        write: 0.5,
        atomic: 0.0,
        target: None,
        trace: None,
        vc: 0,
        sources: None,
    }
}

/// A preset shrunk to `topology`, with a 10 µs request timeout and one workload: uniform
/// 64 B reads and writes at 10 % of line rate.
fn derive(preset: &str, name: &str, topology: Topology) -> PodFile {
    let mut pod = presets::load(preset).unwrap_or_else(|e| unreachable!("preset: {e}"));
    pod.name = format!("conformance {name} (from {preset})");
    pod.topology = topology;
    pod.accelerator.timeout_us = 10.0;
    pod.workloads = vec![workload(Pattern::Uniform, 0.1)];
    pod
}

/// 8 accelerators × 4 planes (from ualink-64x4).
pub fn planes_pod(name: &str) -> PodFile {
    derive(
        "ualink-64x4",
        name,
        Topology::MultiPlane {
            accelerators: 8,
            planes: 4,
            ports_per_plane: 1,
        },
    )
}

/// `n` accelerators with `ports` ports each on one switch (from single-switch-16).
pub fn single_pod(name: &str, n: u32, ports: u32) -> PodFile {
    derive(
        "single-switch-16",
        name,
        Topology::SingleSwitch {
            accelerators: n,
            ports_per_accel: ports,
        },
    )
}

fn opts(seed: u64, plan: FaultPlan) -> Options {
    Options {
        seed,
        duration_ps: DURATION_PS,
        warmup_ps: US,
        faults: plan,
        ..Options::default()
    }
}

fn plan(faults: Vec<Fault>) -> FaultPlan {
    FaultPlan {
        faults,
        record_ops: true,
        ..FaultPlan::default()
    }
}

fn at(us: f64, what: FaultKind) -> Fault {
    Fault {
        at_ps: (us * US as f64) as u64,
        what,
    }
}

fn outcome(name: &str, r: Result<Outcome, SimError>) -> Outcome {
    r.unwrap_or_else(|e| judge::not_run(name, &e))
}

// ---- bit-error sweep -------------------------------------------------------------------

/// Request timeout of the sweep, µs: well past the link layer's 10.24 ms ack timeout, which is
/// what recovers a DL flit corrupted when nothing follows it on the link (the receiver sees
/// no later flit that would reveal the gap), even when the replay is corrupted again.
pub const SWEEP_TIMEOUT_US: f64 = 100_000.0;

/// The sweep's pod at one bit error rate.
pub fn bit_error_setup(seed: u64, ber: f64) -> Setup {
    let mut pod = planes_pod("bit-error-sweep");
    pod.link.ber = ber;
    pod.accelerator.timeout_us = SWEEP_TIMEOUT_US;
    let mut o = opts(seed, plan(Vec::new()));
    o.drain_ps = 2 * (SWEEP_TIMEOUT_US * 1e6) as u64;
    Setup { pod, opts: o }
}

/// Run the sweep.
pub fn bit_error_sweep(seed: u64) -> Outcome {
    let r = (|| {
        let mut points = Vec::new();
        for ber in BERS {
            points.push((ber, bit_error_setup(seed, ber).run()?.summary));
        }
        Ok(judge::bit_error_sweep(&points))
    })();
    outcome("bit-error-sweep", r)
}

// ---- link flap -------------------------------------------------------------------------

/// The flapped link: plane 0's port to accelerator 3.
pub const FLAP_LINK: PortRef = PortRef { switch: 0, port: 3 };
/// Down at 3 µs, up at 5 µs (from the start of injection).
pub const FLAP_DOWN_US: f64 = 3.0;
/// Up again.
pub const FLAP_UP_US: f64 = 5.0;

/// Link-flap setup.
pub fn link_flap_setup(seed: u64) -> Setup {
    Setup {
        pod: planes_pod("link-flap"),
        opts: opts(
            seed,
            plan(vec![
                at(FLAP_DOWN_US, FaultKind::LinkDown(FLAP_LINK)),
                at(FLAP_UP_US, FaultKind::LinkUp(FLAP_LINK)),
            ]),
        ),
    }
}

/// Run the link flap.
pub fn link_flap(seed: u64) -> Outcome {
    let s = link_flap_setup(seed);
    outcome(
        "link-flap",
        s.run().map(|r| judge::link_flap(&r.summary, 3, 0)),
    )
}

// ---- port and plane failure ------------------------------------------------------------

/// The failed port: plane 0's port to accelerator 5.
pub const FAILED_PORT: PortRef = PortRef { switch: 0, port: 5 };
/// When ports and planes fail (from the start of injection), µs.
pub const FAIL_US: f64 = 3.0;

/// Port-failure setup.
pub fn port_failure_setup(seed: u64) -> Setup {
    Setup {
        pod: planes_pod("port-failure"),
        opts: opts(
            seed,
            plan(vec![at(FAIL_US, FaultKind::PortFail(FAILED_PORT))]),
        ),
    }
}

/// Run the port failure.
pub fn port_failure(seed: u64) -> Outcome {
    let s = port_failure_setup(seed);
    outcome(
        "port-failure",
        s.run()
            .map(|r| judge::port_failure(&r.summary, FAILED_PORT, 5, 0)),
    )
}

/// The failed plane.
pub const FAILED_PLANE: u32 = 1;

/// Plane-failure setup.
pub fn plane_failure_setup(seed: u64) -> Setup {
    Setup {
        pod: planes_pod("plane-failure"),
        opts: opts(
            seed,
            plan(vec![at(
                FAIL_US,
                FaultKind::PlaneFail {
                    switch: FAILED_PLANE,
                },
            )]),
        ),
    }
}

/// Run the plane failure.
pub fn plane_failure(seed: u64) -> Outcome {
    let s = plane_failure_setup(seed);
    outcome(
        "plane-failure",
        s.run()
            .map(|r| judge::plane_failure(&r.summary, FAILED_PLANE, 4)),
    )
}

// ---- degraded drain --------------------------------------------------------------------

/// The degraded link: leaf 0's first uplink to spine 0 (two leaves of four accelerators, two
/// spines, two links from each leaf to each spine).
pub const DEGRADED: PortRef = PortRef { switch: 0, port: 4 };
/// Leaf 0's other uplinks.
pub const UPLINKS: [u32; 3] = [5, 6, 7];
/// Transceiver errors (corrected by FEC) per health window once it degrades: past the
/// health policy's warning threshold (16), below its alarm (4096).
pub const DEGRADED_ERRORS: u32 = 100;
/// Mark (start of the fair-share window), bit errors start, drained window starts, the link
/// fails: µs from the start of injection.
pub const DEGRADE_TIMES_US: [f64; 4] = [0.0, 2.0, 5.0, 8.0];
/// The switches' health window in the scenario, ps.
pub const HEALTH_WINDOW_PS: u64 = US;

/// Degraded-drain setup: the two-tier pod above; with `degrade` false the link fails at
/// the same time without degrading first (the baseline).
pub fn degraded_drain_setup(seed: u64, degrade: bool) -> Setup {
    let pod = derive(
        "two-tier-384",
        "degraded-drain",
        Topology::LeafSpine {
            leaves: 2,
            spines: 2,
            accels_per_leaf: 4,
            uplinks_per_spine: 2,
        },
    );
    let [t0, t1, t2, t3] = DEGRADE_TIMES_US;
    let mark = FaultKind::Mark {
        switch: DEGRADED.switch,
    };
    let mut p = plan(vec![
        at(t0, mark),
        at(
            t1,
            FaultKind::ModuleErrors {
                link: DEGRADED,
                per_window: DEGRADED_ERRORS,
            },
        ),
        at(t2, mark),
        at(t3, FaultKind::PortFail(DEGRADED)),
    ]);
    p.health_window_ps = Some(HEALTH_WINDOW_PS);
    if !degrade {
        p.faults[1].what = mark;
    }
    Setup {
        pod,
        opts: opts(seed, p),
    }
}

/// Run the degraded drain, and the baseline.
pub fn degraded_drain(seed: u64) -> Outcome {
    let r = (|| {
        let a = degraded_drain_setup(seed, true).run()?;
        let b = degraded_drain_setup(seed, false).run()?;
        Ok(judge::degraded_drain(
            &a.summary, &b.summary, DEGRADED, &UPLINKS,
        ))
    })();
    outcome("degraded-drain", r)
}

// ---- VC starvation ---------------------------------------------------------------------

/// The receiver that withholds credits.
pub const STARVED_ACCEL: u32 = 7;
/// The starved VC.
pub const STARVED_VC: u8 = 1;
/// Withheld from 2 µs to 7 µs.
pub const WITHHOLD_US: (f64, f64) = (2.0, 7.0);

/// VC-starvation setup: accelerators 0-2 send VC 1 requests to 7 (incast-free: 30 % of its
/// port); 3-7 send uniform VC 0 traffic to everyone.
pub fn vc_starvation_setup(seed: u64) -> Setup {
    let mut pod = single_pod("vc-starvation", 8, 1);
    let mut vc1 = workload(Pattern::Hotspot, 0.1);
    vc1.target = Some(STARVED_ACCEL);
    vc1.vc = STARVED_VC;
    vc1.sources = Some("0-2".into());
    let mut vc0 = workload(Pattern::Uniform, 0.1);
    vc0.sources = Some("3-7".into());
    pod.workloads = vec![vc0, vc1];
    let (a, b) = WITHHOLD_US;
    let kind = |keep| {
        if keep {
            FaultKind::Withhold {
                accel: STARVED_ACCEL,
                vc: STARVED_VC,
            }
        } else {
            FaultKind::Release {
                accel: STARVED_ACCEL,
                vc: STARVED_VC,
            }
        }
    };
    Setup {
        pod,
        opts: opts(seed, plan(vec![at(a, kind(true)), at(b, kind(false))])),
    }
}

/// Run the VC starvation.
pub fn vc_starvation(seed: u64) -> Outcome {
    let s = vc_starvation_setup(seed);
    outcome(
        "vc-starvation",
        s.run().map(|r| {
            judge::vc_starvation(
                &r.summary,
                STARVED_ACCEL,
                STARVED_VC,
                s.pod.budgets.read_rtt_ns,
            )
        }),
    )
}

// ---- incast isolation ------------------------------------------------------------------

/// Incast-isolation setup: 16 accelerators on one switch in two partitions; partition 1 runs
/// an incast on accelerator 0 at 20 % of line rate per source (1.4 × its port), partition 2
/// uniform traffic at 10 %. With `incast` false, partition 2 alone (the baseline).
pub fn incast_setup(seed: u64, incast: bool) -> Setup {
    let mut pod = single_pod("incast-isolation", 16, 1);
    pod.partitions = vec![
        Partition {
            id: 1,
            accelerators: "0-7".into(),
            weight: 1,
            rate_cap_gbps: None,
        },
        Partition {
            id: 2,
            accelerators: "8-15".into(),
            weight: 1,
            rate_cap_gbps: None,
        },
    ];
    let mut hot = workload(Pattern::Hotspot, 0.2);
    hot.partition = Some(1);
    hot.target = Some(0);
    let mut victim = workload(Pattern::Uniform, 0.1);
    victim.partition = Some(2);
    pod.workloads = if incast {
        vec![hot, victim]
    } else {
        vec![victim]
    };
    Setup {
        pod,
        opts: opts(seed, FaultPlan::default()),
    }
}

/// Run the incast, and the baseline.
pub fn incast_isolation(seed: u64) -> Outcome {
    let with = incast_setup(seed, true);
    let r = (|| {
        let a = with.run()?;
        let b = incast_setup(seed, false).run()?;
        Ok(judge::incast_isolation(
            &a.summary,
            &b.summary,
            with.pod.budgets.read_rtt_ns,
        ))
    })();
    outcome("incast-isolation", r)
}

// ---- spoofed source and cross-partition ------------------------------------------------

fn inject(from: u32, claim: u32, dst: u32) -> FaultKind {
    FaultKind::Inject {
        from,
        port: 0,
        claim,
        dst,
        addr: ROGUE_ADDR,
        count: ROGUE_WRITES,
        gap_ps: 100_000,
    }
}

/// Spoofed-source setup: accelerator 1 sends writes claiming to be 2, to 3.
pub fn spoofed_source_setup(seed: u64, claim: u32) -> Setup {
    Setup {
        pod: single_pod("spoofed-source", 8, 1),
        opts: opts(seed, plan(vec![at(2.0, inject(1, claim, 3))])),
    }
}

/// Run the spoofed source.
pub fn spoofed_source(seed: u64) -> Outcome {
    let s = spoofed_source_setup(seed, 2);
    outcome(
        "spoofed-source",
        s.run()
            .map(|r| judge::rogue(&r.summary, "spoofed-source", "spoofed")),
    )
}

/// Cross-partition setup: partitions 1 (0-3) and 2 (4-7), each with uniform traffic;
/// accelerator 1 sends writes (with its own ID) to `dst`.
pub fn cross_partition_setup(seed: u64, dst: u32) -> Setup {
    let mut pod = single_pod("cross-partition", 8, 1);
    pod.partitions = vec![
        Partition {
            id: 1,
            accelerators: "0-3".into(),
            weight: 1,
            rate_cap_gbps: None,
        },
        Partition {
            id: 2,
            accelerators: "4-7".into(),
            weight: 1,
            rate_cap_gbps: None,
        },
    ];
    let mut a = workload(Pattern::Uniform, 0.1);
    a.partition = Some(1);
    let mut b = workload(Pattern::Uniform, 0.1);
    b.partition = Some(2);
    pod.workloads = vec![a, b];
    Setup {
        pod,
        opts: opts(seed, plan(vec![at(2.0, inject(1, 1, dst))])),
    }
}

/// Run the cross-partition request.
pub fn cross_partition(seed: u64) -> Outcome {
    let s = cross_partition_setup(seed, 5);
    outcome(
        "cross-partition",
        s.run()
            .map(|r| judge::rogue(&r.summary, "cross-partition", "cross-partition")),
    )
}

// ---- route tables refused before the run -----------------------------------------------

/// The planes pod with plane 0's route to accelerator 5 removed (`routes.0`).
pub fn missing_route_setup(seed: u64) -> Setup {
    let mut pod = planes_pod("missing-route");
    pod.routes = vec![RouteOverride {
        switch: 0,
        dest: "5".into(),
        ports: vec![],
    }];
    Setup {
        pod,
        opts: opts(seed, FaultPlan::default()),
    }
}

/// Run (try to) the missing route.
pub fn missing_route(seed: u64) -> Outcome {
    let s = missing_route_setup(seed);
    judge::refused(&s.run(), "missing-route", "routes.0", |p| {
        matches!(
            p,
            crate::pod::topology::RouteProblem::Missing { switch: 0, dest: 5 }
        )
    })
}

/// Two leaves of 4 accelerators under two spines (from two-tier-384); spine 0 (switch 2)
/// sends accelerator 4 (under leaf 1) back down to leaf 0 (`routes.0`), which sends it up
/// again: a loop.
pub fn route_loop_setup(seed: u64) -> Setup {
    let mut pod = derive(
        "two-tier-384",
        "route-loop",
        Topology::LeafSpine {
            leaves: 2,
            spines: 2,
            accels_per_leaf: 4,
            uplinks_per_spine: 1,
        },
    );
    pod.routes = vec![RouteOverride {
        switch: 2,
        dest: "4".into(),
        ports: vec![0],
    }];
    Setup {
        pod,
        opts: opts(seed, FaultPlan::default()),
    }
}

/// Run (try to) the loop.
pub fn route_loop(seed: u64) -> Outcome {
    let s = route_loop_setup(seed);
    judge::refused(&s.run(), "route-loop", "routes.0", |p| {
        matches!(p, crate::pod::topology::RouteProblem::Loop { dest: 4, .. })
    })
}
