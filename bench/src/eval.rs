//! `nmem-bench --eval FILE`: score nmem's retrieval on the offline eval (`eval/nmem-eval.json`,
//! format `nmem-eval/1`, described in `eval/README.md`).
//!
//! Every history's hook events are replayed, in order and with their own times, into a fresh
//! nmemd through the socket API (as `nmem record` would hand them over); the id nmem gives each
//! stored event maps the dataset's gold event ids to observation and prompt ids. Then each
//! question's `search_query` is searched in its history's project with every `orderBy`, and the
//! question text itself with `relevance` (what a client that passes the question through gets).
//! Figures: recall@5 and @10 (the share of a question's gold items in the top k), MRR (1 / rank
//! of the first gold item, 0 when none is in the top 10), per question type; the share of
//! questions a new session's digest answers alone (an answer key appears in the SessionStart
//! output); search latency.

use nmem_proto::{client, wire};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(Deserialize)]
struct Dataset {
    format: String,
    histories: Vec<History>,
    questions: Vec<Question>,
}

#[derive(Deserialize)]
struct History {
    history_id: String,
    harness: String,
    project: String,
    cwd: String,
    sessions: Vec<Session>,
}

#[derive(Deserialize)]
struct Session {
    events: Vec<Event>,
}

#[derive(Deserialize)]
struct Event {
    event_id: String,
    at: String,
    #[serde(default)]
    harness: Option<String>,
    payload: Value,
}

#[derive(Deserialize)]
struct Question {
    question_id: String,
    history_id: String,
    question_type: String,
    question: String,
    search_query: String,
    answer_keys: Vec<String>,
    gold_event_ids: Vec<String>,
}

const ORDERS: [&str; 4] = ["relevance", "date_desc", "date_asc", "blended"];
const K: usize = 10;

/// Scores of one way of searching, summed over questions.
#[derive(Default, Clone)]
struct Score {
    n: usize,
    r5: f64,
    r10: f64,
    mrr: f64,
}

impl Score {
    fn add(&mut self, gold: &[(String, i64)], hits: &[(String, i64)]) {
        let found = |k: usize| {
            gold.iter()
                .filter(|g| hits.iter().take(k).any(|h| h == *g))
                .count() as f64
                / gold.len().max(1) as f64
        };
        self.n += 1;
        self.r5 += found(5);
        self.r10 += found(10);
        if let Some(rank) = hits.iter().take(K).position(|h| gold.contains(h)) {
            self.mrr += 1.0 / (rank + 1) as f64;
        }
    }

    fn cells(&self) -> [f64; 3] {
        let n = self.n.max(1) as f64;
        [self.r5 / n, self.r10 / n, self.mrr / n]
    }
}

pub fn run(
    bins: &Path,
    file: &Path,
    json_out: Option<&str>,
    start_daemon: impl Fn(&Path, &Path) -> anyhow::Result<crate::Daemon>,
) -> anyhow::Result<()> {
    let data: Dataset = serde_json::from_slice(&std::fs::read(file)?)
        .map_err(|e| anyhow::anyhow!("{}: not an nmem-eval/1 file: {e}", file.display()))?;
    anyhow::ensure!(
        data.format == "nmem-eval/1",
        "{}: format `{}`, expected nmem-eval/1",
        file.display(),
        data.format
    );
    let home = std::env::temp_dir().join(format!("nmem-eval-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(&home)?;
    let mut daemon = start_daemon(bins, &home)?;
    let socket = home.join("nmemd.sock");
    let result = score(&data, &socket, json_out);
    daemon.stop()?;
    let _ = std::fs::remove_dir_all(&home);
    result
}

fn score(data: &Dataset, socket: &Path, json_out: Option<&str>) -> anyhow::Result<()> {
    let mut conn = client::Conn::open(socket)?;
    // Replay: every event, in order, with its own time; remember what each became.
    let mut stored: HashMap<&str, (String, i64)> = HashMap::new();
    let mut last_at: HashMap<&str, i64> = HashMap::new();
    let mut events = 0;
    for h in &data.histories {
        for s in &h.sessions {
            for e in &s.events {
                let at = nmem_proto::time::parse_rfc3339_ms(&e.at)
                    .ok_or_else(|| anyhow::anyhow!("{}: bad time {}", e.event_id, e.at))?;
                let id = format!("eval-{}", e.event_id.replace(['.', '_'], "-"));
                let harness = e.harness.as_deref().unwrap_or(&h.harness);
                let r = conn.request(
                    "POST",
                    wire::PATH_EVENTS,
                    &[
                        (wire::H_EVENT_ID, &id),
                        (wire::H_RECEIVED_AT, &at.to_string()),
                        (wire::H_HARNESS, harness),
                    ],
                    e.payload.to_string().as_bytes(),
                    Duration::from_secs(30),
                )?;
                anyhow::ensure!(
                    r.status == 200,
                    "{}: HTTP {} {}",
                    e.event_id,
                    r.status,
                    String::from_utf8_lossy(&r.body)
                );
                let reply: wire::RecordReply = serde_json::from_slice(&r.body)?;
                if let (Some(kind), Some(id)) = (reply.kind, reply.id) {
                    stored.insert(&e.event_id, (kind, id));
                }
                events += 1;
                last_at.insert(&h.history_id, at);
            }
        }
    }
    let histories: HashMap<&str, &History> = data
        .histories
        .iter()
        .map(|h| (h.history_id.as_str(), h))
        .collect();
    println!(
        "nmem eval: {} histories, {} events replayed ({} stored with an id), {} questions",
        data.histories.len(),
        events,
        stored.len(),
        data.questions.len()
    );

    let mut latencies = Vec::new();
    let mut search =
        |query: &str, project: &str, order: &str| -> anyhow::Result<Vec<(String, i64)>> {
            let body = json!({"query": query, "project": project, "order_by": order, "limit": K});
            let t = Instant::now();
            let r = conn.request(
                "POST",
                wire::PATH_SEARCH,
                &[],
                body.to_string().as_bytes(),
                Duration::from_secs(30),
            )?;
            latencies.push(t.elapsed());
            if r.status != 200 {
                // A query FTS5 rejects scores zero, as a client would get an error.
                return Ok(Vec::new());
            }
            let hits: Vec<nmem_proto::query::SearchHit> = serde_json::from_slice(&r.body)?;
            Ok(hits.into_iter().map(|h| (h.kind, h.id)).collect())
        };
    // way of searching → question type → score
    let mut table: BTreeMap<String, BTreeMap<String, Score>> = BTreeMap::new();
    let mut unmapped = 0;
    let mut per_question = Vec::new();
    for q in &data.questions {
        let h = histories
            .get(q.history_id.as_str())
            .ok_or_else(|| anyhow::anyhow!("{}: no history {}", q.question_id, q.history_id))?;
        let gold: Vec<(String, i64)> = q
            .gold_event_ids
            .iter()
            .filter_map(|g| stored.get(g.as_str()).cloned())
            .collect();
        if gold.len() < q.gold_event_ids.len() {
            unmapped += 1;
        }
        let mut ranks = serde_json::Map::new();
        let ways = ORDERS
            .iter()
            .map(|o| (format!("search_query, {o}"), q.search_query.as_str(), *o))
            .chain([(
                "question text, relevance".to_string(),
                q.question.as_str(),
                "relevance",
            )]);
        for (way, query, order) in ways {
            let hits = search(query, &h.project, order)?;
            let rank = hits.iter().position(|x| gold.contains(x)).map(|r| r + 1);
            ranks.insert(way.clone(), json!(rank));
            for t in [q.question_type.as_str(), "all"] {
                table
                    .entry(way.clone())
                    .or_default()
                    .entry(t.to_string())
                    .or_default()
                    .add(&gold, &hits);
            }
        }
        per_question.push(json!({"question_id": q.question_id, "first_gold_rank": ranks}));
    }
    // The digest a new session of each history's project gets, after everything was recorded.
    let mut digest_hits: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut digests: HashMap<&str, String> = HashMap::new();
    for h in &data.histories {
        let at = last_at.get(h.history_id.as_str()).copied().unwrap_or(0) + 3_600_000;
        let body = json!({"session_id": format!("eval-digest-{}", h.history_id), "cwd": h.cwd,
            "hook_event_name": "SessionStart", "source": "startup"});
        let r = conn.request(
            "POST",
            wire::PATH_EVENTS,
            &[
                (wire::H_EVENT_ID, &format!("eval-digest-{}", h.history_id)),
                (wire::H_RECEIVED_AT, &at.to_string()),
                (wire::H_HARNESS, "claude-code"),
            ],
            body.to_string().as_bytes(),
            Duration::from_secs(30),
        )?;
        let reply: wire::RecordReply = serde_json::from_slice(&r.body)?;
        digests.insert(
            &h.history_id,
            reply.output.unwrap_or_default().to_lowercase(),
        );
    }
    for q in &data.questions {
        let d = digests
            .get(q.history_id.as_str())
            .map(String::as_str)
            .unwrap_or("");
        let yes = q
            .answer_keys
            .iter()
            .any(|k| !k.is_empty() && d.contains(&k.to_lowercase()));
        for t in [q.question_type.as_str(), "all"] {
            let e = digest_hits.entry(t.to_string()).or_default();
            e.0 += usize::from(yes);
            e.1 += 1;
        }
    }

    // The table.
    let types: Vec<String> = digest_hits.keys().cloned().collect();
    println!();
    print!("{:<28}", "question type (n)");
    for w in table.keys() {
        print!(" | {:^24}", w);
    }
    println!(" | digest");
    print!("{:<28}", "");
    for _ in table.keys() {
        print!(" | {:>7} {:>7} {:>7}", "R@5", "R@10", "MRR");
    }
    println!(" | share");
    let mut figures = serde_json::Map::new();
    for t in types
        .iter()
        .filter(|t| *t != "all")
        .chain(["all".to_string()].iter())
    {
        let n = digest_hits.get(t).map(|d| d.1).unwrap_or(0);
        print!("{:<28}", format!("{t} ({n})"));
        let mut row = serde_json::Map::new();
        for (w, by_type) in &table {
            let [r5, r10, mrr] = by_type.get(t).cloned().unwrap_or_default().cells();
            print!(" | {r5:>7.3} {r10:>7.3} {mrr:>7.3}");
            row.insert(
                w.clone(),
                json!({"recall_at_5": r5, "recall_at_10": r10, "mrr": mrr}),
            );
        }
        let (d, n) = digest_hits.get(t).copied().unwrap_or((0, 1));
        let share = d as f64 / n.max(1) as f64;
        println!(" | {share:>5.3}");
        row.insert("digest_share".into(), json!(share));
        figures.insert(t.clone(), Value::Object(row));
    }
    latencies.sort();
    let p = |q: f64| {
        latencies[((latencies.len() - 1) as f64 * q).round() as usize].as_secs_f64() * 1000.0
    };
    println!(
        "\nsearch latency over {} searches: p50 {:.3} ms, p95 {:.3} ms, max {:.3} ms",
        latencies.len(),
        p(0.5),
        p(0.95),
        p(1.0)
    );
    if unmapped > 0 {
        println!(
            "{unmapped} questions have a gold event nmem stored nothing for (counted as misses)"
        );
    }
    if let Some(path) = json_out {
        let out = json!({
            "dataset": data.format,
            "questions": data.questions.len(),
            "histories": data.histories.len(),
            "by_type": figures,
            "latency_ms": {"p50": p(0.5), "p95": p(0.95), "max": p(1.0)},
            "per_question": per_question,
        });
        std::fs::write(path, serde_json::to_string_pretty(&out)?)?;
        println!("wrote {path}");
    }
    Ok(())
}
