//! `nmem sync enable | join | now | status | disable | quarantine | verify`: the commands of
//! sync (docs/sync.md).
//! Each asks the running daemon, which does the work; `--json` prints its reply.
//!
//! The recovery phrase of `join` is read from a file or standard input by default, so it stays
//! out of `ps` and the shell's history; `--phrase` exists for scripts that accept that.

use crate::cli::finish;
use crate::daemon_client::{call, CallError, Options};
use crate::render::Text;
use nmem_proto::admin::Empty;
use nmem_proto::sync::{
    EnableRequest, Enabled, JoinRequest, QuarantineRequest, Quarantined, Rebuilt, SyncStatus,
    Verified,
};
use nmem_proto::wire;
use std::io::Read;
use std::process::ExitCode;
use std::time::Duration;

/// A round with the server may move thousands of events.
const OPTIONS: Options = Options {
    deadline: Duration::from_secs(300),
    autostart: true,
    probe: true,
};

fn post<B: serde::Serialize, R: serde::de::DeserializeOwned>(
    path: &str,
    body: &B,
) -> Result<R, CallError> {
    call("POST", path, Some(body), OPTIONS)
}

fn text(body: String) -> Text {
    Text {
        body,
        ..Default::default()
    }
}

pub fn enable(url: Option<String>, json: bool) -> ExitCode {
    let res = post::<_, Enabled>(wire::PATH_SYNC_ENABLE, &EnableRequest { url });
    finish(res, json, |e| {
        text(format!(
            "sync enabled: space {}, key fingerprint {}, this device {}\n\n\
             Recovery phrase (shown once; needed to join another device, keep it safe):\n\n  {}\n\n\
             On another device: nmem sync join --phrase-file FILE (or the phrase on standard input)\n",
            e.space,
            e.fingerprint,
            e.device,
            e.recovery_phrase.as_deref().unwrap_or("")
        ))
    })
}

/// Where `join` reads the phrase from.
pub enum PhraseFrom {
    Arg(String),
    File(std::path::PathBuf),
    Stdin,
}

pub fn join(from: PhraseFrom, url: Option<String>, json: bool) -> ExitCode {
    let phrase = match from {
        PhraseFrom::Arg(p) => p,
        PhraseFrom::File(f) => match std::fs::read_to_string(&f) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("nmem: cannot read the phrase file {}: {e}", f.display());
                return ExitCode::from(1);
            }
        },
        PhraseFrom::Stdin => {
            let mut p = String::new();
            if let Err(e) = std::io::stdin().take(64 * 1024).read_to_string(&mut p) {
                eprintln!("nmem: cannot read the phrase from standard input: {e}");
                return ExitCode::from(1);
            }
            p
        }
    };
    if phrase.trim().is_empty() {
        eprintln!(
            "nmem: no recovery phrase given: pass --phrase-file FILE, or the 24 words on \
             standard input"
        );
        return ExitCode::from(1);
    }
    let res = post::<_, Enabled>(
        wire::PATH_SYNC_JOIN,
        &JoinRequest {
            phrase: phrase.trim().to_string(),
            url,
        },
    );
    finish(res, json, |e| {
        text(format!(
            "joined space {} (key fingerprint {}) as device {}\n",
            e.space, e.fingerprint, e.device
        ))
    })
}

pub fn now(json: bool) -> ExitCode {
    finish(post(wire::PATH_SYNC_NOW, &Empty {}), json, status_text)
}

pub fn status(json: bool) -> ExitCode {
    finish(post(wire::PATH_SYNC_STATUS, &Empty {}), json, status_text)
}

pub fn disable(json: bool) -> ExitCode {
    let res = post::<_, SyncStatus>(wire::PATH_SYNC_DISABLE, &Empty {});
    finish(res, json, |_| {
        text("sync disabled: nothing is logged or sent from now on\n".into())
    })
}

fn status_text(s: &SyncStatus) -> Text {
    use std::fmt::Write as _;
    let Some(space) = &s.space else {
        return text("sync is not set up: `nmem sync enable` or `nmem sync join`\n".into());
    };
    let mut b = String::new();
    let _ = writeln!(
        b,
        "sync {}",
        if s.cloned {
            "stopped (cloned device)"
        } else if s.enabled {
            "enabled"
        } else {
            "disabled"
        }
    );
    let _ = writeln!(b, "space        {space}");
    let _ = writeln!(b, "fingerprint  {}", s.fingerprint.as_deref().unwrap_or(""));
    let _ = writeln!(b, "device       {}", s.device.as_deref().unwrap_or(""));
    if let Some(u) = &s.url {
        let _ = writeln!(b, "server       {u}");
    }
    let _ = writeln!(
        b,
        "local seq    {} ({} pending upload)",
        s.local_seq, s.pending
    );
    for h in &s.heads {
        let me = s.device.as_deref() == Some(h.device.as_str());
        let _ = writeln!(
            b,
            "  {}{}  head {}  applied {}",
            h.device,
            if me { " (this device)" } else { "" },
            h.seq,
            h.applied
        );
    }
    if s.quarantined > 0 {
        let _ = writeln!(
            b,
            "quarantined: {} (held back by the current redaction rules, not uploaded: \
             `nmem sync quarantine` lists them, `--release` uploads them as they are, `--drop` \
             keeps them on this device only)",
            s.quarantined
        );
    }
    if let Some(e) = &s.last_error {
        let _ = writeln!(b, "last error   {e}");
    }
    text(b)
}

pub fn quarantine(release: bool, drop: bool, json: bool) -> ExitCode {
    let res = post::<_, Quarantined>(
        wire::PATH_SYNC_QUARANTINE,
        &QuarantineRequest { release, drop },
    );
    finish(res, json, |q| {
        use std::fmt::Write as _;
        let mut b = String::new();
        if q.released > 0 {
            let _ = writeln!(
                b,
                "released {} event(s): uploaded at the next round",
                q.released
            );
        }
        if q.dropped > 0 {
            let _ = writeln!(
                b,
                "dropped {} event(s): kept on this device only",
                q.dropped
            );
        }
        if q.released == 0 && q.dropped == 0 {
            let _ = writeln!(b, "quarantined: {}", q.quarantined);
            for e in &q.events {
                let _ = writeln!(
                    b,
                    "  seq {}  {}  {}  {}",
                    e.seq,
                    e.event_id,
                    e.project,
                    e.preview.replace('\n', " ")
                );
            }
            if q.quarantined > 0 {
                let _ = writeln!(
                    b,
                    "`nmem sync quarantine --release` uploads them as they are; `--drop` keeps \
                     them on this device only"
                );
            }
        }
        text(b)
    })
}

/// `nmem sync verify`: exit 0 when every stream agrees, 1 when one differs (with what differs).
pub fn verify(json: bool) -> ExitCode {
    let res = post::<_, Verified>(wire::PATH_SYNC_VERIFY, &Empty {});
    let differs = matches!(&res, Ok(v) if !v.ok);
    let code = finish(res, json, |v| {
        use std::fmt::Write as _;
        let mut b = String::new();
        for s in &v.streams {
            let _ = writeln!(
                b,
                "{} {}{}: server head {}, here {}; {} vs {} events, hash {} vs {}",
                if s.ok { "ok     " } else { "DIFFERS" },
                s.device,
                if s.this_device { " (this device)" } else { "" },
                s.server_head,
                s.local_head,
                s.server_count,
                s.local_count,
                s.server_hash,
                s.local_hash
            );
            let list = |v: &[i64]| {
                v.iter()
                    .map(|n| n.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            if !s.missing_on_server.is_empty() {
                let _ = writeln!(
                    b,
                    "  missing on the server: seq {}",
                    list(&s.missing_on_server)
                );
            }
            if !s.missing_here.is_empty() {
                let _ = writeln!(b, "  missing here: seq {}", list(&s.missing_here));
            }
            if !s.different.is_empty() {
                let _ = writeln!(b, "  different events: seq {}", list(&s.different));
            }
        }
        let _ = writeln!(
            b,
            "{}",
            if v.ok {
                "the server and this home agree"
            } else {
                "the server and this home differ: a row deleted or changed on the server is not \
                 repaired by nmem (a missing event of this device is not uploaded again; restore \
                 the server from a backup, or `nmem sync disable` and `join` to start a new \
                 stream)"
            }
        );
        text(b)
    });
    if differs {
        ExitCode::from(1)
    } else {
        code
    }
}

/// `nmem rebuild`: regenerate the projections from the event log.
pub fn rebuild(json: bool) -> ExitCode {
    let res = post::<_, Rebuilt>(wire::PATH_REBUILD, &Empty {});
    finish(res, json, |r| {
        text(format!(
            "rebuilt: {} logged events read, {} stored again, {} rows re-indexed{}{}\n",
            r.events,
            r.restored,
            r.indexed,
            if r.unreadable > 0 {
                format!(", {} unreadable (upgrade nmem)", r.unreadable)
            } else {
                String::new()
            },
            if r.sync_enabled {
                ""
            } else {
                " (sync is not enabled: only events logged while it was are in the log)"
            }
        ))
    })
}
