//! Joining and leaving through a real PostgreSQL started by the test (docs/sync.md, "Backfill"
//! and "Leaving"): history recorded before `enable` reaches the other devices once, also across
//! a kill mid-backfill; a project's history goes to a team when it is shared; a device leaves
//! its personal space and joins again without sending anything twice; a member leaves a team
//! from its own side.
//!
//! Every test skips (with the reason printed) when PostgreSQL is not installed, unless
//! NMEM_REQUIRE_ALL=1.

use crate::sync_team::{command, commit, failure, has_event, server_count};
use nmem_e2e::sync::{
    add_item, ctl_ok, device, enable, event_ids, fails, identity, joined, nmem, observations,
    ok_json, pinned, record, send, server_stream, status, CONVERGE,
};
use nmem_e2e::{wait_until, Home, Postgres};
use serde_json::json;

#[test]
fn history_recorded_before_enable_reaches_the_other_device_once() {
    let Some(pg) = Postgres::start() else { return };
    let a = Home::new("sbfa");
    let _da = a.start();
    let err = fails(&a, &["sync", "leave"]);
    assert!(err.contains("nothing to leave"), "{err}");
    record(&a, "a", 0..50, "wombatberry");
    let phrase = enable(&a, &pg);
    let b = Home::new("sbfb");
    let _db = b.start();
    joined(&b, &pg, &phrase);
    wait_until(
        "B to hold the 50 events A recorded before enable",
        CONVERGE,
        || observations(&b) >= 50,
    );
    assert_eq!(event_ids(&a).len(), 50);
    assert_eq!(event_ids(&b), event_ids(&a));
    let found = ok_json(&b, &["search", "wombatberry", "--all-projects", "--json"]);
    assert!(!found["items"].as_array().unwrap().is_empty(), "{found}");
    wait_until("A's backfill to end and upload", CONVERGE, || {
        let s = status(&a);
        s["backfill"] == json!({"done": 50, "total": 50, "running": false}) && s["pending"] == 0
    });
    let dev_a = device(&a);
    assert_eq!(server_stream(&pg, &dev_a), (50, 50));
    let text = nmem(&a, &["sync", "status"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("backfill") && text.contains(" 50/50 (done)"),
        "{text}"
    );
    // B had nothing of its own to send: what it holds came from A.
    assert_eq!(b.count("SELECT COUNT(*) FROM sync_log"), 0);

    // A leaves: it keeps its data and logs nothing more; the space is forgotten here.
    let left = ok_json(&a, &["sync", "leave", "--json"]);
    assert_eq!(left["enabled"], false, "{left}");
    assert!(left["space"].is_null(), "{left}");
    assert_eq!(a.count("SELECT COUNT(*) FROM sync_state"), 0);
    assert_eq!(
        a.count("SELECT COUNT(*) FROM sync_keys") + a.count("SELECT COUNT(*) FROM sync_cursors"),
        0
    );
    record(&a, "a", 50..55, "wombatberry");
    assert_eq!(observations(&a), 55);
    assert_eq!(
        a.count("SELECT COUNT(*) FROM sync_log"),
        50,
        "nothing logged"
    );
    let err = fails(&a, &["sync", "leave"]);
    assert!(err.contains("nothing to leave"), "{err}");
    let err = fails(&a, &["sync", "now"]);
    assert!(err.contains("nmem sync join"), "{err}");
    assert_eq!(server_stream(&pg, &dev_a), (50, 50));

    // Joining again with the phrase: a new device, and only what the space lacks is sent.
    joined(&a, &pg, &phrase);
    let dev_a2 = device(&a);
    assert_ne!(dev_a2, dev_a);
    wait_until("B to hold what A recorded while away", CONVERGE, || {
        observations(&b) >= 55
    });
    wait_until("A's second backfill to end and upload", CONVERGE, || {
        let s = status(&a);
        s["backfill"]["running"] == false && s["pending"] == 0
    });
    assert_eq!(server_stream(&pg, &dev_a2), (5, 5));
    assert_eq!(
        pg.sql("SELECT COUNT(*) || '|' || COUNT(DISTINCT event_id) FROM events"),
        "55|55"
    );
    // A pulls its old stream as another device's: nothing stored twice anywhere.
    ok_json(&a, &["sync", "now", "--json"]);
    assert_eq!(observations(&a), 55);
    assert_eq!(observations(&b), 55);
    assert_eq!(event_ids(&a), event_ids(&b));
}

/// Knowledge items and pins made before `nmem sync enable` reach the other device with the
/// history: an item (pinned), one written before items had uids (migration 019: it gets one),
/// and a pinned observation.
#[test]
fn knowledge_items_and_pins_made_before_enable_reach_the_other_device() {
    let Some(pg) = Postgres::start() else { return };
    let a = Home::new("sbia");
    let da = a.start();
    record(&a, "a", 0..5, "");
    let id = add_item(&a, "kproj", "Invoices page by keyset cursor", "measured");
    ok_json(&a, &["knowledge", "pin", &id.to_string(), "--json"]);
    add_item(&a, "kproj", "Ledger rows are never updated", "measured");
    let obs = a.count("SELECT id FROM observations WHERE event_id = 'a-2'");
    ctl_ok(&a, &["pin", &obs.to_string()]);
    // The second item as written before migration 019: no uid.
    da.stop();
    rusqlite::Connection::open(&a.paths.db)
        .unwrap()
        .execute(
            "UPDATE knowledge SET uid = NULL WHERE title LIKE 'Ledger%'",
            [],
        )
        .unwrap();
    let _da = a.start();

    let phrase = enable(&a, &pg);
    let b = Home::new("sbib");
    let _db = b.start();
    joined(&b, &pg, &phrase);
    wait_until("B to hold A's items and the pin", CONVERGE, || {
        b.count("SELECT COUNT(*) FROM knowledge WHERE project = 'kproj'") == 2 && pinned(&b, "a-2")
    });
    assert_eq!(observations(&b), 5);
    assert!(!pinned(&b, "a-1"));
    assert_eq!(
        b.count("SELECT is_pinned FROM knowledge WHERE title LIKE 'Invoices%'"),
        1
    );
    // The item without a uid got one, the same on both devices.
    let uid = |h: &Home| -> String {
        h.db()
            .query_row(
                "SELECT uid FROM knowledge WHERE title LIKE 'Ledger%'",
                [],
                |r| r.get(0),
            )
            .unwrap()
    };
    assert_eq!(uid(&a), uid(&b));
    // Each stored once on B.
    assert_eq!(
        b.count("SELECT COUNT(*) FROM knowledge_audit WHERE action = 'created'"),
        2
    );
}

#[test]
fn a_kill_mid_backfill_loses_and_duplicates_nothing() {
    let Some(pg) = Postgres::start() else { return };
    let a = Home::new("sbka");
    let da = a.start();
    record(&a, "a", 0..3000, "");
    let phrase = enable(&a, &pg);
    let b = Home::new("sbkb");
    let _db = b.start();
    joined(&b, &pg, &phrase);
    let dev_a = device(&a);
    wait_until("A's first backfilled uploads", CONVERGE, || {
        server_stream(&pg, &dev_a).0 > 0
    });
    da.kill();
    let logged = a.count("SELECT COUNT(*) FROM sync_log");
    let _da = a.start();
    wait_until("the server to hold A's whole history", CONVERGE, || {
        server_stream(&pg, &dev_a) == (3000, 3000)
    });
    wait_until("B to converge", CONVERGE, || observations(&b) >= 3000);
    assert_eq!(observations(&b), 3000, "no duplicates on B");
    assert_eq!(event_ids(&b), event_ids(&a));
    assert_eq!(
        pg.sql("SELECT COUNT(*) || '|' || COUNT(DISTINCT event_id) FROM events"),
        "3000|3000"
    );
    // A's stream is dense and holds each event once.
    assert_eq!(
        a.count("SELECT COUNT(*) * 10000 + MAX(seq) FROM sync_log"),
        3000 * 10000 + 3000
    );
    assert_eq!(
        status(&a)["backfill"],
        json!({"done": 3000, "total": 3000, "running": false})
    );
    eprintln!(
        "killed mid-backfill: {} ({logged} of 3000 logged)",
        logged < 3000
    );
}

#[test]
fn a_shared_projects_history_reaches_the_team_and_a_member_leaves_on_its_own() {
    let Some(pg) = Postgres::start() else { return };
    let a = Home::new("sbta");
    let c = Home::new("sbtc");
    let (_da, _dc) = (a.start(), c.start());
    enable(&a, &pg);
    enable(&c, &pg);
    let err = fails(&c, &["team", "leave", "acme"]);
    assert!(
        err.contains("not a member of team space acme") && err.contains("nothing changed"),
        "{err}"
    );
    ok_json(&a, &["team", "create", "acme", "--json"]);
    let pk_c = identity(&c);
    ok_json(&a, &["team", "add", "acme", &pk_c, "--json"]);
    ok_json(&c, &["team", "join", "acme", "--json"]);

    // Recorded before the project is shared.
    send(
        &a,
        &[
            ("h-commit".into(), commit("api", "retries")),
            ("h-fail".into(), failure("api", "invoices")),
            ("h-cmd".into(), command("api", "plain")),
            ("h-web".into(), commit("web", "elsewhere")),
        ],
    );
    // And knowledge items (a team carries them by default) and a pin, before the share too.
    add_item(&a, "api", "Retries back off exponentially", "measured");
    add_item(&a, "web", "The web app keeps its own cache", "measured");
    let commit_row = a.count("SELECT id FROM observations WHERE event_id = 'h-commit'");
    ctl_ok(&a, &["pin", &commit_row.to_string()]);
    ok_json(&a, &["share", "api", "--team", "acme", "--json"]);
    wait_until("C to hold the shared project's history", CONVERGE, || {
        has_event(&c, "h-commit")
            && has_event(&c, "h-fail")
            && pinned(&c, "h-commit")
            && c.count("SELECT COUNT(*) FROM knowledge WHERE title LIKE 'Retries%'") == 1
    });
    ok_json(&a, &["sync", "now", "--json"]);
    // The two events the team carries, the item and the pin; nothing of `web`.
    assert_eq!(server_count(&pg, "space = 'acme'"), 4);
    assert_eq!(
        c.count("SELECT COUNT(*) FROM knowledge WHERE project = 'web'"),
        0
    );
    assert!(!has_event(&c, "h-cmd") && !has_event(&c, "h-web"));

    // C cannot leave its personal space while in a team; it leaves the team first.
    let err = fails(&c, &["sync", "leave"]);
    assert!(err.contains("nmem team leave"), "{err}");
    let left = ok_json(&c, &["team", "leave", "acme", "--forget-data", "--json"]);
    assert_eq!(left["was_member_on_server"], true, "{left}");
    // The two events and the item.
    assert_eq!(left["forgotten"], 3, "{left}");
    assert!(!has_event(&c, "h-commit") && !has_event(&c, "h-fail"));
    assert_eq!(c.count("SELECT COUNT(*) FROM knowledge"), 0);
    assert_eq!(status(&c)["teams"], json!([]));
    for table in ["members", "member_keys"] {
        assert_eq!(
            pg.sql(&format!(
                "SELECT COUNT(*) FROM {table} WHERE member = '{pk_c}'"
            )),
            "0",
            "{table}"
        );
    }
    let err = fails(&c, &["team", "leave", "acme"]);
    assert!(err.contains("not a member"), "{err}");

    // A's new events do not reach C, and a rotation has nobody to remove.
    send(&a, &[("h-new".into(), commit("api", "later"))]);
    ok_json(&a, &["sync", "now", "--json"]);
    ok_json(&c, &["sync", "now", "--json"]);
    assert!(!has_event(&c, "h-new"));
    let err = fails(&a, &["team", "remove", "acme", &pk_c]);
    assert!(err.contains("is not a member"), "{err}");
    // Out of every team, C can leave its personal space.
    ok_json(&c, &["sync", "leave", "--json"]);
}
