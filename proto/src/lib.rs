//! What `nmemd` and its clients agree on.
//!
//! * [`paths`]: where the database, socket, spool and config live (`NMEM_HOME`, `NMEM_DB`,
//!   `NMEM_SOCKET`, or the platform's folders).
//! * [`harness`]: the hook payload of each harness, normalised to one envelope and validated.
//! * [`wire`]: the versioned HTTP/JSON API: paths, headers, request and reply bodies, error codes.
//! * [`query`], [`admin`]: the request and reply types of the query and operator routes.
//! * [`docs`]: documents (`nmem ingest`): sources, their outcome, where a chunk came from.
//! * [`obs`]: the observation vocabulary ([`obs::ObsType`]: names, retention, digest role).
//! * [`sync`]: the sync routes' requests and replies (docs/sync.md).
//! * [`spool`]: the one-file-per-event spool a shim writes when the daemon is away.
//! * [`status`]: what the files alone say (`nmemctl status` with the daemon down).
//! * [`time`]: timestamps to Unix milliseconds and back, and how long ago one was.
//! * [`text`]: one line of text for a table, a digest or a tool reply.
//! * [`client`]: a std-only HTTP/1.1 client over the Unix socket, with a hard deadline. It is on
//!   the hook's hot path, so it uses no async runtime and allocates little.
//!
//! This crate stays small: the hook handler links it, and every dependency here is paid for on
//! every tool call.

pub mod admin;
pub mod client;
pub mod docs;
pub mod harness;
pub mod knowledge;
pub mod obs;
pub mod paths;
pub mod query;
pub mod spool;
pub mod status;
pub mod sync;
pub mod text;
pub mod time;
pub mod wire;

/// The version of this build, shared by the daemon and every client.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The wire protocol number. Bump it when a request or reply changes incompatibly.
pub const PROTOCOL: u32 = 1;

/// Milliseconds since the Unix epoch, the unit of every stored timestamp.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
