//! The high-entropy figure: how many context-free (`high_entropy`) redactions the redactor makes
//! on the eval dataset (`eval/nmem-eval.json`) and the sample transcript
//! (`tests/fixtures/transcripts/claude-code`), with the token and its context for each. Both hold
//! invented data without credentials, so every such redaction there is a false positive.
//!
//! Run: `cargo test --release --locked -p nmem-daemon high_entropy_figure -- --ignored --nocapture`.
//! It asserts nothing about the count (that is the figure); the false-positive tables in
//! `tests.rs` are what keeps it low.

use super::Redactor;
use serde_json::Value;

const MARKER: &str = "[REDACTED:high_entropy]";

/// Every string leaf that could be stored: not thinking-block signatures, nor the envelope's
/// identifiers and paths, which nmem keeps as they are (ids, `cwd`, `transcript_path`).
fn leaves<'a>(v: &'a Value, key: &str, out: &mut Vec<&'a str>) {
    let kept_as_is = matches!(key, "signature" | "cwd" | "transcript_path" | "id")
        || key.ends_with("_id")
        || key.ends_with("Id");
    match v {
        Value::String(s) if !kept_as_is => out.push(s),
        Value::Array(a) => a.iter().for_each(|x| leaves(x, key, out)),
        Value::Object(o) => o.iter().for_each(|(k, x)| leaves(x, k, out)),
        _ => {}
    }
}

/// The tokens the detector replaced in `input`, recovered by aligning the output's pieces.
fn replaced(input: &str, output: &str) -> Vec<String> {
    let pieces: Vec<&str> = output.split(MARKER).collect();
    let mut found = Vec::new();
    let mut at = match input.find(pieces[0]) {
        Some(i) => i + pieces[0].len(),
        None => return vec![format!("(in {:?})", &output[..output.len().min(120)])],
    };
    for next in &pieces[1..] {
        let probe = &next[..next.len().min(12)];
        let end = if probe.is_empty() {
            input.len()
        } else {
            input[at..].find(probe).map_or(input.len(), |i| at + i)
        };
        let start = at.min(end);
        let ctx_from = input[..start]
            .char_indices()
            .rev()
            .nth(30)
            .map_or(0, |(i, _)| i);
        found.push(format!(
            "{} ⟦{}⟧",
            &input[ctx_from..start],
            &input[start..end]
        ));
        at = end;
    }
    found
}

fn count(r: &Redactor, name: &str, texts: &[String]) -> usize {
    let mut n = 0;
    let mut examples = Vec::new();
    let started = std::time::Instant::now();
    for t in texts {
        let mut s = t.clone();
        r.redact(&mut s);
        let k = s.matches(MARKER).count();
        if k > 0 {
            n += k;
            examples.extend(replaced(t, &s));
        }
    }
    let bytes: usize = texts.iter().map(String::len).sum();
    println!(
        "{name}: {n} high_entropy redactions ({} strings, {:.1} MB redacted in {:.0} ms)",
        texts.len(),
        bytes as f64 / 1e6,
        started.elapsed().as_secs_f64() * 1e3
    );
    let mut distinct: Vec<(String, usize)> = Vec::new();
    for e in examples {
        match distinct.iter_mut().find(|(x, _)| *x == e) {
            Some((_, k)) => *k += 1,
            None => distinct.push((e, 1)),
        }
    }
    for (e, k) in &distinct {
        println!("  {k:>4} × {}", e.replace('\n', "⏎"));
    }
    n
}

#[test]
#[ignore = "a figure, not a check: run with --ignored --nocapture"]
fn high_entropy_figure() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let r = Redactor::new(&[]).0;
    let eval: Value =
        serde_json::from_slice(&std::fs::read(root.join("eval/nmem-eval.json")).unwrap()).unwrap();
    let mut texts = Vec::new();
    leaves(&eval["histories"], "", &mut texts);
    let eval_texts: Vec<String> = texts.into_iter().map(String::from).collect();
    let transcript = std::fs::read_to_string(
        root.join("tests/fixtures/transcripts/claude-code/sample-session.jsonl"),
    )
    .unwrap();
    let mut transcript_texts = Vec::new();
    for line in transcript.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let mut t = Vec::new();
        leaves(&v, "", &mut t);
        transcript_texts.extend(t.into_iter().map(String::from));
    }
    count(&r, "eval/nmem-eval.json", &eval_texts);
    count(&r, "sample-session.jsonl", &transcript_texts);
}
