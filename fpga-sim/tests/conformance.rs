//! Conformance scenarios: every scenario passes on its own pod, and the verdicts fail when
//! the property is broken (a mechanism disabled, or results doctored), so that a pass means
//! something. The command line: `--list`, `--json`, unknown names.

use podlink_sim::conformance::{judge, scenarios, select, Outcome, SCENARIOS};
use podlink_sim::sim::fault::{Fault, FaultKind};
use podlink_sim::sim::results::Summary;
use std::process::Command;

fn assert_pass(o: &Outcome) {
    assert!(o.pass(), "{}: {}\n{:#?}", o.scenario, o.reason, o.checks);
}

fn assert_fail(o: &Outcome, why: &str) {
    assert!(
        !o.pass(),
        "{} passed though broken: {:#?}",
        o.scenario,
        o.checks
    );
    assert!(
        o.reason.contains(why),
        "{}: reason `{}` does not mention `{why}`",
        o.scenario,
        o.reason
    );
}

// ---- every scenario passes ---------------------------------------------------------------

#[test]
fn bit_error_sweep_passes() {
    assert_pass(&scenarios::bit_error_sweep(1));
}

#[test]
fn link_flap_passes_and_fails_when_doctored() {
    let r = scenarios::link_flap_setup(1).run().unwrap();
    assert_pass(&judge::link_flap(&r.summary, 3, 0));
    let mut s = r.summary.clone();
    s.integrity.duplicates = 2;
    assert_fail(&judge::link_flap(&s, 3, 0), "duplicated 2");
    let mut s = r.summary.clone();
    for o in &mut s.faults.as_mut().unwrap().ops {
        o.ok = o.ok && !(o.src == 3 && o.ports & 1 != 0);
    }
    assert_fail(&judge::link_flap(&s, 3, 0), "completed");
}

#[test]
fn port_failure_passes_deterministically() {
    let a = scenarios::port_failure(1);
    assert_pass(&a);
    assert_eq!(a, scenarios::port_failure(1));
    assert_ne!(a.figures, scenarios::port_failure(2).figures);
}

#[test]
fn plane_failure_passes() {
    assert_pass(&scenarios::plane_failure(1));
}

#[test]
fn degraded_drain_passes() {
    assert_pass(&scenarios::degraded_drain(1));
}

#[test]
fn vc_starvation_passes() {
    assert_pass(&scenarios::vc_starvation(1));
}

#[test]
fn incast_isolation_passes_and_fails_over_budget() {
    let a = scenarios::incast_setup(1, true).run().unwrap().summary;
    let b = scenarios::incast_setup(1, false).run().unwrap().summary;
    let o = judge::incast_isolation(&a, &b, 1000.0);
    assert_pass(&o);
    // A tighter budget than the victim's p99.
    let p99 = a.partitions[1].latency.p99_ns;
    assert_fail(&judge::incast_isolation(&a, &b, p99 - 1.0), "within the");
}

#[test]
fn rogue_frames_are_dropped_and_refused_pods_refused() {
    for o in [
        scenarios::spoofed_source(1),
        scenarios::cross_partition(1),
        scenarios::missing_route(1),
        scenarios::route_loop(1),
    ] {
        assert_pass(&o);
    }
}

#[test]
fn every_scenario_pod_is_a_valid_pod() {
    let mut setups = vec![
        scenarios::link_flap_setup(1),
        scenarios::port_failure_setup(1),
        scenarios::plane_failure_setup(1),
        scenarios::degraded_drain_setup(1, true),
        scenarios::vc_starvation_setup(1),
        scenarios::incast_setup(1, true),
        scenarios::spoofed_source_setup(1, 2),
        scenarios::cross_partition_setup(1, 5),
        scenarios::missing_route_setup(1),
        scenarios::route_loop_setup(1),
    ];
    setups.extend(
        scenarios::BERS
            .iter()
            .map(|&b| scenarios::bit_error_setup(1, b)),
    );
    for s in setups {
        s.pod.check(&s.pod.name).unwrap_or_else(|e| panic!("{e}"));
    }
    let mut bad = scenarios::vc_starvation_setup(1).pod;
    bad.workloads[1].vc = 9;
    let e = bad.check("x").unwrap_err();
    assert_eq!(e.field.as_deref(), Some("workloads.1.vc"), "{e}");
}

#[test]
fn every_scenario_is_listed_once_and_selectable() {
    let names: Vec<String> = SCENARIOS.iter().map(|s| s.name.to_string()).collect();
    for want in [
        "bit-error-sweep",
        "link-flap",
        "port-failure",
        "plane-failure",
        "degraded-drain",
        "vc-starvation",
        "incast-isolation",
        "spoofed-source",
        "cross-partition",
        "missing-route",
        "route-loop",
    ] {
        assert_eq!(names.iter().filter(|n| *n == want).count(), 1, "{want}");
    }
    assert_eq!(select(&[]).unwrap().len(), SCENARIOS.len());
    let e = select(&["link-flap".into(), "nope".into()]).err().unwrap();
    assert!(e.contains("`nope`") && e.contains("route-loop"), "{e}");
}

// ---- broken mechanisms fail ----------------------------------------------------------------

#[test]
fn flap_without_holdoff_fails() {
    // The switch is told at once and flushes the port's queues: operations fail.
    let mut s = scenarios::link_flap_setup(1);
    s.opts.faults.holdoff_ps = 0;
    let r = s.run().unwrap();
    let o = judge::link_flap(&r.summary, 3, 0);
    assert_fail(&o, "failed");
}

#[test]
fn port_failure_without_notification_fails() {
    // Endpoints are never told: they keep sending to the failed port, and their operations
    // fail long after the failure.
    let mut s = scenarios::port_failure_setup(1);
    s.opts.faults.notify_ps = 1_000_000_000_000;
    let r = s.run().unwrap();
    let o = judge::port_failure(&r.summary, scenarios::FAILED_PORT, 5, 0);
    assert_fail(&o, "endpoints were told");
    assert!(
        r.summary.integrity.failed > 100,
        "{:?}",
        r.summary.integrity
    );
}

#[test]
fn plane_failure_judge_needs_every_port_notified() {
    let s = scenarios::plane_failure_setup(1);
    let mut r = s.run().unwrap();
    let f = r.summary.faults.as_mut().unwrap();
    let first = f
        .timeline
        .iter()
        .position(|e| matches!(&e.what, podlink_sim::sim::fault::Happening::Notified { .. }))
        .unwrap();
    f.timeline.remove(first);
    let o = judge::plane_failure(&r.summary, scenarios::FAILED_PLANE, 4);
    assert_fail(&o, "every port of switch 1");
}

#[test]
fn failure_without_degrading_first_fails_the_drain_verdict() {
    // Judged against itself, the undrained failure never reached Degraded, carried its share
    // to the end, and failed as many operations as the baseline.
    let b = scenarios::degraded_drain_setup(1, false).run().unwrap();
    let o = judge::degraded_drain(
        &b.summary,
        &b.summary,
        scenarios::DEGRADED,
        &scenarios::UPLINKS,
    );
    assert_fail(&o, "reached Degraded");
    assert!(o.reason.contains("drained while Degraded"), "{}", o.reason);
    assert!(o.figure("failed").unwrap() > 0.0);
}

#[test]
fn withholding_every_vc_fails_the_starvation_verdict() {
    // The other VC starves too: it stops completing.
    let mut s = scenarios::vc_starvation_setup(1);
    let (a, b) = scenarios::WITHHOLD_US;
    for (t, keep) in [(a, true), (b, false)] {
        let what = if keep {
            FaultKind::Withhold { accel: 7, vc: 0 }
        } else {
            FaultKind::Release { accel: 7, vc: 0 }
        };
        s.opts.faults.faults.push(Fault {
            at_ps: (t * 1e6) as u64,
            what,
        });
    }
    let r = s.run().unwrap();
    let o = judge::vc_starvation(&r.summary, 7, 1, s.pod.budgets.read_rtt_ns);
    assert_fail(&o, "other VCs kept completing");
}

#[test]
fn honest_or_same_partition_writes_are_forwarded_and_fail_the_rogue_verdict() {
    // With its own source ID the write is legitimate: forwarded, it changes memory.
    let r = scenarios::spoofed_source_setup(1, 1).run().unwrap();
    let o = judge::rogue(&r.summary, "spoofed-source", "spoofed");
    assert_fail(&o, "memory untouched");
    assert!(o.figure("lines_changed").unwrap() > 0.0);
    // Within its own partition, likewise.
    let r = scenarios::cross_partition_setup(1, 2).run().unwrap();
    let o = judge::rogue(&r.summary, "cross-partition", "cross-partition");
    assert_fail(&o, "dropped and counted");
}

#[test]
fn a_pod_with_sound_routes_fails_the_refusal_verdict() {
    let mut s = scenarios::missing_route_setup(1);
    s.pod.routes.clear();
    s.opts.duration_ps = 200_000;
    let o = judge::refused(&s.run(), "missing-route", "routes.0", |_| true);
    assert_fail(&o, "not refused");
}

// ---- doctored results fail -----------------------------------------------------------------

fn sweep_points() -> Vec<(f64, Summary)> {
    [0.0, 1e-6, 4e-6]
        .iter()
        .map(|&ber| {
            let mut s = scenarios::bit_error_setup(1, ber);
            s.opts.duration_ps = 2_000_000;
            (ber, s.run().unwrap().summary)
        })
        .collect()
}

#[test]
fn doctored_sweeps_fail() {
    let points = sweep_points();
    assert_pass(&judge::bit_error_sweep(&points));
    // Replays that fall as the error rate rises.
    let mut p = points.clone();
    p[2].1.links.replays = 0;
    assert_fail(&judge::bit_error_sweep(&p), "non-decreasing");
    // An operation lost, one duplicated, one corrupted.
    for k in 0..3 {
        let mut p = points.clone();
        let i = &mut p[1].1.integrity;
        match k {
            0 => i.lost = 1,
            1 => i.duplicates = 1,
            _ => i.mismatches = 1,
        }
        assert_fail(&judge::bit_error_sweep(&p), "BER 1e-6");
    }
}

// ---- command line --------------------------------------------------------------------------

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_podlink-sim"))
}

#[test]
fn cli_lists_runs_as_json_and_refuses_unknown_names() {
    let out = bin().args(["conformance", "--list"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for s in SCENARIOS {
        assert!(text.contains(s.name), "{text}");
    }
    let out = bin()
        .args(["conformance", "spoofed-source", "missing-route", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["passed"], 2);
    assert_eq!(v["failed"], 0);
    let s = v["scenarios"].as_array().unwrap();
    assert_eq!(s[0]["scenario"], "spoofed-source");
    assert_eq!(s[0]["verdict"], "PASS");
    assert!(s[0]["checks"].as_array().unwrap().len() > 3);
    assert!(s[1]["reason"]
        .as_str()
        .unwrap()
        .contains("routes.0: switch 0: no route to accelerator 5"));
    let out = bin().args(["conformance", "route-loop"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("route-loop") && text.contains("PASS") && text.contains("1 passed"),
        "{text}"
    );
    let out = bin()
        .args(["conformance", "link-flap", "no-such-thing"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no-such-thing") && err.contains("bit-error-sweep"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}
