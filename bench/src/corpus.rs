//! A deterministic generator of realistic coding sessions, as Claude Code hook events.
//!
//! Same seed, same corpus: benchmarks at 10k, 100k or 1M observations compare across runs and
//! machines. Projects have their own file trees; sessions are a few prompts, each followed by the
//! tool calls an agent makes for it (reads, edits, commands and their failures, searches, plans,
//! web lookups, subagents, MCP calls), then a Stop.

use serde_json::{json, Value};

/// splitmix64: tiny, fast, and good enough for shaping test data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

pub const PROJECTS: &[(&str, &str)] = &[
    ("acme-api", "ts"),
    ("billing", "py"),
    ("web-app", "tsx"),
    ("infra", "tf"),
    ("ml-pipeline", "py"),
    ("nmem", "rs"),
    ("mobile", "kt"),
    ("search-svc", "go"),
    ("docs-site", "md"),
    ("auth-gateway", "rs"),
    ("data-export", "py"),
    ("payments-sdk", "ts"),
];

const DIRS: &[&str] = &[
    "src",
    "src/routes",
    "src/services",
    "src/db",
    "src/middleware",
    "src/utils",
    "tests",
    "lib",
    "cmd",
    "internal/store",
];
const STEMS: &[&str] = &[
    "invoices",
    "customers",
    "auth",
    "session",
    "rateLimit",
    "config",
    "pagination",
    "webhooks",
    "refunds",
    "ledger",
    "cache",
    "queue",
    "retry",
    "export",
    "search",
    "index",
    "migrations",
    "schema",
    "handlers",
    "client",
    "tokens",
    "users",
    "orgs",
    "billing",
    "metrics",
    "logger",
    "errors",
    "router",
    "scheduler",
    "worker",
];
const VERBS: &[&str] = &[
    "Fix",
    "Add",
    "Refactor",
    "Speed up",
    "Document",
    "Test",
    "Remove",
    "Investigate",
    "Rename",
    "Harden",
];
const TOPICS: &[&str] = &[
    "the token refresh race",
    "cursor pagination",
    "retry with exponential backoff",
    "the flaky integration test",
    "N+1 queries in the list endpoint",
    "the webhook signature check",
    "rate limiting per org",
    "the migration that locks the table",
    "timezone handling in reports",
    "memory growth in the worker",
    "the CSV export encoding",
    "idempotency keys for payments",
    "the cache invalidation bug",
    "structured logging",
    "the deadlock in the scheduler",
];
const COMMANDS: &[&str] = &[
    "npm test -- --run",
    "cargo test --workspace",
    "pytest -x tests/",
    "go test ./...",
    "npm run lint",
    "cargo clippy --all-targets",
    "make build",
    "docker compose up -d db",
    "git status",
    "git diff --stat",
    "npx tsc --noEmit",
    "terraform plan",
    "psql -c 'select count(*) from invoices'",
    "ls -la",
];
const ERRORS: &[&str] = &[
    "error TS2322: Type 'string' is not assignable to type 'number'.",
    "FAILED tests/test_refunds.py::test_double_post - AssertionError: assert 2 == 1",
    "error[E0502]: cannot borrow `self.cache` as mutable because it is also borrowed as immutable",
    "panic: runtime error: invalid memory address or nil pointer dereference",
    "Error: connect ECONNREFUSED 127.0.0.1:5432",
    "FAIL src/routes/invoices.test.ts > returns each row once",
    "ModuleNotFoundError: No module named 'redis'",
    "deadlock detected while waiting for ShareLock on transaction",
];

pub struct Event {
    pub received_at: i64,
    pub payload: Vec<u8>,
}

/// Events for about `observations` observations, starting at `start_ms`.
pub struct Corpus {
    rng: Rng,
    t: i64,
    session: u64,
    tool: u64,
    pub observations: usize,
    target: usize,
    queue: std::collections::VecDeque<Event>,
}

impl Corpus {
    pub fn new(seed: u64, observations: usize, start_ms: i64) -> Corpus {
        Corpus {
            rng: Rng::new(seed),
            t: start_ms,
            session: 0,
            tool: 0,
            observations: 0,
            target: observations,
            queue: Default::default(),
        }
    }

    fn push(&mut self, v: Value, step_ms: i64, counts: bool) {
        self.t += step_ms;
        if counts {
            self.observations += 1;
        }
        self.queue.push_back(Event {
            received_at: self.t,
            payload: v.to_string().into_bytes(),
        });
    }

    fn session(&mut self) {
        self.session += 1;
        let (project, ext) = *self.rng.pick(PROJECTS);
        let cwd = format!("/home/dev/projects/{project}");
        let sid = format!(
            "{:08x}-0000-4000-8000-{:012x}",
            self.rng.next() as u32,
            self.session
        );
        let base = |event: &str| json!({"session_id": sid, "cwd": cwd, "hook_event_name": event});
        let mut start = base("SessionStart");
        start["source"] = json!(*self
            .rng
            .pick(&["startup", "startup", "startup", "resume", "clear", "compact"]));
        start["model"] = json!("claude-opus-4-7");
        let gap = 60_000 * (1 + self.rng.below(600)) as i64;
        self.push(start, gap, true);
        let files: Vec<String> = (0..12)
            .map(|_| {
                format!(
                    "{cwd}/{}/{}.{ext}",
                    self.rng.pick(DIRS),
                    self.rng.pick(STEMS)
                )
            })
            .collect();
        for _ in 0..(2 + self.rng.below(6)) {
            let verb = *self.rng.pick(VERBS);
            let topic = *self.rng.pick(TOPICS);
            let file = self.rng.pick(&files).clone();
            let short = file.rsplit('/').next().unwrap_or("").to_string();
            let mut p = base("UserPromptSubmit");
            p["prompt"] = json!(format!(
                "{verb} {topic} in {short}; keep the public API stable and add a test."
            ));
            self.push(p, 20_000, false);
            for _ in 0..(4 + self.rng.below(30)) {
                let call = self.tool_call(&files, &cwd);
                self.tool += 1;
                let mut e = base(if call.2.is_some() {
                    "PostToolUseFailure"
                } else {
                    "PostToolUse"
                });
                e["tool_name"] = json!(call.0);
                e["tool_input"] = call.1;
                match call.2 {
                    Some(err) => e["error"] = json!(err),
                    None => e["tool_response"] = call.3,
                }
                e["tool_use_id"] =
                    json!(format!("toolu_{:016x}{:08x}", self.rng.next(), self.tool));
                let step = 1_000 + self.rng.below(40_000) as i64;
                self.push(e, step, true);
            }
            let mut stop = base("Stop");
            stop["last_assistant_message"] = json!(format!(
                "{verb}ed {topic}: changed {short} and added a regression test; all tests pass."
            ));
            self.push(stop, 5_000, true);
        }
        let mut end = base("SessionEnd");
        end["reason"] = json!("other");
        self.push(end, 10_000, true);
    }

    fn tool_call(
        &mut self,
        files: &[String],
        cwd: &str,
    ) -> (&'static str, Value, Option<String>, Value) {
        let file = self.rng.pick(files).clone();
        let r = self.rng.below(100);
        match r {
            0..=24 => (
                "Read",
                json!({"file_path": file}),
                None,
                json!({"type": "text", "file": {"filePath": file, "numLines": 120, "startLine": 1, "totalLines": 120}}),
            ),
            25..=44 => {
                let a = self.rng.pick(STEMS);
                let b = self.rng.pick(STEMS);
                (
                    "Edit",
                    json!({"file_path": file, "old_string": format!("const {a} = load({a}Config);"), "new_string": format!("const {a} = await load{b}({a}Config, {{ retries: 3 }});")}),
                    None,
                    json!({"filePath": file}),
                )
            }
            45..=64 => {
                let cmd = *self.rng.pick(COMMANDS);
                if self.rng.chance(12) {
                    let err = *self.rng.pick(ERRORS);
                    (
                        "Bash",
                        json!({"command": cmd, "description": "Run checks"}),
                        Some(format!("Exit code 1\n{err}")),
                        Value::Null,
                    )
                } else {
                    (
                        "Bash",
                        json!({"command": cmd, "description": "Run checks"}),
                        None,
                        json!({"stdout": "ok\n", "stderr": "", "interrupted": false}),
                    )
                }
            }
            65..=71 => (
                "Grep",
                json!({"pattern": format!("{}\\(", self.rng.pick(STEMS)), "path": format!("{cwd}/src"), "output_mode": "files_with_matches"}),
                None,
                json!({"numFiles": self.rng.below(9)}),
            ),
            72..=76 => (
                "Glob",
                json!({"pattern": format!("**/*{}*", self.rng.pick(STEMS))}),
                None,
                json!({"numFiles": self.rng.below(9)}),
            ),
            77..=81 => (
                "Write",
                json!({"file_path": file, "content": format!("// {}\nexport {{}};\n", self.rng.next())}),
                None,
                json!({"type": "create", "filePath": file}),
            ),
            82..=85 => (
                "TodoWrite",
                json!({"todos": [{"content": format!("Fix {}", self.rng.pick(TOPICS)), "status": "in_progress"}, {"content": "Add a regression test", "status": "pending"}]}),
                None,
                Value::Null,
            ),
            86..=88 => (
                "WebSearch",
                json!({"query": format!("{} best practice", self.rng.pick(TOPICS))}),
                None,
                Value::Null,
            ),
            89..=90 => (
                "WebFetch",
                json!({"url": format!("https://docs.example.dev/{}", self.rng.pick(STEMS)), "prompt": "How is this configured?"}),
                None,
                json!({"code": 200}),
            ),
            91..=92 => (
                "Agent",
                json!({"description": format!("Review {}", self.rng.pick(TOPICS)), "subagent_type": "Explore"}),
                None,
                json!({"status": "completed"}),
            ),
            93..=94 => (
                "mcp__github__get_issue",
                json!({"owner": "acme-corp", "repo": "acme-api", "issue_number": 100 + self.rng.below(900)}),
                None,
                Value::Null,
            ),
            95..=96 => (
                "Bash",
                json!({"command": format!("git commit -am \"{} {}\"", self.rng.pick(VERBS), self.rng.pick(TOPICS))}),
                None,
                json!({"stdout": format!("[main {:07x}] change\n 2 files changed, 10 insertions(+), 3 deletions(-)\n", self.rng.next() as u32)}),
            ),
            _ => (
                "LS",
                json!({"path": format!("{cwd}/{}", self.rng.pick(DIRS))}),
                None,
                json!("- a\n- b\n"),
            ),
        }
    }
}

impl Iterator for Corpus {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        if self.queue.is_empty() {
            if self.observations >= self.target {
                return None;
            }
            self.session();
        }
        self.queue.pop_front()
    }
}

/// Claude Code transcripts of the corpus's sessions, one file per session, written into `dir`
/// until they hold at least `records` lines: prompts as user lines, each tool call as an
/// assistant `tool_use` line and a user `tool_result` line (with `toolUseResult`), each turn's
/// end as an assistant text line. Returns (files, lines).
pub fn write_claude_transcripts(
    seed: u64,
    records: usize,
    dir: &std::path::Path,
) -> std::io::Result<(usize, usize)> {
    use std::io::Write;
    let mut files = 0;
    let mut lines = 0;
    let mut current: Option<(String, std::io::BufWriter<std::fs::File>)> = None;
    let mut uuid = 0u64;
    for ev in Corpus::new(seed, usize::MAX, 1_700_000_000_000) {
        let v: Value = serde_json::from_slice(&ev.payload).expect("corpus JSON");
        let sid = v["session_id"].as_str().unwrap_or_default().to_string();
        let cwd = v["cwd"].as_str().unwrap_or_default();
        if current.as_ref().is_none_or(|(s, _)| *s != sid) {
            if lines >= records {
                break;
            }
            if let Some((_, mut w)) = current.take() {
                w.flush()?;
            }
            let f = std::fs::File::create(dir.join(format!("{sid}.jsonl")))?;
            current = Some((sid.clone(), std::io::BufWriter::new(f)));
            files += 1;
        }
        let w = &mut current.as_mut().expect("a file is open").1;
        let ts = nmem_proto::time::format_rfc3339_ms(ev.received_at);
        let lines_at = lines;
        let mut line = |body: Value| -> std::io::Result<()> {
            uuid += 1;
            let mut l = json!({"sessionId": sid, "cwd": cwd, "uuid": format!("u{uuid:016x}"),
                "timestamp": ts, "version": "2.1.200", "gitBranch": "main"});
            for (k, val) in body.as_object().expect("object") {
                l[k] = val.clone();
            }
            lines += 1;
            writeln!(w, "{l}")
        };
        match v["hook_event_name"].as_str() {
            Some("UserPromptSubmit") => {
                line(json!({"type": "user", "promptId": format!("p{lines_at:x}"),
                "message": {"role": "user", "content": v["prompt"]}}))?
            }
            Some(e @ ("PostToolUse" | "PostToolUseFailure")) => {
                let id = v["tool_use_id"].clone();
                line(
                    json!({"type": "assistant", "message": {"role": "assistant", "content": [
                    {"type": "tool_use", "id": id, "name": v["tool_name"], "input": v["tool_input"]}]}}),
                )?;
                if e == "PostToolUse" {
                    line(
                        json!({"type": "user", "toolUseResult": v["tool_response"], "message": {"role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": id, "content": "ok"}]}}),
                    )?;
                } else {
                    line(
                        json!({"type": "user", "toolUseResult": v["error"], "message": {"role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": id, "is_error": true, "content": v["error"]}]}}),
                    )?;
                }
            }
            Some("Stop") => line(json!({"type": "assistant", "message": {"role": "assistant",
                "content": [{"type": "text", "text": v["last_assistant_message"]}]}}))?,
            _ => {}
        }
    }
    if let Some((_, mut w)) = current {
        w.flush()?;
    }
    Ok((files, lines))
}

#[cfg(test)]
mod tests {
    #[test]
    fn deterministic() {
        let a: Vec<Vec<u8>> = super::Corpus::new(7, 500, 0).map(|e| e.payload).collect();
        let b: Vec<Vec<u8>> = super::Corpus::new(7, 500, 0).map(|e| e.payload).collect();
        assert_eq!(a, b);
        assert!(a.len() >= 500);
    }
}
