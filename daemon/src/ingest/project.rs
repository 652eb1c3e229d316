//! Which project a working directory belongs to: the basename of the nearest enclosing git root,
//! else of the directory itself. Looked up once per directory and cached.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    pub name: String,
    /// The git root (or the cwd when there is none), kept so two checkouts named `app` can be
    /// told apart.
    pub root: String,
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
        let root = match self.strategy {
            Strategy::GitRoot => path
                .ancestors()
                .find(|dir| dir.join(".git").exists())
                .unwrap_or(path),
            Strategy::Cwd => path,
        };
        let name = root
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| !n.is_empty())
            .unwrap_or("/")
            .to_string();
        Project {
            name,
            root: root.to_string_lossy().into_owned(),
        }
    }
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
        let base = std::env::temp_dir().join(format!("nmem-proj-{}", std::process::id()));
        let sub = base.join("app/src/deep");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::create_dir_all(base.join("app/.git")).unwrap();
        let r = ProjectResolver::new(Strategy::GitRoot);
        let p = r.resolve(sub.to_str().unwrap());
        assert_eq!(p.name, "app");
        assert_eq!(p.root, base.join("app").to_str().unwrap());
        let c = ProjectResolver::new(Strategy::Cwd).resolve(sub.to_str().unwrap());
        assert_eq!(c.name, "deep");
        std::fs::remove_dir_all(&base).unwrap();
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
}
