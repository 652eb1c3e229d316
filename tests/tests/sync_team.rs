//! Routing and team spaces through a real PostgreSQL started by the test (docs/sync.md, "Team
//! spaces"): an excluded project never reaches the server or another device, a team space
//! carries only the shared project's allowed types (prompts only once enabled), and removing a
//! member rotates the key: members read old and new events, the removed home cannot open what
//! came after and says so, keeping what it had.
//!
//! Every test skips (with the reason printed) when PostgreSQL is not installed, unless
//! NMEM_REQUIRE_ALL=1.

use nmem_e2e::sync::{device, enable, identity, joined, nmem, ok_json, send, Space, CONVERGE};
use nmem_e2e::{wait_until, Home, Postgres};
use serde_json::{json, Value};

fn cwd(project: &str) -> String {
    format!("/home/dev/projects/{project}")
}

pub(crate) fn command(project: &str, tag: &str) -> Value {
    json!({
        "session_id": format!("sess-{project}"),
        "cwd": cwd(project),
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": { "command": format!("ls {tag}"), "description": "list" },
        "tool_response": { "stdout": format!("{tag}\n"), "stderr": "", "interrupted": false },
        "tool_use_id": format!("toolu_{tag}"),
    })
}

pub(crate) fn commit(project: &str, tag: &str) -> Value {
    json!({
        "session_id": format!("sess-{project}"),
        "cwd": cwd(project),
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": { "command": format!("git commit -m 'Fix {tag}'"), "description": "commit" },
        "tool_response": {
            "stdout": format!("[main 1a2b3c4] Fix {tag}\n 1 file changed, 2 insertions(+)\n"),
            "stderr": "", "interrupted": false
        },
        "tool_use_id": format!("toolu_{tag}"),
    })
}

pub(crate) fn failure(project: &str, tag: &str) -> Value {
    json!({
        "session_id": format!("sess-{project}"),
        "cwd": cwd(project),
        "hook_event_name": "PostToolUseFailure",
        "tool_name": "Bash",
        "tool_input": { "command": format!("cargo test {tag}"), "description": "test" },
        "tool_use_id": format!("toolu_{tag}"),
        "error": format!("Exit code 101\nerror[E0308]: mismatched types in {tag}\n"),
    })
}

pub(crate) fn prompt(project: &str, tag: &str) -> Value {
    json!({
        "session_id": format!("sess-{project}"),
        "cwd": cwd(project),
        "hook_event_name": "UserPromptSubmit",
        "prompt": format!("why does {tag} fail on main?"),
    })
}

pub(crate) fn has_event(home: &Home, id: &str) -> bool {
    home.count(&format!(
        "SELECT (SELECT COUNT(*) FROM observations WHERE event_id = '{id}')
              + (SELECT COUNT(*) FROM prompts WHERE event_id = '{id}')"
    )) > 0
}

pub(crate) fn server_count(pg: &Postgres, filter: &str) -> i64 {
    pg.sql(&format!("SELECT COUNT(*) FROM events WHERE {filter}"))
        .trim()
        .parse()
        .unwrap()
}

/// Issue 18, test 8.
#[test]
fn excluded_projects_stay_home_and_a_team_gets_only_what_is_shared() {
    let Some(sp) = Space::start(&["st8a", "st8b"]) else {
        return;
    };
    let (a, b, pg) = (&sp.homes[0], &sp.homes[1], &sp.pg);
    let c = Home::new("st8c");
    let _dc = c.start();
    enable(&c, pg); // a teammate: a personal space of its own
    let personal = ok_json(a, &["sync", "status", "--json"])["space"]
        .as_str()
        .unwrap()
        .to_string();

    // Routing set-up, with the clear errors of bad input on the way.
    ok_json(a, &["sync", "exclude", "secret-proj", "--json"]);
    let out = nmem(a, &["sync", "include", "other-proj"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not excluded"));
    let out = nmem(a, &["share", "open-proj", "--team", "acme"]);
    assert!(!out.status.success(), "sharing with no such team");
    assert!(String::from_utf8_lossy(&out.stderr).contains("nmem team create acme"));
    ok_json(a, &["team", "create", "acme", "--json"]);
    let out = nmem(
        a,
        &["share", "open-proj", "--team", "acme", "--with", "chatter"],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not something a share can carry"));
    let routing = ok_json(a, &["share", "open-proj", "--team", "acme", "--json"]);
    assert_eq!(routing["excluded"], json!(["secret-proj"]), "{routing}");
    // C is not a member yet: joining says what to do and changes nothing.
    let out = nmem(&c, &["team", "join", "acme"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nmem team add acme age1"));
    assert_eq!(
        ok_json(&c, &["sync", "status", "--json"])["teams"],
        json!([])
    );
    let pk_c = identity(&c);
    ok_json(a, &["team", "add", "acme", &pk_c, "--json"]);
    let joined = ok_json(&c, &["team", "join", "acme", "--json"]);
    assert_eq!(joined["role"], "member", "{joined}");

    send(
        a,
        &[
            ("s-1".into(), command("secret-proj", "SECRETMARK1")),
            ("s-2".into(), commit("secret-proj", "SECRETMARK2")),
            ("s-3".into(), failure("secret-proj", "SECRETMARK3")),
            ("o-cmd".into(), command("open-proj", "plain")),
            ("o-commit".into(), commit("open-proj", "pagination")),
            ("o-fail".into(), failure("open-proj", "invoices")),
            ("o-prompt".into(), prompt("open-proj", "pagination")),
        ],
    );
    ok_json(a, &["sync", "now", "--json"]);

    // The personal space: exactly the open project's events, and B never gets the others.
    let dev_a = device(a);
    let logged = a.count("SELECT COUNT(*) FROM sync_log");
    assert_eq!(logged, 4, "the open project's four events are logged");
    assert_eq!(
        server_count(pg, &format!("space = '{personal}' AND device = '{dev_a}'")),
        logged
    );
    wait_until("B holds the open project", CONVERGE, || {
        ["o-cmd", "o-commit", "o-fail", "o-prompt"]
            .iter()
            .all(|id| has_event(b, id))
    });
    assert_eq!(
        b.count("SELECT COUNT(*) FROM observations WHERE project = 'secret-proj'"),
        0
    );
    for id in ["s-1", "s-2", "s-3"] {
        assert!(!has_event(b, id), "{id} reached B");
    }
    let dump = String::from_utf8_lossy(&pg.dump()).to_string();
    assert!(!dump.contains("SECRETMARK"), "plaintext on the server");

    // The team space: the commit and the failure only; no prompt, no plain command.
    assert_eq!(server_count(pg, "space = 'acme'"), 2);
    wait_until("C holds the shared commit and failure", CONVERGE, || {
        has_event(&c, "o-commit") && has_event(&c, "o-fail")
    });
    ok_json(&c, &["sync", "now", "--json"]);
    for id in ["o-cmd", "o-prompt", "s-1", "s-2", "s-3"] {
        assert!(!has_event(&c, id), "{id} reached the team");
    }
    assert_eq!(c.count("SELECT COUNT(*) FROM prompts"), 0);

    // Prompts once enabled.
    ok_json(
        a,
        &[
            "share",
            "open-proj",
            "--team",
            "acme",
            "--with",
            "prompts",
            "--json",
        ],
    );
    send(
        a,
        &[
            ("o-prompt2".into(), prompt("open-proj", "cursor")),
            ("o-cmd2".into(), command("open-proj", "plain2")),
        ],
    );
    ok_json(a, &["sync", "now", "--json"]);
    // The new prompt, and the project's earlier one (the share's backfill, planned again by the
    // changed `--with`).
    assert_eq!(server_count(pg, "space = 'acme'"), 4);
    wait_until("C holds the enabled prompts", CONVERGE, || {
        has_event(&c, "o-prompt2") && has_event(&c, "o-prompt")
    });
    assert!(!has_event(&c, "o-cmd2"));

    // Including the project again: its next event goes to the personal space.
    ok_json(a, &["sync", "include", "secret-proj", "--json"]);
    send(a, &[("s-4".into(), commit("secret-proj", "later"))]);
    wait_until("B holds the included project's new event", CONVERGE, || {
        has_event(b, "s-4")
    });
    assert!(!has_event(b, "s-1"), "nothing from before is sent");
}

/// Issue 18, test 10.
#[test]
fn removing_a_member_rotates_the_key_for_new_events() {
    let Some(pg) = Postgres::start() else { return };
    let a = Home::new("st10a");
    let b = Home::new("st10b");
    let c = Home::new("st10c");
    let (_da, _db, _dc) = (a.start(), b.start(), c.start());
    for h in [&a, &b, &c] {
        enable(h, &pg);
    }
    let (pk_b, pk_c) = (identity(&b), identity(&c));
    let made = ok_json(&a, &["team", "create", "acme", "--json"]);
    let k1 = made["key_id"].as_str().unwrap().to_string();
    ok_json(&a, &["team", "add", "acme", &pk_b, "--json"]);
    let added = ok_json(&a, &["team", "add", "acme", &pk_c, "--json"]);
    assert_eq!(added["members"].as_array().unwrap().len(), 3, "{added}");

    // A malformed key: a clear error, nothing changed.
    let members = || {
        pg.sql("SELECT COUNT(*) || '/' || (SELECT COUNT(*) FROM member_keys) FROM members")
            .trim()
            .to_string()
    };
    let before = members();
    for bad in ["age1notakey", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5"] {
        let out = nmem(&a, &["team", "add", "acme", bad]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("nmem sync identity") && err.contains("nothing changed"),
            "{err}"
        );
    }
    assert_eq!(members(), before);

    ok_json(&b, &["team", "join", "acme", "--json"]);
    ok_json(&c, &["team", "join", "acme", "--json"]);
    ok_json(&a, &["share", "api", "--team", "acme", "--json"]);
    send(&a, &[("e1".into(), commit("api", "before-rotation"))]);
    ok_json(&a, &["sync", "now", "--json"]);
    wait_until("B and C hold the first event", CONVERGE, || {
        has_event(&b, "e1") && has_event(&c, "e1")
    });

    // Remove C: a new key for A and B only.
    let out = nmem(&a, &["team", "remove", "acme", "age1notamember"]);
    assert!(!out.status.success());
    let rotated = ok_json(&a, &["team", "remove", "acme", &pk_c, "--json"]);
    let k2 = rotated["key_id"].as_str().unwrap().to_string();
    assert_ne!(k1, k2);
    assert_eq!(rotated["members"].as_array().unwrap().len(), 2, "{rotated}");
    send(&a, &[("e2".into(), commit("api", "after-rotation"))]);
    ok_json(&a, &["sync", "now", "--json"]);
    assert_eq!(
        pg.sql("SELECT string_agg(key_id, ',' ORDER BY seq) FROM events WHERE space = 'acme'")
            .trim(),
        format!("{k1},{k2}")
    );

    // B, still a member, reads the new event, and writes under the new key for A.
    wait_until(
        "B holds the event sealed after the rotation",
        CONVERGE,
        || has_event(&b, "e2"),
    );
    ok_json(&b, &["share", "api", "--team", "acme", "--json"]);
    send(&b, &[("e3".into(), failure("api", "from-b"))]);
    wait_until("A holds B's event", CONVERGE, || has_event(&a, "e3"));
    let dev_b = device(&b);
    assert_eq!(
        pg.sql(&format!(
            "SELECT string_agg(key_id, ',') FROM events WHERE space = 'acme' AND device = '{dev_b}'"
        ))
        .trim(),
        k2
    );

    // C cannot open what came after, says so, and keeps what it had.
    let out = nmem(&c, &["sync", "now", "--json"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("team space acme") && err.contains("removed from"),
        "{err}"
    );
    assert!(has_event(&c, "e1"));
    assert!(!has_event(&c, "e2") && !has_event(&c, "e3"));
    let st = ok_json(&c, &["sync", "status", "--json"]);
    assert!(st["teams"][0]["locked"].is_string(), "{st}");
    // Its shares stop routing and it cannot change the team any more.
    let out = nmem(&c, &["team", "add", "acme", &pk_b]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("removed"));
}

/// The sequence number of `event_id` in `home`'s stream of team space `space`.
fn team_seq(home: &Home, space: &str, event_id: &str) -> i64 {
    home.db()
        .query_row(
            "SELECT seq FROM sync_space_log WHERE space = ?1 AND event_id = ?2",
            [space, event_id],
            |r| r.get(0),
        )
        .unwrap()
}

/// Whether the server's row of (space, device, seq) still has its ciphertext.
fn has_ciphertext(pg: &Postgres, space: &str, device: &str, seq: i64) -> bool {
    pg.sql(&format!(
        "SELECT ciphertext IS NOT NULL FROM events
         WHERE space = '{space}' AND device = '{device}' AND seq = {seq}"
    )) == "t"
}

/// Issue 18, test 9 for a team space: a forget of a shared event reaches the team. A purges it:
/// B (a teammate) stops finding it and will not store it again, and A's ciphertext of it in the
/// team space is nulled. A forget on A2 (A's other device, not in the team) reaches the team
/// through A, which shared the event and passes the tombstone on.
#[test]
fn a_forget_of_a_shared_event_reaches_the_team() {
    use crate::sync_ops::{finds, purge};
    let Some(pg) = Postgres::start() else { return };
    let a = Home::new("stfa");
    let a2 = Home::new("stfa2");
    let b = Home::new("stfb");
    let (_da, _da2, _db) = (a.start(), a2.start(), b.start());
    let phrase = enable(&a, &pg);
    joined(&a2, &pg, &phrase);
    enable(&b, &pg);
    ok_json(&a, &["team", "create", "acme", "--json"]);
    ok_json(&a, &["team", "add", "acme", &identity(&b), "--json"]);
    ok_json(&b, &["team", "join", "acme", "--json"]);
    ok_json(&a, &["share", "api", "--team", "acme", "--json"]);
    send(
        &a,
        &[
            ("t-keep".into(), commit("api", "keepsake")),
            ("t-gone".into(), commit("api", "zebrafennel")),
            ("t-relay".into(), failure("api", "ottermint")),
        ],
    );
    ok_json(&a, &["sync", "now", "--json"]);
    wait_until("B holds the three shared events", CONVERGE, || {
        ["t-keep", "t-gone", "t-relay"]
            .iter()
            .all(|id| has_event(&b, id))
    });
    wait_until("A2 holds A's events", CONVERGE, || {
        has_event(&a2, "t-relay")
    });
    assert_eq!(finds(&b, "zebrafennel"), 1);
    let dev_a = device(&a);
    let gone = team_seq(&a, "acme", "t-gone");
    assert!(has_ciphertext(&pg, "acme", &dev_a, gone));

    // A forgets: the team's copy goes too.
    assert_eq!(purge(&a, "zebrafennel"), 1);
    ok_json(&a, &["sync", "now", "--json"]);
    assert!(
        !has_ciphertext(&pg, "acme", &dev_a, gone),
        "the team space kept its ciphertext"
    );
    wait_until("B to forget t-gone", CONVERGE, || !has_event(&b, "t-gone"));
    assert_eq!(finds(&b, "zebrafennel"), 0);
    assert_eq!(
        b.count("SELECT COUNT(*) FROM sync_tombstones WHERE event_id = 't-gone'"),
        1,
        "B must never store it again"
    );
    assert_eq!(
        b.count("SELECT COUNT(*) FROM sync_inbound WHERE event_id = 't-gone'"),
        0
    );
    assert_eq!(
        a.count(
            "SELECT COUNT(*) FROM sync_space_log WHERE event_id = 't-gone' AND length(envelope) > 0"
        ),
        0,
        "A's team stream kept its plaintext"
    );

    // A2 forgets an event A shared: A passes it on to the team, and nulls it there.
    let relay = team_seq(&a, "acme", "t-relay");
    assert_eq!(purge(&a2, "ottermint"), 1);
    ok_json(&a2, &["sync", "now", "--json"]);
    wait_until(
        "A and B to forget t-relay, and A to null it in the team space",
        CONVERGE,
        || {
            !has_event(&a, "t-relay")
                && !has_event(&b, "t-relay")
                && !has_ciphertext(&pg, "acme", &dev_a, relay)
        },
    );
    // The rest is intact.
    assert!(has_event(&b, "t-keep") && has_event(&a, "t-keep"));
    assert_eq!(finds(&b, "keepsake"), 1);
}

/// The knowledge items of `home`'s search for `q` in project `api`: (status, pinned) of each.
fn knowledge_found(home: &Home, q: &str) -> Vec<(String, bool)> {
    ok_json(home, &["search", q, "--project", "api", "--json"])["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == "knowledge")
        .map(|i| {
            let k = &i["knowledge"];
            (
                k["status"].as_str().unwrap_or_default().to_string(),
                k["is_pinned"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

/// Knowledge items of a shared project travel to the team by default, and so do their changes:
/// A records a decision as a candidate; B (a teammate) finds it; A's promote and pin reach B, in
/// order, applied once. An item of a project that is not shared stays with A's own devices.
#[test]
fn knowledge_items_and_their_changes_reach_the_team() {
    let Some(pg) = Postgres::start() else { return };
    let a = Home::new("stka");
    let b = Home::new("stkb");
    let (_da, _db) = (a.start(), b.start());
    enable(&a, &pg);
    enable(&b, &pg);
    ok_json(&a, &["team", "create", "acme", "--json"]);
    ok_json(&a, &["team", "add", "acme", &identity(&b), "--json"]);
    ok_json(&b, &["team", "join", "acme", "--json"]);
    ok_json(&a, &["share", "api", "--team", "acme", "--json"]);
    let add = |project: &str, title: &str| {
        ok_json(
            &a,
            &[
                "knowledge",
                "add",
                "--kind",
                "decision",
                "--title",
                title,
                "--reason",
                "offset pagination skipped rows under concurrent inserts",
                "--status",
                "candidate",
                "--project",
                project,
                "--json",
            ],
        )["item"]["id"]
            .as_i64()
            .unwrap()
    };
    let id = add("api", "Invoices page by keyset cursor");
    add("private-proj", "Ledger pages by keyset cursor");
    ok_json(&a, &["sync", "now", "--json"]);
    wait_until("B finds the shared decision", CONVERGE, || {
        knowledge_found(&b, "keyset cursor") == [("candidate".to_string(), false)]
    });
    assert_eq!(
        b.count("SELECT COUNT(*) FROM knowledge WHERE project = 'private-proj'"),
        0,
        "an unshared project's item reached the team"
    );

    // Its governance follows: promoted, then pinned, on A.
    let sid = id.to_string();
    ok_json(
        &a,
        &[
            "knowledge",
            "promote",
            &sid,
            "--reason",
            "reviewed",
            "--json",
        ],
    );
    ok_json(&a, &["knowledge", "pin", &sid, "--json"]);
    ok_json(&a, &["sync", "now", "--json"]);
    wait_until("B sees it promoted and pinned", CONVERGE, || {
        knowledge_found(&b, "keyset cursor") == [("active".to_string(), true)]
    });
    // Applied once, with the trail: created, promoted, pinned.
    let trail: Vec<String> = b
        .db()
        .prepare(
            "SELECT a.action FROM knowledge_audit a JOIN knowledge k ON k.id = a.knowledge_id
              WHERE k.project = 'api' ORDER BY a.id",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(trail, ["created", "promoted", "pinned"]);
    // Nothing of it in plaintext on the server.
    let dump = String::from_utf8_lossy(&pg.dump()).to_string();
    assert!(!dump.contains("keyset"), "plaintext on the server");
}

/// A teammate's forget takes the thoughts (reasoning read from the transcript) that came with
/// its events: the tombstone names them by their own ids, which have no origin on the receiver.
#[test]
fn a_teammates_forget_takes_the_thoughts_that_came_with_its_events() {
    let Some(pg) = Postgres::start() else { return };
    let a = Home::new("stta");
    let c = Home::new("sttc");
    let (_da, _dc) = (a.start(), c.start());
    enable(&a, &pg);
    enable(&c, &pg);
    ok_json(&a, &["team", "create", "acme", "--json"]);
    ok_json(&a, &["team", "add", "acme", &identity(&c), "--json"]);
    ok_json(&c, &["team", "join", "acme", "--json"]);
    let shared = [
        "share",
        "acme-api",
        "--team",
        "acme",
        "--with",
        "prompts,all",
    ];
    ok_json(&a, &[&shared[..], &["--json"]].concat());
    // A session replayed through the hooks, its reasoning read from the transcript.
    let transcript = nmem_e2e::fixtures().join("transcripts/claude-code/sample-session.jsonl");
    let path = a.dir.join("sample-session.jsonl");
    std::fs::copy(transcript, &path).unwrap();
    for e in nmem_e2e::hook_events_from_transcript(&path) {
        let out = a.record("claude-code", &e);
        assert!(out.status.success(), "{out:?}");
    }
    let thoughts = "SELECT COUNT(*) FROM prompts WHERE source = 'agent'";
    assert_eq!(a.count(thoughts), 4);
    ok_json(&a, &["sync", "now", "--json"]);
    wait_until("C to hold A's session with its reasoning", CONVERGE, || {
        c.count(thoughts) == 4
    });

    let out = a
        .cmd("nmemctl")
        .args(["purge", "--project", "acme-api", "--yes", "--json"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    ok_json(&a, &["sync", "now", "--json"]);
    let left = "SELECT (SELECT COUNT(*) FROM observations WHERE project = 'acme-api')
                     + (SELECT COUNT(*) FROM prompts WHERE project = 'acme-api')";
    wait_until(
        "C to forget A's session, reasoning included",
        CONVERGE,
        || {
            ok_json(&c, &["sync", "now", "--json"]);
            c.count(left) == 0
        },
    );
    assert_eq!(c.count(thoughts), 0);
}
