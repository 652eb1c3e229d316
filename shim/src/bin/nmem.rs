//! `nmem`: the hook handler and the command-line face of nmem.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "nmem",
    version,
    about = "Memory for AI coding agents: records what they do, answers what they did."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The hook handler: read one hook payload on stdin and hand it to nmemd (see `nmem record --help`).
    Record {
        /// claude-code (default), codex, codex-notify, gemini or cursor.
        #[arg(long, alias = "from", default_value = "claude-code")]
        harness: String,
        /// codex-notify only: the JSON payload, passed as the last argument.
        payload: Option<String>,
    },
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    // The hook hot path: no argument parser, no runtime, straight to work.
    if args.get(1).map(String::as_str) == Some("record") {
        if args.iter().skip(2).any(|a| a == "-h" || a == "--help") {
            println!("{}", nmem_shim::record::USAGE);
            return ExitCode::SUCCESS;
        }
        return nmem_shim::record::main(&args[2..]);
    }
    let cli = Cli::parse();
    match cli.command {
        Command::Record { .. } => unreachable!("handled above"),
    }
}
