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
    /// BookSim-comparable mode: `booksim CONFIG [key=value ...] [--bench]`.
    #[command(disable_help_flag = true)]
    Booksim {
        /// BookSim configuration file(s) and `key=value` overrides, in order.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    match args.cmd {
        Some(Cmd::Booksim { args }) => podlink_sim::booksim::cli_main(&args),
        None | Some(Cmd::Run) => {
            eprintln!("podlink-sim: the pod model is not built yet");
            ExitCode::from(1)
        }
    }
}
