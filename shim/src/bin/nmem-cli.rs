//! `nmem-cli`: the command-line face of nmem. The `nmem` binary (crate `nmem-hook`) runs `nmem
//! record` itself and `exec`s every other subcommand into this one with argv[0] kept, so help and
//! errors still say `nmem`. `record` is handled here too, for whoever calls `nmem-cli` directly.

use clap::{Parser, Subcommand, ValueEnum};
use nmem_proto::harness::Harness;
use nmem_proto::query::{OrderBy, SearchMode};
use nmem_shim::cli;
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

#[derive(Clone, Copy, ValueEnum)]
enum Order {
    Relevance,
    DateDesc,
    DateAsc,
    Blended,
}

/// Which sources a search uses.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Mode {
    /// Words and meaning (the default when an embedding model is installed).
    Hybrid,
    /// Words only.
    Lexical,
    /// Meaning only (needs an embedding model).
    Semantic,
}

impl From<Mode> for SearchMode {
    fn from(m: Mode) -> SearchMode {
        match m {
            Mode::Hybrid => SearchMode::Hybrid,
            Mode::Lexical => SearchMode::Lexical,
            Mode::Semantic => SearchMode::Semantic,
        }
    }
}

impl From<Order> for OrderBy {
    fn from(o: Order) -> OrderBy {
        match o {
            Order::Relevance => OrderBy::Relevance,
            Order::DateDesc => OrderBy::DateDesc,
            Order::DateAsc => OrderBy::DateAsc,
            Order::Blended => OrderBy::Blended,
        }
    }
}

#[derive(clap::Args)]
struct ProjectArgs {
    /// Only this project (default: the project of the current directory).
    #[arg(long, conflicts_with = "all_projects")]
    project: Option<String>,
    /// Every project.
    #[arg(long)]
    all_projects: bool,
}

#[derive(clap::Args)]
struct TargetArgs {
    /// claude-code (or claude), codex, gemini, cursor or all (default: Claude Code and every
    /// other harness whose config folder exists).
    #[arg(long)]
    harness: Option<String>,
    /// Leave the service manager alone (the shims start nmemd on demand).
    #[arg(long)]
    no_service: bool,
    /// Print what would change; change nothing.
    #[arg(long)]
    dry_run: bool,
}

impl TargetArgs {
    fn options(self, delete_data: bool) -> Result<nmem_shim::install::Options, ExitCode> {
        let targets = match self
            .harness
            .as_deref()
            .map(|h| Harness::choose(h, |s| s.installs()))
        {
            None => None,
            Some(Some(t)) => Some(t),
            Some(None) => {
                eprintln!(
                    "nmem: unknown harness; use {} or all",
                    Harness::names(|s| s.installs())
                );
                return Err(ExitCode::from(2));
            }
        };
        Ok(nmem_shim::install::Options {
            targets,
            service: !self.no_service,
            dry_run: self.dry_run,
            delete_data,
        })
    }
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
    /// The MCP server on stdin/stdout (tools: search, get_observations, timeline, recent_context, save_memory).
    Serve,
    /// Search past observations and prompts. Plain words match as written; FTS5 syntax
    /// (AND/OR/NOT, "phrase", prefix*) is used as is.
    Search {
        #[arg(required = true)]
        query: Vec<String>,
        #[command(flatten)]
        project: ProjectArgs,
        /// Only this observation type (repeatable): command, command_error, file_edit, user_prompt, …
        #[arg(long = "type")]
        types: Vec<String>,
        /// Only observations of this file (repeatable; absolute, project-relative, or a file name).
        #[arg(long = "file")]
        files: Vec<String>,
        /// From this date (2026-08-20, an ISO date-time, or Unix time).
        #[arg(long)]
        since: Option<String>,
        /// Up to this date.
        #[arg(long)]
        until: Option<String>,
        #[arg(long, value_enum)]
        order: Option<Order>,
        /// Sources: hybrid (default with an embedding model), lexical, or semantic.
        #[arg(long, value_enum)]
        mode: Option<Mode>,
        /// Results (default 20, at most 100).
        #[arg(long)]
        limit: Option<i64>,
        #[arg(long)]
        offset: Option<i64>,
        /// JSON instead of a table (an object: `items`, `mode`, `query`, `notes`).
        #[arg(long)]
        json: bool,
        /// Show how each result was found (lexical tier, semantic similarity, prompt context).
        #[arg(long)]
        explain: bool,
    },
    /// Full observations by id.
    Get {
        #[arg(required = true)]
        ids: Vec<i64>,
        #[arg(long)]
        json: bool,
    },
    /// What happened around an observation in its session.
    Timeline {
        /// The observation id to center on (or use --query).
        anchor: Option<i64>,
        /// Center on the best match of this search instead.
        #[arg(long, conflicts_with = "anchor")]
        query: Option<String>,
        #[arg(long)]
        before: Option<i64>,
        #[arg(long)]
        after: Option<i64>,
        #[command(flatten)]
        project: ProjectArgs,
        #[arg(long)]
        json: bool,
    },
    /// The latest observations of a project.
    Recent {
        #[command(flatten)]
        project: ProjectArgs,
        #[arg(long)]
        limit: Option<i64>,
        /// Also session bookkeeping (starts, turn ends, compactions), not only actions.
        #[arg(long)]
        all: bool,
        #[arg(long)]
        json: bool,
    },
    /// Wire nmem into the harnesses (hooks and MCP server) and the service manager. Idempotent;
    /// every changed file is backed up first; only nmem's own entries are touched.
    Install {
        #[command(flatten)]
        target: TargetArgs,
        /// Then import the sessions already on disk (`nmem import`), without asking.
        #[arg(long, conflicts_with = "no_import")]
        import: bool,
        /// Do not offer to import the sessions already on disk.
        #[arg(long)]
        no_import: bool,
    },
    /// Take nmem's hooks, MCP servers and service out again; the memory is kept.
    Uninstall {
        #[command(flatten)]
        target: TargetArgs,
        /// Also delete the memory (database and spool).
        #[arg(long)]
        delete_data: bool,
    },
    /// Back-fill memory from the sessions on disk: Claude Code transcripts (~/.claude/projects),
    /// Codex rollouts (~/.codex/sessions) and Gemini CLI chats (~/.gemini/tmp), or the files and
    /// folders given. Importing twice, or a session also captured live, stores it once.
    Import {
        /// Session files or folders (default: each harness's own folder).
        paths: Vec<std::path::PathBuf>,
        /// Whose sessions: claude-code (or claude), codex, gemini or all.
        #[arg(long, default_value = "all")]
        harness: String,
        /// Only events from this date on (2026-08-20 or an ISO date-time).
        #[arg(long)]
        since: Option<String>,
        /// Only this project (the name nmem gives it: the folder's name).
        #[arg(long)]
        project: Option<String>,
        /// Read and count, store nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print the summary (counts, and every line not stored by reason) as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remember something for later sessions.
    Save {
        #[arg(required = true)]
        text: Vec<String>,
        #[arg(long)]
        title: Option<String>,
        /// The project it belongs to (default: the current directory's).
        #[arg(long)]
        project: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    // The hook hot path: no argument parser, no runtime, straight to work (read as the small
    // `nmem` reads it).
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(status) = nmem_shim::record::from_argv(&args) {
        return ExitCode::from(status);
    }
    let cli = Cli::parse();
    match cli.command {
        Command::Record { .. } => unreachable!("handled above"),
        Command::Serve => match nmem_shim::serve::run() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("nmem serve: {e:#}");
                ExitCode::FAILURE
            }
        },
        Command::Search {
            query,
            project,
            types,
            files,
            since,
            until,
            order,
            mode,
            limit,
            offset,
            json,
            explain,
        } => cli::search(cli::SearchArgs {
            query,
            project: cli::project_arg(project.project, project.all_projects),
            types,
            files,
            since,
            until,
            order: order.map(Into::into),
            mode: mode.map(Into::into),
            limit,
            offset,
            json,
            explain,
        }),
        Command::Get { ids, json } => cli::get(ids, json),
        Command::Timeline {
            anchor,
            query,
            before,
            after,
            project,
            json,
        } => cli::timeline(
            anchor,
            query,
            before,
            after,
            cli::project_arg(project.project, project.all_projects),
            json,
        ),
        Command::Recent {
            project,
            limit,
            all,
            json,
        } => cli::recent(
            cli::project_arg(project.project, project.all_projects),
            limit,
            all,
            json,
        ),
        Command::Save {
            text,
            title,
            project,
            json,
        } => cli::save(text, title, project, json),
        Command::Import {
            paths,
            harness,
            since,
            project,
            dry_run,
            json,
        } => {
            let Some(sources) = Harness::choose(&harness, |s| s.imports) else {
                eprintln!(
                    "nmem import: --harness takes {} or all (not `{harness}`)",
                    Harness::names(|s| s.imports)
                );
                return ExitCode::from(2);
            };
            let since_ms = match since
                .as_deref()
                .map(|d| nmem_proto::time::parse_date(d, false))
            {
                None => None,
                Some(Ok(ms)) => Some(ms),
                Some(Err(e)) => {
                    eprintln!("nmem import: --since {e}");
                    return ExitCode::from(2);
                }
            };
            nmem_shim::import::run(nmem_shim::import::Options {
                paths,
                sources,
                since_ms,
                project,
                dry_run,
                json,
            })
        }
        Command::Install {
            target,
            import,
            no_import,
        } => match target.options(false) {
            Ok(o) => {
                let dry_run = o.dry_run;
                let code = nmem_shim::install::install(o);
                if code != ExitCode::SUCCESS || dry_run || no_import {
                    return code;
                }
                nmem_shim::import::offer(import)
            }
            Err(code) => code,
        },
        Command::Uninstall {
            target,
            delete_data,
        } => match target.options(delete_data) {
            Ok(o) => nmem_shim::install::uninstall(o),
            Err(code) => code,
        },
    }
}
