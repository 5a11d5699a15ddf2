//! BookSim-comparable mode: `podlink-sim booksim CONFIG [key=value ...]`
//! (`spec-notes/validation.md#booksim`).
//!
//! Reads a BookSim2 configuration file (BookSim's syntax, key names and defaults; overrides on
//! the command line), builds the network out of the simulator's own [`crate::router`] model,
//! drives it cycle by cycle on the [`crate::engine`], and measures the way BookSim's
//! `TrafficManager` does: packet latency from generation (source queueing included) to tail
//! ejection, accepted flits per node per cycle over the sample periods, BookSim's warm-up,
//! convergence, instability and drain rules. It prints BookSim's overall statistics block
//! (`Packet latency average = X`, `Accepted flit rate average = Y`, ...).
//!
//! Random numbers come from the same generators as BookSim's (Knuth's, [`rng`]), seeded the
//! same way and drawn in the same order, so with the same configuration and seed the traffic
//! is the same packet for packet.

pub mod anynet;
pub mod config;
pub mod network;
pub mod report;
pub mod rng;
pub mod sim;

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Instant as WallClock;

/// Print a line to stdout; a closed pipe (e.g. `| head`) is not an error worth a panic.
fn say(line: &str) {
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}

pub use config::{BooksimConfig, ConfigError, Injection, OnOff, SimType, Topology, Traffic};
pub use sim::{Outcome, Sim, SimError, SimResult};

/// BookSim2's measured speed on these machines (64-port crossbar, 0.5 load, 1-flit packets).
pub const BOOKSIM_FLITS_PER_SEC: f64 = 317_000.0;

/// Run a configuration to completion (no printing).
pub fn run(cfg: BooksimConfig) -> Result<Outcome, SimError> {
    Sim::new(cfg)?.run()
}

/// Latency and accepted rate of an outcome: `(latency, accepted)`, latency infinite when
/// unstable.
pub fn headline(outcome: &Outcome) -> (f64, f64) {
    match outcome {
        Outcome::Done(r) => {
            let n = r.len().max(1) as f64;
            (
                r.iter().map(|x| x.plat.avg()).sum::<f64>() / n,
                r.iter().map(|x| x.accepted_flit_rate().0).sum::<f64>() / n,
            )
        }
        Outcome::Unstable { last, .. } => (f64::INFINITY, last.accepted_flit_rate().0),
    }
}

/// A topology's routing functions in [`SUPPORTED`]: each name with the keys it needs.
pub type Routings = &'static [(&'static str, &'static str)];

/// What the mode runs: each `topology` with the keys this table's check gives it, and its
/// `routing_function` values (BookSim's names without the topology suffix), each with any
/// keys it needs there (more VCs for the `_ni` routings, 3 for `ugal`). `--help` prints it;
/// a test parses every entry.
pub const SUPPORTED: &[(&str, &str, Routings)] = &[
    ("fly", "k=4 n=2", &[("dest_tag", "")]),
    ("fattree", "k=4 n=2", &[("nca", ""), ("anca", "")]),
    ("qtree", "k=4 n=3", &[("nca", "")]),
    ("tree4", "k=4 n=3", &[("nca", ""), ("anca", "")]),
    (
        "mesh",
        "k=4 n=2",
        &[
            ("dim_order", ""),
            ("dor", ""),
            ("xy_yx", ""),
            ("adaptive_xy_yx", ""),
            ("min_adapt", ""),
            ("planar_adapt", ""),
            ("dim_order_ni", "num_vcs=16"),
            ("dim_order_pni", ""),
            ("valiant", ""),
            ("romm", ""),
            ("romm_ni", "num_vcs=16"),
        ],
    ),
    (
        "torus",
        "k=4 n=2",
        &[
            ("dim_order", ""),
            ("dim_order_bal", ""),
            ("min_adapt", ""),
            ("dim_order_ni", "num_vcs=16"),
        ],
    ),
    (
        "cmesh",
        "k=4 n=2 c=4 xr=2 yr=2",
        &[
            ("dor", ""),
            ("dor_no_express", ""),
            ("xy_yx", ""),
            ("xy_yx_no_express", ""),
        ],
    ),
    (
        "flatfly",
        "k=4 n=2 c=4 xr=2 yr=2 x=4 y=4",
        &[
            ("ran_min", ""),
            ("xyyx", ""),
            ("adaptive_xyyx", ""),
            ("valiant", ""),
        ],
    ),
    (
        "dragonflynew",
        "k=1 n=1",
        &[("min", ""), ("ugal", "num_vcs=3")],
    ),
    ("anynet", "network_file=FILE", &[("min", "")]),
];

/// `podlink-sim booksim --help`.
fn help() -> String {
    let mut h = String::from(
        "usage: podlink-sim booksim CONFIG [key=value ...] [--bench] [--quiet]\n\n\
         Runs a BookSim2 configuration (files and key=value overrides, in BookSim's order) and\n\
         prints BookSim's statistics block; --quiet drops the per-sample lines, --bench adds a\n\
         speed line. Exit status 2: a configuration the mode refuses (the message names the\n\
         key), 1: a simulation error. router = iq. Topologies and routing functions:\n",
    );
    for (topology, _, routings) in SUPPORTED {
        let names: Vec<&str> = routings.iter().map(|(r, _)| *r).collect();
        h.push_str(&format!("  {topology:<13} {}\n", names.join(", ")));
    }
    h.push_str(
        "Allocators (vc_allocator, sw_allocator): islip, islip(N), separable_input_first,\n\
         separable_output_first, wavefront, rr_wavefront, max_size, loa, pim, pim(N), select.\n\
         What is refused and why: spec-notes/validation.md.",
    );
    h
}

/// The `booksim` subcommand. Arguments are BookSim's (configuration files and `key=value`
/// overrides, in order) plus `--bench` (print simulation speed) and `--quiet` (no per-sample
/// lines). Exit status: 0 when the run completed (stable or not), 2 for a configuration that
/// cannot be honoured, 1 for a simulation error.
pub fn cli_main<S: AsRef<str>>(args: &[S]) -> ExitCode {
    let mut bench = false;
    let mut quiet = false;
    let mut rest = Vec::new();
    for a in args {
        match a.as_ref() {
            "--bench" => bench = true,
            "--quiet" | "-q" => quiet = true,
            "-h" | "--help" => {
                say(&help());
                return ExitCode::SUCCESS;
            }
            s if s.starts_with('-') && !s.contains('=') => {
                eprintln!("podlink-sim booksim: unknown option `{s}`");
                return ExitCode::from(2);
            }
            s => rest.push(s.to_string()),
        }
    }
    let cfg = match BooksimConfig::from_args(&rest) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("podlink-sim booksim: {e}");
            return ExitCode::from(2);
        }
    };
    let mut sim = match Sim::new(cfg) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("podlink-sim booksim: {e}");
            return ExitCode::from(2);
        }
    };
    if !quiet {
        sim.on_sample = Some(Box::new(|s| say(&report::sample_line(s))));
    }
    let start = WallClock::now();
    let outcome = match sim.run() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("podlink-sim booksim: {e}");
            return ExitCode::from(1);
        }
    };
    let wall = start.elapsed().as_secs_f64();
    match &outcome {
        Outcome::Unstable { reason, .. } => {
            say(reason);
            say("Simulation unstable, ending ...");
        }
        Outcome::Done(r) => {
            for x in r {
                say(&format!("Time taken is {} cycles", x.time_taken));
            }
        }
    }
    say(report::overall(&outcome).trim_end());
    say(&format!("Total run time {}", report::fmt_g(wall)));
    if bench {
        let w = sim.work();
        let flits_per_s = w.flits as f64 / wall;
        say(&format!(
            "bench: {} cycles, {} flits ejected, {} engine events in {:.3} s: {:.0} cycles/s, {:.0} flits/s = {:.1}x BookSim2 ({} flits/s)",
            w.cycles,
            w.flits,
            w.events,
            wall,
            w.cycles as f64 / wall,
            flits_per_s,
            flits_per_s / BOOKSIM_FLITS_PER_SEC,
            BOOKSIM_FLITS_PER_SEC
        ));
        if let Some(rs) = sim.router_stats(0) {
            say(&format!("bench: router 0: {rs:?}"));
        }
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    const XBAR: &str = include_str!("../../tests/data/booksim/xbar16.cfg");

    /// Every topology and routing function `--help` lists is accepted, with the keys the
    /// table gives it; the help names each of them.
    #[test]
    fn every_supported_routing_is_accepted_and_listed() {
        let net = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/booksim/sweep/anynet_k4.net"
        );
        let help = help();
        for (topology, keys, routings) in SUPPORTED {
            let line = help
                .lines()
                .find(|l| l.split_whitespace().next() == Some(topology))
                .unwrap_or_else(|| panic!("{topology} missing from the help"));
            for (routing, extra) in *routings {
                assert!(line.contains(routing), "{topology} {routing} missing");
                let mut args = vec![
                    format!("topology={topology}"),
                    format!("routing_function={routing}"),
                ];
                let keys = keys.replace("FILE", net);
                args.extend(keys.split_whitespace().map(String::from));
                args.extend(extra.split_whitespace().map(String::from));
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                if let Err(e) = BooksimConfig::from_text(XBAR, &args) {
                    panic!("{args:?}: {e}");
                }
            }
        }
    }
}
