use super::*;

fn redactor() -> &'static Redactor {
    static R: std::sync::OnceLock<Redactor> = std::sync::OnceLock::new();
    R.get_or_init(|| Redactor::new(&[]).0)
}

fn red(s: &str) -> String {
    let mut s = s.to_string();
    redactor().redact(&mut s);
    s
}

#[test]
fn known_formats_are_replaced_by_typed_markers() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "aws configure set aws_access_key_id AKIAIOSFODNN7EXAMPLE",
            "AKIAIOSFODNN7EXAMPLE",
            "aws_access_key",
        ),
        (
            "aws_secret_access_key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "wJalrXUtnFEMI",
            "aws_secret_key",
        ),
        (
            "token ghp_FAKE0example0token0for0nmem0tests0AB here",
            "ghp_FAKE0",
            "github_token",
        ),
        (
            "GH_TOKEN=github_pat_11FAKEEXAMPLE0000000000_a1B2c3D4e5F6g7H8i9J0 gh pr list",
            "github_pat_11FAKE",
            "github_token",
        ),
        (
            "glpat-FAKEexample1234567890ab",
            "glpat-FAKE",
            "gitlab_token",
        ),
        ("xoxb-123456789012-FAKEFAKEFAKE", "xoxb-1234", "slack_token"),
        (
            "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXFAKEXXXXXXXXXXXX",
            "T00000000/B0",
            "slack_webhook",
        ),
        (
            "sk_test_FAKE51NmemExampleKeyDoNotUse0000",
            "sk_test_FAKE51",
            "stripe_key",
        ),
        (
            "sk-ant-api03-FAKEFAKEFAKEFAKEFAKE1234",
            "sk-ant-api03",
            "anthropic_key",
        ),
        (
            "OPENAI=sk-proj-FAKEfake1234FAKEfake5678",
            "sk-proj-FAKE",
            "openai_key",
        ),
        (
            "AIzaSyFAKE0123456789abcdefghijklmnopqrs",
            "AIzaSyFAKE",
            "google_api_key",
        ),
        (
            "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyIn0.ZmFrZS1zaWduYXR1cmU",
            "eyJhbGci",
            "jwt",
        ),
        (
            "postgresql://acme_app:Tr0ub4dor&3-horse-battery@db.internal:5432/x",
            "Tr0ub4dor",
            "connection_string_password",
        ),
        (
            "redis://:r3dis-FAKE-pass@127.0.0.1:6379/0",
            "r3dis-FAKE",
            "connection_string_password",
        ),
        (
            "PGPASSWORD='Tr0ub4dor&3-horse-battery' psql",
            "Tr0ub4dor",
            "secret_assignment",
        ),
        (
            "mysql -u root -pHunter2-FAKE -e 'show databases'",
            "Hunter2-FAKE",
            "password",
        ),
        (
            "curl -s -u admin:Tr0ub4dor3horse https://x",
            "Tr0ub4dor3horse",
            "basic_auth",
        ),
        (
            "JWT_SIGNING_SECRET=\"s3cr3t-FAKE-jwt-signing-key-0123456789abcdef\"",
            "s3cr3t-FAKE",
            "secret_assignment",
        ),
        (
            "api_key: hunter2hunter2",
            "hunter2hunter2",
            "secret_assignment",
        ),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
            "MIIEowIBAAKCAQEA",
            "private_key",
        ),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU (cut)",
            "b3BlbnNzaC1rZXkt",
            "private_key",
        ),
        (
            "npm_FAKEabcdefghijklmnopqrstuv0123456789",
            "npm_FAKEabc",
            "npm_token",
        ),
        (
            "key Zk9xR2vT8qLm4NpW7sYc3HdJ6bFgA1eU here",
            "Zk9xR2vT8qLm4NpW7sYc3HdJ6bFgA1eU",
            "high_entropy",
        ),
    ];
    for (input, secret, kind) in cases {
        let out = red(input);
        assert!(
            !out.contains(secret),
            "{kind}: {secret:?} survived in {out:?}"
        );
        assert!(
            out.contains(&format!("[REDACTED:{kind}]")),
            "{kind}: expected its marker in {out:?}"
        );
    }
}

#[test]
fn ordinary_text_is_kept() {
    let keep = [
        "git checkout 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39",
        "commit 3f2a9c1",
        "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "session 7d3f9a2e-4b1c-4e8a-9f6d-2c5b8e1a0f47",
        "/home/dev/projects/acme-api/src/routes/invoices.test.ts",
        "src/middleware/rateLimitRedisStoreAdapter2.ts",
        "https://express-rate-limit.mintlify.app/reference/configuration",
        "https://github.com/acme-corp/acme-api/pull/491/files?diff=split&w=1",
        "npm test -- --run src/routes/invoices.test.ts",
        "const password = req.body.password;",
        "token: process.env.GITHUB_TOKEN",
        "The invoice list repeats the last row of each page because the cursor used skip 0.",
        "findManyInvoicesForCustomer2024 is slow",
        "toolu_01Hq3vX8mZk2RfT9pLc4NwAe",
        "rate-limit-redis-sendcommand-node-redis-v4-example",
        "password: required",
        "RUST_LOG=debug cargo test --workspace",
        "x86_64-unknown-linux-gnu",
        "artifact written to ./crash-5f3c9a7e1b2d4c6a8e0f1a3b5c7d9e1f2a4b6c8d",
        "Passwords: argon2id with a per-user salt, never bcrypt",
        "SigningKeyNotFoundError: Unable to find a signing key that matches kid",
    ];
    for text in keep {
        assert_eq!(red(text), text, "false positive");
    }
}

#[test]
fn values_that_end_the_line_or_follow_an_equals_sign_are_still_secrets() {
    for text in [
        "password: hunter2",
        "password: Zq8x3Vb1Lm",
        "PASSWORD=hunter2 cargo run",
        "db_password: s3cr3tV4lue and then more words",
        "token: abcd1234efgh",
    ] {
        assert!(
            red(text).contains("[REDACTED:secret_assignment]"),
            "{text} → {}",
            red(text)
        );
    }
}

#[test]
fn private_spans_and_own_context_are_dropped() {
    assert_eq!(red("keep <private>drop me</private> this"), "keep  this");
    assert_eq!(red("a <nmem-context>digest</nmem-context>b"), "a b");
    assert_eq!(red("<private>unterminated"), "");
}

#[test]
fn invalid_extra_pattern_is_reported_and_the_rest_still_apply() {
    let extra = [
        ExtraPattern {
            name: "broken".into(),
            regex: "(".into(),
        },
        ExtraPattern {
            name: "ticket".into(),
            regex: r"ACME-SECRET-\d+".into(),
        },
    ];
    let (r, errors) = Redactor::new(&extra);
    assert_eq!(errors.len(), 1);
    assert!(errors[0].contains("broken"), "{errors:?}");
    let mut s = "ACME-SECRET-42 and ghp_FAKE0example0token0for0nmem0tests0AB".to_string();
    assert_eq!(r.redact(&mut s), 2);
    assert_eq!(s, "[REDACTED:ticket] and [REDACTED:github_token]");
}

#[test]
fn quoted_values_are_values_and_dotenv_files_hide_every_value() {
    let out = red(r#"DB_PASSWORD="x9(Kq!2m" and password="correct.horse.battery""#);
    assert!(
        !out.contains("x9(Kq") && !out.contains("correct.horse"),
        "{out}"
    );
    let mut p = crate::ingest::Prepared {
        event_id: "e".into(),
        received_at: 0,
        harness: "claude-code",
        session_id: "s".into(),
        cwd: "/w".into(),
        project: crate::ingest::Project {
            name: "w".into(),
            root: "/w".into(),
            ..Default::default()
        },
        event: nmem_proto::harness::Event::ToolUse,
        event_name: "PostToolUse".into(),
        record: Record::Observation(crate::ingest::Obs {
            obs_type: "file_edit",
            file_path: Some("/w/.env.local".into()),
            content: "/w/.env.local\n- SMTP_PASS=old\n+ SMTP_PASS=hunter2hunter".into(),
            ..Default::default()
        }),
        effect: crate::ingest::SessionEffect::None,
        thoughts: Vec::new(),
        transcript_offset: None,
        redactions: 0,
    };
    redactor().apply(&mut p);
    let Record::Observation(o) = &p.record else {
        unreachable!()
    };
    assert!(
        !o.content.contains("hunter2") && o.content.contains("+ SMTP_PASS=[REDACTED:dotenv]"),
        "{}",
        o.content
    );
}

/// `tests/fixtures/redaction/table.json`: the secrets and false-positive tables, shared with the
/// end-to-end test (tests/tests/redaction.rs).
fn table() -> serde_json::Value {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/redaction/table.json");
    serde_json::from_slice(&std::fs::read(&p).expect("the redaction table")).unwrap()
}

/// The 6-character pieces of a secret: none may survive, so a secret cut in two is caught too.
fn pieces(secret: &str) -> Vec<&str> {
    let b = secret.as_bytes();
    (0..b.len().saturating_sub(5))
        .filter(|&i| secret.is_char_boundary(i) && secret.is_char_boundary(i + 6))
        .map(|i| &secret[i..i + 6])
        .collect()
}

#[test]
fn the_secrets_table_is_redacted_with_its_markers() {
    let t = table();
    let rows = t["secrets"].as_array().unwrap();
    assert!(rows.len() >= 25);
    let mut failures = Vec::new();
    for row in rows {
        let (kind, text, secret) = (
            row["kind"].as_str().unwrap(),
            row["text"].as_str().unwrap(),
            row["secret"].as_str().unwrap(),
        );
        assert!(text.contains(secret), "the table's own row: {text}");
        let out = red(text);
        if let Some(p) = pieces(secret).into_iter().find(|p| out.contains(p)) {
            failures.push(format!("{kind}: `{p}` of {secret:?} survived in {out:?}"));
        } else if !out.contains(&format!("[REDACTED:{kind}]")) {
            failures.push(format!("{kind}: no [REDACTED:{kind}] in {out:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_false_positive_table_is_kept_verbatim() {
    let t = table();
    let rows = t["keep"].as_array().unwrap();
    assert!(rows.len() >= 30);
    let failures: Vec<String> = rows
        .iter()
        .filter_map(|row| {
            let text = row["text"].as_str().unwrap();
            let out = red(text);
            (out != text).then(|| format!("{}: {text:?}\n  became {out:?}", row["shape"]))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_credential_segment_is_replaced_and_the_path_around_it_kept() {
    let key = "Zk9xR2vT8qLm4NpW7sYc3HdJ6bFgA1eU";
    let path = format!("/home/dev/.config/acme/{key}/settings.json");
    assert_eq!(
        red(&path),
        "/home/dev/.config/acme/[REDACTED:high_entropy]/settings.json"
    );
    // A typed token as a folder name: only that segment.
    assert_eq!(
        red("/tmp/ghp_FAKE0example0token0for0nmem0tests0AB/config"),
        "/tmp/[REDACTED:github_token]/config"
    );
}

#[test]
fn context_anchored_rules_redact_hex_and_uuids_the_context_free_one_does_not() {
    let hex = "0123456789abcdef0123456789abcdef";
    let uuid = "4b1f0c2e-9a7d-4e3b-8c6f-2d5a1e0b9c47";
    assert_eq!(red(&format!("commit {hex}")), format!("commit {hex}"));
    assert_eq!(red(&format!("session {uuid}")), format!("session {uuid}"));
    for text in [
        format!("heroku apps --api-key {uuid}"),
        format!("acme --auth {hex}"),
        format!("-H 'DD-API-KEY: {hex}'"),
        format!("https://x.example/a?sig={hex}"),
        format!("password: {uuid}"),
        format!("machine m login l password {hex}"),
        format!("h:5432:db:u:{uuid}"),
    ] {
        let out = red(&text);
        assert!(
            !out.contains(hex) && !out.contains(uuid),
            "{text} became {out}"
        );
    }
}

/// Wide whitespace (U+2000, U+3000: 3 bytes) right before a candidate, an assignment's value or
/// an ssh key: the word boundaries are found past the whole character, never inside it (this
/// panicked, and a panic ends nmemd).
#[test]
fn wide_whitespace_before_a_candidate_does_not_panic() {
    for text in [
        "\u{2000}A-+AaAAAA-aa0A0_a-0a",
        "x\u{3000}Zk9xR2vT8qLm4NpW7sYc3HdJ6bFgA1eU",
        "Password:\u{2003}argon2id with a salt",
        "password: sh\u{2000}Unable to connect",
        "ssh-ed25519\u{2000}AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTestsOnly0000000",
    ] {
        let once = red(text);
        assert_eq!(red(&once), once, "{text:?}");
    }
}

/// The read-only check that spares most payloads a copy: it must never call a string clean that
/// redaction would change (every row of both tables, alone and inside a payload).
#[test]
fn the_clean_check_never_passes_what_redaction_changes() {
    let t = table();
    let r = redactor();
    let mut texts: Vec<&str> = Vec::new();
    for key in ["secrets", "keep"] {
        texts.extend(
            t[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|row| row["text"].as_str().unwrap()),
        );
    }
    for text in texts {
        let mut out = text.to_string();
        let n = r.redact(&mut out);
        if n > 0 || out != text {
            assert!(!r.is_clean(text), "called clean, but redacted: {text:?}");
            let payload = serde_json::json!({
                "session_id": "s",
                "tool_input": {"command": "ls"},
                "tool_response": {"stdout": ["ok", text]},
            });
            assert!(!r.payload_is_clean(&payload), "{text:?} inside a payload");
        }
    }
    // Each way in on its own: a pattern, a private span, our own context, a random token.
    for text in [
        "token ghp_FAKE0example0token0for0nmem0tests0AB",
        "keep <private>this</private>",
        "<nmem-context>old digest</nmem-context>",
        "Zk9xR2vT8qLm4NpW7sYc3HdJ6bFgA1eU",
    ] {
        assert!(!r.is_clean(text), "{text:?}");
    }
    // The common event: nothing to redact, called clean (the copy is spared).
    assert!(r.payload_is_clean(&serde_json::json!({
        "session_id": "7d3f9a2e-4b1c-4e8a-9f6d-2c5b8e1a0f47",
        "tool_input": {"command": "npm test -- --run src/routes/invoices.test.ts"},
        "tool_response": {"stdout": " ✓ src/routes/invoices.test.ts > case 1 passes\n"},
    })));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]

    /// Whatever the clean check passes, redaction leaves as it is.
    #[test]
    fn what_the_clean_check_passes_redaction_leaves_alone(parts in proptest::collection::vec(proptest::prop_oneof![
        proptest::strategy::Just("password".to_string()),
        proptest::strategy::Just(" is ".to_string()),
        proptest::strategy::Just("=".to_string()),
        proptest::strategy::Just("/".to_string()),
        proptest::strategy::Just("--api-key ".to_string()),
        proptest::strategy::Just("<private>".to_string()),
        proptest::strategy::Just("<nmem-context>".to_string()),
        proptest::strategy::Just("ghp_".to_string()),
        proptest::strategy::Just("\n".to_string()),
        "[A-Za-z0-9+/_-]{1,40}",
        "[ :=@.\"']{1,3}",
        "\\PC{0,20}",
    ], 0..24)) {
        let s: String = parts.concat();
        let r = redactor();
        if r.is_clean(&s) {
            let mut out = s.clone();
            proptest::prop_assert_eq!(r.redact(&mut out), 0);
            proptest::prop_assert_eq!(out, s);
        }
    }

    /// Arbitrary text never panics the redactor, and its output is a fixed point.
    #[test]
    fn redaction_never_panics_and_is_idempotent(s in "\\PC{0,300}") {
        let r = redactor();
        let mut once = s.clone();
        r.redact(&mut once);
        let mut twice = once.clone();
        r.redact(&mut twice);
        proptest::prop_assert_eq!(once, twice);
    }

    /// The same with the pieces rules look for: anchors, separators, private spans, random runs.
    #[test]
    fn redaction_of_secret_like_text_is_idempotent(parts in proptest::collection::vec(proptest::prop_oneof![
        proptest::strategy::Just("password".to_string()),
        proptest::strategy::Just(" is ".to_string()),
        proptest::strategy::Just(": ".to_string()),
        proptest::strategy::Just("=".to_string()),
        proptest::strategy::Just("/".to_string()),
        proptest::strategy::Just("&sig=".to_string()),
        proptest::strategy::Just("--api-key ".to_string()),
        proptest::strategy::Just("machine x login y password ".to_string()),
        proptest::strategy::Just("<private>".to_string()),
        proptest::strategy::Just("</private>".to_string()),
        proptest::strategy::Just("[REDACTED:x]".to_string()),
        proptest::strategy::Just("\n".to_string()),
        proptest::strategy::Just("sha512-".to_string()),
        proptest::strategy::Just("data:".to_string()),
        proptest::strategy::Just("https://".to_string()),
        "[A-Za-z0-9+/_-]{1,40}",
        "[ :=@.\"']{1,3}",
    ], 0..24)) {
        let s: String = parts.concat();
        let r = redactor();
        let mut once = s.clone();
        r.redact(&mut once);
        let mut twice = once.clone();
        r.redact(&mut twice);
        proptest::prop_assert_eq!(once, twice);
    }
}

/// A megabyte without whitespace (a minified bundle, a hostile payload) of secret-like runs:
/// every candidate looks at its word within a window, so this is linear, not quadratic. A hang
/// test: it fails on a deadline far above what the work takes, never on speed.
#[test]
fn a_megabyte_without_delimiters_does_not_hang() {
    let text: String = "Zk9xR2vT8qLm4NpW7sYc3H.".repeat(45_000);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut s = text;
        let n = redactor().redact(&mut s);
        tx.send(n).unwrap();
    });
    let n = rx
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("redaction of 1 MB finished within the deadline");
    assert_eq!(n, 45_000);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

    /// The byte loop finds exactly what the candidate regex it replaced finds, over text made
    /// of token bytes, `=` runs, delimiters and multi-byte characters.
    #[test]
    fn entropy_candidates_are_the_regex_matches(parts in proptest::collection::vec(proptest::prop_oneof![
        "[A-Za-z0-9+/_-]{1,30}",
        "={1,4}",
        "[ .:\"'\n]{1,2}",
        "[é✓🔑]",
        "AKIA[A-Z0-9]{16}",
    ], 0..24)) {
        let s: String = parts.concat();
        let re = regex::Regex::new(r"[A-Za-z0-9+/_\-]{20,}={0,2}").unwrap();
        let want: Vec<_> = re.find_iter(&s).map(|m| m.range()).collect();
        let got: Vec<_> = entropy_candidates(&s).collect();
        proptest::prop_assert_eq!(got, want);
    }
}

/// Timing of the candidate scan against the regex it replaced (not a test of speed: it asserts
/// nothing; run with `--ignored --nocapture` to print the figures).
#[test]
#[ignore]
fn entropy_candidate_scan_timing() {
    let s: String = (0..40)
        .map(|i| format!(" ✓ src/routes/invoices.test.ts > case {i} passes (1000042)\n"))
        .collect();
    let re = regex::Regex::new(r"[A-Za-z0-9+/_\-]{20,}={0,2}").unwrap();
    let n = 20_000;
    let t = std::time::Instant::now();
    let mut k = 0;
    for _ in 0..n {
        k += re.find_iter(std::hint::black_box(&s)).count();
    }
    let a = t.elapsed() / n;
    let t = std::time::Instant::now();
    for _ in 0..n {
        k += entropy_candidates(std::hint::black_box(&s)).count();
    }
    let b = t.elapsed() / n;
    println!("{} bytes: regex {a:?}, byte loop {b:?} ({k})", s.len());
}
