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
    match nmem_hook::record::from_argv(&args) {
        Some(status) => status.into(),
        None => nmem_hook::companion::exec(&args),
    }
}
