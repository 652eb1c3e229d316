//! Helpers shared by the integration tests: temporary folders, the committed tiny model, wheels.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A folder under the system's temporary folder, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("nmem-embed-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata")
}

pub fn tiny_model() -> PathBuf {
    testdata().join("tiny-bert")
}

pub struct Case {
    pub text: String,
    pub ids: Vec<u32>,
    pub vector: Vec<f32>,
}

pub struct Golden {
    pub dim: usize,
    pub max_tokens: usize,
    pub cases: Vec<Case>,
}

pub fn golden() -> Golden {
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(testdata().join("golden.json")).unwrap()).unwrap();
    let cases = v["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Case {
            text: c["text"].as_str().unwrap().to_owned(),
            ids: c["ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap() as u32)
                .collect(),
            vector: c["vector"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect(),
        })
        .collect();
    Golden {
        dim: v["dim"].as_u64().unwrap() as usize,
        max_tokens: v["max_tokens"].as_u64().unwrap() as usize,
        cases,
    }
}

pub fn assert_close(got: &[f32], want: &[f32], tolerance: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tolerance,
            "{what}: component {i} is {g}, expected {w}"
        );
    }
}

/// A wheel-like zip at `path` holding `files` (name in the zip, bytes); deflated or stored.
pub fn write_zip(path: &Path, files: &[(&str, Vec<u8>)], deflate: bool) {
    use zip::write::SimpleFileOptions;
    let method = if deflate {
        zip::CompressionMethod::Deflated
    } else {
        zip::CompressionMethod::Stored
    };
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    for (name, bytes) in files {
        zip.start_file(
            *name,
            SimpleFileOptions::default().compression_method(method),
        )
        .unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap();
}

/// The tiny model's three files, read from the repository.
pub fn tiny_files() -> Vec<(&'static str, Vec<u8>)> {
    ["config.json", "tokenizer.json", "model.safetensors"]
        .into_iter()
        .map(|f| (f, std::fs::read(tiny_model().join(f)).unwrap()))
        .collect()
}

/// Copy the tiny model's files into `dir` (created).
pub fn copy_tiny(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, bytes) in tiny_files() {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}
