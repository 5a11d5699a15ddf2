//! The pass criteria of every scenario: pure functions of the run's summary (and of the
//! scenario's parameters), so that tests can judge doctored results.

use super::{Check, Figure, Outcome};
use crate::pod::topology::RouteProblem;
use crate::sim::fault::{Entry, FaultReport, Happening, OpRecord, PortRef};
use crate::sim::results::{Report, Summary};
use crate::sim::SimError;

/// Collects checks and figures, then gives the verdict.
pub struct Judge {
    name: String,
    checks: Vec<Check>,
    figures: Vec<Figure>,
}

impl Judge {
    /// A judge for scenario `name`.
    pub fn new(name: &str) -> Judge {
        Judge {
            name: name.to_string(),
            checks: Vec::new(),
            figures: Vec::new(),
        }
    }

    /// A criterion (`what` states it with the measured values).
    pub fn check(&mut self, ok: bool, what: impl Into<String>) -> bool {
        self.checks.push(Check {
            what: what.into(),
            ok,
        });
        ok
    }

    /// A key figure.
    pub fn fig(&mut self, name: &str, value: f64) {
        self.figures.push(Figure {
            name: name.to_string(),
            value,
        });
    }

    /// What every running scenario requires of the integrity checker and the conservation
    /// balances; `failed_ok`: operations reported failed are allowed (faults that lose
    /// frames), though never silently lost, duplicated or wrong.
    pub fn sound(&mut self, s: &Summary, failed_ok: bool) {
        let i = &s.integrity;
        self.check(
            s.drained && i.lost == 0,
            format!("every operation finished (lost {})", i.lost),
        );
        self.check(i.duplicates == 0, format!("duplicated {}", i.duplicates));
        self.check(
            i.mismatches == 0 && i.atomic_errors == 0,
            format!(
                "corrupted: {} read mismatches, {} atomic errors",
                i.mismatches, i.atomic_errors
            ),
        );
        self.check(
            i.lines_audited > 0 && i.memory_mismatches == 0,
            format!(
                "memory audited after the drain: {} lines, {} wrong, {} left by failed writes",
                i.lines_audited, i.memory_mismatches, i.memory_excused
            ),
        );
        self.check(
            s.conservation.ok,
            format!(
                "conservation: {} operations = {} completed + {} open",
                s.conservation.ops_issued, s.conservation.ops_completed, s.conservation.ops_open
            ),
        );
        if !failed_ok {
            self.check(i.failed == 0, format!("failed {}", i.failed));
        }
        self.check(
            i.lines_checked > 0,
            format!("reads checked: {} lines", i.lines_checked),
        );
    }

    /// The verdict: PASS when every check held.
    pub fn finish(self, pass_reason: &str) -> Outcome {
        let failed: Vec<&str> = self
            .checks
            .iter()
            .filter(|c| !c.ok)
            .map(|c| c.what.as_str())
            .collect();
        let (verdict, reason) = if failed.is_empty() {
            (
                "PASS",
                format!("{pass_reason} ({} checks)", self.checks.len()),
            )
        } else {
            ("FAIL", failed.join("; "))
        };
        Outcome {
            scenario: self.name,
            verdict,
            figures: self.figures,
            checks: self.checks,
            reason,
        }
    }
}

/// A scenario whose run could not start (its pod or plan was refused).
pub fn not_run(name: &str, e: &SimError) -> Outcome {
    let mut j = Judge::new(name);
    j.check(false, format!("the run was refused: {e}"));
    j.finish("")
}

fn faults<'a>(j: &mut Judge, s: &'a Summary) -> Option<&'a FaultReport> {
    let f = s.faults.as_ref();
    j.check(f.is_some(), "the run has a fault report");
    f
}

fn us(ps: u64) -> f64 {
    (ps as f64 / 1e3).round() / 1e3
}

/// The 99th percentile of `v` (ns), 0 when empty.
fn p99_ns(mut v: Vec<u64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable();
    let i = ((v.len() as f64 * 0.99).ceil() as usize).clamp(1, v.len()) - 1;
    v[i] as f64 / 1000.0
}

/// Time of a fault of the plan (absolute ps), by index.
fn fault_at(f: &FaultReport, i: usize) -> u64 {
    f.inject_from_ps + f.plan.get(i).map_or(0, |x| x.at_ps)
}

// ---- bit-error sweep -------------------------------------------------------------------

/// Replays never decrease as the bit error rate grows, none at 0, some at the highest rate;
/// every run loses, duplicates, corrupts and fails nothing. The slowest operation of the
/// sweep is reported (a flit corrupted with nothing behind it waits for the ack timeout).
pub fn bit_error_sweep(points: &[(f64, Summary)]) -> Outcome {
    let mut j = Judge::new("bit-error-sweep");
    let worst = points
        .iter()
        .flat_map(|(_, s)| s.latency.iter().map(|c| c.latency.max_ns))
        .fold(0.0f64, f64::max);
    let mut last = 0u64;
    let mut monotonic = true;
    for (ber, s) in points {
        j.fig(&format!("replays@{ber:e}"), s.links.replays as f64);
        monotonic &= s.links.replays >= last;
        last = s.links.replays;
        let i = &s.integrity;
        j.check(
            s.drained && s.sound(),
            format!(
                "BER {ber:e}: lost {}, duplicated {}, corrupted {}, failed {}, conservation {}",
                i.lost,
                i.duplicates,
                i.mismatches + i.atomic_errors,
                i.failed,
                if s.conservation.ok { "ok" } else { "FAILED" }
            ),
        );
    }
    let replays: Vec<u64> = points.iter().map(|(_, s)| s.links.replays).collect();
    j.check(
        monotonic,
        format!("replays non-decreasing with BER: {replays:?}"),
    );
    if let Some((ber, s)) = points.first() {
        j.check(
            *ber > 0.0 || s.links.replays == 0 && s.links.crc_errors == 0,
            format!(
                "no CRC errors or replays at BER 0 ({} / {})",
                s.links.crc_errors, s.links.replays
            ),
        );
    }
    if let Some((ber, s)) = points.last() {
        j.check(
            s.links.crc_errors > 0 && s.links.replays > 0,
            format!(
                "BER {ber:e} causes CRC errors and replays ({} / {})",
                s.links.crc_errors, s.links.replays
            ),
        );
        j.fig("crc_errors@max", s.links.crc_errors as f64);
    }
    let not_up: u64 = points
        .iter()
        .filter_map(|(_, s)| s.faults.as_ref())
        .map(|f| f.links_not_up)
        .sum();
    j.check(
        not_up == 0,
        format!("every link end is Up at the end of every run ({not_up} are not: Fault after repeated ack timeouts)"),
    );
    j.fig(
        "ops",
        points
            .iter()
            .map(|(_, s)| s.conservation.ops_completed as f64)
            .sum(),
    );
    j.fig("max_latency_us", (worst / 10.0).round() / 100.0);
    let slow: usize = points
        .iter()
        .filter_map(|(_, s)| s.faults.as_ref())
        .map(|f| {
            f.ops
                .iter()
                .filter(|o| o.done_ps - o.issued_ps > 1_000_000_000)
                .count()
        })
        .sum();
    j.fig("ops_over_1ms", slow as f64);
    j.check(
        points.len() >= 3,
        format!("{} bit error rates", points.len()),
    );
    j.finish("replays grow with BER, nothing lost")
}

// ---- link flap -------------------------------------------------------------------------

/// Ops that touch accelerator `a` through its port `k` (as source or destination).
fn via(o: &OpRecord, a: u32, k: u32) -> bool {
    (o.src == a || o.dst == a) && o.ports & (1 << k) != 0
}

/// The link of accelerator `a`'s port `k` went down mid-traffic and came back: flits were
/// lost on the wire, the switch never flushed (the outage was shorter than the hold-off),
/// operations in flight across it and issued after it completed, every link is up again, and
/// nothing failed.
pub fn link_flap(s: &Summary, a: u32, k: u32) -> Outcome {
    let mut j = Judge::new("link-flap");
    if let Some(f) = faults(&mut j, s) {
        let down = fault_at(f, 0);
        let up = fault_at(f, 1);
        j.fig("outage_us", us(up - down));
        j.fig("flits_lost", f.flits_lost as f64);
        j.check(
            f.flits_lost > 0,
            format!("DL flits lost on the wire at the flap: {}", f.flits_lost),
        );
        let crossing: Vec<&OpRecord> = f
            .ops
            .iter()
            .filter(|o| via(o, a, k) && o.issued_ps < down && o.done_ps > down)
            .collect();
        let crossing_ok = crossing.iter().filter(|o| o.ok).count();
        j.fig("in_flight_at_flap", crossing.len() as f64);
        j.check(
            !crossing.is_empty() && crossing_ok == crossing.len(),
            format!(
                "operations in flight across the link at the flap completed: {crossing_ok} of {}",
                crossing.len()
            ),
        );
        let worst = crossing
            .iter()
            .map(|o| o.done_ps - o.issued_ps)
            .max()
            .unwrap_or(0);
        j.fig("their_max_latency_us", us(worst));
        let after = f
            .ops
            .iter()
            .filter(|o| via(o, a, k) && o.issued_ps >= up && o.ok)
            .count();
        j.fig("ops_after_up", after as f64);
        j.check(
            after > 0,
            format!(
                "traffic resumed on the link: {after} operations issued after it came up completed"
            ),
        );
        j.check(
            f.link_downs >= 2 && f.links_not_up == 0,
            format!(
                "both link ends went down ({}) and every link end is up at the end ({} not up)",
                f.link_downs, f.links_not_up
            ),
        );
        let flushed = f.switch_drop("flushed");
        j.check(
            flushed == 0,
            format!("switch flushed nothing: {flushed} frames"),
        );
    }
    j.sound(s, false);
    j.finish("link recovered, nothing lost or failed")
}

// ---- port and plane failure ------------------------------------------------------------

/// When endpoints learned that `p` is down (absolute ps).
fn notified_down(f: &FaultReport, p: PortRef) -> Option<u64> {
    f.first(|h| matches!(h, Happening::Notified { at, state } if *at == p && state == "down"))
        .map(|e| e.t_ps)
}

/// Checks shared by port and plane failure: failures only among operations issued before
/// the endpoints knew; everything issued afterwards (and `touches`) completed, none of it on
/// port `k`.
fn moved(j: &mut Judge, f: &FaultReport, detect: u64, k: u32, touches: impl Fn(&OpRecord) -> bool) {
    let failed: Vec<&OpRecord> = f.ops.iter().filter(|o| !o.ok).collect();
    let late = failed.iter().filter(|o| o.issued_ps >= detect).count();
    j.fig("failed", failed.len() as f64);
    j.fig(
        "open_at_fault",
        f.open_at_fault.first().copied().unwrap_or(0) as f64,
    );
    j.check(
        late == 0,
        format!(
            "every failed operation was issued before endpoints knew ({late} of {} after)",
            failed.len()
        ),
    );
    let after: Vec<&OpRecord> = f
        .ops
        .iter()
        .filter(|o| o.issued_ps >= detect && touches(o))
        .collect();
    let ok = after.iter().filter(|o| o.ok).count();
    let on_k = after.iter().filter(|o| o.ports & (1 << k) != 0).count();
    j.fig("moved_ops", after.len() as f64);
    j.check(
        !after.is_empty() && ok == after.len(),
        format!(
            "operations issued after detection completed: {ok} of {}",
            after.len()
        ),
    );
    j.check(on_k == 0, format!("none of them used port {k}: {on_k} did"));
}

/// Port `p` (accelerator `a`'s port `k`) failed: its queued frames were flushed, endpoints
/// learned of it, operations in flight either completed or were reported failed once,
/// operations issued afterwards to or from `a` went over the other planes and completed.
pub fn port_failure(s: &Summary, p: PortRef, a: u32, k: u32) -> Outcome {
    let mut j = Judge::new("port-failure");
    if let Some(f) = faults(&mut j, s) {
        let detect = notified_down(f, p);
        j.check(
            detect.is_some(),
            format!(
                "endpoints were told switch {} port {} is down",
                p.switch, p.port
            ),
        );
        let detect = detect.unwrap_or(u64::MAX);
        j.fig("detect_us", us(detect.saturating_sub(fault_at(f, 0))));
        j.fig("flushed", f.switch_drop("flushed") as f64);
        moved(&mut j, f, detect, k, |o| o.src == a || o.dst == a);
    }
    j.sound(s, true);
    j.finish("traffic moved to the other planes; failures reported once, before detection")
}

/// Switch `plane` failed: every accelerator's port on it is known down, operations issued
/// afterwards completed over the other planes, each of which carried some.
pub fn plane_failure(s: &Summary, plane: u32, planes: u32) -> Outcome {
    let mut j = Judge::new("plane-failure");
    if let Some(f) = faults(&mut j, s) {
        let notes: Vec<u64> = f
            .timeline
            .iter()
            .filter_map(|e| match &e.what {
                Happening::Notified { at, state } if at.switch == plane && state == "down" => {
                    Some(e.t_ps)
                }
                _ => None,
            })
            .collect();
        let ports = s.accelerators as usize;
        j.check(
            notes.len() == ports,
            format!(
                "endpoints were told every port of switch {plane} is down ({} of {ports})",
                notes.len()
            ),
        );
        let detect = notes.iter().copied().max().unwrap_or(u64::MAX);
        j.fig("detect_us", us(detect.saturating_sub(fault_at(f, 0))));
        j.fig("flushed", f.switch_drop("flushed") as f64);
        moved(&mut j, f, detect, plane, |_| true);
        let per_plane: Vec<usize> = (0..planes)
            .map(|k| {
                f.ops
                    .iter()
                    .filter(|o| o.issued_ps >= detect && o.ports & (1 << k) != 0)
                    .count()
            })
            .collect();
        let others_busy = (0..planes)
            .filter(|&k| k != plane)
            .all(|k| per_plane[k as usize] > 0);
        j.check(
            others_busy,
            format!("every other plane carried new operations: {per_plane:?}"),
        );
    }
    j.sound(s, true);
    j.finish("every accelerator moved to the remaining planes")
}

// ---- degraded drain --------------------------------------------------------------------

/// Plan entries: 0 mark, 1 errors start, 2 mark (drained window starts), 3 the port fails.
/// The port reached Degraded (through the switch's health monitor) before the second mark;
/// from then to the failure it carried at most 2 % of the frames its switch sent over it and
/// `others` (the other ways), against at least 15 % before the errors; its failure flushed at
/// most one frame or fewer than without the drain, and failed fewer operations than the same failure fails without the drain
/// (`baseline`), every one reported once. (Not none: by the ordering rule the flows that go
/// by hash keep their port until it fails, whatever its health, so the failure still fails
/// what they have in flight; `switch.md#ordering-rule`.)
pub fn degraded_drain(s: &Summary, baseline: &Summary, p: PortRef, others: &[u32]) -> Outcome {
    let mut j = Judge::new("degraded-drain");
    if let Some(f) = faults(&mut j, s) {
        let entry =
            |i: usize| f.first(|h| matches!(h, Happening::Applied { index } if *index == i));
        let degraded = f.first(
            |h| matches!(h, Happening::Health { at, to, .. } if *at == p && to == "degraded"),
        );
        let drained_from = fault_at(f, 2);
        j.check(
            degraded.is_some_and(|d| d.t_ps <= drained_from),
            format!(
                "the port reached Degraded before {} us: at {} us",
                us(drained_from - f.inject_from_ps),
                degraded.map_or(-1.0, |d| us(d.t_ps - f.inject_from_ps))
            ),
        );
        if let Some(d) = degraded {
            j.fig(
                "degraded_after_us",
                us(d.t_ps.saturating_sub(fault_at(f, 1))),
            );
        }
        let share = |a: Option<&Entry>, b: Option<&Entry>| {
            let (Some(a), Some(b)) = (a, b) else {
                return (0.0, 0);
            };
            let d = |q: u32| {
                let at = |e: &Entry| e.tx_frames.get(q as usize).copied().unwrap_or(0);
                at(b).saturating_sub(at(a))
            };
            let mine = d(p.port);
            let total = mine + others.iter().map(|&q| d(q)).sum::<u64>();
            let r = if total == 0 {
                0.0
            } else {
                mine as f64 / total as f64
            };
            ((r * 1000.0).round() / 1000.0, total)
        };
        let (before, n0) = share(entry(0), entry(1));
        let (drained, n1) = share(entry(2), entry(3));
        j.fig("share_before", before);
        j.fig("share_drained", drained);
        j.check(
            n0 > 0 && before >= 0.15,
            format!(
                "before the errors it carried a fair share: {:.1} % of {n0} frames",
                before * 100.0
            ),
        );
        j.check(
            n1 > 0 && drained <= 0.02,
            format!(
                "drained while Degraded: {:.1} % of {n1} frames",
                drained * 100.0
            ),
        );
        let flushed = f.switch_drop("flushed");
        let base_flushed = baseline
            .faults
            .as_ref()
            .map_or(0, |b| b.switch_drop("flushed"));
        j.fig("flushed_at_failure", flushed as f64);
        j.fig("flushed_undrained", base_flushed as f64);
        j.check(
            flushed <= 1 || flushed < base_flushed,
            format!("its failure flushed {flushed} frames, undrained {base_flushed}"),
        );
        let failed = s.integrity.failed;
        let base = baseline.integrity.failed;
        j.fig("failed", failed as f64);
        j.fig("failed_undrained", base as f64);
        j.check(
            base > 0 && failed < base,
            format!("the failure failed {failed} operations, undrained {base}"),
        );
        let base_degraded = baseline.faults.as_ref().is_none_or(|b| {
            b.timeline.iter().any(|e| {
                matches!(&e.what, Happening::Health { at, to, .. } if *at == p && to == "degraded")
            })
        });
        j.check(
            !base_degraded,
            "the baseline's port never degraded before it failed",
        );
    }
    j.sound(s, true);
    j.finish("drained while Degraded; its failure cost a fraction of the undrained one")
}

// ---- VC starvation ---------------------------------------------------------------------

/// While accelerator `a` withholds `vc`'s credits (from 1 µs after the start, the credits it
/// had granted being used up, to the release) no `vc` operation to it completes; other-VC
/// operations (to it too) keep completing with p99 within `budget_ns`; after the release `vc`
/// completes again, and nothing fails.
pub fn vc_starvation(s: &Summary, a: u32, vc: u8, budget_ns: f64) -> Outcome {
    let mut j = Judge::new("vc-starvation");
    if let Some(f) = faults(&mut j, s) {
        let (w, r) = (fault_at(f, 0), fault_at(f, 1));
        let settle = w + 1_000_000;
        let in_win = |o: &&OpRecord| o.done_ps >= settle && o.done_ps < r;
        let starved = f
            .ops
            .iter()
            .filter(|o| o.vc == vc && o.dst == a)
            .filter(in_win)
            .count();
        let before = f
            .ops
            .iter()
            .filter(|o| o.vc == vc && o.dst == a && o.done_ps < w)
            .count();
        let after = f
            .ops
            .iter()
            .filter(|o| o.vc == vc && o.dst == a && o.done_ps >= r)
            .count();
        let others: Vec<&OpRecord> = f.ops.iter().filter(|o| o.vc != vc).filter(in_win).collect();
        let to_a = others.iter().filter(|o| o.dst == a).count();
        let p99 = p99_ns(others.iter().map(|o| o.done_ps - o.issued_ps).collect());
        let p99_before = p99_ns(
            f.ops
                .iter()
                .filter(|o| {
                    o.vc != vc && o.issued_ps >= f.inject_from_ps + 1_000_000 && o.done_ps < w
                })
                .map(|o| o.done_ps - o.issued_ps)
                .collect(),
        );
        j.fig("starved_vc_done_in_window", starved as f64);
        j.fig("other_vc_done_in_window", others.len() as f64);
        j.fig("other_vc_p99_ns", p99);
        j.fig("other_vc_p99_before_ns", p99_before);
        j.check(
            before > 0,
            format!("VC {vc} operations to {a} completed before the withholding: {before}"),
        );
        j.check(
            starved == 0,
            format!("VC {vc} made no progress while starved: {starved} completed"),
        );
        j.check(
            !others.is_empty() && to_a > 0,
            format!(
                "other VCs kept completing: {} operations, {to_a} of them to {a}",
                others.len()
            ),
        );
        j.check(
            p99 > 0.0 && p99 <= budget_ns,
            format!("their p99 {p99:.1} ns within the {budget_ns} ns budget"),
        );
        j.check(
            after > 0,
            format!("VC {vc} resumed after the release: {after} completed"),
        );
    }
    j.sound(s, false);
    j.finish("the starved VC stopped, the others kept flowing")
}

// ---- incast isolation ------------------------------------------------------------------

/// Partition 2's p99 stays within `budget_ns` while partition 1 runs an incast that raises
/// its own p99 at least 4×; the ratio to partition 2 alone is reported.
pub fn incast_isolation(with: &Summary, alone: &Summary, budget_ns: f64) -> Outcome {
    let mut j = Judge::new("incast-isolation");
    let (hot, victim) = match with.partitions.as_slice() {
        [a, b, ..] => (a, b),
        _ => {
            j.check(false, "two partitions reported");
            return j.finish("");
        }
    };
    let base = alone
        .partitions
        .iter()
        .find(|p| p.id == victim.id)
        .map_or(0.0, |p| p.latency.p99_ns);
    j.fig("victim_p99_ns", victim.latency.p99_ns);
    j.fig("victim_alone_p99_ns", base);
    j.fig(
        "victim_ratio",
        if base > 0.0 {
            (victim.latency.p99_ns / base * 1000.0).round() / 1000.0
        } else {
            0.0
        },
    );
    j.fig("incast_p99_ns", hot.latency.p99_ns);
    j.check(
        victim.latency.count > 0 && victim.latency.p99_ns <= budget_ns,
        format!(
            "partition {} p99 {:.1} ns within the {budget_ns} ns budget",
            victim.id, victim.latency.p99_ns
        ),
    );
    j.check(
        hot.latency.p99_ns >= 4.0 * victim.latency.p99_ns,
        format!(
            "the incast congests partition {}: p99 {:.1} ns (at least 4x the other's)",
            hot.id, hot.latency.p99_ns
        ),
    );
    j.sound(with, false);
    j.check(alone.sound(), "the baseline run is sound");
    j.finish("the other partition kept its latency")
}

// ---- rogue frames ----------------------------------------------------------------------

/// Every rogue write was dropped by the switch and counted under `reason` (in the switch's
/// own counters and the model's), the rogue requester saw each go unanswered, no line of the
/// target range changed, and the legitimate operations are all intact.
pub fn rogue(s: &Summary, name: &str, reason: &str) -> Outcome {
    let mut j = Judge::new(name);
    if let Some(f) = faults(&mut j, s) {
        let r = f.rogues.first().cloned().unwrap_or_default();
        let counted = f.switch_drop(reason);
        let model = s.drops.iter().find(|(k, _)| k == reason).map_or(0, |x| x.1);
        j.fig("sent", r.sent as f64);
        j.fig("switch_counter", counted as f64);
        j.fig("lines_changed", r.lines_changed as f64);
        j.check(r.sent > 0, format!("rogue writes sent: {}", r.sent));
        j.check(
            counted == r.sent && model == r.sent,
            format!(
                "dropped and counted as {reason}: switch counter {counted}, model {model}, of {} sent",
                r.sent
            ),
        );
        j.check(
            r.failed == r.sent && r.answered == 0,
            format!(
                "unanswered at the issuer: {} failed, {} answered",
                r.failed, r.answered
            ),
        );
        j.check(
            r.lines_checked > 0 && r.lines_changed == 0,
            format!(
                "memory untouched: {} of {} target lines changed",
                r.lines_changed, r.lines_checked
            ),
        );
    }
    j.sound(s, false);
    j.finish("dropped, counted, no effect")
}

// ---- refused pods ----------------------------------------------------------------------

/// The run was refused before anything was simulated, with a route error naming `entry` and
/// a problem `want` accepts.
pub fn refused(
    r: &Result<Report, SimError>,
    name: &str,
    entry: &str,
    want: impl Fn(&RouteProblem) -> bool,
) -> Outcome {
    let mut j = Judge::new(name);
    match r {
        Ok(rep) => {
            j.check(
                false,
                format!(
                    "the pod was not refused: it ran ({} events)",
                    rep.summary.events
                ),
            );
        }
        Err(SimError::Route {
            entry: e, problem, ..
        }) => {
            j.check(
                true,
                format!(
                    "refused before the run: {}",
                    r.as_ref()
                        .err()
                        .map(ToString::to_string)
                        .unwrap_or_default()
                ),
            );
            j.check(
                e == entry,
                format!("the error names `{e}` (want `{entry}`)"),
            );
            j.check(want(problem), format!("the problem: {problem}"));
        }
        Err(e) => {
            j.check(false, format!("refused, but not for its routes: {e}"));
        }
    }
    let reason = match r {
        Err(e) => format!("refused: {e}"),
        Ok(_) => String::new(),
    };
    j.finish(&reason)
}
