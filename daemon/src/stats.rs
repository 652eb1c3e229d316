//! Counters shown by `nmemctl status`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

#[derive(Default)]
pub struct Stats {
    pub events_recorded: AtomicU64,
    pub duplicates: AtomicU64,
    pub dedup_hits: AtomicU64,
    pub redactions: AtomicU64,
    pub spool_drained: AtomicU64,
    pub spool_corrupt: AtomicU64,
    pub rejected: AtomicU64,
    pub commits: AtomicU64,
    /// Time the writer spent in transactions, in microseconds.
    pub commit_micros: AtomicU64,
    /// Events handled by the writer (stored or not).
    pub events_written: AtomicU64,
    /// When the writer last committed, and when maintenance last ran (Unix ms; 0: never).
    pub last_write_ms: AtomicU64,
    pub last_maintenance_ms: AtomicU64,
    /// 1 while commits fail (disk full, read-only file): the daemon is degraded.
    pub commit_failing: AtomicU64,
    last_error: Mutex<Option<String>>,
    /// Events stored per second over the last minute: (second, count).
    recent: Mutex<std::collections::VecDeque<(u64, u64)>>,
    /// What was stored or failed, as it happens: the viewer's live stream (`/api/events`).
    pub feed: crate::web::feed::Feed,
    /// Recent searches, commits and failures, for the viewer's ops routes (`/api/ops/*`).
    pub ops: crate::web::ops::Ops,
}

impl Stats {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }

    pub fn set(counter: &AtomicU64, v: u64) {
        counter.store(v, Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Relaxed)
    }

    /// A failure of a class (`rejected_payload`, `spool_corrupt`, `event_failed`,
    /// `commit_failed`): remembered for status, the failure summary and the live stream.
    pub fn failure(&self, class: &'static str, msg: impl Into<String>) {
        let msg = msg.into();
        self.ops.failure(class, &msg);
        self.feed.failed(class, &msg);
        self.error(msg);
    }

    /// Remember the latest error for status (and log it).
    pub fn error(&self, msg: impl Into<String>) {
        let msg = msg.into();
        tracing::error!("{msg}");
        *self.last_error.lock().unwrap() = Some(msg);
    }

    /// Count `n` stored events for the ingest rate.
    pub fn note_stored(&self, n: u64) {
        let sec = nmem_proto::now_ms() as u64 / 1000;
        let mut r = self.recent.lock().unwrap();
        match r.back_mut() {
            Some((s, c)) if *s == sec => *c += n,
            _ => r.push_back((sec, n)),
        }
        while r.front().is_some_and(|(s, _)| *s + 60 < sec) {
            r.pop_front();
        }
    }

    /// Events stored per second, averaged over the last minute.
    pub fn ingest_rate(&self) -> f64 {
        let sec = nmem_proto::now_ms() as u64 / 1000;
        let r = self.recent.lock().unwrap();
        r.iter()
            .filter(|(s, _)| *s + 60 >= sec)
            .map(|(_, c)| *c)
            .sum::<u64>() as f64
            / 60.0
    }

    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().unwrap().clone()
    }
}
