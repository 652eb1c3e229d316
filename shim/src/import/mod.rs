//! `nmem import`: back-fill memory from the transcripts already on disk: Claude Code
//! transcripts, Codex rollouts and Gemini CLI chats.
//!
//! Each file is replayed as the hook events its harness would have sent live (prompts, tool calls
//! with their results, failures, turn ends, compactions), through the daemon like live events:
//! the same extraction, the same redaction, the original times. Event ids are derived from the
//! file (session, line or call id, kind), tool calls carry their call id and prompts their
//! prompt or turn id, so importing twice, or importing a session that was also captured live,
//! stores it once; a file that grew since adds only its new part. Lines that are half-written,
//! corrupt or of unknown kinds are skipped, never fatal. Every line read is either used or counted
//! under a `Reason` (bookkeeping, harness text, a subagent's task, a fork's copy of its parent…),
//! printed in the summary and in `--json`, so nothing vanishes uncounted. Only the user's words
//! are stored as the user's prompts. Events travel in batches (`/v1/events/batch`) so the writer
//! commits thousands per transaction.

mod claude;
mod codex;
mod gemini;

use nmem_proto::harness::Harness;
use nmem_proto::{client, wire};
use sha2::{Digest, Sha256};
use std::io::{BufRead, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// One harness's session files: where the harness keeps them, how to tell them from other
/// files, how to replay one as the hook events the harness sends live. One module per harness
/// implements it (`claude`, `codex`, `gemini`); [`IMPORTERS`] lists them.
pub(crate) trait Importer: Sync {
    fn harness(&self) -> Harness;
    /// Where the harness keeps its sessions on this machine.
    fn default_root(&self) -> Option<PathBuf>;
    /// Whether this file is one of its sessions, from its name and first bytes.
    fn claims(&self, file: &Head) -> bool;
    /// Replay one file as hook events; every line read is counted as used or under a `Reason`.
    fn synthesize(
        &self,
        path: &Path,
        opts: &Options,
        counts: &Counts,
    ) -> std::io::Result<Vec<Synth>>;
    /// Whether its live hooks carry ids that match the import's (tool call and prompt ids):
    /// when not, what the file holds from the moment live capture began is left out.
    fn live_ids(&self) -> bool {
        true
    }
}

/// Every importer, in the order files are offered to them: Claude Code's last, as it takes any
/// JSON-lines file the others do not.
pub(crate) const IMPORTERS: [&dyn Importer; 3] = [&codex::Codex, &gemini::Gemini, &claude::Claude];

/// The importer of a harness, if `nmem import` reads its files.
pub(crate) fn importer(h: Harness) -> Option<&'static dyn Importer> {
    IMPORTERS.into_iter().find(|i| i.harness() == h)
}

/// The harnesses whose files can be imported.
pub fn importable() -> Vec<Harness> {
    IMPORTERS.iter().map(|i| i.harness()).collect()
}

/// What a file is judged on: its name and its head (the first line of a JSON-lines file, the
/// first 4 KiB of a `.json` one).
pub(crate) struct Head<'a> {
    pub name: &'a str,
    /// A `.json` file (one JSON value), not `.jsonl`.
    pub json: bool,
    /// `.json`: its first 4 KiB, as text.
    pub text: String,
    /// `.jsonl`: its first line, parsed (`null` when it is not JSON).
    pub first: serde_json::Value,
}

impl Head<'_> {
    /// Which importer takes this file, if any.
    fn sniff(path: &Path, harnesses: &[Harness]) -> Option<&'static dyn Importer> {
        let name = path.file_name()?.to_str()?;
        let json = name.ends_with(".json");
        if !json && !name.ends_with(".jsonl") {
            return None;
        }
        let mut f = std::io::BufReader::new(std::fs::File::open(path).ok()?);
        let mut head = Head {
            name,
            json,
            text: String::new(),
            first: serde_json::Value::Null,
        };
        if json {
            let mut buf = [0u8; 4096];
            let n = f.read(&mut buf).ok()?;
            head.text = String::from_utf8_lossy(&buf[..n]).into_owned();
        } else {
            let mut first = Vec::new();
            f.take(1 << 20).read_until(b'\n', &mut first).ok()?;
            head.first = serde_json::from_slice(&first).unwrap_or_default();
        }
        // The first importer that claims it, whether or not it was asked for: a Codex rollout
        // is not a Claude Code transcript when only Claude Code's are imported.
        IMPORTERS
            .into_iter()
            .find(|i| i.claims(&head))
            .filter(|i| harnesses.contains(&i.harness()))
    }
}

pub struct Options {
    pub paths: Vec<PathBuf>,
    /// Whose files (harnesses with an importer).
    pub sources: Vec<Harness>,
    pub since_ms: Option<i64>,
    pub project: Option<String>,
    pub dry_run: bool,
    /// Print the summary as one JSON object on stdout (progress stays on stderr).
    pub json: bool,
}

impl Options {
    /// Every importable harness's sessions from their usual folders, unfiltered: what `nmem
    /// install` offers to import, and what `replay` and the tests read.
    pub fn everything(dry_run: bool) -> Options {
        Options {
            paths: Vec::new(),
            sources: importable(),
            since_ms: None,
            project: None,
            dry_run,
            json: false,
        }
    }

    /// Whether an event at `at` in folder `cwd` is wanted (`--since`, `--project`).
    fn wants(&self, at: i64, cwd: &str) -> bool {
        self.since_ms.is_none_or(|s| at >= s)
            && self
                .project
                .as_deref()
                .is_none_or(|p| Path::new(cwd).file_name().and_then(|f| f.to_str()) == Some(p))
    }
}

/// Why a line of a session file is not stored. Every line the import reads is either used (it
/// becomes, or is part of, an event sent to nmemd) or counted under one of these, so nothing
/// vanishes uncounted; the summary lists them (`--json`: `not_stored`, by `key`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Reason {
    /// Not JSON: corrupt, or the half-written last line of a running session.
    NotJson,
    /// A JSON line of a kind this version of nmem does not know.
    UnknownKind,
    /// A line that names no session or folder (or comes before the file's header).
    NoSession,
    /// Harness bookkeeping that holds nothing to remember (titles, snapshots, token counts,
    /// turn settings, encrypted reasoning, hook notices, state markers).
    Bookkeeping,
    /// Text the harness put in the user's place: slash commands, reminders, IDE notes,
    /// instructions and environment scaffolding, compaction summaries.
    Injected,
    /// A prompt an agent gave a subagent: the subagent's task, recorded with the call that
    /// started it, not the user's words.
    SubagentPrompt,
    /// Assistant text or thinking that is not a turn's last answer (thinking is read by nmemd from
    /// the transcript itself).
    AssistantText,
    /// A line that says again what another line says (Codex mirrors prompts, answers and shell
    /// results; Gemini rewrites updated messages).
    Mirror,
    /// A tool call whose result never came (an interrupted session).
    CallWithoutResult,
    /// A tool result whose call is not in the file.
    ResultWithoutCall,
    /// A user line with no text and no tool result (an image, an empty message).
    Empty,
    /// Left out by `--since` or `--project`.
    Filtered,
    /// History a forked Codex rollout copies from the session it was forked from: that session's
    /// own file holds it, and live capture never saw it twice either.
    CopiedFromParent,
    /// Messages a Gemini chat rewound (the user went back before them).
    Rewound,
    /// A session whose folder cannot be found (Gemini's project hash, a Codex rollout with no
    /// working directory).
    NoFolder,
}

impl Reason {
    pub(crate) const ALL: [Reason; 15] = [
        Reason::NotJson,
        Reason::UnknownKind,
        Reason::NoSession,
        Reason::Bookkeeping,
        Reason::Injected,
        Reason::SubagentPrompt,
        Reason::AssistantText,
        Reason::Mirror,
        Reason::CallWithoutResult,
        Reason::ResultWithoutCall,
        Reason::Empty,
        Reason::Filtered,
        Reason::CopiedFromParent,
        Reason::Rewound,
        Reason::NoFolder,
    ];

    /// The name in `--json` and in the printed summary.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Reason::NotJson => "not_json",
            Reason::UnknownKind => "unknown_kind",
            Reason::NoSession => "no_session",
            Reason::Bookkeeping => "bookkeeping",
            Reason::Injected => "injected",
            Reason::SubagentPrompt => "subagent_prompt",
            Reason::AssistantText => "assistant_text",
            Reason::Mirror => "mirror",
            Reason::CallWithoutResult => "call_without_result",
            Reason::ResultWithoutCall => "result_without_call",
            Reason::Empty => "empty",
            Reason::Filtered => "filtered",
            Reason::CopiedFromParent => "copied_from_parent",
            Reason::Rewound => "rewound",
            Reason::NoFolder => "no_folder",
        }
    }
}

#[derive(Default)]
pub(crate) struct Counts {
    files: AtomicU64,
    unreadable: AtomicU64,
    /// Non-blank lines read (a Gemini `.json` chat: its header and each message).
    lines: AtomicU64,
    /// Lines that became (part of) an event.
    used: AtomicU64,
    /// Lines not stored, by `Reason` (indexed like `Reason::ALL`).
    not_stored: [AtomicU64; Reason::ALL.len()],
    sessions: std::sync::Mutex<std::collections::HashSet<String>>,
    prompts: AtomicU64,
    observations: AtomicU64,
    events: AtomicU64,
    stored: AtomicU64,
    duplicates: AtomicU64,
    /// Events nmemd refused (it names each; counted, not fatal).
    refused: AtomicU64,
}

impl Counts {
    /// A line was read (before its fate is known).
    pub(crate) fn line(&self) {
        self.lines.fetch_add(1, Relaxed);
    }

    /// `n` lines became (part of) events.
    pub(crate) fn used(&self, n: u64) {
        self.used.fetch_add(n, Relaxed);
    }

    /// `n` lines are not stored, for `why`.
    pub(crate) fn skip(&self, why: Reason, n: u64) {
        let i = Reason::ALL.iter().position(|r| *r == why).unwrap_or(0);
        self.not_stored[i].fetch_add(n, Relaxed);
    }

    /// The lines that made tool calls, at the end of a file: one is used when any of its calls
    /// got a result (it is stored with it), else counted as a call without result.
    pub(crate) fn call_lines(&self, answered: &std::collections::HashMap<usize, bool>) {
        let used = answered.values().filter(|a| **a).count() as u64;
        self.used(used);
        self.skip(Reason::CallWithoutResult, answered.len() as u64 - used);
    }

    pub(crate) fn skipped(&self, why: Reason) -> u64 {
        let i = Reason::ALL.iter().position(|r| *r == why).unwrap_or(0);
        self.not_stored[i].load(Relaxed)
    }

    fn skipped_total(&self) -> u64 {
        self.not_stored.iter().map(|c| c.load(Relaxed)).sum()
    }
}

/// When live capture of a session began, from the database (read-only): for harnesses whose
/// hooks carry no ids to match (Gemini's tool calls, every harness's turn ends), what the file
/// holds from then on was recorded live already, and only the earlier part is imported.
struct LiveSince(Option<rusqlite::Connection>);

impl LiveSince {
    fn open(db: &Path) -> LiveSince {
        LiveSince(
            db.exists()
                .then(|| {
                    rusqlite::Connection::open_with_flags(
                        db,
                        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
                    )
                    .ok()
                })
                .flatten(),
        )
    }

    fn get(&self, session: &str) -> Option<i64> {
        let c = self.0.as_ref()?;
        c.query_row(
            "SELECT MIN(t) FROM (
               SELECT MIN(timestamp) AS t FROM observations WHERE session_id = ?1 AND event_id NOT LIKE 'imp-%'
               UNION ALL
               SELECT MIN(timestamp) FROM prompts WHERE session_id = ?1 AND event_id NOT LIKE 'imp-%')",
            [session],
            |r| r.get::<_, Option<i64>>(0),
        )
        .ok()
        .flatten()
    }
}

/// One synthesized hook event: its payload, and the two fields the import itself looks at.
pub(crate) struct Synth {
    id: String,
    at: i64,
    harness: Harness,
    event: String,
    session: String,
    payload: Vec<u8>,
}

impl Synth {
    fn new(id: String, at: i64, harness: Harness, payload: &serde_json::Value) -> Synth {
        let field = |k: &str| payload[k].as_str().unwrap_or_default().to_string();
        Synth {
            id,
            at,
            harness,
            event: field("hook_event_name"),
            session: field("session_id"),
            payload: payload.to_string().into_bytes(),
        }
    }
}

/// A field of a line the importers do not control, read the way a loose reader reads JSON: the
/// value when it is there with the expected type, else `None` (missing, `null`, or another
/// type). A line whose fields have unexpected types is then still read as far as it goes, and
/// is counted like one that lacks them, never refused as a whole.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Lax<T>(pub Option<T>);

impl<T> Default for Lax<T> {
    fn default() -> Self {
        Lax(None)
    }
}

impl<'de, T: serde::de::DeserializeOwned> serde::Deserialize<'de> for Lax<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        Ok(Lax(serde_json::from_value(v).ok()))
    }
}

impl Lax<String> {
    /// The text, or `""` when there is none.
    fn str(&self) -> &str {
        self.0.as_deref().unwrap_or_default()
    }
}

impl Lax<bool> {
    /// Whether it is `true` (not merely present).
    fn yes(&self) -> bool {
        self.0 == Some(true)
    }
}

/// A JSON line as one of an importer's typed line kinds: a line that is an object is read by
/// its tag; anything else (an array, a number, a missing or non-string tag) is `None`, which the
/// importers count as a kind they do not know.
/// (Only objects: serde would read an array as a struct's fields in order.)
fn typed<T: serde::de::DeserializeOwned>(v: &serde_json::Value) -> Option<T> {
    if !v.is_object() {
        return None;
    }
    T::deserialize(v).ok()
}

/// A field that is a struct of its own: read when it is an object, else `None` (as `typed`).
fn object<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let v = <serde_json::Value as serde::Deserialize>::deserialize(d)?;
    Ok(typed(&v))
}

/// The harness's session folder: `$<env>` when set, else `~/<home_dir>`, then `sub` below it.
fn root_under(env: Option<&str>, home_dir: &str, sub: &str) -> Option<PathBuf> {
    env.and_then(std::env::var_os)
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(home_dir)))
        .map(|p| p.join(sub))
}

/// The session files under the roots (files or folders), with the importer of each.
pub(crate) fn session_files(
    roots: &[PathBuf],
    sources: &[Harness],
) -> Vec<(PathBuf, &'static dyn Importer)> {
    fn walk(p: &Path, sources: &[Harness], out: &mut Vec<(PathBuf, &'static dyn Importer)>) {
        if p.is_dir() {
            if let Ok(rd) = std::fs::read_dir(p) {
                let mut entries: Vec<PathBuf> =
                    rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
                entries.sort();
                for e in entries {
                    walk(&e, sources, out);
                }
            }
        } else if let Some(i) = Head::sniff(p, sources) {
            out.push((p.to_path_buf(), i));
        }
    }
    let mut out = Vec::new();
    for r in roots {
        walk(r, sources, &mut out);
    }
    out
}

/// One replayed hook event: the harness that sends it, and its payload.
pub type Replayed = (Harness, Vec<u8>);

/// The hook events one session file replays as (the payloads `nmem import` sends, in order),
/// with the harness that sends each; `None` when no importer takes the file. For tests that
/// record a session through `nmem record`, as live capture would have.
pub fn replay(path: &Path) -> Option<std::io::Result<Vec<Replayed>>> {
    let importer = Head::sniff(path, &importable())?;
    let events = importer.synthesize(path, &Options::everything(true), &Counts::default());
    Some(events.map(|events| {
        events
            .into_iter()
            .map(|e| (importer.harness(), e.payload))
            .collect()
    }))
}

fn event_id(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    let hex: String = h
        .finalize()
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("imp-{hex}")
}

/// Leave out what live capture already recorded and nothing could match by id (Gemini's hooks
/// carry no ids at all; no harness's turn end has one), from the moment live capture began.
fn drop_recorded_live(
    events: &mut Vec<Synth>,
    importer: &dyn Importer,
    live: &LiveSince,
    counts: &Counts,
) {
    let mut since: std::collections::HashMap<String, Option<i64>> = Default::default();
    let before = events.len();
    events.retain(|e| {
        let unmatched = !importer.live_ids() || e.event == "Stop";
        if !unmatched {
            return true;
        }
        let t = *since
            .entry(e.session.clone())
            .or_insert_with(|| live.get(&e.session));
        t.is_none_or(|t| e.at < t)
    });
    counts
        .duplicates
        .fetch_add((before - events.len()) as u64, Relaxed);
}

/// Count what a file's events will become, for the summary. Sessions are counted across files
/// (a subagent's transcript belongs to its parent's session) and within them (one file may hold
/// several).
fn tally(events: &[Synth], counts: &Counts) {
    let mut sessions = counts.sessions.lock().unwrap_or_else(|p| p.into_inner());
    for e in events {
        if !sessions.contains(&e.session) {
            sessions.insert(e.session.clone());
        }
        match e.event.as_str() {
            "UserPromptSubmit" | "BeforeAgent" => counts.prompts.fetch_add(1, Relaxed),
            _ => counts.observations.fetch_add(1, Relaxed),
        };
    }
}

pub fn run(opts: Options) -> ExitCode {
    let roots: Vec<PathBuf> = if opts.paths.is_empty() {
        opts.sources
            .iter()
            .filter_map(|h| importer(*h))
            .filter_map(|i| i.default_root())
            .collect()
    } else {
        opts.paths.clone()
    };
    let files = session_files(&roots, &opts.sources);
    if files.is_empty() {
        if opts.json {
            println!("{}", summary(&Counts::default(), opts.dry_run, true, 0.0));
            return ExitCode::SUCCESS;
        }
        println!(
            "no {} sessions found under {}",
            opts.sources
                .iter()
                .map(|h| h.spec().title)
                .collect::<Vec<_>>()
                .join(" / "),
            roots
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return ExitCode::SUCCESS;
    }
    let paths = nmem_proto::paths::Paths::from_env();
    let mut conn = None;
    if !opts.dry_run {
        if !crate::daemon_client::healthy(&paths) {
            crate::autostart::start_daemon_now(&paths);
            if !crate::daemon_client::wait_healthy(&paths, Duration::from_secs(10)) {
                eprintln!("nmem import: nmemd is not running and did not start; run `nmemctl start`, then import again");
                return ExitCode::from(2);
            }
        }
        match client::Conn::open(&paths.socket) {
            Ok(c) => conn = Some(c),
            Err(e) => {
                eprintln!(
                    "nmem import: cannot reach nmemd at {}: {e}; run `nmemctl status`",
                    paths.socket.display()
                );
                return ExitCode::from(2);
            }
        }
    }
    let total_bytes: u64 = files
        .iter()
        .map(|(f, _)| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
        .sum();
    let counts = Counts::default();
    let mut done_bytes = 0;
    let start = Instant::now();
    let tty = std::io::stderr().is_terminal();
    // On a terminal, one bar redrawn in place; otherwise (a log, a CI run) plain lines.
    let bar = tty.then(|| {
        let b = indicatif::ProgressBar::new(total_bytes.max(1));
        b.set_style(
            indicatif::ProgressStyle::with_template("[{percent:>3}%] {wide_msg} ETA {eta}")
                .expect("a valid template"),
        );
        b
    });
    let mut failed = None;
    let live = LiveSince::open(&paths.db);
    for (i, (f, importer)) in files.iter().enumerate() {
        counts.files.fetch_add(1, Relaxed);
        let events = importer.synthesize(f, &opts, &counts);
        let events = events.map(|mut events| {
            drop_recorded_live(&mut events, *importer, &live, &counts);
            events
        });
        let events = match events {
            Ok(e) => e,
            Err(_) => {
                counts.unreadable.fetch_add(1, Relaxed);
                continue;
            }
        };
        counts.events.fetch_add(events.len() as u64, Relaxed);
        tally(&events, &counts);
        if let Some(conn) = conn.as_mut() {
            if let Err(e) = send(conn, events, &counts) {
                failed = Some(format!("{}: {e}", f.display()));
                break;
            }
        }
        done_bytes += std::fs::metadata(f).map(|m| m.len()).unwrap_or(0);
        progress(
            bar.as_ref(),
            i + 1,
            files.len(),
            done_bytes,
            total_bytes,
            start,
            &counts,
        );
    }
    if let Some(b) = &bar {
        b.finish();
    }
    let secs = start.elapsed().as_secs_f64();
    println!("{}", summary(&counts, opts.dry_run, opts.json, secs));
    match failed {
        Some(e) => {
            eprintln!("nmem import: stopped at {e}; what was sent is stored, run the import again to go on");
            ExitCode::from(1)
        }
        None => ExitCode::SUCCESS,
    }
}

/// The closing summary: what the files held, what became of every line (used, or not stored and
/// why), and what nmemd did with the events. With `json`, the same as one JSON object.
fn summary(counts: &Counts, dry_run: bool, json: bool, secs: f64) -> String {
    let n = |c: &AtomicU64| c.load(Relaxed);
    let lines = n(&counts.lines);
    let sessions = counts
        .sessions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .len();
    let reasons: Vec<(&str, u64)> = Reason::ALL
        .iter()
        .map(|r| (r.key(), counts.skipped(*r)))
        .filter(|(_, c)| *c > 0)
        .collect();
    if json {
        let not_stored: serde_json::Map<String, serde_json::Value> = reasons
            .iter()
            .map(|(k, c)| (k.to_string(), serde_json::json!(c)))
            .collect();
        return serde_json::json!({
            "dry_run": dry_run,
            "files": n(&counts.files),
            "unreadable": n(&counts.unreadable),
            "sessions": sessions,
            "prompts": n(&counts.prompts),
            "observations": n(&counts.observations),
            "lines": lines,
            "used": n(&counts.used),
            "not_stored": not_stored,
            "events": n(&counts.events),
            "stored": n(&counts.stored),
            "already_there": n(&counts.duplicates),
            "refused": n(&counts.refused),
            "seconds": (secs * 1000.0).round() / 1000.0,
        })
        .to_string();
    }
    let why = if reasons.is_empty() {
        String::new()
    } else {
        format!(
            ": {}",
            reasons
                .iter()
                .map(|(k, c)| format!("{c} {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let refused = match n(&counts.refused) {
        0 => String::new(),
        r => format!(", {r} refused by nmemd"),
    };
    format!(
        "{}{} files ({} unreadable), {sessions} sessions, {} prompts, {} observations; {lines} lines: {} used, {} not stored{why}; {} events: {} stored, {} already there{refused}; {:.1} s ({:.0} lines/s)",
        if dry_run { "dry run: " } else { "imported " },
        n(&counts.files),
        n(&counts.unreadable),
        n(&counts.prompts),
        n(&counts.observations),
        n(&counts.used),
        counts.skipped_total(),
        n(&counts.events),
        n(&counts.stored),
        n(&counts.duplicates),
        secs,
        lines as f64 / secs.max(1e-9)
    )
}

/// After `nmem install`: import the sessions already on disk, when asked to (`--import`) or when
/// the user says yes on a terminal; otherwise say how.
pub fn offer(import: bool) -> ExitCode {
    let roots: Vec<PathBuf> = IMPORTERS.iter().filter_map(|i| i.default_root()).collect();
    let files = session_files(&roots, &importable());
    if files.is_empty() {
        return ExitCode::SUCCESS;
    }
    let mut by: Vec<String> = Vec::new();
    for h in importable() {
        let n = files.iter().filter(|(_, i)| i.harness() == h).count();
        if n > 0 {
            by.push(format!("{n} {}", h.spec().title));
        }
    }
    let found = format!(
        "{} past session files on this machine ({})",
        files.len(),
        by.join(", ")
    );
    let yes = import || {
        let terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
        if terminal {
            eprint!("\n{found}. Import them into nmem now? [Y/n] ");
            let _ = std::io::stderr().flush();
            let mut answer = String::new();
            let _ = std::io::stdin().read_line(&mut answer);
            matches!(
                answer.trim().to_ascii_lowercase().as_str(),
                "" | "y" | "yes"
            )
        } else {
            false
        }
    };
    if !yes {
        println!("{found}: run `nmem import` to remember them.");
        return ExitCode::SUCCESS;
    }
    run(Options::everything(false))
}

fn progress(
    bar: Option<&indicatif::ProgressBar>,
    i: usize,
    n: usize,
    done: u64,
    total: u64,
    start: Instant,
    c: &Counts,
) {
    let files = format!(
        "{i}/{n} files, {} events, {} stored",
        c.events.load(Relaxed),
        c.stored.load(Relaxed)
    );
    if let Some(bar) = bar {
        // Bytes when the files have a size, else files.
        bar.set_position(if total > 0 {
            done
        } else {
            (i as u64 * bar.length().unwrap_or(1)) / n.max(1) as u64
        });
        bar.set_message(files);
        return;
    }
    if i == n || i.is_multiple_of(50) {
        let frac = if total > 0 {
            done as f64 / total as f64
        } else {
            i as f64 / n as f64
        };
        let elapsed = start.elapsed().as_secs_f64();
        let eta = if frac > 0.0 {
            elapsed / frac - elapsed
        } else {
            0.0
        };
        eprintln!(
            "[{:>3.0}%] {files}, ETA {:.0} s",
            frac * 100.0,
            eta.max(0.0)
        );
    }
}

/// Events per batch request: large enough that the writer commits in big groups, small enough
/// that a failure loses little progress (what was acknowledged is stored).
const BATCH: usize = 2_000;

/// Send a file's events in order, in batches; the daemon prepares each batch off its async
/// workers and the writer commits it in large groups.
fn send(conn: &mut client::Conn, events: Vec<Synth>, counts: &Counts) -> Result<(), String> {
    let mut body = Vec::with_capacity(64 * 1024);
    let mut events = events.into_iter().peekable();
    while events.peek().is_some() {
        body.clear();
        for e in events.by_ref().take(BATCH) {
            // The payload is already JSON (the importer serialised it): sent as it is.
            let payload = String::from_utf8(e.payload)
                .ok()
                .and_then(|p| serde_json::value::RawValue::from_string(p).ok())
                .ok_or_else(|| format!("event {} is not JSON (a bug in the importer)", e.id))?;
            let line = wire::BatchEvent {
                event_id: e.id,
                received_at: e.at,
                harness: e.harness.as_str().to_string(),
                payload,
            };
            serde_json::to_writer(&mut body, &line).map_err(|e| e.to_string())?;
            body.push(b'\n');
        }
        let r = conn
            .request(
                "POST",
                wire::PATH_EVENTS_BATCH,
                &[],
                &body,
                Duration::from_secs(300),
            )
            .map_err(|e| e.to_string())?;
        if r.status != 200 {
            return Err(format!(
                "nmemd answered HTTP {}: {}",
                r.status,
                String::from_utf8_lossy(&r.body)
            ));
        }
        let reply: wire::BatchReply = serde_json::from_slice(&r.body)
            .map_err(|e| format!("nmemd sent a reply nmem import cannot read: {e}"))?;
        counts.stored.fetch_add(reply.stored, Relaxed);
        counts
            .duplicates
            .fetch_add(reply.duplicates + reply.ignored, Relaxed);
        // An event nmem cannot make sense of: counted, not fatal.
        counts
            .refused
            .fetch_add(reply.rejected.len() as u64, Relaxed);
    }
    Ok(())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use proptest::prelude::*;

    pub(in crate::import) fn opts() -> Options {
        Options::everything(true)
    }

    /// What a parse made of its lines: the events' hook names, the lines used, and the lines
    /// not stored by reason (only reasons with a count), for tables of line kinds.
    pub(in crate::import) fn outcome(
        events: &[Synth],
        c: &Counts,
    ) -> (Vec<String>, u64, Vec<(Reason, u64)>) {
        assert_eq!(
            c.lines.load(Relaxed),
            c.used.load(Relaxed) + c.skipped_total(),
            "a line vanished uncounted"
        );
        let reasons = Reason::ALL
            .into_iter()
            .map(|r| (r, c.skipped(r)))
            .filter(|(_, n)| *n > 0)
            .collect();
        let events = events.iter().map(|e| e.event.clone()).collect();
        (events, c.used.load(Relaxed), reasons)
    }

    /// A row of a table of line kinds: what it is, its lines, the events they become, the lines
    /// used, and the lines not stored by reason.
    pub(in crate::import) type Case = (
        &'static str,
        Vec<serde_json::Value>,
        &'static [&'static str],
        u64,
        &'static [(Reason, u64)],
    );

    /// JSON lines, one a line.
    pub(in crate::import) fn jsonl(lines: &[serde_json::Value]) -> String {
        lines
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// A harness the contract says `nmem import` reads has exactly one importer, and the
    /// choices `--harness` takes are the contract's names and aliases.
    #[test]
    fn every_importable_harness_has_one_importer() {
        for h in Harness::ALL {
            let n = IMPORTERS.iter().filter(|i| i.harness() == h).count();
            assert_eq!(n, usize::from(h.spec().imports), "{h}: importers");
            for name in std::iter::once(&h.spec().name).chain(h.spec().aliases) {
                let chosen = Harness::choose(name, |s| s.imports);
                assert_eq!(chosen, h.spec().imports.then(|| vec![h]), "{name}");
            }
        }
        let all = Harness::choose("all", |s| s.imports).unwrap();
        assert_eq!(all.len(), IMPORTERS.len());
        assert!(all.iter().all(|h| importable().contains(h)));
    }

    /// Each importer claims its own kind of file, and Claude Code's takes what the others
    /// leave (it is last).
    #[test]
    fn files_go_to_their_importer() {
        use serde_json::json;
        let head = |name: &'static str, first: serde_json::Value, text: &str| Head {
            name,
            json: name.ends_with(".json"),
            text: text.to_string(),
            first,
        };
        let cases = [
            (
                head(
                    "r.jsonl",
                    json!({"timestamp": "t", "type": "session_meta", "payload": {}}),
                    "",
                ),
                Some(Harness::Codex),
            ),
            (
                head(
                    "rollout-1.jsonl",
                    json!({"id": "x", "timestamp": "t", "instructions": ""}),
                    "",
                ),
                Some(Harness::Codex),
            ),
            (
                head("c.jsonl", json!({"sessionId": "s", "projectHash": "h"}), ""),
                Some(Harness::Gemini),
            ),
            (
                head("session-1.json", serde_json::Value::Null, "{"),
                Some(Harness::Gemini),
            ),
            (
                head("c.jsonl", json!({"type": "user", "sessionId": "s"}), ""),
                Some(Harness::ClaudeCode),
            ),
            (
                head("settings.json", serde_json::Value::Null, "{\"theme\": 1}"),
                None,
            ),
        ];
        for (h, want) in cases {
            let got = IMPORTERS
                .into_iter()
                .find(|i| i.claims(&h))
                .map(|i| i.harness());
            assert_eq!(got, want, "{}", h.name);
        }
    }

    #[test]
    fn event_ids() {
        assert_ne!(super::event_id(&["a", "b"]), super::event_id(&["ab", ""]));
    }

    /// Feed the same bytes to every importer's line parser: none may panic, and every line read
    /// is either used or counted under a reason.
    fn parse_all(text: &[u8]) {
        let o = opts();
        let check = |c: &Counts| {
            assert_eq!(
                c.lines.load(Relaxed),
                c.used.load(Relaxed) + c.skipped_total(),
                "a line vanished uncounted"
            );
        };
        let c = Counts::default();
        claude::parse(text, "t.jsonl", &o, &c).unwrap();
        check(&c);
        let c = Counts::default();
        codex::parse(text, "t.jsonl", &o, &c);
        check(&c);
        for whole in [false, true] {
            let c = Counts::default();
            gemini::parse_all_for_tests(text, whole, &o, &c);
            check(&c);
        }
    }

    /// JSON lines built from the keys and values the importers look at, so that the parsers'
    /// inner branches are reached, not only their "not JSON" one.
    pub(super) fn transcript_value() -> impl Strategy<Value = serde_json::Value> {
        let word = prop::sample::select(vec![
            "user",
            "assistant",
            "system",
            "gemini",
            "message",
            "session_meta",
            "event_msg",
            "response_item",
            "turn_context",
            "compacted",
            "function_call",
            "function_call_output",
            "custom_tool_call",
            "custom_tool_call_output",
            "local_shell_call",
            "exec_command_end",
            "user_message",
            "agent_message",
            "task_complete",
            "web_search_call",
            "tool_use",
            "tool_result",
            "text",
            "compact_boundary",
            "state",
            "s1",
            "/p",
            "c1",
            "shell",
            "01a0618f-a900-71b8-c2d3-e4f5a6b7c8d9",
            "2026-09-02T10:00:00.000Z",
            "<cwd>/p</cwd>",
            "{\"command\":[\"bash\",\"-lc\",\"ls\"],\"workdir\":\"/p\"}",
            "",
        ]);
        let key = prop::sample::select(vec![
            "type",
            "payload",
            "sessionId",
            "cwd",
            "message",
            "content",
            "role",
            "id",
            "uuid",
            "timestamp",
            "turn_id",
            "call_id",
            "record_type",
            "isSidechain",
            "isMeta",
            "tool_use_id",
            "is_error",
            "name",
            "input",
            "arguments",
            "output",
            "text",
            "instructions",
            "git",
            "forked_from_id",
            "source",
            "subagent",
            "$set",
            "$rewindTo",
            "messages",
            "toolCalls",
            "projectHash",
            "last_agent_message",
            "exit_code",
            "aggregated_output",
            "subtype",
            "action",
            "query",
            "result",
            "status",
        ]);
        let leaf = prop_oneof![
            word.prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<bool>().prop_map(serde_json::Value::from),
            Just(serde_json::Value::Null),
            ".{0,12}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                prop::collection::vec((key.clone(), inner), 0..6).prop_map(|kv| {
                    serde_json::Value::Object(
                        kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
                    )
                }),
            ]
        })
    }

    /// A JSON line no format knows: not an object, or an object whose kind is none of theirs
    /// (and with none of the keys Gemini's records are told by, nor a Codex payload: a Codex
    /// line before any header counts as one with no session).
    fn unknown_line() -> impl Strategy<Value = serde_json::Value> {
        use serde_json::{json, Value};
        let leaf = prop_oneof![
            any::<i64>().prop_map(Value::from),
            any::<bool>().prop_map(Value::from),
            Just(Value::Null),
            "[a-z]{0,8}".prop_map(Value::from),
        ];
        prop_oneof![
            leaf.clone(),
            prop::collection::vec(leaf.clone(), 0..3).prop_map(Value::from),
            (
                "[a-z]{1,8}",
                leaf,
                prop::sample::select(vec!["message", "content", "cwd"])
            )
                .prop_map(|(kind, v, key)| json!({"type": format!("x-{kind}"), key: v})),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_bytes_never_panic(lines in prop::collection::vec(any::<Vec<u8>>(), 0..8)) {
            parse_all(&lines.join(&b'\n'));
        }

        #[test]
        fn arbitrary_strings_never_panic(lines in prop::collection::vec(".{0,64}", 0..8)) {
            parse_all(lines.join("\n").as_bytes());
        }

        /// JSON that is not an object, or an object of no kind the formats know, is counted
        /// under `unknown_kind` by every line format; a line that is not JSON under `not_json`.
        #[test]
        fn lines_of_no_known_kind_are_counted_as_such(
            lines in prop::collection::vec(unknown_line(), 1..8),
            // Never `}` last: `{` and `}` alone is an object, not a broken line.
            broken in prop::collection::vec("[a-z ]{0,20}[^\\s}]", 0..3),
        ) {
            let mut text = jsonl(&lines);
            for b in &broken {
                text.push_str(&format!("\n{{{b}"));
            }
            let n = lines.len() as u64;
            let want = || {
                let mut r = vec![(Reason::UnknownKind, n)];
                if !broken.is_empty() {
                    r.insert(0, (Reason::NotJson, broken.len() as u64));
                }
                (vec![], 0, r)
            };
            let o = opts();
            let c = Counts::default();
            let out = claude::parse(text.as_bytes(), "t", &o, &c).unwrap();
            prop_assert_eq!(outcome(&out, &c), want(), "claude");
            let c = Counts::default();
            let out = codex::parse(text.as_bytes(), "t", &o, &c);
            prop_assert_eq!(outcome(&out, &c), want(), "codex");
            let c = Counts::default();
            let out = gemini::parse_all_for_tests(text.as_bytes(), false, &o, &c);
            prop_assert_eq!(outcome(&out, &c), want(), "gemini");
        }

        #[test]
        fn arbitrary_transcript_lines_never_panic(
            lines in prop::collection::vec(transcript_value(), 0..10),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut text = lines.iter().map(|l| l.to_string()).collect::<Vec<_>>().join("\n");
            parse_all(text.as_bytes());
            // And the same cut anywhere, as a half-written file is (on a char boundary: the
            // bytes test covers the rest).
            let mut at = cut.index(text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            text.truncate(at);
            parse_all(text.as_bytes());
        }
    }
}
