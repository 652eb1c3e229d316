//! The operator routes: `nmemctl maintain`, `pin`/`unpin`, `retention`, `purge`, `redact`.

use super::*;

/// `nmemctl maintain`: retention sweep, WAL checkpoint, incremental vacuum, FTS integrity check
/// and optimize.
pub fn maintain() -> ExitCode {
    match ctl_post::<_, MaintainReport>(wire::PATH_MAINTAIN, &Empty {}, Duration::from_secs(600)) {
        Ok(r) => {
            match (r.swept_observations, r.swept_prompts) {
                (Some(o), Some(p)) => println!(
                    "retention sweep: {o} observations and {p} prompts past their age removed (pinned kept)"
                ),
                _ => println!("retention sweep: off ([retention] sweep = false)"),
            }
            println!(
                "full-text index: {} (caught up {} rows)",
                r.fts_integrity, r.fts_indexed
            );
            println!("free pages reclaimed: {}", r.freed_pages);
            println!("WAL checkpoint: {}", r.wal_checkpoint);
            println!(
                "database: {} → {} in {} ms",
                bytes(r.db_bytes_before),
                bytes(r.db_bytes_after),
                r.millis
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// `nmemctl pin ID` / `unpin ID`.
/// `nmemctl pin|unpin ID`: an observation (`12`), or a knowledge item (`k12`).
pub fn pin(id: &str, pinned: bool) -> ExitCode {
    let id = id.trim();
    let (knowledge, digits) = match id.strip_prefix('k') {
        Some(n) => (true, n),
        None => (false, id.strip_prefix('#').unwrap_or(id)),
    };
    let Some(n) = digits.parse::<i64>().ok().filter(|n| *n > 0) else {
        eprintln!(
            "nmemctl: {id:?} is not an id: give an observation's (12) or a knowledge item's (k12)"
        );
        return ExitCode::from(2);
    };
    match ctl_post::<_, wire::PinRequest>(
        wire::PATH_PIN,
        &wire::PinRequest {
            id: n,
            pinned,
            knowledge,
        },
        CTL_DEADLINE,
    ) {
        Ok(_) => {
            println!(
                "{} {}",
                if knowledge {
                    format!("k{n}")
                } else {
                    format!("#{n}")
                },
                match (pinned, knowledge) {
                    (true, false) => "pinned: kept forever and shown in every digest",
                    (true, true) => "pinned: shown first in its project's digest while current",
                    (false, _) => "unpinned",
                }
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

fn print_outcome(r: &DeletionReport, apply_flag: &str) {
    let n = r.total_candidates;
    let reasons: Vec<String> = r
        .by_reason
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    if r.mode == Mode::Apply {
        println!(
            "deleted {} observations and {} prompts; database {} → {}",
            r.deleted_observations,
            r.deleted_prompts,
            bytes(r.db_bytes_before),
            bytes(r.db_bytes_after)
        );
    } else if n == 0 {
        println!("nothing to delete");
    } else {
        println!("dry run: {n} would be deleted ({}); nothing was changed. Run again with {apply_flag} to delete them.", reasons.join(", "));
    }
}

/// `nmemctl retention`: per-type ages and a per-project cap. A dry run unless `apply`.
pub fn retention(req: RetentionRequest, json: bool) -> ExitCode {
    match ctl_post::<_, DeletionReport>(wire::PATH_RETENTION, &req, Duration::from_secs(600)) {
        Ok(r) if json => {
            print_json(&r);
            ExitCode::SUCCESS
        }
        Ok(r) => {
            print_outcome(&r, "--apply");
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// `nmemctl purge`: delete by project, session, type, date or search. A dry run unless `--yes`.
pub fn purge(req: PurgeRequest, json: bool) -> ExitCode {
    match ctl_post::<_, DeletionReport>(wire::PATH_PURGE, &req, Duration::from_secs(600)) {
        Ok(r) if json => {
            print_json(&r);
            ExitCode::SUCCESS
        }
        Ok(r) => {
            print_outcome(&r, "--yes");
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// `nmemctl redact`: re-apply the redaction rules to stored rows. A dry run unless `apply`.
pub fn redact(apply: bool, json: bool) -> ExitCode {
    match ctl_post::<_, RedactReport>(
        wire::PATH_REDACT,
        &RedactRequest { apply },
        Duration::from_secs(1800),
    ) {
        Ok(r) if json => {
            print_json(&r);
            ExitCode::SUCCESS
        }
        Ok(r) => {
            let (o, p, s) = (r.observations, r.prompts, r.secrets);
            let k = match r.knowledge {
                0 => String::new(),
                n => format!(" and {n} knowledge items"),
            };
            if r.mode == Mode::Apply {
                println!("redacted {s} secrets in {o} observations and {p} prompts{k}");
            } else if s == 0 {
                println!("nothing stored matches the current rules");
            } else {
                println!("dry run: {s} secrets in {o} observations and {p} prompts{k} would be redacted; run again with --apply");
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

pub(super) fn print_json(r: &impl serde::Serialize) {
    println!("{}", serde_json::to_string_pretty(r).expect("serialises"));
}
