//! The clients of `nmemd`.
//!
//! * [`record`]: `nmem record`, the hook handler run on every tool call. Std only, no async
//!   runtime: it reads the payload, validates the minimum, forwards it under a hard deadline, and
//!   spools it (then starts the daemon) when the daemon does not acknowledge it.
//! * [`elide`]: the streaming JSON pass that shrinks payloads over 1 MiB in bounded memory.
//! * [`autostart`]: the single-flight, fully detached start of `nmemd`.
//! * [`ctl`]: `nmemctl` commands.

pub mod autostart;
pub mod cli;
pub mod ctl;
pub mod daemon_client;
pub mod elide;
pub mod import;
pub mod install;
pub mod record;
pub mod serve;
