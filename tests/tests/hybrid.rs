//! Hybrid search end to end: a real nmemd, a model imported with `nmemctl model import` while it
//! runs, the backfill embedding what was stored, and searches by words, by meaning and both.
//!
//! The embedder is the hand-made one in `tests/fixtures/embedder/concepts.py` (it speaks the
//! `nmem-embed` protocol and maps synonyms to the same dimensions), so what "means the same"
//! is fixed by the test and not by a model's training; the tiny BERT folder is imported as the
//! model (same 32 dimensions). The real engine is tested in the `embed` crate.

use nmem_e2e::{fixtures, wait_until, Home};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

fn bash(n: usize, command: &str, stdout: &str) -> Vec<u8> {
    json!({
        "session_id": "hybrid-1",
        "cwd": "/home/dev/projects/shop",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": { "command": command },
        "tool_response": { "stdout": stdout, "stderr": "", "interrupted": false },
        "tool_use_id": format!("toolu_hybrid_{n}"),
    })
    .to_string()
    .into_bytes()
}

/// A home with nmemd started on the test embedder (`config` its config.toml, if any); `None`
/// (the test skipped, or failed under `NMEM_REQUIRE_ALL`) when python3 is not installed.
fn with_test_embedder(tag: &str, config: Option<&str>) -> Option<(Home, nmem_e2e::Daemon)> {
    if std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_err()
    {
        nmem_e2e::skip_unless_required("python3 runs the test embedder and is not installed");
        return None;
    }
    let home = Home::new(tag);
    if let Some(c) = config {
        std::fs::write(home.dir.join("config.toml"), c).unwrap();
    }
    let embedder = fixtures().join("embedder/concepts.py");
    let daemon = home.start_with(|c| {
        c.env("NMEM_EMBED_BIN", &embedder);
    });
    Some((home, daemon))
}

fn json_of(out: std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "exit {:?}\n{}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn search(home: &Home, query: &str, extra: &[&str]) -> Value {
    let mut args = vec!["search", query, "--project", "shop", "--json"];
    args.extend_from_slice(extra);
    json_of(home.cmd("nmem").args(&args).output().unwrap())
}

fn ids(reply: &Value) -> Vec<i64> {
    reply["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_i64().unwrap())
        .collect()
}

fn sources(reply: &Value, id: i64) -> Vec<String> {
    reply["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["id"] == id)
        .map(|h| {
            h["retrieval_sources"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["source"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn meaning_finds_what_words_miss_and_full_word_matches_stay_first() {
    let Some((home, _d)) = with_test_embedder("hybrid", None) else {
        return;
    };
    let events = [
        (
            "python jobs/export_orders.py",
            "pyarrow.lib.ArrowInvalid: Could not convert 'N/A' with type str in to_parquet",
        ),
        ("npm run lint", "0 problems"),
        ("pg_dump staging backup > staging.sql", "done"),
        (
            "./scripts/snapshot-preprod-db.sh",
            "snapshot of the preprod database written",
        ),
        ("cargo test", "ok"),
    ];
    for (n, (cmd, out)) in events.iter().enumerate() {
        assert!(home
            .record("claude-code", &bash(n, cmd, out))
            .status
            .success());
    }
    // Without a model: words only, and the reply says so.
    let before = search(&home, "what broke the scheduled data dump", &[]);
    assert_eq!(before["mode"], "lexical", "{before}");
    assert!(before["notes"][0]
        .as_str()
        .unwrap()
        .contains("nmemctl model import"));

    // Import while the daemon runs: it takes effect without a restart, and the backfill embeds
    // every stored row.
    let tiny = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../embed/testdata/tiny-bert");
    let import = home
        .cmd("nmemctl")
        .args(["model", "import"])
        .arg(&tiny)
        .output()
        .unwrap();
    assert!(
        import.status.success(),
        "{}",
        String::from_utf8_lossy(&import.stderr)
    );
    assert!(String::from_utf8_lossy(&import.stdout).contains("nmemd now searches with"));
    let status = || {
        json_of(
            home.cmd("nmemctl")
                .args(["status", "--json"])
                .output()
                .unwrap(),
        )
    };
    wait_until("every row to be embedded", Duration::from_secs(60), || {
        let e = &status()["embedding"];
        e["pending"] == 0 && e["embedded"].as_u64().unwrap_or(0) >= events.len() as u64
    });
    assert_eq!(
        home.count("SELECT COUNT(*) FROM obs_vectors"),
        home.count("SELECT COUNT(*) FROM observations"),
        "one vector per observation"
    );

    let export = ids(&search(&home, "ArrowInvalid", &["--mode", "lexical"]))[0];
    // A question in other words: lexical search misses it, hybrid finds it by meaning.
    let q = "what broke the scheduled data dump";
    let lexical = search(&home, q, &["--mode", "lexical"]);
    assert!(!ids(&lexical).contains(&export), "{lexical}");
    let hybrid = search(&home, q, &[]);
    assert_eq!(hybrid["mode"], "hybrid", "{hybrid}");
    assert!(!hybrid["query"]["model"].as_str().unwrap().is_empty());
    assert!(ids(&hybrid)[..3].contains(&export), "{hybrid}");
    assert!(sources(&hybrid, export).contains(&"semantic".to_string()));
    let semantic = search(&home, q, &["--mode", "semantic"]);
    assert_eq!(ids(&semantic)[0], export, "{semantic}");

    // A result matching every word stays above one found by meaning alone.
    let staging = ids(&search(&home, "pg_dump", &["--mode", "lexical"]))[0];
    let preprod = ids(&search(&home, "preprod", &["--mode", "lexical"]))[0];
    let both = search(&home, "staging backup", &[]);
    let order = ids(&both);
    let (s, p) = (
        order
            .iter()
            .position(|&i| i == staging)
            .expect("the word match"),
        order
            .iter()
            .position(|&i| i == preprod)
            .expect("the meaning match"),
    );
    assert!(s < p, "{both}");
    assert_eq!(sources(&both, preprod), ["semantic"], "{both}");
    assert!(sources(&both, staging).contains(&"lexical".to_string()));

    // Vectors go with their rows.
    let purge = home
        .cmd("nmemctl")
        .args(["purge", "--project", "shop", "--yes"])
        .output()
        .unwrap();
    assert!(
        purge.status.success(),
        "{}",
        String::from_utf8_lossy(&purge.stderr)
    );
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), 0);
    assert_eq!(home.count("SELECT COUNT(*) FROM obs_vectors"), 0);

    // Removing the model: words only again, said so.
    let id = status()["embedding"]["model"].as_str().unwrap().to_string();
    let rm = home
        .cmd("nmemctl")
        .args(["model", "remove", &id])
        .output()
        .unwrap();
    assert!(
        rm.status.success(),
        "{}",
        String::from_utf8_lossy(&rm.stderr)
    );
    assert_eq!(search(&home, "staging", &[])["mode"], "lexical");
}

/// A question in other words than both the record and its prompt's words, but close in meaning
/// to the prompt: the edit made under that prompt is found through it (the context of meaning,
/// `retrieval_sources` `context` with tier `meaning` and the prompt's id), by meaning alone.
#[test]
fn the_prompt_found_by_meaning_carries_the_actions_made_under_it() {
    // Off by default (it costs decision questions more than it gains: ARCHITECTURE.md's ablation).
    let Some((home, _d)) = with_test_embedder("hyctx", Some("[search]\nsemantic_context = true\n"))
    else {
        return;
    };
    let prompt = json!({
        "session_id": "hybrid-1",
        "prompt_id": "p-hybrid-1",
        "cwd": "/home/dev/projects/shop",
        "hook_event_name": "UserPromptSubmit",
        "prompt": "the nightly export crashed again: make it robust",
    });
    assert!(home
        .record("claude-code", prompt.to_string().as_bytes())
        .status
        .success());
    let edit = bash(
        1,
        "python3 tools/coerce_columns.py jobs/orders.py",
        "zip and sku columns now read as text",
    );
    assert!(home.record("claude-code", &edit).status.success());
    let tiny = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../embed/testdata/tiny-bert");
    let import = home
        .cmd("nmemctl")
        .args(["model", "import"])
        .arg(&tiny)
        .output()
        .unwrap();
    assert!(
        import.status.success(),
        "{}",
        String::from_utf8_lossy(&import.stderr)
    );
    wait_until("every row to be embedded", Duration::from_secs(60), || {
        let s = json_of(
            home.cmd("nmemctl")
                .args(["status", "--json"])
                .output()
                .unwrap(),
        );
        s["embedding"]["pending"] == 0 && s["embedding"]["embedded"].as_u64().unwrap_or(0) >= 2
    });
    let action = ids(&search(&home, "coerce_columns", &["--mode", "lexical"]))[0];
    let prompt_id = home.count("SELECT id FROM prompts WHERE source = 'user'");
    assert_eq!(
        home.count(&format!(
            "SELECT COUNT(*) FROM observations WHERE id = {action} AND prompt_id = {prompt_id}"
        )),
        1,
        "the action was made under the prompt"
    );
    // No word of the question is in the prompt or the action.
    let q = "scheduled dump broken";
    assert!(ids(&search(&home, q, &["--mode", "lexical"])).is_empty());
    let hybrid = search(&home, q, &[]);
    let item = hybrid["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["id"] == action && h["kind"] == "observation")
        .unwrap_or_else(|| panic!("the action is found: {hybrid}"));
    let via_prompt = item["retrieval_sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["source"] == "context")
        .unwrap_or_else(|| panic!("found through its prompt: {item}"));
    assert_eq!(via_prompt["tier"], "meaning", "{item}");
    assert_eq!(via_prompt["prompt_id"], prompt_id, "{item}");
    // Lexical mode has no meaning, so no context of meaning either.
    assert!(ids(&search(&home, q, &["--mode", "lexical"])).is_empty());
}

/// Document chunks are embedded by the backfill (after the observations) and found by meaning:
/// a question in other words than a chunk finds it in hybrid search where words miss it; a
/// re-ingest that changes the chunk deletes its vector (the new text is embedded again), and a
/// purge of the project deletes every chunk's vector.
#[test]
fn document_chunks_are_found_by_meaning_and_their_vectors_go_with_them() {
    let Some((home, _d)) = with_test_embedder("hydocs", None) else {
        return;
    };
    assert!(home
        .record("claude-code", &bash(1, "npm run lint", "0 problems"))
        .status
        .success());
    let runbook = home.dir.join("runbook.md");
    let ops = "## Operations\n\nEvery night cron copies the postgres database to the snapshot \
               bucket.\n";
    let lint = "## Linting\n\nRun npm run lint before pushing and fix every warning.\n";
    std::fs::write(&runbook, format!("# Runbook\n\n{ops}\n{lint}")).unwrap();
    let ingest = || {
        json_of(
            home.cmd("nmem")
                .args(["ingest", runbook.to_str().unwrap(), "--project", "shop"])
                .arg("--json")
                .output()
                .unwrap(),
        )
    };
    ingest();
    let tiny = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../embed/testdata/tiny-bert");
    let import = home
        .cmd("nmemctl")
        .args(["model", "import"])
        .arg(&tiny)
        .output()
        .unwrap();
    assert!(
        import.status.success(),
        "{}",
        String::from_utf8_lossy(&import.stderr)
    );
    let embedded = || {
        let s = json_of(
            home.cmd("nmemctl")
                .args(["status", "--json"])
                .output()
                .unwrap(),
        );
        s["embedding"]["pending"] == 0
            && home.count("SELECT COUNT(*) FROM doc_vectors")
                == home.count("SELECT COUNT(*) FROM doc_chunks")
            && home.count("SELECT COUNT(*) FROM obs_vectors") == 1
    };
    // The chunks ingested before the model was imported are its backlog.
    wait_until(
        "every chunk to be embedded",
        Duration::from_secs(60),
        embedded,
    );
    assert!(home.count("SELECT COUNT(*) FROM doc_chunks") >= 2);

    let chunk = search(&home, "postgres", &["--mode", "lexical", "--type", "doc"]);
    let chunk = ids(&chunk)[0];
    // No word of the question is in the chunk (nor a stem of one): words miss it.
    let q = "daily db backup";
    let lexical = search(&home, q, &["--mode", "lexical"]);
    assert!(!ids(&lexical).contains(&chunk), "{lexical}");
    let hybrid = search(&home, q, &[]);
    assert_eq!(hybrid["mode"], "hybrid", "{hybrid}");
    let docs: Vec<&Value> = hybrid["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["kind"] == "doc")
        .collect();
    assert_eq!(
        docs.first().map(|h| &h["id"]),
        Some(&json!(chunk)),
        "{hybrid}"
    );
    let via = docs[0]["retrieval_sources"].as_array().unwrap();
    assert_eq!(via.len(), 1, "{hybrid}");
    assert_eq!(via[0]["source"], "semantic", "{hybrid}");
    assert!(via[0]["similarity"].as_f64().unwrap() > 0.5, "{hybrid}");
    // The agent's own observation still comes first.
    assert_eq!(hybrid["items"][0]["kind"], "observation", "{hybrid}");
    // Asked for documents alone, by meaning alone.
    let semantic = search(&home, q, &["--mode", "semantic", "--type", "doc"]);
    assert_eq!(ids(&semantic)[0], chunk, "{semantic}");

    // The chunk's text changes: a re-ingest replaces it, its vector goes with it, and the new
    // chunk is embedded in turn.
    std::fs::write(
        &runbook,
        format!("# Runbook\n\n{}Keep seven of them.\n\n{lint}", ops),
    )
    .unwrap();
    let again = ingest();
    assert_eq!(again["sources"][0]["status"], "updated", "{again}");
    assert_eq!(
        home.count(&format!(
            "SELECT COUNT(*) FROM doc_chunks WHERE id = {chunk}"
        )),
        0
    );
    assert_eq!(
        home.count(&format!(
            "SELECT COUNT(*) FROM doc_vectors WHERE id = {chunk}"
        )),
        0,
        "the replaced chunk's vector is deleted with it"
    );
    wait_until(
        "the new chunk to be embedded",
        Duration::from_secs(60),
        embedded,
    );
    let found = ids(&search(&home, q, &["--mode", "semantic", "--type", "doc"]))[0];
    assert_ne!(found, chunk);
    assert!(
        home.count(&format!(
            "SELECT COUNT(*) FROM doc_chunks WHERE id = {found} AND content LIKE '%seven%'"
        )) == 1
    );

    // A purge of the project takes the chunks' vectors.
    assert!(home.count("SELECT COUNT(*) FROM doc_vectors") > 0);
    let purge = home
        .cmd("nmemctl")
        .args(["purge", "--project", "shop", "--yes"])
        .output()
        .unwrap();
    assert!(
        purge.status.success(),
        "{}",
        String::from_utf8_lossy(&purge.stderr)
    );
    assert_eq!(home.count("SELECT COUNT(*) FROM doc_chunks"), 0);
    assert_eq!(home.count("SELECT COUNT(*) FROM doc_vectors"), 0);
}

/// A row holds one vector: a second model's backfill replaces the first's. When the first model
/// is active again (the second removed), the rows whose vector the second replaced are embedded
/// again with it, and those still holding its vector are not.
#[test]
fn a_model_active_again_after_another_embeds_the_rows_the_other_replaced() {
    let Some((home, _d)) = with_test_embedder("hymodels", None) else {
        return;
    };
    for (n, cmd) in [
        "cargo build",
        "npm run lint",
        "pg_dump staging",
        "make test",
    ]
    .iter()
    .enumerate()
    {
        assert!(home
            .record("claude-code", &bash(n, cmd, "ok"))
            .status
            .success());
    }
    let rows = home.count("SELECT COUNT(*) FROM observations");
    assert!(rows >= 4);
    // Vectors of the active model, and what status says is left.
    let active_vectors = || {
        home.count(
            "SELECT COUNT(*) FROM obs_vectors v JOIN embed_models m ON m.id = v.model \
             WHERE m.active = 1",
        )
    };
    let status = || {
        json_of(
            home.cmd("nmemctl")
                .args(["status", "--json"])
                .output()
                .unwrap(),
        )
    };
    let import = |dir: &std::path::Path| {
        let out = home
            .cmd("nmemctl")
            .args(["model", "import"])
            .arg(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        status()["embedding"]["model"].as_str().unwrap().to_string()
    };
    let tiny = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../embed/testdata/tiny-bert");
    let first = import(&tiny);
    wait_until(
        "the first model to embed every row",
        Duration::from_secs(60),
        || active_vectors() == rows,
    );
    // Another model: the same files with one weight changed (so another id).
    let other = home.dir.join("other-model");
    std::fs::create_dir_all(&other).unwrap();
    for f in ["config.json", "tokenizer.json", "model.safetensors"] {
        std::fs::copy(tiny.join(f), other.join(f)).unwrap();
    }
    let weights = other.join("model.safetensors");
    let mut bytes = std::fs::read(&weights).unwrap();
    let header = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    bytes[8 + header] ^= 1; // the first weight's lowest mantissa bit
    std::fs::write(&weights, bytes).unwrap();
    let second = import(&other);
    assert_ne!(first, second);
    wait_until(
        "the second model to embed every row",
        Duration::from_secs(60),
        || active_vectors() == rows,
    );
    assert_eq!(
        home.count(&format!(
            "SELECT COUNT(*) FROM obs_vectors v JOIN embed_models m ON m.id = v.model \
             WHERE m.name = '{first}'"
        )),
        0,
        "the second model's vectors replaced the first's"
    );
    // The second goes: the first is active again, and embeds every row again.
    let rm = home
        .cmd("nmemctl")
        .args(["model", "remove", &second])
        .output()
        .unwrap();
    assert!(
        rm.status.success(),
        "{}",
        String::from_utf8_lossy(&rm.stderr)
    );
    assert_eq!(status()["embedding"]["model"], first.as_str());
    wait_until(
        "the first model to embed again the rows the second replaced",
        Duration::from_secs(60),
        || active_vectors() == rows && status()["embedding"]["pending"] == 0,
    );
}
