//! Which embedder nmemd runs: `nmem-embed-onnx` (ONNX Runtime; the fp32 graph when the model
//! has it, else the int8 one, as status and `nmemctl model list` say) by default when it is
//! installed beside nmemd, `nmem-embed` (candle) when `[embed] engine = "candle"`, and candle,
//! with the reason in `nmemctl status`, when the ONNX one cannot start (its runtime missing).
//!
//! Real nmemd, real embedders (both must be built: `scripts/build-onnx` puts nmem-embed-onnx
//! and libonnxruntime.so into NMEM_BIN_DIR), the committed tiny BERT and its ONNX form
//! (embed/testdata/tiny-bert, tiny-bert-onnx) imported with `nmemctl model import`.

use nmem_e2e::{bin, wait_until, Home};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../embed/testdata")
}

/// The tiny BERT with its fp32 ONNX graph, as scripts/fetch-model --onnx lays out the real one.
fn tiny_with_onnx(home: &Home) -> PathBuf {
    tiny_with_graphs(home, &["model.fp32.onnx"])
}

/// The tiny BERT with the ONNX graphs named.
fn tiny_with_graphs(home: &Home, graphs: &[&str]) -> PathBuf {
    let dir = home.dir.join("tiny-onnx-src");
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["config.json", "tokenizer.json", "model.safetensors"] {
        std::fs::copy(testdata().join("tiny-bert").join(f), dir.join(f)).unwrap();
    }
    for g in graphs {
        std::fs::copy(testdata().join("tiny-bert-onnx").join(g), dir.join(g)).unwrap();
    }
    dir
}

/// `nmemctl model list`, human and `--json`.
fn model_list(home: &Home) -> (String, Value) {
    let human = home
        .cmd("nmemctl")
        .args(["model", "list"])
        .output()
        .unwrap();
    let json = home
        .cmd("nmemctl")
        .args(["model", "list", "--json"])
        .output()
        .unwrap();
    assert!(human.status.success() && json.status.success());
    (
        String::from_utf8_lossy(&human.stdout).into_owned(),
        serde_json::from_slice(&json.stdout).unwrap(),
    )
}

/// Both embedders and the runtime are there, or the test skips (fails under NMEM_REQUIRE_ALL).
fn engines_present() -> bool {
    let missing: Vec<&str> = ["nmem-embed", "nmem-embed-onnx", "libonnxruntime.so"]
        .into_iter()
        .filter(|b| !bin(b).is_file())
        .collect();
    if missing.is_empty() {
        return true;
    }
    nmem_e2e::skip_unless_required(&format!(
        "{} not built (cargo build --features nmem-embed/engine; scripts/build-onnx)",
        missing.join(", ")
    ));
    false
}

/// `nmemctl status --json`. A degraded status (exit 2) is still read: on a loaded machine a
/// probe can miss its deadline while the embedder starts ("not answering"), and a poll should
/// then look again rather than fail; the caller's conditions decide.
fn status(home: &Home) -> Value {
    let out = home
        .cmd("nmemctl")
        .args(["status", "--json"])
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 2)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    if out.status.code() == Some(2) {
        eprintln!("status degraded: {}", s["degraded"]);
    }
    s
}

/// Import the model, record one event, wait until it is embedded; the status's embedding part.
fn embed_one(home: &Home, model: &Path) -> Value {
    let import = home
        .cmd("nmemctl")
        .args(["model", "import"])
        .arg(model)
        .output()
        .unwrap();
    assert!(
        import.status.success(),
        "{}",
        String::from_utf8_lossy(&import.stderr)
    );
    assert!(home
        .record("claude-code", &nmem_e2e::bash_event("engine-1", 1))
        .status
        .success());
    wait_until("the event to be embedded", Duration::from_secs(60), || {
        let e = &status(home)["embedding"];
        e["pending"] == 0 && e["embedded"].as_u64().unwrap_or(0) >= 1 && e["engine"].is_string()
    });
    assert_eq!(home.count("SELECT COUNT(*) FROM obs_vectors"), 1);
    status(home)["embedding"].clone()
}

#[test]
fn onnx_is_the_default_engine_when_installed() {
    if !engines_present() {
        return;
    }
    let home = Home::new("eng-onnx");
    let _d = home.start();
    let e = embed_one(&home, &tiny_with_onnx(&home));
    assert_eq!(e["engine"], "onnx", "{e}");
    assert_eq!(e["onnx_graph"], "model.fp32.onnx", "{e}");
    assert!(e.get("engine_fallback").is_none(), "{e}");
    // The imported model carries its ONNX form.
    let model = e["model"].as_str().unwrap();
    assert!(home
        .dir
        .join("models")
        .join(model)
        .join("model.fp32.onnx")
        .is_file());
    // Status and the model list say which graph runs.
    let human = home.cmd("nmemctl").arg("status").output().unwrap();
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(human.contains("engine onnx (model.fp32.onnx)"), "{human}");
    let (list, json) = model_list(&home);
    assert!(list.contains("model.fp32.onnx"), "{list}");
    assert_eq!(json[0]["onnx_graph"], "model.fp32.onnx", "{json}");
}

#[test]
fn an_int8_only_model_runs_its_int8_graph_and_says_so() {
    if !engines_present() {
        return;
    }
    let home = Home::new("eng-int8");
    let _d = home.start();
    let e = embed_one(&home, &tiny_with_graphs(&home, &["model.int8.onnx"]));
    assert_eq!(e["engine"], "onnx", "{e}");
    assert_eq!(e["onnx_graph"], "model.int8.onnx", "{e}");
    let (list, json) = model_list(&home);
    assert!(list.contains("model.int8.onnx"), "{list}");
    assert_eq!(json[0]["onnx_graph"], "model.int8.onnx", "{json}");
}

#[test]
fn a_missing_runtime_falls_back_to_candle_and_says_why() {
    if !engines_present() {
        return;
    }
    let home = Home::new("eng-fallback");
    let _d = home.start_with(|c| {
        c.env("NMEM_ORT_DYLIB", "/nonexistent/libonnxruntime.so");
    });
    let e = embed_one(&home, &tiny_with_onnx(&home));
    assert_eq!(e["engine"], "candle", "{e}");
    let why = e["engine_fallback"].as_str().unwrap_or_default();
    assert!(
        why.contains("ONNX Runtime not found at /nonexistent/libonnxruntime.so"),
        "{e}"
    );
    let human = home.cmd("nmemctl").arg("status").output().unwrap();
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(
        human.contains("engine candle") && human.contains("not the ONNX engine: "),
        "{human}"
    );
}

#[test]
fn a_model_without_its_onnx_form_falls_back_to_candle() {
    if !engines_present() {
        return;
    }
    let home = Home::new("eng-noonnx");
    let _d = home.start();
    let e = embed_one(&home, &testdata().join("tiny-bert"));
    assert_eq!(e["engine"], "candle", "{e}");
    assert!(
        e["engine_fallback"]
            .as_str()
            .unwrap_or_default()
            .contains("has no model.fp32.onnx (nor model.int8.onnx)"),
        "{e}"
    );
}

#[test]
fn engine_candle_in_the_config_is_obeyed() {
    if !engines_present() {
        return;
    }
    let home = Home::new("eng-candle");
    std::fs::write(&home.paths.config, "[embed]\nengine = \"candle\"\n").unwrap();
    let _d = home.start();
    let e = embed_one(&home, &tiny_with_onnx(&home));
    assert_eq!(e["engine"], "candle", "{e}");
    assert!(e.get("engine_fallback").is_none(), "{e}");
    // Candle runs model.safetensors: no ONNX graph is named.
    assert!(e.get("onnx_graph").is_none(), "{e}");
}

#[test]
fn an_unknown_engine_is_refused_by_name() {
    let home = Home::new("eng-bad");
    std::fs::write(&home.paths.config, "[embed]\nengine = \"tensorflow\"\n").unwrap();
    let out = home.cmd("nmemd").output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("tensorflow") && err.contains("onnx"), "{err}");
}
