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
    for e in hook_events_from_transcript(&transcript, t.to_str().unwrap()) {
        let mut v: serde_json::Value = serde_json::from_slice(&e).unwrap();
        if v["hook_event_name"] == "UserPromptSubmit" {
            // Live payloads carry the prompt's id, as the transcript line does.
            let line = transcript
                .lines()
                .find(|l| l.contains(v["prompt"].as_str().unwrap().get(..30).unwrap()))
                .unwrap();
            let lv: serde_json::Value = serde_json::from_str(line).unwrap();
            v["prompt_id"] = lv["promptId"].clone();
        }
        assert!(home
            .record("claude-code", v.to_string().as_bytes())
            .status
            .success());
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
    let out = import(&home, &[&dir]);
    assert!(out.contains("2 skipped"), "{out}");
    assert_eq!(home.count("SELECT COUNT(*) FROM prompts"), 1);
    assert_eq!(
        home.count("SELECT COUNT(*) FROM prompts WHERE content LIKE '%[REDACTED:github_token]%'"),
        1
    );
}
