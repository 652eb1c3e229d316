//! What is kept: extraction end to end, reasoning from the transcript, redaction (scanning the
//! database file itself), dedup, session lifecycle, excluded projects.

use nmem_e2e::*;
use serde_json::json;
use std::time::Duration;

fn obs_types(home: &Home) -> Vec<(String, i64)> {
    let db = home.db();
    let mut stmt = db
        .prepare("SELECT obs_type, COUNT(*) FROM observations GROUP BY obs_type ORDER BY obs_type")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn the_sample_session_replayed_through_hooks_gives_the_counts_its_readme_gives() {
    let home = Home::new("sample");
    let _d = home.start();
    let transcript =
        std::fs::read_to_string(fixtures().join("transcripts/claude-code/sample-session.jsonl"))
            .unwrap();
    // The transcript lives where Claude Code keeps it: a copy we own.
    let path = home.dir.join("sample-session.jsonl");
    std::fs::write(&path, &transcript).unwrap();
    let events = hook_events_from_transcript(&path);
    for e in &events {
        let out = home.record("claude-code", e);
        assert!(out.status.success(), "{out:?}");
    }
    assert_eq!(
        home.count("SELECT COUNT(*) FROM prompts WHERE source = 'user'"),
        3
    );
    assert_eq!(
        home.count("SELECT COUNT(*) FROM prompts WHERE source = 'agent'"),
        4,
        "the 4 thinking blocks, read from the transcript"
    );
    let tool_obs = home.count(
        "SELECT COUNT(*) FROM observations WHERE obs_type NOT IN ('command_error', 'compaction')",
    );
    assert_eq!(tool_obs, 21);
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations WHERE obs_type = 'command_error'"),
        2
    );
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations WHERE obs_type = 'compaction'"),
        1
    );
    assert_eq!(
        obs_types(&home),
        [
            ("command", 3),
            ("command_error", 2),
            ("compaction", 1),
            ("file_edit", 7),
            ("file_read", 2),
            ("file_write", 1),
            ("git_commit", 1),
            ("mcp_call", 1),
            ("plan", 2),
            ("search", 1),
            ("task_spawn", 1),
            ("web_fetch", 1),
            ("web_search", 1),
        ]
        .map(|(k, n)| (k.to_string(), n))
    );
    // Every tool observation after the first prompt links to a prompt of its session.
    assert_eq!(home.count("SELECT COUNT(*) FROM observations WHERE prompt_id IS NULL AND obs_type != 'compaction'"), 0);
    // Recording the same session again (new event ids, same tool calls) adds nothing but prompts
    // (a prompt has no identity of its own in the hook payload).
    let before = home.count("SELECT COUNT(*) FROM observations");
    for e in &events {
        assert!(home.record("claude-code", e).status.success());
    }
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations WHERE obs_type != 'compaction'"),
        before - 1
    );
    assert_eq!(
        home.count("SELECT COUNT(*) FROM prompts WHERE source = 'agent'"),
        4,
        "the transcript is not read twice"
    );
}

/// The fake credentials in tests/fixtures/hooks/secrets, and the private key bodies.
fn secrets() -> Vec<String> {
    let mut s: Vec<String> = [
        "AKIAIOSFODNN7EXAMPLE",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "ghp_FAKE0example0token0for0nmem0tests0AB",
        "github_pat_11FAKEEXAMPLE0000000000_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8s9T0u1V2w3X4y5Z6a7B8c9D0e1F",
        "Tr0ub4dor&3-horse-battery",
        "Hunter2-FAKE",
        "r3dis-FAKE-pass",
        "sk_test_FAKE51NmemExampleKeyDoNotUse0000000000000000000000000000",
        "T00000000/B00000000/XXXXXXXXFAKEXXXXXXXXXXXX",
        "s3cr3t-FAKE-jwt-signing-key-0123456789abcdef",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1c2VyXzExODciLCJvcmciOiJvcmdfMTE4NyIsImV4cCI6MTc5OTk5OTk5OX0.ZmFrZS1zaWduYXR1cmUtZm9yLW5tZW0tdGVzdHM",
    ]
    .map(String::from)
    .to_vec();
    for f in [
        "secrets.private_key_write.json",
        "secrets.private_key_cat_bash.json",
    ] {
        let text = String::from_utf8(fixture(&format!("hooks/secrets/{f}"))).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let body = v["tool_input"]["content"]
            .as_str()
            .or(v["tool_response"]["stdout"].as_str())
            .unwrap()
            .to_string();
        s.extend(
            body.lines()
                .filter(|l| !l.starts_with("-----") && l.len() >= 16)
                .map(String::from),
        );
    }
    s
}

#[test]
fn no_secret_reaches_the_database_file_fts_index_included() {
    let home = Home::new("secrets");
    let d = home.start();
    let dir = fixtures().join("hooks/secrets");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let out = home.record("claude-code", &std::fs::read(e.unwrap().path()).unwrap());
        assert!(out.status.success(), "{out:?}");
        n += 1;
    }
    assert_eq!(n, 8);
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations")
            + home.count("SELECT COUNT(*) FROM prompts"),
        8
    );
    assert!(
        home.count("SELECT COUNT(*) FROM observations WHERE redacted = 1") >= 4,
        "commands and the edit carried secrets"
    );
    assert!(
        home.count("SELECT COUNT(*) FROM prompts WHERE content LIKE '%[REDACTED:github_token]%'")
            == 1
    );
    let status: serde_json::Value = serde_json::from_slice(
        &home
            .cmd("nmemctl")
            .args(["status", "--json"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(status["redactions"].as_u64().unwrap() >= 8, "{status}");
    assert_eq!(d.stop().code(), Some(0)); // checkpoints the WAL into the file

    let bytes = std::fs::read(&home.paths.db).unwrap();
    let haystack = String::from_utf8_lossy(&bytes).to_lowercase();
    let mut runs = Vec::new();
    for secret in secrets() {
        assert!(
            !haystack.contains(&secret.to_lowercase()),
            "{secret} is in the database file"
        );
        // The alphanumeric runs a tokenizer would keep, lower-cased: those that identify the
        // secret (with a digit, or long), not words like `github` in `github_pat_…`.
        runs.extend(
            secret
                .split(|c: char| !c.is_ascii_alphanumeric())
                .filter(|r| {
                    (r.len() >= 6 && r.bytes().any(|b| b.is_ascii_digit())) || r.len() >= 12
                })
                .map(str::to_lowercase),
        );
    }
    for run in &runs {
        assert!(
            !haystack.contains(run.as_str()),
            "token `{run}` of a secret is in the database file"
        );
    }
    // The FTS vocabulary itself (terms are prefix-compressed on disk, so ask FTS5 too).
    let copy = home.dir.join("copy.db");
    std::fs::copy(&home.paths.db, &copy).unwrap();
    let c = rusqlite::Connection::open(&copy).unwrap();
    for table in ["observations_fts", "prompts_fts"] {
        c.execute_batch(&format!(
            "CREATE VIRTUAL TABLE temp.v_{table} USING fts5vocab(main, {table}, 'row');"
        ))
        .unwrap();
        let terms: Vec<String> = c
            .prepare(&format!("SELECT term FROM v_{table}"))
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(terms.len() > 10, "{table} is indexed");
        for run in &runs {
            assert!(
                !terms
                    .iter()
                    .any(|t| t == run || (run.len() > 8 && t.starts_with(&run[..8]))),
                "{table} holds the term `{run}`"
            );
        }
    }
}

#[test]
fn repeated_reads_are_counted_not_stored_and_the_window_is_configurable() {
    let read = |n: usize| {
        json!({
            "session_id": "dedup", "cwd": "/home/dev/projects/acme-api", "hook_event_name": "PostToolUse",
            "tool_name": "Read", "tool_input": {"file_path": "/home/dev/projects/acme-api/src/app.ts"},
            "tool_response": {"type": "text", "file": {"filePath": "/home/dev/projects/acme-api/src/app.ts", "content": "x", "numLines": 1, "startLine": 1, "totalLines": 1}},
            "tool_use_id": format!("toolu_read_{n}")
        })
        .to_string()
        .into_bytes()
    };
    let home = Home::new("dedup");
    let d = home.start();
    for n in 0..3 {
        assert!(home.record("claude-code", &read(n)).status.success());
    }
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations WHERE obs_type = 'file_read'"),
        1
    );
    // Edits are never deduplicated.
    for n in 0..2 {
        let mut e: serde_json::Value =
            serde_json::from_slice(&fixture("hooks/claude-code/post_tool_use.edit.json")).unwrap();
        e["tool_use_id"] = json!(format!("toolu_edit_{n}"));
        assert!(home
            .record("claude-code", e.to_string().as_bytes())
            .status
            .success());
    }
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations WHERE obs_type = 'file_edit'"),
        2
    );
    let status: serde_json::Value = serde_json::from_slice(
        &home
            .cmd("nmemctl")
            .args(["status", "--json"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(status["dedup_hits"], 2);
    d.stop();

    let home = Home::new("nodedup");
    std::fs::write(&home.paths.config, "[dedup]\nwindow_secs = 0\n").unwrap();
    let _d = home.start();
    for n in 0..3 {
        assert!(home.record("claude-code", &read(n)).status.success());
    }
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations WHERE obs_type = 'file_read'"),
        3
    );
}

#[test]
fn session_lifecycle_is_tracked() {
    let home = Home::new("life");
    let _d = home.start();
    for f in [
        "session_start.startup.json",
        "user_prompt_submit.json",
        "post_tool_use.edit.json",
        "post_tool_use.bash.ok.json",
        "stop.json",
        "pre_compact.json",
        "session_start.compact.json",
        "pre_compact.manual.json",
    ] {
        assert!(home
            .record("claude-code", &fixture(&format!("hooks/claude-code/{f}")))
            .status
            .success());
    }
    let sid = "7d3f9a2e-4b1c-4e8a-9f6d-2c5b8e1a0f47";
    let row = |sql: &str| -> (
        Option<String>,
        Option<String>,
        i64,
        Option<i64>,
        Option<String>,
    ) {
        home.db()
            .query_row(sql, [sid], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .unwrap()
    };
    let q = "SELECT start_source, last_source, compactions, ended_at, signature FROM sessions WHERE id = ?1";
    let (first, last, compactions, ended, signature) = row(q);
    assert_eq!(
        (first.as_deref(), last.as_deref(), compactions, ended),
        (Some("startup"), Some("compact"), 2, None)
    );
    // The last Stop left a signature even without a SessionEnd.
    let sig: serde_json::Value = serde_json::from_str(&signature.unwrap()).unwrap();
    assert_eq!(sig["file_edit"], 1);
    assert_eq!(sig["command"], 1);
    assert!(home
        .record(
            "claude-code",
            &fixture("hooks/claude-code/session_end.json")
        )
        .status
        .success());
    let (_, _, _, ended, signature) = row(q);
    assert!(ended.is_some());
    let sig: serde_json::Value = serde_json::from_str(&signature.unwrap()).unwrap();
    assert_eq!(sig["compaction"], 2);
    assert_eq!(sig["session_end"], 1);
    let (model,): (Option<String>,) = home
        .db()
        .query_row("SELECT model FROM sessions WHERE id = ?1", [sid], |r| {
            Ok((r.get(0)?,))
        })
        .unwrap();
    assert_eq!(model.as_deref(), Some("claude-opus-4-7"));
}

#[test]
fn excluded_projects_are_neither_recorded_nor_given_a_digest() {
    let home = Home::new("exclude");
    std::fs::write(
        &home.paths.config,
        "[capture]\nexclude_projects = [\"acme-api\"]\n",
    )
    .unwrap();
    let _d = home.start();
    for f in [
        "session_start.startup.json",
        "user_prompt_submit.json",
        "post_tool_use.edit.json",
        "session_start.resume.json",
    ] {
        let out = home.record("claude-code", &fixture(&format!("hooks/claude-code/{f}")));
        assert!(out.status.success());
        assert!(
            out.stdout.is_empty(),
            "{f}: no digest for an excluded project"
        );
    }
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations")
            + home.count("SELECT COUNT(*) FROM prompts"),
        0
    );
    // Another project is recorded as usual.
    assert!(home
        .record("claude-code", &bash_event("elsewhere", 1))
        .status
        .success());
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), 1);
}

#[test]
fn a_private_turn_leaves_nothing_behind() {
    let home = Home::new("private");
    let _d = home.start();
    let ev = |event: &str, extra: serde_json::Value| {
        let mut e = json!({"session_id": "priv", "cwd": "/home/dev/projects/acme-api", "hook_event_name": event});
        e.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        e.to_string().into_bytes()
    };
    let steps = [
        ev(
            "UserPromptSubmit",
            json!({"prompt": "<private>look at my tax return in ~/taxes</private>"}),
        ),
        ev(
            "PostToolUse",
            json!({"tool_name": "Read", "tool_input": {"file_path": "/home/dev/taxes/2025.pdf"}, "tool_use_id": "tp1"}),
        ),
        ev(
            "Stop",
            json!({"last_assistant_message": "Your refund is 1234."}),
        ),
        ev("UserPromptSubmit", json!({"prompt": "now fix the build"})),
        ev(
            "PostToolUse",
            json!({"tool_name": "Bash", "tool_input": {"command": "cargo build"}, "tool_response": {"stdout": ""}, "tool_use_id": "tp2"}),
        ),
    ];
    for s in &steps {
        assert!(home.record("claude-code", s).status.success());
    }
    assert_eq!(home.count("SELECT COUNT(*) FROM prompts"), 1);
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), 1);
    assert_eq!(home.count("SELECT COUNT(*) FROM observations WHERE content LIKE '%taxes%' OR content LIKE '%refund%'"), 0);
    let _ = Duration::from_secs(0);
}
