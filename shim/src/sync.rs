//! `nmem sync enable | join | now | status | disable | leave | identity | exclude | include |
//! quarantine | verify`, `nmem share`, `nmem team` and `nmem rebuild`: the commands of sync
//! (docs/sync.md).
//! Each asks the running daemon, which does the work; `--json` prints its reply.
//!
//! The recovery phrase of `join` is read from a file or standard input by default, so it stays
//! out of `ps` and the shell's history; `--phrase` exists for scripts that accept that.

use crate::cli::finish;
use crate::daemon_client::{call, CallError, Options};
use crate::render::Text;
use nmem_proto::admin::Empty;
use nmem_proto::sync::{
    EnableRequest, Enabled, JoinRequest, QuarantineRequest, Quarantined, RebuildProgress, Rebuilt,
    SyncStatus, Verified,
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

/// `nmem sync leave`: this device leaves its personal space (not a pause: see `disable`).
pub fn leave(json: bool) -> ExitCode {
    let res = post::<_, SyncStatus>(wire::PATH_SYNC_LEAVE, &Empty {});
    finish(res, json, |_| {
        text(
            "left the personal space: this device no longer syncs, and forgot the space's key, \
             its device id and its cursors; everything it holds stays here. To come back: `nmem \
             sync join` with the recovery phrase (what the space holds already is not sent \
             again)\n"
                .into(),
        )
    })
}

/// `nmem team leave SPACE [--forget-data]`.
pub fn team_leave(space: String, forget_data: bool, json: bool) -> ExitCode {
    let res = post::<_, nmem_proto::sync::TeamLeft>(
        wire::PATH_TEAM_LEAVE,
        &nmem_proto::sync::TeamLeaveRequest { space, forget_data },
    );
    finish(res, json, |l| {
        let mut b = format!(
            "left team space {}{}\n",
            l.space,
            if l.was_member_on_server {
                ": removed from its members on the server (the next rotation leaves this device \
                 out)"
            } else {
                " (the server no longer listed this device as a member)"
            }
        );
        if forget_data {
            b.push_str(&format!(
                "deleted {} row(s) received from the team's devices\n",
                l.forgotten
            ));
        } else {
            b.push_str(
                "what this device received from the team stays here (`--forget-data` deletes \
                 it)\n",
            );
        }
        text(b)
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
    if let Some(f) = &s.backfill {
        let _ = writeln!(
            b,
            "backfill     {}/{}{}",
            f.done,
            f.total,
            if f.running {
                " (history stored before sync was on, uploading)"
            } else {
                " (done)"
            }
        );
    }
    if !s.excluded.is_empty() {
        let _ = writeln!(b, "kept local   {}", s.excluded.join(", "));
    }
    for t in &s.teams {
        let _ = writeln!(
            b,
            "team {}  key {}  local seq {}  shares {}{}",
            t.space,
            t.key_id,
            t.local_seq,
            if t.shares.is_empty() {
                "nothing".to_string()
            } else {
                t.shares
                    .iter()
                    .map(|x| x.project.clone())
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            t.locked.as_deref().map(|_| "  (removed)").unwrap_or("")
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

// Team spaces and routing (docs/sync.md, "Team spaces"): `nmem sync identity|exclude|include`,
// `nmem share`, `nmem team create|add|remove|join`.

use nmem_proto::sync::{ExcludeRequest, Identity, Routing, ShareRequest, TeamRequest, TeamStatus};

pub fn identity(json: bool) -> ExitCode {
    let res = post::<_, Identity>(wire::PATH_SYNC_IDENTITY, &Empty {});
    finish(res, json, |i| text(format!("{}\n", i.public_key)))
}

pub fn exclude(project: String, include: bool, json: bool) -> ExitCode {
    let res = post::<_, Routing>(
        wire::PATH_SYNC_EXCLUDE,
        &ExcludeRequest { project, include },
    );
    finish(res, json, routing_text)
}

pub fn share(
    project: String,
    space: String,
    with: Vec<String>,
    stop: bool,
    json: bool,
) -> ExitCode {
    let res = post::<_, Routing>(
        wire::PATH_SYNC_SHARE,
        &ShareRequest {
            project,
            space,
            with,
            stop,
        },
    );
    finish(res, json, routing_text)
}

fn routing_text(r: &Routing) -> Text {
    use std::fmt::Write as _;
    let mut b = String::new();
    if r.excluded.is_empty() {
        let _ = writeln!(b, "personal space: every project");
    } else {
        let _ = writeln!(
            b,
            "personal space: every project except {}",
            r.excluded.join(", ")
        );
    }
    for s in &r.shares {
        let _ = writeln!(
            b,
            "team space {}: project {} ({}{}{})",
            s.space,
            s.project,
            r.default_types.join(", "),
            if s.with.is_empty() { "" } else { ", and " },
            s.with.join(", ")
        );
    }
    text(b)
}

/// Which team command.
pub enum TeamAction {
    Create,
    Add,
    Remove,
    Join,
}

pub fn team(action: TeamAction, space: String, member: Option<String>, json: bool) -> ExitCode {
    let (path, done) = match action {
        TeamAction::Create => (wire::PATH_TEAM_CREATE, "created team space"),
        TeamAction::Add => (wire::PATH_TEAM_ADD, "added the member to team space"),
        TeamAction::Remove => (
            wire::PATH_TEAM_REMOVE,
            "removed the member and rotated the key of team space",
        ),
        TeamAction::Join => (wire::PATH_TEAM_JOIN, "joined team space"),
    };
    let res = post::<_, TeamStatus>(path, &TeamRequest { space, member });
    finish(res, json, |t| {
        use std::fmt::Write as _;
        let mut b = format!("{done} {} (key {})\n", t.space, t.key_id);
        if !t.members.is_empty() {
            let _ = writeln!(b, "members:");
            for m in &t.members {
                let _ = writeln!(b, "  {m}");
            }
        }
        if t.shares.is_empty() {
            let _ = writeln!(
                b,
                "nothing is shared with it yet: `nmem share PROJECT --team {}`",
                t.space
            );
        }
        text(b)
    })
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
        let mut space = None;
        for s in &v.streams {
            if space != Some(&s.space) && !s.space.is_empty() {
                let _ = writeln!(b, "space {}:", s.space);
                space = Some(&s.space);
            }
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

/// `nmem rebuild` may read a million logged events and re-index every row.
const REBUILD: Options = Options {
    deadline: Duration::from_secs(4 * 3600),
    ..OPTIONS
};

/// A running rebuild's progress, asked between its updates.
const PROGRESS: Options = Options {
    deadline: Duration::from_secs(2),
    autostart: false,
    probe: false,
};

/// `nmem rebuild`: regenerate the projections from the event log. On a terminal (and without
/// `--json`) a progress bar on stderr follows the daemon's phases; otherwise nothing is printed
/// until the counts.
pub fn rebuild(json: bool) -> ExitCode {
    let res = if !json && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        with_progress()
    } else {
        call("POST", wire::PATH_REBUILD, Some(&Empty {}), REBUILD)
    };
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

/// The rebuild's request on a thread, and a bar fed by `/v1/rebuild/progress` until it answers.
fn with_progress() -> Result<Rebuilt, CallError> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(call::<_, Rebuilt>(
            "POST",
            wire::PATH_REBUILD,
            Some(&Empty {}),
            REBUILD,
        ));
    });
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg:>10} [{bar:30}] {pos}/{len} {elapsed}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    bar.set_message("starting");
    loop {
        // The answer, or a tick to ask for progress again.
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(res) => {
                bar.finish_and_clear();
                return res;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                bar.finish_and_clear();
                return Err(CallError::BadReply(
                    "the rebuild's request thread stopped".into(),
                ));
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        if let Ok(p) = call::<_, RebuildProgress>(
            "POST",
            wire::PATH_REBUILD_PROGRESS,
            Some(&Empty {}),
            PROGRESS,
        ) {
            if p.running {
                bar.set_message(p.phase);
                bar.set_length(p.total.max(p.done));
                bar.set_position(p.done);
            }
        }
    }
}
