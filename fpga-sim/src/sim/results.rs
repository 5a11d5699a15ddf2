//! Running a pod and collecting its results (`spec-notes/simulator.md#results`).

use super::trace::{is_wait, TRACE_AT};
use super::{Options, Sim, SimError};
use crate::pod::timing::Stage;
use crate::pod::PodFile;
use crate::report::{Latency, OpClass};

pub use super::summary::{
    ClassLatency, Conservation, Counters, LinkTotals, PartitionResult, Report, StageNs, Summary,
    Verdict, DROP_REASONS,
};

fn ns_of(ps: u64) -> f64 {
    (ps as f64 / 1000.0 * 1000.0).round() / 1000.0
}

fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let q: f64 = x.iter().map(|v| v * v).sum();
    if q == 0.0 {
        1.0
    } else {
        (s * s / (x.len() as f64 * q) * 1e6).round() / 1e6
    }
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// Run a pod: inject for the options' duration, drain, check, and report. `progress` is
/// called with (simulated ps, injection end ps) as the run goes.
///
/// # Errors
/// As [`Sim::new`]: routes refused before the run, a fault naming something the pod lacks,
/// a workload trace that cannot be read or parsed.
pub fn run(
    pod: &PodFile,
    opts: &Options,
    progress: impl FnMut(u64, u64),
) -> Result<Report, SimError> {
    run_then(pod, opts, progress, |_| {})
}

/// [`run`], with `before_report` given the simulator once the run has drained (tests use it
/// to break what the checks must catch).
pub(crate) fn run_then(
    pod: &PodFile,
    opts: &Options,
    progress: impl FnMut(u64, u64),
    before_report: impl FnOnce(&mut Sim),
) -> Result<Report, SimError> {
    run_built(Sim::new(pod, opts)?, opts, progress, before_report)
}

/// [`run_then`] on a pod model already built from `opts`.
pub(crate) fn run_built(
    mut sim: Sim,
    opts: &Options,
    mut progress: impl FnMut(u64, u64),
    before_report: impl FnOnce(&mut Sim),
) -> Result<Report, SimError> {
    // First the zero-load read on the idle pod, then the workloads from the next microsecond.
    let zero = sim.trace_read(TRACE_AT);
    let start = (sim.now() / 1_000_000 + 1) * 1_000_000;
    sim.run_to(start);
    sim.start_workload(start);
    let end = start + opts.duration_ps;
    let step = (opts.duration_ps / 100).max(100_000);
    let mut t = start;
    while t < end {
        t = (t + step).min(end);
        sim.run_to(t);
        progress(t - start, opts.duration_ps);
    }
    // The drain limit: the options' drain or eight request timeouts, whichever is longer,
    // and eight timeouts after the last operation that completed (operations waiting behind
    // a full requester start their timeouts late, a requester's worth at a time).
    let window = sim.drain_limit_ps(0);
    let mut limit = end.saturating_add(sim.drain_limit_ps(opts.drain_ps));
    let mut open = sim.accels.open();
    while open > 0 || sim.fault.as_ref().is_some_and(|f| f.rogues_open()) {
        // Jump over idle time (a lost last flit waits for the link's ack timeout).
        match sim.next_event() {
            Some(t) if t <= limit => sim.run_to(t.max(sim.now() + step).min(limit)),
            _ => break,
        };
        let now_open = sim.accels.open();
        if now_open < open {
            limit = limit.max(sim.now().saturating_add(window));
        }
        open = now_open;
    }
    // Without faults, a request that timed out may still have its request or response in
    // the fabric when the last operation completes: run on until every one has left its
    // trace (answered late, or dropped by a switch), so that the memory audit sees each late
    // write land and the timeouts balance (`Integrity::timeouts_accounted`). A frame lost
    // without a trace keeps this going to the drain limit, and the balance fails the run.
    // Every request given up leaves its trace within a tag quarantine of its timeout (the
    // request's and its response's bounded lives in the fabric, and the completer's), so
    // the limit is at least that from now: a pod whose links take milliseconds recovers
    // more slowly than the default drain.
    let settle = super::accel::tag_quarantine(&sim.pod, &sim.fabric).as_ps();
    limit = limit.max(sim.now().saturating_add(settle));
    if !sim.fault_events_planned() {
        while sim.untraced_timeouts() > 0 {
            match sim.next_event() {
                Some(t) if t <= limit => sim.run_to(t.max(sim.now() + step).min(limit)),
                _ => break,
            };
        }
    }
    // With faults, once the fabric is whole again what is still in it (late responses, a
    // replay's flits, frames queued behind a link that came back) can still move: run on
    // until it has all landed (at most to the drain limit), so that the report finds
    // nothing stranded unless something is stuck for good.
    if sim.fault_events_planned() && sim.fabric_whole() {
        while sim.stranded() > 0 {
            match sim.next_event() {
                Some(t) if t <= limit => sim.run_to(t.max(sim.now() + step).min(limit)),
                _ => break,
            };
        }
    }
    before_report(&mut sim);
    Ok(sim.report(zero))
}

impl Sim {
    pub(crate) fn report(mut self, zero: Option<(Vec<Stage>, u64, u32)>) -> Report {
        let now = self.now().max(1);
        let drained = self.accels.open() == 0;
        // Integrity: lost operations, atomics and the memory audit (only meaningful when
        // drained), reads that disagreed (excused only by failed writes).
        self.reference.found.lost = self.accels.open() as u64;
        self.reference.resolve();
        self.check_rogue_targets();
        if drained {
            // Every line written holds its last write (or what failed writes may leave).
            self.reference.audit(&self.mem.borrow());
            let n = self.fabric.accels;
            let counters: Vec<u64> = (0..n).map(|d| self.counter(d)).collect();
            self.reference
                .check_atomics(|d| counters.get(d as usize).copied().unwrap_or(0));
        }
        // Every DL flit in flight (lost ones too, until their arrival time) holds one slot.
        debug_assert_eq!(
            self.flits.in_use(),
            self.wires.iter().map(|w| w.flight.len()).sum::<usize>(),
            "flit slots in use vs flits in flight"
        );
        // Conservation.
        let mut c = Conservation::default();
        let mut links = LinkTotals::default();
        let mut rows = Vec::new();
        let mut util_sum = 0.0;
        let mut payload_sum = 0.0;
        let window_len = (self.inject_until - self.inject_from).max(1) as f64;
        let mut ok = true;
        for e in 0..self.ends() {
            let link = self.link_of(e);
            let peer = self.peer[e] as usize;
            let rx = &self.rxs[peer];
            let st = link.stats();
            let rs = link.retry().stats();
            let peer_rs = self.link_of(peer).retry().stats();
            // TL flits: submitted = queued in the link + packed into DL flits; packed =
            // delivered + on the wire or awaiting replay; when the link has nothing in
            // flight, packed = delivered exactly.
            let queued = (super::LINK_TXQ - link.tx_room()) as u64;
            let packed = st.tl_packed;
            let hot = &self.hot[e];
            let wire = &self.wires[e];
            // A retrained end dropped TL flits (`Sim::retrain`): queued ones were never
            // packed, packed ones never delivered.
            let (dq, dp) = self.discarded(e as u32);
            if hot.tl_submitted != queued + packed + dq || packed < rx.tl_delivered + dp {
                ok = false;
            }
            if link.retry().buffered() == 0
                && wire.flight.is_empty()
                && packed != rx.tl_delivered + dp
            {
                ok = false;
            }
            let in_flight = hot.tl_submitted.saturating_sub(rx.tl_delivered + dq + dp);
            c.tl_injected += hot.tl_submitted;
            c.tl_delivered += rx.tl_delivered;
            c.tl_in_flight += in_flight;
            c.tl_discarded += dq + dp;
            let util = hot.busy_window_ps as f64 / window_len;
            util_sum += util;
            links.utilisation_max = links.utilisation_max.max(util);
            let payload = hot.tl_window as f64 * 64.0 / (window_len / self.t.ser as f64 * 628.0);
            payload_sum += payload;
            links.payload_utilisation_max = links.payload_utilisation_max.max(payload);
            links.dl_flits += rs.flits_sent;
            links.dl_resent += rs.flits_resent;
            links.replays += rs.replays;
            links.crc_errors += peer_rs.crc_errors;
            links.link_faults += rs.faults;
            links.bits_flipped += wire.bits_flipped;
            links.tl_flits += packed;
            if matches!(self.owner[peer], super::Owner::Switch { .. }) {
                links.requests_expanded += rx.expanded;
            }
            links.acks += rs.acks_sent;
            links.nops += rs.nops_sent;
            let stall = hot.stall_ps + hot.stall_since.map_or(0, |s| now - s);
            links.credit_stall_ns += stall as f64 / 1000.0;
            rows.push((
                e as u32,
                self.owner[e].to_string(),
                round3(util),
                rs.flits_sent,
                peer_rs.crc_errors,
                rs.replays,
            ));
            if rx.tl_errors > 0 || st.unpack_errors > 0 {
                ok = false;
            }
        }
        links.directions = self.ends() as u64;
        links.utilisation_mean = round3(util_sum / self.ends().max(1) as f64);
        links.utilisation_max = round3(links.utilisation_max);
        links.payload_utilisation_mean = round3(payload_sum / self.ends().max(1) as f64);
        links.payload_utilisation_max = round3(links.payload_utilisation_max);
        links.credit_stall_ns = round3(links.credit_stall_ns);
        links.responses_compressed = self
            .accels
            .completers()
            .map(|(c, _)| c.responses_compressed)
            .sum();
        c.ops_issued = self.accels.issued;
        c.ops_completed = self.accels.completed;
        c.ops_open = self.accels.open() as u64;
        ok &= c.ops_issued == c.ops_completed + c.ops_open;
        c.frames_held = self.frames.live() as u64;
        c.frames_queued = self
            .rxs
            .iter()
            .map(|r| (r.fifo.len() + r.rsp.len()) as u64)
            .chain(self.txs.iter().map(|t| t.txq.len() as u64))
            .chain(self.switches.iter().map(|s| s.fwd.queued() as u64))
            .sum();
        ok &= c.frames_held == c.frames_queued;
        ok &= self.stats.invalid_frames == 0;
        ok &= self.stats.expand_errors == 0;
        c.events_out_of_window = self.win.late;
        ok &= c.events_out_of_window == 0;
        // Endpoints: nothing refused, dropped or broken at any port, no credit release
        // refused.
        for ep in &self.accels.eps {
            let s = ep.stats();
            ok &= s.overruns
                + s.busy_drops
                + s.broken_stream_flits
                + s.packer_refusals
                + s.bad_releases
                == 0;
        }
        c.ok = ok;
        // Throughput.
        let window = self
            .opts
            .duration_ps
            .saturating_sub(self.opts.warmup_ps)
            .max(1) as f64;
        let per_accel: Vec<f64> = self
            .accels
            .bytes_done
            .iter()
            .map(|&b| round3(b as f64 * 8.0 / window * 1000.0))
            .collect();
        let mut sources: Vec<bool> = vec![false; per_accel.len()];
        for &(g, m) in &self.sources {
            if let Some(&a) = self
                .gens
                .get(g as usize)
                .and_then(|x| x.members().get(m as usize))
            {
                sources[a as usize] = true;
            }
        }
        let active: Vec<f64> = per_accel
            .iter()
            .zip(&sources)
            .filter(|(_, &s)| s)
            .map(|(&v, _)| v)
            .collect();
        let total: f64 = per_accel.iter().sum();
        let (mn, mx) = active
            .iter()
            .fold((f64::MAX, 0.0f64), |(a, b), &v| (a.min(v), b.max(v)));
        let mean = if active.is_empty() {
            0.0
        } else {
            active.iter().sum::<f64>() / active.len() as f64
        };
        let ids = self.partition_ids();
        let partitions = ids
            .iter()
            .enumerate()
            .map(|(i, &id)| {
                let members: Vec<f64> = (0..per_accel.len())
                    .filter(|&a| self.part_index[a] as usize == i && sources[a])
                    .map(|a| per_accel[a])
                    .collect();
                PartitionResult {
                    id,
                    members: self.part_index.iter().filter(|&&p| p as usize == i).count() as u32,
                    throughput_gbps: round3(members.iter().sum()),
                    latency: self
                        .part_lat
                        .get(i)
                        .map(Latency::summary)
                        .unwrap_or_else(|| Latency::default().summary()),
                    jain: jain(&members),
                }
            })
            .collect();
        let mut kinds: Vec<(String, u32)> = Vec::new();
        for s in &self.switches {
            match kinds.iter_mut().find(|(k, _)| k == s.fwd.kind()) {
                Some(k) => k.1 += 1,
                None => kinds.push((s.fwd.kind().to_string(), 1)),
            }
        }
        // Before `fault_report` takes the fault report (the integrity balance reads it).
        let integrity = self.integrity();
        let faults = self.fault_report();
        let read_completed = zero.is_some();
        let (stages, rtt, hops) = zero.unwrap_or_default();
        let budgets = budgets(&self.pod, read_completed, &stages, rtt, hops, &self.lat);
        let summary = Summary {
            pod: self.pod.name.clone(),
            seed: self.opts.seed,
            start_ns: ns_of(self.inject_from),
            duration_ns: ns_of(self.opts.duration_ps),
            warmup_ns: ns_of(self.opts.warmup_ps),
            end_ns: ns_of(now),
            drained,
            accelerators: self.fabric.accels,
            switches: kinds,
            events: self.events(),
            latency: OpClass::ALL
                .iter()
                .zip(self.lat.iter())
                .map(|(c, l)| ClassLatency {
                    class: c.name(),
                    latency: l.summary(),
                })
                .collect(),
            throughput_gbps: round3(total),
            accel_throughput_gbps: [round3(mean), if active.is_empty() { 0.0 } else { mn }, mx],
            jain: jain(&active),
            partitions,
            links,
            drops: DROP_REASONS
                .iter()
                .zip(self.stats.drops.iter())
                .filter(|(_, &n)| n > 0)
                .map(|(r, &n)| (r.to_string(), n))
                .collect(),
            integrity,
            conservation: c,
            breakdown: stages
                .iter()
                .filter(|s| !is_wait(s) || s.time.as_ps() > 0)
                .map(|s| StageNs {
                    stage: s.name.clone(),
                    ns: ns_of(s.time.as_ps()),
                })
                .collect(),
            read_completed,
            read_rtt_ns: ns_of(rtt),
            read_hops: hops,
            read_pair: self
                .fabric
                .probe_pair()
                .map_or([0, 0], |(src, dst, _)| [src, dst]),
            budgets,
            faults,
        };
        Report {
            summary,
            latency: self.lat.clone(),
            per_accel_gbps: per_accel,
            partition_of: self.fabric.partition_of.clone(),
            links: rows,
            breakdown: stages,
        }
    }
}

impl Sim {
    /// What the checker found, with the requesters' and switches' account of timeouts.
    fn integrity(&self) -> super::check::Integrity {
        let mut i = self.reference.found.clone();
        let mut r = self.accels.requester_stats();
        // Rogue requesters' writes (a fault plan's `inject`) are requests like any other.
        for g in self.fault.iter().flat_map(|f| f.rogues.iter()) {
            let s = *g.req.borrow().stats();
            r.request_timeouts += s.request_timeouts;
            r.requests_abandoned += s.requests_abandoned;
            r.dropped_late += s.dropped_late;
            r.dropped_unknown_tag += s.dropped_unknown_tag;
        }
        i.requests_timed_out = r.request_timeouts;
        i.requests_abandoned = r.requests_abandoned;
        i.queue_timeouts = r.queue_timeouts;
        i.late_responses = r.dropped_late + r.dropped_unknown_tag;
        i.switch_drops = self.switch_drops();
        i.reset_drops = self.reset_drops();
        i.ingress_discarded = self
            .fault
            .as_ref()
            .map_or(0, |f| f.report.ingress_discarded);
        (i.completer_drops, i.responses_expired) = self.completer_drops();
        let [links, queued, completers] = self.stranded_parts();
        i.stranded = links + queued + completers;
        i.stranded_on_links = links;
        i.stranded_queued = queued;
        i.stranded_in_completers = completers;
        i
    }

    /// The run has a fault plan with at least one fault ([`Summary::had_faults`]; a plan
    /// may be active for its health monitors alone).
    pub(crate) fn fault_events_planned(&self) -> bool {
        self.fault
            .as_ref()
            .is_some_and(|f| !f.report.open_at_fault.is_empty())
    }

    /// Frames the switches dropped, every reason.
    fn switch_drops(&self) -> u64 {
        self.switches
            .iter()
            .flat_map(|s| s.fwd.drops())
            .map(|(_, n)| n)
            .sum()
    }

    /// TL flits end `e` dropped at retrains so far: queued in the link (never packed), and
    /// packed into DL flits the peer never delivered.
    pub(crate) fn discarded(&self, e: u32) -> (u64, u64) {
        match (self.txs.get(e as usize), self.ep(e)) {
            (Some(tx), _) => (tx.discarded_queued, tx.discarded_packed),
            (None, Some(ep)) => (ep.host().discarded_queued, ep.host().discarded_packed),
            (None, None) => (0, 0),
        }
    }

    /// Requests that timed out and have left no trace yet (not answered late, nor dropped
    /// by a switch, a link reset or a completer, misrouted or past its lifetime): their
    /// request or response is still in the fabric, or was lost.
    pub(crate) fn untraced_timeouts(&self) -> u64 {
        let r = self.accels.requester_stats();
        let (misrouted, expired) = self.completer_drops();
        r.request_timeouts.saturating_sub(
            r.dropped_late
                + r.dropped_unknown_tag
                + self.switch_drops()
                + self.reset_drops()
                + misrouted
                + expired,
        )
    }

    /// Requests the completers dropped as misrouted, and responses they dropped past their
    /// lifetime: each the trace of a request given up.
    fn completer_drops(&self) -> (u64, u64) {
        self.accels.completers().fold((0, 0), |(m, e), (c, _)| {
            (m + c.misrouted, e + c.responses_expired)
        })
    }

    /// The fault report, completed with the switches' drop counters and the links' states.
    fn fault_report(&mut self) -> Option<super::fault::FaultReport> {
        let mut r = std::mem::take(&mut self.fault.as_mut()?.report);
        let mut drops: Vec<(String, u64)> = Vec::new();
        for s in &self.switches {
            for (k, n) in s.fwd.drops() {
                match drops.iter_mut().find(|(r, _)| r == k) {
                    Some(d) => d.1 += n,
                    None => drops.push((k.to_string(), n)),
                }
            }
        }
        r.switch_drops = drops;
        for e in 0..self.ends() {
            let link = self.link_of(e);
            let st = link.retry().stats();
            r.link_downs += st.link_downs;
            r.link_ups += st.link_ups;
            if link.state() != podlink_protocol::retry::LinkState::Up {
                r.links_not_up += 1;
            }
        }
        r.whole_at_end = self.fabric_whole();
        Some(r)
    }
}

/// The verdicts: every switch hop of the zero-load read against the port-to-port budget, the
/// round trip against the read budget, and (informational) the loaded read p99. A zero-load
/// read that did not complete (`completed` false) violates the read budget and has no hops.
fn budgets(
    pod: &PodFile,
    completed: bool,
    stages: &[Stage],
    rtt: u64,
    hops: u32,
    lat: &[Latency; 3],
) -> Vec<Verdict> {
    let b = &pod.budgets;
    let mut out = Vec::new();
    let v = |what: String, m: f64, budget: f64, enforce: bool| Verdict {
        what,
        measured_ns: round3(m),
        budget_ns: budget,
        verdict: if !enforce {
            "info"
        } else if m <= budget {
            "ok"
        } else {
            "VIOLATED"
        },
    };
    // Port to port of switch k: link k's serialisation, FEC and PHY rx, the pipeline, and
    // link k+1's PHY tx (timing::switch_port_to_port).
    let get = |name: String| {
        stages
            .iter()
            .find(|s| s.name == name)
            .map_or(0, |s| s.time.as_ps())
    };
    for dir in ["request", "response"] {
        for k in 0..hops {
            let mut ps = get(format!("{dir}: link {k} serialisation"))
                + get(format!("{dir}: link {k} fec"))
                + get(format!("{dir}: link {k} phy rx"))
                + get(format!("{dir}: link {} phy tx", k + 1));
            for st in [
                "store-and-forward",
                "parse",
                "route",
                "arbitration",
                "crossbar",
                "egress",
                "pipeline wait",
                "egress wait",
            ] {
                ps += get(format!("{dir}: switch {k} {st}"));
            }
            out.push(v(
                format!("{dir} switch {k} port-to-port (zero load)"),
                ps as f64 / 1000.0,
                b.switch_port_to_port_ns,
                true,
            ));
        }
    }
    if completed {
        out.push(v(
            "64 B read round trip (zero load)".into(),
            rtt as f64 / 1000.0,
            b.read_rtt_ns,
            true,
        ));
    } else {
        out.push(Verdict {
            what: "64 B read round trip (zero load): did not complete".into(),
            measured_ns: 0.0,
            budget_ns: b.read_rtt_ns,
            verdict: "VIOLATED",
        });
    }
    let r = lat[0].summary();
    if r.count > 0 {
        out.push(v(
            "read p99 under the workload".into(),
            r.p99_ns,
            b.read_rtt_ns,
            false,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::config::Pattern;
    use crate::pod::presets;
    use podlink_protocol::txn::{ByteEnables, MemoryTarget};

    /// A pod without faults whose links take milliseconds (`tests/data/pods/millisecond-links.toml`):
    /// the run goes on after its last operation until every request given up has left its
    /// trace, however slowly (the drain limit covers a tag quarantine, not only the default
    /// 20 ms), and responses dropped by completers past their lifetime count as traces (so
    /// the run ends when the last one is, not at the drain limit).
    #[test]
    fn a_pod_with_millisecond_links_drains_every_late_answer() {
        let text = include_str!("../../tests/data/pods/millisecond-links.toml");
        let pod = PodFile::parse(text, "millisecond-links.toml").unwrap();
        let opts = Options {
            seed: 184,
            duration_ps: 3_000_000,
            warmup_ps: 300_000,
            ..Options::default()
        };
        let (mut untraced, mut stranded) = (u64::MAX, u64::MAX);
        let s = run_then(
            &pod,
            &opts,
            |_, _| {},
            |sim| (untraced, stranded) = (sim.untraced_timeouts(), sim.stranded()),
        )
        .unwrap()
        .summary;
        let i = &s.integrity;
        assert!(i.responses_expired > 0 && i.requests_timed_out > 0, "{i:?}");
        assert_eq!((untraced, stranded), (0, 0), "{i:?}");
        assert!(s.drained && s.sound(), "{i:?} {:?}", s.conservation);
        // It ended when the last trace was left, well short of the quarantine's 2 x 100 us
        // plus two hop residences of about 40 ms each.
        assert!(s.end_ns < 30e6, "ended at {} ns", s.end_ns);
    }

    /// A write-only run (all-to-all reads nothing back) is still checked: memory is audited
    /// against the reference after the drain, and one byte changed behind the protocol's back
    /// fails the run, naming the line.
    #[test]
    fn a_write_only_run_is_audited() {
        let mut pod = presets::load("ualink-64x4").unwrap();
        for w in &mut pod.workloads {
            w.pattern = Pattern::AllToAll;
            (w.read, w.write, w.atomic) = (0.0, 1.0, 0.0);
        }
        let opts = Options {
            duration_ps: 400_000,
            warmup_ps: 40_000,
            ..Options::default()
        };
        let clean = run(&pod, &opts, |_, _| {}).unwrap().summary;
        let i = &clean.integrity;
        assert!(clean.drained && i.ok(), "{i:?}");
        assert_eq!(i.lines_checked, 1, "only the zero-load read reads");
        assert!(i.lines_audited > 1000, "{i:?}");
        let mut hit = String::new();
        let broken = run_then(
            &pod,
            &opts,
            |_, _| {},
            |sim| {
                let mut mem = sim.mem.borrow_mut();
                let key = mem.written_blocks().min().unwrap();
                let (dst, addr) = ((key >> 50) as u32, (key & ((1 << 50) - 1)) * 256 + 64);
                let mut line = mem.line(dst, addr);
                line[5] ^= 0x40;
                mem.of(dst).write(addr, &line, &ByteEnables::ALL).unwrap();
                hit = format!("accelerator {dst} line {addr:#x}");
            },
        )
        .unwrap()
        .summary;
        let i = &broken.integrity;
        assert_eq!(i.memory_mismatches, 1, "{i:?}");
        assert!(!broken.integrity_ok() && !broken.sound());
        assert!(
            i.first_problems[0].contains(&hit),
            "{:?} {hit}",
            i.first_problems
        );
    }
}
