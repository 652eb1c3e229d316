//! The single writer: one thread owns the only write connection.
//!
//! Group commit: the thread takes whatever is queued (up to [`MAX_BATCH`]), then, if requests
//! have announced events they are still preparing ([`Writer::coming`]), waits once for those
//! (at most [`COALESCE`]), and stores the lot in one IMMEDIATE transaction; if one event fails,
//! the transaction is rolled back and the batch stored again with a savepoint per event, so one
//! bad event cannot spoil the others. Every event is acknowledged only after that transaction
//! has committed. The queue is
//! bounded; its depth is visible in status. The in-memory dedup cache lives here too, since only
//! the writer decides what is stored. What an insert changes besides its row (the digest
//! counters, a memory's knowledge note, stale flags) is done in the same transaction
//! ([`super::follow`]).
//!
//! The connection and what is stored through it ([`Core`]) sit behind one mutex: the writer
//! thread holds it while it stores, and a request whose event is alone (the writer idle, its
//! queue empty, nothing else announced) may take it and store its event itself, on its own
//! thread ([`Writer::lead`]), so a lone hook's answer crosses no thread: prepared, committed
//! and answered where it arrived. Either way one connection writes, one transaction at a time.

use super::checkpointer::{Checkpointer, Due};
use super::follow::{self, Generations, Inserted};
use crate::dedup::Dedup;
use crate::ingest::{Prepared, Record, SessionEffect};
use crate::stats::Stats;
use nmem_proto::wire::RecordOutcome;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use tokio::sync::{mpsc, oneshot};

pub const MAX_BATCH: usize = 1024;

/// The longest a batch waits for events announced as coming ([`Coming`]) before it commits:
/// preparing a hook's event takes tens to a few hundred microseconds; one held up longer (a
/// transcript read on a slow disk) is committed in the next batch.
pub const COALESCE: std::time::Duration = std::time::Duration::from_millis(1);

/// How long no commit must have ended before a request stores its lone event itself
/// ([`Writer::lead`]): under a stream of events (eight connections of `nmem-bench
/// --ingest-only`) the writer idles between commits too, and a request leading then committed
/// its event alone while the others queued behind it: 1.2 events per commit instead of 4-5, the
/// rate halved. Hooks a person's agent runs are milliseconds to seconds apart.
pub const LEAD_AFTER_QUIET: std::time::Duration = COALESCE;

/// Microseconds on a monotonic clock of this process (for [`Gate::last_commit_us`]).
fn mono_us() -> u64 {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    EPOCH
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_micros() as u64
}

/// The result of storing one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub outcome: RecordOutcome,
    pub kind: Option<&'static str>,
    pub id: Option<i64>,
}

/// Why the writer did not do what it was asked. Each kind has one HTTP status, given in one
/// place (`server`'s `From<WriteError> for ApiError`); work run through [`Writer::exec`] says
/// which kind its failure is instead of a string each caller would parse back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// The request cannot be done as asked; the message says what to change. Nothing changed.
    #[error("{0}")]
    Invalid(String),
    /// What the request names is not there; the message says what was looked for.
    #[error("{0}")]
    NotFound(String),
    /// The request repeats what is stored (an exact duplicate claim). Nothing changed.
    #[error("{0}")]
    Conflict(String),
    /// SQLite failed. The detail may hold SQL text or paths: it is logged, never sent.
    #[error("the database failed: {0}")]
    Storage(String),
    /// The writer has stopped: nothing more is accepted.
    #[error("the writer has stopped (nmemd is shutting down)")]
    Closed,
}

impl From<rusqlite::Error> for WriteError {
    fn from(e: rusqlite::Error) -> WriteError {
        WriteError::Storage(e.to_string())
    }
}

/// Work run on the write connection, in queue order. It sends its own typed result (the
/// closure [`Writer::exec`] wraps), so the queue holds one job type whatever the result is.
type WriteFn = Box<dyn FnOnce(&mut Connection) + Send>;

/// Where an event's outcome goes once its transaction committed.
pub type Reply = oneshot::Sender<Result<Applied, WriteError>>;

/// An event's preparation, run on the writer thread itself ([`Writer::prepare_here`]): the
/// event to store and where its outcome goes, or None when it stores nothing.
pub type PrepareFn = Box<dyn FnOnce() -> Option<(Box<Prepared>, Reply)> + Send>;

enum Job {
    Event(Box<Prepared>, oneshot::Sender<Result<Applied, WriteError>>),
    /// Prepare an event here (its announcement ends once it is prepared), then store it like
    /// [`Job::Event`].
    Prepare(PrepareFn, Coming),
    /// Run a closure on the write connection (maintenance, checkpoints).
    Exec(WriteFn),
    /// Finish what is queued before this, checkpoint, and stop.
    Shutdown,
}

#[derive(Clone)]
pub struct Writer {
    tx: mpsc::Sender<Job>,
    capacity: usize,
    gate: Arc<Gate>,
    core: Arc<Mutex<Core>>,
    stats: Arc<Stats>,
    /// Checkpoints on their own thread and connection; None when that connection could not be
    /// opened (an in-memory database, tests): the writer checkpoints itself.
    ckpt: Option<Arc<Checkpointer>>,
}

/// The write connection and what storing through it keeps: held by whoever stores (the writer
/// thread, or a request leading its lone event, [`Writer::lead`]).
struct Core {
    conn: Connection,
    /// The dedup cache: only what really committed.
    dedup: Dedup,
    /// Rows committed since the full-text index last caught up (an estimate, for load);
    /// `u64::MAX` at start: unknown, caught up once idle.
    unindexed: u64,
    /// The writer has stopped: nothing more is stored.
    closed: bool,
}

impl Core {
    fn lock(core: &Mutex<Core>) -> std::sync::MutexGuard<'_, Core> {
        core.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Events on their way to the writer ([`Coming`]), and where the writer waits for them.
#[derive(Default)]
struct Gate {
    /// Announced and not yet being sent (nor given up).
    coming: AtomicUsize,
    /// Announcements made so far: only grows.
    announced: AtomicU64,
    /// Announcements ended so far (queued or given up): only grows.
    arrived: AtomicU64,
    /// While the writer waits: the `arrived` count that ends its wait; `u64::MAX` otherwise.
    wake_at: AtomicU64,
    /// The writer is waiting for its next job, its queue empty ([`Writer::prepare_here`]).
    idle: std::sync::atomic::AtomicBool,
    /// When the last commit ended ([`mono_us`]; 0 before the first): a request leads its event
    /// only after [`LEAD_AFTER_QUIET`] without one ([`Writer::may_lead`]).
    last_commit_us: AtomicU64,
    /// The writer waits without a timeout (nothing left to index): a request that stores an
    /// event itself wakes it, so the index catches up ([`Writer::lead`]). Read and written
    /// with [`Core`] held.
    asleep: std::sync::atomic::AtomicBool,
    lock: Mutex<()>,
    woken: Condvar,
}

impl Gate {
    fn new() -> Gate {
        Gate {
            wake_at: AtomicU64::new(u64::MAX),
            ..Gate::default()
        }
    }

    /// A commit has just ended (the writer's or a leader's).
    fn committed(&self) {
        self.last_commit_us.store(mono_us(), Ordering::SeqCst);
    }

    /// Whether no commit has ended for `d` (or none ever did).
    fn quiet_for(&self, d: std::time::Duration) -> bool {
        let last = self.last_commit_us.load(Ordering::SeqCst);
        last == 0 || mono_us().saturating_sub(last) >= d.as_micros() as u64
    }

    /// An announced event is about to be queued (or was given up): no longer coming. Before
    /// the event is sent, so a writer woken by that send never waits for the event itself.
    fn leave(&self) {
        self.coming.fetch_sub(1, Ordering::SeqCst);
    }

    /// An event that left is in the queue (or was given up): a writer waiting for it is woken
    /// if it was the last.
    fn arrive(&self) {
        let n = self.arrived.fetch_add(1, Ordering::SeqCst) + 1;
        if n >= self.wake_at.load(Ordering::SeqCst) {
            let _held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.woken.notify_one();
        }
    }

    /// Wait until every event announced so far has arrived (those being sent included), or
    /// until `deadline`. Arrivals wake the writer once, at the last one, not one by one. Every
    /// announcement ends in one arrival, so the count is reached unless one is held up.
    fn wait(&self, deadline: std::time::Instant) {
        let mut held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let target = self.announced.load(Ordering::SeqCst);
        self.wake_at.store(target, Ordering::SeqCst);
        while self.arrived.load(Ordering::SeqCst) < target {
            let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) else {
                break;
            };
            held = self
                .woken
                .wait_timeout(held, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        self.wake_at.store(u64::MAX, Ordering::SeqCst);
    }
}

/// An event a request is preparing, announced to the writer before it is queued: when the
/// writer finds its queue empty with events announced, it waits (at most [`COALESCE`]) until
/// those have been queued, so they share one transaction (one commit, its WAL frames, one
/// writer wake-up) instead of each committing alone. A lone hook has nothing else announced,
/// so its commit never waits, not even for itself: an event stops counting as coming before it
/// is sent, and counts as arrived once it is in the queue ([`Coming::enqueue`],
/// [`Coming::enqueue_blocking`]); dropping it unqueued (the event was refused or stores
/// nothing) ends the announcement too.
pub struct Coming {
    writer: Writer,
    stage: Stage,
}

/// Where a [`Coming`] is: announced, being sent to the queue, or done.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Announced,
    Sending,
    Done,
}

impl Coming {
    /// The event is about to be sent: no longer counted as coming.
    fn sending(&mut self) {
        if self.stage == Stage::Announced {
            self.writer.gate.leave();
            self.stage = Stage::Sending;
        }
    }

    /// The event is in the queue (or will never be): the announcement has ended.
    fn arrived(&mut self) {
        self.sending();
        if self.stage == Stage::Sending {
            self.writer.gate.arrive();
            self.stage = Stage::Done;
        }
    }

    /// [`Writer::enqueue`], ending the announcement.
    pub async fn enqueue(
        mut self,
        ev: Prepared,
    ) -> Result<oneshot::Receiver<Result<Applied, WriteError>>, WriteError> {
        self.sending();
        let r = self.writer.enqueue(ev).await;
        self.arrived();
        r
    }

    /// Queue a prepared event whose outcome goes to `reply` (one given back by
    /// [`Writer::lead`]), ending the announcement.
    pub async fn enqueue_reply(
        mut self,
        ev: Box<Prepared>,
        reply: Reply,
    ) -> Result<(), WriteError> {
        self.sending();
        let r = self
            .writer
            .tx
            .send(Job::Event(ev, reply))
            .await
            .map_err(|_| WriteError::Closed);
        self.arrived();
        r
    }

    /// [`Writer::enqueue_blocking`], ending the announcement.
    pub fn enqueue_blocking(
        mut self,
        ev: Prepared,
        reply: oneshot::Sender<Result<Applied, WriteError>>,
    ) -> Result<(), WriteError> {
        self.sending();
        let r = self.writer.enqueue_blocking(ev, reply);
        self.arrived();
        r
    }
}

impl Drop for Coming {
    /// Given up (the event was refused or stores nothing), or its send was cancelled.
    fn drop(&mut self) {
        self.arrived();
    }
}

impl Writer {
    /// Start the writer thread on `conn`.
    pub fn spawn(
        conn: Connection,
        capacity: usize,
        dedup: Dedup,
        stats: Arc<Stats>,
    ) -> (Writer, std::thread::JoinHandle<()>) {
        Writer::spawn_with_window(conn, capacity, dedup, stats, COALESCE)
    }

    /// [`Writer::spawn`] with another group-commit window than [`COALESCE`] (tests).
    pub(crate) fn spawn_with_window(
        conn: Connection,
        capacity: usize,
        dedup: Dedup,
        stats: Arc<Stats>,
        window: std::time::Duration,
    ) -> (Writer, std::thread::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(capacity);
        let gate = Arc::new(Gate::new());
        // Checkpoints never run in a request's own commit ([`Writer::lead`]): the hook
        // replaces SQLite's automatic checkpoint with a note of the log's size, and past the
        // same bound the checkpointer's thread copies the log back while the writer goes on;
        // the writer copies only the small rest itself ([`checkpoint_if_due`]).
        conn.wal_hook(Some(note_wal));
        let ckpt = conn
            .path()
            .filter(|p| !p.is_empty())
            .and_then(|p| Checkpointer::spawn(std::path::Path::new(p), stats.clone()))
            .map(Arc::new);
        let core = Arc::new(Mutex::new(Core {
            conn,
            dedup,
            unindexed: u64::MAX,
            closed: false,
        }));
        let writer = Writer {
            tx,
            capacity,
            gate,
            core,
            stats,
            ckpt,
        };
        // Not a clone of the writer: its sender would keep the queue open after every handle
        // is dropped.
        let (core, gate, stats, ckpt) = (
            writer.core.clone(),
            writer.gate.clone(),
            writer.stats.clone(),
            writer.ckpt.clone(),
        );
        let handle = std::thread::Builder::new()
            .name("nmem-writer".into())
            .spawn(move || run(&core, &gate, &stats, ckpt.as_deref(), rx, window))
            .expect("spawn writer thread");
        (writer, handle)
    }

    /// Whether an event would be alone now: the writer idle, its queue empty, and nothing
    /// announced but the caller's own event. A hint, checked again under the lock by
    /// [`Writer::lead`].
    pub fn alone(&self) -> bool {
        self.gate.idle.load(Ordering::SeqCst)
            && self.gate.coming.load(Ordering::SeqCst) <= 1
            && self.depth() == 0
    }

    /// Whether a request may store its event itself now ([`Writer::lead`]): it is
    /// [`Writer::alone`] and no commit ended in the last [`LEAD_AFTER_QUIET`] (no stream of
    /// events whose group commit it would split). A hint, checked again under the lock.
    pub fn may_lead(&self) -> bool {
        self.alone() && self.gate.quiet_for(LEAD_AFTER_QUIET)
    }

    /// Store a lone event on the caller's thread: when it [`Writer::may_lead`] and the
    /// connection is free, `f` prepares it here (its announcement, `coming`, ends once `f` has
    /// run) and it is committed at once, its outcome sent on the reply `f` returns, before this
    /// returns: no thread hand-off at all (a lone hook's answer otherwise wakes the writer and
    /// then the request again). Otherwise both come back, to queue the event as usual. Blocks
    /// for a commit: the server calls it on its async worker, which the event then holds while
    /// the other worker keeps serving (`server::lead`; `block_in_place` cost what leading saved).
    pub fn lead<F>(&self, f: F, coming: Coming) -> Result<(), (F, Coming)>
    where
        F: FnOnce() -> Option<(Box<Prepared>, Reply)>,
    {
        if !self.may_lead() {
            return Err((f, coming));
        }
        let Ok(mut core) = self.core.try_lock() else {
            return Err((f, coming));
        };
        // Checked again with the connection held: the writer cannot take a job meanwhile.
        if core.closed || !self.may_lead() {
            return Err((f, coming));
        }
        let prepared = f();
        drop(coming);
        if let Some(pending) = prepared {
            let core = &mut *core;
            let mut batch = vec![pending];
            commit_batch(&mut core.conn, &mut batch, &mut core.dedup, &self.stats, 0);
            core.unindexed = core.unindexed.saturating_add(1);
            self.gate.committed();
            if log_due(self.ckpt.as_deref()) == Due::Here {
                // The rest of the log to copy back: the writer does it, off this request's
                // thread.
                let (stats, ckpt) = (self.stats.clone(), self.ckpt.clone());
                let _ = self.tx.try_send(Job::Exec(Box::new(move |c| {
                    checkpoint(c, &stats, ckpt.as_deref())
                })));
            } else if self.gate.asleep.load(Ordering::SeqCst) {
                // The writer waits with nothing to index: wake it, so the index catches up
                // once quiet. Best effort: a full queue wakes it anyway.
                let _ = self.tx.try_send(Job::Exec(Box::new(|_| {})));
            }
        }
        Ok(())
    }

    /// Prepare a lone event on the writer thread itself, when the writer is idle with nothing
    /// else queued or announced but this event (`coming`, which ends once `f` has run): one
    /// thread hand-off less than a drainer's (request → drainer → writer → request), which a
    /// lone hook waits for. Under a stream of events the writer is busy and both come back, for
    /// a drainer, so the writer keeps only inserting. `f` reads what preparing reads (a
    /// transcript's bounded tail), on the one thread that is idle anyway.
    pub fn prepare_here(&self, f: PrepareFn, coming: Coming) -> Result<(), (PrepareFn, Coming)> {
        if !self.alone() {
            return Err((f, coming));
        }
        self.tx
            .try_send(Job::Prepare(f, coming))
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(Job::Prepare(f, c))
                | mpsc::error::TrySendError::Closed(Job::Prepare(f, c)) => (f, c),
                _ => unreachable!("the job sent is the one given back"),
            })
    }

    /// Announce an event being prepared for this writer (see [`Coming`]).
    pub fn coming(&self) -> Coming {
        self.gate.announced.fetch_add(1, Ordering::SeqCst);
        self.gate.coming.fetch_add(1, Ordering::SeqCst);
        Coming {
            writer: self.clone(),
            stage: Stage::Announced,
        }
    }

    /// Queue an event; the receiver resolves after its transaction committed.
    pub async fn enqueue(
        &self,
        ev: Prepared,
    ) -> Result<oneshot::Receiver<Result<Applied, WriteError>>, WriteError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Job::Event(Box::new(ev), reply))
            .await
            .map_err(|_| WriteError::Closed)?;
        Ok(rx)
    }

    /// Queue an event from a blocking thread (never an async worker: it waits for room in the
    /// queue); `reply` gets the outcome after the commit, or is dropped unanswered when the
    /// writer has stopped.
    pub fn enqueue_blocking(
        &self,
        ev: Prepared,
        reply: oneshot::Sender<Result<Applied, WriteError>>,
    ) -> Result<(), WriteError> {
        self.tx
            .blocking_send(Job::Event(Box::new(ev), reply))
            .map_err(|_| WriteError::Closed)
    }

    /// Like [`Writer::enqueue`], keeping the event's session id for the caller.
    pub async fn enqueue_with_session(
        &self,
        ev: Prepared,
    ) -> Result<(String, oneshot::Receiver<Result<Applied, WriteError>>), WriteError> {
        let session = ev.session_id.clone();
        Ok((session, self.enqueue(ev).await?))
    }

    /// Store one event and wait for its commit.
    pub async fn submit(&self, ev: Prepared) -> Result<Applied, WriteError> {
        let rx = self.enqueue(ev).await?;
        rx.await.map_err(|_| WriteError::Closed)?
    }

    /// Run `f` on the write connection, in queue order, and return what it returns.
    pub async fn exec<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, WriteError> + Send + 'static,
    ) -> Result<T, WriteError> {
        let (reply, rx) = oneshot::channel();
        let job: WriteFn = Box::new(move |c| {
            let _ = reply.send(f(c));
        });
        self.tx
            .send(Job::Exec(job))
            .await
            .map_err(|_| WriteError::Closed)?;
        // Dropped unrun (the writer stopped first): shutting down, like a refused send.
        rx.await.map_err(|_| WriteError::Closed)?
    }

    /// Ask the writer to finish the queue, checkpoint and stop.
    pub async fn shutdown(&self) {
        let _ = self.tx.send(Job::Shutdown).await;
    }

    pub fn depth(&self) -> usize {
        self.capacity - self.tx.capacity()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// How long the queue must stay empty before the rows committed meanwhile are indexed: under a
/// steady stream of events the queue empties between every few requests, and indexing then (a
/// new FTS segment each time) would halve the rate; a search never waits for this, it catches
/// the index up itself.
const QUIET: std::time::Duration = std::time::Duration::from_millis(20);

fn run(
    shared: &Mutex<Core>,
    gate: &Gate,
    stats: &Stats,
    ckpt: Option<&Checkpointer>,
    mut rx: mpsc::Receiver<Job>,
    window: std::time::Duration,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut stop = false;
    let mut rebuilt: u64 = 0; // rows indexed in the current long catch-up
                              // For waiting with a timeout on the queue.
    let clock = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a timer for the writer");
    while !stop {
        // Under load the queue is seldom empty after a commit: what waits is taken without arming
        // a timer (the timed wait cost 6% of the daemon's CPU at 3,000 events/s).
        let first = match rx.try_recv() {
            Ok(job) => Some(job),
            Err(mpsc::error::TryRecvError::Disconnected) => None,
            Err(mpsc::error::TryRecvError::Empty) => {
                // Whether anything waits to be indexed, read with the connection held so that a
                // request storing an event itself either sees `asleep` (and wakes this thread)
                // or has already counted its row here.
                let unindexed = {
                    let core = Core::lock(shared);
                    gate.asleep.store(core.unindexed == 0, Ordering::SeqCst);
                    core.unindexed
                };
                gate.idle.store(true, Ordering::SeqCst);
                let job = if unindexed > 0 {
                    match clock.block_on(async { tokio::time::timeout(QUIET, rx.recv()).await }) {
                        Ok(job) => job,
                        Err(_) => {
                            gate.idle.store(false, Ordering::SeqCst);
                            index_when_quiet(shared, gate, stats, ckpt, &mut rebuilt);
                            continue;
                        }
                    }
                } else {
                    rx.blocking_recv()
                };
                gate.idle.store(false, Ordering::SeqCst);
                gate.asleep.store(false, Ordering::SeqCst);
                job
            }
        };
        let Some(first) = first else {
            break;
        };
        let mut held = Core::lock(shared);
        let core = &mut *held;
        let mut next = Some(first);
        let mut waited = false;
        loop {
            while let Some(job) = next.take() {
                match job {
                    Job::Event(ev, reply) => batch.push((ev, reply)),
                    Job::Prepare(f, coming) => {
                        let prepared = f();
                        // Before the gate is looked at below: never wait for itself.
                        drop(coming);
                        if let Some((ev, reply)) = prepared {
                            batch.push((ev, reply));
                        }
                    }
                    Job::Exec(f) => {
                        // Keep queue order: commit what came before, then run it alone.
                        commit_batch(&mut core.conn, &mut batch, &mut core.dedup, stats, rx.len());
                        f(&mut core.conn);
                        checkpoint_if_due(&core.conn, stats, ckpt);
                    }
                    Job::Shutdown => {
                        stop = true;
                        break;
                    }
                }
                if batch.len() < MAX_BATCH {
                    next = rx.try_recv().ok();
                }
            }
            // The queue is empty: wait for the events requests are still preparing, so they
            // share this commit (group commit), once, and never longer than COALESCE.
            if waited
                || stop
                || batch.is_empty()
                || batch.len() >= MAX_BATCH
                || gate.coming.load(Ordering::SeqCst) == 0
            {
                break;
            }
            waited = true;
            gate.wait(std::time::Instant::now() + window);
            next = rx.try_recv().ok();
        }
        if !batch.is_empty() {
            core.unindexed = core.unindexed.saturating_add(batch.len() as u64);
            commit_batch(&mut core.conn, &mut batch, &mut core.dedup, stats, rx.len());
            gate.committed();
        }
        // Under sustained load, index in bulk.
        if !stop && core.unindexed >= super::fts::INDEX_UNDER_LOAD {
            match super::fts::index_pending(&mut core.conn) {
                Ok(n) if n < super::fts::CHUNK as u64 => core.unindexed = 0,
                Ok(_) => {}
                Err(e) => stats.error(format!("full-text indexing failed (retried later): {e}")),
            }
        }
        checkpoint_if_due(&core.conn, stats, ckpt);
    }
    // Its pass (if any) ends first: the last checkpoint below is the writer's, alone.
    if let Some(c) = ckpt {
        c.stop();
    }
    let mut core = Core::lock(shared);
    // From here on no request stores an event itself ([`Writer::lead`]).
    core.closed = true;
    if let Err(e) = super::fts::index_all(&mut core.conn) {
        stats.error(format!("full-text indexing at shutdown failed: {e}"));
    }
    // Nothing more will be accepted: fail whatever raced in after the shutdown request, so its
    // shim spools it, then fold the WAL back into the database.
    rx.close();
    while let Ok(job) = rx.try_recv() {
        if let Job::Event(_, reply) = job {
            let _ = reply.send(Err(WriteError::Closed));
        }
    }
    if let Err(e) = core.conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);") {
        stats.error(format!("final WAL checkpoint failed: {e}"));
    }
    tracing::info!("writer stopped");
}

/// The queue stayed empty for [`QUIET`]: index what was committed meanwhile, unless a request
/// committed an event itself in that time (then wait again). A long catch-up (a rebuilt index
/// after an upgrade) goes chunk by chunk, saying how far it is.
fn index_when_quiet(
    shared: &Mutex<Core>,
    gate: &Gate,
    stats: &Stats,
    ckpt: Option<&Checkpointer>,
    rebuilt: &mut u64,
) {
    let mut core = Core::lock(shared);
    if !gate.quiet_for(QUIET) {
        return;
    }
    match super::fts::index_pending(&mut core.conn) {
        Ok(n) if n < super::fts::CHUNK as u64 => {
            if *rebuilt > 0 {
                tracing::info!("search index: {} rows indexed, done", *rebuilt + n);
                *rebuilt = 0;
            }
            core.unindexed = 0
        }
        Ok(n) => {
            *rebuilt += n;
            if *rebuilt % 50_000 < n {
                let left = super::fts::pending(&core.conn).unwrap_or(0);
                tracing::info!("search index: {} rows indexed, {left} to go", *rebuilt);
            }
        }
        Err(e) => {
            stats.error(format!("full-text indexing failed (retried later): {e}"));
            core.unindexed = 0;
        }
    }
    checkpoint_if_due(&core.conn, stats, ckpt);
}

thread_local! {
    /// Frames in the write-ahead log after the last commit made on this thread ([`note_wal`]).
    static WAL_FRAMES: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
}

/// The write connection's WAL hook: notes the log's size after each commit, where SQLite's
/// automatic checkpoint would have checkpointed in the committing thread (a request's, when it
/// stores its event itself).
fn note_wal(_: &rusqlite::hooks::Wal, frames: std::ffi::c_int) -> rusqlite::Result<()> {
    WAL_FRAMES.set(i64::from(frames));
    Ok(())
}

/// What the last commit on this thread asks of the log (reading the note resets it): past its
/// bound ([`super::schema::WAL_AUTOCHECKPOINT`], what SQLite's automatic checkpoint used) the
/// checkpointer is asked for a pass, and [`Due::Here`] when the writer should copy the rest
/// itself; without a checkpointer, the writer checkpoints past the bound.
fn log_due(ckpt: Option<&Checkpointer>) -> Due {
    let frames = WAL_FRAMES.replace(0);
    match ckpt {
        Some(c) => c.after_commit(frames),
        None if frames >= super::schema::WAL_AUTOCHECKPOINT => Due::Here,
        None => Due::Nothing,
    }
}

/// On the writer thread, after its commit or job: [`checkpoint`] when [`log_due`] says so.
fn checkpoint_if_due(conn: &Connection, stats: &Stats, ckpt: Option<&Checkpointer>) {
    if log_due(ckpt) == Due::Here {
        checkpoint(conn, stats, ckpt);
    }
}

/// What SQLite's automatic checkpoint did, on the writer thread: a passive checkpoint (it copies
/// what no reader still needs), after the checkpointer's pass if one runs
/// ([`Checkpointer::checkpoint_here`]). Another checkpoint holding the log (maintenance's, another
/// process's) is no failure: the next commit past the bound tries again.
fn checkpoint(conn: &Connection, stats: &Stats, ckpt: Option<&Checkpointer>) {
    let done = match ckpt {
        Some(c) => c.checkpoint_here(conn),
        None => super::checkpointer::pass(conn).map(|_| ()),
    };
    if let Err(e) = done {
        stats.error(format!("WAL checkpoint failed (retried later): {e}"));
    }
}

type Pending = (Box<Prepared>, oneshot::Sender<Result<Applied, WriteError>>);

/// `queue_depth`: the jobs waiting behind this batch (for the viewer's trends).
fn commit_batch(
    conn: &mut Connection,
    batch: &mut Vec<Pending>,
    dedup: &mut Dedup,
    stats: &Stats,
    queue_depth: usize,
) {
    if batch.is_empty() {
        return;
    }
    let started = std::time::Instant::now();
    let began = crate::trace::stamp();
    // First without savepoints: each one copies every page its event touches into a
    // sub-journal (12% of the writer's time). An event that fails is rare; then the whole
    // transaction is rolled back and the batch stored again with a savepoint per event, so one
    // bad event still cannot spoil the others.
    let result = match store_all(conn, batch, dedup) {
        Ok(Some(results)) => Ok(results),
        Ok(None) => store_each(conn, batch, dedup),
        Err(e) => Err(e),
    };
    let traced = began.map(|b| {
        let ids: Vec<String> = batch.iter().map(|(ev, _)| ev.event_id.clone()).collect();
        (b, crate::trace::now_us(), ids)
    });
    finish(batch, result, started, stats, queue_depth);
    if let Some((began, committed, ids)) = traced {
        crate::trace::writer_line(began, committed, &ids);
    }
}

/// The batch in one transaction, no savepoints. `Ok(None)`: an event failed and nothing was
/// committed (the transaction was rolled back).
fn store_all(
    conn: &mut Connection,
    batch: &[Pending],
    dedup: &mut Dedup,
) -> rusqlite::Result<Option<Vec<Result<Applied, WriteError>>>> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut results = Vec::with_capacity(batch.len());
    let mut staged = Vec::new();
    let mut gens = Generations::default();
    for (ev, _) in batch {
        match apply_logged(&tx, ev, dedup, &staged, &mut gens) {
            Ok((applied, key)) => {
                if let Some(k) = key {
                    staged.push(k);
                }
                results.push(Ok(applied));
            }
            Err(_) => {
                tx.rollback()?;
                return Ok(None);
            }
        }
    }
    gens.flush(&tx)?;
    tx.commit()?;
    // The dedup cache learns only what really committed.
    for (key, t) in staged {
        dedup.remember(key, t);
    }
    Ok(Some(results))
}

/// The batch in one transaction, each event under its own savepoint.
fn store_each(
    conn: &mut Connection,
    batch: &[Pending],
    dedup: &mut Dedup,
) -> rusqlite::Result<Vec<Result<Applied, WriteError>>> {
    {
        let mut tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut results = Vec::with_capacity(batch.len());
        let mut staged = Vec::new();
        let mut gens = Generations::default();
        for (ev, _) in batch.iter() {
            let mut sp = tx.savepoint()?;
            // Only what a committed savepoint changed moves the digest counters.
            let mut own = Generations::default();
            match apply_logged(&sp, ev, dedup, &staged, &mut own) {
                Ok((applied, key)) => {
                    sp.commit()?;
                    gens.merge(own);
                    if let Some(k) = key {
                        staged.push(k);
                    }
                    results.push(Ok(applied));
                }
                Err(e) => {
                    sp.rollback()?;
                    drop(sp);
                    results.push(Err(WriteError::from(e)));
                }
            }
        }
        gens.flush(&tx)?;
        tx.commit()?;
        // The dedup cache learns only what really committed.
        for (key, t) in staged {
            dedup.remember(key, t);
        }
        Ok(results)
    }
}

/// Count what the commit did and answer every event of the batch.
fn finish(
    batch: &mut Vec<Pending>,
    result: rusqlite::Result<Vec<Result<Applied, WriteError>>>,
    started: std::time::Instant,
    stats: &Stats,
    queue_depth: usize,
) {
    match result {
        Ok(results) => {
            Stats::add(&stats.commits, 1);
            Stats::add(&stats.commit_micros, started.elapsed().as_micros() as u64);
            Stats::add(&stats.events_written, results.len() as u64);
            Stats::set(&stats.last_write_ms, nmem_proto::now_ms() as u64);
            Stats::set(&stats.commit_failing, 0);
            stats.note_stored(
                results
                    .iter()
                    .filter(|r| matches!(r, Ok(a) if a.outcome == RecordOutcome::Stored))
                    .count() as u64,
            );
            let commit_ms = started.elapsed().as_secs_f64() * 1000.0;
            stats.ops.commit(
                results.len(),
                commit_ms,
                batch.first().map(|(ev, _)| ev.received_at),
                queue_depth,
            );
            stats.ops.events(
                batch
                    .iter()
                    .zip(&results)
                    .map(|((ev, _), res)| timing(ev, res.is_ok(), commit_ms)),
            );
            for ((ev, reply), res) in batch.drain(..).zip(results) {
                match &res {
                    Ok(a) => match a.outcome {
                        RecordOutcome::Stored => {
                            Stats::add(&stats.events_recorded, 1);
                            Stats::add(&stats.redactions, ev.redactions as u64);
                            stats.feed.stored(&ev, a);
                        }
                        RecordOutcome::Duplicate => Stats::add(&stats.duplicates, 1),
                        RecordOutcome::Deduplicated => Stats::add(&stats.dedup_hits, 1),
                        RecordOutcome::Ignored => {}
                    },
                    Err(e) => stats.failure(
                        "event_failed",
                        format!("event {} not stored: {e}", ev.event_id),
                    ),
                }
                let _ = reply.send(res);
            }
        }
        Err(e) => {
            Stats::set(&stats.commit_failing, 1);
            stats.failure(
                "commit_failed",
                format!("commit of {} events failed: {e}", batch.len()),
            );
            let commit_ms = started.elapsed().as_secs_f64() * 1000.0;
            stats
                .ops
                .events(batch.iter().map(|(ev, _)| timing(ev, false, commit_ms)));
            for (_, reply) in batch.drain(..) {
                let _ = reply.send(Err(WriteError::Storage(e.to_string())));
            }
        }
    }
}

/// An event's timing through a group commit that took `commit_ms` and ends now.
fn timing(ev: &Prepared, success: bool, commit_ms: f64) -> crate::web::ops::EventTiming {
    use crate::web::ops::live_wait;
    use nmem_proto::harness::Event;
    let now = nmem_proto::now_ms();
    crate::web::ops::EventTiming {
        at_ms: now,
        event_id: ev.event_id.clone(),
        session_id: ev.session_id.clone(),
        event: ev.event_name.clone(),
        message_type: match ev.event {
            Event::Stop | Event::SessionEnd => "summarize",
            _ => "observation",
        },
        success,
        queue_wait_ms: live_wait(now - commit_ms as i64, Some(ev.received_at)),
        commit_ms,
        total_ms: live_wait(now, Some(ev.received_at)),
    }
}

type DedupKey = (crate::dedup::Key, i64);

/// [`apply`], then sync's hook (docs/sync.md): a stored event's envelope is appended to the
/// outbound log in the same transaction, with the ids its rows got (nothing when sync is
/// disabled).
fn apply_logged(
    conn: &Connection,
    ev: &Prepared,
    dedup: &Dedup,
    staged: &[DedupKey],
    gens: &mut Generations,
) -> rusqlite::Result<(Applied, Option<DedupKey>)> {
    let mut place = Placement::default();
    let done = apply(conn, ev, dedup, staged, gens, &mut place)?;
    if done.0.outcome == RecordOutcome::Stored {
        crate::sync::log::append(conn, ev, &place.ids)?;
    }
    Ok(done)
}

/// The ids an event's rows were given here: its record's, and its thoughts' in their order
/// (`None` for one not stored). Kept with the event in the log (`sync_log.row_id`,
/// `thought_ids`), so that `nmem rebuild` stores a lost row again under its own id: search
/// ranks ties and walks its candidates by id, so the same ids give the same results in the same
/// order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RowIds {
    pub record: Option<i64>,
    pub thoughts: Vec<Option<i64>>,
}

impl RowIds {
    /// `thought_ids`' stored form: a JSON array, or NULL when the event has no thoughts.
    pub fn thoughts_json(&self) -> Option<String> {
        (!self.thoughts.is_empty())
            .then(|| serde_json::to_string(&self.thoughts).expect("ids serialise"))
    }

    pub fn from_columns(record: Option<i64>, thoughts: Option<String>) -> RowIds {
        RowIds {
            record,
            thoughts: thoughts
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or_default(),
        }
    }
}

/// Where [`apply`] puts an event's rows, and the ids they got.
#[derive(Debug, Default)]
pub struct Placement {
    /// Their source (`sync_sources.id`, docs/sync.md "Origin"); `None`: captured on this device.
    pub origin: Option<i64>,
    /// The ids to store them under when free (`nmem rebuild`: the ids they had).
    pub restore: Option<RowIds>,
    /// Out: the ids they were given.
    pub ids: RowIds,
}

impl Placement {
    /// The id to insert a row of `table` under: the one it had, when it is free (ids are
    /// AUTOINCREMENT, never reused, so a free old id is that row's own), else a new one (NULL).
    fn id_for(
        &self,
        conn: &Connection,
        table: &str,
        had: impl Fn(&RowIds) -> Option<i64>,
    ) -> rusqlite::Result<Option<i64>> {
        let Some(id) = self.restore.as_ref().and_then(had) else {
            return Ok(None);
        };
        let taken = conn
            .prepare_cached(&format!("SELECT 1 FROM {table} WHERE id = ?1"))?
            .exists([id])?;
        Ok((!taken).then_some(id))
    }
}

/// Store an event pulled from another device exactly as a local one (no dedup window: it was
/// deduplicated where it happened), with its follow-ups and digest counters, without logging
/// it: it belongs to its origin's stream. `place` says its source (and, for a rebuild, the ids
/// it had) and receives the ids its rows got. Returns whether it was new here.
pub(crate) fn apply_inbound(
    conn: &Connection,
    ev: &Prepared,
    place: &mut Placement,
) -> rusqlite::Result<bool> {
    let mut gens = Generations::default();
    let (applied, _) = apply(conn, ev, &Dedup::new(0), &[], &mut gens, place)?;
    gens.flush(conn)?;
    Ok(applied.outcome == RecordOutcome::Stored)
}

/// Store one event inside the current transaction or savepoint, with its follow-ups
/// ([`follow`]); the digest counters it moves are noted in `gens`, bumped before the commit.
fn apply(
    conn: &Connection,
    ev: &Prepared,
    dedup: &Dedup,
    staged: &[DedupKey],
    gens: &mut Generations,
    place: &mut Placement,
) -> rusqlite::Result<(Applied, Option<DedupKey>)> {
    let t = ev.received_at;
    let t_event = t;
    conn.prepare_cached(
        // A worktree's path and the branch read at SessionStart are the session's metadata
        // (the latest start's branch wins: a resumed session may be on another branch).
        "INSERT INTO sessions (id, harness, project, project_root, cwd, started_at, worktree, branch)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT(id) DO UPDATE SET
           branch = COALESCE(excluded.branch, branch),
           worktree = COALESCE(worktree, excluded.worktree)
         WHERE excluded.branch IS NOT NULL OR (worktree IS NULL AND excluded.worktree IS NOT NULL)",
    )?
    .execute(params![
        ev.session_id,
        ev.harness,
        ev.project.name,
        ev.project.root,
        ev.cwd,
        t,
        ev.project.worktree,
        ev.project.branch
    ])?;

    for (i, t) in ev.thoughts.iter().enumerate() {
        let id = place.id_for(conn, "prompts", |r| r.thoughts.get(i).copied().flatten())?;
        let n = conn.prepare_cached(
            "INSERT OR IGNORE INTO prompts (id, session_id, timestamp, source, content, project, harness, event_id, origin)
             VALUES (?7, ?1, ?2, 'agent', ?3, ?4, ?5, ?6, ?8)",
        )?
        .execute(params![
            ev.session_id,
            if t.timestamp > 0 { t.timestamp.min(t_event) } else { t_event - 1 },
            t.content,
            ev.project.name,
            ev.harness,
            t.uid,
            id,
            place.origin
        ])?;
        if n > 0 {
            gens.prompt(&ev.project.name, "agent");
        }
        place
            .ids
            .thoughts
            .push((n > 0).then(|| conn.last_insert_rowid()));
    }
    if let Some(offset) = ev.transcript_offset {
        conn.prepare_cached(
            "UPDATE sessions SET transcript_offset = MAX(transcript_offset, ?2) WHERE id = ?1",
        )?
        .execute(params![ev.session_id, offset as i64])?;
    }

    let mut dedup_key = None;
    // An id-less event delivered twice (the same hook wired twice) is stored once.
    let echo = match &ev.record {
        Record::Prompt(p) if p.source == "user" && p.prompt_uid.is_none() => Some(&p.content),
        Record::Observation(o)
            if matches!(o.obs_type, "turn_end" | "subagent_end") && o.tool_use_id.is_none() =>
        {
            Some(&o.content)
        }
        _ => None,
    }
    .map(|c| c.as_str())
    .or(match (&ev.record, &ev.effect) {
        (Record::Nothing, SessionEffect::TurnEnd | SessionEffect::SubagentEnd) => Some(""),
        _ => None,
    });
    if let Some(content) = echo {
        let key = Dedup::echo_key(&ev.session_id, &ev.event_name, content);
        if dedup.is_repeat(&key, t, staged) {
            return Ok((
                Applied {
                    outcome: RecordOutcome::Deduplicated,
                    kind: None,
                    id: None,
                },
                None,
            ));
        }
        dedup_key = Some((key, t));
    }
    let (kind, id) = match &ev.record {
        Record::Nothing => {
            // Nothing to store, but a content-less turn end still counts on its session.
            apply_effect(conn, ev)?;
            return Ok((
                Applied {
                    outcome: RecordOutcome::Ignored,
                    kind: None,
                    id: None,
                },
                dedup_key,
            ));
        }
        Record::Observation(o)
            if o.obs_type == "session_compact" && compaction_recorded(conn, &ev.session_id)? =>
        {
            // The PreCompact of this compaction has its row already: one compaction, one row.
            apply_effect(conn, ev)?;
            return Ok((
                Applied {
                    outcome: RecordOutcome::Ignored,
                    kind: None,
                    id: None,
                },
                None,
            ));
        }
        Record::Observation(o) => {
            if let Some(key) = Dedup::key_for(&ev.session_id, o) {
                if dedup.is_repeat(&key, t, staged) {
                    return Ok((
                        Applied {
                            outcome: RecordOutcome::Deduplicated,
                            kind: None,
                            id: None,
                        },
                        None,
                    ));
                }
                dedup_key = Some((key, t));
            }
            let metadata = (!o.metadata.is_empty())
                .then(|| serde_json::Value::Object(o.metadata.clone()).to_string());
            let row = place.id_for(conn, "observations", |r| r.record)?;
            let n = conn
                .prepare_cached(
                    "INSERT OR IGNORE INTO observations
                       (session_id, prompt_id, timestamp, obs_type, source_event, tool_name, file_path,
                        rel_path, content, metadata, project, project_root, harness, event_id,
                        tool_use_id, redacted, id, origin)
                     VALUES (?1,
                       (SELECT id FROM prompts WHERE session_id = ?1 AND timestamp <= ?2
                        ORDER BY timestamp DESC, id DESC LIMIT 1),
                       ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
                )?
                .execute(params![
                    ev.session_id,
                    t,
                    o.obs_type,
                    ev.event_name,
                    o.tool_name,
                    o.file_path,
                    o.rel_path,
                    o.content,
                    metadata,
                    ev.project.name,
                    ev.project.root,
                    ev.harness,
                    ev.event_id,
                    o.tool_use_id,
                    (ev.redactions > 0) as i64,
                    row,
                    place.origin,
                ])?;
            let id = (n > 0).then(|| conn.last_insert_rowid());
            if let Some(id) = id {
                follow::observation_inserted(
                    conn,
                    &Inserted {
                        id,
                        timestamp: t,
                        obs_type: o.obs_type,
                        file_path: o.file_path.as_deref(),
                        project: &ev.project.name,
                    },
                    gens,
                )?;
            }
            ("observation", id)
        }
        Record::Prompt(p) => {
            let row = place.id_for(conn, "prompts", |r| r.record)?;
            let n = conn
                .prepare_cached(
                    "INSERT OR IGNORE INTO prompts
                       (session_id, timestamp, source, content, project, harness, event_id, prompt_uid, redacted, id, origin)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                )?
                .execute(params![
                    ev.session_id,
                    t,
                    p.source,
                    p.content,
                    ev.project.name,
                    ev.harness,
                    ev.event_id,
                    p.prompt_uid,
                    (ev.redactions > 0) as i64,
                    row,
                    place.origin,
                ])?;
            if n > 0 {
                gens.prompt(&ev.project.name, p.source);
            }
            ("prompt", (n > 0).then(|| conn.last_insert_rowid()))
        }
    };
    place.ids.record = id;
    let Some(id) = id else {
        return Ok((
            Applied {
                outcome: RecordOutcome::Duplicate,
                kind: Some(kind),
                id: None,
            },
            None,
        ));
    };
    apply_effect(conn, ev)?;
    Ok((
        Applied {
            outcome: RecordOutcome::Stored,
            kind: Some(kind),
            id: Some(id),
        },
        dedup_key,
    ))
}

fn apply_effect(conn: &Connection, ev: &Prepared) -> rusqlite::Result<()> {
    let t = ev.received_at;
    match &ev.effect {
        SessionEffect::None => {}
        SessionEffect::Start {
            source,
            model,
            title,
            transcript_path,
        } => {
            conn.prepare_cached(
                "UPDATE sessions SET start_source = COALESCE(start_source, ?2), last_source = ?2,
                   model = COALESCE(?3, model), title = COALESCE(?4, title),
                   transcript_path = COALESCE(?5, transcript_path),
                   started_at = MIN(started_at, ?6)
                 WHERE id = ?1",
            )?
            .execute(params![
                ev.session_id,
                source,
                model,
                title,
                transcript_path,
                t
            ])?;
        }
        SessionEffect::Compaction => {
            conn.prepare_cached("UPDATE sessions SET compactions = compactions + 1 WHERE id = ?1")?
                .execute(params![ev.session_id])?;
        }
        SessionEffect::TurnEnd => {
            conn.prepare_cached("UPDATE sessions SET turns = turns + 1 WHERE id = ?1")?
                .execute(params![ev.session_id])?;
            update_signature(conn, &ev.session_id)?
        }
        SessionEffect::SubagentEnd => {
            conn.prepare_cached("UPDATE sessions SET subagents = subagents + 1 WHERE id = ?1")?
                .execute(params![ev.session_id])?;
        }
        SessionEffect::End { reason } => {
            conn.prepare_cached("UPDATE sessions SET ended_at = MAX(COALESCE(ended_at, 0), ?2), end_reason = ?3 WHERE id = ?1")?
                .execute(params![ev.session_id, t, reason])?;
            update_signature(conn, &ev.session_id)?;
        }
    }
    Ok(())
}

/// Whether the session's latest compaction-related row is a PreCompact's `compaction` that no
/// SessionStart `compact` has followed yet.
fn compaction_recorded(conn: &Connection, session_id: &str) -> rusqlite::Result<bool> {
    Ok(conn
        .prepare_cached(
            "SELECT obs_type FROM observations
             WHERE session_id = ?1 AND obs_type IN ('compaction', 'session_compact')
             ORDER BY timestamp DESC, id DESC LIMIT 1",
        )?
        .query_row([session_id], |r| r.get::<_, String>(0))
        .optional()?
        .is_some_and(|t| t == "compaction"))
}

/// The session's signature: how many observations of each type it has.
fn update_signature(conn: &Connection, session_id: &str) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(
        "SELECT obs_type, COUNT(*) FROM observations WHERE session_id = ?1 GROUP BY obs_type ORDER BY obs_type",
    )?;
    let mut sig = serde_json::Map::new();
    let rows = stmt.query_map([session_id], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
    })?;
    for row in rows {
        let (k, n) = row?;
        sig.insert(k, n.into());
    }
    conn.prepare_cached("UPDATE sessions SET signature = ?2 WHERE id = ?1")?
        .execute(params![
            session_id,
            serde_json::Value::Object(sig).to_string()
        ])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::{Obs, Project};

    fn event(id: &str, content: &str) -> Prepared {
        Prepared {
            event_id: id.into(),
            received_at: 1_780_000_000_000,
            harness: "claude-code",
            session_id: "s".into(),
            cwd: "/w".into(),
            project: Project {
                name: "w".into(),
                root: "/w".into(),
                ..Default::default()
            },
            event: nmem_proto::harness::Event::ToolUse,
            event_name: "PostToolUse".into(),
            record: Record::Observation(Obs {
                obs_type: "command",
                tool_name: Some("Bash".into()),
                content: content.into(),
                ..Default::default()
            }),
            effect: SessionEffect::None,
            thoughts: Vec::new(),
            transcript_offset: None,
            redactions: 0,
        }
    }

    /// `events` stored by a writer on `conn` as one batch (the writer held until all are
    /// queued); the results in order, after the writer has stopped.
    fn store_batch(conn: Connection, events: Vec<Prepared>) -> Vec<Result<Applied, WriteError>> {
        let stats = Arc::new(Stats::default());
        let (writer, handle) = Writer::spawn(conn, 64, Dedup::new(2), stats);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let out = rt.block_on(async {
            let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
            let (held_tx, held_rx) = tokio::sync::oneshot::channel();
            let w = writer.clone();
            let hold = tokio::spawn(async move {
                w.exec(move |_| {
                    let _ = held_tx.send(());
                    go_rx.recv().map_err(|e| WriteError::Invalid(e.to_string()))
                })
                .await
            });
            held_rx.await.unwrap();
            let mut rxs = Vec::new();
            for ev in events {
                rxs.push(writer.enqueue(ev).await.unwrap());
            }
            go_tx.send(()).unwrap();
            hold.await.unwrap().unwrap();
            let mut out = Vec::new();
            for rx in rxs {
                out.push(rx.await.unwrap());
            }
            writer.shutdown().await;
            out
        });
        handle.join().unwrap();
        out
    }

    fn stored_ids(path: &std::path::Path) -> Vec<String> {
        let db = Connection::open(path).unwrap();
        let mut q = db
            .prepare("SELECT event_id FROM observations ORDER BY id")
            .unwrap();
        let ids = q
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        ids
    }

    /// A writer whose group-commit window is far longer than the test may take: a batch that
    /// commits at all did so because every announced event arrived, not because time ran out.
    fn patient_writer(path: &std::path::Path) -> (Writer, std::thread::JoinHandle<()>, Arc<Stats>) {
        let conn = super::super::schema::open_writer(path).unwrap();
        let stats = Arc::new(Stats::default());
        let (writer, handle) = Writer::spawn_with_window(
            conn,
            64,
            Dedup::new(2),
            stats.clone(),
            std::time::Duration::from_secs(600),
        );
        (writer, handle, stats)
    }

    /// What detects a hang: far beyond any commit, far below the patient window.
    const HANG: std::time::Duration = std::time::Duration::from_secs(60);

    /// Events announced while the writer takes the first of them are committed with it, in one
    /// transaction, once the last has arrived; one announced and then given up (stored nothing)
    /// ends the wait as well, and every event is acknowledged only after that commit.
    #[test]
    fn announced_events_share_one_commit() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("nmem.db");
        let (writer, handle, stats) = patient_writer(&path);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let announced: Vec<Coming> = (0..4).map(|_| writer.coming()).collect();
            let mut it = announced.into_iter();
            let first = it.next().unwrap().enqueue(event("c1", "ls")).await.unwrap();
            let second = it
                .next()
                .unwrap()
                .enqueue(event("c2", "pwd"))
                .await
                .unwrap();
            // The writer is waiting for the other two: nothing is acknowledged yet.
            let mut first = first;
            assert!(first.try_recv().is_err(), "acknowledged before its commit");
            drop(it.next()); // refused or ignored: never queued
            let third = it
                .next()
                .unwrap()
                .enqueue(event("c3", "make"))
                .await
                .unwrap();
            for rx in [first, second, third] {
                let applied = tokio::time::timeout(HANG, rx)
                    .await
                    .unwrap()
                    .unwrap()
                    .unwrap();
                assert_eq!(applied.outcome, RecordOutcome::Stored);
            }
            writer.shutdown().await;
        });
        handle.join().unwrap();
        assert_eq!(
            Stats::get(&stats.commits),
            1,
            "one transaction for the three"
        );
        assert_eq!(Stats::get(&stats.events_written), 3);
        assert_eq!(stored_ids(&path), ["c1", "c2", "c3"]);
    }

    /// A lone event is prepared on the idle writer itself and committed at once, without
    /// waiting for its own announcement (the patient window would hold it for ten minutes);
    /// while another event is announced the preparation is given back (for a drainer), and one
    /// that stores nothing has its reply dropped and holds nothing up.
    #[test]
    fn a_lone_event_is_prepared_on_the_idle_writer() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("nmem.db");
        let (writer, handle, stats) = patient_writer(&path);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let idle = |w: &Writer| {
            let deadline = std::time::Instant::now() + HANG;
            while !w.gate.idle.load(Ordering::SeqCst) {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the writer never idled"
                );
                std::thread::yield_now();
            }
        };
        rt.block_on(async {
            idle(&writer);
            let other = writer.coming();
            let mine = writer.coming();
            let nothing: PrepareFn = Box::new(|| None);
            let Err((_, mine)) = writer.prepare_here(nothing, mine) else {
                panic!("prepared on the writer while another event was announced");
            };
            drop(other);
            let (reply, rx) = oneshot::channel();
            let f: PrepareFn =
                Box::new(move || Some((Box::new(event("w1", "cargo build")), reply)));
            assert!(writer.prepare_here(f, mine).is_ok(), "alone and idle");
            let applied = tokio::time::timeout(HANG, rx)
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            assert_eq!(applied.outcome, RecordOutcome::Stored);
            // Stores nothing: the reply is dropped unanswered.
            idle(&writer);
            let (reply, rx) = oneshot::channel::<Result<Applied, WriteError>>();
            let f: PrepareFn = Box::new(move || {
                drop(reply);
                None
            });
            assert!(writer.prepare_here(f, writer.coming()).is_ok());
            assert!(tokio::time::timeout(HANG, rx).await.unwrap().is_err());
            writer.shutdown().await;
        });
        handle.join().unwrap();
        assert_eq!(Stats::get(&stats.commits), 1);
        assert_eq!(stored_ids(&path), ["w1"]);
    }

    /// Wait (at most [`HANG`]) until the writer idles with its queue empty.
    fn until_idle(w: &Writer) {
        let deadline = std::time::Instant::now() + HANG;
        while !(w.gate.idle.load(Ordering::SeqCst) && w.depth() == 0) {
            assert!(
                std::time::Instant::now() < deadline,
                "the writer never idled"
            );
            std::thread::yield_now();
        }
    }

    /// A lone event is stored by the caller itself: committed and answered before `lead`
    /// returns. While another event is announced, or once the writer has stopped, the event is
    /// given back (to be queued); the writer still indexes what a leader committed.
    #[test]
    fn a_lone_event_is_committed_on_the_callers_thread() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("nmem.db");
        let (writer, handle, stats) = patient_writer(&path);
        until_idle(&writer);
        let other = writer.coming();
        let (reply, _rx) = oneshot::channel();
        let f = move || Some((Box::new(event("l0", "ls")), reply));
        let Err((_, mine)) = writer.lead(f, writer.coming()) else {
            panic!("led while another event was announced");
        };
        drop((mine, other));
        // Asleep: nothing left to index (the start's catch-up done), waiting without a timeout.
        let deadline = std::time::Instant::now() + HANG;
        while !(writer.gate.asleep.load(Ordering::SeqCst) && writer.may_lead()) {
            assert!(
                std::time::Instant::now() < deadline,
                "the writer never slept"
            );
            std::thread::yield_now();
        }
        let (reply, mut rx) = oneshot::channel();
        let f = move || Some((Box::new(event("l1", "cargo test")), reply));
        assert!(writer.lead(f, writer.coming()).is_ok(), "alone and idle");
        let applied = rx
            .try_recv()
            .expect("answered before lead returned")
            .unwrap();
        assert_eq!(applied.outcome, RecordOutcome::Stored);
        assert_eq!(stored_ids(&path), ["l1"]);
        // The writer was asleep (nothing to index): it was woken, and indexes the row.
        let db = Connection::open(&path).unwrap();
        let deadline = std::time::Instant::now() + HANG;
        while db
            .query_row("SELECT observations_upto FROM fts_state", [], |r| {
                r.get::<_, i64>(0)
            })
            .unwrap()
            < applied.id.unwrap()
        {
            assert!(std::time::Instant::now() < deadline, "never indexed");
            std::thread::yield_now();
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(writer.shutdown());
        handle.join().unwrap();
        let (reply, _rx) = oneshot::channel();
        let f = move || Some((Box::new(event("l2", "make")), reply));
        assert!(
            writer.lead(f, writer.coming()).is_err(),
            "stored after the writer stopped"
        );
        assert_eq!(Stats::get(&stats.commits), 1);
        assert_eq!(stored_ids(&path), ["l1"]);
    }

    /// Commits made by callers never checkpoint in the caller's thread, but the log is still
    /// checkpointed past its bound (by the writer): it does not grow without end.
    #[test]
    fn the_log_is_checkpointed_when_callers_commit() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("nmem.db");
        let (writer, handle, _stats) = patient_writer(&path);
        let mut led = 0;
        let mut i = 0;
        while led < 2_000 {
            until_idle(&writer);
            let (reply, _rx) = oneshot::channel();
            let f = move || {
                Some((
                    Box::new(event(&format!("c{i}"), &format!("echo {i}"))),
                    reply,
                ))
            };
            if writer.lead(f, writer.coming()).is_ok() {
                led += 1;
            }
            i += 1;
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        // A job after the last commit: the writer has taken the checkpoint it was asked for.
        let frames = rt.block_on(writer.exec(|c| {
            let frames: i64 = c
                .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get(1))
                .map_err(WriteError::from)?;
            Ok(frames)
        }));
        let frames = frames.unwrap();
        assert!(
            frames < super::super::schema::WAL_AUTOCHECKPOINT + 1_000,
            "{frames} frames in the log after 2,000 commits: never checkpointed"
        );
        rt.block_on(writer.shutdown());
        handle.join().unwrap();
        assert_eq!(stored_ids(&path).len(), 2_000);
    }

    /// Announced events that never come (every one given up) do not hold the batch: it commits
    /// at once, not at the end of the window.
    #[test]
    fn a_batch_does_not_wait_for_events_given_up() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("nmem.db");
        let (writer, handle, _stats) = patient_writer(&path);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let (mine, other) = (writer.coming(), writer.coming());
            let rx = mine.enqueue(event("g1", "ls")).await.unwrap();
            // Given up from another thread while the writer waits for it.
            std::thread::spawn(move || drop(other)).join().unwrap();
            let applied = tokio::time::timeout(HANG, rx)
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            assert_eq!(applied.outcome, RecordOutcome::Stored);
            writer.shutdown().await;
        });
        handle.join().unwrap();
        assert_eq!(stored_ids(&path), ["g1"]);
    }

    /// A batch whose COMMIT fails (here a deferred foreign key one of its events broke) is
    /// acknowledged to none of its events: each gets the error, none is stored, and the next
    /// batch is stored as usual.
    #[test]
    fn a_failed_commit_acknowledges_none_of_its_batch() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("nmem.db");
        let conn = super::super::schema::open_writer(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE poison (s TEXT REFERENCES sessions(id) DEFERRABLE INITIALLY DEFERRED);
             CREATE TRIGGER poisoned AFTER INSERT ON observations WHEN NEW.content = 'poison'
             BEGIN INSERT INTO poison VALUES ('no such session'); END;",
        )
        .unwrap();
        let results = store_batch(
            conn,
            vec![event("p1", "ls"), event("p2", "poison"), event("p3", "pwd")],
        );
        for r in &results {
            assert!(
                matches!(r, Err(WriteError::Storage(m)) if m.contains("FOREIGN KEY")),
                "{r:?}"
            );
        }
        assert!(stored_ids(&path).is_empty());
        let conn = super::super::schema::open_writer(&path).unwrap();
        let after = store_batch(conn, vec![event("p4", "ls")]);
        assert!(after[0].is_ok(), "{:?}", after[0]);
        assert_eq!(stored_ids(&path), ["p4"]);
    }

    fn obs(id: &str, project: &str, obs_type: &'static str, path: Option<&str>) -> Prepared {
        let mut ev = event(id, &format!("{obs_type} {}", path.unwrap_or("-")));
        ev.project.name = project.into();
        if let Record::Observation(o) = &mut ev.record {
            o.obs_type = obs_type;
            o.file_path = path.map(Into::into);
            o.tool_name = None;
        }
        ev
    }

    fn user_prompt(id: &str, project: &str, text: &str) -> Prepared {
        let mut ev = event(id, text);
        ev.project.name = project.into();
        ev.event = nmem_proto::harness::Event::UserPrompt;
        ev.event_name = "UserPromptSubmit".into();
        ev.record = Record::Prompt(crate::ingest::NewPrompt {
            source: "user",
            content: text.into(),
            prompt_uid: Some(format!("uid-{id}")),
        });
        ev
    }

    fn gen(db: &Connection, project: &str) -> i64 {
        db.query_row(
            "SELECT COALESCE((SELECT n FROM digest_gen WHERE project = ?1), 0)",
            [project],
            |r| r.get(0),
        )
        .unwrap()
    }

    fn count(db: &Connection, sql: &str) -> i64 {
        db.query_row(sql, [], |r| r.get(0)).unwrap()
    }

    /// What the insert triggers of migrations 008 and 010 did, the writer does (store::follow):
    /// a saved memory becomes a note, an edit of a file an active item cites flags it, the
    /// digest counters move for what the digest shows and not for a SessionStart's row.
    /// `nmem rebuild`'s placement: rows stored again under the ids they had when those are
    /// free (a thought's too), under new ones when taken, with their origin; the ids they got
    /// come back for the log.
    #[test]
    fn a_restored_row_gets_its_old_id_back_when_it_is_free() {
        let tmp = tempfile::tempdir().unwrap();
        let c = super::super::schema::open_writer(&tmp.path().join("nmem.db")).unwrap();
        let mut ev = event("e1", "one");
        ev.thoughts = vec![crate::ingest::reasoning::Thought {
            uid: "t:1:0".into(),
            timestamp: 1,
            content: "why".into(),
        }];
        let had = RowIds {
            record: Some(42),
            thoughts: vec![Some(17)],
        };
        let mut place = Placement {
            origin: Some(3),
            restore: Some(had.clone()),
            ..Placement::default()
        };
        assert!(apply_inbound(&c, &ev, &mut place).unwrap());
        assert_eq!(place.ids, had);
        let row = |sql: &str| -> (i64, Option<i64>) {
            c.query_row(sql, [], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap()
        };
        assert_eq!(
            row("SELECT id, origin FROM observations WHERE event_id = 'e1'"),
            (42, Some(3))
        );
        assert_eq!(
            row("SELECT id, origin FROM prompts WHERE event_id = 't:1:0'"),
            (17, Some(3))
        );
        // Id 42 is taken now: another event's row gets a new one, and says so.
        let mut place = Placement {
            restore: Some(RowIds {
                record: Some(42),
                thoughts: Vec::new(),
            }),
            ..Placement::default()
        };
        assert!(apply_inbound(&c, &event("e2", "two"), &mut place).unwrap());
        let got = place.ids.record.unwrap();
        assert_ne!(got, 42);
        assert_eq!(
            row("SELECT id, origin FROM observations WHERE event_id = 'e2'"),
            (got, None)
        );
        // Stored already: nothing, no id.
        let mut place = Placement::default();
        assert!(!apply_inbound(&c, &event("e1", "one"), &mut place).unwrap());
        assert_eq!(place.ids.record, None);
        assert_eq!(
            RowIds::from_columns(had.record, had.thoughts_json()),
            had,
            "the stored form reads back"
        );
    }

    #[test]
    fn stored_rows_get_what_the_insert_triggers_gave() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("nmem.db");
        let conn = super::super::schema::open_writer(&path).unwrap();
        conn.execute_batch(
            "INSERT INTO knowledge (id, class, kind, project, scope, title, summary, reason,
                                    memory_source, status, created_at, updated_at)
             VALUES (7, 'knowledge', 'fact', 'w', 'project', 'Retries are capped at 5', '',
                     'read in the code', 'user_declared', 'active', 1, 1);
             INSERT INTO knowledge_evidence (knowledge_id, ord, file_path) VALUES (7, 0, '/w/src/retry.rs');",
        )
        .unwrap();
        let mut memory = obs("m1", "w", "memory", None);
        if let Record::Observation(o) = &mut memory.record {
            o.content = "Retry policy\nbackoff, at most 5 tries".into();
            o.metadata.insert("title".into(), "Retry policy".into());
        }
        let results = store_batch(
            conn,
            vec![
                memory,
                obs("e0", "w", "file_edit", Some("/w/src/other.rs")),
                obs("r1", "w", "file_read", Some("/w/src/retry.rs")),
                obs("e1", "w", "file_edit", Some("/w/src/retry.rs")),
                obs("e2", "w", "file_write", Some("/w/src/retry.rs")),
            ],
        );
        let ids: Vec<i64> = results
            .iter()
            .map(|r| r.as_ref().unwrap().id.unwrap())
            .collect();
        let db = Connection::open(&path).unwrap();
        let note: (String, String, String, i64) = db
            .query_row(
                "SELECT kind, title, status, obs_id FROM knowledge WHERE obs_id IS NOT NULL",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .unwrap();
        assert_eq!(
            note,
            (
                "note".into(),
                "Retry policy".into(),
                "active".into(),
                ids[0]
            )
        );
        assert_eq!(count(&db, &format!("SELECT COUNT(*) FROM knowledge_audit WHERE action = 'created' AND other_id = {}", ids[0])), 1);
        // Flagged once, by the first edit of the cited file; the read and the other file do not.
        let stale: Option<i64> = db
            .query_row("SELECT stale_obs_id FROM knowledge WHERE id = 7", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(stale, Some(ids[3]));
        assert_eq!(
            count(
                &db,
                "SELECT COUNT(*) FROM knowledge_audit WHERE knowledge_id = 7 AND action = 'stale'"
            ),
            1
        );
        let after_first = gen(&db, "w");
        assert!(after_first > 0, "the project's digest counter moved");
        drop(db);

        // A SessionStart's own row moves nothing; a user prompt moves its project and "all".
        let all = |db: &Connection| count(db, "SELECT n FROM digest_gen_all");
        let all_before = all(&Connection::open(&path).unwrap());
        let conn = super::super::schema::open_writer(&path).unwrap();
        store_batch(conn, vec![obs("s1", "w", "session_start", None)]);
        let db = Connection::open(&path).unwrap();
        assert_eq!(gen(&db, "w"), after_first);
        assert_eq!(all(&db), all_before);
        drop(db);
        let conn = super::super::schema::open_writer(&path).unwrap();
        store_batch(
            conn,
            vec![user_prompt("p1", "x", "Make the export stream rows")],
        );
        let db = Connection::open(&path).unwrap();
        assert_eq!((gen(&db, "w"), gen(&db, "x")), (after_first, 1));
        assert_eq!(all(&db), all_before + 1);
    }

    /// An event rolled back alone (its savepoint) moves no counter: only committed rows do.
    #[test]
    fn a_failed_event_moves_no_digest_counter() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("nmem.db");
        let conn = super::super::schema::open_writer(&path).unwrap();
        conn.execute_batch(
            "CREATE TRIGGER boom BEFORE INSERT ON observations WHEN NEW.project = 'b'
             BEGIN SELECT RAISE(ABORT, 'planted failure'); END;",
        )
        .unwrap();
        let results = store_batch(
            conn,
            vec![
                obs("a1", "a", "command", None),
                obs("b1", "b", "memory", None),
                obs("c1", "c", "command", None),
            ],
        );
        assert!(results[1].is_err() && results[0].is_ok() && results[2].is_ok());
        let db = Connection::open(&path).unwrap();
        assert_eq!((gen(&db, "a"), gen(&db, "b"), gen(&db, "c")), (1, 0, 1));
        assert_eq!(count(&db, "SELECT COUNT(*) FROM knowledge"), 0);
    }

    /// One event that fails inside a batch: the batch is stored again event by event, so the
    /// others are committed and acknowledged, and only the failing one gets an error.
    #[test]
    fn a_failing_event_does_not_spoil_its_batch() {
        // Removed with everything in it when the test ends, passed or not.
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let path = dir.join("nmem.db");
        let conn = super::super::schema::open_writer(&path).unwrap();
        conn.execute_batch(
            "CREATE TRIGGER boom BEFORE INSERT ON observations WHEN NEW.content = 'boom'
             BEGIN SELECT RAISE(ABORT, 'planted failure'); END;",
        )
        .unwrap();
        let stats = Arc::new(Stats::default());
        let (writer, handle) = Writer::spawn(conn, 64, Dedup::new(2), stats);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let results = rt.block_on(async {
            // Hold the writer until every event is queued, so they are one batch.
            let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
            let (held_tx, held_rx) = tokio::sync::oneshot::channel();
            let w = writer.clone();
            let hold = tokio::spawn(async move {
                w.exec(move |_| {
                    let _ = held_tx.send(());
                    go_rx.recv().map_err(|e| WriteError::Invalid(e.to_string()))
                })
                .await
            });
            held_rx.await.unwrap();
            let mut rxs = Vec::new();
            for (id, content) in [("e1", "ls"), ("e2", "boom"), ("e3", "pwd")] {
                rxs.push(writer.enqueue(event(id, content)).await.unwrap());
            }
            go_tx.send(()).unwrap();
            hold.await.unwrap().unwrap();
            let mut out = Vec::new();
            for rx in rxs {
                out.push(rx.await.unwrap());
            }
            writer.shutdown().await;
            out
        });
        handle.join().unwrap();
        assert_eq!(results[0].as_ref().unwrap().outcome, RecordOutcome::Stored);
        assert!(
            matches!(&results[1], Err(WriteError::Storage(m)) if m.contains("planted failure")),
            "{:?}",
            results[1]
        );
        assert_eq!(results[2].as_ref().unwrap().outcome, RecordOutcome::Stored);
        let db = rusqlite::Connection::open(&path).unwrap();
        let stored: Vec<String> = db
            .prepare("SELECT event_id FROM observations ORDER BY id")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(stored, ["e1", "e3"]);
    }
}
