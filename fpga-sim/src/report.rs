//! Results: latency histograms (HdrHistogram), summaries, CSV tables and SVG charts
//! (`spec-notes/simulator.md#results`).
//!
//! Everything written here is a pure function of the run's results, so the same pod and seed
//! give byte-identical files (wall-clock figures appear only with `--bench`).

use hdrhistogram::Histogram;
use serde::Serialize;
use std::fmt::Write as _;
use std::io;
use std::path::Path;

/// Operation classes reported separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum OpClass {
    /// Reads.
    Read,
    /// Writes.
    Write,
    /// Atomics.
    Atomic,
}

impl OpClass {
    /// All classes, in report order.
    pub const ALL: [OpClass; 3] = [OpClass::Read, OpClass::Write, OpClass::Atomic];

    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            OpClass::Read => "read",
            OpClass::Write => "write",
            OpClass::Atomic => "atomic",
        }
    }
}

/// A latency histogram in picoseconds (3 significant digits, up to 10 s).
#[derive(Debug, Clone)]
pub struct Latency(Histogram<u64>);

impl Default for Latency {
    fn default() -> Self {
        Latency(
            Histogram::new_with_bounds(1, 10_000_000_000_000, 3).unwrap_or_else(|_| {
                Histogram::new(3).unwrap_or_else(|_| unreachable!("3 significant digits are valid"))
            }),
        )
    }
}

impl Latency {
    /// Record one latency (ps); values beyond the range saturate.
    pub fn record(&mut self, ps: u64) {
        self.0.saturating_record(ps.max(1));
    }
    /// Count.
    pub fn len(&self) -> u64 {
        self.0.len()
    }
    /// No samples.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Summary in nanoseconds.
    pub fn summary(&self) -> LatencySummary {
        let q = |p: f64| {
            if self.0.is_empty() {
                0.0
            } else {
                self.0.value_at_quantile(p) as f64 / 1000.0
            }
        };
        LatencySummary {
            count: self.0.len(),
            mean_ns: if self.0.is_empty() {
                0.0
            } else {
                round3(self.0.mean() / 1000.0)
            },
            p50_ns: q(0.5),
            p99_ns: q(0.99),
            p999_ns: q(0.999),
            max_ns: if self.0.is_empty() {
                0.0
            } else {
                self.0.max() as f64 / 1000.0
            },
        }
    }
    /// CDF points (latency ns, cumulative fraction) at percentile steps.
    pub fn cdf(&self) -> Vec<(f64, f64)> {
        if self.0.is_empty() {
            return Vec::new();
        }
        (0..=200)
            .map(|i| {
                let q = f64::from(i) / 200.0;
                (self.0.value_at_quantile(q) as f64 / 1000.0, q)
            })
            .collect()
    }
    /// Merge another histogram in.
    pub fn add(&mut self, o: &Latency) {
        let _ = self.0.add(&o.0);
    }
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// Percentiles of one histogram, in ns.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct LatencySummary {
    /// Samples.
    pub count: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Median.
    pub p50_ns: f64,
    /// 99th percentile.
    pub p99_ns: f64,
    /// 99.9th percentile.
    pub p999_ns: f64,
    /// Maximum.
    pub max_ns: f64,
}

/// Write a CSV file from a header and rows.
pub fn write_csv(path: &Path, header: &[&str], rows: &[Vec<String>]) -> io::Result<()> {
    let mut s = header.join(",");
    s.push('\n');
    for r in rows {
        s.push_str(&r.join(","));
        s.push('\n');
    }
    std::fs::write(path, s)
}

/// Format a float for tables and CSV: fixed precision so output is byte-stable.
pub fn f(v: f64) -> String {
    let mut s = String::new();
    let _ = write!(s, "{v:.3}");
    s
}

/// SVG charts.
pub mod charts {
    use plotters::prelude::*;
    use std::path::Path;

    fn err<E: std::fmt::Display>(e: E) -> std::io::Error {
        std::io::Error::other(e.to_string())
    }

    const COLORS: [RGBColor; 6] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
    ];

    /// A line chart of several named series.
    pub fn lines(
        path: &Path,
        title: &str,
        x_label: &str,
        y_label: &str,
        series: &[(String, Vec<(f64, f64)>)],
    ) -> std::io::Result<()> {
        let pts = series.iter().flat_map(|(_, s)| s.iter());
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for &(x, y) in pts {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y0 = y0.min(y);
            y1 = y1.max(y);
        }
        if x0 > x1 {
            (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
        }
        if (x1 - x0).abs() < 1e-12 {
            x1 = x0 + 1.0;
        }
        if (y1 - y0).abs() < 1e-12 {
            y1 = y0 + 1.0;
        }
        let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(x0..x1, y0.min(0.0)..y1 * 1.05)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .draw()
            .map_err(err)?;
        for (i, (name, s)) in series.iter().enumerate() {
            let c = COLORS[i % COLORS.len()];
            chart
                .draw_series(LineSeries::new(s.iter().copied(), c.stroke_width(2)))
                .map_err(err)?
                .label(name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)
    }

    /// A horizontal bar chart of named values (the per-hop breakdown).
    pub fn bars(
        path: &Path,
        title: &str,
        unit: &str,
        items: &[(String, f64)],
    ) -> std::io::Result<()> {
        let h = 80 + 22 * items.len() as u32;
        let root = SVGBackend::new(path, (900, h)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let max = items.iter().map(|(_, v)| *v).fold(0.0, f64::max).max(1e-9);
        let n = items.len().max(1) as i32;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(330)
            .build_cartesian_2d(0.0..max * 1.1, 0..n)
            .map_err(err)?;
        let labels: Vec<String> = items.iter().map(|(s, _)| s.clone()).collect();
        chart
            .configure_mesh()
            .x_desc(unit)
            .y_labels(items.len().max(1))
            .y_label_formatter(&|i: &i32| {
                let idx = (n - 1 - *i).max(0) as usize;
                labels.get(idx).cloned().unwrap_or_default()
            })
            .draw()
            .map_err(err)?;
        chart
            .draw_series(items.iter().enumerate().map(|(i, (_, v))| {
                let y = n - 1 - i as i32;
                Rectangle::new([(0.0, y), (*v, y + 1)], COLORS[0].filled())
            }))
            .map_err(err)?;
        root.present().map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let mut l = Latency::default();
        for i in 1..=1000u64 {
            l.record(i * 1000);
        }
        let s = l.summary();
        assert_eq!(s.count, 1000);
        assert!((s.p50_ns - 500.0).abs() < 1.0, "{s:?}");
        assert!((s.p99_ns - 990.0).abs() < 1.0, "{s:?}");
        assert!((s.max_ns - 1000.0).abs() < 1.0, "{s:?}");
        assert_eq!(Latency::default().summary().count, 0);
    }

    #[test]
    fn charts_write_svg() {
        let dir = std::env::temp_dir().join(format!("podlink-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("c.svg");
        charts::lines(
            &p,
            "t",
            "x",
            "y",
            &[("a".into(), vec![(0.0, 1.0), (1.0, 2.0)])],
        )
        .unwrap();
        assert!(std::fs::read_to_string(&p).unwrap().starts_with("<svg"));
        let b = dir.join("b.svg");
        charts::bars(&b, "t", "ns", &[("x".into(), 3.0), ("y".into(), 1.0)]).unwrap();
        assert!(std::fs::read_to_string(&b).unwrap().contains("<rect"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
