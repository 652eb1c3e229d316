//! `nmemctl backup|restore|export`: copies of the memory, with the online backup API on a
//! read-only connection.

use super::*;

/// `nmemctl backup PATH`: one consistent snapshot of the live data, even while the daemon
/// writes; read-only on the live database.
///
/// `VACUUM INTO` rather than a page copy: it writes only live rows, so what purge or redact
/// deleted (free pages, dead cells) is not carried into backups. The copy is written under a
/// temporary name in the destination's folder, integrity-checked and synced, then linked to
/// the requested name, which must not exist (a link never replaces a file): a backup killed
/// half-way leaves no file at that name, only a hidden temporary one that the next run removes.
pub fn backup(dest: &std::path::Path) -> ExitCode {
    let paths = Paths::from_env();
    if dest.exists() {
        return fail(format!("{} exists; choose a new file name", dest.display()));
    }
    if !paths.db.exists() {
        return fail(format!(
            "there is no database at {} to back up",
            paths.db.display()
        ));
    }
    let Some(name) = dest.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return fail(format!("{} is not a file name", dest.display()));
    };
    let dir = match dest.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    // Leftovers of killed runs go first; the new temporary name is this run's own.
    remove_stale_temporaries(&dir, &name);
    let tmp = dir.join(format!(".{name}.nmem-backup-{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let res = (|| -> Result<String, String> {
        let src = rusqlite::Connection::open_with_flags(
            &paths.db,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .map_err(|e| e.to_string())?;
        src.busy_timeout(Duration::from_secs(10))
            .map_err(|e| e.to_string())?;
        src.execute("VACUUM INTO ?1", [tmp.to_string_lossy()])
            .map_err(|e| e.to_string())?;
        let copy = rusqlite::Connection::open(&tmp).map_err(|e| e.to_string())?;
        let ok: String = copy
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .map_err(|e| e.to_string())?;
        drop(copy);
        if ok != "ok" {
            return Err(format!("the copy failed its integrity check: {ok}"));
        }
        std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .and_then(|_| std::fs::File::open(&tmp)?.sync_all())
            .map_err(|e| format!("cannot finish {}: {e}", tmp.display()))?;
        std::fs::hard_link(&tmp, dest).map_err(|e| {
            format!(
                "cannot create {}: {e}{}",
                dest.display(),
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    " (it appeared meanwhile; choose a new file name)"
                } else {
                    ""
                }
            )
        })?;
        let _ = std::fs::remove_file(&tmp);
        if let Ok(d) = std::fs::File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(ok)
    })();
    match res {
        Ok(_) => {
            println!(
                "backed up {} to {} ({}, live data only), integrity ok",
                paths.db.display(),
                dest.display(),
                bytes(std::fs::metadata(dest).map(|m| m.len()).unwrap_or(0))
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            let _ = std::fs::remove_file(tmp.with_extension("tmp-journal"));
            fail(format!("backup of {} failed: {e}", paths.db.display()))
        }
    }
}

/// Remove `.NAME.nmem-backup-PID.tmp` files (and SQLite's `-journal` beside them) left by
/// backups that were killed (their process is gone).
fn remove_stale_temporaries(dir: &std::path::Path, name: &str) {
    let prefix = format!(".{name}.nmem-backup-");
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let f = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = f
            .strip_prefix(&prefix)
            .and_then(|r| r.split_once(".tmp"))
            .and_then(|(p, _)| p.parse::<i32>().ok())
        else {
            continue;
        };
        // SAFETY: signal 0 only asks whether the process exists.
        if pid > 0 && unsafe { libc::kill(pid, 0) } != 0 {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// `nmemctl restore FILE`: put a backup in place of the database.
///
/// The file is checked first by `nmemd --check-db` (integrity, nmem's tables, a schema version
/// this nmemd knows); then the daemon is stopped ([`stop_daemon`]), the database lock is held
/// so that no daemon (an autostarting hook's included) opens the database during the swap, the
/// current database and its WAL are renamed aside to `nmem.db.replaced-<time>`, a copy of the
/// backup is moved in, and the daemon is started again if it was running. Hooks meanwhile
/// spool, as for any stop; the spool drains into the restored database.
pub fn restore(file: &std::path::Path) -> ExitCode {
    use std::os::fd::AsRawFd;
    let paths = Paths::from_env();
    let daemon = std::env::current_exe()
        .map(|e| e.with_file_name("nmemd"))
        .unwrap_or_else(|_| "nmemd".into());
    match std::process::Command::new(&daemon)
        .arg("--check-db")
        .arg(file)
        .status()
    {
        Ok(s) if s.success() => {}
        Ok(_) => {
            return fail(format!(
                "{} was not restored; nothing was changed",
                file.display()
            ))
        }
        Err(e) => {
            return fail(format!(
                "cannot run {} to check the file: {e}",
                daemon.display()
            ))
        }
    }
    let Some(dir) = paths.db.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return fail(format!("{} has no folder", paths.db.display()));
    };
    if let Err(e) = nmem_proto::paths::ensure_private_dir(dir) {
        return fail(format!("cannot create {}: {e}", dir.display()));
    }
    // The copy first, beside the database (same file system: the final rename is atomic), with
    // SQLite's backup API: it reads a source that has a WAL of its own correctly.
    let tmp = dir.join(format!(".nmem.db.restore-{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let copied = (|| -> rusqlite::Result<()> {
        let src = rusqlite::Connection::open_with_flags(
            file,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )?;
        let mut dst = rusqlite::Connection::open(&tmp)?;
        rusqlite::backup::Backup::new(&src, &mut dst)?.step(-1)?;
        dst.execute_batch("PRAGMA journal_mode = DELETE;")?;
        Ok(())
    })()
    .map_err(|e| e.to_string())
    .and_then(|_| {
        std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .and_then(|_| std::fs::File::open(&tmp)?.sync_all())
            .map_err(|e| e.to_string())
    });
    if let Err(e) = copied {
        let _ = std::fs::remove_file(&tmp);
        return fail(format!(
            "cannot copy {} beside the database: {e}; nothing was changed",
            file.display()
        ));
    }
    let was_running = !matches!(stop_daemon(&paths), Stopped::NotRunning);
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(paths.db_lock());
    let held = lock.as_ref().is_ok_and(|f| {
        // SAFETY: flock on a descriptor we own; released when it is closed.
        unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
    });
    if !held {
        let _ = std::fs::remove_file(&tmp);
        return fail(format!(
            "nmemd still holds {} (it was started again meanwhile?): run `nmemctl stop`, then restore again; nothing was changed",
            paths.db_lock().display()
        ));
    }
    let stamp: String = nmem_proto::time::format_rfc3339_ms(nmem_proto::now_ms())
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    let aside = dir.join(format!(
        "{}.replaced-{stamp}",
        paths.db.file_name().unwrap_or_default().to_string_lossy()
    ));
    let side = |p: &std::path::Path, ext: &str| {
        let mut s = p.as_os_str().to_os_string();
        s.push(ext);
        std::path::PathBuf::from(s)
    };
    let swapped = (|| -> std::io::Result<bool> {
        let had = paths.db.exists();
        if had {
            // The WAL goes with its database (SQLite finds it by name); the shared-memory
            // index is rebuilt from it.
            std::fs::rename(&paths.db, &aside)?;
            match std::fs::rename(side(&paths.db, "-wal"), side(&aside, "-wal")) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            let _ = std::fs::remove_file(side(&paths.db, "-shm"));
        }
        std::fs::rename(&tmp, &paths.db)?;
        if let Ok(d) = std::fs::File::open(dir) {
            d.sync_all()?;
        }
        Ok(had)
    })();
    drop(lock);
    let had = match swapped {
        Ok(had) => had,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return fail(format!(
                "restoring failed while swapping the files: {e}; the previous database is at {} if it is no longer at {}",
                aside.display(),
                paths.db.display()
            ));
        }
    };
    println!("restored {} into {}", file.display(), paths.db.display());
    if had {
        println!("the replaced database is kept as {}", aside.display());
    }
    if was_running {
        if !crate::autostart::start_daemon_now(&paths)
            || !crate::daemon_client::wait_healthy(&paths, Duration::from_secs(10))
        {
            return fail(format!(
                "restored, but nmemd did not come back up; see `nmemctl logs` ({})",
                paths.daemon_log().display()
            ));
        }
        println!("nmemd started again");
    }
    ExitCode::SUCCESS
}

/// `nmemctl export`: everything as JSON lines (sessions, prompts, observations, knowledge and
/// work items with their evidence and audit trail), read-only.
pub fn export(output: Option<&std::path::Path>) -> ExitCode {
    let paths = Paths::from_env();
    let mut out: Box<dyn std::io::Write> = match output {
        Some(p) => match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(p)
        {
            Ok(f) => Box::new(std::io::BufWriter::new(f)),
            Err(e) => return fail(format!("cannot create {}: {e}", p.display())),
        },
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let res = (|| -> Result<u64, String> {
        let c = rusqlite::Connection::open_with_flags(
            &paths.db,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .map_err(|e| e.to_string())?;
        let mut n = 0;
        for (kind, sql) in [
            ("session", "SELECT * FROM sessions ORDER BY started_at"),
            ("prompt", "SELECT * FROM prompts ORDER BY id"),
            ("observation", "SELECT * FROM observations ORDER BY id"),
            ("doc_source", "SELECT * FROM doc_sources ORDER BY id"),
            ("doc_chunk", "SELECT * FROM doc_chunks ORDER BY id"),
            ("knowledge", "SELECT * FROM knowledge ORDER BY id"),
            (
                "knowledge_evidence",
                "SELECT * FROM knowledge_evidence ORDER BY knowledge_id, ord",
            ),
            (
                "knowledge_audit",
                "SELECT * FROM knowledge_audit ORDER BY id",
            ),
        ] {
            // A database not yet upgraded by nmemd (schema before 9 or 10) lacks the
            // documents' or the knowledge tables.
            let table = sql.split_whitespace().nth(3).unwrap_or_default();
            let exists: bool = c
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
                    [table],
                    |r| r.get(0),
                )
                .map_err(|e| e.to_string())?;
            if !exists {
                continue;
            }
            let mut stmt = c.prepare(sql).map_err(|e| e.to_string())?;
            let names: Vec<String> = stmt.column_names().iter().map(|s| s.to_string()).collect();
            let mut rows = stmt.query([]).map_err(|e| e.to_string())?;
            while let Some(row) = rows.next().map_err(|e| e.to_string())? {
                let mut obj = serde_json::Map::new();
                obj.insert("type".into(), kind.into());
                for (i, name) in names.iter().enumerate() {
                    let v = match row.get_ref(i).map_err(|e| e.to_string())? {
                        rusqlite::types::ValueRef::Null => serde_json::Value::Null,
                        rusqlite::types::ValueRef::Integer(x) => x.into(),
                        rusqlite::types::ValueRef::Real(x) => x.into(),
                        rusqlite::types::ValueRef::Text(t) => {
                            let s = String::from_utf8_lossy(t).into_owned();
                            // JSON columns stay JSON.
                            if matches!(name.as_str(), "metadata" | "signature" | "payload")
                                && s.starts_with('{')
                            {
                                serde_json::from_str(&s).unwrap_or(serde_json::Value::String(s))
                            } else {
                                serde_json::Value::String(s)
                            }
                        }
                        rusqlite::types::ValueRef::Blob(_) => serde_json::Value::Null,
                    };
                    obj.insert(name.clone(), v);
                }
                serde_json::to_writer(&mut out, &obj).map_err(|e| e.to_string())?;
                out.write_all(b"\n").map_err(|e| e.to_string())?;
                n += 1;
            }
        }
        out.flush().map_err(|e| e.to_string())?;
        Ok(n)
    })();
    match res {
        Ok(n) => {
            if let Some(p) = output {
                eprintln!("exported {n} records to {}", p.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(format!("export failed: {e}")),
    }
}
