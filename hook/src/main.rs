//! `nmem`: the hook handler (`nmem record`), and the door to every other subcommand, which it
//! hands to `nmem-cli` by `exec` (see `nmem_hook::companion`).
//!
//! `no_main`: the C `main` is ours, so std's start-up work is skipped. It costs the hook about
//! twenty system calls it has no use for (measured with `strace -f`): checking that descriptors
//! 0–2 are open (`poll`), ignoring SIGPIPE, and installing the stack-overflow handler, which
//! reads `/proc/self/maps` (glibc's `pthread_getattr_np`), queries the CPU affinity, maps an
//! alternate signal stack and sets two signal handlers. The arguments still come through
//! `std::env::args_os` (std captures them from glibc's `.init_array` call). What the skipped
//! work gave: SIGPIPE is ignored before the hook writes to stdout (`record::print`; the socket is
//! written with `MSG_NOSIGNAL`), and nothing here recurses deeply (serde_json stops at 128
//! levels, the stdin scan is a loop), so a stack overflow stays impossible, not merely reported.
#![no_main]

/// The process's entry point, called by the C runtime.
///
/// # Safety
/// Called once by the C runtime with its `argc`/`argv`, which are not used (std has them).
#[no_mangle]
pub extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    run()
}

fn run() -> i32 {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_none_or(|a| a != "record") {
        return nmem_hook::companion::exec(&args);
    }
    let mut rest = Vec::with_capacity(args.len() - 2);
    for a in &args[2..] {
        match a.to_str() {
            Some(s) => rest.push(s.to_string()),
            None => {
                eprintln!(
                    "nmem record: an argument is not UTF-8 ({}); see `nmem record --help`",
                    a.to_string_lossy()
                );
                return 1;
            }
        }
    }
    if rest.iter().any(|a| a == "-h" || a == "--help") {
        nmem_hook::record::print(nmem_hook::record::USAGE);
        return 0;
    }
    nmem_hook::record::status(&rest).into()
}
