//! `nmem install` / `nmem uninstall`: wire nmem into the harnesses and the service manager, and
//! take it out again.
//!
//! Only nmem's own entries are ever touched: a hook handler is nmem's when its command runs an
//! executable named `nmem` with `record`; an MCP server is nmem's when it is named `nmem` and runs
//! `nmem serve`. Every file is backed up (`<file>.nmem-backup-<unix time>`) before it is changed,
//! written atomically, and left alone when nothing in it needs to change, so installing twice
//! changes nothing the second time. Uninstalling removes nmem's entries and the containers that
//! only held them, which gives back the file as it was when nothing else changed it meanwhile.

use nmem_proto::harness::Harness;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod claude_code;
mod codex;
mod cursor;
mod gemini;
mod json;
mod service;

/// One harness's install wiring: which of its files nmem changes, and how. One module per
/// harness implements it; [`TARGETS`] lists them.
pub(crate) trait Target: Sync {
    fn harness(&self) -> Harness;
    /// The folder under `$HOME` whose presence says the harness is used here: installed by
    /// default when it exists. `None`: always installed.
    fn config_dir(&self) -> Option<&'static str>;
    /// Stage the changes to its files: nmem's hooks and MCP server in, or out.
    fn apply(&self, cx: &mut Ctx, install: bool) -> Result<(), String>;
}

/// Every install target, in the order they are installed.
pub(crate) const TARGETS: [&dyn Target; 4] = [
    &claude_code::ClaudeCode,
    &codex::Codex,
    &gemini::Gemini,
    &cursor::Cursor,
];

/// The install target of a harness, if `nmem install` wires it.
pub(crate) fn target(h: Harness) -> Option<&'static dyn Target> {
    TARGETS.into_iter().find(|t| t.harness() == h)
}

pub struct Options {
    /// Explicit targets (harnesses `nmem install` wires); `None` means Claude Code plus every
    /// other harness whose config folder exists.
    pub targets: Option<Vec<Harness>>,
    pub service: bool,
    pub dry_run: bool,
    pub delete_data: bool,
}

/// One file's new content.
pub(crate) struct Change {
    path: PathBuf,
    before: Option<String>,
    after: String,
    what: Vec<String>,
}

pub(crate) struct Ctx {
    home: PathBuf,
    nmem: PathBuf,
    changes: Vec<Change>,
    notes: Vec<String>,
}

pub fn install(opts: Options) -> ExitCode {
    run(opts, true)
}

pub fn uninstall(opts: Options) -> ExitCode {
    run(opts, false)
}

fn run(opts: Options, install: bool) -> ExitCode {
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
        eprintln!("nmem: HOME is not set, so there is no harness configuration to change");
        return ExitCode::from(2);
    };
    let nmem = hook_binary(std::env::current_exe().unwrap_or_else(|_| PathBuf::from("nmem")));
    let mut cx = Ctx {
        home,
        nmem,
        changes: Vec::new(),
        notes: Vec::new(),
    };
    let targets: Vec<&dyn Target> = match &opts.targets {
        Some(hs) => hs.iter().filter_map(|h| target(*h)).collect(),
        None => TARGETS
            .into_iter()
            .filter(|t| t.config_dir().is_none_or(|d| cx.home.join(d).is_dir()))
            .collect(),
    };
    for t in targets {
        if let Err(e) = t.apply(&mut cx, install) {
            eprintln!("nmem: {e}");
            return ExitCode::from(1);
        }
    }
    if opts.service {
        service::service(&mut cx, install, opts.dry_run);
    }
    let verb = if install { "install" } else { "uninstall" };
    if cx.changes.is_empty() {
        println!(
            "nmem {verb}: nothing to change ({})",
            if install {
                "already installed"
            } else {
                "nothing of nmem's found"
            }
        );
    }
    for c in &cx.changes {
        println!(
            "{} {}",
            if opts.dry_run {
                "would change"
            } else {
                "changed"
            },
            c.path.display()
        );
        for w in &c.what {
            println!("  {w}");
        }
    }
    if !opts.dry_run {
        for c in &cx.changes {
            if let Err(e) = write_with_backup(c) {
                eprintln!("nmem: cannot write {}: {e}", c.path.display());
                return ExitCode::from(1);
            }
        }
    }
    for n in &cx.notes {
        println!("note: {n}");
    }
    if !install && opts.delete_data && !opts.dry_run {
        let paths = nmem_proto::paths::Paths::from_env();
        for p in [paths.db.clone(), paths.spool.clone()] {
            let _ = if p.is_dir() {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
        }
        for suffix in ["-wal", "-shm", ".lock"] {
            let mut p = paths.db.as_os_str().to_owned();
            p.push(suffix);
            let _ = std::fs::remove_file(PathBuf::from(p));
        }
        println!("deleted the memory at {}", paths.db.display());
    } else if !install {
        println!(
            "the memory is kept at {} (`nmem uninstall --delete-data` removes it)",
            nmem_proto::paths::Paths::from_env().db.display()
        );
    }
    ExitCode::SUCCESS
}

/// The hook command for a harness: `nmem record`, with `--harness` for all but the default.
fn command(cx: &Ctx, harness: Harness) -> String {
    let bin = shell_quote(&cx.nmem.to_string_lossy());
    match harness {
        Harness::ClaudeCode => format!("{bin} record"),
        h => format!("{bin} record --harness {h}"),
    }
}

fn shell_quote(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Is this hook command nmem's recorder: this `nmem`, or an `nmem` installed with its `nmemd`
/// beside it (another program called nmem, such as the original nmem, has none)?
pub fn is_ours(cmd: &str) -> bool {
    let Some(exe) = recorder_exe(cmd) else {
        return false;
    };
    let path = if exe.contains('/') {
        Some(PathBuf::from(exe))
    } else {
        which(exe)
    };
    path.is_some_and(|p| p.with_file_name("nmemd").is_file())
}

/// The `nmem` to write into hook and MCP commands: this process runs as `nmem-cli` (the small
/// `nmem` exec'd it), and the hooks must run the small `nmem` beside it, whose `record` costs
/// the least and which `recorder_exe` recognises as nmem's own.
fn hook_binary(exe: PathBuf) -> PathBuf {
    let hook = exe.with_file_name("nmem");
    if exe
        .file_name()
        .is_some_and(|n| n == nmem_hook::companion::NAME)
        && hook.is_file()
    {
        hook
    } else {
        exe
    }
}

/// The executable of a `… nmem record …` hook command, if it is one.
fn recorder_exe(cmd: &str) -> Option<&str> {
    let cmd = cmd.trim_start();
    // The executable may be single-quoted (a path with spaces, as `shell_quote` writes it).
    let (exe, rest) = match cmd.strip_prefix('\'') {
        Some(q) => match q.find('\'') {
            Some(end) => (&q[..end], &q[end + 1..]),
            None => return None,
        },
        None => cmd.split_once(char::is_whitespace).unwrap_or((cmd, "")),
    };
    (Path::new(exe).file_name().is_some_and(|n| n == "nmem")
        && rest.split_whitespace().next() == Some("record"))
    .then_some(exe)
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    })
}

fn write_with_backup(c: &Change) -> std::io::Result<()> {
    if let Some(dir) = c.path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    if c.before.is_some() {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let mut name = c.path.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".nmem-backup-{stamp}"));
        std::fs::copy(&c.path, c.path.with_file_name(name))?;
    }
    if c.after.trim() == "{}"
        || (c.after.trim().is_empty() && c.path.extension().is_some_and(|e| e == "toml"))
    {
        // Only nmem's entries were in it: the file goes as it came (it is backed up above).
        return std::fs::remove_file(&c.path);
    }
    let mut tmp_name = c.path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(".nmem-tmp");
    let tmp = c.path.with_file_name(tmp_name);
    std::fs::write(&tmp, &c.after)?;
    if let Ok(meta) = std::fs::metadata(&c.path) {
        let _ = std::fs::set_permissions(&tmp, meta.permissions());
    }
    std::fs::rename(&tmp, &c.path)
}

#[cfg(test)]
mod tests {
    use nmem_proto::harness::Harness;

    /// A harness the contract gives hooks to install has exactly one target (which writes
    /// those hooks; that each is an event the harness knows is the contract's own test).
    #[test]
    fn every_installable_harness_has_one_target() {
        for h in Harness::ALL {
            let n = super::TARGETS.iter().filter(|t| t.harness() == h).count();
            assert_eq!(n, usize::from(h.spec().installs()), "{h}: install targets");
        }
    }

    /// The aliases `nmem install --harness` takes are the contract's, like record's and import's.
    #[test]
    fn install_choices_are_the_contracts_names() {
        for h in Harness::ALL {
            for name in std::iter::once(&h.spec().name).chain(h.spec().aliases) {
                let chosen = Harness::choose(name, |s| s.installs());
                assert_eq!(chosen.is_some(), h.spec().installs(), "{name}");
            }
        }
        let all = Harness::choose("all", |s| s.installs()).unwrap();
        let targets: Vec<Harness> = super::TARGETS.iter().map(|t| t.harness()).collect();
        assert_eq!(all, targets, "`all` installs every target, in order");
    }

    #[test]
    fn hooks_name_the_small_nmem_beside_nmem_cli() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let cli = dir.join("nmem-cli");
        // No `nmem` beside it: nmem-cli itself (it runs `record` too).
        assert_eq!(super::hook_binary(cli.clone()), cli);
        std::fs::write(dir.join("nmem"), "").unwrap();
        assert_eq!(super::hook_binary(cli), dir.join("nmem"));
        // Any other name is kept as it is.
        let other = dir.join("nmem-dev");
        assert_eq!(super::hook_binary(other.clone()), other);
    }

    #[test]
    fn recognises_its_own_commands() {
        use super::recorder_exe as r;
        assert_eq!(r("nmem record"), Some("nmem"));
        assert_eq!(
            r("/home/u/.local/bin/nmem record --harness gemini"),
            Some("/home/u/.local/bin/nmem")
        );
        assert_eq!(r("'/opt/my tools/nmem' record"), Some("/opt/my tools/nmem"));
        assert_eq!(r("nmem-other record"), None);
        assert_eq!(r("python hook.py"), None);
        assert_eq!(r("nmem serve"), None);
        // An `nmem` without its daemon beside it is another program's (the original nmem).
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        std::fs::write(dir.join("nmem"), "").unwrap();
        let cmd = format!("{} record", dir.join("nmem").display());
        assert!(!super::is_ours(&cmd));
        std::fs::write(dir.join("nmemd"), "").unwrap();
        assert!(super::is_ours(&cmd));
    }
}
