//! Hybrid search at scale (`--model WHEEL_OR_DIR`): the figures of semantic search with the real
//! model, at each scale of the main run.
//!
//! Embedding a million rows for real takes hours on two cores, so after measuring the backfill
//! rate on real rows (at most `BACKFILL_ROWS`, at the smallest scale), every row gets a
//! synthetic vector: deterministic pseudo-random int8 values, written straight into the stopped
//! daemon's database with the model's watermarks at the newest rows (nothing left to embed). The
//! queries are embedded for real by the model's child process. Printed: hybrid search p50/p99
//! (project-scoped, as an agent asks) and across all projects, nmemd's RSS and the embedder's
//! RSS separately, and the bytes vectors add per observation.

use crate::{ms, pct, start_daemon, status, Report, QUERIES};
use nmem_proto::{client, wire};
use std::path::Path;
use std::time::{Duration, Instant};

/// Real rows embedded to measure the backfill rate.
const BACKFILL_ROWS: u64 = 10_000;

/// Import the model into `home` (idempotent).
pub fn import(model: &Path, home: &Path) -> anyhow::Result<nmem_embed::model::ModelInfo> {
    nmem_embed::model::import(model, &home.join("models"))
        .map_err(|e| anyhow::anyhow!("--model {}: {e}", model.display()))
}

/// With the daemon running and the model just imported: time the backfill of real rows.
/// Rows embedded before this call (while ingest ran) are not counted.
pub fn backfill_rate(socket: &Path, report: &mut Report, tag: &str) -> anyhow::Result<()> {
    let start = Instant::now();
    let before = status(socket)?.embedding.unwrap_or_default().embedded;
    let deadline = Duration::from_secs(1_800);
    loop {
        let s = status(socket)?;
        let e = s.embedding.unwrap_or_default();
        if let Some(p) = e.problem {
            anyhow::bail!("the embedding model cannot be used: {p}");
        }
        let done = e.embedded.saturating_sub(before);
        if done >= BACKFILL_ROWS || (done > 0 && e.pending == 0) {
            let rate = done as f64 / start.elapsed().as_secs_f64();
            println!(
                "{:<48} {:>10.1} rows/s  ({} real rows; a 100k import would take {:.0} min)",
                format!("embedding backfill [{tag}]"),
                rate,
                done,
                100_000.0 / rate / 60.0
            );
            report.push(format!("embed_backfill_rows_per_s_{tag}"), rate);
            return Ok(());
        }
        anyhow::ensure!(
            start.elapsed() < deadline,
            "the backfill did not get far in 30 minutes"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// A deterministic pseudo-random unit vector, int8 with its scale.
fn synthetic(id: i64, dim: usize) -> (f64, Vec<u8>) {
    let mut x = (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let v: Vec<f32> = (0..dim)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 2001) as f32 / 1000.0 - 1.0
        })
        .collect();
    let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt().max(1e-6);
    let v: Vec<f32> = v.iter().map(|a| a / norm).collect();
    let (scale, q) = nmem_embed::quant::quantize_i8(&v);
    (scale as f64, q.into_iter().map(|b| b as u8).collect())
}

/// With the daemon stopped: a vector for every row, and the model's watermarks at the newest.
pub fn fill_synthetic(db: &Path, model: &nmem_embed::model::ModelInfo) -> anyhow::Result<u64> {
    let mut c = rusqlite::Connection::open(db)?;
    let tx = c.transaction()?;
    tx.execute(
        "INSERT OR IGNORE INTO embed_models (name, dim) VALUES (?1, ?2)",
        rusqlite::params![model.id, model.dim as i64],
    )?;
    tx.execute("UPDATE embed_models SET active = (name = ?1)", [&model.id])?;
    let mid: i64 = tx.query_row(
        "SELECT id FROM embed_models WHERE name = ?1",
        [&model.id],
        |r| r.get(0),
    )?;
    let mut n = 0;
    for (table, vtable) in [
        ("observations", "obs_vectors"),
        ("prompts", "prompt_vectors"),
    ] {
        let ids: Vec<i64> = tx
            .prepare(&format!("SELECT id FROM {table}"))?
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        let mut put = tx.prepare(&format!(
            "INSERT OR REPLACE INTO {vtable} (id, model, scale, vec) VALUES (?1, ?2, ?3, ?4)"
        ))?;
        for id in ids {
            let (scale, vec) = synthetic(id, model.dim);
            put.execute(rusqlite::params![id, mid, scale, vec])?;
            n += 1;
        }
    }
    tx.execute(
        "UPDATE embed_models SET
           obs_hi = COALESCE((SELECT MAX(id) FROM observations), 0), obs_lo = 0,
           prompts_hi = COALESCE((SELECT MAX(id) FROM prompts), 0), prompts_lo = 0
         WHERE id = ?1",
        [mid],
    )?;
    tx.execute("DELETE FROM embed_redo", [])?;
    tx.commit()?;
    Ok(n)
}

/// The bytes the vector tables take (their pages, as `dbstat` counts them) and the
/// observations stored.
pub fn vector_bytes(db: &Path) -> anyhow::Result<(u64, u64)> {
    let c = rusqlite::Connection::open(db)?;
    let bytes: i64 = c.query_row(
        "SELECT COALESCE(SUM(pgsize), 0) FROM dbstat
          WHERE name IN ('obs_vectors', 'prompt_vectors')",
        [],
        |r| r.get(0),
    )?;
    let observations: i64 = c.query_row("SELECT COUNT(*) FROM observations", [], |r| r.get(0))?;
    Ok((bytes as u64, observations as u64))
}

fn rss_mb(pid: u32) -> (f64, f64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Start the daemon on the filled database and measure hybrid search.
pub fn queries(
    bins: &Path,
    home: &Path,
    observations: u64,
    report: &mut Report,
    tag: &str,
) -> anyhow::Result<()> {
    let mut daemon = start_daemon(bins, home)?;
    let socket = home.join("nmemd.sock");
    let mut conn = client::Conn::open(&socket)?;
    let mut post = |body: serde_json::Value| -> anyhow::Result<(Duration, serde_json::Value)> {
        let bytes = body.to_string();
        let t = Instant::now();
        let r = conn.request(
            "POST",
            wire::PATH_SEARCH,
            &[],
            bytes.as_bytes(),
            Duration::from_secs(60),
        )?;
        let d = t.elapsed();
        anyhow::ensure!(
            r.status == 200,
            "{body}: HTTP {} {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        );
        Ok((d, serde_json::from_slice(&r.body)?))
    };
    // The first query starts the model's process and loads the project's codes.
    let (first, reply) =
        post(serde_json::json!({"query": "warm up", "project": "acme-api", "mode": "hybrid"}))?;
    anyhow::ensure!(reply["mode"] == "hybrid", "search is not hybrid: {reply}");
    println!(
        "{:<48} {:>10.1} ms  (starts the model's process)",
        format!("hybrid search, first [{tag}]"),
        ms(first)
    );
    for (scope, project) in [
        ("project", serde_json::json!("acme-api")),
        ("all projects", serde_json::Value::Null),
    ] {
        // Warm once, as a running daemon is.
        for q in QUERIES {
            post(serde_json::json!({"query": q, "project": project, "mode": "hybrid"}))?;
        }
        let mut times = Vec::new();
        for _ in 0..2 {
            for q in QUERIES {
                times.push(
                    post(serde_json::json!({"query": q, "project": project, "mode": "hybrid"}))?.0,
                );
            }
        }
        times.sort();
        let key = if project.is_null() { "all" } else { "project" };
        println!(
            "{:<48} p50 {:>7.3} ms  p99 {:>7.3} ms  max {:>7.3} ms  (budget p50 <= 15 ms, p99 <= 50 ms)",
            format!("hybrid search, {scope} [{tag}, {observations} obs]"),
            ms(pct(&times, 0.5)),
            ms(pct(&times, 0.99)),
            ms(*times.last().unwrap())
        );
        report.push(format!("hybrid_{key}_p50_ms_{tag}"), ms(pct(&times, 0.5)));
        report.push(format!("hybrid_{key}_p99_ms_{tag}"), ms(pct(&times, 0.99)));
    }
    let (rss, peak) = rss_mb(daemon.id());
    println!(
        "{:<48} {:>10.1} MB  (peak {:.1} MB)",
        format!("nmemd RSS, hybrid [{tag}]"),
        rss,
        peak
    );
    report.push(format!("nmemd_rss_hybrid_mb_{tag}"), rss);
    if let Some(pid) = status(&socket)?.embedding.and_then(|e| e.embedder_pid) {
        let (rss, peak) = rss_mb(pid);
        println!(
            "{:<48} {:>10.1} MB  (peak {:.1} MB)",
            format!("embedder RSS (separate process) [{tag}]"),
            rss,
            peak
        );
        report.push(format!("embedder_rss_mb_{tag}"), rss);
    }
    daemon.stop()?;
    Ok(())
}
