use super::*;

fn redactor() -> Redactor {
    Redactor::new(&[]).0
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
