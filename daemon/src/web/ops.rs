//! What the daemon remembers of its recent work for the viewer's ops routes
//! (`/api/ops/search-traces`, `session-timings`, `failure-summary`, `trends`): bounded rings in
//! memory, [`RING`] entries each, lost at restart (the durable record is the log).
//!
//! CodexMem times an LLM per message (queue wait, model, index); nmem has no model, so an
//! event's timing is its wait from the hook's receipt to the start of its group commit, the
//! commit's time, and the total to the acknowledgement ([`EventTiming`]); each group commit is
//! remembered too ([`CommitTiming`], with the writer's queue depth after it, for the trends).

use crate::app::App;
use crate::query::{self, QueryError};
use nmem_proto::query::{SearchReply, SearchRequest};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

/// Entries kept per ring.
pub const RING: usize = 2000;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchTrace {
    pub at_ms: i64,
    pub query: String,
    pub project: Option<String>,
    pub mode: String,
    pub ms: f64,
    pub results: usize,
    /// Results per retrieval source (`lexical`, `semantic`, `context`, `doc`).
    pub sources: BTreeMap<String, usize>,
    pub ok: bool,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommitTiming {
    pub at_ms: i64,
    pub events: usize,
    pub commit_ms: f64,
    /// From the hook's receipt of the batch's first event to the commit; absent for events
    /// received long before (imports, spool drains), which did not wait in this queue.
    pub queue_total_ms: Option<f64>,
    /// Jobs waiting in the writer's queue when the commit finished.
    pub queue_depth: usize,
}

/// One event through the writer (CodexMem's per-message timing, without a model step).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventTiming {
    pub at_ms: i64,
    pub event_id: String,
    pub session_id: String,
    /// The harness's event (`PostToolUse`, `Stop`, ...).
    pub event: String,
    /// CodexMem's `messageType`: `summarize` for a turn's or session's end, else `observation`.
    pub message_type: &'static str,
    pub success: bool,
    /// From the hook's receipt to the start of its group commit; absent for events received
    /// long before (imports, spool drains), which did not wait in this queue.
    pub queue_wait_ms: Option<f64>,
    pub commit_ms: f64,
    /// From the hook's receipt to the acknowledgement (absent like `queue_wait_ms`).
    pub total_ms: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    pub at_ms: i64,
    pub error_class: String,
    pub message: String,
}

#[derive(Default)]
pub struct Ops {
    searches: Mutex<VecDeque<SearchTrace>>,
    commits: Mutex<VecDeque<CommitTiming>>,
    events: Mutex<VecDeque<EventTiming>>,
    failures: Mutex<VecDeque<Failure>>,
}

fn push<T>(ring: &Mutex<VecDeque<T>>, v: T) {
    let mut r = ring.lock().unwrap_or_else(|e| e.into_inner());
    if r.len() >= RING {
        r.pop_front();
    }
    r.push_back(v);
}

/// The wait from `received_ms` to `now`, when the event was live (received within the last
/// minute: imports and spool drains carry their original times).
pub fn live_wait(now: i64, received_ms: Option<i64>) -> Option<f64> {
    received_ms
        .map(|r| (now - r) as f64)
        .filter(|w| (0.0..60_000.0).contains(w))
}

fn snapshot<T: Clone>(ring: &Mutex<VecDeque<T>>) -> Vec<T> {
    ring.lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .cloned()
        .collect()
}

impl Ops {
    /// A group commit of `events` events that took `commit_ms`, the oldest received at
    /// `first_received_ms`, with `queue_depth` jobs waiting after it.
    pub fn commit(
        &self,
        events: usize,
        commit_ms: f64,
        first_received_ms: Option<i64>,
        queue_depth: usize,
    ) {
        let now = nmem_proto::now_ms();
        push(
            &self.commits,
            CommitTiming {
                at_ms: now,
                events,
                commit_ms,
                queue_total_ms: live_wait(now, first_received_ms),
                queue_depth,
            },
        );
    }

    /// The events of one group commit, under one lock.
    pub fn events(&self, timings: impl IntoIterator<Item = EventTiming>) {
        let mut r = self.events.lock().unwrap_or_else(|e| e.into_inner());
        for t in timings {
            if r.len() >= RING {
                r.pop_front();
            }
            r.push_back(t);
        }
    }

    pub fn failure(&self, class: &str, message: &str) {
        push(
            &self.failures,
            Failure {
                at_ms: nmem_proto::now_ms(),
                error_class: class.to_string(),
                message: message.to_string(),
            },
        );
    }

    pub fn searches(&self) -> Vec<SearchTrace> {
        snapshot(&self.searches)
    }
    pub fn commits(&self) -> Vec<CommitTiming> {
        snapshot(&self.commits)
    }
    pub fn event_timings(&self) -> Vec<EventTiming> {
        snapshot(&self.events)
    }
    pub fn failures(&self) -> Vec<Failure> {
        snapshot(&self.failures)
    }
}

/// `query::search`, timed and remembered as a trace (every search: the socket's, MCP's, the
/// viewer's).
pub async fn traced_search(app: &App, req: SearchRequest) -> Result<SearchReply, QueryError> {
    let (text, project) = (req.query.clone(), req.project.clone().flatten());
    let started = std::time::Instant::now();
    let res = query::search(app, req).await;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    let mut sources = BTreeMap::new();
    if let Ok(r) = &res {
        for hit in &r.items {
            for s in &hit.retrieval_sources {
                *sources.entry(s.source.clone()).or_insert(0) += 1;
            }
        }
    }
    push(
        &app.stats.ops.searches,
        SearchTrace {
            at_ms: nmem_proto::now_ms(),
            query: text.chars().take(200).collect(),
            project,
            mode: res.as_ref().map(|r| r.mode.clone()).unwrap_or_default(),
            ms,
            results: res.as_ref().map(|r| r.items.len()).unwrap_or(0),
            sources,
            ok: res.is_ok(),
        },
    );
    res
}

/// One trends bucket (CodexMem's field names).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Bucket {
    pub start_ms: i64,
    pub search_count: u64,
    pub avg_search_ms: f64,
    pub queue_count: u64,
    pub avg_queue_total_ms: f64,
    /// Events stored in the bucket (the ingest rate's chart).
    pub event_count: u64,
    /// The writer's deepest queue after a commit in the bucket (the queue's chart).
    pub max_queue_depth: u64,
    pub failure_count: u64,
}

/// Bucket the rings over the last `window_ms`, `bucket_ms` each, oldest first.
pub fn trends(
    now: i64,
    window_ms: i64,
    bucket_ms: i64,
    searches: &[SearchTrace],
    commits: &[CommitTiming],
    failures: &[Failure],
) -> Vec<Bucket> {
    let n = ((window_ms + bucket_ms - 1) / bucket_ms).max(1) as usize;
    let start = now - n as i64 * bucket_ms;
    let mut out: Vec<Bucket> = (0..n)
        .map(|i| Bucket {
            start_ms: start + i as i64 * bucket_ms,
            ..Default::default()
        })
        .collect();
    let slot = |at: i64| -> Option<usize> {
        (at >= start && at <= now).then(|| (((at - start) / bucket_ms) as usize).min(n - 1))
    };
    let mut search_ms = vec![0.0; n];
    let mut queue_ms = vec![(0.0, 0u64); n];
    for s in searches {
        if let Some(i) = slot(s.at_ms) {
            out[i].search_count += 1;
            search_ms[i] += s.ms;
        }
    }
    for c in commits {
        if let Some(i) = slot(c.at_ms) {
            out[i].queue_count += 1;
            out[i].event_count += c.events as u64;
            out[i].max_queue_depth = out[i].max_queue_depth.max(c.queue_depth as u64);
            if let Some(q) = c.queue_total_ms {
                queue_ms[i].0 += q;
                queue_ms[i].1 += 1;
            }
        }
    }
    for f in failures {
        if let Some(i) = slot(f.at_ms) {
            out[i].failure_count += 1;
        }
    }
    for (i, b) in out.iter_mut().enumerate() {
        if b.search_count > 0 {
            b.avg_search_ms = search_ms[i] / b.search_count as f64;
        }
        if queue_ms[i].1 > 0 {
            b.avg_queue_total_ms = queue_ms[i].0 / queue_ms[i].1 as f64;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn search(at_ms: i64, ms: f64) -> SearchTrace {
        SearchTrace {
            at_ms,
            query: "q".into(),
            project: None,
            mode: "lexical".into(),
            ms,
            results: 1,
            sources: Default::default(),
            ok: true,
        }
    }

    #[test]
    fn buckets_average_what_falls_in_them() {
        let now = 1_000_000;
        let s = [
            search(now - 5_000, 10.0),
            search(now - 4_000, 30.0),
            search(now - 50_000, 7.0),
        ];
        let b = trends(now, 60_000, 10_000, &s, &[], &[]);
        assert_eq!(b.len(), 6);
        assert_eq!(b[5].search_count, 2);
        assert_eq!(b[5].avg_search_ms, 20.0);
        assert_eq!(
            b[1].search_count, 1,
            "50 s ago is in the second bucket of ten"
        );
        assert_eq!(b.iter().map(|b| b.search_count).sum::<u64>(), 3);
    }

    #[test]
    fn a_bucket_keeps_the_deepest_queue_after_its_commits() {
        let now = 1_000_000;
        let c = |at_ms, queue_depth| CommitTiming {
            at_ms,
            events: 2,
            commit_ms: 1.0,
            queue_total_ms: Some(3.0),
            queue_depth,
        };
        let b = trends(
            now,
            60_000,
            10_000,
            &[],
            &[c(now - 1_000, 4), c(now - 2_000, 9), c(now - 15_000, 1)],
            &[],
        );
        assert_eq!(b[5].max_queue_depth, 9);
        assert_eq!(b[5].event_count, 4);
        assert_eq!(b[4].max_queue_depth, 1);
        assert_eq!(b[0].max_queue_depth, 0);
    }

    proptest! {
        /// Whatever the times, every entry inside the window is counted once and none outside.
        #[test]
        fn every_entry_in_the_window_is_counted_once(
            ats in proptest::collection::vec(-200_000i64..10_000, 0..50),
            window in 60_000i64..200_000,
            bucket in 10_000i64..60_000,
        ) {
            let now = 0;
            let s: Vec<_> = ats.iter().map(|&a| search(a, 1.0)).collect();
            let b = trends(now, window, bucket, &s, &[], &[]);
            let start = b[0].start_ms;
            let inside = ats.iter().filter(|&&a| a >= start && a <= now).count() as u64;
            prop_assert_eq!(b.iter().map(|b| b.search_count).sum::<u64>(), inside);
        }
    }
}
