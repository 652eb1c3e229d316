//! Handing `nmem`'s other subcommands to `nmem-cli`.
//!
//! `nmem` is two binaries: this small one, which runs `nmem record` itself (the harnesses run it
//! on every tool call, so its start-up cost is the hook's floor), and `nmem-cli`, which has the
//! argument parser, the MCP server, the importer and the installer. Anything but `record` is
//! `exec`'d into `nmem-cli` found next to the running binary: the same process, so argv (argv[0]
//! included, which clap prints in its usage lines), environment, stdin/stdout/stderr, the exit
//! status and signals are exactly those of a single binary.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

/// The companion binary's file name.
pub const NAME: &str = "nmem-cli";

/// Where `nmem-cli` is: next to the running binary (symlinks resolved, as `/proc/self/exe`
/// does), else next to the path it was started as.
pub fn path(argv0: Option<&OsString>) -> PathBuf {
    if let Ok(exe) = std::env::current_exe() {
        let sibling = exe.with_file_name(NAME);
        if sibling.is_file() {
            return sibling;
        }
    }
    match argv0.map(PathBuf::from) {
        Some(p) if p.parent().is_some_and(|d| !d.as_os_str().is_empty()) => p.with_file_name(NAME),
        _ => PathBuf::from(NAME),
    }
}

/// Replace this process by `nmem-cli` with the same arguments. Returns only when that failed:
/// the message says what to do, and the status (returned) is 127, the shell's "command not
/// found".
pub fn exec(args: &[OsString]) -> i32 {
    let target = path(args.first());
    let mut cmd = std::process::Command::new(&target);
    if let Some(a0) = args.first() {
        cmd.arg0(a0);
    }
    let err = cmd.args(args.iter().skip(1)).exec();
    eprintln!(
        "nmem: cannot run {} ({err}): nmem's commands other than `record` live in `{NAME}`, \
         which must be installed next to `nmem`; reinstall both (scripts/install)",
        target.display()
    );
    127
}
