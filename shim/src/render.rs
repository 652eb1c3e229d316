//! Replies as text: `nmem search|get|timeline|recent|save` on a terminal and the MCP tools'
//! `format: "text"` are both rendered here, from the typed replies of `nmem_proto::query`, so
//! the two cannot drift apart (which item is a prompt, what an empty reply says, where the notes
//! go, how a timeline marks its anchor). They differ only where their readers do, in [`For`].

use nmem_proto::query::{Observation, RetrievalSource, Saved, SearchHit, SearchReply, Timeline};
use nmem_proto::text::one_line;

/// Who reads the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum For {
    /// A person at a terminal: aligned columns, each item cut to one screen line, `get` as
    /// full records.
    Terminal,
    /// A model (MCP `format: "text"`): one compact line per item with its project, the text
    /// whole (flattened to one line); a model reads every word, a person scans.
    Model,
}

/// A rendered reply: what the reader should know about it (each note says what to do), then
/// the items. The CLI prints the notes to stderr, the MCP text puts them first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Text {
    pub notes: Vec<String>,
    pub body: String,
}

impl Text {
    /// Notes first (`note: …`), then the body: the MCP tool result.
    pub fn joined(&self) -> String {
        self.notes
            .iter()
            .map(|n| format!("note: {n}\n"))
            .chain(std::iter::once(self.body.clone()))
            .collect()
    }

    fn body(body: String) -> Text {
        Text {
            notes: Vec::new(),
            body,
        }
    }
}

/// The widest item text a terminal line shows.
const TERMINAL_TEXT: usize = 100;

/// One item, whatever reply it came from.
struct Item<'a> {
    id: i64,
    prompt: bool,
    timestamp: i64,
    /// The type a model reads: a prompt says `prompt`.
    kind: &'a str,
    /// The type column of a terminal's table: empty for a prompt, whose id says what it is.
    column: &'a str,
    project: &'a str,
    text: std::borrow::Cow<'a, str>,
    /// A document chunk (a `doc` search result): its id is a chunk id, `get --doc`.
    doc: bool,
    /// A knowledge or work item (a `knowledge` or `work` search result): its id is an item id,
    /// `get --knowledge`, `nmem knowledge show k<id>`.
    item: bool,
    /// Where a search result was captured, when not on this device (`device 3f2a9c1b`,
    /// `team acme (device …)`): shown before its text.
    origin: Option<String>,
}

impl<'a> Item<'a> {
    fn hit(h: &'a SearchHit) -> Item<'a> {
        let prompt = h.kind == "prompt";
        Item {
            id: h.id,
            prompt,
            timestamp: h.timestamp,
            kind: h.obs_type.as_deref().unwrap_or(&h.kind),
            column: h.obs_type.as_deref().unwrap_or(""),
            project: &h.project,
            // A chunk says where it is: the locator and lines, then its text.
            text: match &h.doc {
                Some(d) => format!(
                    "{}:{}-{} {}",
                    d.locator, d.line_start, d.line_end, h.content_preview
                )
                .into(),
                None => match &h.knowledge {
                    // An item says its standing first: what is stale or contested is read so.
                    Some(k) => format!(
                        "[{}{}{}] {}",
                        k.status,
                        if k.possibly_stale {
                            ", possibly stale"
                        } else {
                            ""
                        },
                        if k.is_pinned { ", pinned" } else { "" },
                        h.content_preview
                    )
                    .into(),
                    None => h.content_preview.as_str().into(),
                },
            },
            doc: h.kind == "doc",
            item: h.knowledge.is_some(),
            origin: h.origin.label(),
        }
    }

    fn obs(o: &'a Observation) -> Item<'a> {
        Item {
            id: o.id,
            prompt: false,
            timestamp: o.timestamp,
            kind: &o.obs_type,
            column: &o.obs_type,
            project: &o.project,
            text: o.content.as_str().into(),
            doc: o.obs_type == "doc" && o.source_event == "ingest",
            item: o.source_event == "knowledge",
            origin: None,
        }
    }

    /// `#12` for an observation, `p12` (terminal) or `prompt 12` (model) for a prompt.
    fn label(&self, to: For) -> String {
        match (self.prompt, to) {
            (false, For::Terminal) if self.doc => format!("d{}", self.id),
            (false, For::Model) if self.doc => format!("doc {}", self.id),
            (false, For::Terminal) if self.item => format!("k{}", self.id),
            (false, For::Model) if self.item => format!("knowledge {}", self.id),
            (false, _) => format!("#{}", self.id),
            (true, For::Terminal) => format!("p{}", self.id),
            (true, For::Model) => format!("prompt {}", self.id),
        }
    }

    /// The item's text, after its origin when it came from another device.
    fn text(&self) -> std::borrow::Cow<'_, str> {
        match &self.origin {
            Some(o) => format!("[{o}] {}", self.text).into(),
            None => self.text.as_ref().into(),
        }
    }

    /// A search hit's line: the terminal's has the project as a column.
    fn hit_line(&self, to: For) -> String {
        match to {
            For::Terminal => format!(
                "{:>8}  {}  {:<15} {:<14} {}",
                self.label(to),
                when(self.timestamp),
                self.column,
                self.project,
                one_line(&self.text(), TERMINAL_TEXT)
            ),
            For::Model => self.model_line(""),
        }
    }

    /// A line of a list of observations (`recent`, a timeline), `mark` before it: the terminal
    /// leaves the project out (a list is mostly one project's).
    fn row(&self, mark: &str, to: For) -> String {
        match to {
            For::Terminal => format!(
                "{mark}{:<9} {}  {:<15} {}",
                self.label(to),
                when(self.timestamp),
                self.column,
                one_line(&self.text, TERMINAL_TEXT)
            ),
            For::Model => self.model_line(mark),
        }
    }

    fn model_line(&self, mark: &str) -> String {
        format!(
            "{mark}{} {} {} [{}] {}",
            self.label(For::Model),
            when(self.timestamp),
            self.kind,
            self.project,
            one_line(&self.text(), usize::MAX)
        )
    }
}

/// What an empty list says.
const NO_RESULTS: &str = "no results";

fn lines(v: impl Iterator<Item = String>, empty: &str) -> String {
    let v: Vec<String> = v.collect();
    if v.is_empty() {
        empty.to_string()
    } else {
        v.join("\n")
    }
}

/// A search reply: its notes, then one line per hit; `explain` adds, on a terminal, how each
/// was found.
pub fn search(r: &SearchReply, to: For, explain: bool) -> Text {
    let items = r.items.iter().map(|h| {
        let mut line = Item::hit(h).hit_line(to);
        if explain && to == For::Terminal {
            line.push_str(&format!("\n{:>10}{}", "", found_by(&h.retrieval_sources)));
        }
        line
    });
    Text {
        notes: r.notes.clone(),
        body: lines(items, NO_RESULTS),
    }
}

/// Observations fetched by id (`get`): full records on a terminal, a line each for a model.
pub fn observations(obs: &[Observation], to: For) -> Text {
    Text::body(match to {
        For::Terminal => obs.iter().map(full).collect(),
        For::Model => lines(obs.iter().map(|o| Item::obs(o).row("", to)), NO_RESULTS),
    })
}

/// The latest observations (`recent`).
pub fn recent(obs: &[Observation], to: For) -> Text {
    let empty = match to {
        For::Terminal => "nothing recorded yet",
        For::Model => NO_RESULTS,
    };
    Text::body(lines(obs.iter().map(|o| Item::obs(o).row("", to)), empty))
}

/// A timeline in time order, its anchor marked.
pub fn timeline(t: &Timeline, to: For) -> Text {
    let anchor = match to {
        For::Terminal => "▶ ",
        For::Model => "> ",
    };
    let row = |mark, o| Item::obs(o).row(mark, to);
    let rows = t
        .before
        .iter()
        .map(|o| row("  ", o))
        .chain(std::iter::once(row(anchor, &t.anchor)))
        .chain(t.after.iter().map(|o| row("  ", o)));
    Text::body(lines(rows, NO_RESULTS))
}

/// A saved memory.
pub fn saved(s: &Saved) -> Text {
    Text::body(format!("saved as #{} in {}", s.id, s.project))
}

/// One observation in full, ending with a blank line.
fn full(o: &Observation) -> String {
    let mut out = format!(
        "#{} {} {} ({}, session {})\n",
        o.id,
        o.obs_type,
        when(o.timestamp),
        o.project,
        o.session_id
    );
    if let Some(f) = &o.file_path {
        out.push_str(&format!("  file: {f}\n"));
    }
    for line in o.content.lines() {
        out.push_str(&format!("  {line}\n"));
    }
    if let Some(m) = &o.metadata {
        out.push_str(&format!("  metadata: {m}\n"));
    }
    out.push('\n');
    out
}

/// How a result was found, in one line: `lexical all_words #1 · semantic #3 (0.61)`.
pub fn found_by(sources: &[RetrievalSource]) -> String {
    sources
        .iter()
        .map(|s| {
            let mut t = s.source.clone();
            if let Some(tier) = &s.tier {
                t.push(' ');
                t.push_str(tier);
            }
            t.push_str(&format!(" #{}", s.rank));
            if let Some(sim) = s.similarity {
                t.push_str(&format!(" ({sim:.2})"));
            }
            if let Some(p) = s.prompt_id {
                t.push_str(&format!(" (prompt p{p})"));
            }
            t
        })
        .collect::<Vec<_>>()
        .join(" · ")
}

/// `2026-08-20 09:14` (UTC).
pub fn when(ms: i64) -> String {
    let t = nmem_proto::time::format_rfc3339_ms(ms);
    format!("{} {}", &t[..10], &t[11..16])
}

#[cfg(test)]
mod tests {
    use super::*;
    use nmem_proto::query::QueryUse;

    fn obs(id: i64, content: &str) -> Observation {
        Observation {
            id,
            timestamp: 1_787_217_247_630,
            session_id: "s1".into(),
            project: "acme-api".into(),
            obs_type: "command".into(),
            source_event: "PostToolUse".into(),
            content: content.into(),
            ..Default::default()
        }
    }

    fn reply() -> SearchReply {
        let hit = |kind: &str, id, t: Option<&str>| SearchHit {
            kind: kind.into(),
            id,
            timestamp: 1_787_217_247_630,
            obs_type: t.map(str::to_string),
            content_preview: "cargo   test\n--release".into(),
            session_id: "s1".into(),
            project: "acme-api".into(),
            ..Default::default()
        };
        SearchReply {
            items: vec![
                hit("observation", 7, Some("command")),
                hit("prompt", 3, None),
            ],
            mode: "lexical".into(),
            query: QueryUse::default(),
            notes: vec!["no embedding model".into()],
        }
    }

    #[test]
    fn dates() {
        assert_eq!(when(0), "1970-01-01 00:00");
        assert_eq!(when(1_787_217_247_630), "2026-08-20 09:14");
    }

    /// The MCP text: notes first, a line per hit with its project, prompts named as such.
    #[test]
    fn a_search_for_a_model() {
        assert_eq!(
            search(&reply(), For::Model, false).joined(),
            "note: no embedding model\n\
             #7 2026-08-20 09:14 command [acme-api] cargo test --release\n\
             prompt 3 2026-08-20 09:14 prompt [acme-api] cargo test --release"
        );
    }

    #[test]
    fn a_search_on_a_terminal() {
        let t = search(&reply(), For::Terminal, false);
        assert_eq!(t.notes, ["no embedding model"]);
        assert_eq!(
            t.body,
            "      #7  2026-08-20 09:14  command         acme-api       cargo test --release\n      \
             p3  2026-08-20 09:14                  acme-api       cargo test --release"
        );
    }

    /// A result from another device says where it came from, on a terminal and for a model; one
    /// of this device's says nothing.
    #[test]
    fn a_result_from_elsewhere_says_where_it_came_from() {
        use nmem_proto::query::{Origin, OriginKind};
        let mut r = reply();
        r.items[0].origin = Origin {
            kind: OriginKind::MyDevices,
            device: Some("3f2a9c1b77e0".into()),
            space: None,
        };
        r.items[1].origin = Origin {
            kind: OriginKind::Team,
            device: Some("a1b2c3d4e5".into()),
            space: Some("acme".into()),
        };
        let t = search(&r, For::Terminal, false).body;
        assert!(t.contains("[device 3f2a9c1b] cargo test"), "{t}");
        assert!(
            t.contains("[team acme (device a1b2c3d4)] cargo test"),
            "{t}"
        );
        let m = search(&r, For::Model, false).body;
        assert!(
            m.contains("[device 3f2a9c1b]") && m.contains("[team acme"),
            "{m}"
        );
        assert!(!search(&reply(), For::Model, false).body.contains("device"));
    }

    /// The seam between the two: the same items in the same order, the same notes, the same
    /// empty reply, the same anchor; only the layout of a line differs.
    #[test]
    fn both_readers_get_the_same_items() {
        let ids = |s: &str| -> Vec<String> {
            s.lines()
                .filter_map(|l| {
                    l.split_whitespace()
                        .find(|w| w.starts_with('#') || w.starts_with('p') && w.len() > 1)
                        .map(|w| w.trim_start_matches(['#', 'p']).to_string())
                })
                .collect()
        };
        let r = reply();
        let (m, t) = (
            search(&r, For::Model, false),
            search(&r, For::Terminal, false),
        );
        assert_eq!(m.notes, t.notes);
        assert_eq!(m.body.lines().count(), t.body.lines().count());
        let empty = SearchReply {
            items: vec![],
            ..r.clone()
        };
        assert_eq!(
            search(&empty, For::Model, false).body,
            search(&empty, For::Terminal, false).body
        );
        let tl = Timeline {
            before: vec![obs(1, "a")],
            anchor: obs(2, "b"),
            after: vec![obs(3, "c"), obs(4, "d")],
        };
        for to in [For::Model, For::Terminal] {
            let body = timeline(&tl, to).body;
            assert_eq!(ids(&body), ["1", "2", "3", "4"], "{body}");
            let marked: Vec<&str> = body.lines().filter(|l| !l.starts_with("  ")).collect();
            assert_eq!(marked.len(), 1, "{body}");
            assert!(marked[0].contains("#2 "), "{body}");
        }
        let list = [obs(9, "x"), obs(8, "y")];
        for to in [For::Model, For::Terminal] {
            assert_eq!(ids(&recent(&list, to).body), ["9", "8"]);
        }
    }

    #[test]
    fn a_long_text_is_cut_for_a_person_and_whole_for_a_model() {
        let long = "word ".repeat(100);
        let t = recent(&[obs(1, &long)], For::Terminal).body;
        assert!(t.ends_with('…') && t.chars().count() < 160, "{t}");
        let m = recent(&[obs(1, &long)], For::Model).body;
        assert!(m.ends_with(long.trim()), "{m}");
    }

    #[test]
    fn get_is_full_records_on_a_terminal() {
        let mut o = obs(5, "line one\nline two");
        o.file_path = Some("/w/src/app.ts".into());
        assert_eq!(
            observations(&[o.clone()], For::Terminal).body,
            "#5 command 2026-08-20 09:14 (acme-api, session s1)\n  file: /w/src/app.ts\n  \
             line one\n  line two\n\n"
        );
        assert_eq!(
            observations(&[o], For::Model).body,
            "#5 2026-08-20 09:14 command [acme-api] line one line two"
        );
        assert_eq!(observations(&[], For::Model).body, "no results");
    }
}
