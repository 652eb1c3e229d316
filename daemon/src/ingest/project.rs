//! Which project a working directory belongs to: the basename of the nearest enclosing git root,
//! else of the directory itself. Looked up once per directory and cached.
//!
//! A linked git worktree (`git worktree add ../shop-fix`) belongs to its main repository's
//! project: its `.git` is a file (`gitdir: <main>/.git/worktrees/shop-fix`) whose folder holds a
//! `commondir` file pointing back at the main repository's `.git`. Those few small files are read
//! directly (no `git` process: this runs for every new cwd, and for the branch at every
//! SessionStart), each only when it is a regular file and never more than [`MAX_GIT_FILE`]
//! bytes, so a hostile checkout (a FIFO or a huge file named `.git`) cannot hang or bloat the
//! daemon. The worktree's own folder is kept apart ([`Project::worktree`]): paths are made
//! relative to the folder the agent works in, and sessions record it with their branch.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The most bytes read of a `.git` file, `commondir` or `HEAD` (real ones are under 100 bytes).
const MAX_GIT_FILE: u64 = 4_096;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Project {
    pub name: String,
    /// The git root (or the cwd when there is none), kept so two checkouts named `app` can be
    /// told apart. For a linked worktree, its main repository's root.
    pub root: String,
    /// The linked worktree's own root, when the cwd is in one (not the main checkout).
    pub worktree: Option<String>,
    /// The git directory of the checkout (`<root>/.git`, or `<main>/.git/worktrees/<name>`),
    /// where its `HEAD` is read.
    pub git_dir: Option<String>,
    /// The branch checked out, read at SessionStart only (`None` otherwise, and when detached
    /// HEAD or no git): see [`branch`].
    pub branch: Option<String>,
}

impl Project {
    /// The folder files are made relative to: the worktree the agent works in, else the root.
    pub fn checkout(&self) -> &str {
        self.worktree.as_deref().unwrap_or(&self.root)
    }

    /// The branch checked out now, read from the checkout's `HEAD`.
    pub fn read_branch(&self) -> Option<String> {
        branch(Path::new(self.git_dir.as_deref()?))
    }
}

/// How a project is named (`project.strategy` in config.toml).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// The nearest enclosing git root, else the cwd.
    #[default]
    GitRoot,
    /// Always the cwd's own name.
    Cwd,
}

pub struct ProjectResolver {
    strategy: Strategy,
    cache: Mutex<HashMap<String, Arc<Project>>>,
}

impl ProjectResolver {
    pub fn new(strategy: Strategy) -> Self {
        ProjectResolver {
            strategy,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The project of `cwd` if it was looked up before, without touching the disk (`None`: a
    /// lookup would read it). What lets an event be prepared on an async worker.
    pub fn cached(&self, cwd: &str) -> Option<Project> {
        self.cache.lock().unwrap().get(cwd).map(|p| (**p).clone())
    }

    pub fn resolve(&self, cwd: &str) -> Project {
        if let Some(p) = self.cache.lock().unwrap().get(cwd) {
            return (**p).clone();
        }
        let p = Arc::new(self.lookup(cwd));
        let mut cache = self.cache.lock().unwrap();
        // Bounded: keys are at most a path long (`ingest::bounds`), so at most ~4 MB.
        if cache.len() > 1024 {
            cache.clear();
        }
        cache.insert(cwd.to_string(), p.clone());
        (*p).clone()
    }

    fn lookup(&self, cwd: &str) -> Project {
        let trimmed = cwd.trim_end_matches('/');
        let path = Path::new(if trimmed.is_empty() { "/" } else { trimmed });
        let (root, worktree, git_dir) = match self.strategy {
            Strategy::GitRoot => match path.ancestors().find(|dir| dir.join(".git").exists()) {
                Some(top) => {
                    let git = checkout_git(top);
                    match git.as_ref().and_then(|g| g.main_root.clone()) {
                        Some(main) if main != top => (main, Some(top.to_path_buf()), git),
                        _ => (top.to_path_buf(), None, git),
                    }
                }
                None => (path.to_path_buf(), None, None),
            },
            Strategy::Cwd => (path.to_path_buf(), None, None),
        };
        let name = root
            .file_name()
            .and_then(|n| n.to_str())
            .map(|n| {
                n.strip_suffix(".git")
                    .filter(|s| !s.is_empty())
                    .unwrap_or(n)
            })
            .filter(|n| !n.is_empty())
            .unwrap_or("/")
            .to_string();
        Project {
            name,
            root: root.to_string_lossy().into_owned(),
            worktree: worktree.map(|w| w.to_string_lossy().into_owned()),
            git_dir: git_dir.map(|g| g.git_dir.to_string_lossy().into_owned()),
            branch: None,
        }
    }
}

/// What the `.git` of a checkout says.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Git {
    /// Where this checkout's `HEAD` lives.
    git_dir: PathBuf,
    /// The main repository's working tree, when this checkout is a linked worktree of it
    /// (`None` for a submodule or a `gitdir:` that names no worktree).
    main_root: Option<PathBuf>,
}

/// Read the `.git` of the checkout at `top`: a folder (a main checkout), or a file naming the git
/// directory (a linked worktree, whose `commondir` leads to the main repository's `.git`).
fn checkout_git(top: &Path) -> Option<Git> {
    let dot = top.join(".git");
    let meta = std::fs::metadata(&dot).ok()?;
    if meta.is_dir() {
        return Some(Git {
            git_dir: dot,
            main_root: Some(top.to_path_buf()),
        });
    }
    let text = read_small(&dot)?;
    let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    let git_dir = normalize(&top.join(target));
    // `commondir` exists only in a linked worktree's git directory (a submodule's has none).
    let main_root = read_small(&git_dir.join("commondir")).and_then(|c| {
        let common = normalize(&git_dir.join(c.lines().next()?.trim()));
        if common.file_name()? == ".git" {
            common.parent().map(Path::to_path_buf)
        } else {
            // A bare main repository (`shop.git`): it is its own root.
            Some(common)
        }
    });
    Some(Git { git_dir, main_root })
}

/// The branch checked out in `git_dir` (`ref: refs/heads/<branch>` in `HEAD`), or `detached at
/// <short hash>`; `None` without a readable `HEAD`.
pub fn branch(git_dir: &Path) -> Option<String> {
    let head = read_small(&git_dir.join("HEAD"))?;
    let head = head.lines().next()?.trim();
    if let Some(r) = head.strip_prefix("ref:") {
        let r = r.trim();
        let name = r.strip_prefix("refs/heads/").unwrap_or(r);
        return (!name.is_empty()).then(|| name.chars().take(200).collect());
    }
    let hex = head.len() >= 7 && head.chars().all(|c| c.is_ascii_hexdigit());
    hex.then(|| format!("detached at {}", &head[..7]))
}

/// A small regular file's text: never a FIFO or device (opening one could block or never end),
/// at most [`MAX_GIT_FILE`] bytes.
fn read_small(path: &Path) -> Option<String> {
    use std::os::unix::fs::OpenOptionsExt;
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    // O_NONBLOCK: were it swapped for a FIFO after the check, the open still returns at once.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut buf = Vec::new();
    f.take(MAX_GIT_FILE).read_to_end(&mut buf).ok()?;
    String::from_utf8(buf).ok()
}

/// `a/b/../c` → `a/c`, without touching the file system (`commondir` is usually `../..`).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// `path` relative to `root` when it lies inside it.
pub fn relative(path: &str, root: &str) -> Option<String> {
    let rest = path.strip_prefix(root)?;
    let rest = rest.strip_prefix('/')?;
    (!rest.is_empty()).then(|| rest.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_root_wins_over_cwd() {
        // Removed with everything in it when the test ends, passed or not.
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().to_path_buf();
        let sub = base.join("app/src/deep");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::create_dir_all(base.join("app/.git")).unwrap();
        let r = ProjectResolver::new(Strategy::GitRoot);
        let p = r.resolve(sub.to_str().unwrap());
        assert_eq!(p.name, "app");
        assert_eq!(p.root, base.join("app").to_str().unwrap());
        assert_eq!(p.worktree, None);
        let c = ProjectResolver::new(Strategy::Cwd).resolve(sub.to_str().unwrap());
        assert_eq!(c.name, "deep");
    }

    #[test]
    fn missing_dir_falls_back_to_its_name() {
        let r = ProjectResolver::new(Strategy::GitRoot);
        assert_eq!(r.resolve("/home/dev/projects/acme-api/").name, "acme-api");
        assert_eq!(r.resolve("/").name, "/");
    }

    #[test]
    fn relative_paths() {
        assert_eq!(relative("/a/b/c.rs", "/a"), Some("b/c.rs".into()));
        assert_eq!(relative("/ab/c.rs", "/a"), None);
        assert_eq!(relative("/a", "/a"), None);
    }

    fn git(dir: &Path, args: &[&str]) {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(dir)
            .output()
            .expect("git is installed");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    /// A real `git worktree add`: the worktree's sessions belong to the main checkout's
    /// project, with the worktree's own folder and branch kept.
    #[test]
    fn a_worktree_belongs_to_its_main_repository() {
        // Removed with everything in it when the test ends, passed or not.
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().to_path_buf();
        let main = base.join("shop");
        std::fs::create_dir_all(main.join("src")).unwrap();
        git(&main, &["init", "-q", "-b", "main"]);
        git(&main, &["commit", "-q", "--allow-empty", "-m", "init"]);
        git(
            &main,
            &["worktree", "add", "-q", "-b", "fix-refunds", "../shop-fix"],
        );
        let wt = base.join("shop-fix");
        std::fs::create_dir_all(wt.join("src/deep")).unwrap();
        let r = ProjectResolver::new(Strategy::GitRoot);
        let m = r.resolve(main.join("src").to_str().unwrap());
        let w = r.resolve(wt.join("src/deep").to_str().unwrap());
        assert_eq!((m.name.as_str(), w.name.as_str()), ("shop", "shop"));
        assert_eq!(w.root, m.root);
        assert_eq!(w.worktree.as_deref(), wt.to_str());
        assert_eq!(w.checkout(), wt.to_str().unwrap());
        assert_eq!(m.checkout(), main.to_str().unwrap());
        assert_eq!(m.read_branch().as_deref(), Some("main"));
        assert_eq!(w.read_branch().as_deref(), Some("fix-refunds"));
        git(&wt, &["checkout", "-q", "--detach"]);
        assert!(w.read_branch().unwrap().starts_with("detached at "));
    }

    /// A `.git` that is a FIFO, a huge file or garbage names no worktree and never blocks.
    #[test]
    fn hostile_dot_git_files_are_not_followed() {
        // Removed with everything in it when the test ends, passed or not.
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().to_path_buf();
        for (name, make) in [("fifo", 0u8), ("huge", 1), ("garbage", 2), ("dangling", 3)] {
            let top = base.join(name);
            std::fs::create_dir_all(&top).unwrap();
            let dot = top.join(".git");
            match make {
                0 => {
                    let c = std::ffi::CString::new(dot.to_str().unwrap()).unwrap();
                    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
                }
                1 => std::fs::write(&dot, "gitdir: ".to_string() + &"a/".repeat(100_000)).unwrap(),
                2 => std::fs::write(&dot, [0xff, 0xfe, b'\n']).unwrap(),
                _ => std::fs::write(&dot, "gitdir: /nonexistent/.git/worktrees/x\n").unwrap(),
            }
            let p = ProjectResolver::new(Strategy::GitRoot).resolve(top.to_str().unwrap());
            assert_eq!(p.name, name, "{p:?}");
            assert_eq!(p.worktree, None);
            assert_eq!(p.read_branch(), None);
        }
    }
}
