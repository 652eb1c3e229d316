//! Sync (docs/sync.md): the request and reply types of the `/v1/sync/*` routes, shared by the
//! daemon's handlers and `nmem sync`.
//!
//! The recovery phrase travels from the CLI to the daemon in a request body on the user's own
//! socket (0600), never on a command line of the daemon.

use serde::{Deserialize, Serialize};

/// `POST /v1/sync/enable`: create the personal space on the server and start syncing.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnableRequest {
    /// The PostgreSQL URL; else `[sync] url` of config.toml, else `NMEM_SYNC_URL` of nmemd.
    #[serde(default)]
    pub url: Option<String>,
}

/// `POST /v1/sync/join`: add this device to the space whose recovery phrase is given.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JoinRequest {
    pub phrase: String,
    #[serde(default)]
    pub url: Option<String>,
}

/// What `enable` and `join` did. `recovery_phrase` only from `enable`: it is shown once.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Enabled {
    pub space: String,
    pub fingerprint: String,
    pub device: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_phrase: Option<String>,
}

/// One device's stream as the server holds it, and how far this device has pulled it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Head {
    pub device: String,
    /// The highest sequence number the server holds for the device.
    pub seq: i64,
    /// How far this device has applied it (for itself: what the server acknowledged).
    pub applied: i64,
}

/// `POST /v1/sync/status` (and the reply of `now` and `disable`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SyncStatus {
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub space: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// The server, without its password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// This device's last sequence number.
    pub local_seq: i64,
    /// Local events the server has not acknowledged (local seq above the server's head for
    /// this device, as last read).
    pub pending: i64,
    /// Per device, as last read from the server.
    #[serde(default)]
    pub heads: Vec<Head>,
    /// Events received from other devices since nmemd started.
    pub pulled: u64,
    /// Events the server acknowledged since nmemd started.
    pub pushed: u64,
    /// Set when another home uses this device's id: syncing stopped until fixed.
    pub cloned: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When the last round with the server succeeded (Unix ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sync_at: Option<i64>,
    /// The team spaces this device belongs to.
    #[serde(default)]
    pub teams: Vec<TeamStatus>,
    /// Projects kept out of the personal space.
    #[serde(default)]
    pub excluded: Vec<String>,
    /// Logged events the current redaction rules hold back (not uploaded): `nmem sync
    /// quarantine` lists them, `--release` uploads them as they are, `--drop` keeps them here.
    #[serde(default)]
    pub quarantined: i64,
    /// The upload of history stored before sync was turned on (and before a project was shared
    /// with a team space), every job together; absent when none was ever planned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backfill: Option<Backfill>,
}

/// Backfill progress: stored rows looked at out of those stored when it began (each looked at
/// row is logged for upload unless routing keeps it out or the space holds it already).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Backfill {
    pub done: i64,
    pub total: i64,
    /// Still going.
    pub running: bool,
}

// Team spaces and routing (docs/sync.md, "Team spaces"). Appended fields and types only.

/// `POST /v1/sync/identity`: this device's X25519 public key (made on first use).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Identity {
    /// `age1…`: what a teammate passes to `nmem team add SPACE PUBKEY`.
    pub public_key: String,
}

/// `POST /v1/team/{create,add,remove,join}`: `member` is the public key to add or remove.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeamRequest {
    pub space: String,
    #[serde(default)]
    pub member: Option<String>,
}

/// A team space as this device sees it (the reply of the team commands, and in status).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct TeamStatus {
    pub space: String,
    /// The key new events are sealed under.
    pub key_id: String,
    /// Every key id this device holds for the space.
    #[serde(default)]
    pub key_ids: Vec<String>,
    /// `owner` (created it here) or `member`.
    pub role: String,
    /// The members (public keys) as the server lists them, when the command read them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<String>,
    /// Projects this device shares with the space, each with what it carries beyond the
    /// default types (`prompts`, `all`, type names).
    #[serde(default)]
    pub shares: Vec<Share>,
    /// This device's last sequence number in the space.
    pub local_seq: i64,
    /// Why this device can no longer write the space (removed from the team), if so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locked: Option<String>,
}

/// One project shared with one team space.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Share {
    pub project: String,
    pub space: String,
    /// Beyond the default types: `prompts`, `all`, or observation type names.
    #[serde(default)]
    pub with: Vec<String>,
}

/// `POST /v1/sync/share`: share `project` with a team space (or stop, with `stop`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShareRequest {
    pub project: String,
    pub space: String,
    #[serde(default)]
    pub with: Vec<String>,
    #[serde(default)]
    pub stop: bool,
}

/// `POST /v1/sync/exclude`: keep `project` out of the personal space (or back in, `include`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExcludeRequest {
    pub project: String,
    #[serde(default)]
    pub include: bool,
}

/// What is routed where: the reply of `share`, `exclude` and `include`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Routing {
    /// Projects kept out of the personal space.
    pub excluded: Vec<String>,
    pub shares: Vec<Share>,
    /// The observation types every share carries.
    pub default_types: Vec<String>,
}

/// `POST /v1/sync/quarantine`: list the quarantined events, or release or drop them all.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuarantineRequest {
    #[serde(default)]
    pub release: bool,
    #[serde(default)]
    pub drop: bool,
}

/// One quarantined event: its log sequence number, local event id, project, and the start of its
/// content as the current rules redact it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QuarantinedEvent {
    pub seq: i64,
    pub event_id: String,
    pub project: String,
    pub preview: String,
}

/// The reply of `/v1/sync/quarantine`: how many are (still) held, released, dropped.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Quarantined {
    pub quarantined: i64,
    pub released: i64,
    pub dropped: i64,
    #[serde(default)]
    pub events: Vec<QuarantinedEvent>,
}

/// One device's stream of one space compared (`nmem sync verify`): the server's side and this home's.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct StreamCheck {
    /// The space whose stream this is (the personal space's id, or a team space's name);
    /// empty from an nmemd that compared the personal space only.
    #[serde(default)]
    pub space: String,
    pub device: String,
    /// This device's own stream (else another device's, as pulled).
    pub this_device: bool,
    /// The highest sequence number on the server, and here (the log, or the applied cursor).
    pub server_head: i64,
    pub local_head: i64,
    /// Events compared on each side (through the lower head), and the SHA-256 (hex, first 16
    /// bytes) of their `seq:event id` lines: equal hashes, equal streams.
    pub server_count: i64,
    pub local_count: i64,
    pub server_hash: String,
    pub local_hash: String,
    /// Sequence numbers this home has and the server lacks (at most 100 shown).
    #[serde(default)]
    pub missing_on_server: Vec<i64>,
    /// Sequence numbers the server has and this home lacks (at most 100 shown).
    #[serde(default)]
    pub missing_here: Vec<i64>,
    /// Sequence numbers holding different event ids on the two sides (at most 100 shown).
    #[serde(default)]
    pub different: Vec<i64>,
    pub ok: bool,
}

/// The reply of `/v1/sync/verify`: the streams of every space this device is in.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Verified {
    pub ok: bool,
    pub streams: Vec<StreamCheck>,
}

/// The reply of `/v1/rebuild` (`nmem rebuild`): projections regenerated from the event log.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Rebuilt {
    /// Whether sync is enabled (without it the log holds nothing new).
    pub sync_enabled: bool,
    /// Logged events read (this device's and those applied from others), tombstones aside.
    pub events: u64,
    /// Of those, events whose rows were missing and were stored again.
    pub restored: u64,
    /// Logged envelopes this nmem could not read (none expected).
    pub unreadable: u64,
    /// Rows indexed again in the full-text indexes.
    pub indexed: u64,
}

// Leaving (docs/sync.md, "Leaving"): `nmem team leave`. Appended types only.

/// `POST /v1/team/leave`: this device leaves a team space.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeamLeaveRequest {
    pub space: String,
    /// Also delete the rows pulled from the team's devices (those that are not devices of this
    /// home's personal space too).
    #[serde(default)]
    pub forget_data: bool,
}

/// What `nmem team leave` did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TeamLeft {
    pub space: String,
    /// Whether the server listed this device as a member (its rows there are gone now).
    pub was_member_on_server: bool,
    /// Rows deleted here (`--forget-data`).
    pub forgotten: u64,
}

/// The reply of `/v1/rebuild/progress`: how far a running `nmem rebuild` is (the CLI's
/// progress bar asks while its rebuild runs).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct RebuildProgress {
    /// Whether a rebuild is running.
    pub running: bool,
    /// `reading` (the event log), `restoring` (each logged event: its rows stored again when
    /// missing), `indexing` (the full-text indexes rebuilt, rows).
    pub phase: String,
    pub done: u64,
    pub total: u64,
}
