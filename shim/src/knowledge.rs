//! `nmem knowledge …` and `nmem work …`: governed knowledge and work items on the command line
//! (daemon routes `/v1/knowledge*`, rules in daemon/src/knowledge.rs). Tables for a person,
//! `--json` for scripts; exit codes as the other query commands (1: the daemon refused the
//! request and changed nothing, 2: it could not be reached).

use crate::cli::{cwd, finish};
use crate::daemon_client::post;
use crate::render::Text;
use nmem_proto::knowledge::{
    Action, AuditEntry, Class, EvidenceRef, Item, LifecycleReply, LifecycleRequest, ListReply,
    ListRequest, MemorySource, Payload, RememberRequest, Remembered, Status, SCOPE_GLOBAL,
    SCOPE_PROJECT,
};
use nmem_proto::text::one_line;
use nmem_proto::wire;
use std::process::ExitCode;

/// What `nmem knowledge add` and `nmem work add` take.
pub struct AddArgs {
    pub class: Class,
    pub kind: String,
    pub title: String,
    pub summary: Option<String>,
    pub reason: String,
    pub source: String,
    pub global: bool,
    pub status: Option<String>,
    pub subject: Option<String>,
    pub predicate: Option<String>,
    pub value: Option<String>,
    pub evidence: Vec<String>,
    pub confidence: Option<f64>,
    pub project: Option<String>,
    pub json: bool,
}

fn usage(message: String) -> ExitCode {
    eprintln!("nmem: {message}");
    ExitCode::from(2)
}

pub fn add(a: AddArgs) -> ExitCode {
    let Some(memory_source) = MemorySource::parse(&a.source) else {
        return usage(format!(
            "--source {:?} is not a source: use {}",
            a.source,
            MemorySource::names()
        ));
    };
    let status = match a.status.as_deref().map(|s| (s, Status::parse(s))) {
        None => None,
        Some((_, Some(s))) => Some(s),
        Some((s, None)) => {
            return usage(format!(
                "--status {s:?} is not a status: use {}",
                Status::names()
            ))
        }
    };
    // A value that reads as JSON (a number, true, a list) is kept as such; anything else is text.
    let value = a.value.map(|v| {
        serde_json::from_str::<serde_json::Value>(&v).unwrap_or(serde_json::Value::String(v))
    });
    let payload =
        (a.subject.is_some() || a.predicate.is_some() || value.is_some()).then(|| Payload {
            subject: a.subject,
            predicate: a.predicate,
            value,
            ..Payload::default()
        });
    let req = RememberRequest {
        class: a.class,
        kind: a.kind,
        title: a.title,
        summary: a.summary.unwrap_or_default(),
        reason: a.reason,
        memory_source,
        scope_refs: vec![if a.global {
            SCOPE_GLOBAL
        } else {
            SCOPE_PROJECT
        }
        .to_string()],
        status,
        confidence: a.confidence,
        payload,
        evidence_refs: a
            .evidence
            .into_iter()
            .map(|e| {
                // `obs:12`, `12`, or `obs:12#<sha256 prefix>`; a document chunk `d7` or
                // `doc:7` (a `doc` search result's id), `d7#<sha256 prefix>`.
                let (id, hash) = match e.split_once('#') {
                    Some((id, h)) => (id.to_string(), Some(h.to_string())),
                    None => (e, None),
                };
                let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
                let source_id = if digits(&id) {
                    format!("obs:{id}")
                } else if id.strip_prefix('d').is_some_and(digits) {
                    format!("doc:{}", &id[1..])
                } else {
                    id
                };
                EvidenceRef {
                    source_id,
                    segment_id: None,
                    hash,
                    file_path: None,
                }
            })
            .collect(),
        project: a.project,
        cwd: cwd(),
    };
    finish(
        post::<_, Remembered>(wire::PATH_KNOWLEDGE, &req),
        a.json,
        |r| {
            let mut t = Text {
                notes: r.notes.clone(),
                body: format!(
                    "saved k{} ({} {}, {})\n",
                    r.item.id, r.item.status, r.item.kind, r.item.project
                ),
            };
            for d in &r.possible_duplicates {
                t.notes.push(format!(
                    "possible duplicate: k{} ({} {}, score {:.2}: {}) {}",
                    d.object_id,
                    d.status,
                    d.kind,
                    d.score,
                    d.reasons.join(", "),
                    one_line(&d.title, 100)
                ));
            }
            t
        },
    )
}

pub fn change(
    action: Action,
    id: i64,
    new_id: Option<i64>,
    reason: String,
    json: bool,
) -> ExitCode {
    let req = LifecycleRequest {
        action,
        id,
        new_id,
        reason,
    };
    finish(
        post::<_, LifecycleReply>(wire::PATH_KNOWLEDGE_LIFECYCLE, &req),
        json,
        |r| Text {
            notes: Vec::new(),
            body: r.items.iter().map(row).collect(),
        },
    )
}

/// `nmem knowledge pin|unpin`: a pinned item comes first in its project's digest while current.
pub fn pin(id: i64, pinned: bool, json: bool) -> ExitCode {
    let req = wire::PinRequest {
        id,
        pinned,
        knowledge: true,
    };
    finish(
        post::<_, wire::PinRequest>(wire::PATH_PIN, &req),
        json,
        |r| Text {
            notes: Vec::new(),
            body: format!(
                "k{} {}\n",
                r.id,
                if r.pinned {
                    "pinned: shown first in its project's digest while current"
                } else {
                    "unpinned"
                }
            ),
        },
    )
}

/// What `nmem knowledge list` and `nmem work list` take.
pub struct ListArgs {
    pub class: Class,
    pub status: Vec<String>,
    pub kind: Option<String>,
    pub stale: bool,
    pub limit: Option<i64>,
    pub project: Option<String>,
    pub json: bool,
}

pub fn list(a: ListArgs) -> ExitCode {
    let mut status = Vec::new();
    for s in &a.status {
        match Status::parse(s) {
            Some(x) => status.push(x),
            None => {
                return usage(format!(
                    "--status {s:?} is not a status: use {}",
                    Status::names()
                ))
            }
        }
    }
    let req = ListRequest {
        class: Some(a.class),
        status,
        kind: a.kind,
        stale: a.stale,
        limit: a.limit,
        project: a.project,
        cwd: cwd(),
        ..ListRequest::default()
    };
    let class = a.class;
    finish(
        post::<_, ListReply>(wire::PATH_KNOWLEDGE_LIST, &req),
        a.json,
        move |r| Text {
            notes: if r.items.is_empty() {
                vec![format!("no {} items match", class)]
            } else {
                Vec::new()
            },
            body: r.items.iter().map(row).collect(),
        },
    )
}

pub fn show(ids: Vec<i64>, json: bool) -> ExitCode {
    let req = ListRequest {
        ids: ids.clone(),
        audit: true,
        ..ListRequest::default()
    };
    finish(
        post::<_, ListReply>(wire::PATH_KNOWLEDGE_LIST, &req),
        json,
        |r| {
            let missing: Vec<String> = ids
                .iter()
                .filter(|i| !r.items.iter().any(|x| x.id == **i))
                .map(|i| format!("k{i}"))
                .collect();
            Text {
                notes: if missing.is_empty() {
                    Vec::new()
                } else {
                    vec![format!("not found: {}", missing.join(", "))]
                },
                body: r.items.iter().map(|i| full(i, &r.audit)).collect(),
            }
        },
    )
}

/// One line: id, status, kind, title, flags.
fn row(i: &Item) -> String {
    let mut flags = String::new();
    if i.possibly_stale {
        // An edit (observation #n) or a cited document chunk that changed (dn).
        flags.push_str(&match (i.stale_obs_id, i.stale_doc_id) {
            (Some(o), _) => format!("  [possibly stale: #{o}]"),
            (None, Some(d)) => format!("  [possibly stale: d{d} changed]"),
            _ => "  [possibly stale]".to_string(),
        });
    }
    if let Some(n) = i.superseded_by {
        flags.push_str(&format!("  [superseded by k{n}]"));
    }
    if i.scope == SCOPE_GLOBAL {
        flags.push_str("  [global]");
    }
    format!(
        "k{:<6} {:<10} {:<10} {}{flags}\n",
        i.id,
        i.status.as_str(),
        i.kind,
        one_line(&i.title, 120)
    )
}

/// Everything about an item, its evidence and its history.
fn full(i: &Item, audit: &[AuditEntry]) -> String {
    let now = nmem_proto::now_ms();
    let mut s = row(i);
    s.push_str(&format!(
        "  project {} · {} · {}{}\n",
        i.project,
        i.scope,
        i.memory_source,
        i.confidence
            .map(|c| format!(" · confidence {c:.2}"))
            .unwrap_or_default()
    ));
    if !i.summary.is_empty() {
        s.push_str(&format!("  {}\n", one_line(&i.summary, 400)));
    }
    s.push_str(&format!("  why: {}\n", one_line(&i.reason, 300)));
    if let Some(p) = &i.payload {
        s.push_str(&format!("  claim: {p}\n"));
    }
    for e in &i.evidence {
        s.push_str(&format!(
            "  evidence {}{}\n",
            e.source_id,
            e.file_path
                .as_deref()
                .map(|f| format!(" ({f})"))
                .unwrap_or_default()
        ));
    }
    for a in audit.iter().filter(|a| a.knowledge_id == i.id) {
        s.push_str(&format!(
            "  {} {}{}{}{}\n",
            nmem_proto::time::ago(now, a.at),
            a.action,
            match (&a.from_status, &a.to_status) {
                (Some(f), Some(t)) if f != t => format!(" {f} → {t}"),
                (None, Some(t)) => format!(" → {t}"),
                _ => String::new(),
            },
            a.other_id
                .map(|o| match a.action.as_str() {
                    // A note's memory row, or the edit that made the item possibly stale (a
                    // changed document chunk has none: the reason names it).
                    "created" | "stale" => format!(" (observation #{o})"),
                    _ => format!(" (k{o})"),
                })
                .unwrap_or_default(),
            a.reason
                .as_deref()
                .map(|r| format!(": {}", one_line(r, 200)))
                .unwrap_or_default()
        ));
    }
    s
}
