//! The service manager: systemd user units (socket activated) where systemd runs; on macOS a
//! note naming the launchd plist.

use super::{which, Change, Ctx};
use std::path::{Path, PathBuf};

/// The user service: systemd user units (socket activated) where systemd runs, else nothing
/// (the shims start the daemon on demand).
pub(super) fn service(cx: &mut Ctx, install: bool, dry_run: bool) {
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
            include_str!("../../../systemd/nmemd.socket").to_string(),
        ),
        (
            "nmemd.service",
            include_str!("../../../systemd/nmemd.service").replace(
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
