//! Documents end to end: `nmem ingest` against the real nmemd. A repository fixture walked
//! (honouring .gitignore, skipping node_modules, excluding .claude with a warning, skipping
//! symlinks, FIFOs, binary and oversize files with a reason), ingested again (noop), changed
//! (only the changed chunks replaced), searched after the observations, fetched by `get --doc`,
//! exported and purged; a web page from a local server, a PDF the test writes, a conversation;
//! bad input refused with nothing changed.

use nmem_e2e::*;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

fn run(home: &Home, args: &[&str]) -> Output {
    home.cmd("nmem")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run nmem")
}

/// `nmem ingest ARGS --json`, which must succeed; its reply.
fn ingest(home: &Home, args: &[&str]) -> Value {
    let mut a = vec!["ingest"];
    a.extend_from_slice(args);
    a.push("--json");
    let out = run(home, &a);
    assert!(
        out.status.success(),
        "nmem {a:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON reply")
}

/// The reply's entry for the source whose locator ends with `suffix`.
fn source<'a>(reply: &'a Value, suffix: &str) -> &'a Value {
    reply["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["locator"].as_str().unwrap().ends_with(suffix))
        .unwrap_or_else(|| panic!("no source ending with {suffix} in {reply:#}"))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// The fixture repository in a temporary folder, with what cannot be committed made here: a
/// .gitignore and the files it ignores, node_modules, local agent state, a symlink out of the
/// tree, a FIFO, a binary file and an oversize one.
fn repo(tmp: &Path) -> PathBuf {
    let root = tmp.join("ledger");
    copy_dir(&fixtures().join("docs/repo"), &root);
    std::fs::write(root.join(".gitignore"), "*.log\nscratch/\n").unwrap();
    std::fs::write(root.join("debug.log"), "ignored-by-gitignore zanzibar\n").unwrap();
    std::fs::create_dir_all(root.join("scratch")).unwrap();
    std::fs::write(root.join("scratch/notes.md"), "# zanzibar scratch\n").unwrap();
    std::fs::create_dir_all(root.join("node_modules/left-pad")).unwrap();
    std::fs::write(root.join("node_modules/left-pad/index.js"), "zanzibar();\n").unwrap();
    std::fs::create_dir_all(root.join(".claude")).unwrap();
    std::fs::write(
        root.join(".claude/notes.md"),
        "# Agent notes\nmarmalade plan\n",
    )
    .unwrap();
    let outside = tmp.join("outside-secret.txt");
    std::fs::write(&outside, "outside the tree: zanzibar\n").unwrap();
    std::os::unix::fs::symlink(&outside, root.join("link-out.txt")).unwrap();
    mkfifo(&root.join("pipe.md"));
    std::fs::write(root.join("logo.png"), b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").unwrap();
    std::fs::write(root.join("huge.txt"), "zanzibar ".repeat(200_000)).unwrap();
    root
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

fn chunk_ids(home: &Home, locator_suffix: &str) -> Vec<(i64, String)> {
    let db = home.db();
    let mut stmt = db
        .prepare(
            "SELECT d.id, d.hash FROM doc_chunks d JOIN doc_sources s ON s.id = d.source_id
              WHERE s.locator LIKE '%' || ?1 ORDER BY d.ordinal",
        )
        .unwrap();
    stmt.query_map([locator_suffix], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn a_repository_is_walked_ingested_once_updated_by_chunk_searched_and_purged() {
    let home = Home::new("docs");
    let _d = home.start();
    let tmp = tempfile::tempdir().unwrap();
    let root = repo(tmp.path());
    let root_s = root.to_str().unwrap();

    let first = ingest(&home, &[root_s, "--project", "ledger"]);
    assert_eq!(first["project"], "ledger");
    // The .gitignore is a text file of the repository like the others.
    for f in ["README.md", "docs/guide.md", "src/lib.rs", ".gitignore"] {
        assert_eq!(source(&first, f)["status"], "ingested", "{f}");
    }
    assert_eq!(source(&first, "README.md")["kind"], "repo-file");
    let skipped = |f: &str| -> String {
        let s = source(&first, f);
        assert_eq!(s["status"], "skipped", "{f}");
        s["reason"].as_str().unwrap().to_string()
    };
    assert!(skipped("link-out.txt").contains("symlink"));
    assert!(skipped("pipe.md").contains("not a regular file"));
    assert!(skipped("logo.png").contains("binary"));
    assert!(skipped("huge.txt").contains("KiB"));
    assert!(skipped("node_modules").contains("never walked"));
    assert!(skipped(".claude").contains("--force"));
    let warnings = first["warnings"].to_string();
    assert!(
        warnings.contains(".claude") && warnings.contains("--force"),
        "{warnings}"
    );
    // What .gitignore names is not a source at all.
    let all = first["sources"].to_string();
    assert!(
        !all.contains("debug.log") && !all.contains("scratch"),
        "{all}"
    );
    assert_eq!(home.count("SELECT COUNT(*) FROM doc_sources"), 4);
    assert_eq!(
        home.count("SELECT COUNT(*) FROM doc_chunks WHERE content LIKE '%zanzibar%' OR content LIKE '%marmalade%'"),
        0,
        "nothing ignored, excluded or outside the tree was stored"
    );
    // Markdown by heading: front matter its own chunk, the fence and the table whole.
    let readme: Vec<(String, String)> = {
        let db = home.db();
        let mut stmt = db
            .prepare("SELECT heading, content FROM doc_chunks d JOIN doc_sources s ON s.id = d.source_id WHERE s.locator LIKE '%README.md' ORDER BY ordinal")
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let headings: Vec<&str> = readme.iter().map(|(h, _)| h.as_str()).collect();
    assert_eq!(
        headings,
        [
            "front matter",
            "Acme ledger",
            "Acme ledger > Install",
            "Acme ledger > Configuration",
            "Acme ledger > License"
        ]
    );
    assert!(readme[2].1.contains("# build the service") && readme[2].1.contains("cargo build"));
    assert!(readme[3].1.contains("| `ledger_path` |"));

    // Again, unchanged: noop, nothing written.
    let before = chunk_ids(&home, "guide.md");
    let again = ingest(&home, &[root_s, "--project", "ledger"]);
    assert_eq!(again["totals"]["noop"], 4, "{again:#}");
    assert_eq!(again["totals"]["chunks"]["added"], 0);
    assert_eq!(again["totals"]["chunks"]["removed"], 0);
    assert_eq!(chunk_ids(&home, "guide.md"), before);

    // One section changed: only its chunk is replaced; the others keep their ids.
    let guide = root.join("docs/guide.md");
    let text = std::fs::read_to_string(&guide)
        .unwrap()
        .replace("at 02:00", "at 04:30 (after the saffron export)");
    std::fs::write(&guide, text).unwrap();
    let changed = ingest(&home, &[root_s, "--project", "ledger"]);
    let g = source(&changed, "guide.md");
    assert_eq!(g["status"], "updated");
    assert_eq!(g["chunks"]["added"], 1);
    assert_eq!(g["chunks"]["removed"], 1);
    assert_eq!(g["chunks"]["kept"], before.len() as u64 - 1);
    assert_eq!(source(&changed, "README.md")["status"], "noop");
    let after = chunk_ids(&home, "guide.md");
    let kept: Vec<_> = before.iter().filter(|c| after.contains(c)).collect();
    assert_eq!(
        kept.len(),
        before.len() - 1,
        "unchanged chunks keep their ids"
    );

    // --force takes local agent state too.
    let forced = ingest(&home, &[root_s, "--project", "ledger", "--force"]);
    assert_eq!(source(&forced, ".claude/notes.md")["status"], "ingested");

    // Search: an observation of the agent's first, the document chunk after it.
    let ev = json!({
        "session_id": "docs-session",
        "cwd": "/home/dev/projects/ledger",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": { "command": "grep -rn saffron exports/", "description": "find the saffron export" },
        "tool_response": { "stdout": "exports/run.sh: saffron export\n", "stderr": "", "interrupted": false },
        "tool_use_id": "toolu_docs_saffron_1",
    });
    assert!(home
        .record("claude-code", ev.to_string().as_bytes())
        .status
        .success());
    let out = run(
        &home,
        &["search", "saffron", "--project", "ledger", "--json"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reply: Value = serde_json::from_slice(&out.stdout).unwrap();
    let kinds: Vec<&str> = reply["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["observation", "doc"], "{reply:#}");
    let hit = &reply["items"][1];
    assert!(hit["doc"]["locator"]
        .as_str()
        .unwrap()
        .ends_with("docs/guide.md"));
    assert_eq!(
        hit["doc"]["heading"],
        "Operator guide > Nightly reconciliation"
    );
    assert!(hit["doc"]["line_start"].as_i64().unwrap() >= 1);
    // Only documents, or none.
    let only: Value = serde_json::from_slice(
        &run(
            &home,
            &[
                "search",
                "saffron",
                "--project",
                "ledger",
                "--type",
                "doc",
                "--json",
            ],
        )
        .stdout,
    )
    .unwrap();
    assert_eq!(only["items"].as_array().unwrap().len(), 1);
    let none: Value = serde_json::from_slice(
        &run(
            &home,
            &[
                "search",
                "saffron",
                "--project",
                "ledger",
                "--no-docs",
                "--json",
            ],
        )
        .stdout,
    )
    .unwrap();
    assert!(none["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|i| i["kind"] != "doc"));
    // The terminal table labels a chunk d<id> and shows where it is.
    let table = String::from_utf8(run(&home, &["search", "saffron", "--project", "ledger"]).stdout)
        .unwrap();
    assert!(
        table.contains(&format!("d{}", hit["id"])) && table.contains("guide.md:"),
        "{table}"
    );

    // get --doc: the chunk's text and where it came from.
    let id = hit["id"].as_i64().unwrap().to_string();
    let got: Value =
        serde_json::from_slice(&run(&home, &["get", "--doc", &id, "--json"]).stdout).unwrap();
    assert_eq!(got[0]["obs_type"], "doc");
    assert!(got[0]["content"]
        .as_str()
        .unwrap()
        .contains("saffron export"));
    assert!(got[0]["metadata"]["locator"]
        .as_str()
        .unwrap()
        .ends_with("guide.md"));

    // Export has the documents; a purge of the project removes them.
    let export = home.cmd("nmemctl").arg("export").output().unwrap();
    let export = String::from_utf8(export.stdout).unwrap();
    assert!(
        export.contains("\"type\":\"doc_source\"") && export.contains("\"type\":\"doc_chunk\"")
    );
    let purge = home
        .cmd("nmemctl")
        .args(["purge", "--project", "ledger", "--yes"])
        .output()
        .unwrap();
    assert!(
        purge.status.success(),
        "{}",
        String::from_utf8_lossy(&purge.stderr)
    );
    assert_eq!(home.count("SELECT COUNT(*) FROM doc_sources"), 0);
    assert_eq!(home.count("SELECT COUNT(*) FROM doc_chunks"), 0);
    assert_eq!(
        home.count("SELECT COUNT(*) FROM doc_chunks_fts WHERE doc_chunks_fts MATCH 'saffron'"),
        0
    );
}

/// A minimal one-page PDF with `text` in Helvetica, its cross-reference table computed.
fn pdf(text: &str) -> Vec<u8> {
    let stream = format!("BT /F1 18 Tf 72 700 Td ({text}) Tj ET");
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_string(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_string(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>".to_string(),
        format!("<< /Length {} >>\nstream\n{stream}\nendstream", stream.len()),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".to_string(),
    ];
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{o}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for off in offsets {
        out.extend_from_slice(format!("{off:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

/// Serve `body` as text/html on a local port, to every request, until the test ends.
fn serve(body: Vec<u8>) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut s) = conn else { continue };
            let mut req = Vec::new();
            let mut buf = [0u8; 1024];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => req.extend_from_slice(&buf[..n]),
                }
            }
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(&body);
        }
    });
    port
}

fn search_docs(home: &Home, word: &str) -> Value {
    let out = run(
        home,
        &[
            "search",
            word,
            "--project",
            "ledger",
            "--type",
            "doc",
            "--json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_web_page_a_pdf_and_a_conversation_are_ingested_and_found() {
    let home = Home::new("docsrc");
    let _d = home.start();
    let tmp = tempfile::tempdir().unwrap();
    let port = serve(std::fs::read(fixtures().join("docs/page.html")).unwrap());
    let url = format!("http://127.0.0.1:{port}/status.html");
    let pdf_path = tmp.path().join("policy.pdf");
    std::fs::write(
        &pdf_path,
        pdf("Invoices follow the aubergine retention policy"),
    )
    .unwrap();
    let conv = fixtures().join("docs/conversation.json");

    let r = ingest(
        &home,
        &[
            pdf_path.to_str().unwrap(),
            "--url",
            &url,
            "--conversation",
            conv.to_str().unwrap(),
            "--project",
            "ledger",
        ],
    );
    assert_eq!(r["totals"]["ingested"], 3, "{r:#}");
    assert_eq!(source(&r, "policy.pdf")["kind"], "pdf");
    assert_eq!(source(&r, "/status.html")["kind"], "web");
    assert_eq!(
        source(&r, "conversation:design-review-ledger")["kind"],
        "conversation"
    );

    let web = search_docs(&home, "heliotrope");
    let hit = &web["items"][0];
    assert_eq!(hit["doc"]["locator"], url.as_str());
    assert_eq!(hit["doc"]["heading"], "Acme status");
    let page = hit["content_preview"].as_str().unwrap();
    assert!(
        page.contains("03:00 UTC & takes") && !page.contains("<b>"),
        "{page}"
    );
    assert!(search_docs(&home, "console")
        .get("items")
        .unwrap()
        .as_array()
        .unwrap()
        .is_empty());

    let pdf_hit = &search_docs(&home, "aubergine")["items"][0];
    assert!(pdf_hit["doc"]["locator"]
        .as_str()
        .unwrap()
        .ends_with("policy.pdf"));

    let conv_hit = &search_docs(&home, "tangerine")["items"][0];
    assert_eq!(conv_hit["doc"]["heading"], "assistant (2)");

    // The conversation from stdin, the same messages: the same locator, unchanged: noop.
    let mut child = home
        .cmd("nmem")
        .args([
            "ingest",
            "--conversation",
            "-",
            "--project",
            "ledger",
            "--json",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&std::fs::read(&conv).unwrap())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let again: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(again["sources"][0]["status"], "noop", "{again:#}");
}

#[test]
fn duplicate_chunks_are_counted_not_stored_twice() {
    let home = Home::new("docdup");
    let _d = home.start();
    let tmp = tempfile::tempdir().unwrap();
    let section = "## Shared\n\nThe pistachio rule applies to every ledger.\n";
    std::fs::write(
        tmp.path().join("a.md"),
        format!("# A\n\nfirst\n\n{section}"),
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("b.md"),
        format!("# B\n\nsecond\n\n{section}{section}"),
    )
    .unwrap();
    let r = ingest(
        &home,
        &[tmp.path().to_str().unwrap(), "--project", "ledger"],
    );
    assert_eq!(source(&r, "a.md")["chunks"]["added"], 2, "{r:#}");
    // b.md: its own first chunk; the section is a's (another source) and then its own repeat.
    assert_eq!(source(&r, "b.md")["chunks"]["added"], 1, "{r:#}");
    assert_eq!(source(&r, "b.md")["chunks"]["duplicate"], 2, "{r:#}");
    assert_eq!(r["totals"]["chunks"]["duplicate"], 2);
    assert_eq!(
        home.count("SELECT COUNT(*) FROM doc_chunks WHERE content LIKE '%pistachio%'"),
        1
    );
}

/// `nmem timeline --doc ID`: the chunks before and after a chunk in its document, in the
/// document's order (another source's chunks never), capped by `--before`/`--after`; a chunk
/// replaced by a re-ingest, or an id that names none, is refused with what to do; an anchor and
/// a chunk together are refused.
#[test]
fn the_timeline_of_a_chunk_is_its_neighbours_in_its_document() {
    let home = Home::new("doctl");
    let _d = home.start();
    let tmp = tempfile::tempdir().unwrap();
    let sections = ["Alder", "Birch", "Cedar", "Damson", "Elder"];
    let body = |extra: &str| {
        let mut s = String::from("# Trees\n\n");
        for (i, name) in sections.iter().enumerate() {
            s.push_str(&format!(
                "## {name}\n\nSection {i} about the {name} grove.\n"
            ));
            if *name == "Cedar" {
                s.push_str(extra);
            }
            s.push('\n');
        }
        s
    };
    std::fs::write(tmp.path().join("trees.md"), body("")).unwrap();
    std::fs::write(
        tmp.path().join("other.md"),
        "# Other\n\nThe quince orchard.\n",
    )
    .unwrap();
    ingest(
        &home,
        &[tmp.path().to_str().unwrap(), "--project", "ledger"],
    );
    let chunks = chunk_ids(&home, "trees.md");
    let heading = |v: &Value| v["metadata"]["heading"].as_str().unwrap().to_string();
    let cedar = home
        .count("SELECT id FROM doc_chunks WHERE heading LIKE '%Cedar' AND content LIKE '%grove%'");
    let at = chunks.iter().position(|(id, _)| *id == cedar).unwrap();
    assert!(at >= 2 && chunks.len() >= at + 3, "{chunks:?}");

    let timeline = |args: &[&str]| {
        let mut a = vec!["timeline", "--json"];
        a.extend_from_slice(args);
        run(&home, &a)
    };
    let cedar_s = cedar.to_string();
    let out = timeline(&["--doc", &cedar_s, "--before", "1", "--after", "5"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(t["anchor"]["id"], cedar, "{t:#}");
    assert_eq!(t["anchor"]["obs_type"], "doc");
    let ids = |k: &str| -> Vec<i64> {
        t[k].as_array()
            .unwrap()
            .iter()
            .map(|o| o["id"].as_i64().unwrap())
            .collect()
    };
    // One before (the nearest), every one after, in the document's order.
    assert_eq!(ids("before"), [chunks[at - 1].0], "{t:#}");
    let after: Vec<i64> = chunks[at + 1..].iter().map(|c| c.0).collect();
    assert_eq!(ids("after"), after, "{t:#}");
    assert!(heading(&t["before"][0]).ends_with("Birch"), "{t:#}");
    assert!(heading(&t["after"][0]).ends_with("Damson"), "{t:#}");
    assert!(t["after"]
        .as_array()
        .unwrap()
        .iter()
        .all(|o| o["file_path"].as_str().unwrap().ends_with("trees.md")));
    // The terminal text shows the anchor among its neighbours.
    let text = run(&home, &["timeline", "--doc", &cedar_s]);
    assert!(text.status.success());
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("Cedar grove") && text.contains("Birch grove"),
        "{text}"
    );

    // Refusals: an anchor and a chunk together; an id that names no chunk.
    let both = run(&home, &["timeline", "3", "--doc", &cedar_s]);
    assert!(!both.status.success());
    let missing = timeline(&["--doc", "987654"]);
    assert!(!missing.status.success());
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(err.contains("no document chunk has id 987654"), "{err}");

    // The chunk changes: a re-ingest replaces it, and its old id is refused with what to do.
    std::fs::write(tmp.path().join("trees.md"), body("Now fenced.\n")).unwrap();
    ingest(
        &home,
        &[tmp.path().to_str().unwrap(), "--project", "ledger"],
    );
    let gone = timeline(&["--doc", &cedar_s]);
    assert!(!gone.status.success());
    let err = String::from_utf8_lossy(&gone.stderr);
    assert!(err.contains("search again"), "{err}");
}

#[test]
fn bad_input_is_refused_with_a_clear_error_and_changes_nothing() {
    let home = Home::new("docbad");
    let _d = home.start();
    let tmp = tempfile::tempdir().unwrap();
    let good = tmp.path().join("good.md");
    std::fs::write(&good, "# Good\n\ncassowary\n").unwrap();
    let fifo = tmp.path().join("fifo.md");
    mkfifo(&fifo);
    let link = tmp.path().join("link.md");
    std::os::unix::fs::symlink(&good, &link).unwrap();
    let big = tmp.path().join("big.txt");
    std::fs::write(&big, "x".repeat(2 << 20)).unwrap();
    let conv = tmp.path().join("conv.json");
    std::fs::write(&conv, "{\"messages\": 3}").unwrap();
    let good_s = good.to_str().unwrap();
    for (args, says) in [
        (
            vec![good_s, "/nonexistent/nmem-docs-missing.md"],
            "No such file",
        ),
        (vec![good_s, fifo.to_str().unwrap()], "not a regular file"),
        (vec![good_s, link.to_str().unwrap()], "symlink"),
        (vec![good_s, big.to_str().unwrap()], "KiB"),
        (
            vec![good_s, "--conversation", conv.to_str().unwrap()],
            "messages",
        ),
        (vec![good_s, "--url", "file:///etc/passwd"], "http"),
        (vec![], "nothing to ingest"),
    ] {
        let mut a = vec!["ingest"];
        a.extend(args.iter().copied());
        let out = run(&home, &a);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{a:?}: {err}");
        assert!(err.contains(says), "{a:?}: {err}");
        assert_eq!(home.count("SELECT COUNT(*) FROM doc_sources"), 0, "{a:?}");
    }
    // The daemon refuses what a client should not send, saying why.
    let out = run(&home, &["ingest", good_s, "--project", ""]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("project"));
    assert_eq!(home.count("SELECT COUNT(*) FROM doc_sources"), 0);
}
