//! An opt-in timing trace of each event's way through nmemd: where a single hook's answer spends
//! its time (accept → request read → prepared → queued to the writer → the writer's transaction
//! → commit → the request woken → reply), for a breakdown on a quiet machine.
//!
//! Off unless `NMEM_TRACE_INGEST=1` is in nmemd's environment when it starts (read once). Off,
//! each stage costs one relaxed load of a static flag and nothing is allocated or logged. On,
//! every `POST /v1/events` logs one line at `info` (target `nmem::trace`) with the microseconds
//! of each stage on one monotonic clock, and the writer logs one line per transaction naming the
//! event ids it committed; the two are joined by event id. ARCHITECTURE.md ("The ingest path and
//! its figures") says how to produce and read them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// The environment variable that turns the trace on (`1`).
pub const ENV: &str = "NMEM_TRACE_INGEST";

static ON: AtomicBool = AtomicBool::new(false);
static EPOCH: OnceLock<Instant> = OnceLock::new();

/// Read [`ENV`] once, at start.
pub fn init_from_env() {
    if std::env::var_os(ENV).is_some_and(|v| v == "1") {
        set(true);
    }
}

/// Turn the trace on or off (tests; [`init_from_env`] at start).
pub fn set(on: bool) {
    EPOCH.get_or_init(Instant::now);
    ON.store(on, Ordering::Relaxed);
}

/// Whether the trace is on.
#[inline]
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Microseconds since the trace's epoch: one clock for every thread's lines.
pub fn now_us() -> u64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_micros() as u64
}

/// [`now_us`] when the trace is on.
#[inline]
pub fn stamp() -> Option<u64> {
    on().then(now_us)
}

/// When the connection was accepted and when its request's headers were read (a request
/// extension, set by `conn::serve` only when the trace is on).
#[derive(Debug, Clone, Copy)]
pub struct Arrival {
    pub accepted: u64,
    pub request: u64,
}

/// One event's stages. `None` (nothing recorded) when the trace is off.
pub struct Trace(Option<Box<Stages>>);

struct Stages {
    event_id: String,
    marks: Vec<(&'static str, u64)>,
}

impl Trace {
    /// Begin an event's trace at its handler; `arrival` from the request, if the trace was on
    /// when it arrived.
    pub fn start(event_id: &str, arrival: Option<Arrival>) -> Trace {
        if !on() {
            return Trace(None);
        }
        let mut marks = Vec::with_capacity(8);
        if let Some(a) = arrival {
            marks.push(("accepted", a.accepted));
            marks.push(("request", a.request));
        }
        marks.push(("handler", now_us()));
        Trace(Some(Box::new(Stages {
            event_id: event_id.to_string(),
            marks,
        })))
    }

    /// Note that `stage` ended now.
    #[inline]
    pub fn mark(&mut self, stage: &'static str) {
        if let Some(s) = &mut self.0 {
            s.marks.push((stage, now_us()));
        }
    }

    /// The line this event logs (`None` when off): `event <id>` then `stage=µs` pairs, in order.
    pub fn line(&self) -> Option<String> {
        let s = self.0.as_ref()?;
        let mut out = format!("event {}", s.event_id);
        for (stage, t) in &s.marks {
            out.push_str(&format!(" {stage}={t}"));
        }
        Some(out)
    }

    /// Mark the reply and log the line.
    pub fn finish(mut self) {
        self.mark("reply");
        if let Some(line) = self.line() {
            tracing::info!(target: "nmem::trace", "{line}");
        }
    }
}

/// The writer's line for one transaction: when it began and committed, and the events in it.
/// Logged after the replies are sent, so the log write does not delay them.
pub fn writer_line(began: u64, committed: u64, ids: &[String]) {
    tracing::info!(
        target: "nmem::trace",
        "writer began={began} committed={committed} events={}",
        ids.join(",")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Off, a trace records nothing and has no line; on, every stage in order with times that
    /// never go back. (One test: the flag is process-wide.)
    #[test]
    fn off_records_nothing_and_on_records_every_stage_in_order() {
        set(false);
        let mut t = Trace::start("ev-1", None);
        t.mark("parsed");
        assert!(t.line().is_none());
        assert!(stamp().is_none());

        set(true);
        let a = Arrival {
            accepted: now_us(),
            request: now_us(),
        };
        let mut t = Trace::start("ev-2", Some(a));
        t.mark("prepared");
        t.mark("committed");
        let line = t.line().unwrap();
        set(false);
        let stages: Vec<(&str, u64)> = line
            .strip_prefix("event ev-2 ")
            .unwrap()
            .split(' ')
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap();
                (k, v.parse().unwrap())
            })
            .collect();
        let names: Vec<&str> = stages.iter().map(|s| s.0).collect();
        assert_eq!(
            names,
            ["accepted", "request", "handler", "prepared", "committed"]
        );
        assert!(stages.windows(2).all(|w| w[0].1 <= w[1].1), "{line}");
    }
}
