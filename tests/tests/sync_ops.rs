//! Sync operations between real nmemd homes through a real PostgreSQL (docs/sync.md): a purge on
//! one device is forgotten on the others and its ciphertext nulled on the server by its owner
//! (issue 18's test 9), the uploader quarantines what a redaction rule added later would change,
//! and `nmem sync verify` names a row deleted on the server.
//!
//! Every test skips (with the reason printed) when PostgreSQL is not installed, unless
//! NMEM_REQUIRE_ALL=1.

use nmem_e2e::sync::{
    add_item, ctl_ok, device, enable, event_ids, joined, nmem, observations, ok_json, pinned,
    record, status, CONVERGE,
};
use nmem_e2e::{wait_until, Home, Postgres};

/// `nmemctl purge --search Q --yes` on `home`: rows deleted.
pub fn purge(home: &Home, search: &str) -> u64 {
    let out = ctl_ok(home, &["purge", "--search", search, "--yes", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    v["deleted_observations"].as_u64().unwrap() + v["deleted_prompts"].as_u64().unwrap()
}

/// The local sequence number `home` logged `event_id` under.
fn seq_of(home: &Home, event_id: &str) -> i64 {
    home.db()
        .query_row(
            "SELECT seq FROM sync_log WHERE event_id = ?1",
            [event_id],
            |r| r.get(0),
        )
        .unwrap()
}

/// Whether the server's row of (device, seq) still has its ciphertext.
fn has_ciphertext(pg: &Postgres, device: &str, seq: i64) -> bool {
    pg.sql(&format!(
        "SELECT ciphertext IS NOT NULL FROM events WHERE device = '{device}' AND seq = {seq}"
    )) == "t"
}

pub fn finds(home: &Home, q: &str) -> usize {
    ok_json(home, &["search", q, "--all-projects", "--json"])["items"]
        .as_array()
        .unwrap()
        .len()
}

#[test]
fn a_forget_on_one_device_is_forgotten_on_the_other_and_nulled_on_the_server() {
    let Some(pg) = Postgres::start() else { return };
    let a = Home::new("so9a");
    let _da = a.start();
    let phrase = enable(&a, &pg);
    record(&a, "a", 0..10, "plainwords");
    record(&a, "a", 10..11, "zebrafennel");
    record(&a, "a", 11..12, "ottermint");
    let b = Home::new("so9b");
    let _db = b.start();
    joined(&b, &pg, &phrase);
    wait_until("B to hold A's 12 events", CONVERGE, || {
        observations(&b) >= 12
    });
    assert_eq!(finds(&b, "zebrafennel"), 1);
    let dev_a = device(&a);
    let seq = seq_of(&a, "a-10");
    assert!(has_ciphertext(&pg, &dev_a, seq));

    // Forget on A: B stops finding it; A's ciphertext of it is nulled on the server.
    assert_eq!(purge(&a, "zebrafennel"), 1);
    ok_json(&a, &["sync", "now", "--json"]);
    assert!(!has_ciphertext(&pg, &dev_a, seq), "the server kept it");
    wait_until("B to forget a-10", CONVERGE, || {
        !event_ids(&b).contains("a-10")
    });
    assert_eq!(finds(&b, "zebrafennel"), 0);
    assert_eq!(observations(&b), 11);
    // Nothing of it is kept on either side: not A's log, not B's inbound envelopes.
    assert_eq!(
        a.count("SELECT COUNT(*) FROM sync_log WHERE event_id = 'a-10' AND length(envelope) > 0"),
        0
    );
    assert_eq!(
        b.count("SELECT COUNT(*) FROM sync_inbound WHERE event_id = 'a-10'"),
        0
    );
    assert_eq!(
        b.count("SELECT COUNT(*) FROM audit WHERE action = 'sync_forget'"),
        1
    );

    // Forget on B of an event A owns: A forgets it too and, as its owner, nulls it.
    let seq = seq_of(&a, "a-11");
    assert_eq!(purge(&b, "ottermint"), 1);
    ok_json(&b, &["sync", "now", "--json"]);
    wait_until("A to forget a-11 and null it", CONVERGE, || {
        !event_ids(&a).contains("a-11") && !has_ciphertext(&pg, &dev_a, seq)
    });
    assert_eq!(finds(&a, "ottermint"), 0);
    // The rest is intact on both.
    assert_eq!(event_ids(&a), event_ids(&b));
    assert_eq!(event_ids(&a).len(), 10);
}

#[test]
fn the_uploader_quarantines_what_a_newer_redaction_rule_would_change() {
    let Some(mut pg) = Postgres::start() else {
        return;
    };
    let a = Home::new("soqa");
    let da = a.start();
    let phrase = enable(&a, &pg);
    // Logged while the server is away, before the rule exists.
    pg.stop();
    record(&a, "a", 0..5, "ACME-SECRET-771234");
    record(&a, "a", 5..10, "harmless");
    da.stop();
    std::fs::write(
        a.dir.join("config.toml"),
        "[redact]\npatterns = [ { name = \"acme\", regex = \"ACME-SECRET-[0-9]+\" } ]\n",
    )
    .unwrap();
    let _da = a.start();
    pg.start_again();
    let st = ok_json(&a, &["sync", "now", "--json"]);
    assert_eq!(st["quarantined"], 5, "{st}");
    assert_eq!(st["pending"], 0, "{st}");
    let text = nmem(&a, &["sync", "status"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("quarantined: 5"), "{text}");
    assert!(text.contains("--release"), "{text}");
    // Placeholders without ciphertext hold their sequence numbers on the server.
    let dev_a = device(&a);
    assert_eq!(
        pg.sql(&format!(
            "SELECT COUNT(*) FROM events WHERE device = '{dev_a}' AND ciphertext IS NULL"
        )),
        "5"
    );
    // The list shows them, redacted by the current rules.
    let q = ok_json(&a, &["sync", "quarantine", "--json"]);
    assert_eq!(q["events"].as_array().unwrap().len(), 5, "{q}");
    assert!(!q.to_string().contains("ACME-SECRET-771234"), "{q}");

    let b = Home::new("soqb");
    let _db = b.start();
    joined(&b, &pg, &phrase);
    ok_json(&b, &["sync", "now", "--json"]);
    wait_until("B to hold A's 5 harmless events", CONVERGE, || {
        observations(&b) >= 5
    });
    assert_eq!(finds(&b, "harmless"), 5);
    assert_eq!(
        b.count("SELECT COUNT(*) FROM observations WHERE content LIKE '%ACME-SECRET%'"),
        0
    );

    // Release: uploaded as they are (the user said the rule was wrong for them).
    let r = ok_json(&a, &["sync", "quarantine", "--release", "--json"]);
    assert_eq!(r["released"], 5, "{r}");
    let st = ok_json(&a, &["sync", "now", "--json"]);
    assert_eq!(st["quarantined"], 0, "{st}");
    wait_until("B to hold all 10", CONVERGE, || observations(&b) >= 10);
    assert_eq!(event_ids(&a), event_ids(&b));
    // Both flags at once are refused, with what each does.
    let out = nmem(&a, &["sync", "quarantine", "--release", "--drop"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn verify_names_a_row_deleted_on_the_server() {
    let Some(pg) = Postgres::start() else { return };
    let a = Home::new("sova");
    let _da = a.start();
    let phrase = enable(&a, &pg);
    record(&a, "a", 0..10, "");
    let b = Home::new("sovb");
    let _db = b.start();
    joined(&b, &pg, &phrase);
    wait_until("B to hold A's 10 events", CONVERGE, || {
        observations(&b) >= 10
    });
    wait_until("A to have nothing pending", CONVERGE, || {
        status(&a)["pending"] == 0
    });
    let ok = ok_json(&a, &["sync", "verify", "--json"]);
    assert_eq!(ok["ok"], true, "{ok}");
    assert_eq!(ok_json(&b, &["sync", "verify", "--json"])["ok"], true);

    let dev_a = device(&a);
    pg.sql(&format!(
        "DELETE FROM events WHERE device = '{dev_a}' AND seq = 5"
    ));
    for home in [&a, &b] {
        let out = nmem(home, &["sync", "verify", "--json"]);
        assert_eq!(out.status.code(), Some(1));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["ok"], false, "{v}");
        let stream = v["streams"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["device"] == dev_a.as_str())
            .unwrap();
        assert_eq!(stream["missing_on_server"], serde_json::json!([5]), "{v}");
        assert_ne!(stream["server_hash"], stream["local_hash"]);
    }
    let text = nmem(&a, &["sync", "verify"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("missing on the server: seq 5"), "{text}");
}

/// A search's results on `home` as (kind, event id, origin), in order.
fn search_events(home: &Home, q: &str) -> Vec<(String, String, serde_json::Value)> {
    let v = ok_json(
        home,
        &["search", q, "--all-projects", "--limit", "50", "--json"],
    );
    let db = home.db();
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|it| {
            let kind = it["kind"].as_str().unwrap().to_string();
            let table = if kind == "prompt" {
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
            (kind, id, it["origin"].clone())
        })
        .collect()
}

#[test]
fn rebuild_regenerates_the_projections_from_the_log() {
    let Some(pg) = Postgres::start() else { return };
    let a = Home::new("so11a");
    let _da = a.start();
    let phrase = enable(&a, &pg);
    record(&a, "a", 0..30, "quokkaberry");
    let b = Home::new("so11b");
    let db = b.start();
    joined(&b, &pg, &phrase);
    wait_until("B to hold A's 30 events", CONVERGE, || {
        observations(&b) >= 30
    });
    // B's own events are in the log too.
    record(&b, "b", 0..10, "quokkaberry");
    let before = search_events(&b, "quokkaberry");
    assert_eq!(before.len(), 40, "{before:?}");

    // Damage B's projections with nmemd stopped: rows of both streams gone, the full-text index
    // emptied (what a lost or corrupted index looks like).
    db.stop();
    {
        // `Home::db` is read-only: the damage needs a writable connection.
        let c = rusqlite::Connection::open(&b.paths.db).unwrap();
        c.execute_batch(
            "DELETE FROM observations WHERE event_id IN ('a-3', 'a-17', 'a-29', 'b-4');
             INSERT INTO observations_fts(observations_fts) VALUES ('delete-all');",
        )
        .unwrap();
    }
    let _db = b.start();
    assert_ne!(
        search_events(&b, "quokkaberry"),
        before,
        "the damage showed nothing"
    );

    let r = ok_json(&b, &["rebuild", "--json"]);
    assert_eq!(r["restored"], 4, "{r}");
    assert_eq!(r["events"], 40, "{r}");
    // The same results in the same order, each from where it was: rows stored again keep their
    // row ids (ties rank by id) and their origin.
    let after = search_events(&b, "quokkaberry");
    assert_eq!(after, before);
    assert!(
        after.iter().any(|h| h.2["kind"] == "my-devices")
            && after.iter().any(|h| h.2["kind"] == "this-device"),
        "{after:?}"
    );
    // Nothing twice.
    assert_eq!(observations(&b), 40);
    // Again, without --json and not on a terminal: the counts only, nothing on stderr; the
    // progress route says no rebuild runs.
    let out = nmem(&b, &["rebuild"]);
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("rebuilt: 40 logged events read, 0 stored again"),
        "{text}"
    );
    assert_eq!(search_events(&b, "quokkaberry"), before);
    let p = nmem_proto::client::call(
        &b.paths.socket,
        "POST",
        "/v1/rebuild/progress",
        &[],
        b"{}",
        std::time::Duration::from_secs(10),
    )
    .unwrap();
    let p: serde_json::Value = serde_json::from_slice(&p.body).unwrap();
    assert_eq!(p["running"], false, "{p}");
}

/// Issue 18: "Pins, forgets and edits are new events". A pin and an unpin on A reach B in order;
/// a row `redact --apply` rewrites on A (a rule added after it was synced) is rewritten on B,
/// not deleted, its old envelope gone from B and its old ciphertext nulled by A.
#[test]
fn pins_and_redactions_reach_the_other_device_as_edits() {
    let Some(pg) = Postgres::start() else { return };
    let a = Home::new("soea");
    let da = a.start();
    let phrase = enable(&a, &pg);
    record(&a, "a", 0..3, "plainwords");
    record(&a, "a", 3..4, "ACME-SECRET-551234");
    let b = Home::new("soeb");
    let _db = b.start();
    joined(&b, &pg, &phrase);
    wait_until("B to hold A's 4 events", CONVERGE, || observations(&b) >= 4);

    let id = a.count("SELECT id FROM observations WHERE event_id = 'a-1'");
    ctl_ok(&a, &["pin", &id.to_string()]);
    ok_json(&a, &["sync", "now", "--json"]);
    wait_until("B to pin a-1", CONVERGE, || pinned(&b, "a-1"));
    ctl_ok(&a, &["unpin", &id.to_string()]);
    ok_json(&a, &["sync", "now", "--json"]);
    wait_until("B to unpin a-1", CONVERGE, || !pinned(&b, "a-1"));
    assert!(!pinned(&b, "a-0") && !pinned(&a, "a-1"));

    // A rule added later, applied to what A stored.
    let secret_seq = seq_of(&a, "a-3");
    da.stop();
    std::fs::write(
        a.dir.join("config.toml"),
        "[redact]\npatterns = [ { name = \"acme\", regex = \"ACME-SECRET-[0-9]+\" } ]\n",
    )
    .unwrap();
    let _da = a.start();
    ctl_ok(&a, &["redact", "--apply", "--json"]);
    ok_json(&a, &["sync", "now", "--json"]);
    let secret = "SELECT COUNT(*) FROM observations WHERE content LIKE '%ACME-SECRET%'";
    wait_until("B to hold a-3 rewritten", CONVERGE, || {
        b.count(secret) == 0 && event_ids(&b).contains("a-3")
    });
    assert_eq!(a.count(secret), 0);
    assert!(
        b.count("SELECT COUNT(*) FROM observations WHERE event_id = 'a-3' AND redacted = 1") == 1,
        "B's row of a-3 is not marked redacted"
    );
    assert_eq!(
        b.count(
            "SELECT COUNT(*) FROM sync_inbound
              WHERE event_id = 'a-3' AND CAST(envelope AS TEXT) LIKE '%ACME-SECRET%'"
        ),
        0,
        "B kept the old envelope"
    );
    let dev_a = device(&a);
    assert!(
        !has_ciphertext(&pg, &dev_a, secret_seq),
        "A's old ciphertext of a-3 is still on the server"
    );
    assert_eq!(event_ids(&a), event_ids(&b));
}

/// The local sequence numbers of `home`'s knowledge events whose envelope holds `text`.
fn knowledge_seqs(home: &Home, text: &str) -> Vec<i64> {
    let db = home.db();
    let mut st = db
        .prepare(
            "SELECT seq FROM sync_log WHERE event_id LIKE 'knowledge-%'
              AND CAST(envelope AS TEXT) LIKE '%' || ?1 || '%' ORDER BY seq",
        )
        .unwrap();
    st.query_map([text], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Issue 18: "Purge and `redact --apply` on a synced project emit tombstones", for knowledge
/// items too. A knowledge item whose text `redact --apply` rewrites on A (a rule added after it
/// was synced) is rewritten on B, the old text gone from B's database and A's old event's
/// ciphertext nulled on the server; a whole-project purge on A deletes its items on B, and A's
/// events of them are nulled on the server.
#[test]
fn a_knowledge_items_redaction_and_purge_reach_the_other_device() {
    let Some(pg) = Postgres::start() else { return };
    let a = Home::new("soka");
    let da = a.start();
    let phrase = enable(&a, &pg);
    let b = Home::new("sokb");
    let _db = b.start();
    joined(&b, &pg, &phrase);
    add_item(
        &a,
        "kproj",
        "Rotate the ACME-SECRET-771234 token monthly",
        "the vendor revokes ACME-SECRET-771234 after 40 days",
    );
    add_item(&a, "kproj", "Keep the wombat cache warm", "cold starts");
    add_item(
        &a,
        "gone-proj",
        "Platypus billing runs nightly",
        "batch window",
    );
    ok_json(&a, &["sync", "now", "--json"]);
    let items = |home: &Home, project: &str| {
        home.count(&format!(
            "SELECT COUNT(*) FROM knowledge WHERE project = '{project}'"
        ))
    };
    wait_until("B to hold A's 3 items", CONVERGE, || {
        items(&b, "kproj") == 2 && items(&b, "gone-proj") == 1
    });
    let secret_seqs = knowledge_seqs(&a, "ACME-SECRET");
    let purged_seqs = knowledge_seqs(&a, "Platypus");
    assert_eq!((secret_seqs.len(), purged_seqs.len()), (1, 1));
    let secret = "SELECT COUNT(*) FROM knowledge WHERE title LIKE '%ACME-SECRET%'
                     OR reason LIKE '%ACME-SECRET%'";
    assert_eq!(b.count(secret), 1);

    // A rule added later, applied to what A stored; then the whole of gone-proj purged.
    da.stop();
    std::fs::write(
        a.dir.join("config.toml"),
        "[redact]\npatterns = [ { name = \"acme\", regex = \"ACME-SECRET-[0-9]+\" } ]\n",
    )
    .unwrap();
    let _da = a.start();
    ctl_ok(&a, &["redact", "--apply", "--json"]);
    assert_eq!(a.count(secret), 0);
    ctl_ok(&a, &["purge", "--project", "gone-proj", "--yes", "--json"]);
    assert_eq!(items(&a, "gone-proj"), 0);
    ok_json(&a, &["sync", "now", "--json"]);
    wait_until(
        "B to hold the item rewritten and the purged one gone",
        CONVERGE,
        || b.count(secret) == 0 && items(&b, "gone-proj") == 0,
    );
    // Rewritten, not deleted; the other item untouched.
    assert_eq!(items(&b, "kproj"), 2);
    assert_eq!(
        b.count("SELECT COUNT(*) FROM knowledge WHERE title LIKE 'Rotate the % token monthly'"),
        1
    );
    // Nothing of the old text or the purged item left in B's logs.
    for text in ["ACME-SECRET", "Platypus"] {
        assert_eq!(
            b.count(&format!(
                "SELECT COUNT(*) FROM sync_inbound WHERE CAST(envelope AS TEXT) LIKE '%{text}%'"
            )),
            0,
            "B kept an envelope holding {text}"
        );
    }
    // A's events that carried them: emptied here, their ciphertext nulled on the server.
    let dev_a = device(&a);
    wait_until("A to null its old events on the server", CONVERGE, || {
        ok_json(&a, &["sync", "now", "--json"]);
        secret_seqs
            .iter()
            .chain(&purged_seqs)
            .all(|s| !has_ciphertext(&pg, &dev_a, *s))
    });
    assert!(knowledge_seqs(&a, "ACME-SECRET").is_empty());
    assert!(knowledge_seqs(&a, "Platypus").is_empty());
}
