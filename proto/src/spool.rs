//! The spool: one file per event that could not be handed to the daemon.
//!
//! A file is `<received_at_ms, 13 digits>-<event_id>.event`, written under a temporary name and
//! renamed, so a reader never sees half a file. Its first line is a small JSON header
//! ([`Header`]); the raw hook payload follows, byte for byte. Names sort oldest first.
//! The daemon deletes a file only after its event is committed; a replay is harmless because the
//! event id is unique in the database.

use serde::{Deserialize, Serialize};
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

pub const EXTENSION: &str = "event";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Header {
    pub v: u32,
    pub event_id: String,
    pub received_at: i64,
    pub harness: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub header: Header,
    pub payload: Vec<u8>,
}

/// Write one event to the spool folder (created owner-only if missing). Returns the final path.
pub fn write(dir: &Path, header: &Header, payload: &[u8]) -> io::Result<PathBuf> {
    let name = file_name(header.received_at, &header.event_id);
    let tmp = dir.join(format!(".{name}.tmp"));
    let dst = dir.join(&name);
    let mut f = match open_new(&tmp) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            crate::paths::ensure_private_dir(dir)?;
            open_new(&tmp)?
        }
        Err(e) => return Err(e),
    };
    let mut head = serde_json::to_vec(header).map_err(io::Error::other)?;
    head.push(b'\n');
    let res = f.write_all(&head).and_then(|_| f.write_all(payload));
    drop(f);
    if let Err(e) = res.and_then(|_| fs::rename(&tmp, &dst)) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(dst)
}

fn open_new(path: &Path) -> io::Result<fs::File> {
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

pub fn file_name(received_at: i64, event_id: &str) -> String {
    format!("{:013}-{event_id}.{EXTENSION}", received_at.max(0))
}

/// Why a spool file could not be read.
#[derive(Debug)]
pub enum ReadError {
    Io(io::Error),
    Corrupt(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::Corrupt(why) => write!(f, "corrupt spool file: {why}"),
        }
    }
}

pub fn read(path: &Path) -> Result<Entry, ReadError> {
    let bytes = fs::read(path).map_err(ReadError::Io)?;
    let nl = bytes
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| ReadError::Corrupt("no header line".into()))?;
    let header: Header = serde_json::from_slice(&bytes[..nl])
        .map_err(|e| ReadError::Corrupt(format!("bad header: {e}")))?;
    if header.v != 1 {
        return Err(ReadError::Corrupt(format!(
            "unknown spool version {}",
            header.v
        )));
    }
    Ok(Entry {
        header,
        payload: bytes[nl + 1..].to_vec(),
    })
}

/// The spooled events, oldest first, with their sizes.
pub fn list(dir: &Path) -> io::Result<Vec<(PathBuf, u64)>> {
    let mut out = Vec::new();
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for ent in rd {
        let ent = ent?;
        let name = ent.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with('.') || !name.ends_with(EXTENSION) {
            continue;
        }
        let len = ent.metadata().map(|m| m.len()).unwrap_or(0);
        out.push((ent.path(), len));
    }
    out.sort();
    Ok(out)
}

/// The receive time encoded in a spool file's name.
pub fn received_at_of(path: &Path) -> Option<i64> {
    path.file_name()?.to_str()?.split('-').next()?.parse().ok()
}

/// Keep the spool within its bounds: the oldest files go first, each logged to `dropped_log`.
/// Returns how many files were dropped.
pub fn enforce_bounds(
    dir: &Path,
    max_bytes: u64,
    max_age_ms: i64,
    now_ms: i64,
    dropped_log: &Path,
) -> io::Result<u64> {
    let files = list(dir)?;
    let mut total: u64 = files.iter().map(|(_, n)| n).sum();
    let mut dropped = 0;
    for (path, len) in files {
        let too_old = received_at_of(&path).is_some_and(|t| now_ms - t > max_age_ms);
        if !too_old && total <= max_bytes {
            break;
        }
        if fs::remove_file(&path).is_ok() {
            total -= len;
            dropped += 1;
            let why = if too_old {
                "older than the spool's age bound"
            } else {
                "spool over its size bound"
            };
            log_dropped(dropped_log, &path.display().to_string(), len, why);
        }
    }
    Ok(dropped)
}

/// Append one line to the dropped-events log (best effort: it is only a counter for status).
pub fn log_dropped(log: &Path, what: &str, bytes: u64, why: &str) {
    if let Ok(mut f) = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(log)
    {
        let _ = writeln!(f, "{}\t{what}\t{bytes}\t{why}", crate::now_ms());
    }
}

/// How many events were dropped so far (lines of the dropped log).
pub fn dropped_count(log: &Path) -> u64 {
    fs::read(log)
        .map(|b| b.iter().filter(|&&c| c == b'\n').count() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_order() {
        let dir = std::env::temp_dir().join(format!("nmem-spool-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let h = |t: i64, id: &str| Header {
            v: 1,
            event_id: id.into(),
            received_at: t,
            harness: "claude-code".into(),
        };
        write(&dir, &h(2000, "b"), b"{\"x\":2}").unwrap();
        write(&dir, &h(1000, "a"), b"{\"x\":1}\n").unwrap();
        let files = list(&dir).unwrap();
        assert_eq!(files.len(), 2);
        let first = read(&files[0].0).unwrap();
        assert_eq!(first.header, h(1000, "a"));
        assert_eq!(first.payload, b"{\"x\":1}\n");
        assert_eq!(received_at_of(&files[1].0), Some(2000));
        let log = dir.join("dropped.log");
        assert_eq!(enforce_bounds(&dir, 1 << 20, 1500, 3000, &log).unwrap(), 1);
        assert_eq!(dropped_count(&log), 1);
        assert_eq!(list(&dir).unwrap().len(), 1);
        fs::remove_dir_all(&dir).unwrap();
    }
}
