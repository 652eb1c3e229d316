//! The live stream behind `/api/events`: the writer announces every stored row, session start
//! and end, and failure on a broadcast channel; each open stream subscribes.
//!
//! Sending never blocks the writer: a broadcast send is a copy into a ring, and a stream that
//! falls behind by more than [`CAPACITY`] items skips ahead (it is told how many it missed)
//! rather than holding the writer or memory.

use crate::ingest::Prepared;
use crate::store::writer::Applied;
use nmem_proto::harness::Event;
use serde::Serialize;
use tokio::sync::broadcast;

/// Items kept for a slow stream before it skips ahead.
pub const CAPACITY: usize = 1024;

/// One thing that happened.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event")]
pub enum Item {
    /// A row was committed: an observation, or a prompt.
    #[serde(rename = "observation.stored")]
    Stored {
        kind: String,
        id: i64,
        session_id: String,
        project: String,
        timestamp: i64,
    },
    /// A session started or ended.
    #[serde(rename = "session.status")]
    Session {
        session_id: String,
        project: String,
        status: &'static str,
    },
    /// An event, a spool file or a commit failed.
    #[serde(rename = "queue.failed")]
    Failed {
        class: &'static str,
        message: String,
    },
}

impl Item {
    /// The SSE event name.
    pub fn name(&self) -> &'static str {
        match self {
            Item::Stored { .. } => "observation.stored",
            Item::Session { .. } => "session.status",
            Item::Failed { .. } => "queue.failed",
        }
    }
}

pub struct Feed(broadcast::Sender<Item>);

impl Default for Feed {
    fn default() -> Self {
        Feed(broadcast::channel(CAPACITY).0)
    }
}

impl Feed {
    pub fn subscribe(&self) -> broadcast::Receiver<Item> {
        self.0.subscribe()
    }

    /// Called by the writer after the commit of `ev`, stored as `a`.
    pub fn stored(&self, ev: &Prepared, a: &Applied) {
        if self.0.receiver_count() == 0 {
            return;
        }
        if let (Some(kind), Some(id)) = (a.kind, a.id) {
            let _ = self.0.send(Item::Stored {
                kind: kind.to_string(),
                id,
                session_id: ev.session_id.clone(),
                project: ev.project.name.clone(),
                timestamp: ev.received_at,
            });
        }
        let status = match ev.event {
            Event::SessionStart => "started",
            Event::SessionEnd => "ended",
            _ => return,
        };
        let _ = self.0.send(Item::Session {
            session_id: ev.session_id.clone(),
            project: ev.project.name.clone(),
            status,
        });
    }

    pub fn failed(&self, class: &'static str, message: &str) {
        if self.0.receiver_count() > 0 {
            let _ = self.0.send(Item::Failed {
                class,
                message: message.to_string(),
            });
        }
    }
}
