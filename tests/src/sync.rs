//! What the sync tests share (`tests/tests/sync*.rs`): the `nmem` commands they run, the way
//! they record events, and [`Space`]: a private PostgreSQL with homes in one personal space.

use crate::{bash_event, wait_until, Daemon, Home, Postgres};
use serde_json::Value;
use std::collections::BTreeSet;
use std::process::{Output, Stdio};
use std::time::Duration;

/// Converging: the background task polls every second, backing off to 15 s while the server
/// is away; a CI machine is slow.
pub const CONVERGE: Duration = Duration::from_secs(120);

/// Run `nmem ARGS` on `home` (standard input empty).
pub fn nmem(home: &Home, args: &[&str]) -> Output {
    home.cmd("nmem")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run nmem")
}

/// Run `nmem ARGS` on `home`, which must succeed and print JSON.
pub fn ok_json(home: &Home, args: &[&str]) -> Value {
    let out = nmem(home, args);
    assert!(
        out.status.success(),
        "nmem {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "nmem {args:?}: not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Run `nmem ARGS` on `home`, which must fail (exit 1): its standard error.
pub fn fails(home: &Home, args: &[&str]) -> String {
    let out = nmem(home, args);
    assert_eq!(
        out.status.code(),
        Some(1),
        "nmem {args:?} should fail: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `nmem sync enable` on `home`: its recovery phrase.
pub fn enable(home: &Home, pg: &Postgres) -> String {
    let v = ok_json(home, &["sync", "enable", "--url", &pg.url(), "--json"]);
    v["recovery_phrase"].as_str().unwrap().to_string()
}

/// `nmem sync join` on `home` with the phrase in a file.
pub fn join(home: &Home, pg: &Postgres, phrase: &str) -> Output {
    let f = home.dir.join("phrase.txt");
    std::fs::write(&f, phrase).unwrap();
    nmem(
        home,
        &[
            "sync",
            "join",
            "--phrase-file",
            f.to_str().unwrap(),
            "--url",
            &pg.url(),
            "--json",
        ],
    )
}

/// [`join`], which must succeed.
pub fn joined(home: &Home, pg: &Postgres, phrase: &str) {
    let out = join(home, pg, phrase);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn status(home: &Home) -> Value {
    ok_json(home, &["sync", "status", "--json"])
}

pub fn device(home: &Home) -> String {
    status(home)["device"].as_str().unwrap().to_string()
}

/// This device's public key (`nmem sync identity`).
pub fn identity(home: &Home) -> String {
    let v = ok_json(home, &["sync", "identity", "--json"]);
    let k = v["public_key"].as_str().unwrap().to_string();
    assert!(k.starts_with("age1"), "{k}");
    k
}

/// Record `n` events on `home` through the batch route, ids `{tag}-{i}`, content carrying `extra`.
pub fn record(home: &Home, tag: &str, range: std::ops::Range<usize>, extra: &str) {
    let ids: Vec<usize> = range.collect();
    for chunk in ids.chunks(100) {
        let events: Vec<(String, i64, Value)> = chunk
            .iter()
            .map(|i| {
                let mut payload: Value =
                    serde_json::from_slice(&bash_event(&format!("sess-{tag}"), *i)).unwrap();
                payload["tool_response"]["stdout"] = format!("{tag} output {i} {extra}\n").into();
                (format!("{tag}-{i}"), RECEIVED + *i as i64, payload)
            })
            .collect();
        crate::send_batch(home, &events);
    }
}

/// When the test events were received: a fixed time, plus their index.
const RECEIVED: i64 = 1_790_000_000_000;

/// Store hook payloads on `home` through the batch route, each under its event id.
pub fn send(home: &Home, events: &[(String, Value)]) {
    let events: Vec<(String, i64, Value)> = events
        .iter()
        .enumerate()
        .map(|(i, (id, payload))| (id.clone(), RECEIVED + i as i64, payload.clone()))
        .collect();
    crate::send_batch(home, &events);
}

/// The event ids of `home`'s observations.
pub fn event_ids(home: &Home) -> BTreeSet<String> {
    let db = home.db();
    let mut st = db
        .prepare("SELECT event_id FROM observations WHERE event_id IS NOT NULL")
        .unwrap();
    st.query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

pub fn observations(home: &Home) -> i64 {
    home.count("SELECT COUNT(*) FROM observations")
}

/// The server's events of one device: (count, max seq).
pub fn server_stream(pg: &Postgres, device: &str) -> (i64, i64) {
    let row = pg.sql(&format!(
        "SELECT COUNT(*) || '|' || COALESCE(MAX(seq), 0) FROM events WHERE device = '{device}'"
    ));
    let (a, b) = row.split_once('|').unwrap();
    (a.parse().unwrap(), b.parse().unwrap())
}

/// A private PostgreSQL and running homes in one personal space: the first home enables sync,
/// the others join with its phrase. Fields drop in order: the daemons stop before their homes
/// are removed, and the server last.
pub struct Space {
    pub daemons: Vec<Daemon>,
    pub homes: Vec<Home>,
    pub phrase: String,
    pub pg: Postgres,
}

impl Space {
    /// `None` (the test skips) when PostgreSQL is not installed.
    pub fn start(tags: &[&str]) -> Option<Space> {
        let pg = Postgres::start()?;
        let homes: Vec<Home> = tags.iter().map(|t| Home::new(t)).collect();
        let daemons = homes.iter().map(Home::start).collect();
        let phrase = enable(&homes[0], &pg);
        for h in &homes[1..] {
            joined(h, &pg, &phrase);
        }
        Some(Space {
            daemons,
            homes,
            phrase,
            pg,
        })
    }

    /// Wait until every home holds `n` observations.
    pub fn converge(&self, n: i64) {
        for h in &self.homes {
            wait_until("every home to converge", CONVERGE, || observations(h) >= n);
        }
    }
}

/// `nmem knowledge add` on `home`: a decision of `project` titled `title`, for `reason`; its id.
pub fn add_item(home: &Home, project: &str, title: &str, reason: &str) -> i64 {
    ok_json(
        home,
        &[
            "knowledge",
            "add",
            "--kind",
            "decision",
            "--title",
            title,
            "--reason",
            reason,
            "--project",
            project,
            "--json",
        ],
    )["item"]["id"]
        .as_i64()
        .unwrap()
}

/// Whether `home` holds the observation of `event_id`, pinned.
pub fn pinned(home: &Home, event_id: &str) -> bool {
    home.count(&format!(
        "SELECT COALESCE(MAX(is_pinned), 0) FROM observations WHERE event_id = '{event_id}'"
    )) == 1
}

/// `nmemctl ARGS` on `home`, which must succeed; its standard output.
pub fn ctl_ok(home: &Home, args: &[&str]) -> Vec<u8> {
    let out = home
        .cmd("nmemctl")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "nmemctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}
