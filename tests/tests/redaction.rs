//! Redaction end to end: the secrets and false-positive tables of
//! `tests/fixtures/redaction/table.json` through `nmem record` and the real `nmemd`, then the raw
//! database file (WAL checkpointed) searched for every secret and every kept text read back; a
//! secret straddling an argument summary's cut; two paths that differ only in a redacted segment.

use nmem_e2e::*;
use serde_json::{json, Value};

const SESSION: &str = "5c0e2f1a-8b3d-4e6f-9a7c-1d2b3e4f5a60";
const CWD: &str = "/home/dev/projects/acme-api";

fn tool(n: usize, name: &str, input: Value, response: Value) -> Vec<u8> {
    json!({
        "session_id": SESSION,
        "cwd": CWD,
        "hook_event_name": "PostToolUse",
        "tool_name": name,
        "tool_input": input,
        "tool_response": response,
        "tool_use_id": format!("toolu_redact_{n}"),
    })
    .to_string()
    .into_bytes()
}

fn bash(n: usize, command: &str, stdout: &str) -> Vec<u8> {
    tool(
        n,
        "Bash",
        json!({"command": command, "description": "redaction table"}),
        json!({"stdout": stdout, "stderr": "", "interrupted": false}),
    )
}

fn prompt(text: &str) -> Vec<u8> {
    json!({"session_id": SESSION, "cwd": CWD, "hook_event_name": "UserPromptSubmit", "prompt": text})
        .to_string()
        .into_bytes()
}

fn read(n: usize, path: &str) -> Vec<u8> {
    tool(
        n,
        "Read",
        json!({"file_path": path}),
        json!({"type": "text", "file": {"filePath": path, "content": "{}", "numLines": 1, "startLine": 1, "totalLines": 1}}),
    )
}

#[test]
fn the_redaction_tables_hold_through_the_real_binaries() {
    let table: Value =
        serde_json::from_slice(&fixture("redaction/table.json")).expect("the redaction table");
    let secrets = table["secrets"].as_array().unwrap();
    let keep = table["keep"].as_array().unwrap();
    let home = Home::new("redact");
    let d = home.start();
    let mut n = 0;
    let send = |payload: Vec<u8>| {
        let out = home.record("claude-code", &payload);
        assert!(out.status.success(), "{out:?}");
    };
    for row in secrets {
        let text = row["text"].as_str().unwrap();
        n += 1;
        // In a command and in its output, and pasted in a prompt.
        send(bash(n, text, &format!("ran: {text}\n")));
        send(prompt(&format!("please check this: {text}")));
    }
    for row in keep {
        n += 1;
        send(bash(n, row["text"].as_str().unwrap(), "ok\n"));
    }
    // A password straddling the 80-character cut of an argument summary.
    let straddle = "Qz7Str4ddlePw0rdFAKE91";
    let dsn = format!(
        "postgresql://{}:{straddle}@db.internal:5432/acme",
        "a".repeat(80 - 14 - straddle.len() / 2)
    );
    n += 1;
    send(tool(
        n,
        "mcp__db__query",
        json!({"dsn": dsn, "sql": "select count(*) from invoices"}),
        json!([{"type": "text", "text": "42"}]),
    ));
    // Two files whose paths differ only in a segment that is redacted: two reads, both kept.
    for token in [
        "ghp_FAKE0example0token0for0nmem0tests0AB",
        "ghp_FAKE1example1token1for1nmem1tests1CD",
    ] {
        n += 1;
        send(read(
            n,
            &format!("/home/dev/.cache/acme/{token}/config.json"),
        ));
    }

    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations WHERE obs_type = 'file_read'"),
        2,
        "a read was deduplicated with another file's"
    );
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations WHERE file_path = '/home/dev/.cache/acme/[REDACTED:github_token]/config.json'"),
        2
    );
    let db = home.db();
    let mut missing = Vec::new();
    for row in keep {
        let text = row["text"].as_str().unwrap().trim();
        let found: i64 = db
            .query_row(
                "SELECT COUNT(*) FROM observations WHERE instr(content, ?1) > 0",
                [text],
                |r| r.get(0),
            )
            .unwrap();
        if found == 0 {
            missing.push(format!("{}: {text}", row["shape"]));
        }
    }
    assert!(
        missing.is_empty(),
        "not stored verbatim:\n{}",
        missing.join("\n")
    );
    assert!(
        home.count("SELECT COUNT(*) FROM observations WHERE redacted = 1") >= secrets.len() as i64,
        "each command with a secret is marked redacted"
    );
    drop(db);
    assert_eq!(d.stop().code(), Some(0)); // checkpoints the WAL into the file

    let bytes = std::fs::read(&home.paths.db).unwrap();
    let haystack = String::from_utf8_lossy(&bytes).to_lowercase();
    let mut leaked = Vec::new();
    let values = secrets
        .iter()
        .map(|r| r["secret"].as_str().unwrap())
        .chain([straddle, "FAKE0example0token0", "FAKE1example1token1"]);
    for secret in values {
        let s = secret.to_lowercase();
        // The whole value, and any 10-character piece of it (a secret cut in two).
        let b = s.as_bytes();
        if let Some(piece) = (0..b.len().saturating_sub(9))
            .map(|i| &s[i..i + 10])
            .find(|p| haystack.contains(p))
        {
            leaked.push(format!("`{piece}` of {secret}"));
        }
    }
    assert!(
        leaked.is_empty(),
        "in the database file: {}",
        leaked.join(", ")
    );
}
