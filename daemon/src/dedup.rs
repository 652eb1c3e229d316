//! Dedup of repeated reads and searches, in the writer's memory (never by querying).
//!
//! A `file_read` or `search` of the same target in the same session within the window is
//! counted, not stored again. Writes, edits, errors, prompts and memories are never deduplicated.
//! The window runs from the last stored occurrence. The key never uses redacted text
//! ([`target_hash`]).
//!
//! Echoes are the other repeat: an event without an id of its own (a prompt, a Stop, a
//! SubagentStop) delivered twice because the same hook is wired twice. Same session, same event,
//! identical content, received within [`ECHO_WINDOW_MS`]: stored once. A prompt typed again later
//! is stored again (prompts are otherwise never deduplicated).

use crate::ingest::Obs;
use std::collections::HashMap;

pub type Key = (String, &'static str, String);

/// The marker type of echo keys (never an observation type).
const ECHO: &str = "echo";
/// Two deliveries of one id-less event closer than this are one event.
pub const ECHO_WINDOW_MS: i64 = 2_000;

pub struct Dedup {
    window_ms: i64,
    seen: HashMap<Key, i64>,
}

/// What a read or search is of (its path, else its content), hashed: the cache holds no text,
/// and ingest computes it from the unredacted call (`Obs::dedup_target`), so two paths that
/// differ only in a redacted segment stay two targets.
pub fn target_hash(o: &Obs) -> String {
    let target = o.file_path.as_deref().unwrap_or(&o.content);
    crate::sha256_hex(target.as_bytes())
}

impl Dedup {
    pub fn new(window_secs: u64) -> Dedup {
        Dedup {
            window_ms: window_secs as i64 * 1000,
            seen: HashMap::new(),
        }
    }

    /// The dedup key of an observation, or `None` for types that are never deduplicated.
    pub fn key_for(session_id: &str, o: &Obs) -> Option<Key> {
        // Re-reads and re-searches (the vocabulary's `deduplicated` column); never actions
        // whose repeat means something (a command run twice ran twice).
        let dedups = nmem_proto::obs::ObsType::from_name(o.obs_type)
            .is_some_and(nmem_proto::obs::ObsType::deduplicated);
        if !dedups {
            return None;
        }
        let target = o.dedup_target.clone().unwrap_or_else(|| target_hash(o));
        Some((session_id.to_string(), o.obs_type, target))
    }

    /// The echo key of an id-less event: its session, a marker type, and the event name with a
    /// hash of its content (the content itself could be long).
    pub fn echo_key(session_id: &str, event_name: &str, content: &str) -> Key {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        content.hash(&mut h);
        (
            session_id.to_string(),
            ECHO,
            format!("{event_name}:{:016x}", h.finish()),
        )
    }

    /// Is this a repeat of what is remembered, or of what the current batch already staged?
    pub fn is_repeat(&self, key: &Key, t: i64, staged: &[(Key, i64)]) -> bool {
        let window = if key.1 == ECHO {
            ECHO_WINDOW_MS
        } else {
            self.window_ms
        };
        let near = |last: i64| (t - last).abs() < window;
        window > 0
            && (self.seen.get(key).is_some_and(|&last| near(last))
                || staged.iter().any(|(k, last)| k == key && near(*last)))
    }

    pub fn remember(&mut self, key: Key, t: i64) {
        if self.seen.len() >= 100_000 {
            let newest = self.seen.values().copied().max().unwrap_or(t).max(t);
            let window = self.window_ms;
            self.seen.retain(|_, last| newest - *last < window);
        }
        self.seen.insert(key, t);
    }
}
