//! Search by origin through a real PostgreSQL (docs/sync.md, "Origin"): each result says where
//! it was captured (this device, another of the user's devices, a teammate's through a team
//! space), `nmem search --origin` and `/v1/search`'s `origin` keep only those, and a bad value
//! is refused saying what to give.
//!
//! Skips (with the reason printed) when PostgreSQL is not installed, unless NMEM_REQUIRE_ALL=1.

use crate::sync_team::{command, commit, has_event};
use nmem_e2e::sync::send;
use nmem_e2e::sync::{device, enable, identity, joined, nmem, ok_json, CONVERGE};
use nmem_e2e::{wait_until, Home, Postgres};
use serde_json::Value;
use std::time::Duration;

/// The results of `nmem search wombat --all-projects --json [--origin O]` on `home`: each one's
/// event id (read from the database by its row id) and its `origin`.
fn hits(home: &Home, origin: Option<&str>) -> Vec<(String, Value)> {
    let mut args = vec!["search", "wombat", "--all-projects", "--json"];
    if let Some(o) = origin {
        args.extend(["--origin", o]);
    }
    let v = ok_json(home, &args);
    let db = home.db();
    let mut out: Vec<(String, Value)> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|it| {
            let table = if it["kind"] == "prompt" {
                "prompts"
            } else {
                "observations"
            };
            let id: String = db
                .query_row(
                    &format!("SELECT event_id FROM {table} WHERE id = ?1"),
                    [it["id"].as_i64().unwrap()],
                    |r| r.get(0),
                )
                .unwrap();
            (id, it["origin"].clone())
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn ids(hits: &[(String, Value)]) -> Vec<&str> {
    hits.iter().map(|(id, _)| id.as_str()).collect()
}

fn this_device() -> Value {
    serde_json::json!({"kind": "this-device"})
}

#[test]
fn search_by_origin_tells_this_device_my_devices_and_teammates_apart() {
    let Some(pg) = Postgres::start() else { return };
    let a = Home::new("sgA");
    let b = Home::new("sgB");
    let c = Home::new("sgC");
    let (_da, _db, _dc) = (a.start(), b.start(), c.start());
    // A and B: one user's two devices. C: a teammate, in the team space `acme` with A.
    let phrase = enable(&a, &pg);
    joined(&b, &pg, &phrase);
    enable(&c, &pg);
    ok_json(&a, &["team", "create", "acme", "--json"]);
    let pk_c = identity(&c);
    ok_json(&a, &["team", "add", "acme", &pk_c, "--json"]);
    ok_json(&c, &["team", "join", "acme", "--json"]);
    for h in [&a, &c] {
        ok_json(h, &["share", "open-proj", "--team", "acme", "--json"]);
    }
    let (dev_a, dev_b, dev_c) = (device(&a), device(&b), device(&c));

    send(
        &a,
        &[
            ("a-cmd".into(), command("open-proj", "wombat a1")),
            ("a-commit".into(), commit("open-proj", "wombat a2")),
            ("a-commit2".into(), commit("open-proj", "quokka a3")),
        ],
    );
    send(&b, &[("b-cmd".into(), command("open-proj", "wombat b1"))]);
    send(&c, &[("c-commit".into(), commit("open-proj", "wombat c1"))]);
    for h in [&a, &b, &c] {
        ok_json(h, &["sync", "now", "--json"]);
    }
    wait_until("B holds A's events", CONVERGE, || {
        has_event(&b, "a-cmd") && has_event(&b, "a-commit")
    });
    wait_until("A holds B's event and C's shared commit", CONVERGE, || {
        has_event(&a, "b-cmd") && has_event(&a, "c-commit")
    });

    // B: its own event is this device's; A's are my devices', with A's device id.
    let mine_a = serde_json::json!({"kind": "my-devices", "device": dev_a});
    let all = hits(&b, None);
    assert_eq!(ids(&all), ["a-cmd", "a-commit", "b-cmd"], "{all:?}");
    assert_eq!(all[0].1, mine_a);
    assert_eq!(all[1].1, mine_a);
    assert_eq!(all[2].1, this_device());
    assert_eq!(hits(&b, Some("this-device")), vec![all[2].clone()]);
    assert_eq!(hits(&b, Some("my-devices")), all);
    assert_eq!(hits(&b, Some("team")), vec![]);
    assert_eq!(hits(&b, Some("any")), all);

    // A: C's commit came through the team space; B's through the personal one.
    let all = hits(&a, None);
    assert_eq!(
        ids(&all),
        ["a-cmd", "a-commit", "b-cmd", "c-commit"],
        "{all:?}"
    );
    let team = hits(&a, Some("team"));
    assert_eq!(ids(&team), ["c-commit"]);
    assert_eq!(
        team[0].1,
        serde_json::json!({"kind": "team", "device": dev_c, "space": "acme"})
    );
    assert_eq!(
        ids(&hits(&a, Some("my-devices"))),
        ["a-cmd", "a-commit", "b-cmd"]
    );
    assert_eq!(
        hits(&a, Some("my-devices"))[2].1,
        serde_json::json!({"kind": "my-devices", "device": dev_b})
    );
    assert_eq!(ids(&hits(&a, Some("this-device"))), ["a-cmd", "a-commit"]);

    // C: A's shared commit is a teammate's.
    wait_until("C holds A's shared commit", CONVERGE, || {
        has_event(&c, "a-commit")
    });
    let team = hits(&c, Some("team"));
    assert_eq!(ids(&team), ["a-commit"]);
    assert_eq!(team[0].1["device"], dev_a.as_str());

    // A person sees where a row came from, briefly; this device's rows say nothing.
    let out = nmem(&a, &["search", "wombat", "--all-projects"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{table}");
    assert!(
        table.contains(&format!("[device {}]", &dev_b[..8])),
        "{table}"
    );
    assert!(
        table.contains(&format!("[team acme (device {})]", &dev_c[..8])),
        "{table}"
    );
    assert_eq!(table.matches("[device").count(), 1, "{table}");
    // A bad value: a clear error from the CLI and from the API, naming the values.
    let out = nmem(&a, &["search", "wombat", "--origin", "elsewhere"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("my-devices") && err.contains("this-device"),
        "{err}"
    );
    let r = nmem_proto::client::call(
        &a.paths.socket,
        "POST",
        "/v1/search",
        &[],
        br#"{"query": "wombat", "project": null, "origin": "elsewhere"}"#,
        Duration::from_secs(30),
    )
    .unwrap();
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    let body = String::from_utf8_lossy(&r.body);
    assert!(body.contains("my-devices"), "{body}");
    // The API's filter and each hit's origin, as the CLI showed them.
    let r = nmem_proto::client::call(
        &a.paths.socket,
        "POST",
        "/v1/search",
        &[],
        br#"{"query": "wombat", "project": null, "origin": "team"}"#,
        Duration::from_secs(30),
    )
    .unwrap();
    assert_eq!(r.status, 200);
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["items"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["items"][0]["origin"]["space"], "acme", "{v}");

    verify_covers_the_team_space(&pg, &a, &dev_a, &dev_b, &dev_c);
}

/// The streams of `space` in a `sync verify --json` reply, by device.
fn streams_of<'a>(v: &'a Value, space: &str) -> std::collections::BTreeMap<String, &'a Value> {
    v["streams"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["space"] == space)
        .map(|s| (s["device"].as_str().unwrap().to_string(), s))
        .collect()
}

/// `sync verify` on A compares every space it is in, per (space, device): the personal space's
/// streams (A's own and B's; C is not in it) and the team space's (A's own team stream and C's),
/// and names the sequence numbers where the server's team rows were changed or deleted.
fn verify_covers_the_team_space(pg: &Postgres, a: &Home, dev_a: &str, dev_b: &str, dev_c: &str) {
    wait_until("A to have nothing pending", CONVERGE, || {
        nmem_e2e::sync::status(a)["pending"] == 0
    });
    let personal = nmem_e2e::sync::status(a)["space"]
        .as_str()
        .unwrap()
        .to_string();
    // A's own team stream: both of its commits (the command is not a type the team carries).
    wait_until("A's team stream to be on the server", CONVERGE, || {
        pg.sql(&format!(
            "SELECT COUNT(*) FROM events WHERE space = 'acme' AND device = '{dev_a}'"
        )) == "2"
    });
    let v = ok_json(a, &["sync", "verify", "--json"]);
    assert_eq!(v["ok"], true, "{v}");
    let mine = streams_of(&v, &personal);
    assert!(mine.contains_key(dev_a) && mine.contains_key(dev_b), "{v}");
    assert!(!mine.contains_key(dev_c), "{v}");
    let team = streams_of(&v, "acme");
    assert_eq!(team[dev_a]["this_device"], true, "{v}");
    assert_eq!(team[dev_a]["server_count"], 2, "{v}");
    assert_eq!(team[dev_c]["server_count"], 1, "{v}");
    assert_eq!(team[dev_c]["local_count"], 1, "{v}");
    assert!(!team.contains_key(dev_b), "{v}");

    // The server's team rows tampered with: C's event under another id, A's first one gone.
    pg.sql(&format!(
        "UPDATE events SET event_id = 'tampered' WHERE space = 'acme' AND device = '{dev_c}' \
         AND seq = 1"
    ));
    pg.sql(&format!(
        "DELETE FROM events WHERE space = 'acme' AND device = '{dev_a}' AND seq = 1"
    ));
    let out = nmem(a, &["sync", "verify", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], false, "{v}");
    let team = streams_of(&v, "acme");
    assert_eq!(team[dev_c]["different"], serde_json::json!([1]), "{v}");
    assert_eq!(team[dev_c]["ok"], false, "{v}");
    assert_eq!(
        team[dev_a]["missing_on_server"],
        serde_json::json!([1]),
        "{v}"
    );
    assert_ne!(team[dev_a]["server_hash"], team[dev_a]["local_hash"], "{v}");
    // The personal space's streams are untouched and still agree.
    assert!(
        streams_of(&v, &personal).values().all(|s| s["ok"] == true),
        "{v}"
    );
    // The text names the space of each stream.
    let out = nmem(a, &["sync", "verify"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("space acme:"), "{text}");
    assert!(text.contains("different events: seq 1"), "{text}");
    assert!(text.contains("missing on the server: seq 1"), "{text}");
}
