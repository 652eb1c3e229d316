from ._common import checks, commit, diffstat, orient, tree

PROCESS_RS = """use std::fs;
use std::path::Path;

pub struct ProcStat {
    pub pid: u32,
    pub utime: u64,
    pub stime: u64,
    pub rss_pages: u64,
}

pub fn collect_all() -> anyhow::Result<Vec<ProcStat>> {
    let mut out = Vec::new();
    for entry in fs::read_dir("/proc")? {
        let entry = entry?;
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let text = fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat"))?;
        out.push(parse_stat(pid, &text)?);
    }
    Ok(out)
}
"""

CONFIG_RS = """use serde::Deserialize;
use std::time::Duration;

#[derive(Debug, Deserialize)]
#[serde(default)]
pub struct Config {
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    pub listen: String,
    pub per_process: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            interval: Duration::from_secs(10),
            listen: "127.0.0.1:9464".into(),
            per_process: true,
        }
    }
}
"""

MAIN_RS = """use log::{error, info};

mod collect;
mod config;
mod exporter;

fn main() -> anyhow::Result<()> {
    env_logger::init();
    let cfg = config::load()?;
    info!("metrics-agent listening on {}", cfg.listen);
    let registry = exporter::Registry::new();
    loop {
        if let Err(e) = collect::tick(&registry, &cfg) {
            error!("collection failed: {e:#}");
        }
        std::thread::sleep(cfg.interval);
    }
}
"""


def build(ds):
    h = ds.history("h14", "codex", "/home/dev/src/metrics-agent",
                   "Rust host metrics agent with a Prometheus exporter: a /proc race that aborted collection, log to "
                   "tracing, the sampling interval changed and reverted, and per-process label cardinality.",
                   start="2026-03-02T08:00:00Z", model="gpt-5.5-codex")
    h.commits = [("41b7c2e", "exporter: /metrics on 9464"), ("9d0a3f6", "collect: per-process cpu and rss"), ("2e5c8b1", "v0.3.0")]

    # ---- s1: /proc race
    s = h.session("2026-03-02T13:12:05Z")
    s.prompt("On busy build hosts the agent logs 'collection failed: No such file or directory (os error 2)' most ticks "
             "and the whole scrape is empty. Probably processes exiting while we read /proc. Make it skip those.")
    orient(s)
    tree(s, ["src/main.rs", "src/config.rs", "src/collect/mod.rs", "src/collect/process.rs", "src/collect/cpu.rs", "src/collect/mem.rs", "src/exporter/mod.rs", "src/exporter/process.rs"], "src")
    s.read("src/collect/process.rs", PROCESS_RS)
    e_enoent = s.bash("RUST_LOG=debug timeout 30 cargo run -q 2>&1 | grep -m3 'collection failed'",
                      "[2026-03-02T13:14:11Z ERROR metrics_agent] collection failed: No such file or directory (os error 2)\n"
                      "[2026-03-02T13:14:21Z ERROR metrics_agent] collection failed: No such file or directory (os error 2)\n"
                      "[2026-03-02T13:14:41Z ERROR metrics_agent] collection failed: No such file or directory (os error 2)\n", secs=30.0)
    e_procfix = s.edit("src/collect/process.rs", """        let text = fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat"))?;
        out.push(parse_stat(pid, &text)?);""", """        // The process can exit between read_dir and this read: skip it instead of failing the whole tick.
        let text = match fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat")) {
            Ok(t) => t,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound) || e.raw_os_error() == Some(libc::ESRCH) => continue,
            Err(e) => return Err(e.into()),
        };
        match parse_stat(pid, &text) {
            Ok(stat) => out.push(stat),
            Err(e) => log::debug!("skipping pid {pid}: {e}"),
        }""")
    e_libc = s.bash("cargo build", "   Compiling metrics-agent v0.3.0 (/home/dev/src/metrics-agent)\nerror[E0433]: failed to resolve: use of undeclared crate or module `libc`\n"
                    "  --> src/collect/process.rs:21:88\n   |\n21 |             Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound) || e.raw_os_error() == Some(libc::ESRCH) => continue,\n"
                    "   |                                                                                        ^^^^ use of undeclared crate or module `libc`\n",
                    code=101, secs=7.0)
    s.bash("cargo add libc@0.2", "    Updating crates.io index\n      Adding libc v0.2.169 to dependencies\n", secs=2.0)
    s.bash("cargo test collect && (timeout 60 stress-ng --fork 8 -t 50s & RUST_LOG=info timeout 55 cargo run -q 2>&1 | grep -c 'collection failed')",
           "running 9 tests\ntest result: ok. 9 passed; 0 failed; 0 ignored; 0 measured; 3 filtered out; finished in 0.04s\n0\n", secs=62.0)
    s.stop("collect_all now skips a pid whose /proc/<pid>/stat vanished (NotFound or ESRCH) and only logs a stat it "
           "can't parse at debug level, instead of failing the whole tick with '?'. Added the libc dependency for "
           "ESRCH. Under stress-ng --fork 8 for 50 s there are zero failed ticks.")
    s.prompt("commit")
    checks(s, "rust")
    commit(s, "collect: skip processes that exit mid-scan", ["Cargo.toml", "Cargo.lock", "src/collect/process.rs"], "c8f1a20", 12, 2)
    s.stop("Committed as c8f1a20.")

    # ---- s2: log -> tracing
    s = h.session("2026-03-05T10:40:51Z")
    e_p_tracing = s.prompt("Move from log/env_logger to tracing + tracing-subscriber. I want a span per collection tick "
                           "with its duration, and JSON logs when METRICS_AGENT_LOG_FORMAT=json for the Loki pipeline.")
    orient(s)
    s.bash("rg -n 'log::|env_logger' src Cargo.toml", "Cargo.toml:11:env_logger = \"0.11\"\nCargo.toml:12:log = \"0.4\"\nsrc/main.rs:1:use log::{error, info};\nsrc/main.rs:9:    env_logger::init();\nsrc/collect/process.rs:27:            Err(e) => log::debug!(\"skipping pid {pid}: {e}\"),\n")
    s.read("src/main.rs", MAIN_RS)
    s.bash("cargo rm log env_logger && cargo add tracing@0.1 && cargo add tracing-subscriber@0.3 --features env-filter,json",
           "    Removing log from dependencies\n    Removing env_logger from dependencies\n      Adding tracing v0.1.41 to dependencies\n"
           "      Adding tracing-subscriber v0.3.19 to dependencies\n             Features:\n             + env-filter\n             + json\n", secs=3.0)
    e_tracing = s.write("src/main.rs", """use tracing::{error, info, info_span};
use tracing_subscriber::EnvFilter;

mod collect;
mod config;
mod exporter;

fn init_tracing() {
    let filter = EnvFilter::try_from_env("METRICS_AGENT_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    if std::env::var("METRICS_AGENT_LOG_FORMAT").as_deref() == Ok("json") {
        builder.json().with_current_span(true).init();
    } else {
        builder.init();
    }
}

fn main() -> anyhow::Result<()> {
    init_tracing();
    let cfg = config::load()?;
    info!(listen = %cfg.listen, "metrics-agent started");
    let registry = exporter::Registry::new();
    loop {
        let span = info_span!("tick", interval_ms = cfg.interval.as_millis() as u64);
        let _guard = span.enter();
        let started = std::time::Instant::now();
        if let Err(e) = collect::tick(&registry, &cfg) {
            error!(error = %format!("{e:#}"), "collection failed");
        }
        info!(elapsed_ms = started.elapsed().as_millis() as u64, "tick done");
        drop(_guard);
        std::thread::sleep(cfg.interval);
    }
}
""")
    e_logmacro = s.bash("cargo build", "   Compiling metrics-agent v0.3.0 (/home/dev/src/metrics-agent)\nerror: cannot find macro `debug` in this scope\n"
                        "  --> src/collect/process.rs:27:23\n   |\n27 |             Err(e) => log::debug!(\"skipping pid {pid}: {e}\"),\n"
                        "   |                       ^^^ use of undeclared crate or module `log`\n", code=101, secs=6.0)
    s.bash("grep -rln 'log::' src | xargs sed -i 's/log::debug!/tracing::debug!/g; s/log::warn!/tracing::warn!/g' && cargo build", "", secs=8.0)
    s.bash("METRICS_AGENT_LOG_FORMAT=json timeout 12 cargo run -q 2>&1 | head -2", "{\"timestamp\":\"2026-03-05T10:52:03.118Z\",\"level\":\"INFO\",\"fields\":{\"message\":\"metrics-agent started\",\"listen\":\"127.0.0.1:9464\"},\"target\":\"metrics_agent\"}\n"
           "{\"timestamp\":\"2026-03-05T10:52:03.301Z\",\"level\":\"INFO\",\"fields\":{\"message\":\"tick done\",\"elapsed_ms\":183},\"target\":\"metrics_agent\",\"span\":{\"interval_ms\":10000,\"name\":\"tick\"}}\n",
           secs=12.0)
    s.stop("Logging is tracing + tracing-subscriber now: filter from METRICS_AGENT_LOG (default info), plain text by "
           "default and JSON with the current span when METRICS_AGENT_LOG_FORMAT=json. Each tick runs in a 'tick' span "
           "and logs elapsed_ms. The build first failed on a leftover log::debug! in process.rs; all log:: macros now "
           "use tracing::.")
    s.prompt("commit")
    checks(s, "rust")
    commit(s, "Logging: tracing + tracing-subscriber (JSON via METRICS_AGENT_LOG_FORMAT)", ["Cargo.toml", "Cargo.lock", "src/main.rs",
           "src/collect/process.rs"], "5a9e3d4", 33, 10)
    s.stop("Committed as 5a9e3d4.")

    # ---- s3: interval 15s
    s = h.session("2026-03-10T15:20:30Z")
    e_p_15 = s.prompt("Prometheus scrapes every 15s anyway and on 2k hosts the agent's CPU adds up. Change the default "
                      "sampling interval from 10s to 15s so we sample once per scrape.")
    orient(s)
    s.bash("rg -n 'interval' src README.md", "src/config.rs:8:    pub interval: Duration,\nsrc/config.rs:16:            interval: Duration::from_secs(10),\nsrc/main.rs:24:        let span = info_span!(\"tick\", interval_ms = cfg.interval.as_millis() as u64);\nREADME.md:5:| interval | 10s |\n")
    s.read("src/config.rs", CONFIG_RS)
    e_int15 = s.edit("src/config.rs", "            interval: Duration::from_secs(10),", "            interval: Duration::from_secs(15), // one sample per Prometheus scrape")
    s.read("README.md", "# metrics-agent\n\n| key | default |\n|---|---|\n| interval | 10s |\n| listen | 127.0.0.1:9464 |\n| per_process | true |\n")
    s.edit("README.md", "| interval | 10s |", "| interval | 15s |")
    s.bash("cargo test config", "running 4 tests\ntest result: ok. 4 passed; 0 failed; 0 ignored; 0 measured; 8 filtered out; finished in 0.00s\n", secs=5.0)
    s.stop("Default interval is 15 s (config.rs and the README table); an explicit `interval` in the config file still wins.")
    s.prompt("commit")
    diffstat(s, [("README.md", 1, 1), ("src/config.rs", 1, 1)])
    commit(s, "Default sampling interval 15s", ["src/config.rs", "README.md"], "8b2d6f0", 2, 2)
    s.stop("Committed as 8b2d6f0.")

    # ---- s4: revert to 10s + cardinality
    s = h.session("2026-03-19T09:05:17Z")
    e_p_revert = s.prompt("SRE says the 15s default broke their rate() panels: with 15s samples and a 15s scrape, "
                          "rate(...[30s]) often has just one point and shows gaps. Revert the default to 10s. Then look "
                          "at per-process label cardinality, the exporter has 40k series on CI runners.")
    orient(s)
    s.bash("rg -n 'from_secs' src/config.rs", "src/config.rs:16:            interval: Duration::from_secs(15), // one sample per Prometheus scrape\n")
    s.read("src/config.rs")
    e_int10 = s.edit("src/config.rs", "            interval: Duration::from_secs(15), // one sample per Prometheus scrape",
                     "            // 15s broke rate(...[30s]) panels (single sample per window); keep 10s.\n            interval: Duration::from_secs(10),")
    s.edit("README.md", "| interval | 15s |", "| interval | 10s |")
    e_series = s.bash("curl -s localhost:9464/metrics | grep -c '^process_' ; curl -s localhost:9464/metrics | grep '^process_cpu_seconds_total' | head -3",
                      "40212\nprocess_cpu_seconds_total{pid=\"918231\",comm=\"rustc\"} 3.91\nprocess_cpu_seconds_total{pid=\"918244\",comm=\"cc1plus\"} 1.02\n"
                      "process_cpu_seconds_total{pid=\"918250\",comm=\"ld\"} 0.11\n", secs=1.0)
    s.read("src/exporter/process.rs", """pub fn export(reg: &Registry, stats: &[ProcStat]) {
    for s in stats {
        let labels = [("pid", s.pid.to_string()), ("comm", s.comm.clone())];
        reg.counter("process_cpu_seconds_total", &labels).set(s.cpu_seconds());
        reg.gauge("process_resident_memory_bytes", &labels).set(s.rss_bytes());
    }
}
""")
    e_card = s.edit("src/exporter/process.rs", """pub fn export(reg: &Registry, stats: &[ProcStat]) {
    for s in stats {
        let labels = [("pid", s.pid.to_string()), ("comm", s.comm.clone())];
        reg.counter("process_cpu_seconds_total", &labels).set(s.cpu_seconds());
        reg.gauge("process_resident_memory_bytes", &labels).set(s.rss_bytes());
    }
}""", """/// Aggregate by command name: a `pid` label creates a new series for every short-lived process
/// (40k series on CI runners). Top 50 commands by CPU, the rest summed under comm="other".
pub fn export(reg: &Registry, stats: &[ProcStat]) {
    let mut by_comm: BTreeMap<&str, (f64, u64)> = BTreeMap::new();
    for s in stats {
        let e = by_comm.entry(s.comm.as_str()).or_default();
        e.0 += s.cpu_seconds();
        e.1 += s.rss_bytes();
    }
    let mut rows: Vec<_> = by_comm.into_iter().collect();
    rows.sort_by(|a, b| b.1 .0.total_cmp(&a.1 .0));
    let (top, rest) = rows.split_at(rows.len().min(50));
    for (comm, (cpu, rss)) in top {
        reg.gauge("process_cpu_seconds", &[("comm", comm.to_string())]).set(*cpu);
        reg.gauge("process_resident_memory_bytes", &[("comm", comm.to_string())]).set(*rss as f64);
    }
    let other = rest.iter().fold((0.0, 0u64), |acc, (_, (c, r))| (acc.0 + c, acc.1 + r));
    reg.gauge("process_cpu_seconds", &[("comm", "other".into())]).set(other.0);
    reg.gauge("process_resident_memory_bytes", &[("comm", "other".into())]).set(other.1 as f64);
}""")
    s.bash("cargo test && timeout 15 cargo run -q & sleep 12; curl -s localhost:9464/metrics | grep -c '^process_'",
           "running 13 tests\ntest result: ok. 13 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.05s\n102\n", secs=20.0)
    s.stop("Default interval is back to 10 s (comment says why). Per-process metrics no longer carry a pid label: they "
           "are aggregated per command name, top 50 by CPU plus comm=\"other\", so a CI runner exports 102 process "
           "series instead of 40,212. Note the rename to process_cpu_seconds (a gauge of summed CPU, since aggregated "
           "counters would reset as processes exit); dashboards need updating.")
    s.prompt("commit as two commits")
    commit(s, "Revert default interval to 10s (rate() gaps at 15s)", ["src/config.rs", "README.md"], "d10c7e9", 3, 2)
    commit(s, "exporter: aggregate per-process metrics by comm (cardinality)", ["src/exporter/process.rs"], "a3e58b2", 22, 5)
    s.stop("Committed d10c7e9 (interval revert) and a3e58b2 (cardinality).")

    h.q("fix_location", "Where did we stop empty scrapes caused by processes exiting during collection?", "processes exiting scrape",
        "src/collect/process.rs collect_all: skip NotFound/ESRCH pids instead of failing the tick.", ["src/collect/process.rs"], [e_procfix])
    h.q("failed_command", "What was the log error on busy build hosts before the /proc fix?", "collection failed error",
        "collection failed: No such file or directory (os error 2).", ["No such file or directory (os error 2)"], [e_enoent])
    h.q("decision", "Why did we move the agent's logging to tracing?", "logging library switch",
        "To get a span per collection tick with its duration and JSON logs for the Loki pipeline.", ["Loki"], [e_p_tracing])
    h.q("knowledge_update", "What is the default sampling interval of the metrics agent now?", "sampling interval default",
        "10 seconds: it was changed to 15 s and reverted to 10 s because rate() panels showed gaps.",
        ["Duration::from_secs(10)"], [e_int10])
    h.q("decision", "Why was the 15 second sampling interval reverted?", "interval revert",
        "With 15 s samples and a 15 s scrape, rate(...[30s]) often had one point and dashboards showed gaps.",
        ["rate(...[30s])"], [e_p_revert])
    h.q("temporal", "Why did we originally change the sampling interval away from 10 seconds?", "interval change cpu",
        "Prometheus scrapes every 15 s and agent CPU added up across 2k hosts, so 15 s meant one sample per scrape.",
        ["2k hosts"], [e_p_15])
    h.q("fix_location", "How did we cut the per-process series count on CI runners?", "label cardinality",
        "src/exporter/process.rs: aggregate by comm (top 50 + other), no pid label; 40,212 -> 102 series.",
        ["src/exporter/process.rs"], [e_card])
    h.q("failed_command", "What broke the build during the logging migration?", "logging migration build",
        "cannot find macro `debug`: a leftover log::debug! in src/collect/process.rs.", ["log::debug!"], [e_logmacro])
    h.q("file_history", "What did we change in main.rs for the new logging setup?", "main.rs logging",
        "src/main.rs: init_tracing with EnvFilter (METRICS_AGENT_LOG) and JSON output, a tick span with elapsed_ms.",
        ["init_tracing"], [e_tracing])
    h.q("temporal", "How many process series did the exporter have before the cardinality fix?", "process series count",
        "40,212 process_ series (pid and comm labels).", ["40212"], [e_series])
