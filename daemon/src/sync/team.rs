//! Team spaces (docs/sync.md, "Team spaces"): this device's X25519 identity, the `nmem team`
//! commands, `share` and `exclude`, and a team space's part of each round.
//!
//! A team space is a space like the personal one (same tables on the server, same sealing), but
//! its key is random and wrapped for each member's public key (`age`) instead of being shown as a
//! phrase. A member is a device's `age1…` public key. Removing a member rotates the key: a new key
//! id, wrapped for the remaining members only, under which new events are sealed; older events
//! keep their key id and stay readable by whoever held that key. Each (space, device) is its own
//! dense stream (`sync_space_log`), pushed and pulled by the personal space's code
//! ([`super::space`]).
//!
//! Joining is explicit (`nmem team join SPACE`), not automatic on the next round: being added
//! to a team by someone must not by itself pour their events into this memory.

use super::crypto::{self, DeviceIdentity, SpaceKey};
use super::{invalid, log, remote};
use crate::app::App;
use crate::store::writer::WriteError;
use nmem_proto::sync::TeamStatus;
use nmem_proto::sync::{ExcludeRequest, Identity, Routing, Share, ShareRequest, TeamRequest};
use nmem_proto::sync::{TeamLeaveRequest, TeamLeft};
use rusqlite::{params, Connection, OptionalExtension};
use std::collections::HashMap;

/// A team space as stored here.
#[derive(Debug, Clone)]
pub struct Team {
    pub space: String,
    pub key_id: String,
    pub role: String,
    pub locked: Option<String>,
    pub keys: HashMap<String, SpaceKey>,
}

/// This device's identity, made on first use.
pub fn identity(conn: &Connection) -> rusqlite::Result<DeviceIdentity> {
    let have = conn
        .query_row(
            "SELECT secret, public_key FROM sync_identity WHERE id = 1",
            [],
            |r| {
                Ok(DeviceIdentity {
                    secret: r.get(0)?,
                    public_key: r.get(1)?,
                })
            },
        )
        .optional()?;
    if let Some(id) = have {
        return Ok(id);
    }
    let id = DeviceIdentity::generate();
    conn.execute(
        "INSERT INTO sync_identity (id, secret, public_key, created_at) VALUES (1, ?1, ?2, ?3)",
        params![id.secret, id.public_key, nmem_proto::now_ms()],
    )?;
    Ok(id)
}

pub fn teams(conn: &Connection) -> rusqlite::Result<Vec<Team>> {
    let mut st = conn.prepare(
        "SELECT space, key_id, role, locked FROM sync_spaces WHERE kind = 'team' ORDER BY space",
    )?;
    let rows: Vec<(String, String, String, Option<String>)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<Result<_, _>>()?;
    let mut out = Vec::with_capacity(rows.len());
    for (space, key_id, role, locked) in rows {
        let mut keys = HashMap::new();
        let mut st = conn.prepare_cached("SELECT key_id, key FROM sync_keys WHERE space = ?1")?;
        for row in st.query_map([&space], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
        })? {
            let (id, key) = row?;
            if let Ok(k) = SpaceKey::from_slice(&key) {
                keys.insert(id, k);
            }
        }
        out.push(Team {
            space,
            key_id,
            role,
            locked,
            keys,
        });
    }
    Ok(out)
}

fn team(conn: &Connection, space: &str) -> rusqlite::Result<Option<Team>> {
    Ok(teams(conn)?.into_iter().find(|t| t.space == space))
}

/// Store keys of `space` (new ones only) and make `current` its key for new events.
fn store_keys(
    conn: &mut Connection,
    space: &str,
    role: &str,
    keys: &[SpaceKey],
    current: &str,
) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    tx.execute(
        "INSERT INTO sync_spaces (space, kind, key_id, role, created_at)
         VALUES (?1, 'team', ?2, ?3, ?4)
         ON CONFLICT(space) DO UPDATE SET key_id = excluded.key_id, locked = NULL",
        params![space, current, role, nmem_proto::now_ms()],
    )?;
    for k in keys {
        tx.execute(
            "INSERT OR IGNORE INTO sync_keys (space, key_id, key) VALUES (?1, ?2, ?3)",
            params![space, k.key_id(), &k.0[..]],
        )?;
    }
    tx.commit()?;
    log::load_routes(conn)
}

fn set_locked(conn: &Connection, space: &str, why: &str) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE sync_spaces SET locked = ?2 WHERE space = ?1",
        params![space, why],
    )?;
    log::load_routes(conn)
}

fn shares(conn: &Connection) -> rusqlite::Result<Vec<Share>> {
    let mut st =
        conn.prepare("SELECT project, space, extra FROM sync_shares ORDER BY project, space")?;
    let rows = st.query_map([], |r| {
        let extra: String = r.get(2)?;
        Ok(Share {
            project: r.get(0)?,
            space: r.get(1)?,
            with: extra
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
        })
    })?;
    rows.collect()
}

pub fn excluded(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut st = conn.prepare("SELECT project FROM sync_excluded ORDER BY project")?;
    let rows = st.query_map([], |r| r.get(0))?;
    rows.collect()
}

fn routing(conn: &Connection) -> rusqlite::Result<Routing> {
    Ok(Routing {
        excluded: excluded(conn)?,
        shares: shares(conn)?,
        default_types: log::TEAM_TYPES.iter().map(|t| t.to_string()).collect(),
    })
}

/// Every team space's status, for `nmem sync status`.
pub fn statuses(conn: &Connection) -> rusqlite::Result<Vec<TeamStatus>> {
    let shares = shares(conn)?;
    let mut out = Vec::new();
    for t in teams(conn)? {
        out.push(team_status(conn, &t, &shares, Vec::new())?);
    }
    Ok(out)
}

fn team_status(
    conn: &Connection,
    t: &Team,
    shares: &[Share],
    members: Vec<String>,
) -> rusqlite::Result<TeamStatus> {
    let mut key_ids: Vec<String> = t.keys.keys().cloned().collect();
    key_ids.sort();
    Ok(TeamStatus {
        space: t.space.clone(),
        key_id: t.key_id.clone(),
        key_ids,
        role: t.role.clone(),
        members,
        shares: shares
            .iter()
            .filter(|s| s.space == t.space)
            .cloned()
            .collect(),
        local_seq: log::stream_seq(conn, &log::Stream::Team(t.space.clone()))?,
        locked: t.locked.clone(),
    })
}

/// `nmem sync identity`.
pub async fn identity_of(app: &App) -> Result<Identity, WriteError> {
    let id = app.writer.exec(|c| Ok(identity(c)?)).await?;
    Ok(Identity {
        public_key: id.public_key,
    })
}

/// A team name: what the server calls the space (it sees it), so plain and short.
fn check_name(space: &str) -> Result<(), WriteError> {
    let ok = !space.is_empty()
        && space.len() <= 64
        && space
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "`{}` is not a team space name: use 1 to 64 letters, digits, `-`, `_` or `.` (the \
             server sees the name)",
            space.chars().take(80).collect::<String>()
        )))
    }
}

/// The home's sync state, which team commands need (the device and the server).
async fn enabled_state(app: &App) -> Result<log::State, WriteError> {
    match super::state(app).await? {
        Some(s) if s.enabled && !s.cloned => Ok(s),
        Some(s) if s.cloned => Err(invalid(super::cloned_message(&s.device))),
        _ => Err(invalid(
            "sync is not enabled on this device: `nmem sync enable --url URL` (or `nmem sync \
             join`) first; team spaces use the same server",
        )),
    }
}

type Guard<'a> = tokio::sync::MutexGuard<'a, Option<tokio_postgres::Client>>;

/// The round's connection (waiting for a running round), connected if need be.
async fn connection<'a>(app: &'a App, st: &log::State) -> Result<Guard<'a>, WriteError> {
    let mut guard = app.sync.round.lock().await;
    if guard.as_ref().is_none_or(|c| c.is_closed()) {
        let url = match st.url.clone() {
            Some(u) => u,
            None => super::url_for(app, None)?,
        };
        *guard = Some(super::connect(app, &url).await.map_err(invalid)?);
    }
    Ok(guard)
}

async fn local_team(app: &App, space: &str) -> Result<Option<Team>, WriteError> {
    let space = space.to_string();
    app.writer.exec(move |c| Ok(team(c, &space)?)).await
}

async fn reply(app: &App, space: &str, members: Vec<String>) -> Result<TeamStatus, WriteError> {
    let space = space.to_string();
    app.writer
        .exec(move |c| {
            let t = team(c, &space)?.ok_or_else(|| invalid("the team space vanished"))?;
            Ok(team_status(c, &t, &shares(c)?, members)?)
        })
        .await
}

/// `nmem team create SPACE`: a random team key, wrapped for this device on the server.
pub async fn create(app: &App, req: TeamRequest) -> Result<TeamStatus, WriteError> {
    check_name(&req.space)?;
    let st = enabled_state(app).await?;
    if local_team(app, &req.space).await?.is_some() {
        return Err(invalid(format!(
            "this device is in team space {} already; nothing changed",
            req.space
        )));
    }
    let me = app.writer.exec(|c| Ok(identity(c)?)).await?;
    let key = SpaceKey::generate().map_err(|e| invalid(e.to_string()))?;
    let pk = crypto::parse_public_key(&me.public_key).map_err(|e| invalid(e.to_string()))?;
    let wrapped = crypto::wrap_for(&pk, &key).map_err(|e| invalid(e.to_string()))?;
    let check = key.key_check().map_err(|e| invalid(e.to_string()))?;
    let guard = connection(app, &st).await?;
    let client = guard.as_ref().expect("connected");
    let made = remote::create_team(
        client,
        &req.space,
        &key.key_id(),
        &check,
        &me.public_key,
        &wrapped,
    )
    .await
    .map_err(invalid)?;
    if !made {
        return Err(invalid(format!(
            "the server has a space named {} already: choose another name, or, if it is your \
             team's, ask a member to run `nmem team add {} {}` and then `nmem team join {}`; \
             nothing changed",
            req.space, req.space, me.public_key, req.space
        )));
    }
    let members = remote::members(client, &req.space).await.map_err(invalid)?;
    drop(guard);
    let (space, kid) = (req.space.clone(), key.key_id());
    app.writer
        .exec(move |c| Ok(store_keys(c, &space, "owner", &[key], &kid)?))
        .await?;
    reply(app, &req.space, members).await
}

/// The member argument, checked (a malformed key changes nothing).
fn member_of(req: &TeamRequest) -> Result<(String, age::x25519::Recipient), WriteError> {
    let text = req.member.as_deref().unwrap_or("").trim().to_string();
    if text.is_empty() {
        return Err(invalid(
            "no member given: pass the member's public key (`nmem sync identity` prints it on \
             their device)",
        ));
    }
    let pk =
        crypto::parse_public_key(&text).map_err(|e| invalid(format!("{e}; nothing changed")))?;
    Ok((pk.to_string(), pk))
}

/// A team this device can change: present here and not locked.
async fn writable_team(app: &App, space: &str) -> Result<Team, WriteError> {
    let t = local_team(app, space).await?.ok_or_else(|| {
        invalid(format!(
            "this device is in no team space named {space}: `nmem team create {space}`, or \
             `nmem team join {space}` once a member added this device"
        ))
    })?;
    if let Some(why) = &t.locked {
        return Err(invalid(format!("{why}; nothing changed")));
    }
    Ok(t)
}

fn moved(space: &str) -> WriteError {
    invalid(format!(
        "team space {space} changed meanwhile (another member added or removed someone and the \
         key rotated): run `nmem sync now` and try again; nothing changed"
    ))
}

/// `nmem team add SPACE PUBKEY`: wrap every key this device holds for the new member (so it
/// reads the space's history too).
pub async fn add(app: &App, req: TeamRequest) -> Result<TeamStatus, WriteError> {
    let (member, pk) = member_of(&req)?;
    let st = enabled_state(app).await?;
    let t = writable_team(app, &req.space).await?;
    let mut wraps = Vec::with_capacity(t.keys.len());
    for (id, k) in &t.keys {
        wraps.push((
            id.clone(),
            crypto::wrap_for(&pk, k).map_err(|e| invalid(e.to_string()))?,
        ));
    }
    let guard = connection(app, &st).await?;
    let client = guard.as_ref().expect("connected");
    match remote::add_member(client, &req.space, &member, &t.key_id, &wraps)
        .await
        .map_err(invalid)?
    {
        remote::TeamChange::Done => {}
        remote::TeamChange::KeyMoved(_) => return Err(moved(&req.space)),
        remote::TeamChange::NoSuchSpace => {
            return Err(invalid(format!(
                "the server has no team space {}; nothing changed",
                req.space
            )))
        }
    }
    let members = remote::members(client, &req.space).await.map_err(invalid)?;
    drop(guard);
    reply(app, &req.space, members).await
}

/// `nmem team remove SPACE MEMBER`: rotate the key for the remaining members.
pub async fn remove(app: &App, req: TeamRequest) -> Result<TeamStatus, WriteError> {
    let (member, _) = member_of(&req)?;
    let st = enabled_state(app).await?;
    let t = writable_team(app, &req.space).await?;
    let me = app.writer.exec(|c| Ok(identity(c)?)).await?;
    if member == me.public_key {
        return Err(invalid(
            "that is this device's own key: another member removes it; nothing changed",
        ));
    }
    let guard = connection(app, &st).await?;
    let client = guard.as_ref().expect("connected");
    let members = remote::members(client, &req.space).await.map_err(invalid)?;
    if !members.contains(&member) {
        return Err(invalid(format!(
            "{member} is not a member of team space {} (members: {}); nothing changed",
            req.space,
            members.join(", ")
        )));
    }
    let key = SpaceKey::generate().map_err(|e| invalid(e.to_string()))?;
    let mut wraps = Vec::new();
    for m in members.iter().filter(|m| **m != member) {
        let pk = crypto::parse_public_key(m).map_err(|e| invalid(e.to_string()))?;
        wraps.push((
            m.clone(),
            crypto::wrap_for(&pk, &key).map_err(|e| invalid(e.to_string()))?,
        ));
    }
    let check = key.key_check().map_err(|e| invalid(e.to_string()))?;
    match remote::rotate(
        client,
        &req.space,
        &member,
        &t.key_id,
        &key.key_id(),
        &check,
        &wraps,
    )
    .await
    .map_err(invalid)?
    {
        remote::TeamChange::Done => {}
        remote::TeamChange::KeyMoved(_) => return Err(moved(&req.space)),
        remote::TeamChange::NoSuchSpace => {
            return Err(invalid(format!(
                "the server has no team space {}; nothing changed",
                req.space
            )))
        }
    }
    let members = remote::members(client, &req.space).await.map_err(invalid)?;
    drop(guard);
    let (space, kid, role) = (req.space.clone(), key.key_id(), t.role.clone());
    app.writer
        .exec(move |c| Ok(store_keys(c, &space, &role, &[key], &kid)?))
        .await?;
    reply(app, &req.space, members).await
}

/// `nmem team join SPACE`: find this device's wrapped keys on the server.
pub async fn join(app: &App, req: TeamRequest) -> Result<TeamStatus, WriteError> {
    check_name(&req.space)?;
    let st = enabled_state(app).await?;
    if local_team(app, &req.space).await?.is_some() {
        return Err(invalid(format!(
            "this device is in team space {} already; nothing changed",
            req.space
        )));
    }
    let me = app.writer.exec(|c| Ok(identity(c)?)).await?;
    let guard = connection(app, &st).await?;
    let client = guard.as_ref().expect("connected");
    let current = match remote::space_kind(client, &req.space)
        .await
        .map_err(invalid)?
    {
        Some((kind, key_id)) if kind == "team" => key_id,
        Some(_) => {
            return Err(invalid(format!(
                "{} is not a team space; nothing changed",
                req.space
            )))
        }
        None => {
            return Err(invalid(format!(
                "the server has no team space {} (check the name, and that this device syncs to \
                 the team's server); nothing changed",
                req.space
            )))
        }
    };
    let wrapped = remote::wrapped_keys(client, &req.space, &me.public_key)
        .await
        .map_err(invalid)?;
    let keys: Vec<SpaceKey> = wrapped
        .iter()
        .filter_map(|(id, w)| me.unwrap(w).ok().filter(|k| k.key_id() == *id))
        .collect();
    if !keys.iter().any(|k| k.key_id() == current) {
        return Err(invalid(format!(
            "this device is not a member of team space {space}: ask a member to run `nmem team \
             add {space} {pk}`, then join again; nothing changed",
            space = req.space,
            pk = me.public_key
        )));
    }
    let members = remote::members(client, &req.space).await.map_err(invalid)?;
    drop(guard);
    let space = req.space.clone();
    app.writer
        .exec(move |c| Ok(store_keys(c, &space, "member", &keys, &current)?))
        .await?;
    app.sync.wake.notify_one();
    reply(app, &req.space, members).await
}

fn check_project(project: &str) -> Result<String, WriteError> {
    let p = project.trim();
    if p.is_empty() || p.len() > 512 {
        return Err(invalid(
            "no project given: pass the project's name as `nmem search --project` knows it",
        ));
    }
    Ok(p.to_string())
}

/// `nmem share PROJECT --team SPACE [--with …] [--stop]`.
pub async fn share(app: &App, req: ShareRequest) -> Result<Routing, WriteError> {
    let project = check_project(&req.project)?;
    let extra = log::Extra::parse(&req.with).map_err(invalid)?;
    if !req.stop {
        writable_team(app, &req.space).await?;
    }
    let (space, stop) = (req.space.clone(), req.stop);
    app.writer
        .exec(move |c| {
            if stop {
                let n = c.execute(
                    "DELETE FROM sync_shares WHERE project = ?1 AND space = ?2",
                    params![project, space],
                )?;
                if n == 0 {
                    return Err(invalid(format!(
                        "{project} is not shared with team space {space}; nothing changed"
                    )));
                }
                super::backfill::drop_jobs(c, &space, Some(&project))?;
            } else {
                c.execute(
                    "INSERT INTO sync_shares (project, space, extra) VALUES (?1, ?2, ?3)
                     ON CONFLICT(project, space) DO UPDATE SET extra = excluded.extra",
                    params![project, space, extra.to_text()],
                )?;
                // The project's history of the shared types goes to the team too.
                super::backfill::plan(c, &space, &project)?;
            }
            log::load_routes(c)?;
            Ok(routing(c)?)
        })
        .await
}

/// `nmem sync exclude PROJECT` / `include PROJECT`.
pub async fn exclude(app: &App, req: ExcludeRequest) -> Result<Routing, WriteError> {
    let project = check_project(&req.project)?;
    let include = req.include;
    app.writer
        .exec(move |c| {
            if include {
                let n = c.execute("DELETE FROM sync_excluded WHERE project = ?1", [&project])?;
                if n == 0 {
                    return Err(invalid(format!(
                        "{project} is not excluded (the personal space carries it); nothing \
                         changed"
                    )));
                }
            } else {
                c.execute(
                    "INSERT OR IGNORE INTO sync_excluded (project) VALUES (?1)",
                    [&project],
                )?;
            }
            log::load_routes(c)?;
            Ok(routing(c)?)
        })
        .await
}

/// Every team space's part of a round: keys, push, pull. One team's failure does not stop the
/// others; the errors are joined.
pub(super) async fn rounds(
    app: &App,
    client: &tokio_postgres::Client,
    st: &log::State,
) -> Result<(), String> {
    let teams = app
        .writer
        .exec(|c| Ok(teams(c)?))
        .await
        .map_err(|e| e.to_string())?;
    if teams.is_empty() {
        return Ok(());
    }
    let me = app
        .writer
        .exec(|c| Ok(identity(c)?))
        .await
        .map_err(|e| e.to_string())?;
    let mut errors = Vec::new();
    for t in teams {
        let space = t.space.clone();
        if let Err(e) = round(app, client, st, &me, t).await {
            errors.push(format!("team space {space}: {e}"));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

fn removed_message(space: &str, key_id: &str, me: &str) -> String {
    format!(
        "this device was removed from team space {space}: its key rotated to {key_id} without \
         this device, so events sealed after the removal cannot be opened here (what this home \
         already has stays); to come back, a member runs `nmem team add {space} {me}`"
    )
}

async fn round(
    app: &App,
    client: &tokio_postgres::Client,
    st: &log::State,
    me: &DeviceIdentity,
    mut t: Team,
) -> Result<(), String> {
    // Keys first: new wraps for this device (a rotation, a re-add), and the current key.
    let (_, current) = remote::space_kind(client, &t.space)
        .await?
        .ok_or("the server no longer has this space")?;
    let mut new = Vec::new();
    for (id, w) in remote::wrapped_keys(client, &t.space, &me.public_key).await? {
        if t.keys.contains_key(&id) {
            continue;
        }
        match me.unwrap(&w) {
            Ok(k) if k.key_id() == id => new.push(k),
            _ => tracing::warn!("sync: team space {}: key {id} does not open here", t.space),
        }
    }
    for k in &new {
        t.keys.insert(k.key_id(), k.clone());
    }
    let holds_current = t.keys.contains_key(&current);
    if holds_current && (!new.is_empty() || t.key_id != current || t.locked.is_some()) {
        let (space, role, cur) = (t.space.clone(), t.role.clone(), current.clone());
        app.writer
            .exec(move |c| Ok(store_keys(c, &space, &role, &new, &cur)?))
            .await
            .map_err(|e| e.to_string())?;
        t.key_id = current.clone();
        t.locked = None;
    } else if !holds_current {
        let why = removed_message(&t.space, &current, &me.public_key);
        if t.locked.as_deref() != Some(why.as_str()) {
            let (space, w, new) = (t.space.clone(), why.clone(), new.clone());
            app.writer
                .exec(move |c| {
                    for k in &new {
                        c.execute(
                            "INSERT OR IGNORE INTO sync_keys (space, key_id, key) VALUES (?1, ?2, ?3)",
                            params![space, k.key_id(), &k.0[..]],
                        )?;
                    }
                    Ok(set_locked(c, &space, &w)?)
                })
                .await
                .map_err(|e| e.to_string())?;
        }
        t.locked = Some(why);
    }
    let sp = super::space::Space::team(t, me);
    if sp.locked.is_none() {
        super::space::push(app, client, st, &sp).await?;
    }
    super::space::pull(app, client, st, &sp).await?;
    match sp.locked {
        Some(why) => Err(why),
        None => Ok(()),
    }
}

/// `nmem team leave SPACE [--forget-data]`: this device leaves a team space from its own side.
/// On the server its member row and wrapped keys go (the others' next rotation leaves it out;
/// it keeps the keys it had, as a removed member does). Here the space, its keys, this device's
/// stream of it, its cursors and shares go; the rows pulled from it stay unless `forget_data`,
/// which deletes the rows of the devices this home knows from this team only (not from its
/// personal space too), scrubbed, and keeps them out from then on.
pub async fn leave(app: &App, req: TeamLeaveRequest) -> Result<TeamLeft, WriteError> {
    check_name(&req.space)?;
    let st = enabled_state(app).await?;
    if local_team(app, &req.space).await?.is_none() {
        return Err(invalid(format!(
            "this device is not a member of team space {}: `nmem sync status` lists the team \
             spaces it is in; nothing changed",
            req.space
        )));
    }
    let me = app.writer.exec(|c| Ok(identity(c)?)).await?;
    let guard = connection(app, &st).await?;
    let client = guard.as_ref().expect("connected");
    let was_member = remote::leave_team(client, &req.space, &me.public_key)
        .await
        .map_err(invalid)?;
    let (space, personal, forget) = (req.space.clone(), st.space.clone(), req.forget_data);
    let forgotten = app
        .writer
        .exec(move |c| Ok(leave_here(c, &space, &personal, forget)?))
        .await?;
    drop(guard);
    Ok(TeamLeft {
        space: req.space,
        was_member_on_server: was_member,
        forgotten,
    })
}

/// The local side of [`leave`], in one transaction (scrubbed when it deletes rows).
fn leave_here(
    conn: &mut Connection,
    space: &str,
    personal: &str,
    forget_data: bool,
) -> rusqlite::Result<u64> {
    let run = |c: &mut Connection| -> rusqlite::Result<u64> {
        let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let mut forgotten = 0;
        if forget_data {
            let ids: Vec<String> = tx
                .prepare(
                    "SELECT event_id FROM sync_origin WHERE device IN
                       (SELECT device FROM sync_cursors WHERE space = ?1
                        EXCEPT SELECT device FROM sync_cursors WHERE space = ?2)",
                )?
                .query_map(params![space, personal], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            forgotten = super::tombstone::forget_here(&tx, &ids, "team_leave", None)?;
        }
        for sql in [
            "DELETE FROM sync_space_log WHERE space = ?1",
            "DELETE FROM sync_cursors WHERE space = ?1",
            "DELETE FROM sync_received
              WHERE stream IN (SELECT id FROM sync_streams WHERE space = ?1)",
            "DELETE FROM sync_streams WHERE space = ?1",
            "DELETE FROM sync_shares WHERE space = ?1",
            "DELETE FROM sync_keys WHERE space = ?1",
            "DELETE FROM sync_spaces WHERE space = ?1 AND kind = 'team'",
        ] {
            tx.execute(sql, [space])?;
        }
        super::backfill::drop_jobs(&tx, space, None)?;
        tx.commit()?;
        Ok(forgotten)
    };
    let forgotten = if forget_data {
        crate::maintain::scrubbed(conn, crate::maintain::Scrub::Routine, run)?.0
    } else {
        run(conn)?
    };
    log::load_routes(conn)?;
    Ok(forgotten)
}
