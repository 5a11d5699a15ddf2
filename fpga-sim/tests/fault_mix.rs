//! Random fault mixes: link flaps (short, between the request timeout and the hold-off, past
//! the hold-off), bit error rates, transceiver errors under a health monitor, port and plane
//! failures, withheld credits and rogue writes, in random combinations and at random times,
//! on the conformance pods (8 accelerators × 4 planes; 8 accelerators with 2 ports each on
//! one switch; 2 leaves × 2 spines), on the planes pod with a 4 µs request timeout, on a
//! 3 leaves × 3 spines pod, on the 2 × 2 leaf/spine pod at three times the load, and on the
//! pod files of `tests/data/pods/` (two tenants on a 2 × 2 leaf/spine pod; one switch with
//! four ports per accelerator and an incast; three VCs on two planes with two ports per
//! plane; two tenants on four planes; four tenants on one switch with two ports each; x1
//! links with long cables and store-and-forward switches; 3 leaves × 2 spines with shallow
//! buffers and hashing only; a leaf/spine pod with a route override).
//! Whatever the mix, a run must finish with every operation completed exactly once, no read
//! and no line of memory wrong (the audit after the drain), the conservation balances holding, and operations reported failed only when the mix
//! could lose frames or hold requests up past their timeout (a failure, errors at warning
//! level, a link down for half a request timeout or more, credits withheld as long).
//!
//! `FAULT_MIX_PLANS=N` runs N plans per pod instead of the default few (the plans are the same
//! for the same N: plan k is built from seed k); `FAULT_MIX_FROM=K` starts them at plan K
//! (plans 1..N otherwise). `FAULT_MIX_PRESET=name` runs them on a preset (with the
//! conformance pods' timeout and workload), `FAULT_MIX_POD=path.toml` on a pod file as it is.
//! `FAULT_MIX_HARSH=1` draws harsher plans: up to 12 faults, error rates up to 1e-4, links
//! that flap several times in a row. `FAULT_MIX_MODEL=endpoint` (or `composed`)
//! runs every pod with that accelerator model (`accelerator.model`); `FAULT_MIX_COMPRESS=1`
//! turns address compression on (`link.compress_requests`), `FAULT_MIX_COMPRESS=responses`
//! response compression (`link.compress_responses`), `FAULT_MIX_COMPRESS=both` both.

use podlink_sim::conformance::scenarios;
use podlink_sim::pod::config::{AccelModel, PodFile, Topology};
use podlink_sim::pod::topology::Fabric;
use podlink_sim::sim::fault::{Fault, FaultKind, FaultPlan, PortRef};
use podlink_sim::sim::results::{run, Report};
use podlink_sim::sim::Options;

mod common;
use common::Gen;

const US: u64 = 1_000_000;
/// Injection time of every run.
const DURATION_PS: u64 = 8 * US;

/// A random plan for `pod`; returns it and whether it may make operations fail.
fn plan(pod: &PodFile, seed: u64) -> (FaultPlan, bool) {
    // FAULT_MIX_HARSH=1: more faults per plan, error rates up to 1e-4 and links that flap
    // again and again.
    let harsh = std::env::var("FAULT_MIX_HARSH").is_ok_and(|v| v == "1");
    plan_with(pod, seed, harsh)
}

/// [`plan`], harsh or not whatever the environment says.
fn plan_with(pod: &PodFile, seed: u64, harsh: bool) -> (FaultPlan, bool) {
    let fabric = Fabric::build(pod);
    let timeout_ps = (pod.accelerator.timeout_us * 1e6) as u64;
    let mut g = Gen(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x5eed);
    let links: Vec<PortRef> = fabric
        .switches
        .iter()
        .enumerate()
        .flat_map(|(s, sw)| {
            (0..sw.ports.len()).map(move |p| PortRef {
                switch: s as u32,
                port: p as u32,
            })
        })
        .collect();
    let pick = |g: &mut Gen| links[g.below(links.len() as u64) as usize];
    let mut p = FaultPlan {
        record_ops: true,
        health_window_ps: (g.below(2) == 0).then_some(US),
        ..FaultPlan::default()
    };
    let mut may_fail = false;
    let n = 1 + g.below(if harsh { 12 } else { 5 });
    for _ in 0..n {
        let at_ps = g.below(DURATION_PS);
        let mut push = |at_ps: u64, what| p.faults.push(Fault { at_ps, what });
        let kind = if harsh { g.below(11) } else { g.below(9) };
        match kind {
            9 | 10 => {
                // A link that flaps two to six times, each outage short. A health monitor
                // counts the link-downs, may degrade the port and then fail it.
                may_fail |= p.health_window_ps.is_some();
                let link = pick(&mut g);
                let mut t = at_ps;
                for _ in 0..2 + g.below(5) {
                    let down = 1_000 + g.below(500_000);
                    push(t, FaultKind::LinkDown(link));
                    push(t + down, FaultKind::LinkUp(link));
                    t += down + 200_000 + g.below(2 * US);
                }
            }
            0 | 1 => {
                // A flap: mostly short (retry hides it), sometimes past the hold-off or
                // between the request timeout and the hold-off.
                let link = pick(&mut g);
                let down = match g.below(6) {
                    0 | 1 => 10 * US + g.below(4 * US),
                    2 => 3 * US + g.below(7 * US),
                    _ => 1_000 + g.below(3 * US),
                };
                // A request sent shortly before the outage waits it out and is then
                // replayed: one issued up to `timeout − down` before it times out.
                may_fail |= down >= timeout_ps / 2;
                push(at_ps, FaultKind::LinkDown(link));
                push(at_ps + down, FaultKind::LinkUp(link));
            }
            2 => {
                let link = pick(&mut g);
                let bers: &[f64] = if harsh {
                    &[1e-6, 4e-6, 2e-5, 1e-4]
                } else {
                    &[1e-7, 1e-6, 4e-6]
                };
                let ber = bers[g.below(bers.len() as u64) as usize];
                // At 1e-4 some 40 % of DL flits are hit: a burst's last flit lost with the
                // tail-loss probe's replay waits for a second, doubled probe (2 + 4 µs), which
                // outlasts a short request timeout (plan 104280, harsh, on the conformance pod
                // with a 4 µs timeout: two operations failed, on session 32's code too).
                let probe = pod.link_retry_config().tail_probe.map_or(0, |d| d.as_ps());
                may_fail |= ber >= 1e-4 && timeout_ps < 3 * probe;
                push(at_ps, FaultKind::SetBer { link, ber });
                push(
                    at_ps + g.below(3 * US),
                    FaultKind::SetBer { link, ber: 0.0 },
                );
            }
            3 if p.health_window_ps.is_some() => {
                let link = pick(&mut g);
                let per_window = [10, 100, 5000][g.below(3) as usize];
                // Errors at the warning level (16 a window) degrade the port and, never
                // cleared here, fail it a few windows later; an alarm (4096) fails it at
                // once. A failed port's queued frames are flushed.
                may_fail |= per_window >= 16;
                push(at_ps, FaultKind::ModuleErrors { link, per_window });
            }
            4 => {
                may_fail = true;
                push(at_ps, FaultKind::PortFail(pick(&mut g)));
            }
            5 if g.below(3) == 0 => {
                may_fail = true;
                let switch = g.below(fabric.switches.len() as u64) as u32;
                push(at_ps, FaultKind::PlaneFail { switch });
            }
            6 | 7 => {
                let accel = g.below(u64::from(fabric.accels)) as u32;
                let vc = g.below(4) as u8;
                let hold = g.below(2 * timeout_ps);
                may_fail |= hold >= timeout_ps / 2;
                push(at_ps, FaultKind::Withhold { accel, vc });
                push(at_ps + hold, FaultKind::Release { accel, vc });
            }
            _ => {
                // A rogue behind one accelerator writes, claiming another's ID, to a third
                // (dropped as spoofed; the rogue's own writes fail at the rogue, which the
                // integrity summary does not count).
                let n = u64::from(fabric.accels);
                let from = g.below(n) as u32;
                let port = g.below(fabric.accel_ports[from as usize].len() as u64) as u32;
                push(
                    at_ps,
                    FaultKind::Inject {
                        from,
                        port,
                        claim: ((u64::from(from) + 1 + g.below(n - 1)) % n) as u32,
                        dst: g.below(n) as u32,
                        addr: scenarios::ROGUE_ADDR,
                        count: 1 + g.below(16) as u32,
                        gap_ps: 1_000 + g.below(100_000),
                    },
                );
            }
        }
    }
    may_fail |= flapping_outlasts(pod, &fabric, &p, timeout_ps);
    (p, may_fail)
}

/// Whether the plan's link-downs and link-ups leave a link, or a path across two links,
/// without progress for half a request timeout or more (the rule of a single long flap
/// above): outages taken in time order as the simulator does (a link-down of a link already
/// down and a link-up of one already up do nothing), merged where every link concerned is up
/// between them too briefly to finish bring-up and have a replay acknowledged (four link
/// latencies: a NOP across, the replay across, its ack back, and one for the flits
/// themselves).
///
/// Two flapping series on one link, interleaved, can keep it from delivering for most of a
/// timeout although each outage is short (plan 110338, harsh, on `slow-links.toml`: 232 ns
/// link latency, outages 2.8 to 11.8 µs apart by at most 1.1 µs of up, against a 10 µs
/// timeout; 85 operations failed). So can outages of two links one after the other, when a
/// request crosses both: the first holds the request, the second its response (plan 123297,
/// harsh, on `slow-links.toml`: accelerator 0's plane-1 link down for 4.86 µs, then 0.75 µs
/// after it came back accelerator 7's plane-1 link flapping for 5.3 µs, up at most 1.03 µs
/// at a time; requests between the two on plane 1 failed, neither link's outages alone
/// failing any). Every link is checked, and every pair of links one path may cross: on a pod
/// of one tier, the links of two accelerators on one switch; on a pod whose switches connect
/// to each other, any two. Like the rule of a single flap, this lets some plans fail that do
/// not.
fn flapping_outlasts(pod: &PodFile, fabric: &Fabric, p: &FaultPlan, timeout_ps: u64) -> bool {
    use podlink_sim::pod::topology::Attach;
    let latency = podlink_sim::pod::timing::LinkTiming::new(&pod.link)
        .flit_latency()
        .as_ps();
    let usable = 4 * latency;
    // One name per link: a link between two switches may be named from either end.
    let canon = |l: PortRef| match fabric.switches[l.switch as usize].ports[l.port as usize] {
        Attach::Switch { switch, port } => (l.switch, l.port).min((switch, port)),
        Attach::Accel { .. } => (l.switch, l.port),
    };
    let mut events: Vec<(u64, (u32, u32), bool)> = p
        .faults
        .iter()
        .filter_map(|f| match f.what {
            FaultKind::LinkDown(l) => Some((f.at_ps, canon(l), false)),
            FaultKind::LinkUp(l) => Some((f.at_ps, canon(l), true)),
            _ => None,
        })
        .collect();
    events.sort_by_key(|&(t, _, _)| t);
    let mut links: Vec<(u32, u32)> = events.iter().map(|&(_, l, _)| l).collect();
    links.sort_unstable();
    links.dedup();
    // Two links a path may cross: on one switch, the links of two accelerators; once
    // switches connect to each other, any two (a path then crosses a link of each of two
    // leaves, and those between them).
    let tiers = fabric
        .switches
        .iter()
        .any(|s| s.ports.iter().any(|a| matches!(a, Attach::Switch { .. })));
    let accel = |(s, p): (u32, u32)| match fabric.switches[s as usize].ports[p as usize] {
        Attach::Accel { accel, .. } => Some(accel),
        Attach::Switch { .. } => None,
    };
    let one_path =
        |a: (u32, u32), b: (u32, u32)| a == b || tiers || (a.0 == b.0 && accel(a) != accel(b));
    let mut sets = links.iter().enumerate().flat_map(|(i, &a)| {
        links[i..]
            .iter()
            .filter(move |&&b| one_path(a, b))
            .map(move |&b| [a, b])
    });
    sets.any(|set| outage_outlasts(&events, &set, usable, timeout_ps / 2))
}

/// Whether the links of `set` are, some of them, down for a span of `limit` or more:
/// `events` (time, link, up) in time order; a span goes on across ups of every link of
/// `set` shorter than `usable`.
fn outage_outlasts(
    events: &[(u64, (u32, u32), bool)],
    set: &[(u32, u32)],
    usable: u64,
    limit: u64,
) -> bool {
    let mut down: Vec<(u32, u32)> = Vec::new();
    // Since when the set has been without progress, and when every link of it last came up.
    let mut since = 0;
    let mut all_up: Option<u64> = None;
    for &(t, link, up) in events.iter().filter(|(_, l, _)| set.contains(l)) {
        let was_down = down.contains(&link);
        match (was_down, up) {
            (false, false) => {
                if down.is_empty() && all_up.is_none_or(|u| t - u >= usable) {
                    since = t;
                }
                down.push(link);
            }
            (true, true) => {
                down.retain(|&l| l != link);
                if down.is_empty() {
                    if t - since >= limit {
                        return true;
                    }
                    all_up = Some(t);
                }
            }
            // A link-down of a link already down, a link-up of one already up.
            _ => {}
        }
    }
    false
}

fn pods() -> Vec<PodFile> {
    // FAULT_MIX_MODEL=endpoint (or composed): every pod with that accelerator model.
    let mut pods = listed_pods();
    if let Ok(m) = std::env::var("FAULT_MIX_MODEL") {
        let model = match m.as_str() {
            "endpoint" => AccelModel::Endpoint,
            "composed" => AccelModel::Composed,
            other => panic!("FAULT_MIX_MODEL={other}: endpoint or composed"),
        };
        for p in &mut pods {
            p.accelerator.model = model;
        }
    }
    // FAULT_MIX_COMPRESS=1 (or `requests`): every pod with address compression on its
    // links; `responses`: with compressed responses; `both`: both.
    if let Ok(v) = std::env::var("FAULT_MIX_COMPRESS") {
        let (requests, responses) = match v.as_str() {
            "1" | "requests" => (true, false),
            "responses" => (false, true),
            "both" => (true, true),
            other => panic!("FAULT_MIX_COMPRESS={other}: 1, requests, responses or both"),
        };
        for p in &mut pods {
            p.link.compress_requests |= requests;
            p.link.compress_responses |= responses;
        }
    }
    pods
}

fn listed_pods() -> Vec<PodFile> {
    // FAULT_MIX_PRESET=two-tier-384: that preset alone, with the conformance pods' request
    // timeout (10 µs) and workload (uniform at load 0.1).
    // FAULT_MIX_POD=path.toml: that pod file alone, as it is (its workloads and timeout; its
    // own `[faults]` section is replaced by each plan).
    if let Ok(path) = std::env::var("FAULT_MIX_POD") {
        let pod = PodFile::load(std::path::Path::new(&path)).expect("a pod file");
        return vec![pod];
    }
    if let Ok(name) = std::env::var("FAULT_MIX_PRESET") {
        let base = scenarios::planes_pod("x");
        let mut pod = podlink_sim::pod::presets::load(&name).expect("a preset");
        pod.name = format!("fault-mix {name}");
        pod.accelerator.timeout_us = base.accelerator.timeout_us;
        pod.workloads = base.workloads;
        return vec![pod];
    }
    // The planes pod again with requests timing out at 4 µs, well inside the 10 µs hold-off.
    let mut quick = scenarios::planes_pod("fault-mix, 4 us request timeout");
    quick.accelerator.timeout_us = 4.0;
    let mut pods = vec![
        scenarios::planes_pod("fault-mix"),
        scenarios::single_pod("fault-mix", 8, 2),
        scenarios::degraded_drain_setup(1, true).pod,
        quick,
    ];
    // A wider leaf/spine pod (3 leaves × 3 spines, one uplink to each), and the conformance
    // leaf/spine pod at three times the load.
    {
        let mut wide = scenarios::degraded_drain_setup(1, true).pod;
        wide.name = "fault-mix 3 leaves x 3 spines".into();
        wide.topology = Topology::LeafSpine {
            leaves: 3,
            spines: 3,
            accels_per_leaf: 3,
            uplinks_per_spine: 1,
        };
        pods.push(wide);
        pods.push(busy_pod());
        pods.push(tenants_pod());
    }
    // Pod files of other shapes and traffic: several ports per accelerator into one switch
    // with an incast, several VCs with two ports per plane, two tenants on four planes, four
    // tenants on one switch with two ports each, slow store-and-forward links, shallow
    // buffers with hashing only, a route override, four planes with two ports per plane,
    // three ports per accelerator into one switch with a short request timeout.
    for name in [
        "incast-four-ports",
        "mixed-vcs",
        "planes-tenants",
        "four-tenants",
        "slow-links",
        "tight-credits",
        "routes",
        "four-planes-two-ports",
        "three-ports",
    ] {
        pods.push(data_pod(name));
    }
    pods
}

/// `pod` with each accelerator model: the endpoint (the default), then the composed one.
fn both_models(pod: PodFile) -> Vec<PodFile> {
    [AccelModel::Endpoint, AccelModel::Composed]
        .into_iter()
        .map(|m| {
            let mut p = pod.clone();
            p.accelerator.model = m;
            p
        })
        .collect()
}

/// Run `pod` with its own fault plan (`[faults]`).
fn run_pod_plan(pod: &PodFile, seed: u64, duration_ps: u64, warmup_ps: u64) -> Report {
    let opts = Options {
        seed,
        duration_ps,
        warmup_ps,
        faults: pod.fault_plan(),
        ..Options::default()
    };
    run(pod, &opts, |_, _| {}).expect("runs")
}

/// A pod file of `tests/data/pods/`.
fn data_pod(name: &str) -> PodFile {
    let path = format!("{}/tests/data/pods/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    PodFile::load(std::path::Path::new(&path)).expect("a test pod file")
}

/// Two tenants on a 2 × 2 leaf/spine pod (`tests/data/pods/two-tenants-leaf-spine.toml`).
fn tenants_pod() -> PodFile {
    data_pod("two-tenants-leaf-spine")
}

/// The conformance leaf/spine pod (2 leaves × 2 spines, two links from each leaf to each
/// spine) at three times the load.
fn busy_pod() -> PodFile {
    let mut busy = scenarios::degraded_drain_setup(1, true).pod;
    busy.name = "fault-mix leaf/spine at load 0.3".into();
    for w in &mut busy.workloads {
        w.offered_load *= 3.0;
    }
    busy
}

fn check_plans(count: u64, only: Option<u64>) {
    // FAULT_MIX_FROM=K: plans K..K+N-1 instead of 1..N (a soak on plans not run before).
    let from = std::env::var("FAULT_MIX_FROM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1u64);
    let plans: Vec<u64> = (from..from.saturating_add(count))
        .filter(|k| only.is_none_or(|o| o == *k))
        .collect();
    let bad = check(&pods(), &plans, |_, _| {});
    assert!(
        bad.is_empty(),
        "{} bad runs:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// Keep only the faults of `plan` at positions `keep` (to find which ones matter).
fn keep_only(plan: &mut FaultPlan, keep: &[usize]) {
    plan.faults = plan
        .faults
        .iter()
        .enumerate()
        .filter(|(i, _)| keep.contains(i))
        .map(|(_, f)| *f)
        .collect();
}

/// The options of a fault-mix run of plan `k`.
fn mix_options(k: u64, faults: FaultPlan) -> Options {
    Options {
        seed: k,
        duration_ps: DURATION_PS,
        warmup_ps: US,
        faults,
        ..Options::default()
    }
}

/// Run plans `plans` on every pod of `pods`; the runs that break a rule, in words. `seen`
/// gets every run's plan number and fault report, in run order (pod by pod, plan by plan).
/// The runs are independent, so they share out over the machine's cores.
fn check(
    pods: &[PodFile],
    plans: &[u64],
    mut seen: impl FnMut(u64, &podlink_sim::sim::fault::FaultReport),
) -> Vec<String> {
    let jobs: Vec<(&PodFile, u64)> = pods
        .iter()
        .flat_map(|pod| plans.iter().map(move |&k| (pod, k)))
        .collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, jobs.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<Option<RunCheck>> = vec![None; jobs.len()];
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&(pod, k)) = jobs.get(i) else {
                            break;
                        };
                        done.push((i, check_one(pod, k)));
                    }
                    done
                })
            })
            .collect();
        for w in workers {
            for (i, r) in w.join().expect("a fault-mix run panicked") {
                results[i] = Some(r);
            }
        }
    });
    let mut bad = Vec::new();
    for ((_, k), r) in jobs.iter().zip(results) {
        let Some((report, why)) = r else { continue };
        if let Some(f) = &report {
            seen(*k, f);
        }
        bad.extend(why);
    }
    bad
}

/// What one run showed: its fault report, and what it broke, in words.
type RunCheck = (Option<podlink_sim::sim::fault::FaultReport>, Option<String>);

/// Run plan `k` on `pod` and check it.
fn check_one(pod: &PodFile, k: u64) -> RunCheck {
    let (mut faults, may_fail) = plan(pod, k);
    // FAULT_MIX_KEEP=0,2: only those faults of the plan (to find which one matters).
    if let Ok(keep) = std::env::var("FAULT_MIX_KEEP") {
        let keep: Vec<usize> = keep.split(',').filter_map(|x| x.parse().ok()).collect();
        keep_only(&mut faults, &keep);
    }
    let opts = mix_options(k, faults.clone());
    let r = match run(pod, &opts, |_, _| {}) {
        Ok(r) => r,
        Err(e) => return (None, Some(format!("{} plan {k}: not run: {e}", pod.name))),
    };
    let s = &r.summary;
    let i = &s.integrity;
    let mut why = Vec::new();
    if !(s.drained && i.lost == 0) {
        why.push(format!("not drained / lost {}", i.lost));
    }
    if i.duplicates != 0 {
        why.push(format!("duplicated {}", i.duplicates));
    }
    if i.mismatches != 0 || i.atomic_errors != 0 || i.memory_mismatches != 0 {
        why.push(format!(
            "{} mismatches, {} atomic errors, {} lines of memory wrong (first: {:?})",
            i.mismatches,
            i.atomic_errors,
            i.memory_mismatches,
            i.first_problems
                .iter()
                .filter(|p| !p.ends_with("failed"))
                .take(3)
                .collect::<Vec<_>>()
        ));
    }
    if !s.conservation.ok {
        why.push(format!("conservation {:?}", s.conservation));
    }
    if s.faults.as_ref().is_some_and(|f| f.whole_at_end) && i.stranded > 0 {
        why.push(format!(
            "{} requests or responses stuck in a fabric whole again (every link up, nothing withheld)",
            i.stranded
        ));
    }
    if !i.requests_accounted() {
        why.push(format!(
            "{} requests given up ({} timed out, {} abandoned) but {} traces: {i:?}",
            i.requests_timed_out + i.requests_abandoned,
            i.requests_timed_out,
            i.requests_abandoned,
            i.traced()
        ));
    }
    if !may_fail && i.failed != 0 {
        why.push(format!("failed {}", i.failed));
    }
    if i.lines_checked == 0 {
        why.push("no read checked".into());
    }
    if s.drained && i.lines_audited == 0 {
        why.push("no line of memory audited".into());
    }
    let why = (!why.is_empty()).then(|| {
        format!(
            "{} plan {k}: {}\n  plan: {:?}",
            pod.name,
            why.join("; "),
            faults.faults
        )
    });
    (s.faults.clone(), why)
}

#[test]
fn random_fault_mixes_lose_nothing() {
    let count = std::env::var("FAULT_MIX_PLANS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let only = std::env::var("FAULT_MIX_ONLY")
        .ok()
        .and_then(|v| v.parse().ok());
    check_plans(count, only);
}

/// The composed accelerator model (`accelerator.model = "composed"`, kept for comparison)
/// keeps its own fault paths (its link retrained by the model, its requester aborted, its
/// withheld returns in `PortState`, a rogue's transfers put into its TL packer): two plans
/// on every pod (the random mixes run the endpoint, the default).
#[test]
fn random_fault_mixes_on_the_composed_model() {
    let pods: Vec<PodFile> = listed_pods()
        .into_iter()
        .map(|mut p| {
            p.accelerator.model = AccelModel::Composed;
            p
        })
        .collect();
    let bad = check(&pods, &[1, 2], |_, _| {});
    assert!(
        bad.is_empty(),
        "{} bad runs:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// Three plans on the busy leaf/spine pod that returned stale reads until the switches kept
/// revived ports out of hashing while they settle and a port declared down discarded what
/// was still in its ingress pipeline (`spec-notes/switch.md#settling`): in 229 and 465 a
/// spine's link to a leaf failed while requests that had crossed it waited in the leaf's
/// ingress for room, and the flows' next requests came by the other link; in 444 the link came
/// back and took its flows back past their requests queued on the other link.
#[test]
fn former_stale_read_plans_pass() {
    let mut discarded = Vec::new();
    let bad = check(&both_models(busy_pod()), &[229, 444, 465], |k, f| {
        if k == 465 {
            discarded.push(f.ingress_discarded);
        }
    });
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    assert!(
        discarded.len() == 2 && discarded.iter().all(|&d| d > 0),
        "plan 465 discards the failed port's ingress: {discarded:?}"
    );
}

/// A plan on the two-tenant pod that returned stale reads until a port the health monitor
/// fails was disabled like an alarmed one: the port failed during a flap, and its link,
/// still up, replayed requests after their flows had moved to the other link.
/// (Both ends of that link fail, spine 2's port 2 and leaf 1's port 4; the link is
/// disabled and declared down once, under whichever fails first, leaf 1's since session 35,
/// when a link's fault state became one per link rather than one per end named.)
#[test]
fn health_failed_port_plan_passes() {
    use podlink_sim::sim::fault::Happening;
    let failed = PortRef { switch: 2, port: 2 };
    let other_end = PortRef { switch: 1, port: 4 };
    let mut disabled = Vec::new();
    let bad = check(&both_models(tenants_pod()), &[134], |_, f| {
        // The plan only flaps that link (shorter than the hold-off): it is declared down
        // because its port failed.
        disabled.push(f.timeline.iter().any(|e| {
            matches!(e.what, Happening::Declared { at, up: false } if at == failed || at == other_end)
        }));
    });
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    assert_eq!(disabled, [true, true], "the failed port was disabled");
}

/// A plan on the four-tenant pod that returned stale reads until a region with a request in
/// flight waited for it instead of moving to another port: accelerator 6's port 1 (switch
/// port 13) stayed down past the hold-off and came back 0.2 µs after it was declared down;
/// a read went out on it, and then the notice that it was down (1 µs late, already stale)
/// moved the read's region to port 0, where a later write of the region overtook the read.
#[test]
fn stale_down_notice_does_not_move_a_busy_region() {
    use podlink_sim::sim::fault::Happening;
    let port = PortRef {
        switch: 0,
        port: 13,
    };
    let mut stale_notice = Vec::new();
    let bad = check(&both_models(data_pod("four-tenants")), &[357], |_, f| {
        let back = f.timeline.iter().find_map(|e| match e.what {
            Happening::Declared { at, up: true } if at == port => Some(e.t_ps),
            _ => None,
        });
        stale_notice.push(f.timeline.iter().any(|e| match &e.what {
            Happening::Notified { at, state } => {
                *at == port && state == "down" && back.is_some_and(|t| e.t_ps > t)
            }
            _ => false,
        }));
    });
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    assert_eq!(
        stale_notice,
        [true, true],
        "the down notice arrives after the port is back"
    );
}

/// A port its switch's health monitor fails (module errors at the alarm level) is disabled,
/// which declares it down: its accelerator is told once, by that. Until session 36 the
/// monitor's change to Failed sent a health notice as well, a second, identical "down" at the
/// same time (an alarm already sent one).
#[test]
fn a_port_the_monitor_fails_is_announced_once() {
    use podlink_sim::sim::fault::Happening;
    let pod = scenarios::planes_pod("fault-mix");
    let link = PortRef { switch: 1, port: 2 };
    let mut faults = FaultPlan {
        record_ops: true,
        health_window_ps: Some(US),
        ..FaultPlan::default()
    };
    faults.faults.push(Fault {
        at_ps: 2 * US,
        what: FaultKind::ModuleErrors {
            link,
            per_window: 5000,
        },
    });
    let r = run(&pod, &mix_options(1, faults), |_, _| {}).expect("runs");
    let f = r.summary.faults.as_ref().expect("a fault report");
    let count =
        |want: &dyn Fn(&Happening) -> bool| f.timeline.iter().filter(|e| want(&e.what)).count();
    assert_eq!(
        count(&|h| matches!(h, Happening::Health { at, to, .. } if *at == link && to == "failed")),
        1,
        "{:?}",
        f.timeline
    );
    assert_eq!(
        count(&|h| matches!(h, Happening::Declared { at, up: false } if *at == link)),
        1
    );
    assert_eq!(
        count(
            &|h| matches!(h, Happening::Notified { at, state } if *at == link && state == "down")
        ),
        1,
        "{:?}",
        f.timeline
    );
    assert!(r.summary.integrity_ok(), "{:?}", r.summary.integrity);
}

/// Errors below the warning level (10 a health window) on a pod with rate caps, whose
/// switches' timers fire far more often than the health window: the port stays Healthy and
/// no operation fails. (The simulator bumped the transceiver's counter at every timer, which
/// read as thousands of errors a window and failed the port: plan 394 on the two-tenant pod.)
#[test]
fn module_errors_below_warning_leave_the_port_healthy() {
    use podlink_sim::sim::fault::Happening;
    let mut health_changes = usize::MAX;
    let bad = check(&[tenants_pod()], &[394], |_, f| {
        health_changes = f
            .timeline
            .iter()
            .filter(|e| matches!(e.what, Happening::Health { .. }))
            .count();
    });
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    assert_eq!(health_changes, 0);
}

/// A request that its requester gave up when its port was declared down may still execute:
/// the switch had taken it before the link went down, and it waited in an egress queue
/// toward a destination port whose link was replaying under a bit error rate of 1e-4. Its
/// region's next write, sent at once by another plane, reached memory first and was then
/// overwritten by it (harsh plan 331 on `mixed-vcs`: accelerator 4's port 1, switch 0 port
/// 9, failed by its module errors at 10 µs with the write in flight; accelerator 3's port 0,
/// switch 0 port 6, was replaying). Such a region is now held until the request would have
/// timed out, and may move meanwhile only into the same switch, which keeps its order.
#[test]
fn a_request_given_up_at_a_port_failure_is_not_overtaken() {
    for pod in both_models(data_pod("mixed-vcs")) {
        given_up_not_overtaken(&pod);
    }
}

fn given_up_not_overtaken(pod: &PodFile) {
    use podlink_sim::sim::fault::Happening;
    let port = |switch, port| PortRef { switch, port };
    let f = |at_ps, what| Fault { at_ps, what };
    let faults = FaultPlan {
        record_ops: true,
        health_window_ps: Some(US),
        faults: vec![
            f(139_785, FaultKind::LinkDown(port(1, 6))),
            f(426_589, FaultKind::LinkUp(port(1, 6))),
            f(1_796_140, FaultKind::LinkDown(port(1, 6))),
            f(2_151_166, FaultKind::LinkUp(port(1, 6))),
            f(
                2_554_247,
                FaultKind::SetBer {
                    link: port(0, 6),
                    ber: 1e-4,
                },
            ),
            f(
                4_376_041,
                FaultKind::SetBer {
                    link: port(0, 6),
                    ber: 0.0,
                },
            ),
            f(
                2_294_287,
                FaultKind::ModuleErrors {
                    link: port(0, 9),
                    per_window: 5000,
                },
            ),
        ],
        ..FaultPlan::default()
    };
    let opts = Options {
        seed: 331,
        duration_ps: DURATION_PS,
        warmup_ps: US,
        faults,
        ..Options::default()
    };
    let r = run(pod, &opts, |_, _| {}).expect("runs");
    let s = &r.summary;
    let fr = s.faults.as_ref().expect("a fault report");
    assert!(
        fr.timeline.iter().any(|e| matches!(
            &e.what,
            Happening::Health { at, to, .. } if *at == port(0, 9) && to == "failed"
        )),
        "switch 0 port 9 fails"
    );
    assert!(
        fr.regions_held > 0,
        "regions were held: {}",
        fr.regions_held
    );
    let i = &s.integrity;
    assert_eq!(
        (i.mismatches, i.atomic_errors, i.duplicates, i.lost),
        (0, 0, 0, 0),
        "{:?}",
        i.first_problems
    );
    assert!(s.drained && s.conservation.ok);
}

/// Harsh plan 11057 on the busy leaf/spine pod, reduced to the eight faults that matter,
/// returned two stale reads until diverted trunk flows were held for another settling window
/// (`spec-notes/switch.md#settling`). The mix: accelerators 0 and 6 withhold VC 0's credits
/// for 5 and 11 µs (about 2,500 operations time out), spine 0's port 3 is down for 2 µs and
/// then flagged by its health monitor, and switch 1's port 5 fails. When spine 0's port 3
/// came back, accelerator 1's requests to accelerator 5's region 0x106 kept going by port 2
/// while it was joining, waited there for microseconds behind the credit stall, and the
/// region's next read went by port 3 as soon as the first window ended, ahead of a write sent
/// before it ("read of accelerator 5 line 0x10600: data differs from write 12508"). Found by a
/// soak (`FAULT_MIX_FROM=11001 FAULT_MIX_PLANS=80 FAULT_MIX_HARSH=1`) in session 19.
#[test]
fn diverted_while_joining_plan_11057() {
    let pod = busy_pod();
    let (mut faults, _) = plan_with(&pod, 11057, true);
    keep_only(&mut faults, &[5, 8, 9, 10, 12, 13, 25, 26]);
    let r = run(&pod, &mix_options(11057, faults), |_, _| {}).expect("runs");
    let i = &r.summary.integrity;
    assert_eq!(
        (i.mismatches, i.atomic_errors, i.duplicates, i.lost),
        (0, 0, 0, 0),
        "{:?}",
        i.first_problems
    );
}

/// Harsh plan 31033 on the four-tenant pod, reduced to the 20 faults that matter, left two
/// lines of memory wrong (and two reads stale) until a region whose request was given up
/// stayed on its port for another request timeout (`FaultState::unpin_given_up`). The mix:
/// accelerator 7 withholds VC 2's credits for 20 µs; accelerator 5 (port 0) and its
/// destinations' ports flap; a rogue writer shares accelerator 5's port 1. Accelerator 5's
/// write 5477 to accelerator 4's line 0x55800, sent by port 1, waited behind the credit stall
/// past its timeout and was reported failed; the region, no longer pinned, sent its next write
/// (6026) by port 0, which arrived first, and the given-up write landed after it. Found by
/// the memory audit and the read check together, in a soak
/// (`FAULT_MIX_FROM=31001 FAULT_MIX_PLANS=40 FAULT_MIX_HARSH=1`) in session 23.
#[test]
fn given_up_write_is_not_overtaken_plan_31033() {
    let s = harsh_four_tenant_plan(
        31033,
        Some(&[
            0, 2, 3, 8, 12, 13, 14, 15, 16, 17, 18, 19, 22, 23, 24, 25, 26, 27, 28, 29,
        ]),
    );
    let i = &s.integrity;
    assert!(i.failed > 0 && i.lines_audited > 0, "{i:?}");
    let f = s.faults.as_ref().expect("a fault report");
    assert!(f.regions_held_after_give_up > 0, "{f:?}");
}

/// Harsh plan 37073 on the planes pod with a 4 µs request timeout, reduced to the three
/// faults that matter, left two lines of memory wrong. Accelerator 2's link into switch 1 is
/// down from 7.4 to 16.3 µs (less than the 10 µs hold-off, so never declared down); at
/// 9.5 µs accelerator 6 sends a write to accelerator 2's line 0x61000 into switch 1, where it
/// waits for that link; at 9.9 µs accelerator 6's own port into switch 1 fails, its requests
/// there are given up, and the region was held for a request timeout only: at 13.9 µs its
/// next write went by switch 3 and landed, and when the link came back at 16.3 µs switch 1
/// sent the old write, which landed after it. Two things now stop this, each enough on its
/// own here: switch 1 drops the old write when it would send it, 6.8 µs after it arrived,
/// past its residence limit (the request timeout: `expired` below); and the region is held
/// until the write can no longer be in the fabric (the link's last time up + a residence
/// limit and a request timeout per switch on the path: `regions_held`, and the unit test
/// `sim::accel::tests::fabric_residence_counts_every_switch_on_the_path`). Found by a soak
/// (`FAULT_MIX_FROM=37001 FAULT_MIX_PLANS=100 FAULT_MIX_HARSH=1`) in session 24.
#[test]
fn write_waiting_for_a_link_is_not_overtaken_plan_37073() {
    let mut pod = scenarios::planes_pod("fault-mix, 4 us request timeout");
    pod.accelerator.timeout_us = 4.0;
    let (mut faults, _) = plan_with(&pod, 37073, true);
    keep_only(&mut faults, &[0, 1, 45]);
    let s = run_exact(&pod, 37073, faults);
    let f = s.faults.as_ref().expect("a fault report");
    assert!(f.regions_held > 0, "{f:?}");
    assert!(f.switch_drop("expired") > 0, "{:?}", f.switch_drops);
}

/// A link that flaps with ups too brief to replay (1 ns) keeps what it held from before its
/// first outage: three 1.5 µs outages make one of 4.5 µs, past the 4 µs request timeout, so
/// the link is retrained when it comes back for good (its replay buffer emptied) instead of
/// replaying requests whose operations were reported failed, whose regions' holds count one
/// outage per link (`spec-notes/validation.md#fault-plans`). Before session 24 each outage
/// was counted on its own and no link was retrained here.
#[test]
fn an_outage_goes_on_across_ups_too_brief_to_replay() {
    let mut pod = scenarios::planes_pod("fault-mix, 4 us request timeout");
    pod.accelerator.timeout_us = 4.0;
    let link = PortRef { switch: 1, port: 2 };
    let mut faults = FaultPlan::default();
    let mut t = 2 * US;
    for _ in 0..3 {
        faults.faults.push(Fault {
            at_ps: t,
            what: FaultKind::LinkDown(link),
        });
        t += 1_500_000;
        faults.faults.push(Fault {
            at_ps: t,
            what: FaultKind::LinkUp(link),
        });
        t += 1_000;
    }
    let s = run_exact(&pod, 1, faults);
    let f = s.faults.as_ref().expect("a fault report");
    assert_eq!(f.outages_carried, 2, "{f:?}");
    assert_eq!(f.retrains, 2, "{f:?}");
}

/// `slow-links.toml` and harsh plan `k` on it, which the harness lets fail operations, with
/// the rule of long flaps ([`flapping_outlasts`]) as it applies to any part of the plan.
fn harsh_slow_links_plan(k: u64) -> (PodFile, impl Fn(&FaultPlan) -> bool, FaultPlan) {
    let pod = data_pod("slow-links");
    let fabric = Fabric::build(&pod);
    let timeout_ps = (pod.accelerator.timeout_us * 1e6) as u64;
    let (faults, may_fail) = plan_with(&pod, k, true);
    assert!(may_fail);
    let rule_pod = pod.clone();
    let flagged = move |p: &FaultPlan| flapping_outlasts(&rule_pod, &fabric, p, timeout_ps);
    (pod, flagged, faults)
}

/// Harsh plan 110338 on `slow-links.toml` draws three flapping series on one link, two of
/// them interleaved: from 2.8 to 11.8 µs its outages are at most 1.1 µs of up apart, too
/// little at 232 ns a link latency to finish bring-up and have a replay acknowledged, so the
/// link holds what it took for most of the 10 µs timeout, reaches its hold limit and is
/// reset; 85 operations fail. Each series alone passes. The harness now lets such a plan
/// fail operations ([`flapping_outlasts`]) and still holds it to everything else: found by a
/// soak (`FAULT_MIX_FROM=110338 FAULT_MIX_HARSH=1`) in session 35.
#[test]
fn interleaved_flapping_series_may_fail_operations_plan_110338() {
    let (pod, flagged, faults) = harsh_slow_links_plan(110338);
    assert!(flagged(&faults));
    for series in [0..12, 12..18, 32..44] {
        let mut one = faults.clone();
        keep_only(&mut one, &series.collect::<Vec<_>>());
        assert!(!flagged(&one));
        assert_eq!(run_exact(&pod, 110338, one).integrity.failed, 0);
    }
    let s = run_exact(&pod, 110338, faults);
    let i = &s.integrity;
    assert!(i.failed > 0 && i.requests_accounted(), "{i:?}");
    assert!(s.integrity_ok(), "{i:?}");
}

/// Harsh plan 123297 on `slow-links.toml` takes accelerator 0's plane-1 link down for
/// 4.86 µs; 0.75 µs after it is back, accelerator 7's plane-1 link starts two interleaved
/// flapping series, for 5.3 µs up at most 1.03 µs at a time. A request between the two on
/// plane 1 sent before the first outage waits it out at the switch, and its response then
/// waits out the flapping: two operations fail their 10 µs timeout (five with the rest of
/// the plan). Neither link's outages alone fail any, nor the first with one of the series.
/// The harness lets a plan fail operations when the outages of two links together leave no
/// progress for half a timeout ([`flapping_outlasts`]) and still holds it to everything
/// else: found by a soak
/// (`FAULT_MIX_FROM=123020 FAULT_MIX_PLANS=300 FAULT_MIX_HARSH=1 FAULT_MIX_MODEL=endpoint`)
/// in session 47.
#[test]
fn outages_of_a_paths_two_links_one_after_the_other_may_fail_operations_plan_123297() {
    let (pod, flagged, faults) = harsh_slow_links_plan(123297);
    // The first outage (accelerator 0's link, positions 16-17), then the flapping series
    // (accelerator 7's link, 21-28 and 29-34).
    let first: Vec<usize> = vec![16, 17];
    let series: Vec<usize> = (21..35).collect();
    for (i, keep) in [&first, &series].into_iter().enumerate() {
        let mut one = faults.clone();
        keep_only(&mut one, keep);
        assert!(!flagged(&one), "part {i}");
        assert_eq!(run_exact(&pod, 123297, one).integrity.failed, 0, "part {i}");
    }
    // The first outage with one series fails nothing either (the rule lets the first of
    // these fail operations: it allows more than happens).
    for more in [21..29, 29..35] {
        let mut part = faults.clone();
        keep_only(&mut part, &[first.clone(), more.collect()].concat());
        assert_eq!(run_exact(&pod, 123297, part).integrity.failed, 0);
    }
    let mut both = faults.clone();
    keep_only(&mut both, &[first.clone(), series].concat());
    assert!(flagged(&both));
    let s = run_exact(&pod, 123297, both);
    assert!(
        s.integrity.failed > 0 && s.integrity.requests_accounted(),
        "{:?}",
        s.integrity
    );
    assert!(s.integrity_ok(), "{:?}", s.integrity);
    let s = run_exact(&pod, 123297, faults);
    let i = &s.integrity;
    assert!(i.failed > 0 && i.requests_accounted(), "{i:?}");
    assert!(s.integrity_ok(), "{i:?}");
}

/// Run harsh plan `k` on the four-tenant pod (only the faults at positions `keep`, if
/// given) and check that it drained with nothing lost, duplicated, stale or wrong in memory.
fn harsh_four_tenant_plan(k: u64, keep: Option<&[usize]>) -> podlink_sim::sim::results::Summary {
    let pod = data_pod("four-tenants");
    let (mut faults, _) = plan_with(&pod, k, true);
    if let Some(keep) = keep {
        keep_only(&mut faults, keep);
    }
    run_exact(&pod, k, faults)
}

/// Run `faults` on `pod` (the options of plan `k`) and check that it drained, the
/// conservation balances held and memory was audited, with nothing lost, duplicated, stale
/// or wrong in memory.
fn run_exact(pod: &PodFile, k: u64, faults: FaultPlan) -> podlink_sim::sim::results::Summary {
    let r = run(pod, &mix_options(k, faults), |_, _| {}).expect("runs");
    let s = r.summary;
    let i = &s.integrity;
    assert!(
        s.drained && s.conservation.ok && i.lines_audited > 0,
        "{i:?}"
    );
    assert_eq!(
        (
            i.mismatches,
            i.memory_mismatches,
            i.atomic_errors,
            i.duplicates,
            i.lost
        ),
        (0, 0, 0, 0, 0),
        "{:?}",
        i.first_problems
    );
    s
}

/// Harsh plan 35019 on the four-tenant pod returned 18 stale reads (12 lines of memory
/// wrong) until a region whose request went out of a port declared down stopped counting on
/// "declared down, so it holds nothing" (`Pin::sent_while_down`). Both ports of accelerator
/// 10 stay down past the hold-off (6.9–20.8 µs and 5.2–19.1 µs). At 22.9 µs, with both still
/// declared down as far as the accelerator knew, a write to accelerator 9's line 0xa2d00
/// went out of port 1, whose link was in fact back; at 26.1 µs port 0 was declared up again,
/// and the region's next read moved there "into the same switch" and overtook the write.
/// Found by a soak (`FAULT_MIX_MODEL=composed FAULT_MIX_FROM=35001 FAULT_MIX_PLANS=20
/// FAULT_MIX_HARSH=1`) in session 23; both accelerator models failed it.
#[test]
fn request_sent_on_a_port_declared_down_is_not_overtaken_plan_35019() {
    harsh_four_tenant_plan(35019, None);
}

/// The flap of `flap-leaf-spine.toml` outlasts the hold-off, so the link is retrained on
/// both ends when it comes back, and the retrain drops what the link still held. Those
/// requests and responses count as dropped at link resets (`Sim::note_reset_losses`, as
/// for a link fault's reset), not as still in the fabric: every link is up at the end and
/// nothing is stranded, and every request given up is accounted for.
#[test]
fn a_long_outage_counts_what_its_retrain_drops() {
    let pod = data_pod("flap-leaf-spine");
    let r = run_pod_plan(&pod, 1, 45 * US, US);
    let s = &r.summary;
    let i = &s.integrity;
    let f = s.faults.as_ref().expect("a fault report");
    assert!(f.retrains > 0, "the flap retrains its link: {f:?}");
    assert!(s.drained && s.sound(), "{i:?}");
    assert!(i.requests_timed_out > 0 && i.reset_drops > 0, "{i:?}");
    assert_eq!(i.stranded, 0, "nothing left in the fabric: {i:?}");
    assert_eq!(
        i.requests_timed_out + i.requests_abandoned,
        i.traced(),
        "{i:?}"
    );
}

/// The same flap with address compression on every link (`link.compress_requests`): the
/// retrain clears both ends' address caches together (the switch port's decoder and
/// encoder, the accelerator's requester and completer), so what is sent after it is
/// expanded against a cache in step; nothing fails to expand, every request given up is
/// accounted for, with either accelerator model.
#[test]
fn a_retrain_clears_the_address_caches_of_both_ends() {
    for model in [AccelModel::Endpoint, AccelModel::Composed] {
        let mut pod = data_pod("flap-leaf-spine");
        pod.link.compress_requests = true;
        pod.accelerator.model = model;
        let r = run_pod_plan(&pod, 1, 45 * US, US);
        let s = &r.summary;
        let i = &s.integrity;
        let f = s.faults.as_ref().expect("a fault report");
        assert!(
            f.retrains > 0,
            "{model:?}: the flap retrains its link: {f:?}"
        );
        assert!(s.links.requests_expanded > 0, "{model:?}");
        assert!(s.drained && s.sound(), "{model:?}: {i:?}");
        assert!(s.conservation.ok, "{model:?}: {:?}", s.conservation);
        assert_eq!(
            i.requests_timed_out + i.requests_abandoned,
            i.traced(),
            "{model:?}: {i:?}"
        );
    }
}

/// A link between two switches is one link whichever of its ports a fault names. Harsh plan
/// 109562 on `tight-credits.toml` took leaf 1's uplink to spine 3 down from the spine's side,
/// again from the leaf's (while down), up from the spine's side after 9.2 µs (under the
/// request timeout: no retrain), and up again from the leaf's. The simulator kept each
/// link's outage under the end a fault named, so the second down started a hold-off of its
/// own that declared the link down 2 µs after it came back, and the second up then retrained
/// a link whose PHY was already up, without bringing it up again: the link stayed reset for
/// good, its ends without credits, and 36 responses waited in leaf 1 for ever (the run went
/// on to its 1 ms drain limit). Found by the balance of requests given up, as requests
/// stranded in a fabric whose every link and VC was up. A fault's link is now kept under one
/// end (`Sim::ends_of`), a down of a link already down and an up of a link already up do
/// nothing, and this plan leaves every link up and nothing in the fabric.
#[test]
fn a_link_named_from_both_ends_is_one_link() {
    let path = format!(
        "{}/tests/data/pods/tight-credits.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut text = std::fs::read_to_string(&path).expect("the pod file");
    text.push_str(
        r#"
[faults]
holdoff_us = 10
notify_us = 0.1
[[faults.events]]
at_us = 1.15
kind = "link-down"
switch = 3
port = 1
[[faults.events]]
at_us = 2.43
kind = "link-down"
switch = 1
port = 4
[[faults.events]]
at_us = 10.39
kind = "link-up"
switch = 3
port = 1
[[faults.events]]
at_us = 13.44
kind = "link-up"
switch = 1
port = 4
"#,
    );
    let pod = PodFile::parse(&text, &path).expect("a pod file");
    let r = run_pod_plan(&pod, 109_562, 5 * US, US / 2);
    let s = &r.summary;
    let i = &s.integrity;
    let f = s.faults.as_ref().expect("a fault report");
    assert!(s.drained && s.sound(), "{i:?}");
    assert_eq!(i.stranded, 0, "nothing left in the fabric: {i:?}");
    assert!(
        !f.timeline
            .iter()
            .any(|e| matches!(e.what, podlink_sim::sim::fault::Happening::Declared { .. })),
        "the link was never down past the hold-off: {:?}",
        f.timeline
    );
    assert!(
        s.end_ns < 100_000.0,
        "the run drains long before its limit: {} ns",
        s.end_ns
    );
}

/// After a 2 µs flap of a spine's link to a leaf on a busy pod, the leaf drops requests of
/// fenced flows (`PinLost`) only while the port settles: the drops of a 45 µs run and of a
/// 60 µs run are the same (30 and 45 µs until session 33, when the settle time, the per-hop
/// bound `PodFile::hop_residence_ps`, went from 20 to 30 µs on this pod). (When a fenced flow was held as long as other flows of its bucket
/// kept diverting, the leaf dropped such requests until the end of the run: 1,039–1,128 in
/// 30 µs on seeds 1–4.) Nothing is lost, duplicated or wrong either way.
#[test]
fn drops_after_a_flap_end_with_the_first_window() {
    let pod = data_pod("flap-leaf-spine");
    let drops = |us: u64| {
        let r = run_pod_plan(&pod, 1, us * US, US);
        let i = &r.summary.integrity;
        assert!(i.sound_but_failed(), "{:?}", i.first_problems);
        let f = r.summary.faults.as_ref().expect("a fault report");
        f.switch_drop("pin-lost")
    };
    let (short, long) = (drops(45), drops(60));
    assert!(short > 0, "the flap fences flows whose hash way came back");
    assert_eq!(short, long, "no drops after the first settling window");
}
