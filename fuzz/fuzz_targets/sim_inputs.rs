//! Arbitrary text into the simulator's file inputs: the first byte picks the parser, the rest
//! is the text (invalid UTF-8 replaced). Pod files (`PodFile::parse`, including the
//! `[faults]` section; an accepted pod of up to 64 accelerators also builds its fabric, runs
//! `podlink-sim verify`'s checks and yields its fault plan), operation traces (CSV) and BookSim
//! configuration files (an accepted one that is small and short is also simulated: every run
//! ends, stably, unstable or with a typed error); a first byte from 0xF0 up picks BookSim's
//! `anynet` network files (an accepted one of up to 64 routers is routed and wired). Every
//! input is refused with an error or accepted; nothing panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podlink_sim::booksim::anynet::AnyNet;
use podlink_sim::booksim::config::{BooksimConfig, Topology};
use podlink_sim::booksim::network::build;
use podlink_sim::router::RouterConfig;
use podlink_sim::pod::config::PodFile;
use podlink_sim::pod::topology::Fabric;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    if which >= 0xF0 {
        if let Ok(net) = AnyNet::parse(&text) {
            if net.routers() <= 64 {
                let topology = Topology::AnyNet(std::sync::Arc::new(net));
                let _ = build(topology, 1, &RouterConfig::default());
            }
        }
        return;
    }
    match which % 3 {
        0 => {
            if let Ok(pod) = PodFile::parse(&text, "fuzz.toml") {
                if pod.accelerators() <= 64 && pod.switch_ports().len() <= 64 {
                    let fabric = Fabric::build(&pod);
                    let _ = podlink_sim::verify::verify(&pod, &fabric);
                    let _ = pod.fault_plan();
                }
            }
        }
        1 => {
            let _ = podlink_sim::workload::parse_trace(&text, 16);
        }
        _ => {
            if let Ok(cfg) = BooksimConfig::from_text(&text, &[]) {
                if small_and_short(&cfg) {
                    if let Ok(mut sim) = podlink_sim::booksim::Sim::new(cfg) {
                        // A stalled request/reply drain ends within 100,000 cycles here.
                        sim.limit_drain_stall(100_000);
                        let _ = sim.run();
                    }
                }
            }
        }
    }
});

/// A BookSim configuration that simulates in milliseconds: at most 16 terminals and a few
/// routers' worth of stages, short samples, small packets, a latency threshold that ends a
/// stuck measurement soon (or none: then the mode's deadlock stop ends the drain).
fn small_and_short(cfg: &BooksimConfig) -> bool {
    let r = &cfg.router;
    let n = cfg.topology.k_n().1;
    let largest = cfg
        .packet_mix
        .iter()
        .flat_map(|m| m.sizes.iter())
        .chain(cfg.read_write.iter().flat_map(|rw| rw.size.iter()))
        .copied()
        .max()
        .unwrap_or(0)
        .max(cfg.packet_size);
    cfg.topology.nodes() <= 16
        && n <= 4
        && cfg.sample_period <= 200
        && cfg.max_samples <= 4
        && cfg.warmup_periods <= 4
        && cfg.sim_count <= 2
        && cfg.latency_thres <= 2000.0
        && largest <= 16
        && r.vc_buf_size <= 64
        && [
            r.routing_delay,
            r.vc_alloc_delay,
            r.sw_alloc_delay,
            r.credit_delay,
        ]
        .iter()
        .all(|&d| d <= 4)
        && r.st_prepare_delay + r.st_final_delay <= 4
        && r.input_speedup <= 4
        && r.output_speedup <= 4
        && r.internal_speedup <= 4.0
}
