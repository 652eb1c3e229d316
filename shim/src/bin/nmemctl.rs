//! `nmemctl`: operate the nmem daemon.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "nmemctl", version, about = "Operate nmemd, the nmem daemon.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Health, versions, queue, spool, counts and sizes. Exit 0 healthy, 1 not running, 2 degraded.
    Status {
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Status { json } => nmem_shim::ctl::status(json),
    }
}
