//! Every hook fixture of every harness, through `Ingest::prepare`: what it must store
//! (tests/fixtures/README.md).

use super::*;
use crate::ingest::project::Strategy;

fn ingest() -> Ingest {
    Ingest::new(
        ProjectResolver::new(Strategy::GitRoot),
        Redactor::new(&[]).0,
        Box::new(|_| 0),
    )
}

/// `tests/fixtures/hooks` of this repository.
fn fixtures() -> std::path::PathBuf {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hooks");
    assert!(p.is_dir(), "fixtures not found at {}", p.display());
    p
}

/// (harness folder, harness, file, expected): an obs_type, "prompt", or "" for nothing stored.
const TABLE: &[(&str, Harness, &str, &str)] = &[
    (
        "codex",
        Harness::Codex,
        "session_start.startup.json",
        "session_start",
    ),
    (
        "codex",
        Harness::Codex,
        "session_start.resume.json",
        "session_resume",
    ),
    (
        "codex",
        Harness::Codex,
        "session_start.clear.json",
        "session_clear",
    ),
    ("codex", Harness::Codex, "user_prompt_submit.json", "prompt"),
    ("codex", Harness::Codex, "pre_tool_use.bash.json", ""),
    (
        "codex",
        Harness::Codex,
        "post_tool_use.bash.json",
        "command",
    ),
    (
        "codex",
        Harness::Codex,
        "post_tool_use.apply_patch.json",
        "file_edit",
    ),
    (
        "codex",
        Harness::Codex,
        "post_tool_use.mcp.json",
        "mcp_call",
    ),
    ("codex", Harness::Codex, "stop.json", "turn_end"),
    ("codex", Harness::Codex, "pre_compact.json", "compaction"),
    (
        "codex",
        Harness::CodexNotify,
        "notify.agent_turn_complete.json",
        "turn_end",
    ),
    (
        "gemini",
        Harness::Gemini,
        "session_start.startup.json",
        "session_start",
    ),
    (
        "gemini",
        Harness::Gemini,
        "session_start.resume.json",
        "session_resume",
    ),
    (
        "gemini",
        Harness::Gemini,
        "session_start.clear.json",
        "session_clear",
    ),
    ("gemini", Harness::Gemini, "before_agent.json", "prompt"),
    (
        "gemini",
        Harness::Gemini,
        "before_tool.run_shell_command.json",
        "",
    ),
    (
        "gemini",
        Harness::Gemini,
        "after_tool.run_shell_command.json",
        "command",
    ),
    (
        "gemini",
        Harness::Gemini,
        "after_tool.shell_error.json",
        "command_error",
    ),
    (
        "gemini",
        Harness::Gemini,
        "after_tool.read_file.json",
        "file_read",
    ),
    (
        "gemini",
        Harness::Gemini,
        "after_tool.replace.json",
        "file_edit",
    ),
    (
        "gemini",
        Harness::Gemini,
        "after_tool.write_file.json",
        "file_write",
    ),
    ("gemini", Harness::Gemini, "after_tool.mcp.json", "mcp_call"),
    ("gemini", Harness::Gemini, "after_agent.json", "turn_end"),
    ("gemini", Harness::Gemini, "pre_compress.json", "compaction"),
    ("gemini", Harness::Gemini, "notification.json", ""),
    ("gemini", Harness::Gemini, "session_end.json", "session_end"),
    (
        "cursor",
        Harness::Cursor,
        "before_submit_prompt.json",
        "prompt",
    ),
    ("cursor", Harness::Cursor, "before_shell_execution.json", ""),
    (
        "cursor",
        Harness::Cursor,
        "after_shell_execution.json",
        "command",
    ),
    (
        "cursor",
        Harness::Cursor,
        "after_file_edit.json",
        "file_edit",
    ),
    ("cursor", Harness::Cursor, "before_read_file.json", ""),
    ("cursor", Harness::Cursor, "before_mcp_execution.json", ""),
    (
        "cursor",
        Harness::Cursor,
        "after_mcp_execution.json",
        "mcp_call",
    ),
    ("cursor", Harness::Cursor, "post_tool_use.json", "command"),
    (
        "cursor",
        Harness::Cursor,
        "after_agent_response.json",
        "turn_end",
    ),
    // A status without a message: counted on the session, no row.
    ("cursor", Harness::Cursor, "stop.json", ""),
    (
        "cursor",
        Harness::Cursor,
        "session_start.json",
        "session_start",
    ),
    ("cursor", Harness::Cursor, "session_end.json", "session_end"),
];

fn prepare(harness: Harness, bytes: Vec<u8>) -> Option<Prepared> {
    let raw = RawEvent {
        event_id: "e1".into(),
        received_at: 1_000,
        harness,
        payload: bytes,
    };
    ingest()
        .prepare(&raw)
        .unwrap_or_else(|e| panic!("rejected: {e}"))
}

fn kind(p: &Option<Prepared>) -> &str {
    match p.as_ref().map(|p| &p.record) {
        None | Some(Record::Nothing) => "",
        Some(Record::Prompt(_)) => "prompt",
        Some(Record::Observation(o)) => o.obs_type,
    }
}

#[test]
fn other_harnesses_map_onto_the_same_vocabulary() {
    for (dir, harness, file, want) in TABLE {
        let bytes = std::fs::read(fixtures().join(dir).join(file)).unwrap();
        let p = prepare(*harness, bytes);
        assert_eq!(kind(&p), *want, "{dir}/{file}");
        if let Some(p) = &p {
            assert_eq!(p.project.name, "acme-api", "{dir}/{file}");
        }
    }
}

#[test]
fn every_fixture_of_other_harnesses_is_listed() {
    for dir in ["codex", "gemini", "cursor"] {
        for e in std::fs::read_dir(fixtures().join(dir)).unwrap() {
            let name = e.unwrap().file_name().into_string().unwrap();
            assert!(
                TABLE.iter().any(|(d, _, f, _)| *d == dir && *f == name),
                "{dir}/{name} has no expectation"
            );
        }
    }
}

fn obs(dir: &str, file: &str, harness: Harness) -> Obs {
    match prepare(
        harness,
        std::fs::read(fixtures().join(dir).join(file)).unwrap(),
    )
    .map(|p| p.record)
    {
        Some(Record::Observation(o)) => o,
        other => panic!("{file}: {other:?}"),
    }
}

#[test]
fn extraction_details() {
    let cc = |f: &str| obs("claude-code", f, Harness::ClaudeCode);
    let err = cc("post_tool_use.bash.error.json");
    assert_eq!(err.metadata["exit_code"], 2);
    assert!(
        err.content
            .starts_with("npx tsc --noEmit -p tsconfig.json\nsrc/middleware/rateLimit.ts"),
        "{}",
        err.content
    );
    assert!(err.metadata["output"].as_str().unwrap().contains("TS2322"));

    let write = cc("post_tool_use.write.json");
    assert_eq!(
        write.rel_path.as_deref(),
        Some("src/middleware/rateLimit.ts")
    );
    assert!(write.metadata["sha256"].as_str().unwrap().len() == 64);
    assert!(
        !serde_json::to_string(&write.metadata)
            .unwrap()
            .contains("express-rate-limit"),
        "Write never stores the body"
    );

    let edit = cc("post_tool_use.edit.json");
    assert!(edit.content.contains("skip: 1"), "{}", edit.content);
    assert!(edit.metadata["added"].as_u64().unwrap() >= 1);

    let multi = cc("post_tool_use.multiedit.json");
    assert_eq!(
        multi.file_path.as_deref(),
        Some("/home/dev/projects/acme-api/src/config.ts")
    );
    let nb = cc("post_tool_use.notebookedit.json");
    assert!(nb.file_path.unwrap().ends_with("latency-analysis.ipynb"));

    let read = cc("post_tool_use.read.json");
    assert_eq!(
        read.file_path.as_deref(),
        Some("/home/dev/projects/acme-api/src/routes/invoices.ts")
    );
    assert!(
        read.content.len() < 200,
        "a read stores the path, not the body"
    );

    let mcp = cc("post_tool_use.mcp.json");
    assert_eq!(
        (
            mcp.metadata["server"].as_str(),
            mcp.metadata["tool"].as_str()
        ),
        (Some("github"), Some("get_issue"))
    );

    let patch = obs("codex", "post_tool_use.apply_patch.json", Harness::Codex);
    assert_eq!(
        patch.file_path.as_deref(),
        Some("/home/dev/projects/acme-api/src/routes/invoices.ts")
    );

    let gem = obs("gemini", "after_tool.shell_error.json", Harness::Gemini);
    assert_eq!(gem.metadata["exit_code"], 2);
}

#[test]
fn own_mcp_tools_are_not_recorded() {
    let payload = serde_json::json!({
        "session_id": "s1", "cwd": "/w", "hook_event_name": "PostToolUse",
        "tool_name": "mcp__nmem__search", "tool_input": {"query": "x"}, "tool_response": []
    });
    assert!(prepare(Harness::ClaudeCode, payload.to_string().into_bytes()).is_none());
}

#[test]
fn a_fully_private_prompt_stores_nothing() {
    let payload = |prompt: &str| {
        serde_json::json!({"session_id": "s1", "cwd": "/w", "hook_event_name": "UserPromptSubmit", "prompt": prompt})
            .to_string()
            .into_bytes()
    };
    assert!(prepare(
        Harness::ClaudeCode,
        payload("<private>my salary is 1</private>")
    )
    .is_none());
    match prepare(
        Harness::ClaudeCode,
        payload("fix it <private>secret</private> now"),
    )
    .unwrap()
    .record
    {
        Record::Prompt(p) => assert_eq!(p.content, "fix it  now"),
        other => panic!("{other:?}"),
    }
}
