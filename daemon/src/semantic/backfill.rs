//! The backfill thread: embeds what has no vector yet, after commit and off the hook path.
//!
//! Rows are observations, prompts and document chunks (in that order within each step), each
//! table with its own watermarks. Order: rows above the active model's high watermark (new since
//! it was activated), rows whose text changed (`embed_redo`), then the backlog below the low
//! watermark, newest first. Each
//! batch is read on a read-only connection, embedded by the child process, and written through
//! the writer with the watermarks, in one transaction; a vector is written only if its row still
//! holds the text that was embedded (a redaction in between queues it again instead). The
//! thread yields to ingest: it waits while the writer has a queue or wrote in the last moments.

use super::{Active, Key, Semantic};
use crate::app::App;
use rusqlite::{params, Connection};
use std::sync::Arc;
use std::time::Duration;

/// Rows per batch: small, so a search waiting for the child waits little.
const BATCH: usize = 8;
/// Characters of a row given to the model (it reads its first 256 tokens).
const TEXT_CHARS: usize = 2_000;
/// Ingest is "active" when the writer wrote this recently.
const INGEST_QUIET_MS: u64 = 250;

/// Which rows a batch holds, and how the watermarks move once it is stored.
enum Advance {
    /// New rows: the high watermark rises to the batch's last id.
    High(i64),
    /// Rows whose text changed.
    Redo,
    /// The backlog: the low watermark falls below the batch's first id.
    Low(i64),
}

/// A table the backfill embeds: its rows, vectors, `embed_redo` kind and watermark columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Table {
    Observations,
    Prompts,
    /// Document chunks (migration 014): not in the in-memory code cache, a search scans their
    /// vectors exactly (`docs::nearest`).
    DocChunks,
}

impl Table {
    const ALL: [Table; 3] = [Table::Observations, Table::Prompts, Table::DocChunks];

    fn kind(self) -> i64 {
        match self {
            Table::Observations => 0,
            Table::Prompts => 1,
            Table::DocChunks => 2,
        }
    }

    fn rows(self) -> &'static str {
        match self {
            Table::Observations => "observations",
            Table::Prompts => "prompts",
            Table::DocChunks => "doc_chunks",
        }
    }

    fn vectors(self) -> &'static str {
        match self {
            Table::Observations => "obs_vectors",
            Table::Prompts => "prompt_vectors",
            Table::DocChunks => "doc_vectors",
        }
    }

    /// The high and low watermark columns of `embed_models`.
    fn marks(self) -> (&'static str, &'static str) {
        match self {
            Table::Observations => ("obs_hi", "obs_lo"),
            Table::Prompts => ("prompts_hi", "prompts_lo"),
            Table::DocChunks => ("docs_hi", "docs_lo"),
        }
    }

    /// `SELECT id, content, project` of the table's rows as `t` (a chunk's project is its
    /// source's), for a query to complete with a condition and an order.
    fn select(self) -> String {
        match self {
            Table::DocChunks => "SELECT t.id, t.content, s.project FROM doc_chunks t \
                                 JOIN doc_sources s ON s.id = t.source_id"
                .into(),
            t => format!("SELECT t.id, t.content, t.project FROM {} t", t.rows()),
        }
    }
}

struct Batch {
    table: Table,
    rows: Vec<(i64, String, String)>, // id, text, project
    advance: Advance,
}

pub fn spawn_backfill(app: Arc<App>, rt: tokio::runtime::Handle) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("nmem-embed".into())
        .spawn(move || run(app, rt))
        .expect("spawn the embedding thread")
}

fn run(app: Arc<App>, rt: tokio::runtime::Handle) {
    let sem: &Semantic = &app.semantic;
    let mut failures = 0u32;
    while !sem.stopping() {
        // Either engine embeds (an install may have only `nmem-embed-onnx`).
        let Some(active) = sem
            .active()
            .filter(|_| sem.bin.is_some() || sem.onnx_bin.is_some())
        else {
            sem.wait(Duration::from_secs(5));
            continue;
        };
        // Yield to ingest.
        let since_write = nmem_proto::now_ms() as u64
            - crate::stats::Stats::get(&app.stats.last_write_ms).min(nmem_proto::now_ms() as u64);
        if app.writer.depth() > 0 || since_write < INGEST_QUIET_MS {
            std::thread::sleep(Duration::from_millis(INGEST_QUIET_MS));
            continue;
        }
        let model = active.db_id;
        let batch = match app
            .readers
            .run_blocking(move |c| next_batch(c, &active, BATCH))
        {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!("embedding: reading the backlog failed: {e}");
                sem.wait(Duration::from_secs(5));
                continue;
            }
        };
        let Some(batch) = batch else {
            sem.stop_if_idle();
            sem.wait(Duration::from_secs(2));
            continue;
        };
        if batch.rows.is_empty() {
            // Only a watermark to move: nothing to embed.
            let res = rt.block_on(
                app.writer
                    .exec(move |c| Ok(store(c, model, &batch, &[], &[])?)),
            );
            if let Err(e) = res {
                tracing::warn!("embedding: moving the watermark failed (retried later): {e}");
                sem.wait(Duration::from_secs(5));
            }
            continue;
        }
        let texts: Vec<String> = batch
            .rows
            .iter()
            .map(|(_, t, _)| t.chars().take(TEXT_CHARS).collect())
            .collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let (active, vectors) = match sem.embed_blocking(&refs) {
            Ok(v) => v,
            Err(e) => {
                failures += 1;
                tracing::warn!("embedding failed (try {failures}, retried later): {e}");
                // Back off: 5 s, 10 s, … up to 5 minutes.
                sem.wait(Duration::from_secs((5 * failures as u64).min(300)));
                continue;
            }
        };
        failures = 0;
        if vectors.len() != batch.rows.len() {
            tracing::warn!(
                "embedding: the model returned {} vectors for {} texts",
                vectors.len(),
                batch.rows.len()
            );
            sem.wait(Duration::from_secs(5));
            continue;
        }
        let quantized: Vec<(f32, Vec<i8>)> = vectors
            .iter()
            .map(|v| nmem_embed::quant::quantize_i8(v))
            .collect();
        // Observations and prompts join the cached codes; chunks are scanned exactly.
        let stored: Vec<(Key, String, Vec<i8>)> = batch
            .rows
            .iter()
            .zip(&quantized)
            .filter(|_| batch.table != Table::DocChunks)
            .map(|((id, _, project), (_, q))| {
                (
                    Key {
                        prompt: batch.table == Table::Prompts,
                        id: *id,
                    },
                    project.clone(),
                    q.clone(),
                )
            })
            .collect();
        let model = active.db_id;
        let res = rt.block_on(
            app.writer
                .exec(move |c| Ok(store(c, model, &batch, &texts, &quantized)?)),
        );
        match res {
            Ok(_) => sem.add_to_index(&active, &stored),
            Err(e) => {
                tracing::warn!("embedding: storing vectors failed (retried later): {e}");
                sem.wait(Duration::from_secs(5));
            }
        }
    }
}

/// The next rows to embed, if any.
fn next_batch(c: &Connection, active: &Active, n: usize) -> rusqlite::Result<Option<Batch>> {
    let mut marks = Vec::with_capacity(Table::ALL.len());
    for t in Table::ALL {
        let (hi, lo) = t.marks();
        marks.push(c.query_row(
            &format!("SELECT {hi}, {lo} FROM embed_models WHERE id = ?1"),
            [active.db_id],
            |r| Ok((t, r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)),
        )?);
    }
    let rows = |sql: &str, a: i64| -> rusqlite::Result<Vec<(i64, String, String)>> {
        let mut stmt = c.prepare_cached(sql)?;
        // ?3 (the model) is bound only where the statement names it.
        let (n, model) = (n as i64, active.db_id);
        let mut p = params![a, n, model].to_vec();
        p.truncate(stmt.parameter_count());
        let r = stmt.query_map(&p[..], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        r.collect()
    };
    for &(table, hi, _) in &marks {
        let got = rows(
            &format!("{} WHERE t.id > ?1 ORDER BY t.id LIMIT ?2", table.select()),
            hi,
        )?;
        if let Some(last) = got.last().map(|r| r.0) {
            return Ok(Some(Batch {
                table,
                rows: got,
                advance: Advance::High(last),
            }));
        }
    }
    for table in Table::ALL {
        let got = rows(
            &format!(
                "{} JOIN embed_redo r ON r.id = t.id AND r.kind = ?1 ORDER BY r.id DESC LIMIT ?2",
                table.select()
            ),
            table.kind(),
        )?;
        if !got.is_empty() {
            return Ok(Some(Batch {
                table,
                rows: got,
                advance: Advance::Redo,
            }));
        }
    }
    for &(table, _, lo) in &marks {
        let got = rows(
            // Rows already holding this model's vector are skipped (a model activated again
            // after another: see `register`).
            &format!(
                "{} WHERE t.id <= ?1 AND NOT EXISTS
                   (SELECT 1 FROM {} v WHERE v.id = t.id AND v.model = ?3)
                 ORDER BY t.id DESC LIMIT ?2",
                table.select(),
                table.vectors()
            ),
            lo,
        )?;
        if let Some(first) = got.last().map(|r| r.0) {
            return Ok(Some(Batch {
                table,
                rows: got,
                advance: Advance::Low(first - 1),
            }));
        }
        if lo > 0 {
            // Every row below holds this model's vector: the watermark goes to the bottom
            // (else each pass would walk them again).
            return Ok(Some(Batch {
                table,
                rows: Vec::new(),
                advance: Advance::Low(0),
            }));
        }
    }
    Ok(None)
}

/// Store a batch's vectors and move the watermarks, in one transaction.
fn store(
    c: &mut Connection,
    model: i64,
    batch: &Batch,
    texts: &[String],
    vectors: &[(f32, Vec<i8>)],
) -> rusqlite::Result<usize> {
    let tx = c.transaction()?;
    let (table, vtable, kind) = (
        batch.table.rows(),
        batch.table.vectors(),
        batch.table.kind(),
    );
    let (hi, lo) = batch.table.marks();
    let mut stored = 0;
    {
        let mut put = tx.prepare_cached(&format!(
            "INSERT OR REPLACE INTO {vtable} (id, model, scale, vec)
             SELECT ?1, ?2, ?3, ?4 WHERE EXISTS
               (SELECT 1 FROM {table} WHERE id = ?1 AND substr(content, 1, {TEXT_CHARS}) = ?5)"
        ))?;
        let mut redo = tx.prepare_cached(&format!(
            "INSERT OR IGNORE INTO embed_redo (kind, id)
             SELECT ?1, ?2 WHERE EXISTS (SELECT 1 FROM {table} WHERE id = ?2)"
        ))?;
        let mut done = tx.prepare_cached("DELETE FROM embed_redo WHERE kind = ?1 AND id = ?2")?;
        for (((id, _, _), text), (scale, q)) in batch.rows.iter().zip(texts).zip(vectors) {
            let bytes: Vec<u8> = q.iter().map(|&x| x as u8).collect();
            let n = put.execute(params![id, model, *scale as f64, bytes, text])?;
            done.execute(params![kind, id])?;
            if n == 0 {
                // Its text changed meanwhile (or it is gone): embed it again if it exists.
                redo.execute(params![kind, id])?;
            }
            stored += n;
        }
    }
    match batch.advance {
        Advance::High(to) => {
            tx.execute(
                &format!("UPDATE embed_models SET {hi} = MAX({hi}, ?1) WHERE id = ?2"),
                params![to, model],
            )?;
        }
        Advance::Low(to) => {
            tx.execute(
                &format!("UPDATE embed_models SET {lo} = MIN({lo}, ?1) WHERE id = ?2"),
                params![to, model],
            )?;
        }
        Advance::Redo => {}
    }
    tx.commit()?;
    Ok(stored)
}
