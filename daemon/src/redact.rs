//! Redaction: nothing that looks like a credential reaches SQLite.
//!
//! Runs in the daemon on every stored string (content, metadata leaves, prompts, paths, session
//! titles) before the writer sees it, and first on the whole payload ([`Redactor::redact_payload`])
//! so that no truncation or summary can cut a secret in two before it is recognised.
//!
//! Two kinds of rules:
//! * **Typed and context-anchored** ([`BUILTIN`]): known formats (`ghp_…`, `AKIA…`, JWTs, key
//!   blocks) and values that follow something saying "a secret comes next" (`--api-key`,
//!   `sshpass -p`, `DD-API-KEY:`, `&sig=`, a `.netrc` `password` field, "the password is …").
//!   Whatever follows an anchor is redacted, hex strings and UUIDs included.
//! * **Context-free**: long high-entropy tokens ([`Redactor::redact_high_entropy`]) mixing upper-
//!   and lowercase letters and digits. This is the only rule that exempts hex runs of 7–64
//!   characters (git SHAs, hashes) and UUIDs, and the only one that looks at structure: paths and
//!   URLs keep every segment but one that is itself a credential; store and cache folders (Nix,
//!   pnpm, macOS temp), `data:` URIs, SRI hashes and ssh public keys are never redacted.
//!
//! Replacements are typed markers such as `[REDACTED:github_token]`. `<private>…</private>` spans
//! and nmem's own injected context (`<nmem-context>…</nmem-context>`) are dropped. Redaction is
//! idempotent: a second pass over its output changes nothing.

use crate::ingest::{Prepared, Record};
use regex::{Regex, RegexSet};
use serde_json::Value;

/// A compiled rule: what it finds, and which capture group is the secret (0: all of it).
struct Rule {
    name: String,
    re: Regex,
    group: usize,
    check: Check,
}

/// What a rule's match must also pass to count. A built-in rule's name carries it after a `/`
/// (`password/prose`); the marker uses the part before.
#[derive(Clone, Copy, PartialEq)]
enum Check {
    None,
    /// "the password is …": not when what follows is an ordinary word ("is required").
    Prose,
    /// `--token $TOKEN`: a reference to a variable is not its value.
    Flag,
}

pub struct Redactor {
    rules: Vec<Rule>,
    set: RegexSet,
    private: Regex,
    own_context: Regex,
    dotenv: Regex,
}

/// An extra pattern from config.toml.
#[derive(Debug, Clone, serde::Deserialize, PartialEq, Eq)]
pub struct ExtraPattern {
    pub name: String,
    pub regex: String,
}

const BUILTIN: &[(&str, &str, usize)] = &[
    (
        "private_key",
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)",
        0,
    ),
    ("anthropic_key", r"\bsk-ant-[A-Za-z0-9_\-]{20,}", 0),
    (
        "openai_key",
        r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
        0,
    ),
    (
        "stripe_key",
        r"\b(?:sk|rk|pk|whsec)_(?:live|test)_[A-Za-z0-9]{10,}",
        0,
    ),
    (
        "github_token",
        r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}",
        0,
    ),
    ("github_token", r"\bgithub_pat_[A-Za-z0-9_]{20,}", 0),
    ("gitlab_token", r"\bglpat-[A-Za-z0-9_\-]{20,}", 0),
    ("slack_token", r"\bxox[abposre]-[A-Za-z0-9\-]{10,}", 0),
    (
        "slack_webhook",
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_\-]+",
        0,
    ),
    (
        "aws_access_key",
        r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b",
        0,
    ),
    (
        "aws_secret_key",
        r"(?i)aws_?secret_?(?:access_?)?key(?:_id)?[\x22'\s:=]+([A-Za-z0-9/+]{40})\b",
        1,
    ),
    ("google_api_key", r"\bAIza[0-9A-Za-z_\-]{35}", 0),
    ("npm_token", r"\bnpm_[A-Za-z0-9]{36}\b", 0),
    ("pypi_token", r"\bpypi-[A-Za-z0-9_\-]{50,}", 0),
    ("huggingface_token", r"\bhf_[A-Za-z0-9]{30,}\b", 0),
    (
        "sendgrid_key",
        r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}",
        0,
    ),
    ("twilio_key", r"\bSK[0-9a-f]{32}\b", 0),
    (
        "jwt",
        r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        0,
    ),
    (
        "connection_string_password",
        r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^:/\s@]*:([^@\s/]+)@",
        1,
    ),
    // Values after an anchor that says what they are: redacted whatever they look like.
    (
        "url_secret",
        r"(?i)(?:[?&;](?:sig|signature|x-amz-signature|x-goog-signature|x-amz-security-token|token|access_token|refresh_token|id_token|auth|auth_token|api_key|apikey|api-key|client_secret|secret|password|passwd|pwd)|(?:^|[\s\x22'])(?:sig|signature))=([^&\s\x22'#<>]+)",
        1,
    ),
    (
        "telegram_bot_token",
        r"\b(?:bot)?(\d{6,12}:A[A-Za-z0-9_\-]{30,})",
        1,
    ),
    (
        "discord_webhook",
        r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/([A-Za-z0-9_\-]+)",
        1,
    ),
    (
        "twilio_auth_token",
        r"\bAC[0-9a-f]{32}\b[\x22'\s,:;]{1,6}([0-9a-f]{32})\b",
        1,
    ),
    (
        "cli_secret_flag/flag",
        r"(?:^|[\s\x22'])(?:--auth|--api-key|--apikey|--api-token|--auth-token|--access-token|--token|--password|--passwd|--secret|--client-secret)(?:=|\s+)[\x22']?([^\s\x22']+)",
        1,
    ),
    (
        "password",
        r"\bdocker\s+login\b[^\n|;&]*?\s(?:-p|--password)(?:=|\s+)[\x22']?([^\s\x22']+)",
        1,
    ),
    ("password", r"\bsshpass\s+-p\s*[\x22']?([^\s\x22']+)", 1),
    (
        "password",
        r"\bredis-cli\b[^\n|;&]*?\s(?:-a|--pass)(?:=|\s+)[\x22']?([^\s\x22']+)",
        1,
    ),
    (
        "api_key_header",
        r"(?i)\b(?:[A-Za-z0-9]+-)*(?:api|app|application)-key[\x22']?\s*:\s*[\x22']?([^\s\x22',;]+)",
        1,
    ),
    (
        "api_key_header",
        r"(?i)\b(?:x-(?:[A-Za-z0-9]+-)*token|private-token|auth-token|access-token)[\x22']?\s*:\s*[\x22']?([^\s\x22',;]+)",
        1,
    ),
    (
        "authorization_header",
        r"(?i)\bauthorization[\x22']?\s*:\s*[\x22']?(?:basic|bearer|token|bot|digest|apikey|sso-key)\s+([^\s\x22']+)",
        1,
    ),
    (
        "netrc_password",
        r"(?i)\b(?:machine\s+\S+(?:\s+(?:login|account)\s+\S+)*|default(?:\s+(?:login|account)\s+\S+)+)\s+password\s+(\S+)",
        1,
    ),
    (
        "pgpass_password",
        r"(?m)(?:^|[\s\x22'])[^\s:#\x22']+:(?:\d{1,5}|\*):[^\s:\x22']+:[^\s:\x22']+:([^\s\x22']+?)(?:[\x22']|\r?$)",
        1,
    ),
    (
        "password/prose",
        r"(?i)\b(?:password|passphrase|passwd|passcode)\b(?:\s+(?:for|of|on|to)\s+(?:the\s+|my\s+|our\s+)?[\w.@:/\-]+)?\s+(?:is|was|will\s+be)\s*:?\s*[\x22'`]?([^\s\x22'`]{3,})",
        1,
    ),
    ("mailgun_key", r"\bkey-[0-9a-z]{32}\b", 0),
    (
        "bearer_token",
        r"(?i)\b(?:bearer|token)\s+([A-Za-z0-9._~+/\-]{16,}=*)",
        1,
    ),
    (
        "basic_auth",
        r"(?:\s-u|--user)\s+['\x22]?[^\s:'\x22]+:([^\s'\x22]+)",
        1,
    ),
    (
        "password",
        r"\b(?:mysql|mysqldump|mariadb|mysqladmin)\b[^\n|;&]*?\s-p([^\s'\x22]+)",
        1,
    ),
    (
        "secret_assignment",
        r#"(?i)\b[A-Za-z0-9_.\-]*(?:password|passwd|passphrase|pwd|secret|token|api_?key|apikey|access_?key|private_?key|credentials?|auth_?key|signing_?key|account_?key|shared_?access_?key)[A-Za-z0-9_\-]*["']?\s*[:=]\s*(?:"([^"\n]{4,})"|'([^'\n]{4,})'|([^\s"',;&|]{4,}))"#,
        0,
    ),
];

impl Redactor {
    /// Compile the built-in rules and the user's extra ones. An invalid extra pattern is
    /// reported (name and error) and skipped; every other rule still applies.
    pub fn new(extra: &[ExtraPattern]) -> (Redactor, Vec<String>) {
        // Secrets are ASCII: ASCII word boundaries keep the fast engines on any text (a Unicode
        // `\b` sends every haystack with a non-ASCII character, `✓` in test output say, to the
        // slow one, and halved the ingest rate).
        let ascii = |re: &str| re.replace(r"\b", r"(?-u:\b)");
        let mut rules: Vec<Rule> = BUILTIN
            .iter()
            .map(|(name, re, group)| {
                let (name, check) = match name.split_once('/') {
                    Some((n, "prose")) => (n, Check::Prose),
                    Some((n, "flag")) => (n, Check::Flag),
                    _ => (*name, Check::None),
                };
                Rule {
                    name: name.to_string(),
                    re: Regex::new(&ascii(re)).expect("built-in redaction pattern"),
                    group: *group,
                    check,
                }
            })
            .collect();
        let mut errors = Vec::new();
        for p in extra {
            match Regex::new(&p.regex) {
                Ok(re) => rules.push(Rule {
                    name: p.name.clone(),
                    re,
                    group: 0,
                    check: Check::None,
                }),
                Err(e) => errors.push(format!(
                    "redaction pattern `{}` in config.toml is invalid and was skipped: {e}",
                    p.name
                )),
            }
        }
        let set = RegexSet::new(rules.iter().map(|r| r.re.as_str())).expect("rules compiled");
        let redactor = Redactor {
            rules,
            set,
            private: Regex::new(r"(?s)<private>.*?(?:</private>|\z)").unwrap(),
            own_context: Regex::new(r"(?s)<nmem-context>.*?(?:</nmem-context>|\z)").unwrap(),
            dotenv: Regex::new(
                r"(?m)^([-+]?\s*(?:export\s+)?[A-Za-z_][A-Za-z0-9_.]*\s*=\s*)(\S.*)$",
            )
            .unwrap(),
        };
        (redactor, errors)
    }

    /// Redact one string in place; returns how many secrets were replaced.
    pub fn redact(&self, s: &mut String) -> u32 {
        // Dropping a span can join what was around it into a new one: until none is left.
        while s.contains("<private>") {
            *s = self.private.replace_all(s, "").into_owned();
        }
        while s.contains("<nmem-context>") {
            *s = self.own_context.replace_all(s, "").into_owned();
        }
        let mut count = 0;
        // A replacement changes the text the other rules see (an anchor's value is gone, a
        // neighbour's context changed), so a pass that replaced something is followed by another
        // until one replaces nothing: a second `redact` over the result then has nothing to do.
        for _ in 0..4 {
            let mut n = 0;
            let hits = self.set.matches(s);
            if hits.matched_any() {
                for i in hits.iter() {
                    n += self.apply_rule(&self.rules[i], s);
                }
            }
            n += self.redact_high_entropy(s);
            count += n;
            if n == 0 {
                break;
            }
        }
        count
    }

    /// Redact every string of a hook payload in place, before anything is extracted from it: the
    /// extractors cut and summarise (an 80-character argument, the first line of an error), and a
    /// secret cut in two is no longer recognisable. Identifiers and the envelope's paths are left
    /// as they are (the event's identity and the transcript to read); whatever of them is stored
    /// is redacted again on the way out.
    pub fn redact_payload(&self, v: &mut Value) -> u32 {
        fn walk(r: &Redactor, v: &mut Value) -> u32 {
            match v {
                Value::String(s) => r.redact(s),
                Value::Array(items) => items.iter_mut().map(|i| walk(r, i)).sum(),
                Value::Object(map) => map
                    .iter_mut()
                    .filter(|(k, _)| !is_identity_key(k))
                    .map(|(_, i)| walk(r, i))
                    .sum(),
                _ => 0,
            }
        }
        walk(self, v)
    }

    /// Whether [`Redactor::redact_payload`] would leave `v` exactly as it is: no string of it
    /// holds a `<private>` or `<nmem-context>` span, matches a rule's pattern or has a
    /// high-entropy token. Read-only, so the common event (nothing secret in it) is neither
    /// copied nor rewritten; a pattern match whose check would then keep the value still answers
    /// false, and the caller redacts a copy as before.
    pub fn payload_is_clean(&self, v: &Value) -> bool {
        match v {
            Value::String(s) => self.is_clean(s),
            Value::Array(items) => items.iter().all(|i| self.payload_is_clean(i)),
            Value::Object(map) => map
                .iter()
                .filter(|(k, _)| !is_identity_key(k))
                .all(|(_, i)| self.payload_is_clean(i)),
            _ => true,
        }
    }

    /// Whether [`Redactor::redact`] would return 0 and leave `s` as it is: its first pass
    /// applies only rules whose pattern matches and the high-entropy detector's ranges.
    fn is_clean(&self, s: &str) -> bool {
        !s.contains("<private>")
            && !s.contains("<nmem-context>")
            && !self.set.is_match(s)
            && self.high_entropy_ranges(s).is_empty()
    }

    fn apply_rule(&self, rule: &Rule, s: &mut String) -> u32 {
        let marker = format!("[REDACTED:{}]", rule.name);
        let mut out = String::with_capacity(s.len());
        let mut last = 0;
        let mut n = 0;
        let assignment = rule.name == "secret_assignment";
        for caps in rule.re.captures_iter(s) {
            // The secret is the rule's group, or for assignments whichever value form matched.
            let m = if assignment {
                caps.get(1).or_else(|| caps.get(2)).or_else(|| caps.get(3))
            } else {
                caps.get(rule.group)
            };
            let Some(m) = m else { continue };
            if m.as_str().starts_with("[REDACTED:") || m.start() < last {
                continue;
            }
            let mut end = m.end();
            match rule.check {
                Check::None => {}
                Check::Prose => {
                    // The sentence's full stop or comma is not part of the password.
                    let v = m
                        .as_str()
                        .trim_end_matches(['.', ',', ';', ':', '!', '?', ')']);
                    if v.len() < 3 || is_ordinary_word(v) {
                        continue;
                    }
                    end = m.start() + v.len();
                }
                Check::Flag => {
                    if is_variable_reference(m.as_str()) || m.as_str() == "-" {
                        continue;
                    }
                }
            }
            if assignment {
                let name = caps[0].split([':', '=', '"', '\'']).next().unwrap_or("");
                // Code that refers to a value (`password = req.body.password`) is only unquoted;
                // a quoted value is a value, whatever it looks like, unless it is a path.
                let quoted = caps.get(3).is_none();
                if is_path_value(m.as_str())
                    || is_count(name, m.as_str())
                    || (!quoted
                        && (!looks_like_a_value(m.as_str())
                            || is_identifier_reference(m.as_str(), &s[m.end()..])
                            || is_prose(s, &caps[0], m.end())))
                {
                    continue;
                }
            }
            out.push_str(&s[last..m.start()]);
            out.push_str(&marker);
            last = end;
            n += 1;
        }
        if n > 0 {
            out.push_str(&s[last..]);
            *s = out;
        }
        n
    }

    /// Every `NAME=value` value (also in `- old` / `+ new` edit excerpts).
    fn redact_dotenv(&self, s: &mut String) -> u32 {
        let mut n = 0;
        let out = self
            .dotenv
            .replace_all(s, |c: &regex::Captures| {
                if c[2].starts_with("[REDACTED") {
                    c[0].to_string()
                } else {
                    n += 1;
                    format!("{}[REDACTED:dotenv]", &c[1])
                }
            })
            .into_owned();
        *s = out;
        n
    }

    /// The context-free detector. A candidate that is part of a path or URL is judged segment
    /// by segment, and only a segment that is itself a credential is replaced: the path around it
    /// stays searchable, and two paths differing in it stay two paths.
    fn redact_high_entropy(&self, s: &mut String) -> u32 {
        let ranges = self.high_entropy_ranges(s);
        if ranges.is_empty() {
            return 0;
        }
        let mut out = String::with_capacity(s.len());
        let mut last = 0;
        for r in &ranges {
            out.push_str(&s[last..r.start]);
            out.push_str("[REDACTED:high_entropy]");
            last = r.end;
        }
        out.push_str(&s[last..]);
        *s = out;
        ranges.len() as u32
    }

    /// What the context-free detector would replace in `s`, in order.
    fn high_entropy_ranges(&self, s: &str) -> Vec<std::ops::Range<usize>> {
        let mut ranges: Vec<std::ops::Range<usize>> = Vec::new();
        for m in entropy_candidates(s) {
            let tok = &s[m.clone()];
            if is_structured(s, m.start) {
                continue;
            }
            if tok.contains('/') && is_path(s, m.start, tok) {
                let mut at = m.start;
                for seg in tok.split('/') {
                    if is_secret_segment(seg) {
                        ranges.push(at..at + seg.len());
                    }
                    at += seg.len() + 1;
                }
            } else if is_secret_token(tok) {
                ranges.push(m);
            }
        }
        ranges
    }

    fn redact_value(&self, v: &mut Value) -> u32 {
        match v {
            Value::String(s) => self.redact(s),
            Value::Array(items) => items.iter_mut().map(|i| self.redact_value(i)).sum(),
            Value::Object(map) => map.values_mut().map(|i| self.redact_value(i)).sum(),
            _ => 0,
        }
    }

    /// Redact everything an event will store. Returns false when nothing of it may be kept (a
    /// prompt that was private from start to end).
    pub fn apply(&self, p: &mut Prepared) -> bool {
        let mut n = 0;
        match &mut p.record {
            Record::Observation(o) => {
                // In a `.env` file every assignment is a secret, whatever its name.
                let dotenv = o
                    .file_path
                    .as_deref()
                    .and_then(|f| f.rsplit('/').next())
                    .is_some_and(|name| name.starts_with(".env") || name.ends_with(".env"));
                if dotenv {
                    n += self.redact_dotenv(&mut o.content);
                }
                n += self.redact(&mut o.content);
                if let Some(f) = &mut o.file_path {
                    n += self.redact(f);
                }
                if let Some(f) = &mut o.rel_path {
                    n += self.redact(f);
                }
                for v in o.metadata.values_mut() {
                    n += self.redact_value(v);
                }
                if n > 0 {
                    o.metadata.insert("redacted".into(), Value::from(n));
                }
            }
            Record::Prompt(pr) => {
                let had_text = !pr.content.trim().is_empty();
                n += self.redact(&mut pr.content);
                if had_text && pr.content.trim().is_empty() {
                    return false;
                }
            }
            Record::Nothing => {}
        }
        for t in &mut p.thoughts {
            n += self.redact(&mut t.content);
        }
        p.thoughts.retain(|t| !t.content.trim().is_empty());
        if let crate::ingest::SessionEffect::Start { title: Some(t), .. } = &mut p.effect {
            n += self.redact(t);
        }
        if let Some(b) = &mut p.project.branch {
            n += self.redact(b);
        }
        p.redactions = n;
        true
    }
}

/// How many redaction markers the strings an event will store carry: the payload pass
/// ([`Redactor::redact_payload`]) replaced them before extraction, so this is its count of what
/// is stored (not of what was redacted in parts of the payload nmem does not keep).
pub fn markers(p: &Prepared) -> u32 {
    fn in_value(v: &Value) -> usize {
        match v {
            Value::String(s) => s.matches("[REDACTED:").count(),
            Value::Array(a) => a.iter().map(in_value).sum(),
            Value::Object(o) => o.values().map(in_value).sum(),
            _ => 0,
        }
    }
    let count = |s: &str| s.matches("[REDACTED:").count();
    let mut n = p.thoughts.iter().map(|t| count(&t.content)).sum::<usize>();
    match &p.record {
        Record::Observation(o) => {
            n += count(&o.content);
            n += o.file_path.as_deref().map_or(0, count);
            n += o.rel_path.as_deref().map_or(0, count);
            n += o
                .metadata
                .iter()
                .filter(|(k, _)| k.as_str() != "redacted")
                .map(|(_, v)| in_value(v))
                .sum::<usize>();
        }
        Record::Prompt(pr) => n += count(&pr.content),
        Record::Nothing => {}
    }
    if let crate::ingest::SessionEffect::Start { title: Some(t), .. } = &p.effect {
        n += count(t);
    }
    n.min(u32::MAX as usize) as u32
}

/// `Passwords: argon2id with a per-user salt`, `SigningKeyNotFoundError: Unable to …`: a name,
/// a colon and words that go on: prose, not `password: hunter2` (the value ends the line) and
/// not `PASSWORD=…` (an `=` is always an assignment).
fn is_prose(s: &str, whole: &str, value_end: usize) -> bool {
    let colon = whole
        .find([':', '='])
        .is_some_and(|i| whole.as_bytes()[i] == b':');
    if !colon {
        return false;
    }
    let value = &s[..value_end];
    let value = &value[value
        .rfind(|c: char| c.is_whitespace() || c == ':')
        .map_or(0, |i| past_char(value, i))..];
    // A word (`Unable`), or a lowercase name with one number in it (`argon2id`, `sha256`).
    let digit_runs = value
        .as_bytes()
        .windows(2)
        .filter(|w| !w[0].is_ascii_digit() && w[1].is_ascii_digit())
        .count()
        + usize::from(value.starts_with(|c: char| c.is_ascii_digit()));
    let wordlike = value.chars().all(char::is_alphabetic)
        || (value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            && digit_runs <= 1);
    let rest = s[value_end..].split('\n').next().unwrap_or("");
    let following = rest
        .split_whitespace()
        .take(2)
        .filter(|w| {
            w.chars()
                .all(|c| c.is_alphabetic() || matches!(c, ',' | '.' | '\''))
        })
        .count();
    wordlike && rest.starts_with(' ') && following == 2
}

/// An assignment's value that is a real value, not code that refers to one
/// (`password = req.body.password`, `token: process.env.TOKEN`, `secret=$SECRET`).
fn looks_like_a_value(v: &str) -> bool {
    let lower = v.to_ascii_lowercase();
    if v.starts_with('$') || v.starts_with('<') || v.contains('(') || v.starts_with("[REDACTED") {
        return false;
    }
    if [
        "process.env",
        "os.environ",
        "env.",
        "config.",
        "settings.",
        "self.",
        "this.",
        "req.",
        "args.",
    ]
    .iter()
    .any(|p| lower.starts_with(p))
    {
        return false;
    }
    // A dotted identifier path without digits is code, not a secret.
    let dotted = v.contains('.')
        && v.split('.')
            .all(|seg| !seg.is_empty() && seg.chars().all(|c| c.is_ascii_alphabetic() || c == '_'));
    !(dotted
        || matches!(
            lower.as_str(),
            "true" | "false" | "null" | "none" | "required" | "string" | "undefined"
        ))
}

/// Keys of a payload that identify rather than say something: the event's identity and the
/// envelope's paths. Left as they are by [`Redactor::redact_payload`] (a redacted id would merge
/// two events; the transcript path is opened); what of them is stored is redacted on its own.
pub fn is_identity_key(key: &str) -> bool {
    matches!(
        key,
        "session_id" | "transcript_path" | "cwd" | "hook_event_name" | "id"
    ) || key.ends_with("_id")
        || key.ends_with("Id")
}

/// Words that follow "the password is" in a sentence about passwords rather than in one giving
/// one away: `the password is required`, `… is hashed with argon2`, `… was too short`.
fn is_ordinary_word(v: &str) -> bool {
    let w = v.to_ascii_lowercase();
    if !w.bytes().all(|b| b.is_ascii_lowercase() || b == b'-') {
        return false;
    }
    const WORDS: &[&str] = &[
        "not",
        "no",
        "now",
        "still",
        "also",
        "only",
        "just",
        "never",
        "always",
        "too",
        "very",
        "the",
        "a",
        "an",
        "in",
        "on",
        "at",
        "from",
        "via",
        "by",
        "for",
        "of",
        "to",
        "with",
        "what",
        "which",
        "that",
        "this",
        "it",
        "its",
        "your",
        "my",
        "our",
        "their",
        "his",
        "her",
        "set",
        "wrong",
        "incorrect",
        "invalid",
        "valid",
        "correct",
        "right",
        "required",
        "missing",
        "empty",
        "blank",
        "null",
        "none",
        "nil",
        "undefined",
        "optional",
        "mandatory",
        "weak",
        "strong",
        "secure",
        "insecure",
        "short",
        "long",
        "same",
        "different",
        "ok",
        "okay",
        "fine",
        "good",
        "bad",
        "unknown",
        "known",
        "secret",
        "available",
        "unavailable",
        "visible",
        "hidden",
        "masked",
        "plain",
        "plaintext",
        "cleartext",
        "case-sensitive",
        "probably",
        "likely",
        "definitely",
        "actually",
        "really",
        "either",
        "neither",
        "both",
        "one",
        "there",
        "here",
        "stored",
        "hashed",
        "salted",
        "encrypted",
        "expired",
        "changed",
        "reset",
        "rotated",
        "updated",
        "saved",
        "sent",
        "read",
        "given",
        "provided",
        "needed",
        "checked",
        "compared",
        "verified",
        "validated",
        "supplied",
        "taken",
        "generated",
        "logged",
        "printed",
        "shown",
        "displayed",
        "ignored",
        "accepted",
        "rejected",
        "used",
        "being",
        "kept",
        "managed",
        "handled",
        "configured",
        "specified",
        "defined",
        "entered",
        "typed",
        "hardcoded",
        "enough",
        "shorter",
        "longer",
        "stale",
        "old",
        "new",
        "current",
        "default",
        "unchanged",
        "passed",
        "injected",
    ];
    WORDS.contains(&w.as_str())
        || (w.len() > 4 && (w.ends_with("ed") || w.ends_with("ly") || w.ends_with("ing")))
}

/// `$TOKEN`, `${API_KEY}`, `$(cat key)`: a reference, not the value.
fn is_variable_reference(v: &str) -> bool {
    let v = v.trim_matches(['"', '\'']);
    let Some(name) = v.strip_prefix('$') else {
        return false;
    };
    let name = name
        .strip_prefix('{')
        .and_then(|n| n.strip_suffix('}'))
        .unwrap_or(name);
    name.starts_with('(')
        || (!name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'))
}

/// `SECRETS_FILE=./config/.env.production`, `credentials: ~/.aws/credentials`: a value that is
/// a path names where a secret is, not the secret.
fn is_path_value(v: &str) -> bool {
    (v.starts_with('/') || v.starts_with("./") || v.starts_with("../") || v.starts_with("~/"))
        && v.len() > 1
        && !v.contains(char::is_whitespace)
}

/// `tokens=8000`, `max_tokens: 4096`: a count of tokens, not a token.
fn is_count(name: &str, v: &str) -> bool {
    name.to_ascii_lowercase().contains("token") && v.bytes().all(|b| b.is_ascii_digit())
}

/// `token: verificationToken,` (an object literal's shorthand or a variable in code): an
/// identifier without digits, camel-cased or followed by code punctuation.
fn is_identifier_reference(v: &str, after: &str) -> bool {
    let ident = !v.is_empty() && v.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_');
    let camel = v
        .as_bytes()
        .windows(2)
        .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
    ident && (camel || after.starts_with([',', ')', ';', '}']))
}

/// The index just past the character starting at byte `i` of `s`: a delimiter found by a
/// `char` predicate may be whitespace of 2 to 4 bytes (U+2000), and `i + 1` would then slice
/// inside it (a panic, found by the clean-check property test).
fn past_char(s: &str, i: usize) -> usize {
    i + s[i..].chars().next().map_or(1, char::len_utf8)
}

/// Is the candidate at `start` inside something whose randomness is its structure: a `data:`
/// URI, an SRI or Go module hash, an ssh public key, or a URL without credentials.
fn is_structured(s: &str, start: usize) -> bool {
    let delim = |c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '(' | '<' | '[');
    // A word is looked at within a window: text without delimiters (a minified bundle) must not
    // make every candidate scan back to its start.
    let lo = floor_boundary(s, start.saturating_sub(WINDOW));
    let hi = floor_boundary(s, (start + WINDOW).min(s.len()));
    let word_start = s[lo..start]
        .rfind(delim)
        .map_or(lo, |i| past_char(s, lo + i));
    let word_end = s[start..hi].find(delim).map_or(hi, |i| start + i);
    let before = &s[word_start..start];
    let word = &s[word_start..word_end];
    // `data:image/png;base64,iVBOR…`: content, not a credential.
    if before.contains("data:") {
        return true;
    }
    // `sha512-…` (SRI integrity), `sha256-…` (Nix narHash), `h1:…` (go.sum).
    let tok = &s[start..word_end];
    if ["sha1-", "sha256-", "sha384-", "sha512-", "md5-"]
        .iter()
        .any(|p| tok.starts_with(p) || before.ends_with(p))
        || before.ends_with("h1:")
        || before.ends_with("sha256:")
        || before.ends_with("sha512:")
    {
        return true;
    }
    // `ssh-ed25519 AAAAC3Nza…`: a public key.
    if tok.starts_with("AAAA") && before.is_empty() {
        let prev = s[floor_boundary(s, word_start.saturating_sub(64))..word_start].trim_end();
        let prev = &prev[prev.rfind(delim).map_or(0, |i| past_char(prev, i))..];
        if ["ssh-", "ecdsa-", "sk-ssh-", "sk-ecdsa-"]
            .iter()
            .any(|p| prev.starts_with(p))
        {
            return true;
        }
    }
    // A URL whose authority has no user info: its secrets are the typed rules' (`&sig=`).
    if let Some(i) = word.find("://") {
        let rest = &word[i + 3..];
        let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
        return !authority.contains('@');
    }
    false
}

/// How far around a candidate [`is_structured`] looks for the word it is part of.
const WINDOW: usize = 512;

/// The bytes a high-entropy candidate is made of: `[A-Za-z0-9+/_-]`.
const TOKEN_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'_' | b'-');
        b += 1;
    }
    t
};

/// The shortest candidate.
const CANDIDATE_MIN: usize = 20;

/// The high-entropy detector's candidates in `s`, in order: each run of at least
/// [`CANDIDATE_MIN`] token bytes with up to two `=` after it, exactly what the regex
/// `[A-Za-z0-9+/_\-]{20,}={0,2}` finds (a property test holds them equal). A byte loop instead
/// of that regex: it screens every string of every event, and the regex's DFA was about a
/// quarter of the payload's redaction screen (ARCHITECTURE.md, "The hook at the floor"). It
/// skips as a string search does: a run of [`CANDIDATE_MIN`] bytes from `i` on must cover the
/// byte [`CANDIDATE_MIN`] − 1 ahead, so it looks there first and, from there back, for the last
/// byte that ends every run before it; ordinary text (words far shorter than a candidate) is
/// read a few bytes in twenty.
fn entropy_candidates(s: &str) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    let b = s.as_bytes();
    let token = |c: u8| TOKEN_BYTE[c as usize];
    // Always: `i` is 0 or `b[i - 1]` is no token byte, so a run that covers `i` starts there.
    let mut i = 0;
    std::iter::from_fn(move || {
        while i + CANDIDATE_MIN <= b.len() {
            // The last byte in `i..i + CANDIDATE_MIN` that is no token byte, if any: no run
            // starting at or before it reaches `CANDIDATE_MIN` bytes within the window.
            if let Some(j) = (i..i + CANDIDATE_MIN).rev().find(|&j| !token(b[j])) {
                i = j + 1;
                continue;
            }
            // `CANDIDATE_MIN` token bytes from `i`, where a run starts: a candidate.
            let start = i;
            i += CANDIDATE_MIN;
            while i < b.len() && token(b[i]) {
                i += 1;
            }
            let run_end = i;
            while i < b.len() && i - run_end < 2 && b[i] == b'=' {
                i += 1;
            }
            return Some(start..i);
        }
        None
    })
}

/// The nearest character boundary at or before `i`.
fn floor_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Does a candidate with a `/` belong to a path (judged per segment) rather than being one
/// base64 blob?
fn is_path(s: &str, start: usize, tok: &str) -> bool {
    let before = &s[..start];
    tok.starts_with('/')
        || before.ends_with(['/', '.', '~', ':', '@', '+'])
        || tok.split('/').any(|seg| {
            seg.len() >= 3
                && seg
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'_' || b == b'-')
        })
        || tok
            .split('/')
            .all(|seg| seg.len() <= 24 && entropy(seg) < 3.6)
}

/// A path segment is a credential only if it is one on its own, and mixes upper- and lowercase
/// letters with digits: store hashes (Nix, pnpm), temp folders and cuids are lowercase.
fn is_secret_segment(seg: &str) -> bool {
    is_secret_token(seg)
}

/// Is this 20+ character run a secret? Mixed upper- and lowercase letters and digits, high
/// entropy, and none of the things that look random but are not: hex (git SHAs, hashes), UUIDs,
/// ids with a known prefix, a name with a lowercase or uppercase-only id (`agent-q6wf1x…`,
/// `db-6Q2ZK3…`, ULIDs).
fn is_secret_token(tok: &str) -> bool {
    let t = tok.trim_end_matches('=');
    if t.len() < 20 || t.starts_with("REDACTED") {
        return false;
    }
    if t.len() <= 64 && t.bytes().all(|b| b.is_ascii_hexdigit()) {
        return false;
    }
    if is_uuid_like(t) {
        return false;
    }
    // Identifiers like `toolu_01Hq…` are random but not secret.
    if ["toolu_", "srvtoolu_", "call_", "msg_", "req_"]
        .iter()
        .any(|p| t.starts_with(p))
    {
        return false;
    }
    // A leading name (`session-`, `db_`) says what the rest is; judge the rest.
    let mut rest = t;
    while let Some(i) = rest.find(['-', '_']) {
        if i > 0 && rest[..i].bytes().all(|b| b.is_ascii_lowercase()) {
            rest = &rest[i + 1..];
        } else {
            break;
        }
    }
    let upper = rest.bytes().any(|b| b.is_ascii_uppercase());
    let lower = rest.bytes().any(|b| b.is_ascii_lowercase());
    let digit = rest.bytes().any(|b| b.is_ascii_digit());
    if !(upper && lower && digit) || rest.len() < 16 {
        return false;
    }
    is_mixed_random(t)
}

fn is_mixed_random(t: &str) -> bool {
    // A name and a hash or a number (`crash-<sha1>`, `sha256-<hex>`, `build_20260826_1432`):
    // every part a plain word, a hex run of at most 64, or digits.
    if t.contains(['-', '_', '.'])
        && t.split(['-', '_', '.']).all(|p| {
            p.is_empty()
                || p.bytes().all(|b| b.is_ascii_lowercase())
                || (p.len() <= 64 && p.bytes().all(|b| b.is_ascii_hexdigit()))
                || p.bytes().all(|b| b.is_ascii_digit())
        })
    {
        return false;
    }
    let digits = t.bytes().filter(u8::is_ascii_digit).count();
    let upper = t.bytes().filter(u8::is_ascii_uppercase).count();
    let lower = t.bytes().filter(u8::is_ascii_lowercase).count();
    // Words joined by separators (`rate-limit-redis-v4-example`) are not tokens.
    let longest_word = t
        .split(|c: char| !c.is_ascii_alphanumeric())
        .map(str::len)
        .max()
        .unwrap_or(0);
    if longest_word < 16 {
        return false;
    }
    // Letters with one number tacked on (`parseInvoices2024`) read as a name, not a token:
    // random strings switch between letters and digits again and again.
    let switches = t
        .as_bytes()
        .windows(2)
        .filter(|w| {
            w[0].is_ascii_digit() != w[1].is_ascii_digit()
                && w.iter().all(u8::is_ascii_alphanumeric)
        })
        .count();
    if switches < 3 {
        return false;
    }
    let classes = (digits > 0) as u8 + (upper > 0) as u8 + (lower > 0) as u8;
    let threshold = if classes == 3 { 3.5 } else { 3.8 };
    classes >= 2 && digits >= 2 && entropy(t) >= threshold
}

fn is_uuid_like(t: &str) -> bool {
    let parts: Vec<&str> = t.split('-').collect();
    parts.len() == 5
        && [8, 4, 4, 4, 12]
            .iter()
            .zip(&parts)
            .all(|(n, p)| p.len() == *n)
        && parts
            .iter()
            .all(|p| p.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Shannon entropy in bits per character.
fn entropy(s: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in s.bytes() {
        counts[b as usize] += 1;
    }
    let n = s.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum()
}

#[cfg(test)]
mod cut_tests;
#[cfg(test)]
mod tests;

#[cfg(test)]
mod figure;
