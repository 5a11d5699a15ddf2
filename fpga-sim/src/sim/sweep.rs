//! `podlink-sim sweep`: the same pod at a series of offered loads, drawn as latency versus
//! load (`spec-notes/simulator.md#sweep`).

use super::results::{run, Report};
use super::Options;
use crate::pod::PodFile;
use crate::report::{charts, f, write_csv, LatencySummary};
use serde::Serialize;
use std::io;
use std::path::Path;

/// Default offered loads (fractions of one port's line rate per accelerator).
pub const DEFAULT_LOADS: [f64; 10] = [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9];

/// One load of a sweep.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SweepPoint {
    /// Offered load.
    pub load: f64,
    /// Accepted throughput, Gb/s in total.
    pub throughput_gbps: f64,
    /// Latency per class (read, write, atomic).
    pub latency: Vec<(String, LatencySummary)>,
    /// Mean link utilisation.
    pub utilisation_mean: f64,
    /// Operations reported failed (timed out, or given up under faults): neither in the
    /// latencies nor in the throughput.
    pub failed: u64,
    /// Every operation completed and checked, conservation held.
    pub sound: bool,
    /// Every budget held.
    pub budgets_ok: bool,
}

/// Run `pod` at each of `loads`; `progress(i, n)` after each.
///
/// # Errors
/// As [`run`].
pub fn sweep(
    pod: &PodFile,
    opts: &Options,
    loads: &[f64],
    mut progress: impl FnMut(usize, usize, &Report),
) -> Result<Vec<SweepPoint>, super::SimError> {
    let mut out = Vec::new();
    for (i, &load) in loads.iter().enumerate() {
        let o = Options {
            load: Some(load),
            ..opts.clone()
        };
        let r = run(pod, &o, |_, _| {})?;
        let s = &r.summary;
        out.push(SweepPoint {
            load,
            throughput_gbps: s.throughput_gbps,
            latency: s
                .latency
                .iter()
                .map(|c| (c.class.to_string(), c.latency))
                .collect(),
            utilisation_mean: s.links.utilisation_mean,
            failed: s.integrity.failed,
            sound: s.sound(),
            budgets_ok: !s.violated(),
        });
        progress(i + 1, loads.len(), &r);
    }
    Ok(out)
}

/// Write latency_vs_load.csv and latency_vs_load.svg (p50 and p99 of each class present).
///
/// # Errors
/// I/O errors.
pub fn write_sweep(dir: &Path, pod: &str, points: &[SweepPoint]) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut rows = Vec::new();
    for p in points {
        for (class, l) in &p.latency {
            rows.push(vec![
                f(p.load),
                class.clone(),
                l.count.to_string(),
                f(p.throughput_gbps),
                f(l.mean_ns),
                f(l.p50_ns),
                f(l.p99_ns),
                f(l.p999_ns),
                f(l.max_ns),
                f(p.utilisation_mean),
                p.failed.to_string(),
                p.sound.to_string(),
            ]);
        }
    }
    write_csv(
        &dir.join("latency_vs_load.csv"),
        &[
            "load",
            "op",
            "count",
            "throughput_gbps",
            "mean_ns",
            "p50_ns",
            "p99_ns",
            "p999_ns",
            "max_ns",
            "utilisation",
            "failed",
            "sound",
        ],
        &rows,
    )?;
    let mut series = Vec::new();
    let classes: Vec<String> = points
        .first()
        .map(|p| p.latency.iter().map(|(c, _)| c.clone()).collect())
        .unwrap_or_default();
    for (i, class) in classes.iter().enumerate() {
        for (name, pick) in [("p50", 0usize), ("p99", 1)] {
            let pts: Vec<(f64, f64)> = points
                .iter()
                .filter_map(|p| {
                    let (_, l) = p.latency.get(i)?;
                    (l.count > 0).then_some((p.load, if pick == 0 { l.p50_ns } else { l.p99_ns }))
                })
                .collect();
            if !pts.is_empty() {
                series.push((format!("{class} {name}"), pts));
            }
        }
    }
    charts::lines(
        &dir.join("latency_vs_load.svg"),
        &format!("{pod}: latency versus offered load"),
        "offered load (fraction of one port's line rate per accelerator)",
        "latency (ns)",
        &series,
    )
}
