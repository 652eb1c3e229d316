//! One error type for the whole crate, so the daemon and the CLI can tell a missing model (tell
//! the user what to import) from a dead child (restart it) from a bad request (a bug).
//!
//! std only: the crate's default build must stay small, so no `thiserror` here.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// What went wrong while importing, loading or running an embedding model.
#[derive(Debug)]
#[non_exhaustive]
pub enum EmbedError {
    /// The model files are missing, malformed, refused or not a supported model. The message
    /// says which file and what to do.
    Model(String),
    /// A file operation failed; `context` names the action and the path.
    Io { context: String, source: io::Error },
    /// The `nmem-embed` binary could not be started.
    Spawn { bin: PathBuf, source: io::Error },
    /// The child answered with `{"error": …}`: at start (it then exits 1) or for one request
    /// (it stays usable).
    Child(String),
    /// The child broke the protocol, closed its pipes or died; it has been killed and reaped.
    Protocol(String),
    /// No complete answer before the deadline; the child has been killed and reaped.
    Timeout { what: &'static str, after: Duration },
    /// The request was refused before anything was sent (a bug in the caller).
    Input(String),
    /// The inference engine failed (feature `engine`).
    Engine(String),
}

impl EmbedError {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        EmbedError::Io {
            context: context.into(),
            source,
        }
    }

    /// True when the child process behind an `EmbedChild` is gone and a new one must be spawned.
    pub fn child_is_gone(&self) -> bool {
        matches!(
            self,
            EmbedError::Protocol(_) | EmbedError::Timeout { .. } | EmbedError::Spawn { .. }
        )
    }
}

impl fmt::Display for EmbedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EmbedError::Model(msg) => f.write_str(msg),
            EmbedError::Io { context, source } => write!(f, "{context}: {source}"),
            EmbedError::Spawn { bin, source } => write!(
                f,
                "cannot start the embedding process {}: {source} (nmem-embed is installed next to nmemd)",
                bin.display()
            ),
            EmbedError::Child(msg) => write!(f, "nmem-embed: {msg}"),
            EmbedError::Protocol(msg) => write!(f, "nmem-embed protocol: {msg}"),
            EmbedError::Timeout { what, after } => {
                write!(f, "nmem-embed did not {what} within {} ms; it was stopped", after.as_millis())
            }
            EmbedError::Input(msg) => write!(f, "invalid embedding request: {msg}"),
            EmbedError::Engine(msg) => write!(f, "embedding failed: {msg}"),
        }
    }
}

impl std::error::Error for EmbedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EmbedError::Io { source, .. } | EmbedError::Spawn { source, .. } => Some(source),
            _ => None,
        }
    }
}
