//! Queries: the requests and replies of `/v1/search`, `/v1/observations`, `/v1/timeline`,
//! `/v1/recent` and `/v1/memories`, shared by the daemon, the MCP server and the CLI.
//!
//! Parameter names follow ADR-006; the names claude-mem and CodexMem clients send are accepted
//! too (`type` for `obs_type`, `dateStart`/`dateEnd`, `orderBy`, `depth_before`/`depth_after`).
//! `project` has three states: absent means the project of `cwd` (the client's working
//! directory), `null` means every project, a string names one.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// Absent, null, or a value: `Option<Option<T>>` that keeps the difference.
pub(crate) fn tri<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// One value or a list of them (`"obs_type": "command"` or `["command", "command_error"]`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => s
                .split(',')
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty())
                .collect(),
            OneOrMany::Many(v) => v,
        }
    }
}

/// A point in time: Unix milliseconds (or seconds, when small), or an ISO-8601 date or date-time.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum When {
    Epoch(i64),
    Text(String),
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum OrderBy {
    /// BM25.
    #[default]
    Relevance,
    #[serde(alias = "date-desc", alias = "newest")]
    DateDesc,
    #[serde(alias = "date-asc", alias = "oldest")]
    DateAsc,
    /// BM25 blended with recency.
    Blended,
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SearchRequest {
    /// What to look for. Plain words (paths, `foo-bar`, `a.b`, `x::y` included) match as
    /// written; FTS5 syntax (`AND`/`OR`/`NOT`, `"phrase"`, `prefix*`, parentheses) is used as is.
    #[serde(default)]
    pub query: String,
    /// A project name; null for every project; absent for the project of `cwd`.
    #[serde(
        default,
        deserialize_with = "tri",
        skip_serializing_if = "Option::is_none"
    )]
    pub project: Option<Option<String>>,
    /// Only these observation types (also `type`).
    #[serde(default, alias = "type", alias = "obs_types", alias = "types")]
    pub obs_type: Option<OneOrMany>,
    /// Only observations of these files (absolute, project-relative, or a suffix such as a file name).
    #[serde(default, alias = "file", alias = "file_path")]
    pub files: Option<OneOrMany>,
    /// From this time on (also `dateStart`, `since`).
    #[serde(default, alias = "dateStart", alias = "since", alias = "date_from")]
    pub date_start: Option<When>,
    /// Up to this time (also `dateEnd`, `until`).
    #[serde(default, alias = "dateEnd", alias = "until", alias = "date_to")]
    pub date_end: Option<When>,
    /// relevance (default), date_desc, date_asc or blended (also `orderBy`).
    #[serde(default, alias = "orderBy", alias = "order")]
    pub order_by: Option<OrderBy>,
    /// Results to return: default 20, at most 100.
    #[serde(default)]
    pub limit: Option<i64>,
    #[serde(default)]
    pub offset: Option<i64>,
    /// Include prompts (user intents and agent reasoning) in the results (default true).
    #[serde(default)]
    pub include_prompts: Option<bool>,
    /// `json` (default): the structured result; `text`: one compact line per item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// The client's working directory, for the default project.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Which sources to search: `hybrid` (words and meaning; the default when an embedding
    /// model is installed), `lexical` (words only; the default otherwise) or `semantic`
    /// (meaning only). `order_by` still orders the results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<SearchMode>,
    /// Include ingested document chunks (`nmem ingest`), after the observations and prompts
    /// (default true); `obs_type: "doc"` searches only them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_docs: Option<bool>,
    /// Include knowledge and work items (`nmem knowledge`, `nmem work`; default true): results
    /// of kind `knowledge` and `work`. `obs_type: "knowledge"` (or `"work"`, or an item kind
    /// such as `"decision"`) searches only them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_knowledge: Option<bool>,
    /// The statuses of knowledge and work items to include (default: all but `superseded` and
    /// `archived`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knowledge_status: Option<OneOrMany>,
    /// Where the results were captured (sync, docs/sync.md): `this-device`, `my-devices` (this
    /// device and the user's other devices, through the personal space), `team` (teammates'
    /// events, through a team space) or `any` (the default). Documents and knowledge items are
    /// this device's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<OriginFilter>,
}

/// Which results a search keeps by where they were captured.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum OriginFilter {
    /// Every result.
    #[default]
    Any,
    /// Captured on this device.
    #[serde(alias = "this_device", alias = "local")]
    ThisDevice,
    /// Captured on this device or another device of the user's personal sync space.
    #[serde(alias = "my_devices", alias = "mine")]
    MyDevices,
    /// Received from teammates through a team space.
    #[serde(alias = "teammates")]
    Team,
}

impl OriginFilter {
    /// Whether rows captured on this device pass (documents and knowledge items are).
    pub fn keeps_local(self) -> bool {
        self != OriginFilter::Team
    }
}

/// Where a result was captured.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum OriginKind {
    #[default]
    ThisDevice,
    MyDevices,
    Team,
}

/// A result's origin: this device, another of the user's devices (`device`: its sync device
/// id), or a teammate's device (`device`) through the team space `space`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct Origin {
    pub kind: OriginKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub space: Option<String>,
}

impl Origin {
    /// A short label for a person or a model, `None` for this device: `device 3f2a9c1b` (the
    /// first 8 characters of its id), `team acme (device 3f2a9c1b)`.
    pub fn label(&self) -> Option<String> {
        let device = self
            .device
            .as_deref()
            .map(|d| d.chars().take(8).collect::<String>())
            .unwrap_or_default();
        match self.kind {
            OriginKind::ThisDevice => None,
            OriginKind::MyDevices => Some(format!("device {device}")),
            OriginKind::Team => Some(format!(
                "team {} (device {device})",
                self.space.as_deref().unwrap_or("?")
            )),
        }
    }
}

/// The sources a search uses.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum SearchMode {
    Hybrid,
    Lexical,
    Semantic,
}

impl SearchMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SearchMode::Hybrid => "hybrid",
            SearchMode::Lexical => "lexical",
            SearchMode::Semantic => "semantic",
        }
    }
}

/// The reply of `/v1/search`: the results, and how the search was done.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct SearchReply {
    pub items: Vec<SearchHit>,
    /// The sources used: `hybrid`, `lexical` or `semantic`.
    pub mode: String,
    /// How the query text was used.
    pub query: QueryUse,
    /// What a reader should know about this search (no embedding model, a reduced query, an
    /// index being rebuilt), each saying what to do.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// How the query text was searched.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct QueryUse {
    /// `words` (each term matched as written) or `fts` (FTS5 syntax, as given).
    pub syntax: String,
    /// The terms searched (plain text), after a long text was reduced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub terms: Vec<String>,
    /// Terms left out because the text was long.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_terms: usize,
    /// The embedding model the query was embedded with, when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// How one result was found: by which source, at which rank of that source.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RetrievalSource {
    /// `lexical` (the words), `semantic` (the meaning), or `context` (the prompt it served
    /// matched the words; with tier `meaning`, the prompt or its turn's summary was found by
    /// meaning).
    pub source: String,
    /// 1-based rank within that source.
    pub rank: u32,
    /// Lexical: `all_words`, `meaningful_words` or `any_word` (looser tiers count less);
    /// context: `meaning` when its prompt was found by meaning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    /// Semantic: the cosine similarity to the query.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub similarity: Option<f32>,
    /// Context: the prompt whose words (or meaning) matched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_id: Option<i64>,
}

/// One search result: an observation's preview, or a prompt with its full text.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct SearchHit {
    /// `observation`, `prompt` or `doc` (a chunk of an ingested document).
    pub kind: String,
    pub id: i64,
    pub timestamp: i64,
    pub obs_type: Option<String>,
    pub content_preview: String,
    /// Prompts only: the whole text (prompts are short).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Prompts only: `user` or `agent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    pub file_path: Option<String>,
    pub session_id: String,
    pub project: String,
    /// The fused score (higher is better): weighted reciprocal ranks of the sources that found
    /// it.
    pub score: f64,
    /// How it was found.
    #[serde(default)]
    pub retrieval_sources: Vec<RetrievalSource>,
    /// Kind `doc` only: the chunk's source and lines (its id is a chunk id: `get` it with
    /// `doc_ids`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc: Option<crate::docs::DocRef>,
    /// Kinds `knowledge` and `work` only: the item's standing (its id is a knowledge id: `get`
    /// it with `knowledge_ids`, or `nmem knowledge show k<id>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knowledge: Option<crate::knowledge::HitRef>,
    /// Where it was captured: this device, another of the user's devices, or a teammate's
    /// (sync).
    #[serde(default)]
    pub origin: Origin,
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GetRequest {
    /// Observation ids, at most 50. Order is kept; missing ids are left out.
    #[serde(default, alias = "observation_ids")]
    pub ids: Vec<i64>,
    /// Document chunk ids (search results of kind `doc`), at most 50, returned after the
    /// observations as observations of type `doc` whose metadata says where they came from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub doc_ids: Vec<i64>,
    /// Knowledge and work item ids (search results of kind `knowledge` or `work`), at most 50,
    /// returned after the chunks as observations of type `knowledge` or `work` whose metadata is
    /// the whole item (status, evidence, pin).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub knowledge_ids: Vec<i64>,
    /// `json` (default): the structured result; `text`: one compact line per item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
}

/// A whole observation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Observation {
    pub id: i64,
    pub timestamp: i64,
    pub session_id: String,
    pub project: String,
    pub obs_type: String,
    pub source_event: String,
    pub tool_name: Option<String>,
    pub content: String,
    pub file_path: Option<String>,
    pub rel_path: Option<String>,
    pub metadata: Option<Value>,
    pub prompt_id: Option<i64>,
    pub is_pinned: bool,
    pub redacted: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TimelineRequest {
    /// The observation to center on. Either this or `query`.
    #[serde(default, alias = "id", alias = "observation_id")]
    pub anchor: Option<i64>,
    /// Center on the best match of this search instead of an id.
    #[serde(default)]
    pub query: Option<String>,
    /// Center on a document chunk instead (a `doc` search result's id): its neighbouring chunks
    /// in its source, in order (a chunk has no session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc_anchor: Option<i64>,
    /// Observations before the anchor in its session: default 5, at most 50 (also `depth_before`).
    #[serde(default, alias = "depth_before")]
    pub before: Option<i64>,
    /// Observations after the anchor: default 5, at most 50 (also `depth_after`).
    #[serde(default, alias = "depth_after")]
    pub after: Option<i64>,
    /// For `query`: a project name, null for all, absent for the project of `cwd`.
    #[serde(
        default,
        deserialize_with = "tri",
        skip_serializing_if = "Option::is_none"
    )]
    pub project: Option<Option<String>>,
    /// `json` (default): the structured result; `text`: one compact line per item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Timeline {
    pub anchor: Observation,
    pub before: Vec<Observation>,
    pub after: Vec<Observation>,
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RecentRequest {
    /// A project name; null for every project; absent for the project of `cwd`.
    #[serde(
        default,
        deserialize_with = "tri",
        skip_serializing_if = "Option::is_none"
    )]
    pub project: Option<Option<String>>,
    /// Observations to return: default 30, at most 100.
    #[serde(default)]
    pub limit: Option<i64>,
    /// Also session bookkeeping (starts, turn ends, compactions: [`BOOKKEEPING`]); by default
    /// only actions are listed (also `include_bookkeeping`).
    #[serde(
        default,
        alias = "include_bookkeeping",
        skip_serializing_if = "Option::is_none"
    )]
    pub all: Option<bool>,
    /// `json` (default): the structured result; `text`: one compact line per item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
}

/// Every observation type nmem stores (docs/design.md §2 has what each holds): the names of
/// [`crate::obs::TABLE`].
pub const OBS_TYPES: &[&str] = &crate::obs::NAMES;

/// The types that record the session's course rather than work done: `recent` and the digest
/// list them only when asked; search ranks them like any other hit. Derived from
/// [`crate::obs::TABLE`] ([`crate::obs::DigestRole::Bookkeeping`]).
pub const BOOKKEEPING: &[&str] = &crate::obs::BOOKKEEPING;

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SaveRequest {
    /// What to remember.
    #[serde(default)]
    pub text: String,
    /// A short title.
    #[serde(default)]
    pub title: Option<String>,
    /// The project it belongs to (default: the project of `cwd`).
    #[serde(
        default,
        deserialize_with = "tri",
        skip_serializing_if = "Option::is_none"
    )]
    pub project: Option<Option<String>>,
    #[serde(default)]
    pub cwd: Option<String>,
    /// More to keep with the memory (an object; codex-mem's `type`, `source_ref` and
    /// `metadata`), stored in its metadata beside the title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Map<String, Value>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Saved {
    pub id: i64,
    pub project: String,
    /// When it was stored (Unix milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_is_tri_state_and_aliases_work() {
        let absent: SearchRequest = serde_json::from_str(r#"{"query":"x"}"#).unwrap();
        assert_eq!(absent.project, None);
        let all: SearchRequest = serde_json::from_str(r#"{"query":"x","project":null}"#).unwrap();
        assert_eq!(all.project, Some(None));
        let one: SearchRequest = serde_json::from_str(
            r#"{"query":"x","project":"p","type":["a","b"],"dateStart":"2026-01-01","orderBy":"date_desc"}"#,
        )
        .unwrap();
        assert_eq!(one.project, Some(Some("p".into())));
        assert_eq!(one.obs_type.unwrap().into_vec(), ["a", "b"]);
        assert_eq!(one.order_by, Some(OrderBy::DateDesc));
        assert_eq!(OneOrMany::One("a, b".into()).into_vec(), ["a", "b"]);
        let t: TimelineRequest = serde_json::from_str(r#"{"query":"q","depth_before":2}"#).unwrap();
        assert_eq!(t.before, Some(2));
    }
}
