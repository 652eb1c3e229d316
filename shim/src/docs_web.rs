//! The two sources of `nmem ingest` that are not plain text: a web page (fetched only when
//! `--url` asks, the one network call nmem makes) and a PDF's text.
//!
//! The page: GET with `ureq` under a time bound ([`FETCH_SECS`] for the whole exchange) and a
//! size bound ([`MAX_PAGE`], read at most that plus one byte), redirects followed up to 5 times;
//! only `http` and `https` URLs. HTML becomes Markdown-like text here (headings as `#` lines so
//! the chunker cuts by them, blocks as paragraphs, `script`/`style`/`head` dropped, the common
//! entities decoded): a few dozen lines against an HTML engine (html5ever and its tree) that a
//! search index does not need. Anything not HTML is taken as text when it is UTF-8.
//!
//! The PDF: `lopdf` (no default features) reads the document and extracts each page's text.

use nmem_proto::docs::{SourceKind, SourceText};
use std::io::Read;
use std::time::Duration;

/// The whole fetch's deadline.
pub const FETCH_SECS: u64 = 20;
/// The largest page read (5 MiB).
pub const MAX_PAGE: u64 = 5 << 20;

/// Fetch `url` and return its text as a `web` source.
pub fn fetch(url: &str) -> Result<SourceText, String> {
    let lower = url.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err(format!(
            "--url {url}: only http:// and https:// URLs are fetched"
        ));
    }
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(FETCH_SECS)))
        .max_redirects(5)
        .http_status_as_error(true)
        .build()
        .into();
    let mut res = agent
        .get(url)
        .header("User-Agent", concat!("nmem/", env!("CARGO_PKG_VERSION")))
        .call()
        .map_err(|e| format!("fetching {url}: {e}"))?;
    let ctype = res
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let mut body = Vec::new();
    res.body_mut()
        .as_reader()
        .take(MAX_PAGE + 1)
        .read_to_end(&mut body)
        .map_err(|e| format!("reading {url}: {e}"))?;
    if body.len() as u64 > MAX_PAGE {
        return Err(format!("{url}: the page is over {} MiB", MAX_PAGE >> 20));
    }
    if ctype.contains("application/pdf") || body.starts_with(b"%PDF-") {
        return Ok(SourceText {
            locator: url.to_string(),
            kind: SourceKind::Web,
            text: pdf_text(&body).map_err(|e| format!("{url}: {e}"))?,
            markdown: false,
        });
    }
    let raw = String::from_utf8_lossy(&body);
    let html = ctype.contains("html") || raw.trim_start().starts_with('<');
    Ok(SourceText {
        locator: url.to_string(),
        kind: SourceKind::Web,
        text: if html {
            html_to_text(&raw)
        } else {
            raw.into_owned()
        },
        markdown: html,
    })
}

/// The text of a PDF, page by page.
pub fn pdf_text(bytes: &[u8]) -> Result<String, String> {
    let doc = lopdf::Document::load_mem(bytes).map_err(|e| format!("not a readable PDF: {e}"))?;
    let pages: Vec<u32> = doc.get_pages().keys().copied().collect();
    if pages.is_empty() {
        return Err("the PDF has no pages".into());
    }
    let mut out = String::new();
    for p in pages {
        let t = doc
            .extract_text(&[p])
            .map_err(|e| format!("page {p}: no text could be extracted ({e})"))?;
        out.push_str(t.trim_end());
        out.push_str("\n\n");
    }
    if out.trim().is_empty() {
        return Err("the PDF has no text (a scan?): nothing to ingest".into());
    }
    Ok(out)
}

/// HTML as Markdown-like text: headings as `#` lines, blocks as paragraphs, no markup.
pub fn html_to_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len() / 2);
    let mut rest = html;
    let mut skip_until: Option<&'static str> = None;
    while let Some(lt) = rest.find('<') {
        if skip_until.is_none() {
            out.push_str(&decode(&rest[..lt]));
        }
        let after = &rest[lt + 1..];
        if after.starts_with("!--") {
            rest = after.find("-->").map_or("", |e| &after[e + 3..]);
            continue;
        }
        let Some(gt) = after.find('>') else {
            rest = "";
            break;
        };
        let tag = after[..gt].trim();
        rest = &after[gt + 1..];
        let closing = tag.starts_with('/');
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        if let Some(end) = skip_until {
            if closing && name == end {
                skip_until = None;
            }
            continue;
        }
        match name.as_str() {
            "script" | "style" | "head" | "noscript" | "template" | "svg" if !closing => {
                skip_until = Some(match name.as_str() {
                    "script" => "script",
                    "style" => "style",
                    "head" => "head",
                    "noscript" => "noscript",
                    "template" => "template",
                    _ => "svg",
                });
            }
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                out.push_str("\n\n");
                if !closing {
                    let level = (name.as_bytes()[1] - b'0') as usize;
                    out.push_str(&"#".repeat(level));
                    out.push(' ');
                }
            }
            "p" | "div" | "section" | "article" | "ul" | "ol" | "table" | "pre" | "blockquote"
            | "header" | "footer" | "main" | "nav" => out.push_str("\n\n"),
            "br" | "tr" => out.push('\n'),
            "li" if !closing => out.push_str("\n- "),
            "td" | "th" if !closing => out.push_str(" | "),
            _ => {}
        }
    }
    if skip_until.is_none() {
        out.push_str(&decode(rest));
    }
    // Runs of spaces and blank lines collapsed; each line trimmed.
    let mut text = String::new();
    let mut blank = 0;
    for line in out.lines() {
        let l = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if l.is_empty() {
            blank += 1;
            continue;
        }
        if !text.is_empty() {
            text.push_str(if blank > 0 { "\n\n" } else { "\n" });
        }
        blank = 0;
        text.push_str(&l);
    }
    text.push('\n');
    text
}

fn decode(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let end = after.find(';').filter(|e| *e <= 10);
        let ent = end.map(|e| &after[..e]);
        let ch = match ent {
            Some("amp") => Some('&'),
            Some("lt") => Some('<'),
            Some("gt") => Some('>'),
            Some("quot") => Some('"'),
            Some("apos") | Some("#39") => Some('\''),
            Some("nbsp") => Some(' '),
            Some(e) if e.starts_with("#x") || e.starts_with("#X") => {
                u32::from_str_radix(&e[2..], 16)
                    .ok()
                    .and_then(char::from_u32)
            }
            Some(e) if e.starts_with('#') => e[1..].parse().ok().and_then(char::from_u32),
            _ => None,
        };
        match (ch, end) {
            (Some(c), Some(e)) => {
                out.push(c);
                rest = &after[e + 1..];
            }
            _ => {
                out.push('&');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn html_becomes_headed_text() {
        let html = "<html><head><title>x</title><style>p{}</style></head><body>\
            <h1>Guide</h1><p>Use &amp; enjoy &#x41;.</p><script>var a = 1;</script>\
            <h2>Install</h2><ul><li>one</li><li>two</li></ul><!-- note --></body></html>";
        assert_eq!(
            html_to_text(html),
            "# Guide\n\nUse & enjoy A.\n\n## Install\n\n- one\n- two\n"
        );
    }

    proptest! {
        #[test]
        fn html_to_text_never_panics(s in "[<>/a-z &;#!\\-]{0,400}") {
            let _ = html_to_text(&s);
        }
    }
}
