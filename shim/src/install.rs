//! `nmem install` / `nmem uninstall`: wire nmem into the harnesses and the service manager, and
//! take it out again.
//!
//! Only nmem's own entries are ever touched: a hook handler is nmem's when its command runs an
//! executable named `nmem` with `record`; an MCP server is nmem's when it is named `nmem` and runs
//! `nmem serve`. Every file is backed up (`<file>.nmem-backup-<unix time>`) before it is changed,
//! written atomically, and left alone when nothing in it needs to change, so installing twice
//! changes nothing the second time. Uninstalling removes nmem's entries and the containers that
//! only held them, which gives back the file as it was when nothing else changed it meanwhile.

use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    ClaudeCode,
    Codex,
    Gemini,
    Cursor,
}

impl Target {
    pub fn parse(s: &str) -> Option<Vec<Target>> {
        Some(match s {
            "claude-code" | "claude" => vec![Target::ClaudeCode],
            "codex" => vec![Target::Codex],
            "gemini" => vec![Target::Gemini],
            "cursor" => vec![Target::Cursor],
            "all" => vec![
                Target::ClaudeCode,
                Target::Codex,
                Target::Gemini,
                Target::Cursor,
            ],
            _ => return None,
        })
    }
}

pub struct Options {
    /// Explicit targets; `None` means Claude Code plus every other harness whose config exists.
    pub targets: Option<Vec<Target>>,
    pub service: bool,
    pub dry_run: bool,
    pub delete_data: bool,
}

/// One file's new content.
struct Change {
    path: PathBuf,
    before: Option<String>,
    after: String,
    what: Vec<String>,
}

struct Ctx {
    home: PathBuf,
    nmem: PathBuf,
    changes: Vec<Change>,
    notes: Vec<String>,
}

const CLAUDE_EVENTS: &[(&str, bool, u32)] = &[
    // (event, takes a tool matcher, timeout in seconds)
    ("SessionStart", false, 10),
    ("UserPromptSubmit", false, 5),
    ("PostToolUse", true, 5),
    ("PostToolUseFailure", true, 5),
    ("PreCompact", false, 5),
    ("PostCompact", false, 5),
    ("Stop", false, 5),
    ("SubagentStop", false, 5),
    ("StopFailure", false, 5),
    ("SessionEnd", false, 2),
];
const CODEX_EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PostToolUse",
    "Stop",
    "PreCompact",
    "PostCompact",
    "StopFailure",
];
const GEMINI_EVENTS: &[&str] = &[
    "SessionStart",
    "BeforeAgent",
    "AfterTool",
    "AfterAgent",
    "PreCompress",
    "SessionEnd",
];
const CURSOR_EVENTS: &[&str] = &[
    "sessionStart",
    "sessionEnd",
    "beforeSubmitPrompt",
    "afterShellExecution",
    "afterFileEdit",
    "afterMCPExecution",
    "postToolUse",
    "afterAgentResponse",
    "stop",
];

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
    let targets = opts.targets.clone().unwrap_or_else(|| {
        let mut t = vec![Target::ClaudeCode];
        for (dir, target) in [
            (".codex", Target::Codex),
            (".gemini", Target::Gemini),
            (".cursor", Target::Cursor),
        ] {
            if cx.home.join(dir).is_dir() {
                t.push(target);
            }
        }
        t
    });
    for t in &targets {
        let res = match t {
            Target::ClaudeCode => claude(&mut cx, install),
            Target::Codex => codex(&mut cx, install),
            Target::Gemini => gemini(&mut cx, install),
            Target::Cursor => cursor(&mut cx, install),
        };
        if let Err(e) = res {
            eprintln!("nmem: {e}");
            return ExitCode::from(1);
        }
    }
    if opts.service {
        service(&mut cx, install, opts.dry_run);
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

fn command(cx: &Ctx, harness: Option<&str>) -> String {
    let bin = shell_quote(&cx.nmem.to_string_lossy());
    match harness {
        None => format!("{bin} record"),
        Some(h) => format!("{bin} record --harness {h}"),
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

fn load(path: &Path) -> Result<(Option<String>, Value), String> {
    match std::fs::read_to_string(path) {
        Ok(text) if text.trim().is_empty() => Ok((Some(text), json!({}))),
        Ok(text) => {
            let v: Value = serde_json::from_str(&text).map_err(|e| {
                format!(
                    "{} is not valid JSON ({e}); fix it or move it aside, then run this again",
                    path.display()
                )
            })?;
            if !v.is_object() {
                return Err(format!(
                    "{} does not hold a JSON object; nmem will not change it",
                    path.display()
                ));
            }
            Ok((Some(text), v))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((None, json!({}))),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

fn stage(
    cx: &mut Ctx,
    path: PathBuf,
    before: Option<String>,
    before_value: &Value,
    after: Value,
    what: Vec<String>,
) {
    let unchanged = match &before {
        Some(_) => *before_value == after,
        None => after.as_object().is_some_and(Map::is_empty),
    };
    if unchanged || what.is_empty() {
        return;
    }
    let mut text = serde_json::to_string_pretty(&after).expect("serialises");
    text.push('\n');
    cx.changes.push(Change {
        path,
        before,
        after: text,
        what,
    });
}

/// Claude Code, Codex and Gemini: `hooks.<Event>: [{matcher?, hooks: [{type, command, timeout}]}]`.
fn set_nested_hooks(
    root: &mut Value,
    wanted: &[(String, Option<&str>, Value)],
    what: &mut Vec<String>,
) {
    let before = root.clone();
    remove_nested_hooks(root, &mut Vec::new());
    let hooks = root
        .as_object_mut()
        .unwrap()
        .entry("hooks")
        .or_insert_with(|| json!({}));
    let Some(hooks) = hooks.as_object_mut() else {
        return;
    };
    for (event, matcher, handler) in wanted {
        let groups = hooks.entry(event.clone()).or_insert_with(|| json!([]));
        let Some(groups) = groups.as_array_mut() else {
            continue;
        };
        let mut group = Map::new();
        if let Some(m) = matcher {
            group.insert("matcher".into(), json!(m));
        }
        group.insert("hooks".into(), json!([handler]));
        groups.push(Value::Object(group));
    }
    if *root != before {
        what.push(format!(
            "nmem's hooks for {}",
            wanted
                .iter()
                .map(|(e, _, _)| e.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    } else {
        // Same content: keep the original (and its key order) untouched.
        *root = before;
    }
}

/// Take out every nmem handler, then the groups, events and `hooks` object that held only them.
fn remove_nested_hooks(root: &mut Value, what: &mut Vec<String>) {
    let Some(hooks) = root.get_mut("hooks").and_then(Value::as_object_mut) else {
        return;
    };
    let mut removed = 0;
    for groups in hooks.values_mut() {
        let Some(groups) = groups.as_array_mut() else {
            continue;
        };
        for g in groups.iter_mut() {
            // Cursor's flat shape: the group is the handler.
            if let Some(handlers) = g.get_mut("hooks").and_then(Value::as_array_mut) {
                let n = handlers.len();
                handlers.retain(|h| {
                    !h.get("command")
                        .and_then(Value::as_str)
                        .is_some_and(is_ours)
                });
                removed += n - handlers.len();
            }
        }
        let n = groups.len();
        groups.retain(|g| match g.get("hooks").and_then(Value::as_array) {
            Some(h) => !h.is_empty(),
            None => !g
                .get("command")
                .and_then(Value::as_str)
                .is_some_and(is_ours),
        });
        removed += n - groups.len();
    }
    hooks.retain(|_, g| !g.as_array().is_some_and(Vec::is_empty));
    if removed > 0 {
        what.push(format!(
            "removed {removed} nmem hook entr{}",
            if removed == 1 { "y" } else { "ies" }
        ));
        let empty = hooks.is_empty();
        let obj = root.as_object_mut().unwrap();
        if empty {
            obj.remove("hooks");
            // Cursor's file: nmem added `version` with the hooks.
            if obj.len() == 1 && obj.get("version") == Some(&json!(1)) {
                obj.remove("version");
            }
        }
    }
}

/// `mcpServers.nmem` in a JSON file.
fn set_mcp(cx: &Ctx, root: &mut Value, install: bool, what: &mut Vec<String>, with_type: bool) {
    let servers = root.get("mcpServers").and_then(Value::as_object);
    let existing = servers.and_then(|s| s.get("nmem"));
    let ours = existing.is_none_or(|e| {
        e.get("command")
            .and_then(Value::as_str)
            .is_some_and(|c| Path::new(c).file_name().is_some_and(|n| n == "nmem"))
            && e.get("args") == Some(&json!(["serve"]))
    });
    if !ours {
        what.push("left the existing `nmem` MCP server alone: it does not run `nmem serve`".into());
        return;
    }
    let obj = root.as_object_mut().unwrap();
    if install {
        let mut entry = Map::new();
        if with_type {
            entry.insert("type".into(), json!("stdio"));
        }
        entry.insert("command".into(), json!(cx.nmem.to_string_lossy()));
        entry.insert("args".into(), json!(["serve"]));
        let entry = Value::Object(entry);
        let servers = obj.entry("mcpServers").or_insert_with(|| json!({}));
        if servers.get("nmem") != Some(&entry) {
            servers
                .as_object_mut()
                .map(|s| s.insert("nmem".into(), entry));
            what.push("MCP server `nmem` (nmem serve)".into());
        }
    } else if let Some(servers) = obj.get_mut("mcpServers").and_then(Value::as_object_mut) {
        if servers.remove("nmem").is_some() {
            what.push("removed MCP server `nmem`".into());
            if servers.is_empty() {
                obj.remove("mcpServers");
            }
        }
    }
}

fn claude(cx: &mut Ctx, install: bool) -> Result<(), String> {
    let path = cx.home.join(".claude/settings.json");
    let (before, v) = load(&path)?;
    let mut after = v.clone();
    let mut what = Vec::new();
    if install {
        let cmd = command(cx, None);
        let wanted: Vec<(String, Option<&str>, Value)> = CLAUDE_EVENTS
            .iter()
            .map(|(e, tools, timeout)| {
                (
                    e.to_string(),
                    tools.then_some("*"),
                    json!({"type": "command", "command": cmd, "timeout": timeout}),
                )
            })
            .collect();
        set_nested_hooks(&mut after, &wanted, &mut what);
    } else {
        remove_nested_hooks(&mut after, &mut what);
    }
    stage(cx, path, before, &v, after, what);

    // The MCP server at user scope: `claude mcp` when it is installed, else ~/.claude.json.
    if which("claude").is_some() {
        cx.notes.push(if install {
            format!(
                "register the MCP server with: claude mcp add --scope user nmem -- {} serve",
                shell_quote(&cx.nmem.to_string_lossy())
            )
        } else {
            "remove the MCP server with: claude mcp remove --scope user nmem".to_string()
        });
    }
    let path = cx.home.join(".claude.json");
    let (before, v) = load(&path)?;
    let mut after = v.clone();
    let mut what = Vec::new();
    set_mcp(cx, &mut after, install, &mut what, true);
    stage(cx, path, before, &v, after, what);
    Ok(())
}

fn codex(cx: &mut Ctx, install: bool) -> Result<(), String> {
    let path = cx.home.join(".codex/hooks.json");
    let (before, v) = load(&path)?;
    let mut after = v.clone();
    let mut what = Vec::new();
    if install {
        let cmd = command(cx, Some("codex"));
        let wanted: Vec<(String, Option<&str>, Value)> = CODEX_EVENTS
            .iter()
            .map(|e| {
                (
                    e.to_string(),
                    None,
                    json!({"type": "command", "command": cmd, "timeout": 5}),
                )
            })
            .collect();
        set_nested_hooks(&mut after, &wanted, &mut what);
    } else {
        remove_nested_hooks(&mut after, &mut what);
    }
    stage(cx, path, before, &v, after, what);
    codex_mcp(cx, install)?;
    Ok(())
}

/// `[mcp_servers.nmem]` in ~/.codex/config.toml, edited in place (comments and layout kept).
fn codex_mcp(cx: &mut Ctx, install: bool) -> Result<(), String> {
    let path = cx.home.join(".codex/config.toml");
    let before = match std::fs::read_to_string(&path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let mut doc: toml_edit::DocumentMut = before.as_deref().unwrap_or("").parse().map_err(|e| {
        format!(
            "{} is not valid TOML ({e}); fix it, then run this again",
            path.display()
        )
    })?;
    let existing = doc.get("mcp_servers").and_then(|t| t.get("nmem"));
    let ours = existing.is_none_or(|e| {
        e.get("command")
            .and_then(|c| c.as_str())
            .is_some_and(|c| Path::new(c).file_name().is_some_and(|n| n == "nmem"))
    });
    if !ours {
        cx.notes.push(format!(
            "left the existing `nmem` MCP server in {} alone: it does not run nmem",
            path.display()
        ));
        return Ok(());
    }
    let mut what = Vec::new();
    let bin = cx.nmem.to_string_lossy().into_owned();
    if install {
        let current = existing
            .and_then(|e| e.get("command"))
            .and_then(|c| c.as_str())
            .map(str::to_string);
        if current.as_deref() != Some(bin.as_str()) {
            let servers = doc.entry("mcp_servers").or_insert(toml_edit::table());
            if let Some(t) = servers.as_table_mut() {
                t.set_implicit(true);
                let mut entry = toml_edit::Table::new();
                entry.insert("command", toml_edit::value(bin.clone()));
                let mut args = toml_edit::Array::new();
                args.push("serve");
                entry.insert("args", toml_edit::value(args));
                t.insert("nmem", toml_edit::Item::Table(entry));
            }
            what.push("MCP server `nmem` (nmem serve)".to_string());
        }
    } else if existing.is_some() {
        if let Some(t) = doc.get_mut("mcp_servers").and_then(|t| t.as_table_mut()) {
            t.remove("nmem");
            if t.is_empty() {
                doc.remove("mcp_servers");
            }
        }
        what.push("removed MCP server `nmem`".to_string());
    }
    if !what.is_empty() {
        let after = doc.to_string();
        // An empty file would only hold what nmem added: removed, like the JSON files.
        let after = if after.trim().is_empty() && before.is_none() {
            "{}".to_string()
        } else {
            after
        };
        cx.changes.push(Change {
            path,
            before,
            after,
            what,
        });
    }
    Ok(())
}

fn gemini(cx: &mut Ctx, install: bool) -> Result<(), String> {
    let path = cx.home.join(".gemini/settings.json");
    let (before, v) = load(&path)?;
    let mut after = v.clone();
    let mut what = Vec::new();
    if install {
        let cmd = command(cx, Some("gemini"));
        let wanted: Vec<(String, Option<&str>, Value)> = GEMINI_EVENTS
            .iter()
            .map(|e| {
                (
                    e.to_string(),
                    None,
                    json!({"type": "command", "command": cmd, "name": "nmem", "timeout": 5000}),
                )
            })
            .collect();
        set_nested_hooks(&mut after, &wanted, &mut what);
        if after.pointer("/tools/enableHooks") != Some(&json!(true)) {
            cx.notes.push("Gemini CLI runs hooks only when they are enabled: /settings → Advanced, or tools.enableHooks".into());
        }
    } else {
        remove_nested_hooks(&mut after, &mut what);
    }
    set_mcp(cx, &mut after, install, &mut what, false);
    stage(cx, path, before, &v, after, what);
    Ok(())
}

fn cursor(cx: &mut Ctx, install: bool) -> Result<(), String> {
    let path = cx.home.join(".cursor/hooks.json");
    let (before, v) = load(&path)?;
    let mut after = v.clone();
    let mut what = Vec::new();
    remove_nested_hooks(&mut after, &mut Vec::new());
    if install {
        let cmd = command(cx, Some("cursor"));
        let obj = after.as_object_mut().unwrap();
        obj.entry("version").or_insert(json!(1));
        let hooks = obj.entry("hooks").or_insert_with(|| json!({}));
        if let Some(hooks) = hooks.as_object_mut() {
            for e in CURSOR_EVENTS {
                if let Some(list) = hooks
                    .entry(e.to_string())
                    .or_insert_with(|| json!([]))
                    .as_array_mut()
                {
                    list.push(json!({"command": cmd}));
                }
            }
        }
        if after != v {
            what.push(format!("nmem's hooks for {}", CURSOR_EVENTS.join(", ")));
        } else {
            after = v.clone();
        }
    } else {
        after = v.clone();
        remove_nested_hooks(&mut after, &mut what);
    }
    stage(cx, path, before, &v, after, what);
    let path = cx.home.join(".cursor/mcp.json");
    let (before, v) = load(&path)?;
    let mut after = v.clone();
    let mut what = Vec::new();
    set_mcp(cx, &mut after, install, &mut what, false);
    stage(cx, path, before, &v, after, what);
    Ok(())
}

/// The user service: systemd user units (socket activated) where systemd runs, else nothing
/// (the shims start the daemon on demand).
fn service(cx: &mut Ctx, install: bool, dry_run: bool) {
    if cfg!(target_os = "macos") {
        cx.notes.push(
            "launchd: load launchd/dev.nmem.nmemd.plist with launchctl (see the README)".into(),
        );
        return;
    }
    let unit_dir = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| cx.home.join(".config"))
        .join("systemd/user");
    let systemd = which("systemctl").is_some()
        && std::process::Command::new("systemctl")
            .args(["--user", "show-environment"])
            .output()
            .is_ok_and(|o| o.status.success());
    let bin_dir = cx.nmem.parent().map(Path::to_path_buf).unwrap_or_default();
    let units = [
        (
            "nmemd.socket",
            include_str!("../../systemd/nmemd.socket").to_string(),
        ),
        (
            "nmemd.service",
            include_str!("../../systemd/nmemd.service").replace(
                "%h/.local/bin/nmemd",
                &bin_dir.join("nmemd").to_string_lossy(),
            ),
        ),
    ];
    for (name, text) in &units {
        let path = unit_dir.join(name);
        let before = std::fs::read_to_string(&path).ok();
        if install && before.as_deref() != Some(text.as_str()) {
            cx.changes.push(Change {
                path,
                before,
                after: text.clone(),
                what: vec![format!("systemd user unit {name}")],
            });
        } else if !install && before.is_some() {
            if !dry_run {
                if systemd {
                    let _ = std::process::Command::new("systemctl")
                        .args(["--user", "disable", "--now", name])
                        .status();
                }
                let _ = std::fs::remove_file(&path);
            }
            cx.notes
                .push(format!("removed the systemd user unit {name}"));
        }
    }
    if install {
        if systemd && !dry_run {
            let _ = std::process::Command::new("systemctl")
                .args(["--user", "daemon-reload"])
                .status();
            cx.notes
                .push("start it now with: systemctl --user enable --now nmemd.socket".into());
        } else if !systemd {
            cx.notes
                .push("no systemd user session here: `nmem record` starts nmemd on demand".into());
        }
    }
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
    #[test]
    fn hooks_name_the_small_nmem_beside_nmem_cli() {
        let dir = std::env::temp_dir().join(format!("nmem-hookbin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cli = dir.join("nmem-cli");
        // No `nmem` beside it: nmem-cli itself (it runs `record` too).
        assert_eq!(super::hook_binary(cli.clone()), cli);
        std::fs::write(dir.join("nmem"), "").unwrap();
        assert_eq!(super::hook_binary(cli), dir.join("nmem"));
        // Any other name is kept as it is.
        let other = dir.join("nmem-dev");
        assert_eq!(super::hook_binary(other.clone()), other);
        std::fs::remove_dir_all(&dir).unwrap();
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
        let dir = std::env::temp_dir().join(format!("nmem-ours-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("nmem"), "").unwrap();
        let cmd = format!("{} record", dir.join("nmem").display());
        assert!(!super::is_ours(&cmd));
        std::fs::write(dir.join("nmemd"), "").unwrap();
        assert!(super::is_ours(&cmd));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
