//! Transaction soak: random reads, writes, write messages and atomics from several
//! requesters to several completers, every result checked against a reference memory model.
//!
//! ```text
//!  requester 0 ─ Endpoint ═╗  one UALink-profile link   ╔═ Endpoint ─┐ completer 0
//!  requester 1 ─ Endpoint ═╬═ per pair, FaultInjector ══╬═ Endpoint ─┤ (memory,
//!      ...                 ║  wires at the flit error   ║    ...     │  partition 0)
//!  requester N ─ Endpoint ═╝  rate R, link-level retry  ╚═ Endpoint ─┘ completer max(2,P)−1
//! ```
//!
//! ```text
//! cargo run --release -p podlink-protocol --example txn_soak -- \
//!     --requesters N --ops M --flit-error-rate R --partitions P --seed S
//! ```
//!
//! Prints one JSON object
//! `{"ops","completed","mismatches","timeouts","partition_denied","cross_partition_leaks","lost","duplicated"}`
//! and exits 0 only when every operation completed once with the right result and nothing
//! leaked across partitions.
//!
//! Every requester–completer pair has its own link: two `txn::Endpoint`s over a
//! `testing::LinkPair` whose wires corrupt each DL flit with probability R (a 16-bit burst);
//! link-level retry must hide every error. Each requester works in a private window of each
//! completer's memory (so plain results follow from submission order) and all share two hot
//! counters (fetch-adds must sum exactly, compare-and-swap winners must be unique). With
//! P > 1 partitions some operations cross partitions and must be refused.
//!
//! `--transport packed|direct` (optional) runs the stronger model over TL packer/unpacker
//! pipes or per-VC FIFOs instead (no link, R must be 0): random VCs, shared addresses, every
//! request checked against a reference memory at the moment the completer executes it.

#[path = "../tests/txn/model.rs"]
mod model;

use std::process::ExitCode;

use model::{run_direct, run_linked, ModelConfig, Transport};

fn usage(msg: &str) -> ExitCode {
    eprintln!("txn_soak: {msg}");
    eprintln!(
        "usage: txn_soak [--requesters N] [--ops M] [--flit-error-rate R] [--partitions P] [--seed S] [--transport link|packed|direct]"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut cfg = ModelConfig {
        requesters: 4,
        ops: 10_000,
        transport: Transport::Packed,
        ..ModelConfig::default()
    };
    let mut rate = 0.0f64;
    let mut transport = None;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let Some(value) = args.next() else {
            return usage(&format!("{flag} needs a value"));
        };
        let bad = || usage(&format!("bad value {value:?} for {flag}"));
        match flag.as_str() {
            "--requesters" => match value.parse() {
                Ok(n) if (1..=500).contains(&n) => cfg.requesters = n,
                _ => return bad(),
            },
            "--ops" => match value.parse() {
                Ok(n) => cfg.ops = n,
                _ => return bad(),
            },
            "--flit-error-rate" => match value.parse::<f64>() {
                Ok(r) if (0.0..1.0).contains(&r) => rate = r,
                _ => return bad(),
            },
            "--partitions" => match value.parse() {
                Ok(p) if (1..=64).contains(&p) => cfg.partitions = p,
                _ => return bad(),
            },
            "--seed" => match value.parse() {
                Ok(s) => cfg.seed = s,
                _ => return bad(),
            },
            "--transport" => match value.as_str() {
                "link" => transport = None,
                "packed" => transport = Some(Transport::Packed),
                "direct" => transport = Some(Transport::Direct),
                _ => return bad(),
            },
            _ => return usage(&format!("unknown flag {flag}")),
        }
    }
    cfg.completers = cfg.partitions.max(2);
    let report = match transport {
        None => run_linked(cfg, rate),
        Some(_) if rate != 0.0 => return usage("--flit-error-rate needs the link transport"),
        Some(t) => {
            cfg.transport = t;
            run_direct(cfg)
        }
    };
    println!("{}", report.to_json());
    for d in &report.details {
        eprintln!("txn_soak: {d}");
    }
    if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
