//! `nmem record`: the hook handler, run by the harness on every tool call.
//!
//! It must cost the agent nothing it can feel and never lose what it was given:
//!
//! 1. Read the payload (stdin; Codex's `notify` passes it as the last argument) until the JSON
//!    value is complete, not until EOF. Payloads over 1 MiB are streamed through
//!    [`crate::elide`] so long strings and long arrays become short markers.
//! 2. Validate the minimum (`nmem_proto::harness`). Malformed: exit 1, one line on stderr,
//!    nothing stored. An event nmem stores nothing for: exit 0 at once.
//! 3. Forward the raw bytes with an event id and the receive time, under a hard deadline.
//! 4. No acknowledgement (no daemon, refused, timeout, error): append the event to the spool's
//!    log (`nmem_proto::spool::store`; a file of its own if the log cannot be used), start
//!    `nmemd` in the background, print nothing, exit 0.
//!
//! Never exit 2: Claude Code treats it as "block" or feeds stderr to the model.

use nmem_proto::harness::{self, Event, Harness};
use nmem_proto::paths::Paths;
use nmem_proto::{client, spool, wire};
use std::io::{Read, Write};
use std::time::Duration;

/// Payloads up to this size are forwarded byte for byte.
const ORDINARY: usize = 1024 * 1024;
/// Deadline for connect + reply on ordinary events.
const DEADLINE_MS: u64 = 100;
/// SessionStart waits a little longer: the daemon builds the digest before replying.
const SESSION_START_DEADLINE_MS: u64 = 500;

pub const USAGE: &str = "\
nmem record: the hook handler. Reads one hook payload on stdin and hands it to nmemd.

Usage: nmem record [--harness claude-code|codex|codex-notify|gemini|cursor] [PAYLOAD]

  --harness H   which harness sends the payload (default: claude-code; `claude` is the same).
                codex-notify takes the payload as the last argument, as Codex's `notify`
                setting passes it.

Exit status: 0 when the event is stored or spooled (or nmem stores nothing for it); 1 when the
payload is malformed (one line on stderr, nothing stored). Never 2.

Environment: NMEM_HOME, NMEM_SOCKET (where nmemd listens), NMEM_NO_AUTOSTART=1 (spool without
starting nmemd), NMEM_TIMEOUT_MS (deadline for the daemon's reply).";

/// A whole command line (program name first), when it is `… record …`: its exit status; `None`
/// for any other subcommand. The one reading of a `record` command line, for the small `nmem`
/// and `nmem-cli record` alike: an argument that is not UTF-8 is refused in one line (exit 1),
/// `-h`/`--help` anywhere prints the usage.
pub fn from_argv(args: &[std::ffi::OsString]) -> Option<u8> {
    if args.get(1).is_none_or(|a| a != "record") {
        return None;
    }
    let mut rest = Vec::with_capacity(args.len() - 2);
    for a in &args[2..] {
        match a.to_str() {
            Some(s) => rest.push(s.to_string()),
            None => {
                return Some(fail(&format!(
                    "an argument is not UTF-8 ({}); see `nmem record --help`",
                    a.to_string_lossy()
                )))
            }
        }
    }
    if rest.iter().any(|a| a == "-h" || a == "--help") {
        print(USAGE);
        return Some(0);
    }
    Some(status(&rest))
}

/// `nmem record`: the exit status (0 or 1; never 2).
pub fn status(args: &[String]) -> u8 {
    let mut harness = Harness::ClaudeCode;
    let mut positional = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let value = if a == "--harness" || a == "--from" {
            match it.next() {
                Some(v) => Some(v.as_str()),
                None => {
                    return fail(&format!(
                        "`{a}` needs a value: one of {}",
                        Harness::names(|_| true)
                    ))
                }
            }
        } else {
            a.strip_prefix("--harness=")
                .or_else(|| a.strip_prefix("--from="))
        };
        match value {
            Some(v) => match Harness::parse(v) {
                Some(h) => harness = h,
                None => {
                    return fail(&format!(
                        "unknown harness `{v}`: use one of {}",
                        Harness::names(|_| true)
                    ))
                }
            },
            None if a.starts_with("--") => {
                return fail(&format!("unknown option `{a}`; see `nmem record --help`"))
            }
            None => positional = Some(a.clone()),
        }
    }

    let received_at = nmem_proto::now_ms();
    let spec = harness.spec();
    let payload = match (spec.payload_in_argument, positional) {
        (true, Some(json)) => json.into_bytes(),
        (true, None) => {
            return fail(&format!(
                "{harness} passes its JSON as the last argument, and there is none"
            ))
        }
        (_, Some(arg)) => {
            return fail(&format!(
                "unexpected argument `{arg}`: the payload comes on stdin"
            ))
        }
        (_, None) => match read_stdin() {
            Ok(Some(p)) => p,
            Ok(None) => return 0, // too large: dropped and counted
            Err(ReadFail::Io(e)) => {
                return fail(&format!("cannot read the hook payload from stdin: {e}"))
            }
            Err(ReadFail::Malformed(why)) => {
                return fail(&format!("the hook payload is not JSON: {why}"))
            }
        },
    };

    let value = match harness::parse(&payload) {
        Ok(v) => v,
        Err(e) => return fail(&e.to_string()),
    };
    let env = match harness::envelope(harness, &value) {
        Ok(env) => env,
        Err(e) => return fail(&e.to_string()),
    };
    let Some(event) = env.event else {
        return 0;
    };
    // What the harness waits for on this event, when the daemon says nothing.
    let verdict = (spec.verdict)(event);

    let paths = Paths::from_env();
    if paths.paused_flag().exists() {
        // `nmemctl pause`: record nothing, and never make the agent wait.
        if let Some(v) = verdict {
            print(v);
        }
        return 0;
    }
    let event_id = client::new_event_id();
    let received = received_at.to_string();
    let deadline = std::env::var("NMEM_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if event == Event::SessionStart {
            SESSION_START_DEADLINE_MS
        } else {
            DEADLINE_MS
        });
    let reply = client::call(
        &paths.socket,
        "POST",
        wire::PATH_EVENTS,
        &[
            (wire::H_EVENT_ID, &event_id),
            (wire::H_RECEIVED_AT, &received),
            (wire::H_HARNESS, harness.as_str()),
        ],
        &payload,
        Duration::from_millis(deadline),
    );
    let mut printed = false;
    match reply {
        Ok(r) if r.status == 200 => {
            if let Ok(rep) = serde_json::from_slice::<wire::RecordReply>(&r.body) {
                if let Some(out) = rep.output {
                    print(&out);
                    printed = true;
                }
            }
        }
        Ok(r) if r.status == 422 => {
            // The daemon judged the payload malformed: nothing was stored, and spooling it would
            // only move it to the corrupt folder later.
            let msg = serde_json::from_slice::<wire::ErrorBody>(&r.body)
                .map(|e| e.message)
                .unwrap_or_else(|_| "the daemon rejected the payload".into());
            return fail(&msg);
        }
        other => {
            let not_running = matches!(&other, Err(e) if matches!(e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused));
            spool_event(&paths, &event_id, received_at, harness, &payload);
            if not_running {
                crate::autostart::start_daemon(&paths);
            }
        }
    }
    if let Some(v) = verdict.filter(|_| !printed) {
        print(v);
    }
    0
}

/// Why the payload could not be read.
enum ReadFail {
    Io(std::io::Error),
    /// Not JSON (a NUL byte, `/dev/zero`, nesting past the parser's limit): what and where.
    Malformed(String),
}

/// The payload, or `None` when it was too large to keep (dropped and counted, with the reason).
///
/// Reading stops as soon as the top-level value is complete (a harness may keep stdin open
/// after the payload; only bytes already there are taken, so trailing data is still refused),
/// or at the first byte no JSON document has.
fn read_stdin() -> Result<Option<Vec<u8>>, ReadFail> {
    use crate::elide::{ElideError, Scan};
    let mut stdin = std::io::stdin().lock();
    let mut buf = Vec::with_capacity(16 * 1024);
    let mut scan = Scan::default();
    let mut chunk = vec![0u8; 64 * 1024];
    while buf.len() <= ORDINARY {
        let n = match stdin.read(&mut chunk) {
            Ok(0) => return Ok(Some(buf)),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ReadFail::Io(e)),
        };
        let stop = scan.feed(&chunk[..n]);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(why) = scan.bad.take() {
            return Err(ReadFail::Malformed(why));
        }
        if stop {
            take_ready(&mut stdin, &mut buf, &mut chunk);
            return Ok(Some(buf));
        }
    }
    let (seen, reason) = match crate::elide::elide_stream(&buf, &mut stdin) {
        Ok(out) => return Ok(Some(out)),
        Err(ElideError::Io(e)) => return Err(ReadFail::Io(e)),
        Err(ElideError::Malformed(why)) => return Err(ReadFail::Malformed(why)),
        Err(ElideError::TooLarge(n)) => (n, "payload over the 256 MiB limit"),
        Err(ElideError::TooLargeElided(n)) => (
            n,
            "payload still over 32 MiB once elided (a top-level object with millions of members)",
        ),
    };
    let paths = Paths::from_env();
    let _ = nmem_proto::paths::ensure_private_dir(&paths.state);
    spool::log_dropped(&paths.spool_dropped_log(), "hook payload", seen, reason);
    Ok(None)
}

/// After a complete value, take what stdin already holds (without waiting for more), so data
/// written after the value is still seen and refused.
fn take_ready(stdin: &mut impl Read, buf: &mut Vec<u8>, chunk: &mut [u8]) {
    while buf.len() <= ORDINARY {
        let mut p = libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll on one pollfd we own, without waiting.
        let ready = unsafe { libc::poll(&mut p, 1, 0) };
        if ready != 1 || p.revents & libc::POLLIN == 0 {
            return;
        }
        match stdin.read(chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Keep the event for the daemon. If even that fails there is nothing left to try: say so on
/// stderr (the harness logs it) and still exit 0, as the agent must not be blocked.
fn spool_event(paths: &Paths, event_id: &str, received_at: i64, harness: Harness, payload: &[u8]) {
    let header = spool::Header {
        v: 1,
        event_id: event_id.to_string(),
        received_at,
        harness: harness.as_str().to_string(),
    };
    if let Err(e) = spool::store(&paths.spool, &header, payload) {
        eprintln!(
            "nmem: daemon unavailable and cannot spool to {}: {e}",
            paths.spool.display()
        );
    }
}

/// Write one line to stdout, for the harness. SIGPIPE is ignored first (the binary skips std's
/// start-up, which would have done it): a harness that closed its end must not kill the hook,
/// which then still exits 0.
pub fn print(s: &str) {
    // SAFETY: setting a signal's disposition to SIG_IGN has no other effect.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes());
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

fn fail(msg: &str) -> u8 {
    eprintln!("nmem record: {msg}");
    1
}

#[cfg(test)]
mod tests {
    use nmem_proto::harness::Harness;

    #[test]
    fn usage_names_every_harness() {
        let line = super::USAGE
            .lines()
            .find(|l| l.starts_with("Usage:"))
            .unwrap();
        for h in Harness::ALL {
            assert!(
                line.contains(h.as_str()),
                "`nmem record --help` does not name {h}"
            );
        }
    }
}
