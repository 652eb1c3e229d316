//! The candle engine in process, on the committed tiny model, against the golden vectors that
//! make_tiny_bert.py computed in plain Python.

use crate::common;

use common::{assert_close, golden, tiny_model};
use nmem_embed::engine::BertEmbedder;
use nmem_embed::{EmbedError, Embedder};

fn tiny() -> BertEmbedder {
    BertEmbedder::load(&tiny_model()).unwrap()
}

#[test]
fn shape_and_id() {
    let e = tiny();
    let g = golden();
    assert_eq!(e.dim(), g.dim);
    assert_eq!(
        e.max_tokens(),
        g.max_tokens,
        "min(256, max_position_embeddings)"
    );
    assert!(e.model_id().starts_with("custom-"), "{}", e.model_id());
}

#[test]
fn tokenisation_matches_golden() {
    let e = tiny();
    for case in golden().cases {
        assert_eq!(e.tokenize(&case.text).unwrap(), case.ids, "{:?}", case.text);
    }
}

#[test]
fn vectors_match_golden() {
    let mut e = tiny();
    for case in golden().cases {
        let v = e.embed(&[&case.text]).unwrap().remove(0);
        assert_close(&v, &case.vector, 1e-4, &case.text);
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");
    }
}

#[test]
fn a_batch_gives_each_text_its_own_vector() {
    let mut e = tiny();
    let g = golden();
    let texts: Vec<&str> = g.cases.iter().map(|c| c.text.as_str()).collect();
    // Reversed, so batch order differs from the length-sorted order the engine runs in.
    let reversed: Vec<&str> = texts.iter().rev().copied().collect();
    let batch = e.embed(&reversed).unwrap();
    assert_eq!(batch.len(), texts.len());
    for (v, case) in batch.iter().zip(g.cases.iter().rev()) {
        let single = e.embed(&[&case.text]).unwrap().remove(0);
        assert_close(v, &single, 1e-5, &case.text);
        assert_close(v, &case.vector, 1e-4, &case.text);
    }
    // More than one forward batch (32) in one call.
    let many: Vec<&str> = texts.iter().cycle().take(70).copied().collect();
    let out = e.embed(&many).unwrap();
    for (v, text) in out.iter().zip(&many) {
        let case = g.cases.iter().find(|c| c.text == *text).unwrap();
        assert_close(v, &case.vector, 1e-4, text);
    }
}

#[test]
fn the_same_input_gives_the_same_bits() {
    let mut e = tiny();
    let texts = [
        "fix the flaky test in src/main.rs",
        "",
        "the nightly export crashed",
    ];
    let a = e.embed(&texts).unwrap();
    let b = e.embed(&texts).unwrap();
    let bits = |vs: &Vec<Vec<f32>>| {
        vs.iter()
            .flatten()
            .map(|x| x.to_bits())
            .collect::<Vec<u32>>()
    };
    assert_eq!(bits(&a), bits(&b));
    let mut other = tiny();
    assert_eq!(
        bits(&a),
        bits(&other.embed(&texts).unwrap()),
        "a second load computes the same"
    );
}

#[test]
fn long_texts_are_truncated_to_the_token_limit() {
    let mut e = tiny();
    let g = golden();
    let long = g
        .cases
        .iter()
        .find(|c| c.ids.len() == g.max_tokens)
        .expect("a golden case at the limit");
    // Whatever follows the limit does not matter.
    let longer = format!(
        "{} {}",
        long.text,
        "cargo build failed again and again ".repeat(200)
    );
    assert_eq!(e.tokenize(&longer).unwrap(), long.ids);
    assert_close(
        &e.embed(&[&longer]).unwrap()[0],
        &long.vector,
        1e-4,
        "longer",
    );
    // A single word far over WordPiece's 100 characters is one [UNK].
    let word = "x".repeat(10_000);
    assert_eq!(e.tokenize(&word).unwrap().len(), 3);
}

#[test]
fn empty_inputs() {
    let mut e = tiny();
    assert!(e.embed(&[]).unwrap().is_empty());
    let g = golden();
    let empty = g.cases.iter().find(|c| c.text.is_empty()).unwrap();
    assert_eq!(empty.ids.len(), 2, "[CLS] [SEP]");
    assert_close(&e.embed(&[""]).unwrap()[0], &empty.vector, 1e-4, "empty");
    // Only whitespace and control characters normalise to nothing too.
    assert_close(
        &e.embed(&[" \t\n\u{0}"]).unwrap()[0],
        &empty.vector,
        1e-4,
        "blank",
    );
}

#[test]
fn a_folder_without_a_model_says_so() {
    let err = BertEmbedder::load(std::path::Path::new("/nonexistent/model"))
        .err()
        .unwrap();
    assert!(matches!(err, EmbedError::Model(_)), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("not a model folder") && msg.contains("nmemctl model import"),
        "{msg}"
    );
}
