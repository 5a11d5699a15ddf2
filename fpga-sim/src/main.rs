//! `podlink-sim`: the podlink pod simulator.

use clap::{Parser, Subcommand};
use podlink_sim::pod::{presets, topology::Fabric, PodFile};
use std::io::Write;
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
    /// Run a pod (default preset when no file is given).
    Run,
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
    /// BookSim-comparable mode: `booksim CONFIG [key=value ...] [--bench]`.
    #[command(disable_help_flag = true)]
    Booksim {
        /// BookSim configuration file(s) and `key=value` overrides, in order.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
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
        None | Some(Cmd::Run) => {
            eprintln!("podlink-sim: the pod model is not built yet");
            ExitCode::from(1)
        }
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
