//! `nmem-cli`: the command-line face of nmem. The `nmem` binary (crate `nmem-hook`) runs `nmem
//! record` itself and `exec`s every other subcommand into this one with argv[0] kept, so help and
//! errors still say `nmem`. `record` is handled here too, for whoever calls `nmem-cli` directly.

use clap::{Parser, Subcommand, ValueEnum};
use nmem_proto::harness::Harness;
use nmem_proto::query::{OrderBy, OriginFilter, SearchMode};
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

/// Which results a search keeps by where they were captured (sync).
#[derive(Clone, Copy, clap::ValueEnum)]
enum Origin {
    /// Every result (the default).
    Any,
    /// Captured on this device.
    ThisDevice,
    /// This device and your other devices (the personal sync space).
    MyDevices,
    /// Your teammates' events, received through a team space.
    Team,
}

impl From<Origin> for OriginFilter {
    fn from(o: Origin) -> OriginFilter {
        match o {
            Origin::Any => OriginFilter::Any,
            Origin::ThisDevice => OriginFilter::ThisDevice,
            Origin::MyDevices => OriginFilter::MyDevices,
            Origin::Team => OriginFilter::Team,
        }
    }
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

/// Which MCP contract `nmem serve` speaks.
#[derive(Clone, Copy, ValueEnum)]
enum ServeProfile {
    /// nmem's own tools.
    Nmem,
    /// codex-mem's MCP API v1.
    CodexMem,
    /// memory-substrate's four tools, resources and prompts.
    Substrate,
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
    /// The MCP server on stdin/stdout. Profile nmem (default): search, get_observations,
    /// timeline, recent_context, save_memory, __IMPORTANT; codex-mem: codex-mem's MCP API v1
    /// (save_memory, search, timeline, get_entries, ingest_docs, retention_dry_run); substrate:
    /// memory-substrate's memory_ingest, memory_query, memory_remember, memory_maintain (each
    /// `{args: {mode, input_data, options}}`), its memory:// resources and prompts.
    Serve {
        #[arg(long, value_enum, default_value = "nmem")]
        profile: ServeProfile,
    },
    /// Search past observations and prompts, knowledge and work items (`k<id>`, merged in by
    /// rank) and ingested documents (`d<id>`, after them). Plain words match as written; FTS5
    /// syntax (AND/OR/NOT, "phrase", prefix*) is used as is.
    Search {
        #[arg(required = true)]
        query: Vec<String>,
        #[command(flatten)]
        project: ProjectArgs,
        /// Only this observation type (repeatable): command, command_error, file_edit, user_prompt, …;
        /// `knowledge`, `work` or an item kind (decision, fact, task, …) for knowledge only, `doc`
        /// for documents only.
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
        /// Leave out ingested documents (by default their chunks follow the observations;
        /// `--type doc` searches only them).
        #[arg(long)]
        no_docs: bool,
        /// Leave out knowledge and work items.
        #[arg(long)]
        no_knowledge: bool,
        /// Include knowledge items of these statuses only (repeatable; by default all but
        /// superseded and archived): candidate, active, superseded, contested, archived, open,
        /// done, dropped.
        #[arg(long = "status", value_name = "STATUS")]
        status: Vec<String>,
        /// Only results captured here (this-device), on your devices (my-devices: this one and
        /// the others of your personal sync space) or by teammates (team: through a team
        /// space). Results from elsewhere say where they came from.
        #[arg(long, value_enum, value_name = "ORIGIN")]
        origin: Option<Origin>,
    },
    /// Full observations by id (and document chunks by `--doc ID`, the ids of `doc` results,
    /// knowledge and work items by `--knowledge ID`, the ids of `knowledge` and `work` results).
    Get {
        #[arg(required_unless_present_any = ["doc", "knowledge"])]
        ids: Vec<i64>,
        /// A document chunk's id (repeatable): its text, source and lines.
        #[arg(long = "doc", value_name = "ID")]
        doc: Vec<i64>,
        /// A knowledge or work item's id (repeatable, `k12` or `12`): its text, and as JSON the
        /// whole item.
        #[arg(long = "knowledge", value_name = "ID", value_parser = parse_kid)]
        knowledge: Vec<i64>,
        #[arg(long)]
        json: bool,
    },
    /// Ingest documents: files, Markdown, a repository folder (honouring .gitignore), a
    /// conversation, a web page, a PDF. Chunked (Markdown by heading), redacted, searchable with
    /// `nmem search` after the observations (kind `doc`). Ingesting an unchanged source again
    /// changes nothing; a changed one replaces only its changed chunks.
    #[command(
        after_help = "Folders skip .git, node_modules, target, dist and build, and \
        exclude local agent state (.claude, .codex, .cursor, .worktrees) with a warning unless \
        --force. Symlinks are never followed; FIFOs, devices, binary files and files over 1 MiB \
        are skipped with a reason (given by name, they are an error and nothing is ingested). \
        Exit 0 on success, 1 on bad input, 2 when nmemd cannot be reached."
    )]
    Ingest {
        /// Files and folders (a folder is walked as a repository; a .pdf file is read as PDF).
        paths: Vec<std::path::PathBuf>,
        /// The project they belong to (default: the project of the first path).
        #[arg(long)]
        project: Option<String>,
        /// Also walk local agent state folders (.claude, .codex, .cursor, .worktrees).
        #[arg(long)]
        force: bool,
        /// Fetch this web page and ingest its text (repeatable; the only network call nmem makes,
        /// at most 5 MiB and 20 s).
        #[arg(long, value_name = "URL")]
        url: Vec<String>,
        /// A conversation to ingest: a JSON file of messages ([{"role", "content"}], or an
        /// object with `messages`), or `-` for stdin.
        #[arg(long, value_name = "FILE|-")]
        conversation: Option<String>,
        /// Print the outcome as JSON (per source: status, reason, chunk counts; totals; warnings).
        #[arg(long)]
        json: bool,
    },
    /// What happened around an observation in its session (or, with `--doc`, the chunks around
    /// a document chunk in its source).
    Timeline {
        /// The observation id to center on (or use --query).
        anchor: Option<i64>,
        /// Center on the best match of this search instead.
        #[arg(long, conflicts_with = "anchor")]
        query: Option<String>,
        /// Center on a document chunk (a `doc` result's id): its neighbours in its source.
        #[arg(long = "doc", value_name = "ID", conflicts_with_all = ["anchor", "query"])]
        doc: Option<i64>,
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
    /// The web viewer: asks nmemd to listen on 127.0.0.1 (`[http] port`, default 37777, or a
    /// free port), prints its URL (with the token the page needs) and opens a browser when
    /// there is one. The listener stays in nmemd until `nmem ui --stop` or nmemd stops.
    Ui {
        /// Stop listening.
        #[arg(long, conflicts_with = "rotate")]
        stop: bool,
        /// Replace the token (open pages and scripts need the new URL).
        #[arg(long)]
        rotate: bool,
        /// Print the reply as JSON (`listening`, `address`, `url`, `warnings`).
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
    /// Governed knowledge: facts, decisions, procedures, concepts and notes with a status, a
    /// reason, a source and evidence. Each saved memory is a note here too.
    #[command(subcommand)]
    Knowledge(KnowledgeCommand),
    /// Work items: tasks, bugs and follow-ups that outlive a session. Open ones are in the
    /// SessionStart digest of their project.
    #[command(subcommand)]
    Work(WorkCommand),
    /// Share this memory with your other devices through a PostgreSQL you provide, end-to-end
    /// encrypted (docs/sync.md). Nothing leaves the machine until `enable` or `join`.
    #[command(subcommand)]
    Sync(SyncCommand),
    /// Regenerate the local projections from the event log (this device's synced events and
    /// those received from others): rows that are missing are stored again, the full-text
    /// indexes rebuilt, vectors recomputed for restored rows. Rows present keep their pins;
    /// restored rows get back their ids and origin, so search gives the same results in the
    /// same order. On a terminal a progress bar on stderr follows the phases (reading,
    /// restoring, indexing).
    Rebuild {
        /// `events`, `restored`, `indexed`, `unreadable`, `sync_enabled` as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Team spaces: a team's shared memory on the sync server, each member's device holding
    /// the team key wrapped for its own identity (docs/sync.md, "Team spaces").
    #[command(subcommand)]
    Team(TeamCommand),
    /// Share a project with a team space: from now on its commits, pushes, pull requests,
    /// command and tool errors and memories go to the team (prompts, turn ends and other
    /// output only with --with).
    Share {
        /// The project, by name (as `nmem search --project` takes it).
        project: String,
        /// The team space (`nmem team create` or `join` first).
        #[arg(long)]
        team: String,
        /// Also share these, comma separated: `prompts`, `turn_end`, other observation types
        /// (`command`, `file_edit`, ...), or `all` (every observation type).
        #[arg(long, value_delimiter = ',')]
        with: Vec<String>,
        /// Stop sharing the project with the team (what was sent stays there).
        #[arg(long, conflicts_with = "with")]
        stop: bool,
        /// Print what is routed where as JSON (`excluded`, `shares`, `default_types`).
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum TeamCommand {
    /// Create a team space with a random key, wrapped for this device on the server. The name
    /// is visible to the server.
    Create {
        space: String,
        #[arg(long)]
        json: bool,
    },
    /// Add a member: wrap the team's keys (all of them: the member reads the history too) for
    /// its public key, which `nmem sync identity` prints on the member's device. The member
    /// then runs `nmem team join SPACE`.
    Add {
        space: String,
        /// The member's public key (`age1…`).
        pubkey: String,
        #[arg(long)]
        json: bool,
    },
    /// Remove a member and rotate the key: new events are sealed under a new key wrapped for
    /// the remaining members only; older events stay readable by those who had them.
    Remove {
        space: String,
        /// The member's public key (`age1…`), as `add` took it.
        member: String,
        #[arg(long)]
        json: bool,
    },
    /// Join a team space a member added this device to (by its `nmem sync identity`).
    Join {
        space: String,
        #[arg(long)]
        json: bool,
    },
    /// Leave a team space: this device stops pulling and pushing it and removes its member row
    /// and wrapped keys on the server (the others' next `team remove` rotation leaves it out).
    /// What it received from the team stays here unless --forget-data.
    Leave {
        space: String,
        /// Also delete the rows received from the team's devices (those that are not devices of
        /// your personal space too).
        #[arg(long)]
        forget_data: bool,
        /// `space`, `was_member_on_server`, `forgotten` as JSON.
        #[arg(long)]
        json: bool,
    },
}

fn team(cmd: TeamCommand) -> ExitCode {
    use nmem_shim::sync::{team, TeamAction as A};
    match cmd {
        TeamCommand::Create { space, json } => team(A::Create, space, None, json),
        TeamCommand::Add {
            space,
            pubkey,
            json,
        } => team(A::Add, space, Some(pubkey), json),
        TeamCommand::Remove {
            space,
            member,
            json,
        } => team(A::Remove, space, Some(member), json),
        TeamCommand::Join { space, json } => team(A::Join, space, None, json),
        TeamCommand::Leave {
            space,
            forget_data,
            json,
        } => nmem_shim::sync::team_leave(space, forget_data, json),
    }
}

#[derive(Subcommand)]
enum SyncCommand {
    /// Create your personal space on the server and start syncing this device. Prints the
    /// space's recovery phrase once: another device needs it to join.
    Enable {
        /// The server: postgresql://user@host:port/database (TLS unless loopback or a Unix
        /// socket folder). Default: `[sync] url` of config.toml.
        #[arg(long)]
        url: Option<String>,
        /// Print `space`, `fingerprint`, `device` and `recovery_phrase` as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Add this device to the space of a recovery phrase. The phrase is checked against the
    /// space's key check first: a wrong one changes nothing. Read from --phrase-file, else from
    /// standard input.
    Join {
        /// A file holding the 24 words.
        #[arg(long, conflicts_with = "phrase")]
        phrase_file: Option<std::path::PathBuf>,
        /// The 24 words on the command line (visible in `ps` and your shell's history: prefer
        /// --phrase-file or standard input).
        #[arg(long)]
        phrase: Option<String>,
        /// The server (default: `[sync] url` of config.toml).
        #[arg(long)]
        url: Option<String>,
        /// Print `space`, `fingerprint` and `device` as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Push and pull at once (the daemon otherwise does within a few seconds of new events).
    Now {
        #[arg(long)]
        json: bool,
    },
    /// The space, key fingerprint, this device, pending uploads, every device's head and the
    /// last error.
    Status {
        /// `space`, `fingerprint`, `device`, `pending`, `heads`, `last_error`, ... as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Pause: stop logging and syncing this device; its identity, key and log stay, and `sync
    /// status` still shows the space (what the server holds stays there). To sync again, `join`
    /// with the phrase. To leave the space for good, `leave`.
    Disable {
        #[arg(long)]
        json: bool,
    },
    /// Leave the personal space: this device stops syncing and forgets the space's key, its
    /// device id and its cursors; everything it holds stays here, and so does what the server
    /// holds. `join` with the phrase works again later (what the space holds already is not
    /// sent again). Leave team spaces first (`nmem team leave`).
    Leave {
        #[arg(long)]
        json: bool,
    },
    /// Print this device's public key (`age1…`, made on first use): a teammate adds it with
    /// `nmem team add SPACE PUBKEY`. The secret half stays in this home's database.
    Identity {
        #[arg(long)]
        json: bool,
    },
    /// Keep a project out of the personal space: its events are never logged for it (what was
    /// sent before stays on the server).
    Exclude {
        /// The project, by name.
        project: String,
        /// Print what is routed where as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Undo `exclude`: the project's new events go to the personal space again.
    Include {
        project: String,
        #[arg(long)]
        json: bool,
    },
    /// List the events the uploader held back because the current redaction rules would change
    /// them (a rule added after they were recorded), or release or drop them all.
    Quarantine {
        /// Upload them as they are (a false positive of the rule).
        #[arg(long, conflicts_with = "drop")]
        release: bool,
        /// Never upload them: they stay on this device only.
        #[arg(long)]
        drop: bool,
        /// `quarantined`, `released`, `dropped`, `events` [{`seq`, `event_id`, `project`,
        /// `preview`}] as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Compare every device's stream on the server with what this home holds, in every space
    /// this device is in (the personal space and each team space): heads, counts and a hash of
    /// the event ids, and the sequence numbers that differ. Exits 1 when they differ.
    Verify {
        /// `ok`, `streams` [{`space`, `device`, `server_head`, `local_head`, `server_hash`,
        /// `local_hash`, `missing_on_server`, `missing_here`, `different`, `ok`}] as JSON.
        #[arg(long)]
        json: bool,
    },
}

fn sync(cmd: SyncCommand) -> ExitCode {
    use nmem_shim::sync as s;
    match cmd {
        SyncCommand::Enable { url, json } => s::enable(url, json),
        SyncCommand::Join {
            phrase_file,
            phrase,
            url,
            json,
        } => {
            let from = match (phrase, phrase_file) {
                (Some(p), _) => s::PhraseFrom::Arg(p),
                (None, Some(f)) => s::PhraseFrom::File(f),
                (None, None) => s::PhraseFrom::Stdin,
            };
            s::join(from, url, json)
        }
        SyncCommand::Now { json } => s::now(json),
        SyncCommand::Status { json } => s::status(json),
        SyncCommand::Disable { json } => s::disable(json),
        SyncCommand::Leave { json } => s::leave(json),
        SyncCommand::Identity { json } => s::identity(json),
        SyncCommand::Exclude { project, json } => s::exclude(project, false, json),
        SyncCommand::Include { project, json } => s::exclude(project, true, json),
        SyncCommand::Quarantine {
            release,
            drop,
            json,
        } => s::quarantine(release, drop, json),
        SyncCommand::Verify { json } => s::verify(json),
    }
}

#[derive(clap::Args)]
struct Reason {
    /// Why (required: it goes in the item's audit trail).
    #[arg(long)]
    reason: String,
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
enum KnowledgeCommand {
    /// Write a knowledge item. An agent-inferred one starts as a candidate; an exact duplicate
    /// claim (same kind, subject, predicate and value) is refused; the same subject and predicate
    /// with another value marks both contested; similar items are listed as possible duplicates.
    Add {
        /// fact, decision, procedure, concept, note, preference, convention or lesson.
        #[arg(long)]
        kind: String,
        #[arg(long)]
        title: String,
        #[arg(long)]
        summary: Option<String>,
        /// Why it should be remembered (required).
        #[arg(long)]
        reason: String,
        /// Who says so: user_declared, human_curated, agent_inferred, system_generated or imported.
        #[arg(long, default_value = "user_declared")]
        source: String,
        /// Holds in every project, not only this one.
        #[arg(long)]
        global: bool,
        /// candidate, active (default unless agent-inferred), contested or archived.
        #[arg(long)]
        status: Option<String>,
        /// A structured claim: SUBJECT PREDICATE VALUE (the value is JSON when it reads as JSON).
        #[arg(long, requires = "predicate")]
        subject: Option<String>,
        #[arg(long, requires = "subject")]
        predicate: Option<String>,
        #[arg(long, requires = "subject")]
        value: Option<String>,
        /// What it rests on (repeatable): an observation, `obs:12` or `12`, or a document chunk,
        /// `d7` or `doc:7` (a `doc` search result);
        /// optionally `#<sha256 prefix>` of its text. A later edit of the file it names, or a
        /// re-ingest that changes the chunk, flags the item possibly stale.
        #[arg(long)]
        evidence: Vec<String>,
        /// 0 to 1.
        #[arg(long)]
        confidence: Option<f64>,
        /// The project (default: the current directory's).
        #[arg(long)]
        project: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// A project's knowledge (and global items), newest first.
    List {
        /// Only these statuses (repeatable): candidate, active, superseded, contested, archived.
        #[arg(long)]
        status: Vec<String>,
        #[arg(long)]
        kind: Option<String>,
        /// Only items flagged possibly stale.
        #[arg(long)]
        stale: bool,
        /// At most this many (default 50, at most 500).
        #[arg(long)]
        limit: Option<i64>,
        #[arg(long)]
        project: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Items by id (`12` or `k12`), with their evidence and audit trail.
    Show {
        #[arg(required = true, value_parser = parse_kid)]
        ids: Vec<i64>,
        #[arg(long)]
        json: bool,
    },
    /// Make a candidate or contested item active, or clear an active item's stale flag.
    Promote {
        #[arg(value_parser = parse_kid)]
        id: i64,
        #[command(flatten)]
        why: Reason,
    },
    /// Replace OLD by NEW: OLD becomes superseded (kept, linked to NEW), NEW active.
    Supersede {
        #[arg(value_parser = parse_kid)]
        old: i64,
        #[arg(value_parser = parse_kid)]
        new: i64,
        #[command(flatten)]
        why: Reason,
    },
    /// Mark an item contested.
    Contest {
        #[arg(value_parser = parse_kid)]
        id: i64,
        #[command(flatten)]
        why: Reason,
    },
    /// Archive an item (kept, no longer current).
    Archive {
        #[arg(value_parser = parse_kid)]
        id: i64,
        #[command(flatten)]
        why: Reason,
    },
    /// Pin an item: it comes first in its project's SessionStart digest while it is current.
    Pin {
        #[arg(value_parser = parse_kid)]
        id: i64,
        #[arg(long)]
        json: bool,
    },
    /// Undo `pin`.
    Unpin {
        #[arg(value_parser = parse_kid)]
        id: i64,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum WorkCommand {
    /// Open a work item.
    Add {
        title: String,
        /// task (default), bug or follow_up.
        #[arg(long, default_value = "task")]
        kind: String,
        #[arg(long)]
        summary: Option<String>,
        /// Why it should outlive this session (required).
        #[arg(long)]
        reason: String,
        /// Who says so: user_declared (default), agent_inferred, …
        #[arg(long, default_value = "user_declared")]
        source: String,
        #[arg(long)]
        project: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// A project's work items (default: the open ones).
    List {
        /// Every status: open, done and dropped.
        #[arg(long)]
        all: bool,
        #[arg(long)]
        project: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Close a work item as done.
    Done {
        #[arg(value_parser = parse_kid)]
        id: i64,
        #[command(flatten)]
        why: Reason,
    },
    /// Close a work item without doing it.
    Drop {
        #[arg(value_parser = parse_kid)]
        id: i64,
        #[command(flatten)]
        why: Reason,
    },
    /// Open a closed work item again.
    Reopen {
        #[arg(value_parser = parse_kid)]
        id: i64,
        #[command(flatten)]
        why: Reason,
    },
}

/// A knowledge id as printed (`k12`) or bare (`12`).
fn parse_kid(s: &str) -> Result<i64, String> {
    s.strip_prefix('k')
        .unwrap_or(s)
        .parse()
        .map_err(|_| format!("{s:?} is not a knowledge id (k12 or 12)"))
}

fn knowledge(cmd: KnowledgeCommand) -> ExitCode {
    use nmem_proto::knowledge::{Action, Class};
    use nmem_shim::knowledge as k;
    match cmd {
        KnowledgeCommand::Add {
            kind,
            title,
            summary,
            reason,
            source,
            global,
            status,
            subject,
            predicate,
            value,
            evidence,
            confidence,
            project,
            json,
        } => k::add(k::AddArgs {
            class: Class::Knowledge,
            kind,
            title,
            summary,
            reason,
            source,
            global,
            status,
            subject,
            predicate,
            value,
            evidence,
            confidence,
            project,
            json,
        }),
        KnowledgeCommand::List {
            status,
            kind,
            stale,
            limit,
            project,
            json,
        } => k::list(k::ListArgs {
            class: Class::Knowledge,
            status,
            kind,
            stale,
            limit,
            project,
            json,
        }),
        KnowledgeCommand::Show { ids, json } => k::show(ids, json),
        KnowledgeCommand::Promote { id, why } => {
            k::change(Action::Promote, id, None, why.reason, why.json)
        }
        KnowledgeCommand::Supersede { old, new, why } => {
            k::change(Action::Supersede, old, Some(new), why.reason, why.json)
        }
        KnowledgeCommand::Contest { id, why } => {
            k::change(Action::Contest, id, None, why.reason, why.json)
        }
        KnowledgeCommand::Archive { id, why } => {
            k::change(Action::Archive, id, None, why.reason, why.json)
        }
        KnowledgeCommand::Pin { id, json } => k::pin(id, true, json),
        KnowledgeCommand::Unpin { id, json } => k::pin(id, false, json),
    }
}

fn work(cmd: WorkCommand) -> ExitCode {
    use nmem_proto::knowledge::{Action, Class};
    use nmem_shim::knowledge as k;
    match cmd {
        WorkCommand::Add {
            title,
            kind,
            summary,
            reason,
            source,
            project,
            json,
        } => k::add(k::AddArgs {
            class: Class::WorkItem,
            kind,
            title,
            summary,
            reason,
            source,
            global: false,
            status: None,
            subject: None,
            predicate: None,
            value: None,
            evidence: Vec::new(),
            confidence: None,
            project,
            json,
        }),
        WorkCommand::List { all, project, json } => k::list(k::ListArgs {
            class: Class::WorkItem,
            status: if all { Vec::new() } else { vec!["open".into()] },
            kind: None,
            stale: false,
            limit: None,
            project,
            json,
        }),
        WorkCommand::Done { id, why } => k::change(Action::Done, id, None, why.reason, why.json),
        WorkCommand::Drop { id, why } => k::change(Action::Drop, id, None, why.reason, why.json),
        WorkCommand::Reopen { id, why } => {
            k::change(Action::Reopen, id, None, why.reason, why.json)
        }
    }
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
        Command::Serve { profile } => match nmem_shim::serve::run(match profile {
            ServeProfile::Nmem => nmem_shim::serve::Profile::Nmem,
            ServeProfile::CodexMem => nmem_shim::serve::Profile::CodexMem,
            ServeProfile::Substrate => nmem_shim::serve::Profile::Substrate,
        }) {
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
            no_docs,
            no_knowledge,
            status,
            origin,
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
            no_docs,
            no_knowledge,
            status,
            origin: origin.map(Into::into),
        }),
        Command::Get {
            ids,
            doc,
            knowledge,
            json,
        } => cli::get(ids, doc, knowledge, json),
        Command::Ingest {
            paths,
            project,
            force,
            url,
            conversation,
            json,
        } => nmem_shim::docs::run(nmem_shim::docs::Options {
            paths,
            project,
            force,
            urls: url,
            conversation,
            json,
            cwd: None,
        }),
        Command::Timeline {
            anchor,
            doc,
            query,
            before,
            after,
            project,
            json,
        } => cli::timeline(
            anchor,
            doc,
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
        Command::Ui { stop, rotate, json } => nmem_shim::ui::run(stop, rotate, json),
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
        Command::Knowledge(cmd) => knowledge(cmd),
        Command::Work(cmd) => work(cmd),
        Command::Sync(cmd) => sync(cmd),
        Command::Team(cmd) => team(cmd),
        Command::Share {
            project,
            team,
            with,
            stop,
            json,
        } => nmem_shim::sync::share(project, team, with, stop, json),
        Command::Rebuild { json } => nmem_shim::sync::rebuild(json),
    }
}
