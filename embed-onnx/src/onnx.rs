//! The ONNX Runtime session behind [`nmem_embed::child::ChildModel`].

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use nmem_embed::child::{self, ChildModel};
use nmem_embed::tokenize::WordPiece;
use nmem_embed::{model, EmbedError, Embedder};
use ort::ep::CPU;
use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use ort::value::Tensor;

/// The ONNX Runtime library's file name, looked for beside this binary unless
/// `--runtime`/`NMEM_ORT_DYLIB` says where.
const RUNTIME_FILE: &str = "libonnxruntime.so";
/// Texts per forward pass (as the candle engine).
const BATCH: usize = 32;

/// Followed by `child::HELP_COMMON` (the protocol) when printed.
const HELP: &str = "\
nmem-embed-onnx: nmem's sentence-embedding process on ONNX Runtime (BERT as an ONNX graph).

nmemd starts it on demand and stops it when idle ([embed] engine = \"onnx\", the default when it
is installed); you do not need to run it yourself. It answers like nmem-embed (candle, fp32):
same tokens, the same vectors with the fp32 graph (model.fp32.onnx, preferred), within cosine
0.99 of them with the int8 one (model.int8.onnx, used when there is no fp32 graph); about twice
as fast as candle with fp32, four times with int8. The graph in use is printed on stderr at load.

USAGE:
    nmem-embed-onnx --model-dir DIR                 serve vectors on stdin/stdout (nmemd's protocol)
    nmem-embed-onnx --model-dir DIR --embed TEXT    print TEXT's token ids and vector as JSON
    nmem-embed-onnx --model-dir DIR --bench         print latency, throughput and memory figures

OPTIONS:
    --model-dir DIR   a model folder: tokenizer.json, config.json, model.safetensors and
                      model.fp32.onnx or model.int8.onnx (scripts/fetch-model --onnx derives
                      the first, --onnx-int8 the second; nmemctl model import copies them along)
    --threads N       compute threads (default 1, or RAYON_NUM_THREADS when set)
    -h, --help        this text
    -V, --version     the version

ENVIRONMENT:
    NMEM_ORT_DYLIB    the ONNX Runtime library (default: libonnxruntime.so beside this binary)

";

pub fn main() -> ExitCode {
    child::main("nmem-embed-onnx", HELP, OnnxEmbedder::load)
}

/// BERT as an ONNX graph (fp32, or int8): token ids and mask in, sentence vectors out.
pub struct OnnxEmbedder {
    session: Session,
    tokenizer: WordPiece,
    id: String,
    dim: usize,
}

impl OnnxEmbedder {
    /// Load ONNX Runtime, the tokenizer and the preferred ONNX graph ([`model::onnx_graph`])
    /// from `dir`.
    pub fn load(dir: &Path, threads: usize) -> Result<OnnxEmbedder, EmbedError> {
        if cfg!(target_feature = "crt-static") {
            // dlopen from a statically linked glibc program can crash in the loaded library.
            return Err(EmbedError::Engine(
                "this nmem-embed-onnx is statically linked and cannot load ONNX Runtime; build it \
                 with scripts/build-onnx (nmemd then uses nmem-embed meanwhile)"
                    .into(),
            ));
        }
        let (tokenizer, shape) = WordPiece::load(dir)?;
        let Some(graph) = model::onnx_graph(dir) else {
            return Err(EmbedError::Model(format!(
                "{} has no {} (nor {}): derive it with scripts/fetch-model --onnx and import the \
                 folder it prints (nmemctl model import DIR), or set [embed] engine = \"candle\"",
                dir.display(),
                model::ONNX_FP32_FILE,
                model::ONNX_INT8_FILE
            )));
        };
        let onnx = dir.join(graph);
        // Which graph runs decides the vectors' accuracy and the memory: say so in the log
        // (nmemd's, where a served child's stderr goes) and before `--bench`'s figures.
        eprintln!("nmem-embed-onnx: running {}", onnx.display());
        let runtime = runtime_path();
        if !runtime.is_file() {
            return Err(EmbedError::Engine(format!(
                "ONNX Runtime not found at {}: install it with scripts/build-onnx, set \
                 NMEM_ORT_DYLIB, or set [embed] engine = \"candle\"",
                runtime.display()
            )));
        }
        let engine = |e: &dyn std::fmt::Display| EmbedError::Engine(format!("ONNX Runtime: {e}"));
        let env = ort::init_from(&runtime)
            .map_err(|e| {
                EmbedError::Engine(format!(
                    "cannot load ONNX Runtime from {}: {e}",
                    runtime.display()
                ))
            })?
            .with_name("nmem-embed-onnx")
            .with_telemetry(false)
            .build()
            .map_err(|e| engine(&e))?;
        let session = Session::builder(&env)
            .map_err(|e| engine(&e))?
            .with_optimization_level(GraphOptimizationLevel::Level3)
            .map_err(|e| engine(&e))?
            .with_intra_threads(threads)
            .map_err(|e| engine(&e))?
            .with_inter_threads(1)
            .map_err(|e| engine(&e))?
            // Idle worker threads must not spin: the machine is the agent's, not ours.
            .with_intra_op_spinning(false)
            .map_err(|e| engine(&e))?
            // No CPU arena: it keeps the largest batch's buffers for good. `--bench`, interleaved
            // at load 7: RSS after its 422 embeddings 156 MB with it, 82-97 MB without; CPU per
            // query 2.5-2.6 ms with, 2.6-2.9 ms without; per batch of 32, 470-490 / 530-560 ms.
            .with_execution_providers([CPU::default().with_arena_allocator(false).build()])
            .map_err(|e| engine(&e))?
            .commit_from_file(&onnx)
            .map_err(|e| EmbedError::Model(format!("{}: {e}", onnx.display())))?;
        Ok(OnnxEmbedder {
            session,
            tokenizer,
            id: model::identify(dir)?,
            dim: shape.hidden_size,
        })
    }

    /// Vectors of already tokenized texts, in order.
    pub fn embed_ids(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| ids[i].len());
        let mut out = vec![Vec::new(); ids.len()];
        for chunk in order.chunks(BATCH) {
            let batch: Vec<&[u32]> = chunk.iter().map(|&i| ids[i].as_slice()).collect();
            for (&i, v) in chunk.iter().zip(self.forward(&batch)?) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    /// One batch padded to its longest text; pooling in the graph ignores the padding.
    fn forward(&mut self, batch: &[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let len = batch.iter().map(|ids| ids.len()).max().unwrap_or(0);
        let mut flat_ids = Vec::with_capacity(batch.len() * len);
        let mut flat_mask = Vec::with_capacity(batch.len() * len);
        for ids in batch {
            flat_ids.extend(ids.iter().map(|&id| i64::from(id)));
            flat_ids.extend(std::iter::repeat_n(0i64, len - ids.len()));
            flat_mask.extend(std::iter::repeat_n(1i64, ids.len()));
            flat_mask.extend(std::iter::repeat_n(0i64, len - ids.len()));
        }
        let engine = |e: ort::Error| EmbedError::Engine(format!("ONNX Runtime: {e}"));
        let shape = [batch.len(), len];
        let ids = Tensor::from_array((shape, flat_ids)).map_err(engine)?;
        let mask = Tensor::from_array((shape, flat_mask)).map_err(engine)?;
        let outputs = self
            .session
            .run(ort::inputs!["input_ids" => ids, "attention_mask" => mask])
            .map_err(engine)?;
        let (out_shape, values) = outputs["sentence_embedding"]
            .try_extract_tensor::<f32>()
            .map_err(engine)?;
        if out_shape.len() != 2
            || out_shape[0] as usize != batch.len()
            || out_shape[1] as usize != self.dim
        {
            return Err(EmbedError::Engine(format!(
                "the ONNX model returned shape {out_shape:?}, expected [{}, {}]",
                batch.len(),
                self.dim
            )));
        }
        Ok(values.chunks_exact(self.dim).map(<[f32]>::to_vec).collect())
    }
}

/// `NMEM_ORT_DYLIB`, else `libonnxruntime.so` beside this binary.
fn runtime_path() -> PathBuf {
    if let Some(p) = std::env::var_os("NMEM_ORT_DYLIB").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join(RUNTIME_FILE)))
        .unwrap_or_else(|| PathBuf::from(RUNTIME_FILE))
}

impl Embedder for OnnxEmbedder {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let ids = texts
            .iter()
            .map(|t| self.tokenizer.tokenize(t))
            .collect::<Result<Vec<_>, _>>()?;
        self.embed_ids(&ids)
    }
}

impl ChildModel for OnnxEmbedder {
    fn max_tokens(&self) -> usize {
        self.tokenizer.max_tokens()
    }

    fn tokenize(&self, text: &str) -> Result<Vec<u32>, EmbedError> {
        self.tokenizer.tokenize(text)
    }
}
