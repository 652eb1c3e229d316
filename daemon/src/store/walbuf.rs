//! The write connection's log writes, one system call per commit.
//!
//! SQLite appends a transaction to the write-ahead log frame by frame, each frame as two
//! `pwrite`s (its 24-byte header, then the page): a commit of 16 pages, the size of one
//! ingest batch, is 32 system calls. Measured on the 2-core VM (a C loop writing the same
//! pattern to a file in the page cache): 42-47 µs for the 32 writes, 17-20 µs for the same
//! bytes in one. This VFS (registered as [`NAME`], used by the writer's connection only) is the
//! default one with the log file's appends gathered in memory and written at once when the
//! commit frame is complete, before SQLite publishes the commit in the shared log index. So no
//! other connection can see a frame that is not in the file, and a process killed before the
//! write leaves a transaction without its commit frame: not committed, as if it had died in
//! SQLite's own loop.
//!
//! What is gathered: a frame header written where the last write ended, and a page written
//! right after it. Everything else on the log file (its header, a frame rewritten in place, a
//! read, a sync, the size, a truncation, closing it) first writes out what is gathered, then
//! goes to the default VFS as it came, so the file sees the same bytes in the same order.
//! Files other than the log are the default VFS's own, untouched.

use rusqlite::ffi;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

/// The VFS's name, for `Connection::open_with_flags_and_vfs`.
pub const NAME: &CStr = c"nmem-walbuf";

/// Gathered bytes beyond which they are written even before the commit frame (a transaction
/// of thousands of pages: a full-text catch-up, a maintenance pass).
const MAX_GATHERED: usize = 1 << 20;

/// The most the default VFS writes in one call (its `seekAndWrite` keeps the low 17 bits of
/// the size: a larger write would come out short, as a full disk).
const MAX_WRITE: usize = 0x1ffff;

/// A frame header's size (the page follows it).
const FRAME_HEADER: usize = 24;

#[cfg(test)]
thread_local! {
    /// Writes this thread made to log files through this VFS (gathered or not).
    static WRITES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts a write to the default VFS's log file (in tests).
fn counted() {
    #[cfg(test)]
    WRITES.set(WRITES.get() + 1);
}

/// Registers the VFS (once) and returns its name; `None` when SQLite has no default VFS to
/// wrap (then the default is used, unchanged).
pub fn register() -> Option<&'static CStr> {
    static DONE: OnceLock<bool> = OnceLock::new();
    let ok = *DONE.get_or_init(|| {
        // SAFETY: sqlite3_vfs_find(NULL) returns the default VFS, which lives as long as the
        // process; the copy made here is leaked, so it does too, as SQLite requires of a
        // registered VFS.
        unsafe {
            let real = ffi::sqlite3_vfs_find(std::ptr::null());
            if real.is_null() {
                return false;
            }
            let mut vfs: ffi::sqlite3_vfs = std::ptr::read(real);
            // Room for a log file (the default's file after our header), which also holds any
            // other file (the default's, from the start).
            vfs.szOsFile = (std::mem::size_of::<LogFile>() as c_int)
                .max(std::mem::offset_of!(LogFile, real) as c_int + (*real).szOsFile);
            vfs.zName = NAME.as_ptr();
            vfs.pNext = std::ptr::null_mut();
            vfs.xOpen = Some(open);
            let vfs = Box::leak(Box::new(Vfs { vfs, real }));
            ffi::sqlite3_vfs_register(&mut vfs.vfs, 0) == ffi::SQLITE_OK
        }
    });
    ok.then_some(NAME)
}

/// The registered VFS: a copy of the default one (its methods take either), and the default.
#[repr(C)]
struct Vfs {
    vfs: ffi::sqlite3_vfs,
    real: *mut ffi::sqlite3_vfs,
}

/// A log file opened through this VFS: the methods SQLite calls, what is gathered, and the
/// default VFS's file, opened into the room after it.
#[repr(C)]
struct LogFile {
    base: ffi::sqlite3_file,
    gathered: Gathered,
    real: RealFile,
}

/// Room for the default VFS's file structure (its `szOsFile` bytes start here; the VFS's
/// `szOsFile` covers them).
#[repr(C, align(8))]
struct RealFile {
    base: ffi::sqlite3_file,
}

/// Appends not yet written: `bytes` belong at `start`.
struct Gathered {
    bytes: Vec<u8>,
    start: i64,
    /// Where the last write to the file ended (gathered or not); -1 when unknown.
    end: i64,
    /// The size of a page, read from the log's header (0: not known, nothing is gathered).
    page: usize,
    /// A write of gathered bytes failed from here: every later write beyond it fails too,
    /// until SQLite writes at or before it again (or truncates), so no commit is ever built on
    /// frames that are not in the file.
    lost: Option<i64>,
    /// The last gathered header is a commit frame's: write out once its page is here.
    commit: bool,
    /// The last gathered item is a header whose page has not come yet.
    header_open: bool,
}

impl Gathered {
    fn new() -> Gathered {
        Gathered {
            bytes: Vec::new(),
            start: 0,
            end: -1,
            page: 0,
            lost: None,
            commit: false,
            header_open: false,
        }
    }
}

static LOG_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 1,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: None,
    xShmLock: None,
    xShmBarrier: None,
    xShmUnmap: None,
    xFetch: None,
    xUnfetch: None,
};

unsafe extern "C" fn open(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let real = (*(vfs as *mut Vfs)).real;
    let real_open = (*real).xOpen.expect("a VFS opens files");
    if flags & ffi::SQLITE_OPEN_WAL == 0 {
        // Not the log: the default VFS's file, as it is.
        return real_open(real, name, file, flags, out_flags);
    }
    let log = file as *mut LogFile;
    let inner = std::ptr::addr_of_mut!((*log).real.base);
    let rc = real_open(real, name, inner, flags, out_flags);
    if rc != ffi::SQLITE_OK || (*inner).pMethods.is_null() {
        (*log).base.pMethods = std::ptr::null();
        return rc;
    }
    std::ptr::addr_of_mut!((*log).gathered).write(Gathered::new());
    (*log).base.pMethods = &LOG_METHODS;
    rc
}

/// The default VFS's file inside a log file.
unsafe fn inner(file: *mut ffi::sqlite3_file) -> *mut ffi::sqlite3_file {
    std::ptr::addr_of_mut!((*(file as *mut LogFile)).real.base)
}

unsafe fn methods(file: *mut ffi::sqlite3_file) -> &'static ffi::sqlite3_io_methods {
    &*(*inner(file)).pMethods
}

unsafe fn gathered<'a>(file: *mut ffi::sqlite3_file) -> &'a mut Gathered {
    &mut (*(file as *mut LogFile)).gathered
}

/// Writes out what is gathered. On failure nothing gathered is kept, the call that asked (the
/// commit frame's write, or the next operation on the file) returns an I/O error, and the loss
/// sticks (`Gathered::lost`).
unsafe fn flush(file: *mut ffi::sqlite3_file) -> c_int {
    let g = gathered(file);
    g.commit = false;
    g.header_open = false;
    if g.bytes.is_empty() {
        return ffi::SQLITE_OK;
    }
    let mut rc = ffi::SQLITE_OK;
    let mut at = 0;
    while at < g.bytes.len() && rc == ffi::SQLITE_OK {
        let n = (g.bytes.len() - at).min(MAX_WRITE);
        counted();
        rc = (methods(file).xWrite.expect("files write"))(
            inner(file),
            g.bytes[at..].as_ptr() as *const c_void,
            n as c_int,
            g.start + at as i64,
        );
        at += n;
    }
    if rc != ffi::SQLITE_OK {
        // An I/O error, never "disk full": SQLite then rolls the whole transaction back (a full
        // disk rolls back only the statement, and the transaction's later commit would count
        // frames that were dropped here).
        g.lost = Some(g.start);
        g.end = -1;
        g.bytes.clear();
        return ffi::SQLITE_IOERR_WRITE;
    }
    g.bytes.clear();
    rc
}

/// The log's page size from its header in the file (0 when it has none yet).
unsafe fn read_page_size(file: *mut ffi::sqlite3_file) -> usize {
    let mut h = [0u8; 32];
    let rc = (methods(file).xRead.expect("files read"))(
        inner(file),
        h.as_mut_ptr() as *mut c_void,
        32,
        0,
    );
    if rc != ffi::SQLITE_OK {
        return 0;
    }
    page_size_of(&h)
}

/// The page size a log header (its first 32 bytes) names, or 0 when it is not one.
fn page_size_of(h: &[u8]) -> usize {
    if h.len() < 32 {
        return 0;
    }
    let be = |i: usize| u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    if !matches!(be(0), 0x377f0682 | 0x377f0683) {
        return 0;
    }
    match be(8) {
        1 => 65536,
        n if (512..=32768).contains(&n) && n.is_power_of_two() => n as usize,
        _ => 0,
    }
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    let data = std::slice::from_raw_parts(buf as *const u8, amount.max(0) as usize);
    let g = gathered(file);
    if let Some(lost) = g.lost {
        if offset > lost {
            return ffi::SQLITE_IOERR_WRITE;
        }
        g.lost = None;
    }
    let appends = g.end >= 0 && offset == g.end;
    if appends && g.page == 0 && data.len() == FRAME_HEADER && g.bytes.is_empty() {
        g.page = read_page_size(file);
    }
    let g = gathered(file);
    // A frame header starts where a frame does (a 24-byte rest of a page split at a sync point
    // does not); its page follows it.
    let header = appends
        && data.len() == FRAME_HEADER
        && !g.header_open
        && g.page > 0
        && offset >= 32
        && (offset - 32) % (g.page + FRAME_HEADER) as i64 == 0;
    let page = appends && g.header_open && data.len() == g.page;
    if header || page {
        if g.bytes.is_empty() {
            g.start = offset;
        }
        g.bytes.extend_from_slice(data);
        g.end = offset + data.len() as i64;
        if header {
            // Bytes 4-7: the database size after a commit frame, zero in any other.
            g.commit = data[4..8] != [0, 0, 0, 0];
            g.header_open = true;
            return ffi::SQLITE_OK;
        }
        g.header_open = false;
        if g.commit || g.bytes.len() >= MAX_GATHERED {
            return flush(file);
        }
        return ffi::SQLITE_OK;
    }
    let rc = flush(file);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    counted();
    let rc = (methods(file).xWrite.expect("files write"))(inner(file), buf, amount, offset);
    let g = gathered(file);
    if offset == 0 && rc == ffi::SQLITE_OK {
        // The log's header: its page size.
        g.page = page_size_of(data);
    }
    g.end = if rc == ffi::SQLITE_OK {
        offset + i64::from(amount)
    } else {
        -1
    };
    rc
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    let flushed = flush(file);
    let rc = (methods(file).xClose.expect("files close"))(inner(file));
    std::ptr::drop_in_place(std::ptr::addr_of_mut!((*(file as *mut LogFile)).gathered));
    (*file).pMethods = std::ptr::null();
    if flushed != ffi::SQLITE_OK {
        flushed
    } else {
        rc
    }
}

/// Methods that write out what is gathered, then call the default VFS's.
macro_rules! after_flush {
    ($name:ident ( $($arg:ident : $ty:ty),* ) => $method:ident) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file, $($arg: $ty),*) -> c_int {
            let rc = flush(file);
            if rc != ffi::SQLITE_OK {
                return rc;
            }
            (methods(file).$method.expect(stringify!($method)))(inner(file), $($arg),*)
        }
    };
}

after_flush!(read(buf: *mut c_void, amount: c_int, offset: i64) => xRead);

unsafe extern "C" fn truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    let rc = flush(file);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    // The log starts over: its next write is its header, written as it comes.
    gathered(file).end = -1;
    gathered(file).lost = None;
    (methods(file).xTruncate.expect("files truncate"))(inner(file), size)
}
unsafe extern "C" fn sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    let rc = flush(file);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    if gathered(file).lost.is_some() {
        return ffi::SQLITE_IOERR_WRITE;
    }
    (methods(file).xSync.expect("files sync"))(inner(file), flags)
}
after_flush!(file_size(size: *mut i64) => xFileSize);
after_flush!(lock(level: c_int) => xLock);
after_flush!(unlock(level: c_int) => xUnlock);
after_flush!(check_reserved_lock(out: *mut c_int) => xCheckReservedLock);
after_flush!(file_control(op: c_int, arg: *mut c_void) => xFileControl);

unsafe extern "C" fn sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    (methods(file).xSectorSize.expect("xSectorSize"))(inner(file))
}

unsafe extern "C" fn device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    (methods(file)
        .xDeviceCharacteristics
        .expect("xDeviceCharacteristics"))(inner(file))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rusqlite::{Connection, OpenFlags};

    fn writer(path: &std::path::Path) -> Connection {
        let c =
            Connection::open_with_flags_and_vfs(path, OpenFlags::default(), register().unwrap())
                .unwrap();
        c.pragma_update(None, "journal_mode", "WAL").unwrap();
        c.pragma_update(None, "synchronous", "NORMAL").unwrap();
        c.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        c.execute_batch("CREATE TABLE IF NOT EXISTS t(k INTEGER PRIMARY KEY, v BLOB NOT NULL)")
            .unwrap();
        c
    }

    thread_local! {
        static FRAMES: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
    }

    /// The log's frames after each commit, as SQLite counts them.
    fn note(_: &rusqlite::hooks::Wal, frames: c_int) -> rusqlite::Result<()> {
        FRAMES.set(i64::from(frames));
        Ok(())
    }

    #[test]
    fn a_commit_is_one_write_and_all_of_it_is_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let c = writer(&path);
        c.wal_hook(Some(note));
        // Nothing copied back, so the log keeps every frame and its size says how many.
        let log = dir.path().join("t.db-wal");
        let mut last = 0;
        for round in 0..5 {
            let before = WRITES.get();
            let tx = c.unchecked_transaction().unwrap();
            for i in 0..12 {
                tx.execute(
                    "INSERT INTO t(v) VALUES (?1)",
                    [vec![round as u8 + i; 1500]],
                )
                .unwrap();
            }
            tx.commit().unwrap();
            let writes = WRITES.get() - before;
            let n = FRAMES.get();
            let new = n - last;
            last = n;
            assert!(new > 4, "a transaction of several pages ({new} frames)");
            let size = std::fs::metadata(&log).unwrap().len() as i64;
            let page: i64 = c.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
            assert_eq!(size, 32 + n * (24 + page), "every frame is in the file");
            assert!(writes <= 2, "{writes} writes for a commit of {new} frames");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Any sequence of transactions (small, large enough to be written in parts, rolled
        /// back, copied back and started over) reads back through the default VFS exactly as
        /// committed, after each commit and after reopening.
        #[test]
        fn what_is_committed_is_what_others_read(
            ops in proptest::collection::vec((0usize..200, 1usize..6000, 0u8..10), 1..14)
        ) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("t.db");
            let c = writer(&path);
            let reader = Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
            let mut want: Vec<(i64, Vec<u8>)> = Vec::new();
            for (i, (rows, size, what)) in ops.into_iter().enumerate() {
                let tx = c.unchecked_transaction().unwrap();
                let mut added = Vec::new();
                for r in 0..rows {
                    let v = vec![(i * 7 + r) as u8; size];
                    tx.execute("INSERT INTO t(v) VALUES (?1)", [&v]).unwrap();
                    added.push((tx.last_insert_rowid(), v));
                }
                if what == 0 {
                    tx.rollback().unwrap();
                } else {
                    tx.commit().unwrap();
                    want.extend(added);
                }
                match what {
                    1 => { c.execute_batch("PRAGMA wal_checkpoint(RESTART)").unwrap(); }
                    2 => { c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap(); }
                    _ => {}
                }
                let got: Vec<(i64, Vec<u8>)> = reader
                    .prepare("SELECT k, v FROM t ORDER BY k").unwrap()
                    .query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap()
                    .collect::<Result<_, _>>().unwrap();
                prop_assert_eq!(&got, &want);
            }
            drop(reader);
            drop(c);
            let again = Connection::open(&path).unwrap();
            let n: i64 = again.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0)).unwrap();
            prop_assert_eq!(n as usize, want.len());
            let ok: String = again.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
            prop_assert_eq!(ok, "ok");
        }
    }

    /// synchronous=FULL with padding (psow=0, page 1024 < sector 4096): the sync point
    /// falls 24 bytes before the end of a padding frame; those 24 bytes are "gathered" as a
    /// frame header and stay in memory after SQLite published the commit.
    #[test]
    fn the_rest_of_a_page_split_at_a_sync_point_is_in_the_file_when_published() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let uri = format!("file:{}?psow=0", path.display());
        let c =
            Connection::open_with_flags_and_vfs(&uri, OpenFlags::default(), register().unwrap())
                .unwrap();
        c.pragma_update(None, "page_size", 1024).unwrap();
        c.pragma_update(None, "journal_mode", "WAL").unwrap();
        c.pragma_update(None, "synchronous", "NORMAL").unwrap();
        c.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        c.execute_batch(
            "CREATE TABLE t(k INTEGER PRIMARY KEY, v INTEGER); INSERT INTO t VALUES (1, 0);",
        )
        .unwrap();
        c.wal_hook(Some(note));
        // 32 + 468*1048 = 3072 (mod 4096): after a one-frame commit as frame 468 the sync
        // point is 1024 bytes into the padding frame 469, i.e. 24 bytes before its end.
        let mut i = 0;
        let mut step = 0;
        while FRAMES.get() + step < 468 {
            let before = FRAMES.get();
            c.execute("UPDATE t SET v = ?1 WHERE k = 1", [i]).unwrap();
            step = FRAMES.get() - before;
            i += 1;
        }
        assert_eq!(FRAMES.get() + step, 468, "step {step}");
        c.pragma_update(None, "synchronous", "FULL").unwrap();
        c.execute("UPDATE t SET v = -1 WHERE k = 1", []).unwrap();
        eprintln!("step {step}, frames now {}", FRAMES.get());
        let n = FRAMES.get();
        let size = std::fs::metadata(dir.path().join("t.db-wal"))
            .unwrap()
            .len() as i64;
        let r = Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        let got = r.query_row("SELECT v FROM t WHERE k = 1", [], |r| r.get::<_, i64>(0));
        assert_eq!(
            size,
            32 + n * 1048,
            "frames {n} published, reader got {got:?}"
        );
        assert_eq!(got.unwrap(), -1);
    }

    // Linux only: the failure is injected through glibc's `pwrite64` and `errno`, and the log
    // is recognised by its `/proc/self/fd` link.
    #[cfg(target_os = "linux")]
    static FAIL_WAL_WRITES: std::sync::atomic::AtomicBool =
        std::sync::atomic::AtomicBool::new(false);

    #[cfg(target_os = "linux")]
    unsafe extern "C" fn failing_pwrite64(
        fd: c_int,
        buf: *const c_void,
        n: usize,
        off: i64,
    ) -> isize {
        if FAIL_WAL_WRITES.load(std::sync::atomic::Ordering::SeqCst) {
            let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap_or_default();
            if link.to_string_lossy().ends_with("late-write.db-wal") {
                *libc::__errno_location() = libc::ENOSPC;
                return -1;
            }
        }
        libc::pwrite64(fd, buf, n, off)
    }

    /// Spilled frames whose write fails when a read writes them out (a full disk): the whole
    /// transaction is rolled back, as when the spill's own write fails without this VFS; a
    /// statement rollback would keep it, and its commit would count frames not in the file.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_write_that_fails_late_rolls_the_transaction_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("late-write.db");
        let c = writer(&path);
        c.execute_batch(
            "PRAGMA cache_size = 20; CREATE TABLE u(k INTEGER PRIMARY KEY, v BLOB UNIQUE);",
        )
        .unwrap();
        let wal = dir.path().join("late-write.db-wal");
        c.execute_batch("BEGIN").unwrap();
        for i in 0..100u32 {
            let mut v = vec![0u8; 3000];
            v[..4].copy_from_slice(&i.to_le_bytes());
            c.execute("INSERT INTO t(v) VALUES (?1)", [v]).unwrap();
        }
        let spilled = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
        unsafe {
            let real = ffi::sqlite3_vfs_find(std::ptr::null());
            let set = (*real).xSetSystemCall.unwrap();
            let f: unsafe extern "C" fn(c_int, *const c_void, usize, i64) -> isize =
                failing_pwrite64;
            assert_eq!(
                set(
                    real,
                    c"pwrite".as_ptr(),
                    Some(std::mem::transmute::<
                        unsafe extern "C" fn(c_int, *const c_void, usize, i64) -> isize,
                        unsafe extern "C" fn(),
                    >(f))
                ),
                0
            );
        }
        FAIL_WAL_WRITES.store(true, std::sync::atomic::Ordering::SeqCst);
        let e = c.execute("INSERT INTO u(v) SELECT v FROM t", []);
        FAIL_WAL_WRITES.store(false, std::sync::atomic::Ordering::SeqCst);
        unsafe {
            let real = ffi::sqlite3_vfs_find(std::ptr::null());
            ((*real).xSetSystemCall.unwrap())(real, c"pwrite".as_ptr(), None);
        }
        eprintln!(
            "wal size after spills {spilled}; statement: {e:?}; autocommit {}",
            c.is_autocommit()
        );
        let kept = !c.is_autocommit();
        if kept {
            c.execute_batch("COMMIT").unwrap();
        }
        let r = Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        let n = r.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0));
        let ok = r.query_row("PRAGMA integrity_check", [], |r| r.get::<_, String>(0));
        eprintln!("reader: count {n:?}, integrity {ok:?}");
        assert_eq!(ok.unwrap(), "ok");
        assert_eq!(n.unwrap(), if kept { 100 } else { 0 });
    }
}
