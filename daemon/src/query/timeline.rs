//! `get_observations` and `timeline`.

use super::{clamp, observation, search, QueryError, OBS_COLUMNS};
use crate::app::App;
use nmem_proto::query::{GetRequest, Observation, SearchRequest, Timeline, TimelineRequest};

pub async fn get(app: &App, req: GetRequest) -> Result<Vec<Observation>, QueryError> {
    if req.ids.is_empty() && req.doc_ids.is_empty() && req.knowledge_ids.is_empty() {
        return Err(QueryError::BadRequest("ids array must not be empty".into()));
    }
    if req.ids.len() > 50 || req.doc_ids.len() > 50 || req.knowledge_ids.len() > 50 {
        return Err(QueryError::BadRequest(format!(
            "at most 50 ids (and 50 doc_ids, 50 knowledge_ids) per request, got {}, {} and {}",
            req.ids.len(),
            req.doc_ids.len(),
            req.knowledge_ids.len()
        )));
    }
    let (ids, doc_ids, knowledge_ids) = (req.ids, req.doc_ids, req.knowledge_ids);
    let found = app
        .readers
        .run(move |c| {
            let sql = format!(
                "SELECT {OBS_COLUMNS} FROM observations WHERE id IN ({})",
                vec!["?"; ids.len()].join(", ")
            );
            let mut stmt = c.prepare(&sql)?;
            let rows: Vec<Observation> = stmt
                .query_map(rusqlite::params_from_iter(ids.iter()), observation)?
                .collect::<Result<_, _>>()?;
            // In the order asked; missing ids (swept by retention) are left out.
            let mut found: Vec<Observation> = ids
                .iter()
                .filter_map(|id| rows.iter().find(|o| o.id == *id).cloned())
                .collect();
            found.extend(crate::docs::get(c, &doc_ids)?);
            found.extend(crate::knowledge::get(c, &knowledge_ids)?);
            Ok(found)
        })
        .await?;
    Ok(found)
}

pub async fn timeline(app: &App, req: TimelineRequest) -> Result<Timeline, QueryError> {
    super::bounds::check_scope(&req.project, &req.cwd)?;
    super::bounds::check_format(&req.format)?;
    if let Some(q) = &req.query {
        super::bounds::check_len("query", q, super::fts_query::MAX_QUERY_BYTES)?;
    }
    if let Some(id) = req.doc_anchor {
        if req.anchor.is_some() || req.query.is_some() {
            return Err(QueryError::BadRequest(
                "give one anchor: `doc_anchor` (a document chunk), `anchor` (an observation) or \
                 `query`, not several"
                    .into(),
            ));
        }
        // A chunk has no session: its neighbours are the chunks before and after it in its
        // source, in the source's order.
        let (before, after) = (clamp(req.before, 5, 50), clamp(req.after, 5, 50));
        return app
            .readers
            .run(move |c| crate::docs::timeline(c, id, before, after))
            .await?
            .ok_or_else(|| {
                QueryError::NotFound(format!(
                    "no document chunk has id {id} (it may have changed on a re-ingest): search again"
                ))
            });
    }
    let anchor = match (
        req.anchor,
        req.query
            .as_deref()
            .map(str::trim)
            .filter(|q| !q.is_empty()),
    ) {
        (Some(id), _) => id,
        (None, Some(q)) => {
            let hits = search(
                app,
                SearchRequest {
                    query: q.to_string(),
                    project: req.project.clone(),
                    cwd: req.cwd.clone(),
                    include_prompts: Some(false),
                    // The anchor is an observation: chunks and items have no session.
                    include_docs: Some(false),
                    include_knowledge: Some(false),
                    limit: Some(1),
                    ..Default::default()
                },
            )
            .await?;
            hits.items.first().map(|h| h.id).ok_or_else(|| {
                QueryError::NotFound(format!(
                    "no observation matches `{q}`, so there is no anchor; try other words"
                ))
            })?
        }
        (None, None) => {
            return Err(QueryError::BadRequest(
                "give `anchor` (an observation id) or `query` (to anchor on its best match)".into(),
            ))
        }
    };
    let before = clamp(req.before, 5, 50);
    let after = clamp(req.after, 5, 50);
    app.readers
        .run(move |c| {
            let mut one = c.prepare_cached(&format!(
                "SELECT {OBS_COLUMNS} FROM observations WHERE id = ?1"
            ))?;
            let Some(anchor) = one.query_map([anchor], observation)?.next().transpose()? else {
                return Ok(Err(QueryError::NotFound(format!(
                    "anchor observation not found: no observation has id {anchor}"
                ))));
            };
            // Time orders a session (a spooled event keeps its time but gets a later id).
            let mut prev = c.prepare_cached(&format!(
                "SELECT {OBS_COLUMNS} FROM observations WHERE session_id = ?1
                   AND (timestamp < ?2 OR (timestamp = ?2 AND id < ?3))
                 ORDER BY timestamp DESC, id DESC LIMIT ?4"
            ))?;
            let mut b: Vec<Observation> = prev
                .query_map(
                    rusqlite::params![anchor.session_id, anchor.timestamp, anchor.id, before],
                    observation,
                )?
                .collect::<Result<_, _>>()?;
            b.reverse();
            let mut next = c.prepare_cached(&format!(
                "SELECT {OBS_COLUMNS} FROM observations WHERE session_id = ?1
                   AND (timestamp > ?2 OR (timestamp = ?2 AND id > ?3))
                 ORDER BY timestamp ASC, id ASC LIMIT ?4"
            ))?;
            let a: Vec<Observation> = next
                .query_map(
                    rusqlite::params![anchor.session_id, anchor.timestamp, anchor.id, after],
                    observation,
                )?
                .collect::<Result<_, _>>()?;
            Ok(Ok(Timeline {
                anchor,
                before: b,
                after: a,
            }))
        })
        .await?
}
