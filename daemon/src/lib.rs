//! `nmemd`: the only process that writes nmem's database.
//!
//! The flow, one module per stage:
//!
//! * [`listener`]: the Unix socket (or one handed over by systemd), the lock that makes the
//!   daemon the database's only owner, and graceful shutdown.
//! * [`conn`]: connections and request bodies under bounds (timeouts, cap, bytes in flight).
//! * [`server`]: the versioned HTTP/JSON routes.
//! * [`drain`]: the few blocking threads that prepare queued events without a wake-up each.
//! * [`ingest`]: per harness and per tool, from a hook payload to an observation or a prompt;
//!   then [`redact`]. Deterministic, no LLM.
//! * [`store`]: schema and migrations, the single writer with group commit (and the [`dedup`]
//!   cache it owns), read-only connections.
//! * [`docs`]: documents ingested by `nmem ingest`: chunked, deduplicated by hash, searchable.
//! * [`context`]: the SessionStart digest. [`query`]: search, timeline, recent context, memories.
//! * [`spool`]: draining events that shims wrote while the daemon was away.
//! * [`app`], [`config`], [`stats`]: shared state, `config.toml`, counters for status.
//! * [`log`]: the log writer, which counts a failed write instead of dying of it.
//! * [`trace`]: the opt-in per-event timing trace of the ingest path (`NMEM_TRACE_INGEST=1`).

pub mod app;

/// The SHA-256 of `bytes` in lower-case hex: the one spelling of the hashes nmem stores (dedup
/// targets, written bodies, document chunks, evidence).
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
pub mod config;
pub mod conn;
pub mod context;
pub mod dedup;
pub mod docs;
pub mod drain;
pub mod ingest;
pub mod knowledge;
pub mod listener;
pub mod log;
pub mod maintain;
pub mod query;
pub mod redact;
pub mod reredact;
pub mod retention;
pub mod semantic;
pub mod server;
pub mod spool;
pub mod stats;
pub mod store;
pub mod sync;
pub mod trace;
pub mod web;
