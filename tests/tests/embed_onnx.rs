//! The real `nmem-embed-onnx` binary (from NMEM_BIN_DIR, where scripts/build-onnx puts it)
//! driven through `EmbedChild`, as nmemd drives it: on the
//! committed tiny BERT (embed/testdata/tiny-bert, its ONNX graphs, fp32 and int8, in
//! tiny-bert-onnx, written by scripts/export-onnx.py) against the golden vectors computed
//! independently in plain Python (embed/testdata/golden.json, the ones the candle engine is tested
//! against), which graph it runs when a folder has both, and its errors when ONNX Runtime or
//! the ONNX graph is missing.
//!
//! ONNX Runtime is `NMEM_ORT_DYLIB`, else the `libonnxruntime.so` scripts/build-onnx installs
//! beside the binary; without them the tests skip, or fail under NMEM_REQUIRE_ALL=1.
//!
//! These run with the workspace's tests (not `cargo test -p nmem-embed-onnx`): the binary is
//! built once, dynamically, by scripts/build-onnx, and a test build of its crate would rebuild
//! every dependency with `panic = unwind` in that second target folder.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use nmem_e2e::bin;
use nmem_embed::protocol::EmbedChild;
use nmem_embed::{cosine, Embedder};
use serde_json::Value;

const READY: Duration = Duration::from_secs(60);

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../embed/testdata")
}

/// The embedder binary, or None (the test then skips, unless every test must run).
fn binary() -> Option<PathBuf> {
    let b = bin("nmem-embed-onnx");
    if b.is_file() {
        return Some(b);
    }
    nmem_e2e::skip_unless_required("nmem-embed-onnx is not built (scripts/build-onnx)");
    None
}

/// A temporary model folder: the tiny BERT, with the ONNX graphs named in `graphs`.
struct TinyModel(PathBuf);

const FP32: &str = "model.fp32.onnx";
const INT8: &str = "model.int8.onnx";

impl TinyModel {
    fn new(name: &str, graphs: &[&str]) -> TinyModel {
        let dir =
            std::env::temp_dir().join(format!("nmem-embed-onnx-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for f in ["config.json", "tokenizer.json", "model.safetensors"] {
            std::fs::copy(testdata().join("tiny-bert").join(f), dir.join(f)).unwrap();
        }
        for g in graphs {
            std::fs::copy(testdata().join("tiny-bert-onnx").join(g), dir.join(g)).unwrap();
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
    // Read under the lock `spawn` holds while it points the variable elsewhere for one child.
    let set = {
        let _turn = ENV.lock().unwrap_or_else(|e| e.into_inner());
        std::env::var_os("NMEM_ORT_DYLIB")
    };
    let found = set
        .map(PathBuf::from)
        .unwrap_or_else(|| bin("libonnxruntime.so"));
    if found.is_file() {
        return Some(found);
    }
    nmem_e2e::skip_unless_required(
        "ONNX Runtime is not there (scripts/build-onnx installs it beside nmem-embed-onnx, or set NMEM_ORT_DYLIB)",
    );
    None
}

fn spawn(bin: &Path, model: &Path, runtime: &Path) -> Result<EmbedChild, nmem_embed::EmbedError> {
    // EmbedChild passes this process's environment on: the runtime's path goes through it, so
    // tests (threads of one process) take turns while a child starts, and the variable is put
    // back afterwards (another test's `runtime()` reads the one scripts/test set).
    let _turn = ENV.lock().unwrap_or_else(|e| e.into_inner());
    let before = std::env::var_os("NMEM_ORT_DYLIB");
    std::env::set_var("NMEM_ORT_DYLIB", runtime);
    let child = EmbedChild::spawn(bin, model, READY);
    match before {
        Some(v) => std::env::set_var("NMEM_ORT_DYLIB", v),
        None => std::env::remove_var("NMEM_ORT_DYLIB"),
    }
    child
}

/// Guards this process's environment (see `spawn`).
static ENV: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Embed golden.json's texts with the graph `graph` and check them against the golden vectors:
/// each within `min_cosine`, and a text alone within `alone_cosine` of itself in the batch.
fn check_golden(graph: &str, min_cosine: f32, alone_cosine: f32) {
    let (Some(exe), Some(rt)) = (binary(), runtime()) else {
        return;
    };
    let model = TinyModel::new(&format!("golden-{graph}"), &[graph]);
    let golden: Value =
        serde_json::from_slice(&std::fs::read(testdata().join("golden.json")).unwrap()).unwrap();
    let cases = golden["cases"].as_array().unwrap();
    let mut child = spawn(&exe, &model.0, &rt).unwrap();
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
            cos >= min_cosine,
            "{graph}: cosine {cos} with the golden vector of {:?}",
            case["text"]
        );
    }
    // A text alone and in a batch get the same vector (padding does not leak into pooling).
    let alone = Embedder::embed(&mut child, &texts[..1]).unwrap();
    let same = cosine(&alone[0], &vectors[0]);
    assert!(
        same > alone_cosine,
        "{graph}: cosine {same} between a text alone and in a batch"
    );

    // The same token ids as the candle engine: `--embed` prints them.
    for case in cases {
        let out = Command::new(&exe)
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
fn fp32_vectors_are_the_golden_ones_and_ids_are_the_same() {
    // The fp32 graph is BERT exactly: only float rounding separates it from the golden vectors.
    check_golden(FP32, 0.9999, 0.99999);
}

#[test]
fn int8_vectors_match_the_golden_ones_and_ids_are_the_same() {
    // Not bit for bit alone and in a batch: the int8 graph quantises activations with a scale
    // taken over the whole batch (dynamic quantisation), so a batch moves a vector by about 1e-4
    // in cosine; padding leaking into the pooling would move it by far more.
    check_golden(INT8, 0.99, 0.999);
}

#[test]
fn the_fp32_graph_is_preferred_and_the_int8_one_is_the_fallback() {
    let (Some(exe), Some(rt)) = (binary(), runtime()) else {
        return;
    };
    let graph_run = |model: &TinyModel| {
        let out = Command::new(&exe)
            .arg("--model-dir")
            .arg(&model.0)
            .args(["--embed", "the nightly export crashed"])
            .env("NMEM_ORT_DYLIB", &rt)
            .output()
            .unwrap();
        assert!(out.status.success());
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let vector: Vec<f32> = v["vector"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        (err, vector)
    };
    let both = TinyModel::new("both", &[FP32, INT8]);
    let (err, from_both) = graph_run(&both);
    assert!(
        err.contains(&format!("running {}", both.0.join(FP32).display())),
        "{err}"
    );
    let fp32 = TinyModel::new("fp32", &[FP32]);
    let int8 = TinyModel::new("int8", &[INT8]);
    let (_, from_fp32) = graph_run(&fp32);
    let (err, from_int8) = graph_run(&int8);
    assert!(
        err.contains(&format!("running {}", int8.0.join(INT8).display())),
        "{err}"
    );
    // The vectors say the same: with both graphs there, the fp32 graph's vector comes back.
    assert_eq!(from_both, from_fp32);
    assert_ne!(from_both, from_int8);
}

#[test]
fn a_missing_runtime_is_a_clear_error() {
    let Some(exe) = binary() else { return };
    let model = TinyModel::new("noruntime", &[FP32]);
    let err = spawn(&exe, &model.0, Path::new("/nonexistent/libonnxruntime.so"))
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
    let Some(exe) = binary() else { return };
    let model = TinyModel::new("noonnx", &[]);
    let rt = runtime().unwrap_or_else(|| PathBuf::from("/nonexistent/libonnxruntime.so"));
    let err = spawn(&exe, &model.0, &rt).unwrap_err().to_string();
    assert!(
        err.contains("has no model.fp32.onnx (nor model.int8.onnx)")
            && err.contains("scripts/fetch-model --onnx"),
        "{err}"
    );
}

#[test]
fn help_is_accurate() {
    let Some(exe) = binary() else { return };
    let out = Command::new(&exe).arg("--help").output().unwrap();
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
    let bad = Command::new(&exe).arg("--bogus").output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("see nmem-embed-onnx --help"));
}
