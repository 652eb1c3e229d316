//! `nmemctl` commands, one module per group: `status`, `service` (start, stop, pause, logs,
//! config check), `backup` (backup, restore, export), `admin` (the operator routes: maintain,
//! pin, retention, purge, redact), `model` (the embedding model's folders).

use crate::daemon_client::{call, CallError, Options};
use nmem_proto::admin::{
    DeletionReport, Empty, MaintainReport, Mode, PurgeRequest, RedactReport, RedactRequest,
    RetentionRequest,
};
use nmem_proto::paths::Paths;
use nmem_proto::wire;
use std::os::unix::fs::OpenOptionsExt;
use std::process::ExitCode;
use std::time::Duration;

mod admin;
mod backup;
mod model;
mod service;
mod status;

pub use admin::{maintain, pin, purge, redact, retention};
pub use backup::{backup, export, restore};
pub use model::{model_import, model_list, model_remove};
pub use service::{config_check, logs, pause, service, stop_daemon, Stopped};
use status::bytes;
pub use status::status;

/// Deadline for operator commands: generous, a person is waiting, not an agent.
const CTL_DEADLINE: Duration = Duration::from_secs(10);

/// An operator request: typed both ways, no autostart (a person is waiting, and asked for this
/// daemon), probed first so a hung daemon is named within a second.
fn ctl_post<B: serde::Serialize, R: serde::de::DeserializeOwned>(
    path: &str,
    body: &B,
    deadline: Duration,
) -> Result<R, CallError> {
    // Maintenance, retention and redaction can take minutes on a large database.
    let res = while_spinning(&format!("waiting for nmemd ({path})"), || {
        call("POST", path, Some(body), Options::ctl(deadline))
    });
    res.map_err(|e| match e {
        CallError::Down(m) => CallError::Down(format!("{m}; start it with `nmemctl start`")),
        other => other,
    })
}

/// Run `work` with a spinner saying `what` on a terminal, so a person knows nmemctl is at it;
/// nothing on a pipe or in a log (stderr not a terminal).
fn while_spinning<T>(what: &str, work: impl FnOnce() -> T) -> T {
    let spinner = std::io::IsTerminal::is_terminal(&std::io::stderr()).then(|| {
        let s = indicatif::ProgressBar::new_spinner();
        s.set_message(what.to_string());
        s.enable_steady_tick(Duration::from_millis(120));
        s
    });
    let out = work();
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    out
}

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("nmemctl: {msg}");
    ExitCode::from(1)
}
