//! Transaction soak: random reads, writes, write messages and atomics from several
//! requesters to several completers, every result checked against a reference memory model.
//!
//! ```text
//!  requester 0 ──┐  TL packer → 64 B TL   ┌── completer 0 (memory, partition 0)
//!  requester 1 ──┼── flits → TL unpacker ─┼── completer 1 (memory, partition 1)
//!      ...       │  per pair, TL credits  │       ...
//!  requester N ──┘                        └── completer max(2, P) − 1
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
//! leaked across partitions. `--flit-error-rate` needs the link layer; until it is composed
//! into `txn::Endpoint` only 0 is accepted (a direct, lossless connection).

#[path = "../tests/txn/model.rs"]
mod model;

use std::process::ExitCode;

use model::{run_direct, ModelConfig, Transport};

fn usage(msg: &str) -> ExitCode {
    eprintln!("txn_soak: {msg}");
    eprintln!(
        "usage: txn_soak [--requesters N] [--ops M] [--flit-error-rate R] [--partitions P] [--seed S]"
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
            _ => return usage(&format!("unknown flag {flag}")),
        }
    }
    cfg.completers = cfg.partitions.max(2);
    if rate != 0.0 {
        return usage(
            "--flit-error-rate > 0 needs the link layer (txn::Endpoint), not composed yet",
        );
    }
    let report = run_direct(cfg);
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
