//! From what a person (or an agent) types to FTS5 queries.
//!
//! Text that uses FTS syntax on purpose (`AND`/`OR`/`NOT`/`NEAR(`, a `"`, `prefix*`, and outside
//! its strings nothing but what FTS5's syntax is made of) goes to FTS5 as written; if FTS5 rejects
//! it, the caller reports SQLite's message. Quotes in a pasted traceback or error message
//! (`File "x.py", line 3`, `KeyError: "id"`) do not make it syntax. Everything else is
//! plain text, whatever punctuation it holds (`df.to_parquet() ArrowInvalid`, `src/ledger.ts:42`,
//! `x::y`, `C++`): each term is quoted, so the tokenizer splits it exactly as it split the stored
//! text. A `camelCase` term also matches its parts (`invoiceTotal` ↔ "invoice total"), which the
//! writer indexes besides the text.
//!
//! Plain text gets looser tiers, used when the strict query finds too few: every meaningful word
//! (question words dropped), then any of them. Results found only by a looser tier count less in
//! the fusion ([`super::search`]). A long text (a pasted prompt or stack trace) is reduced to its
//! most useful terms; past [`MAX_QUERY_BYTES`] it is refused before any SQL runs.

use crate::store::terms::split_camel;

/// Longer queries are refused (a clear error, no SQL run).
pub const MAX_QUERY_BYTES: usize = 64 * 1024;
/// At most this many terms are searched; a longer text keeps its most useful ones.
pub const MAX_TERMS: usize = 16;

/// How a text is searched.
#[derive(Debug, Clone, PartialEq)]
pub struct LexPlan {
    /// The query as given (FTS syntax), or every term required.
    pub strict: String,
    /// Looser queries, in order: every meaningful word, then any of them (plain text only).
    pub fallbacks: Vec<Tier>,
    /// The terms searched, as the reply reports them (plain text only).
    pub terms: Vec<String>,
    /// Terms dropped because the text was long.
    pub dropped: usize,
    /// The text used FTS syntax and was passed through.
    pub syntax: bool,
}

/// One looser query and what it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Tier {
    pub name: &'static str,
    pub fts: String,
}

/// Tier names, as replies report them.
pub const ALL_WORDS: &str = "all_words";
pub const MEANINGFUL_WORDS: &str = "meaningful_words";
pub const MOST_WORDS: &str = "most_words";
pub const ANY_WORD: &str = "any_word";

/// The strict FTS5 query for `text` (purge by search uses it).
pub fn to_fts5(text: &str) -> String {
    plan(text).strict
}

/// Plan the FTS queries for `text` (already checked non-empty and within the size cap).
pub fn plan(text: &str) -> LexPlan {
    if uses_syntax(text) {
        return LexPlan {
            strict: text.to_string(),
            fallbacks: Vec::new(),
            terms: Vec::new(),
            dropped: 0,
            syntax: true,
        };
    }
    let mut terms: Vec<&str> = Vec::new();
    // Control characters separate terms too: FTS5 ends a string at a NUL ("unterminated
    // string"), found by the property test below.
    for t in text.split(|c: char| c.is_whitespace() || c.is_control()) {
        let t = t.trim_matches(|c: char| !c.is_alphanumeric());
        // Nothing searchable in it (`()`, `--`, `=>`), or a repeat.
        if t.chars().any(char::is_alphanumeric) && !terms.contains(&t) {
            terms.push(t);
        }
    }
    let mut dropped = 0;
    if terms.len() > MAX_TERMS {
        let meaningful: Vec<&str> = terms.iter().copied().filter(|t| !is_stopword(t)).collect();
        let keep = most_useful(&meaningful, MAX_TERMS);
        dropped = terms.len() - keep.len();
        terms = keep;
    }
    let meaningful: Vec<&str> = terms.iter().copied().filter(|t| !is_stopword(t)).collect();
    let strict = all_of(&terms);
    let mut fallbacks = Vec::new();
    if !meaningful.is_empty() && meaningful.len() < terms.len() {
        fallbacks.push(Tier {
            name: MEANINGFUL_WORDS,
            fts: all_of(&meaningful),
        });
    }
    // All meaningful words but one, in any of the ways to leave one out (coordination: a row
    // naming two of three words is likelier about the question than one naming one).
    if (3..=6).contains(&meaningful.len()) {
        let subsets: Vec<String> = (0..meaningful.len())
            .map(|skip| {
                let rest: Vec<&str> = meaningful
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != skip)
                    .map(|(_, t)| *t)
                    .collect();
                let parts: Vec<String> = rest.iter().map(|t| term(t)).collect();
                format!("({})", parts.join(" AND "))
            })
            .collect();
        fallbacks.push(Tier {
            name: MOST_WORDS,
            fts: subsets.join(" OR "),
        });
    }
    if meaningful.len() >= 2 {
        fallbacks.push(Tier {
            name: ANY_WORD,
            fts: meaningful
                .iter()
                .map(|t| term(t))
                .collect::<Vec<_>>()
                .join(" OR "),
        });
    }
    LexPlan {
        strict,
        fallbacks,
        terms: terms.iter().map(|t| t.to_string()).collect(),
        dropped,
        syntax: false,
    }
}

/// Every term required. FTS5 takes juxtaposed phrases as AND, but not after a parenthesised
/// group, so `AND` is written out when a term has one.
fn all_of(terms: &[&str]) -> String {
    let parts: Vec<String> = terms.iter().map(|t| term(t)).collect();
    let sep = if parts.iter().any(|p| p.starts_with('(')) {
        " AND "
    } else {
        " "
    };
    parts.join(sep)
}

/// One plain term as FTS5: a quoted phrase (the tokenizer splits it as it split the text), or,
/// for a `camelCase` word, that or its parts.
fn term(t: &str) -> String {
    let quoted = format!("\"{}\"", t.replace('"', "\"\""));
    let parts: Vec<String> = t
        .split(|c: char| !c.is_alphanumeric())
        .flat_map(|w| split_camel(w).unwrap_or_else(|| vec![w.to_lowercase()]))
        .filter(|w| !w.is_empty())
        .collect();
    let plain: Vec<String> = t
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    if parts != plain {
        format!("({quoted} OR \"{}\")", parts.join(" "))
    } else {
        quoted
    }
}

/// The `n` terms of a long text most likely to find what it is about: identifiers (`snake_case`,
/// `camelCase`, dotted and slashed names, with digits) first, then longer words; in their order.
fn most_useful<'a>(terms: &[&'a str], n: usize) -> Vec<&'a str> {
    let score = |t: &str| -> usize {
        let ident = t.contains(['_', '.', '/', ':', '-'])
            || split_camel(t).is_some()
            || (t.chars().any(|c| c.is_ascii_digit()) && t.chars().any(char::is_alphabetic));
        (ident as usize) * 100 + t.chars().count().min(20)
    };
    let mut ranked: Vec<(usize, usize)> = terms
        .iter()
        .enumerate()
        .map(|(i, t)| (score(t), i))
        .collect();
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut keep: Vec<usize> = ranked.into_iter().take(n).map(|(_, i)| i).collect();
    keep.sort_unstable();
    keep.into_iter().map(|i| terms[i]).collect()
}

/// Words that say how a question is asked, not what it is about.
pub fn is_stopword(term: &str) -> bool {
    let t: String = term
        .trim_matches(|c: char| !c.is_alphanumeric())
        .to_lowercase();
    t.is_empty()
        || matches!(
            t.as_str(),
            "a" | "an"
                | "the"
                | "and"
                | "or"
                | "not"
                | "of"
                | "in"
                | "on"
                | "at"
                | "to"
                | "for"
                | "with"
                | "by"
                | "from"
                | "about"
                | "into"
                | "as"
                | "is"
                | "are"
                | "was"
                | "were"
                | "be"
                | "been"
                | "it"
                | "its"
                | "this"
                | "that"
                | "these"
                | "those"
                | "we"
                | "i"
                | "you"
                | "our"
                | "my"
                | "your"
                | "us"
                | "me"
                | "they"
                | "them"
                | "what"
                | "which"
                | "when"
                | "where"
                | "why"
                | "how"
                | "who"
                | "whom"
                | "did"
                | "do"
                | "does"
                | "done"
                | "have"
                | "has"
                | "had"
                | "can"
                | "could"
                | "should"
                | "would"
                | "will"
                | "there"
                | "then"
                | "than"
                | "so"
                | "any"
                | "some"
                | "again"
                | "ever"
                | "get"
                | "got"
        )
}

/// FTS syntax used on purpose: a quote, an operator word in capitals, `NEAR(`, or `word*`.
/// Parentheses, dots and colons alone are incidental (code, paths, stack traces).
fn uses_syntax(text: &str) -> bool {
    let operators = text.contains('"')
        || text.split_whitespace().any(|w| {
            matches!(w, "AND" | "OR" | "NOT")
                || w.starts_with("NEAR(")
                || (w.ends_with('*')
                    && w.len() > 1
                    && w[..w.len() - 1]
                        .chars()
                        .all(|c| c.is_alphanumeric() || c == '_'))
        });
    operators && only_syntax_outside_strings(text)
}

/// Whether, outside its quoted strings, `text` holds only what FTS5's syntax is made of: words,
/// parentheses, `*`, `^`, `+`, a column filter on one of the indexed columns (`content:`,
/// `terms:`) and, inside `NEAR(...)`, a comma. A pasted traceback (`File "x.py", line 3, in
/// <module>`) or error (`KeyError: "customer_id"`) has quotes but also punctuation no query
/// means: it is text to search as words, not a query to pass through. An unterminated string
/// (`"unbalanced`) holds nothing outside it: syntax, and FTS5's error is the caller's answer.
fn only_syntax_outside_strings(text: &str) -> bool {
    const COLUMNS: &[&str] = &["content", "terms"];
    let near = text.contains("NEAR(");
    let mut chars = text.chars().peekable();
    let mut word = String::new();
    let mut in_word = false;
    while let Some(c) = chars.next() {
        if c == '"' {
            // A string runs to the next lone quote (`""` is a quote inside it).
            loop {
                match chars.next() {
                    None => return true,
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                    }
                    Some('"') => break,
                    Some(_) => {}
                }
            }
            word.clear();
            in_word = false;
            continue;
        }
        let ok = c.is_alphanumeric()
            || c == '_'
            || c.is_whitespace()
            || !c.is_ascii()
            || matches!(c, '(' | ')' | '*' | '^' | '+')
            || (c == ',' && near)
            || (c == ':' && COLUMNS.contains(&word.as_str()));
        if !ok {
            return false;
        }
        // `word`: the word being read, or the last one (a filter may be `content :`).
        if c.is_alphanumeric() || c == '_' {
            if !in_word {
                word.clear();
            }
            in_word = true;
            word.push(c);
        } else {
            in_word = false;
            if !c.is_whitespace() {
                word.clear();
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn strict(t: &str) -> String {
        plan(t).strict
    }

    #[test]
    fn plain_text_is_quoted_and_syntax_passes_through() {
        assert_eq!(strict("src/auth/mod.rs"), "\"src/auth/mod.rs\"");
        assert_eq!(strict("foo-bar a.b x::y"), "\"foo-bar\" \"a.b\" \"x::y\"");
        assert_eq!(strict("token refresh"), "\"token\" \"refresh\"");
        assert_eq!(strict("token OR refresh"), "token OR refresh");
        assert_eq!(strict("\"token refresh\""), "\"token refresh\"");
        assert_eq!(strict("paginat*"), "paginat*");
        assert_eq!(strict("(a OR b) NOT c"), "(a OR b) NOT c");
        assert_eq!(strict("or and not"), "\"or\" \"and\" \"not\"");
        assert_eq!(strict("C++"), "\"C\"");
        assert!(plan("\"unbalanced").syntax);
        // Deliberate syntax stays syntax: phrases among words, column filters, NEAR.
        assert!(plan("error \"connection refused\" pg").syntax);
        assert!(plan("content: \"retry budget\"").syntax);
        assert!(plan("NEAR(\"retry\" budget, 5)").syntax);
        assert!(plan("paginat* OR cursor").syntax);
        assert!(plan("\"say \"\"hi\"\"\" AND x").syntax);
        // Operators with punctuation no query means: words.
        assert!(!plan("git log --oneline OR git show").syntax);
        assert!(!plan("title: \"x\"").syntax);
    }

    #[test]
    fn incidental_punctuation_is_searched_as_words() {
        let p = plan("df.to_parquet() ArrowInvalid");
        assert!(!p.syntax);
        assert_eq!(
            p.strict,
            "\"df.to_parquet\" AND (\"ArrowInvalid\" OR \"arrow invalid\")"
        );
        assert_eq!(strict("src/ledger.ts:42 ()"), "\"src/ledger.ts:42\"");
        assert_eq!(strict("column: value"), "\"column\" \"value\"");
    }

    #[test]
    fn camel_case_terms_match_their_parts() {
        assert_eq!(
            strict("invoiceTotal"),
            "(\"invoiceTotal\" OR \"invoice total\")"
        );
        assert_eq!(
            strict("InvoiceService.computeTotal"),
            "(\"InvoiceService.computeTotal\" OR \"invoice service compute total\")"
        );
    }

    #[test]
    fn fallbacks_drop_the_question_words_then_all_but_one_then_any_word() {
        let f = |t: &str| -> Vec<String> { plan(t).fallbacks.into_iter().map(|t| t.fts).collect() };
        assert_eq!(
            f("where did we fix the token refresh race?"),
            [
                "\"fix\" \"token\" \"refresh\" \"race\"",
                "(\"token\" AND \"refresh\" AND \"race\") OR (\"fix\" AND \"refresh\" AND \"race\") \
                 OR (\"fix\" AND \"token\" AND \"race\") OR (\"fix\" AND \"token\" AND \"refresh\")",
                "\"fix\" OR \"token\" OR \"refresh\" OR \"race\""
            ]
        );
        assert_eq!(
            f("payout retry attempts"),
            [
                "(\"retry\" AND \"attempts\") OR (\"payout\" AND \"attempts\") OR (\"payout\" AND \"retry\")",
                "\"payout\" OR \"retry\" OR \"attempts\""
            ]
        );
        // Two words: all but one is any one.
        assert_eq!(f("payout retry"), ["\"payout\" OR \"retry\""]);
        assert!(f("pagination").is_empty());
        assert!(f("what did we do").is_empty());
        assert!(f("token OR refresh").is_empty());
        assert!(f("\"exact phrase\" here").is_empty());
    }

    #[test]
    fn a_long_text_keeps_its_most_useful_terms() {
        // Quotes in pasted text with punctuation no query means: words, not syntax.
        let trace = "Traceback (most recent call last): File \"x.py\", line 3, in <module>";
        let p = plan(trace);
        assert!(!p.syntax);
        assert!(p.terms.contains(&"x.py".to_string()), "{p:?}");
        assert!(!plan("KeyError: \"customer_id\"").syntax);
        let pasted = "so when I run the nightly job it now fails after the upgrade and the log \
                      says something about the writer and pyarrow.lib.ArrowInvalid in \
                      export_orders while the other tasks finish fine every night as before";
        let p = plan(pasted);
        assert!(!p.syntax);
        assert_eq!(p.terms.len(), MAX_TERMS);
        assert!(p.dropped > 0);
        assert!(p.terms.contains(&"pyarrow.lib.ArrowInvalid".to_string()));
        assert!(p.terms.contains(&"export_orders".to_string()));
        assert!(!p.terms.iter().any(|t| is_stopword(t)));
    }

    proptest! {
        #[test]
        fn any_text_plans_without_panicking(text in "\\PC{0,400}") {
            let p = plan(&text);
            prop_assert!(p.terms.len() <= MAX_TERMS);
        }

        /// Any text at all (control characters, any script, FTS operators in any place) plans
        /// without panicking, and whatever is not intentional syntax is valid FTS5.
        #[test]
        fn any_text_is_valid_fts5_unless_it_is_syntax(text in ".{0,200}") {
            let p = plan(&text);
            prop_assert!(p.terms.len() <= MAX_TERMS);
            prop_assume!(!p.syntax);
            let c = rusqlite::Connection::open_in_memory().unwrap();
            c.execute_batch("CREATE VIRTUAL TABLE t USING fts5(content, terms, tokenize='porter unicode61'); INSERT INTO t VALUES ('some text', 'more');").unwrap();
            for q in std::iter::once(&p.strict).chain(p.fallbacks.iter().map(|t| &t.fts)) {
                if q.is_empty() { continue; }
                let r: rusqlite::Result<i64> = c.query_row("SELECT COUNT(*) FROM t WHERE t MATCH ?1", [q], |r| r.get(0));
                prop_assert!(r.is_ok(), "{q:?}: {r:?}");
            }
        }

        /// Plain words never become FTS syntax errors: every plain plan is valid FTS5.
        #[test]
        fn plain_plans_are_valid_fts5(words in proptest::collection::vec("[a-zA-Z0-9_.:/()\\-+,;=<>!?#@$%^&{}\\[\\]|~`']{1,12}", 1..20)) {
            let text = words.join(" ");
            let p = plan(&text);
            prop_assume!(!p.syntax);
            let c = rusqlite::Connection::open_in_memory().unwrap();
            c.execute_batch("CREATE VIRTUAL TABLE t USING fts5(content, terms, tokenize='porter unicode61'); INSERT INTO t VALUES ('some text', 'more');").unwrap();
            for q in std::iter::once(&p.strict).chain(p.fallbacks.iter().map(|t| &t.fts)) {
                if q.is_empty() { continue; }
                let r: rusqlite::Result<i64> = c.query_row("SELECT COUNT(*) FROM t WHERE t MATCH ?1", [q], |r| r.get(0));
                prop_assert!(r.is_ok(), "{q:?}: {r:?}");
            }
        }
    }
}
