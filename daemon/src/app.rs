//! The daemon's shared state, its start-up sequence and its status report.

use crate::config::Config;
use crate::dedup::Dedup;
use crate::ingest::{Ingest, ProjectResolver};
use crate::redact::Redactor;
use crate::stats::Stats;
use crate::store::readers::Readers;
use crate::store::schema;
use crate::store::writer::Writer;
use nmem_proto::paths::Paths;
use nmem_proto::wire;
use std::sync::Arc;
use std::time::Instant;

pub struct App {
    pub paths: Paths,
    pub config: Config,
    pub ingest: Ingest,
    pub writer: Writer,
    /// Where `POST /v1/events` prepares its events: a few blocking threads (`drain`).
    pub prepare: Arc<crate::drain::Drain>,
    pub readers: Readers,
    pub semantic: Arc<crate::semantic::Semantic>,
    pub stats: Arc<Stats>,
    /// The SessionStart digests, precomputed or kept, under their change counters.
    pub digests: Arc<crate::context::DigestCache>,
    pub started: Instant,
    /// Problems a person must fix, each saying how (bad config patterns, …).
    pub warnings: Vec<String>,
    /// The web viewer's listener (`nmem ui`), its token and readiness.
    pub web: crate::web::Web,
    /// Sync with other devices (docs/sync.md): idle unless enabled.
    pub sync: crate::sync::Sync,
}

impl App {
    /// Open the database (creating and migrating it) and start the writer thread.
    pub fn open(
        paths: Paths,
        config: Config,
    ) -> anyhow::Result<(Arc<App>, std::thread::JoinHandle<()>)> {
        let conn = schema::open_writer(&paths.db)?;
        // Whether the writer logs events for sync, before it takes any.
        crate::sync::init(&conn)?;
        let stats = Arc::new(Stats::default());
        let (redactor, warnings) = Redactor::new(&config.redact.patterns);
        for w in &warnings {
            stats.error(w.clone());
        }
        let readers = Readers::with_budget(
            paths.db.clone(),
            std::time::Duration::from_millis(config.limits.query_timeout_ms.max(1)),
        );
        let (writer, handle) = Writer::spawn(
            conn,
            config.writer.queue_capacity.max(1),
            Dedup::new(config.dedup.window_secs),
            stats.clone(),
        );
        let stored_offset = {
            let readers = readers.clone();
            Box::new(move |session: &str| {
                readers
                    .run_blocking(|c| {
                        c.query_row(
                            "SELECT transcript_offset FROM sessions WHERE id = ?1",
                            [session],
                            |r| r.get::<_, i64>(0),
                        )
                        .or(Ok(0))
                    })
                    .unwrap_or(0) as u64
            })
        };
        let mut ingest = Ingest::new(
            ProjectResolver::new(config.project.strategy),
            redactor,
            stored_offset,
        );
        ingest.excluded = config.capture.exclude_projects.iter().cloned().collect();
        let app = App {
            prepare: crate::drain::Drain::new(crate::drain::PREPARE_DRAINERS),
            ingest,
            readers,
            semantic: Arc::new(crate::semantic::Semantic::new(
                config.embed.clone(),
                paths.models.clone(),
            )),
            writer,
            stats,
            digests: Default::default(),
            started: Instant::now(),
            warnings,
            web: crate::web::Web::new(config.http.clone(), &paths.state),
            sync: Default::default(),
            paths,
            config,
        };
        Ok((Arc::new(app), handle))
    }
}

/// The daemon's view of itself, for `GET /v1/status`.
pub async fn status(app: &App) -> Result<wire::Status, String> {
    let (sessions, prompts, observations, schema_version) = app
        .readers
        .run_once(|c| {
            c.query_row(nmem_proto::status::COUNTS_SQL, [], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                ))
            })
        })
        .await
        .map_err(|e| e.to_string())?;
    let mut s = nmem_proto::status::from_files(&app.paths);
    s.running = true;
    s.version = Some(nmem_proto::VERSION.to_string());
    s.protocol = Some(nmem_proto::PROTOCOL);
    s.pid = Some(std::process::id());
    s.uptime_s = Some(app.started.elapsed().as_secs());
    s.queue_depth = app.writer.depth() as u64;
    s.queue_capacity = app.writer.capacity() as u64;
    s.sessions = sessions as u64;
    s.prompts = prompts as u64;
    s.observations = observations as u64;
    s.schema_version = Some(schema_version as u32);
    let st = &app.stats;
    s.events_recorded = Stats::get(&st.events_recorded);
    s.commits = Stats::get(&st.commits);
    s.events_written = Stats::get(&st.events_written);
    s.commit_micros = Stats::get(&st.commit_micros);
    s.duplicates = Stats::get(&st.duplicates);
    s.dedup_hits = Stats::get(&st.dedup_hits);
    s.redactions = Stats::get(&st.redactions);
    s.spool_drained = Stats::get(&st.spool_drained);
    s.log_write_failures = crate::log::write_failures();
    s.digests_precomputed = Stats::get(&app.digests.precomputed);
    s.digests_on_demand = Stats::get(&app.digests.on_demand);
    s.last_error = st.last_error();
    s.ingest_per_s = st.ingest_rate();
    let nonzero = |v: u64| (v > 0).then_some(v);
    s.last_write_ms = nonzero(Stats::get(&st.last_write_ms));
    s.last_maintenance_ms = nonzero(Stats::get(&st.last_maintenance_ms));
    s.degraded.extend(app.warnings.iter().cloned());
    s.embedding = embedding(app).await;
    s.ui = crate::web::status(app);
    if Stats::get(&st.commit_failing) == 1 {
        s.degraded.push(format!(
            "writes are failing ({}): check the free space and permissions of {}; hooks keep spooling meanwhile",
            st.last_error().unwrap_or_default(),
            app.paths.db.parent().map(|p| p.display().to_string()).unwrap_or_default()
        ));
    }
    Ok(s)
}

/// The embedding part of status: absent when no model is installed and none was ever used.
pub async fn embedding(app: &App) -> Option<wire::Embedding> {
    let counts = app
        .readers
        .run_once(crate::semantic::counts)
        .await
        .ok()
        .flatten();
    let problem = match app.semantic.availability() {
        crate::semantic::Availability::Broken(p) => Some(p),
        _ => None,
    };
    let active = app.semantic.active();
    if active.is_none() && problem.is_none() {
        return None;
    }
    let (_, embedded, pending) = counts.unwrap_or_default();
    let (engine, onnx_graph, engine_fallback) = app.semantic.engine();
    Some(wire::Embedding {
        model: active.map(|a| a.name),
        embedded: embedded as u64,
        pending: pending as u64,
        problem,
        embedder_pid: app.semantic.child_pid(),
        engine,
        onnx_graph,
        engine_fallback,
    })
}
