//! The query CLI end to end: `nmem search | get | timeline | recent | save` against a real
//! daemon holding what the Claude Code fixtures recorded.

use nmem_e2e::*;
use serde_json::Value;
use std::process::Output;

struct Fixture {
    home: Home,
    _daemon: Daemon,
    /// A folder named like the fixtures' project, so "the current project" is acme-api.
    project_dir: std::path::PathBuf,
}

fn setup(tag: &str) -> Fixture {
    let home = Home::new(tag);
    let daemon = home.start();
    for f in [
        "session_start.startup.json",
        "user_prompt_submit.json",
        "post_tool_use.read.json",
        "post_tool_use.edit.json",
        "post_tool_use.bash.ok.json",
        "post_tool_use.bash.error.json",
        "post_tool_use.grep.json",
        "stop.json",
    ] {
        assert!(home
            .record("claude-code", &fixture(&format!("hooks/claude-code/{f}")))
            .status
            .success());
    }
    assert!(home
        .record("claude-code", &bash_event("other-session", 1))
        .status
        .success()); // project "load"
    let project_dir = home.dir.join("acme-api");
    std::fs::create_dir_all(&project_dir).unwrap();
    Fixture {
        home,
        _daemon: daemon,
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

    /// `nmem search ARGS --json`: its items.
    fn search(&self, args: &[&str]) -> Value {
        let mut a = vec!["search"];
        a.extend_from_slice(args);
        let reply = self.json(&a);
        assert!(reply["mode"].is_string(), "{reply}");
        reply["items"].clone()
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
}

fn ids(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_i64().unwrap())
        .collect()
}

#[test]
fn search_finds_paths_words_and_prompts_in_the_current_project() {
    let f = setup("q-search");
    let hits = f.search(&["src/routes/invoices.ts"]);
    let types: Vec<&str> = hits
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["obs_type"].as_str().unwrap())
        .collect();
    assert!(
        types.contains(&"file_read") && types.contains(&"file_edit"),
        "{hits}"
    );
    assert!(hits
        .as_array()
        .unwrap()
        .iter()
        .all(|h| h["project"] == "acme-api"));
    assert!(hits.as_array().unwrap().iter().all(|h| h["content_preview"]
        .as_str()
        .unwrap()
        .chars()
        .count()
        <= 120));
    // A prompt says it is one and carries its whole text.
    let p = f.search(&["regression test", "--type", "user_prompt"]);
    assert_eq!(p[0]["kind"], "prompt");
    assert!(p[0]["content"].as_str().unwrap().starts_with("Issue #482"));
    // FTS syntax goes through; what FTS5 rejects is an error with SQLite's message.
    assert!(!ids(&f.search(&["tsc OR vitest"])).is_empty());
    assert!(!ids(&f.search(&["invoic*"])).is_empty());
    let bad = f.nmem(&["search", "\"unbalanced"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("not valid FTS5: unterminated string"),
        "{bad:?}"
    );
    // Quotes in pasted error text (with punctuation no query means) are words, not syntax.
    let pasted = f.search(&["error TS2339: Property \"windowMs\" does not exist"]);
    assert!(
        pasted
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["obs_type"] == "command_error"),
        "{pasted}"
    );
    // Filters: type, project, all projects; no results is not an error.
    let errs = f.search(&["tsc", "--type", "command_error"]);
    assert_eq!(errs.as_array().unwrap().len(), 1);
    assert!(
        f.search(&["echo"]).as_array().unwrap().is_empty(),
        "another project's command is not in acme-api"
    );
    assert_eq!(
        f.search(&["echo", "--all-projects"])
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        f.search(&["echo", "--project", "load"])
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let none = f.nmem(&["search", "zebra-unicorn"]);
    assert!(none.status.success());
    assert!(String::from_utf8_lossy(&none.stdout).contains("no results"));
    // Orders.
    let newest = f.search(&["invoices", "--order", "date-desc"]);
    let ts: Vec<i64> = newest
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["timestamp"].as_i64().unwrap())
        .collect();
    assert!(ts.windows(2).all(|w| w[0] >= w[1]), "{ts:?}");
    assert!(!ids(&f.search(&["invoices", "--order", "blended"])).is_empty());
    // Words that never occur together: what matches every word comes first, then what matches
    // some of them; a question asked in plain words finds its answer too.
    let all_words = ids(&f.search(&["tsc", "--type", "command_error"]));
    let mixed = f.search(&["tsc zebra-unicorn", "--type", "command_error"]);
    assert_eq!(ids(&mixed), all_words, "{mixed}");
    let asked = f.search(&["which command failed with tsc?"]);
    assert!(
        asked
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["obs_type"] == "command_error"),
        "{asked}"
    );
    // FTS syntax is taken as written: no loosening.
    assert!(ids(&f.search(&["tsc AND zebra"])).is_empty());
}

#[test]
fn get_timeline_recent_and_save() {
    let f = setup("q-more");
    let edit = f.search(&["skip", "--type", "file_edit"])[0]["id"]
        .as_i64()
        .unwrap();
    let got = f.json(&["get", &edit.to_string(), "999999", "1"]);
    assert_eq!(ids(&got), vec![edit, 1], "order kept, missing ids left out");
    assert_eq!(got[0]["obs_type"], "file_edit");
    assert!(got[0]["metadata"]["added"].as_i64().is_some());

    let t = f.json(&[
        "timeline",
        &edit.to_string(),
        "--before",
        "1",
        "--after",
        "1",
    ]);
    assert_eq!(t["anchor"]["id"], edit);
    assert_eq!(t["before"].as_array().unwrap().len(), 1);
    assert_eq!(t["after"].as_array().unwrap().len(), 1);
    let by_query = f.json(&["timeline", "--query", "tsc"]);
    assert_eq!(by_query["anchor"]["obs_type"], "command_error");
    let missing = f.nmem(&["timeline", "424242"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("anchor observation not found"));

    // Actions first: bookkeeping (the turn end recorded last) only when asked.
    let all = f.json(&["recent", "--limit", "5", "--all"]);
    assert_eq!(all[0]["obs_type"], "turn_end", "newest first");
    let recent = f.json(&["recent", "--limit", "5"]);
    assert_eq!(recent.as_array().unwrap().len(), 5);
    for o in recent.as_array().unwrap() {
        let t = o["obs_type"]
            .as_str()
            .expect("recent --json keeps obs_type");
        assert!(
            !nmem_proto::query::BOOKKEEPING.contains(&t),
            "{t} listed without --all"
        );
    }
    let paths: Vec<&str> = recent
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["file_path"].as_str())
        .collect();
    let mut unique = paths.clone();
    unique.dedup();
    assert_eq!(paths, unique, "one observation per file");

    let saved = f.json(&[
        "save",
        "Cursor pages must skip the cursor row",
        "--title",
        "pagination rule",
    ]);
    assert_eq!(saved["project"], "acme-api");
    let found = f.search(&["skip the cursor row", "--type", "memory"]);
    assert_eq!(found[0]["id"], saved["id"]);
}

#[test]
fn a_missing_daemon_is_named_with_what_to_do() {
    let home = Home::new("q-down");
    let out = home
        .cmd("nmem")
        .args(["search", "anything"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("nmemd is not running") && err.contains("Start it"),
        "{err}"
    );
}

/// A Bash event of project `project` (from its cwd) whose command holds `word`.
fn project_event(project: &str, n: usize, word: &str) -> Vec<u8> {
    serde_json::json!({
        "session_id": format!("{project}-session"),
        "cwd": format!("/home/dev/projects/{project}"),
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": { "command": format!("echo {word} {n}"), "description": "a step" },
        "tool_response": { "stdout": format!("{word} {n}\n"), "stderr": "", "interrupted": false },
        "tool_use_id": format!("toolu_{project}_{n}"),
    })
    .to_string()
    .into_bytes()
}

/// One project's search filters its matches by a set of the project's row ids kept in memory
/// (`nmem_in_project`), built at its first search and brought up to date at each search after:
/// rows recorded after the set was built are found, and another project's never are.
#[test]
fn a_project_search_finds_rows_recorded_after_its_first_search_and_only_its_own() {
    let home = Home::new("q-proj-set");
    let _d = home.start();
    let search = |project: &str| -> Vec<Value> {
        let out = home
            .cmd("nmem")
            .args(["search", "quokka", "--project", project, "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["items"].as_array().unwrap().clone()
    };
    let record = |project: &str, n: usize| {
        assert!(home
            .record("claude-code", &project_event(project, n, "quokka"))
            .status
            .success());
    };
    record("alpha", 1);
    record("beta", 1);
    wait_until(
        "alpha's first row",
        std::time::Duration::from_secs(30),
        || search("alpha").len() == 1,
    );
    // Rows added after alpha's set was built, to both projects.
    for n in 2..=4 {
        record("beta", n);
        record("alpha", n);
    }
    record("beta", 5);
    wait_until(
        "alpha's four rows",
        std::time::Duration::from_secs(30),
        || search("alpha").len() == 4,
    );
    let alpha = search("alpha");
    assert!(alpha.iter().all(|h| h["project"] == "alpha"), "{alpha:?}");
    let beta = search("beta");
    assert_eq!(beta.len(), 5, "{beta:?}");
    assert!(beta.iter().all(|h| h["project"] == "beta"), "{beta:?}");
    // The same rows as the search of every project, filtered by project.
    let out = home
        .cmd("nmem")
        .args(["search", "quokka", "--all-projects", "--json"])
        .output()
        .unwrap();
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut want: Vec<i64> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["project"] == "alpha")
        .map(|h| h["id"].as_i64().unwrap())
        .collect();
    let mut got: Vec<i64> = alpha.iter().map(|h| h["id"].as_i64().unwrap()).collect();
    want.sort();
    got.sort();
    assert_eq!(got, want);
}

/// A session's title (Claude Code's `session_title`) names what the session was for: the rows
/// of a session titled with the query's words rank above an equal word match of an untitled
/// session, and say they were found through the title.
#[test]
fn a_sessions_title_votes_for_its_rows() {
    let home = Home::new("q-title");
    let _d = home.start();
    let start = |session: &str, title: Option<&str>| {
        let mut p = serde_json::json!({
            "session_id": session,
            "cwd": "/home/dev/projects/shop",
            "hook_event_name": "SessionStart",
            "source": "resume",
        });
        if let Some(t) = title {
            p["session_title"] = t.into();
        }
        assert!(home
            .record("claude-code", p.to_string().as_bytes())
            .status
            .success());
    };
    let bash = |session: &str, n: usize, command: &str| {
        let p = serde_json::json!({
            "session_id": session,
            "cwd": "/home/dev/projects/shop",
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_input": { "command": command },
            "tool_response": { "stdout": "test result: ok. 2 passed", "stderr": "", "interrupted": false },
            "tool_use_id": format!("toolu_title_{n}"),
        });
        assert!(home
            .record("claude-code", p.to_string().as_bytes())
            .status
            .success());
    };
    // The titled session first (older) and with the longer row: words alone rank it second.
    start("title-a", Some("Fix invoice cursor pagination"));
    bash(
        "title-a",
        1,
        "cargo test --test cursor_tests -- --nocapture --test-threads 1",
    );
    start("title-b", None);
    bash("title-b", 2, "cargo nextest run cursor_tests");
    let search = |q: &str| -> Value {
        let out = home
            .cmd("nmem")
            .args([
                "search",
                q,
                "--project",
                "shop",
                "--mode",
                "lexical",
                "--json",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let first_command = |reply: &Value| -> String {
        reply["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["content_preview"].as_str().unwrap_or("").to_string())
            .find(|p| p.starts_with("cargo"))
            .unwrap_or_default()
    };
    // Words alone (no title word in the query): the shorter, newer row first.
    let plain = search("passed");
    assert!(
        first_command(&plain).starts_with("cargo nextest"),
        "{plain}"
    );
    // The title names "invoice pagination": its session's row comes first, through it.
    let titled = search("passed invoice paginate");
    assert!(
        first_command(&titled).starts_with("cargo test --test"),
        "{titled}"
    );
    let item = titled["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| {
            h["content_preview"]
                .as_str()
                .is_some_and(|p| p.starts_with("cargo test"))
        })
        .unwrap();
    assert!(
        item["retrieval_sources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["source"] == "context" && s["tier"] == "title"),
        "{item}"
    );
}
