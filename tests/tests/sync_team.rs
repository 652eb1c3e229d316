//! Routing and team spaces through a real PostgreSQL started by the test (docs/sync.md, "Team
//! spaces"): an excluded project never reaches the server or another device, a team space
//! carries only the shared project's allowed types (prompts only once enabled), and removing a
//! member rotates the key: members read old and new events, the removed home cannot open what
//! came after and says so, keeping what it had.
//!
//! Every test skips (with the reason printed) when PostgreSQL is not installed, unless
//! NMEM_REQUIRE_ALL=1.

use nmem_e2e::sync::{device, enable, identity, nmem, ok_json, Space, CONVERGE};
use nmem_e2e::{wait_until, Home, Postgres};
use serde_json::{json, Value};
use std::time::Duration;

/// Store hook payloads on `home` through the batch route, each under its event id.
pub(crate) fn send(home: &Home, events: &[(String, Value)]) {
    let body: Vec<String> = events
        .iter()
        .enumerate()
        .map(|(i, (id, payload))| {
            json!({
                "event_id": id,
                "received_at": 1_790_000_000_000i64 + i as i64,
                "harness": "claude-code",
                "payload": payload,
            })
            .to_string()
        })
        .collect();
    let r = nmem_proto::client::call(
        &home.paths.socket,
        "POST",
        "/v1/events/batch",
        &[],
        body.join("\n").as_bytes(),
        Duration::from_secs(60),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let reply: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(reply["stored"], events.len(), "{reply}");
}

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
    assert_eq!(server_count(pg, "space = 'acme'"), 3);
    wait_until("C holds the enabled prompt", CONVERGE, || {
        has_event(&c, "o-prompt2")
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
