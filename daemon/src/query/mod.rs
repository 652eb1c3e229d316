//! Answering questions about the past: `search`, `get_observations`, `timeline`,
//! `recent_context`, and `save_memory`. Every query is a bounded, indexed read on a read-only
//! connection; only `save_memory` goes through the writer.

pub mod bounds;
mod by_id;
pub(crate) mod fts_query;
mod intent;
mod memory;
mod recent;
mod search;
mod timeline;

pub use fts_query::to_fts5;
pub use memory::save;
pub use recent::recent;
pub use search::{is_fts_syntax, search};
pub use timeline::{get, timeline};

use crate::app::App;
use nmem_proto::query::{Observation, When};
use rusqlite::Row;

/// Why a query could not be answered. Each message says what to change.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error("{0}")]
    BadRequest(String),
    #[error("the search query is not valid FTS5: {0}. Quote the words (\"like this\"), or drop the operators and nmem matches the words as written")]
    BadFts(String),
    #[error("{0}")]
    NotFound(String),
    /// The write repeats what is stored; nothing changed.
    #[error("{0}")]
    Conflict(String),
    /// An internal failure: the detail is logged, never sent (it may hold SQL or paths).
    #[error("{0}")]
    Read(String),
    /// The query spent its time budget and was interrupted.
    #[error("{0}")]
    TimedOut(String),
    /// The daemon is stopping, or the client left.
    #[error("{0}")]
    Unavailable(String),
}

impl From<crate::store::readers::ReadError> for QueryError {
    fn from(e: crate::store::readers::ReadError) -> Self {
        use crate::store::readers::ReadError;
        match e {
            ReadError::TimedOut(_) => QueryError::TimedOut(e.to_string()),
            ReadError::Stopping | ReadError::Cancelled => QueryError::Unavailable(e.to_string()),
            _ => QueryError::Read(e.to_string()),
        }
    }
}

impl From<crate::store::writer::WriteError> for QueryError {
    fn from(e: crate::store::writer::WriteError) -> Self {
        use crate::store::writer::WriteError;
        match e {
            WriteError::Invalid(m) => QueryError::BadRequest(m),
            WriteError::NotFound(m) => QueryError::NotFound(m),
            WriteError::Conflict(m) => QueryError::Conflict(m),
            WriteError::Storage(m) => QueryError::Read(m),
            WriteError::Closed => QueryError::Unavailable(e.to_string()),
        }
    }
}

/// The project a request means: a name, every project (`None`), or the project of its cwd.
pub fn project_of(
    app: &App,
    project: &Option<Option<String>>,
    cwd: &Option<String>,
) -> Option<String> {
    match project {
        Some(p) => p.clone().filter(|p| !p.is_empty()),
        None => cwd.as_deref().map(|c| app.ingest.projects.resolve(c).name),
    }
}

/// A limit, defaulted and capped.
pub fn clamp(v: Option<i64>, default: i64, max: i64) -> i64 {
    v.unwrap_or(default).clamp(1, max)
}

/// Unix milliseconds from epoch numbers (seconds when they look like seconds) or ISO text.
pub fn millis(w: &When, end_of_day: bool) -> Result<i64, QueryError> {
    match w {
        // Seconds when they look like seconds; either way bounded to what a date can name, so
        // no arithmetic overflows and the filter means something.
        When::Epoch(n) => {
            let ms = if n.unsigned_abs() < 100_000_000_000 {
                n * 1000
            } else {
                *n
            };
            if ms.unsigned_abs() > nmem_proto::time::MAX_MS as u64 {
                return Err(QueryError::BadRequest(format!(
                    "{n} is out of range for a date: use Unix seconds or milliseconds up to year 9999, or 2026-08-20"
                )));
            }
            Ok(ms)
        }
        When::Text(s) => {
            let s = s.trim();
            if let Ok(n) = s.parse::<i64>() {
                return millis(&When::Epoch(n), end_of_day);
            }
            nmem_proto::time::parse_date(s, end_of_day)
                .map_err(|e| QueryError::BadRequest(format!("{e}, or Unix seconds/milliseconds")))
        }
    }
}

/// The columns [`observation`] reads, in order.
pub const OBS_COLUMNS: &str =
    "id, timestamp, session_id, project, obs_type, source_event, tool_name, content, \
     file_path, rel_path, metadata, prompt_id, is_pinned, redacted";

pub fn observation(r: &Row) -> rusqlite::Result<Observation> {
    let metadata: Option<String> = r.get(10)?;
    Ok(Observation {
        id: r.get(0)?,
        timestamp: r.get(1)?,
        session_id: r.get(2)?,
        project: r.get(3)?,
        obs_type: r.get(4)?,
        source_event: r.get(5)?,
        tool_name: r.get(6)?,
        content: r.get(7)?,
        file_path: r.get(8)?,
        rel_path: r.get(9)?,
        metadata: metadata.and_then(|m| serde_json::from_str(&m).ok()),
        prompt_id: r.get(11)?,
        is_pinned: r.get::<_, i64>(12)? != 0,
        redacted: r.get::<_, i64>(13)? != 0,
    })
}

/// Past this many rows waiting, a search does not wait for the index (a rebuild after an
/// upgrade): it searches what is indexed, and says so.
const CATCH_UP_MAX: i64 = 50_000;

/// Let the writer index what it has committed, so a search sees every acknowledged event.
/// Returns the rows still waiting when there are too many to wait for.
pub async fn catch_up_index(app: &App) -> Result<Option<i64>, QueryError> {
    let pending = app
        .readers
        .run(|c| {
            c.query_row(
                "SELECT MAX(0, (SELECT COALESCE(MAX(id), 0) FROM observations) - observations_upto)
                      + MAX(0, (SELECT COALESCE(MAX(id), 0) FROM prompts) - prompts_upto) FROM fts_state",
                [],
                |r| r.get::<_, i64>(0),
            )
        })
        .await?;
    if pending > CATCH_UP_MAX {
        return Ok(Some(pending));
    }
    if pending > 0 {
        app.writer
            .exec(|c| Ok(crate::store::fts::index_all(c)?))
            .await?;
    }
    Ok(None)
}
