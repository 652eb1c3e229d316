//! `nmemctl redact`: apply the current redaction rules to what is already stored (after adding a
//! pattern to config.toml). A dry run counts what would change; applying rewrites those rows on
//! the writer (the full-text index follows through its update triggers) and writes an audit row,
//! with `secure_delete` on and the indexes merged, so the old values are gone from the file.

use crate::app::App;
use crate::redact::Redactor;
use rusqlite::Connection;
use std::sync::Arc;

pub use nmem_proto::admin::RedactReport as RedactOutcome;

/// id, content, file_path, rel_path, metadata.
type ObsRow = (i64, String, Option<String>, Option<String>, Option<String>);

fn redact_json(r: &Redactor, v: &mut serde_json::Value) -> u32 {
    match v {
        serde_json::Value::String(s) => r.redact(s),
        serde_json::Value::Array(a) => a.iter_mut().map(|x| redact_json(r, x)).sum(),
        serde_json::Value::Object(o) => o.values_mut().map(|x| redact_json(r, x)).sum(),
        _ => 0,
    }
}

fn run(c: &mut Connection, r: &Redactor, apply: bool) -> rusqlite::Result<RedactOutcome> {
    let mut out = RedactOutcome {
        mode: nmem_proto::admin::Mode::from_apply(apply),
        ..Default::default()
    };
    let tx = c.transaction()?;
    // The rows rewritten: synced copies of them are rewritten too (`sync::edit`), or forgotten
    // (a tombstone) where this home has no envelope of theirs (docs/sync.md).
    let mut rewritten: (Vec<i64>, Vec<i64>) = Default::default();
    let mut items = Vec::new();
    {
        let mut read =
            tx.prepare("SELECT id, content, file_path, rel_path, metadata FROM observations")?;
        let mut write = tx.prepare("UPDATE observations SET content = ?2, file_path = ?3, rel_path = ?4, metadata = ?5, redacted = 1 WHERE id = ?1")?;
        let rows: Vec<ObsRow> = read
            .query_map([], |x| {
                Ok((x.get(0)?, x.get(1)?, x.get(2)?, x.get(3)?, x.get(4)?))
            })?
            .collect::<Result<_, _>>()?;
        for (id, mut content, mut file, mut rel, meta) in rows {
            let mut n = r.redact(&mut content);
            n += file.as_mut().map(|f| r.redact(f)).unwrap_or(0);
            n += rel.as_mut().map(|f| r.redact(f)).unwrap_or(0);
            let meta = match meta
                .as_deref()
                .map(serde_json::from_str::<serde_json::Value>)
            {
                Some(Ok(mut v)) => {
                    n += redact_json(r, &mut v);
                    Some(v.to_string())
                }
                _ => meta,
            };
            if n > 0 {
                out.observations += 1;
                out.secrets += n as u64;
                if out.ids.len() < 1000 {
                    out.ids.push(format!("o{id}"));
                }
                if apply {
                    write.execute(rusqlite::params![id, content, file, rel, meta])?;
                    rewritten.0.push(id);
                }
            }
        }
        let mut read = tx.prepare("SELECT id, content FROM prompts")?;
        let mut write =
            tx.prepare("UPDATE prompts SET content = ?2, redacted = 1 WHERE id = ?1")?;
        let rows: Vec<(i64, String)> = read
            .query_map([], |x| Ok((x.get(0)?, x.get(1)?)))?
            .collect::<Result<_, _>>()?;
        for (id, mut content) in rows {
            let n = r.redact(&mut content);
            if n > 0 {
                out.prompts += 1;
                out.secrets += n as u64;
                if out.ids.len() < 1000 {
                    out.ids.push(format!("p{id}"));
                }
                if apply {
                    write.execute(rusqlite::params![id, content])?;
                    rewritten.1.push(id);
                }
            }
        }
        // Knowledge and work items written through the API (a note follows its memory row by
        // trigger, so those are left to the observation's rewrite above).
        let mut read = tx.prepare(
            "SELECT id, title, summary, reason, payload FROM knowledge WHERE obs_id IS NULL",
        )?;
        let mut write = tx.prepare(
            "UPDATE knowledge SET title = ?2, summary = ?3, reason = ?4, payload = ?5 WHERE id = ?1",
        )?;
        type KRow = (i64, String, String, String, Option<String>);
        let rows: Vec<KRow> = read
            .query_map([], |x| {
                Ok((x.get(0)?, x.get(1)?, x.get(2)?, x.get(3)?, x.get(4)?))
            })?
            .collect::<Result<_, _>>()?;
        for (id, mut title, mut summary, mut reason, payload) in rows {
            let mut n = r.redact(&mut title) + r.redact(&mut summary) + r.redact(&mut reason);
            let payload = match payload
                .as_deref()
                .map(serde_json::from_str::<serde_json::Value>)
            {
                Some(Ok(mut v)) => {
                    n += redact_json(r, &mut v);
                    Some(v.to_string())
                }
                _ => payload,
            };
            if n > 0 {
                out.knowledge += 1;
                out.secrets += n as u64;
                if out.ids.len() < 1000 {
                    out.ids.push(format!("k{id}"));
                }
                if apply {
                    write.execute(rusqlite::params![id, title, summary, reason, payload])?;
                    items.push(id);
                }
            }
        }
        // The reasons in items' audit trails (why one was archived, superseded, contested…).
        let mut read = tx.prepare(
            "SELECT id, knowledge_id, reason FROM knowledge_audit WHERE reason IS NOT NULL",
        )?;
        let mut write = tx.prepare("UPDATE knowledge_audit SET reason = ?2 WHERE id = ?1")?;
        let rows: Vec<(i64, i64, String)> = read
            .query_map([], |x| Ok((x.get(0)?, x.get(1)?, x.get(2)?)))?
            .collect::<Result<_, _>>()?;
        for (id, item, mut reason) in rows {
            let n = r.redact(&mut reason);
            if n > 0 {
                out.secrets += n as u64;
                let name = format!("k{item}");
                if !out.ids.contains(&name) {
                    out.knowledge += 1;
                    if out.ids.len() < 1000 {
                        out.ids.push(name);
                    }
                }
                if apply {
                    write.execute(rusqlite::params![id, reason])?;
                }
            }
        }
        if apply {
            let mut events =
                crate::sync::tombstone::ids_of_rows(&tx, "observations", &rewritten.0)?;
            events.extend(crate::sync::tombstone::ids_of_rows(
                &tx,
                "prompts",
                &rewritten.1,
            )?);
            // Shipped as rewrites where their envelopes are here; the rest forgotten elsewhere.
            let rest = crate::sync::edit::rewritten(&tx, r, &events)?;
            crate::sync::tombstone::emit(&tx, &rest, "redact")?;
            // Knowledge items: sent again with their new text; the old text's events emptied.
            crate::sync::edit::items_rewritten(&tx, &items)?;
        }
        if apply && out.observations + out.prompts + out.knowledge > 0 {
            tx.execute(
                "INSERT INTO audit (timestamp, action, detail, observations, prompts) VALUES (?1, 'redact', ?2, ?3, ?4)",
                rusqlite::params![nmem_proto::now_ms(), serde_json::json!({"secrets": out.secrets}).to_string(), out.observations as i64, out.prompts as i64],
            )?;
        }
    }
    if apply {
        tx.commit()?;
    } else {
        drop(tx);
    }
    Ok(out)
}

pub async fn redact(
    app: Arc<App>,
    apply: bool,
) -> Result<RedactOutcome, crate::store::writer::WriteError> {
    let a = app.clone();
    app.writer
        .exec(move |c| {
            crate::store::fts::index_all(c)?;
            // Applied, the old values must not survive in freed cells, FTS segments or the WAL.
            let res = if apply {
                crate::maintain::scrubbed(c, crate::maintain::Scrub::Thorough, |c| {
                    run(c, &a.ingest.redactor, true)
                })
                .map(|(o, _)| o)
            } else {
                run(c, &a.ingest.redactor, false)
            };
            Ok(res?)
        })
        .await
}
