//! Link `nmem` as a static non-PIE executable, stripped, when it is static anyway (glibc with
//! `+crt-static`, as `scripts/env.sh` builds): a static-pie binary applies its ~1,800 relative
//! relocations at every start, dirtying the pages they touch, and the hook starts once per tool
//! call. Measured with `nmem-bench --hook` (interleaved with `/bin/true`, copies of each build on
//! the same file system): non-PIE and stripped, 27–47 page faults per run instead of 36–60, and
//! about 15% less CPU (ARCHITECTURE.md, "The hook at the floor"). What non-PIE gives up is the
//! randomised address of this short-lived binary's own image (its stack, heap and mappings stay
//! randomised); `nmemd`, which serves requests for hours, stays static-pie.
//!
//! `-static -no-pie` after rustc's own `-static-pie` makes gcc produce a static non-PIE
//! executable (the objects are position-independent code, which a fixed-address executable can
//! hold). Any other target links as rustc decides: with musl (`scripts/build-hook`, which builds
//! the hook so where it can) the same comes from `-C relocation-model=static -C strip=symbols`
//! (gcc's `-no-pie` would pick glibc's start files, and the binary would crash at once).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let static_glibc = var("CARGO_CFG_TARGET_OS") == "linux"
        && var("CARGO_CFG_TARGET_ENV") == "gnu"
        && var("CARGO_CFG_TARGET_FEATURE")
            .split(',')
            .any(|f| f == "crt-static");
    if static_glibc {
        for arg in ["-static", "-no-pie", "-Wl,--strip-all"] {
            println!("cargo:rustc-link-arg-bin=nmem={arg}");
        }
    }
}
