//! End-to-end tests of the pod model: zero-load timing per topology, determinism,
//! conservation and integrity under load, bit errors.

use podlink_sim::pod::config::{AccelModel, PodFile};
use podlink_sim::pod::presets;
use podlink_sim::pod::timing::read_breakdown;
use podlink_sim::sim::results::run;
use podlink_sim::sim::trace::{is_wait, zero_load_read};
use podlink_sim::sim::Options;

fn short(ns: u64) -> Options {
    Options {
        duration_ps: ns * 1000,
        warmup_ps: ns * 100,
        ..Options::default()
    }
}

/// The pod as each accelerator model runs it: the protocol crate's `txn::Endpoint` per port
/// (the default), and its parts composed by the simulator (`accelerator.model`).
fn both(pod: PodFile) -> [PodFile; 2] {
    [AccelModel::Endpoint, AccelModel::Composed].map(|m| {
        let mut p = pod.clone();
        p.accelerator.model = m;
        p
    })
}

/// The run drained, every operation completed once with the right data (none failed), the
/// conservation balance holds, and more than `min_lines` lines of read data were checked.
fn assert_all_complete(s: &podlink_sim::sim::results::Summary, name: &str, min_lines: u64) {
    assert!(s.drained, "{name}");
    assert_eq!(s.integrity.failed, 0, "{name}: {:?}", s.integrity);
    assert!(s.integrity.ok(), "{name}: {:?}", s.integrity);
    assert!(s.conservation.ok, "{name}: {:?}", s.conservation);
    assert!(
        s.integrity.lines_checked > min_lines,
        "{name}: {:?}",
        s.integrity
    );
}

/// The simulated zero-load 64 B read equals the analytic sum of the modelled stages to the
/// picosecond, stage by stage, with every wait zero, with either accelerator model.
fn check_zero_load(pod: &PodFile, want_hops: u32) {
    for mut pod in both(pod.clone()) {
        pod.name = format!("{} ({:?})", pod.name, pod.accelerator.model);
        check_zero_load_one(&pod, want_hops);
    }
}

fn check_zero_load_one(pod: &PodFile, want_hops: u32) {
    let (stages, rtt, hops) = zero_load_read(pod).expect("the traced read completes");
    assert_eq!(hops, want_hops, "{}", pod.name);
    let analytic = read_breakdown(pod, hops);
    let modelled: Vec<_> = stages.iter().filter(|s| !is_wait(s)).cloned().collect();
    assert_eq!(modelled, analytic, "{}", pod.name);
    for w in stages.iter().filter(|s| is_wait(s)) {
        assert_eq!(w.time.as_ps(), 0, "{}: {} at zero load", pod.name, w.name);
    }
    let sum: u64 = stages.iter().map(|s| s.time.as_ps()).sum();
    let want: u64 = analytic.iter().map(|s| s.time.as_ps()).sum();
    assert_eq!(
        sum, rtt,
        "{}: stages sum to the simulated round trip",
        pod.name
    );
    assert_eq!(rtt, want, "{}: simulated = analytic", pod.name);
}

#[test]
fn zero_load_read_single_switch() {
    check_zero_load(&presets::load("single-switch-16").unwrap(), 1);
}

#[test]
fn zero_load_read_ualink_64x4() {
    check_zero_load(&presets::load("ualink-64x4").unwrap(), 1);
}

#[test]
fn zero_load_read_nvl72_like() {
    check_zero_load(&presets::load("nvl72-like").unwrap(), 1);
}

#[test]
fn zero_load_read_two_tier() {
    check_zero_load(&presets::load("two-tier-384").unwrap(), 3);
}

#[test]
fn zero_load_read_ualink_1024() {
    check_zero_load(&presets::load("ualink-1024").unwrap(), 1);
}

#[test]
fn zero_load_read_other_link_and_pipeline_settings() {
    let mut pod = presets::load("single-switch-16").unwrap();
    pod.link.lanes = 1;
    pod.link.fec_interleave = 4;
    pod.link.cable_m = 3.7;
    pod.switch.cut_through = false;
    pod.switch.datapath_bytes = 16;
    pod.switch.clock_mhz = 1250.0;
    pod.accelerator.completer_ns = 123.4;
    check_zero_load(&pod, 1);
}

#[test]
fn loaded_runs_are_sound() {
    for pod in ["single-switch-16", "ualink-64x4"]
        .into_iter()
        .flat_map(|n| both(presets::load(n).unwrap()))
    {
        let name = format!("{} ({:?})", pod.name, pod.accelerator.model);
        let r = run(&pod, &short(1500), |_, _| {}).unwrap();
        let s = &r.summary;
        assert!(s.drained, "{name}");
        assert!(s.integrity.ok(), "{name}: {:?}", s.integrity);
        assert!(s.conservation.ok, "{name}: {:?}", s.conservation);
        assert!(
            s.integrity.lines_checked > 100,
            "{name}: reads were checked"
        );
        assert!(
            s.integrity.lines_audited > s.integrity.lines_checked / 4,
            "{name}: memory was audited: {:?}",
            s.integrity
        );
        assert!(s.throughput_gbps > 0.0);
        assert!(s.drops.is_empty(), "{name}: {:?}", s.drops);
        // The run's own zero-load read (traced before injection starts) is the analytic sum.
        let want: u64 = read_breakdown(&pod, s.read_hops)
            .iter()
            .map(|x| x.time.as_ps())
            .sum();
        assert_eq!((s.read_rtt_ns * 1000.0).round() as u64, want, "{name}");
        assert!(!s.violated(), "{name}: {:?}", s.budgets);
    }
}

#[test]
fn same_pod_and_seed_give_the_same_results() {
    for pod in both(presets::load("ualink-64x4").unwrap()) {
        same_results(&pod);
    }
}

fn same_results(pod: &PodFile) {
    let a = run(pod, &short(800), |_, _| {}).unwrap();
    let b = run(pod, &short(800), |_, _| {}).unwrap();
    let ja = serde_json::to_string(&a.summary).unwrap();
    let jb = serde_json::to_string(&b.summary).unwrap();
    assert_eq!(ja, jb);
    let c = run(
        pod,
        &Options {
            seed: 2,
            ..short(800)
        },
        |_, _| {},
    );
    assert_ne!(ja, serde_json::to_string(&c.unwrap().summary).unwrap());
}

#[test]
fn bit_errors_cause_replays_and_lose_nothing() {
    for mut pod in both(presets::load("single-switch-16").unwrap()) {
        pod.link.ber = 2e-6;
        let r = run(&pod, &short(1500), |_, _| {}).unwrap();
        let s = &r.summary;
        assert!(s.links.crc_errors > 0, "{:?}", s.links);
        assert!(
            s.links.replays > 0 && s.links.dl_resent > 0,
            "{:?}",
            s.links
        );
        assert!(s.drained && s.integrity.ok() && s.conservation.ok, "{s:?}");
        assert!(s.integrity.lines_audited > 100, "{:?}", s.integrity);
    }
}

/// Long cables without bit errors resend nothing: the link layer's own timers (tail-loss
/// probe, Replay Request retry) wait for an answer to come back over the link's round trip.
/// At 100 m with the default 1 µs ack delay the 2 µs tail-loss probe fired before the ack
/// could return (12 replays, 79 flits resent in 10 µs, with no CRC error).
#[test]
fn long_error_free_links_resend_nothing() {
    for cable_m in [100.0, 2000.0] {
        for mut pod in both(presets::load("single-switch-16").unwrap()) {
            pod.link.cable_m = cable_m;
            let r = run(&pod, &short(3000), |_, _| {}).unwrap();
            let s = &r.summary;
            let m = format!("{cable_m} m, {:?}", pod.accelerator.model);
            assert!(s.links.dl_flits > 1000, "{m}: {:?}", s.links);
            assert_eq!(
                (s.links.crc_errors, s.links.replays, s.links.dl_resent),
                (0, 0, 0),
                "{m}: {:?}",
                s.links
            );
            assert!(
                s.drained && s.integrity.ok() && s.conservation.ok,
                "{m}: {s:?}"
            );
        }
    }
}

/// A zero-load read that fails has no round trip to check against the budget. With a 100 ns
/// request timeout the traced read timed out after 110 ns, and that was reported as a
/// 110 ns round trip within the 1 µs budget: a pass. It is now a violation, with no hops.
#[test]
fn a_zero_load_read_that_fails_violates_the_budget() {
    for mut pod in both(presets::load("single-switch-16").unwrap()) {
        pod.accelerator.timeout_us = 0.1;
        let m = format!("{:?}", pod.accelerator.model);
        let s = run(&pod, &short(500), |_, _| {}).unwrap().summary;
        assert!(!s.read_completed, "{m}");
        assert_eq!(s.budgets.len(), 1, "{m}: {:?}", s.budgets);
        assert_eq!(s.budgets[0].verdict, "VIOLATED", "{m}: {:?}", s.budgets);
        assert!(s.breakdown.is_empty() || s.read_rtt_ns == 0.0, "{m}");
        // The same pod with its default timeout: the read completes within its budget.
        pod.accelerator.timeout_us = 100.0;
        let s = run(&pod, &short(500), |_, _| {}).unwrap().summary;
        assert!(
            s.read_completed && s.read_rtt_ns > 200.0,
            "{m}: {}",
            s.read_rtt_ns
        );
        assert!(
            s.budgets.iter().all(|v| v.verdict != "VIOLATED"),
            "{m}: {:?}",
            s.budgets
        );
    }
}

/// The zero-load read stays inside accelerator 0's partition. On a leaf/spine pod whose
/// first tenant lives on the first leaf, the read went to the farthest accelerator, 8 (on the
/// other leaf, another tenant's): the switches dropped it as a cross-partition request, the
/// run reported one failed operation, no breakdown and the read budget VIOLATED (exit status
/// 1). It now goes to accelerator 0's farthest peer, 1, over one switch, as `verify` computes.
#[test]
fn the_zero_load_read_stays_in_its_partition() {
    let text = "name = \"tenants by leaf\"\n[topology]\nkind = \"leaf-spine\"\nleaves = 2\nspines = 1\naccels_per_leaf = 8\nuplinks_per_spine = 1\n\
                [[partitions]]\nid = 1\naccelerators = \"0-5\"\n[[partitions]]\nid = 2\naccelerators = \"6-15\"\n\
                [[workloads]]\npartition = 1\npattern = \"uniform\"\noffered_load = 0.3\n\
                [[workloads]]\npartition = 2\npattern = \"all-to-all\"\noffered_load = 0.3\n";
    for pod in both(PodFile::parse(text, "tenants.toml").unwrap()) {
        let m = format!("{:?}", pod.accelerator.model);
        let s = run(&pod, &short(500), |_, _| {}).unwrap().summary;
        assert!(s.read_completed, "{m}: {:?}", s.integrity);
        assert_eq!((s.read_pair, s.read_hops), ([0, 1], 1), "{m}");
        assert!(s.drops.iter().all(|(_, n)| *n == 0), "{m}: {:?}", s.drops);
        assert!(
            s.budgets.iter().all(|v| v.verdict != "VIOLATED"),
            "{m}: {:?}",
            s.budgets
        );
        assert_all_complete(&s, &m, 100);
        check_zero_load_one(&pod, 1);
        // `verify` checks the same read: 1 hop, within the budget.
        let fabric = podlink_sim::pod::topology::Fabric::build(&pod);
        let findings = podlink_sim::verify::verify(&pod, &fabric);
        assert!(findings.is_empty(), "{m}: {findings:?}");
    }
}

/// A response can reach its requester long after the request timed out: held in a switch
/// up to the residence limit (3 ms here), behind an accelerator that withholds its VC 0
/// credits for 1.55 ms. With the protocol's default 1 ms tag quarantine, accelerator 1's
/// tags were reused while those responses waited, and when the credits came back six reads
/// took them as their own (another line's data). The simulator's quarantine now outlasts
/// the longest a response can take (`accel::tag_quarantine`): every one is dropped as late.
#[test]
fn a_tag_is_not_reused_while_its_response_may_still_come() {
    let text = "name = \"late responses\"\n[topology]\nkind = \"single-switch\"\naccelerators = 4\n\
                [accelerator]\ntimeout_us = 10\n[switch]\nmax_residence_us = 3000\n\
                [[workloads]]\npattern = \"uniform\"\nmessage_bytes = 64\noffered_load = 0.001\nread = 1.0\nwrite = 0.0\n\
                [faults]\n[[faults.events]]\nat_us = 50\nkind = \"withhold\"\naccel = 1\nvc = 0\n\
                [[faults.events]]\nat_us = 1600\nkind = \"release\"\naccel = 1\nvc = 0\n";
    let pod = PodFile::parse(text, "late.toml").unwrap();
    let mut opts = short(2_000_000);
    opts.faults = pod.fault_plan();
    let s = run(&pod, &opts, |_, _| {}).unwrap().summary;
    let i = &s.integrity;
    assert!(i.late_responses > 1000, "{i:?}");
    assert!(i.sound_but_failed() && i.requests_accounted(), "{i:?}");
    assert!(s.drained && s.conservation.ok, "{:?}", s.conservation);
}

#[test]
fn trace_replay_and_tenants() {
    let dir = std::env::temp_dir().join(format!("podlink-sim-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("ops.csv");
    std::fs::write(
        &trace,
        "time_ns,src,dst,op,bytes\n0,0,1,write,256\n5,0,1,read,256\n5,2,3,atomic,8\n40,3,2,read,64\n",
    )
    .unwrap();
    let text = format!(
        "name = \"t\"\n[topology]\nkind = \"single-switch\"\naccelerators = 4\n[[workloads]]\npattern = \"trace\"\ntrace = \"{}\"\n",
        trace.display()
    );
    for pod in both(PodFile::parse(&text, "t.toml").unwrap()) {
        let r = run(&pod, &short(500), |_, _| {}).unwrap();
        let s = &r.summary;
        // Four trace operations and the traced zero-load read.
        assert_eq!(s.conservation.ops_issued, 4 + 1);
        assert!(s.drained && s.sound(), "{s:?}");
        // The 256 B read after the write sees the write; the 64 B reads see initial memory.
        assert_eq!(s.integrity.lines_checked, 4 + 1 + 1);
    }
    let missing = PodFile::parse(&text.replace("ops.csv", "nope.csv"), "t.toml").unwrap();
    assert!(run(&missing, &short(500), |_, _| {}).is_err());
    let _ = std::fs::remove_dir_all(&dir);

    // Two tenants: an incast in one partition leaves the other's latency alone.
    let mut pod = presets::load("ualink-64x4").unwrap();
    pod.partitions = PodFile::parse(
        "name=\"x\"\n[topology]\nkind=\"single-switch\"\naccelerators=64\n[[partitions]]\nid=1\naccelerators=\"0-31\"\n[[partitions]]\nid=2\naccelerators=\"32-63\"\n",
        "p",
    )
    .unwrap()
    .partitions;
    pod.workloads = vec![pod.workloads[0].clone(), pod.workloads[0].clone()];
    pod.workloads[0].pattern = podlink_sim::pod::config::Pattern::Hotspot;
    pod.workloads[0].partition = Some(1);
    pod.workloads[0].target = Some(0);
    pod.workloads[0].offered_load = 0.3;
    pod.workloads[1].partition = Some(2);
    let r = run(&pod, &short(600), |_, _| {}).unwrap();
    let s = &r.summary;
    assert!(s.sound(), "{s:?}");
    let (a, b) = (&s.partitions[0], &s.partitions[1]);
    assert!(a.latency.p99_ns > 4.0 * b.latency.p99_ns, "{a:?} {b:?}");
    assert!(b.latency.p99_ns < 1000.0, "{b:?}");
}

/// Requests that time out end as failed operations and the run goes on: requester deadlines
/// are handled by the periodic sweep, not by link timers (a link timer armed for an expired
/// requester deadline used to re-arm itself at the same instant forever, so that simulated
/// time stopped). A 0.2 µs request timeout is shorter than a loaded round trip.
#[test]
fn request_timeouts_do_not_stop_time() {
    for mut pod in both(presets::load("single-switch-16").unwrap()) {
        pod.accelerator.timeout_us = 0.2;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let r = run(&pod, &short(500), |_, _| {});
            let _ = tx.send(r.map(|r| r.summary));
        });
        let s = rx
            .recv_timeout(std::time::Duration::from_secs(120))
            .expect("the run finishes (simulated time advances)")
            .unwrap();
        assert!(s.drained, "every operation completed or failed");
        assert!(s.integrity.failed > 0, "{:?}", s.integrity);
    }
}

#[test]
fn bad_routes_and_faults_are_refused_before_the_run() {
    use podlink_sim::pod::config::RouteOverride;
    use podlink_sim::pod::topology::RouteProblem;
    use podlink_sim::sim::fault::{Fault, FaultKind, FaultPlan, PortRef};
    use podlink_sim::sim::SimError;
    let mut pod = presets::load("single-switch-16").unwrap();
    pod.routes = vec![
        RouteOverride {
            switch: 0,
            dest: "1-2".into(),
            ports: vec![1, 2],
        },
        RouteOverride {
            switch: 0,
            dest: "9".into(),
            ports: vec![],
        },
    ];
    match run(&pod, &short(100), |_, _| {}) {
        Err(SimError::Route { entry, problem, .. }) => {
            assert_eq!(entry, "routes.0");
            // Port 2 leads to accelerator 2, not 1.
            assert_eq!(
                problem,
                RouteProblem::BadPort {
                    switch: 0,
                    dest: 1,
                    port: 2
                }
            );
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("ran"),
    }
    pod.routes.remove(0);
    let e = run(&pod, &short(100), |_, _| {}).err().unwrap();
    assert_eq!(
        e.to_string(),
        "single-switch-16: routes.0: switch 0: no route to accelerator 9"
    );
    let pod = presets::load("single-switch-16").unwrap();
    for (what, want) in [
        (
            FaultKind::LinkDown(PortRef { switch: 1, port: 0 }),
            "faults.0: no switch 1",
        ),
        (
            FaultKind::PortFail(PortRef {
                switch: 0,
                port: 16,
            }),
            "faults.0: switch 0 has no port 16",
        ),
        (
            FaultKind::Withhold { accel: 3, vc: 4 },
            "faults.0: virtual channel 4",
        ),
        (
            FaultKind::ModuleErrors {
                link: PortRef { switch: 0, port: 0 },
                per_window: 1,
            },
            "faults.0: module errors need a health window",
        ),
    ] {
        let opts = Options {
            faults: FaultPlan {
                faults: vec![Fault { at_ps: 0, what }],
                ..FaultPlan::default()
            },
            ..short(100)
        };
        let e = run(&pod, &opts, |_, _| {}).err().unwrap();
        assert!(e.to_string().starts_with(want), "{e}");
    }
}

#[test]
fn bit_errors_start_when_the_fault_says() {
    use podlink_sim::sim::fault::{Fault, FaultKind, FaultPlan, PortRef};
    let pod = presets::load("single-switch-16").unwrap();
    let link = PortRef { switch: 0, port: 3 };
    let mut opts = Options {
        load: Some(0.1),
        faults: FaultPlan {
            faults: vec![Fault {
                at_ps: 1_500_000,
                what: FaultKind::SetBer { link, ber: 2e-5 },
            }],
            ..FaultPlan::default()
        },
        ..short(1500)
    };
    let r = run(&pod, &opts, |_, _| {}).unwrap();
    let s = &r.summary;
    assert!(s.links.crc_errors > 0, "{:?}", s.links);
    // Only that link (both directions) saw errors.
    let with_errors: Vec<u32> = r.links.iter().filter(|l| l.4 > 0).map(|l| l.0).collect();
    assert!(
        !with_errors.is_empty() && with_errors.len() <= 2,
        "{with_errors:?}"
    );
    assert!(
        s.integrity.mismatches == 0 && s.integrity.duplicates == 0,
        "{s:?}"
    );
    // At the end of the run: none.
    opts.faults.faults[0].at_ps = 1_500_000_000;
    let r = run(&pod, &opts, |_, _| {}).unwrap();
    assert_eq!(r.summary.links.crc_errors, 0);
}

/// Heavy load on a switch whose ingress credits add up to more than its queue descriptors:
/// requests fill the switch, and the responses that would let the completers drain them
/// must still get through (separate request and response FIFOs at ingress and egress, and a
/// share of the descriptors only responses may take). Before, this pod stopped moving and
/// every open operation ended by timeout (spec-notes/simulator.md, finding 6).
#[test]
fn heavy_load_does_not_deadlock_requests_and_responses() {
    use podlink_sim::pod::config::Topology;
    for (bytes, read, model) in [(64, 0.5), (512, 0.5), (256, 1.0)]
        .into_iter()
        .flat_map(|(b, r)| [(b, r, AccelModel::Composed), (b, r, AccelModel::Endpoint)])
    {
        let mut pod = presets::load("ualink-64x4").unwrap();
        pod.accelerator.model = model;
        pod.topology = Topology::MultiPlane {
            accelerators: 28,
            planes: 1,
            ports_per_plane: 1,
        };
        for w in &mut pod.workloads {
            w.offered_load = 0.9;
            w.message_bytes = bytes;
            w.read = read;
            w.write = 1.0 - read;
            w.atomic = 0.0;
        }
        let r = run(&pod, &short(2000), |_, _| {}).unwrap();
        let s = &r.summary;
        assert_all_complete(s, &format!("{bytes} B, {model:?}"), 1000);
        // Every operation finished well within the requester timeout.
        assert!(
            s.latency.iter().all(|c| c.latency.max_ns < 50_000.0),
            "{bytes} B: {:?}",
            s.latency
        );
    }
}

/// Leaf/spine pods at full load, oversubscribed (one spine, two leaves of 8 or 16
/// accelerators), 256 B operations. With uniform reads and writes, each leaf's requests
/// going up and the spine's requests coming down filled their switches' request descriptors
/// and waited for each other for good (16,366 operations failed in this run) until the
/// leaves kept `UPLINK_RESERVE` of them for requests bound for their own accelerators. With
/// all-to-all reads, the leaves then filled up with requests and responses going up while
/// the spine held responses coming down (39,896 failed) until responses going up left
/// `UPLINK_RESPONSE_RESERVE` to those coming down. Now every operation completes once,
/// with either accelerator model.
#[test]
fn a_leaf_spine_pod_at_full_load_does_not_deadlock() {
    for (accels, pattern, read, duration_ns) in
        [(8, "uniform", 0.5, 3000), (16, "all-to-all", 1.0, 4000)]
    {
        let text = format!(
            r#"name = "oversubscribed leaf/spine, {pattern}"
[topology]
kind = "leaf-spine"
leaves = 2
spines = 1
accels_per_leaf = {accels}
[[workloads]]
pattern = "{pattern}"
offered_load = 1.0
message_bytes = 256
read = {read}
write = {}
"#,
            1.0 - read
        );
        let pod = PodFile::parse(&text, "leaf-spine.toml").expect("a pod file");
        for pod in both(pod) {
            let name = format!("{} ({:?})", pod.name, pod.accelerator.model);
            let s = run(&pod, &short(duration_ns), |_, _| {}).unwrap().summary;
            assert_all_complete(&s, &name, 10_000);
        }
    }
}

/// Several ports of one accelerator into one switch: a response comes back on whichever of
/// the destination's ports the switch picks, and is handed to the requester that owns its
/// tag (ports into one switch take disjoint tag ranges). Before, half the operations failed
/// by timeout and reads returned other operations' data (simulator.md, finding 8).
#[test]
fn several_ports_per_accelerator_into_one_switch() {
    use podlink_sim::pod::config::Topology;
    for topology in [
        Topology::SingleSwitch {
            accelerators: 8,
            ports_per_accel: 2,
        },
        Topology::MultiPlane {
            accelerators: 8,
            planes: 2,
            ports_per_plane: 2,
        },
    ] {
        let mut pod = presets::load("single-switch-16").unwrap();
        pod.topology = topology.clone();
        pod.accelerator.timeout_us = 10.0;
        for w in &mut pod.workloads {
            w.offered_load = 0.3;
        }
        for pod in both(pod) {
            let m = pod.accelerator.model;
            let r = run(&pod, &short(1500), |_, _| {}).unwrap();
            let s = &r.summary;
            assert_eq!(
                s.integrity.failed, 0,
                "{topology:?} {m:?}: {:?}",
                s.integrity
            );
            assert!(
                s.integrity.ok() && s.conservation.ok,
                "{topology:?} {m:?}: {s:?}"
            );
            assert!(s.integrity.lines_checked > 100, "{topology:?} {m:?}");
        }
    }
}

/// Workloads on several VCs between the same accelerators: requests on different VCs are not
/// ordered against each other, so each VC's workloads use their own lines of every window and
/// every read is still checked exactly. (With shared lines, seed 30 returned a read that a
/// write on another VC had legally overtaken, and the check called it stale.)
#[test]
fn workloads_on_several_vcs_are_checked_exactly() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/pods/mixed-vcs.toml"
    );
    for pod in both(PodFile::load(std::path::Path::new(path)).unwrap()) {
        let m = pod.accelerator.model;
        for seed in [12, 22, 30] {
            let opts = Options {
                seed,
                ..short(8000)
            };
            let s = run(&pod, &opts, |_, _| {}).unwrap().summary;
            assert!(s.integrity.ok(), "{m:?} seed {seed}: {:?}", s.integrity);
            assert!(s.conservation.ok, "{m:?} seed {seed}");
            assert!(s.integrity.lines_checked > 1000, "{m:?} seed {seed}");
        }
    }
}

/// A pod without faults whose request timeout (1 µs) is far shorter than the queueing of
/// its incast: operations time out, and the run still passes because every failure is a
/// timeout and every timed-out request is accounted for (answered late, or dropped by a
/// switch at its residence limit), with nothing read or left in memory wrong.
#[test]
fn timeouts_under_overload_are_accounted_for() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/pods/overload-short-timeout.toml"
    );
    let pod = PodFile::load(std::path::Path::new(path)).unwrap();
    // At load 0.3 for 2 µs, timed-out requests still have responses on their way when the
    // last operation completes: the run goes on until they arrive.
    // At load 1.0 the switches also drop frames at the residence limit.
    for (load, ns) in [(1.0, 4000), (0.3, 2000)] {
        let mut pod = pod.clone();
        pod.workloads[0].offered_load = load;
        for pod in both(pod) {
            let m = format!("{:?} load {load}", pod.accelerator.model);
            timeouts_accounted(&pod, &short(ns), &m);
            // Health monitors running make a fault plan, but not a fault.
            let mut opts = short(ns);
            opts.faults.health_window_ps = Some(1_000_000);
            timeouts_accounted(&pod, &opts, &format!("{m}, health monitors"));
        }
    }
}

fn timeouts_accounted(pod: &PodFile, opts: &Options, m: &str) {
    let s = run(pod, opts, |_, _| {}).unwrap().summary;
    let i = &s.integrity;
    assert!(s.drained && s.conservation.ok, "{m}: {s:?}");
    assert!(!s.had_faults(), "{m}");
    assert!(i.failed > 100, "{m}: operations time out: {i:?}");
    assert_eq!(i.failed_not_timed_out, 0, "{m}: {i:?}");
    assert!(
        i.requests_timed_out > 100 && i.late_responses > 0,
        "{m}: {i:?}"
    );
    assert_eq!(
        i.requests_timed_out,
        i.late_responses + i.switch_drops + i.responses_expired,
        "{m}: every timed-out request left one trace"
    );
    let expired = s.drops.iter().find(|d| d.0 == "expired").map_or(0, |d| d.1);
    assert_eq!(expired, i.switch_drops, "{m}: {:?}", s.drops);
    assert!(
        i.sound_but_failed() && i.lines_checked > 100 && i.lines_audited > 1000,
        "{m}: {i:?}"
    );
    assert!(!i.ok(), "{m}: operations failed");
    assert!(s.integrity_ok() && s.sound(), "{m}: {i:?}");
}

/// The compression tests' pod: a 2 × 2 leaf/spine of eight accelerators, uniform reads,
/// writes and atomics at load 0.6.
const COMPRESSION_POD: &str = r#"name = "compression"
[topology]
kind = "leaf-spine"
leaves = 2
spines = 2
accels_per_leaf = 4
[[workloads]]
pattern = "uniform"
offered_load = 0.6
read = 0.4
write = 0.4
atomic = 0.2
"#;

/// Address compression on every link (`link.compress_requests`): the accelerators' requesters
/// compress toward their switch, every switch port expands what arrives (the caches are per
/// link) and compresses again toward the next hop. On a leaf/spine pod (three switch hops
/// each way) with reads, writes and atomics, with either accelerator model, every operation
/// completes with the right data, compressed requests really crossed switch ports, none
/// failed to expand (`Conservation::ok` counts that), and the links carried fewer TL flits
/// than the same run without compression. A switch that forwarded compressed requests as
/// they came would hand each destination ways its cache never loaded.
#[test]
fn compressed_requests_cross_switches_expanded_and_recompressed() {
    // TL flits carried, per accelerator model.
    let tl_flits = |compress: bool| -> Vec<u64> {
        let mut pod = PodFile::parse(COMPRESSION_POD, "compression.toml").expect("a pod file");
        pod.link.compress_requests = compress;
        both(pod)
            .into_iter()
            .map(|pod| {
                let name = format!("{:?}, compression {compress}", pod.accelerator.model);
                let s = run(&pod, &short(3000), |_, _| {}).unwrap().summary;
                assert_all_complete(&s, &name, 100);
                assert_eq!(s.links.requests_expanded > 0, compress, "{name}");
                s.links.tl_flits
            })
            .collect()
    };
    let (with, without) = (tl_flits(true), tl_flits(false));
    for (w, wo) in with.iter().zip(&without) {
        assert!(w < wo, "fewer TL flits with compression: {w} against {wo}");
    }
}

/// Response compression (`link.compress_responses`): completers send OK responses in the
/// compressed forms (FTYPE 0x4 and 0x5), which carry no source ID; switches route them by
/// destination as they are, and the requesters expand them with the source they know from
/// the tag. On the leaf/spine pod above and on a single switch with three ports per
/// accelerator (a response may come back on another port of its requester), with either
/// accelerator model and with request compression off and on: every operation completes
/// once with the right data, responses really went compressed, and fewer TL flits crossed
/// the links than without.
#[test]
fn compressed_responses_are_routed_as_they_are_and_expanded_by_their_requesters() {
    let mut leaf_spine = PodFile::parse(COMPRESSION_POD, "compression.toml").expect("a pod file");
    leaf_spine.workloads[0].offered_load = 0.3;
    let three_ports = PodFile::load(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/pods/three-ports.toml"
    )))
    .expect("three-ports.toml");
    for base in [leaf_spine, three_ports] {
        for requests in [false, true] {
            let tl = |responses: bool| -> Vec<u64> {
                let mut pod = base.clone();
                pod.link.compress_requests = requests;
                pod.link.compress_responses = responses;
                both(pod)
                    .into_iter()
                    .map(|pod| {
                        let name = format!(
                            "{} ({:?}), requests {requests}, responses {responses}",
                            pod.name, pod.accelerator.model
                        );
                        let s = run(&pod, &short(3000), |_, _| {}).unwrap().summary;
                        assert_all_complete(&s, &name, 100);
                        assert_eq!(s.links.responses_compressed > 0, responses, "{name}");
                        assert_eq!(s.links.requests_expanded > 0, requests, "{name}");
                        s.links.tl_flits
                    })
                    .collect()
            };
            let (with, without) = (tl(true), tl(false));
            for (w, wo) in with.iter().zip(&without) {
                assert!(w < wo, "{}: {w} TL flits against {wo}", base.name);
            }
        }
    }
}
