//! Bash (and the shells of other harnesses): `command`, `command_error`, and the git and GitHub
//! commands worth their own type.

use super::super::lifecycle::meta;
use super::super::text::{first_line, head_tail, str_of, truncate};
use super::super::{Cx, Obs, ToolCall};
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
        let mut content = truncate(command, cx.limits.content_chars);
        let body = err
            .strip_prefix("Exit code ")
            .map(|r| r.split_once('\n').map(|x| x.1).unwrap_or(""))
            .unwrap_or(err);
        let head = error_lines(body).unwrap_or_else(|| first_line(body, 300));
        if !head.is_empty() {
            content.push('\n');
            content.push_str(&head);
        }
        metadata.insert("exit_code".into(), json!(code));
        let output = if err.is_empty() {
            format!("{stdout}{stderr}")
        } else {
            err.clone()
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
    // What the command said last (a test summary, "Migrated 3 …"), so it can be found again.
    if let Some(last) = format!("{stdout}\n{stderr}")
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
    {
        content.push_str("\n→ ");
        content.push_str(&truncate(last, OUTPUT_LINE));
    }
    Some(Obs {
        obs_type,
        content,
        metadata,
        ..Obs::default()
    })
}

/// Characters of a successful command's last output line kept in its searchable content.
const OUTPUT_LINE: usize = 160;
/// Error lines of a failure kept in its searchable content.
const ERROR_LINES: usize = 3;

/// The lines of a failure's output that say what went wrong: those that mention an error, a
/// failure or a missing thing (at most a few, distinct); tool banners (`> pkg@1.0 test`) are not.
fn error_lines(output: &str) -> Option<String> {
    const MARKERS: &[&str] = &[
        "error",
        "failed",
        "fail ",
        "not found",
        "cannot",
        "can't",
        "denied",
        "panicked",
        "exception",
        "fatal",
        "✗",
        "×",
    ];
    let mut found: Vec<String> = Vec::new();
    for l in output.lines().map(str::trim) {
        let lower = l.to_lowercase();
        if !l.is_empty()
            && MARKERS.iter().any(|m| lower.contains(m))
            && !found.iter().any(|f| f.as_str() == truncate(l, 200))
        {
            found.push(truncate(l, 200));
            if found.len() == ERROR_LINES {
                break;
            }
        }
    }
    (!found.is_empty()).then(|| found.join("\n"))
}

/// stdout and stderr, whatever shape the response has.
fn outputs(resp: Option<&Value>) -> (String, String) {
    match resp {
        Some(Value::String(s)) => (s.clone(), String::new()),
        Some(r @ Value::Object(_)) => (
            str_of(r, "stdout")
                .or_else(|| str_of(r, "output"))
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
            "FAIL  src/routes/invoices.test.ts > pages\nAssertionError: expected 2 to be 1\nerror 3"
        );
        assert_eq!(error_lines("all good"), None);
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
