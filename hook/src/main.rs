//! `nmem`: the hook handler (`nmem record`), and the door to every other subcommand, which it
//! hands to `nmem-cli` by `exec` (see `nmem_hook::companion`).
//!
//! `no_main`: the C `main` is ours, so std's start-up work is skipped. It costs the hook about
//! twenty system calls it has no use for (measured with `strace -f`): checking that descriptors
//! 0–2 are open (`poll`), ignoring SIGPIPE, and installing the stack-overflow handler, which
//! reads `/proc/self/maps` (glibc's `pthread_getattr_np`), queries the CPU affinity, maps an
//! alternate signal stack and sets two signal handlers. The arguments are read from `main`'s own
//! `argc`/`argv` (std's `args_os` is empty here with musl, whose `.init_array` calls pass no
//! arguments, and the hook is built with musl where it can be: see `scripts/build-hook`). What
//! the skipped work gave: SIGPIPE is ignored before the hook writes to stdout (`record::print`;
//! the socket is written with `MSG_NOSIGNAL`), and nothing here recurses deeply (serde_json stops
//! at 128 levels, the stdin scan is a loop), so a stack overflow stays impossible, not merely
//! reported.
#![no_main]

/// The process's entry point, called by the C runtime.
///
/// # Safety
/// Called once by the C runtime with its `argc`/`argv`: `argc` pointers to NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn main(argc: libc::c_int, argv: *const *const libc::c_char) -> libc::c_int {
    use std::os::unix::ffi::OsStrExt;
    let args = (0..usize::try_from(argc).unwrap_or(0))
        // SAFETY: the C runtime's argv holds argc valid, NUL-terminated strings.
        .map(|i| unsafe { std::ffi::CStr::from_ptr(*argv.add(i)) })
        .map(|a| std::ffi::OsStr::from_bytes(a.to_bytes()).to_os_string())
        .collect();
    run(args)
}

fn run(args: Vec<std::ffi::OsString>) -> i32 {
    match nmem_hook::record::from_argv(&args) {
        Some(status) => status.into(),
        None => nmem_hook::companion::exec(&args),
    }
}
