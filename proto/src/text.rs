//! Text for one line of a table, a digest or a tool reply: shared by the daemon's SessionStart
//! digest and the clients' renderers, so a preview is cut the same way everywhere.

/// `s` with every run of white space (newlines included) made one space, cut to `max`
/// characters with `…` as the last when it is longer.
pub fn one_line(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let mut cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::one_line;
    use proptest::prelude::*;

    #[test]
    fn flattened_and_cut() {
        assert_eq!(one_line("  cargo\n\ttest  ", 100), "cargo test");
        assert_eq!(one_line("abcdef", 4), "abc…");
        assert_eq!(one_line("abcd", 4), "abcd");
        assert_eq!(one_line("ab", 0), "…");
    }

    proptest! {
        /// Any text: one line, at most `max` characters (one, `…`, when `max` is 0), no
        /// leading, trailing or doubled spaces, and every word of a short text kept.
        #[test]
        fn any_text_is_one_bounded_line(s in "\\PC*|[ \\t\\n\\r\u{85}\u{2028}a-zé]*", max in 0usize..200) {
            let l = one_line(&s, max);
            prop_assert!(!l.contains(['\n', '\r', '\t']));
            prop_assert!(l.chars().count() <= max.max(1));
            prop_assert!(!l.starts_with(' ') && !l.contains("  "));
            let words: Vec<&str> = s.split_whitespace().collect();
            if !l.ends_with('…') {
                prop_assert_eq!(l, words.join(" "));
            }
        }
    }
}
