//! The embedding model itself: BERT on candle, the way sentence-transformers runs
//! all-MiniLM-L6-v2 (tokenize, truncate to 256 tokens, BERT, mean over the real tokens, L2
//! normalise). Only the `nmem-embed` binary links this (feature `engine`), so candle and the
//! tokenizer stay out of `nmemd`.
//!
//! * Tokenisation and the token limit: [`crate::tokenize`], shared with the ONNX engine.
//! * Weights are mapped from `model.safetensors` and copied into tensors; the map is released
//!   once the model is built. Names with or without a `bert.` prefix both load.
//! * Texts are encoded one by one, sorted by length and run in batches of up to 32 padded to the
//!   longest, with an attention mask; pooling ignores the padding, so a text's vector does not
//!   depend on its batch beyond float rounding (≤ 1e-6).
//! * Threads: candle's matrix products use `RAYON_NUM_THREADS` threads (default: one per
//!   core). `nmem-embed` sets it to 1 unless told otherwise (`--threads`): a query is a few
//!   milliseconds on one core, and the child should not compete with the agent's own work.
//!   With one thread the output is bit-for-bit deterministic.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};

use crate::tokenize::WordPiece;
pub use crate::tokenize::MAX_TOKENS;
use crate::{model, EmbedError, Embedder};
/// Texts per forward pass.
const BATCH: usize = 32;

/// A BERT sentence embedder loaded from a model folder.
pub struct BertEmbedder {
    model: BertModel,
    tokenizer: WordPiece,
    id: String,
    dim: usize,
    device: Device,
}

impl BertEmbedder {
    /// Load `config.json`, `tokenizer.json` and `model.safetensors` from `dir`.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let (tokenizer, shape) = WordPiece::load(dir)?;
        let config_path = dir.join("config.json");
        let config_bytes = std::fs::read(&config_path)
            .map_err(|e| EmbedError::io(format!("reading {}", config_path.display()), e))?;
        let config: Config = serde_json::from_slice(&config_bytes)
            .map_err(|e| EmbedError::Model(format!("{}: {e}", config_path.display())))?;

        let weights = dir.join("model.safetensors");
        let device = Device::Cpu;
        // SAFETY: the map lives only until `BertModel::load` has copied every tensor out of it
        // (the VarBuilder is dropped at the end of this statement), and model folders are never
        // rewritten in place: imports rename new folders in, removals rename old ones out.
        let model =
            unsafe { VarBuilder::from_mmaped_safetensors(&[&weights], DType::F32, &device) }
                .and_then(|vb| BertModel::load(vb, &config))
                .map_err(|e| EmbedError::Model(format!("{}: {e}", weights.display())))?;

        Ok(BertEmbedder {
            model,
            tokenizer,
            id: model::identify(dir)?,
            dim: shape.hidden_size,
            device,
        })
    }

    /// Most tokens per text, [CLS] and [SEP] included; longer texts are truncated.
    pub fn max_tokens(&self) -> usize {
        self.tokenizer.max_tokens()
    }

    /// Token ids of `text` as the model sees them: [CLS] … [SEP], truncated.
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>, EmbedError> {
        self.tokenizer.tokenize(text)
    }

    /// Vectors of already tokenized texts, in order.
    pub fn embed_ids(&self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| ids[i].len());
        let mut out = vec![Vec::new(); ids.len()];
        for chunk in order.chunks(BATCH) {
            let batch: Vec<&[u32]> = chunk.iter().map(|&i| ids[i].as_slice()).collect();
            let vectors = self
                .forward(&batch)
                .map_err(|e| EmbedError::Engine(e.to_string()))?;
            for (&i, v) in chunk.iter().zip(vectors) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    /// One padded batch through BERT, mean pooling over the mask, L2 normalisation.
    fn forward(&self, batch: &[&[u32]]) -> candle_core::Result<Vec<Vec<f32>>> {
        let len = batch.iter().map(|ids| ids.len()).max().unwrap_or(0);
        let mut flat_ids = Vec::with_capacity(batch.len() * len);
        let mut flat_mask = Vec::with_capacity(batch.len() * len);
        for ids in batch {
            flat_ids.extend_from_slice(ids);
            flat_ids.extend(std::iter::repeat_n(0u32, len - ids.len()));
            flat_mask.extend(std::iter::repeat_n(1u32, ids.len()));
            flat_mask.extend(std::iter::repeat_n(0u32, len - ids.len()));
        }
        let shape = (batch.len(), len);
        let input_ids = Tensor::from_vec(flat_ids, shape, &self.device)?;
        let mask = Tensor::from_vec(flat_mask, shape, &self.device)?;
        let token_types = input_ids.zeros_like()?;
        let hidden = self.model.forward(&input_ids, &token_types, Some(&mask))?; // (b, len, dim)

        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (b, len, 1)
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?; // (b, dim)
        let counts = mask.sum(1)?; // (b, 1), at least 2: [CLS] and [SEP]
        let mean = summed.broadcast_div(&counts)?;
        let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?.maximum(1e-12)?;
        mean.broadcast_div(&norms)?.to_vec2::<f32>()
    }
}

impl crate::child::ChildModel for BertEmbedder {
    fn max_tokens(&self) -> usize {
        BertEmbedder::max_tokens(self)
    }

    fn tokenize(&self, text: &str) -> Result<Vec<u32>, EmbedError> {
        BertEmbedder::tokenize(self, text)
    }
}

impl Embedder for BertEmbedder {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let ids = texts
            .iter()
            .map(|t| self.tokenize(t))
            .collect::<Result<Vec<_>, _>>()?;
        self.embed_ids(&ids)
    }
}
