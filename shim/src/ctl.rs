//! `nmemctl` commands.

use nmem_proto::paths::Paths;
use nmem_proto::{client, status, wire};
use std::process::ExitCode;
use std::time::Duration;

/// Deadline for operator commands: generous, a person is waiting, not an agent.
const CTL_DEADLINE: Duration = Duration::from_secs(10);

/// `nmemctl status`: the daemon's view, or what the files say when it is down.
/// Exit 0 healthy, 1 not running, 2 degraded.
pub fn status(json: bool) -> ExitCode {
    let paths = Paths::from_env();
    let (mut s, reach_error) = match client::call(
        &paths.socket,
        "GET",
        wire::PATH_STATUS,
        &[],
        b"",
        CTL_DEADLINE,
    ) {
        Ok(r) if r.status == 200 => match serde_json::from_slice::<wire::Status>(&r.body) {
            Ok(s) => (s, None),
            Err(e) => (
                status::from_files(&paths),
                Some(format!("unreadable status reply: {e}")),
            ),
        },
        Ok(r) => (
            status::from_files(&paths),
            Some(format!("status request failed with HTTP {}", r.status)),
        ),
        Err(e) => (status::from_files(&paths), Some(e.to_string())),
    };
    if !s.running {
        fill_from_db(&paths, &mut s);
        if let Some(e) = &reach_error {
            if paths.socket.exists() {
                s.degraded.push(format!(
                    "the socket {} exists but nmemd does not answer ({e}); if it is hung, restart it (`nmemctl restart`, or kill it and run `nmemd`)",
                    paths.socket.display()
                ));
            }
        }
    }
    if let Some(v) = &s.version {
        if v != nmem_proto::VERSION || s.protocol != Some(nmem_proto::PROTOCOL) {
            s.degraded.push(format!(
                "version mismatch: nmemd is {v} (protocol {}), these tools are {} (protocol {}); restart nmemd after upgrading",
                s.protocol.unwrap_or(0),
                nmem_proto::VERSION,
                nmem_proto::PROTOCOL
            ));
        }
    }
    if s.spool_backlog > 0 && s.running {
        let age = s.spool_oldest_age_s.unwrap_or(0);
        if age > 300 {
            s.degraded.push(format!(
                "{} spooled events wait for more than 5 minutes; see the daemon log",
                s.spool_backlog
            ));
        }
    }
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&s).expect("status serialises")
        );
    } else {
        print_human(&s);
    }
    if !s.running {
        ExitCode::from(1)
    } else if !s.degraded.is_empty() {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}

/// Counts straight from the database file (read-only) when the daemon is down.
fn fill_from_db(paths: &Paths, s: &mut wire::Status) {
    if !paths.db.exists() {
        return;
    }
    let flags =
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let res = rusqlite::Connection::open_with_flags(&paths.db, flags).and_then(|c| {
        c.query_row(
            "SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM prompts),
                    (SELECT COUNT(*) FROM observations), (SELECT user_version FROM pragma_user_version)",
            [],
            |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?, r.get::<_, i64>(3)?)),
        )
    });
    match res {
        Ok((se, pr, ob, v)) => {
            s.sessions = se as u64;
            s.prompts = pr as u64;
            s.observations = ob as u64;
            s.schema_version = Some(v as u32);
        }
        Err(e) => s
            .degraded
            .push(format!("cannot read {}: {e}", paths.db.display())),
    }
}

fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

fn duration(s: u64) -> String {
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{}h", s / 86_400, (s % 86_400) / 3600),
    }
}

fn print_human(s: &wire::Status) {
    if s.running {
        println!(
            "nmemd      running (pid {}, up {}, version {}, protocol {})",
            s.pid.unwrap_or(0),
            duration(s.uptime_s.unwrap_or(0)),
            s.version.as_deref().unwrap_or("?"),
            s.protocol.unwrap_or(0)
        );
    } else {
        println!("nmemd      not running (events are spooled; `nmem record` starts it on the next event, or run `nmemd`)");
    }
    println!("socket     {}", s.socket);
    println!(
        "database   {} ({}, WAL {}{})",
        s.db_path,
        bytes(s.db_bytes),
        bytes(s.wal_bytes),
        s.schema_version
            .map(|v| format!(", schema {v}"))
            .unwrap_or_default()
    );
    println!(
        "memory     {} sessions, {} prompts, {} observations",
        s.sessions, s.prompts, s.observations
    );
    if s.running {
        println!("queue      {} of {}", s.queue_depth, s.queue_capacity);
        println!(
            "events     {} recorded, {} duplicates, {} dedup hits, {} redactions",
            s.events_recorded, s.duplicates, s.dedup_hits, s.redactions
        );
    }
    println!(
        "spool      {} waiting{}, {} drained, {} corrupt, {} dropped",
        s.spool_backlog,
        s.spool_oldest_age_s
            .map(|a| format!(" (oldest {})", duration(a)))
            .unwrap_or_default(),
        s.spool_drained,
        s.spool_corrupt,
        s.spool_dropped
    );
    if let Some(e) = &s.last_error {
        println!("last error {e}");
    }
    for d in &s.degraded {
        println!("problem    {d}");
    }
}
