//! The server side of sync: nmem's tables on the user's PostgreSQL, and the few statements
//! push and pull need. The server stores only what [`super::crypto`] lets it see: space, device,
//! sequence number, an opaque event id, the key id, sizes, times and ciphertext.
//!
//! Connections: TLS (rustls, the web PKI roots, certificates verified) for every host but a
//! loopback address or a Unix socket folder, which may go plain.

use std::net::IpAddr;
use std::str::FromStr;
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::{Client, Config};

/// The server schema's migrations, in order; `nmem_schema_version` records those applied.
/// Append only: a server is shared by every device of every nmem version that syncs to it.
const MIGRATIONS: &[&str] = &[
    // 1: spaces with their key check, the event log, and (for team spaces, later) members with
    // their wrapped keys.
    "CREATE TABLE spaces (
        space       text PRIMARY KEY,
        kind        text NOT NULL DEFAULT 'personal',
        key_id      text NOT NULL,
        key_check   bytea NOT NULL,
        created_at  timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE events (
        space       text NOT NULL REFERENCES spaces(space),
        device      text NOT NULL,
        seq         bigint NOT NULL CHECK (seq > 0),
        event_id    text NOT NULL UNIQUE,
        key_id      text NOT NULL,
        size        integer NOT NULL,
        created_at  timestamptz NOT NULL DEFAULT now(),
        ciphertext  bytea,
        PRIMARY KEY (space, device, seq)
    );
    CREATE TABLE members (
        space        text NOT NULL REFERENCES spaces(space),
        member       text NOT NULL,
        public_key   text NOT NULL,
        key_id       text,
        wrapped_key  bytea,
        added_at     timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (space, member)
    );",
    // 2: team spaces (docs/sync.md, "Team spaces"): every key a team has had, wrapped for each
    // member who may read it (a rotation adds the new key for the remaining members only;
    // `members` keeps each member's current wrap). A member is its `age1…` public key.
    "CREATE TABLE member_keys (
        space        text NOT NULL REFERENCES spaces(space),
        member       text NOT NULL,
        key_id       text NOT NULL,
        wrapped_key  bytea NOT NULL,
        added_at     timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (space, member, key_id)
    );",
];

/// An error talking to the server, said for a person (no password in it).
pub type RemoteError = String;

fn pg(what: &str) -> impl Fn(tokio_postgres::Error) -> RemoteError + '_ {
    move |e| {
        // The server's own message (a DbError) says the most; the Display of the outer error
        // is often only "db error".
        let detail = e
            .as_db_error()
            .map(|d| d.message().to_string())
            .unwrap_or_else(|| {
                let mut s = e.to_string();
                let mut src = std::error::Error::source(&e);
                while let Some(inner) = src {
                    s.push_str(": ");
                    s.push_str(&inner.to_string());
                    src = inner.source();
                }
                s
            });
        format!("{what}: {detail}")
    }
}

/// Whether a host may be reached without TLS.
pub fn is_local(host: &Host) -> bool {
    match host {
        Host::Unix(_) => true,
        Host::Tcp(h) => {
            h == "localhost"
                || h.trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
    }
}

/// Parse a server URL, adding the password from `password_file` when given.
pub fn config(url: &str, password_file: Option<&std::path::Path>) -> Result<Config, RemoteError> {
    let mut cfg = Config::from_str(url).map_err(|e| {
        format!(
            "the sync url is not a PostgreSQL connection string ({e}): write it as \
             postgresql://user@host:port/database"
        )
    })?;
    if cfg.get_hosts().is_empty() {
        return Err(
            "the sync url names no host: write it as postgresql://user@host:port/database".into(),
        );
    }
    if let Some(f) = password_file {
        let text = std::fs::read_to_string(f)
            .map_err(|e| format!("cannot read the sync password file {}: {e}", f.display()))?;
        cfg.password(text.lines().next().unwrap_or("").trim_end());
    }
    Ok(cfg)
}

/// The URL for status and messages: its password replaced.
pub fn shown(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let auth = &url[scheme + 3..at];
            match auth.find(':') {
                Some(colon) => format!("{}:***{}", &url[..scheme + 3 + colon], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url
            .split_whitespace()
            .map(|kv| {
                if kv.starts_with("password=") {
                    "password=***"
                } else {
                    kv
                }
            })
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// Connect (TLS unless every host is local) and bring nmem's tables up to date.
pub async fn connect(mut cfg: Config) -> Result<Client, RemoteError> {
    cfg.connect_timeout(std::time::Duration::from_secs(10));
    cfg.application_name("nmemd");
    let local = cfg.get_hosts().iter().all(is_local);
    let client = if local {
        let (client, conn) = cfg
            .connect(tokio_postgres::NoTls)
            .await
            .map_err(pg("cannot connect to the sync server"))?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("sync connection closed: {e}");
            }
        });
        client
    } else {
        cfg.ssl_mode(SslMode::Require);
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        let tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS set-up failed: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let (client, conn) = cfg
            .connect(tokio_postgres_rustls::MakeRustlsConnect::new(tls))
            .await
            .map_err(pg("cannot connect to the sync server over TLS"))?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("sync connection closed: {e}");
            }
        });
        client
    };
    migrate(&client).await?;
    Ok(client)
}

/// Apply the migrations this server lacks, under an advisory lock (two devices may connect to
/// a new server at once).
async fn migrate(client: &Client) -> Result<(), RemoteError> {
    let e = pg("migrating the sync server's tables");
    client
        .batch_execute(
            "BEGIN;
             SELECT pg_advisory_xact_lock(7356231098);
             CREATE TABLE IF NOT EXISTS nmem_schema_version (
                 version integer PRIMARY KEY,
                 applied_at timestamptz NOT NULL DEFAULT now()
             );",
        )
        .await
        .map_err(&e)?;
    let result = async {
        let have: i32 = client
            .query_one(
                "SELECT COALESCE(MAX(version), 0) FROM nmem_schema_version",
                &[],
            )
            .await?
            .get(0);
        if have as usize > MIGRATIONS.len() {
            return Ok(Some(have));
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(have as usize) {
            client.batch_execute(sql).await?;
            client
                .execute(
                    "INSERT INTO nmem_schema_version (version) VALUES ($1)",
                    &[&(i as i32 + 1)],
                )
                .await?;
        }
        Ok::<_, tokio_postgres::Error>(None)
    }
    .await;
    match result {
        Ok(None) => client.batch_execute("COMMIT").await.map_err(&e),
        Ok(Some(v)) => {
            let _ = client.batch_execute("ROLLBACK").await;
            // Newer tables are a superset by design (append-only migrations): use them.
            tracing::info!("the sync server's schema is version {v}, newer than this nmem's");
            Ok(())
        }
        Err(err) => {
            let _ = client.batch_execute("ROLLBACK").await;
            Err(e(err))
        }
    }
}

/// The key check of `space`, if the server has it: (key id, record).
pub async fn space(client: &Client, space: &str) -> Result<Option<(String, Vec<u8>)>, RemoteError> {
    let row = client
        .query_opt(
            "SELECT key_id, key_check FROM spaces WHERE space = $1",
            &[&space],
        )
        .await
        .map_err(pg("reading the space"))?;
    Ok(row.map(|r| (r.get(0), r.get(1))))
}

/// Create `space` with its key check; false when it exists already (left as it is).
pub async fn create_space(
    client: &Client,
    space: &str,
    key_id: &str,
    key_check: &[u8],
) -> Result<bool, RemoteError> {
    let n = client
        .execute(
            "INSERT INTO spaces (space, key_id, key_check) VALUES ($1, $2, $3)
             ON CONFLICT (space) DO NOTHING",
            &[&space, &key_id, &key_check],
        )
        .await
        .map_err(pg("creating the space"))?;
    Ok(n == 1)
}

/// The highest sequence number the server holds for `device` (0: none).
pub async fn head(client: &Client, space: &str, device: &str) -> Result<i64, RemoteError> {
    Ok(client
        .query_one(
            "SELECT COALESCE(MAX(seq), 0) FROM events WHERE space = $1 AND device = $2",
            &[&space, &device],
        )
        .await
        .map_err(pg("reading this device's head"))?
        .get(0))
}

/// Every device's head in `space`: a loose index scan over the primary key (space, device,
/// seq), one index descent per device for its name and one for its head, instead of a
/// `GROUP BY` that reads every row of the space (a round does this every second).
pub async fn heads(client: &Client, space: &str) -> Result<Vec<(String, i64)>, RemoteError> {
    let rows = client
        .query(
            "WITH RECURSIVE d(device) AS (
                 (SELECT device FROM events WHERE space = $1 ORDER BY device LIMIT 1)
                 UNION ALL
                 SELECT (SELECT e.device FROM events e
                         WHERE e.space = $1 AND e.device > d.device
                         ORDER BY e.device LIMIT 1)
                 FROM d WHERE d.device IS NOT NULL
             )
             SELECT device,
                    (SELECT e.seq FROM events e WHERE e.space = $1 AND e.device = d.device
                     ORDER BY e.seq DESC LIMIT 1)
             FROM d WHERE device IS NOT NULL ORDER BY device",
            &[&space],
        )
        .await
        .map_err(pg("reading the devices' heads"))?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// A sealed event bound for the server. `sealed` is None for an event forgotten or quarantined
/// before it was sent: the row keeps the stream dense, and the pull skips it.
pub struct Outgoing {
    pub seq: i64,
    pub event_id: String,
    pub sealed: Option<Vec<u8>>,
}

/// Insert a batch (existing rows are left alone), then read back which event id each of its
/// sequence numbers holds: only that read-back counts an event as sent.
pub async fn push(
    client: &Client,
    space: &str,
    device: &str,
    key_id: &str,
    batch: &[Outgoing],
) -> Result<std::collections::HashMap<i64, String>, RemoteError> {
    let seqs: Vec<i64> = batch.iter().map(|o| o.seq).collect();
    let ids: Vec<&str> = batch.iter().map(|o| o.event_id.as_str()).collect();
    let sizes: Vec<i32> = batch
        .iter()
        .map(|o| o.sealed.as_ref().map_or(0, |s| s.len() as i32))
        .collect();
    let sealed: Vec<Option<&[u8]>> = batch.iter().map(|o| o.sealed.as_deref()).collect();
    client
        .execute(
            "INSERT INTO events (space, device, seq, event_id, key_id, size, ciphertext)
             SELECT $1, $2, s, e, $3, z, c
             FROM unnest($4::bigint[], $5::text[], $6::int[], $7::bytea[]) AS t(s, e, z, c)
             ON CONFLICT DO NOTHING",
            &[&space, &device, &key_id, &seqs, &ids, &sizes, &sealed],
        )
        .await
        .map_err(pg("uploading events"))?;
    read_back(client, space, device, &seqs).await
}

/// The event id the server holds at each of `seqs` of `device`.
pub async fn read_back(
    client: &Client,
    space: &str,
    device: &str,
    seqs: &[i64],
) -> Result<std::collections::HashMap<i64, String>, RemoteError> {
    let rows = client
        .query(
            "SELECT seq, event_id FROM events WHERE space = $1 AND device = $2 AND seq = ANY($3)",
            &[&space, &device, &seqs],
        )
        .await
        .map_err(pg("reading uploaded events back"))?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// Null the ciphertext of this device's events at `seqs` (forgotten): only a device's own rows.
pub async fn null_ciphertext(
    client: &Client,
    space: &str,
    device: &str,
    seqs: &[i64],
) -> Result<(), RemoteError> {
    client
        .execute(
            "UPDATE events SET ciphertext = NULL, size = 0
             WHERE space = $1 AND device = $2 AND seq = ANY($3) AND ciphertext IS NOT NULL",
            &[&space, &device, &seqs],
        )
        .await
        .map_err(pg("nulling forgotten events"))?;
    Ok(())
}

/// Every event id the server holds for each device of `space`, in sequence order, with whether
/// its ciphertext is still there: (device, seq, event id, has ciphertext). For `sync verify`.
pub async fn all_ids(
    client: &Client,
    space: &str,
) -> Result<Vec<(String, i64, String, bool)>, RemoteError> {
    let rows = client
        .query(
            "SELECT device, seq, event_id, ciphertext IS NOT NULL FROM events
             WHERE space = $1 ORDER BY device, seq",
            &[&space],
        )
        .await
        .map_err(pg("reading the event ids"))?;
    Ok(rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect())
}

/// Which of `event_ids` the server holds in `space` (under any device): the backfill does not
/// log again what the space has already.
pub async fn present(
    client: &Client,
    space: &str,
    event_ids: &[String],
) -> Result<std::collections::HashSet<String>, RemoteError> {
    if event_ids.is_empty() {
        return Ok(Default::default());
    }
    let rows = client
        .query(
            "SELECT event_id FROM events WHERE space = $1 AND event_id = ANY($2)",
            &[&space, &event_ids],
        )
        .await
        .map_err(pg("looking up events already in the space"))?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// A member leaves a team space: its member row and its wrapped keys go, in one transaction (the
/// others' next rotation then leaves it out). Whether it was a member.
pub async fn leave_team(client: &Client, space: &str, member: &str) -> Result<bool, RemoteError> {
    let e = pg("leaving the team space");
    client.batch_execute("BEGIN").await.map_err(&e)?;
    let result = async {
        let n = client
            .execute(
                "DELETE FROM members WHERE space = $1 AND member = $2",
                &[&space, &member],
            )
            .await?;
        client
            .execute(
                "DELETE FROM member_keys WHERE space = $1 AND member = $2",
                &[&space, &member],
            )
            .await?;
        Ok::<_, tokio_postgres::Error>(n > 0)
    }
    .await;
    finish(client, result, e).await
}

/// A sealed event from the server.
pub struct Incoming {
    pub seq: i64,
    pub event_id: String,
    pub key_id: String,
    pub sealed: Option<Vec<u8>>,
}

/// Up to `limit` events of `device` after `after`, in order.
pub async fn fetch(
    client: &Client,
    space: &str,
    device: &str,
    after: i64,
    limit: i64,
) -> Result<Vec<Incoming>, RemoteError> {
    let rows = client
        .query(
            "SELECT seq, event_id, key_id, ciphertext FROM events
             WHERE space = $1 AND device = $2 AND seq > $3 ORDER BY seq LIMIT $4",
            &[&space, &device, &after, &limit],
        )
        .await
        .map_err(pg("downloading events"))?;
    Ok(rows
        .iter()
        .map(|r| Incoming {
            seq: r.get(0),
            event_id: r.get(1),
            key_id: r.get(2),
            sealed: r.get(3),
        })
        .collect())
}

// Team spaces (docs/sync.md, "Team spaces"): the statements of `nmem team` and of a team
// space's round. A member is its public key; what the server holds per member is a key wrapped
// for it (ciphertext to everyone else).

/// A space's kind and current key id, if the server has it.
pub async fn space_kind(
    client: &Client,
    space: &str,
) -> Result<Option<(String, String)>, RemoteError> {
    let row = client
        .query_opt(
            "SELECT kind, key_id FROM spaces WHERE space = $1",
            &[&space],
        )
        .await
        .map_err(pg("reading the team space"))?;
    Ok(row.map(|r| (r.get(0), r.get(1))))
}

/// Create a team space with its first key, wrapped for its creator, in one transaction; false
/// when a space of that name exists (left as it is).
pub async fn create_team(
    client: &Client,
    space: &str,
    key_id: &str,
    key_check: &[u8],
    creator: &str,
    wrapped: &[u8],
) -> Result<bool, RemoteError> {
    let e = pg("creating the team space");
    client.batch_execute("BEGIN").await.map_err(&e)?;
    let result = async {
        let n = client
            .execute(
                "INSERT INTO spaces (space, kind, key_id, key_check) VALUES ($1, 'team', $2, $3)
                 ON CONFLICT (space) DO NOTHING",
                &[&space, &key_id, &key_check],
            )
            .await?;
        if n == 1 {
            put_member(client, space, creator, key_id, wrapped).await?;
        }
        Ok::<_, tokio_postgres::Error>(n == 1)
    }
    .await;
    finish(client, result, e).await
}

async fn finish<T>(
    client: &Client,
    result: Result<T, tokio_postgres::Error>,
    e: impl Fn(tokio_postgres::Error) -> RemoteError,
) -> Result<T, RemoteError> {
    match result {
        Ok(v) => {
            client.batch_execute("COMMIT").await.map_err(&e)?;
            Ok(v)
        }
        Err(err) => {
            let _ = client.batch_execute("ROLLBACK").await;
            Err(e(err))
        }
    }
}

/// Record `member` with its wrap of `key_id` (its current key) in both tables.
async fn put_member(
    client: &Client,
    space: &str,
    member: &str,
    key_id: &str,
    wrapped: &[u8],
) -> Result<(), tokio_postgres::Error> {
    client
        .execute(
            "INSERT INTO members (space, member, public_key, key_id, wrapped_key)
             VALUES ($1, $2, $2, $3, $4)
             ON CONFLICT (space, member) DO UPDATE SET key_id = $3, wrapped_key = $4",
            &[&space, &member, &key_id, &wrapped],
        )
        .await?;
    client
        .execute(
            "INSERT INTO member_keys (space, member, key_id, wrapped_key) VALUES ($1, $2, $3, $4)
             ON CONFLICT DO NOTHING",
            &[&space, &member, &key_id, &wrapped],
        )
        .await?;
    Ok(())
}

/// What a change to a team's members found on the server, under its lock.
pub enum TeamChange {
    Done,
    /// The team's key is not the one the change was made for (another member rotated it
    /// meanwhile): nothing was changed.
    KeyMoved(String),
    NoSuchSpace,
}

/// Add `member` with its wraps of every key this device holds (`wraps`: key id, wrapped key;
/// the current one among them), under the space's row lock: fails with
/// [`TeamChange::KeyMoved`] if the current key is no longer `current`.
pub async fn add_member(
    client: &Client,
    space: &str,
    member: &str,
    current: &str,
    wraps: &[(String, Vec<u8>)],
) -> Result<TeamChange, RemoteError> {
    let e = pg("adding the member");
    client.batch_execute("BEGIN").await.map_err(&e)?;
    let result = async {
        let row = client
            .query_opt(
                "SELECT key_id FROM spaces WHERE space = $1 AND kind = 'team' FOR UPDATE",
                &[&space],
            )
            .await?;
        let Some(row) = row else {
            return Ok(TeamChange::NoSuchSpace);
        };
        let now: String = row.get(0);
        if now != current {
            return Ok(TeamChange::KeyMoved(now));
        }
        for (key_id, wrapped) in wraps.iter().filter(|w| w.0 != current) {
            client
                .execute(
                    "INSERT INTO member_keys (space, member, key_id, wrapped_key)
                     VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                    &[&space, &member, key_id, wrapped],
                )
                .await?;
        }
        if let Some((_, wrapped)) = wraps.iter().find(|w| w.0 == current) {
            put_member(client, space, member, current, wrapped).await?;
        }
        Ok::<_, tokio_postgres::Error>(TeamChange::Done)
    }
    .await;
    finish(client, result, e).await
}

/// A team's members (public keys), in order.
pub async fn members(client: &Client, space: &str) -> Result<Vec<String>, RemoteError> {
    let rows = client
        .query(
            "SELECT member FROM members WHERE space = $1 ORDER BY member",
            &[&space],
        )
        .await
        .map_err(pg("reading the team's members"))?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Remove `member` and rotate: under the space's row lock, check the key is still `old` and
/// the members are still `remaining` plus `member`, then make `new_key_id` current with its
/// check and wraps (one per remaining member). All or nothing.
pub async fn rotate(
    client: &Client,
    space: &str,
    member: &str,
    old: &str,
    new_key_id: &str,
    key_check: &[u8],
    wraps: &[(String, Vec<u8>)],
) -> Result<TeamChange, RemoteError> {
    let e = pg("removing the member");
    client.batch_execute("BEGIN").await.map_err(&e)?;
    let result = async {
        let row = client
            .query_opt(
                "SELECT key_id FROM spaces WHERE space = $1 AND kind = 'team' FOR UPDATE",
                &[&space],
            )
            .await?;
        let Some(row) = row else {
            return Ok(TeamChange::NoSuchSpace);
        };
        let now: String = row.get(0);
        let mut have: Vec<String> = client
            .query(
                "SELECT member FROM members WHERE space = $1 AND member <> $2",
                &[&space, &member],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        have.sort();
        let mut want: Vec<String> = wraps.iter().map(|w| w.0.clone()).collect();
        want.sort();
        if now != old || have != want {
            return Ok(TeamChange::KeyMoved(now));
        }
        client
            .execute(
                "DELETE FROM members WHERE space = $1 AND member = $2",
                &[&space, &member],
            )
            .await?;
        client
            .execute(
                "UPDATE spaces SET key_id = $2, key_check = $3 WHERE space = $1",
                &[&space, &new_key_id, &key_check],
            )
            .await?;
        for (m, wrapped) in wraps {
            put_member(client, space, m, new_key_id, wrapped).await?;
        }
        Ok::<_, tokio_postgres::Error>(TeamChange::Done)
    }
    .await;
    finish(client, result, e).await
}

/// Every key of `space` wrapped for `member`: (key id, wrapped key).
pub async fn wrapped_keys(
    client: &Client,
    space: &str,
    member: &str,
) -> Result<Vec<(String, Vec<u8>)>, RemoteError> {
    let rows = client
        .query(
            "SELECT key_id, wrapped_key FROM member_keys WHERE space = $1 AND member = $2",
            &[&space, &member],
        )
        .await
        .map_err(pg("reading this device's team keys"))?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_and_sockets_are_local_and_nothing_else_is() {
        let hosts = |url: &str| config(url, None).unwrap().get_hosts().to_vec();
        assert!(hosts("postgresql://u@127.0.0.1:5432/db")
            .iter()
            .all(is_local));
        assert!(hosts("postgresql://u@localhost/db").iter().all(is_local));
        assert!(hosts("postgresql://u@[::1]:5432/db").iter().all(is_local));
        assert!(hosts("host=/run/postgresql user=u").iter().all(is_local));
        assert!(!hosts("postgresql://u@db.example.com/db")
            .iter()
            .all(is_local));
        assert!(!hosts("postgresql://u@10.0.0.5/db").iter().all(is_local));
    }

    #[test]
    fn a_bad_url_says_how_to_write_one() {
        let e = config("http://[nonsense", None).unwrap_err();
        assert!(e.contains("postgresql://user@host"), "{e}");
    }

    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(
            shown("postgresql://me:s3cret@db.example.com/nmem"),
            "postgresql://me:***@db.example.com/nmem"
        );
        assert_eq!(shown("postgresql://me@db/nmem"), "postgresql://me@db/nmem");
        assert_eq!(
            shown("host=db user=me password=s3cret"),
            "host=db user=me password=***"
        );
    }
}
