//! Which events `POST /v1/events` may prepare on an async worker ([`Ingest::disk_free`]), and
//! that preparing them there gives exactly what the drainers' full [`Ingest::prepare`] gives.

use super::*;
use crate::ingest::project::Strategy as Lookup;
use proptest::prelude::*;

fn ingest() -> Ingest {
    Ingest::new(
        ProjectResolver::new(Lookup::GitRoot),
        Redactor::new(&[]).0,
        Box::new(|_| 0),
    )
}

fn raw(harness: Harness, payload: &Value) -> RawEvent {
    RawEvent {
        event_id: "ev-route-1".into(),
        received_at: 1_790_000_000_000,
        harness,
        payload: payload.to_string().into_bytes(),
    }
}

fn bash(event: &str, cwd: &str, transcript: Option<&str>) -> Value {
    let mut v = serde_json::json!({
        "session_id": "s-route",
        "cwd": cwd,
        "hook_event_name": event,
        "source": "startup",
        "tool_name": "Bash",
        "tool_input": {"command": "cargo test -p billing"},
        "tool_response": {"stdout": "test result: ok. 12 passed", "stderr": "", "interrupted": false},
        "tool_use_id": "toolu_route_1"
    });
    if let Some(t) = transcript {
        v["transcript_path"] = Value::from(t);
    }
    v
}

/// Whether `payload` may be prepared on a worker, with its project cached or not.
fn free(ing: &Ingest, harness: Harness, payload: &Value) -> bool {
    let r = raw(harness, payload);
    ing.disk_free(&r, &ing.parse(&r).unwrap()).is_some()
}

/// What reads the disk goes to the drainers: a transcript to tail, a project not yet looked
/// up, a SessionStart (its branch). The rest may stay on the worker.
#[test]
fn only_events_that_read_nothing_from_disk_stay_on_the_worker() {
    let ing = ingest();
    let cwd = "/home/dev/projects/billing";
    let transcript = Some("/home/dev/.claude/projects/billing/s-route.jsonl");
    let cc = Harness::ClaudeCode;
    // A project never seen: its git root would be looked up.
    assert!(!free(&ing, cc, &bash("PostToolUse", cwd, None)));
    ing.projects.resolve(cwd);
    assert!(free(&ing, cc, &bash("PostToolUse", cwd, None)));
    // Claude Code tails its transcript: every event that names a usable one reads it.
    assert!(!free(&ing, cc, &bash("PostToolUse", cwd, transcript)));
    assert!(!free(&ing, cc, &bash("UserPromptSubmit", cwd, transcript)));
    // A path the tailer would refuse is never opened.
    assert!(free(
        &ing,
        cc,
        &bash("PostToolUse", cwd, Some("relative/s.jsonl"))
    ));
    assert!(free(
        &ing,
        cc,
        &bash("PostToolUse", cwd, Some("/tmp/../etc/x.jsonl"))
    ));
    // A SessionStart reads the branch, whatever the harness.
    assert!(!free(&ing, cc, &bash("SessionStart", cwd, None)));
    assert!(!free(
        &ing,
        Harness::Codex,
        &bash("SessionStart", cwd, None)
    ));
    // Codex names a transcript but nmem does not tail it.
    assert!(free(
        &ing,
        Harness::Codex,
        &bash("PostToolUse", cwd, transcript)
    ));
    assert!(!free(
        &ing,
        Harness::Codex,
        &bash("PostToolUse", "/elsewhere", transcript)
    ));
    // What fails before any lookup fails on the worker too (nothing is read to find it).
    assert!(free(&ing, cc, &serde_json::json!({"cwd": cwd})));
    assert!(free(&ing, cc, &serde_json::json!([1, 2])));
}

/// An event naming a transcript a drainer has just read is prepared on the worker, reading the
/// transcript's growth through the drainer's descriptor, and gives what a drainer gives.
#[test]
fn a_transcript_a_drainer_just_read_is_read_on_the_worker_as_on_a_drainer() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("s-route.jsonl");
    let thought = |id: &str, text: &str| {
        format!(
            "{{\"type\":\"assistant\",\"sessionId\":\"s-route\",\"uuid\":\"u-{id}\",\"timestamp\":\"2026-08-20T09:14:07.630Z\",\"message\":{{\"id\":\"{id}\",\"content\":[{{\"type\":\"thinking\",\"thinking\":\"{text}\"}}]}}}}\n"
        )
    };
    std::fs::write(&path, thought("m1", "the billing test fails on rounding")).unwrap();
    if !reasoning::on_local_disk(&std::fs::File::open(&path).unwrap()) {
        eprintln!("skipped: the temporary folder is not on a local file system, where only drainers read transcripts");
        return;
    }
    let cwd = "/home/dev/projects/billing";
    let payload = bash("PostToolUse", cwd, Some(path.to_str().unwrap()));
    let r = raw(Harness::ClaudeCode, &payload);
    let watching = || {
        let mut ing = ingest();
        ing.tailer = reasoning::Tailer::watching_for(std::time::Duration::from_secs(3600));
        ing.projects.resolve(cwd);
        ing
    };
    let (here, drainer) = (watching(), watching());
    let parsed = here.parse(&r).unwrap();
    assert!(
        here.disk_free(&r, &parsed).is_none(),
        "nobody has read it yet"
    );
    for ing in [&here, &drainer] {
        let first = ing.prepare(&r).unwrap().unwrap();
        assert_eq!(first.thoughts.len(), 1);
    }
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut f, thought("m2", "round half to even").as_bytes()).unwrap();
    let free = here.disk_free(&r, &parsed).expect("read on the worker");
    let on_worker = here
        .prepare_parsed(&r, &parsed, Some(free))
        .unwrap()
        .unwrap();
    assert_eq!(
        on_worker
            .thoughts
            .iter()
            .map(|t| t.content.as_str())
            .collect::<Vec<_>>(),
        ["round half to even"]
    );
    let on_drainer = drainer.prepare(&r).unwrap().unwrap();
    assert_eq!(format!("{on_worker:?}"), format!("{on_drainer:?}"));
}

/// Both ways of preparing `payload`, each on a fresh `Ingest` (plans and private turns are
/// per instance) with the project cached: `None` when it would go to a drainer.
fn both_ways(harness: Harness, payload: &[u8]) -> Option<(String, String)> {
    let r = RawEvent {
        payload: payload.to_vec(),
        ..raw(harness, &Value::Null)
    };
    let (a, b) = (ingest(), ingest());
    let parsed = a.parse(&r).ok()?;
    if let Some(cwd) = parsed.get("cwd").and_then(Value::as_str) {
        a.projects.resolve(cwd);
        b.projects.resolve(cwd);
    }
    let free = a.disk_free(&r, &parsed)?;
    let here = a.prepare_parsed(&r, &parsed, Some(free));
    let full = b.prepare(&r);
    Some((format!("{here:?}"), format!("{full:?}")))
}

/// Every hook fixture that may be prepared on a worker gives there what `prepare` gives.
#[test]
fn every_fixture_prepared_on_the_worker_is_what_prepare_gives() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hooks");
    let mut here = 0;
    let mut total = 0;
    for (dir, harness) in [
        ("claude-code", Harness::ClaudeCode),
        ("codex", Harness::Codex),
        ("cursor", Harness::Cursor),
        ("gemini", Harness::Gemini),
    ] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_none_or(|x| x != "json") {
                continue;
            }
            total += 1;
            if let Some((a, b)) = both_ways(harness, &std::fs::read(&path).unwrap()) {
                assert_eq!(a, b, "{}", path.display());
                here += 1;
            }
        }
    }
    // Most non-Claude events stay on the worker; Claude Code's name their transcript.
    assert!(here > 20 && here < total, "{here} of {total} on the worker");
}

fn event_name() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "PostToolUse",
        "PostToolUseFailure",
        "PreToolUse",
        "UserPromptSubmit",
        "Stop",
        "SessionEnd",
        "SessionStart",
        "Notification",
        "bogus",
    ])
}

proptest! {
    /// Whatever the payload, an event judged disk-free prepares on the worker exactly as on a
    /// drainer, and no stored SessionStart or event with a transcript to tail is judged so.
    #[test]
    fn worker_and_drainer_agree_on_any_payload(
        event in event_name(),
        cwd in "(/[a-z]{1,8}){0,3}/?",
        transcript in prop::option::of("(/|\\.\\./)?[a-z]{1,6}(\\.jsonl)?"),
        command in "\\PC{0,200}",
        harness in prop::sample::select(vec![Harness::ClaudeCode, Harness::Codex, Harness::Gemini]),
    ) {
        let mut v = bash(event, &cwd, transcript.as_deref());
        v["tool_input"]["command"] = Value::from(command);
        let r = raw(harness, &v);
        let ing = ingest();
        ing.projects.resolve(&cwd);
        let free = ing.disk_free(&r, &ing.parse(&r).unwrap()).is_some();
        let tails = harness == Harness::ClaudeCode
            && transcript.as_deref().is_some_and(|t| reasoning::safe_transcript_path(t).is_some());
        // An event that gets as far as storing something would read the branch or the
        // transcript (one the harness ignores, e.g. Claude Code's PreToolUse, reads nothing).
        let stores = matches!(ingest().prepare(&r), Ok(Some(_)));
        if (event == "SessionStart" || tails) && stores {
            prop_assert!(!free);
        }
        if let Some((a, b)) = both_ways(harness, &r.payload) {
            prop_assert_eq!(a, b);
        }
    }
}
