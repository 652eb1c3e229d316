//! Sync: one memory across a user's devices through a PostgreSQL the user provides, end-to-end
//! encrypted (docs/sync.md is the design; ARCHITECTURE.md "Sync" the invariants).
//!
//! * [`log`]: the local tables: identity, the outbound log the writer appends to in each
//!   event's transaction, pull cursors, origins.
//! * [`backfill`]: what was stored before sync was on, logged in batches by the rounds.
//! * [`envelope`]: the synced form of an event (the writer's prepared, redacted record).
//! * [`crypto`]: the space key, its recovery phrase and fingerprint, sealing events.
//! * [`remote`]: nmem's tables on the server and the statements of push and pull.
//! * [`space`]: one space's push and pull (the personal space's and each team space's).
//! * [`team`]: team spaces (member keys, rotation), `share`, `exclude` and their rounds.
//! * [`tombstone`]: forgets (purge, `redact --apply`) as events; owners null their ciphertext.
//! * [`edit`]: pins and `redact --apply` rewrites as events.
//! * [`quarantine`]: the uploader's re-check against the current redaction rules.
//! * [`verify`]: `nmem sync verify`, the server's streams against this home's.
//! * [`rebuild`]: `nmem rebuild`, the projections regenerated from the event log.
//!
//! This module runs the rounds: [`run`] is the background task (a round within a second of
//! new events, backoff while the server is away; capture never waits for it), [`now`] a round
//! on request, and the commands' handlers.

pub mod backfill;
pub mod crypto;
pub mod edit;
pub mod envelope;
pub mod log;
pub mod quarantine;
pub mod rebuild;
pub mod remote;
pub mod space;
pub mod team;
pub mod tombstone;
pub mod verify;

use crate::app::App;
use crate::store::writer::WriteError;
use crypto::SpaceKey;
use nmem_proto::sync::{
    EnableRequest, Enabled, Head, JoinRequest, QuarantineRequest, Quarantined, Rebuilt, SyncStatus,
    Verified,
};
use std::sync::Mutex;
use std::time::Duration;

/// Events per upload or download batch (one statement, one local transaction).
const BATCH: usize = 500;
/// How often the background task looks for new events, local or remote.
const POLL: Duration = Duration::from_secs(1);
/// The longest wait between retries while the server is away.
const MAX_BACKOFF: Duration = Duration::from_secs(15);

/// The daemon's sync runtime: the connection, what the last round saw, and its counters.
#[derive(Default)]
pub struct Sync {
    /// One round at a time (the background task and `sync now`), holding the connection.
    round: tokio::sync::Mutex<Option<tokio_postgres::Client>>,
    seen: Mutex<Seen>,
    /// Wakes the background task (after `enable`/`join`).
    wake: tokio::sync::Notify,
    /// How far a running `nmem rebuild` is.
    pub rebuild: std::sync::Arc<rebuild::Progress>,
}

#[derive(Default, Clone)]
struct Seen {
    heads: Vec<(String, i64)>,
    /// The server's head for this device, as last read.
    own_head: i64,
    pushed: u64,
    pulled: u64,
    last_error: Option<String>,
    last_sync_at: Option<i64>,
}

/// Read the identity at start: whether the writer logs.
pub fn init(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    let on = log::load(conn)?.is_some_and(|s| s.enabled && !s.cloned);
    log::ENABLED.store(on, std::sync::atomic::Ordering::Relaxed);
    log::load_routes(conn)
}

fn invalid(msg: impl Into<String>) -> WriteError {
    WriteError::Invalid(msg.into())
}

/// The server URL: the request's, else `[sync] url`, else `NMEM_SYNC_URL`.
fn url_for(app: &App, given: Option<String>) -> Result<String, WriteError> {
    given
        .or_else(|| app.config.sync.url.clone())
        .or_else(|| std::env::var("NMEM_SYNC_URL").ok())
        .filter(|u| !u.trim().is_empty())
        .ok_or_else(|| {
            invalid(
                "no sync server: give --url postgresql://user@host/database, or set \
                 [sync] url in config.toml",
            )
        })
}

async fn connect(app: &App, url: &str) -> Result<tokio_postgres::Client, String> {
    let cfg = remote::config(url, app.config.sync.password_file.as_deref())?;
    remote::connect(cfg).await
}

async fn state(app: &App) -> Result<Option<log::State>, WriteError> {
    app.writer.exec(|c| Ok(log::load(c)?)).await
}

/// `nmem sync enable`: a new personal space, its key shown once as the recovery phrase.
pub async fn enable(app: &App, req: EnableRequest) -> Result<Enabled, WriteError> {
    if let Some(s) = state(app).await?.filter(|s| s.enabled) {
        return Err(invalid(format!(
            "sync is already enabled (space {}, key {}): `nmem sync status` shows it; to start \
             a new space, `nmem sync leave` first",
            s.space, s.key_id
        )));
    }
    let url = url_for(app, req.url)?;
    let key = SpaceKey::generate().map_err(|e| invalid(e.to_string()))?;
    let mut round = app.sync.round.lock().await;
    let client = connect(app, &url).await.map_err(invalid)?;
    let check = key.key_check().map_err(|e| invalid(e.to_string()))?;
    if !remote::create_space(&client, &key.space_id(), &key.key_id(), &check)
        .await
        .map_err(invalid)?
    {
        // 128 random bits do not collide: a space of this id is this key's already.
        return Err(invalid(
            "the server already has this space; nothing changed",
        ));
    }
    let device = crypto::random_id().map_err(|e| invalid(e.to_string()))?;
    start(app, &device, &key, &url).await?;
    *round = Some(client);
    drop(round);
    app.sync.wake.notify_one();
    Ok(Enabled {
        space: key.space_id(),
        fingerprint: key.key_id(),
        device,
        recovery_phrase: Some(key.phrase()),
    })
}

async fn start(app: &App, device: &str, key: &SpaceKey, url: &str) -> Result<(), WriteError> {
    let (device, key, url) = (device.to_string(), key.clone(), url.to_string());
    app.writer
        .exec(move |c| Ok(log::start(c, &device, &key, Some(&url))?))
        .await?;
    *app.sync.seen.lock().unwrap() = Seen::default();
    Ok(())
}

/// `nmem sync join`: this device joins the space of a recovery phrase, verified against the
/// space's key check before anything changes.
pub async fn join(app: &App, req: JoinRequest) -> Result<Enabled, WriteError> {
    let key = SpaceKey::from_phrase(&req.phrase).map_err(|e| invalid(e.to_string()))?;
    if let Some(s) = state(app).await?.filter(|s| s.enabled) {
        if s.space == key.space_id() && !s.cloned {
            return Err(invalid(format!(
                "this device is in that space already (device {})",
                s.device
            )));
        }
        if !s.cloned {
            return Err(invalid(format!(
                "sync is enabled for another space ({}): `nmem sync leave` first",
                s.space
            )));
        }
    }
    let url = url_for(app, req.url)?;
    let mut round = app.sync.round.lock().await;
    let client = connect(app, &url).await.map_err(invalid)?;
    match remote::space(&client, &key.space_id())
        .await
        .map_err(invalid)?
    {
        None => {
            return Err(invalid(
                "wrong recovery phrase: the server holds no space for it (check the words, and \
                 that --url names the server `nmem sync enable` used); nothing changed",
            ))
        }
        Some((key_id, check)) if key_id != key.key_id() || !key.verify_check(&check) => {
            return Err(invalid(
                "wrong recovery phrase: it does not open the space's key check; nothing changed",
            ))
        }
        Some(_) => {}
    }
    let device = crypto::random_id().map_err(|e| invalid(e.to_string()))?;
    start(app, &device, &key, &url).await?;
    *round = Some(client);
    drop(round);
    app.sync.wake.notify_one();
    Ok(Enabled {
        space: key.space_id(),
        fingerprint: key.key_id(),
        device,
        recovery_phrase: None,
    })
}

/// `nmem sync disable`: stop logging and syncing (the identity and the log are kept).
pub async fn disable(app: &App) -> Result<SyncStatus, WriteError> {
    if state(app).await?.is_none_or(|s| !s.enabled) {
        return Err(invalid(
            "sync is not enabled; nothing changed (`nmem sync status` shows the state)",
        ));
    }
    app.writer.exec(|c| Ok(log::set_enabled(c, false)?)).await?;
    *app.sync.round.lock().await = None;
    status(app).await
}

/// `nmem sync leave`: this device leaves its personal space: it stops syncing and forgets the
/// space's key, its device id and its cursors; what it holds stays. `join` with the phrase
/// works again later (as a new device; what the space holds already is not sent again).
pub async fn leave(app: &App) -> Result<SyncStatus, WriteError> {
    let Some(st) = state(app).await? else {
        return Err(invalid(
            "this device is in no personal space (sync is not set up): nothing to leave; nothing \
             changed",
        ));
    };
    let teams = app.writer.exec(|c| Ok(team::teams(c)?)).await?;
    if !teams.is_empty() {
        let names: Vec<&str> = teams.iter().map(|t| t.space.as_str()).collect();
        return Err(invalid(format!(
            "this device is in team space(s) {}, which sync through the personal space's server \
             and device id: leave them first (`nmem team leave SPACE`); nothing changed",
            names.join(", ")
        )));
    }
    // Between rounds, and no round after it.
    let mut round = app.sync.round.lock().await;
    app.writer.exec(|c| Ok(log::leave(c)?)).await?;
    *round = None;
    drop(round);
    *app.sync.seen.lock().unwrap() = Seen::default();
    tracing::info!("sync: left space {} (device {})", st.space, st.device);
    status(app).await
}

/// `nmem sync status`.
pub async fn status(app: &App) -> Result<SyncStatus, WriteError> {
    let (st, local_seq, cursors, (teams, excluded), (quarantined, backfill)) = app
        .writer
        .exec(|c| {
            let st = log::load(c)?;
            let local = log::local_seq(c)?;
            let cursors = match &st {
                Some(s) => log::cursors(c, &s.space)?,
                None => Default::default(),
            };
            let routing = (team::statuses(c)?, team::excluded(c)?);
            let counts = (quarantine::count(c)?, backfill::progress(c)?);
            Ok((st, local, cursors, routing, counts))
        })
        .await?;
    let seen = app.sync.seen.lock().unwrap().clone();
    let Some(st) = st else {
        return Ok(SyncStatus {
            excluded,
            ..SyncStatus::default()
        });
    };
    let heads = seen
        .heads
        .iter()
        .map(|(d, seq)| Head {
            device: d.clone(),
            seq: *seq,
            applied: if *d == st.device {
                seen.own_head
            } else {
                cursors.get(d).copied().unwrap_or(0)
            },
        })
        .collect();
    Ok(SyncStatus {
        last_error: seen
            .last_error
            .or_else(|| st.cloned.then(|| cloned_message(&st.device))),
        enabled: st.enabled,
        space: Some(st.space),
        fingerprint: Some(st.key_id),
        device: Some(st.device),
        url: st.url.as_deref().map(remote::shown),
        local_seq,
        pending: (local_seq - seen.own_head).max(0),
        heads,
        pulled: seen.pulled,
        pushed: seen.pushed,
        cloned: st.cloned,
        last_sync_at: seen.last_sync_at,
        teams,
        excluded,
        quarantined,
        backfill,
    })
}

fn cloned_message(device: &str) -> String {
    format!(
        "cloned device: another home syncs as device {device} (a copied NMEM_HOME), and the \
         server holds events of this device that this home did not write; syncing stopped and \
         nothing was overwritten. Run `nmem sync disable`, then `nmem sync join` in one of the \
         two homes to give it a device of its own"
    )
}

/// `nmem sync now`: one round at once; its error (if any) is the reply's.
pub async fn now(app: &App) -> Result<SyncStatus, WriteError> {
    if state(app).await?.is_none_or(|s| !s.enabled) {
        return Err(invalid(
            "sync is not enabled: `nmem sync enable` or `nmem sync join` first",
        ));
    }
    round(app).await.map_err(invalid)?;
    status(app).await
}

/// The background task: a round every [`POLL`] (sooner when woken), backing off while rounds
/// fail. Runs whatever the state; does nothing while sync is disabled.
pub async fn run(app: std::sync::Arc<App>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut wait = POLL;
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = app.sync.wake.notified() => {}
            _ = tokio::time::sleep(wait) => {}
        }
        if *stop.borrow() {
            break;
        }
        if !log::ENABLED.load(std::sync::atomic::Ordering::Relaxed) {
            wait = POLL;
            continue;
        }
        wait = match round(&app).await {
            Ok(()) => POLL,
            Err(e) => {
                tracing::warn!("sync: {e} (retrying in {:?})", (wait * 2).min(MAX_BACKOFF));
                (wait * 2).min(MAX_BACKOFF)
            }
        };
    }
}

/// One push and pull. Its error is also kept as `last_error`.
async fn round(app: &App) -> Result<(), String> {
    let mut conn = app.sync.round.lock().await;
    let result = round_on(app, &mut conn).await;
    let mut seen = app.sync.seen.lock().unwrap();
    match &result {
        Ok(()) => {
            seen.last_error = None;
            seen.last_sync_at = Some(nmem_proto::now_ms());
        }
        Err(e) => {
            seen.last_error = Some(e.clone());
            // A connection that failed is not trusted again.
            *conn = None;
        }
    }
    result
}

async fn round_on(app: &App, conn: &mut Option<tokio_postgres::Client>) -> Result<(), String> {
    let st = state(app)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("sync is not enabled")?;
    if !st.enabled {
        return Ok(());
    }
    if st.cloned {
        return Err(cloned_message(&st.device));
    }
    if conn.as_ref().is_none_or(|c| c.is_closed()) {
        let url = match st.url.clone() {
            Some(u) => u,
            None => url_for(app, None).map_err(|e| e.to_string())?,
        };
        *conn = Some(connect(app, &url).await?);
    }
    let client = conn.as_ref().expect("connected above");
    backfill::step(app, client, &st).await?;
    let personal = space::Space::personal(&st);
    space::push(app, client, &st, &personal).await?;
    space::pull(app, client, &st, &personal).await?;
    team::rounds(app, client, &st).await
}

async fn mark_cloned(app: &App, st: &log::State) -> String {
    if let Err(e) = app.writer.exec(|c| Ok(log::set_cloned(c)?)).await {
        tracing::error!("sync: recording the cloned state failed: {e}");
    }
    log::ENABLED.store(false, std::sync::atomic::Ordering::Relaxed);
    let msg = cloned_message(&st.device);
    tracing::error!("sync: {msg}");
    msg
}

/// `nmem sync quarantine [--release | --drop]`.
pub async fn quarantine(
    app: std::sync::Arc<App>,
    req: QuarantineRequest,
) -> Result<Quarantined, WriteError> {
    if req.release && req.drop {
        return Err(invalid(
            "--release and --drop exclude each other: release uploads the quarantined events \
             as they are, drop keeps them on this device only",
        ));
    }
    if state(&app).await?.is_none() {
        return Err(invalid(
            "sync is not set up: `nmem sync enable` or `nmem sync join` first",
        ));
    }
    let a = app.clone();
    let out = app
        .writer
        .exec(move |c| {
            Ok(quarantine::act(
                c,
                &a.ingest.redactor,
                req.release,
                req.drop,
            )?)
        })
        .await?;
    if out.released > 0 {
        app.sync.wake.notify_one();
    }
    Ok(out)
}

/// `nmem sync verify`: the server's streams against this home's, in every space this device
/// is in (the personal space, then each team space).
pub async fn verify(app: &App) -> Result<Verified, WriteError> {
    let Some(st) = state(app).await? else {
        return Err(invalid(
            "sync is not set up: `nmem sync enable` or `nmem sync join` first",
        ));
    };
    let url = match st.url.clone() {
        Some(u) => u,
        None => url_for(app, None)?,
    };
    // Between rounds: a round half done would show as a difference.
    let _round = app.sync.round.lock().await;
    let client = connect(app, &url).await.map_err(invalid)?;
    let teams = app
        .writer
        .exec(|c| {
            let teams = team::teams(c)?;
            let me = match teams.is_empty() {
                true => None,
                false => Some(team::identity(c)?),
            };
            Ok((teams, me))
        })
        .await?;
    let mut spaces = vec![space::Space::personal(&st)];
    if let (teams, Some(me)) = teams {
        spaces.extend(teams.into_iter().map(|t| space::Space::team(t, &me)));
    }
    let mut streams = Vec::new();
    for sp in spaces {
        let server = remote::all_ids(&client, &sp.id).await.map_err(invalid)?;
        let st2 = st.clone();
        let (sp, local) = app
            .writer
            .exec(move |c| {
                let local = verify::local(c, &st2, &sp)?;
                Ok((sp, local))
            })
            .await?;
        streams.extend(verify::compare(&st.device, &sp.id, &server, local));
    }
    Ok(verify::verified(streams))
}

/// `nmem rebuild`: the projections regenerated from the event log, on the writer.
pub async fn rebuild(app: &App) -> Result<Rebuilt, WriteError> {
    let progress = app.sync.rebuild.clone();
    let out = app
        .writer
        .exec(move |c| Ok(rebuild::run(c, &progress)?))
        .await;
    // Restored rows keep their old ids, below what the project filter's sets were brought up
    // to: build them again.
    app.readers.project_ids().clear();
    out
}
