//! One space's push and pull, the personal space's and each team space's alike: a space is its
//! stream on this device ([`log::Stream`]), the keys it is sealed under, and how its event ids
//! look on the server.
//!
//! * [`push`]: this device's events above the server's head for it, each counted as sent only
//!   once read back; the current redaction rules screen each first ([`super::quarantine`]);
//!   forgotten events go up as placeholders and are nulled once the server holds them
//!   ([`super::tombstone`]). The server holding something else under this device's id (a
//!   cloned home) stops everything.
//! * [`pull`]: every other device's events past this home's cursor for it, opened with the key
//!   of their key id, stored through the writer with the cursor, one transaction per batch. An
//!   event under a key this device does not hold stops that device's pull there (what came
//!   before is stored).

use super::crypto::{DeviceIdentity, Place, SpaceKey};
use super::log::{self, Stream};
use super::{envelope, quarantine, remote, tombstone, BATCH};
use crate::app::App;
use std::collections::HashMap;

/// What a round needs of one space.
pub struct Space {
    /// The space's name on the server.
    pub id: String,
    pub stream: Stream,
    /// The key new events are sealed under.
    pub key_id: String,
    /// Every key of the space this device holds, by key id.
    pub keys: HashMap<String, SpaceKey>,
    ids: ServerIds,
    /// Why this device can no longer write the space (removed from a team): pull only.
    pub locked: Option<String>,
}

/// How a local event id becomes the server's: the personal key's hash (every device of the
/// user derives the same), or this device's own secret for a team space (stable across the
/// team key's rotations; teammates never learn the local id from it).
pub(super) enum ServerIds {
    Personal(SpaceKey),
    Team(DeviceIdentity),
}

impl ServerIds {
    /// The server's id of the local event `local_id` of the space `space`.
    pub(super) fn of(&self, space: &str, local_id: &str) -> String {
        match self {
            ServerIds::Personal(k) => k.server_event_id(local_id),
            ServerIds::Team(me) => me.event_id(space, local_id),
        }
    }
}

impl Space {
    /// The personal space of this home's sync identity.
    pub fn personal(st: &log::State) -> Space {
        Space {
            id: st.space.clone(),
            stream: Stream::Personal,
            key_id: st.key_id.clone(),
            keys: HashMap::from([(st.key_id.clone(), st.key.clone())]),
            ids: ServerIds::Personal(st.key.clone()),
            locked: None,
        }
    }

    /// A team space, as [`super::team::Team`] holds it, for the device `me`.
    pub fn team(t: super::team::Team, me: &DeviceIdentity) -> Space {
        Space {
            stream: Stream::Team(t.space.clone()),
            id: t.space,
            key_id: t.key_id,
            keys: t.keys,
            ids: ServerIds::Team(me.clone()),
            locked: t.locked,
        }
    }

    pub(super) fn is_personal(&self) -> bool {
        self.stream == Stream::Personal
    }

    pub(super) fn server_id(&self, local_id: &str) -> String {
        self.ids.of(&self.id, local_id)
    }
}

/// Upload this device's events of `sp` above the server's head for it, each counted only once
/// read back, then null the ciphertext of those it forgot. The server holding something else
/// under this device's id stops everything.
pub async fn push(
    app: &App,
    client: &tokio_postgres::Client,
    st: &log::State,
    sp: &Space,
) -> Result<(), String> {
    let key = sp
        .keys
        .get(&sp.key_id)
        .ok_or_else(|| format!("the key {} of space {} is missing here", sp.key_id, sp.id))?;
    let mut head = remote::head(client, &sp.id, &st.device).await?;
    let stream = sp.stream.clone();
    let local = app
        .writer
        .exec(move |c| Ok(log::stream_seq(c, &stream)?))
        .await
        .map_err(|e| e.to_string())?;
    // What the server holds of this device must be what this home wrote: check the last
    // sequence number both have. A server ahead of this home is another home's doing.
    if head > local {
        return Err(super::mark_cloned(app, st).await);
    }
    let both = head.min(local);
    if both > 0 {
        let stream = sp.stream.clone();
        let mine = app
            .writer
            .exec(move |c| Ok(log::event_at(c, &stream, both)?))
            .await
            .map_err(|e| e.to_string())?
            .map(|id| sp.server_id(&id));
        let theirs = remote::read_back(client, &sp.id, &st.device, &[both]).await?;
        if theirs.get(&both) != mine.as_ref() {
            return Err(super::mark_cloned(app, st).await);
        }
    }
    if sp.is_personal() {
        app.sync.seen.lock().unwrap().own_head = head;
    }
    loop {
        let stream = sp.stream.clone();
        let batch = app
            .writer
            .exec(move |c| Ok(log::outbox(c, &stream, head, BATCH)?))
            .await
            .map_err(|e| e.to_string())?;
        let Some(last) = batch.last().map(|b| b.0) else {
            break;
        };
        // The current redaction rules first: what they would change is held back, before
        // anything of it is sealed (the hold is committed before the placeholder goes up).
        let held: Vec<i64> = batch
            .iter()
            .filter(|(_, _, env, state)| {
                *state == tombstone::LIVE
                    && !env.is_empty()
                    && quarantine::hits(&app.ingest.redactor, env)
            })
            .map(|b| b.0)
            .collect();
        if !held.is_empty() {
            tracing::warn!(
                "sync: {} event(s) of space {} quarantined by the current redaction rules \
                 (`nmem sync quarantine` lists them)",
                held.len(),
                sp.id
            );
            let (seqs, stream) = (held.clone(), sp.stream.clone());
            app.writer
                .exec(move |c| Ok(quarantine::hold(c, &stream, &seqs)?))
                .await
                .map_err(|e| e.to_string())?;
        }
        let mut out = Vec::with_capacity(batch.len());
        for (seq, id, envelope, state) in &batch {
            let held_now = held.contains(seq);
            let id = if held_now {
                quarantine::held_id(id)
            } else {
                id.clone()
            };
            let event_id = sp.server_id(&id);
            let place = Place {
                space: &sp.id,
                device: &st.device,
                seq: *seq,
                event_id: &event_id,
                key_id: &sp.key_id,
            };
            // Forgotten, quarantined or dropped: a placeholder without ciphertext.
            let sealed = if held_now
                || envelope.is_empty()
                || matches!(*state, quarantine::HELD | quarantine::ENDED)
            {
                None
            } else {
                Some(key.seal(&place, envelope).map_err(|e| e.to_string())?)
            };
            out.push(remote::Outgoing {
                seq: *seq,
                event_id,
                sealed,
            });
        }
        let stored = remote::push(client, &sp.id, &st.device, &sp.key_id, &out).await?;
        let mut acked = 0;
        for o in &out {
            match stored.get(&o.seq) {
                Some(id) if *id == o.event_id => acked += 1,
                Some(_) => return Err(super::mark_cloned(app, st).await),
                // The event id is on the server already under another (device, seq): the same
                // event recorded in two homes (an import run in both). It is there once; go on.
                None => tracing::warn!(
                    "sync: event {} of seq {} is on the server already under another device",
                    o.event_id,
                    o.seq
                ),
            }
        }
        head = last;
        let mut seen = app.sync.seen.lock().unwrap();
        if sp.is_personal() {
            seen.own_head = head;
        }
        seen.pushed += acked;
    }
    tombstone::null_on_server(app, client, sp, &st.device, head).await
}

/// Download what other devices wrote to `sp` past this device's cursors, and store it through
/// the writer with the cursor, one transaction per batch.
pub async fn pull(
    app: &App,
    client: &tokio_postgres::Client,
    st: &log::State,
    sp: &Space,
) -> Result<(), String> {
    let heads = remote::heads(client, &sp.id).await?;
    if sp.is_personal() {
        app.sync.seen.lock().unwrap().heads = heads.clone();
    }
    let space = sp.id.clone();
    let mut cursors = app
        .writer
        .exec(move |c| Ok(log::cursors(c, &space)?))
        .await
        .map_err(|e| e.to_string())?;
    for (device, head) in heads {
        if device == st.device {
            continue;
        }
        let mut cursor = cursors.remove(&device).unwrap_or(0);
        while cursor < head {
            let rows = remote::fetch(client, &sp.id, &device, cursor, BATCH as i64).await?;
            let Some(mut through) = rows.last().map(|r| r.seq) else {
                break;
            };
            let mut events = Vec::with_capacity(rows.len());
            // Each row with ciphertext as the server gave it (`sync verify`), stored or not.
            let mut received = Vec::with_capacity(rows.len());
            let mut stop = None;
            for r in rows {
                let stopped = |e: String| {
                    format!(
                        "event {} of device {device}: {e}; pulling stopped there",
                        r.seq
                    )
                };
                let Some(sealed) = r.sealed else {
                    // Nulled by its owner (forgotten) or a quarantine placeholder: nothing to
                    // store.
                    continue;
                };
                let Some(key) = sp.keys.get(&r.key_id) else {
                    through = r.seq - 1;
                    stop = Some(stopped(format!(
                        "it is sealed under key {}, which this device does not hold{}",
                        r.key_id,
                        sp.locked
                            .as_deref()
                            .map(|_| " (it was removed from the team)")
                            .unwrap_or("")
                    )));
                    break;
                };
                let place = Place {
                    space: &sp.id,
                    device: &device,
                    seq: r.seq,
                    event_id: &r.event_id,
                    key_id: &r.key_id,
                };
                let plain = key
                    .open(&place, &sealed)
                    .map_err(|e| stopped(e.to_string()))?;
                let mut env = envelope::Envelope::from_bytes(&plain).map_err(stopped)?;
                received.push((r.seq, env.event_id.clone(), r.event_id.clone()));
                if env.tombstone.is_some() {
                    events.push((r.seq, log::Inbound::Tombstone(env)));
                    continue;
                }
                if let Some(edit) = &env.edit {
                    let rewrite = match edit {
                        envelope::Edit::Rewrite { envelope } => {
                            let mut ev = (**envelope).clone().into_prepared().map_err(stopped)?;
                            app.ingest.redactor.apply(&mut ev).then_some(ev)
                        }
                        envelope::Edit::Pin { .. } => None,
                    };
                    events.push((r.seq, log::Inbound::Edit(Box::new(env), rewrite)));
                    continue;
                }
                if let Some(k) = env.knowledge.as_mut() {
                    // This device's redactor over its text, as over an event's.
                    envelope::redact_knowledge(&app.ingest.redactor, k);
                    events.push((r.seq, log::Inbound::Knowledge(env)));
                    continue;
                }
                let mut ev = env.into_prepared().map_err(stopped)?;
                // Inbound events pass this device's redactor too (its own patterns).
                if app.ingest.redactor.apply(&mut ev) {
                    events.push((r.seq, log::Inbound::Event(ev)));
                }
            }
            if through > cursor {
                let (space, dev, team) = (sp.id.clone(), device.clone(), !sp.is_personal());
                let n = events.len() as u64;
                // A batch that forgets or rewrites rows scrubs the old values from the file.
                let forgets = events.iter().any(|e| {
                    matches!(
                        e.1,
                        log::Inbound::Tombstone(_) | log::Inbound::Edit(_, Some(_))
                    )
                });
                app.writer
                    .exec(move |c| {
                        let apply = |c: &mut rusqlite::Connection| {
                            let batch = log::Pulled {
                                space: &space,
                                device: &dev,
                                team,
                                events: &events,
                                received: &received,
                                through,
                            };
                            log::apply_inbound(c, &batch)
                        };
                        if forgets || super::edit::rewrites_items(c, &events)? {
                            let how = crate::maintain::Scrub::Routine;
                            Ok(crate::maintain::scrubbed(c, how, apply)?.0)
                        } else {
                            Ok(apply(c)?)
                        }
                    })
                    .await
                    .map_err(|e| e.to_string())?;
                app.sync.seen.lock().unwrap().pulled += n;
                cursor = through;
            }
            if let Some(e) = stop {
                return Err(e);
            }
        }
    }
    Ok(())
}
