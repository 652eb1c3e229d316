//! The protocol between `nmemd` and its `nmem-embed` child, and the client that speaks it.
//!
//! The model lives in a child process so that `nmemd` stays within its memory budget and can give
//! the model's ~100 MB back by stopping the child when idle. The protocol is the smallest that
//! does the job over the child's stdin and stdout:
//!
//! ```text
//! child, once loaded:  {"ready":true,"model":"all-MiniLM-L6-v2","dim":384,"max_tokens":256}\n
//!                 or:  {"error":"<message>"}\n            and exit 1
//! parent:              {"texts":["...","..."]}\n           at most 64 texts
//! child:               {"n":2,"dim":384}\n<n*dim little-endian f32>
//!                 or:  {"error":"<message>"}\n            the child stays usable
//! parent closes stdin: the child exits 0
//! ```
//!
//! Vectors are L2-normalised and in request order; the child truncates each text to its token
//! limit. Vectors travel as raw f32 rather than JSON numbers: exact, and no float parsing.
//! stderr is the child's log (inherited).
//!
//! [`EmbedChild`] enforces one deadline per call with poll(2) on non-blocking pipes, so a hung or
//! dead child costs the caller at most its timeout; after a timeout or a protocol error the child
//! is killed and reaped, and the caller spawns a new one when it next needs vectors.

use std::io::{self, BufRead, Read, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{EmbedError, Embedder};

/// Most texts in one request.
pub const MAX_TEXTS: usize = 64;
/// Longest request line the child accepts (texts are truncated to the model's token limit
/// anyway; this only bounds the child's memory).
pub const MAX_REQUEST_BYTES: usize = 16 << 20;
/// Longest ready, reply-header or error line the client accepts.
pub const MAX_REPLY_LINE_BYTES: usize = 64 << 10;

/// What the child announces once its model is loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ready {
    pub model: String,
    pub dim: usize,
    pub max_tokens: usize,
}

// ------------------------------------------------------------------------------- framing: child

// Lines are formatted by hand so their key order is the documented one whatever serde_json
// features the workspace unifies (`preserve_order` or not); strings go through serde_json.

fn quoted(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}

/// `{"ready":true,"model":…,"dim":…,"max_tokens":…}\n`
pub fn ready_line(ready: &Ready) -> String {
    format!(
        "{{\"ready\":true,\"model\":{},\"dim\":{},\"max_tokens\":{}}}\n",
        quoted(&ready.model),
        ready.dim,
        ready.max_tokens
    )
}

/// `{"error":"…"}\n`
pub fn error_line(message: &str) -> String {
    format!("{{\"error\":{}}}\n", quoted(message))
}

/// `{"n":…,"dim":…}\n`
pub fn reply_header(n: usize, dim: usize) -> String {
    format!("{{\"n\":{n},\"dim\":{dim}}}\n")
}

/// The reply to a request: the header line, then every vector as little-endian f32.
pub fn write_reply(w: &mut impl Write, vectors: &[Vec<f32>], dim: usize) -> io::Result<()> {
    if let Some(bad) = vectors.iter().find(|v| v.len() != dim) {
        let msg = format!("vector of {} values, expected {dim}", bad.len());
        return Err(io::Error::new(io::ErrorKind::InvalidData, msg));
    }
    let mut out = Vec::with_capacity(32 + vectors.len() * dim * 4);
    out.extend_from_slice(reply_header(vectors.len(), dim).as_bytes());
    for x in vectors.iter().flatten() {
        out.extend_from_slice(&x.to_le_bytes());
    }
    w.write_all(&out)
}

/// The texts of a request line (without its newline). The error is the message for the
/// `{"error"}` reply.
pub fn parse_request(line: &[u8]) -> Result<Vec<String>, String> {
    let value: Value =
        serde_json::from_slice(line).map_err(|e| format!("request is not JSON: {e}"))?;
    let texts = value
        .get("texts")
        .and_then(Value::as_array)
        .ok_or("request must be {\"texts\":[...]}")?;
    if texts.len() > MAX_TEXTS {
        return Err(format!(
            "{} texts in one request; at most {MAX_TEXTS}",
            texts.len()
        ));
    }
    texts
        .iter()
        .map(|t| {
            t.as_str()
                .map(str::to_owned)
                .ok_or_else(|| "every text must be a string".to_owned())
        })
        .collect()
}

/// One line read with [`read_line_bounded`].
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// The line, without its `\n`.
    Line(Vec<u8>),
    /// Longer than the bound: it was read to its end and discarded.
    TooLong,
    /// End of input before any byte of a new line (a last line without `\n` counts as a line).
    Eof,
}

/// Read one line, holding at most `max` bytes of it.
pub fn read_line_bounded(r: &mut impl BufRead, max: usize) -> io::Result<Line> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(match (too_long, line.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::Eof,
                (false, false) => Line::Line(line),
            });
        }
        let (part, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (&chunk[..i], Some(i + 1)),
            None => (chunk, None),
        };
        if !too_long {
            if line.len() + part.len() > max {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(part);
            }
        }
        let used = done.unwrap_or(chunk.len());
        r.consume(used);
        if done.is_some() {
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Line(line)
            });
        }
    }
}

// ------------------------------------------------------------------------------ framing: parent

/// `{"texts":[…]}\n`
pub fn request_line(texts: &[&str]) -> String {
    let mut line = String::from("{\"texts\":[");
    for (i, t) in texts.iter().enumerate() {
        if i > 0 {
            line.push(',');
        }
        line.push_str(&quoted(t));
    }
    line.push_str("]}\n");
    line
}

fn parse_object(line: &[u8], what: &str) -> Result<serde_json::Map<String, Value>, EmbedError> {
    let shown = String::from_utf8_lossy(&line[..line.len().min(200)]).into_owned();
    match serde_json::from_slice::<Value>(line) {
        Ok(Value::Object(map)) => {
            if let Some(err) = map.get("error") {
                let msg = err
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| err.to_string());
                return Err(EmbedError::Child(msg));
            }
            Ok(map)
        }
        _ => Err(EmbedError::Protocol(format!(
            "expected {what}, got {shown:?}"
        ))),
    }
}

fn field_usize(
    map: &serde_json::Map<String, Value>,
    key: &str,
    what: &str,
) -> Result<usize, EmbedError> {
    map.get(key)
        .and_then(Value::as_u64)
        .map(|n| n as usize)
        .ok_or_else(|| EmbedError::Protocol(format!("{what} without a numeric \"{key}\"")))
}

/// The child's first line: [`Ready`], or its `{"error"}` as [`EmbedError::Child`].
pub fn parse_ready(line: &[u8]) -> Result<Ready, EmbedError> {
    let map = parse_object(line, "the ready line")?;
    if map.get("ready") != Some(&Value::Bool(true)) {
        return Err(EmbedError::Protocol(
            "ready line without \"ready\":true".into(),
        ));
    }
    let model = map
        .get("model")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .ok_or_else(|| EmbedError::Protocol("ready line without a model id".into()))?;
    let dim = field_usize(&map, "dim", "ready line")?;
    let max_tokens = field_usize(&map, "max_tokens", "ready line")?;
    if dim == 0 || dim > 65536 {
        return Err(EmbedError::Protocol(format!("implausible dimension {dim}")));
    }
    Ok(Ready {
        model: model.to_owned(),
        dim,
        max_tokens,
    })
}

/// A reply's header line: `(n, dim)`, or its `{"error"}` as [`EmbedError::Child`].
pub fn parse_reply_header(line: &[u8]) -> Result<(usize, usize), EmbedError> {
    let map = parse_object(line, "a reply header")?;
    Ok((
        field_usize(&map, "n", "reply header")?,
        field_usize(&map, "dim", "reply header")?,
    ))
}

/// `n` vectors of `dim` little-endian f32 from exactly `n * dim * 4` bytes.
pub fn decode_vectors(bytes: &[u8], n: usize, dim: usize) -> Vec<Vec<f32>> {
    assert_eq!(bytes.len(), n * dim * 4, "payload length");
    bytes
        .chunks_exact(dim.max(1) * 4)
        .map(|v| {
            v.chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        })
        .collect()
}

// ---------------------------------------------------------------------------------- the client

/// Where `nmem-embed` is installed: next to the running binary (`nmemd`, `nmemctl`).
pub fn default_bin() -> Option<std::path::PathBuf> {
    sibling_bin("nmem-embed")
}

/// The program `name` next to the running binary (e.g. `nmem-embed-onnx` beside `nmemd`).
pub fn sibling_bin(name: &str) -> Option<std::path::PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.join(name))
}

/// A running `nmem-embed` child with its model loaded.
///
/// Every call has one deadline; on a timeout or a protocol error the child is killed and reaped
/// and every later call fails at once ([`EmbedError::child_is_gone`] is true): spawn a new one.
/// An `{"error"}` reply to one request ([`EmbedError::Child`]) leaves it usable. Dropping it
/// kills and reaps the child.
///
/// The inherent [`embed`](EmbedChild::embed) takes a timeout; through the [`Embedder`] trait
/// (`Embedder::embed(&mut child, texts)`) the timeout set with
/// [`set_timeout`](EmbedChild::set_timeout) applies (default [`EmbedChild::DEFAULT_TIMEOUT`]).
#[derive(Debug)]
pub struct EmbedChild {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
    /// Bytes read from the child but not consumed yet.
    buf: Vec<u8>,
    ready: Ready,
    timeout: Duration,
    gone: bool,
}

impl EmbedChild {
    /// Timeout of [`Embedder::embed`] unless [`set_timeout`](EmbedChild::set_timeout) changed it.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

    /// Start `bin --model-dir model_dir` and wait for its ready line.
    pub fn spawn(
        bin: &Path,
        model_dir: &Path,
        ready_timeout: Duration,
    ) -> Result<EmbedChild, EmbedError> {
        let deadline = Instant::now() + ready_timeout;
        let mut command = Command::new(bin);
        command
            .arg("--model-dir")
            .arg(model_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        // ETXTBSY: the binary is still open for writing somewhere (an install copying it in, or
        // a descriptor another thread's fork holds until its exec): it clears in moments, so
        // try again a few times, backing off, before calling it an error.
        let mut backoff = Duration::from_millis(1);
        let mut child = loop {
            match command.spawn() {
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && backoff.as_millis() < 512 => {
                    std::thread::sleep(backoff);
                    backoff *= 2;
                }
                r => {
                    break r.map_err(|source| EmbedError::Spawn {
                        bin: bin.to_owned(),
                        source,
                    })?
                }
            }
        };
        let (stdin, stdout) = (
            child.stdin.take().expect("piped"),
            child.stdout.take().expect("piped"),
        );
        let mut this = EmbedChild {
            child,
            stdin: Some(stdin),
            stdout,
            buf: Vec::new(),
            ready: Ready {
                model: String::new(),
                dim: 0,
                max_tokens: 0,
            },
            timeout: Self::DEFAULT_TIMEOUT,
            gone: false,
        };
        let result = set_nonblocking(this.stdout.as_raw_fd())
            .and_then(|()| set_nonblocking(this.stdin.as_ref().expect("open").as_raw_fd()))
            .map_err(|e| EmbedError::io("setting up the pipes to nmem-embed", e))
            .and_then(|()| this.read_line(deadline, "load its model"))
            .and_then(|line| parse_ready(&line));
        match result {
            Ok(ready) => {
                this.ready = ready;
                Ok(this)
            }
            Err(EmbedError::Child(msg)) => {
                // It exits 1 after its error line; give it a moment so the status is its own.
                let status = this.stop(Duration::from_secs(1));
                Err(EmbedError::Child(format!("{msg} ({})", describe(status))))
            }
            Err(e) => {
                this.stop(Duration::ZERO);
                Err(e)
            }
        }
    }

    /// Vectors of `texts`, in order, all within `timeout`. More than [`MAX_TEXTS`] texts go as
    /// several requests under the same deadline. The child reads only the first 256 tokens of a
    /// text, so callers should cut very long texts first (a few KB each is plenty): a request
    /// line over [`MAX_REQUEST_BYTES`] is answered with an error.
    pub fn embed(
        &mut self,
        texts: &[&str],
        timeout: Duration,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        if self.gone {
            return Err(EmbedError::Protocol(
                "the embedding process has stopped; start a new one".into(),
            ));
        }
        let deadline = Instant::now() + timeout;
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(MAX_TEXTS) {
            match self.exchange(chunk, deadline) {
                Ok(vectors) => out.extend(vectors),
                Err(e) => {
                    if e.child_is_gone() {
                        self.stop(Duration::ZERO);
                    }
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    /// The model id from the ready line.
    pub fn model_id(&self) -> &str {
        &self.ready.model
    }

    /// Dimensions of the vectors.
    pub fn dim(&self) -> usize {
        self.ready.dim
    }

    /// The child's token limit per text.
    pub fn max_tokens(&self) -> usize {
        self.ready.max_tokens
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// False once the child has been stopped after a timeout or a protocol error.
    pub fn is_alive(&self) -> bool {
        !self.gone
    }

    /// The timeout of calls through [`Embedder::embed`].
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Stop the child the polite way: close its stdin (it exits 0), wait up to `grace`, then
    /// kill it. Returns its exit status, if it could be reaped.
    pub fn shutdown(mut self, grace: Duration) -> Option<ExitStatus> {
        self.stop(grace)
    }

    fn exchange(&mut self, texts: &[&str], deadline: Instant) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.write_all(request_line(texts).as_bytes(), deadline)?;
        let header = self.read_line(deadline, "answer")?;
        let (n, dim) = parse_reply_header(&header)?;
        if n != texts.len() || dim != self.ready.dim {
            return Err(EmbedError::Protocol(format!(
                "reply of {n} vectors of {dim} for {} texts of {}",
                texts.len(),
                self.ready.dim
            )));
        }
        let payload = self.read_exact(n * dim * 4, deadline)?;
        Ok(decode_vectors(&payload, n, dim))
    }

    fn write_all(&mut self, mut bytes: &[u8], deadline: Instant) -> Result<(), EmbedError> {
        let stdin = self
            .stdin
            .as_mut()
            .expect("stdin is open until the child stops");
        while !bytes.is_empty() {
            match stdin.write(bytes) {
                Ok(0) => return Err(EmbedError::Protocol("its input pipe is closed".into())),
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => wait_fd(
                    stdin.as_raw_fd(),
                    libc::POLLOUT,
                    deadline,
                    "read the request",
                )?,
                Err(e) => return Err(EmbedError::Protocol(format!("writing the request: {e}"))),
            }
        }
        Ok(())
    }

    /// Read more bytes into `buf`, waiting until the deadline.
    fn fill(&mut self, deadline: Instant, what: &'static str) -> Result<(), EmbedError> {
        let mut chunk = [0u8; 64 << 10];
        loop {
            match self.stdout.read(&mut chunk) {
                Ok(0) => {
                    let status = self.stop(Duration::from_millis(100));
                    return Err(EmbedError::Protocol(format!(
                        "it closed its output before it could {what} ({})",
                        describe(status)
                    )));
                }
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    wait_fd(self.stdout.as_raw_fd(), libc::POLLIN, deadline, what)?
                }
                Err(e) => return Err(EmbedError::Protocol(format!("reading its output: {e}"))),
            }
        }
    }

    fn read_line(&mut self, deadline: Instant, what: &'static str) -> Result<Vec<u8>, EmbedError> {
        let mut scanned = 0;
        loop {
            if let Some(i) = self.buf[scanned..].iter().position(|&b| b == b'\n') {
                let mut line: Vec<u8> = self.buf.drain(..scanned + i + 1).collect();
                line.pop();
                return Ok(line);
            }
            scanned = self.buf.len();
            if scanned > MAX_REPLY_LINE_BYTES {
                return Err(EmbedError::Protocol(format!(
                    "a line longer than {MAX_REPLY_LINE_BYTES} bytes"
                )));
            }
            self.fill(deadline, what)?;
        }
    }

    fn read_exact(&mut self, n: usize, deadline: Instant) -> Result<Vec<u8>, EmbedError> {
        while self.buf.len() < n {
            self.fill(deadline, "send the vectors")?;
        }
        Ok(self.buf.drain(..n).collect())
    }

    /// Close stdin, wait up to `grace` for the child to exit, kill it if it has not, reap it.
    fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        self.gone = true;
        self.stdin = None;
        let deadline = Instant::now() + grace;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2))
                }
                Ok(None) => break,
                Err(_) => return None,
            }
        }
        let _ = self.child.kill();
        self.child.wait().ok()
    }
}

impl Drop for EmbedChild {
    fn drop(&mut self) {
        if !self.gone {
            self.stop(Duration::ZERO);
        }
    }
}

impl Embedder for EmbedChild {
    fn model_id(&self) -> &str {
        EmbedChild::model_id(self)
    }

    fn dim(&self) -> usize {
        EmbedChild::dim(self)
    }

    fn embed(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let timeout = self.timeout;
        EmbedChild::embed(self, texts, timeout)
    }
}

fn describe(status: Option<ExitStatus>) -> String {
    match status {
        Some(s) => s.to_string(),
        None => "exit status unknown".into(),
    }
}

fn set_nonblocking(fd: i32) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor this process owns; no memory is passed.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Wait until `fd` is ready for `events` (or has hung up), or fail at the deadline.
fn wait_fd(
    fd: i32,
    events: libc::c_short,
    deadline: Instant,
    what: &'static str,
) -> Result<(), EmbedError> {
    let started = Instant::now();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(EmbedError::Timeout {
                what,
                after: started.elapsed(),
            });
        }
        // Round up so a sub-millisecond remainder still waits instead of spinning.
        let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        let mut pfd = libc::pollfd {
            fd,
            events,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        if r > 0 {
            return Ok(());
        }
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(EmbedError::Protocol(format!("poll: {e}")));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip() {
        let ready = Ready {
            model: "all-MiniLM-L6-v2".into(),
            dim: 384,
            max_tokens: 256,
        };
        let line = ready_line(&ready);
        assert_eq!(
            line,
            "{\"ready\":true,\"model\":\"all-MiniLM-L6-v2\",\"dim\":384,\"max_tokens\":256}\n"
        );
        assert_eq!(reply_header(2, 384), "{\"n\":2,\"dim\":384}\n");
        assert_eq!(error_line("a \"b\"\n"), "{\"error\":\"a \\\"b\\\"\\n\"}\n");
        assert_eq!(request_line(&["x", "y"]), "{\"texts\":[\"x\",\"y\"]}\n");
        assert_eq!(request_line(&[]), "{\"texts\":[]}\n");
        assert_eq!(parse_ready(line.trim_end().as_bytes()).unwrap(), ready);
        let req = request_line(&["a \"quoted\"\nline", ""]);
        assert!(req.ends_with('\n') && req.matches('\n').count() == 1);
        assert_eq!(
            parse_request(req.trim_end().as_bytes()).unwrap(),
            vec!["a \"quoted\"\nline", ""]
        );
        assert_eq!(
            parse_reply_header(reply_header(3, 384).trim_end().as_bytes()).unwrap(),
            (3, 384)
        );
    }

    #[test]
    fn errors_are_child_errors() {
        let line = error_line("no such folder");
        match parse_ready(line.trim_end().as_bytes()) {
            Err(EmbedError::Child(m)) => assert_eq!(m, "no such folder"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse_reply_header(br#"{"error":"x"}"#),
            Err(EmbedError::Child(_))
        ));
        assert!(matches!(
            parse_reply_header(b"garbage"),
            Err(EmbedError::Protocol(_))
        ));
        assert!(matches!(
            parse_ready(br#"{"ready":true,"model":"m","dim":0,"max_tokens":1}"#),
            Err(EmbedError::Protocol(_))
        ));
    }

    #[test]
    fn bad_requests_are_refused() {
        assert!(parse_request(b"{").is_err());
        assert!(parse_request(br#"{"text":["a"]}"#).is_err());
        assert!(parse_request(br#"{"texts":["a",1]}"#).is_err());
        let many: Vec<&str> = vec!["x"; MAX_TEXTS + 1];
        assert!(parse_request(request_line(&many).trim_end().as_bytes())
            .unwrap_err()
            .contains("at most 64"));
        assert_eq!(
            parse_request(br#"{"texts":[]}"#).unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn vectors_round_trip() {
        let vectors = vec![vec![1.0f32, -0.5, 0.25], vec![f32::MIN_POSITIVE, 0.0, -1.0]];
        let mut out = Vec::new();
        write_reply(&mut out, &vectors, 3).unwrap();
        let nl = out.iter().position(|&b| b == b'\n').unwrap();
        assert_eq!(parse_reply_header(&out[..nl]).unwrap(), (2, 3));
        assert_eq!(decode_vectors(&out[nl + 1..], 2, 3), vectors);
        assert!(write_reply(&mut Vec::new(), &vectors, 4).is_err());
    }

    #[test]
    fn bounded_lines() {
        let mut r = io::BufReader::with_capacity(4, &b"short\nway too long a line\nlast"[..]);
        assert_eq!(
            read_line_bounded(&mut r, 10).unwrap(),
            Line::Line(b"short".to_vec())
        );
        assert_eq!(read_line_bounded(&mut r, 10).unwrap(), Line::TooLong);
        assert_eq!(
            read_line_bounded(&mut r, 10).unwrap(),
            Line::Line(b"last".to_vec())
        );
        assert_eq!(read_line_bounded(&mut r, 10).unwrap(), Line::Eof);
    }

    #[test]
    fn missing_binary_is_a_spawn_error() {
        let err = EmbedChild::spawn(
            Path::new("/nonexistent/nmem-embed"),
            Path::new("/tmp"),
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(matches!(err, EmbedError::Spawn { .. }), "{err}");
        assert!(err.child_is_gone());
    }

    /// A stand-in for nmem-embed: a shell script that ignores its arguments.
    fn fake_child(name: &str, script: &str) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("nmem-embed-protocol-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
        path
    }

    const READY: &str = r#"echo '{"ready":true,"model":"fake","dim":2,"max_tokens":8}'"#;

    fn process_exists(pid: u32) -> bool {
        // SAFETY: signal 0 only checks that the process exists.
        unsafe { libc::kill(pid as i32, 0) == 0 }
    }

    #[test]
    fn a_child_that_never_gets_ready_times_out() {
        let bin = fake_child("silent", "exec sleep 30");
        let started = Instant::now();
        let err = EmbedChild::spawn(&bin, Path::new("/x"), Duration::from_millis(200)).unwrap_err();
        assert!(matches!(err, EmbedError::Timeout { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn a_child_that_hangs_on_a_request_is_killed() {
        let bin = fake_child("hangs", &format!("{READY}\nexec sleep 30"));
        let mut child = EmbedChild::spawn(&bin, Path::new("/x"), Duration::from_secs(10)).unwrap();
        assert_eq!(
            (child.model_id(), child.dim(), child.max_tokens()),
            ("fake", 2, 8)
        );
        let pid = child.pid();
        let err = child.embed(&["a"], Duration::from_millis(200)).unwrap_err();
        assert!(matches!(err, EmbedError::Timeout { .. }), "{err}");
        assert!(!child.is_alive());
        assert!(!process_exists(pid), "the child was killed and reaped");
        assert!(child
            .embed(&["a"], Duration::from_secs(1))
            .unwrap_err()
            .child_is_gone());
    }

    #[test]
    fn a_child_that_dies_mid_reply_is_an_error() {
        let bin = fake_child(
            "dies",
            &format!("{READY}\nread line\nprintf '{{\"n\":1,\"dim\":2}}\\n\\000\\000'\nexit 3"),
        );
        let mut child = EmbedChild::spawn(&bin, Path::new("/x"), Duration::from_secs(10)).unwrap();
        let err = child.embed(&["a"], Duration::from_secs(10)).unwrap_err();
        assert!(matches!(err, EmbedError::Protocol(_)), "{err}");
        assert!(err.to_string().contains("exit status: 3"), "{err}");
    }

    #[test]
    fn a_reply_of_the_wrong_size_is_a_protocol_error() {
        let bin = fake_child(
            "miscounts",
            &format!("{READY}\nread line\necho '{{\"n\":5,\"dim\":2}}'\nexec sleep 30"),
        );
        let mut child = EmbedChild::spawn(&bin, Path::new("/x"), Duration::from_secs(10)).unwrap();
        let err = child.embed(&["a"], Duration::from_secs(10)).unwrap_err();
        assert!(matches!(err, EmbedError::Protocol(_)), "{err}");
        assert!(!child.is_alive());
    }

    #[test]
    fn an_error_reply_leaves_the_child_usable() {
        let script = format!(
            "{READY}\nread line\necho '{{\"error\":\"too many\"}}'\nread line\nprintf '{{\"n\":1,\"dim\":2}}\\n\\000\\000\\200\\077\\000\\000\\000\\000'\nread line\nexit 0"
        );
        let bin = fake_child("recovers", &script);
        let mut child = EmbedChild::spawn(&bin, Path::new("/x"), Duration::from_secs(10)).unwrap();
        let err = child.embed(&["a"], Duration::from_secs(10)).unwrap_err();
        assert!(
            matches!(&err, EmbedError::Child(m) if m == "too many"),
            "{err}"
        );
        assert!(child.is_alive());
        assert_eq!(
            child.embed(&["b"], Duration::from_secs(10)).unwrap(),
            vec![vec![1.0, 0.0]]
        );
        assert!(child.shutdown(Duration::from_secs(10)).unwrap().success());
    }

    #[test]
    fn a_binary_held_open_for_writing_is_retried_then_reported() {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = std::env::temp_dir().join(format!("nmem-embed-busy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("busy");
        // Still open for writing (as while an install copies it in): exec fails with ETXTBSY.
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o700)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(
            &mut f,
            format!("#!/bin/sh\n{READY}\nexec cat >/dev/null\n").as_bytes(),
        )
        .unwrap();
        let err = EmbedChild::spawn(&path, Path::new("/x"), Duration::from_secs(10)).unwrap_err();
        assert!(
            matches!(&err, EmbedError::Spawn { source, .. } if source.raw_os_error() == Some(libc::ETXTBSY)),
            "{err}"
        );
        // Closed: the same binary starts.
        drop(f);
        let child = EmbedChild::spawn(&path, Path::new("/x"), Duration::from_secs(10)).unwrap();
        drop(child);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_start_error_is_reported_with_the_exit_status() {
        let bin = fake_child("refuses", "echo '{\"error\":\"no model here\"}'\nexit 1");
        let err = EmbedChild::spawn(&bin, Path::new("/x"), Duration::from_secs(10)).unwrap_err();
        assert!(
            matches!(&err, EmbedError::Child(m) if m.contains("no model here") && m.contains("exit status: 1")),
            "{err}"
        );
    }
}
