//! `nmem import`: the sample transcript back-filled through the real daemon; idempotent; after a
//! live capture it adds nothing; broken lines are counted, not fatal; secrets are redacted.

use nmem_e2e::*;
use std::path::Path;

fn import(home: &Home, paths: &[&Path]) -> String {
    let mut c = home.cmd("nmem");
    c.arg("import");
    for p in paths {
        c.arg(p);
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// `nmem import --json` of these paths (or, with none, of the harness folders under HOME = the
/// test's home): the summary, after checking that every line read is accounted for.
fn import_json(home: &Home, args: &[&std::ffi::OsStr]) -> serde_json::Value {
    let out = home
        .cmd("nmem")
        .arg("import")
        .arg("--json")
        .args(args)
        .env("HOME", &home.dir)
        .env_remove("CODEX_HOME")
        .env_remove("CLAUDE_CONFIG_DIR")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    let not_stored: u64 = v["not_stored"]
        .as_object()
        .unwrap()
        .values()
        .map(|c| c.as_u64().unwrap())
        .sum();
    assert_eq!(
        v["lines"].as_u64().unwrap(),
        v["used"].as_u64().unwrap() + not_stored,
        "every line is used or counted under a reason: {v}"
    );
    v
}

/// A count of the summary's `not_stored`, 0 when the reason is absent.
fn not_stored(v: &serde_json::Value, reason: &str) -> u64 {
    v["not_stored"][reason].as_u64().unwrap_or(0)
}

fn sample(home: &Home) -> std::path::PathBuf {
    let dir = home.dir.join("projects/-home-dev-projects-acme-api");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("7d3f9a2e-4b1c-4e8a-9f6d-2c5b8e1a0f47.jsonl");
    std::fs::copy(
        fixtures().join("transcripts/claude-code/sample-session.jsonl"),
        &p,
    )
    .unwrap();
    p
}

#[test]
fn the_sample_transcript_imports_with_its_readme_counts_and_twice_is_once() {
    let home = Home::new("import");
    let _d = home.start();
    let t = sample(&home);
    let out = import(&home, &[t.parent().unwrap().parent().unwrap()]);
    assert!(out.contains("imported 1 files"), "{out}");
    assert_eq!(
        home.count("SELECT COUNT(*) FROM prompts WHERE source = 'user'"),
        3
    );
    assert_eq!(
        home.count("SELECT COUNT(*) FROM prompts WHERE source = 'agent'"),
        4
    );
    assert_eq!(home.count("SELECT COUNT(*) FROM observations WHERE obs_type NOT IN ('command_error', 'compaction')"), 21);
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations WHERE obs_type = 'command_error'"),
        2
    );
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations WHERE obs_type = 'compaction'"),
        1
    );
    // Original times, not the import's.
    assert!(home.count("SELECT MAX(timestamp) FROM observations") < 1_800_000_000_000);
    let total =
        home.count("SELECT (SELECT COUNT(*) FROM observations) + (SELECT COUNT(*) FROM prompts)");
    let again = import(&home, &[&t]);
    assert!(again.contains(" 0 stored"), "{again}");
    assert_eq!(
        home.count("SELECT (SELECT COUNT(*) FROM observations) + (SELECT COUNT(*) FROM prompts)"),
        total
    );
}

#[test]
fn an_import_after_live_capture_adds_nothing() {
    let home = Home::new("import-live");
    let _d = home.start();
    let t = sample(&home);
    // The same session captured live first (hooks carry tool_use_id and prompt_id).
    let transcript = std::fs::read_to_string(&t).unwrap();
    for e in hook_events_from_transcript(&t) {
        // Live payloads carry the prompt's id, as the transcript line does.
        let v: serde_json::Value = serde_json::from_slice(&e).unwrap();
        if v["hook_event_name"] == "UserPromptSubmit" {
            let line = transcript
                .lines()
                .find(|l| l.contains(v["prompt"].as_str().unwrap().get(..30).unwrap()))
                .unwrap();
            let lv: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(v["prompt_id"], lv["promptId"], "{v}");
        }
        assert!(home.record("claude-code", &e).status.success());
    }
    let live = home.count("SELECT (SELECT COUNT(*) FROM observations WHERE obs_type != 'compaction') + (SELECT COUNT(*) FROM prompts)");
    let out = import(&home, &[&t]);
    assert_eq!(
        home.count("SELECT (SELECT COUNT(*) FROM observations WHERE obs_type != 'compaction') + (SELECT COUNT(*) FROM prompts)"),
        live,
        "{out}"
    );
}

#[test]
fn broken_lines_are_counted_and_secrets_redacted() {
    let home = Home::new("import-bad");
    let _d = home.start();
    let dir = home.dir.join("t");
    std::fs::create_dir_all(&dir).unwrap();
    let good = r#"{"type":"user","sessionId":"s1","cwd":"/home/dev/projects/acme-api","uuid":"u1","timestamp":"2026-08-20T09:00:00.000Z","message":{"role":"user","content":"deploy with token ghp_FAKE0example0token0for0nmem0tests0AB please"}}"#;
    let text = format!("{good}\nnot json at all\n{{\"type\":\"mystery\",\"sessionId\":\"s1\",\"cwd\":\"/x\"}}\n{{\"type\":\"user\",\"sessionId\":\"s1\"");
    std::fs::write(dir.join("s1.jsonl"), text).unwrap();
    std::fs::write(dir.join("unreadable.jsonl"), "").unwrap();
    std::fs::set_permissions(
        dir.join("unreadable.jsonl"),
        std::os::unix::fs::PermissionsExt::from_mode(0o000),
    )
    .unwrap();
    let out = import_json(&home, &[dir.as_os_str()]);
    assert_eq!(not_stored(&out, "not_json"), 2, "{out}");
    assert_eq!(not_stored(&out, "unknown_kind"), 1, "{out}");
    assert_eq!(home.count("SELECT COUNT(*) FROM prompts"), 1);
    assert_eq!(
        home.count("SELECT COUNT(*) FROM prompts WHERE content LIKE '%[REDACTED:github_token]%'"),
        1
    );
}

fn import_with(home: &Home, args: &[&str]) -> String {
    let out = home
        .cmd("nmem")
        .arg("import")
        .args(args)
        .env("HOME", &home.dir)
        .env_remove("CODEX_HOME")
        .env_remove("CLAUDE_CONFIG_DIR")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Codex rollouts of two generations: the newer (event messages, exec_command, "Exit code:"
/// text, turn ids) and the older (response items only, `shell` with an argv, JSON outputs).
const ROLLOUT_NEW: &str = r#"{"timestamp":"2026-08-20T09:14:03.100Z","type":"session_meta","payload":{"id":"019a4c2e-7b3d-7f10-9c2e-5d8a1b6f3e90","cwd":"/home/dev/projects/acme-api","cli_version":"0.98.0","instructions":null}}
{"timestamp":"2026-08-20T09:14:05.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/home/dev/projects/acme-api</cwd>\n</environment_context>"}]}}
{"timestamp":"2026-08-20T09:14:06.000Z","type":"turn_context","payload":{"turn_id":"019a4c2f-0c41-7a22-b3e8-91d04f6c2a17","cwd":"/home/dev/projects/acme-api","model":"gpt-5.5-codex"}}
{"timestamp":"2026-08-20T09:14:06.100Z","type":"event_msg","payload":{"type":"user_message","message":"fix the duplicate invoice on page two of cursor pagination","images":[],"turn_id":"019a4c2f-0c41-7a22-b3e8-91d04f6c2a17"}}
{"timestamp":"2026-08-20T09:14:06.100Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"fix the duplicate invoice on page two of cursor pagination"}]}}
{"timestamp":"2026-08-20T09:14:07.000Z","type":"response_item","payload":{"type":"reasoning","summary":[{"type":"summary_text","text":"**Looking at the cursor**"}],"encrypted_content":"gAAAA"}}
{"timestamp":"2026-08-20T09:14:08.000Z","type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"npm test -- invoices\",\"workdir\":\"/home/dev/projects/acme-api\"}","call_id":"call_Tst1"}}
{"timestamp":"2026-08-20T09:14:12.000Z","type":"event_msg","payload":{"type":"exec_command_end","call_id":"call_Tst1","stdout":"","stderr":"","aggregated_output":"FAIL src/routes/invoices.test.ts > pages\nExpected 20 rows, got 21\n","exit_code":1,"duration":{"secs":4,"nanos":0}}}
{"timestamp":"2026-08-20T09:14:12.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_Tst1","output":"Exit code: 1\nWall time: 4.0 seconds\nOutput:\nFAIL src/routes/invoices.test.ts > pages\n"}}
{"timestamp":"2026-08-20T09:14:20.000Z","type":"response_item","payload":{"type":"custom_tool_call","status":"completed","call_id":"call_Ap7mZ2xC4vB6nQ8wE1rT3yUi","name":"apply_patch","input":"*** Begin Patch\n*** Update File: src/routes/invoices.ts\n@@\n-    skip: 0\n+    skip: 1\n*** End Patch\n"}}
{"timestamp":"2026-08-20T09:14:20.500Z","type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"call_Ap7mZ2xC4vB6nQ8wE1rT3yUi","output":"{\"output\":\"Success. Updated the following files:\\nM src/routes/invoices.ts\\n\",\"metadata\":{\"exit_code\":0,\"duration_seconds\":0.0}}"}}
{"timestamp":"2026-08-20T09:14:30.000Z","type":"event_msg","payload":{"type":"agent_message","message":"Cursor pagination skipped 0 rows after the cursor; it now skips the cursor row itself."}}
{"timestamp":"2026-08-20T09:14:30.100Z","type":"event_msg","payload":{"type":"token_count","info":null}}
{"timestamp":"2026-08-20T09:14:30.200Z","type":"event_msg","payload":{"type":"task_complete","turn_id":"019a4c2f-0c41-7a22-b3e8-91d04f6c2a17","last_agent_message":"Cursor pagination skipped 0 rows after the cursor; it now skips the cursor row itself."}}
{"timestamp":"2026-08-20T09:15:00.000Z","type":"some_future_kind","payload":{"x":1}}
this line is not json
{"timestamp":"2026-08-20T09:15:01.000Z","type":"event_msg","payload":{"type":"user_mes"#;

const ROLLOUT_OLD: &str = r#"{"timestamp":"2025-06-02T10:00:00.000Z","type":"session_meta","payload":{"id":"5f0c7e0e-1111-4aaa-9bbb-222233334444","cwd":"/home/dev/projects/billing","cli_version":"0.20.0"}}
{"timestamp":"2025-06-02T10:00:01.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<user_instructions>be brief</user_instructions>"}]}}
{"timestamp":"2025-06-02T10:00:02.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"why do refunds double-post?"}]}}
{"timestamp":"2025-06-02T10:00:03.000Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"bash\",\"-lc\",\"rg -n refund src\"],\"workdir\":\"/home/dev/projects/billing\"}","call_id":"call_Old1"}}
{"timestamp":"2025-06-02T10:00:04.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_Old1","output":"{\"output\":\"src/refunds.ts:12: await postRefund(r)\\n\",\"metadata\":{\"exit_code\":0,\"duration_seconds\":0.1}}"}}
{"timestamp":"2025-06-02T10:00:05.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"postRefund is called twice on retry."}]}}
"#;

#[test]
fn codex_rollouts_of_two_generations_import_once_and_match_live_capture() {
    let home = Home::new("import-codex");
    let _d = home.start();
    let day = home.dir.join(".codex/sessions/2026/08/20");
    std::fs::create_dir_all(&day).unwrap();
    std::fs::write(
        day.join("rollout-2026-08-20T09-14-03-019a4c2e.jsonl"),
        ROLLOUT_NEW,
    )
    .unwrap();
    let old = home.dir.join(".codex/sessions/2025/06/02");
    std::fs::create_dir_all(&old).unwrap();
    std::fs::write(
        old.join("rollout-2025-06-02T10-00-00-5f0c7e0e.jsonl"),
        ROLLOUT_OLD,
    )
    .unwrap();
    // The apply_patch call was captured live before the import (same call id).
    let live = fixture("hooks/codex/post_tool_use.apply_patch.json");
    assert!(home.record("codex", &live).status.success());
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), 1);

    let out = import_json(&home, &["--harness".as_ref(), "codex".as_ref()]);
    assert_eq!(out["files"], 2, "{out}");
    // The corrupt line and the half-written last line; the unknown kind.
    assert_eq!(not_stored(&out, "not_json"), 2, "{out}");
    assert_eq!(not_stored(&out, "unknown_kind"), 1, "{out}");
    // The newer file's mirrored user message and shell result.
    assert_eq!(not_stored(&out, "mirror"), 2, "{out}");
    let q = |sql: &str| home.count(sql);
    // Scaffolding is not a prompt; the newer file's prompt is not taken twice.
    assert_eq!(q("SELECT COUNT(*) FROM prompts WHERE source = 'user'"), 2);
    assert_eq!(
        q("SELECT COUNT(*) FROM prompts WHERE prompt_uid = '019a4c2f-0c41-7a22-b3e8-91d04f6c2a17'"),
        1
    );
    assert_eq!(
        q("SELECT COUNT(*) FROM observations WHERE obs_type = 'command_error' AND content LIKE '%npm test -- invoices%'"),
        1
    );
    assert_eq!(
        q("SELECT COUNT(*) FROM observations WHERE obs_type = 'file_edit' AND content LIKE '%invoices.ts%'"),
        1,
        "the live apply_patch and the imported one are one row"
    );
    assert_eq!(
        q("SELECT COUNT(*) FROM observations WHERE obs_type IN ('command', 'search') AND content LIKE '%rg -n refund src%'"),
        1
    );
    assert_eq!(
        q("SELECT COUNT(*) FROM observations WHERE obs_type = 'turn_end' AND content LIKE '%skips the cursor row%'"),
        1
    );
    // Original times, each session in its own project; the older file's last answer ends its turn.
    assert_eq!(
        q("SELECT COUNT(*) FROM observations o JOIN sessions s ON s.id = o.session_id WHERE s.project = 'billing' AND o.timestamp < 1750000000000"),
        2
    );
    assert_eq!(
        q("SELECT COUNT(*) FROM observations WHERE obs_type = 'turn_end' AND content LIKE '%called twice on retry%'"),
        1
    );
    let total = q("SELECT (SELECT COUNT(*) FROM observations) + (SELECT COUNT(*) FROM prompts)");
    let again = import_with(&home, &["--harness", "codex"]);
    assert!(again.contains(" 0 stored"), "{again}");
    assert_eq!(
        q("SELECT (SELECT COUNT(*) FROM observations) + (SELECT COUNT(*) FROM prompts)"),
        total
    );
}

fn sha256_hex(s: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn gemini_chats_json_and_jsonl_import_with_their_folders() {
    let home = Home::new("import-gemini");
    let _d = home.start();
    let root = "/home/dev/projects/acme-api";
    let hash = sha256_hex(root);
    let tmp = home.dir.join(".gemini/tmp");
    // The older layout: the hash names the folder; the root is known from trustedFolders.json.
    let chats = tmp.join(&hash).join("chats");
    std::fs::create_dir_all(&chats).unwrap();
    std::fs::write(
        home.dir.join(".gemini/trustedFolders.json"),
        format!(r#"{{"{root}": "TRUST_FOLDER"}}"#),
    )
    .unwrap();
    let chat = serde_json::json!({
        "sessionId": "3e9f1c7a-5d2b-4f8e-a6c1-9b0d7e2f4a18",
        "projectHash": hash,
        "startTime": "2026-08-20T09:00:00.000Z",
        "lastUpdated": "2026-08-20T09:05:00.000Z",
        "messages": [
            {"id": "m1", "timestamp": "2026-08-20T09:00:01.000Z", "type": "user", "content": "run the invoice tests"},
            {"id": "m2", "timestamp": "2026-08-20T09:00:05.000Z", "type": "gemini", "content": "",
             "toolCalls": [{"id": "run_shell_command-1", "name": "run_shell_command",
               "args": {"command": "npm test -- invoices"}, "status": "success",
               "timestamp": "2026-08-20T09:00:04.000Z",
               "result": [{"functionResponse": {"id": "run_shell_command-1", "name": "run_shell_command",
                 "response": {"output": "Command: npm test -- invoices\nDirectory: (root)\nOutput: FAIL pages\nExit Code: 1"}}}]},
               {"id": "read_file-2", "name": "read_file", "args": {"absolute_path": "/home/dev/projects/acme-api/src/routes/invoices.ts"},
                "status": "success", "timestamp": "2026-08-20T09:00:05.000Z",
                "result": [{"functionResponse": {"id": "read_file-2", "name": "read_file", "response": {"output": "export const x = 1;\n"}}}]}]},
            {"id": "m3", "timestamp": "2026-08-20T09:00:09.000Z", "type": "gemini", "content": "The pages test fails: one row too many after the cursor."},
            {"id": "m4", "timestamp": "2026-08-20T09:00:10.000Z", "type": "info", "content": "Request cancelled."},
            {"id": "m5", "timestamp": "2026-08-20T09:01:00.000Z", "type": "user", "content": "/stats"}
        ]
    });
    std::fs::write(
        chats.join("session-2026-08-20T09-00-3e9f1c7a.json"),
        serde_json::to_string_pretty(&chat).unwrap(),
    )
    .unwrap();
    // The newer layout: a project folder with .project_root, a JSON-lines chat with updates
    // and a rewind (the rewound prompt and answer are gone).
    let proj = tmp.join("billing");
    std::fs::create_dir_all(proj.join("chats")).unwrap();
    std::fs::write(proj.join(".project_root"), "/home/dev/projects/billing\n").unwrap();
    let lines = [
        r#"{"sessionId":"9d1e2f3a-0000-4000-8000-000000000001","projectHash":"ignored","startTime":"2026-09-01T08:00:00.000Z"}"#,
        r#"{"id":"u1","timestamp":"2026-09-01T08:00:01.000Z","type":"user","content":[{"text":"why do refunds double-post?"}]}"#,
        r#"{"id":"g1","timestamp":"2026-09-01T08:00:05.000Z","type":"gemini","content":"Looking.","toolCalls":[{"id":"grep-1","name":"search_file_content","args":{"pattern":"postRefund"},"status":"success","result":[{"functionResponse":{"id":"grep-1","name":"search_file_content","response":{"output":"src/refunds.ts:12: await postRefund(r)"}}}]}]}"#,
        r#"{"id":"g1","timestamp":"2026-09-01T08:00:06.000Z","type":"gemini","content":"postRefund runs twice when the webhook retries.","toolCalls":[{"id":"grep-1","name":"search_file_content","args":{"pattern":"postRefund"},"status":"success","result":[{"functionResponse":{"id":"grep-1","name":"search_file_content","response":{"output":"src/refunds.ts:12: await postRefund(r)"}}}]}]}"#,
        r#"{"id":"u2","timestamp":"2026-09-01T08:01:00.000Z","type":"user","content":"delete the refunds table"}"#,
        r#"{"id":"g2","timestamp":"2026-09-01T08:01:02.000Z","type":"gemini","content":"Dropping it."}"#,
        r#"{"$rewindTo":"u2"}"#,
        r#"{"$set":{"lastUpdated":"2026-09-01T08:02:00.000Z"}}"#,
        r#"{"id":"u3","timestamp":"2026-09-01T08"#,
    ];
    std::fs::write(
        proj.join("chats/session-2026-09-01T08-00-9d1e2f3a.jsonl"),
        lines.join("\n"),
    )
    .unwrap();
    // A chat whose folder nmem cannot find: skipped and counted.
    let lost = tmp.join(sha256_hex("/nowhere/known")).join("chats");
    std::fs::create_dir_all(&lost).unwrap();
    std::fs::write(
        lost.join("session-x.json"),
        serde_json::json!({"sessionId": "lost", "projectHash": sha256_hex("/nowhere/known"),
            "messages": [{"id": "a", "type": "user", "content": "hi", "timestamp": "2026-08-01T00:00:00Z"}]})
        .to_string(),
    )
    .unwrap();

    // Live capture of the acme-api session began with its read_file call (no ids to match by):
    // from then on, the chat adds nothing.
    let live_at = nmem_proto::time::parse_rfc3339_ms("2026-08-20T09:00:05.000Z")
        .unwrap()
        .to_string();
    let r = nmem_proto::client::call(
        &home.paths.socket,
        "POST",
        "/v1/events",
        &[
            ("x-nmem-event-id", "live-gemini-1"),
            ("x-nmem-received-at", &live_at),
            ("x-nmem-harness", "gemini"),
        ],
        &fixture("hooks/gemini/after_tool.read_file.json"),
        std::time::Duration::from_secs(10),
    )
    .unwrap();
    assert_eq!(r.status, 200);
    let out = import_json(&home, &["--harness".as_ref(), "gemini".as_ref()]);
    assert_eq!(out["files"], 3, "{out}");
    // The half-written last line; the lost chat (its header and message); the rewound prompt and
    // answer; the first copy of the rewritten answer.
    assert_eq!(not_stored(&out, "not_json"), 1, "{out}");
    assert_eq!(not_stored(&out, "no_folder"), 2, "{out}");
    assert_eq!(not_stored(&out, "rewound"), 2, "{out}");
    assert_eq!(not_stored(&out, "mirror"), 1, "{out}");
    let q = |sql: &str| home.count(sql);
    assert_eq!(q("SELECT COUNT(*) FROM prompts WHERE source = 'user'"), 2);
    assert_eq!(
        q("SELECT COUNT(*) FROM prompts WHERE content LIKE '%delete the refunds%'"),
        0
    );
    assert_eq!(
        q("SELECT COUNT(*) FROM observations WHERE obs_type = 'command_error' AND content LIKE '%npm test -- invoices%'"),
        1
    );
    assert_eq!(
        q("SELECT COUNT(*) FROM observations WHERE obs_type = 'file_read' AND content LIKE '%invoices.ts%'"),
        1
    );
    assert_eq!(
        q("SELECT COUNT(*) FROM observations WHERE obs_type = 'search' AND content LIKE '%postRefund%'"),
        1
    );
    assert_eq!(
        q("SELECT COUNT(*) FROM observations WHERE obs_type = 'turn_end' AND content LIKE '%twice when the webhook%'"),
        1
    );
    assert_eq!(
        q("SELECT COUNT(*) FROM observations WHERE obs_type = 'turn_end' AND content LIKE '%one row too many%'"),
        0,
        "after live capture began, the chat adds nothing"
    );
    assert_eq!(
        q("SELECT COUNT(*) FROM sessions WHERE project IN ('acme-api', 'billing')"),
        2
    );
    let again = import_with(&home, &[]);
    assert!(again.contains(" 0 stored"), "{again}");
}

#[test]
fn a_batch_stores_its_good_events_and_names_the_bad_ones() {
    let home = Home::new("batch");
    let _d = home.start();
    let ok = |id: &str, n: usize| {
        format!(
            r#"{{"event_id":"{id}","received_at":1755680400000,"harness":"claude-code","payload":{}}}"#,
            String::from_utf8(bash_event("batch", n)).unwrap()
        )
    };
    let body = [
        ok("b-1", 1),
        r#"{"event_id":"b-2","received_at":1,"harness":"vscode","payload":{}}"#.to_string(),
        r#"{"event_id":"b-3","received_at":1,"harness":"claude-code","payload":{"cwd":"/x","hook_event_name":"Stop"}}"#.to_string(),
        "not json".to_string(),
        ok("b-1", 1), // the same event twice: stored once
        ok("b-6", 6),
    ]
    .join("\n");
    let r = nmem_proto::client::call(
        &home.paths.socket,
        "POST",
        "/v1/events/batch",
        &[],
        body.as_bytes(),
        std::time::Duration::from_secs(10),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let reply: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(reply["stored"], 2, "{reply}");
    assert_eq!(reply["duplicates"], 1, "{reply}");
    let bad: Vec<u64> = reply["rejected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["index"].as_u64().unwrap())
        .collect();
    assert_eq!(bad, [1, 2, 3], "{reply}");
    assert!(reply["rejected"][0]["message"]
        .as_str()
        .unwrap()
        .contains("unknown harness"));
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), 2);
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations WHERE timestamp = 1755680400000"),
        2
    );
}

/// A fixture transcript copied into the test's home (the import reads it from there).
fn transcript(home: &Home, rel: &str) -> std::path::PathBuf {
    let to = home.dir.join("t").join(rel);
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(fixtures().join("transcripts").join(rel), &to).unwrap();
    to
}

#[test]
fn prompts_given_as_arrays_of_text_blocks_are_imported_without_the_ides_notes() {
    let home = Home::new("import-array");
    let _d = home.start();
    let t = transcript(&home, "claude-code/ide-array-prompts.jsonl");
    let out = import_json(&home, &[t.as_os_str()]);
    let q = |sql: &str| home.count(sql);
    // Three prompts, each an array of blocks; the IDE's notes around them are left out.
    assert_eq!(out["prompts"], 3, "{out}");
    assert_eq!(q("SELECT COUNT(*) FROM prompts WHERE source = 'user'"), 3);
    for p in [
        "why does page two repeat the last invoice of page one?",
        "fix it with skip: 1 and add a regression test",
        "also check the refunds route for the same bug",
    ] {
        assert_eq!(
            q(&format!(
                "SELECT COUNT(*) FROM prompts WHERE source = 'user' AND content = '{p}'"
            )),
            1,
            "{p}"
        );
    }
    assert_eq!(
        q("SELECT COUNT(*) FROM prompts WHERE content LIKE '%ide_%' OR content LIKE '%Request interrupted%' OR content LIKE '%Caveat%'"),
        0
    );
    // The tool-result lines are results, not prompts: the Read and the Edit.
    assert_eq!(
        q("SELECT COUNT(*) FROM observations WHERE obs_type IN ('file_read', 'file_edit')"),
        2
    );
    // Every other line, by reason.
    assert_eq!(out["lines"], 18, "{out}");
    assert_eq!(out["used"], 7, "{out}");
    for (reason, n) in [
        ("bookkeeping", 3),         // the snapshot, the turn duration, the title
        ("assistant_text", 2),      // the thinking and the answer text
        ("injected", 2),            // the interruption notice, the command caveat
        ("empty", 1),               // an image alone
        ("call_without_result", 1), // the interrupted Bash call
        ("result_without_call", 1), // a result whose call is not in the file
        ("not_json", 1),            // the half-written last line
    ] {
        assert_eq!(not_stored(&out, reason), n, "{reason}: {out}");
    }
    // Twice is once.
    let again = import_json(&home, &[t.as_os_str()]);
    assert_eq!(again["stored"], 0, "{again}");
    assert_eq!(q("SELECT COUNT(*) FROM prompts WHERE source = 'user'"), 3);
}

#[test]
fn a_subagents_prompt_is_not_stored_as_the_users_but_its_tool_calls_are() {
    let home = Home::new("import-sidechain");
    let _d = home.start();
    let t = transcript(&home, "claude-code/sidechain.jsonl");
    let out = import_json(&home, &[t.as_os_str()]);
    let q = |sql: &str| home.count(sql);
    assert_eq!(not_stored(&out, "subagent_prompt"), 2, "{out}");
    assert_eq!(q("SELECT COUNT(*) FROM prompts WHERE source = 'user'"), 1);
    assert_eq!(
        q("SELECT COUNT(*) FROM prompts WHERE content LIKE '%stripe.refunds.create%' OR content LIKE '%smallest change%'"),
        0,
        "the subagent's task is not the user's prompt"
    );
    // The task is kept with the call that started the subagent; the subagent's search is kept.
    assert_eq!(
        q("SELECT COUNT(*) FROM observations WHERE obs_type = 'task_spawn'"),
        1
    );
    assert_eq!(
        q("SELECT COUNT(*) FROM observations WHERE obs_type = 'search' AND content LIKE '%refunds%'"),
        1
    );
}

#[test]
fn a_file_holding_two_sessions_imports_each() {
    let home = Home::new("import-two");
    let _d = home.start();
    let t = transcript(&home, "claude-code/two-sessions.jsonl");
    let out = import_json(&home, &[t.as_os_str()]);
    assert_eq!(out["sessions"], 2, "{out}");
    assert_eq!(out["prompts"], 2, "{out}");
    assert_eq!(out["observations"], 2, "{out}");
    assert_eq!(out["lines"], out["used"], "{out}");
    for (session, prompt) in [
        (
            "6c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f",
            "bump prisma to 6.4 and run the migrations",
        ),
        (
            "7d2e3f40-5b6c-4d7e-9f80-a1b2c3d4e5f6",
            "list the test files under src/billing",
        ),
    ] {
        assert_eq!(
            home.count(&format!(
                "SELECT COUNT(*) FROM prompts WHERE session_id = '{session}' AND content = '{prompt}'"
            )),
            1
        );
        assert_eq!(
            home.count(&format!(
                "SELECT COUNT(*) FROM observations WHERE session_id = '{session}'"
            )),
            1
        );
    }
}

#[test]
fn older_codex_rollouts_without_session_meta_import() {
    let home = Home::new("import-codex-legacy");
    let _d = home.start();
    let bare = transcript(
        &home,
        "codex/rollout-2025-05-07T17-24-21-5973b6c0-94b8-487b-a530-2aeb6098ae0e.jsonl",
    );
    let state = transcript(
        &home,
        "codex/rollout-2025-06-11T08-02-45-0c9e8a7b-2d41-4f3a-8b6c-5e1d0f2a9b37.jsonl",
    );
    // Found as Codex rollouts from their first line, in a folder of their own.
    let out = import_json(&home, &[bare.parent().unwrap().as_os_str()]);
    assert_eq!(out["files"], 2, "{out}");
    assert_eq!(out["sessions"], 2, "{out}");
    assert_eq!(out["prompts"], 3, "{out}");
    // The `record_type: state` markers and the encrypted reasoning; the instructions and the
    // environment messages.
    assert_eq!(not_stored(&out, "bookkeeping"), 5 + 1, "{out}");
    assert_eq!(not_stored(&out, "injected"), 3, "{out}");
    let q = |sql: &str| home.count(sql);
    let bare_id = "5973b6c0-94b8-487b-a530-2aeb6098ae0e";
    let state_id = "0c9e8a7b-2d41-4f3a-8b6c-5e1d0f2a9b37";
    // Each in the project its environment message names, at the header's time.
    assert_eq!(
        q(&format!(
            "SELECT COUNT(*) FROM sessions WHERE id = '{bare_id}' AND project = 'acme-api'"
        )),
        1
    );
    assert_eq!(
        q(&format!(
            "SELECT COUNT(*) FROM sessions WHERE id = '{state_id}' AND project = 'billing'"
        )),
        1
    );
    assert_eq!(
        q(&format!("SELECT COUNT(*) FROM prompts WHERE session_id = '{bare_id}' AND source = 'user' AND timestamp = 1746638661123")),
        2
    );
    assert_eq!(
        q(&format!("SELECT COUNT(*) FROM prompts WHERE session_id = '{state_id}' AND content LIKE 'why do refunds post twice%'")),
        1
    );
    // Both turns of the bare file end with their answer (one time for all: told apart by line).
    assert_eq!(
        q(&format!("SELECT COUNT(*) FROM observations WHERE session_id = '{bare_id}' AND obs_type = 'turn_end'")),
        2
    );
    assert_eq!(
        q(&format!("SELECT COUNT(*) FROM observations WHERE session_id = '{bare_id}' AND obs_type = 'command_error' AND content LIKE '%npm test -- invoices%'")),
        1
    );
    assert_eq!(
        q(&format!("SELECT COUNT(*) FROM observations WHERE session_id = '{state_id}' AND obs_type = 'turn_end' AND content LIKE '%idempotency key%'")),
        1
    );
    assert_eq!(
        q(&format!("SELECT COUNT(*) FROM observations WHERE session_id = '{state_id}' AND obs_type != 'turn_end'")),
        1
    );
    let total = q("SELECT (SELECT COUNT(*) FROM observations) + (SELECT COUNT(*) FROM prompts)");
    let again = import_json(&home, &[bare.as_os_str(), state.as_os_str()]);
    assert_eq!(again["stored"], 0, "{again}");
    assert_eq!(
        q("SELECT (SELECT COUNT(*) FROM observations) + (SELECT COUNT(*) FROM prompts)"),
        total
    );
}

#[test]
fn a_forked_codex_rollout_does_not_store_its_parents_history_again() {
    let parent_id = "01a0618f-a900-71b8-c2d3-e4f5a6b7c8d9";
    let fork_id = "01a061c6-9780-73d0-e4f5-a6b7c8d9e0f1";
    for with_parent in [true, false] {
        let home = Home::new("import-fork");
        let _d = home.start();
        let parent = transcript(
            &home,
            &format!("codex/rollout-2026-09-02T10-00-00-{parent_id}.jsonl"),
        );
        let fork = transcript(
            &home,
            &format!("codex/rollout-2026-09-02T11-00-00-{fork_id}.jsonl"),
        );
        if !with_parent {
            std::fs::remove_file(&parent).unwrap();
        }
        let out = import_json(&home, &[fork.parent().unwrap().as_os_str()]);
        // The parent's header and its eight lines, copied at the fork.
        assert_eq!(not_stored(&out, "copied_from_parent"), 9, "{out}");
        let q = |sql: &str| home.count(sql);
        assert_eq!(
            q("SELECT COUNT(*) FROM prompts WHERE content = 'add an idempotency key to every refund we post'"),
            i64::from(with_parent),
            "the parent's prompt is stored once, with the parent, never with the fork"
        );
        assert_eq!(
            q(&format!(
                "SELECT COUNT(*) FROM prompts WHERE session_id = '{fork_id}'"
            )),
            1
        );
        // The fork's own turn, submitted within a second of the copy, is the fork's.
        assert_eq!(
            q(&format!("SELECT COUNT(*) FROM prompts WHERE session_id = '{fork_id}' AND content LIKE 'use the webhook event id%'")),
            1
        );
        assert_eq!(
            q(&format!("SELECT COUNT(*) FROM observations WHERE session_id = '{fork_id}' AND obs_type = 'file_edit'")),
            1
        );
        assert_eq!(
            q(&format!("SELECT COUNT(*) FROM observations WHERE session_id = '{fork_id}' AND content LIKE '%refunds.create%' AND obs_type != 'file_edit'")),
            0,
            "the parent's command is not the fork's"
        );
        assert_eq!(
            q("SELECT COUNT(*) FROM observations WHERE obs_type = 'turn_end' AND content LIKE 'One call site%'"),
            i64::from(with_parent)
        );
    }
}
