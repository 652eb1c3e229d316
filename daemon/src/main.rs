//! `nmemd`: runs in the foreground until SIGTERM or SIGINT. Service managers (or a shim's
//! autostart) do the rest.

use nmem_daemon::{app::App, config::Config, listener, server, spool};
use nmem_proto::paths::{check_own_file, ensure_private_dir_for, Paths};
use std::process::ExitCode;

const HELP: &str = "\
nmemd: the nmem daemon, the only writer of nmem's database.

Usage: nmemd [--help] [--version] [--check-config] [--check-db FILE]

Runs in the foreground until SIGTERM or SIGINT, serving the HTTP/JSON API on a Unix socket.
Normally started by the systemd user unit, launchd, or on demand by `nmem record`.

Environment:
  NMEM_HOME    put everything (nmem.db, nmemd.sock, spool/, config.toml) in this folder
  NMEM_DB      the database file
  NMEM_SOCKET  the socket path
  NMEM_LOG     log filter (default: info), e.g. debug or nmem_daemon=trace
  NMEM_SQL_TRACE=1  log every SQL statement with SQLite's counters (VM steps, time) and each
               full-text search's query plan, for diagnosis (slow: not for normal use)

Check on it with `nmemctl status`.";

fn main() -> ExitCode {
    match std::env::args().nth(1).as_deref() {
        Some("-h" | "--help") => {
            println!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Some("--check-config") => return check_config(),
        Some("--check-db") => {
            return match std::env::args_os().nth(2) {
                Some(f) => check_db(std::path::Path::new(&f)),
                None => {
                    eprintln!("nmemd: --check-db takes a file: nmemd --check-db BACKUP.db");
                    ExitCode::from(2)
                }
            }
        }
        Some("-V" | "--version") => {
            println!(
                "nmemd {} (protocol {})",
                nmem_proto::VERSION,
                nmem_proto::PROTOCOL
            );
            return ExitCode::SUCCESS;
        }
        Some(other) => {
            eprintln!("nmemd: unknown argument `{other}`; see `nmemd --help`");
            return ExitCode::from(2);
        }
        None => {}
    }
    nmem_daemon::log::init();
    nmem_daemon::trace::init_from_env();
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            nmem_daemon::log::line(&format!("nmemd: {e:#}"));
            ExitCode::FAILURE
        }
    }
}

/// Validate config.toml and its redaction patterns; exit 0 when all is well.
fn check_config() -> ExitCode {
    let paths = Paths::from_env();
    let config = match Config::load(&paths.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let (_, problems) = nmem_daemon::redact::Redactor::new(&config.redact.patterns);
    for p in &problems {
        eprintln!("{p}");
    }
    if problems.is_empty() {
        let what = if paths.config.exists() {
            "is valid"
        } else {
            "does not exist: the defaults apply"
        };
        println!("{} {what}", paths.config.display());
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Whether `file` is a database this nmemd can use (what `nmemctl restore` checks before it
/// swaps anything): SQLite's integrity check passes, nmem's tables are there, and its schema
/// is not newer than this nmemd's. Read-only; says what is wrong, or what the file holds.
fn check_db(file: &std::path::Path) -> ExitCode {
    let known = nmem_daemon::store::schema::SCHEMA_VERSION;
    let res = (|| -> Result<String, String> {
        let meta = std::fs::metadata(file).map_err(|e| format!("cannot read it: {e}"))?;
        if !meta.is_file() {
            return Err("it is not a regular file".into());
        }
        let c = rusqlite::Connection::open_with_flags(
            file,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| format!("cannot open it: {e}"))?;
        let ok: String = c
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .map_err(|e| format!("it is not an SQLite database ({e})"))?;
        if ok != "ok" {
            return Err(format!("it fails SQLite's integrity check: {ok}"));
        }
        let version: u32 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| e.to_string())?;
        let missing: Vec<&str> = ["sessions", "prompts", "observations", "fts_state", "audit"]
            .into_iter()
            .filter(|t| {
                c.query_row(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
                    [t],
                    |_| Ok(()),
                )
                .is_err()
            })
            .collect();
        if version == 0 || !missing.is_empty() {
            return Err(format!(
                "it is not an nmem database (schema version {version}, missing tables: {})",
                missing.join(", ")
            ));
        }
        if version > known {
            return Err(format!(
                "it was written by a newer nmem (schema {version}; this nmemd knows up to {known}): upgrade nmem first"
            ));
        }
        let (o, p): (i64, i64) = c
            .query_row(
                "SELECT (SELECT COUNT(*) FROM observations), (SELECT COUNT(*) FROM prompts)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(|e| e.to_string())?;
        Ok(format!(
            "an nmem database, schema {version}, {o} observations and {p} prompts, integrity ok"
        ))
    })();
    match res {
        Ok(what) => {
            println!("{}: {what}", file.display());
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("nmemd: {} cannot be used: {why}", file.display());
            ExitCode::FAILURE
        }
    }
}

/// Once shutdown has begun, the process exits within this even if something hangs (a stuck
/// file read, a query that ignores its interrupt): the lock is released with the process, so a
/// new `nmemd` can start. Every acknowledged event is already committed, so nothing is lost.
const EXIT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(20);

fn exit_watchdog() {
    let _ = std::thread::Builder::new()
        .name("exit-watchdog".into())
        .spawn(|| {
            std::thread::sleep(EXIT_DEADLINE);
            eprintln!(
                "nmemd: still not stopped {} s after the signal; exiting now",
                EXIT_DEADLINE.as_secs()
            );
            // SAFETY: ends the process without running destructors that may be what hangs.
            unsafe { libc::_exit(1) };
        });
}

fn run() -> anyhow::Result<()> {
    // Everything nmemd creates (database, WAL, socket, spool files) is the owner's alone.
    unsafe { libc::umask(0o077) };
    let paths = Paths::from_env();
    let config = Config::load(&paths.config)?;
    listener::preflight(&paths)?;
    // Each folder must be the user's own and closed to others (never chmod'ed if it exists); the
    // error names the variable that moves it.
    for (dir, var) in [
        (paths.db.parent(), "NMEM_DB"),
        (Some(paths.state.as_path()), "NMEM_HOME"),
        (Some(paths.spool.as_path()), "NMEM_HOME"),
    ] {
        let Some(dir) = dir.filter(|d| !d.as_os_str().is_empty()) else {
            continue;
        };
        ensure_private_dir_for(dir, var)
            .map_err(|e| anyhow::anyhow!("cannot use {}: {e}", dir.display()))?;
    }
    // The database and its journals are never symlinks, FIFOs or another user's files.
    for suffix in ["", "-wal", "-shm"] {
        let mut name = paths.db.clone().into_os_string();
        name.push(suffix);
        check_own_file(std::path::Path::new(&name))?;
    }
    // Descriptors: a common default is 1,024 soft with a far higher hard limit.
    let fd_limit = nmem_daemon::conn::raise_nofile_limit();
    let limits = std::sync::Arc::new(nmem_daemon::conn::Limits::new(&config.limits, fd_limit));
    let _lock = listener::DbLock::acquire(&paths)?;
    nmem_daemon::store::readers::limit_sqlite_memory();
    let (app, writer_thread) = App::open(paths.clone(), config)?;
    let bound = listener::bind(&paths)?;
    tracing::info!(
        version = nmem_proto::VERSION,
        db = %paths.db.display(),
        socket = %paths.socket.display(),
        fd_limit,
        max_connections = limits.max_connections,
        "nmemd ready"
    );

    // Memory stays small and flat (docs/design.md §6: 64 MB at 1M observations): few threads, and
    // glibc's per-thread malloc arenas capped, since each keeps its own free memory: at 8 (one
    // per thread that allocates on the event path) rather than 2, where the threads contended
    // for the arenas' locks (6% of nmemd's CPU per event under ingest); `malloc_trim` after a
    // large body trims every arena (ARCHITECTURE.md, seventeenth round).
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 8);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(8)
        .enable_all()
        .build()?;
    rt.block_on(async {
        bound.listener.set_nonblocking(true)?;
        let listener = tokio::net::UnixListener::from_std(bound.listener)?;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let drainer = tokio::spawn(spool::run(app.clone(), stop_rx.clone()));
        // SessionStart digests precomputed once writes settle, off the hook's path.
        let warmer = tokio::spawn(nmem_daemon::context::warm_loop(
            app.clone(),
            stop_rx.clone(),
        ));
        // Sync with the user's other devices: idle unless enabled (docs/sync.md).
        let syncer = tokio::spawn(nmem_daemon::sync::run(app.clone(), stop_rx.clone()));
        let maintainer = tokio::spawn(nmem_daemon::maintain::idle_loop(app.clone(), stop_rx));
        // Semantic search: the installed model, and the thread that embeds what waits.
        if let Err(e) = app.semantic.activate(&app.writer).await {
            tracing::warn!("embedding model not activated: {e}");
        }
        let embedder =
            nmem_daemon::semantic::spawn_backfill(app.clone(), tokio::runtime::Handle::current());
        let stopping = {
            let app = app.clone();
            async move {
                listener::shutdown_signal().await;
                // Running queries end now (interrupted), so connections can finish; so do
                // the viewer's event streams.
                app.readers.interrupt_all();
                let _ = app.web.closing.send(true);
                exit_watchdog();
            }
        };
        let router = server::router(app.clone(), limits.clone());
        // The web viewer: off unless `[http] enabled` (else `nmem ui` starts it).
        app.web.set_limits(limits.clone());
        app.web
            .ready
            .store(true, std::sync::atomic::Ordering::Relaxed);
        if app.config.http.enabled {
            if let Err(e) = nmem_daemon::web::start(&app).await {
                tracing::error!("the web viewer did not start: {}", e.message);
            }
        }
        // The accept loop runs as a task on the workers, not on this thread: a connection's task
        // is then spawned onto the worker that accepted it and runs next there, instead of
        // waking a worker from this thread for every new connection (each hook's).
        if let Err(e) = tokio::spawn(nmem_daemon::conn::serve(
            listener,
            app.clone(),
            router,
            limits,
            stopping,
        ))
        .await
        {
            tracing::error!("the accept loop ended abnormally: {e}");
        }
        // No new connections; in-flight requests have their replies. Finish the queue.
        app.web.stop().await;
        let _ = stop_tx.send(true);
        let _ = drainer.await;
        let _ = maintainer.await;
        let _ = syncer.await;
        let _ = warmer.await;
        app.semantic.stop();
        let _ = tokio::task::spawn_blocking(move || embedder.join()).await;
        app.writer.shutdown().await;
        anyhow::Ok(())
    })?;
    // Dropping a runtime waits for its blocking tasks without end (a query, a file read): give
    // them a moment, then leave them, so the process exits and releases the lock.
    rt.shutdown_timeout(std::time::Duration::from_secs(2));
    writer_thread
        .join()
        .map_err(|_| anyhow::anyhow!("the writer thread panicked"))?;
    if let Some(path) = bound.owned_path {
        let _ = std::fs::remove_file(path);
    }
    tracing::info!("nmemd stopped");
    Ok(())
}
