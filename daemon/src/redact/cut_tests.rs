//! A secret straddling each place where ingest cuts or summarises text must not survive in part:
//! redaction runs on the whole payload before any of them (`Redactor::redact_payload`).

use crate::ingest::project::{ProjectResolver, Strategy};
use crate::ingest::{Ingest, Prepared, RawEvent};
use crate::redact::Redactor;
use nmem_proto::harness::Harness;
use serde_json::{json, Value};

const SECRET: &str = "Qz7Str4ddlePw0rdFAKE91";
const SESSION: &str = "7d3f9a2e-4b1c-4e8a-9f6d-2c5b8e1a0f47";

/// A connection string whose password starts `half` characters before character `cut` of the
/// text it ends up in, given `before` characters of that text ahead of it. The user name pads it
/// (no spaces: a connection string has none).
fn conn_at(cut: usize, before: usize) -> String {
    let lead = "postgresql://".len() + 1;
    let user = cut - before - lead - SECRET.len() / 2;
    format!(
        "postgresql://{}:{SECRET}@db.internal:5432/acme",
        "a".repeat(user)
    )
}

/// `n` characters of ordinary words.
fn filler(n: usize) -> String {
    "the quick brown fox jumps over the lazy dog "
        .chars()
        .cycle()
        .take(n)
        .collect()
}

fn event(name: &str, extra: Value) -> Value {
    let mut v = json!({
        "session_id": SESSION,
        "cwd": "/home/dev/projects/acme-api",
        "hook_event_name": name,
    });
    v.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    v
}

fn tool(name: &str, input: Value, response: Value) -> Value {
    event(
        "PostToolUse",
        json!({"tool_name": name, "tool_input": input, "tool_response": response, "tool_use_id": "toolu_01Cut"}),
    )
}

fn prepare(payload: &Value) -> Prepared {
    let ingest = Ingest::new(
        ProjectResolver::new(Strategy::Cwd),
        Redactor::new(&[]).0,
        Box::new(|_| 0),
    );
    let raw = RawEvent {
        event_id: "e1".into(),
        received_at: 1_000,
        harness: Harness::ClaudeCode,
        payload: serde_json::to_vec(payload).unwrap(),
    };
    ingest.prepare(&raw).unwrap().expect("stores something")
}

fn stored(p: &Prepared) -> String {
    format!("{:?} {:?}", p.record, p.thoughts)
}

#[test]
fn a_secret_straddling_any_cut_point_is_redacted_whole() {
    // Its password's middle is character 40: 1,000 from the end once the filler follows.
    let tail_conn = conn_at(40, 0);
    let ok = |stdout: String| json!({"stdout": stdout, "stderr": "", "interrupted": false});
    let mut cases: Vec<(&str, Value, bool)> = vec![
        (
            "a command cut at 2,000 characters",
            tool(
                "Bash",
                json!({"command": format!("{}; psql {}", filler(1900), conn_at(2000, 1907))}),
                ok("done".into()),
            ),
            true,
        ),
        (
            "a command's last output line cut at 160",
            tool(
                "Bash",
                json!({"command": "./scripts/check-db"}),
                ok(format!("ok\nconnecting {}", conn_at(160, 11))),
            ),
            true,
        ),
        (
            "a failure's output head cut at 1,000",
            event(
                "PostToolUseFailure",
                json!({"tool_name": "Bash", "tool_input": {"command": "./migrate"},
                       "error": format!("Exit code 1\n{}\n{}\n{}", filler(900), conn_at(1000, 913), filler(3000))}),
            ),
            true,
        ),
        (
            "a failure's output tail cut 1,000 from the end",
            event(
                "PostToolUseFailure",
                json!({"tool_name": "Bash", "tool_input": {"command": "./migrate"},
                       "error": format!("Exit code 1\n{}\n{tail_conn}{}", filler(3000), filler(1000 - (tail_conn.len() - 40)))}),
            ),
            false,
        ),
        (
            "a failure's error line cut at 200",
            event(
                "PostToolUseFailure",
                json!({"tool_name": "Bash", "tool_input": {"command": "./migrate"},
                       "error": format!("Exit code 1\nerror: cannot connect to {}\n", conn_at(200, 25))}),
            ),
            true,
        ),
        (
            "a failure's first line cut at 300",
            event(
                "PostToolUseFailure",
                json!({"tool_name": "Bash", "tool_input": {"command": "./migrate"},
                       "error": format!("Exit code 1\nconnecting {}\n", conn_at(300, 11))}),
            ),
            true,
        ),
        (
            "another tool's argument cut at 80",
            tool("AcmeDeploy", json!({"dsn": conn_at(80, 0)}), json!("ok")),
            true,
        ),
        (
            "an MCP argument cut at 80",
            tool(
                "mcp__db__query",
                json!({"dsn": conn_at(80, 0), "sql": "select 1"}),
                json!([{"type": "text", "text": "1"}]),
            ),
            true,
        ),
        (
            "a failed tool's error cut at 300",
            event(
                "PostToolUseFailure",
                json!({"tool_name": "WebFetch", "tool_input": {"url": "https://acme.example"},
                       "error": format!("fetch failed for {}", conn_at(300, 17))}),
            ),
            true,
        ),
        (
            "a prompt cut at 8,000",
            event(
                "UserPromptSubmit",
                json!({"prompt": format!("{} {}", filler(7900), conn_at(8000, 7901))}),
            ),
            true,
        ),
        (
            "a last assistant message cut at 2,000",
            event(
                "Stop",
                json!({"last_assistant_message": format!("{} {}", filler(1900), conn_at(2000, 1901))}),
            ),
            true,
        ),
        (
            "a subagent prompt cut at 300",
            tool(
                "Task",
                json!({"description": "check db", "prompt": format!("Connect with {}", conn_at(300, 13))}),
                json!({"content": [{"type": "text", "text": "done"}]}),
            ),
            true,
        ),
        (
            "a search pattern cut at 500",
            tool(
                "Grep",
                json!({"pattern": format!("{} {}", filler(400), conn_at(500, 401))}),
                json!({"mode": "files_with_matches", "filenames": [], "numFiles": 0}),
            ),
            true,
        ),
        (
            "a web search query cut at 500",
            tool(
                "WebSearch",
                json!({"query": format!("{} {}", filler(400), conn_at(500, 401))}),
                json!({"query": "q", "results": []}),
            ),
            true,
        ),
    ];
    // Reasoning read from the transcript, cut at 8,000 characters.
    // Removed with everything in it when the test ends, passed or not.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let transcript = dir.join("t.jsonl");
    let line = json!({"type": "assistant", "sessionId": SESSION, "uuid": "u1", "timestamp": "2026-08-20T09:14:05.230Z",
        "message": {"id": "msg_1", "content": [{"type": "thinking", "thinking": format!("{} {}", filler(7900), conn_at(8000, 7901))}]}});
    std::fs::write(&transcript, format!("{line}\n")).unwrap();
    let mut with_thought = tool(
        "Bash",
        json!({"command": "ls"}),
        json!({"stdout": "a", "stderr": ""}),
    );
    with_thought["transcript_path"] = json!(transcript.to_str().unwrap());
    cases.push(("a thought cut at 8,000", with_thought, true));

    let mut failures = Vec::new();
    for (what, payload, marker_kept) in &cases {
        let out = stored(&prepare(payload));
        let b = SECRET.as_bytes();
        let leaked: Vec<&str> = (0..b.len() - 5)
            .map(|i| &SECRET[i..i + 6])
            .filter(|p| out.contains(p))
            .collect();
        if !leaked.is_empty() {
            failures.push(format!("{what}: {leaked:?} stored"));
        } else if *marker_kept && !out.contains("[REDACTED") {
            failures.push(format!("{what}: no marker where the secret was: {out}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Two reads of files whose paths differ only in a segment that is redacted are two files:
/// the dedup target comes from the unredacted path.
#[test]
fn paths_differing_only_in_a_redacted_segment_are_not_deduplicated_as_one() {
    let read = |token: &str| {
        let path = format!("/home/dev/.cache/acme/{token}/config.json");
        prepare(&tool(
            "Read",
            json!({"file_path": path}),
            json!({"type": "text", "file": {"filePath": path, "content": "{}", "numLines": 1, "startLine": 1, "totalLines": 1}}),
        ))
    };
    let a = read("ghp_FAKE0example0token0for0nmem0tests0AB");
    let b = read("ghp_FAKE1example1token1for1nmem1tests1CD");
    let (crate::ingest::Record::Observation(a), crate::ingest::Record::Observation(b)) =
        (a.record, b.record)
    else {
        panic!("reads store observations")
    };
    assert_eq!(a.file_path, b.file_path, "both stored redacted alike");
    assert!(a
        .file_path
        .as_deref()
        .unwrap()
        .contains("[REDACTED:github_token]"));
    let ka = crate::dedup::Dedup::key_for(SESSION, &a).unwrap();
    let kb = crate::dedup::Dedup::key_for(SESSION, &b).unwrap();
    assert_ne!(ka, kb);
    // Neither key holds the path, redacted or not.
    assert!(!ka.2.contains("ghp_") && !ka.2.contains("config.json"));
}
