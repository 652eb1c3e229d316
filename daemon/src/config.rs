//! `config.toml`: every key optional, unknown keys rejected by name (a typo should not be
//! silently ignored). See `config.example.toml` at the repository root.

use crate::ingest::project::Strategy;
use crate::redact::ExtraPattern;
use serde::Deserialize;
use std::path::Path;

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub spool: SpoolConfig,
    pub dedup: DedupConfig,
    pub project: ProjectConfig,
    pub redact: RedactConfig,
    pub writer: WriterConfig,
    pub capture: CaptureConfig,
    pub digest: DigestConfig,
    pub retention: RetentionConfig,
    pub search: SearchConfig,
    pub embed: EmbedConfig,
    pub limits: LimitsConfig,
    pub http: HttpConfig,
    pub sync: SyncConfig,
}

/// `[sync]`: the PostgreSQL server that syncs this home with the user's other devices
/// (docs/sync.md). Nothing is sent anywhere until `nmem sync enable` or `join`.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct SyncConfig {
    /// `postgresql://user[:password]@host[:port]/database`, or the `key=value` form. TLS is
    /// required unless the host is a loopback address or a Unix socket folder. `enable`/`join`
    /// `--url` take precedence; then this; then `NMEM_SYNC_URL` in nmemd's environment.
    pub url: Option<String>,
    /// A file whose first line is the password (kept out of the URL and config.toml).
    pub password_file: Option<std::path::PathBuf>,
}

/// `[http]`: the web viewer's listener (`nmem ui`). Off unless asked for; loopback only unless
/// `allow_remote` says otherwise.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// Listen from the start, without waiting for `nmem ui`.
    pub enabled: bool,
    /// The port asked for; a free one is taken when it is in use.
    pub port: u16,
    /// The address to listen on: a loopback address unless `allow_remote = true`.
    pub bind: String,
    /// Allow `bind` to be a non-loopback address (anyone who can reach it and has the token
    /// reads the whole memory): logged as a warning.
    pub allow_remote: bool,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            enabled: false,
            port: 37777,
            bind: "127.0.0.1".into(),
            allow_remote: false,
        }
    }
}

/// Bounds on what one client, or all of them together, can make the daemon hold or do. Every
/// request runs within them; past one, the client gets a clear error and nothing is stored.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Connections served at once; past it the connection idle the longest is closed for the new
    /// one. Never more than the descriptor limit allows (less a reserve for files).
    pub max_connections: usize,
    /// A request's head must arrive within this many seconds of the connection opening or of
    /// the previous reply: an idle or stalled connection is closed after it.
    pub header_timeout_secs: u64,
    /// A request's body must arrive whole within this many seconds.
    pub body_timeout_secs: u64,
    /// The largest request body accepted.
    pub max_body_mb: u64,
    /// Request bodies held at once, across all connections; a request waits (up to the body
    /// timeout) for room before its body is read.
    pub max_bytes_in_flight_mb: u64,
    /// Time budget of one query (search, timeline, digest, …), in milliseconds; a query past it
    /// is interrupted and the client told to narrow it.
    pub query_timeout_ms: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_connections: 256,
            header_timeout_secs: 10,
            body_timeout_secs: 30,
            max_body_mb: 64,
            max_bytes_in_flight_mb: 128,
            query_timeout_ms: 2000,
        }
    }
}

/// How search fuses its sources (weighted reciprocal rank fusion). The defaults were measured on
/// the eval (`scripts/eval`); change them to compare, not to tune one question.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SearchConfig {
    /// The RRF constant: a source's result at rank r adds weight / (k + r).
    pub rrf_k: f64,
    /// Weight of results matching every word of the query.
    pub weight_all_words: f64,
    /// Weight of results matching every meaningful word (question words dropped).
    pub weight_meaningful_words: f64,
    /// Weight of results matching any of the words.
    pub weight_any_word: f64,
    /// Weight of observations made under a prompt whose words match.
    pub weight_context: f64,
    /// Weight of results found by their meaning (embeddings).
    pub weight_semantic: f64,
    /// Weight of the identifier words (`parseInvoiceTotal` → parse invoice total) in BM25,
    /// relative to the text itself.
    pub weight_identifiers: f64,
    /// Match a query's words against the prompts observations were made under.
    pub context: bool,
    /// Match `camelCase` query terms against their parts.
    pub split_identifiers: bool,
    /// Keep results matching every word above those found by meaning alone (a bonus equal to
    /// the best semantic contribution).
    pub all_words_first: bool,
    /// Weight of results matching all but one meaningful word (queries of 3 to 6 words).
    pub weight_most_words: f64,
    /// Rank every candidate by its similarity to the query, not only the nearest rows: a
    /// lexical match close in meaning gains the semantic source's vote too (on by default since
    /// the third pass: it closed the temporal gap with lexical; ARCHITECTURE.md, the ablation).
    pub semantic_all: bool,
    /// Move a result whose type and opening text repeat a better one's (the same command run
    /// three times) below the distinct results.
    pub collapse_repeats: bool,
    /// Factor on the fused score of observations that record looking (a file read, a search,
    /// a listing) rather than doing: they mention what a question names without answering it.
    pub weight_looking: f64,
    /// Factor on the fused score of observations that record what the agent is about to do (a
    /// plan, a sub-agent's task): they restate a question's words before any outcome exists.
    pub weight_planning: f64,
    /// Among edits of one file in the results, the newest takes the best place any of them
    /// holds: a later edit supersedes what an earlier one wrote.
    pub newest_edit_first: bool,
    /// Factor on the looser lexical tiers (most words, any word) and the prompt context when no
    /// result matches every meaningful word and embeddings found some: the question is phrased
    /// in other words than the record, so meaning should decide more.
    pub weight_loose_unmatched: f64,
    /// A lexical result counts once, at the strictest tier that found it (a row matching every
    /// word is not counted again by each looser tier, which outvoted the other sources).
    pub best_tier_only: bool,
    /// The observations made under the prompts the semantic source found (and under the turns
    /// whose closing summary it found) count as context too: a question put in other words than
    /// the record still reaches an edit through the intent it served.
    pub semantic_context: bool,
    /// Weight of the context meaning found (`semantic_context`).
    pub weight_meaning_context: f64,
    /// The context meaning found counts only when no result matched every meaningful word (a
    /// question in other words than the record); otherwise the words' own context decides.
    pub meaning_context_unmatched_only: bool,
    /// Shell commands that only look (`cat`, `sed -n`, `rg`, `git log`, `git diff`, ...) count as
    /// looking (`weight_looking`): a listing of commits or a file's lines names what a question
    /// names, the change itself is recorded on its own row.
    pub looking_commands: bool,
    /// Factor on the fused score of user prompts: a prompt restates a question's words, while
    /// its answer is in what was done under it (which the context source carries).
    pub weight_prompt: f64,
    /// Factor on the fused score of closing summaries (turn ends, sub-agent results, compaction
    /// summaries): they retell a turn in prose, its facts (paths, values, errors) are in the
    /// actions.
    pub weight_summary: f64,
    /// Factor on the fused score of session markers (start, resume, end, compaction): they
    /// record that a session happened, not what it did.
    pub weight_session: f64,
    /// Read the kind of fact the query asks for from its words (a failure, a change, a command,
    /// a decision: `query/intent.rs`) and give rows of that kind the factor `weight_kind`.
    pub question_kinds: bool,
    /// Factor on the fused score of rows of the kind the query asks for (`question_kinds`).
    pub weight_kind: f64,
    /// When the query asks about one state only ("first", "originally", "before"; or "now",
    /// "currently"), the places held by changes of one file hold them oldest (or newest) first,
    /// like `newest_edit_first` but in the direction the question asks. Off: measured, it costs
    /// temporal and knowledge-update questions (ARCHITECTURE.md, the ablation).
    pub question_order: bool,
    /// How much a semantic result's vote follows its similarity rather than its rank, 0 to 1:
    /// `weight × ((1 − s) / (k + rank) + s × g / (k + 1))`, where g places the similarity
    /// between the list's lowest (0) and highest (1). With 0 (pure reciprocal rank) the 20th
    /// nearest row, barely closer than anything else in the project, votes almost as much as
    /// the first; with 1 it votes nothing.
    pub semantic_scale: f64,
    /// The same for the lexical tiers, with g a result's BM25 score over its tier's best: a
    /// far better word match keeps more of its lead over the next than its rank alone gives.
    pub lexical_scale: f64,
    /// Factor on the tier matching all meaningful words but one when nothing matched every
    /// meaningful word and embeddings found rows (in place of `weight_loose_unmatched`, which
    /// then applies to the any-word tier and the context): a row naming all but one of the
    /// query's words is still strong evidence.
    pub weight_most_unmatched: f64,
    /// Factor on the fused score of rows found by meaning alone (no word of the query, no
    /// prompt context) when some row matched every meaningful word: the record uses the
    /// query's words, so a row holding none of them is rarely what was asked for (the mirror
    /// of `weight_loose_unmatched`). 1 turns it off.
    pub weight_meaning_only: f64,
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            rrf_k: 60.0,
            weight_all_words: 1.0,
            weight_meaningful_words: 0.5,
            weight_any_word: 0.2,
            weight_context: 0.5,
            weight_semantic: 1.0,
            weight_identifiers: 0.5,
            context: true,
            split_identifiers: true,
            all_words_first: true,
            weight_most_words: 0.5,
            semantic_all: true,
            collapse_repeats: true,
            weight_looking: 0.7,
            weight_planning: 0.7,
            newest_edit_first: false,
            weight_loose_unmatched: 0.25,
            best_tier_only: false,
            semantic_context: false,
            weight_meaning_context: 0.25,
            meaning_context_unmatched_only: false,
            looking_commands: true,
            weight_prompt: 1.0,
            weight_summary: 0.7,
            weight_session: 0.5,
            question_kinds: true,
            weight_kind: 1.25,
            question_order: false,
            semantic_scale: 0.0,
            lexical_scale: 0.0,
            weight_most_unmatched: 0.25,
            weight_meaning_only: 1.0,
        }
    }
}

/// The embedding model's child process.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmbedConfig {
    /// Use an installed embedding model (hybrid search); false keeps search lexical.
    pub enabled: bool,
    /// Stop the embedder after this many idle seconds (its memory is released).
    pub idle_secs: u64,
    /// Memory for the in-memory vector codes of recently searched projects.
    pub cache_mb: u64,
    /// Which embedder runs the model: `onnx` (`nmem-embed-onnx` on ONNX Runtime: the
    /// model's fp32 graph, about 2x less CPU per query than candle, or its int8 graph when only
    /// that is installed, 4x) or `candle` (`nmem-embed`, fp32). With `onnx`, nmemd uses
    /// `nmem-embed` instead, and logs why, when the ONNX one is not installed or cannot start.
    pub engine: Engine,
}

/// `[embed] engine`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    Onnx,
    Candle,
}

impl Default for EmbedConfig {
    fn default() -> Self {
        EmbedConfig {
            enabled: true,
            idle_secs: 300,
            cache_mb: 16,
            engine: Engine::Onnx,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetentionConfig {
    /// Days to keep each observation type (and `user_prompt`, `agent_reasoning`), overriding the
    /// defaults: `max_age_days = { command = 365, file_read = 30 }`.
    pub max_age_days: std::collections::HashMap<String, i64>,
    /// Whether idle maintenance applies those ages by itself (pinned rows always stay).
    pub sweep: bool,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            max_age_days: Default::default(),
            sweep: true,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct CaptureConfig {
    /// Projects (by name, as nmem names them) never recorded and never given a digest.
    pub exclude_projects: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DigestConfig {
    /// Lines of the SessionStart digest.
    pub max_lines: usize,
    /// Characters of the digest; never more than 9,000 (Claude Code's limit is 10,000).
    pub max_chars: usize,
}

impl Default for DigestConfig {
    fn default() -> Self {
        let d = crate::context::DigestLimits::default();
        DigestConfig {
            max_lines: d.max_lines,
            max_chars: d.max_chars,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SpoolConfig {
    /// The spool's size bound; the oldest events go first past it.
    pub max_bytes: u64,
    /// Events older than this are dropped from the spool.
    pub max_age_days: u64,
    /// How often an idle daemon looks at the spool.
    pub drain_interval_ms: u64,
}

impl Default for SpoolConfig {
    fn default() -> Self {
        SpoolConfig {
            max_bytes: 256 * 1024 * 1024,
            max_age_days: 30,
            drain_interval_ms: 1000,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DedupConfig {
    /// Repeated reads and searches within this many seconds are counted, not stored (0: off).
    pub window_secs: u64,
}

impl Default for DedupConfig {
    fn default() -> Self {
        DedupConfig { window_secs: 300 }
    }
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct ProjectConfig {
    pub strategy: Strategy,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct RedactConfig {
    /// Extra patterns: `[[redact.patterns]] name = "…" regex = "…"`.
    pub patterns: Vec<ExtraPattern>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WriterConfig {
    /// Events queued for the writer before new ones wait.
    pub queue_capacity: usize,
}

impl Default for WriterConfig {
    fn default() -> Self {
        WriterConfig {
            queue_capacity: 8192,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not valid: {message}")]
    Invalid { path: String, message: String },
}

impl Config {
    /// Load the file if it exists; a missing file means the defaults.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.display().to_string(),
                    source,
                })
            }
        };
        Config::parse(&text).map_err(|message| ConfigError::Invalid {
            path: path.display().to_string(),
            message,
        })
    }

    /// Parse and check the text of a config file; the error names the key and what to write.
    pub fn parse(text: &str) -> Result<Config, String> {
        let c: Config =
            toml::from_str(text).map_err(|e| e.to_string().trim().replace('\n', " "))?;
        // A negative age would put the cutoff in the future: the next sweep would delete
        // everything. Ages past any calendar are refused rather than overflowing.
        for (t, days) in &c.retention.max_age_days {
            // A misspelt type would silently keep its default age.
            let prompts = ["user_prompt", "agent_reasoning"];
            if nmem_proto::obs::ObsType::from_name(t).is_none() && !prompts.contains(&t.as_str()) {
                return Err(format!(
                    "[retention] max_age_days.{t}: nmem stores no type `{t}`; use one of {}, {}",
                    nmem_proto::obs::NAMES.join(", "),
                    prompts.join(", ")
                ));
            }
            if !(0..=3_650_000).contains(days) {
                return Err(format!(
                    "[retention] max_age_days.{t} = {days}: an age is a number of days from 0 to 3650000"
                ));
            }
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy;

    #[test]
    fn example_config_parses() {
        let text = include_str!("../../config.example.toml");
        let c: Config = toml::from_str(text).unwrap();
        assert_eq!(c.dedup.window_secs, 300);
    }

    #[test]
    fn an_age_for_a_type_nmem_does_not_store_is_refused() {
        let err = Config::parse("[retention]\nmax_age_days = { comand = 30 }\n").unwrap_err();
        assert!(
            err.contains("no type `comand`") && err.contains("command"),
            "{err}"
        );
        for t in nmem_proto::obs::NAMES
            .iter()
            .chain(&["user_prompt", "agent_reasoning"])
        {
            let text = format!("[retention]\nmax_age_days = {{ {t} = 30 }}\n");
            assert!(Config::parse(&text).is_ok(), "{t}");
        }
    }

    #[test]
    fn a_negative_age_is_refused() {
        let err = Config::parse("[retention]\nmax_age_days = { command = -1 }\n").unwrap_err();
        assert!(err.contains("max_age_days.command = -1"), "{err}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]

        /// No config text reaches a panic, and what parses builds the daemon's pieces.
        #[test]
        fn config_text_never_panics(text in "\\PC{0,200}") {
            if let Ok(c) = Config::parse(&text) {
                let _ = crate::redact::Redactor::new(&c.redact.patterns);
            }
        }

        /// Near-valid files: real sections and keys, arbitrary values (huge, negative, wrong
        /// types, hostile regexes).
        #[test]
        fn near_valid_config_never_panics(
            section in proptest::sample::select(vec!["spool", "dedup", "project", "writer", "capture", "digest", "retention", "search", "embed"]),
            key in proptest::sample::select(vec!["max_bytes", "max_age_days", "drain_interval_ms", "window_secs", "strategy", "queue_capacity", "exclude_projects", "max_lines", "max_chars", "sweep", "rrf_k", "weight_semantic", "idle_secs", "cache_mb", "enabled"]),
            value in proptest::prop_oneof![
                proptest::num::i64::ANY.prop_map(|n| n.to_string()),
                proptest::num::f64::ANY.prop_map(|n| format!("{n:?}")),
                "\\PC{0,20}".prop_map(|s| format!("{s:?}")),
                "\\PC{0,30}",
                proptest::num::i64::ANY.prop_map(|n| format!("{{ command = {n} }}")),
            ],
            regex in "\\PC{0,30}",
        ) {
            let text = format!(
                "[{section}]\n{key} = {value}\n\n[[redact.patterns]]\nname = \"p\"\nregex = {regex:?}\n"
            );
            if let Ok(c) = Config::parse(&text) {
                let _ = crate::redact::Redactor::new(&c.redact.patterns);
                let _ = crate::dedup::Dedup::new(c.dedup.window_secs);
            }
        }
    }

    #[test]
    fn typos_are_named() {
        let err = toml::from_str::<Config>("[dedup]\nwindow_sec = 5\n").unwrap_err();
        assert!(err.to_string().contains("window_sec"), "{err}");
    }
}
