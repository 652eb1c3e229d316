//! `nmemctl status`: the daemon's view, or what the files alone say when it is down.

use super::*;
use nmem_proto::status;

/// How long the status route may take once the daemon has answered its health probe.
const STATUS_DEADLINE: std::time::Duration = std::time::Duration::from_secs(5);

/// `nmemctl status`: the daemon's view, or what the files say when it is down.
/// Exit 0 healthy, 1 not running, 2 degraded.
pub fn status(json: bool) -> ExitCode {
    let paths = Paths::from_env();
    // Bounded: a stopped or hung daemon must not make status hang too. The health probe says
    // so within a second; the status route itself (it counts rows on a reader, milliseconds on
    // a healthy daemon) gets longer, so that a daemon merely slowed by a loaded machine (an
    // embedder busy, builds running) is not reported as hung.
    let (mut s, reach_error) = match crate::daemon_client::call::<(), wire::Status>(
        "GET",
        wire::PATH_STATUS,
        None,
        Options {
            deadline: STATUS_DEADLINE,
            autostart: false,
            probe: true,
        },
    ) {
        Ok(s) => (s, None),
        Err(e) => (status::from_files(&paths), Some(e.to_string())),
    };
    // No answer, yet a process holds the database lock: it is alive, just not answering.
    let hung = match (&reach_error, s.running) {
        (Some(_), false) => crate::daemon_client::lock_owner(&paths),
        _ => None,
    };
    if let Some(pid) = hung {
        fill_from_db(&paths, &mut s);
        s.running = true;
        s.pid = Some(pid as u32);
        s.degraded.push(crate::daemon_client::not_answering(pid));
    } else if !s.running {
        fill_from_db(&paths, &mut s);
        diagnose_down(&paths, &mut s);
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
    if let Some(dir) = paths.db.parent() {
        if let Some((free, total)) = disk_space(dir) {
            // Less than 64 MiB, or than 2% of a small file system, is too little to write into.
            if free < (64 << 20).min(total / 50) {
                s.degraded.push(format!(
                    "the disk holding {} is full ({} free of {}): free some space; meanwhile hooks spool what they cannot store",
                    dir.display(),
                    bytes(free),
                    bytes(total)
                ));
            }
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

/// Free and total bytes of the file system holding `dir` (for an unprivileged writer).
fn disk_space(dir: &std::path::Path) -> Option<(u64, u64)> {
    let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(dir.as_os_str())).ok()?;
    // SAFETY: statvfs(3) fills the struct for a NUL-terminated path.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    let unit = st.f_frsize as u64;
    Some((st.f_bavail as u64 * unit, st.f_blocks as u64 * unit))
}

/// Why the daemon may not be running: its database folder, and the last error it logged.
fn diagnose_down(paths: &Paths, s: &mut wire::Status) {
    if let Some(dir) = paths.db.parent() {
        if dir.exists() && !dir.is_dir() {
            s.degraded.push(format!("the database folder {} is not a folder: move that file away, or set NMEM_DB elsewhere", dir.display()));
        } else if dir.is_dir() && !writable(Some(dir)) {
            s.degraded.push(format!("the database folder {} is read-only: make it writable (chmod u+w), then `nmemctl start`", dir.display()));
        }
    }
    if let Ok(log) = std::fs::read_to_string(paths.daemon_log()) {
        if let Some(line) = log.lines().rev().find(|l| l.starts_with("nmemd: ")) {
            s.degraded.push(format!(
                "nmemd could not start: {}",
                line.trim_start_matches("nmemd: ")
            ));
        }
    }
}

/// Counts straight from the database file (read-only) when the daemon is down.
fn fill_from_db(paths: &Paths, s: &mut wire::Status) {
    if !paths.db.exists() {
        return;
    }
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
        | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX
        | rusqlite::OpenFlags::SQLITE_OPEN_URI;
    let counts = |c: rusqlite::Connection| {
        c.query_row(nmem_proto::status::COUNTS_SQL, [], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
            ))
        })
    };
    let mut res = rusqlite::Connection::open_with_flags(&paths.db, flags).and_then(counts);
    // On a read-only file system SQLite cannot make the WAL's shared-memory file; with the
    // daemon down and the WAL empty nothing can change the file, so read it as immutable.
    let wal_empty =
        std::fs::metadata(paths.db.with_extension("db-wal")).map_or(true, |m| m.len() == 0);
    if res.is_err() && wal_empty && !writable(paths.db.parent()) {
        let uri = format!("file:{}?immutable=1", uri_path(&paths.db));
        res = rusqlite::Connection::open_with_flags(uri, flags).and_then(counts);
    }
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

/// Whether this user may create files in `dir`.
fn writable(dir: Option<&std::path::Path>) -> bool {
    let Some(dir) = dir else { return false };
    let Ok(c) = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(dir.as_os_str()))
    else {
        return false;
    };
    // SAFETY: access(2) on a NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// A path as the path of an SQLite `file:` URI (`%`, `?` and `#` escaped).
fn uri_path(p: &std::path::Path) -> String {
    p.to_string_lossy()
        .replace('%', "%25")
        .replace('?', "%3f")
        .replace('#', "%23")
}

pub(super) fn bytes(n: u64) -> String {
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
    let answering = s.version.is_some();
    if s.running && !answering {
        println!("nmemd      not answering (pid {})", s.pid.unwrap_or(0));
    } else if s.running {
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
    if s.running && answering {
        println!("queue      {} of {}", s.queue_depth, s.queue_capacity);
        match s.ui.as_ref().and_then(|u| u.address.as_ref()) {
            Some(a) => println!(
                "viewer     listening on http://{a}/ (`nmem ui` prints the URL with its token)"
            ),
            None => println!("viewer     off (`nmem ui` starts it)"),
        }
        match &s.embedding {
            Some(e) => match (&e.model, &e.problem) {
                (_, Some(p)) => println!("embedding  unusable: {p}"),
                (Some(m), None) => {
                    println!(
                        "embedding  {m}: {} embedded, {} waiting{}{}",
                        e.embedded,
                        e.pending,
                        e.engine
                            .as_ref()
                            .map(|en| match &e.onnx_graph {
                                Some(g) => format!(", engine {en} ({g})"),
                                None => format!(", engine {en}"),
                            })
                            .unwrap_or_default(),
                        e.embedder_pid
                            .map(|p| format!(" (embedder pid {p})"))
                            .unwrap_or_default()
                    );
                    if let Some(why) = &e.engine_fallback {
                        println!("           not the ONNX engine: {why}");
                    }
                }
                (None, None) => {}
            },
            None => println!("embedding  none (search is lexical; `nmemctl model import`)"),
        }
        println!(
            "events     {} recorded ({:.1}/s over the last minute), {} duplicates, {} dedup hits, {} redactions",
            s.events_recorded, s.ingest_per_s, s.duplicates, s.dedup_hits, s.redactions
        );
        if let Some(t) = s.last_maintenance_ms {
            println!(
                "maintained {}",
                nmem_proto::time::ago(nmem_proto::now_ms(), t as i64)
            );
        }
        if s.paused {
            println!("paused     recording is paused (`nmemctl resume`)");
        }
        if s.log_write_failures > 0 {
            println!(
                "log        {} lines could not be written (stderr full or closed) and were dropped",
                s.log_write_failures
            );
        }
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
