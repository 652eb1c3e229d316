//! Documents: the request and reply of `POST /v1/docs/ingest` (`nmem ingest`).
//!
//! The client reads the sources (files, a repository walk, a conversation, a fetched page) and
//! sends their text; the daemon redacts, chunks, deduplicates and stores it. The reply says per
//! source what happened, with chunk counts, so other faces can be derived from it: codex-mem's
//! `ingest_docs` (`processed_sources` = sources not skipped, `imported_entries` = chunks added,
//! `duplicate_entries` = duplicate chunks, `skipped_sources`) and memory-substrate's
//! `memory_ingest` (`completed` when something was added or removed, `noop` otherwise; the
//! skipped sources are its preflight exclusions, `warnings` its warnings).

use serde::{Deserialize, Serialize};

/// What a source is; stored with it and shown with its chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceKind {
    /// A text or code file, chunked by line windows.
    File,
    /// A Markdown file, chunked by heading.
    Markdown,
    /// A file found by walking a repository folder (chunked as Markdown or as a file).
    RepoFile,
    /// Messages given inline, one heading per message.
    Conversation,
    /// A web page fetched on request, as text.
    Web,
    /// The text of a PDF.
    Pdf,
}

impl SourceKind {
    /// The stored name (`doc_sources.kind`).
    pub fn name(self) -> &'static str {
        match self {
            SourceKind::File => "file",
            SourceKind::Markdown => "markdown",
            SourceKind::RepoFile => "repo-file",
            SourceKind::Conversation => "conversation",
            SourceKind::Web => "web",
            SourceKind::Pdf => "pdf",
        }
    }
}

/// One source to ingest: where it came from, and its text.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceText {
    /// A path (absolute), a URL, or `conversation:<name>`: the source's identity in its project.
    pub locator: String,
    pub kind: SourceKind,
    /// The text, UTF-8. Chunked as Markdown when `markdown` is true or the locator ends in
    /// `.md`/`.markdown`, by line windows otherwise.
    pub text: String,
    #[serde(default)]
    pub markdown: bool,
}

/// `POST /v1/docs/ingest`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IngestRequest {
    /// A project name; absent for the project of `cwd`.
    #[serde(
        default,
        deserialize_with = "crate::query::tri",
        skip_serializing_if = "Option::is_none"
    )]
    pub project: Option<Option<String>>,
    /// The folder the sources belong to, for the default project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    pub sources: Vec<SourceText>,
}

/// What happened to one source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceStatus {
    /// New: its chunks were stored.
    Ingested,
    /// Unchanged since it was last ingested (same hash): nothing was written.
    Noop,
    /// Changed: only the chunks whose text changed were replaced.
    Updated,
    /// Not ingested; `reason` says why.
    Skipped,
}

/// Chunk counts of one source, or of all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkCounts {
    /// Stored now.
    pub added: u64,
    /// Unchanged, kept with their ids.
    pub kept: u64,
    /// Gone from the source, deleted.
    pub removed: u64,
    /// The same text as a chunk already stored in the project (or earlier in this source): not
    /// stored again.
    pub duplicate: u64,
}

impl ChunkCounts {
    pub fn add(&mut self, o: &ChunkCounts) {
        self.added += o.added;
        self.kept += o.kept;
        self.removed += o.removed;
        self.duplicate += o.duplicate;
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SourceOutcome {
    pub locator: String,
    pub kind: SourceKind,
    pub status: SourceStatus,
    /// Why it was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The stored source's id (absent when skipped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_id: Option<i64>,
    #[serde(default)]
    pub chunks: ChunkCounts,
}

/// Totals of an ingest: sources by status, chunks by fate.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IngestTotals {
    pub ingested: u64,
    pub noop: u64,
    pub updated: u64,
    pub skipped: u64,
    pub chunks: ChunkCounts,
}

/// The reply of `POST /v1/docs/ingest` (and of `nmem ingest --json`, which adds the sources the
/// client skipped before sending, and its warnings).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct IngestReply {
    pub project: String,
    pub sources: Vec<SourceOutcome>,
    pub totals: IngestTotals,
    /// What a reader should know (excluded agent-state folders, …), each saying what to do.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl IngestReply {
    /// Recount the totals from the sources.
    pub fn total(&mut self) {
        let mut t = IngestTotals::default();
        for s in &self.sources {
            match s.status {
                SourceStatus::Ingested => t.ingested += 1,
                SourceStatus::Noop => t.noop += 1,
                SourceStatus::Updated => t.updated += 1,
                SourceStatus::Skipped => t.skipped += 1,
            }
            t.chunks.add(&s.chunks);
        }
        self.totals = t;
    }
}

/// Where a document chunk came from, on a search result of kind `doc` and in `get`'s metadata.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DocRef {
    pub source_id: i64,
    pub locator: String,
    pub source_kind: String,
    /// The heading path (`Install > From source`), empty outside any heading.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub heading: String,
    /// 1-based, inclusive, in the source's (redacted) text.
    pub line_start: i64,
    pub line_end: i64,
}
