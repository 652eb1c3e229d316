//! `nmem ingest`: documents into memory. This side reads the sources and sends their text to
//! `POST /v1/docs/ingest`; the daemon redacts, chunks, deduplicates and stores them.
//!
//! The client reads, not the daemon: it runs as the user, in the user's folder, and the daemon
//! then never opens a path a request names (a request cannot make nmemd read a file or block on
//! one). Reading is hardened all the same, since a repository is input nmem did not write:
//!
//! * every file is opened `O_NOFOLLOW | O_NONBLOCK` and checked with `fstat` to be a regular
//!   file, so a symlink is never followed (in or out of the tree) and a FIFO or a device never
//!   blocks the walk; at most [`MAX_FILE`] bytes are read, a bigger file is skipped;
//! * a file with a NUL byte in its first 8 KiB, or not UTF-8, is binary and skipped;
//! * the walk (crate `ignore`, ripgrep's) honours `.gitignore`, `.ignore` and
//!   `.git/info/exclude`, never follows symlinks, skips `.git`, `node_modules`, `target`, `dist`,
//!   `build`, and excludes local agent state (`.claude`, `.codex`, `.cursor`, `.worktrees`) with
//!   a warning unless `--force`;
//! * a path given on the command line that is missing, a symlink, a FIFO or too big is an
//!   error before anything is sent: nothing changes.
//!
//! [`collect`] is the whole client side, so other faces (an MCP tool) reuse it.

use crate::daemon_client::{call, CallError, Options as CallOptions};
use nmem_proto::docs::{
    ChunkCounts, IngestReply, IngestRequest, SourceKind, SourceOutcome, SourceStatus, SourceText,
};
use nmem_proto::wire;
use std::io::{IsTerminal, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The largest file read (1 MiB): documentation and code are smaller; what is bigger is data.
pub const MAX_FILE: u64 = 1 << 20;
/// Folders never walked: version control, dependencies, build output.
pub const SKIPPED_DIRS: &[&str] = &[".git", "node_modules", "target", "dist", "build"];
/// Local agent state: excluded with a warning unless forced (it holds sessions, not docs).
pub const AGENT_STATE_DIRS: &[&str] = &[".claude", ".codex", ".cursor", ".worktrees"];
/// Text sent per request, so a large repository goes in several bounded bodies.
const BATCH_BYTES: usize = 8 << 20;
const BATCH_SOURCES: usize = 500;

/// What to ingest.
#[derive(Debug, Default, Clone)]
pub struct Options {
    pub paths: Vec<PathBuf>,
    pub project: Option<String>,
    pub force: bool,
    pub urls: Vec<String>,
    /// A JSON file of messages, or `-` for stdin.
    pub conversation: Option<String>,
    pub json: bool,
    /// The folder whose project the sources join (default: the first path's, else the
    /// current directory's).
    pub cwd: Option<PathBuf>,
}

/// The sources read, those skipped (with why) and what to tell the user.
#[derive(Debug, Default)]
pub struct Collected {
    pub sources: Vec<SourceText>,
    pub skipped: Vec<SourceOutcome>,
    pub warnings: Vec<String>,
}

fn skipped(locator: &Path, kind: SourceKind, reason: impl Into<String>) -> SourceOutcome {
    SourceOutcome {
        locator: locator.to_string_lossy().into_owned(),
        kind,
        status: SourceStatus::Skipped,
        reason: Some(reason.into()),
        source_id: None,
        chunks: ChunkCounts::default(),
    }
}

fn is_markdown(p: &Path) -> bool {
    matches!(
        p.extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Some("md" | "markdown" | "mdx")
    )
}

/// Read one file safely as UTF-8 text ([`read_bytes`]); `Err` says why not.
pub fn read_text(path: &Path) -> Result<String, String> {
    let buf = read_bytes(path)?;
    if buf[..buf.len().min(8192)].contains(&0) {
        return Err("binary (a NUL byte): only text is ingested".into());
    }
    String::from_utf8(buf).map_err(|_| "binary (not UTF-8): only text is ingested".into())
}

fn is_pdf(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("pdf"))
}

/// A file as a source: a PDF's text, Markdown, or text; `Err` says why not.
fn read_source(path: &Path, kind: SourceKind) -> Result<SourceText, String> {
    let locator = path.to_string_lossy().into_owned();
    if is_pdf(path) {
        let bytes = read_bytes(path)?;
        return Ok(SourceText {
            locator,
            kind: SourceKind::Pdf,
            text: crate::docs_web::pdf_text(&bytes)?,
            markdown: false,
        });
    }
    let text = read_text(path)?;
    let markdown = is_markdown(path);
    let kind = match kind {
        SourceKind::File if markdown => SourceKind::Markdown,
        k => k,
    };
    Ok(SourceText {
        locator,
        kind,
        text,
        markdown,
    })
}

/// Read one file safely: a regular file (never through a symlink, never blocking on a FIFO),
/// at most [`MAX_FILE`] bytes. `Err` says why not.
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, String> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => "a symlink: not followed (give the file it points to)".into(),
            Some(libc::ENOENT) => "no such file".into(),
            _ => format!("cannot open: {e}"),
        })?;
    let meta = f.metadata().map_err(|e| format!("cannot stat: {e}"))?;
    if !meta.file_type().is_file() {
        return Err("not a regular file (a FIFO, socket or device): not read".into());
    }
    if meta.len() > MAX_FILE {
        return Err(format!(
            "{} KiB, over the {} KiB a document may have",
            meta.len() >> 10,
            MAX_FILE >> 10
        ));
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    f.take(MAX_FILE + 1)
        .read_to_end(&mut buf)
        .map_err(|e| format!("cannot read: {e}"))?;
    if buf.len() as u64 > MAX_FILE {
        return Err(format!("grew past {} KiB while read", MAX_FILE >> 10));
    }
    Ok(buf)
}

/// A path given on the command line, made absolute without following a final symlink.
fn absolute(p: &Path) -> PathBuf {
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(p)
    };
    match (abs.parent(), abs.file_name()) {
        (Some(dir), Some(name)) => std::fs::canonicalize(dir)
            .map(|d| d.join(name))
            .unwrap_or(abs),
        _ => abs,
    }
}

/// Read every source the options name. `Err` is bad input (a missing path, a FIFO or symlink
/// given by name, a file too big, an unreadable conversation): nothing should be sent.
pub fn collect(o: &Options, progress: &indicatif::ProgressBar) -> Result<Collected, String> {
    let mut out = Collected::default();
    if o.paths.is_empty() && o.urls.is_empty() && o.conversation.is_none() {
        return Err("nothing to ingest: give a file or folder, --url or --conversation".into());
    }
    for p in &o.paths {
        let abs = absolute(p);
        let meta = std::fs::symlink_metadata(&abs).map_err(|e| format!("{}: {e}", p.display()))?;
        let ft = meta.file_type();
        if ft.is_symlink() {
            return Err(format!(
                "{} is a symlink: nmem does not follow symlinks; give the file or folder it points to",
                p.display()
            ));
        }
        if ft.is_dir() {
            walk(&abs, o.force, &mut out, progress);
            continue;
        }
        out.sources.push(
            read_source(&abs, SourceKind::File).map_err(|why| format!("{}: {why}", p.display()))?,
        );
    }
    if let Some(c) = &o.conversation {
        out.sources.push(conversation(c)?);
    }
    for u in &o.urls {
        out.sources.push(crate::docs_web::fetch(u)?);
    }
    Ok(out)
}

/// Walk a repository folder: every text file not ignored, as `repo-file` sources.
fn walk(root: &Path, force: bool, out: &mut Collected, progress: &indicatif::ProgressBar) {
    let excluded: Arc<Mutex<Vec<(PathBuf, bool)>>> = Arc::default();
    let ex = excluded.clone();
    let walker = ignore::WalkBuilder::new(root)
        .hidden(false)
        .follow_links(false)
        .require_git(false)
        .git_global(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(move |e| {
            if e.depth() == 0 || !e.file_type().is_some_and(|t| t.is_dir()) {
                return true;
            }
            let name = e.file_name().to_string_lossy();
            if SKIPPED_DIRS.contains(&name.as_ref()) {
                ex.lock().unwrap().push((e.path().to_path_buf(), false));
                return false;
            }
            if !force && AGENT_STATE_DIRS.contains(&name.as_ref()) {
                ex.lock().unwrap().push((e.path().to_path_buf(), true));
                return false;
            }
            true
        })
        .build();
    for entry in walker {
        let e = match entry {
            Ok(e) => e,
            Err(err) => {
                out.warnings
                    .push(format!("walking {}: {err}", root.display()));
                continue;
            }
        };
        let Some(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            continue;
        }
        let path = e.path();
        if ft.is_symlink() {
            out.skipped.push(skipped(
                path,
                SourceKind::RepoFile,
                "a symlink: not followed",
            ));
            continue;
        }
        progress.set_message(path.display().to_string());
        progress.inc(1);
        match read_source(path, SourceKind::RepoFile) {
            Ok(s) => out.sources.push(s),
            Err(why) => out.skipped.push(skipped(path, SourceKind::RepoFile, why)),
        }
    }
    for (dir, agent) in excluded.lock().unwrap().drain(..) {
        let why = if agent {
            out.warnings.push(format!(
                "{} is local agent state: excluded (pass --force to ingest it)",
                dir.display()
            ));
            "local agent state: excluded unless --force"
        } else {
            "version control, dependencies or build output: never walked"
        };
        out.skipped.push(skipped(&dir, SourceKind::RepoFile, why));
    }
}

/// A conversation: a JSON array of messages (`{role, content}`, content a string or a list of
/// `{type: "text", text}`), or an object with `messages` (and an optional `id` or `title`, its
/// name). One heading per message, so each is found with its role.
pub fn conversation(arg: &str) -> Result<SourceText, String> {
    let (raw, name) = if arg == "-" {
        let mut s = String::new();
        std::io::stdin()
            .take(MAX_FILE + 1)
            .read_to_string(&mut s)
            .map_err(|e| format!("reading the conversation from stdin: {e}"))?;
        (s, None)
    } else {
        let p = absolute(Path::new(arg));
        let s = read_text(&p).map_err(|why| format!("{arg}: {why}"))?;
        (s, Some(p.to_string_lossy().into_owned()))
    };
    if raw.len() as u64 > MAX_FILE {
        return Err(format!("the conversation is over {} KiB", MAX_FILE >> 10));
    }
    let v: serde_json::Value = serde_json::from_str(&raw).map_err(|e| {
        format!("the conversation is not JSON ({e}): give an array of {{\"role\", \"content\"}} messages")
    })?;
    conversation_of(&v, name)
}

/// A conversation given as JSON (an array of messages, or an object with `messages` and an
/// optional `id` or `title`), named `name` unless it names itself; shared by `nmem ingest
/// --conversation` and memory-substrate's `memory_ingest` mode `conversation`.
pub fn conversation_of(v: &serde_json::Value, name: Option<String>) -> Result<SourceText, String> {
    let (messages, id) = match v {
        serde_json::Value::Array(a) => (a.clone(), None),
        serde_json::Value::Object(o) => match o.get("messages") {
            Some(serde_json::Value::Array(a)) => (
                a.clone(),
                o.get("id")
                    .or_else(|| o.get("title"))
                    .and_then(|t| t.as_str())
                    .map(str::to_string),
            ),
            _ => return Err("the conversation object has no `messages` array".into()),
        },
        _ => {
            return Err(
                "a conversation is an array of messages or an object with `messages`".into(),
            )
        }
    };
    let mut text = String::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(|r| r.as_str()).unwrap_or("message");
        let body = match m.get("content") {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(|t| t.as_str()))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => {
                return Err(format!(
                    "message {} has no text `content`: each message is {{\"role\", \"content\"}}",
                    i + 1
                ))
            }
        };
        text.push_str(&format!("## {role} ({})\n\n{}\n\n", i + 1, body.trim()));
    }
    if messages.is_empty() {
        return Err("the conversation has no messages".into());
    }
    let name = id.or(name).unwrap_or_else(|| {
        use sha2::Digest;
        let h = sha2::Sha256::digest(text.as_bytes());
        h[..6].iter().map(|b| format!("{b:02x}")).collect()
    });
    Ok(SourceText {
        locator: format!("conversation:{name}"),
        kind: SourceKind::Conversation,
        text,
        markdown: true,
    })
}

/// Send the sources in bounded requests and merge the replies with what was skipped here.
pub fn send(o: &Options, c: Collected) -> Result<IngestReply, CallError> {
    let cwd = o
        .cwd
        .clone()
        .or_else(|| o.paths.first().cloned())
        .map(|p| {
            let a = absolute(&p);
            if a.is_dir() {
                a
            } else {
                a.parent().map(Path::to_path_buf).unwrap_or(a)
            }
        })
        .or_else(|| std::env::current_dir().ok())
        .map(|p| p.to_string_lossy().into_owned());
    let mut reply = IngestReply::default();
    let mut batch: Vec<SourceText> = Vec::new();
    let mut bytes = 0;
    let mut sources = c.sources.into_iter().peekable();
    let opts = CallOptions {
        deadline: Duration::from_secs(300),
        ..CallOptions::QUERY
    };
    while let Some(s) = sources.next() {
        bytes += s.text.len();
        batch.push(s);
        let full = bytes >= BATCH_BYTES || batch.len() >= BATCH_SOURCES;
        if full || sources.peek().is_none() {
            let req = IngestRequest {
                project: o.project.clone().map(Some),
                cwd: cwd.clone(),
                sources: std::mem::take(&mut batch),
            };
            let r: IngestReply = call("POST", wire::PATH_DOCS_INGEST, Some(&req), opts)?;
            reply.project = r.project;
            reply.sources.extend(r.sources);
            reply.warnings.extend(r.warnings);
            bytes = 0;
        }
    }
    reply.sources.extend(c.skipped);
    reply.warnings.extend(c.warnings);
    reply.total();
    Ok(reply)
}

/// `nmem ingest`.
pub fn run(o: Options) -> ExitCode {
    let bar = if std::io::stderr().is_terminal() && !o.json {
        let b = indicatif::ProgressBar::new_spinner();
        b.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {pos} files {wide_msg}")
                .expect("a valid template"),
        );
        b.enable_steady_tick(Duration::from_millis(120));
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let collected = collect(&o, &bar);
    bar.finish_and_clear();
    let collected = match collected {
        Ok(c) => c,
        Err(e) => {
            eprintln!("nmem ingest: {e}");
            return ExitCode::from(1);
        }
    };
    let reply = if collected.sources.is_empty() {
        // Everything was skipped here: nothing to send.
        let mut r = IngestReply {
            project: o.project.clone().unwrap_or_default(),
            sources: collected.skipped,
            warnings: collected.warnings,
            ..IngestReply::default()
        };
        r.total();
        r
    } else {
        match send(&o, collected) {
            Ok(r) => r,
            Err(CallError::Api { message, .. }) => {
                eprintln!("nmem ingest: {message}");
                return ExitCode::from(1);
            }
            Err(e) => {
                eprintln!("nmem ingest: {e}");
                return ExitCode::from(2);
            }
        }
    };
    if o.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&reply).expect("serialises")
        );
        return ExitCode::SUCCESS;
    }
    for w in &reply.warnings {
        eprintln!("warning: {w}");
    }
    for s in &reply.sources {
        let c = &s.chunks;
        match s.status {
            SourceStatus::Noop => {}
            SourceStatus::Skipped => println!(
                "skipped   {}: {}",
                s.locator,
                s.reason.as_deref().unwrap_or("")
            ),
            st => println!(
                "{:<9} {} (chunks: {} added, {} kept, {} removed, {} duplicate)",
                format!("{st:?}").to_lowercase(),
                s.locator,
                c.added,
                c.kept,
                c.removed,
                c.duplicate
            ),
        }
    }
    let t = &reply.totals;
    println!(
        "{}: {} ingested, {} updated, {} unchanged, {} skipped; chunks: {} added, {} kept, {} removed, {} duplicate",
        if reply.project.is_empty() { "nmem ingest" } else { &reply.project },
        t.ingested, t.updated, t.noop, t.skipped, t.chunks.added, t.chunks.kept, t.chunks.removed, t.chunks.duplicate
    );
    ExitCode::SUCCESS
}
