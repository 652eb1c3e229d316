//! `recent_context`: ADR-006's selection. The newest observations of the project, then other
//! projects' to fill up, one per file path (the newest), commands and errors always kept.
//! Actions only: session bookkeeping ([`nmem_proto::query::BOOKKEEPING`]: starts, turn ends,
//! compactions) is listed only when asked (`all`), so "what was done lately" is not a column of
//! "turn ended".

use super::{clamp, observation, project_of, QueryError, OBS_COLUMNS};
use crate::app::App;
use nmem_proto::query::{Observation, RecentRequest, BOOKKEEPING};
use std::collections::HashSet;

pub async fn recent(app: &App, req: RecentRequest) -> Result<Vec<Observation>, QueryError> {
    super::bounds::check_scope(&req.project, &req.cwd)?;
    super::bounds::check_format(&req.format)?;
    let project = project_of(app, &req.project, &req.cwd);
    let limit = clamp(req.limit, 30, 100) as usize;
    // The filter is built from constants, never from input.
    let only_actions = if req.all == Some(true) {
        String::new()
    } else {
        format!(
            "AND obs_type NOT IN ({})",
            nmem_proto::obs::sql_list(BOOKKEEPING)
        )
    };
    let rows = app
        .readers
        .run(move |c| {
            // Bounded scans of the (project, timestamp) and (timestamp) indexes; more than the
            // limit so dedup by path can still fill it.
            let scan = (limit * 4) as i64;
            let mut out: Vec<Observation> = Vec::with_capacity(limit);
            let mut paths = HashSet::new();
            let mut take = |rows: Vec<Observation>, out: &mut Vec<Observation>| {
                for o in rows {
                    if out.len() >= limit {
                        break;
                    }
                    if let Some(p) = &o.file_path {
                        if !paths.insert(p.clone()) {
                            continue;
                        }
                    }
                    out.push(o);
                }
            };
            match &project {
                Some(p) => {
                    let local: Vec<Observation> = c
                        .prepare_cached(&format!("SELECT {OBS_COLUMNS} FROM observations WHERE project = ?1 {only_actions} ORDER BY timestamp DESC, id DESC LIMIT ?2"))?
                        .query_map(rusqlite::params![p, scan], observation)?
                        .collect::<Result<_, _>>()?;
                    take(local, &mut out);
                    if out.len() < limit {
                        let other: Vec<Observation> = c
                            .prepare_cached(&format!("SELECT {OBS_COLUMNS} FROM observations WHERE project != ?1 {only_actions} ORDER BY timestamp DESC, id DESC LIMIT ?2"))?
                            .query_map(rusqlite::params![p, scan], observation)?
                            .collect::<Result<_, _>>()?;
                        take(other, &mut out);
                    }
                }
                None => {
                    let all: Vec<Observation> = c
                        .prepare_cached(&format!("SELECT {OBS_COLUMNS} FROM observations WHERE 1 {only_actions} ORDER BY timestamp DESC, id DESC LIMIT ?1"))?
                        .query_map([scan], observation)?
                        .collect::<Result<_, _>>()?;
                    take(all, &mut out);
                }
            }
            Ok(out)
        })
        .await?;
    Ok(rows)
}
