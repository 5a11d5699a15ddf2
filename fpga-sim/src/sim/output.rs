//! What a run prints and writes (`spec-notes/simulator.md#results`): the text summary, the
//! output folder (summary.json, CSV tables, SVG charts) and the `--bench` figures.
//!
//! Everything except the bench figures is a pure function of the report, so the same pod and
//! seed write byte-identical files.

use super::results::{Report, Summary};
use crate::report::{charts, f, write_csv, OpClass};
use std::fmt::Write as _;
use std::io;
use std::path::Path;

/// The summary as text.
pub fn summary_text(s: &Summary) -> String {
    let mut o = String::new();
    let kinds: Vec<String> = s
        .switches
        .iter()
        .map(|(k, n)| format!("{n} x {k}"))
        .collect();
    let _ = writeln!(
        o,
        "{}: {} accelerators, switches {}; seed {}",
        s.pod,
        s.accelerators,
        kinds.join(", "),
        s.seed
    );
    let _ = writeln!(
        o,
        "  injected from {:.3} us for {:.3} us (first {:.3} us not measured), ended at {:.3} us{}; {} events",
        s.start_ns / 1000.0,
        s.duration_ns / 1000.0,
        s.warmup_ns / 1000.0,
        s.end_ns / 1000.0,
        if s.drained { "" } else { " NOT DRAINED" },
        s.events
    );
    let _ = writeln!(
        o,
        "\n  {:<8} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10}   (ns)",
        "op", "count", "mean", "p50", "p99", "p99.9", "max"
    );
    for c in &s.latency {
        let l = &c.latency;
        let _ = writeln!(
            o,
            "  {:<8} {:>9} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
            c.class, l.count, l.mean_ns, l.p50_ns, l.p99_ns, l.p999_ns, l.max_ns
        );
    }
    let [mean, min, max] = s.accel_throughput_gbps;
    let _ = writeln!(
        o,
        "\n  throughput {:.1} Gb/s in total; per accelerator {:.1} Gb/s (min {:.1}, max {:.1}); Jain {:.4}",
        s.throughput_gbps, mean, min, max, s.jain
    );
    let l = &s.links;
    let _ = writeln!(
        o,
        "  links: busy {:.1} % mean, {:.1} % max; TL payload {:.1} % mean, {:.1} % max; {} DL flits, {} TL flits, {} acks; {} CRC errors, {} replays ({} flits resent); credit stalls {:.1} ns",
        l.utilisation_mean * 100.0,
        l.utilisation_max * 100.0,
        l.payload_utilisation_mean * 100.0,
        l.payload_utilisation_max * 100.0,
        l.dl_flits,
        l.tl_flits,
        l.acks,
        l.crc_errors,
        l.replays,
        l.dl_resent,
        l.credit_stall_ns
    );
    if l.requests_expanded > 0 {
        let _ = writeln!(
            o,
            "  address compression: {} requests arrived compressed at switch ports and went on expanded",
            l.requests_expanded
        );
    }
    if l.responses_compressed > 0 {
        let _ = writeln!(
            o,
            "  response compression: {} responses sent compressed",
            l.responses_compressed
        );
    }
    if l.link_faults > 0 {
        let _ = writeln!(
            o,
            "  link faults: {} link ends ended in Fault (retry gave up, or a TL flit held past the hold limit); their links were reset",
            l.link_faults
        );
    }
    if s.drops.is_empty() {
        let _ = writeln!(o, "  drops: none");
    } else {
        let d: Vec<String> = s.drops.iter().map(|(r, n)| format!("{r} {n}")).collect();
        let _ = writeln!(o, "  drops: {}", d.join(", "));
    }
    if s.partitions.len() > 1 {
        let _ = writeln!(
            o,
            "\n  {:<10} {:>8} {:>12} {:>10} {:>10} {:>8}",
            "partition", "members", "Gb/s", "p50 ns", "p99 ns", "Jain"
        );
        for p in &s.partitions {
            let _ = writeln!(
                o,
                "  {:<10} {:>8} {:>12.1} {:>10.1} {:>10.1} {:>8.4}",
                p.id, p.members, p.throughput_gbps, p.latency.p50_ns, p.latency.p99_ns, p.jain
            );
        }
    }
    if s.read_completed {
        let _ = writeln!(
            o,
            "\n  zero-load 64 B read by accelerator {} from accelerator {}: {:.3} ns round trip, {} switch hop(s) each way (per-hop breakdown in --out)",
            s.read_pair[0], s.read_pair[1], s.read_rtt_ns, s.read_hops
        );
    } else {
        let _ = writeln!(
            o,
            "\n  zero-load 64 B read by accelerator {} from accelerator {}: did not complete (it failed or took over 1 ms on the idle pod: no breakdown)",
            s.read_pair[0], s.read_pair[1]
        );
    }
    let _ = writeln!(o, "\n  budgets");
    for v in &s.budgets {
        let _ = writeln!(
            o,
            "    {:<48} {:>10.3} ns  <= {:>8.1} ns  {}",
            v.what, v.measured_ns, v.budget_ns, v.verdict
        );
    }
    let i = &s.integrity;
    let _ = writeln!(
        o,
        "\n  integrity: {} lines of read data checked, {} mismatches, {} lines of memory audited, {} wrong, {} lost, {} duplicated, {} failed, {} atomic errors: {}",
        i.lines_checked,
        i.mismatches,
        i.lines_audited,
        i.memory_mismatches,
        i.lost,
        i.duplicates,
        i.failed,
        i.atomic_errors,
        match (s.integrity_ok(), i.failed > 0, s.had_faults()) {
            (true, true, true) => {
                "OK (operations may fail under the pod's faults; every request given up accounted for)"
            }
            (true, true, false) => "OK (operations timed out, every timed-out request accounted for)",
            (true, false, _) => "OK",
            (false, _, _) => "FAILED",
        }
    );
    for p in &i.first_problems {
        let _ = writeln!(o, "    {p}");
    }
    if i.requests_timed_out + i.requests_abandoned + i.queue_timeouts > 0 {
        let abandoned = if i.requests_abandoned > 0 {
            format!(
                " and {} given up at ports declared down",
                i.requests_abandoned
            )
        } else {
            String::new()
        };
        let mut more = String::new();
        for (n, what) in [
            (
                i.reset_drops,
                "requests and responses dropped at link resets",
            ),
            (i.ingress_discarded, "discarded at ports declared down"),
            (
                i.completer_drops,
                "misrouted requests dropped by completers",
            ),
            (
                i.responses_expired,
                "responses dropped by completers past their lifetime",
            ),
        ] {
            if n > 0 {
                more.push_str(&format!(", {n} {what}"));
            }
        }
        if i.stranded > 0 {
            let parts: Vec<String> = [
                (i.stranded_on_links, "on links"),
                (i.stranded_queued, "queued in switches or ports"),
                (i.stranded_in_completers, "held by completers"),
            ]
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!("{n} {what}"))
            .collect();
            more.push_str(&format!(
                ", {} still in the fabric at the end ({})",
                i.stranded,
                parts.join(", ")
            ));
        }
        let _ = writeln!(
            o,
            "  timeouts: {} requests timed out{abandoned}, {} answered late and {} frames dropped in switches{more}; {} requests timed out before they were sent",
            i.requests_timed_out, i.late_responses, i.switch_drops, i.queue_timeouts
        );
    }
    if let Some(f) = s.faults.as_ref().filter(|_| s.had_faults()) {
        let drops: Vec<String> = f
            .switch_drops
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| format!("{n} {r}"))
            .collect();
        let _ = writeln!(
            o,
            "  faults: {} applied; {} DL flits lost on wires, {} link ends retrained, {} frames discarded at retrains, {} at ports declared down; {} regions held on ports declared down, {} after a request given up; {} requests failed unsent (every port of their source down); switch drops: {}",
            f.open_at_fault.len(),
            f.flits_lost,
            f.retrains,
            f.frames_discarded,
            f.ingress_discarded,
            f.regions_held,
            f.regions_held_after_give_up,
            f.failed_at_source,
            if drops.is_empty() { "none".to_string() } else { drops.join(", ") }
        );
    }
    let c = &s.conservation;
    let mut discarded = if c.tl_discarded > 0 {
        format!(" + {} discarded at link retrains", c.tl_discarded)
    } else {
        String::new()
    };
    if c.events_out_of_window > 0 {
        let _ = write!(
            discarded,
            " ({} events scheduled out of their window)",
            c.events_out_of_window
        );
    }
    let _ = writeln!(
        o,
        "  conservation: {} TL flits injected = {} delivered + {} in flight{}; {} operations = {} completed + {} open: {}",
        c.tl_injected,
        c.tl_delivered,
        c.tl_in_flight,
        discarded,
        c.ops_issued,
        c.ops_completed,
        c.ops_open,
        if c.ok { "OK" } else { "FAILED" }
    );
    o
}

/// Write summary.json, the CSV tables and the SVG charts into `dir` (created if needed).
///
/// # Errors
/// I/O errors.
pub fn write_outputs(dir: &Path, r: &Report) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let s = &r.summary;
    let json = serde_json::to_string_pretty(s).map_err(io::Error::other)?;
    std::fs::write(dir.join("summary.json"), json + "\n")?;
    let lat: Vec<Vec<String>> = s
        .latency
        .iter()
        .map(|c| {
            let l = &c.latency;
            vec![
                c.class.to_string(),
                l.count.to_string(),
                f(l.mean_ns),
                f(l.p50_ns),
                f(l.p99_ns),
                f(l.p999_ns),
                f(l.max_ns),
            ]
        })
        .collect();
    write_csv(
        &dir.join("latency.csv"),
        &[
            "op", "count", "mean_ns", "p50_ns", "p99_ns", "p999_ns", "max_ns",
        ],
        &lat,
    )?;
    let mut cdf_rows = Vec::new();
    let mut series = Vec::new();
    for (c, h) in OpClass::ALL.iter().zip(r.latency.iter()) {
        let pts = h.cdf();
        for &(x, q) in &pts {
            cdf_rows.push(vec![c.name().to_string(), f(x), format!("{q:.4}")]);
        }
        if !pts.is_empty() {
            series.push((c.name().to_string(), pts));
        }
    }
    write_csv(
        &dir.join("latency_cdf.csv"),
        &["op", "latency_ns", "quantile"],
        &cdf_rows,
    )?;
    charts::lines(
        &dir.join("latency_cdf.svg"),
        &format!("{}: latency CDF", s.pod),
        "latency (ns)",
        "fraction of operations",
        &series,
    )?;
    let acc: Vec<Vec<String>> = r
        .per_accel_gbps
        .iter()
        .enumerate()
        .map(|(a, g)| vec![a.to_string(), r.partition_of[a].to_string(), f(*g)])
        .collect();
    write_csv(
        &dir.join("accelerators.csv"),
        &["accelerator", "partition", "throughput_gbps"],
        &acc,
    )?;
    let links: Vec<Vec<String>> = r
        .links
        .iter()
        .map(|(e, owner, u, fl, crc, rep)| {
            vec![
                e.to_string(),
                owner.clone(),
                f(*u),
                fl.to_string(),
                crc.to_string(),
                rep.to_string(),
            ]
        })
        .collect();
    write_csv(
        &dir.join("links.csv"),
        &[
            "end",
            "owner",
            "utilisation",
            "dl_flits",
            "crc_errors",
            "replays",
        ],
        &links,
    )?;
    let parts: Vec<Vec<String>> = s
        .partitions
        .iter()
        .map(|p| {
            vec![
                p.id.to_string(),
                p.members.to_string(),
                f(p.throughput_gbps),
                p.latency.count.to_string(),
                f(p.latency.p50_ns),
                f(p.latency.p99_ns),
                f(p.latency.p999_ns),
                f(p.latency.max_ns),
                format!("{:.6}", p.jain),
            ]
        })
        .collect();
    write_csv(
        &dir.join("partitions.csv"),
        &[
            "partition",
            "members",
            "throughput_gbps",
            "ops",
            "p50_ns",
            "p99_ns",
            "p999_ns",
            "max_ns",
            "jain",
        ],
        &parts,
    )?;
    let stages: Vec<Vec<String>> = s
        .breakdown
        .iter()
        .map(|b| vec![format!("\"{}\"", b.stage), f(b.ns)])
        .collect();
    write_csv(&dir.join("breakdown.csv"), &["stage", "ns"], &stages)?;
    let bars: Vec<(String, f64)> = s
        .breakdown
        .iter()
        .map(|b| (b.stage.clone(), b.ns))
        .collect();
    charts::bars(
        &dir.join("breakdown.svg"),
        &format!(
            "{}: zero-load 64 B read, {:.3} ns round trip",
            s.pod, s.read_rtt_ns
        ),
        "ns",
        &bars,
    )?;
    let budgets: Vec<Vec<String>> = s
        .budgets
        .iter()
        .map(|v| {
            vec![
                format!("\"{}\"", v.what),
                f(v.measured_ns),
                f(v.budget_ns),
                v.verdict.to_string(),
            ]
        })
        .collect();
    write_csv(
        &dir.join("budgets.csv"),
        &["what", "measured_ns", "budget_ns", "verdict"],
        &budgets,
    )?;
    Ok(())
}

/// Peak resident memory of this process (VmHWM), kB; `None` where /proc is not available.
pub fn peak_memory_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The `--bench` figures of a run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Bench {
    /// Wall-clock seconds.
    pub wall_s: f64,
    /// Events executed.
    pub events: u64,
    /// Events per wall-clock second.
    pub events_per_s: f64,
    /// TL flits carried (packed into DL flits).
    pub tl_flits: u64,
    /// TL flits per wall-clock second.
    pub tl_flits_per_s: f64,
    /// Simulated microseconds per wall-clock second.
    pub sim_us_per_s: f64,
    /// Peak resident memory, MB.
    pub peak_mb: f64,
    /// The binary's allocator (`jemalloc`, with the `jemalloc` feature, or `system`).
    pub allocator: &'static str,
}

impl Bench {
    /// The figures of summary `s` after `wall_s` seconds.
    pub fn of(s: &Summary, wall_s: f64, allocator: &'static str) -> Bench {
        let w = wall_s.max(1e-9);
        Bench {
            wall_s,
            events: s.events,
            events_per_s: s.events as f64 / w,
            tl_flits: s.links.tl_flits,
            tl_flits_per_s: s.links.tl_flits as f64 / w,
            sim_us_per_s: s.end_ns / 1000.0 / w,
            peak_mb: peak_memory_kb().map_or(0.0, |k| k as f64 / 1024.0),
            allocator,
        }
    }

    /// One line of text.
    pub fn text(&self) -> String {
        format!(
            "bench: {:.2} s wall; {} events ({:.2} M/s); {} TL flits ({:.2} M/s); {:.2} simulated us/s; peak memory {:.0} MB; allocator {}",
            self.wall_s,
            self.events,
            self.events_per_s / 1e6,
            self.tl_flits,
            self.tl_flits_per_s / 1e6,
            self.sim_us_per_s,
            self.peak_mb,
            self.allocator
        )
    }
}
