//! `podlink-sim`: the podlink pod simulator.

/// With the `jemalloc` feature (opt-in: its C build takes minutes), jemalloc, built to ask for
/// transparent huge pages (`.cargo/config.toml`,
/// `JEMALLOC_SYS_WITH_MALLOC_CONF`): a large pod's per-port state is touched at random, and
/// 2 MB pages spare most of the TLB misses (spec-notes/performance.md, session 18). The
/// simulation does not depend on the allocator: outputs are byte-identical.
#[cfg(all(target_os = "linux", feature = "jemalloc"))]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The allocator this binary runs on (reported by `--bench`).
const ALLOCATOR: &str = if cfg!(all(target_os = "linux", feature = "jemalloc")) {
    "jemalloc"
} else {
    "system"
};

use clap::{Parser, Subcommand};
use podlink_sim::pod::config::Pattern;
use podlink_sim::pod::{presets, topology::Fabric, PodFile};
use podlink_sim::sim::output::{summary_text, write_outputs, Bench};
use podlink_sim::sim::results::run;
use podlink_sim::sim::sweep::{sweep, write_sweep};
use podlink_sim::sim::Options;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "podlink-sim",
    version,
    about = "podlink pod simulator (digital twin)"
)]
struct Args {
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a pod (default preset when no file is given) and print its summary.
    Run(RunArgs),
    /// Run a pod at a series of offered loads; draw latency versus load.
    Sweep {
        #[command(flatten)]
        run: RunArgs,
        /// Offered loads, comma separated.
        #[arg(long, default_value = "0.05,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9")]
        loads: String,
    },
    /// List the built-in presets.
    Presets,
    /// Check a pod file: routes, loops, partitions, attachments, zero-load budgets.
    Verify {
        /// The pod file (or `--preset NAME`).
        pod: Option<PathBuf>,
        /// A built-in preset instead of a file.
        #[arg(long)]
        preset: Option<String>,
    },
    /// Write the binary configuration of one switch of a pod (what podlink-switch loads).
    Export {
        /// The pod file (or `--preset NAME`).
        pod: Option<PathBuf>,
        /// A built-in preset instead of a file.
        #[arg(long)]
        preset: Option<String>,
        /// Switch index (as `podlink-sim verify` counts them).
        #[arg(long)]
        switch: u32,
        /// Output file.
        #[arg(long)]
        out: PathBuf,
    },
    /// Run conformance scenarios (all, or those named) and print a verdict table; exit 1 if
    /// any fails.
    Conformance {
        /// Scenarios to run (default: every one; `--list` names them).
        names: Vec<String>,
        /// List the scenarios and exit.
        #[arg(long)]
        list: bool,
        /// Print the verdicts as JSON.
        #[arg(long)]
        json: bool,
        /// Seed of every random stream.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// BookSim-comparable mode: `booksim CONFIG [key=value ...] [--bench]`.
    #[command(disable_help_flag = true)]
    Booksim {
        /// BookSim configuration file(s) and `key=value` overrides, in order.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// What `run` and `sweep` take.
#[derive(clap::Args, Clone)]
struct RunArgs {
    /// The pod file (or `--preset NAME`; neither: the default preset).
    pod: Option<PathBuf>,
    /// A built-in preset instead of a file.
    #[arg(long)]
    preset: Option<String>,
    /// Replace every workload's pattern: uniform, permutation, hotspot, all-to-all,
    /// ring-allreduce.
    #[arg(long)]
    workload: Option<String>,
    /// Replace every workload's offered load (fraction of one port's line rate).
    #[arg(long)]
    load: Option<f64>,
    /// Seed of every random stream.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Injection time: a number with ps, ns, us or ms (plain numbers are us).
    #[arg(long, default_value = DEFAULT_DURATION)]
    duration: String,
    /// Write summary.json, CSV tables and SVG charts into this folder.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
    /// Report simulated events/s, TL flits/s and peak memory.
    #[arg(long)]
    bench: bool,
    /// Run every event in global time order instead of window by window (slower; for
    /// checking the engine: spec-notes/simulator.md#engine).
    #[arg(long)]
    sequential: bool,
}

/// Default injection time of `run` and `sweep`.
const DEFAULT_DURATION: &str = "5us";

impl Default for RunArgs {
    fn default() -> Self {
        RunArgs {
            pod: None,
            preset: None,
            workload: None,
            load: None,
            seed: 1,
            duration: DEFAULT_DURATION.into(),
            out: None,
            json: false,
            bench: false,
            sequential: false,
        }
    }
}

/// Parse "20us", "1.5 ms", "300ns", "5000ps", "7" (us) into picoseconds.
fn parse_duration(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("duration `{s}`: not a number with a unit (ps, ns, us, ms)"))?;
    let scale = match unit.trim() {
        "ps" => 1.0,
        "ns" => 1e3,
        "" | "us" | "µs" => 1e6,
        "ms" => 1e9,
        u => {
            return Err(format!(
                "duration `{s}`: unknown unit `{u}` (ps, ns, us, ms)"
            ))
        }
    };
    let ps = v * scale;
    if !(ps.is_finite() && (1.0..=1e13).contains(&ps)) {
        return Err(format!("duration `{s}`: must be between 1 ps and 10 s"));
    }
    Ok(ps.round() as u64)
}

fn parse_pattern(s: &str) -> Result<Pattern, String> {
    Ok(match s {
        "uniform" => Pattern::Uniform,
        "permutation" => Pattern::Permutation,
        "hotspot" | "incast" => Pattern::Hotspot,
        "all-to-all" => Pattern::AllToAll,
        "ring-allreduce" => Pattern::RingAllreduce,
        o => {
            return Err(format!(
                "workload `{o}`: one of uniform, permutation, hotspot, all-to-all, ring-allreduce"
            ))
        }
    })
}

/// The pod and options of `run` / `sweep`.
fn setup(a: &RunArgs) -> Result<(PodFile, Options), String> {
    let pod = load_pod(a.pod.as_ref(), a.preset.as_deref())?;
    let duration_ps = parse_duration(&a.duration)?;
    let pattern = a.workload.as_deref().map(parse_pattern).transpose()?;
    if let Some(l) = a.load {
        if !(l.is_finite() && l > 0.0 && l <= 1.0) {
            return Err(format!("--load {l}: must be in (0, 1]"));
        }
    }
    let opts = Options {
        seed: a.seed,
        duration_ps,
        warmup_ps: duration_ps / 10,
        pattern,
        load: a.load,
        faults: pod.fault_plan(),
        sequential: a.sequential,
        ..Options::default()
    };
    // The output folder is made before the run: a run of minutes should not end in an
    // I/O error that could have been seen at once.
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    Ok((pod, opts))
}

/// A progress bar that appears only on a terminal and only once a run has taken a second.
struct Progress {
    start: std::time::Instant,
    bar: Option<indicatif::ProgressBar>,
    tty: bool,
}

impl Progress {
    fn new() -> Self {
        Progress {
            start: std::time::Instant::now(),
            bar: None,
            tty: std::io::stderr().is_terminal(),
        }
    }

    fn update(&mut self, done: u64, total: u64, what: &str) {
        if !self.tty {
            return;
        }
        if self.bar.is_none() && self.start.elapsed() >= std::time::Duration::from_secs(1) {
            let b = indicatif::ProgressBar::new(total.max(1));
            b.set_style(
                indicatif::ProgressStyle::with_template("{msg} [{bar:40}] {percent}% ({eta})")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b.set_message(what.to_string());
            self.bar = Some(b);
        }
        if let Some(b) = &self.bar {
            b.set_length(total.max(1));
            b.set_position(done);
        }
    }

    fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

/// Print to stdout; a closed pipe (`| head`) is not an error.
fn emit(text: &str) {
    let _ = std::io::stdout().write_all(text.as_bytes());
}

fn cmd_run(a: &RunArgs) -> ExitCode {
    let (pod, opts) = match setup(a) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("podlink-sim: {e}");
            return ExitCode::from(2);
        }
    };
    let wall = std::time::Instant::now();
    let mut progress = Progress::new();
    let report = run(&pod, &opts, |t, end| progress.update(t, end, "simulating"));
    progress.finish();
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            eprintln!("podlink-sim: {e}");
            return ExitCode::from(2);
        }
    };
    let wall_s = wall.elapsed().as_secs_f64();
    let s = &report.summary;
    if a.json {
        match serde_json::to_string_pretty(s) {
            Ok(j) => emit(&(j + "\n")),
            Err(e) => eprintln!("podlink-sim: {e}"),
        }
    } else {
        emit(&summary_text(s));
    }
    if let Some(dir) = &a.out {
        if let Err(e) = write_outputs(dir, &report) {
            eprintln!("podlink-sim: {}: {e}", dir.display());
            return ExitCode::from(2);
        }
    }
    if a.bench {
        let b = Bench::of(s, wall_s, ALLOCATOR);
        eprintln!("{}", b.text());
        if let Some(dir) = &a.out {
            if let Ok(j) = serde_json::to_string_pretty(&b) {
                let _ = std::fs::write(dir.join("bench.json"), j + "\n");
            }
        }
    }
    if !s.sound() {
        eprintln!("podlink-sim: integrity or conservation check FAILED");
        return ExitCode::from(1);
    }
    if s.violated() {
        eprintln!("podlink-sim: budget VIOLATED");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

fn cmd_sweep(a: &RunArgs, loads: &str) -> ExitCode {
    let (pod, opts) = match setup(a) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("podlink-sim: {e}");
            return ExitCode::from(2);
        }
    };
    let mut list = Vec::new();
    for x in loads.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        match x.parse::<f64>() {
            Ok(l) if l.is_finite() && l > 0.0 && l <= 1.0 => list.push(l),
            _ => {
                eprintln!("podlink-sim: --loads: `{x}` is not a load in (0, 1]");
                return ExitCode::from(2);
            }
        }
    }
    if list.is_empty() {
        eprintln!("podlink-sim: --loads: no loads given");
        return ExitCode::from(2);
    }
    let mut progress = Progress::new();
    let points = sweep(&pod, &opts, &list, |i, n, _| {
        progress.update(i as u64, n as u64, "sweeping")
    });
    progress.finish();
    let points = match points {
        Ok(p) => p,
        Err(e) => {
            eprintln!("podlink-sim: {e}");
            return ExitCode::from(2);
        }
    };
    if a.json {
        match serde_json::to_string_pretty(&points) {
            Ok(j) => emit(&(j + "\n")),
            Err(e) => eprintln!("podlink-sim: {e}"),
        }
    } else {
        let mut t = format!(
            "{}: latency versus offered load (seed {})\n  {:>6} {:>12} {:>8} {:>8}",
            pod.name, a.seed, "load", "Gb/s", "util %", "failed"
        );
        if let Some(p) = points.first() {
            for (c, _) in &p.latency {
                t.push_str(&format!("   {:>9} {:>9}", format!("{c} p50"), "p99"));
            }
        }
        t.push('\n');
        for p in &points {
            t.push_str(&format!(
                "  {:>6.3} {:>12.1} {:>8.1} {:>8}",
                p.load,
                p.throughput_gbps,
                p.utilisation_mean * 100.0,
                p.failed
            ));
            for (_, l) in &p.latency {
                if l.count == 0 {
                    // No operation of the class completed: no latency to show.
                    t.push_str(&format!("   {:>9} {:>9}", "-", "-"));
                } else {
                    t.push_str(&format!("   {:>9.1} {:>9.1}", l.p50_ns, l.p99_ns));
                }
            }
            if !p.sound {
                t.push_str("   UNSOUND");
            }
            t.push('\n');
        }
        emit(&t);
    }
    if let Some(dir) = &a.out {
        if let Err(e) = write_sweep(dir, &pod.name, &points) {
            eprintln!("podlink-sim: {}: {e}", dir.display());
            return ExitCode::from(2);
        }
    }
    if points.iter().any(|p| !p.sound) {
        eprintln!("podlink-sim: integrity or conservation check FAILED at some load");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

fn cmd_conformance(names: &[String], list: bool, json: bool, seed: u64) -> ExitCode {
    use podlink_sim::conformance as conf;
    if list {
        let mut t = String::new();
        for s in conf::SCENARIOS {
            t.push_str(&format!("{:<18} {}\n", s.name, s.about));
        }
        emit(&t);
        return ExitCode::SUCCESS;
    }
    let chosen = match conf::select(names) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("podlink-sim: {e}");
            return ExitCode::from(2);
        }
    };
    let mut progress = Progress::new();
    let results = conf::run(&chosen, seed, |i, n, _| {
        progress.update(i as u64, n as u64, "conformance")
    });
    progress.finish();
    if json {
        match serde_json::to_string_pretty(&results) {
            Ok(j) => emit(&(j + "\n")),
            Err(e) => eprintln!("podlink-sim: {e}"),
        }
    } else {
        emit(&conf::table(&results));
    }
    if results.failed > 0 {
        eprintln!(
            "podlink-sim: {} conformance scenario(s) FAILED",
            results.failed
        );
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

/// Load a pod from a file or a preset name (default preset when neither is given).
fn load_pod(file: Option<&PathBuf>, preset: Option<&str>) -> Result<PodFile, String> {
    match (file, preset) {
        (Some(_), Some(_)) => Err("give a pod file or --preset, not both".into()),
        (Some(f), None) => PodFile::load(f).map_err(|e| e.to_string()),
        (None, p) => presets::load(p.unwrap_or(presets::DEFAULT)).map_err(|e| e.to_string()),
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    match args.cmd {
        Some(Cmd::Export {
            pod,
            preset,
            switch,
            out,
        }) => {
            let pod = match load_pod(pod.as_ref(), preset.as_deref()) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("podlink-sim: {e}");
                    return ExitCode::from(2);
                }
            };
            let fabric = Fabric::build(&pod);
            match podlink_sim::export::export(&pod, &fabric, switch) {
                Ok(bytes) => match std::fs::write(&out, &bytes) {
                    Ok(()) => {
                        println!(
                            "{}: switch {switch} ({}): {} bytes -> {}",
                            pod.name,
                            fabric.switches[switch as usize].name,
                            bytes.len(),
                            out.display()
                        );
                        ExitCode::SUCCESS
                    }
                    Err(e) => {
                        eprintln!("podlink-sim: {}: {e}", out.display());
                        ExitCode::from(2)
                    }
                },
                Err(e) => {
                    eprintln!("podlink-sim: {}: {e}", pod.name);
                    ExitCode::from(1)
                }
            }
        }
        Some(Cmd::Booksim { args }) => podlink_sim::booksim::cli_main(&args),
        Some(Cmd::Conformance {
            names,
            list,
            json,
            seed,
        }) => cmd_conformance(&names, list, json, seed),
        None => cmd_run(&RunArgs::default()),
        Some(Cmd::Run(a)) => cmd_run(&a),
        Some(Cmd::Sweep { run, loads }) => cmd_sweep(&run, &loads),
        Some(Cmd::Presets) => {
            for p in presets::PRESETS {
                let mark = if p.name == presets::DEFAULT {
                    " (default)"
                } else {
                    ""
                };
                // A closed pipe (`| head`) ends the listing quietly.
                if writeln!(std::io::stdout(), "{:<18} {}{mark}", p.name, p.about).is_err() {
                    break;
                }
            }
            ExitCode::SUCCESS
        }
        Some(Cmd::Verify { pod, preset }) => {
            let pod = match load_pod(pod.as_ref(), preset.as_deref()) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("podlink-sim: {e}");
                    return ExitCode::from(2);
                }
            };
            let fabric = Fabric::build(&pod);
            let findings = podlink_sim::verify::verify(&pod, &fabric);
            if findings.is_empty() {
                println!(
                    "{}: OK ({} accelerators, {} switches, {} switch ports)",
                    pod.name,
                    fabric.accels,
                    fabric.switches.len(),
                    fabric.switch_ports()
                );
                ExitCode::SUCCESS
            } else {
                for f in &findings {
                    println!("{}: {}: {}", pod.name, f.check, f.message);
                }
                ExitCode::from(1)
            }
        }
    }
}
