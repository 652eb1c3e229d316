//! The spool: one file per event that could not be handed to the daemon.
//!
//! A file is `<received_at_ms, 13 digits>-<event_id>.event`, written under a temporary name and
//! renamed, so a reader never sees half a file. Its first line is a small JSON header
//! ([`Header`]); the raw hook payload follows, byte for byte. Names sort oldest first.
//! The daemon deletes a file only after its event is committed; a replay is harmless because the
//! event id is unique in the database.
//!
//! The folder is not trusted blindly: [`read`] opens an entry with `O_NOFOLLOW|O_NONBLOCK` and
//! accepts only a regular file of this user within a size bound, so a symlink to `/dev/zero`, a
//! FIFO, a device or a huge file is refused at once ([`ReadError::Unsafe`]), for the daemon to
//! quarantine, instead of being read without end or blocking the drain.

use serde::{Deserialize, Serialize};
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
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
    // A spool folder, or the state folder holding it, that someone else owns or can write to is
    // not used (they could read or swap the raw events). Two stats, on the slow path only: the
    // hook's fast path never gets here.
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        crate::paths::ensure_private_dir(parent)?;
    }
    crate::paths::ensure_private_dir(dir)?;
    let mut f = open_new(&tmp)?;
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
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
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
    /// Not something to read: a symlink, FIFO, device or folder, another user's file, or a file
    /// over the size bound.
    Unsafe(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::Corrupt(why) => write!(f, "corrupt spool file: {why}"),
            ReadError::Unsafe(why) => write!(f, "refused spool entry: {why}"),
        }
    }
}

/// Read one spool file of at most `max_bytes`. Never blocks and never reads more than that: the
/// entry is opened without following a symlink and without waiting on a FIFO, then judged by
/// `fstat` on the open descriptor (so it cannot be swapped between check and read).
pub fn read(path: &Path, max_bytes: u64) -> Result<Entry, ReadError> {
    let file = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(crate::paths::NOFOLLOW_FLAGS)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(ReadError::Unsafe("a symbolic link".into()))
        }
        Err(e) => return Err(ReadError::Io(e)),
    };
    let meta = file.metadata().map_err(ReadError::Io)?;
    let me = unsafe { libc::geteuid() };
    if !meta.is_file() {
        return Err(ReadError::Unsafe(format!(
            "not a regular file ({})",
            kind_of(&meta)
        )));
    }
    if meta.uid() != me {
        return Err(ReadError::Unsafe(format!(
            "owned by uid {}, not by this user (uid {me})",
            meta.uid()
        )));
    }
    if meta.len() > max_bytes {
        return Err(ReadError::Unsafe(format!(
            "{} bytes, over the spool's bound of {max_bytes}",
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // The file may still grow after fstat: never read past the bound.
    (&file)
        .take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > max_bytes {
        return Err(ReadError::Unsafe(format!(
            "grew past the spool's bound of {max_bytes} bytes"
        )));
    }
    parse(&bytes)
}

fn kind_of(meta: &fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a folder"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

/// Parse a spool file's bytes: the header line, then the payload. Any bytes give a result or an
/// error, never a panic.
pub fn parse(bytes: &[u8]) -> Result<Entry, ReadError> {
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
        .custom_flags(crate::paths::NOFOLLOW_FLAGS)
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
        // The spool's parent is checked too: not /tmp itself.
        // Removed with everything in it when the test ends, passed or not.
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let dir = root.join("spool");
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
        let first = read(&files[0].0, 1 << 20).unwrap();
        assert_eq!(first.header, h(1000, "a"));
        assert_eq!(first.payload, b"{\"x\":1}\n");
        assert_eq!(received_at_of(&files[1].0), Some(2000));
        let log = dir.join("dropped.log");
        assert_eq!(enforce_bounds(&dir, 1 << 20, 1500, 3000, &log).unwrap(), 1);
        assert_eq!(dropped_count(&log), 1);
        assert_eq!(list(&dir).unwrap().len(), 1);
    }

    #[test]
    fn refuses_what_is_not_a_small_regular_file() {
        // Removed with everything in it when the test ends, passed or not.
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let dir = root.join("spool");
        let header = Header {
            v: 1,
            event_id: "e".into(),
            received_at: 1,
            harness: "claude-code".into(),
        };
        let ok = write(&dir, &header, b"{}").unwrap();
        let unsafe_ = |p: &Path, max| matches!(read(p, max), Err(ReadError::Unsafe(_)));
        assert!(!unsafe_(&ok, 1 << 20));
        assert!(unsafe_(&ok, 4), "over the bound");
        let link = dir.join("0000000000001-zero.event");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(unsafe_(&link, 1 << 20));
        let fifo = dir.join("0000000000002-fifo.event");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(
            unsafe_(&fifo, 1 << 20),
            "a FIFO is refused without blocking"
        );
        fs::create_dir(dir.join("0000000000003-dir.event")).unwrap();
        assert!(unsafe_(&dir.join("0000000000003-dir.event"), 1 << 20));
    }

    proptest::proptest! {
        #[test]
        fn parsing_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let _ = parse(&bytes);
        }

        #[test]
        fn parsing_a_header_like_line_never_panics(head in "\\PC{0,200}", tail in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let mut bytes = head.into_bytes();
            bytes.push(b'\n');
            bytes.extend(tail);
            let _ = parse(&bytes);
        }
    }
}
