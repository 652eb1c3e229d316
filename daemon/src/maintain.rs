//! Maintenance: sweep what retention says is too old, fold the WAL back, reclaim free pages,
//! check and optimise the full-text indexes.
//! Run by `nmemctl maintain`, and by the daemon itself when it has been idle for a while; always
//! on the writer thread, never on the hook path.

use crate::app::App;
use crate::stats::Stats;
use rusqlite::Connection;
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Serialize, serde::Deserialize)]
pub struct Report {
    pub fts_indexed: u64,
    pub fts_integrity: String,
    pub freed_pages: i64,
    pub wal_checkpoint: String,
    pub db_bytes_before: u64,
    pub db_bytes_after: u64,
    pub millis: u64,
    /// What the retention sweep removed first (`None`: sweeping is off in the config).
    #[serde(default)]
    pub swept_observations: Option<u64>,
    #[serde(default)]
    pub swept_prompts: Option<u64>,
}

pub fn run(c: &mut Connection, db: &std::path::Path) -> Result<Report, String> {
    let start = std::time::Instant::now();
    let size = || std::fs::metadata(db).map(|m| m.len()).unwrap_or(0);
    let db_bytes_before = size();
    let e = |e: rusqlite::Error| e.to_string();
    let fts_indexed = crate::store::fts::index_all(c).map_err(e)?;
    let mut integrity = Vec::new();
    for t in ["observations_fts", "prompts_fts"] {
        match c.execute(
            &format!("INSERT INTO {t}({t}, rank) VALUES ('integrity-check', 1)"),
            [],
        ) {
            Ok(_) => integrity.push(format!("{t} ok")),
            Err(err) => integrity.push(format!(
                "{t} FAILED: {err} (back up with `nmemctl backup`, then rebuild the index: with nmemd stopped, sqlite3 nmem.db \"INSERT INTO {t}({t}) VALUES('delete-all'); UPDATE fts_state SET observations_upto = 0, prompts_upto = 0\", then start nmemd: it indexes everything again)"
            )),
        }
        c.execute(&format!("INSERT INTO {t}({t}) VALUES ('optimize')"), [])
            .map_err(e)?;
    }
    let free_before: i64 = c
        .query_row("PRAGMA freelist_count", [], |r| r.get(0))
        .map_err(e)?;
    c.execute_batch("PRAGMA incremental_vacuum;").map_err(e)?;
    let free_after: i64 = c
        .query_row("PRAGMA freelist_count", [], |r| r.get(0))
        .map_err(e)?;
    let (busy, log, done): (i64, i64, i64) = c
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .map_err(e)?;
    Ok(Report {
        fts_indexed,
        fts_integrity: integrity.join("; "),
        freed_pages: free_before - free_after,
        wal_checkpoint: if busy == 0 {
            format!("complete ({done} of {log} frames)")
        } else {
            "busy: readers held it back".into()
        },
        db_bytes_before,
        db_bytes_after: size(),
        millis: start.elapsed().as_millis() as u64,
        swept_observations: None,
        swept_prompts: None,
    })
}

/// Maintain through the writer, in queue order: first the retention sweep (when the config
/// allows it), then the rest.
pub async fn now(app: &App) -> Result<Report, String> {
    let swept = crate::retention::sweep(app).await?;
    let db = app.paths.db.clone();
    let json = app
        .writer
        .exec(move |c| run(c, &db).map(|r| serde_json::to_string(&r).expect("report serialises")))
        .await?;
    let mut report: Report = serde_json::from_str(&json).map_err(|e| e.to_string())?;
    if let Some(o) = swept {
        report.swept_observations = Some(o.deleted_observations);
        report.swept_prompts = Some(o.deleted_prompts);
    }
    Stats::set(&app.stats.last_maintenance_ms, nmem_proto::now_ms() as u64);
    Ok(report)
}

/// Every hour, maintain (retention sweep included) if nothing was written for a minute and the
/// last run is 6 hours old.
pub async fn idle_loop(app: Arc<App>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    const EVERY: Duration = Duration::from_secs(3600);
    const STALE_MS: u64 = 6 * 3600 * 1000;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(EVERY) => {}
            _ = shutdown.changed() => return,
        }
        let last = Stats::get(&app.stats.last_maintenance_ms);
        let idle = app.writer.depth() == 0
            && nmem_proto::now_ms() as u64 - Stats::get(&app.stats.last_write_ms) > 60_000;
        if idle && nmem_proto::now_ms() as u64 - last > STALE_MS {
            match now(&app).await {
                Ok(r) => tracing::info!(?r, "idle maintenance done"),
                Err(e) => app.stats.error(format!("idle maintenance failed: {e}")),
            }
        }
    }
}
