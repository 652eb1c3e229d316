//! Chunking: a document's text cut into searchable pieces, each with its heading path and line
//! range. Pure functions, no I/O.
//!
//! * Markdown: a new chunk at every ATX heading (`#` … `######`) outside code fences, with the
//!   path of headings above it (`Install > From source`); YAML/TOML front matter (`---`/`+++`
//!   at the first line) is a chunk of its own. A section longer than [`MAX_CHUNK`] bytes is split
//!   at blank lines outside fences; a fence or a table is kept whole (up to [`HARD_MAX`], past
//!   which it is cut by lines like any text).
//! * Anything else: windows of [`WINDOW_LINES`] lines, cut earlier at [`MAX_CHUNK`] bytes.
//!
//! Chunks that are only whitespace are dropped; the others, concatenated in order, are the
//! text (the property tests check it). A line longer than the bound is cut at a character
//! boundary, so a chunk never exceeds [`HARD_MAX`].

/// The size a chunk aims at: about a screen of text, small enough for a focused search hit.
pub const MAX_CHUNK: usize = 2_000;
/// The most a kept-whole block (a fence, a table) may be before it is cut like text.
pub const HARD_MAX: usize = 8_000;
/// Lines per chunk of a plain text or code file.
pub const WINDOW_LINES: usize = 60;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// `Install > From source`; empty before the first heading, `front matter` for it.
    pub heading: String,
    /// 1-based, inclusive.
    pub line_start: usize,
    pub line_end: usize,
    pub text: String,
}

/// A line of the text, with its terminator, and its 1-based number.
#[derive(Clone, Copy)]
struct Line<'a> {
    no: usize,
    text: &'a str,
}

fn lines(text: &str) -> Vec<Line<'_>> {
    text.split_inclusive('\n')
        .enumerate()
        .map(|(i, t)| Line { no: i + 1, text: t })
        .collect()
}

/// Chunks of Markdown text.
pub fn markdown(text: &str) -> Vec<Chunk> {
    let ls = lines(text);
    let mut out = Vec::new();
    let mut start = 0;
    if let Some(end) = front_matter_end(&ls) {
        let fm = &ls[..=end];
        if fm.iter().map(|l| l.text.len()).sum::<usize>() <= HARD_MAX {
            push_whole(&mut out, "front matter", fm);
        } else {
            pack_lines(&mut out, "front matter", fm, MAX_CHUNK);
        }
        start = end + 1;
    }
    // Sections: each heading outside a fence starts one.
    let mut path: Vec<(usize, String)> = Vec::new();
    let mut heading = String::new();
    let mut sec_start = start;
    let mut fence: Option<(u8, usize)> = None;
    for i in start..ls.len() {
        let l = ls[i].text;
        if let Some(f) = fence {
            if closes_fence(l, f) {
                fence = None;
            }
            continue;
        }
        if let Some(f) = opens_fence(l) {
            fence = Some(f);
            continue;
        }
        if let Some((level, title)) = atx_heading(l) {
            if i > sec_start {
                section(&mut out, &heading, &ls[sec_start..i]);
            }
            while path.last().is_some_and(|(lv, _)| *lv >= level) {
                path.pop();
            }
            path.push((level, title));
            heading = path
                .iter()
                .map(|(_, t)| t.as_str())
                .collect::<Vec<_>>()
                .join(" > ");
            sec_start = i;
        }
    }
    if sec_start < ls.len() {
        section(&mut out, &heading, &ls[sec_start..]);
    }
    out
}

/// Chunks of a plain text or code file: line windows under the size bound.
pub fn plain(text: &str) -> Vec<Chunk> {
    let ls = lines(text);
    let mut out = Vec::new();
    for w in ls.chunks(WINDOW_LINES) {
        pack_lines(&mut out, "", w, MAX_CHUNK);
    }
    out
}

/// The index of the line closing front matter that opens the text, if any.
fn front_matter_end(ls: &[Line]) -> Option<usize> {
    let first = ls.first()?.text.trim_end();
    if first != "---" && first != "+++" {
        return None;
    }
    ls.iter()
        .enumerate()
        .skip(1)
        .take(200)
        .find(|(_, l)| {
            let t = l.text.trim_end();
            t == first || (first == "---" && t == "...")
        })
        .map(|(i, _)| i)
}

/// A fence opener: its character and length (``` or ~~~, at most 3 spaces of indent).
fn opens_fence(l: &str) -> Option<(u8, usize)> {
    let t = l.trim_start_matches(' ');
    if l.len() - t.len() > 3 {
        return None;
    }
    let c = *t.as_bytes().first()?;
    if c != b'`' && c != b'~' {
        return None;
    }
    let n = t.bytes().take_while(|b| *b == c).count();
    // A backtick fence's info string may not contain a backtick.
    (n >= 3 && !(c == b'`' && t[n..].contains('`'))).then_some((c, n))
}

fn closes_fence(l: &str, (c, n): (u8, usize)) -> bool {
    let t = l.trim_start_matches(' ');
    let k = t.bytes().take_while(|b| *b == c).count();
    l.len() - t.len() <= 3 && k >= n && t[k..].trim().is_empty()
}

/// An ATX heading: its level and title.
fn atx_heading(l: &str) -> Option<(usize, String)> {
    let t = l.trim_start_matches(' ');
    if l.len() - t.len() > 3 {
        return None;
    }
    let level = t.bytes().take_while(|b| *b == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &t[level..];
    if !(rest.is_empty() || rest.starts_with([' ', '\t', '\n', '\r'])) {
        return None;
    }
    let title = rest.trim().trim_end_matches('#').trim();
    Some((level, title.to_string()))
}

/// One section: whole when it fits, else its blocks packed under the bound.
fn section(out: &mut Vec<Chunk>, heading: &str, ls: &[Line]) {
    let size: usize = ls.iter().map(|l| l.text.len()).sum();
    if size <= MAX_CHUNK {
        push_whole(out, heading, ls);
        return;
    }
    let mut pending: Vec<Line> = Vec::new();
    let flush = |out: &mut Vec<Chunk>, pending: &mut Vec<Line>| {
        if !pending.is_empty() {
            push_whole(out, heading, pending);
            pending.clear();
        }
    };
    for (block, whole) in blocks(ls) {
        let bsize: usize = block.iter().map(|l| l.text.len()).sum();
        let psize: usize = pending.iter().map(|l| l.text.len()).sum();
        if psize + bsize <= MAX_CHUNK {
            pending.extend_from_slice(block);
            continue;
        }
        flush(out, &mut pending);
        if bsize <= MAX_CHUNK || (whole && bsize <= HARD_MAX) {
            if bsize <= MAX_CHUNK {
                pending.extend_from_slice(block);
            } else {
                push_whole(out, heading, block);
            }
        } else {
            pack_lines(out, heading, block, MAX_CHUNK);
        }
    }
    flush(out, &mut pending);
}

/// A section's blocks: paragraphs (with the blank lines after them), fences and tables, each
/// with whether it must be kept whole.
fn blocks<'a, 'b>(ls: &'b [Line<'a>]) -> Vec<(&'b [Line<'a>], bool)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < ls.len() {
        let start = i;
        if let Some(f) = opens_fence(ls[i].text) {
            i += 1;
            while i < ls.len() && !closes_fence(ls[i].text, f) {
                i += 1;
            }
            i = (i + 1).min(ls.len());
            out.push((&ls[start..i], true));
            continue;
        }
        let table = is_table_row(ls[i].text);
        while i < ls.len()
            && !ls[i].text.trim().is_empty()
            && is_table_row(ls[i].text) == table
            && (i == start || opens_fence(ls[i].text).is_none())
        {
            i += 1;
        }
        while i < ls.len() && ls[i].text.trim().is_empty() {
            i += 1;
        }
        if i == start {
            i += 1;
        }
        out.push((&ls[start..i], table));
    }
    out
}

fn is_table_row(l: &str) -> bool {
    l.trim_start().starts_with('|')
}

/// Lines as one chunk (unless only whitespace).
fn push_whole(out: &mut Vec<Chunk>, heading: &str, ls: &[Line]) {
    let text: String = ls.iter().map(|l| l.text).collect();
    if text.trim().is_empty() || ls.is_empty() {
        return;
    }
    out.push(Chunk {
        heading: heading.to_string(),
        line_start: ls[0].no,
        line_end: ls[ls.len() - 1].no,
        text,
    });
}

/// Lines packed into chunks of at most `max` bytes; a longer line is cut at character
/// boundaries.
fn pack_lines(out: &mut Vec<Chunk>, heading: &str, ls: &[Line], max: usize) {
    let mut pending: Vec<Line> = Vec::new();
    let mut size = 0;
    for l in ls {
        if size + l.text.len() > max && !pending.is_empty() {
            push_whole(out, heading, &pending);
            pending.clear();
            size = 0;
        }
        if l.text.len() > max {
            let mut rest = l.text;
            while !rest.is_empty() {
                let mut cut = rest.len().min(max);
                while !rest.is_char_boundary(cut) {
                    cut -= 1;
                }
                push_whole(
                    out,
                    heading,
                    &[Line {
                        no: l.no,
                        text: &rest[..cut],
                    }],
                );
                rest = &rest[cut..];
            }
            continue;
        }
        size += l.text.len();
        pending.push(*l);
    }
    push_whole(out, heading, &pending);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn squeeze(s: &str) -> String {
        s.chars().filter(|c| !c.is_whitespace()).collect()
    }

    /// Every chunk is the text of its line range (or a piece of one long line), in order, and
    /// together they are the whole text but for whitespace-only pieces.
    fn check_cover(text: &str, chunks: &[Chunk]) {
        let all: String = chunks.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(squeeze(&all), squeeze(text));
        let ls: Vec<&str> = text.split_inclusive('\n').collect();
        let mut last = 0;
        for c in chunks {
            assert!(c.line_start >= 1 && c.line_start <= c.line_end && c.line_end <= ls.len());
            assert!(c.line_start >= last, "chunks in order");
            last = c.line_end;
            let range: String = ls[c.line_start - 1..c.line_end].concat();
            assert!(range.contains(&c.text), "a chunk is text of its lines");
            assert!(c.text.len() <= HARD_MAX);
        }
    }

    #[test]
    fn headings_outside_fences_front_matter_tables_and_fences() {
        let text = "---\ntitle: Guide\n---\nIntro line.\n# Install\nRun it.\n```sh\n# not a heading\nmake\n```\n## From source\n| a | b |\n|---|---|\n| 1 | 2 |\n# Use\nDone.\n";
        let cs = markdown(text);
        let got: Vec<(&str, usize, usize)> = cs
            .iter()
            .map(|c| (c.heading.as_str(), c.line_start, c.line_end))
            .collect();
        assert_eq!(
            got,
            vec![
                ("front matter", 1, 3),
                ("", 4, 4),
                ("Install", 5, 10),
                ("Install > From source", 11, 14),
                ("Use", 15, 16),
            ]
        );
        assert!(cs[2].text.contains("# not a heading"));
        check_cover(text, &cs);
    }

    #[test]
    fn long_sections_split_at_paragraphs_and_keep_fences_whole() {
        let para = "word ".repeat(80) + "\n\n";
        let fence = format!("```\n{}```\n", "code line\n".repeat(250));
        let text = format!("# Big\n{}{}{}", para.repeat(6), fence, para.repeat(2));
        let cs = markdown(&text);
        assert!(cs.len() > 2);
        assert!(cs.iter().all(|c| c.heading == "Big"));
        // The fence (2.5 KB, over the aim, under the hard bound) is one chunk of its own.
        assert!(cs.iter().any(|c| c.text == fence));
        for c in &cs {
            assert!(
                c.text == fence || c.text.len() <= MAX_CHUNK,
                "{}",
                c.text.len()
            );
        }
        check_cover(&text, &cs);
    }

    #[test]
    fn plain_text_by_line_windows() {
        let text: String = (1..=130).map(|i| format!("line {i}\n")).collect();
        let cs = plain(&text);
        let ranges: Vec<(usize, usize)> = cs.iter().map(|c| (c.line_start, c.line_end)).collect();
        assert_eq!(ranges, vec![(1, 60), (61, 120), (121, 130)]);
        check_cover(&text, &cs);
    }

    #[test]
    fn a_huge_line_is_cut_at_char_boundaries() {
        let text = "é".repeat(5_000);
        let cs = plain(&text);
        assert!(cs.len() >= 5);
        assert!(cs.iter().all(|c| c.line_start == 1 && c.line_end == 1));
        check_cover(&text, &cs);
    }

    #[test]
    fn empty_and_blank_texts_have_no_chunks() {
        assert!(markdown("").is_empty());
        assert!(plain(" \n\n\t\n").is_empty());
        assert!(markdown("\n\n# \n").len() <= 1);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn chunking_never_panics_and_covers_the_text(
            parts in proptest::collection::vec(prop_oneof![
                Just("# Title\n".to_string()),
                Just("## Sub #\n".to_string()),
                Just("```rust\n".to_string()),
                Just("~~~\n".to_string()),
                Just("---\n".to_string()),
                Just("| a | b |\n".to_string()),
                Just("\n".to_string()),
                "[a-zé #`|~\\-]{0,300}\n?",
                "[^\u{0}]{0,3000}",
            ], 0..40)
        ) {
            let text: String = parts.concat();
            check_cover(&text, &markdown(&text));
            check_cover(&text, &plain(&text));
        }
    }
}
