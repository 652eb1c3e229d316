//! The operator routes' requests and replies (`nmemctl maintain|pin|retention|purge|redact`,
//! `nmemctl model import|remove`), shared by the daemon's handlers and `nmemctl`.
//!
//! Requests that delete or rewrite rows refuse fields they do not know
//! (`deny_unknown_fields`): a misspelt or renamed filter must not widen a deletion to
//! everything, it gets a 400 that names the field. Their aliases (`type`,
//! `max_entries_per_project`) are the names other memory tools' clients send.

use crate::query::When;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Whether a destructive request changed anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Counted what would change; nothing was changed.
    #[default]
    DryRun,
    Apply,
}

impl Mode {
    pub fn from_apply(apply: bool) -> Mode {
        if apply {
            Mode::Apply
        } else {
            Mode::DryRun
        }
    }
}

/// `POST /v1/retention`: delete what is older than its type's age, or over a per-project cap.
#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RetentionRequest {
    /// One age for every type (instead of the per-type ages).
    #[serde(default)]
    pub max_age_days: Option<i64>,
    /// Keep at most this many observations per project (newest first).
    #[serde(default, alias = "max_entries_per_project")]
    pub max_per_project: Option<i64>,
    /// Only this type (an [`crate::obs::ObsType`] name, or `user_prompt`, `agent_reasoning`,
    /// `prompt` for prompts).
    #[serde(default, alias = "type")]
    pub obs_type: Option<String>,
    #[serde(default)]
    pub project: Option<String>,
    /// A dry run as of this time (Unix milliseconds) instead of now: what would be swept then.
    /// Refused with `apply`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub now: Option<i64>,
    #[serde(default)]
    pub apply: bool,
}

/// `POST /v1/purge`: delete by project, session, type, date or search, prompts included.
#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PurgeRequest {
    #[serde(default)]
    pub project: Option<String>,
    #[serde(default)]
    pub session: Option<String>,
    #[serde(default, alias = "type")]
    pub obs_type: Option<String>,
    /// Delete what is older than this (a date, date-time, or Unix time).
    #[serde(default)]
    pub before: Option<When>,
    /// Delete what is newer than this.
    #[serde(default)]
    pub after: Option<When>,
    /// Delete what matches this search (FTS, as `nmem search` reads it).
    #[serde(default)]
    pub search: Option<String>,
    #[serde(default)]
    pub apply: bool,
}

/// The reply of [`RetentionRequest`] and [`PurgeRequest`].
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
pub struct DeletionReport {
    pub mode: Mode,
    pub executed_at: i64,
    pub total_candidates: u64,
    pub by_reason: BTreeMap<String, u64>,
    /// `o<id>` for observations, `p<id>` for prompts, `k<id>` for knowledge and work items (a
    /// whole project's purge; the first 1,000).
    pub candidate_ids: Vec<String>,
    pub deleted_observations: u64,
    pub deleted_prompts: u64,
    pub db_bytes_before: u64,
    pub db_bytes_after: u64,
}

/// `POST /v1/maintain` (empty body): what maintenance did.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MaintainReport {
    pub fts_indexed: u64,
    pub fts_integrity: String,
    pub freed_pages: i64,
    pub wal_checkpoint: String,
    pub db_bytes_before: u64,
    pub db_bytes_after: u64,
    pub millis: u64,
    /// What the retention sweep removed first (`None`: sweeping is off in the config).
    #[serde(default)]
    pub swept_observations: Option<u64>,
    #[serde(default)]
    pub swept_prompts: Option<u64>,
}

/// `POST /v1/redact`: apply the current redaction rules to what is stored.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RedactRequest {
    #[serde(default)]
    pub apply: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RedactReport {
    pub mode: Mode,
    pub observations: u64,
    pub prompts: u64,
    /// Knowledge and work items written through the API (notes follow their memory row).
    #[serde(default)]
    pub knowledge: u64,
    pub secrets: u64,
    /// Ids of rows that change (`o<id>`, `p<id>`, `k<id>`; the first 1,000).
    pub ids: Vec<String>,
}

/// The body of routes that take none (`/v1/maintain`, `/v1/model/reload`): `{}`.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, Default, PartialEq)]
pub struct Empty {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destructive_requests_refuse_unknown_fields_and_take_the_aliases() {
        let r: RetentionRequest =
            serde_json::from_str(r#"{"type":"command","max_entries_per_project":5}"#).unwrap();
        assert_eq!(r.obs_type.as_deref(), Some("command"));
        assert_eq!(r.max_per_project, Some(5));
        let e = serde_json::from_str::<RetentionRequest>(r#"{"obs_typ":"command"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("obs_typ"), "{e}");
        assert!(serde_json::from_str::<PurgeRequest>(r#"{"projet":"x"}"#).is_err());
        assert!(serde_json::from_str::<RedactRequest>(r#"{"aply":true}"#).is_err());
    }

    #[test]
    fn modes_keep_their_wire_names() {
        assert_eq!(serde_json::to_string(&Mode::DryRun).unwrap(), "\"dry-run\"");
        assert_eq!(serde_json::to_string(&Mode::Apply).unwrap(), "\"apply\"");
    }
}
