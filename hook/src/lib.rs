//! The hook handler, `nmem record`, in a crate of its own so that the `nmem` binary links only
//! what the hook's hot path needs (std, serde_json, libc, sha2 and `nmem-proto`).
//!
//! * [`record`]: `nmem record`, run by the harness on every tool call. Std only, no async
//!   runtime: it reads the payload, validates the minimum, forwards it under a hard deadline, and
//!   spools it (then starts the daemon) when the daemon does not acknowledge it.
//! * [`elide`]: the streaming JSON pass that shrinks payloads over 1 MiB in bounded memory.
//! * [`autostart`]: the single-flight, fully detached start of `nmemd`.
//! * [`companion`]: every other subcommand of `nmem` is handed to `nmem-cli` (crate
//!   `nmem-shim`) by `exec`, argv, environment, descriptors and exit status unchanged.

pub mod autostart;
pub mod companion;
pub mod elide;
pub mod record;
