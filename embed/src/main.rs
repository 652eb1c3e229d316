//! `nmem-embed`: the process that holds the embedding model (candle, fp32), so `nmemd` does not
//! have to.
//!
//! `nmemd` starts it with `--model-dir` and speaks the protocol of `nmem_embed::protocol` over
//! its stdin and stdout; stderr is its log. `--embed` and `--bench` are for people. Everything
//! but the model is `nmem_embed::child`, shared with `nmem-embed-onnx`.

use std::process::ExitCode;

use nmem_embed::child;
use nmem_embed::engine::BertEmbedder;

/// Followed by `child::HELP_COMMON` (the protocol) when printed.
const HELP: &str = "\
nmem-embed: nmem's sentence-embedding process (BERT, e.g. all-MiniLM-L6-v2; candle, fp32).

nmemd starts it on demand and stops it when idle; you do not need to run it yourself.
nmem-embed-onnx, when installed, is the faster int8 engine ([embed] engine in config.toml).

USAGE:
    nmem-embed --model-dir DIR                 serve vectors on stdin/stdout (nmemd's protocol)
    nmem-embed --model-dir DIR --embed TEXT    print TEXT's token ids and vector as JSON
    nmem-embed --model-dir DIR --bench         print latency, throughput and memory figures

OPTIONS:
    --model-dir DIR   a model folder: model.safetensors, tokenizer.json, config.json
                      (nmemctl model import puts them under the models folder)
    --threads N       compute threads (default 1, or RAYON_NUM_THREADS when set)
    -h, --help        this text
    -V, --version     the version

";

fn main() -> ExitCode {
    child::main("nmem-embed", HELP, |dir, threads| {
        // Before any thread exists: candle sizes its matrix products from these.
        std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
        std::env::set_var("CANDLE_NUM_THREADS", threads.to_string());
        BertEmbedder::load(dir)
    })
}
