//! The BookSim-comparable mode against BookSim2's own results (`tests/data/booksim/xbar16.csv`,
//! from `xbar16.cfg`: a 16-port crossbar, 4 VCs x 8 flits, 1- and 5-flit packets, seed 1).
//!
//! Requirements (issue 7): latency within 5 % at every load up to 0.9 of saturation, and
//! saturation throughput within 3 %. The mode reproduces BookSim's random stream and pipeline,
//! so in practice every stable point matches to BookSim's printed precision; the test keeps
//! the required tolerances as its pass criterion and also reports the exact-match count.
//!
//! Unstable points (`inf` in the CSV) are BookSim latency runs that aborted; their accepted
//! rate is BookSim's `sim_type = throughput` result, which is what this test compares.

use podlink_sim::booksim::{headline, run, BooksimConfig};

const CFG: &str = include_str!("data/booksim/xbar16.cfg");
const CSV: &str = include_str!("data/booksim/xbar16.csv");

struct Row {
    packet_size: u32,
    rate: f64,
    latency: f64,
    accepted: f64,
}

fn rows() -> Vec<Row> {
    CSV.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.trim().split(',').collect();
            Row {
                packet_size: f[2].parse().unwrap(),
                rate: f[5].parse().unwrap(),
                latency: if f[6] == "inf" {
                    f64::INFINITY
                } else {
                    f[6].parse().unwrap()
                },
                accepted: f[7].parse().unwrap(),
            }
        })
        .collect()
}

fn sim(packet_size: u32, rate: f64, sim_type: &str) -> (f64, f64) {
    let ps = format!("packet_size={packet_size}");
    let ir = format!("injection_rate={rate}");
    let st = format!("sim_type={sim_type}");
    let cfg = BooksimConfig::from_text(CFG, &[&ps, &ir, &st]).unwrap();
    headline(&run(cfg).unwrap())
}

fn rel(a: f64, b: f64) -> f64 {
    ((a - b) / b).abs()
}

fn check(packet_size: u32) {
    let rows: Vec<Row> = rows()
        .into_iter()
        .filter(|r| r.packet_size == packet_size)
        .collect();
    // Saturation throughput: the accepted rate at full offered load.
    let full = rows.iter().find(|r| r.rate == 1.0).unwrap();
    let (_, sat) = sim(packet_size, 1.0, "throughput");
    println!(
        "{packet_size}-flit saturation: BookSim {} ours {sat:.6} ({:+.3} %)",
        full.accepted,
        100.0 * (sat - full.accepted) / full.accepted
    );
    assert!(
        rel(sat, full.accepted) <= 0.03,
        "saturation {sat} vs {}",
        full.accepted
    );

    let mut exact = 0;
    let mut checked = 0;
    for r in rows.iter().filter(|r| r.rate <= 0.9 * full.accepted) {
        let (lat, acc) = sim(packet_size, r.rate, "latency");
        println!(
            "{packet_size}-flit load {:.2}: latency BookSim {} ours {lat:.6} ({:+.3} %), accepted BookSim {} ours {acc:.6}",
            r.rate,
            r.latency,
            100.0 * (lat - r.latency) / r.latency,
            r.accepted
        );
        assert!(
            rel(lat, r.latency) <= 0.05,
            "load {}: latency {lat} vs {}",
            r.rate,
            r.latency
        );
        assert!(
            rel(acc, r.accepted) <= 0.03,
            "load {}: accepted {acc} vs {}",
            r.rate,
            r.accepted
        );
        // The CSV prints 6 significant digits.
        if rel(lat, r.latency) < 5e-6 && rel(acc, r.accepted) < 5e-6 {
            exact += 1;
        }
        checked += 1;
    }
    println!(
        "{packet_size}-flit: {exact} of {checked} points identical to BookSim's printed values"
    );
    assert!(checked >= 10);
}

#[test]
fn xbar16_one_flit_packets_match_booksim() {
    check(1);
}

#[test]
fn xbar16_five_flit_packets_match_booksim() {
    check(5);
}

/// Every point of the CSV, unstable ones included (run with `--ignored`, ideally `--release`).
#[test]
#[ignore]
fn xbar16_every_point() {
    for r in rows() {
        if r.latency.is_finite() {
            let (lat, acc) = sim(r.packet_size, r.rate, "latency");
            assert!(rel(lat, r.latency) < 5e-6 && rel(acc, r.accepted) < 5e-6);
        } else {
            let (lat, _) = sim(r.packet_size, r.rate, "latency");
            assert!(lat.is_infinite(), "{} {}", r.packet_size, r.rate);
            let (_, acc) = sim(r.packet_size, r.rate, "throughput");
            assert!(
                rel(acc, r.accepted) < 5e-6,
                "{} {}: {acc} vs {}",
                r.packet_size,
                r.rate,
                r.accepted
            );
        }
    }
}
