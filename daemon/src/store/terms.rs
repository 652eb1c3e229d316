//! The extra words a row is indexed with: the parts of its identifiers.
//!
//! FTS5's `unicode61` tokenizer already splits `snake_case`, `kebab-case`, dotted and slashed
//! names at their punctuation, so `retry_budget` matches "retry budget". It keeps `camelCase` and
//! `PascalCase` whole, so `parseInvoiceTotal` would only match itself. The writer indexes each row
//! with a second column holding the lower-cased parts of every such identifier (`parse invoice
//! total`), and of the words of its file's project-relative path, so a question in plain words
//! reaches the code's names. The column is weighted below the text itself at query time.
//!
//! The same splitting is applied to a query's terms ([`split_camel`]), so `invoiceTotal` finds
//! `parseInvoiceTotal` too.
//!
//! A row's file path (project-relative, else absolute) comes first, whole and in order, whenever
//! the text does not hold it: a failed call's text keeps only the head of long arguments, so
//! without it `requirements.txt` or `src/ledger.ts` typed as a query (searched as the phrase of
//! its words) would miss the file's observations. Its words are not deduplicated against the
//! identifier parts, which would break the phrase.

use rusqlite::functions::FunctionFlags;
use rusqlite::Connection;
use std::collections::HashSet;

/// At most this many bytes of extra words per row (a minified file can hold thousands of names).
const MAX_TERMS_BYTES: usize = 4_096;

/// The parts of a `camelCase`/`PascalCase`/`HTTPServer`-style word, lower-cased, when it has
/// more than one; `None` for a plain word. Digits stay with the letters before them (`utf8`,
/// `sha256Sum` → `sha256`, `sum`).
pub fn split_camel(word: &str) -> Option<Vec<String>> {
    let chars: Vec<char> = word.chars().collect();
    if chars.len() < 3 || !chars.iter().any(|c| c.is_lowercase()) {
        return None;
    }
    let mut parts = Vec::new();
    let mut cur = String::new();
    for i in 0..chars.len() {
        let c = chars[i];
        let boundary = i > 0 && c.is_uppercase() && {
            let prev = chars[i - 1];
            // fooBar | HTTPServer (break before the S of Server) | v2Api
            prev.is_lowercase()
                || prev.is_ascii_digit()
                || (prev.is_uppercase() && chars.get(i + 1).is_some_and(|n| n.is_lowercase()))
        };
        if boundary && !cur.is_empty() {
            parts.push(std::mem::take(&mut cur).to_lowercase());
        }
        cur.push(c);
    }
    if !cur.is_empty() {
        parts.push(cur.to_lowercase());
    }
    (parts.len() > 1).then_some(parts)
}

/// The extra words of one row: the file's path when the text lacks it, then the identifier
/// parts of `text` and of `path`, each once.
pub fn terms(text: &str, path: Option<&str>) -> String {
    let mut out = String::new();
    if let Some(p) = path.filter(|p| !text.contains(p)) {
        // Contiguous and in order (a suffix like `ledger/ledger.ts` is a phrase of these words),
        // lower-cased because the tokenizer folds case anyway.
        for word in p
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            if out.len() + word.len() >= MAX_TERMS_BYTES / 2 {
                break;
            }
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(&word.to_lowercase());
        }
    }
    let mut seen: HashSet<String> = HashSet::new();
    let mut add = |w: &str, out: &mut String| {
        if out.len() + w.len() < MAX_TERMS_BYTES && seen.insert(w.to_string()) {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(w);
        }
    };
    for source in [Some(text), path].into_iter().flatten() {
        for word in source.split(|c: char| !c.is_alphanumeric()) {
            if let Some(parts) = split_camel(word) {
                for p in parts {
                    add(&p, &mut out);
                }
            }
        }
        if out.len() >= MAX_TERMS_BYTES {
            break;
        }
    }
    out
}

/// Register `nmem_terms(text, path)` on a connection (the writer's: its triggers use it).
pub fn register(conn: &Connection) -> rusqlite::Result<()> {
    conn.create_scalar_function(
        "nmem_terms",
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            let text: Option<String> = ctx.get(0)?;
            let path: Option<String> = ctx.get(1)?;
            Ok(terms(text.as_deref().unwrap_or(""), path.as_deref()))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn camel_case_splits_and_plain_words_do_not() {
        let s = |w: &str| split_camel(w).map(|v| v.join(" "));
        assert_eq!(
            s("parseInvoiceTotal").as_deref(),
            Some("parse invoice total")
        );
        assert_eq!(s("HTTPServer").as_deref(), Some("http server"));
        assert_eq!(s("getHTTPResponse").as_deref(), Some("get http response"));
        assert_eq!(s("sha256Sum").as_deref(), Some("sha256 sum"));
        assert_eq!(s("ArrowInvalid").as_deref(), Some("arrow invalid"));
        assert_eq!(s("retry"), None);
        assert_eq!(s("README"), None);
        assert_eq!(s("Retry"), None);
        assert_eq!(s("utf8"), None);
    }

    #[test]
    fn terms_of_a_row() {
        assert_eq!(
            terms(
                "Edit src/billing/invoiceMath.ts: parseInvoiceTotal(x) retry_budget",
                Some("src/billing/invoiceMath.ts")
            ),
            "invoice math parse total"
        );
        assert_eq!(terms("cargo test", None), "");
        // A failed call's text cut its arguments short: the path comes whole, in order, even
        // when a word repeats or is also an identifier part of the text.
        assert_eq!(
            terms(
                "Edit: String to replace not found in file.\nfile_path=/home/dev/src/shop/src/le…",
                Some("src/ledger/ledger.ts")
            ),
            "src ledger ledger ts"
        );
        assert_eq!(
            terms("parseLedger failed", Some("src/ledger.ts")),
            "src ledger ts parse ledger"
        );
    }

    proptest! {
        #[test]
        fn never_panics_and_stays_bounded(text in ".{0,3000}", path in proptest::option::of(".{0,200}")) {
            let t = terms(&text, path.as_deref());
            prop_assert!(t.len() < MAX_TERMS_BYTES + 64);
        }
    }
}
