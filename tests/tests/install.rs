//! `nmem install` / `nmem uninstall` against a temporary HOME that already holds other tools'
//! hooks and MCP servers for every harness.

use nmem_e2e::*;
use serde_json::{json, Value};
use std::path::Path;

fn foreign_files(home: &Path) -> Vec<(&'static str, Value)> {
    let files = vec![
        (
            ".claude/settings.json",
            json!({"model": "opus", "permissions": {"allow": ["Bash(ls:*)"]},
                   "hooks": {"PostToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "prettier --write", "timeout": 30}]}],
                             "Notification": [{"hooks": [{"type": "command", "command": "notify-send claude"}]}]}}),
        ),
        (
            ".claude.json",
            json!({"numStartups": 12, "mcpServers": {"github": {"type": "stdio", "command": "github-mcp", "args": []}}}),
        ),
        (
            ".codex/hooks.json",
            json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}}),
        ),
        (
            ".gemini/settings.json",
            json!({"theme": "dark", "hooks": {"AfterTool": [{"matcher": "write_file", "hooks": [{"type": "command", "command": "lint.sh"}]}]},
                   "mcpServers": {"fs": {"command": "fs-mcp"}}}),
        ),
        (
            ".cursor/hooks.json",
            json!({"version": 1, "hooks": {"stop": [{"command": "./audit.sh"}]}}),
        ),
        (
            ".cursor/mcp.json",
            json!({"mcpServers": {"linear": {"url": "https://mcp.linear.app/sse"}}}),
        ),
    ];
    for (rel, v) in &files {
        let p = home.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, serde_json::to_string_pretty(v).unwrap()).unwrap();
    }
    files
}

fn read(home: &Path, rel: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(home.join(rel)).unwrap()).unwrap()
}

fn run(home: &Home, fake_home: &Path, args: &[&str]) -> String {
    let out = home
        .cmd("nmem")
        .args(args)
        .env("HOME", fake_home)
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "nmem {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn commands(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(c) = m.get("command").and_then(Value::as_str) {
                    out.push(c.to_string());
                }
                m.values().for_each(|x| walk(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    walk(v, &mut out);
    out
}

#[test]
fn install_is_idempotent_keeps_foreign_entries_and_uninstall_restores_exactly() {
    let home = Home::new("install");
    let fake = home.dir.join("home");
    std::fs::create_dir_all(&fake).unwrap();
    let before = foreign_files(&fake);

    let codex_toml = "# my codex settings\nmodel = \"gpt-5.5-codex\"\n\n[mcp_servers.github]\ncommand = \"github-mcp\"\nargs = []\n";
    std::fs::write(fake.join(".codex/config.toml"), codex_toml).unwrap();
    let dry = run(
        &home,
        &fake,
        &["install", "--harness", "all", "--no-service", "--dry-run"],
    );
    assert!(dry.contains("would change"), "{dry}");
    for (rel, v) in &before {
        assert_eq!(&read(&fake, rel), v, "--dry-run changed {rel}");
    }

    let first = run(
        &home,
        &fake,
        &["install", "--harness", "all", "--no-service"],
    );
    assert!(first.contains("changed"), "{first}");
    let after_first: Vec<Value> = before.iter().map(|(rel, _)| read(&fake, rel)).collect();
    let second = run(
        &home,
        &fake,
        &["install", "--harness", "all", "--no-service"],
    );
    assert!(
        second.contains("nothing to change"),
        "twice = once: {second}"
    );
    let after_second: Vec<Value> = before.iter().map(|(rel, _)| read(&fake, rel)).collect();
    assert_eq!(after_first, after_second);

    // nmem's entries are there, and every foreign one is untouched.
    let claude = read(&fake, ".claude/settings.json");
    for event in [
        "SessionStart",
        "UserPromptSubmit",
        "PostToolUse",
        "PostToolUseFailure",
        "PreCompact",
        "PostCompact",
        "Stop",
        "SubagentStop",
        "StopFailure",
        "SessionEnd",
    ] {
        assert!(
            commands(&claude["hooks"][event])
                .iter()
                .any(|c| c.ends_with("nmem record")),
            "{event}: {claude}"
        );
    }
    assert_eq!(
        claude["hooks"]["PostToolUse"][0]["hooks"][0]["command"],
        "prettier --write"
    );
    assert_eq!(
        claude["hooks"]["Notification"],
        before[0].1["hooks"]["Notification"]
    );
    assert_eq!(claude["permissions"], before[0].1["permissions"]);
    let cj = read(&fake, ".claude.json");
    assert_eq!(
        cj["mcpServers"]["github"],
        before[1].1["mcpServers"]["github"]
    );
    assert_eq!(cj["mcpServers"]["nmem"]["args"], json!(["serve"]));
    assert!(commands(&read(&fake, ".codex/hooks.json"))
        .iter()
        .any(|c| c.ends_with("record --harness codex")));
    let gem = read(&fake, ".gemini/settings.json");
    assert!(commands(&gem["hooks"]["AfterTool"]).contains(&"lint.sh".to_string()));
    assert!(commands(&gem["hooks"]["AfterTool"])
        .iter()
        .any(|c| c.ends_with("record --harness gemini")));
    assert_eq!(gem["mcpServers"]["fs"], before[3].1["mcpServers"]["fs"]);
    let toml = std::fs::read_to_string(fake.join(".codex/config.toml")).unwrap();
    assert!(
        toml.starts_with("# my codex settings")
            && toml.contains("[mcp_servers.github]")
            && toml.contains("[mcp_servers.nmem]"),
        "{toml}"
    );
    assert!(toml.contains("args = [\"serve\"]"), "{toml}");
    let toml = std::fs::read_to_string(fake.join(".codex/config.toml")).unwrap();
    assert!(
        toml.starts_with("# my codex settings")
            && toml.contains("[mcp_servers.github]")
            && toml.contains("[mcp_servers.nmem]"),
        "{toml}"
    );
    assert!(toml.contains("args = [\"serve\"]"), "{toml}");
    let cur = read(&fake, ".cursor/hooks.json");
    assert_eq!(cur["hooks"]["stop"][0]["command"], "./audit.sh");
    assert!(commands(&cur["hooks"]["afterShellExecution"])
        .iter()
        .any(|c| c.ends_with("record --harness cursor")));
    // Backups of what was there.
    let backups: Vec<_> = std::fs::read_dir(fake.join(".claude"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains("nmem-backup"))
        .collect();
    assert_eq!(backups.len(), 1);
    let backup: Value =
        serde_json::from_str(&std::fs::read_to_string(backups[0].path()).unwrap()).unwrap();
    assert_eq!(backup, before[0].1);

    let out = run(
        &home,
        &fake,
        &["uninstall", "--harness", "all", "--no-service"],
    );
    assert!(out.contains("the memory is kept"), "{out}");
    for (rel, v) in &before {
        assert_eq!(&read(&fake, rel), v, "uninstall did not restore {rel}");
    }
    assert_eq!(
        std::fs::read_to_string(fake.join(".codex/config.toml"))
            .unwrap()
            .trim_end(),
        codex_toml.trim_end()
    );
    assert!(run(
        &home,
        &fake,
        &["uninstall", "--harness", "all", "--no-service"]
    )
    .contains("nothing to change"));
}

#[test]
fn a_fresh_home_gets_claude_code_only_and_loses_it_all_on_uninstall() {
    let home = Home::new("install-fresh");
    let fake = home.dir.join("home");
    std::fs::create_dir_all(&fake).unwrap();
    run(&home, &fake, &["install", "--no-service"]);
    assert!(fake.join(".claude/settings.json").exists());
    assert!(
        !fake.join(".gemini").exists(),
        "harnesses without config are left alone"
    );
    run(&home, &fake, &["uninstall", "--no-service"]);
    assert!(
        !fake.join(".claude/settings.json").exists(),
        "a file nmem created goes away"
    );
    assert!(!fake.join(".claude.json").exists());
}

#[test]
fn a_broken_settings_file_is_not_touched() {
    let home = Home::new("install-bad");
    let fake = home.dir.join("home");
    std::fs::create_dir_all(fake.join(".claude")).unwrap();
    std::fs::write(fake.join(".claude/settings.json"), "{ not json").unwrap();
    let out = home
        .cmd("nmem")
        .args(["install", "--no-service"])
        .env("HOME", &fake)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not valid JSON"));
    assert_eq!(
        std::fs::read_to_string(fake.join(".claude/settings.json")).unwrap(),
        "{ not json"
    );
}

#[test]
fn the_service_units_verify_and_the_launchd_agent_parses() {
    let home = Home::new("units");
    let fake = home.dir.join("home");
    let run_dir = home.dir.join("run");
    std::fs::create_dir_all(&fake).unwrap();
    std::fs::create_dir_all(&run_dir).unwrap();
    std::fs::set_permissions(
        &run_dir,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    // Installing writes the units with ExecStart pointing at the real nmemd beside nmem.
    let out = home
        .cmd("nmem")
        .args(["install", "--harness", "claude-code"])
        .env("HOME", &fake)
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let units = fake.join(".config/systemd/user");
    let service = std::fs::read_to_string(units.join("nmemd.service")).unwrap();
    assert!(
        service.contains(&format!("ExecStart={}", bin("nmemd").display())),
        "{service}"
    );
    let socket = std::fs::read_to_string(units.join("nmemd.socket")).unwrap();
    assert!(
        socket.contains("ListenStream=%t/nmem/nmemd.sock") && socket.contains("SocketMode=0600")
    );
    match std::process::Command::new("systemd-analyze")
        .args(["verify", "--user"])
        .arg(units.join("nmemd.socket"))
        .arg(units.join("nmemd.service"))
        .env("HOME", &fake)
        .env("XDG_RUNTIME_DIR", &run_dir)
        .output()
    {
        Ok(v) => assert!(
            v.status.success(),
            "systemd-analyze verify: {}",
            String::from_utf8_lossy(&v.stderr)
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => skip_unless_required(
            "systemd-analyze is not installed (Debian: systemd): the units are not verified",
        ),
        Err(e) => panic!("systemd-analyze: {e}"),
    }
    let plist =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../launchd/dev.nmem.nmemd.plist");
    match std::process::Command::new("python3")
        .args(["-c", "import plistlib,sys; d=plistlib.load(open(sys.argv[1],'rb')); assert d['Label']=='dev.nmem.nmemd' and d['ProgramArguments'][0].endswith('/nmemd'), d"])
        .arg(&plist)
        .output()
    {
        Ok(p) => assert!(
            p.status.success(),
            "the launchd plist does not parse: {}",
            String::from_utf8_lossy(&p.stderr)
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => skip_unless_required(
            "python3 is not installed: the launchd plist is not parsed",
        ),
        Err(e) => panic!("python3: {e}"),
    }
    // Uninstall takes the units away again.
    let out = home
        .cmd("nmem")
        .args(["uninstall", "--harness", "claude-code"])
        .env("HOME", &fake)
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!units.join("nmemd.service").exists() && !units.join("nmemd.socket").exists());
}

#[test]
fn the_plugin_folder_wires_the_same_hooks_and_server() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugin");
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join(".claude-plugin/plugin.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["name"], "nmem");
    let hooks: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("hooks/hooks.json")).unwrap())
            .unwrap();
    for event in [
        "SessionStart",
        "UserPromptSubmit",
        "PostToolUse",
        "PostToolUseFailure",
        "PreCompact",
        "PostCompact",
        "Stop",
        "SubagentStop",
        "StopFailure",
        "SessionEnd",
    ] {
        assert!(
            commands(&hooks["hooks"][event])
                .iter()
                .any(|c| c == "nmem record"),
            "{event}"
        );
    }
    let mcp: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".mcp.json")).unwrap()).unwrap();
    assert_eq!(mcp["mcpServers"]["nmem"]["args"], json!(["serve"]));
}

#[test]
fn install_offers_the_sessions_on_disk_and_imports_them_with_import() {
    let home = Home::new("install-import");
    let _d = home.start();
    let fake = home.dir.join("home");
    let projects = fake.join(".claude/projects/-home-dev-projects-acme-api");
    std::fs::create_dir_all(&projects).unwrap();
    std::fs::copy(
        fixtures().join("transcripts/claude-code/sample-session.jsonl"),
        projects.join("7d3f9a2e-4b1c-4e8a-9f6d-2c5b8e1a0f47.jsonl"),
    )
    .unwrap();
    // Not a terminal: nothing is imported unasked, and the output says how.
    let out = run(&home, &fake, &["install", "--no-service"]);
    assert!(
        out.contains("1 past session files on this machine (1 Claude Code)")
            && out.contains("run `nmem import`"),
        "{out}"
    );
    assert_eq!(home.count("SELECT COUNT(*) FROM prompts"), 0);
    // --no-import: not even offered.
    let out = run(&home, &fake, &["install", "--no-service", "--no-import"]);
    assert!(!out.contains("past session"), "{out}");
    // --import: imported right away.
    let out = run(&home, &fake, &["install", "--no-service", "--import"]);
    assert!(out.contains("imported 1 files"), "{out}");
    assert_eq!(
        home.count("SELECT COUNT(*) FROM prompts WHERE source = 'user'"),
        3
    );
}

/// One alias table: `record`, `install` and `import` take the same names for a harness (`claude`
/// is Claude Code everywhere), and refuse the same unknown one, saying which names they take.
#[test]
fn record_install_and_import_take_the_same_harness_names() {
    let home = Home::new("aliases");
    let fake_home = home.dir.join("home");
    std::fs::create_dir_all(&fake_home).unwrap();
    let payload = br#"{"session_id":"s1","cwd":"/w","hook_event_name":"PreToolUse"}"#;
    for name in ["claude", "claude-code"] {
        let out = home.record(name, payload);
        assert!(out.status.success(), "record --harness {name}: {out:?}");
        let out = run(
            &home,
            &fake_home,
            &["install", "--harness", name, "--no-service", "--dry-run"],
        );
        assert!(
            out.contains(".claude/settings.json"),
            "install {name}: {out}"
        );
        let out = home
            .cmd("nmem")
            .args(["import", "--harness", name, "--dry-run", "--json"])
            .arg(home.dir.join("no-such-folder"))
            .output()
            .unwrap();
        assert!(out.status.success(), "import --harness {name}: {out:?}");
    }
    let record = home.record("claude_code", payload);
    let install = home
        .cmd("nmem")
        .args(["install", "--harness", "claude_code", "--dry-run"])
        .env("HOME", &fake_home)
        .output()
        .unwrap();
    let import = home
        .cmd("nmem")
        .args(["import", "--harness", "claude_code", "--dry-run"])
        .output()
        .unwrap();
    for (what, out) in [("record", record), ("install", install), ("import", import)] {
        assert!(!out.status.success(), "{what} took `claude_code`");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("claude-code, codex"), "{what}: {err}");
    }
    assert!(
        !fake_home.join(".claude").exists(),
        "a dry run changed nothing"
    );
}
