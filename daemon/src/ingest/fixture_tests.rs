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
    (
        "codex",
        Harness::Codex,
        "post_tool_use.spawn_agent.json",
        "task_spawn",
    ),
    (
        "codex",
        Harness::Codex,
        "post_tool_use.update_plan.json",
        "plan",
    ),
    (
        "codex",
        Harness::Codex,
        "post_tool_use.rejected.json",
        "tool_rejected",
    ),
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
    (
        "gemini",
        Harness::Gemini,
        "after_tool.delegate_to_agent.json",
        "task_spawn",
    ),
    (
        "gemini",
        Harness::Gemini,
        "after_tool.write_todos.json",
        "plan",
    ),
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
        "post_tool_use.str_replace.json",
        "file_edit",
    ),
    (
        "cursor",
        Harness::Cursor,
        "post_tool_use.mcp.json",
        "mcp_call",
    ),
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

/// A harness added to the enum without its fixtures (and the daemon's module behind them) fails
/// here: each must have fixtures that store something, a tool call among them when it reports
/// tool calls, and Claude Code's are read from its own folder.
#[test]
fn every_harness_has_fixtures_that_store() {
    for h in Harness::ALL {
        let stored: Vec<Prepared> = match h {
            Harness::ClaudeCode => std::fs::read_dir(fixtures().join("claude-code"))
                .unwrap()
                .filter_map(|e| prepare(h, std::fs::read(e.unwrap().path()).unwrap()))
                .collect(),
            _ => TABLE
                .iter()
                .filter(|(_, th, _, want)| *th == h && !want.is_empty())
                .filter_map(|(dir, _, file, _)| {
                    prepare(h, std::fs::read(fixtures().join(dir).join(file)).unwrap())
                })
                .collect(),
        };
        assert!(
            !stored.is_empty(),
            "{h} has no fixture that stores anything"
        );
        if h != Harness::CodexNotify {
            assert!(
                stored.iter().any(|p| p.event == Event::ToolUse),
                "{h} has no tool call fixture"
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

#[test]
fn new_tool_names_of_each_harness() {
    let codex = |f: &str| obs("codex", f, Harness::Codex);
    let spawn = codex("post_tool_use.spawn_agent.json");
    assert!(spawn.content.starts_with("Find every caller of findMany"));
    assert_eq!(spawn.metadata["agent_type"], "explorer");
    let plan = codex("post_tool_use.update_plan.json");
    assert!(
        plan.content
            .contains("[completed] Reproduce the duplicate row"),
        "{}",
        plan.content
    );
    let rejected = codex("post_tool_use.rejected.json");
    assert_eq!(rejected.obs_type, "tool_rejected");
    assert!(rejected.content.contains("rm -rf node_modules"));

    let gem = obs(
        "gemini",
        "after_tool.delegate_to_agent.json",
        Harness::Gemini,
    );
    assert!(
        gem.content.contains("invoice pagination"),
        "{}",
        gem.content
    );

    let cursor = |f: &str| obs("cursor", f, Harness::Cursor);
    let edit = cursor("post_tool_use.str_replace.json");
    assert_eq!(edit.rel_path.as_deref(), Some("src/routes/invoices.ts"));
    let mcp = cursor("post_tool_use.mcp.json");
    assert_eq!(
        (
            mcp.metadata["server"].as_str(),
            mcp.metadata["tool"].as_str()
        ),
        (Some("github"), Some("get_issue"))
    );

    let cc = |f: &str| obs("claude-code", f, Harness::ClaudeCode);
    let skill = cc("post_tool_use.skill.json");
    assert_eq!(skill.content, "skill release-notes --since v1.14.1");
    let bg = cc("post_tool_use.bash_output.json");
    assert!(
        bg.content
            .starts_with("npm run dev\n→ listening on http://localhost:3000"),
        "{}",
        bg.content
    );
    let task = cc("post_tool_use.task_output.json");
    assert!(
        task.content
            .contains("All migrations have been successfully applied."),
        "{}",
        task.content
    );
}

#[test]
fn failures_are_captured_whole_and_clean() {
    let cc = |f: &str| obs("claude-code", f, Harness::ClaudeCode);
    let ansi = cc("post_tool_use_failure.bash.ansi.json");
    assert!(!ansi.content.contains('\u{1b}'), "{:?}", ansi.content);
    assert!(ansi.content.contains("error[E0308]: mismatched types"));
    assert!(!serde_json::to_string(&ansi.metadata)
        .unwrap()
        .contains("\\u001b"));
    let tests = cc("post_tool_use_failure.test_run.json");
    assert!(
        tests.content.contains(
            "✗ src/routes/invoices.test.ts > GET /invoices > returns the next page without repeating the cursor row"
        ),
        "{}",
        tests.content
    );
    assert!(!tests.content.contains('✓'), "{}", tests.content);
    let rejected = cc("post_tool_use_failure.rejected.json");
    assert_eq!(rejected.obs_type, "tool_rejected");
    assert!(rejected
        .content
        .starts_with("Bash declined by the user: git push --force origin main"));
    assert!(rejected
        .content
        .contains("reason: never force-push main, open a PR instead"));
    let warn = cc("post_tool_use.bash.warning_last.json");
    assert!(
        warn.content.contains("Reconciled 1,198 invoices"),
        "{}",
        warn.content
    );
    assert!(!warn.content.contains("warnings.warn("), "{}", warn.content);
}

#[test]
fn a_lone_surrogate_is_stored_as_a_replacement_character() {
    let p = prepare(
        Harness::ClaudeCode,
        std::fs::read(fixtures().join("claude-code/user_prompt_submit.surrogate.json")).unwrap(),
    );
    match p.map(|p| p.record) {
        Some(Record::Prompt(pr)) => {
            assert!(pr
                .content
                .contains("\"Acme \u{FFFD}\" and then garbage \u{FFFD} after"))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn content_less_ends_only_count() {
    for (file, effect) in [
        ("stop.empty.json", SessionEffect::TurnEnd),
        ("subagent_stop.empty.json", SessionEffect::SubagentEnd),
    ] {
        let p = prepare(
            Harness::ClaudeCode,
            std::fs::read(fixtures().join("claude-code").join(file)).unwrap(),
        )
        .unwrap();
        assert_eq!((p.record, p.effect), (Record::Nothing, effect), "{file}");
    }
}

#[test]
fn a_plan_without_its_old_list_is_diffed_against_the_last_one() {
    let ing = ingest();
    let update = |plan: serde_json::Value| {
        let payload = serde_json::json!({
            "session_id": "s1", "cwd": "/w", "hook_event_name": "PostToolUse",
            "tool_name": "update_plan", "tool_input": {"plan": plan}, "tool_response": "Plan updated"
        });
        let raw = RawEvent {
            event_id: "e".into(),
            received_at: 1,
            harness: Harness::Codex,
            payload: payload.to_string().into_bytes(),
        };
        match ing.prepare(&raw).unwrap().map(|p| p.record) {
            Some(Record::Observation(o)) => Some(o.content),
            _ => None,
        }
    };
    let step = |s: &str, st: &str| serde_json::json!({"step": s, "status": st});
    let first = update(serde_json::json!([
        step("a", "pending"),
        step("b", "pending")
    ]))
    .unwrap();
    assert!(
        first.contains("[pending] a") && first.contains("[pending] b"),
        "{first}"
    );
    let second = update(serde_json::json!([
        step("a", "completed"),
        step("c", "pending")
    ]))
    .unwrap();
    assert_eq!(
        second,
        "plan update (1/2 done)\ncompleted: a\nadded: c\ndropped: b"
    );
    assert_eq!(
        update(serde_json::json!([
            step("a", "completed"),
            step("c", "pending")
        ])),
        None,
        "an unchanged plan stores nothing"
    );
}

mod never_panics {
    use super::{ingest, Harness, RawEvent};
    use proptest::prelude::*;

    fn envelope_like() -> impl Strategy<Value = Vec<u8>> {
        let event = prop_oneof![
            Just("SessionStart"),
            Just("UserPromptSubmit"),
            Just("PostToolUse"),
            Just("PostToolUseFailure"),
            Just("Stop"),
            Just("SubagentStop"),
            Just("PreCompact"),
            Just("PostCompact"),
            Just("SessionEnd"),
            Just("AfterTool"),
            Just("BeforeAgent"),
            Just("AfterAgent"),
            Just("postToolUse"),
            Just("afterShellExecution"),
            Just("stop"),
            Just("afterFileEdit"),
            Just("afterMCPExecution"),
            Just("agent-turn-complete"),
        ];
        let tool = prop_oneof![
            prop::sample::select(vec![
                "Bash",
                "Read",
                "Edit",
                "TodoWrite",
                "update_plan",
                "Skill",
                "TaskOutput",
                "BashOutput",
                "spawn_agent",
                "run_shell_command",
                "write_todos",
                "MCP:a:b",
                "mcp__x__y",
                "Shell",
                "StrReplace",
                "apply_patch",
            ])
            .prop_map(String::from),
            ".{0,12}",
        ];
        let leaf = prop_oneof![
            any::<String>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<bool>().prop_map(serde_json::Value::from),
            Just(serde_json::Value::Null),
        ];
        let value = leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                prop::collection::btree_map(
                    prop_oneof![
                        Just("command".to_string()),
                        Just("todos".to_string()),
                        Just("plan".to_string()),
                        Just("stdout".to_string()),
                        Just("task".to_string()),
                        Just("status".to_string()),
                        Just("exitCode".to_string()),
                        Just("file_path".to_string()),
                        Just("content".to_string()),
                        Just("oldTodos".to_string()),
                        Just("llmContent".to_string()),
                        ".{0,6}",
                    ],
                    inner,
                    0..4
                )
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        });
        (
            event,
            tool,
            value.clone(),
            value,
            any::<String>(),
            any::<String>(),
        )
            .prop_map(|(event, tool, input, response, text, err)| {
                serde_json::json!({
                    "session_id": "s1", "conversation_id": "s1", "thread-id": "s1", "cwd": "/w",
                    "workspace_roots": ["/w"], "hook_event_name": event, "type": event,
                    "tool_name": tool, "tool_input": input, "tool_response": response,
                    "tool_output": text.clone(), "error": err, "last_assistant_message": text,
                    "prompt": "p", "source": "compact",
                })
                .to_string()
                .into_bytes()
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Arbitrary bytes (with a lone surrogate escape now and then) into the parse of every
        /// harness: a rejection or an event, never a panic.
        #[test]
        fn arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256), at in any::<usize>()) {
            let mut b = bytes;
            if !b.is_empty() {
                let i = at % b.len();
                b.splice(i..i, br#""\udc9d""#.iter().copied());
            }
            let ing = ingest();
            for h in Harness::ALL {
                let raw = RawEvent { event_id: "e".into(), received_at: 1, harness: h, payload: b.clone() };
                let _ = ing.prepare(&raw);
            }
        }

        /// Payloads shaped like every harness's, with arbitrary fields: extraction never panics.
        #[test]
        fn envelopes_of_every_harness(payload in envelope_like()) {
            let ing = ingest();
            for h in Harness::ALL {
                let raw = RawEvent { event_id: "e".into(), received_at: 1, harness: h, payload: payload.clone() };
                let _ = ing.prepare(&raw);
            }
        }
    }
}
