//! What storing a row changes besides the row, through every path that inserts one: the hook
//! (`/v1/events`), the batch route `nmem import` uses (`/v1/events/batch`) and `nmem save`. The
//! writer does this work itself since migration 011 dropped the insert triggers
//! (`daemon/src/store/follow.rs`): a SessionStart digest cached before a write is not served
//! after it, an edit of a file an active fact cites flags the fact, a saved memory moves the
//! digest's counter and becomes a note.

use nmem_e2e::*;
use serde_json::{json, Value};

const CWD: &str = "/home/dev/projects/ledger";

fn prompt(session: &str, text: &str) -> Vec<u8> {
    json!({"session_id": session, "cwd": CWD, "hook_event_name": "UserPromptSubmit", "prompt": text})
        .to_string()
        .into_bytes()
}

/// An Edit of `rel` in the ledger project, as Claude Code's PostToolUse sends it.
fn edit(session: &str, rel: &str, n: usize) -> Value {
    let path = format!("{CWD}/{rel}");
    json!({
        "session_id": session,
        "cwd": CWD,
        "hook_event_name": "PostToolUse",
        "tool_name": "Edit",
        "tool_input": {"file_path": path, "old_string": format!("let rows = {n};"), "new_string": format!("let rows = {};", n + 1)},
        "tool_response": {"filePath": path, "oldString": format!("let rows = {n};"), "newString": format!("let rows = {};", n + 1)},
        "tool_use_id": format!("toolu_follow_{session}_{n}"),
    })
}

/// The SessionStart digest a new session of the ledger project gets.
fn digest(home: &Home, session: &str) -> String {
    let start = json!({"session_id": session, "cwd": CWD, "hook_event_name": "SessionStart", "source": "startup"});
    let out = home.record("claude-code", start.to_string().as_bytes());
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Store `payloads` through the batch route, as `nmem import` does; all must be stored.
fn batch(home: &Home, tag: &str, payloads: &[Value]) {
    let events: Vec<(String, i64, Value)> = payloads
        .iter()
        .enumerate()
        .map(|(i, p)| (format!("{tag}-{i}"), nmem_proto::now_ms(), p.clone()))
        .collect();
    send_batch(home, &events);
}

/// A home with one prompt of the ledger project and its digest read once (so it is cached).
fn cached(tag: &str) -> (Home, Daemon) {
    let home = Home::new(tag);
    let d = home.start();
    assert!(home
        .record(
            "claude-code",
            &prompt("s0", "Make the ledger export stream rows")
        )
        .status
        .success());
    let first = digest(&home, "s1");
    assert!(
        first.contains("Make the ledger export stream rows"),
        "{first}"
    );
    assert!(!first.contains("src/export.rs"), "{first}");
    (home, d)
}

/// A tool call recorded by the hook after the digest was cached shows in the next digest: the
/// writer moved the project's counter in the same commit.
#[test]
fn an_edit_recorded_by_the_hook_shows_in_the_next_digest() {
    let (home, _d) = cached("follow-hook");
    // Read again with nothing written: served from the cache, still without the edit.
    assert!(!digest(&home, "s2").contains("src/export.rs"));
    let out = home.record(
        "claude-code",
        edit("s0", "src/export.rs", 1).to_string().as_bytes(),
    );
    assert!(out.status.success(), "{out:?}");
    let after = digest(&home, "s3");
    assert!(after.contains("src/export.rs"), "{after}");
}

/// The same through the batch route (`nmem import`).
#[test]
fn an_edit_imported_in_a_batch_shows_in_the_next_digest() {
    let (home, _d) = cached("follow-batch");
    batch(
        &home,
        "imp",
        &[edit("s0", "src/export.rs", 1), edit("s0", "src/bank.rs", 2)],
    );
    let after = digest(&home, "s3");
    assert!(
        after.contains("src/export.rs") && after.contains("src/bank.rs"),
        "{after}"
    );
}

fn nmem_json(home: &Home, args: &[&str]) -> Value {
    let out = home
        .cmd("nmem")
        .args(args)
        .arg("--json")
        .current_dir(&home.dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "nmem {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// An edit imported in a batch flags the fact that cites the file, as a live edit does
/// (`knowledge.rs` covers the hook's path).
#[test]
fn an_imported_edit_of_a_cited_file_flags_the_fact() {
    let home = Home::new("follow-stale");
    let _d = home.start();
    let read = json!({
        "session_id": "s0", "cwd": CWD, "hook_event_name": "PostToolUse", "tool_name": "Read",
        "tool_input": {"file_path": format!("{CWD}/src/export.rs")},
        "tool_response": {"type": "text", "file": {"filePath": format!("{CWD}/src/export.rs"), "content": "pub fn export() {}\n", "numLines": 1, "startLine": 1, "totalLines": 1}},
        "tool_use_id": "toolu_follow_read",
    });
    assert!(home
        .record("claude-code", read.to_string().as_bytes())
        .status
        .success());
    let obs: i64 = home
        .db()
        .query_row(
            "SELECT id FROM observations WHERE obs_type = 'file_read'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let saved = nmem_json(
        &home,
        &[
            "knowledge",
            "add",
            "--project",
            "ledger",
            "--kind",
            "fact",
            "--title",
            "The export writes one row per ledger line",
            "--reason",
            "read in the exporter",
            "--evidence",
            &format!("obs:{obs}"),
        ],
    );
    let id = saved["item"]["id"].as_i64().unwrap();
    let stale = || {
        home.count(&format!(
            "SELECT COUNT(*) FROM knowledge WHERE id = {id} AND stale_obs_id IS NOT NULL"
        ))
    };
    assert_eq!(stale(), 0);
    batch(&home, "imp", &[edit("s0", "src/export.rs", 1)]);
    assert_eq!(stale(), 1);
    assert_eq!(
        home.count(&format!(
            "SELECT COUNT(*) FROM knowledge_audit WHERE knowledge_id = {id} AND action = 'stale'"
        )),
        1
    );
}

/// `nmem save` (save_memory): the memory is a note, and the project's digest counter moved in
/// the same commit.
#[test]
fn a_saved_memory_moves_the_digest_counter_and_is_a_note() {
    let (home, _d) = cached("follow-save");
    let generation =
        || home.count("SELECT COALESCE((SELECT n FROM digest_gen WHERE project = 'ledger'), 0)");
    let before = generation();
    let saved = nmem_json(
        &home,
        &[
            "save",
            "--project",
            "ledger",
            "Exports stream rows in pages of 500",
        ],
    );
    let obs = saved["id"].as_i64().unwrap_or_else(|| panic!("{saved}"));
    assert!(generation() > before);
    assert_eq!(
        home.count(&format!(
            "SELECT COUNT(*) FROM knowledge WHERE kind = 'note' AND obs_id = {obs}"
        )),
        1
    );
}
