//! The spool: where events wait that could not be handed to the daemon.
//!
//! **The log** (`spool/events.log`, what `nmem record` writes): records appended to one file,
//! so spooling an event allocates no inode (one new file per event made the spooling hook cost
//! whatever ext4's inode allocator cost on that folder: 1.7-2.4× `/bin/true` on a `/tmp` full of
//! recently deleted inodes, 1.1× elsewhere). A record is framed so a reader can tell a whole
//! record from a torn or garbled one and go on past it:
//!
//! ```text
//! \x1e nmem-spool-1 <body length, decimal> <CRC-32 of the body, 8 hex digits> \n
//! <body: the JSON header line (Header) \n the raw payload> \n
//! ```
//!
//! (no spaces around `\x1e`). The record separator byte 0x1E never occurs in a header or in a
//! payload (both are JSON, which has no raw control characters but whitespace), so after a bad
//! stretch the reader resynchronises on the next `\x1e nmem-spool-1 ` ([`scan`]); the length
//! and checksum decide whether a frame is whole.
//!
//! Appending ([`append`]): the whole framed record in one `write(2)`, under an exclusive
//! `flock`, to the log opened `O_WRONLY|O_APPEND|O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC` and judged by
//! `fstat` on the descriptor: a regular file of this user, one link, no group or other bits.
//! Anything else (a symlink, FIFO, device, someone else's file, a hard link) is not written to,
//! and [`store`] falls back to one file per event, so a hostile log cannot lose an event. A
//! short write is cut back (`ftruncate` to the size under the lock). The folder checks of
//! [`write`] run when the log has to be created (the first event after a drain, or ever); an
//! existing log is judged by its descriptor alone, which is what keeps events private whatever
//! the folder: the bytes only ever go into a file that is this user's alone.
//!
//! Draining (the daemon, `daemon/src/spool.rs`): [`seal`] renames the log aside
//! (`draining-<ms>.log`), takes the lock on it once (waiting out an append in progress) and
//! makes it read-only (mode 0400): the seal. A hook that opened the old name before the rename
//! and gets the lock after it finds the seal (or no link left) on `fstat` and reopens
//! `events.log`. The daemon deletes a sealed log only once every record in it is committed,
//! found stored, spilled to a file or quarantined; after a crash it is read again (harmless:
//! the event id is unique in the database).
//!
//! **Files** (`<received_at_ms, 13 digits>-<event_id>.event`): what older hooks wrote, and
//! what [`write`] still writes when the log cannot be used. Written under a temporary name and
//! renamed, so a reader never sees half a file. The first line is the JSON header ([`Header`]);
//! the raw hook payload follows, byte for byte. Names sort oldest first. The daemon drains files
//! and log records together, in receive order.
//!
//! The folder is not trusted blindly: [`read`] and [`open_checked`] open an entry with
//! `O_NOFOLLOW|O_NONBLOCK` and accept only a regular file of this user, so a symlink to
//! `/dev/zero`, a FIFO, a device or a huge file is refused at once ([`ReadError::Unsafe`]), for
//! the daemon to quarantine, instead of being read without end or blocking the drain.

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
    check_dirs(dir)?;
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

/// A spool folder, or the state folder holding it, that someone else owns or can write to is
/// not used (they could read or swap the raw events): created owner-only if missing, else
/// checked. Two stats, on the slow path only: the hook's fast path never gets here.
fn check_dirs(dir: &Path) -> io::Result<()> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        crate::paths::ensure_private_dir(parent)?;
    }
    crate::paths::ensure_private_dir(dir)
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

/// The log hooks append to.
pub const LOG_NAME: &str = "events.log";
/// A log the daemon renamed aside to drain: `draining-<ms, 13 digits>.log`.
pub const DRAINING_PREFIX: &str = "draining-";
const LOG_SUFFIX: &str = ".log";
/// What starts every record of the log: the record separator, then the format's name.
const MAGIC: &[u8] = b"\x1enmem-spool-1 ";
/// The longest frame line: the magic, 20 digits, a space, 8 hex digits, the newline.
const LINE_MAX: usize = MAGIC.len() + 20 + 1 + 8 + 1;
/// How long a hook waits for the log's lock before writing a file instead (an append holds it
/// for one `write`; only a process stopped while holding it makes anyone wait).
const HOOK_LOCK_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// Spool one event: appended to the log, or, if the log cannot be used (hostile, locked for
/// too long, sealed at each of three tries, a write error), written as a file of its own.
pub fn store(dir: &Path, header: &Header, payload: &[u8]) -> io::Result<()> {
    match append(dir, &frame(header, payload)?) {
        Ok(()) => Ok(()),
        Err(_) => write(dir, header, payload).map(|_| ()),
    }
}

/// One record of the log, framed (see the module's documentation).
pub fn frame(header: &Header, payload: &[u8]) -> io::Result<Vec<u8>> {
    let head = serde_json::to_vec(header).map_err(io::Error::other)?;
    let body_len = head.len() + 1 + payload.len();
    let crc = Crc::new()
        .update(&head)
        .update(b"\n")
        .update(payload)
        .finish();
    let mut rec = Vec::with_capacity(LINE_MAX + body_len + 1);
    rec.extend_from_slice(MAGIC);
    rec.extend_from_slice(format!("{body_len} {crc:08x}\n").as_bytes());
    rec.extend_from_slice(&head);
    rec.push(b'\n');
    rec.extend_from_slice(payload);
    rec.push(b'\n');
    Ok(rec)
}

/// Append one framed record to the log in `dir` (see the module's documentation). An error
/// means nothing was added: the caller writes the event elsewhere.
pub fn append(dir: &Path, record: &[u8]) -> io::Result<()> {
    let path = dir.join(LOG_NAME);
    for _ in 0..3 {
        let file = match open_log(&path, false) {
            Ok(f) => f,
            // No log yet (or the folder is missing): the folders are checked (and made) before
            // a log is created in them.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                check_dirs(dir)?;
                open_log(&path, true)?
            }
            Err(e) => return Err(e),
        };
        lock(&file, HOOK_LOCK_WAIT)?;
        let meta = file.metadata()?;
        let me = unsafe { libc::geteuid() };
        if !meta.is_file() || meta.uid() != me || meta.mode() & 0o077 != 0 || meta.nlink() > 1 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} is not a private regular file of this user (mode {:o}, uid {}, {} links)",
                    path.display(),
                    meta.mode(),
                    meta.uid(),
                    meta.nlink()
                ),
            ));
        }
        if meta.mode() & 0o200 == 0 || meta.nlink() == 0 {
            // Sealed for draining (or drained and deleted) since it was opened: the new log.
            continue;
        }
        match (&file).write(record) {
            Ok(n) if n == record.len() => return Ok(()),
            other => {
                // Nothing half-written stays: the log ended at `meta.len()` under the lock.
                let _ = file.set_len(meta.len());
                return Err(match other {
                    Err(e) => e,
                    Ok(n) => io::Error::other(format!("short write ({n} of {})", record.len())),
                });
            }
        }
    }
    Err(io::Error::other(
        "the spool log was sealed for draining at each try",
    ))
}

fn open_log(path: &Path, create: bool) -> io::Result<fs::File> {
    fs::OpenOptions::new()
        .append(true)
        .create(create)
        .mode(0o600)
        .custom_flags(crate::paths::NOFOLLOW_FLAGS)
        .open(path)
}

/// Take the exclusive `flock` on `file`, waiting at most `wait` (polling: a blocking `flock`
/// could wait forever on a stopped holder). Released when the file is closed.
pub fn lock(file: &fs::File, wait: std::time::Duration) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let start = std::time::Instant::now();
    let mut pause = std::time::Duration::from_micros(50);
    loop {
        // SAFETY: flock on a descriptor this function borrows.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) && e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
        if start.elapsed() >= wait {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "the spool log stayed locked",
            ));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(5));
    }
}

/// The logs in `dir`, oldest first: the sealed ones (`draining-*.log`), then `events.log` if
/// there is one (whatever it is: judging it is the reader's part).
pub fn logs(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    let mut live = None;
    for ent in rd {
        let ent = ent?;
        let name = ent.file_name();
        let Some(name) = name.to_str() else { continue };
        if name == LOG_NAME {
            live = Some(ent.path());
        } else if name.starts_with(DRAINING_PREFIX) && name.ends_with(LOG_SUFFIX) {
            out.push(ent.path());
        }
    }
    out.sort();
    out.extend(live);
    Ok(out)
}

/// Rename the log aside for draining and seal it: the new name (`draining-<now_ms>.log`), or
/// `None` when there is no log. The seal itself is [`seal`]'s.
pub fn rename_aside(dir: &Path, now_ms: i64) -> io::Result<Option<PathBuf>> {
    let from = dir.join(LOG_NAME);
    if let Err(e) = fs::symlink_metadata(&from) {
        return if e.kind() == io::ErrorKind::NotFound {
            Ok(None)
        } else {
            Err(e)
        };
    }
    let mut t = now_ms.max(0);
    let to = loop {
        let to = dir.join(format!("{DRAINING_PREFIX}{t:013}{LOG_SUFFIX}"));
        if fs::symlink_metadata(&to).is_err() {
            break to;
        }
        t += 1;
    };
    match fs::rename(&from, &to) {
        Ok(()) => Ok(Some(to)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Open a log renamed aside and seal it: judged like any spool entry ([`open_checked`]), then
/// its lock taken once (waiting out an append in progress, at most `wait`) and its mode made
/// 0400, so an appender that locks it later reopens `events.log`. From then on nothing is
/// appended to it. A log found sealed already (an earlier pass or a crash) is sealed again.
pub fn seal(path: &Path, wait: std::time::Duration) -> Result<fs::File, ReadError> {
    use std::os::unix::fs::PermissionsExt;
    let (file, _) = open_checked(path)?;
    lock(&file, wait).map_err(ReadError::Io)?;
    file.set_permissions(fs::Permissions::from_mode(0o400))
        .map_err(ReadError::Io)?;
    // SAFETY: flock on a descriptor we own; the file stays open for reading.
    unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&file), libc::LOCK_UN) };
    Ok(file)
}

/// Something a log can be read from at an offset: an open file, or bytes (for tests).
pub trait ReadAt {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
}

impl ReadAt for fs::File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(self, buf, offset)
    }
}

impl ReadAt for [u8] {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let start = (offset.min(self.len() as u64)) as usize;
        let n = buf.len().min(self.len() - start);
        buf[..n].copy_from_slice(&self[start..start + n]);
        Ok(n)
    }
}

/// Read as much of `buf` as there is at `offset` (less only at the end of the data).
fn read_full_at<R: ReadAt + ?Sized>(r: &R, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// What [`scan`] finds in a log, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A whole record: its body (the header line and the payload) is `body_len` bytes at
    /// `body_at`; the frame spans `offset..end`. With `verify`, its checksum matched and
    /// `header` is its header line, parsed (`None` when that line is not a valid header).
    Record {
        offset: u64,
        body_at: u64,
        body_len: u64,
        end: u64,
        header: Option<Header>,
    },
    /// Bytes `offset..end` that hold no whole record: garbled, or a torn tail (a hook killed
    /// mid-write, a disk that filled up).
    Garbled { offset: u64, end: u64 },
}

impl Frame {
    pub fn span(&self) -> (u64, u64) {
        match *self {
            Frame::Record { offset, end, .. } | Frame::Garbled { offset, end } => (offset, end),
        }
    }
}

/// Walk a log of `size` bytes frame by frame. Without `verify` only the frame lines are read
/// (lengths, no checksum, no body: for counting); with it each body is read and checked, and its
/// header parsed. A body over `max_body` bytes counts as garbled. After a bad stretch the walk
/// goes on at the next frame line, so one bad record never hides the ones after it. Any bytes
/// give frames, never a panic nor an endless loop.
pub fn scan<R: ReadAt + ?Sized>(
    r: &R,
    size: u64,
    verify: bool,
    max_body: u64,
) -> io::Result<Vec<Frame>> {
    let mut frames = Vec::new();
    let mut off = 0u64;
    let mut garbled_from = None;
    while off < size {
        match frame_at(r, off, size, verify, max_body)? {
            Some(frame) => {
                if let Some(g) = garbled_from.take() {
                    frames.push(Frame::Garbled {
                        offset: g,
                        end: off,
                    });
                }
                off = frame.span().1;
                frames.push(frame);
            }
            None => {
                garbled_from.get_or_insert(off);
                off = find_magic(r, off + 1, size)?;
            }
        }
    }
    if let Some(g) = garbled_from {
        frames.push(Frame::Garbled {
            offset: g,
            end: size,
        });
    }
    Ok(frames)
}

/// The frame starting at `off`, if a whole one does.
fn frame_at<R: ReadAt + ?Sized>(
    r: &R,
    off: u64,
    size: u64,
    verify: bool,
    max_body: u64,
) -> io::Result<Option<Frame>> {
    let mut line = [0u8; LINE_MAX];
    let n = read_full_at(r, &mut line, off)?;
    let Some((line_len, body_len, crc)) = parse_frame_line(&line[..n]) else {
        return Ok(None);
    };
    let body_at = off + line_len as u64;
    let Some(end) = body_at.checked_add(body_len).and_then(|e| e.checked_add(1)) else {
        return Ok(None);
    };
    if end > size || body_len > max_body {
        return Ok(None);
    }
    let mut header = None;
    if verify {
        let mut body = vec![0u8; body_len as usize + 1];
        if read_full_at(r, &mut body, body_at)? != body.len() || body[body_len as usize] != b'\n' {
            return Ok(None);
        }
        let body = &body[..body_len as usize];
        if Crc::new().update(body).finish() != crc {
            return Ok(None);
        }
        header = parse(body).ok().map(|e| e.header);
    }
    Ok(Some(Frame::Record {
        offset: off,
        body_at,
        body_len,
        end,
        header,
    }))
}

/// `\x1enmem-spool-1 <len> <crc>\n` at the start of `buf`: (the line's length, len, crc).
fn parse_frame_line(buf: &[u8]) -> Option<(usize, u64, u32)> {
    let rest = buf.strip_prefix(MAGIC)?;
    let nl = rest.iter().position(|&b| b == b'\n')?;
    let (len, crc) = std::str::from_utf8(&rest[..nl]).ok()?.split_once(' ')?;
    if len.is_empty() || !len.bytes().all(|b| b.is_ascii_digit()) || crc.len() != 8 {
        return None;
    }
    let crc = u32::from_str_radix(crc, 16).ok()?;
    Some((MAGIC.len() + nl + 1, len.parse().ok()?, crc))
}

/// The offset of the next frame line at or after `from` (`size` if none).
fn find_magic<R: ReadAt + ?Sized>(r: &R, from: u64, size: u64) -> io::Result<u64> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut at = from;
    while at < size {
        let n = read_full_at(r, &mut buf, at)?;
        if n == 0 {
            break;
        }
        if let Some(i) = buf[..n].windows(MAGIC.len()).position(|w| w == MAGIC) {
            return Ok(at + i as u64);
        }
        if n < MAGIC.len() {
            break;
        }
        // The next window overlaps this one by less than the magic, so none is missed.
        at += (n - MAGIC.len() + 1) as u64;
    }
    Ok(size)
}

/// A record's body (header line and payload), read at its place in the log and checked again.
pub fn read_record<R: ReadAt + ?Sized>(r: &R, frame: &Frame) -> Result<Entry, ReadError> {
    let Frame::Record {
        body_at, body_len, ..
    } = *frame
    else {
        return Err(ReadError::Corrupt("not a whole record".into()));
    };
    let mut body = vec![0u8; body_len as usize];
    if read_full_at(r, &mut body, body_at).map_err(ReadError::Io)? != body.len() {
        return Err(ReadError::Corrupt("the log ends inside the record".into()));
    }
    parse(&body)
}

/// The bytes `from..to` of a log, at most `cap` of them (what is quarantined of a bad stretch).
pub fn read_span<R: ReadAt + ?Sized>(r: &R, from: u64, to: u64, cap: u64) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; to.saturating_sub(from).min(cap) as usize];
    let n = read_full_at(r, &mut buf, from)?;
    buf.truncate(n);
    Ok(buf)
}

/// What waits in the spool: events (files and log records), their bytes, the oldest receive
/// time. Logs are walked by their frames' lengths (no checksum, no payload read); a log that is
/// not a regular file of this user counts nothing (the daemon quarantines it).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Backlog {
    pub events: u64,
    pub bytes: u64,
    pub oldest: Option<i64>,
}

pub fn backlog(dir: &Path) -> Backlog {
    let mut b = Backlog::default();
    let files = list(dir).unwrap_or_default();
    b.events = files.len() as u64;
    b.bytes = files.iter().map(|(_, n)| n).sum();
    b.oldest = files.first().and_then(|(p, _)| received_at_of(p));
    for log in logs(dir).unwrap_or_default() {
        let Ok((file, meta)) = open_checked(&log) else {
            continue;
        };
        let Ok(frames) = scan(&file, meta.len(), false, u64::MAX) else {
            continue;
        };
        let mut first = true;
        for f in &frames {
            if let Frame::Record {
                offset,
                body_at,
                body_len,
                end,
                ..
            } = *f
            {
                b.events += 1;
                b.bytes += end - offset;
                if first {
                    first = false;
                    // The first record's header line only (a log is appended in time order).
                    let mut head = vec![0u8; body_len.min(4096) as usize];
                    if let Ok(n) = read_full_at(&file, &mut head, body_at) {
                        if let Some(h) = head[..n]
                            .iter()
                            .position(|&c| c == b'\n')
                            .and_then(|nl| serde_json::from_slice::<Header>(&head[..nl]).ok())
                        {
                            b.oldest =
                                Some(b.oldest.map_or(h.received_at, |o| o.min(h.received_at)));
                        }
                    }
                }
            }
        }
    }
    b
}

/// CRC-32 (IEEE 802.3, as zlib's), table-driven: the log's checksum.
#[derive(Clone, Copy)]
pub struct Crc(u32);

const CRC_TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

impl Crc {
    pub fn new() -> Crc {
        Crc(!0)
    }
    pub fn update(mut self, bytes: &[u8]) -> Crc {
        for &b in bytes {
            self.0 = CRC_TABLE[((self.0 ^ b as u32) & 0xff) as usize] ^ (self.0 >> 8);
        }
        self
    }
    pub fn finish(self) -> u32 {
        !self.0
    }
}

impl Default for Crc {
    fn default() -> Self {
        Crc::new()
    }
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
    let (file, meta) = open_checked(path)?;
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

/// Open a spool entry (a file or a log) for reading, if it is safe to read: opened without
/// following a symlink and without waiting on a FIFO, then judged by `fstat` on the descriptor
/// (a regular file of this user). Anything else is [`ReadError::Unsafe`], never read.
pub fn open_checked(path: &Path) -> Result<(fs::File, fs::Metadata), ReadError> {
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
    Ok((file, meta))
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

/// Keep the spool within its bounds: of its entries, oldest first, each `(receive time if
/// known, bytes)`, the oldest go while they are older than `max_age_ms` or the whole is over
/// `max_bytes`. Returns why, for each entry of that leading run to drop (log each with
/// [`log_dropped`]).
pub fn over_bounds(
    entries: &[(Option<i64>, u64)],
    max_bytes: u64,
    max_age_ms: i64,
    now_ms: i64,
) -> Vec<&'static str> {
    let mut total: u64 = entries.iter().map(|(_, n)| n).sum();
    let mut out = Vec::new();
    for &(received_at, len) in entries {
        let too_old = received_at.is_some_and(|t| now_ms - t > max_age_ms);
        if !too_old && total <= max_bytes {
            break;
        }
        total -= len;
        out.push(if too_old {
            "older than the spool's age bound"
        } else {
            "spool over its size bound"
        });
    }
    out
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
        let entries: Vec<_> = files.iter().map(|(p, n)| (received_at_of(p), *n)).collect();
        assert_eq!(
            over_bounds(&entries, 1 << 20, 1500, 3000).len(),
            1,
            "too old"
        );
        assert_eq!(over_bounds(&entries, 1 << 20, 5000, 3000).len(), 0);
        assert_eq!(
            over_bounds(&entries, files[1].1, 5000, 3000).len(),
            1,
            "too big"
        );
        assert_eq!(over_bounds(&entries, 0, 5000, 3000).len(), 2);
        let log = dir.join("dropped.log");
        log_dropped(&log, "x", 1, "why");
        assert_eq!(dropped_count(&log), 1);
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

    fn header(t: i64, id: &str) -> Header {
        Header {
            v: 1,
            event_id: id.into(),
            received_at: t,
            harness: "claude-code".into(),
        }
    }

    /// The records `scan` verified in `bytes`: (event id, payload), in order.
    fn records_in(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
        scan(bytes, bytes.len() as u64, true, u64::MAX)
            .unwrap()
            .iter()
            .filter(|f| matches!(f, Frame::Record { .. }))
            .map(|f| {
                let e = read_record(bytes, f).unwrap();
                (e.header.event_id, e.payload)
            })
            .collect()
    }

    #[test]
    fn the_checksum_is_crc32() {
        assert_eq!(Crc::new().update(b"123456789").finish(), 0xCBF4_3926);
        assert_eq!(
            Crc::new().update(b"1234").update(b"56789").finish(),
            0xCBF4_3926
        );
    }

    #[test]
    fn events_are_appended_to_one_log_and_read_back_in_order() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("spool");
        store(&dir, &header(1, "a"), b"{\"x\":1}").unwrap();
        store(&dir, &header(2, "b"), b"{\"x\":\n2}").unwrap();
        store(&dir, &header(3, "c"), b"").unwrap();
        assert_eq!(list(&dir).unwrap().len(), 0, "no file per event");
        let log = dir.join(LOG_NAME);
        let meta = fs::metadata(&log).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        let bytes = fs::read(&log).unwrap();
        assert_eq!(
            records_in(&bytes),
            vec![
                ("a".into(), b"{\"x\":1}".to_vec()),
                ("b".into(), b"{\"x\":\n2}".to_vec()),
                ("c".into(), vec![]),
            ]
        );
        let b = backlog(&dir);
        assert_eq!(
            (b.events, b.bytes, b.oldest),
            (3, bytes.len() as u64, Some(1))
        );
    }

    #[test]
    fn a_torn_or_garbled_record_loses_only_itself() {
        let r = |t, id: &str| frame(&header(t, id), b"{\"p\":\"payload\"}").unwrap();
        let mut log = r(1, "a");
        log.extend_from_slice(b"garbage that is no frame\n");
        let mut flipped = r(2, "flipped");
        let n = flipped.len();
        flipped[n - 4] ^= 0x20; // a bit flipped in the payload: the checksum fails
        log.extend_from_slice(&flipped);
        let torn_mid = r(3, "torn");
        log.extend_from_slice(&torn_mid[..torn_mid.len() / 2]); // a hook killed mid-write
        log.extend_from_slice(&r(4, "b"));
        let tail = r(5, "tail");
        log.extend_from_slice(&tail[..tail.len() - 1]); // torn at the very end
        assert_eq!(
            records_in(&log)
                .into_iter()
                .map(|(id, _)| id)
                .collect::<Vec<_>>(),
            vec!["a", "b"]
        );
        let frames = scan(&log[..], log.len() as u64, true, u64::MAX).unwrap();
        let kinds: Vec<bool> = frames
            .iter()
            .map(|f| matches!(f, Frame::Record { .. }))
            .collect();
        assert_eq!(kinds, vec![true, false, true, false]);
        // Without verification the flipped record's frame is still counted (lengths only).
        let counted = scan(&log[..], log.len() as u64, false, u64::MAX).unwrap();
        assert_eq!(
            counted
                .iter()
                .filter(|f| matches!(f, Frame::Record { .. }))
                .count(),
            3
        );
    }

    #[test]
    fn a_sealed_log_gets_no_more_records() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("spool");
        store(&dir, &header(1, "a"), b"{}").unwrap();
        let aside = rename_aside(&dir, 1234).unwrap().unwrap();
        assert!(aside.ends_with("draining-0000000001234.log"));
        let sealed = seal(&aside, std::time::Duration::from_secs(1)).unwrap();
        assert_eq!(sealed.metadata().unwrap().mode() & 0o777, 0o400);
        let before = fs::read(&aside).unwrap();
        store(&dir, &header(2, "b"), b"{}").unwrap();
        assert_eq!(
            fs::read(&aside).unwrap(),
            before,
            "the sealed log is unchanged"
        );
        assert_eq!(logs(&dir).unwrap(), vec![aside.clone(), dir.join(LOG_NAME)]);
        assert_eq!(backlog(&dir).events, 2);
        assert_eq!(
            rename_aside(&dir, 1234).unwrap().unwrap(),
            dir.join("draining-0000000001235.log")
        );
        assert_eq!(rename_aside(&dir, 1234).unwrap(), None);
    }

    #[test]
    fn a_hostile_log_is_never_written_and_the_event_goes_to_a_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("spool");
        fs::create_dir_all(&dir).unwrap();
        let log = dir.join(LOG_NAME);
        let check = |what: &str| {
            let before = list(&dir).unwrap().len();
            store(&dir, &header(1, what), b"{}").unwrap();
            assert_eq!(
                list(&dir).unwrap().len(),
                before + 1,
                "{what}: a file instead"
            );
        };
        std::os::unix::fs::symlink("/dev/zero", &log).unwrap();
        check("symlink");
        fs::remove_file(&log).unwrap();
        let c = std::ffi::CString::new(log.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        check("fifo"); // no reader: the open fails at once instead of waiting
        fs::remove_file(&log).unwrap();
        let other = tmp.path().join("someone-elses-file");
        fs::write(&other, b"precious").unwrap();
        fs::hard_link(&other, &log).unwrap();
        check("hardlink");
        assert_eq!(fs::read(&other).unwrap(), b"precious");
        fs::remove_file(&log).unwrap();
        fs::write(&log, b"").unwrap();
        fs::set_permissions(&log, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
        check("readable by others");
        assert_eq!(fs::read(&log).unwrap(), b"");
        assert!(matches!(
            open_checked(&dir.join("nope")),
            Err(ReadError::Io(_))
        ));
    }

    proptest::proptest! {
        #[test]
        fn scanning_arbitrary_bytes_never_panics_and_covers_them(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..600),
            magic_at in proptest::collection::vec(0usize..600, 0..4),
        ) {
            let mut bytes = bytes;
            for at in magic_at {
                // Frame lines at random places, with random lengths after them.
                let at = at.min(bytes.len());
                bytes.splice(at..at, MAGIC.iter().copied().chain(b"12 0000abcd\n".iter().copied()));
            }
            for verify in [false, true] {
                let frames = scan(&bytes[..], bytes.len() as u64, verify, 1 << 20).unwrap();
                let mut at = 0;
                for f in &frames {
                    let (start, end) = f.span();
                    proptest::prop_assert_eq!(start, at);
                    proptest::prop_assert!(end > start);
                    at = end;
                    let _ = read_record(&bytes[..], f);
                }
                proptest::prop_assert_eq!(at, bytes.len() as u64);
            }
        }

        #[test]
        fn garbage_between_records_loses_no_record(
            events in proptest::collection::vec(("[a-z0-9]{1,12}", "\\PC{0,40}", proptest::collection::vec(1u8..0x1e, 0..40)), 1..8),
        ) {
            let mut log = Vec::new();
            let mut want = Vec::new();
            for (i, (id, text, garbage)) in events.iter().enumerate() {
                let payload = serde_json::to_vec(&serde_json::json!({ "t": text })).unwrap();
                log.extend_from_slice(&frame(&header(i as i64, id), &payload).unwrap());
                log.extend_from_slice(garbage);
                want.push((id.clone(), payload));
            }
            proptest::prop_assert_eq!(records_in(&log), want);
        }
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
