//! The web viewer and CodexMem's worker API (`/api/*`), against the real nmemd: `nmem ui`,
//! the token and cookie, the Host and Origin checks, every route's status and shape (with the
//! seed's error messages), and the live stream after a real `nmem record`.

use nmem_e2e::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {} {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One HTTP/1.1 exchange on a new TCP connection (closed after), `host` as the Host header.
fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    http_host(addr, addr, method, path, headers, body)
}

fn http_host(
    addr: &str,
    host: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    parse(&raw)
}

fn parse(raw: &[u8]) -> Reply {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a reply head");
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    if chunked {
        let mut out = Vec::new();
        let mut rest = &body[..];
        loop {
            let nl = rest.windows(2).position(|w| w == b"\r\n").unwrap();
            let n = usize::from_str_radix(String::from_utf8_lossy(&rest[..nl]).trim(), 16).unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&rest[nl + 2..nl + 2 + n]);
            rest = &rest[nl + 2 + n + 2..];
        }
        body = out;
    }
    Reply {
        status,
        headers,
        body,
    }
}

/// A daemon whose viewer listens on a free port (so tests run side by side).
struct Viewer {
    home: Home,
    _d: Daemon,
    addr: String,
    token: String,
    url: String,
}

fn config(home: &Home, http: &str) {
    std::fs::write(&home.paths.config, format!("[http]\n{http}\n")).unwrap();
}

fn ui(home: &Home, args: &[&str]) -> std::process::Output {
    home.cmd("nmem").arg("ui").args(args).output().unwrap()
}

fn viewer(tag: &str) -> Viewer {
    let home = Home::new(tag);
    config(&home, "port = 0");
    let d = home.start();
    let out = ui(&home, &[]);
    assert!(out.status.success(), "{out:?}");
    let url = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (addr, q) = rest.split_once("/?token=").expect("a token in the URL");
    Viewer {
        addr: addr.to_string(),
        token: q.to_string(),
        url: url.clone(),
        home,
        _d: d,
    }
}

impl Viewer {
    fn bearer(&self) -> String {
        format!("Bearer {}", self.token)
    }
    fn get(&self, path: &str) -> Reply {
        http(
            &self.addr,
            "GET",
            path,
            &[("Authorization", &self.bearer())],
            b"",
        )
    }
    fn post(&self, path: &str, body: &Value) -> Reply {
        http(
            &self.addr,
            "POST",
            path,
            &[
                ("Authorization", &self.bearer()),
                ("Content-Type", "application/json"),
            ],
            body.to_string().as_bytes(),
        )
    }
    fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }
}

#[test]
fn nmem_ui_prints_a_url_status_shows_it_and_stop_and_rotate_work() {
    let v = viewer("ui");
    assert!(v.url.starts_with("http://127.0.0.1:"), "{}", v.url);
    assert!(v.token.len() >= 32, "{}", v.token);
    assert!(v
        .token
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
    // The token file is the owner's alone.
    use std::os::unix::fs::PermissionsExt;
    let file = v.home.paths.state.join("ui.token");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), v.token);
    // Asking again: the same listener, the same URL.
    let again = ui(&v.home, &[]);
    assert_eq!(String::from_utf8_lossy(&again.stdout).trim(), v.url);

    let status = v.home.cmd("nmemctl").arg("status").output().unwrap();
    let s = String::from_utf8_lossy(&status.stdout);
    assert!(
        s.contains(&format!("viewer     listening on http://{}/", v.addr)),
        "{s}"
    );
    assert!(!s.contains(&v.token), "status never shows the token");

    // Rotate: the old token stops working, the new one works.
    let rotated = ui(&v.home, &["--rotate"]);
    assert!(rotated.status.success(), "{rotated:?}");
    let new_url = String::from_utf8(rotated.stdout)
        .unwrap()
        .trim()
        .to_string();
    let new_token = new_url.split_once("?token=").unwrap().1.to_string();
    assert_ne!(new_token, v.token);
    assert_eq!(v.get("/api/stats").status, 401, "the old token is refused");
    let r = http(
        &v.addr,
        "GET",
        "/api/stats",
        &[("Authorization", &format!("Bearer {new_token}"))],
        b"",
    );
    assert_eq!(r.status, 200);

    // Stop: nothing listens, status says so.
    let stop = ui(&v.home, &["--stop"]);
    assert!(stop.status.success(), "{stop:?}");
    assert!(TcpStream::connect(&v.addr).is_err(), "still listening");
    let status = v.home.cmd("nmemctl").arg("status").output().unwrap();
    assert!(String::from_utf8_lossy(&status.stdout).contains("viewer     off"));
}

#[test]
fn a_taken_port_falls_back_to_a_free_one_and_a_remote_bind_is_refused() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let home = Home::new("uiport");
    config(&home, &format!("port = {port}"));
    let _d = home.start();
    let out = ui(&home, &[]);
    assert!(out.status.success(), "{out:?}");
    let url = String::from_utf8_lossy(&out.stdout);
    assert!(!url.contains(&format!(":{port}/")), "{url}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!("port {port} is in use")),
        "{out:?}"
    );
    drop(_d);

    let home = Home::new("uiremote");
    config(&home, "bind = \"0.0.0.0\"\nport = 0");
    let _d = home.start();
    let out = ui(&home, &[]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("allow_remote = true"), "{err}");
}

#[test]
fn the_token_cookie_host_and_origin_rules_hold() {
    let v = viewer("auth");
    // Open routes.
    for p in ["/api/health", "/api/readiness"] {
        assert_eq!(http(&v.addr, "GET", p, &[], b"").status, 200, "{p}");
    }
    // Everything else needs the token.
    let r = http(&v.addr, "GET", "/api/stats", &[], b"");
    assert_eq!(r.status, 401);
    assert!(r.text().contains("nmem ui"), "{}", r.text());
    let r = http(
        &v.addr,
        "GET",
        "/api/stats",
        &[("Authorization", "Bearer nope")],
        b"",
    );
    assert_eq!(r.status, 401);
    assert_eq!(v.get("/api/stats").status, 200);
    // The page without the token says how to open it; with it, a cookie and a redirect.
    assert_eq!(http(&v.addr, "GET", "/", &[], b"").status, 401);
    let bad = http(
        &v.addr,
        "GET",
        "/?token=0123456789abcdef0123456789abcdef",
        &[],
        b"",
    );
    assert_eq!(bad.status, 401);
    let r = http(&v.addr, "GET", &format!("/?token={}", v.token), &[], b"");
    assert_eq!(r.status, 303);
    assert_eq!(r.header("location"), Some("/"));
    let set = r.header("set-cookie").expect("a cookie").to_string();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    let cookie = set.split(';').next().unwrap().to_string();
    let page = http(&v.addr, "GET", "/", &[("Cookie", &cookie)], b"");
    assert_eq!(page.status, 200);
    assert!(page.text().contains("/assets/app.js"));
    assert!(page
        .header("content-security-policy")
        .unwrap()
        .contains("script-src 'self'"));
    assert_eq!(
        http(&v.addr, "GET", "/api/stats", &[("Cookie", &cookie)], b"").status,
        200
    );

    // Host: only the loopback names with this port (DNS rebinding).
    let port = v.addr.rsplit_once(':').unwrap().1;
    for host in [
        "evil.example",
        &format!("evil.example:{port}"),
        "127.0.0.1:1",
    ] {
        let r = http_host(&v.addr, host, "GET", "/api/health", &[], b"");
        assert_eq!(r.status, 403, "{host}");
        assert!(
            r.text().contains("is not this viewer's address"),
            "{}",
            r.text()
        );
    }
    let r = http_host(
        &v.addr,
        &format!("localhost:{port}"),
        "GET",
        "/api/health",
        &[],
        b"",
    );
    assert_eq!(r.status, 200);

    // Origin on state-changing requests.
    let save = json!({"text": "origin check", "project": "p"}).to_string();
    let post = |h: &[(&str, &str)]| {
        let mut hs = vec![("Content-Type", "application/json")];
        hs.extend_from_slice(h);
        http(&v.addr, "POST", "/api/memory/save", &hs, save.as_bytes())
    };
    let bearer = v.bearer();
    let origin = v.origin();
    let foreign = post(&[
        ("Authorization", &bearer),
        ("Origin", "http://evil.example"),
    ]);
    assert_eq!(
        foreign.status, 403,
        "a foreign Origin is refused even with the token"
    );
    assert!(foreign.text().contains("cross-origin"));
    assert_eq!(
        post(&[("Cookie", &cookie)]).status,
        403,
        "cookie alone, no Origin"
    );
    assert_eq!(
        post(&[("Cookie", &cookie), ("Origin", &origin)]).status,
        200
    );
    assert_eq!(post(&[("Authorization", &bearer)]).status, 200, "scripts");
    // No CORS anywhere.
    let pre = http(
        &v.addr,
        "OPTIONS",
        "/api/memory/save",
        &[
            ("Origin", "http://evil.example"),
            ("Access-Control-Request-Method", "POST"),
        ],
        b"",
    );
    assert!(pre.header("access-control-allow-origin").is_none());
    assert!(v
        .get("/api/stats")
        .header("access-control-allow-origin")
        .is_none());

    // The Unix socket serves the same routes without a token.
    let r = nmem_proto::client::call(
        &v.home.paths.socket,
        "GET",
        "/api/stats",
        &[],
        b"",
        Duration::from_secs(10),
    )
    .unwrap();
    assert_eq!(r.status, 200);
}

fn record_bash(home: &Home, session: &str, n: usize) -> i64 {
    let out = home.record("claude-code", &bash_event(session, n));
    assert!(out.status.success(), "{out:?}");
    home.count(&format!(
        "SELECT id FROM observations WHERE content LIKE '%{session}-event-{n}%' ORDER BY id LIMIT 1"
    ))
}

#[test]
fn every_route_answers_with_its_status_shape_and_messages() {
    let v = viewer("api");
    let id = record_bash(&v.home, "apisess", 1);
    record_bash(&v.home, "apisess", 2);

    let h = v.get("/api/health").json();
    for k in [
        "status",
        "version",
        "initialized",
        "mcpReady",
        "pid",
        "uptime",
    ] {
        assert!(h.get(k).is_some(), "health lacks {k}: {h}");
    }
    assert_eq!(v.get("/api/readiness").json()["status"], "ready");
    assert!(v.get("/api/version").json()["version"].is_string());

    // Reading.
    let s = v.get("/api/search?query=apisess-event-1&limit=5");
    assert_eq!(s.status, 200, "{}", s.text());
    let s = s.json();
    assert_eq!(s["items"][0]["id"], id, "{s}");
    assert!(s["items"][0]["retrieval_sources"].as_array().is_some());
    let s = v
        .get("/api/search?q=apisess&type=command&orderBy=date_desc")
        .json();
    assert!(!s["items"].as_array().unwrap().is_empty(), "{s}");
    assert_eq!(v.get("/api/search?query=x&limit=ten").status, 400);
    let t = v.get(&format!("/api/timeline?anchor={id}&before=2&after=2"));
    assert_eq!(t.status, 200, "{}", t.text());
    assert_eq!(t.json()["anchor"]["id"], id);
    let o = v.get(&format!("/api/observation/{id}"));
    assert_eq!(o.status, 200);
    assert_eq!(o.json()["id"], id);
    let missing = v.get("/api/observation/999999");
    assert_eq!(missing.status, 404);
    assert_eq!(missing.json()["message"], "Observation #999999 not found");
    assert_eq!(v.get("/api/observation/abc").status, 400);

    let b = v.post(
        "/api/observations/batch",
        &json!({"ids": [id], "orderBy": "date_desc"}),
    );
    assert_eq!(b.status, 200);
    assert_eq!(b.json()[0]["id"], id);
    let b = v.post("/api/observations/batch", &json!({"ids": "1,2"}));
    assert_eq!(b.status, 400);
    assert_eq!(b.json()["message"], "ids must be an array of numbers");
    let b = v.post("/api/observations/batch", &json!({"ids": [1, 2.5]}));
    assert_eq!(b.status, 400);
    assert_eq!(b.json()["message"], "All ids must be integers");

    let list = v.get("/api/observations?limit=1").json();
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    assert_eq!(list["hasMore"], true);
    let list = v.get("/api/observations?limit=1&offset=1").json();
    assert_eq!(list["offset"], 1);
    assert_eq!(v.get("/api/projects").json()["projects"][0], "load");
    assert_eq!(v.get("/api/stats").json()["database"]["observations"], 2);
    assert!(v.get("/api/processing-status").json()["queueDepth"].is_number());
    let sessions = v.get("/api/sessions?project=load").json();
    assert_eq!(sessions["items"][0]["id"], "apisess", "{sessions}");
    let one = v.get("/api/session/apisess").json();
    assert_eq!(one["items"].as_array().unwrap().len(), 2, "{one}");
    assert_eq!(v.get("/api/session/nope").status, 404);

    // Hook entry points feed the same ingest.
    let init = v.post(
        "/api/sessions/init",
        &json!({"contentSessionId": "cm-1", "project": "demo", "prompt": "fix the login bug"}),
    );
    assert_eq!(init.status, 200, "{}", init.text());
    let init = init.json();
    assert_eq!(init["skipped"], false);
    assert_eq!(init["promptNumber"], 1);
    assert!(init["sessionDbId"].is_number(), "{init}");
    let private = v
        .post(
            "/api/sessions/init",
            &json!({"contentSessionId": "cm-2", "project": "demo", "prompt": "<private>secret plan</private>"}),
        )
        .json();
    assert_eq!(private["skipped"], true, "{private}");
    assert_eq!(private["reason"], "private");
    let obs = json!({"contentSessionId": "cm-1", "tool_name": "Bash", "cwd": "/demo",
        "tool_input": {"command": "cargo test -p login"}, "tool_response": {"stdout": "ok", "stderr": ""},
        "tool_use_id": "toolu_cm_1"});
    assert_eq!(
        v.post("/api/sessions/observations", &obs).json(),
        json!({"status": "queued"})
    );
    assert_eq!(
        v.post("/api/sessions/observations", &obs).json()["status"],
        "deduped"
    );
    assert_eq!(
        v.home
            .count("SELECT COUNT(*) FROM observations WHERE content LIKE '%cargo test -p login%'"),
        1
    );
    let bad = v.post("/api/sessions/observations", &json!({"tool_name": "Bash"}));
    assert_eq!(bad.status, 400);
    assert!(bad.json()["message"]
        .as_str()
        .unwrap()
        .contains("contentSessionId"));
    let sum = v.post(
        "/api/sessions/summarize",
        &json!({"contentSessionId": "cm-1", "last_assistant_message": "Fixed the login bug."}),
    );
    assert_eq!(sum.status, 200, "{}", sum.text());
    assert!(["queued", "deduped", "skipped"].contains(&sum.json()["status"].as_str().unwrap()));
    let done = v
        .post(
            "/api/sessions/complete",
            &json!({"contentSessionId": "cm-1"}),
        )
        .json();
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["sessionDbId"], init["sessionDbId"]);
    let again = v
        .post(
            "/api/sessions/complete",
            &json!({"contentSessionId": "cm-1"}),
        )
        .json();
    assert_eq!(again, json!({"status": "skipped", "reason": "not_active"}));
    assert_eq!(
        v.get("/api/prompts?project=demo").json()["items"][0]["content"],
        "fix the login bug"
    );
    assert_eq!(v.get("/api/summaries").status, 200);

    // Memory.
    for text in [json!(""), json!("   \n"), Value::Null] {
        let r = v.post(
            "/api/memory/save",
            &json!({"text": text, "project": "demo"}),
        );
        assert_eq!(r.status, 400);
        assert_eq!(
            r.json()["message"],
            "text is required and must be non-empty"
        );
    }
    let saved = v
        .post(
            "/api/memory/save",
            &json!({"text": "API needs X-API-Key", "title": "Auth", "project": "my-app"}),
        )
        .json();
    assert_eq!(saved["success"], true);
    assert_eq!(saved["project"], "my-app");
    assert_eq!(saved["title"], "Auth");
    let sid = saved["id"].as_i64().unwrap();
    assert_eq!(
        saved["message"],
        format!("Memory saved as observation #{sid}")
    );

    // Actions.
    let pin = v.post("/api/pin", &json!({"id": id, "pinned": true}));
    assert_eq!(pin.status, 200);
    assert_eq!(
        v.home.count(&format!(
            "SELECT is_pinned FROM observations WHERE id = {id}"
        )),
        1
    );
    assert_eq!(
        v.post("/api/pin", &json!({"id": 999999, "pinned": true}))
            .status,
        404
    );
    let dry = v.post("/api/purge", &json!({"project": "my-app"})).json();
    // The memory and its `note` knowledge item.
    assert_eq!(dry["by_reason"]["observations"], 1, "{dry}");
    assert_eq!(dry["total_candidates"], 2, "{dry}");
    assert_eq!(
        v.home
            .count("SELECT COUNT(*) FROM observations WHERE project = 'my-app'"),
        1
    );
    assert_eq!(v.post("/api/purge", &json!({})).status, 400);
    let export = v.get("/api/export?project=load");
    assert_eq!(export.status, 200);
    assert_eq!(export.text().lines().count(), 2, "{}", export.text());
    assert_eq!(v.get("/api/export").status, 400);

    // Ops.
    assert_eq!(
        v.get("/api/ops/index-status").json()["vectorBackend"],
        "sqlite"
    );
    let traces = v.get("/api/ops/search-traces?query=apisess").json();
    assert!(traces["count"].as_u64().unwrap() >= 2, "{traces}");
    let csv = v.get("/api/ops/search-traces/export?format=csv");
    assert_eq!(csv.status, 200);
    assert!(
        csv.text().starts_with("\"atMs\"") || csv.text().starts_with("atMs"),
        "{}",
        csv.text()
    );
    let nd = v.get("/api/ops/search-traces/export?format=ndjson").text();
    assert!(nd.lines().all(|l| serde_json::from_str::<Value>(l).is_ok()));
    assert_eq!(
        v.get("/api/ops/search-traces/export?format=xml").status,
        400
    );
    let timings = v.get("/api/ops/session-timings").json();
    assert!(
        !timings["timings"].as_array().unwrap().is_empty(),
        "{timings}"
    );
    assert_eq!(
        v.get("/api/ops/session-timings/export?format=ndjson")
            .status,
        200
    );
    // Per event, by session (its row number or its id), message type and success.
    let of_cm1 = v
        .get(&format!(
            "/api/ops/session-timings?sessionDbId={}",
            init["sessionDbId"]
        ))
        .json();
    let rows = of_cm1["timings"].as_array().unwrap();
    assert!(rows.len() >= 2, "{of_cm1}");
    for r in rows {
        assert_eq!(r["sessionId"], "cm-1", "{r}");
        assert_eq!(r["success"], true, "{r}");
        let (wait, total) = (
            r["queueWaitMs"].as_f64().unwrap(),
            r["totalMs"].as_f64().unwrap(),
        );
        assert!(wait >= 0.0 && total >= wait, "{r}");
        assert!(r["commitMs"].as_f64().unwrap() >= 0.0, "{r}");
    }
    let summaries = v
        .get(&format!(
            "/api/ops/session-timings?sessionDbId={}&messageType=summarize",
            init["sessionDbId"]
        ))
        .json();
    let summaries = summaries["timings"].as_array().unwrap();
    // The turn's end (summarize) and the session's end (complete).
    assert!(
        !summaries.is_empty() && summaries.len() < rows.len(),
        "{summaries:?}"
    );
    assert!(summaries.iter().all(|r| r["messageType"] == "summarize"
        && ["Stop", "SessionEnd"].contains(&r["event"].as_str().unwrap())));
    let of_apisess = v.get("/api/ops/session-timings?sessionId=apisess").json();
    assert!(
        of_apisess["timings"].as_array().unwrap().len() >= 2,
        "{of_apisess}"
    );
    assert!(of_apisess["timings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["sessionId"] == "apisess" && r["messageType"] == "observation"));
    let failed = v.get("/api/ops/session-timings?success=false").json();
    assert_eq!(failed["timings"].as_array().unwrap().len(), 0, "{failed}");
    assert_eq!(
        v.get("/api/ops/session-timings?sessionDbId=999999").json()["timings"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
    assert_eq!(
        v.get("/api/ops/session-timings?messageType=model").status,
        400
    );
    let fail = v.get("/api/ops/failure-summary").json();
    assert!(fail["byClass"].is_object());
    assert_eq!(v.get("/api/ops/failure-summary/export").status, 200);
    let tr = v.get("/api/ops/trends?windowSec=600&bucketSec=60").json();
    let buckets = tr["buckets"].as_array().unwrap();
    assert_eq!(buckets.len(), 10);
    for k in [
        "searchCount",
        "avgSearchMs",
        "queueCount",
        "avgQueueTotalMs",
        "failureCount",
        "maxQueueDepth",
    ] {
        assert!(buckets[0].get(k).is_some(), "{k}");
    }
    assert!(
        buckets
            .iter()
            .map(|b| b["searchCount"].as_u64().unwrap())
            .sum::<u64>()
            >= 2
    );
    for bad in [
        "windowSec=59",
        "windowSec=86401",
        "bucketSec=9",
        "bucketSec=3601",
    ] {
        assert_eq!(
            v.get(&format!("/api/ops/trends?{bad}")).status,
            400,
            "{bad}"
        );
    }
    for (m, p) in [
        ("GET", "/api/ops/agent-metrics"),
        ("POST", "/api/ops/agent-metrics/reset"),
        ("POST", "/api/ops/backfill/chroma"),
    ] {
        let r = http(&v.addr, m, p, &[("Authorization", &v.bearer())], b"");
        assert_eq!(r.status, 501, "{p}");
        assert!(
            r.json()["message"].as_str().unwrap().contains("nmem"),
            "{p}"
        );
    }
    // retry-failed re-drains a quarantined spool file.
    let corrupt = v.home.paths.spool_corrupt();
    std::fs::create_dir_all(&corrupt).unwrap();
    std::fs::write(corrupt.join("x.json"), b"not an event").unwrap();
    let r = v.post("/api/ops/retry-failed", &json!({})).json();
    assert_eq!(r, json!({"success": true, "retried": 1}));
    assert_eq!(v.get("/api/nope").status, 404);
}

#[test]
fn the_event_stream_delivers_a_recorded_observation() {
    let v = viewer("sse");
    let mut s = TcpStream::connect(&v.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    write!(
        s,
        "GET /api/events HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\r\n",
        v.addr, v.token
    )
    .unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    // Subscribed once the stream's first frame arrives.
    loop {
        line.clear();
        assert!(r.read_line(&mut line).unwrap() > 0, "the stream ended");
        if line.contains("retry:") {
            break;
        }
    }
    let t0 = Instant::now();
    let out = v.home.record("claude-code", &bash_event("ssesess", 7));
    assert!(out.status.success());
    let deadline = Duration::from_secs(10);
    let mut event = String::new();
    let data = loop {
        assert!(
            t0.elapsed() < deadline,
            "no observation.stored within {deadline:?}"
        );
        line.clear();
        assert!(r.read_line(&mut line).unwrap() > 0, "the stream ended");
        if let Some(e) = line.strip_prefix("event: ") {
            event = e.trim().to_string();
        } else if let Some(d) = line.strip_prefix("data: ") {
            if event == "observation.stored" {
                break serde_json::from_str::<Value>(d.trim()).unwrap();
            }
        }
    };
    let delay = t0.elapsed();
    println!("observation.stored arrived {delay:?} after `nmem record` started");
    assert_eq!(data["kind"], "observation");
    assert_eq!(data["session_id"], "ssesess");
    assert!(data["row"]["content"]
        .as_str()
        .unwrap()
        .contains("ssesess-event-7"));
    assert_eq!(
        data["id"].as_i64().unwrap(),
        v.home.count("SELECT MAX(id) FROM observations")
    );
}
