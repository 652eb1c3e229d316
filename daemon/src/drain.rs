//! Preparing events off the async workers with as few thread wake-ups as possible.
//!
//! `POST /v1/events` prepares its event (parse, project, transcript tail, redaction, extraction)
//! on a blocking thread, never on an async worker: the transcript and the project's files are
//! read there. A `spawn_blocking` per event woke a parked pool thread for every event (a futex
//! wake and a context switch on each side), and the pool's idle threads slept and woke again
//! between events. Here the jobs wait in one queue, and a few blocking threads ("drainers")
//! take them in turn until it is empty: under a stream of events a drainer that finishes one job
//! finds the next waiting and nobody is woken; a new drainer is started only when the queue is
//! longer than the drainers already at it, up to [`Drain::max`]. So a job queued behind a busy
//! drainer waits for its current job (preparing reads at most a bounded transcript tail: 4 MiB,
//! 500 ms) or for one more job to arrive, which starts another drainer. Measured with `strace
//! -c -f` on nmemd under `nmem-bench --ingest-only`: 6.1 futex calls per event with a
//! `spawn_blocking` per event, 3.5 with the drainers.
//!
//! The cap ([`PREPARE_DRAINERS`] for events) leaves the rest of the blocking pool
//! (`max_blocking_threads`, 8) to the read queries, so a slow file system under every drainer
//! cannot starve search.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// The drainers preparing `POST /v1/events` bodies: half the blocking pool.
pub const PREPARE_DRAINERS: usize = 4;

type Job = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    /// Drainers started and not yet finished.
    active: usize,
}

/// A queue of blocking jobs and the drainers working through it.
pub struct Drain {
    state: Mutex<State>,
    max: usize,
}

impl Drain {
    /// At most `max` drainers at once (at least one).
    pub fn new(max: usize) -> Arc<Drain> {
        Arc::new(Drain {
            state: Mutex::new(State::default()),
            max: max.max(1),
        })
    }

    /// The most drainers that run at once.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Queue `job` to run on a blocking thread. Needs a tokio runtime (the drainers are its
    /// blocking threads). A job queued while the runtime shuts down may never run: it is then
    /// dropped with the queue, and whatever it owns (a reply channel) with it.
    pub fn push(self: &Arc<Self>, job: impl FnOnce() + Send + 'static) {
        let start = {
            let mut s = self.lock();
            s.queue.push_back(Box::new(job));
            // Every running drainer already has a job waiting for it: one more.
            let start = s.active < self.max && s.queue.len() > s.active;
            if start {
                s.active += 1;
            }
            start
        };
        if start {
            let me = self.clone();
            drop(tokio::task::spawn_blocking(move || me.run()));
        }
    }

    fn run(&self) {
        loop {
            let job = {
                let mut s = self.lock();
                match s.queue.pop_front() {
                    Some(job) => job,
                    None => {
                        s.active -= 1;
                        return;
                    }
                }
            };
            job();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Only a panic poisons it, and a panic aborts the process (`panic = "abort"`).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Jobs waiting, and drainers running (for tests and status).
    pub fn load(&self) -> (usize, usize) {
        let s = self.lock();
        (s.queue.len(), s.active)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    fn poll(what: &str, mut ok: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ok() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::yield_now();
        }
    }

    /// Every job runs exactly once, however many are pushed at once, and the drainers stop
    /// when the queue is empty.
    #[test]
    fn every_job_runs_once_and_the_drainers_stop() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_blocking_threads(8)
            .build()
            .unwrap();
        let drain = Drain::new(3);
        let done = Arc::new(AtomicUsize::new(0));
        let ran: Arc<Vec<AtomicUsize>> = Arc::new((0..5000).map(|_| AtomicUsize::new(0)).collect());
        rt.block_on(async {
            for i in 0..5000 {
                let (done, ran) = (done.clone(), ran.clone());
                drain.push(move || {
                    ran[i].fetch_add(1, Ordering::SeqCst);
                    done.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        poll("every job", || done.load(Ordering::SeqCst) == 5000);
        poll("the drainers to stop", || drain.load() == (0, 0));
        assert!(ran.iter().all(|n| n.load(Ordering::SeqCst) == 1));
    }

    /// A job stuck on a slow file holds the one queued behind it only until the queue is
    /// longer than the drainers at work, which gets another drainer, up to the cap and never
    /// more.
    #[test]
    fn a_stuck_job_gets_company_up_to_the_cap() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_blocking_threads(8)
            .build()
            .unwrap();
        let drain = Drain::new(2);
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let release_rx = Arc::new(Mutex::new(release_rx));
        let stuck = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        let stuck_job = || {
            let (rx, stuck) = (release_rx.clone(), stuck.clone());
            move || {
                stuck.fetch_add(1, Ordering::SeqCst);
                let _ = rx.lock().unwrap().recv();
            }
        };
        let quick_job = || {
            let done = done.clone();
            move || {
                done.fetch_add(1, Ordering::SeqCst);
            }
        };
        rt.block_on(async {
            drain.push(stuck_job());
            poll("the first drainer", || stuck.load(Ordering::SeqCst) == 1);
            // One job waiting for one busy drainer: no wake-up for it yet.
            drain.push(stuck_job());
            assert_eq!(drain.load(), (1, 1));
            // Two waiting for one: a second drainer, which takes the older job.
            drain.push(quick_job());
            poll("the second drainer", || stuck.load(Ordering::SeqCst) == 2);
            assert_eq!(drain.load(), (1, 2));
            for _ in 0..9 {
                drain.push(quick_job());
            }
            // The cap holds: the ten wait, no third drainer.
            assert_eq!(drain.load(), (10, 2));
        });
        release_tx.send(()).unwrap();
        release_tx.send(()).unwrap();
        poll("the queued jobs", || done.load(Ordering::SeqCst) == 10);
        poll("the drainers to stop", || drain.load() == (0, 0));
    }
}
