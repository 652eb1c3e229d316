//! `save_memory`: something the agent or the user wants remembered, stored as an observation of
//! type `memory` through the writer (never deduplicated, kept 730 days by default).

use super::{project_of, QueryError};
use crate::app::App;
use crate::ingest::{Obs, Prepared, Project, Record, SessionEffect};
use nmem_proto::harness::Event;
use nmem_proto::query::{SaveRequest, Saved};
use serde_json::json;

pub async fn save(app: &App, req: SaveRequest) -> Result<Saved, QueryError> {
    let text = req.text.trim();
    if text.is_empty() {
        return Err(QueryError::BadRequest(
            "`text` must not be empty: say what to remember".into(),
        ));
    }
    use super::bounds::{check_len, check_scope, MAX_MEMORY, MAX_TITLE};
    check_len("text", text, MAX_MEMORY)?;
    if let Some(t) = &req.title {
        check_len("title", t, MAX_TITLE)?;
    }
    check_scope(&req.project, &req.cwd)?;
    let project = match project_of(app, &req.project, &req.cwd) {
        Some(name) => match &req.cwd {
            Some(cwd) if app.ingest.projects.resolve(cwd).name == name => {
                app.ingest.projects.resolve(cwd)
            }
            _ => Project {
                root: String::new(),
                name,
                ..Project::default()
            },
        },
        None => {
            return Err(QueryError::BadRequest(
                "a memory belongs to a project: give `project` or `cwd`".into(),
            ))
        }
    };
    let mut metadata = serde_json::Map::new();
    if let Some(extra) = &req.metadata {
        let size = serde_json::to_string(extra).map(|s| s.len()).unwrap_or(0);
        if size > MAX_TITLE * 16 {
            return Err(QueryError::BadRequest(format!(
                "`metadata` is {size} bytes as JSON; at most {} are accepted",
                MAX_TITLE * 16
            )));
        }
        metadata.extend(extra.clone());
    }
    if let Some(t) = req
        .title
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        metadata.insert("title".into(), json!(t));
    } else {
        // Only the title given here names the memory.
        metadata.remove("title");
    }
    let content = match metadata.get("title").and_then(|t| t.as_str()) {
        Some(t) => format!("{t}\n{text}"),
        None => text.to_string(),
    };
    // Memories live in one session per project, so timelines of real sessions stay clean.
    let session: String = format!(
        "memory-{}",
        project
            .name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            })
            .collect::<String>()
    );
    let received_at = nmem_proto::now_ms();
    let mut prepared = Prepared {
        event_id: nmem_proto::client::new_event_id(),
        received_at,
        harness: "nmem",
        session_id: session,
        cwd: req.cwd.clone().unwrap_or_default(),
        project: project.clone(),
        event: Event::ToolUse,
        event_name: "save_memory".into(),
        record: Record::Observation(Obs {
            obs_type: nmem_proto::obs::ObsType::Memory.name(),
            content,
            metadata,
            tool_name: Some("save_memory".into()),
            ..Obs::default()
        }),
        effect: SessionEffect::None,
        thoughts: Vec::new(),
        transcript_offset: None,
        redactions: 0,
    };
    app.ingest.redactor.apply(&mut prepared);
    let applied = app.writer.submit(prepared).await?;
    let id = applied
        .id
        .ok_or_else(|| QueryError::Read("the memory was not stored".into()))?;
    Ok(Saved {
        id,
        project: project.name,
        created_at: Some(received_at),
    })
}
