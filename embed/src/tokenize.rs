//! The WordPiece tokenizer of a model folder, as both engines use it (candle in `nmem-embed`,
//! ONNX Runtime in `nmem-embed-onnx`): the same `tokenizer.json`, the same truncation, so the
//! same ids reach either model.
//!
//! * The tokenizer comes from the model's `tokenizer.json` (HF `tokenizers`, pure-Rust regex
//!   backend); its own truncation and padding settings are replaced: the real file says 128 and
//!   fixed padding, sentence-transformers uses 256 and pads per batch.
//! * The token limit is the smallest of 256, the model's `max_position_embeddings` and
//!   sentence-transformers' `max_seq_length` (`sentence_bert_config.json`) when present.

use std::path::Path;

use serde_json::Value;
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::{model, EmbedError};

/// sentence-transformers' `max_seq_length` for all-MiniLM-L6-v2, and nmem's cap for any model.
pub const MAX_TOKENS: usize = 256;

/// A model folder's tokenizer with nmem's truncation.
pub struct WordPiece {
    tokenizer: Tokenizer,
    max_tokens: usize,
}

impl WordPiece {
    /// Check that `dir` holds a model (every file of [`model::REQUIRED_FILES`]), read its
    /// `config.json` and load its tokenizer. Returns the tokenizer and the BERT shape.
    pub fn load(dir: &Path) -> Result<(WordPiece, model::BertShape), EmbedError> {
        let missing: Vec<&str> = model::REQUIRED_FILES
            .iter()
            .copied()
            .filter(|f| !dir.join(f).is_file())
            .collect();
        if !missing.is_empty() {
            return Err(EmbedError::Model(format!(
                "{} is not a model folder: {} missing; import a model with `nmemctl model import`",
                dir.display(),
                missing.join(", ")
            )));
        }
        let config_path = dir.join("config.json");
        let config_bytes = std::fs::read(&config_path)
            .map_err(|e| EmbedError::io(format!("reading {}", config_path.display()), e))?;
        let shape = model::parse_bert_config(&config_bytes, &config_path.display().to_string())?;

        let mut max_tokens = MAX_TOKENS.min(shape.max_position_embeddings);
        if let Some(n) = sentence_transformers_limit(dir) {
            max_tokens = max_tokens.min(n);
        }
        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| EmbedError::Model(format!("{}: {e}", tokenizer_path.display())))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
                direction: TruncationDirection::Right,
            }))
            .map_err(|e| EmbedError::Model(format!("{}: {e}", tokenizer_path.display())))?;
        tokenizer.with_padding(None);
        Ok((
            WordPiece {
                tokenizer,
                max_tokens,
            },
            shape,
        ))
    }

    /// Most tokens per text, [CLS] and [SEP] included; longer texts are truncated.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Token ids of `text` as the model sees them: [CLS] … [SEP], truncated.
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>, EmbedError> {
        let encoding = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| EmbedError::Engine(format!("tokenizer: {e}")))?;
        Ok(encoding.get_ids().to_vec())
    }
}

/// `max_seq_length` from sentence-transformers' `sentence_bert_config.json`, if there is one.
fn sentence_transformers_limit(dir: &Path) -> Option<usize> {
    let bytes = std::fs::read(dir.join("sentence_bert_config.json")).ok()?;
    let v: Value = serde_json::from_slice(&bytes).ok()?;
    v.get("max_seq_length")
        .and_then(Value::as_u64)
        .filter(|&n| n >= 2)
        .map(|n| n as usize)
}
