//! The real `nmem-embed-onnx` binary driven through `EmbedChild`, as nmemd drives it: on the
//! committed tiny BERT (embed/testdata/tiny-bert, its ONNX form in tiny-bert-onnx, written by
//! scripts/export-onnx.py) against the golden vectors computed independently in numpy
//! (embed/testdata/golden.json, the ones the candle engine is tested against), and its errors
//! when ONNX Runtime or the ONNX model is missing.
//!
//! ONNX Runtime is `NMEM_ORT_DYLIB` (scripts/test points it at the copy scripts/build-onnx
//! installs); without it the tests that need it skip, or fail under NMEM_REQUIRE_ALL=1.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use nmem_embed::protocol::EmbedChild;
use nmem_embed::{cosine, Embedder};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_nmem-embed-onnx");
const READY: Duration = Duration::from_secs(60);

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../embed/testdata")
}

/// A temporary model folder: the tiny BERT, with its ONNX form when `onnx`.
struct TinyModel(PathBuf);

impl TinyModel {
    fn new(name: &str, onnx: bool) -> TinyModel {
        let dir =
            std::env::temp_dir().join(format!("nmem-embed-onnx-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for f in ["config.json", "tokenizer.json", "model.safetensors"] {
            std::fs::copy(testdata().join("tiny-bert").join(f), dir.join(f)).unwrap();
        }
        if onnx {
            std::fs::copy(
                testdata().join("tiny-bert-onnx/model.int8.onnx"),
                dir.join("model.int8.onnx"),
            )
            .unwrap();
        }
        TinyModel(dir)
    }
}

impl Drop for TinyModel {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// ONNX Runtime's library, or None (the test then skips, unless every test must run).
fn runtime() -> Option<PathBuf> {
    let found = std::env::var_os("NMEM_ORT_DYLIB")
        .map(PathBuf::from)
        .filter(|p| p.is_file());
    if found.is_none() {
        let why = "ONNX Runtime is not there (set NMEM_ORT_DYLIB; scripts/build-onnx installs it)";
        if std::env::var("NMEM_REQUIRE_ALL").as_deref() == Ok("1") {
            panic!("{why}, and NMEM_REQUIRE_ALL=1 requires every test to run");
        }
        eprintln!("skipped: {why}");
    }
    found
}

fn spawn(model: &Path, runtime: &Path) -> Result<EmbedChild, nmem_embed::EmbedError> {
    // EmbedChild passes this process's environment on: the runtime's path goes through it, so
    // tests (threads of one process) take turns while a child starts.
    static ENV: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ENV.lock().unwrap_or_else(|e| e.into_inner());
    std::env::set_var("NMEM_ORT_DYLIB", runtime);
    EmbedChild::spawn(Path::new(BIN), model, READY)
}

#[test]
fn vectors_match_the_golden_ones_and_ids_are_the_same() {
    let Some(rt) = runtime() else { return };
    let model = TinyModel::new("golden", true);
    let golden: Value =
        serde_json::from_slice(&std::fs::read(testdata().join("golden.json")).unwrap()).unwrap();
    let cases = golden["cases"].as_array().unwrap();
    let mut child = spawn(&model.0, &rt).unwrap();
    assert_eq!(child.dim(), golden["dim"].as_u64().unwrap() as usize);
    assert_eq!(
        child.max_tokens(),
        golden["max_tokens"].as_u64().unwrap() as usize
    );
    let texts: Vec<&str> = cases.iter().map(|c| c["text"].as_str().unwrap()).collect();
    let vectors = Embedder::embed(&mut child, &texts).unwrap();
    for (v, case) in vectors.iter().zip(cases) {
        let want: Vec<f32> = case["vector"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        let norm = cosine(v, v).sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "not normalised: {norm}");
        let cos = cosine(v, &want);
        assert!(
            cos >= 0.99,
            "cosine {cos} with the golden vector of {:?}",
            case["text"]
        );
    }
    // A text alone and in a batch get the same vector (padding does not leak into pooling).
    let alone = Embedder::embed(&mut child, &texts[..1]).unwrap();
    assert!(cosine(&alone[0], &vectors[0]) > 0.9999);

    // The same token ids as the candle engine: `--embed` prints them.
    for case in cases {
        let out = Command::new(BIN)
            .arg("--model-dir")
            .arg(&model.0)
            .arg("--embed")
            .arg(case["text"].as_str().unwrap())
            .env("NMEM_ORT_DYLIB", &rt)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["ids"], case["ids"], "{:?}", case["text"]);
    }
}

#[test]
fn a_missing_runtime_is_a_clear_error() {
    let model = TinyModel::new("noruntime", true);
    let err = spawn(&model.0, Path::new("/nonexistent/libonnxruntime.so"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("ONNX Runtime not found at /nonexistent/libonnxruntime.so")
            && err.contains("scripts/build-onnx"),
        "{err}"
    );
}

#[test]
fn a_model_without_its_onnx_form_says_how_to_get_it() {
    let model = TinyModel::new("noonnx", false);
    let rt = runtime().unwrap_or_else(|| PathBuf::from("/nonexistent/libonnxruntime.so"));
    let err = spawn(&model.0, &rt).unwrap_err().to_string();
    assert!(
        err.contains("has no model.int8.onnx") && err.contains("scripts/fetch-model"),
        "{err}"
    );
}

#[test]
fn help_is_accurate() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for word in [
        "nmem-embed-onnx",
        "--model-dir",
        "--embed",
        "--bench",
        "--threads",
        "NMEM_ORT_DYLIB",
        "PROTOCOL",
    ] {
        assert!(help.contains(word), "--help lacks {word}: {help}");
    }
    let bad = Command::new(BIN).arg("--bogus").output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("see nmem-embed-onnx --help"));
}
