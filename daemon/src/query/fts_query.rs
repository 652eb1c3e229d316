//! From what a person types to an FTS5 query.
//!
//! Text without FTS syntax has each term quoted, so paths, `foo-bar`, `a.b`, `x::y` and
//! `C++` just work. Text that uses FTS syntax (`AND`/`OR`/`NOT`/`NEAR`, `"phrase"`, `prefix*`,
//! parentheses, `column:`) goes to FTS5 as written; if FTS5 rejects it, the caller reports
//! SQLite's message.

pub fn to_fts5(text: &str) -> String {
    if uses_syntax(text) {
        return text.to_string();
    }
    text.split_whitespace()
        .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Looser queries to try, in turn, when plain text finds too few results: first every word that
/// carries meaning (without "where did we …"), then any of them, so a question asked in other
/// words still finds what matches most of it (BM25 ranks by how much matches). Text with FTS
/// syntax gets none: it says exactly what it wants.
pub fn fallbacks(text: &str) -> Vec<String> {
    if uses_syntax(text) {
        return Vec::new();
    }
    let terms: Vec<&str> = text.split_whitespace().collect();
    let meaningful: Vec<&str> = terms.iter().copied().filter(|t| !is_stopword(t)).collect();
    let quote = |t: &&str| format!("\"{}\"", t.replace('"', "\"\""));
    let mut out = Vec::new();
    if !meaningful.is_empty() && meaningful.len() < terms.len() {
        out.push(meaningful.iter().map(quote).collect::<Vec<_>>().join(" "));
    }
    if meaningful.len() >= 2 {
        out.push(
            meaningful
                .iter()
                .map(quote)
                .collect::<Vec<_>>()
                .join(" OR "),
        );
    }
    out
}

/// Words that say how a question is asked, not what it is about.
fn is_stopword(term: &str) -> bool {
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

fn uses_syntax(text: &str) -> bool {
    if text.contains('"') || text.contains('(') || text.contains(')') {
        return true;
    }
    text.split_whitespace().any(|w| {
        matches!(w, "AND" | "OR" | "NOT")
            || w.starts_with("NEAR(")
            || (w.ends_with('*')
                && w.len() > 1
                && w[..w.len() - 1]
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '_'))
    })
}

#[cfg(test)]
mod tests {
    use super::to_fts5;

    #[test]
    fn plain_text_is_quoted_and_syntax_passes_through() {
        assert_eq!(to_fts5("src/auth/mod.rs"), "\"src/auth/mod.rs\"");
        assert_eq!(to_fts5("foo-bar a.b x::y"), "\"foo-bar\" \"a.b\" \"x::y\"");
        assert_eq!(to_fts5("token refresh"), "\"token\" \"refresh\"");
        assert_eq!(to_fts5("token OR refresh"), "token OR refresh");
        assert_eq!(to_fts5("\"token refresh\""), "\"token refresh\"");
        assert_eq!(to_fts5("paginat*"), "paginat*");
        assert_eq!(to_fts5("(a OR b) NOT c"), "(a OR b) NOT c");
        assert_eq!(to_fts5("or and not"), "\"or\" \"and\" \"not\"");
        assert_eq!(to_fts5("C++"), "\"C++\"");
    }

    #[test]
    fn fallbacks_drop_the_question_words_then_take_any_word() {
        use super::fallbacks;
        assert_eq!(
            fallbacks("where did we fix the token refresh race?"),
            [
                "\"fix\" \"token\" \"refresh\" \"race?\"",
                "\"fix\" OR \"token\" OR \"refresh\" OR \"race?\""
            ]
        );
        assert_eq!(
            fallbacks("payout retry attempts"),
            ["\"payout\" OR \"retry\" OR \"attempts\""]
        );
        assert!(fallbacks("pagination").is_empty());
        assert!(fallbacks("what did we do").is_empty());
        assert!(fallbacks("token OR refresh").is_empty());
        assert!(fallbacks("\"exact phrase\" here").is_empty());
    }
}
