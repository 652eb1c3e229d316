//! `nmem`: the hook handler (`nmem record`), and the door to every other subcommand, which it
//! hands to `nmem-cli` by `exec` (see `nmem_hook::companion`).

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_none_or(|a| a != "record") {
        return nmem_hook::companion::exec(&args);
    }
    let mut rest = Vec::with_capacity(args.len() - 2);
    for a in &args[2..] {
        match a.to_str() {
            Some(s) => rest.push(s.to_string()),
            None => {
                eprintln!(
                    "nmem record: an argument is not UTF-8 ({}); see `nmem record --help`",
                    a.to_string_lossy()
                );
                return ExitCode::from(1);
            }
        }
    }
    if rest.iter().any(|a| a == "-h" || a == "--help") {
        println!("{}", nmem_hook::record::USAGE);
        return ExitCode::SUCCESS;
    }
    nmem_hook::record::main(&rest)
}
