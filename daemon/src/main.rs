//! `nmemd`: runs in the foreground until SIGTERM or SIGINT. Service managers (or a shim's
//! autostart) do the rest.

use nmem_daemon::{app::App, config::Config, listener, server, spool};
use nmem_proto::paths::{check_own_file, ensure_private_dir_for, Paths};
use std::process::ExitCode;

const HELP: &str = "\
nmemd: the nmem daemon, the only writer of nmem's database.

Usage: nmemd [--help] [--version] [--check-config]

Runs in the foreground until SIGTERM or SIGINT, serving the HTTP/JSON API on a Unix socket.
Normally started by the systemd user unit, launchd, or on demand by `nmem record`.

Environment:
  NMEM_HOME    put everything (nmem.db, nmemd.sock, spool/, config.toml) in this folder
  NMEM_DB      the database file
  NMEM_SOCKET  the socket path
  NMEM_LOG     log filter (default: info), e.g. debug or nmem_daemon=trace

Check on it with `nmemctl status`.";

fn main() -> ExitCode {
    match std::env::args().nth(1).as_deref() {
        Some("-h" | "--help") => {
            println!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Some("--check-config") => return check_config(),
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
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NMEM_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nmemd: {e:#}");
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
    let _lock = listener::DbLock::acquire(&paths)?;
    let (app, writer_thread) = App::open(paths.clone(), config)?;
    let bound = listener::bind(&paths)?;
    tracing::info!(
        version = nmem_proto::VERSION,
        db = %paths.db.display(),
        socket = %paths.socket.display(),
        "nmemd ready"
    );

    // Memory stays small and flat (docs/design.md §6: 64 MB at 1M observations): few threads, and
    // glibc's per-thread malloc arenas capped, since each would keep its own free memory.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
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
        let maintainer = tokio::spawn(nmem_daemon::maintain::idle_loop(app.clone(), stop_rx));
        // Semantic search: the installed model, and the thread that embeds what waits.
        if let Err(e) = app.semantic.activate(&app.writer).await {
            tracing::warn!("embedding model not activated: {e}");
        }
        let embedder =
            nmem_daemon::semantic::spawn_backfill(app.clone(), tokio::runtime::Handle::current());
        axum::serve(listener, server::router(app.clone()))
            .with_graceful_shutdown(listener::shutdown_signal())
            .await?;
        // No new connections; in-flight requests have their replies. Finish the queue.
        let _ = stop_tx.send(true);
        let _ = drainer.await;
        let _ = maintainer.await;
        app.semantic.stop();
        let _ = tokio::task::spawn_blocking(move || embedder.join()).await;
        app.writer.shutdown().await;
        anyhow::Ok(())
    })?;
    writer_thread
        .join()
        .map_err(|_| anyhow::anyhow!("the writer thread panicked"))?;
    if let Some(path) = bound.owned_path {
        let _ = std::fs::remove_file(path);
    }
    tracing::info!("nmemd stopped");
    Ok(())
}
