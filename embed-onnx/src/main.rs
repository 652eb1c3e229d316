//! `nmem-embed-onnx`: nmem's embedder on ONNX Runtime, with the model quantised to int8
//! (`model.int8.onnx`, derived from the model's own weights by scripts/export-onnx.py).
//!
//! The same child as `nmem-embed` for everything but the model: the protocol, `--embed` and
//! `--bench` are `nmem_embed::child`, the tokenizer is `nmem_embed::tokenize` (same ids), the
//! graph computes the same mean-pooled, L2-normalised BERT vector (cosine with candle's fp32
//! vectors ≥ 0.99, checked by the export script and by this crate's tests).
//!
//! Why a separate binary: ONNX Runtime is a C++ shared library (`libonnxruntime.so`, taken from
//! PyPI's `onnxruntime` wheel) loaded with `dlopen` (ort's `load-dynamic`), and nmem's other
//! binaries are linked statically (+crt-static), where `dlopen` is not safe. This one binary is
//! built dynamically linked (scripts/build-onnx), and a static build refuses to start, so nmemd
//! falls back to `nmem-embed` with a clear message rather than crashing.

mod onnx;

fn main() -> std::process::ExitCode {
    onnx::main()
}
