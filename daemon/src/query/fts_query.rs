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
}
