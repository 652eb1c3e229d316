//! Redaction: nothing that looks like a credential reaches SQLite.
//!
//! Runs in the daemon on every stored string (content, metadata leaves, prompts, paths, session
//! titles) before the writer sees it. Known formats are replaced by a typed marker such as
//! `[REDACTED:github_token]`; long high-entropy tokens that mix letters and digits are replaced by
//! `[REDACTED:high_entropy]`. Kept on purpose: pure hex runs of 7–64 characters (git SHAs,
//! hashes), UUIDs, paths, and URLs without credentials. `<private>…</private>` spans and nmem's own
//! injected context (`<nmem-context>…</nmem-context>`) are dropped.

use crate::ingest::{Prepared, Record};
use regex::{Regex, RegexSet};
use serde_json::Value;

/// A compiled rule: what it finds, and which capture group is the secret (0: all of it).
struct Rule {
    name: String,
    re: Regex,
    group: usize,
}

pub struct Redactor {
    rules: Vec<Rule>,
    set: RegexSet,
    private: Regex,
    own_context: Regex,
    entropy_candidate: Regex,
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
        r#"(?i)\b[A-Za-z0-9_.\-]*(?:password|passwd|passphrase|pwd|secret|token|api_?key|apikey|access_?key|private_?key|credentials?|auth_?key|signing_?key)[A-Za-z0-9_\-]*["']?\s*[:=]\s*(?:"([^"\n]{4,})"|'([^'\n]{4,})'|([^\s"',;&|]{4,}))"#,
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
            .map(|(name, re, group)| Rule {
                name: name.to_string(),
                re: Regex::new(&ascii(re)).expect("built-in redaction pattern"),
                group: *group,
            })
            .collect();
        let mut errors = Vec::new();
        for p in extra {
            match Regex::new(&p.regex) {
                Ok(re) => rules.push(Rule {
                    name: p.name.clone(),
                    re,
                    group: 0,
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
            entropy_candidate: Regex::new(r"[A-Za-z0-9+/_\-]{20,}={0,2}").unwrap(),
            dotenv: Regex::new(
                r"(?m)^([-+]?\s*(?:export\s+)?[A-Za-z_][A-Za-z0-9_.]*\s*=\s*)(\S.*)$",
            )
            .unwrap(),
        };
        (redactor, errors)
    }

    /// Redact one string in place; returns how many secrets were replaced.
    pub fn redact(&self, s: &mut String) -> u32 {
        let mut count = 0;
        if s.contains("<private>") {
            *s = self.private.replace_all(s, "").into_owned();
        }
        if s.contains("<nmem-context>") {
            *s = self.own_context.replace_all(s, "").into_owned();
        }
        let hits = self.set.matches(s);
        if hits.matched_any() {
            for i in hits.iter() {
                count += self.apply_rule(&self.rules[i], s);
            }
        }
        count += self.redact_high_entropy(s);
        count
    }

    fn apply_rule(&self, rule: &Rule, s: &mut String) -> u32 {
        let marker = format!("[REDACTED:{}]", rule.name);
        let mut out = String::with_capacity(s.len());
        let mut last = 0;
        let mut n = 0;
        for caps in rule.re.captures_iter(s) {
            // The secret is the rule's group, or for assignments whichever value form matched.
            let m = if rule.name == "secret_assignment" {
                caps.get(1).or_else(|| caps.get(2)).or_else(|| caps.get(3))
            } else {
                caps.get(rule.group)
            };
            let Some(m) = m else { continue };
            // Code that refers to a value (`password = req.body.password`) is only unquoted; a
            // quoted value is a value, whatever it looks like.
            let quoted = rule.name == "secret_assignment" && caps.get(3).is_none();
            if rule.name == "secret_assignment"
                && !quoted
                && (!looks_like_a_value(m.as_str()) || is_prose(s, &caps[0], m.end()))
            {
                continue;
            }
            if m.as_str().starts_with("[REDACTED:") {
                continue;
            }
            out.push_str(&s[last..m.start()]);
            out.push_str(&marker);
            last = m.end();
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

    fn redact_high_entropy(&self, s: &mut String) -> u32 {
        let mut out = String::new();
        let mut last = 0;
        let mut n = 0;
        for m in self.entropy_candidate.find_iter(s) {
            if !is_secret_like(s, m.start(), m.as_str()) {
                continue;
            }
            out.push_str(&s[last..m.start()]);
            out.push_str("[REDACTED:high_entropy]");
            last = m.end();
            n += 1;
        }
        if n > 0 {
            out.push_str(&s[last..]);
            *s = out;
        }
        n
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
        .map_or(0, |i| i + 1)..];
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

/// Is this 20+ character run a secret? Mixed letters and digits, high entropy, and none of the
/// things that look random but are not: hex (git SHAs, hashes), UUIDs, path segments, URLs.
fn is_secret_like(whole: &str, start: usize, tok: &str) -> bool {
    let t = tok.trim_end_matches('=');
    if t.len() < 20 || t.starts_with("REDACTED") {
        return false;
    }
    let has_digit = t.bytes().any(|b| b.is_ascii_digit());
    let has_alpha = t.bytes().any(|b| b.is_ascii_alphabetic());
    if !has_digit || !has_alpha {
        return false;
    }
    if t.len() <= 64 && t.bytes().all(|b| b.is_ascii_hexdigit()) {
        return false;
    }
    if is_uuid_like(t) {
        return false;
    }
    // Part of a URL without credentials, or of a path: look at the whitespace-delimited word.
    let word_start = whole[..start]
        .rfind(|c: char| c.is_whitespace() || c == '"' || c == '\'')
        .map(|i| i + 1)
        .unwrap_or(0);
    let word = &whole[word_start..];
    let word = &word[..word.find(char::is_whitespace).unwrap_or(word.len())];
    if word.contains("://") && !word.contains('@') {
        return false;
    }
    if t.contains('/') || whole[..start].ends_with('/') || whole[..start].ends_with('.') {
        // Paths: every segment short or word-like. Base64 keys have long mixed segments.
        let segs_pathlike = t
            .split('/')
            .all(|seg| seg.len() <= 24 && entropy(seg) < 3.6);
        let in_path = segs_pathlike
            || word.starts_with('/')
            || word.starts_with("./")
            || word.starts_with("~/");
        if in_path
            && !t
                .split('/')
                .any(|seg| seg.len() >= 20 && is_mixed_random(seg))
        {
            return false;
        }
    }
    // Identifiers like `toolu_01Hq…` are random but not secret; snake or kebab names with a
    // number are not random at all.
    if t.starts_with("toolu_")
        || t.starts_with("srvtoolu_")
        || t.starts_with("call_")
        || t.starts_with("msg_")
        || t.starts_with("req_")
    {
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
mod tests;
