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
}
