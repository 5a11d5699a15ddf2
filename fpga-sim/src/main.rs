//! `podlink-sim`: the podlink pod simulator.

use clap::{Parser, Subcommand};
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
}

fn main() -> ExitCode {
    let args = Args::parse();
    match args.cmd {
        None | Some(Cmd::Run) => {
            eprintln!("podlink-sim: the pod model is not built yet");
            ExitCode::from(1)
        }
    }
}
