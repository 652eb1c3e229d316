//! The child's side of `nmemd`'s embedding protocol, shared by every embedder binary
//! (`nmem-embed`: candle, fp32; `nmem-embed-onnx`: ONNX Runtime, int8): arguments, serving
//! [`protocol`] on stdin/stdout, `--embed` and `--bench`. A binary supplies its help text and how
//! to load its model ([`ChildModel`]); everything a parent or a person sees is the same.

use std::ffi::OsString;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::protocol::{self, Line, Ready};
use crate::{EmbedError, Embedder};

/// An embedder a child process can serve: vectors, and the tokens behind them.
pub trait ChildModel: Embedder {
    /// Most tokens per text, [CLS] and [SEP] included; longer texts are truncated.
    fn max_tokens(&self) -> usize;
    /// Token ids of `text` as the model sees them.
    fn tokenize(&self, text: &str) -> Result<Vec<u32>, EmbedError>;
}

/// The protocol and options every embedder binary shares; each binary's help starts with its
/// own lines and ends with this.
pub const HELP_COMMON: &str = "\
PROTOCOL (one JSON object per line; vectors as raw little-endian f32):
    on start   -> {\"ready\":true,\"model\":ID,\"dim\":D,\"max_tokens\":T}  or  {\"error\":MSG} and exit 1
    {\"texts\":[...]} (at most 64)  ->  {\"n\":N,\"dim\":D} then N*D f32  or  {\"error\":MSG}
    end of input -> exit 0
";

enum Mode {
    Serve,
    Embed(String),
    Bench,
}

struct Args {
    model_dir: PathBuf,
    mode: Mode,
    threads: Option<usize>,
}

fn parse_args(
    name: &str,
    help: &str,
    mut args: impl Iterator<Item = OsString>,
) -> Result<Option<Args>, String> {
    let (mut model_dir, mut mode, mut threads) = (None, Mode::Serve, None);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.to_str() {
            Some("-h" | "--help") => {
                print!("{help}{HELP_COMMON}");
                return Ok(None);
            }
            Some("-V" | "--version") => {
                println!("{name} {}", env!("CARGO_PKG_VERSION"));
                return Ok(None);
            }
            Some("--model-dir") => model_dir = Some(PathBuf::from(value("--model-dir")?)),
            Some("--embed") => {
                let text = value("--embed")?
                    .into_string()
                    .map_err(|_| "--embed: text is not UTF-8".to_owned())?;
                mode = Mode::Embed(text);
            }
            Some("--bench") => mode = Mode::Bench,
            Some("--threads") => {
                let n = value("--threads")?;
                let n = n
                    .to_str()
                    .and_then(|s| s.parse().ok())
                    .filter(|&n: &usize| n > 0);
                threads = Some(n.ok_or("--threads needs a positive number")?);
            }
            _ => return Err(format!("unknown argument {arg:?}; see {name} --help")),
        }
    }
    let model_dir =
        model_dir.ok_or_else(|| format!("--model-dir DIR is required; see {name} --help"))?;
    Ok(Some(Args {
        model_dir,
        mode,
        threads,
    }))
}

/// The whole program of an embedder binary: arguments, then serve, `--embed` or `--bench`.
/// `load` gets the model folder and the number of compute threads (`--threads`, else
/// `RAYON_NUM_THREADS`, else 1) before any other thread exists.
pub fn main<M: ChildModel>(
    name: &str,
    help: &str,
    load: impl FnOnce(&Path, usize) -> Result<M, EmbedError>,
) -> ExitCode {
    let args = match parse_args(name, help, std::env::args_os().skip(1)) {
        Ok(Some(args)) => args,
        Ok(None) => return ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("{name}: {msg}");
            return ExitCode::from(2);
        }
    };
    let threads = args.threads.unwrap_or_else(|| {
        std::env::var("RAYON_NUM_THREADS")
            .ok()
            .and_then(|s| s.parse().ok())
            .filter(|&n: &usize| n > 0)
            .unwrap_or(1)
    });

    let loaded = Instant::now();
    let result = load(&args.model_dir, threads);
    let load_time = loaded.elapsed();
    match args.mode {
        Mode::Serve => serve(name, result),
        Mode::Embed(text) => report(
            name,
            result.and_then(|mut e| print_embedding(&mut e, &text)),
        ),
        Mode::Bench => report(
            name,
            result.and_then(|mut e| bench(&mut e, load_time, threads)),
        ),
    }
}

fn report(name: &str, result: Result<(), EmbedError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The child side of the protocol.
fn serve<M: ChildModel>(name: &str, loaded: Result<M, EmbedError>) -> ExitCode {
    let mut out = BufWriter::new(io::stdout().lock());
    let mut embedder = match loaded {
        Ok(e) => e,
        Err(e) => {
            eprintln!("{name}: {e}");
            let _ = out
                .write_all(protocol::error_line(&e.to_string()).as_bytes())
                .and_then(|()| out.flush());
            return ExitCode::FAILURE;
        }
    };
    let ready = Ready {
        model: embedder.model_id().to_owned(),
        dim: embedder.dim(),
        max_tokens: embedder.max_tokens(),
    };
    if write_flush(&mut out, protocol::ready_line(&ready).as_bytes()).is_err() {
        return ExitCode::FAILURE;
    }
    let mut input = io::stdin().lock();
    loop {
        let reply = match protocol::read_line_bounded(&mut input, protocol::MAX_REQUEST_BYTES) {
            Ok(Line::Eof) => return ExitCode::SUCCESS,
            Ok(Line::TooLong) => Err(format!(
                "request longer than {} bytes",
                protocol::MAX_REQUEST_BYTES
            )),
            Ok(Line::Line(line)) => protocol::parse_request(&line).and_then(|texts| {
                let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
                embedder.embed(&texts).map_err(|e| e.to_string())
            }),
            Err(e) => {
                eprintln!("{name}: reading stdin: {e}");
                return ExitCode::FAILURE;
            }
        };
        let written = match reply {
            Ok(vectors) => {
                protocol::write_reply(&mut out, &vectors, embedder.dim()).and_then(|()| out.flush())
            }
            Err(msg) => write_flush(&mut out, protocol::error_line(&msg).as_bytes()),
        };
        if let Err(e) = written {
            // The parent is gone or broke the pipe: nobody is left to answer.
            eprintln!("{name}: writing stdout: {e}");
            return ExitCode::FAILURE;
        }
    }
}

fn write_flush(out: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    out.write_all(bytes)?;
    out.flush()
}

fn print_embedding<M: ChildModel>(embedder: &mut M, text: &str) -> Result<(), EmbedError> {
    let ids = embedder.tokenize(text)?;
    let vector = embedder.embed(&[text])?.remove(0);
    let v =
        json!({"model": embedder.model_id(), "dim": embedder.dim(), "ids": ids, "vector": vector});
    println!("{v}");
    Ok(())
}

// -------------------------------------------------------------------------------- --bench

// 7 and 26 tokens with all-MiniLM-L6-v2's tokenizer, [CLS] and [SEP] included.
const QUERY: &str = "the nightly export crashed again";
const DOCUMENT: &str =
    "cargo test failed in the scheduled parquet export job: the writer timed out \
                        after 30 seconds while flushing the last row groups";
const LONG_WORDS: &str =
    "the daemon reads hook events from the agent, redacts credentials, stores \
    observations in sqlite with a full text index, and answers search requests over a unix socket; \
    when the database is busy it spools events to files and drains them later in order";

/// Latency and throughput of this model on this machine, and this process's memory. Wall time
/// and CPU time (user + system, all threads) are both printed: on a busy machine the wall
/// time includes waiting for a core, the CPU time does not.
fn bench<M: ChildModel>(
    embedder: &mut M,
    load_time: Duration,
    threads: usize,
) -> Result<(), EmbedError> {
    println!(
        "model {} ({} dims, {} max tokens), {threads} thread(s)",
        embedder.model_id(),
        embedder.dim(),
        embedder.max_tokens()
    );
    println!("load: {:.0} ms, RSS after load: {}", ms(load_time), rss());

    for (name, text) in [("query", QUERY), ("document", DOCUMENT)] {
        let tokens = embedder.tokenize(text)?.len();
        let runs = time_runs(30, || embedder.embed(&[text]).map(drop))?;
        println!("{name} ({tokens} tokens): {}", runs.summary());
    }

    // 32 different texts of about 60 tokens each.
    let words: Vec<&str> = LONG_WORDS.split(' ').collect();
    let texts: Vec<String> = (0..32)
        .map(|i| {
            let mut w = words.clone();
            w.rotate_left(i % words.len());
            format!("{} (case {i})", w.join(" "))
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let lens: Vec<usize> = refs
        .iter()
        .map(|t| embedder.tokenize(t).map(|ids| ids.len()))
        .collect::<Result<_, _>>()?;
    let mean_len = lens.iter().sum::<usize>() as f64 / lens.len() as f64;
    let runs = time_runs(5, || embedder.embed(&refs).map(drop))?;
    println!(
        "batch of 32 ({mean_len:.0} tokens on average): {}; {:.0} texts/s by wall time, {:.0} per CPU second",
        runs.summary(),
        32.0 / runs.median_wall().as_secs_f64(),
        32.0 / runs.median_cpu().as_secs_f64()
    );

    // Every text above was embedded (3 warm-up + 30 timed) * 2 + (3 + 5) * 32 times; then 100
    // more, one by one, each different.
    for (i, text) in texts.iter().cycle().take(100).enumerate() {
        embedder.embed(&[&format!("{text} #{i}")])?;
    }
    println!(
        "RSS after {} more embeddings ({} in all): {}",
        100,
        33 * 2 + 8 * 32 + 100,
        rss()
    );
    Ok(())
}

/// Wall and CPU durations of timed runs.
struct Runs {
    wall: Vec<Duration>,
    cpu: Vec<Duration>,
}

impl Runs {
    fn median_wall(&self) -> Duration {
        self.wall[self.wall.len() / 2]
    }

    fn median_cpu(&self) -> Duration {
        self.cpu[self.cpu.len() / 2]
    }

    fn summary(&self) -> String {
        format!(
            "median {:.2} ms (min {:.2}, max {:.2}), CPU median {:.2} ms, over {} runs",
            ms(self.median_wall()),
            ms(self.wall[0]),
            ms(self.wall[self.wall.len() - 1]),
            ms(self.median_cpu()),
            self.wall.len()
        )
    }
}

/// `runs` calls after 3 warm-up calls, each timed.
fn time_runs(
    runs: usize,
    mut f: impl FnMut() -> Result<(), EmbedError>,
) -> Result<Runs, EmbedError> {
    for _ in 0..3 {
        f()?;
    }
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let (start, start_cpu) = (Instant::now(), cpu_time());
        f()?;
        wall.push(start.elapsed());
        cpu.push(cpu_time().saturating_sub(start_cpu));
    }
    wall.sort();
    cpu.sort();
    Ok(Runs { wall, cpu })
}

/// User + system time of this process so far.
fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct it is given and nothing else.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The resident size now, from `/proc` (Linux only).
#[cfg(target_os = "linux")]
fn rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .map(|l| l[6..].trim().to_owned())
        })
        .unwrap_or_else(|| "unknown (no /proc)".into())
}

/// No `/proc` on macOS: the peak resident size from `getrusage` (bytes there), said as a peak.
#[cfg(not(target_os = "linux"))]
fn rss() -> String {
    // SAFETY: getrusage fills the struct it is given and nothing else.
    let peak = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage.ru_maxrss as u64
    };
    format!("{} kB (peak)", peak / 1024)
}
