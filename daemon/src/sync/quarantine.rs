//! The uploader's last check (docs/sync.md, "Quarantine"): before sealing, each logged event
//! passes the **current** redaction rules again. An event they would change (a rule added after
//! it was recorded) is quarantined: it is not uploaded; a placeholder without ciphertext takes
//! its sequence number on the server (so the stream stays dense and other devices go on), and
//! its envelope stays in the local log until the user releases it (`nmem sync quarantine
//! --release`: uploaded as it is, under a new sequence number) or drops it (`--drop`: it stays on
//! this device only).
//!
//! A quarantined row's local id gets the suffix `#quarantined`: the placeholder's server id is
//! derived from it, so a released copy under the original id is a different event on the server.

use crate::redact::Redactor;
use nmem_proto::sync::{Quarantined, QuarantinedEvent};
use rusqlite::{params, Connection};

use super::envelope::Envelope;
use super::log::Stream;

/// `sync_log.state` values (migration 016; 1 and 2 are [`super::tombstone`]'s).
pub const HELD: i64 = 3;
pub const RELEASED: i64 = 4;
/// Out of quarantine: released (logged again under a new sequence number) or dropped.
pub const ENDED: i64 = 5;

const SUFFIX: &str = "#quarantined";

/// Whether the current rules would change this envelope (an ordinary event only).
pub fn hits(redactor: &Redactor, envelope: &[u8]) -> bool {
    let Ok(mut env) = Envelope::from_bytes(envelope) else {
        return false;
    };
    if env.tombstone.is_some() {
        return false;
    }
    if let Some(k) = env.knowledge.as_mut() {
        return super::envelope::redact_knowledge(redactor, k) > 0;
    }
    match env.edit {
        Some(super::envelope::Edit::Rewrite { envelope }) => {
            return hits(redactor, &envelope.to_bytes())
        }
        Some(super::envelope::Edit::Pin { .. }) => return false,
        None => {}
    }
    let Ok(mut ev) = env.into_prepared() else {
        return false;
    };
    !redactor.apply(&mut ev) || ev.redactions > 0
}

/// Quarantine the events of `stream` at `seqs` (not yet uploaded): their ids take the suffix.
pub fn hold(conn: &mut Connection, stream: &Stream, seqs: &[i64]) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    {
        let mut st = tx.prepare_cached(&stream.sql(
            "UPDATE {log} SET event_id = event_id || ?3, state = ?4
             WHERE {rows} AND seq = ?2 AND state = 0",
        ))?;
        for s in seqs {
            st.execute(params![stream.param(), s, SUFFIX, HELD])?;
        }
    }
    tx.commit()
}

/// The id an event is uploaded under, given its log row after [`hold`].
pub fn held_id(id: &str) -> String {
    format!("{id}{SUFFIX}")
}

/// The quarantined events, each counted once however many streams hold it.
pub fn count(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row(
        &format!("SELECT COUNT(DISTINCT event_id) FROM ({HELD_ROWS})"),
        [HELD],
        |r| r.get(0),
    )
}

/// Every stream's quarantined rows: (space or NULL for the personal stream, seq, event id,
/// envelope), on the parameter `?1` = [`HELD`].
const HELD_ROWS: &str = "SELECT NULL AS space, seq, event_id, envelope FROM sync_log
     WHERE state = ?1
     UNION ALL SELECT space, seq, event_id, envelope FROM sync_space_log WHERE state = ?1";

type HeldRow = (Option<String>, i64, String, Vec<u8>);

fn held_rows(conn: &Connection, limit: i64) -> rusqlite::Result<Vec<HeldRow>> {
    let mut st = conn.prepare(&format!(
        "SELECT space, seq, event_id, envelope FROM ({HELD_ROWS})
         ORDER BY space IS NOT NULL, space, seq LIMIT ?2"
    ))?;
    let rows = st.query_map(params![HELD, limit], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
    })?;
    rows.collect()
}

/// The quarantined events, each with a preview redacted by the current rules.
fn list(conn: &Connection, redactor: &Redactor) -> rusqlite::Result<Vec<QuarantinedEvent>> {
    let mut out: Vec<QuarantinedEvent> = Vec::new();
    for (_, seq, id, env) in held_rows(conn, 1000)? {
        let id = id.trim_end_matches(SUFFIX).to_string();
        // Held in the personal stream and a team's: listed once (the first, personal).
        if out.iter().any(|e| e.event_id == id) {
            continue;
        }
        let env = Envelope::from_bytes(&env).ok();
        let (project, mut preview) = match &env {
            Some(e) => (
                e.project.name.clone(),
                match &e.record {
                    super::envelope::EnvRecord::Observation { content, .. } => content.clone(),
                    super::envelope::EnvRecord::Prompt { content, .. } => content.clone(),
                },
            ),
            None => (String::new(), String::new()),
        };
        redactor.redact(&mut preview);
        let preview: String = preview.chars().take(120).collect();
        out.push(QuarantinedEvent {
            seq,
            event_id: id,
            project,
            preview,
        });
    }
    Ok(out)
}

/// `nmem sync quarantine [--release | --drop]`: list, release (log each again under its own id
/// and a new sequence number, uploaded as is) or drop (keep it on this device only).
pub fn act(
    conn: &mut Connection,
    redactor: &Redactor,
    release: bool,
    drop: bool,
) -> rusqlite::Result<Quarantined> {
    let events = list(conn, redactor)?;
    let total = count(conn)?;
    if !release && !drop {
        return Ok(Quarantined {
            quarantined: total,
            released: 0,
            dropped: 0,
            events,
        });
    }
    let tx = conn.transaction()?;
    let n = {
        let mut events = std::collections::HashSet::new();
        for (space, seq, id, env) in held_rows(&tx, i64::MAX)? {
            let stream = space.map_or(Stream::Personal, Stream::Team);
            let original = id.trim_end_matches(SUFFIX);
            if release {
                super::log::append_to(&tx, &stream, original, &env)?;
                tx.execute(
                    &stream.sql("UPDATE {log} SET state = ?3 WHERE {rows} AND event_id = ?2"),
                    params![stream.param(), original, RELEASED],
                )?;
            }
            // Released: its copy is logged again, so the held row keeps nothing. Dropped: the
            // envelope stays here (it is this device's event), never uploaded.
            tx.execute(
                &stream.sql(
                    "UPDATE {log} SET envelope = CASE WHEN ?4 THEN x'' ELSE envelope END,
                       state = ?3 WHERE {rows} AND seq = ?2",
                ),
                params![stream.param(), seq, ENDED, release],
            )?;
            events.insert(original.to_string());
        }
        events.len() as i64
    };
    tx.commit()?;
    Ok(Quarantined {
        quarantined: total - n,
        released: if release { n } else { 0 },
        dropped: if drop { n } else { 0 },
        events: if n > 0 { Vec::new() } else { events },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redact::ExtraPattern;

    fn logged(content: &str, redactor: &Redactor) -> Vec<u8> {
        // As the writer logs it: redacted by the rules of the time.
        let mut ev = crate::sync::envelope::sample("e1", content);
        assert!(redactor.apply(&mut ev));
        Envelope::of(&ev).unwrap().to_bytes()
    }

    #[test]
    fn only_what_a_newer_rule_changes_is_held() {
        let (then, _) = Redactor::new(&[]);
        let (now, _) = Redactor::new(&[ExtraPattern {
            name: "acme".into(),
            regex: "ACME-SECRET-[0-9]+".into(),
        }]);
        let secret = logged("deploy with ACME-SECRET-99812", &then);
        let plain = logged("cargo test passed", &then);
        // A built-in credential was redacted when logged: the same rules find nothing more.
        let builtin = logged(
            "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            &then,
        );
        assert!(hits(&now, &secret));
        assert!(!hits(&then, &secret));
        assert!(!hits(&now, &plain));
        assert!(!hits(&now, &builtin));
        let tomb = Envelope::tombstone("t".into(), "app", vec!["e1".into()], "purge").to_bytes();
        assert!(!hits(&now, &tomb));
        assert!(!hits(&now, b"garbage"));
    }
}
