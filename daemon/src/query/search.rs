//! `search`: words and meaning, fused.
//!
//! Each source ranks candidates on its own:
//! * **lexical**: FTS5 BM25 over observations and prompts (text, and identifier words weighted
//!   lower), in tiers: every word, then every meaningful word, then any word, the looser tiers
//!   run only when the stricter ones found too few ([`super::fts_query`]);
//! * **context**: the observations made under the prompts whose words matched (an edit's own
//!   text rarely says why it was made; its prompt does), so no prompt is copied into every
//!   observation's index;
//! * **semantic**: cosine similarity of embeddings ([`crate::semantic`]), when a model is
//!   installed.
//!
//! They are fused by weighted reciprocal rank (each source's result at rank r adds
//! `weight / (k + r)`), with results matching every word kept above those found by any other
//! source alone. Filters apply to every source. `order_by` then orders the fused candidates:
//! relevance (the fused score), blended (with recency), or by date. Every hit says how it was
//! found (`retrieval_sources`).

use super::fts_query::{self, LexPlan, ALL_WORDS, MAX_QUERY_BYTES, MEANINGFUL_WORDS, MOST_WORDS};
use super::intent::Kinds;
use super::{catch_up_index, clamp, millis, project_of, QueryError};
use crate::app::App;
use crate::config::SearchConfig;
use crate::semantic::{Availability, Bounded, Key, Nearest, Semantic};

/// The tier of the context source whose prompts the semantic source found.
const MEANING: &str = "meaning";
/// The tier of the context source whose sessions' titles the query's words match.
const TITLE: &str = "title";

/// The semantic source's rows and their similarity to the query.
type Near = Vec<(Key, f32)>;
use crate::store::bm25;
use crate::store::project_ids::{self, Bits, ProjectIds};
use nmem_proto::obs::ObsType;
use nmem_proto::query::{
    OrderBy, Origin, OriginFilter, QueryUse, RetrievalSource, SearchHit, SearchMode, SearchReply,
    SearchRequest,
};
use rusqlite::types::Value as Sql;
use rusqlite::{Connection, OptionalExtension};
use std::collections::HashMap;
use std::sync::Arc;

/// At most this many extra candidates for the blended order to re-rank.
const BLEND_POOL: i64 = 100;
/// How many of the newest matches are ranked, tried in turn until the filters leave enough
/// results: ranking every match of a word found in half the memory costs hundreds of
/// milliseconds at 1M, and a rare word has few matches anyway. With a project, these are the
/// project's own matches (found through the compact (id, project) index while the full-text
/// index is walked), so fewer are needed; BM25 costs some 15 µs per ranked match of a common word.
const CANDIDATES: [Option<i64>; 4] = [Some(300), Some(3_000), Some(30_000), None];
const PROJECT_CANDIDATES: [Option<i64>; 4] = [Some(100), Some(1_000), Some(10_000), None];
/// Candidates each source contributes to the fusion, at least.
const MIN_POOL: i64 = 20;
/// Prompts whose observations form the context source.
const CONTEXT_PROMPTS: usize = 5;
/// Observations taken under each of those prompts.
const CONTEXT_PER_PROMPT: i64 = 12;

pub async fn search(app: &App, req: SearchRequest) -> Result<SearchReply, QueryError> {
    let text = req.query.trim().to_string();
    if text.is_empty() {
        return Err(QueryError::BadRequest("`query` must not be empty".into()));
    }
    if text.len() > MAX_QUERY_BYTES {
        return Err(QueryError::BadRequest(format!(
            "the query is {} KB; at most {} KB is searched. Search for the error line, the names \
             or the words that matter instead of the whole text",
            text.len() / 1024,
            MAX_QUERY_BYTES / 1024
        )));
    }
    super::bounds::check_scope(&req.project, &req.cwd)?;
    super::bounds::check_format(&req.format)?;
    let types = req.obs_type.map(|t| t.into_vec()).unwrap_or_default();
    let files = req.files.map(|f| f.into_vec()).unwrap_or_default();
    use super::bounds::{check_list, MAX_FILES, MAX_NAME, MAX_PATH, MAX_TYPES};
    check_list("obs_type", &types, MAX_TYPES, MAX_NAME)?;
    check_list("files", &files, MAX_FILES, MAX_PATH)?;
    let lex = fts_query::plan(&text);
    // Documents and knowledge items are this device's: an origin filter for other devices only
    // leaves them out.
    let origin = req.origin.unwrap_or_default();
    let mut know = crate::knowledge::SearchScope::new(
        &types,
        !files.is_empty(),
        req.include_knowledge,
        req.knowledge_status,
    )?;
    know.wanted &= origin.keeps_local();
    // Documents come after the agent's own rows: asked with `obs_type: "doc"` (then alone),
    // left out with `include_docs: false` or a type filter without `doc`.
    let docs_wanted = req.include_docs.unwrap_or(true)
        && origin.keeps_local()
        && (types.is_empty() || types.iter().any(|t| t == "doc"));
    let docs_only = !types.is_empty() && types.iter().all(|t| t == "doc");
    let mut notes = Vec::new();
    let availability = app.semantic.availability();
    let mut mode = match (req.mode, &availability) {
        (Some(SearchMode::Semantic), Availability::Ready(_)) => SearchMode::Semantic,
        (Some(SearchMode::Semantic), other) => {
            return Err(QueryError::BadRequest(format!(
                "mode `semantic` needs an embedding model: {}",
                other.describe()
            )))
        }
        (Some(SearchMode::Lexical), _) => SearchMode::Lexical,
        (_, Availability::Ready(_)) => SearchMode::Hybrid,
        (asked, other) => {
            if asked.is_some() || !matches!(other, Availability::Disabled) {
                notes.push(format!("lexical only: {}", other.describe()));
            }
            SearchMode::Lexical
        }
    };
    if lex.dropped > 0 {
        notes.push(format!(
            "the query was long: its {} most useful terms were searched ({} left out)",
            lex.terms.len(),
            lex.dropped
        ));
    }
    if lex.strict.is_empty() && mode == SearchMode::Lexical {
        notes.push("the query has no word to search for".into());
    }
    let mut plan = Plan {
        lex: lex.clone(),
        mode,
        semantic: app.semantic.clone(),
        project_ids: app.readers.project_ids(),
        cfg: app.config.search.clone(),
        project: project_of(app, &req.project, &req.cwd),
        types,
        files,
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
        kinds: Kinds::of(&text),
        origin,
    };
    // Knowledge and work items are ranked apart ([`knowledge_hits`]) and merged into the fused
    // list by score: the observations are taken from the top to the page's end, so every page of
    // the merged list is exact.
    let page = (plan.limit, plan.offset);
    if know.wanted && !know.only {
        plan.limit += plan.offset;
        plan.offset = 0;
    }
    if let Some(left) = catch_up_index(app).await? {
        notes.push(format!(
            "the search index is being rebuilt ({left} rows to go): older rows may be missing \
             from lexical results until it is done"
        ));
    }
    // The query is embedded (in the child process) and its nearest vectors found on one reader
    // while the lexical sources run on another: hybrid search costs about the slower of the two
    // chains, not their sum.
    let plan = Arc::new(plan);
    let lexical = {
        let plan = plan.clone();
        app.readers.run(move |c| Ok(plan.lexical(c)))
    };
    let embedding = async {
        match mode {
            SearchMode::Lexical => None,
            _ => Some(match app.semantic.embed_query(text.clone()).await {
                Ok((name, v)) => {
                    let (plan, q) = (plan.clone(), v.clone());
                    let near = app
                        .readers
                        .run_vectors(move |c| Ok(plan.nearest(c, &q)))
                        .await;
                    Ok((name, v, near))
                }
                Err(e) => Err(e),
            }),
        }
    };
    let (lexical, embedding) = tokio::join!(lexical, embedding);
    let (lists, found) = lexical??;
    let mut model = None;
    let mut query_vec = None;
    match embedding {
        None => {}
        Some(Ok((name, v, near))) => {
            let (near, bounded) = near??;
            if let Some(b) = bounded {
                notes.push(bounded_note(b));
            }
            model = Some(name);
            query_vec = Some((v, near));
        }
        Some(Err(e)) if mode == SearchMode::Semantic => {
            return Err(QueryError::Read(format!(
                "the query could not be embedded: {e}"
            )))
        }
        Some(Err(e)) => {
            notes.push(format!(
                "lexical only this time: the query could not be embedded ({e})"
            ));
            mode = SearchMode::Lexical;
        }
    }
    let docs_plan = plan.clone();
    // Documents are found by meaning too (their vectors: migration 014).
    let doc_vec = query_vec.as_ref().map(|(v, _)| v.clone());
    let mut items = if docs_only || know.only {
        Vec::new()
    } else {
        app.readers
            .run(move |c| Ok(plan.finish(c, lists, found, query_vec)))
            .await??
    };
    if know.wanted {
        let (p, only) = (docs_plan.clone(), know.only);
        let (limit, offset) = if only { page } else { (page.0 + page.1, 0) };
        let hits = app
            .readers
            .run(move |c| knowledge_hits(&p, c, &know, limit, offset))
            .await?;
        items = if only {
            hits
        } else {
            merge_knowledge(items, hits, docs_plan.order, page)
        };
    }
    if docs_wanted {
        // They fill what the observations left of the first page (or, asked alone, pages).
        let room = page.0 - items.len() as i64;
        let offset = if docs_only { page.1 } else { 0 };
        if room > 0 && (docs_only || page.1 == 0) {
            let p = docs_plan;
            let docs = app
                .readers
                .run(move |c| {
                    let mut queries = Vec::new();
                    if p.mode != SearchMode::Semantic {
                        queries.push((fts_query::ALL_WORDS, p.lex.strict.clone()));
                        queries.extend(p.lex.fallbacks.iter().map(|t| (t.name, t.fts.clone())));
                    }
                    let near = match (&doc_vec, p.semantic.active()) {
                        (Some(q), Some(a)) if q.len() == a.dim => crate::docs::nearest(
                            c,
                            a.db_id,
                            p.project.as_deref(),
                            q,
                            (room + offset) as usize,
                        )?,
                        _ => Vec::new(),
                    };
                    let fusion = crate::docs::Fusion { cfg: &p.cfg };
                    crate::docs::search(
                        c,
                        &queries,
                        &near,
                        &fusion,
                        p.project.as_deref(),
                        room,
                        offset,
                    )
                })
                .await?;
            items.extend(docs);
        }
    }
    Ok(SearchReply {
        items,
        mode: mode.as_str().into(),
        query: QueryUse {
            syntax: if lex.syntax { "fts" } else { "words" }.into(),
            terms: lex.terms,
            dropped_terms: lex.dropped,
            model,
        },
        notes,
    })
}

/// Knowledge and work items matching the query (`knowledge::search`), each tier weighted as the
/// observations' lexical tiers are, so a hit's score is comparable with a fused observation's.
fn knowledge_hits(
    p: &Plan,
    c: &Connection,
    scope: &crate::knowledge::SearchScope,
    limit: i64,
    offset: i64,
) -> rusqlite::Result<Vec<SearchHit>> {
    let k = p.cfg.rrf_k.max(1.0);
    let bonus = if p.cfg.all_words_first {
        p.cfg.weight_semantic.max(p.cfg.weight_context) / (k + 1.0)
    } else {
        0.0
    };
    let tier = |name, fts: &String, weight, bonus| crate::knowledge::Tier {
        name,
        fts: fts.clone(),
        weight,
        rrf_k: k,
        bonus,
    };
    let mut tiers = vec![tier(
        ALL_WORDS,
        &p.lex.strict,
        p.cfg.weight_all_words,
        bonus,
    )];
    tiers.extend(p.lex.fallbacks.iter().map(|t| {
        let w = match t.name {
            MEANINGFUL_WORDS => p.cfg.weight_meaningful_words,
            fts_query::MOST_WORDS => p.cfg.weight_most_words,
            _ => p.cfg.weight_any_word,
        };
        tier(t.name, &t.fts, w, 0.0)
    }));
    // A note mirrors a saved memory, which the observations' search finds as itself.
    let notes = scope.only;
    crate::knowledge::search(
        c,
        scope,
        &tiers,
        p.project.as_deref(),
        (p.from, p.to),
        notes,
        limit,
        offset,
    )
}

/// The fused observations and the knowledge hits as one list, each list's order kept (a merge
/// by score, or by time for the date orders), then the page `(limit, offset)` of it.
fn merge_knowledge(
    obs: Vec<SearchHit>,
    knowledge: Vec<SearchHit>,
    order: OrderBy,
    (limit, offset): (i64, i64),
) -> Vec<SearchHit> {
    let first = |o: &SearchHit, k: &SearchHit| match order {
        OrderBy::DateDesc => k.timestamp > o.timestamp,
        OrderBy::DateAsc => k.timestamp < o.timestamp,
        OrderBy::Relevance | OrderBy::Blended => k.score > o.score,
    };
    let mut out = Vec::with_capacity(obs.len() + knowledge.len());
    let mut k = knowledge.into_iter().peekable();
    for o in obs {
        while let Some(h) = k.next_if(|h| first(&o, h)) {
            out.push(h);
        }
        out.push(o);
    }
    out.extend(k);
    out.into_iter()
        .skip(offset as usize)
        .take(limit as usize)
        .collect()
}

/// The FTS index signatures of one read transaction ([`bm25::signature`]).
#[derive(Default)]
struct Signatures {
    obs: Option<Vec<u8>>,
    prompts: Option<Vec<u8>>,
}

/// The reply's note when semantic search compared the query with the newest rows only.
fn bounded_note(b: Bounded) -> String {
    format!(
        "semantic search compared the query with the newest {} of {} rows (their codes fill \
         half of `[embed] cache_mb`); older rows were found by their words only (a larger \
         `[embed] cache_mb` holds more)",
        b.searched, b.total
    )
}

struct Plan {
    lex: LexPlan,
    mode: SearchMode,
    semantic: Arc<Semantic>,
    /// The project filter's row sets (`nmem_in_project`).
    project_ids: Arc<ProjectIds>,
    cfg: SearchConfig,
    project: Option<String>,
    types: Vec<String>,
    files: Vec<String>,
    from: Option<i64>,
    to: Option<i64>,
    order: OrderBy,
    limit: i64,
    offset: i64,
    prompts: bool,
    /// The kinds of fact the query's words ask for (`[search] question_kinds`).
    kinds: Kinds,
    /// Where the rows were captured (`sync_sources`; a row's `origin` is NULL on this device).
    origin: OriginFilter,
}

const PROMPT_TYPES: &[&str] = &["prompt", "user_prompt", "agent_reasoning", "reasoning"];

/// One source's ranked candidates.
struct Ranked {
    source: &'static str,
    tier: Option<&'static str>,
    weight: f64,
    keys: Vec<Key>,
    /// Semantic: each key's similarity; context: each key's prompt; lexical: each key's BM25
    /// score (negative, lower is better).
    similarity: Vec<f32>,
    prompt: Vec<i64>,
    bm25: Vec<f64>,
}

impl Ranked {
    fn new(source: &'static str, tier: Option<&'static str>, weight: f64) -> Ranked {
        Ranked {
            source,
            tier,
            weight,
            keys: Vec::new(),
            similarity: Vec::new(),
            prompt: Vec::new(),
            bm25: Vec::new(),
        }
    }
}

fn key(h: &SearchHit) -> Key {
    Key {
        prompt: h.kind == "prompt",
        id: h.id,
    }
}

impl Plan {
    fn pool(&self) -> i64 {
        (self.offset + self.limit).max(MIN_POOL)
    }

    /// The lexical sources (the tiers, then the context of the prompts they found), and the
    /// hits they fetched.
    #[allow(clippy::type_complexity)]
    fn lexical(
        &self,
        c: &Connection,
    ) -> Result<(Vec<Ranked>, HashMap<Key, SearchHit>), QueryError> {
        let pool = self.pool();
        let mut found: HashMap<Key, SearchHit> = HashMap::new();
        let mut lists: Vec<Ranked> = Vec::new();
        if self.mode != SearchMode::Semantic && !self.lex.strict.is_empty() {
            // Every tier reads one snapshot, and the index signatures are that snapshot's: the
            // phrase counts `nmem_bm25` remembers are used only for the index they were
            // counted on.
            let tx = c.unchecked_transaction().map_err(fts_error)?;
            let sigs = self.signatures(&tx)?;
            let tiers = std::iter::once((ALL_WORDS, &self.lex.strict, self.cfg.weight_all_words))
                .chain(self.lex.fallbacks.iter().map(|t| {
                    let w = match t.name {
                        fts_query::MEANINGFUL_WORDS => self.cfg.weight_meaningful_words,
                        fts_query::MOST_WORDS => self.cfg.weight_most_words,
                        _ => self.cfg.weight_any_word,
                    };
                    (t.name, &t.fts, w)
                }))
                // A tier weighted zero is turned off (and not run).
                .filter(|(_, _, w)| *w > 0.0);
            for (name, fts, weight) in tiers {
                if found.len() as i64 >= pool {
                    break;
                }
                let hits = self.run_query(&tx, fts, pool, &sigs)?;
                let mut list = Ranked::new("lexical", Some(name), weight);
                for h in hits {
                    list.keys.push(key(&h));
                    list.bm25.push(h.score);
                    found.entry(key(&h)).or_insert(h);
                }
                lists.push(list);
            }
            if self.cfg.context && self.wants_observations() {
                let ctx = self.context(&tx, &lists)?;
                if !ctx.keys.is_empty() {
                    lists.push(ctx);
                }
            }
        }
        Ok((lists, found))
    }

    /// The rows nearest to the query's vector (the semantic source's candidates), and whether
    /// only the newest rows were compared.
    #[allow(clippy::type_complexity)]
    fn nearest(&self, c: &Connection, q: &[f32]) -> Result<Nearest, QueryError> {
        // Oversample when filters will drop candidates.
        let filtered = !self.types.is_empty()
            || !self.files.is_empty()
            || self.from.is_some()
            || self.to.is_some()
            || self.origin != OriginFilter::Any;
        let pool = self.pool();
        let n = if filtered { pool * 4 } else { pool } as usize;
        self.semantic
            .nearest(c, self.project.as_deref(), q, n, self.prompts)
            .map_err(|e| QueryError::Read(e.to_string()))
    }

    /// The semantic source (when the query was embedded: its vector and nearest rows), the
    /// candidates only it or the context found, fused and ordered.
    fn finish(
        &self,
        c: &Connection,
        mut lists: Vec<Ranked>,
        mut found: HashMap<Key, SearchHit>,
        query_vec: Option<(Vec<f32>, Near)>,
    ) -> Result<Vec<SearchHit>, QueryError> {
        if let Some((q, mut near)) = query_vec {
            let q = &q[..];
            if self.cfg.semantic_all {
                // Every other candidate's similarity too, so the list ranks them all.
                let others: Vec<Key> = lists
                    .iter()
                    .flat_map(|l| l.keys.iter().copied())
                    .filter(|k| !near.iter().any(|(n, _)| n == k))
                    .collect::<std::collections::HashSet<Key>>()
                    .into_iter()
                    .collect();
                near.extend(
                    self.semantic
                        .similarity(c, q, others)
                        .map_err(|e| QueryError::Read(e.to_string()))?,
                );
                near.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.id.cmp(&a.0.id)));
            }
            let mut list = Ranked::new("semantic", None, self.cfg.weight_semantic);
            for (k, sim) in near {
                list.keys.push(k);
                list.similarity.push(sim);
            }
            let context =
                (self.cfg.context && self.cfg.semantic_context && self.wants_observations())
                    .then(|| self.semantic_context(c, &list))
                    .transpose()?;
            lists.push(list);
            lists.extend(context.filter(|l| !l.keys.is_empty()));
        }
        // Candidates the lexical queries did not fetch (context, semantic): read them, with the
        // filters applied; those the filters exclude leave every list.
        let missing: Vec<Key> = lists
            .iter()
            .flat_map(|l| l.keys.iter().copied())
            .filter(|k| !found.contains_key(k))
            .collect();
        for h in self.fetch(c, &missing)? {
            found.insert(key(&h), h);
        }
        if let Some(titles) = self.session_titles(c, &lists, &found)? {
            lists.push(titles);
        }
        let mut hits = fuse_for(&self.cfg, self.kinds, lists, found);
        match self.order {
            OrderBy::Relevance => {}
            OrderBy::Blended => blend(&mut hits),
            OrderBy::DateDesc => hits.sort_by_key(|h| std::cmp::Reverse((h.timestamp, h.id))),
            OrderBy::DateAsc => hits.sort_by_key(|h| (h.timestamp, h.id)),
        }
        Ok(hits
            .into_iter()
            .skip(self.offset as usize)
            .take(self.limit as usize)
            .collect())
    }

    /// The context of a session's title: the candidates whose session has a title (Claude
    /// Code's `session_title`, e.g. "Fix invoice cursor pagination") naming the query's
    /// meaningful words, most words named first, then in the order the other sources found
    /// them. It only votes for rows already found (a title covers a whole session: carrying it
    /// to every row of the session would flood the results), weighted like the prompts'
    /// context (`weight_session_title`).
    fn session_titles(
        &self,
        c: &Connection,
        lists: &[Ranked],
        found: &HashMap<Key, SearchHit>,
    ) -> Result<Option<Ranked>, QueryError> {
        if self.cfg.weight_session_title <= 0.0 || self.mode == SearchMode::Semantic {
            return Ok(None);
        }
        let wanted: Vec<String> = self
            .lex
            .terms
            .iter()
            .filter(|t| !fts_query::is_stopword(t))
            .flat_map(|t| title_words(t))
            .collect();
        if wanted.is_empty() {
            return Ok(None);
        }
        let mut title = c
            .prepare_cached(
                "SELECT title FROM sessions WHERE id = ?1 AND title IS NOT NULL AND title != ''",
            )
            .map_err(fts_error)?;
        // Each session's number of query words its title names (read once per session).
        let mut named: HashMap<String, usize> = HashMap::new();
        let mut order: Vec<(usize, usize, Key)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for k in lists.iter().flat_map(|l| l.keys.iter()) {
            let Some(h) = found.get(k).filter(|_| seen.insert(*k)) else {
                continue;
            };
            let n = match named.get(&h.session_id) {
                Some(n) => *n,
                None => {
                    let t: Option<String> = title
                        .query_row([&h.session_id], |r| r.get(0))
                        .optional()
                        .map_err(fts_error)?;
                    let words = t.map(|t| title_words(&t)).unwrap_or_default();
                    let n = wanted
                        .iter()
                        .filter(|w| words.iter().any(|t| same_word(w, t)))
                        .count();
                    named.insert(h.session_id.clone(), n);
                    n
                }
            };
            if n > 0 {
                order.push((n, order.len(), *k));
            }
        }
        if order.is_empty() {
            return Ok(None);
        }
        order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut list = Ranked::new("context", Some(TITLE), self.cfg.weight_session_title);
        list.keys = order.into_iter().map(|(_, _, k)| k).collect();
        Ok(Some(list))
    }

    fn wants_observations(&self) -> bool {
        self.types.is_empty()
            || self
                .types
                .iter()
                .any(|t| !PROMPT_TYPES.contains(&t.as_str()))
    }

    /// The observations made under the user prompts the lexical tiers found, in the order of
    /// those prompts.
    fn context(&self, c: &Connection, lists: &[Ranked]) -> Result<Ranked, QueryError> {
        let mut prompts: Vec<i64> = Vec::new();
        for list in lists {
            for k in &list.keys {
                if k.prompt && !prompts.contains(&k.id) && prompts.len() < CONTEXT_PROMPTS {
                    prompts.push(k.id);
                }
            }
        }
        self.under_prompts(
            c,
            prompts,
            Ranked::new("context", None, self.cfg.weight_context),
        )
    }

    /// The context of meaning: the observations made under the prompts the semantic source
    /// ranked highest, a closing summary (turn end) standing for its turn's prompt, in the
    /// order the semantic source found them.
    fn semantic_context(&self, c: &Connection, near: &Ranked) -> Result<Ranked, QueryError> {
        let mut prompts: Vec<i64> = Vec::new();
        let mut turn = c
            .prepare_cached("SELECT prompt_id, obs_type FROM observations WHERE id = ?1")
            .map_err(fts_error)?;
        for k in &near.keys {
            if prompts.len() >= CONTEXT_PROMPTS {
                break;
            }
            let prompt = if k.prompt {
                Some(k.id)
            } else {
                let row: Option<(Option<i64>, String)> = turn
                    .query_row([k.id], |r| Ok((r.get(0)?, r.get(1)?)))
                    .map(Some)
                    .or_else(|e| match e {
                        rusqlite::Error::QueryReturnedNoRows => Ok(None),
                        e => Err(e),
                    })
                    .map_err(fts_error)?;
                row.and_then(|(p, t)| {
                    ObsType::from_name(&t)
                        .is_some_and(ObsType::is_summary)
                        .then_some(p)
                        .flatten()
                })
            };
            if let Some(p) = prompt.filter(|p| !prompts.contains(p)) {
                prompts.push(p);
            }
        }
        let out = Ranked::new("context", Some(MEANING), self.cfg.weight_meaning_context);
        self.under_prompts(c, prompts, out)
    }

    /// The observations made under each of `prompts` (user prompts only), in turn, into `out`.
    fn under_prompts(
        &self,
        c: &Connection,
        prompts: Vec<i64>,
        mut out: Ranked,
    ) -> Result<Ranked, QueryError> {
        let mut stmt = c
            .prepare_cached(
                "SELECT o.id FROM prompts p JOIN observations o ON o.prompt_id = p.id
                 WHERE p.id = ?1 AND p.source = 'user' ORDER BY o.id LIMIT ?2",
            )
            .map_err(fts_error)?;
        for p in prompts {
            let ids = stmt
                .query_map(rusqlite::params![p, CONTEXT_PER_PROMPT], |r| {
                    r.get::<_, i64>(0)
                })
                .map_err(fts_error)?;
            for id in ids {
                out.keys.push(Key {
                    prompt: false,
                    id: id.map_err(fts_error)?,
                });
                out.prompt.push(p);
            }
        }
        Ok(out)
    }

    /// One FTS query's results, ordered, at most `pool` of each kind (more for blended).
    fn run_query(
        &self,
        c: &Connection,
        fts: &str,
        pool: i64,
        sigs: &Signatures,
    ) -> Result<Vec<SearchHit>, QueryError> {
        let want = match self.order {
            OrderBy::Blended => pool + pool.min(BLEND_POOL),
            _ => pool,
        };
        let obs_types: Vec<&String> = self
            .types
            .iter()
            .filter(|t| !PROMPT_TYPES.contains(&t.as_str()))
            .collect();
        let mut hits = Vec::new();
        if self.types.is_empty() || !obs_types.is_empty() {
            hits.extend(self.observations(c, fts, &obs_types, want, sigs)?);
        }
        if let Some(sources) = self.prompt_sources() {
            hits.extend(self.prompts(c, fts, &sources, want, sigs)?);
        }
        match self.order {
            OrderBy::Relevance | OrderBy::Blended => {
                hits.sort_by(|a, b| a.score.total_cmp(&b.score))
            }
            OrderBy::DateDesc => hits.sort_by_key(|h| std::cmp::Reverse((h.timestamp, h.id))),
            OrderBy::DateAsc => hits.sort_by_key(|h| (h.timestamp, h.id)),
        }
        Ok(hits)
    }

    /// The prompt sources the filters let through, or `None` when prompts are not searched.
    fn prompt_sources(&self) -> Option<Vec<&'static str>> {
        if !self.prompts || !self.files.is_empty() {
            return None;
        }
        if self.types.is_empty() {
            return Some(vec!["user", "agent"]);
        }
        let mut s: Vec<&'static str> = Vec::new();
        for t in &self.types {
            match t.as_str() {
                "prompt" => return Some(vec!["user", "agent"]),
                "user_prompt" => s.push("user"),
                "agent_reasoning" | "reasoning" => s.push("agent"),
                _ => {}
            }
        }
        (!s.is_empty()).then_some(s)
    }

    fn order_sql(&self, t: &str) -> String {
        match self.order {
            OrderBy::Relevance | OrderBy::Blended => "m.score".into(),
            OrderBy::DateDesc => format!("{t}.timestamp DESC, {t}.id DESC"),
            OrderBy::DateAsc => format!("{t}.timestamp ASC, {t}.id ASC"),
        }
    }

    /// The time and origin filters.
    fn common(&self, t: &str, sql: &mut String, args: &mut Vec<Sql>) {
        if let Some(f) = origin_sql(self.origin, t) {
            sql.push_str(&f);
        }
        if let Some(from) = self.from {
            sql.push_str(&format!(" AND {t}.timestamp >= ?"));
            args.push(Sql::Integer(from));
        }
        if let Some(to) = self.to {
            sql.push_str(&format!(" AND {t}.timestamp <= ?"));
            args.push(Sql::Integer(to));
        }
    }

    /// The type and file filters of observations.
    fn obs_filters(&self, types: &[&String], sql: &mut String, args: &mut Vec<Sql>) {
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
    }

    /// The newest matches are ranked first (FTS5 walks its index by rowid, newest first, and
    /// stops at the cap); more are ranked only when the filters leave too few (`CANDIDATES`).
    fn observations(
        &self,
        c: &Connection,
        fts: &str,
        types: &[&String],
        want: i64,
        sigs: &Signatures,
    ) -> Result<Vec<SearchHit>, QueryError> {
        let mut hits = Vec::new();
        let bits = self.project_bits(c, "observations")?;
        for cap in self.caps(want) {
            hits = self.observations_within(c, fts, types, want, cap, sigs, bits.as_ref())?;
            if hits.len() as i64 >= want {
                break;
            }
        }
        Ok(hits)
    }

    #[allow(clippy::too_many_arguments)]
    fn observations_within(
        &self,
        c: &Connection,
        fts: &str,
        types: &[&String],
        want: i64,
        cap: Option<i64>,
        sigs: &Signatures,
        bits: Option<&Arc<Bits>>,
    ) -> Result<Vec<SearchHit>, QueryError> {
        let mut args = Vec::new();
        let mut sql = self.matches(
            "observations",
            cap,
            &mut args,
            fts,
            sigs.obs.as_deref(),
            bits.is_some(),
        );
        sql.push_str(&format!(
            " SELECT {OBS_HIT}, m.score FROM m JOIN observations o ON o.id = m.id WHERE 1"
        ));
        self.common("o", &mut sql, &mut args);
        self.obs_filters(types, &mut sql, &mut args);
        sql.push_str(&format!(" ORDER BY {} LIMIT {want}", self.order_sql("o")));
        filtered(bits, || crate::store::sql_trace::explain(c, &sql, &args));
        let mut stmt = c.prepare_cached(&sql).map_err(fts_error)?;
        filtered(bits, || {
            let rows = stmt
                .query_map(rusqlite::params_from_iter(args), obs_hit)
                .map_err(fts_error)?;
            rows.collect::<Result<_, _>>().map_err(fts_error)
        })
    }

    /// The project's row set for `nmem_in_project`, when a project is searched and its set fits
    /// ([`project_ids`]); None: the project is checked by a join instead.
    fn project_bits(
        &self,
        c: &Connection,
        table: &'static str,
    ) -> Result<Option<Arc<Bits>>, QueryError> {
        match &self.project {
            Some(p) => self.project_ids.get(c, table, p).map_err(fts_error),
            None => Ok(None),
        }
    }

    /// How many candidates to rank, in turn (see `CANDIDATES`).
    fn caps(&self, want: i64) -> [Option<i64>; 4] {
        match self.project {
            Some(_) => PROJECT_CANDIDATES.map(|c| c.map(|n| n.max(want * 3))),
            None => CANDIDATES.map(|c| c.map(|n| n.max(want * 3))),
        }
    }

    /// The index signatures under which `nmem_bm25` may reuse phrase counts: only for plain
    /// text searched in both columns (a column filter changes what a phrase counts; FTS syntax
    /// may hold one), `None` otherwise (counted afresh, as `bm25()` does).
    fn signatures(&self, c: &Connection) -> Result<Signatures, QueryError> {
        if self.lex.syntax || !self.cfg.split_identifiers {
            return Ok(Signatures::default());
        }
        let sig = |t| bm25::signature(c, t).map(Some).map_err(fts_error);
        Ok(Signatures {
            obs: sig("observations_fts")?,
            prompts: sig("prompts_fts")?,
        })
    }

    /// The matches of the FTS table (of the project, when there is one), newest first (oldest
    /// first for `date_asc`), at most `cap`, with their BM25 rank (identifier words weighted
    /// lower than the text; `bm25()`'s score, its phrase counts remembered per index state
    /// when `sig` is given: [`bm25`]). Binds the signature, the query, then the project. With
    /// `in_set`, the project is checked by `nmem_in_project` on each match (the caller runs the
    /// statement under [`project_ids::with_filter`]: no B-tree probe per match walked), else by
    /// [`project_join`]: the same rows.
    fn matches(
        &self,
        table: &str,
        cap: Option<i64>,
        args: &mut Vec<Sql>,
        fts: &str,
        sig: Option<&[u8]>,
        in_set: bool,
    ) -> String {
        let dir = if self.order == OrderBy::DateAsc {
            "ASC"
        } else {
            "DESC"
        };
        let limit = cap.map(|n| format!(" LIMIT {n}")).unwrap_or_default();
        let w = self.cfg.weight_identifiers.clamp(0.0, 10.0);
        // Without identifier splitting (an ablation), match the text column only.
        let fts = if self.cfg.split_identifiers || self.lex.syntax {
            fts.to_string()
        } else {
            format!("{{content}} : ({fts})")
        };
        args.push(Sql::Blob(sig.map(<[u8]>::to_vec).unwrap_or_default()));
        args.push(Sql::Text(fts));
        match &self.project {
            Some(_) if in_set => format!(
                "WITH m AS (SELECT rowid AS id, nmem_bm25({table}_fts, 1.0, {w:.3}, ?) AS score FROM {table}_fts WHERE {table}_fts MATCH ? AND nmem_in_project(rowid) ORDER BY rowid {dir}{limit})"
            ),
            None => format!(
                "WITH m AS (SELECT rowid AS id, nmem_bm25({table}_fts, 1.0, {w:.3}, ?) AS score FROM {table}_fts WHERE {table}_fts MATCH ? ORDER BY rowid {dir}{limit})"
            ),
            Some(p) => {
                args.push(Sql::Text(p.clone()));
                let join = project_join(table);
                format!(
                    "WITH m AS (SELECT {table}_fts.rowid AS id, nmem_bm25({table}_fts, 1.0, {w:.3}, ?) AS score FROM {table}_fts \
                     {join} WHERE {table}_fts MATCH ? AND x.project = ? ORDER BY {table}_fts.rowid {dir}{limit})"
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
        sigs: &Signatures,
    ) -> Result<Vec<SearchHit>, QueryError> {
        let mut hits = Vec::new();
        let bits = self.project_bits(c, "prompts")?;
        for cap in self.caps(want) {
            hits = self.prompts_within(c, fts, sources, want, cap, sigs, bits.as_ref())?;
            if hits.len() as i64 >= want {
                break;
            }
        }
        Ok(hits)
    }

    #[allow(clippy::too_many_arguments)]
    fn prompts_within(
        &self,
        c: &Connection,
        fts: &str,
        sources: &[&str],
        want: i64,
        cap: Option<i64>,
        sigs: &Signatures,
        bits: Option<&Arc<Bits>>,
    ) -> Result<Vec<SearchHit>, QueryError> {
        let mut args = Vec::new();
        let mut sql = self.matches(
            "prompts",
            cap,
            &mut args,
            fts,
            sigs.prompts.as_deref(),
            bits.is_some(),
        );
        sql.push_str(&format!(
            " SELECT {PROMPT_HIT}, m.score FROM m JOIN prompts p ON p.id = m.id WHERE 1"
        ));
        self.common("p", &mut sql, &mut args);
        if sources.len() == 1 {
            sql.push_str(" AND p.source = ?");
            args.push(Sql::Text(sources[0].to_string()));
        }
        sql.push_str(&format!(" ORDER BY {} LIMIT {want}", self.order_sql("p")));
        filtered(bits, || crate::store::sql_trace::explain(c, &sql, &args));
        let mut stmt = c.prepare_cached(&sql).map_err(fts_error)?;
        filtered(bits, || {
            let rows = stmt
                .query_map(rusqlite::params_from_iter(args), prompt_hit)
                .map_err(fts_error)?;
            rows.collect::<Result<_, _>>().map_err(fts_error)
        })
    }

    /// Read candidates by id, with every filter applied (the project included), looked up by
    /// id whatever the filters ([`super::by_id`]).
    fn fetch(&self, c: &Connection, keys: &[Key]) -> Result<Vec<SearchHit>, QueryError> {
        let mut out = Vec::new();
        let obs: Vec<i64> = keys.iter().filter(|k| !k.prompt).map(|k| k.id).collect();
        let prompts: Vec<i64> = keys.iter().filter(|k| k.prompt).map(|k| k.id).collect();
        let obs_types: Vec<&String> = self
            .types
            .iter()
            .filter(|t| !PROMPT_TYPES.contains(&t.as_str()))
            .collect();
        let wants_obs = self.types.is_empty() || !obs_types.is_empty();
        for chunk in obs.chunks(500).filter(|_| wants_obs) {
            let mut args: Vec<Sql> = chunk.iter().map(|&i| Sql::Integer(i)).collect();
            let mut sql = super::by_id::select(OBS_HIT, "observations", "o", chunk.len());
            if let Some(p) = &self.project {
                sql.push_str(" AND o.project = ?");
                args.push(Sql::Text(p.clone()));
            }
            self.common("o", &mut sql, &mut args);
            self.obs_filters(&obs_types, &mut sql, &mut args);
            let mut stmt = c.prepare(&sql).map_err(fts_error)?;
            let rows = stmt
                .query_map(rusqlite::params_from_iter(args), obs_hit)
                .map_err(fts_error)?;
            for r in rows {
                out.push(r.map_err(fts_error)?);
            }
        }
        let sources = self.prompt_sources();
        for chunk in prompts.chunks(500).filter(|_| sources.is_some()) {
            let sources = sources.as_deref().unwrap_or_default();
            let mut args: Vec<Sql> = chunk.iter().map(|&i| Sql::Integer(i)).collect();
            let mut sql = super::by_id::select(PROMPT_HIT, "prompts", "p", chunk.len());
            if let Some(p) = &self.project {
                sql.push_str(" AND p.project = ?");
                args.push(Sql::Text(p.clone()));
            }
            self.common("p", &mut sql, &mut args);
            if sources.len() == 1 {
                sql.push_str(" AND p.source = ?");
                args.push(Sql::Text(sources[0].to_string()));
            }
            let mut stmt = c.prepare(&sql).map_err(fts_error)?;
            let rows = stmt
                .query_map(rusqlite::params_from_iter(args), prompt_hit)
                .map_err(fts_error)?;
            for r in rows {
                out.push(r.map_err(fts_error)?);
            }
        }
        Ok(out)
    }
}

/// The origin filter on the rows of alias `t` (`None` for any origin). `sync_sources` holds a
/// row per device pulled from: the subquery runs once per statement.
pub(crate) fn origin_sql(origin: OriginFilter, t: &str) -> Option<String> {
    match origin {
        OriginFilter::Any => None,
        OriginFilter::ThisDevice => Some(format!(" AND {t}.origin IS NULL")),
        OriginFilter::MyDevices => Some(format!(
            " AND ({t}.origin IS NULL OR {t}.origin IN \
             (SELECT id FROM sync_sources WHERE kind = 'my-devices'))"
        )),
        OriginFilter::Team => Some(format!(
            " AND {t}.origin IN (SELECT id FROM sync_sources WHERE kind = 'team')"
        )),
    }
}

/// Weighted reciprocal rank fusion. A result matching every word gets a bonus equal to the
/// best a semantic-only result can get, so it stays above every result found by meaning
/// alone; among themselves, results are ordered by the sum of their sources' contributions.
#[cfg(test)]
fn fuse(cfg: &SearchConfig, lists: Vec<Ranked>, found: HashMap<Key, SearchHit>) -> Vec<SearchHit> {
    fuse_for(cfg, Kinds::default(), lists, found)
}

/// [`fuse`] for a query asking for `kinds` of fact: rows of those kinds get the factor
/// `weight_kind` (with `question_kinds`).
fn fuse_for(
    cfg: &SearchConfig,
    kinds: Kinds,
    lists: Vec<Ranked>,
    mut found: HashMap<Key, SearchHit>,
) -> Vec<SearchHit> {
    let k = cfg.rrf_k.max(1.0);
    let bonus = if cfg.all_words_first {
        cfg.weight_semantic.max(cfg.weight_context) / (k + 1.0)
    } else {
        0.0
    };
    let strict_matched = lists.iter().any(|l| {
        l.source == "lexical" && matches!(l.tier, Some(ALL_WORDS | MEANINGFUL_WORDS)) && {
            l.keys.iter().any(|k| found.contains_key(k))
        }
    });
    let meaning_found = lists
        .iter()
        .any(|l| l.source == "semantic" && !l.keys.is_empty());
    let unmatched = !strict_matched && meaning_found;
    let loose_factor = if unmatched {
        cfg.weight_loose_unmatched.clamp(0.0, 1.0)
    } else {
        1.0
    };
    let mut scores: HashMap<Key, f64> = HashMap::new();
    let mut sources: HashMap<Key, Vec<RetrievalSource>> = HashMap::new();
    for list in &lists {
        // Meaning (and the context meaning found) and the strict tiers keep their weight; the
        // looser tiers and the context of words may not.
        let strict = matches!(list.tier, Some(ALL_WORDS | MEANINGFUL_WORDS | MEANING));
        let weight =
            if list.tier == Some(MEANING) && strict_matched && cfg.meaning_context_unmatched_only {
                continue;
            } else if list.source == "semantic" || strict {
                list.weight
            } else if list.tier == Some(MOST_WORDS) && unmatched {
                list.weight * cfg.weight_most_unmatched.clamp(0.0, 1.0)
            } else {
                list.weight * loose_factor
            };
        let scaled = Scaled::of(cfg, list, &found);
        let mut rank = 0u32;
        for (i, key) in list.keys.iter().enumerate() {
            if !found.contains_key(key) {
                continue;
            }
            let seen = sources.entry(*key).or_default();
            // A key appears once per source (the context lists each observation once).
            if seen.iter().any(|s| {
                s.source == list.source
                    && (s.tier.as_deref() == list.tier
                        // The tiers run strictest first: a row counts at the best that found it.
                        || (cfg.best_tier_only && list.source == "lexical"))
            }) {
                continue;
            }
            rank += 1;
            let mut contribution = weight * scaled.vote(i, k, rank);
            if list.tier == Some(ALL_WORDS) {
                contribution += bonus;
            }
            *scores.entry(*key).or_default() += contribution;
            seen.push(RetrievalSource {
                source: list.source.into(),
                rank,
                tier: list.tier.map(str::to_string),
                similarity: list.similarity.get(i).copied(),
                prompt_id: list.prompt.get(i).copied(),
            });
        }
    }
    let mut hits: Vec<SearchHit> = scores
        .into_iter()
        .filter_map(|(key, score)| {
            let mut h = found.remove(&key)?;
            h.score = score;
            h.retrieval_sources = sources.remove(&key).unwrap_or_default();
            Some(h)
        })
        .collect();
    let meaning_only = if strict_matched {
        cfg.weight_meaning_only.clamp(0.0, 1.0)
    } else {
        1.0
    };
    for h in &mut hits {
        h.score *= type_factor(cfg, h).clamp(0.0, 1.0);
        if h.retrieval_sources.iter().all(|s| {
            s.source == "semantic" || (s.source == "context" && s.tier.as_deref() == Some(MEANING))
        }) {
            h.score *= meaning_only;
        }
        if cfg.question_kinds && kinds.matches(h) {
            h.score *= cfg.weight_kind.clamp(0.0, 4.0);
        }
    }
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(b.timestamp.cmp(&a.timestamp))
            .then(b.id.cmp(&a.id))
    });
    if cfg.newest_edit_first {
        edits_in_order(&mut hits, true);
    } else if let Some(newest) = kinds.newest_first().filter(|_| cfg.question_order) {
        edits_in_order(&mut hits, newest);
    }
    if cfg.collapse_repeats {
        collapse_repeats(&mut hits);
    }
    hits
}

/// How a list's result votes: by its rank alone (reciprocal rank), or partly by its score
/// placed within the list's (`semantic_scale`, `lexical_scale`): similarity between the
/// list's lowest and highest, BM25 over the best.
struct Scaled<'a> {
    share: f64,
    /// Semantic: the lowest and highest similarity of the found keys.
    range: Option<(f32, f32)>,
    /// Lexical: the best (lowest) BM25 score of the found keys.
    best: Option<f64>,
    similarity: &'a [f32],
    bm25: &'a [f64],
}

impl<'a> Scaled<'a> {
    fn of(cfg: &SearchConfig, list: &'a Ranked, found: &HashMap<Key, SearchHit>) -> Scaled<'a> {
        let share = match list.source {
            "semantic" => cfg.semantic_scale,
            "lexical" => cfg.lexical_scale,
            _ => 0.0,
        };
        let share = if share.is_finite() {
            share.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let present = |i: &usize| found.contains_key(&list.keys[*i]);
        let range = (0..list.similarity.len().min(list.keys.len()))
            .filter(present)
            .map(|i| list.similarity[i])
            .filter(|s| s.is_finite())
            .fold(None, |r: Option<(f32, f32)>, s| {
                Some(r.map_or((s, s), |(lo, hi)| (lo.min(s), hi.max(s))))
            });
        let best = (0..list.bm25.len().min(list.keys.len()))
            .filter(present)
            .map(|i| list.bm25[i])
            .filter(|s| s.is_finite())
            .reduce(f64::min);
        Scaled {
            share,
            range,
            best,
            similarity: &list.similarity,
            bm25: &list.bm25,
        }
    }

    /// The vote (before the list's weight) of the list's `i`th key, the `rank`th found.
    fn vote(&self, i: usize, k: f64, rank: u32) -> f64 {
        let by_rank = 1.0 / (k + rank as f64);
        if self.share == 0.0 {
            return by_rank;
        }
        let place = if let (Some((lo, hi)), Some(s)) = (self.range, self.similarity.get(i)) {
            if hi > lo {
                f64::from((s - lo) / (hi - lo))
            } else {
                1.0
            }
        } else if let (Some(best), Some(s)) = (self.best, self.bm25.get(i)) {
            if best < 0.0 {
                s / best
            } else {
                1.0
            }
        } else {
            return by_rank;
        };
        let place = if place.is_finite() {
            place.clamp(0.0, 1.0)
        } else {
            1.0
        };
        (1.0 - self.share) * by_rank + self.share * place / (k + 1.0)
    }
}

/// The factor on a hit's fused score for what kind of row it is: rows that record looking,
/// planning, asking, retelling or a session's bounds name what a question names more often than
/// they hold its answer (each factor has its ablation in `eval/ablation/`).
fn type_factor(cfg: &SearchConfig, h: &SearchHit) -> f64 {
    if h.kind == "prompt" {
        return if h.source.as_deref() == Some("user") {
            cfg.weight_prompt
        } else {
            1.0
        };
    }
    match h.obs_type.as_deref().and_then(ObsType::from_name) {
        Some(t) if t.is_looking() => cfg.weight_looking,
        Some(ObsType::Command) if cfg.looking_commands && looks_only(&h.content_preview) => {
            cfg.weight_looking
        }
        Some(t) if t.is_planning() => cfg.weight_planning,
        Some(t) if t.is_summary() => cfg.weight_summary,
        Some(t) if t.is_session_marker() => cfg.weight_session,
        _ => 1.0,
    }
}

/// Whether a command line (a command row's opening) only reads: shows a file or part of it,
/// searches, lists, or shows the repository's history or state. Leading `cd DIR &&` steps are
/// skipped; a pipeline or chain counts by its first command.
fn looks_only(command: &str) -> bool {
    const READERS: &[&str] = &[
        "cat", "sed", "head", "tail", "less", "more", "grep", "rg", "ag", "ack", "find", "fd",
        "ls", "tree", "wc", "nl", "bat", "stat", "file",
    ];
    const GIT_READERS: &[&str] = &[
        "log", "show", "status", "diff", "blame", "branch", "shortlog", "grep", "ls-files",
    ];
    let line = command.lines().next().unwrap_or("");
    let mut words = line.split_whitespace().peekable();
    // `cd DIR &&` (or `;`) before the command itself.
    while words.peek() == Some(&"cd") {
        words.next();
        words.next();
        if matches!(words.peek(), Some(&"&&") | Some(&";")) {
            words.next();
        }
    }
    let Some(first) = words.next() else {
        return false;
    };
    let name = first.rsplit('/').next().unwrap_or(first);
    if name == "sed" {
        // `sed -i` edits in place; `sed -n` and plain `sed` print.
        return !line.split_whitespace().any(|w| w.starts_with("-i"));
    }
    if name == "git" {
        // Global options (`-C DIR`, `--no-pager`) before the subcommand.
        while let Some(w) = words.next() {
            match w {
                "-C" | "-c" => {
                    words.next();
                }
                w if w.starts_with('-') => {}
                sub => return GIT_READERS.contains(&sub),
            }
        }
        return false;
    }
    READERS.contains(&name)
}

/// The places held by changes of one file keep holding changes of that file, newest first (or
/// oldest first): a question about what a file says now is answered by the latest change, one
/// about what it said first by the earliest. Other results do not move.
fn edits_in_order(hits: &mut [SearchHit], newest: bool) {
    let mut by_file: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, h) in hits.iter().enumerate() {
        let change = h
            .obs_type
            .as_deref()
            .and_then(ObsType::from_name)
            .is_some_and(ObsType::is_file_change);
        if let (true, Some(path)) = (change, h.file_path.as_ref()) {
            by_file.entry(path.clone()).or_default().push(i);
        }
    }
    for places in by_file.into_values().filter(|p| p.len() > 1) {
        let mut group: Vec<SearchHit> = places.iter().map(|&i| hits[i].clone()).collect();
        group.sort_by(|a, b| b.timestamp.cmp(&a.timestamp).then(b.id.cmp(&a.id)));
        if !newest {
            group.reverse();
        }
        for (&i, mut h) in places.iter().zip(group) {
            // The place keeps its score, so scores still read best first.
            h.score = hits[i].score;
            hits[i] = h;
        }
    }
}

/// Stable: a hit whose type and opening text (the 120 characters of its preview) repeat an
/// earlier hit's goes after every distinct hit (in its order), so one command run three times
/// takes one place near the top, not three.
fn collapse_repeats(hits: &mut Vec<SearchHit>) {
    let mut seen = std::collections::HashSet::new();
    let (mut first, mut repeats) = (Vec::with_capacity(hits.len()), Vec::new());
    for h in hits.drain(..) {
        let opening = h.content_preview.trim().to_string();
        if seen.insert((h.obs_type.clone(), opening)) {
            first.push(h);
        } else {
            repeats.push(h);
        }
    }
    first.extend(repeats);
    *hits = first;
}

/// A row's origin as JSON (NULL on this device): a lookup in the small `sync_sources` by id,
/// only for the rows a search returns.
macro_rules! origin_of {
    ($t:literal) => {
        concat!(
            "(SELECT json_object('kind', s.kind, 'device', s.device, 'space', \
             CASE s.kind WHEN 'team' THEN s.space END) FROM sync_sources s WHERE s.id = ",
            $t,
            ".origin)"
        )
    };
}

const OBS_HIT: &str = concat!(
    "o.id, o.timestamp, o.obs_type, substr(o.content, 1, 120), o.file_path, o.session_id, o.project, ",
    origin_of!("o")
);
const PROMPT_HIT: &str = concat!(
    "p.id, p.timestamp, p.source, p.content, p.session_id, p.project, ",
    origin_of!("p")
);

/// A hit's origin from its JSON column (NULL: this device).
fn origin(r: &rusqlite::Row, i: usize) -> rusqlite::Result<Origin> {
    let json: Option<String> = r.get(i)?;
    Ok(json
        .and_then(|j| serde_json::from_str(&j).ok())
        .unwrap_or_default())
}

/// Run `f` with the project's row set as `nmem_in_project`'s, when there is one.
fn filtered<T>(bits: Option<&Arc<Bits>>, f: impl FnOnce() -> T) -> T {
    match bits {
        Some(b) => project_ids::with_filter(b.clone(), f),
        None => f(),
    }
}

fn obs_hit(r: &rusqlite::Row) -> rusqlite::Result<SearchHit> {
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
        origin: origin(r, 7)?,
        score: r.get(8)?,
        retrieval_sources: Vec::new(),
        doc: None,
        knowledge: None,
    })
}

fn prompt_hit(r: &rusqlite::Row) -> rusqlite::Result<SearchHit> {
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
        origin: origin(r, 6)?,
        score: r.get(7)?,
        retrieval_sources: Vec::new(),
        doc: None,
        knowledge: None,
    })
}

/// The fused score (70%) blended with recency (30%, halving every 7 days from the newest
/// candidate), in one pass over the candidates.
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
        let relevance = if hi > lo {
            (h.score - lo) / (hi - lo)
        } else {
            1.0
        };
        let recency = 0.5f64.powf((newest - h.timestamp) as f64 / HALF_LIFE_MS);
        h.score = 0.7 * relevance + 0.3 * recency;
    }
    hits.sort_by(|a, b| b.score.total_cmp(&a.score));
}

fn fts_error(e: rusqlite::Error) -> QueryError {
    if is_fts_syntax(&e) {
        QueryError::BadFts(e.to_string())
    } else {
        QueryError::Read(e.to_string())
    }
}

/// The words of a title or a query term, lowercased, identifiers split (`cursorPagination`,
/// `cursor_pagination` → cursor, pagination).
fn title_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .flat_map(|w| crate::store::terms::split_camel(w).unwrap_or_else(|| vec![w.to_lowercase()]))
        .collect()
}

/// Two words are the same word: equal, or forms of one (both of 5 letters or more, the shorter
/// without its last letters, up to 3 and keeping 5, begins the longer: `paginate` and
/// `pagination`, `invoice` and `invoices`; not `cursor` and `cursed`).
fn same_word(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if short.len() < 5 {
        return false;
    }
    let stem = short.len() - (short.len() - 5).min(3);
    long.starts_with(&short[..stem])
}

/// The join that gives each full-text match of `table` its project as `x.project`, where the
/// project's id set does not fit ([`project_ids::MAX_BYTES`]): observations by rowid (their
/// `(id, project)` index went in migration 022: every insert paid for it), prompts from that
/// compact index.
fn project_join(table: &str) -> String {
    let by = if table == "observations" {
        ""
    } else {
        "INDEXED BY idx_prompts_id_project "
    };
    format!("JOIN {table} x {by}ON x.id = {table}_fts.rowid")
}

/// Whether SQLite refused an FTS5 query's syntax (the user's to fix), not failed reading.
pub fn is_fts_syntax(e: &rusqlite::Error) -> bool {
    let msg = e.to_string();
    msg.contains("fts5")
        || msg.contains("syntax error")
        || msg.contains("malformed MATCH")
        || msg.contains("unterminated")
        // A column filter naming a column the table does not have (`terms:` on a table
        // without it): the query's to fix too.
        || msg.contains("no such column")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The project join of a search beyond the id sets runs on a database migrated to the
    /// latest schema, finds exactly the project's matches, and looks each one up by its key.
    #[test]
    fn the_project_join_finds_the_projects_matches_by_their_keys() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = crate::store::schema::open_writer(&dir.path().join("nmem.db")).unwrap();
        c.execute_batch(
            "INSERT INTO sessions (id, harness, project, cwd, started_at)
               VALUES ('s', 'claude-code', 'api', '/w/api', 1), ('t', 'claude-code', 'web', '/w/web', 1);",
        )
        .unwrap();
        for (i, (session, project)) in [("s", "api"), ("t", "web"), ("s", "api"), ("t", "web")]
            .into_iter()
            .enumerate()
        {
            c.execute(
                "INSERT INTO observations (session_id, timestamp, obs_type, source_event, content, project, harness)
                 VALUES (?1, ?2, 'command', 'PostToolUse', 'cargo test invoices', ?3, 'claude-code')",
                rusqlite::params![session, i as i64, project],
            )
            .unwrap();
            c.execute(
                "INSERT INTO prompts (session_id, timestamp, source, content, project, harness)
                 VALUES (?1, ?2, 'user', 'fix the invoices', ?3, 'claude-code')",
                rusqlite::params![session, i as i64, project],
            )
            .unwrap();
        }
        crate::store::fts::index_all(&mut c).unwrap();
        for table in ["observations", "prompts"] {
            let sql = format!(
                "SELECT {table}_fts.rowid FROM {table}_fts {} WHERE {table}_fts MATCH 'invoices' AND x.project = ?1 ORDER BY {table}_fts.rowid",
                project_join(table)
            );
            let ids: Vec<i64> = c
                .prepare(&sql)
                .unwrap()
                .query_map(["web"], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            assert_eq!(ids, [2, 4], "{table}");
            let plan: Vec<String> = c
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .unwrap()
                .query_map(["web"], |r| r.get(3))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            let lookup = plan.iter().find(|d| d.contains("SEARCH x")).unwrap();
            let key = if table == "observations" {
                "INTEGER PRIMARY KEY"
            } else {
                "idx_prompts_id_project"
            };
            assert!(lookup.contains(key), "{table}: {plan:?}");
        }
    }

    #[test]
    fn title_words_are_the_same_in_their_forms() {
        assert_eq!(
            title_words("Fix invoiceCursor pagination_v2"),
            ["fix", "invoice", "cursor", "pagination", "v2"]
        );
        assert!(same_word("paginate", "pagination"));
        assert!(same_word("invoices", "invoice"));
        assert!(same_word("fix", "fix"));
        assert!(!same_word("cursor", "cursed"));
        assert!(!same_word("fix", "fixes"), "short words must be equal");
        assert!(!same_word("élan", "élans"));
        assert!(same_word("überprüfung", "überprüfungen"));
    }

    fn hit(id: i64) -> SearchHit {
        SearchHit {
            kind: "observation".into(),
            id,
            timestamp: id,
            obs_type: Some("command".into()),
            content_preview: String::new(),
            content: None,
            source: None,
            file_path: None,
            session_id: "s".into(),
            project: "p".into(),
            score: 0.0,
            retrieval_sources: Vec::new(),
            doc: None,
            knowledge: None,
            origin: Origin::default(),
        }
    }

    fn key(id: i64) -> Key {
        Key { prompt: false, id }
    }

    /// Hits 1..=40 matched every word (in that order); semantic search ranks 100 first and has
    /// never seen the word matches.
    fn lists() -> (Vec<Ranked>, HashMap<Key, SearchHit>) {
        let mut lexical = Ranked::new("lexical", Some(ALL_WORDS), 1.0);
        lexical.keys = (1..=40).map(key).collect();
        let mut semantic = Ranked::new("semantic", None, 1.0);
        semantic.keys = vec![key(100), key(101)];
        semantic.similarity = vec![0.9, 0.8];
        let found = (1..=40)
            .chain([100, 101])
            .map(|i| (key(i), hit(i)))
            .collect();
        (vec![lexical, semantic], found)
    }

    #[test]
    fn a_repeated_result_goes_below_the_distinct_ones() {
        let mut hits: Vec<SearchHit> = (1..=5).map(hit).collect();
        for (h, text) in hits.iter_mut().zip([
            "cargo clippy",
            "cargo clippy",
            "cargo clippy\n→ error",
            "cargo clippy",
            "git push",
        ]) {
            h.content_preview = text.into();
        }
        hits[3].obs_type = Some("command_error".into());
        collapse_repeats(&mut hits);
        let ids: Vec<i64> = hits.iter().map(|h| h.id).collect();
        // 2 repeats 1 (same type, same text); 4 has the same text but is another type.
        assert_eq!(ids, [1, 3, 4, 5, 2]);
    }

    #[test]
    fn a_row_counts_once_at_its_strictest_tier_when_asked() {
        // 1 matched every word and also each looser tier; 2 only the looser ones, first.
        let mut all = Ranked::new("lexical", Some(ALL_WORDS), 1.0);
        all.keys = vec![key(1)];
        let mut most = Ranked::new("lexical", Some(fts_query::MOST_WORDS), 0.5);
        most.keys = vec![key(2), key(1)];
        let mut any = Ranked::new("lexical", Some(fts_query::ANY_WORD), 0.2);
        any.keys = vec![key(2), key(1)];
        let found: HashMap<Key, SearchHit> = [1, 2].map(|i| (key(i), hit(i))).into_iter().collect();
        let lists = || {
            let mut l = vec![
                Ranked::new("lexical", Some(ALL_WORDS), 1.0),
                Ranked::new("lexical", Some(fts_query::MOST_WORDS), 0.5),
                Ranked::new("lexical", Some(fts_query::ANY_WORD), 0.2),
            ];
            for (to, from) in l.iter_mut().zip([&all, &most, &any]) {
                to.keys = from.keys.clone();
            }
            l
        };
        let cfg = SearchConfig {
            best_tier_only: true,
            all_words_first: false,
            ..Default::default()
        };
        let hits = fuse(&cfg, lists(), found.clone());
        let one = hits.iter().find(|h| h.id == 1).unwrap();
        assert_eq!(one.retrieval_sources.len(), 1, "counted once");
        assert_eq!(one.retrieval_sources[0].tier.as_deref(), Some(ALL_WORDS));
        let two = hits.iter().find(|h| h.id == 2).unwrap();
        assert_eq!(
            two.retrieval_sources[0].tier.as_deref(),
            Some(fts_query::MOST_WORDS)
        );
        // Counted in every tier, 1 gets more than its strictest tier's share.
        let cfg = SearchConfig {
            all_words_first: false,
            ..Default::default()
        };
        let every = fuse(&cfg, lists(), found);
        let one_every = every.iter().find(|h| h.id == 1).unwrap();
        assert_eq!(one_every.retrieval_sources.len(), 3);
        assert!(one_every.score > one.score);
    }

    #[test]
    fn the_context_of_meaning_counts_and_may_be_kept_for_unmatched_questions() {
        let lists = |strict: bool| {
            let mut words = Ranked::new(
                "lexical",
                Some(if strict {
                    ALL_WORDS
                } else {
                    fts_query::ANY_WORD
                }),
                1.0,
            );
            words.keys = vec![key(1)];
            let mut semantic = Ranked::new("semantic", None, 1.0);
            semantic.keys = vec![key(3)];
            let mut meaning = Ranked::new("context", Some(MEANING), 0.25);
            meaning.keys = vec![key(2)];
            meaning.prompt = vec![7];
            vec![words, semantic, meaning]
        };
        let found = || -> HashMap<Key, SearchHit> {
            [1, 2, 3].map(|i| (key(i), hit(i))).into_iter().collect()
        };
        let cfg = SearchConfig::default();
        let hits = fuse(&cfg, lists(true), found());
        let two = hits.iter().find(|h| h.id == 2).expect("carried by meaning");
        let s = &two.retrieval_sources[0];
        assert_eq!(
            (s.source.as_str(), s.tier.as_deref(), s.prompt_id),
            ("context", Some(MEANING), Some(7))
        );
        // Kept for questions nothing matched every word of.
        let cfg = SearchConfig {
            meaning_context_unmatched_only: true,
            ..Default::default()
        };
        let hits = fuse(&cfg, lists(true), found());
        assert!(
            hits.iter().all(|h| h.id != 2),
            "a matched question: words decide"
        );
        let hits = fuse(&cfg, lists(false), found());
        assert!(
            hits.iter().any(|h| h.id == 2),
            "an unmatched one: meaning's context counts"
        );
    }

    #[test]
    fn prompts_summaries_and_session_markers_weigh_their_factor() {
        for (kind, obs_type, source, field) in [
            ("prompt", "user_prompt", Some("user"), "prompt"),
            ("observation", "turn_end", None, "summary"),
            ("observation", "subagent_end", None, "summary"),
            ("observation", "session_start", None, "session"),
            ("observation", "session_end", None, "session"),
        ] {
            let (mut l, mut f) = lists();
            l.truncate(1);
            let h = f.get_mut(&key(1)).unwrap();
            h.obs_type = Some(obs_type.into());
            h.kind = kind.into();
            h.source = source.map(str::to_string);
            // The prompt's key is a prompt key.
            if kind == "prompt" {
                let h = f.remove(&key(1)).unwrap();
                let k = Key {
                    prompt: true,
                    id: 1,
                };
                f.insert(k, h);
                l[0].keys[0] = k;
            }
            let mut cfg = SearchConfig::default();
            match field {
                "prompt" => cfg.weight_prompt = 0.5,
                "summary" => cfg.weight_summary = 0.5,
                _ => cfg.weight_session = 0.5,
            }
            let hits = fuse(&cfg, l, f);
            assert_eq!(hits[0].id, 2, "{obs_type} fell below the next match");
        }
        // An agent's reasoning is not a user prompt, and a plain action keeps its place.
        let (mut l, mut f) = lists();
        l.truncate(1);
        let h = f.get_mut(&key(1)).unwrap();
        h.obs_type = Some("file_edit".into());
        let cfg = SearchConfig {
            weight_prompt: 0.5,
            weight_summary: 0.5,
            weight_session: 0.5,
            ..Default::default()
        };
        assert_eq!(fuse(&cfg, l, f)[0].id, 1);
    }

    #[test]
    fn commands_that_only_read_are_looking() {
        for c in [
            "sed -n '1,80p' src/retry.ts",
            "cat pyproject.toml",
            "rg -n retry src/",
            "git log --oneline -5\n→ b93d0f7 Retry bank payouts",
            "git -C /repo --no-pager diff HEAD~1",
            "cd services/api && grep -rn timeout .",
            "/usr/bin/ls -la",
        ] {
            assert!(looks_only(c), "{c}");
        }
        for c in [
            "sed -i 's/3/5/' config.py",
            "git commit -m 'log things'",
            "git push origin main",
            "cargo test",
            "npm run lint",
            "cd api && npm test",
            "",
            "git",
            "catalog-sync --all",
        ] {
            assert!(!looks_only(c), "{c}");
        }
        // Counted as looking only when asked.
        let (mut l, mut f) = lists();
        l.truncate(1);
        f.get_mut(&key(1)).unwrap().content_preview = "git log --oneline -5".into();
        let cfg = SearchConfig {
            looking_commands: true,
            weight_looking: 0.5,
            ..Default::default()
        };
        assert_eq!(fuse(&cfg, l, f)[0].id, 2);
        let (mut l, mut f) = lists();
        l.truncate(1);
        f.get_mut(&key(1)).unwrap().content_preview = "git log --oneline -5".into();
        let cfg = SearchConfig {
            looking_commands: false,
            weight_looking: 0.5,
            ..Default::default()
        };
        assert_eq!(fuse(&cfg, l, f)[0].id, 1);
    }

    #[test]
    fn looking_counts_less_when_asked() {
        let (mut l, mut f) = lists();
        l.truncate(1);
        f.get_mut(&key(1)).unwrap().obs_type = Some("file_read".into());
        let cfg = SearchConfig {
            weight_looking: 0.5,
            ..Default::default()
        };
        let hits = fuse(&cfg, l, f);
        assert_eq!(hits[0].id, 2, "the read fell below the next match");
        assert!(hits.iter().position(|h| h.id == 1).unwrap() > 0);
        let (mut l, mut f) = lists();
        l.truncate(1);
        f.get_mut(&key(1)).unwrap().obs_type = Some("file_read".into());
        let cfg = SearchConfig {
            weight_looking: 1.0,
            ..Default::default()
        };
        assert_eq!(fuse(&cfg, l, f)[0].id, 1);
    }

    #[test]
    fn every_word_matches_stay_above_meaning_only_hits() {
        let (l, f) = lists();
        let hits = fuse(&SearchConfig::default(), l, f);
        let at = |id: i64| hits.iter().position(|h| h.id == id).unwrap();
        assert!(
            at(40) < at(100),
            "the 40th word match is above the best meaning match"
        );
        assert_eq!(hits[0].id, 1);
        let s = &hits[at(100)].retrieval_sources;
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].source.as_str(), s[0].rank), ("semantic", 1));
        assert_eq!(s[0].similarity, Some(0.9));
        // Without the bonus the best meaning match would pass the lower word matches.
        let (l, f) = lists();
        let cfg = SearchConfig {
            all_words_first: false,
            ..Default::default()
        };
        let hits = fuse(&cfg, l, f);
        let at = |id: i64| hits.iter().position(|h| h.id == id).unwrap();
        assert!(at(100) < at(40));
    }

    #[test]
    fn sources_add_up_and_looser_tiers_count_less() {
        let mut strict = Ranked::new("lexical", Some(ALL_WORDS), 1.0);
        strict.keys = vec![key(1)];
        let mut any = Ranked::new("lexical", Some(fts_query::ANY_WORD), 0.2);
        any.keys = vec![key(2), key(1), key(3)];
        let mut semantic = Ranked::new("semantic", None, 1.0);
        semantic.keys = vec![key(3), key(2)];
        semantic.similarity = vec![0.7, 0.6];
        let found = [1, 2, 3].map(|i| (key(i), hit(i))).into_iter().collect();
        let hits = fuse(&SearchConfig::default(), vec![strict, any, semantic], found);
        let ids: Vec<i64> = hits.iter().map(|h| h.id).collect();
        // 1 matched every word; 3 is first by meaning and third by any word; 2 the reverse,
        // and an any-word rank counts less than a semantic one.
        assert_eq!(ids, [1, 3, 2]);
        assert_eq!(hits[0].retrieval_sources.len(), 2);
        assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    }

    #[test]
    fn the_newest_change_of_a_file_takes_the_best_place_its_changes_hold() {
        let mut hits: Vec<SearchHit> = (1..=5).map(hit).collect();
        // Places 0, 2 and 4 are edits of a.rs made at times 1, 3 and 5; 1 is a command, 3 an
        // edit of another file.
        for (i, path) in [(0, "a.rs"), (2, "a.rs"), (3, "b.rs"), (4, "a.rs")] {
            hits[i].obs_type = Some("file_edit".into());
            hits[i].file_path = Some(path.into());
        }
        for (i, h) in hits.iter_mut().enumerate() {
            h.score = 10.0 - i as f64;
        }
        edits_in_order(&mut hits, true);
        let ids: Vec<i64> = hits.iter().map(|h| h.id).collect();
        assert_eq!(
            ids,
            [5, 2, 3, 4, 1],
            "a.rs's edits newest first in their places"
        );
        assert!(
            hits.windows(2).all(|w| w[0].score >= w[1].score),
            "places keep scores"
        );
        edits_in_order(&mut hits, false);
        let ids: Vec<i64> = hits.iter().map(|h| h.id).collect();
        assert_eq!(ids, [1, 2, 3, 4, 5], "oldest first in the same places");
    }

    #[test]
    fn a_question_about_the_first_state_puts_the_oldest_change_first() {
        // Edits 1 (old) and 2 (new) of a.rs matched every word, the newer ranked first.
        let lists = || {
            let mut all = Ranked::new("lexical", Some(ALL_WORDS), 1.0);
            all.keys = vec![key(2), key(1)];
            let mut found: HashMap<Key, SearchHit> =
                [1, 2].map(|i| (key(i), hit(i))).into_iter().collect();
            for h in found.values_mut() {
                h.obs_type = Some("file_edit".into());
                h.file_path = Some("a.rs".into());
            }
            (vec![all], found)
        };
        let ids = |hits: Vec<SearchHit>| hits.iter().map(|h| h.id).collect::<Vec<_>>();
        let cfg = SearchConfig {
            question_order: true,
            ..Default::default()
        };
        let first = Kinds::of("what budget did the cache get at first");
        let (l, f) = lists();
        assert_eq!(ids(fuse_for(&cfg, first, l, f)), [1, 2]);
        let off = SearchConfig {
            question_order: false,
            ..cfg.clone()
        };
        let (l, f) = lists();
        assert_eq!(ids(fuse_for(&off, first, l, f)), [2, 1]);
        let (l, f) = lists();
        assert_eq!(ids(fuse_for(&cfg, Kinds::default(), l, f)), [2, 1]);
        // "now" asks for the current state: the newest stays first even when ranked below.
        let now = Kinds::of("how big is the cache now");
        let (mut l, f) = lists();
        l[0].keys.reverse();
        assert_eq!(ids(fuse_for(&cfg, now, l, f)), [2, 1]);
    }

    #[test]
    fn loose_tiers_count_less_only_when_nothing_matched_every_word() {
        // 2 matched any word (first), 1 only by meaning (first): equal sums, and the tie goes to
        // the newer, 2.
        let lists = |strict: Vec<Key>| {
            let mut all = Ranked::new("lexical", Some(ALL_WORDS), 1.0);
            all.keys = strict;
            let mut any = Ranked::new("lexical", Some(fts_query::ANY_WORD), 1.0);
            any.keys = vec![key(2)];
            let mut semantic = Ranked::new("semantic", None, 1.0);
            semantic.keys = vec![key(1)];
            semantic.similarity = vec![0.7];
            let found: HashMap<Key, SearchHit> =
                [1, 2, 3].map(|i| (key(i), hit(i))).into_iter().collect();
            (vec![all, any, semantic], found)
        };
        let cfg = SearchConfig {
            weight_loose_unmatched: 0.5,
            all_words_first: false,
            ..Default::default()
        };
        let ids = |hits: Vec<SearchHit>| hits.iter().map(|h| h.id).collect::<Vec<_>>();
        // Nothing matched every word: meaning leads.
        let (l, f) = lists(vec![]);
        assert_eq!(ids(fuse(&cfg, l, f)), [1, 2]);
        let (l, f) = lists(vec![]);
        let off = SearchConfig {
            weight_loose_unmatched: 1.0,
            ..cfg.clone()
        };
        assert_eq!(ids(fuse(&off, l, f)), [2, 1], "the factor is what moved it");
        // Something matched every word: the loose tier keeps its weight.
        let (l, f) = lists(vec![key(3)]);
        assert_eq!(ids(fuse(&cfg, l, f)), [3, 2, 1]);
    }
    #[test]
    fn rows_of_the_kind_asked_for_come_first() {
        // 1 and 2 matched every word, 1 first; 2 is the failed command.
        let lists = || {
            let mut all = Ranked::new("lexical", Some(ALL_WORDS), 1.0);
            all.keys = vec![key(1), key(2)];
            let mut found: HashMap<Key, SearchHit> =
                [1, 2].map(|i| (key(i), hit(i))).into_iter().collect();
            found.get_mut(&key(2)).unwrap().obs_type = Some("command_error".into());
            (vec![all], found)
        };
        let ids = |hits: Vec<SearchHit>| hits.iter().map(|h| h.id).collect::<Vec<_>>();
        let cfg = SearchConfig::default();
        let failure = Kinds::of("what error did the build hit");
        let (l, f) = lists();
        assert_eq!(ids(fuse_for(&cfg, failure, l, f)), [2, 1]);
        // Off, or a query asking for another kind: the words' order.
        let off = SearchConfig {
            question_kinds: false,
            ..cfg.clone()
        };
        let (l, f) = lists();
        assert_eq!(ids(fuse_for(&off, failure, l, f)), [1, 2]);
        let (l, f) = lists();
        let change = Kinds::of("which files changed");
        assert_eq!(ids(fuse_for(&cfg, change, l, f)), [1, 2]);
        let (l, f) = lists();
        assert_eq!(ids(fuse_for(&cfg, Kinds::default(), l, f)), [1, 2]);
    }

    #[test]
    fn a_far_semantic_row_votes_by_its_similarity_when_asked() {
        // 1 matched every meaningful word (first); 20 rows found by meaning, 100 first
        // (similarity 0.6) down to 119, barely closer than the rest (0.3).
        let lists = || {
            let mut words = Ranked::new("lexical", Some(MEANINGFUL_WORDS), 0.5);
            words.keys = vec![key(1)];
            words.bm25 = vec![-4.0];
            let mut semantic = Ranked::new("semantic", None, 1.0);
            semantic.keys = (100..120).map(key).collect();
            semantic.similarity = (0..20).map(|i| 0.6 - 0.3 * i as f32 / 19.0).collect();
            let found: HashMap<Key, SearchHit> = std::iter::once(1)
                .chain(100..120)
                .map(|i| (key(i), hit(i)))
                .collect();
            (vec![words, semantic], found)
        };
        let at = |hits: &[SearchHit], id: i64| hits.iter().position(|h| h.id == id).unwrap();
        // By rank alone, the 20th nearest row (1 / 80) outvotes the word match (0.5 / 61).
        let (l, f) = lists();
        let hits = fuse(&SearchConfig::default(), l, f);
        assert!(at(&hits, 119) < at(&hits, 1));
        // By similarity, it votes nothing; the nearest still votes in full.
        let cfg = SearchConfig {
            semantic_scale: 1.0,
            ..Default::default()
        };
        let (l, f) = lists();
        let hits = fuse(&cfg, l, f);
        assert!(at(&hits, 1) < at(&hits, 119));
        assert_eq!(hits[0].id, 100);
        assert!((hits[0].score - 1.0 / 61.0).abs() < 1e-9);
        // Half and half lies between.
        let half = SearchConfig {
            semantic_scale: 0.5,
            ..Default::default()
        };
        let (l, f) = lists();
        let hits = fuse(&half, l, f);
        let s = hits[at(&hits, 119)].score;
        assert!((s - 0.5 / 80.0).abs() < 1e-9, "{s}");
    }

    #[test]
    fn a_far_better_word_match_keeps_its_lead_when_asked() {
        // 1 and 2 match every word, 1 far better (BM25 -10 against -2); meaning puts 2 first and
        // 1 third.
        let lists = || {
            let mut all = Ranked::new("lexical", Some(ALL_WORDS), 1.0);
            all.keys = vec![key(1), key(2)];
            all.bm25 = vec![-10.0, -2.0];
            let mut semantic = Ranked::new("semantic", None, 1.0);
            semantic.keys = vec![key(2), key(9), key(1)];
            semantic.similarity = vec![0.7, 0.6, 0.5];
            let found: HashMap<Key, SearchHit> =
                [1, 2, 9].map(|i| (key(i), hit(i))).into_iter().collect();
            (vec![all, semantic], found)
        };
        let ids = |hits: Vec<SearchHit>| hits.iter().map(|h| h.id).collect::<Vec<_>>();
        let (l, f) = lists();
        assert_eq!(ids(fuse(&SearchConfig::default(), l, f)), [2, 1, 9]);
        let cfg = SearchConfig {
            lexical_scale: 1.0,
            ..Default::default()
        };
        let (l, f) = lists();
        assert_eq!(ids(fuse(&cfg, l, f)), [1, 2, 9]);
        // Scores that are not numbers vote by rank, never poison the order.
        let (mut l, f) = lists();
        l[0].bm25 = vec![f64::NAN, f64::NAN];
        l[1].similarity = vec![f32::NAN; 3];
        let cfg = SearchConfig {
            lexical_scale: 1.0,
            semantic_scale: 1.0,
            ..Default::default()
        };
        let hits = fuse(&cfg, l, f);
        assert!(hits.iter().all(|h| h.score.is_finite()));
    }

    #[test]
    fn most_words_keeps_its_own_factor_when_nothing_matched_every_word() {
        // Nothing matched every word; 1 matched all but one (and any word), meaning found 5.
        let lists = || {
            let mut most = Ranked::new("lexical", Some(MOST_WORDS), 0.5);
            most.keys = vec![key(1)];
            let mut any = Ranked::new("lexical", Some(fts_query::ANY_WORD), 0.2);
            any.keys = vec![key(1)];
            let mut semantic = Ranked::new("semantic", None, 1.0);
            semantic.keys = vec![key(5)];
            semantic.similarity = vec![0.5];
            let found: HashMap<Key, SearchHit> =
                [1, 5].map(|i| (key(i), hit(i))).into_iter().collect();
            (vec![most, any, semantic], found)
        };
        let score = |cfg: &SearchConfig| {
            let (l, f) = lists();
            fuse(cfg, l, f).iter().find(|h| h.id == 1).unwrap().score
        };
        let any = 0.2 * 0.25 / 61.0;
        assert!((score(&SearchConfig::default()) - (0.5 * 0.25 / 61.0 + any)).abs() < 1e-12);
        let cfg = SearchConfig {
            weight_most_unmatched: 1.0,
            ..Default::default()
        };
        assert!((score(&cfg) - (0.5 / 61.0 + any)).abs() < 1e-12);
    }

    #[test]
    fn meaning_only_rows_count_less_when_the_words_matched_when_asked() {
        // 1 matched every word; 2 came under its prompt (context); 3 and 4 by meaning alone.
        let lists = |strict: Vec<Key>| {
            let mut all = Ranked::new("lexical", Some(ALL_WORDS), 1.0);
            all.keys = strict;
            let mut ctx = Ranked::new("context", None, 0.6);
            ctx.keys = vec![key(2)];
            let mut semantic = Ranked::new("semantic", None, 1.0);
            semantic.keys = vec![key(3), key(4)];
            semantic.similarity = vec![0.5, 0.4];
            let found: HashMap<Key, SearchHit> =
                [1, 2, 3, 4].map(|i| (key(i), hit(i))).into_iter().collect();
            (vec![all, ctx, semantic], found)
        };
        let ids = |hits: Vec<SearchHit>| hits.iter().map(|h| h.id).collect::<Vec<_>>();
        let (l, f) = lists(vec![key(1)]);
        assert_eq!(ids(fuse(&SearchConfig::default(), l, f)), [1, 3, 4, 2]);
        let cfg = SearchConfig {
            weight_meaning_only: 0.5,
            ..Default::default()
        };
        let (l, f) = lists(vec![key(1)]);
        assert_eq!(ids(fuse(&cfg, l, f)), [1, 2, 3, 4]);
        // Nothing matched every word: meaning keeps its weight.
        let (l, f) = lists(vec![]);
        assert_eq!(ids(fuse(&cfg, l, f)), [3, 4, 2]);
    }
}
