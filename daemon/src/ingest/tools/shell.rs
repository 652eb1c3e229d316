//! Bash (and the shells of other harnesses): `command`, `command_error`, and the git and GitHub
//! commands worth their own type.

use super::super::lifecycle::meta;
use super::super::text::{first_line, head_tail, str_of, truncate};
use super::super::{clean, Cx, Obs, ToolCall};
use serde_json::{json, Map, Value};

pub(super) fn extract(cx: &Cx, call: &ToolCall) -> Option<Obs> {
    let command = match call.input.get("command") {
        Some(Value::String(s)) => s.clone(),
        // Codex's exec tools pass argv.
        Some(Value::Array(argv)) => argv
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" "),
        _ => call
            .input
            .get("cmd")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
    };
    let command = command.trim();
    if command.is_empty() {
        return None;
    }
    let (stdout, stderr) = outputs(call.response.as_deref());
    let mut metadata = meta([("description", json!(str_of(&call.input, "description")))]);
    if let Some((err, code)) = &call.failure {
        let err = clean::strip(err);
        let mut content = truncate(command, cx.limits.content_chars);
        let body = err
            .strip_prefix("Exit code ")
            .map(|r| r.split_once('\n').map(|x| x.1).unwrap_or(""))
            .unwrap_or(&err);
        let body = if body.trim().is_empty() {
            // Codex and Cursor put a failure's output in the response.
            format!("{stdout}\n{stderr}")
        } else {
            body.to_string()
        };
        let head = error_lines(&body).unwrap_or_else(|| first_line(&body, 300));
        if !head.is_empty() {
            content.push('\n');
            content.push_str(&head);
        }
        metadata.insert("exit_code".into(), json!(code));
        let output = if err.is_empty() {
            format!("{stdout}{stderr}")
        } else {
            err.into_owned()
        };
        metadata.insert(
            "output".into(),
            json!(head_tail(
                &output,
                cx.limits.output_head,
                cx.limits.output_tail
            )),
        );
        return Some(Obs {
            obs_type: "command_error",
            content,
            metadata,
            ..Obs::default()
        });
    }
    if call
        .response
        .as_deref()
        .and_then(|r| r.get("interrupted"))
        .and_then(Value::as_bool)
        == Some(true)
    {
        metadata.insert("interrupted".into(), json!(true));
    }
    let obs_type = classify(command);
    match obs_type {
        "git_commit" => git_commit_meta(command, &stdout, &mut metadata),
        "git_push" => git_push_meta(&stdout, &stderr, &mut metadata),
        _ => {}
    }
    let mut content = truncate(command, cx.limits.content_chars);
    // What the command said (a test summary, "Migrated 3 …"), so it can be found again.
    for line in result_lines(&format!("{stdout}\n{stderr}")) {
        content.push_str("\n→ ");
        content.push_str(&line);
    }
    Some(Obs {
        obs_type,
        content,
        metadata,
        ..Obs::default()
    })
}

/// `BashOutput`/`TaskOutput`: the output of a command started in the background, read later.
/// Stored like the command itself (`command`, or `command_error` when it exited non-zero), with
/// its result lines.
pub(super) fn background_output(cx: &Cx, call: &ToolCall) -> Option<Obs> {
    let resp = call.response.as_deref();
    // TaskOutput nests the task; BashOutput answers flat.
    let task = resp.and_then(|r| r.get("task")).or(resp);
    let field = |k: &str| task.and_then(|t| str_of(t, k));
    let id = str_of(&call.input, "bash_id")
        .or_else(|| str_of(&call.input, "task_id"))
        .or_else(|| str_of(&call.input, "shell_id"));
    let what = field("command")
        .or_else(|| field("description"))
        .map(str::to_string)
        .or_else(|| id.map(|i| format!("background task {i}")))?;
    let (stdout, stderr) = outputs(task);
    let output = format!("{stdout}\n{stderr}");
    let code = task
        .and_then(|t| t.get("exitCode").or_else(|| t.get("exit_code")))
        .and_then(Value::as_i64);
    let mut metadata = meta([
        ("background_id", json!(id)),
        ("status", json!(field("status"))),
        ("exit_code", json!(code)),
    ]);
    let mut content = truncate(what.trim(), cx.limits.content_chars);
    if code.is_some_and(|c| c != 0) {
        if let Some(head) = error_lines(&output) {
            content.push('\n');
            content.push_str(&head);
        }
        metadata.insert(
            "output".into(),
            json!(head_tail(
                &clean::strip(&output),
                cx.limits.output_head,
                cx.limits.output_tail
            )),
        );
        return Some(Obs {
            obs_type: "command_error",
            content,
            metadata,
            ..Obs::default()
        });
    }
    for line in result_lines(&output) {
        content.push_str("\n→ ");
        content.push_str(&line);
    }
    Some(Obs {
        obs_type: "command",
        content,
        metadata,
        ..Obs::default()
    })
}

/// Characters of each output line kept in a command's searchable content.
const OUTPUT_LINE: usize = 160;
/// Result lines of a successful command kept in its searchable content.
const RESULT_LINES: usize = 3;
/// Error lines of a failure kept in its searchable content.
const ERROR_LINES: usize = 4;

/// Lines that say nothing about the result: blank, progress bars, echoed script banners
/// (`> tsc`, `> pkg@1.0 build`), truncation markers, warnings (`warnings.warn(`, `npm WARN`,
/// `DeprecationWarning`, git's CRLF notices). Its patterns and [`is_truncation_marker`]'s are
/// matched in an ASCII-lowercased copy, which gives them the answers full Unicode lowercasing
/// gives (the one letter that lowercases into ASCII is the Kelvin sign, into a `k` no pattern
/// has; `İ` becomes an `i` and a combining dot, and no pattern has an `i` before anything but a
/// letter), without its table lookups on every line of every command's output.
fn is_noise(l: &str) -> bool {
    if l.is_empty() || l.starts_with("> ") || l == ">" || is_progress(l) || is_truncation_marker(l)
    {
        return true;
    }
    let lower = l.to_ascii_lowercase();
    lower.starts_with("warning")
        || lower.starts_with("npm warn")
        || lower.starts_with("warn ")
        || lower.contains("warnings.warn(")
        || lower.contains("warning: ")
        || lower.contains("deprecationwarning")
        || lower.contains("userwarning")
        || lower.contains("futurewarning")
        || lower.contains("will be replaced by crlf")
        || lower.contains("will be replaced by lf")
}

/// `... [1010 lines truncated] ...`, `[truncated]`, `… [N chars elided] …`.
fn is_truncation_marker(l: &str) -> bool {
    if !(l.starts_with("...") || l.starts_with('…') || l.starts_with('[')) {
        return false;
    }
    let lower = l.to_ascii_lowercase();
    lower.contains("truncated") || lower.contains("elided") || lower.contains("omitted")
}

/// A progress bar or spinner: mostly bar characters, or a percentage with a bar.
fn is_progress(l: &str) -> bool {
    const BAR: &[char] = &[
        '█', '▓', '▒', '░', '■', '□', '━', '─', '=', '#', '>', '-', '.', '|', '/', '\\', '[', ']',
        ' ', '⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏',
    ];
    let n = l.chars().count();
    let bar = l.chars().filter(|c| BAR.contains(c)).count();
    let has_bar_run = ["███", "===", "###", "━━━", "▓▓▓", "░░░", "---"]
        .iter()
        .any(|r| l.contains(r));
    (n > 0 && bar * 10 >= n * 9) || (has_bar_run && l.contains('%'))
}

/// Lines that report success: never the error summary of a failure.
fn is_passing(l: &str) -> bool {
    let lower = l.to_lowercase();
    if lower.contains("fail") || lower.contains("error") {
        return false; // "1 failed, 3 passed" is a failure's summary
    }
    l.starts_with(['✓', '✔', '√'])
        || lower.starts_with("pass ")
        || lower.starts_with("ok ")
        || lower.ends_with(" ... ok")
        || lower.ends_with(" passed")
        || lower.ends_with(" ok")
}

/// The last few meaningful lines of a successful command's output, bounded.
fn result_lines(output: &str) -> Vec<String> {
    let output = clean::strip(output);
    let mut lines: Vec<String> = Vec::new();
    for l in output.lines().rev().map(str::trim) {
        if is_noise(l) {
            continue;
        }
        let l = truncate(l, OUTPUT_LINE);
        if !lines.contains(&l) {
            lines.push(l);
        }
        if lines.len() == RESULT_LINES {
            break;
        }
    }
    lines.reverse();
    lines
}

/// How strongly a line of a failure's output says what failed: 3 for the failure itself (`✗`,
/// `●`, `FAIL`, `error:`, `panicked`, `Traceback`, an assertion's expected/actual, a failing
/// test's name), 1 for a line that mentions an error, 0 for the rest (passing lines and noise
/// included).
fn failure_score(l: &str) -> u8 {
    if is_passing(l) || is_noise(l) {
        return 0;
    }
    let lower = l.to_lowercase();
    const STRONG_START: &[&str] = &[
        "✗",
        "✘",
        "×",
        "✕",
        "●",
        "fail",
        "error",
        "e   ",
        "traceback",
        "thread '",
        "---- ",
        "assertionerror",
        "expected",
        "received",
        "left:",
        "right:",
        "- expected",
        "+ received",
    ];
    const STRONG_ANYWHERE: &[&str] = &[
        "error:",
        "error[",
        "panicked at",
        "assertion",
        " ... failed",
        "failed:",
        "exception:",
        "fatal:",
        "not ok ",
    ];
    // `pyarrow.lib.ArrowInvalid: …`, `KeyError: 'id'`: an exception's name, then its message.
    let exception = l.split_once(": ").is_some_and(|(name, _)| {
        !name.contains(char::is_whitespace)
            && ["Error", "Exception", "Invalid", "Exit", "Interrupt"]
                .iter()
                .any(|e| name.ends_with(e))
    });
    if exception
        || STRONG_START.iter().any(|m| lower.starts_with(m))
        || STRONG_ANYWHERE.iter().any(|m| lower.contains(m))
    {
        return 3;
    }
    const WEAK: &[&str] = &[
        "error",
        "failed",
        "failure",
        "fail ",
        "not found",
        "cannot",
        "can't",
        "denied",
        "exception",
        "fatal",
        "no such",
        "refused",
        "timed out",
    ];
    u8::from(WEAK.iter().any(|m| lower.contains(m)))
}

/// The lines of a failure's output that say what went wrong: the strongest ones (at most a few,
/// distinct), in the order they came; passing lines, banners and progress never.
fn error_lines(output: &str) -> Option<String> {
    let output = clean::strip(output);
    let mut scored: Vec<(u8, usize, String)> = Vec::new();
    for (i, l) in output.lines().map(str::trim).enumerate() {
        let score = failure_score(l);
        let l = truncate(l, 200);
        if score > 0 && !scored.iter().any(|(_, _, f)| *f == l) {
            scored.push((score, i, l));
        }
    }
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.truncate(ERROR_LINES);
    scored.sort_by_key(|x| x.1);
    (!scored.is_empty()).then(|| {
        scored
            .into_iter()
            .map(|x| x.2)
            .collect::<Vec<_>>()
            .join("\n")
    })
}

/// stdout and stderr, whatever shape the response has.
fn outputs(resp: Option<&Value>) -> (String, String) {
    match resp {
        Some(Value::String(s)) => (s.clone(), String::new()),
        Some(r @ Value::Object(_)) => (
            str_of(r, "stdout")
                .or_else(|| str_of(r, "output"))
                .or_else(|| str_of(r, "aggregated_output"))
                .unwrap_or("")
                .to_string(),
            str_of(r, "stderr").unwrap_or("").to_string(),
        ),
        _ => (String::new(), String::new()),
    }
}

/// The segments of a command line joined by `&&`, `||`, `;` or `|`.
fn segments(command: &str) -> impl Iterator<Item = &str> {
    command
        .split(['&', '|', ';', '\n'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

fn git_subcommand(segment: &str) -> Option<&str> {
    let mut words = segment
        .split_whitespace()
        .skip_while(|w| w.contains('=') && !w.starts_with('-'));
    if words.next()? != "git" {
        return None;
    }
    let mut words = words.peekable();
    // Skip global options such as `-C dir` or `-c key=value`.
    while let Some(w) = words.peek() {
        if *w == "-C" || *w == "-c" {
            words.next();
            words.next();
        } else if w.starts_with('-') {
            words.next();
        } else {
            break;
        }
    }
    words.next()
}

pub(super) fn classify(command: &str) -> &'static str {
    let mut kind = "command";
    for seg in segments(command) {
        match git_subcommand(seg) {
            Some("commit") => return "git_commit",
            Some("push") => kind = "git_push",
            _ if kind == "command" && (seg.starts_with("gh ") || seg == "gh") => kind = "github",
            _ => {}
        }
    }
    kind
}

/// `[branch abc1234] message` and ` 3 files changed, 10 insertions(+), 2 deletions(-)`.
fn git_commit_meta(command: &str, stdout: &str, meta: &mut Map<String, Value>) {
    if let Some(line) = stdout
        .lines()
        .find(|l| l.starts_with('[') && l.contains(']'))
    {
        let inner = &line[1..line.find(']').unwrap_or(1)];
        let mut parts: Vec<&str> = inner.split_whitespace().collect();
        if let Some(hash) = parts.pop() {
            meta.insert("hash".into(), json!(hash));
        }
        if let Some(branch) = parts.iter().find(|p| **p != "(root-commit)") {
            meta.insert("branch".into(), json!(branch));
        }
        let msg = line[line.find(']').map(|i| i + 1).unwrap_or(0)..].trim();
        if !msg.is_empty() {
            meta.insert("message".into(), json!(truncate(msg, 200)));
        }
    }
    if !meta.contains_key("message") {
        if let Some(msg) = commit_message_arg(command) {
            meta.insert("message".into(), json!(truncate(&msg, 200)));
        }
    }
    if let Some(stat) = stdout
        .lines()
        .map(str::trim)
        .find(|l| l.contains("changed") && l.contains("file"))
    {
        meta.insert("diffstat".into(), json!(stat));
    }
}

fn commit_message_arg(command: &str) -> Option<String> {
    let i = command.find(" -m ").or_else(|| command.find(" -am "))?;
    let rest = command[i..].trim_start().split_once(' ')?.1.trim_start();
    let quote = rest.chars().next()?;
    if quote == '"' || quote == '\'' {
        let body = &rest[1..];
        Some(body[..body.find(quote).unwrap_or(body.len())].to_string())
    } else {
        Some(rest.split_whitespace().next()?.to_string())
    }
}

/// ` abc1234..def5678  main -> main` in git push's output (on stderr).
fn git_push_meta(stdout: &str, stderr: &str, meta: &mut Map<String, Value>) {
    for line in stderr.lines().chain(stdout.lines()) {
        let l = line.trim();
        if let Some(to) = l.strip_prefix("To ") {
            meta.insert("remote".into(), json!(to.trim()));
        } else if let Some((range, refs)) = l.split_once(char::is_whitespace) {
            if range.contains("..") || l.starts_with("* [new branch]") {
                if let Some((_, dst)) = refs.split_once("->") {
                    meta.insert("branch".into(), json!(dst.trim()));
                }
                if range.contains("..") {
                    meta.insert("range".into(), json!(range));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Lowercasing ASCII only gives the noise and truncation checks the answers full
        /// lowercasing gave, whatever the letters around the patterns.
        #[test]
        fn noise_is_what_full_lowercasing_said(
            l in "(warning|WARNING|Warn |npm WARN|warnings\\.warn\\(|Warning: |DeprecationWarning|USERWARNING|FutureWarning|will be replaced by (CRLF|LF)|TRUNCATED|Elided|omitted|\\.\\.\\.|…|\\[|> |\u{212A}|\u{130}|\u{17F}|\u{C9}|[a-zA-Z :\\]])*"
        ) {
            let lower = l.to_lowercase();
            let truncation = (lower.contains("truncated")
                || lower.contains("elided")
                || lower.contains("omitted"))
                && (l.starts_with("...") || l.starts_with('…') || l.starts_with('['));
            let noise = l.is_empty()
                || l.starts_with("> ")
                || l == ">"
                || is_progress(&l)
                || truncation
                || lower.starts_with("warning")
                || lower.starts_with("npm warn")
                || lower.starts_with("warn ")
                || lower.contains("warnings.warn(")
                || lower.contains("warning: ")
                || lower.contains("deprecationwarning")
                || lower.contains("userwarning")
                || lower.contains("futurewarning")
                || lower.contains("will be replaced by crlf")
                || lower.contains("will be replaced by lf");
            prop_assert_eq!(is_truncation_marker(&l), truncation, "{:?}", l);
            prop_assert_eq!(is_noise(&l), noise, "{:?}", l);
        }
    }

    #[test]
    fn classifies_git_and_github() {
        assert_eq!(classify("git commit -m 'x'"), "git_commit");
        assert_eq!(
            classify("git add -A && git commit -m \"fix\""),
            "git_commit"
        );
        assert_eq!(classify("git -C repo push origin main"), "git_push");
        assert_eq!(classify("GIT_TRACE=1 git push"), "git_push");
        assert_eq!(classify("gh pr create --fill"), "github");
        assert_eq!(classify("npm test"), "command");
        assert_eq!(classify("echo git commit"), "command");
    }

    #[test]
    fn the_error_lines_are_those_that_say_what_failed() {
        let out = "\n> acme-api@1.14.2 test\n> vitest --run\n\n FAIL  src/routes/invoices.test.ts > pages\n  at x.ts:3\nAssertionError: expected 2 to be 1\nFAIL  src/routes/invoices.test.ts > pages\nerror 3\nerror 4";
        assert_eq!(
            error_lines(out).unwrap(),
            "FAIL  src/routes/invoices.test.ts > pages\nAssertionError: expected 2 to be 1\nerror 3\nerror 4"
        );
        assert_eq!(error_lines("all good"), None);
    }

    /// (output of a failed command, lines that must be in its summary, lines that must not).
    const FAILURES: &[(&str, &[&str], &[&str])] = &[
        // Passing ✓ lines around one ✗: the failing test, never a passing one.
        (
            "\u{1b}[32m ✓\u{1b}[39m src/a.test.ts (3 tests) 12ms\n \u{1b}[32m✓\u{1b}[39m src/b.test.ts (5 tests)\n \u{1b}[31m✗\u{1b}[39m src/ledger.test.ts > totals > rounds half-even\n   → expected 10.5 to be 10.4\n ✓ src/c.test.ts (2 tests)\n Test Files  1 failed | 3 passed (4)",
            &["✗ src/ledger.test.ts > totals > rounds half-even", "Test Files  1 failed | 3 passed (4)"],
            &["✓ src/a.test.ts", "✓ src/b.test.ts", "\u{1b}"],
        ),
        // Jest: the ● test name and the expected/received diff.
        (
            "PASS src/util.test.ts\nFAIL src/cart.test.ts\n  ● Cart › applies the coupon once\n\n    expect(received).toBe(expected)\n\n    Expected: 90\n    Received: 81\n\n      at Object.<anonymous> (src/cart.test.ts:14:5)",
            &["● Cart › applies the coupon once", "Expected: 90", "Received: 81"],
            &["PASS src/util.test.ts"],
        ),
        // cargo test: the panicking test and its assertion, not `test … ok`.
        (
            "running 3 tests\ntest parse::ok_case ... ok\ntest parse::bad_date ... FAILED\n\nfailures:\n\n---- parse::bad_date stdout ----\nthread 'parse::bad_date' panicked at src/parse.rs:40:9:\nassertion `left == right` failed\n  left: 13\n right: 12\n\ntest result: FAILED. 2 passed; 1 failed",
            &["test parse::bad_date ... FAILED", "panicked at src/parse.rs:40:9"],
            &["test parse::ok_case ... ok"],
        ),
        // Python: the traceback's exception, with a progress bar before it.
        (
            "Downloading model ━━━━━━━━━━━━━━━━━━━━━━━ 100% 0:00:01\nTraceback (most recent call last):\n  File \"etl.py\", line 12, in <module>\n    df.to_parquet(out)\npyarrow.lib.ArrowInvalid: Could not convert 'n/a' with type str: tried to convert to double",
            &["Traceback (most recent call last):", "pyarrow.lib.ArrowInvalid: Could not convert"],
            &["Downloading model"],
        ),
    ];

    #[test]
    fn failure_summaries_name_what_failed() {
        for (out, want, never) in FAILURES {
            let got = error_lines(out).unwrap();
            for w in *want {
                assert!(got.contains(w), "{w:?} missing from {got:?}");
            }
            for n in *never {
                assert!(!got.contains(n), "{n:?} in {got:?}");
            }
        }
    }

    #[test]
    fn successful_commands_keep_their_result_not_noise() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            (
                "Compiled 42 files\nBuild finished in 3.2s\n/usr/lib/python3/site-packages/x.py:12: UserWarning: deprecated\n  warnings.warn(",
                &["Compiled 42 files", "Build finished in 3.2s"],
                &["warnings.warn(", "UserWarning"],
            ),
            (
                "\n> acme-api@1.14.2 build\n> tsc\n\n",
                &[],
                &["> tsc", "acme-api@1.14.2"],
            ),
            (
                "line 1\n... [1010 lines truncated] ...\nSeeded 120 invoices\r\nwarning: in the working copy of 'src/a.ts', LF will be replaced by CRLF the next time Git touches it\n",
                &["Seeded 120 invoices"],
                &["truncated", "CRLF", "\r"],
            ),
            (
                "[=====>      ] 45%\r[============] 100%\nDone: 3 migrations applied\n",
                &["Done: 3 migrations applied"],
                &["45%", "100%"],
            ),
        ];
        for (out, want, never) in cases {
            let got = result_lines(out).join("\n");
            for w in *want {
                assert!(got.contains(w), "{w:?} missing from {got:?}");
            }
            for n in *never {
                assert!(!got.contains(n), "{n:?} in {got:?}");
            }
            assert!(got.chars().count() <= RESULT_LINES * (OUTPUT_LINE + 30));
        }
    }

    #[test]
    fn commit_metadata() {
        let mut m = Map::new();
        git_commit_meta(
            "git commit -m 'fix: skip cursor row'",
            "[fix/482 3f2a9c1] fix: skip cursor row\n 2 files changed, 14 insertions(+), 1 deletion(-)\n",
            &mut m,
        );
        assert_eq!(m["branch"], "fix/482");
        assert_eq!(m["hash"], "3f2a9c1");
        assert_eq!(m["message"], "fix: skip cursor row");
        assert_eq!(
            m["diffstat"],
            "2 files changed, 14 insertions(+), 1 deletion(-)"
        );
    }

    #[test]
    fn push_metadata() {
        let mut m = Map::new();
        git_push_meta(
            "",
            "To github.com:acme/api.git\n   3f2a9c1..8b7e6d5  fix/482 -> fix/482\n",
            &mut m,
        );
        assert_eq!(m["remote"], "github.com:acme/api.git");
        assert_eq!(m["branch"], "fix/482");
        assert_eq!(m["range"], "3f2a9c1..8b7e6d5");
    }
}
