//! `nmem ui`: ask nmemd to serve the web viewer (its listener lives in the daemon), print the
//! URL, and open a browser when there is one to open.
//!
//! A browser is opened only when stdout is a terminal and `$BROWSER` is set, or a display
//! (`$DISPLAY`, `$WAYLAND_DISPLAY`) is there for `xdg-open` (`open` on macOS): never from a
//! script, a test or an SSH session without a display, where printing the URL is the answer.

use crate::daemon_client::{post, CallError};
use nmem_proto::wire::{self, UiReply, UiRequest};
use std::io::IsTerminal;
use std::process::ExitCode;

pub fn run(stop: bool, rotate: bool, json: bool) -> ExitCode {
    let req = match (stop, rotate) {
        (true, _) => UiRequest::Stop,
        (_, true) => UiRequest::Rotate,
        _ => UiRequest::Start,
    };
    let reply: UiReply = match post(wire::PATH_UI, &req) {
        Ok(r) => r,
        Err(CallError::Api { message, .. }) => {
            eprintln!("nmem ui: {message}");
            return ExitCode::from(1);
        }
        Err(e) => {
            eprintln!("nmem ui: {e}");
            return ExitCode::from(2);
        }
    };
    for w in &reply.warnings {
        eprintln!("warning: {w}");
    }
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&reply).expect("serialises")
        );
        return ExitCode::SUCCESS;
    }
    match (req, &reply.url) {
        (UiRequest::Stop, _) => println!("the viewer is stopped"),
        (UiRequest::Rotate, None) => {
            println!("new token; the viewer is not listening (`nmem ui` starts it)")
        }
        (_, Some(url)) => {
            println!("{url}");
            if req == UiRequest::Start {
                open_browser(url);
            }
        }
        (_, None) => println!("the viewer is not listening"),
    }
    ExitCode::SUCCESS
}

fn open_browser(url: &str) {
    if !std::io::stdout().is_terminal() {
        return;
    }
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    let opener = match var("BROWSER") {
        Some(b) => b,
        None if cfg!(target_os = "macos") => "open".into(),
        None if var("DISPLAY").is_some() || var("WAYLAND_DISPLAY").is_some() => "xdg-open".into(),
        None => return,
    };
    // Detached; its output would only clutter the terminal.
    let _ = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}
