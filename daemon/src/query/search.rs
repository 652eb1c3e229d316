//! `search`: FTS5 BM25 over observations and prompts, with filters and four orders.

use super::fts_query::fallbacks;
use super::{catch_up_index, clamp, millis, project_of, to_fts5, QueryError};
use crate::app::App;
use nmem_proto::query::{OrderBy, SearchHit, SearchRequest};
use rusqlite::types::Value as Sql;
use rusqlite::Connection;

/// At most this many extra candidates for the blended order to re-rank.
const BLEND_POOL: i64 = 100;
/// How many of the newest matches are ranked, tried in turn until the filters leave enough
/// results: ranking every match of a word found in half the memory costs hundreds of
/// milliseconds at 1M, and a rare word has few matches anyway. With a project, these are the
/// project's own matches (found through the compact (id, project) index while the full-text
/// index is walked), so fewer are needed; BM25 costs some 15 µs per ranked match of a common word.
const CANDIDATES: [Option<i64>; 4] = [Some(300), Some(3_000), Some(30_000), None];
const PROJECT_CANDIDATES: [Option<i64>; 4] = [Some(100), Some(1_000), Some(10_000), None];

pub async fn search(app: &App, req: SearchRequest) -> Result<Vec<SearchHit>, QueryError> {
    let text = req.query.trim();
    if text.is_empty() {
        return Err(QueryError::BadRequest("`query` must not be empty".into()));
    }
    let plan = Plan {
        fts: to_fts5(text),
        fallbacks: fallbacks(text),
        project: project_of(app, &req.project, &req.cwd),
        types: req.obs_type.map(|t| t.into_vec()).unwrap_or_default(),
        files: req.files.map(|f| f.into_vec()).unwrap_or_default(),
        from: req
            .date_start
            .as_ref()
            .map(|w| millis(w, false))
            .transpose()?,
        to: req.date_end.as_ref().map(|w| millis(w, true)).transpose()?,
        order: req.order_by.unwrap_or_default(),
        limit: clamp(req.limit, 20, 100),
        offset: req.offset.unwrap_or(0).clamp(0, 10_000),
        prompts: req.include_prompts.unwrap_or(true),
    };
    catch_up_index(app).await?;
    app.readers.run(move |c| Ok(plan.run(c))).await?
}

struct Plan {
    fts: String,
    /// Looser queries for when `fts` finds too few: their results come after its own.
    fallbacks: Vec<String>,
    project: Option<String>,
    types: Vec<String>,
    files: Vec<String>,
    from: Option<i64>,
    to: Option<i64>,
    order: OrderBy,
    limit: i64,
    offset: i64,
    prompts: bool,
}

const PROMPT_TYPES: &[&str] = &["prompt", "user_prompt", "agent_reasoning", "reasoning"];

impl Plan {
    /// Results matching the query as given first; when they are too few, those of each looser
    /// query in turn (every meaningful word, then any of them), each tier in the asked order.
    fn run(&self, c: &Connection) -> Result<Vec<SearchHit>, QueryError> {
        let want = (self.offset + self.limit) as usize;
        let mut hits = self.run_query(c, &self.fts)?;
        for alt in &self.fallbacks {
            if hits.len() >= want {
                break;
            }
            let seen: std::collections::HashSet<(bool, i64)> =
                hits.iter().map(|h| (h.kind == "prompt", h.id)).collect();
            let more = self.run_query(c, alt)?;
            hits.extend(
                more.into_iter()
                    .filter(|h| !seen.contains(&(h.kind == "prompt", h.id))),
            );
        }
        Ok(hits
            .into_iter()
            .skip(self.offset as usize)
            .take(self.limit as usize)
            .collect())
    }

    /// One FTS query's results, ordered, at most offset + limit of each kind (more for blended).
    fn run_query(&self, c: &Connection, fts: &str) -> Result<Vec<SearchHit>, QueryError> {
        let want = match self.order {
            OrderBy::Blended => {
                // BM25 picks some more than asked, recency reorders them.
                let w = self.offset + self.limit;
                w + w.min(BLEND_POOL)
            }
            _ => self.offset + self.limit,
        };
        let obs_types: Vec<&String> = self
            .types
            .iter()
            .filter(|t| !PROMPT_TYPES.contains(&t.as_str()))
            .collect();
        let prompt_sources: Option<Vec<&str>> = if self.types.is_empty() {
            Some(vec!["user", "agent"])
        } else {
            let s: Vec<&str> = self
                .types
                .iter()
                .filter_map(|t| match t.as_str() {
                    "prompt" => Some("*"),
                    "user_prompt" => Some("user"),
                    "agent_reasoning" | "reasoning" => Some("agent"),
                    _ => None,
                })
                .collect();
            (!s.is_empty()).then(|| {
                if s.contains(&"*") {
                    vec!["user", "agent"]
                } else {
                    s
                }
            })
        };
        let mut hits = Vec::new();
        if self.types.is_empty() || !obs_types.is_empty() {
            hits.extend(self.observations(c, fts, &obs_types, want)?);
        }
        if let Some(sources) = prompt_sources.filter(|_| self.prompts && self.files.is_empty()) {
            hits.extend(self.prompts(c, fts, &sources, want)?);
        }
        match self.order {
            OrderBy::Relevance => hits.sort_by(|a, b| a.score.total_cmp(&b.score)),
            OrderBy::DateDesc => hits.sort_by_key(|h| std::cmp::Reverse((h.timestamp, h.id))),
            OrderBy::DateAsc => hits.sort_by_key(|h| (h.timestamp, h.id)),
            OrderBy::Blended => blend(&mut hits),
        }
        Ok(hits)
    }

    fn order_sql(&self, t: &str) -> String {
        match self.order {
            OrderBy::Relevance | OrderBy::Blended => "m.score".into(),
            OrderBy::DateDesc => format!("{t}.timestamp DESC, {t}.id DESC"),
            OrderBy::DateAsc => format!("{t}.timestamp ASC, {t}.id ASC"),
        }
    }

    /// The filters applied to the candidates (the project is applied while choosing them).
    fn common(&self, t: &str, sql: &mut String, args: &mut Vec<Sql>) {
        if let Some(from) = self.from {
            sql.push_str(&format!(" AND {t}.timestamp >= ?"));
            args.push(Sql::Integer(from));
        }
        if let Some(to) = self.to {
            sql.push_str(&format!(" AND {t}.timestamp <= ?"));
            args.push(Sql::Integer(to));
        }
    }

    /// The newest matches are ranked first (FTS5 walks its index by rowid, newest first, and
    /// stops at the cap); more are ranked only when the filters leave too few (`CANDIDATES`).
    fn observations(
        &self,
        c: &Connection,
        fts: &str,
        types: &[&String],
        want: i64,
    ) -> Result<Vec<SearchHit>, QueryError> {
        let mut hits = Vec::new();
        for cap in self.caps(want) {
            hits = self.observations_within(c, fts, types, want, cap)?;
            if hits.len() as i64 >= want {
                break;
            }
        }
        Ok(hits)
    }

    fn observations_within(
        &self,
        c: &Connection,
        fts: &str,
        types: &[&String],
        want: i64,
        cap: Option<i64>,
    ) -> Result<Vec<SearchHit>, QueryError> {
        let mut args = Vec::new();
        let mut sql = self.matches("observations", cap, &mut args, fts);
        sql.push_str(
            " SELECT o.id, o.timestamp, o.obs_type, substr(o.content, 1, 120), o.file_path, o.session_id, o.project, m.score
              FROM m JOIN observations o ON o.id = m.id WHERE 1",
        );
        self.common("o", &mut sql, &mut args);
        if !types.is_empty() {
            sql.push_str(&format!(
                " AND o.obs_type IN ({})",
                vec!["?"; types.len()].join(", ")
            ));
            args.extend(types.iter().map(|t| Sql::Text(t.to_string())));
        }
        if !self.files.is_empty() {
            let conds: Vec<&str> = self
                .files
                .iter()
                .map(|_| "(o.file_path = ? OR o.rel_path = ? OR o.file_path LIKE ?)")
                .collect();
            sql.push_str(&format!(" AND ({})", conds.join(" OR ")));
            for f in &self.files {
                args.push(Sql::Text(f.clone()));
                args.push(Sql::Text(f.trim_start_matches("./").to_string()));
                args.push(Sql::Text(format!("%/{}", f.trim_start_matches('/'))));
            }
        }
        sql.push_str(&format!(" ORDER BY {} LIMIT {want}", self.order_sql("o")));
        let mut stmt = c.prepare_cached(&sql).map_err(fts_error)?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(args), |r| {
                Ok(SearchHit {
                    kind: "observation".into(),
                    id: r.get(0)?,
                    timestamp: r.get(1)?,
                    obs_type: Some(r.get(2)?),
                    content_preview: r.get(3)?,
                    content: None,
                    source: None,
                    file_path: r.get(4)?,
                    session_id: r.get(5)?,
                    project: r.get(6)?,
                    score: r.get(7)?,
                })
            })
            .map_err(fts_error)?;
        rows.collect::<Result<_, _>>().map_err(fts_error)
    }

    /// How many candidates to rank, in turn (see `CANDIDATES`).
    fn caps(&self, want: i64) -> [Option<i64>; 4] {
        match self.project {
            Some(_) => PROJECT_CANDIDATES.map(|c| c.map(|n| n.max(want * 3))),
            None => CANDIDATES.map(|c| c.map(|n| n.max(want * 3))),
        }
    }

    /// The matches of the FTS table (of the project, when there is one), newest first (oldest
    /// first for `date_asc`), at most `cap`, with their BM25 rank. Binds the query, then the
    /// project.
    fn matches(&self, table: &str, cap: Option<i64>, args: &mut Vec<Sql>, fts: &str) -> String {
        let dir = if self.order == OrderBy::DateAsc {
            "ASC"
        } else {
            "DESC"
        };
        let limit = cap.map(|n| format!(" LIMIT {n}")).unwrap_or_default();
        args.push(Sql::Text(fts.to_string()));
        match &self.project {
            None => format!(
                "WITH m AS (SELECT rowid AS id, rank AS score FROM {table}_fts WHERE {table}_fts MATCH ? ORDER BY rowid {dir}{limit})"
            ),
            Some(p) => {
                args.push(Sql::Text(p.clone()));
                format!(
                    "WITH m AS (SELECT {table}_fts.rowid AS id, {table}_fts.rank AS score FROM {table}_fts \
                     JOIN {table} x INDEXED BY idx_{short}_id_project ON x.id = {table}_fts.rowid \
                     WHERE {table}_fts MATCH ? AND x.project = ? ORDER BY {table}_fts.rowid {dir}{limit})",
                    short = if table == "observations" { "obs" } else { "prompts" }
                )
            }
        }
    }

    fn prompts(
        &self,
        c: &Connection,
        fts: &str,
        sources: &[&str],
        want: i64,
    ) -> Result<Vec<SearchHit>, QueryError> {
        let mut hits = Vec::new();
        for cap in self.caps(want) {
            hits = self.prompts_within(c, fts, sources, want, cap)?;
            if hits.len() as i64 >= want {
                break;
            }
        }
        Ok(hits)
    }

    fn prompts_within(
        &self,
        c: &Connection,
        fts: &str,
        sources: &[&str],
        want: i64,
        cap: Option<i64>,
    ) -> Result<Vec<SearchHit>, QueryError> {
        let mut args = Vec::new();
        let mut sql = self.matches("prompts", cap, &mut args, fts);
        sql.push_str(
            " SELECT p.id, p.timestamp, p.source, p.content, p.session_id, p.project, m.score
              FROM m JOIN prompts p ON p.id = m.id WHERE 1",
        );
        self.common("p", &mut sql, &mut args);
        if sources.len() == 1 {
            sql.push_str(" AND p.source = ?");
            args.push(Sql::Text(sources[0].to_string()));
        }
        sql.push_str(&format!(" ORDER BY {} LIMIT {want}", self.order_sql("p")));
        let mut stmt = c.prepare_cached(&sql).map_err(fts_error)?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(args), |r| {
                let content: String = r.get(3)?;
                let source: String = r.get(2)?;
                Ok(SearchHit {
                    kind: "prompt".into(),
                    id: r.get(0)?,
                    timestamp: r.get(1)?,
                    obs_type: Some(if source == "user" {
                        "user_prompt".into()
                    } else {
                        "agent_reasoning".into()
                    }),
                    content_preview: content.chars().take(120).collect(),
                    content: Some(content),
                    source: Some(source),
                    file_path: None,
                    session_id: r.get(4)?,
                    project: r.get(5)?,
                    score: r.get(6)?,
                })
            })
            .map_err(fts_error)?;
        rows.collect::<Result<_, _>>().map_err(fts_error)
    }
}

/// BM25 (70%) blended with recency (30%, halving every 7 days from the newest candidate), in one
/// pass over the candidates.
fn blend(hits: &mut [SearchHit]) {
    if hits.is_empty() {
        return;
    }
    let (lo, hi) = hits.iter().fold((f64::MAX, f64::MIN), |(lo, hi), h| {
        (lo.min(h.score), hi.max(h.score))
    });
    let newest = hits.iter().map(|h| h.timestamp).max().unwrap_or(0);
    const HALF_LIFE_MS: f64 = 7.0 * 86_400_000.0;
    for h in hits.iter_mut() {
        // rank is negative BM25: lower is better.
        let relevance = if hi > lo {
            (hi - h.score) / (hi - lo)
        } else {
            1.0
        };
        let recency = 0.5f64.powf((newest - h.timestamp) as f64 / HALF_LIFE_MS);
        h.score = -(0.7 * relevance + 0.3 * recency);
    }
    hits.sort_by(|a, b| a.score.total_cmp(&b.score));
}

fn fts_error(e: rusqlite::Error) -> QueryError {
    let msg = e.to_string();
    if msg.contains("fts5")
        || msg.contains("syntax error")
        || msg.contains("malformed MATCH")
        || msg.contains("unterminated")
    {
        QueryError::BadFts(msg)
    } else {
        QueryError::Read(msg)
    }
}
