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
    /// Start nmemd (through systemd when nmem's units are enabled).
    Start,
    /// Stop nmemd: it finishes its queue and checkpoints first.
    Stop,
    /// Stop, then start.
    Restart,
    /// A consistent copy of the database (SQLite online backup), even while events stream in.
    Backup {
        /// The new file to write.
        path: std::path::PathBuf,
    },
    /// Checkpoint the WAL, reclaim free pages, check and optimise the full-text indexes.
    Maintain,
    /// Keep an observation forever and show it in every digest.
    Pin { id: i64 },
    /// Undo `pin`.
    Unpin { id: i64 },
    /// Stop recording (for every project); hooks still exit 0 at once.
    Pause,
    /// Record again.
    Resume,
    /// Everything (sessions, prompts, observations) as JSON lines.
    Export {
        /// Write to this new file instead of stdout.
        #[arg(long, short)]
        output: Option<std::path::PathBuf>,
    },
    /// The end of the daemon's log.
    Logs {
        #[arg(long, short = 'n', default_value_t = 100)]
        lines: usize,
    },
    /// Check config.toml: every error named.
    Config {
        #[command(subcommand)]
        action: ConfigAction,
    },
}

#[derive(Subcommand)]
enum ConfigAction {
    /// Validate the config file (keys, values, redaction patterns).
    Check,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Status { json } => nmem_shim::ctl::status(json),
        Command::Start => nmem_shim::ctl::service("start"),
        Command::Stop => nmem_shim::ctl::service("stop"),
        Command::Restart => nmem_shim::ctl::service("restart"),
        Command::Backup { path } => nmem_shim::ctl::backup(&path),
        Command::Maintain => nmem_shim::ctl::maintain(),
        Command::Pin { id } => nmem_shim::ctl::pin(id, true),
        Command::Unpin { id } => nmem_shim::ctl::pin(id, false),
        Command::Pause => nmem_shim::ctl::pause(true),
        Command::Resume => nmem_shim::ctl::pause(false),
        Command::Export { output } => nmem_shim::ctl::export(output.as_deref()),
        Command::Logs { lines } => nmem_shim::ctl::logs(lines),
        Command::Config {
            action: ConfigAction::Check,
        } => nmem_shim::ctl::config_check(),
    }
}
