//! The SessionStart digest: what a new session of a project should know, in a few dozen lines.
//!
//! Built from bounded, indexed queries only (it runs while the agent waits): recent intents of
//! this project with their action counts (intents that led to actions first), files touched with
//! edit counts, recent errors, pinned items, a little from other projects, and a line on how to
//! dig deeper. After `compact` and `clear` (recovery mode) it shows more, including the last
//! actions before the context was lost. An empty memory prints nothing.

use crate::app::App;
use crate::ingest::Project;
use nmem_proto::harness::Harness;
use rusqlite::{params, Connection, OptionalExtension};
use std::fmt::Write as _;

/// Limits of the digest.
#[derive(Debug, Clone, Copy)]
pub struct DigestLimits {
    pub max_lines: usize,
    pub max_chars: usize,
}

impl Default for DigestLimits {
    fn default() -> Self {
        DigestLimits {
            max_lines: 50,
            max_chars: 9_000,
        }
    }
}

/// The text to print for a SessionStart, shaped for the harness, or `None` for nothing.
pub async fn session_start_output(
    app: &App,
    harness: Harness,
    project: &Project,
    session_id: &str,
    source: &str,
) -> Option<String> {
    if app.ingest.excluded.contains(&project.name) {
        return None;
    }
    let (project, session, source) = (project.clone(), session_id.to_string(), source.to_string());
    let limits = DigestLimits {
        max_lines: app.config.digest.max_lines.max(5),
        max_chars: app
            .config
            .digest
            .max_chars
            .clamp(500, DigestLimits::default().max_chars),
    };
    let text = app
        .readers
        .run(move |c| digest(c, &project, &session, &source, limits, nmem_proto::now_ms()))
        .await;
    let text = match text {
        Ok(Some(t)) => t,
        Ok(None) => return None,
        Err(e) => {
            app.stats.error(format!("SessionStart digest failed: {e}"));
            return None;
        }
    };
    let wrapped = format!("<nmem-context>\n{text}</nmem-context>");
    let out = match harness {
        Harness::Cursor => serde_json::json!({ "additional_context": wrapped }),
        _ => serde_json::json!({
            "hookSpecificOutput": { "hookEventName": "SessionStart", "additionalContext": wrapped }
        }),
    };
    Some(out.to_string())
}

struct Lines {
    out: String,
    lines: usize,
    limits: DigestLimits,
    full: bool,
}

impl Lines {
    fn push(&mut self, line: &str) -> bool {
        // Leave room for the closing line.
        if self.full
            || self.lines + 2 > self.limits.max_lines
            || self.out.len() + line.len() + 200 > self.limits.max_chars
        {
            self.full = true;
            return false;
        }
        self.out.push_str(line);
        self.out.push('\n');
        self.lines += 1;
        true
    }
}

/// Build the digest. `now` is passed in so the text is reproducible in tests.
pub fn digest(
    c: &Connection,
    project: &Project,
    session_id: &str,
    source: &str,
    limits: DigestLimits,
    now: i64,
) -> rusqlite::Result<Option<String>> {
    let recovery = matches!(source, "compact" | "clear");
    let p = project.name.as_str();
    let mut l = Lines {
        out: String::new(),
        lines: 0,
        limits,
        full: false,
    };

    let intents = recent_intents(c, p, session_id, if recovery { 12 } else { 8 })?;
    let files = files_touched(c, p, if recovery { 12 } else { 8 })?;
    let errors = recent_errors(c, p, if recovery { 5 } else { 3 })?;
    let pinned = pinned(c, p, 5)?;
    let last_actions = if recovery || source == "fork" {
        last_actions(c, p, session_id, source, 10)?
    } else {
        Vec::new()
    };
    let others = other_projects(c, p, 3)?;
    if intents.is_empty()
        && files.is_empty()
        && errors.is_empty()
        && pinned.is_empty()
        && last_actions.is_empty()
        && others.is_empty()
    {
        return Ok(None);
    }

    let title = if recovery {
        "recovering context"
    } else {
        "memory"
    };
    l.push(&format!("# nmem {title}: {p}"));
    if !last_actions.is_empty() {
        l.push("");
        l.push("## Last actions before the context was lost");
        for (t, kind, content) in &last_actions {
            l.push(&format!(
                "- {} {kind}: {}",
                ago(now, *t),
                one_line(content, 140)
            ));
        }
    }
    if !pinned.is_empty() {
        l.push("");
        l.push("## Pinned");
        for (id, content) in &pinned {
            l.push(&format!("- #{id} {}", one_line(content, 160)));
        }
    }
    if !intents.is_empty() {
        l.push("");
        l.push("## Recent intents");
        for i in &intents {
            let what = if i.actions == 0 {
                "no actions".to_string()
            } else {
                format!("{} actions{}", i.actions, i.summary)
            };
            l.push(&format!(
                "- {} \"{}\" ({what})",
                ago(now, i.t),
                one_line(&i.text, 140)
            ));
        }
    }
    if !files.is_empty() {
        l.push("");
        l.push("## Files touched");
        for (path, edits) in &files {
            l.push(&format!(
                "- {path} ({edits} edit{})",
                if *edits == 1 { "" } else { "s" }
            ));
        }
    }
    if !errors.is_empty() {
        l.push("");
        l.push("## Recent errors");
        for (t, content) in &errors {
            l.push(&format!("- {} {}", ago(now, *t), one_line(content, 160)));
        }
    }
    if !others.is_empty() {
        l.push("");
        l.push("## Elsewhere");
        for (proj, t, text) in &others {
            l.push(&format!(
                "- [{proj}] {} \"{}\"",
                ago(now, *t),
                one_line(text, 120)
            ));
        }
    }
    let mut out = l.out;
    let _ = writeln!(
        out,
        "\nMore: nmem MCP tools `search` (find), `timeline` (what happened around a result), `get_observations` (full records)."
    );
    Ok(Some(out))
}

struct Intent {
    t: i64,
    text: String,
    actions: i64,
    summary: String,
}

fn recent_intents(
    c: &Connection,
    project: &str,
    session_id: &str,
    n: usize,
) -> rusqlite::Result<Vec<Intent>> {
    let _ = session_id;
    let mut stmt = c.prepare_cached(
        "SELECT p.id, p.timestamp, p.content FROM prompts p
         WHERE p.project = ?1 AND p.source = 'user' ORDER BY p.timestamp DESC LIMIT 40",
    )?;
    let rows: Vec<(i64, i64, String)> = stmt
        .query_map([project], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    let mut count = c.prepare_cached(
        "SELECT obs_type, COUNT(*) FROM observations WHERE prompt_id = ?1 GROUP BY obs_type ORDER BY COUNT(*) DESC",
    )?;
    let mut out = Vec::new();
    for (id, t, text) in rows {
        let kinds: Vec<(String, i64)> = count
            .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        let actions = kinds
            .iter()
            .filter(|(k, _)| k != "turn_end")
            .map(|(_, n)| n)
            .sum();
        let summary = kinds
            .iter()
            .filter(|(k, _)| k != "turn_end")
            .take(3)
            .map(|(k, n)| format!("{n} {k}"))
            .collect::<Vec<_>>()
            .join(", ");
        let summary = if summary.is_empty() {
            String::new()
        } else {
            format!(": {summary}")
        };
        out.push(Intent {
            t,
            text,
            actions,
            summary,
        });
    }
    // Intents that led to actions first; chatter after. Newest first within each group.
    out.sort_by_key(|i| (i.actions == 0, -i.t));
    out.truncate(n);
    Ok(out)
}

fn files_touched(c: &Connection, project: &str, n: usize) -> rusqlite::Result<Vec<(String, i64)>> {
    let mut stmt = c.prepare_cached(
        "SELECT COALESCE(rel_path, file_path) AS f, COUNT(*) AS edits, MAX(timestamp) AS last FROM (
            SELECT rel_path, file_path, timestamp FROM observations
            WHERE project = ?1 AND obs_type IN ('file_edit', 'file_write') AND file_path IS NOT NULL
            ORDER BY timestamp DESC LIMIT 400)
         GROUP BY f ORDER BY edits DESC, last DESC LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![project, n as i64], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

fn recent_errors(c: &Connection, project: &str, n: usize) -> rusqlite::Result<Vec<(i64, String)>> {
    let mut stmt = c.prepare_cached(
        "SELECT timestamp, content FROM (
            SELECT timestamp, id, content FROM observations WHERE project = ?1 AND obs_type = 'command_error'
            ORDER BY timestamp DESC LIMIT ?2)
         UNION ALL
         SELECT timestamp, content FROM (
            SELECT timestamp, id, content FROM observations WHERE project = ?1 AND obs_type = 'tool_error'
            ORDER BY timestamp DESC LIMIT ?2)
         ORDER BY timestamp DESC LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![project, n as i64], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

fn pinned(c: &Connection, project: &str, n: usize) -> rusqlite::Result<Vec<(i64, String)>> {
    let mut stmt = c.prepare_cached(
        "SELECT id, content FROM observations WHERE is_pinned = 1 AND project = ?1 ORDER BY timestamp DESC LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![project, n as i64], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

/// The last actions of this session (after compact) or of the project's most recently active
/// other session (after clear and fork, which bring a new session id).
fn last_actions(
    c: &Connection,
    project: &str,
    session_id: &str,
    source: &str,
    n: usize,
) -> rusqlite::Result<Vec<(i64, String, String)>> {
    let target: Option<String> = if source == "compact" {
        Some(session_id.to_string())
    } else {
        c.prepare_cached(
            "SELECT session_id FROM observations WHERE project = ?1 AND session_id != ?2
             ORDER BY timestamp DESC LIMIT 1",
        )?
        .query_row(params![project, session_id], |r| r.get(0))
        .optional()?
    };
    let Some(target) = target else {
        return Ok(Vec::new());
    };
    let mut stmt = c.prepare_cached(
        "SELECT timestamp, obs_type, content FROM observations
         WHERE session_id = ?1 AND obs_type NOT LIKE 'session_%' AND obs_type NOT IN ('compaction', 'compact_summary')
         ORDER BY timestamp DESC, id DESC LIMIT ?2",
    )?;
    let mut rows: Vec<(i64, String, String)> = stmt
        .query_map(params![target, n as i64], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?
        .collect::<Result<_, _>>()?;
    rows.reverse();
    Ok(rows)
}

fn other_projects(
    c: &Connection,
    project: &str,
    n: usize,
) -> rusqlite::Result<Vec<(String, i64, String)>> {
    let mut stmt = c.prepare_cached(
        "SELECT project, timestamp, content FROM prompts
         WHERE source = 'user' AND project != ?1 ORDER BY timestamp DESC LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![project, n as i64], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
    })?;
    rows.collect()
}

fn one_line(s: &str, max: usize) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let cut: String = flat.chars().take(max - 1).collect();
        format!("{cut}…")
    }
}

/// "5m ago", "3h ago", "2d ago".
fn ago(now: i64, t: i64) -> String {
    let s = ((now - t).max(0)) / 1000;
    match s {
        0..=59 => "just now".into(),
        60..=3599 => format!("{}m ago", s / 60),
        3600..=86_399 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86_400),
    }
}
