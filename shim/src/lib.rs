//! The clients of `nmemd`: `nmem-cli` (every `nmem` subcommand but `record`, which the small
//! `nmem` binary of crate `nmem-hook` runs itself and `exec`s the others into this one) and
//! `nmemctl`.
//!
//! * [`record`], [`elide`], [`autostart`]: the hook handler's modules, from `nmem-hook`
//!   (re-exported: `nmem-cli record` still works, and the clients start the daemon the same way).
//! * [`cli`], [`daemon_client`]: `nmem search|get|timeline|recent|save`; [`render`]: their
//!   replies as text, for the terminal and for the MCP tools' `format: "text"`.
//! * [`serve`]: the MCP server (its profiles: [`codex_mem`], [`substrate`]); [`import`]: `nmem import`; [`install`]: `nmem install|uninstall`.
//! * [`docs`]: `nmem ingest` (reading files, a repository walk, a conversation; [`docs_web`]: a
//!   web page fetched on request, a PDF's text).
//! * [`ctl`]: `nmemctl` commands.

pub use nmem_hook::{autostart, elide, record};
pub mod cli;
pub mod codex_mem;
pub mod ctl;
pub mod daemon_client;
pub mod docs;
pub mod docs_web;
pub mod import;
pub mod install;
pub mod knowledge;
pub mod render;
pub mod serve;
pub mod substrate;
pub mod sync;
pub mod ui;
