from ._common import checks, commit, diffstat, orient, status

CONFIG_RS = """use serde::Deserialize;
use std::path::Path;

#[derive(Debug, Deserialize)]
pub struct Config {
    pub bucket: String,
    pub endpoint: Option<String>,
    pub prefix: Option<String>,
}

pub fn load(path: &Path) -> anyhow::Result<Config> {
    let text = std::fs::read_to_string(path)?;
    let table: toml::Table = text.parse()?;
    let remote = table.get("remote").unwrap();
    let cfg: Config = remote.clone().try_into()?;
    Ok(cfg)
}
"""

HTTP_RS = """use anyhow::Context;
use reqwest::blocking::Client;
use std::time::Duration;

pub fn client() -> anyhow::Result<Client> {
    Client::builder()
        .timeout(Duration::from_secs(60))
        .user_agent(concat!("rivet/", env!("CARGO_PKG_VERSION")))
        .build()
        .context("building HTTP client")
}

pub fn put(client: &Client, url: &str, body: Vec<u8>) -> anyhow::Result<()> {
    let res = client.put(url).body(body).send()?;
    anyhow::ensure!(res.status().is_success(), "PUT {url}: {}", res.status());
    Ok(())
}
"""

CARGO = """[package]
name = "rivet"
version = "0.4.2"
edition = "2021"

[dependencies]
anyhow = "1"
clap = { version = "4.5", features = ["derive"] }
reqwest = { version = "0.12", features = ["blocking", "rustls-tls"], default-features = false }
serde = { version = "1", features = ["derive"] }
toml = "0.8"
indicatif = "0.17"
"""

UPLOAD_RS = """use crate::config::Config;
use std::path::Path;

pub const DEFAULT_PARALLEL: usize = 4;

pub fn key_for(cfg: &Config, root: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(root).unwrap_or(file);
    let prefix = cfg.prefix.as_deref().unwrap_or("");
    format!("{}{}", prefix, rel.display())
}
"""

MAIN_RS = """use clap::Parser;

mod config;
mod http;
mod upload;

#[derive(Parser)]
#[command(name = "rivet", version, about = "Upload release artifacts to S3-compatible storage")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    Init,
    Push { dir: std::path::PathBuf },
}
"""


def build(ds):
    h = ds.history("h02", "claude-code", "/home/dev/src/rivet-cli",
                   "Rust CLI (rivet) that uploads release artifacts to S3-compatible storage: a config panic, "
                   "reqwest replaced by ureq, parallel uploads, Windows object keys, and a release.",
                   start="2026-02-16T08:00:00Z", model="claude-sonnet-4-6")
    h.commits = [("2b7d4e1", "Add init and push subcommands"), ("88ac0f5", "Read bucket/endpoint from rivet.toml"),
                 ("0d93b6a", "Release 0.4.2")]

    # ---- s1: panic on empty config
    s = h.session("2026-02-16T19:42:10Z", mode="default")
    orient(s)
    s.prompt("running `rivet push dist/` right after `rivet init` panics: thread 'main' panicked at src/config.rs:15:40: "
             "called `Option::unwrap()` on a `None` value. init writes an empty rivet.toml. make it a proper error")
    s.read("src/config.rs", CONFIG_RS)
    s.bash("cat rivet.toml; echo '---'; RUST_BACKTRACE=1 cargo run -q -- push dist/ 2>&1 | head -8",
           "# rivet configuration\n---\nthread 'main' panicked at src/config.rs:15:40:\ncalled `Option::unwrap()` on a `None` value\n"
           "stack backtrace:\n   0: rust_begin_unwind\n   1: core::panicking::panic_fmt\n   2: core::panicking::panic\n"
           "   3: core::option::unwrap_failed\n   4: rivet::config::load\n", desc="Reproduce the panic", secs=4.1)
    s.read("src/main.rs", MAIN_RS)
    e_cfgfix = s.edit("src/config.rs", """    let remote = table.get("remote").unwrap();
    let cfg: Config = remote.clone().try_into()?;""", """    let remote = table.get("remote").with_context(|| {
        format!("{} has no [remote] table; set bucket = \\"...\\" under [remote]", path.display())
    })?;
    let cfg: Config = remote
        .clone()
        .try_into()
        .with_context(|| format!("invalid [remote] table in {}", path.display()))?;""")
    s.edit("src/config.rs", "use serde::Deserialize;", "use anyhow::Context;\nuse serde::Deserialize;")
    s.edit("src/config.rs", """    Ok(cfg)
}
""", """    Ok(cfg)
}

#[cfg(test)]
mod tests {
    #[test]
    fn empty_config_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rivet.toml");
        std::fs::write(&path, "# rivet configuration\\n").unwrap();
        let err = super::load(&path).unwrap_err();
        assert!(err.to_string().contains("no [remote] table"));
    }
}
""")
    e_tempfile = s.bash("cargo test config", "", code=101, stderr=(
        "   Compiling rivet v0.4.2 (/home/dev/src/rivet-cli)\nerror[E0433]: failed to resolve: use of undeclared crate or module `tempfile`\n"
        "  --> src/config.rs:29:19\n   |\n29 |         let dir = tempfile::tempdir().unwrap();\n   |                   ^^^^^^^^ use of undeclared crate or module `tempfile`\n\n"
        "For more information about this error, try `rustc --explain E0433`.\nerror: could not compile `rivet` (bin \"rivet\" test) due to 1 previous error\n"),
        desc="Run config tests", secs=9.3)
    s.bash("cargo add --dev tempfile", "    Updating crates.io index\n      Adding tempfile v3.15.0 to dev-dependencies\n",
           desc="Add tempfile as a dev-dependency", secs=2.2)
    s.bash("cargo test config", "", stderr="   Compiling rivet v0.4.2 (/home/dev/src/rivet-cli)\n    Finished `test` profile [unoptimized + debuginfo] target(s) in 5.02s\n"
           "     Running unittests src/main.rs (target/debug/deps/rivet-9f1e2d3c4b5a6978)\n",
           desc="Run config tests", secs=6.0)
    s.bash("cargo run -q -- push dist/", "", code=1, stderr="Error: rivet.toml has no [remote] table; set bucket = \"...\" under [remote]\n",
           desc="Check the new message", secs=1.4)
    s.stop("`config::load` no longer unwraps: a missing [remote] table is now an anyhow error naming the file and "
           "what to add, and an invalid table says so too. Added a unit test with an empty rivet.toml (tempfile as a "
           "dev-dependency). `rivet push` after `rivet init` now exits 1 with a readable message.")
    s.prompt("commit")
    commit(s, "config: error instead of panic on a missing [remote] table", ["src/config.rs", "Cargo.toml", "Cargo.lock"],
           "a61f0d3", 24, 2)
    s.stop("Committed a61f0d3.")
    s.end()

    # ---- s2: reqwest -> ureq
    s = h.session("2026-02-18T20:15:33Z", mode="acceptEdits")
    orient(s)
    s.prompt("the release binary is almost 10MB and a clean build takes forever. we only do a handful of blocking PUTs. "
             "can we drop reqwest? look at what it pulls in first")
    s.read("Cargo.toml", CARGO)
    s.bash("cargo tree -e normal --depth 1 -i tokio", "tokio v1.43.0\n\u251c\u2500\u2500 hyper v1.5.2\n\u251c\u2500\u2500 hyper-util v0.1.10\n"
           "\u2514\u2500\u2500 reqwest v0.12.12\n    \u2514\u2500\u2500 rivet v0.4.2 (/home/dev/src/rivet-cli)\n", desc="Who pulls in tokio")
    s.bash("ls -l target/release/rivet && cargo build --release --timings 2>&1 | tail -2",
           "-rwxr-xr-x 2 dev dev 9874312 Feb 18 20:16 target/release/rivet\n    Finished `release` profile [optimized] target(s) in 1m 38s\n"
           "      Timing report saved to target/cargo-timings/cargo-timing-20260218T201702Z.html\n", desc="Size and build time", secs=99.0)
    s.web_search("ureq 3 put body rustls example", [("ureq - Rust", "https://docs.rs/ureq/latest/ureq/"),
                                                      ("algesten/ureq: A simple, safe HTTP client", "https://github.com/algesten/ureq")],
                 "ureq 3.x is a blocking client with no async runtime; `ureq::put(url).send(body)` returns Result<Response>; "
                 "rustls is the default TLS; configure timeouts via Agent::config_builder().timeout_global().")
    s.read("src/http.rs", HTTP_RS)
    e_ureq_write = s.write("src/http.rs", """use anyhow::Context;
use std::time::Duration;
use ureq::Agent;

pub fn client() -> Agent {
    Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(60)))
        .user_agent(concat!("rivet/", env!("CARGO_PKG_VERSION")))
        .build()
        .into()
}

pub fn put(agent: &Agent, url: &str, body: &[u8]) -> anyhow::Result<()> {
    agent
        .put(url)
        .send(body)
        .with_context(|| format!("PUT {url}"))?;
    Ok(())
}
""")
    e_cargo_ureq = s.edit("Cargo.toml", """reqwest = { version = "0.12", features = ["blocking", "rustls-tls"], default-features = false }""",
                          'ureq = "3"')
    e_build_err = s.bash("cargo build", "", code=101, stderr=(
        "   Compiling rivet v0.4.2 (/home/dev/src/rivet-cli)\nerror[E0433]: failed to resolve: use of undeclared crate or module `reqwest`\n"
        " --> src/upload.rs:3:5\n  |\n3 | use reqwest::blocking::Client;\n  |     ^^^^^^^ use of undeclared crate or module `reqwest`\n\n"
        "error[E0308]: mismatched types\n  --> src/upload.rs:41:32\n   |\n41 |         http::put(&client, &url, bytes)?;\n"
        "   |                                  ^^^^^ expected `&[u8]`, found `Vec<u8>`\n\nerror: could not compile `rivet` (bin \"rivet\") due to 2 previous errors\n"),
        desc="Build", secs=14.2)
    s.read("src/upload.rs", UPLOAD_RS + """
use reqwest::blocking::Client;

pub fn push_one(client: &Client, cfg: &Config, url: String, bytes: Vec<u8>) -> anyhow::Result<()> {
    let _ = cfg;
    http::put(&client, &url, bytes)?;
    Ok(())
}
""")
    s.edit("src/upload.rs", """use reqwest::blocking::Client;

pub fn push_one(client: &Client, cfg: &Config, url: String, bytes: Vec<u8>) -> anyhow::Result<()> {
    let _ = cfg;
    http::put(&client, &url, bytes)?;""", """use crate::http;
use ureq::Agent;

pub fn push_one(agent: &Agent, cfg: &Config, url: String, bytes: Vec<u8>) -> anyhow::Result<()> {
    let _ = cfg;
    http::put(agent, &url, &bytes)?;""")
    s.bash("cargo build --release 2>&1 | tail -1 && ls -l target/release/rivet",
           "    Finished `release` profile [optimized] target(s) in 41.87s\n-rwxr-xr-x 2 dev dev 4127096 Feb 18 20:31 target/release/rivet\n",
           desc="Release build", secs=42.5)
    e_clippy = s.bash("cargo clippy --all-targets -- -D warnings", "", code=101, stderr=(
        "    Checking rivet v0.4.2 (/home/dev/src/rivet-cli)\nerror: this expression creates a reference which is immediately dereferenced by the compiler\n"
        "  --> src/upload.rs:39:24\n   |\n39 |         http::put(agent, &url, &bytes)?;\n   |                          ^^^^ help: change this to: `url`\n"
        "   |\n   = note: `-D clippy::needless-borrow` implied by `-D warnings`\n\nerror: could not compile `rivet` (bin \"rivet\") due to 1 previous error\n"),
        desc="Clippy", secs=8.0)
    s.edit("src/upload.rs", "    let _ = cfg;\n    http::put(agent, &url, &bytes)?;", "    let _ = cfg;\n    http::put(agent, url.as_str(), &bytes)?;")
    s.bash("cargo clippy --all-targets -- -D warnings", "", stderr="    Checking rivet v0.4.2 (/home/dev/src/rivet-cli)\n    Finished `dev` profile [unoptimized + debuginfo] target(s) in 2.31s\n",
           desc="Clippy", secs=3.0)
    e_dec_ureq = s.stop("Replaced reqwest with ureq 3: reqwest's blocking client still drags in tokio and hyper, which "
                        "is most of our compile time, while ureq is a plain blocking client with rustls. Release binary "
                        "went from 9.9 MB to 4.1 MB and a clean release build from 1m38s to 42s. src/http.rs now builds "
                        "a ureq Agent with a 60 s global timeout; clippy is clean.")
    s.prompt("nice, commit it")
    commit(s, "Replace reqwest with ureq (4.1 MB binary, no tokio)", ["Cargo.toml", "Cargo.lock", "src/http.rs", "src/upload.rs"],
           "e3b82c4", 31, 46)
    s.stop("Committed as e3b82c4.")
    s.end()

    # ---- s3: parallel uploads
    s = h.session("2026-02-24T18:05:00Z", mode="acceptEdits")
    orient(s)
    s.prompt("add a --parallel N flag to push so we upload several files at once. default 4. show one progress bar per worker")
    s.read("src/main.rs", MAIN_RS)
    s.read("src/upload.rs")
    s.edit("src/main.rs", """    Push { dir: std::path::PathBuf },""", """    Push {
        dir: std::path::PathBuf,
        /// How many files to upload at once.
        #[arg(long, short = 'j', default_value_t = upload::DEFAULT_PARALLEL)]
        parallel: usize,
    },""")
    e_pool = s.edit("src/upload.rs", """pub const DEFAULT_PARALLEL: usize = 4;
""", """pub const DEFAULT_PARALLEL: usize = 4;

/// Upload files with `parallel` scoped worker threads pulling from a shared queue.
pub fn push_all(agent: &ureq::Agent, cfg: &Config, root: &Path, files: Vec<std::path::PathBuf>, parallel: usize)
    -> anyhow::Result<()> {
    let queue = std::sync::Mutex::new(files.into_iter());
    let bars = indicatif::MultiProgress::new();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..parallel.max(1))
            .map(|_| {
                let bar = bars.add(indicatif::ProgressBar::new_spinner());
                scope.spawn(|| worker(agent, cfg, root, &queue, bar))
            })
            .collect();
        handles.into_iter().try_for_each(|h| h.join().expect("worker panicked"))
    })
}
""")
    e_testfail = s.bash("cargo test", "", code=101, stderr=(
        "    Finished `test` profile [unoptimized + debuginfo] target(s) in 4.40s\n     Running unittests src/main.rs\n\nrunning 6 tests\n"
        "test config::tests::empty_config_is_an_error_not_a_panic ... ok\ntest upload::tests::key_has_prefix ... ok\n"
        "test upload::tests::push_all_uploads_each_file_once ... FAILED\n\nfailures:\n\n---- upload::tests::push_all_uploads_each_file_once stdout ----\n"
        "thread 'upload::tests::push_all_uploads_each_file_once' panicked at src/upload.rs:88:9:\nassertion `left == right` failed\n"
        "  left: [\"a.tar.gz\", \"b.tar.gz\", \"b.tar.gz\", \"c.tar.gz\"]\n right: [\"a.tar.gz\", \"b.tar.gz\", \"c.tar.gz\"]\n\n"
        "test result: FAILED. 5 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.31s\n"), desc="Run tests", secs=6.2)
    s.grep("fn worker", "src/upload.rs:38:fn worker(agent: &ureq::Agent, cfg: &Config, root: &Path, queue: &Mutex<impl Iterator<Item = PathBuf>>, bar: ProgressBar)\n",
           path="src")
    h.seed("src/upload.rs", h.files["src/upload.rs"] + """
fn worker(agent: &ureq::Agent, cfg: &Config, root: &Path, queue: &Mutex<impl Iterator<Item = PathBuf>>, bar: ProgressBar)
    -> anyhow::Result<()> {
    loop {
        let next = queue.lock().unwrap().next();
        let Some(file) = next else { return Ok(()) };
        bar.set_message(file.display().to_string());
        let key = key_for(cfg, root, &file);
        let bytes = std::fs::read(&file)?;
        push_with_retry(agent, cfg, key, bytes)?;
    }
}
""")
    s.read("src/upload.rs")
    e_retrydup = s.edit("src/upload.rs", """        push_with_retry(agent, cfg, key, bytes)?;""",
                        """        // The mock server in tests answers 503 once; push_with_retry used to re-queue the file
        // AND retry inline, so it was uploaded twice. Retry inline only.
        push_with_retry(agent, cfg, key, bytes).with_context(|| format!("uploading {}", file.display()))?;""")
    s.bash("cargo test", "", stderr="    Finished `test` profile [unoptimized + debuginfo] target(s) in 3.90s\n     Running unittests src/main.rs\n\n"
           "running 6 tests\ntest result: ok. 6 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.28s\n",
           desc="Run tests", secs=5.0)
    s.stop("push now takes --parallel/-j (default 4) and runs that many scoped threads pulling from a shared queue, each "
           "with its own indicatif bar under a MultiProgress. The failing test exposed a double upload: on a 503 the "
           "file was both re-queued and retried inline; now it is only retried inline.")
    s.prompt("commit please")
    checks(s, "rust")
    s.bash("cargo run -q --release -- push fixtures/release-12 -j 4", "uploaded 12 files (38.2 MiB) in 3.1s\n", desc="Try it", secs=4.0)
    status(s, [" M src/main.rs", " M src/upload.rs"])
    commit(s, "push: --parallel N (default 4) with per-worker progress", ["src/main.rs", "src/upload.rs"], "5d09a7e", 52, 3)
    s.stop("Committed as 5d09a7e.")
    s.end()

    # ---- s4: windows keys
    s = h.session("2026-03-03T21:10:44Z", mode="acceptEdits")
    orient(s)
    s.prompt("A user on Windows reports objects uploaded as `v1.2\\\\rivet-x86_64.zip` with a backslash in the key. "
             "CI on windows-latest fails too. Fix the key building")
    s.mcp("github", "get_issue", {"owner": "rivet-dev", "repo": "rivet", "issue_number": 57},
          '{"number": 57, "title": "Object keys contain backslashes on Windows", "state": "open", "labels": ["bug", "windows"], '
          '"body": "rivet push dist\\\\ uploads dist\\\\v1.2\\\\rivet.zip as key \\"v1.2\\\\\\\\rivet.zip\\". S3 console shows a single object with a backslash."}')
    e_wincI = s.bash("gh run view 13376121455 --log-failed | tail -12",
                     "test (windows-latest)\tRun cargo test\t---- upload::tests::key_uses_forward_slashes stdout ----\n"
                     "test (windows-latest)\tRun cargo test\tthread 'upload::tests::key_uses_forward_slashes' panicked at src/upload.rs:101:9:\n"
                     "test (windows-latest)\tRun cargo test\tassertion `left == right` failed\n"
                     "test (windows-latest)\tRun cargo test\t  left: \"releases/v1.2\\\\rivet.zip\"\n"
                     "test (windows-latest)\tRun cargo test\t right: \"releases/v1.2/rivet.zip\"\n"
                     "test (windows-latest)\tRun cargo test\ttest result: FAILED. 6 passed; 1 failed\n", desc="Failed CI log")
    s.read("src/upload.rs")
    e_keyfix = s.edit("src/upload.rs", """    let rel = file.strip_prefix(root).unwrap_or(file);
    let prefix = cfg.prefix.as_deref().unwrap_or("");
    format!("{}{}", prefix, rel.display())""", """    let rel = file.strip_prefix(root).unwrap_or(file);
    let prefix = cfg.prefix.as_deref().unwrap_or("");
    // Object keys always use '/', whatever the OS separator is.
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    format!("{}{}", prefix, parts.join("/"))""")
    s.bash("cargo test upload", "", stderr="    Finished `test` profile [unoptimized + debuginfo] target(s) in 3.71s\n\nrunning 4 tests\n"
           "test result: ok. 4 passed; 0 failed; 0 ignored; 0 measured; 3 filtered out; finished in 0.09s\n", desc="Run upload tests")
    s.bash("cross test --target x86_64-pc-windows-gnu upload", "", stderr="    Finished `test` profile [unoptimized + debuginfo] target(s) in 58.12s\n"
           "     Running unittests src/main.rs (/target/x86_64-pc-windows-gnu/debug/deps/rivet-0c1d2e3f4a5b6c7d.exe)\n\nrunning 4 tests\n"
           "test result: ok. 4 passed; 0 failed; 0 ignored; 0 measured; 3 filtered out; finished in 0.41s\n", desc="Windows tests via cross", secs=61.0)
    s.stop("key_for built keys with Path::display(), which uses '\\\\' on Windows. It now joins the path components "
           "with '/', so keys are identical on every OS. Upload tests pass natively and under cross for "
           "x86_64-pc-windows-gnu. Fixes #57.")
    s.prompt("great, commit and push")
    checks(s, "rust")
    diffstat(s, [("src/upload.rs", 7, 1)])
    commit(s, "upload: build object keys from path components (fixes #57)", ["src/upload.rs"], "c4f81b2", 7, 1)
    s.bash("git push origin main", "", stderr="To github.com:rivet-dev/rivet.git\n   5d09a7e..c4f81b2  main -> main\n", desc="Push")
    s.stop("Committed and pushed c4f81b2.")
    s.end()

    # ---- s5: benchmark parallelism, release
    s = h.session("2026-03-10T19:30:12Z", mode="acceptEdits")
    orient(s)
    s.prompt("before we cut 0.5.0: is 4 the right default for --parallel? benchmark 2/4/8/16 against the minio in docker")
    s.bash("docker compose up -d minio", "", stderr=" Container rivet-cli-minio-1  Started\n", desc="Start minio")
    e_bench = s.bash("hyperfine -w 1 -r 5 -L j 2,4,8,16 './target/release/rivet push fixtures/release-120 -j {j}'",
                     "Benchmark 1: ./target/release/rivet push fixtures/release-120 -j 2\n  Time (mean \u00b1 \u03c3):     18.412 s \u00b1  0.322 s\n"
                     "Benchmark 2: ./target/release/rivet push fixtures/release-120 -j 4\n  Time (mean \u00b1 \u03c3):      9.870 s \u00b1  0.204 s\n"
                     "Benchmark 3: ./target/release/rivet push fixtures/release-120 -j 8\n  Time (mean \u00b1 \u03c3):      5.631 s \u00b1  0.188 s\n"
                     "Benchmark 4: ./target/release/rivet push fixtures/release-120 -j 16\n  Time (mean \u00b1 \u03c3):      5.402 s \u00b1  0.611 s\n\n"
                     "Summary\n  ./target/release/rivet push fixtures/release-120 -j 16 ran\n    1.04 \u00b1 0.13 times faster than -j 8\n"
                     "    1.83 \u00b1 0.06 times faster than -j 4\n", desc="Benchmark parallelism", secs=190.0)
    e_par8 = s.edit("src/upload.rs", "pub const DEFAULT_PARALLEL: usize = 4;", "pub const DEFAULT_PARALLEL: usize = 8;")
    s.bash("cargo test", "", stderr="    Finished `test` profile [unoptimized + debuginfo] target(s) in 3.20s\n\nrunning 8 tests\n"
           "test result: ok. 8 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.30s\n", desc="Run tests")
    s.bash("docker compose down", "", stderr=" Container rivet-cli-minio-1  Removed\n", desc="Stop minio")
    s.stop("Changed the default to 8: -j 8 is 1.75x faster than 4 on 120 files, and 16 only gains 4% with 3x the "
           "variance (and more open connections per user). Still overridable with -j.")
    s.prompt("ok bump to 0.5.0, update the changelog and tag it")
    s.read("CHANGELOG.md", """# Changelog

## 0.4.2
- Fix `--prefix` handling for nested directories
""")
    e_cl = s.edit("CHANGELOG.md", """# Changelog
""", """# Changelog

## 0.5.0
- `push --parallel/-j N`, default 8
- HTTP client is now ureq (smaller binary, no tokio)
- Object keys use `/` on Windows (#57)
- A config without `[remote]` is an error, not a panic
""")
    s.edit("Cargo.toml", 'version = "0.4.2"', 'version = "0.5.0"')
    s.bash("cargo build --release 2>&1 | tail -1", "    Finished `release` profile [optimized] target(s) in 40.03s\n", desc="Build", secs=40.5)
    commit(s, "Release 0.5.0", ["Cargo.toml", "Cargo.lock", "CHANGELOG.md", "src/upload.rs"], "f0e9d21", 9, 2)
    e_tag = s.bash("git tag -a v0.5.0 -m 'rivet 0.5.0' && git push origin main v0.5.0", "",
                   stderr="To github.com:rivet-dev/rivet.git\n   c4f81b2..f0e9d21  main -> main\n * [new tag]         v0.5.0 -> v0.5.0\n",
                   desc="Tag and push")
    s.stop("Released 0.5.0: version bumped, changelog written, tagged v0.5.0 and pushed; the release workflow builds the binaries from the tag.")
    s.end()

    h.q("fix_location", "Where did we fix the panic when the config file is empty?", "empty config panic",
        "src/config.rs, config::load: the unwrap on the [remote] table became an anyhow error with context.",
        ["src/config.rs"], [e_cfgfix])
    h.q("decision", "Why did we replace the HTTP client library in rivet?", "replace http client",
        "reqwest's blocking client pulled in tokio/hyper; ureq cut the binary from 9.9 MB to 4.1 MB and halved build time.",
        ["tokio"], [e_dec_ureq])
    h.q("failed_command", "What did clippy complain about after the ureq switch?", "clippy warning",
        "clippy::needless-borrow in src/upload.rs (&url passed to http::put).",
        ["needless-borrow"], [e_clippy])
    h.q("failed_command", "Why did the build break right after swapping the HTTP dependency?", "build error dependency swap",
        "src/upload.rs still imported reqwest::blocking::Client (E0433) and passed a Vec<u8> where &[u8] was expected (E0308).",
        ["E0433", "reqwest"], [e_build_err])
    h.q("knowledge_update", "What is the default number of parallel uploads now?", "parallel uploads default",
        "8 (DEFAULT_PARALLEL, was 4).", ["DEFAULT_PARALLEL: usize = 8"], [e_par8])
    h.q("fix_location", "Which file had the Windows backslash object key bug?", "windows object keys",
        "src/upload.rs, key_for now joins path components with '/'.", ["src/upload.rs"], [e_keyfix])
    h.q("temporal", "What did the benchmark show before we changed the parallel default?", "parallel benchmark",
        "hyperfine: -j 2 18.4 s, -j 4 9.9 s, -j 8 5.6 s, -j 16 5.4 s.", ["hyperfine"], [e_bench])
    h.q("file_history", "What did we change in the HTTP module when dropping reqwest?", "reqwest http",
        "src/http.rs rewritten to build a ureq Agent (60 s global timeout) and put() with a byte slice; Cargo.toml swapped the dependency.",
        ["src/http.rs"], [e_ureq_write, e_cargo_ureq])
    h.q("temporal", "Which test failure did we hit first when adding parallel uploads?", "parallel upload test",
        "push_all_uploads_each_file_once: b.tar.gz uploaded twice (re-queue plus inline retry).",
        ["push_all_uploads_each_file_once"], [e_testfail])
