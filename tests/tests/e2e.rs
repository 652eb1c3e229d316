//! nmem's end-to-end tests, one binary: each module is one area (its own module doc says what),
//! run against the real binaries in NMEM_BIN_DIR and a real nmemd in a temporary NMEM_HOME.
//!
//! One binary rather than one per file: every test binary is a link of its own (thin LTO over
//! all the dependencies), and with 22 files those links were most of the test build's time.
//! A new file here is a new `mod` line. Run one area with `cargo test -p nmem-e2e --test e2e
//! capture::` (or any part of a test's path).

mod bench_cli;
mod capture;
mod docs;
mod embed_engine;
mod embed_onnx;
mod files;
mod follow_ups;
mod hook_binary;
mod hybrid;
mod import;
mod ingest_path;
mod install;
mod knowledge;
mod limits;
mod memory;
mod ops;
mod ops_hardening;
mod query;
mod redaction;
mod repo;
mod service;
mod spool_log;
mod sync;
mod sync_enable;
mod sync_ops;
mod sync_origin;
mod sync_team;
mod viewer;
