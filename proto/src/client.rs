//! A minimal HTTP/1.1 client over the daemon's Unix socket, with one deadline for the whole
//! exchange. Std and libc only: `nmem record` runs it on every tool call, and an async runtime
//! or a general HTTP stack would cost more than the exchange itself.
//!
//! The connect never blocks: a daemon whose accept backlog is full counts as unavailable, so the
//! caller spools instead of waiting.
//!
//! The peer must run as the same user ([`peer_uid`]: `SO_PEERCRED` on Linux, `getpeereid` on
//! macOS): a socket bound first by someone else (in a folder others can write to) would get raw,
//! unredacted payloads and could inject context. Such a peer is refused like a daemon that is down,
//! so the hook spools.

use std::io::{self, Read, Write};
use std::os::fd::FromRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Connect without blocking: fails at once if nobody listens or the backlog is full.
pub fn connect(socket: &Path) -> io::Result<UnixStream> {
    let bytes = socket.as_os_str().as_bytes();
    // SAFETY: plain socket syscalls on a zeroed sockaddr_un whose path fits (checked).
    unsafe {
        let mut addr: libc::sockaddr_un = std::mem::zeroed();
        if bytes.len() >= addr.sun_path.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "socket path is too long for a Unix socket: {}",
                    socket.display()
                ),
            ));
        }
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (dst, src) in addr.sun_path.iter_mut().zip(bytes) {
            *dst = *src as libc::c_char;
        }
        let fd = nonblocking_socket()?;
        let stream = UnixStream::from_raw_fd(fd);
        let len = (std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1) as libc::socklen_t;
        if libc::connect(fd, &addr as *const _ as *const libc::sockaddr, len) != 0 {
            return Err(io::Error::last_os_error());
        }
        stream.set_nonblocking(false)?;
        let me = libc::geteuid();
        match peer_uid(&stream) {
            Ok(uid) if uid == me => Ok(stream),
            Ok(uid) => Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "the process listening on {} runs as uid {uid}, not as you (uid {me}): nmem \
                     will not talk to it; remove that socket, or set NMEM_SOCKET to a path in a \
                     folder only you can write to",
                    socket.display()
                ),
            )),
            Err(e) => Err(e),
        }
    }
}

/// A Unix stream socket, close-on-exec and non-blocking, in one `socket(2)` call on Linux.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn nonblocking_socket() -> io::Result<libc::c_int> {
    // SAFETY: socket(2) with constant arguments.
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// A Unix stream socket, close-on-exec and non-blocking. macOS's `socket(2)` takes no type
/// flags: `fcntl` sets both after (a child forked in between could inherit it, and the hook
/// forks nothing but the daemon, which closes what it inherits). `SO_NOSIGPIPE` because
/// macOS has no `MSG_NOSIGNAL` (Rust ignores SIGPIPE in its binaries anyway).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn nonblocking_socket() -> io::Result<libc::c_int> {
    // SAFETY: socket(2) and fcntl(2) on the descriptor just created, closed on any failure.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let one: libc::c_int = 1;
        let ok = libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) == 0
            && libc::fcntl(
                fd,
                libc::F_SETFL,
                libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK,
            ) == 0
            && libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_NOSIGPIPE,
                &one as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            ) == 0;
        if !ok {
            let e = io::Error::last_os_error();
            libc::close(fd);
            return Err(e);
        }
        Ok(fd)
    }
}

/// The uid of the process at the other end of a connected Unix socket (the one that bound it).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn peer_uid(stream: &UnixStream) -> io::Result<u32> {
    use std::os::fd::AsRawFd;
    // SAFETY: getsockopt writes at most `len` bytes into a zeroed ucred.
    unsafe {
        let mut cred: libc::ucred = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        if libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut libc::ucred as *mut libc::c_void,
            &mut len,
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(cred.uid)
    }
}

/// The uid of the process at the other end of a connected Unix socket (the one that bound it).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub fn peer_uid(stream: &UnixStream) -> io::Result<u32> {
    use std::os::fd::AsRawFd;
    let (mut uid, mut gid) = (0, 0);
    // SAFETY: getpeereid writes two ids into our locals.
    if unsafe { libc::getpeereid(stream.as_raw_fd(), &mut uid, &mut gid) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(uid)
}

/// One request, one reply, all within `deadline`, on a fresh connection closed afterwards.
pub fn call(
    socket: &Path,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    deadline: Duration,
) -> io::Result<Response> {
    let start = Instant::now();
    let mut conn = Conn {
        stream: connect(socket)?,
        keep_alive: false,
        spin: true,
    };
    conn.request_within(method, path, headers, body, start, deadline)
}

/// A kept-alive connection, for clients that make many requests (the benchmark's load
/// generator). The hook uses [`call`] instead: one request per process.
pub struct Conn {
    stream: UnixStream,
    keep_alive: bool,
    /// Wait for the reply awake first ([`await_reply`]): a one-request process, the hook.
    spin: bool,
}

impl Conn {
    pub fn open(socket: &Path) -> io::Result<Conn> {
        Ok(Conn {
            stream: connect(socket)?,
            keep_alive: true,
            spin: false,
        })
    }

    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        deadline: Duration,
    ) -> io::Result<Response> {
        self.request_within(method, path, headers, body, Instant::now(), deadline)
    }

    fn request_within(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        start: Instant,
        deadline: Duration,
    ) -> io::Result<Response> {
        let remaining = || {
            deadline
                .checked_sub(start.elapsed())
                .filter(|d| !d.is_zero())
                .ok_or_else(|| {
                    io::Error::new(io::ErrorKind::TimedOut, "nmemd did not answer in time")
                })
        };
        let stream = &mut self.stream;
        stream.set_write_timeout(Some(remaining()?))?;
        let mut head = String::with_capacity(256);
        head.push_str(method);
        head.push(' ');
        head.push_str(path);
        head.push_str(if self.keep_alive {
            " HTTP/1.1\r\nhost: nmemd\r\n"
        } else {
            " HTTP/1.1\r\nhost: nmemd\r\nconnection: close\r\n"
        });
        for (k, v) in headers {
            head.push_str(k);
            head.push_str(": ");
            head.push_str(v);
            head.push_str("\r\n");
        }
        if !body.is_empty() || method == "POST" {
            head.push_str("content-type: application/json\r\ncontent-length: ");
            head.push_str(&body.len().to_string());
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        if body.len() <= 16 * 1024 {
            // One write for the common case: one syscall, one read for the daemon.
            let mut buf = head.into_bytes();
            buf.extend_from_slice(body);
            stream.write_all(&buf)?;
        } else {
            stream.write_all(head.as_bytes())?;
            stream.write_all(body)?;
        }

        if self.spin {
            await_reply(stream, (start + deadline).min(Instant::now() + AWAKE));
        }
        let mut buf = Vec::with_capacity(1024);
        let mut chunk = [0u8; 8192];
        let header_end = loop {
            wait_readable(stream, remaining()?)?;
            let n = read_some(stream, &mut chunk)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "nmemd closed the connection before replying",
                ));
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(i) = find(&buf, b"\r\n\r\n") {
                break i + 4;
            }
            if buf.len() > 64 * 1024 {
                return Err(bad("reply headers are too large"));
            }
        };
        let head = std::str::from_utf8(&buf[..header_end])
            .map_err(|_| bad("reply headers are not UTF-8"))?;
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let status: u16 = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad("no status in the reply"))?;
        let mut headers = Vec::new();
        let mut content_length = None;
        let mut chunked = false;
        for line in lines.filter(|l| !l.is_empty()) {
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            let (k, v) = (k.trim(), v.trim());
            if k.eq_ignore_ascii_case("content-length") {
                content_length = v.parse::<usize>().ok();
            } else if k.eq_ignore_ascii_case("transfer-encoding")
                && v.eq_ignore_ascii_case("chunked")
            {
                chunked = true;
            }
            headers.push((k.to_ascii_lowercase(), v.to_string()));
        }
        let mut body = buf.split_off(header_end);
        loop {
            if let Some(n) = content_length {
                if body.len() >= n {
                    body.truncate(n);
                    break;
                }
            } else if chunked && body.ends_with(b"0\r\n\r\n") {
                break;
            }
            wait_readable(stream, remaining()?)?;
            let n = read_some(stream, &mut chunk)?;
            if n == 0 {
                if content_length.is_some() || chunked {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "reply was cut short",
                    ));
                }
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
        if chunked {
            body = dechunk(&body)?;
        }
        Ok(Response {
            status,
            headers,
            body,
        })
    }
}

/// How long a one-request client waits for the reply awake, before it sleeps in `read`.
const AWAKE: Duration = Duration::from_millis(1);

/// A turn of that wait longer than this: another thread had this CPU (the machine is busy).
const CONTENDED: Duration = Duration::from_micros(100);

/// Wait for the reply without sleeping, until `until`: poll the socket and yield the CPU between
/// polls. Whatever ends the wait, `read` comes next and tells.
///
/// A client asleep in `read` leaves its CPU idle, and an idle CPU of a virtual machine halts: the
/// reply then pays for waking it. Measured with `nmem-bench --hook --against` on the 2-vCPU VM,
/// the same hook built with and without this wait, interleaved: 1.29× → 1.24× and 1.31× → 1.27×
/// `/bin/true` (30-45 µs less a hook) for about 90 µs more CPU; with the hook linked with
/// musl, 0.99× → 0.96× and 1.06× → 1.03× (ARCHITECTURE.md, thirteenth round). It spins only
/// when no thread waits for a CPU ([`cpus_to_spare`]), yields to any that becomes runnable, and
/// stops at a turn that took longer than [`CONTENDED`] (one ran): with two CPU-bound processes
/// running, the median moved by +13-16 µs (reading `/proc/loadavg`) and p95 within noise.
/// Without that check the yield handed the CPU to a busy process for a whole time slice (p95 4.3
/// → 7.1 ms in one run); without the yield (a pure busy loop) the median did not move and p95
/// doubled.
fn await_reply(stream: &UnixStream, until: Instant) {
    if cpus_to_spare() {
        spin_for_reply(stream, until);
    }
}

/// [`await_reply`]'s loop, whatever the machine's load: whether the reply is there (or the
/// socket closed or failed).
fn spin_for_reply(stream: &UnixStream, until: Instant) -> bool {
    use std::os::fd::AsRawFd;
    let mut fd = libc::pollfd {
        fd: stream.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one valid pollfd; a zero timeout never blocks.
        let n = unsafe { libc::poll(&mut fd, 1, 0) };
        if n != 0 {
            return n > 0;
        }
        let turn = Instant::now();
        if turn >= until {
            return false;
        }
        std::thread::yield_now();
        if turn.elapsed() > CONTENDED {
            return false;
        }
    }
}

/// Whether no more threads are runnable than this process may use CPUs (`/proc/loadavg`'s
/// fourth field, and the affinity mask): no thread waits for a CPU, so yielding one hands it to
/// nobody for long. Anywhere else, or unreadable: no.
#[cfg(target_os = "linux")]
fn cpus_to_spare() -> bool {
    let mut buf = [0u8; 128];
    let n = match std::fs::File::open("/proc/loadavg").and_then(|mut f| f.read(&mut buf)) {
        Ok(n) => n,
        Err(_) => return false,
    };
    // SAFETY: a zeroed set, filled by the kernel for this thread.
    let cpus = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return false;
        }
        libc::CPU_COUNT(&set) as usize
    };
    runnable_at_most(&buf[..n], cpus)
}

/// Whether `/proc/loadavg` (`0.42 0.31 0.25 2/311 12345`: the fourth field is runnable / all
/// threads) counts at most `cpus` runnable threads. Anything unreadable: no.
fn runnable_at_most(loadavg: &[u8], cpus: usize) -> bool {
    std::str::from_utf8(loadavg)
        .ok()
        .and_then(|s| s.split(' ').nth(3))
        .and_then(|f| f.split_once('/'))
        .and_then(|(r, _)| r.parse::<usize>().ok())
        .is_some_and(|r| r <= cpus)
}

#[cfg(not(target_os = "linux"))]
fn cpus_to_spare() -> bool {
    false
}

/// Wait until `stream` has something to read (or is closed or failed: the read then says
/// which), at most `timeout`. A `poll` rather than a blocking `recv` under `SO_RCVTIMEO`: a
/// thread blocked in `recv` on a Unix stream socket is woken, for nothing, each time the
/// daemon reads this client's request (the kernel then wakes every waiter of the client's
/// socket to say there is room to write), while `poll(POLLIN)` is woken by the reply only.
/// One system call either way.
fn wait_readable(stream: &UnixStream, timeout: Duration) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let deadline = Instant::now() + timeout;
    let mut fd = libc::pollfd {
        fd: stream.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // Rounded up: never given up while time is left.
        let left = deadline.saturating_duration_since(Instant::now());
        let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd we own, for the duration of the call.
        match unsafe { libc::poll(&mut fd, 1, ms) } {
            n if n > 0 => return Ok(()),
            0 if Instant::now() >= deadline => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "nmemd did not answer in time",
                ))
            }
            0 => {}
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
                // Interrupted: wait again for what is left.
            }
        }
    }
}

/// A read after [`wait_readable`] said the socket is readable: it does not block. `WouldBlock`
/// (a read timeout some caller set) still reads as the daemon being slow.
fn read_some(stream: &mut UnixStream, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match stream.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "nmemd did not answer in time",
                ))
            }
            other => return other,
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn bad(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

fn dechunk(mut data: &[u8]) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(data.len());
    loop {
        let eol = find(data, b"\r\n").ok_or_else(|| bad("bad chunked reply"))?;
        let size_str = std::str::from_utf8(&data[..eol]).map_err(|_| bad("bad chunk size"))?;
        let size = usize::from_str_radix(size_str.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| bad("bad chunk size"))?;
        data = &data[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if data.len() < size + 2 {
            return Err(bad("chunked reply was cut short"));
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

/// A fresh event id: 128 bits from the clock, the pid and the system's random source, as hex.
pub fn new_event_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut rnd = [0u8; 8];
    let got = fill_random(&mut rnd);
    let mut r = u64::from_ne_bytes(rnd);
    if !got {
        // No entropy yet (early boot), or a sandbox that forbids the call: the pid and a stack
        // address still separate invocations.
        r ^= (&rnd as *const _ as u64).rotate_left(17);
    }
    let pid = std::process::id() as u64;
    format!("{nanos:016x}{:016x}", r ^ (pid << 40))
}

/// Linux: the `getrandom(2)` syscall itself, non-blocking. Not the `getrandom` crate here: it
/// finds glibc's `getrandom` through `dlsym`, which a static binary cannot resolve, and falls
/// back to opening `/dev/random` (to poll it) and `/dev/urandom`: measured with `strace` on
/// `nmem record`, 1 syscall became 5 (see ARCHITECTURE.md).
#[cfg(target_os = "linux")]
fn fill_random(buf: &mut [u8; 8]) -> bool {
    // SAFETY: getrandom writes at most buf.len() bytes into buf.
    let got = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), libc::GRND_NONBLOCK) };
    got == buf.len() as isize
}

/// Elsewhere (macOS: `getentropy(2)`), the `getrandom` crate.
#[cfg(not(target_os = "linux"))]
fn fill_random(buf: &mut [u8; 8]) -> bool {
    getrandom::fill(buf).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dechunks() {
        assert_eq!(
            dechunk(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n").unwrap(),
            b"abcde"
        );
    }

    #[test]
    fn event_ids_are_unique_and_hex() {
        let a = new_event_id();
        let b = new_event_id();
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn awaiting_a_reply_sees_one_already_there() {
        let (mut daemon, client) = UnixStream::pair().unwrap();
        daemon.write_all(b"HTTP/1.1 200 OK\r\n").unwrap();
        // A wait that ignored the socket would run for the hour.
        let until = Instant::now() + Duration::from_secs(3600);
        assert!(spin_for_reply(&client, until));
    }

    #[test]
    fn awaiting_a_reply_ends_at_its_bound_or_when_the_peer_goes() {
        let (daemon, client) = UnixStream::pair().unwrap();
        assert!(!spin_for_reply(&client, Instant::now() + AWAKE));
        assert!(!spin_for_reply(&client, Instant::now()));
        drop(daemon);
        // Hung up: readable (end of file), which `read` then reports.
        assert!(spin_for_reply(
            &client,
            Instant::now() + Duration::from_secs(3600)
        ));
    }

    #[test]
    fn the_reply_is_awaited_awake_only_with_cpus_to_spare() {
        assert!(runnable_at_most(b"0.42 0.31 0.25 2/311 12345\n", 2));
        assert!(runnable_at_most(b"0.00 0.00 0.00 1/90 7", 1));
        assert!(!runnable_at_most(b"3.10 2.00 1.50 3/311 12345\n", 2));
        for junk in [
            &b""[..],
            b"0.42 0.31",
            b"0.42 0.31 0.25 x/311 1",
            b"\xff\xfe",
            b"1 2 3 4",
        ] {
            assert!(!runnable_at_most(junk, 64));
        }
    }

    #[test]
    fn waiting_to_read_ends_with_the_reply_its_bound_or_the_peer() {
        let (mut daemon, client) = UnixStream::pair().unwrap();
        let e = wait_readable(&client, Duration::from_millis(20)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(e.to_string(), "nmemd did not answer in time");
        daemon.write_all(b"HTTP/1.1 200 OK\r\n").unwrap();
        // A wait that ignored the socket would run for the hour.
        wait_readable(&client, Duration::from_secs(3600)).unwrap();
        let (daemon, client) = UnixStream::pair().unwrap();
        drop(daemon);
        // Hung up: readable (end of file), which `read` then reports.
        wait_readable(&client, Duration::from_secs(3600)).unwrap();
    }

    /// A daemon on the other end of a pair: reads one request, then runs `answer` on the
    /// stream.
    fn daemon(
        answer: impl FnOnce(&mut UnixStream) + Send + 'static,
    ) -> (Conn, std::thread::JoinHandle<()>) {
        let (mut d, c) = UnixStream::pair().unwrap();
        let t = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            let mut got = Vec::new();
            while find(&got, b"\r\n\r\n").is_none() {
                let n = d.read(&mut buf).unwrap();
                assert!(n > 0, "the client went away before its request");
                got.extend_from_slice(&buf[..n]);
            }
            answer(&mut d);
        });
        let conn = Conn {
            stream: c,
            keep_alive: true,
            spin: false,
        };
        (conn, t)
    }

    #[test]
    fn a_kept_alive_connection_reads_a_reply_in_pieces_and_times_out_on_none() {
        let (mut conn, t) = daemon(|d| {
            // The pauses only make the pieces likely to arrive apart; the reply is whole either way.
            d.write_all(b"HTTP/1.1 200 OK\r\ncontent-le").unwrap();
            std::thread::sleep(Duration::from_millis(5));
            d.write_all(b"ngth: 5\r\n\r\nhel").unwrap();
            std::thread::sleep(Duration::from_millis(5));
            d.write_all(b"lo").unwrap();
        });
        let r = conn
            .request("GET", "/v1/status", &[], b"", Duration::from_secs(3600))
            .unwrap();
        assert_eq!((r.status, &r.body[..]), (200, &b"hello"[..]));
        t.join().unwrap();

        // A daemon that reads the request and never answers: the request's own bound ends it.
        let (hold, release) = std::sync::mpsc::channel::<()>();
        let (mut conn, t) = daemon(move |_| {
            let _ = release.recv();
        });
        let e = conn
            .request("GET", "/v1/status", &[], b"", Duration::from_millis(50))
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        drop(hold);
        t.join().unwrap();
    }

    #[test]
    fn connect_to_nothing_fails_fast() {
        let p = std::env::temp_dir().join("nmem-no-such-socket");
        assert!(connect(&p).is_err());
    }
}
