//! `nmem import`: back-fill memory from the Claude Code transcripts already on disk.
//!
//! Each transcript is replayed as the hook events Claude Code would have sent (prompts, tool
//! calls with their results, failures, compactions), through the daemon like live events: the
//! same extraction, the same redaction, the original times. Event ids are derived from the
//! transcript (session, line, kind), and tool calls carry their `tool_use_id` and prompts their
//! `promptId`, so importing twice, or importing a session that was also captured live, stores it
//! once. The daemon reads the thinking blocks from the transcript itself (`transcript_path`).
//! Lines that are half-written, corrupt or of unknown kinds are skipped and counted.

use nmem_proto::{client, wire};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

pub struct Options {
    pub paths: Vec<PathBuf>,
    pub since_ms: Option<i64>,
    pub project: Option<String>,
    pub dry_run: bool,
}

#[derive(Default)]
struct Counts {
    files: AtomicU64,
    unreadable: AtomicU64,
    lines: AtomicU64,
    skipped: AtomicU64,
    events: AtomicU64,
    stored: AtomicU64,
    duplicates: AtomicU64,
}

/// One synthesized hook event.
struct Synth {
    id: String,
    at: i64,
    payload: Vec<u8>,
}

/// Every `*.jsonl` under `~/.claude/projects` (subagent transcripts included), or under the
/// paths given (files or folders).
pub fn transcripts(roots: &[PathBuf]) -> Vec<PathBuf> {
    fn walk(p: &Path, out: &mut Vec<PathBuf>) {
        if p.is_dir() {
            if let Ok(rd) = std::fs::read_dir(p) {
                let mut entries: Vec<PathBuf> =
                    rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
                entries.sort();
                for e in entries {
                    walk(&e, out);
                }
            }
        } else if p.extension().is_some_and(|e| e == "jsonl") {
            out.push(p.to_path_buf());
        }
    }
    let mut out = Vec::new();
    for r in roots {
        walk(r, &mut out);
    }
    out
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

fn is_injected(text: &str) -> bool {
    let t = text.trim_start();
    [
        "<command-",
        "<local-command-",
        "<system-reminder>",
        "<task-notification>",
        "<ide_",
        "Caveat:",
    ]
    .iter()
    .any(|p| t.starts_with(p))
}

/// Replay one transcript file as hook events. Returns the events and how many lines were skipped.
fn synthesize(path: &Path, opts: &Options, counts: &Counts) -> std::io::Result<Vec<Synth>> {
    let file = std::fs::File::open(path)?;
    let tp = path.to_string_lossy().into_owned();
    let mut calls: HashMap<String, (String, Value)> = HashMap::new();
    let mut out = Vec::new();
    for (n, line) in std::io::BufReader::new(file).split(b'\n').enumerate() {
        let line = line?;
        counts.lines.fetch_add(1, Relaxed);
        let Ok(v) = serde_json::from_slice::<Value>(&line) else {
            counts.skipped.fetch_add(1, Relaxed);
            continue;
        };
        let at = v["timestamp"]
            .as_str()
            .and_then(nmem_proto::time::parse_rfc3339_ms)
            .unwrap_or(0);
        let session = v["sessionId"].as_str().unwrap_or("").to_string();
        let cwd = v["cwd"].as_str().unwrap_or("").to_string();
        let uuid = v["uuid"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| n.to_string());
        if session.is_empty() || cwd.is_empty() {
            if !matches!(
                v["type"].as_str(),
                Some(
                    "file-history-snapshot"
                        | "summary"
                        | "ai-title"
                        | "custom-title"
                        | "last-prompt"
                        | "agent-name"
                )
            ) {
                counts.skipped.fetch_add(1, Relaxed);
            }
            continue;
        }
        if opts.since_ms.is_some_and(|s| at < s) {
            // Still remember tool calls: their results may come after the cut.
            if v["type"] == "assistant" {
                remember(&v, &mut calls);
            }
            continue;
        }
        if let Some(p) = &opts.project {
            if Path::new(&cwd).file_name().and_then(|f| f.to_str()) != Some(p.as_str()) {
                continue;
            }
        }
        let base = |event: &str| json!({"session_id": session, "cwd": cwd, "hook_event_name": event, "transcript_path": tp});
        match v["type"].as_str() {
            Some("user") => match &v["message"]["content"] {
                Value::String(text)
                    if v["isMeta"] != true
                        && v["isCompactSummary"] != true
                        && !is_injected(text) =>
                {
                    let mut e = base("UserPromptSubmit");
                    e["prompt"] = json!(text);
                    if let Some(pid) = v["promptId"].as_str() {
                        e["prompt_id"] = json!(pid);
                    }
                    out.push(Synth {
                        id: event_id(&[&session, &uuid, "prompt"]),
                        at,
                        payload: e.to_string().into_bytes(),
                    });
                }
                Value::Array(blocks) => {
                    for b in blocks.iter().filter(|b| b["type"] == "tool_result") {
                        let id = b["tool_use_id"].as_str().unwrap_or_default();
                        let Some((name, input)) = calls.get(id) else {
                            continue;
                        };
                        let mut e;
                        if b["is_error"] == true {
                            e = base("PostToolUseFailure");
                            e["error"] = match &b["content"] {
                                Value::String(s) => json!(s),
                                other => json!(crate_text(other)),
                            };
                        } else {
                            e = base("PostToolUse");
                            e["tool_response"] = v["toolUseResult"].clone();
                        }
                        e["tool_name"] = json!(name);
                        e["tool_input"] = input.clone();
                        e["tool_use_id"] = json!(id);
                        out.push(Synth {
                            id: event_id(&[&session, id, "tool"]),
                            at,
                            payload: e.to_string().into_bytes(),
                        });
                    }
                }
                _ => {}
            },
            Some("assistant") => remember(&v, &mut calls),
            Some("system") if v["subtype"] == "compact_boundary" => {
                let mut e = base("PreCompact");
                e["trigger"] = v["compactMetadata"]["trigger"].clone();
                out.push(Synth {
                    id: event_id(&[&session, &uuid, "compact"]),
                    at,
                    payload: e.to_string().into_bytes(),
                });
            }
            Some(_) => {}
            None => {
                counts.skipped.fetch_add(1, Relaxed);
            }
        }
    }
    Ok(out)
}

fn crate_text(v: &Value) -> String {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_else(|| v.to_string())
}

fn remember(v: &Value, calls: &mut HashMap<String, (String, Value)>) {
    for b in v["message"]["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "tool_use")
    {
        if let (Some(id), Some(name)) = (b["id"].as_str(), b["name"].as_str()) {
            calls.insert(id.to_string(), (name.to_string(), b["input"].clone()));
        }
    }
}

pub fn run(opts: Options) -> ExitCode {
    let roots = if opts.paths.is_empty() {
        let base = std::env::var_os("CLAUDE_CONFIG_DIR")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".claude")))
            .unwrap_or_default();
        vec![base.join("projects")]
    } else {
        opts.paths.clone()
    };
    let files = transcripts(&roots);
    if files.is_empty() {
        println!(
            "no Claude Code transcripts found under {}",
            roots
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return ExitCode::SUCCESS;
    }
    let paths = nmem_proto::paths::Paths::from_env();
    if !opts.dry_run && !crate::daemon_client::healthy(&paths) {
        crate::autostart::start_daemon_now(&paths);
        if !crate::daemon_client::wait_healthy(&paths, Duration::from_secs(10)) {
            eprintln!("nmem import: nmemd is not running and did not start; run `nmemctl start`, then import again");
            return ExitCode::from(2);
        }
    }
    let total_bytes: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
        .sum();
    let counts = Counts::default();
    let done_bytes = AtomicU64::new(0);
    let start = Instant::now();
    let tty = std::io::stderr().is_terminal();
    let mut failed = None;
    for (i, f) in files.iter().enumerate() {
        counts.files.fetch_add(1, Relaxed);
        let events = match synthesize(f, &opts, &counts) {
            Ok(e) => e,
            Err(_) => {
                counts.unreadable.fetch_add(1, Relaxed);
                continue;
            }
        };
        counts.events.fetch_add(events.len() as u64, Relaxed);
        if !opts.dry_run {
            if let Err(e) = send(&paths.socket, events, &counts) {
                failed = Some(format!("{}: {e}", f.display()));
                break;
            }
        }
        done_bytes.fetch_add(std::fs::metadata(f).map(|m| m.len()).unwrap_or(0), Relaxed);
        progress(
            tty,
            i + 1,
            files.len(),
            done_bytes.load(Relaxed),
            total_bytes,
            start,
            &counts,
        );
    }
    if tty {
        eprintln!();
    }
    let secs = start.elapsed().as_secs_f64();
    let lines = counts.lines.load(Relaxed);
    println!(
        "{}{} files ({} unreadable), {} lines ({} skipped), {} events: {} stored, {} already there; {:.1} s ({:.0} lines/s)",
        if opts.dry_run { "dry run: " } else { "imported " },
        counts.files.load(Relaxed),
        counts.unreadable.load(Relaxed),
        lines,
        counts.skipped.load(Relaxed),
        counts.events.load(Relaxed),
        counts.stored.load(Relaxed),
        counts.duplicates.load(Relaxed),
        secs,
        lines as f64 / secs.max(1e-9)
    );
    match failed {
        Some(e) => {
            eprintln!("nmem import: stopped at {e}; what was sent is stored, run the import again to go on");
            ExitCode::from(1)
        }
        None => ExitCode::SUCCESS,
    }
}

fn progress(tty: bool, i: usize, n: usize, done: u64, total: u64, start: Instant, c: &Counts) {
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
    let line = format!(
        "[{:>3.0}%] {i}/{n} files, {} events, {} stored, ETA {:.0} s",
        frac * 100.0,
        c.events.load(Relaxed),
        c.stored.load(Relaxed),
        eta.max(0.0)
    );
    if tty {
        eprint!("\r{line}   ");
        let _ = std::io::stderr().flush();
    } else if i == n || i.is_multiple_of(50) {
        eprintln!("{line}");
    }
}

/// Send a file's events over a few kept-alive connections; the writer commits them in groups.
fn send(socket: &Path, events: Vec<Synth>, counts: &Counts) -> Result<(), String> {
    if events.is_empty() {
        return Ok(());
    }
    // Tool results arrive in order within a session; keep each file's events in order on one
    // connection so prompts come before the actions they framed.
    let mut conn = client::Conn::open(socket).map_err(|e| e.to_string())?;
    for e in events {
        let at = e.at.to_string();
        let r = conn
            .request(
                "POST",
                wire::PATH_EVENTS,
                &[
                    (wire::H_EVENT_ID, &e.id),
                    (wire::H_RECEIVED_AT, &at),
                    (wire::H_HARNESS, "claude-code"),
                ],
                &e.payload,
                Duration::from_secs(60),
            )
            .map_err(|e| e.to_string())?;
        match r.status {
            200 => match serde_json::from_slice::<wire::RecordReply>(&r.body).map(|r| r.outcome) {
                Ok(wire::RecordOutcome::Stored) => counts.stored.fetch_add(1, Relaxed),
                _ => counts.duplicates.fetch_add(1, Relaxed),
            },
            // A line nmem cannot make sense of: counted, not fatal.
            422 => counts.skipped.fetch_add(1, Relaxed),
            s => {
                return Err(format!(
                    "nmemd answered HTTP {s}: {}",
                    String::from_utf8_lossy(&r.body)
                ))
            }
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn event_ids() {
        assert_ne!(super::event_id(&["a", "b"]), super::event_id(&["ab", ""]));
    }
}
