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
