//! Arbitrary text into the simulator's file inputs: the first byte picks the parser, the rest
//! is the text (invalid UTF-8 replaced). Pod files (`PodFile::parse`, including the
//! `[faults]` section; an accepted pod of up to 64 accelerators also builds its fabric, runs
//! `podlink-sim verify`'s checks and yields its fault plan), operation traces (CSV) and BookSim
//! configuration files. Every input is refused with an error or accepted; nothing panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podlink_sim::booksim::config::BooksimConfig;
use podlink_sim::pod::config::PodFile;
use podlink_sim::pod::topology::Fabric;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
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
            let _ = BooksimConfig::from_text(&text, &[]);
        }
    }
});
