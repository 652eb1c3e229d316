//! Governed knowledge and work items end to end: `nmem knowledge …` and `nmem work …` against a
//! real daemon holding what the Claude Code fixtures recorded (project acme-api).

use nmem_e2e::*;
use serde_json::Value;
use std::process::Output;

struct Fixture {
    home: Home,
    daemon: Option<Daemon>,
    project_dir: std::path::PathBuf,
}

fn setup(tag: &str) -> Fixture {
    let home = Home::new(tag);
    let daemon = home.start();
    for f in [
        "session_start.startup.json",
        "user_prompt_submit.json",
        "post_tool_use.read.json",
    ] {
        assert!(home
            .record("claude-code", &fixture(&format!("hooks/claude-code/{f}")))
            .status
            .success());
    }
    let project_dir = home.dir.join("acme-api");
    std::fs::create_dir_all(&project_dir).unwrap();
    Fixture {
        home,
        daemon: Some(daemon),
        project_dir,
    }
}

impl Fixture {
    fn nmem(&self, args: &[&str]) -> Output {
        self.home
            .cmd("nmem")
            .args(args)
            .current_dir(&self.project_dir)
            .output()
            .unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.push("--json");
        let out = self.nmem(&a);
        assert!(
            out.status.success(),
            "nmem {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn count(&self, sql: &str) -> i64 {
        self.home.count(sql)
    }

    /// The SessionStart digest a new session of acme-api gets.
    fn digest(&self) -> String {
        let out = self.home.record(
            "claude-code",
            &fixture("hooks/claude-code/session_start.startup.json"),
        );
        assert!(out.status.success());
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        v["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn an_edit_of_a_cited_file_flags_the_fact_and_a_review_clears_it() {
    let f = setup("k-stale");
    let read: i64 = f.home.db().query_row(
        "SELECT id FROM observations WHERE obs_type = 'file_read' AND file_path LIKE '%/src/routes/invoices.ts'",
        [],
        |r| r.get(0),
    ).unwrap();
    let saved = f.json(&[
        "knowledge",
        "add",
        "--kind",
        "fact",
        "--title",
        "Invoice pagination skips the cursor row",
        "--reason",
        "the cursor row was listed twice across pages",
        "--evidence",
        &format!("obs:{read}"),
    ]);
    let id = saved["item"]["id"].as_i64().unwrap();
    assert_eq!(saved["item"]["status"], "active");
    assert_eq!(
        saved["item"]["evidence"][0]["file_path"],
        "/home/dev/projects/acme-api/src/routes/invoices.ts"
    );
    assert_eq!(
        f.json(&["knowledge", "list", "--stale"])["items"],
        Value::Array(vec![])
    );
    // The agent edits that file later: the fact may be out of date.
    assert!(f
        .home
        .record(
            "claude-code",
            &fixture("hooks/claude-code/post_tool_use.edit.json")
        )
        .status
        .success());
    let stale = f.json(&["knowledge", "list", "--stale"]);
    assert_eq!(stale["items"][0]["id"], id, "{stale}");
    assert_eq!(stale["items"][0]["possibly_stale"], true);
    let edit = stale["items"][0]["stale_obs_id"].as_i64().unwrap();
    assert_eq!(
        f.count(&format!(
            "SELECT COUNT(*) FROM observations WHERE id = {edit} AND obs_type = 'file_edit'"
        )),
        1
    );
    let shown = f.nmem(&["knowledge", "show", &format!("k{id}")]);
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(
        text.contains("possibly stale") && text.contains(&format!("stale (observation #{edit})")),
        "{text}"
    );
    // Reviewed and promoted: the flag is gone, the trail says why.
    let out = f.nmem(&[
        "knowledge",
        "promote",
        &id.to_string(),
        "--reason",
        "checked: still skips one row",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let item = &f.json(&["knowledge", "show", &id.to_string()])["items"][0];
    assert_eq!(item["possibly_stale"], false);
    let trail: Vec<String> = f.json(&["knowledge", "show", &id.to_string()])["audit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(trail, ["created", "stale", "promoted"]);
}

#[test]
fn governance_refuses_duplicates_contests_conflicts_and_keeps_candidates() {
    let f = setup("k-rules");
    let add = |value: &str, source: &str| {
        f.nmem(&[
            "knowledge",
            "add",
            "--kind",
            "fact",
            "--title",
            "API port",
            "--reason",
            "clients need it",
            "--subject",
            "api",
            "--predicate",
            "port",
            "--value",
            value,
            "--source",
            source,
            "--json",
        ])
    };
    let first = add("8080", "user_declared");
    assert!(first.status.success(), "{}", stderr(&first));
    let before = f.count("SELECT COUNT(*) FROM knowledge");
    // The same claim again: refused, exit 1, nothing written.
    let again = add("8080", "user_declared");
    assert_eq!(again.status.code(), Some(1));
    assert!(
        stderr(&again).contains("already says"),
        "{}",
        stderr(&again)
    );
    assert_eq!(f.count("SELECT COUNT(*) FROM knowledge"), before);
    // Another value: written, and both contested.
    let other: Value = serde_json::from_slice(&add("9090", "agent_inferred").stdout).unwrap();
    assert_eq!(other["item"]["status"], "contested");
    assert_eq!(
        f.count("SELECT COUNT(*) FROM knowledge WHERE status = 'contested' AND subject = 'api'"),
        2
    );
    // Supersede the wrong one: both kept, linked; the right one active.
    let (old, new) = (
        serde_json::from_slice::<Value>(&first.stdout).unwrap()["item"]["id"]
            .as_i64()
            .unwrap(),
        other["item"]["id"].as_i64().unwrap(),
    );
    let out = f.nmem(&[
        "knowledge",
        "supersede",
        &old.to_string(),
        &new.to_string(),
        "--reason",
        "the port moved in the compose file",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let both = f.json(&["knowledge", "show", &old.to_string(), &new.to_string()]);
    assert_eq!(both["items"][0]["status"], "superseded");
    assert_eq!(both["items"][0]["superseded_by"], new);
    assert_eq!(both["items"][1]["status"], "active");
    // An agent's unstructured claim starts as a candidate; a similar one is flagged, not refused.
    let c1 = f.json(&[
        "knowledge",
        "add",
        "--kind",
        "decision",
        "--title",
        "Deduplicate webhook events by event id",
        "--reason",
        "Stripe redelivers",
        "--source",
        "agent_inferred",
        "--status",
        "active",
    ]);
    assert_eq!(c1["item"]["status"], "candidate");
    let c2 = f.json(&[
        "knowledge",
        "add",
        "--kind",
        "decision",
        "--title",
        "Deduplicate the webhook events by their event id",
        "--reason",
        "Stripe redelivers",
    ]);
    assert_eq!(
        c2["possible_duplicates"][0]["object_id"], c1["item"]["id"],
        "{c2}"
    );
    // Bad input: a clear error, nothing written.
    let n = f.count("SELECT COUNT(*) FROM knowledge");
    for bad in [
        vec![
            "knowledge",
            "add",
            "--kind",
            "rumour",
            "--title",
            "t",
            "--reason",
            "r",
        ],
        vec![
            "knowledge",
            "add",
            "--kind",
            "fact",
            "--title",
            "t",
            "--reason",
            " ",
        ],
        vec![
            "knowledge",
            "add",
            "--kind",
            "fact",
            "--title",
            "t",
            "--reason",
            "r",
            "--evidence",
            "obs:999999",
        ],
        vec!["knowledge", "promote", "k999999", "--reason", "r"],
    ] {
        let out = f.nmem(&bad);
        assert_eq!(out.status.code(), Some(1), "{bad:?}: {}", stderr(&out));
        assert!(!stderr(&out).trim().is_empty());
    }
    assert_eq!(f.count("SELECT COUNT(*) FROM knowledge"), n);
}

#[test]
fn open_work_is_in_the_digest_memories_are_notes_and_a_purge_takes_both() {
    let mut f = setup("k-work");
    let w = f.json(&[
        "work",
        "add",
        "Nightly export drops the last page",
        "--kind",
        "bug",
        "--reason",
        "seen twice this week",
    ]);
    let id = w["item"]["id"].as_i64().unwrap();
    let digest = f.digest();
    assert!(
        digest.contains(&format!(
            "## Open work\n- bug k{id}: Nightly export drops the last page"
        )),
        "{digest}"
    );
    let out = f.nmem(&[
        "work",
        "done",
        &format!("k{id}"),
        "--reason",
        "fixed the off-by-one",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!f.digest().contains("Open work"));
    assert_eq!(f.json(&["work", "list"])["items"], Value::Array(vec![]));
    assert_eq!(
        f.json(&["work", "list", "--all"])["items"][0]["status"],
        "done"
    );
    // A saved memory is a note that can be governed like the rest.
    let saved = f.json(&[
        "save",
        "Rate limits are per org, never per user",
        "--title",
        "Rate limits",
    ]);
    let notes = f.json(&["knowledge", "list", "--kind", "note"]);
    assert_eq!(notes["items"][0]["obs_id"], saved["id"], "{notes}");
    assert_eq!(notes["items"][0]["title"], "Rate limits");
    // Kept across a restart.
    f.daemon.take().unwrap().stop();
    f.daemon = Some(f.home.start());
    assert_eq!(
        f.json(&["knowledge", "list", "--kind", "note"])["items"][0]["title"],
        "Rate limits"
    );
    // Exported with the rest, with their history.
    let out = f.home.cmd("nmemctl").arg("export").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |t: &str| lines.iter().filter(|l| l["type"] == t).count();
    assert_eq!(
        (of("knowledge"), of("knowledge_audit")),
        (2, 3),
        "bug created + done, note created"
    );
    // Purging the project takes its knowledge and work items.
    let out = f
        .home
        .cmd("nmemctl")
        .args(["purge", "--project", "acme-api", "--yes", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["by_reason"]["knowledge"], 2, "{report}");
    assert_eq!(f.count("SELECT COUNT(*) FROM knowledge"), 0);
    assert_eq!(f.count("SELECT COUNT(*) FROM knowledge_audit"), 0);
}

#[test]
fn a_note_is_not_swept_by_age_unless_memory_retention_is_configured() {
    let mut f = setup("k-retention");
    let saved = f.json(&[
        "save",
        "Invoices are archived for seven years",
        "--title",
        "Invoice archive",
    ]);
    let id = saved["id"].as_i64().unwrap();
    let ctl = |f: &Fixture, args: &[&str]| -> Value {
        let out = f.home.cmd("nmemctl").args(args).output().unwrap();
        assert!(out.status.success(), "nmemctl {args:?}: {}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // Everything is older than 0 days: the recorded observations go, the memory and its note stay.
    let r = ctl(
        &f,
        &["retention", "--max-age-days", "0", "--apply", "--json"],
    );
    assert!(r["deleted_observations"].as_i64().unwrap() > 0, "{r}");
    assert_eq!(
        f.count(&format!(
            "SELECT COUNT(*) FROM observations WHERE id = {id}"
        )),
        1,
        "{r}"
    );
    assert_eq!(
        f.count(&format!(
            "SELECT COUNT(*) FROM knowledge WHERE obs_id = {id}"
        )),
        1
    );
    // Nor by the per-project cap.
    let r = ctl(
        &f,
        &["retention", "--max-per-project", "0", "--apply", "--json"],
    );
    assert_eq!(
        f.count(&format!(
            "SELECT COUNT(*) FROM knowledge WHERE obs_id = {id}"
        )),
        1,
        "{r}"
    );
    // Configured: memories have an age, and the note goes with its memory.
    f.daemon.take().unwrap().stop();
    std::fs::write(
        &f.home.paths.config,
        "[retention]\nsweep = false\nmax_age_days = { memory = 0 }\n",
    )
    .unwrap();
    f.daemon = Some(f.home.start());
    let r = ctl(&f, &["retention", "--apply", "--json"]);
    assert_eq!(
        f.count(&format!(
            "SELECT COUNT(*) FROM observations WHERE id = {id}"
        )),
        0,
        "{r}"
    );
    assert_eq!(
        f.count(&format!(
            "SELECT COUNT(*) FROM knowledge WHERE obs_id = {id}"
        )),
        0
    );
}

/// The kinds and ids of a search's results, in order.
fn kinds_ids(v: &Value) -> Vec<(String, i64)> {
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["kind"].as_str().unwrap().to_string(),
                h["id"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn search_finds_knowledge_and_work_merged_by_rank_and_replaced_items_only_when_asked() {
    let f = setup("k-search");
    let add = |title: &str, summary: &str| -> i64 {
        f.json(&[
            "knowledge",
            "add",
            "--kind",
            "decision",
            "--title",
            title,
            "--summary",
            summary,
            "--reason",
            "agreed with the billing team",
        ])["item"]["id"]
            .as_i64()
            .unwrap()
    };
    let old = add(
        "Invoice numbers restart per tenant",
        "Each tenant's invoices are numbered from 1 in its own sequence",
    );
    let bug = f.json(&[
        "work",
        "add",
        "Quarterly ledger export drops the last page",
        "--kind",
        "bug",
        "--reason",
        "seen twice",
    ])["item"]["id"]
        .as_i64()
        .unwrap();
    // Found by its words, with its standing, and first: a curated item matching every word
    // ranks as the best observation matching every word would.
    let r = f.json(&["search", "invoice", "tenant", "sequence"]);
    assert_eq!(
        kinds_ids(&r).first(),
        Some(&("knowledge".to_string(), old)),
        "{r}"
    );
    let hit = &r["items"][0];
    assert_eq!(hit["knowledge"]["status"], "active");
    assert_eq!(hit["obs_type"], "decision");
    assert_eq!(hit["retrieval_sources"][0]["tier"], "all_words");
    assert!(
        kinds_ids(&f.json(&["search", "ledger", "export"])).contains(&("work".to_string(), bug))
    );
    // The observations are still there, after it: the fixture's read of invoices.ts.
    let r = f.json(&["search", "invoices"]);
    let k = kinds_ids(&r);
    assert!(k.iter().any(|(kind, _)| kind == "observation"), "{r}");
    assert!(k.contains(&("knowledge".to_string(), old)), "{r}");
    // Its id is passed on: `get --knowledge` gives the whole item.
    let got = f.json(&["get", "--knowledge", &format!("k{old}")]);
    assert_eq!(got[0]["obs_type"], "knowledge");
    assert_eq!(got[0]["metadata"]["id"], old);
    assert!(got[0]["content"]
        .as_str()
        .unwrap()
        .starts_with("Invoice numbers restart per tenant\n\n"));
    // The terminal says what it is.
    let out = f.nmem(&["search", "invoice", "tenant"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("k{old}")) && text.contains("[active]"),
        "{text}"
    );
    // Superseded, it leaves the results unless its status is asked for.
    let new = add(
        "Invoice numbers are global",
        "One sequence for every tenant since the ledger migration",
    );
    let out = f.nmem(&[
        "knowledge",
        "supersede",
        &old.to_string(),
        &new.to_string(),
        "--reason",
        "the ledger migration merged the sequences",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ids = kinds_ids(&f.json(&["search", "invoice", "numbers", "tenant"]));
    assert!(!ids.contains(&("knowledge".to_string(), old)), "{ids:?}");
    assert!(ids.contains(&("knowledge".to_string(), new)), "{ids:?}");
    // (The status applies to items only: the observations are still searched.)
    let ids: Vec<(String, i64)> =
        kinds_ids(&f.json(&["search", "invoice", "numbers", "--status", "superseded"]))
            .into_iter()
            .filter(|(k, _)| k == "knowledge")
            .collect();
    assert_eq!(ids, [("knowledge".to_string(), old)]);
    // Left out on request; alone on request; a bad status is refused.
    assert!(
        !kinds_ids(&f.json(&["search", "invoice", "--no-knowledge"]))
            .iter()
            .any(|(k, _)| k == "knowledge" || k == "work")
    );
    let only = kinds_ids(&f.json(&["search", "invoice", "ledger", "--type", "knowledge"]));
    assert!(
        !only.is_empty() && only.iter().all(|(k, _)| k == "knowledge"),
        "{only:?}"
    );
    let out = f.nmem(&["search", "invoice", "--status", "forgotten"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("not a status"), "{}", stderr(&out));
    // A saved memory is found once, as itself (its note is not repeated), and as a note when
    // knowledge alone is asked.
    let saved = f.json(&["save", "Payouts settle on the third business day"]);
    let r = f.json(&["search", "payouts", "settle"]);
    assert_eq!(
        kinds_ids(&r),
        [("observation".to_string(), saved["id"].as_i64().unwrap())],
        "{r}"
    );
    let r = f.json(&["search", "payouts", "settle", "--type", "note"]);
    assert_eq!(r["items"][0]["kind"], "knowledge", "{r}");
    // A purge takes them from the index too.
    let out = f
        .home
        .cmd("nmemctl")
        .args(["purge", "--project", "acme-api", "--yes", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        f.count("SELECT COUNT(*) FROM knowledge_fts WHERE knowledge_fts MATCH 'invoice'"),
        0
    );
}

#[test]
fn a_cited_document_chunk_is_checked_on_write_and_flags_the_item_when_it_changes() {
    let f = setup("k-doc");
    let doc = f.project_dir.join("RETRIES.md");
    let write = |a: &str, b: &str| {
        std::fs::write(
            &doc,
            format!("# Retries\n\n## Refunds\n\n{a}\n\n## Payouts\n\n{b}\n"),
        )
        .unwrap()
    };
    write(
        "Refund retries back off with quince jitter, five times at most.",
        "Payout retries stop after one day.",
    );
    let ingest = |f: &Fixture| {
        let out = f.nmem(&["ingest", doc.to_str().unwrap(), "--json"]);
        assert!(out.status.success(), "{}", stderr(&out));
    };
    ingest(&f);
    let hit = &f.json(&["search", "quince", "jitter", "--type", "doc"])["items"][0];
    let (chunk, source) = (
        hit["id"].as_i64().unwrap(),
        hit["doc"]["source_id"].as_i64().unwrap(),
    );
    let hash: String = f
        .home
        .db()
        .query_row("SELECT hash FROM doc_chunks WHERE id = ?1", [chunk], |r| {
            r.get(0)
        })
        .unwrap();
    let add = |evidence: &str| {
        f.nmem(&[
            "knowledge",
            "add",
            "--kind",
            "fact",
            "--title",
            "Refund retries use quince jitter",
            "--reason",
            "the retry document says so",
            "--evidence",
            evidence,
            "--json",
        ])
    };
    // A wrong hash, or a chunk that does not exist, is refused and writes nothing.
    for (bad, says) in [
        (format!("d{chunk}#deadbeef00"), "does not match"),
        ("d999999".to_string(), "no chunk 999999"),
    ] {
        let out = add(&bad);
        assert!(!out.status.success(), "{bad}");
        assert!(stderr(&out).contains(says), "{bad}: {}", stderr(&out));
    }
    assert_eq!(f.count("SELECT COUNT(*) FROM knowledge"), 0);
    let out = add(&format!("d{chunk}#{}", &hash[..12]));
    assert!(out.status.success(), "{}", stderr(&out));
    let item: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = item["item"]["id"].as_i64().unwrap();
    let ev = &item["item"]["evidence"][0];
    assert_eq!(ev["source_id"], format!("src:{source}"));
    assert_eq!(ev["segment_id"], chunk.to_string());
    assert_eq!(ev["hash"], hash.as_str());
    assert_eq!(ev["file_path"], doc.to_str().unwrap());
    // Another section changes: this chunk keeps its text and id, the item stays current.
    write(
        "Refund retries back off with quince jitter, five times at most.",
        "Payout retries stop after two days.",
    );
    ingest(&f);
    assert_eq!(
        f.json(&["knowledge", "list", "--stale"])["items"],
        Value::Array(vec![])
    );
    // The cited section changes: the re-ingest replaces the chunk and flags the item, in the
    // same transaction, with the chunk that changed.
    write(
        "Refund retries back off with damson jitter, three times at most.",
        "Payout retries stop after two days.",
    );
    ingest(&f);
    let stale = f.json(&["knowledge", "list", "--stale"]);
    assert_eq!(stale["items"][0]["id"], id, "{stale}");
    assert_eq!(stale["items"][0]["stale_doc_id"], chunk);
    assert_eq!(
        f.count(&format!(
            "SELECT COUNT(*) FROM knowledge_audit WHERE knowledge_id = {id} AND action = 'stale' AND reason LIKE '%d{chunk}%'"
        )),
        1
    );
    let shown = f.nmem(&["knowledge", "list", "--stale"]);
    assert!(
        String::from_utf8_lossy(&shown.stdout).contains(&format!("d{chunk} changed")),
        "{}",
        String::from_utf8_lossy(&shown.stdout)
    );
    // Reviewed: promote clears the flag.
    let out = f.nmem(&[
        "knowledge",
        "promote",
        &format!("k{id}"),
        "--reason",
        "still true: the jitter kind does not matter here",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let item = &f.json(&["knowledge", "show", &format!("k{id}")])["items"][0];
    assert_eq!(item["possibly_stale"], false, "{item}");
    assert!(item.get("stale_doc_id").is_none(), "{item}");
}

#[test]
fn pinned_knowledge_comes_first_in_the_digest_until_unpinned() {
    let f = setup("k-pin");
    let id = f.json(&[
        "knowledge",
        "add",
        "--kind",
        "decision",
        "--title",
        "Money is stored in integer cents",
        "--reason",
        "floating point lost a cent in March",
    ])["item"]["id"]
        .as_i64()
        .unwrap();
    assert!(!f.digest().contains("## Pinned"));
    let out = f
        .home
        .cmd("nmemctl")
        .args(["pin", &format!("k{id}")])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("k{id} pinned")));
    let digest = f.digest();
    assert!(
        digest.contains(&format!(
            "## Pinned\n- decision k{id}: Money is stored in integer cents"
        )),
        "{digest}"
    );
    let shown = &f.json(&["knowledge", "show", &format!("k{id}")]);
    assert_eq!(shown["items"][0]["is_pinned"], true);
    let hit = &f.json(&["search", "integer", "cents"])["items"][0];
    assert_eq!(
        (hit["id"].as_i64(), &hit["knowledge"]["is_pinned"]),
        (Some(id), &Value::Bool(true))
    );
    // A pinned observation follows the pinned knowledge.
    let obs: i64 = f
        .home
        .db()
        .query_row(
            "SELECT id FROM observations WHERE obs_type = 'file_read' LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let out = f
        .home
        .cmd("nmemctl")
        .args(["pin", &obs.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let digest = f.digest();
    let (k, o) = (
        digest.find(&format!("k{id}:")).unwrap(),
        digest.find(&format!("- #{obs} ")).unwrap(),
    );
    assert!(k < o, "{digest}");
    // Unpinned (and the trail says so); a missing item is an error that names it.
    let out = f.nmem(&["knowledge", "unpin", &format!("k{id}")]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!f.digest().contains(&format!("k{id}:")));
    assert_eq!(
        f.count(&format!(
            "SELECT COUNT(*) FROM knowledge_audit WHERE knowledge_id = {id} AND action IN ('pinned', 'unpinned')"
        )),
        2
    );
    let out = f
        .home
        .cmd("nmemctl")
        .args(["pin", "k999999"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("k999999"), "{}", stderr(&out));
    let out = f.home.cmd("nmemctl").args(["pin", "kx"]).output().unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("not an id"), "{}", stderr(&out));
}
