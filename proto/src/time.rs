//! Timestamps as people and harnesses write them, to Unix milliseconds and back. Shared by the
//! daemon (transcript lines, query dates, received-at bounds), the shims (`nmem import --since`,
//! tables) and the benchmark (generated transcripts).
//!
//! Parsing is jiff's (RFC 3339 / ISO 8601, every field range-checked: no month 13, no
//! February 30, no 25:61:61), built without its time-zone database: only UTC and numeric
//! offsets are needed. It replaced a hand-written parser that accepted impossible dates and
//! panicked on non-ASCII input (and `panic = "abort"` made that fatal for `nmemd`). The hook's
//! hot path (`nmem record`) calls none of this; ARCHITECTURE.md has the size measurement.

use jiff::civil::{Date, DateTime};
use jiff::tz::Offset;
use jiff::Timestamp;

/// The latest instant nmem stores or queries: jiff's own bound, 9999-12-30T22:00:00.999Z (it
/// keeps room for any offset, so every instant it holds has a date in every offset).
pub const MAX_MS: i64 = 253_402_207_200_999;

/// Unix milliseconds as `2026-08-20T09:14:07.630Z` (UTC). Instants beyond what a calendar date
/// can name (years outside ±9999) are clamped to the nearest one that can be written.
pub fn format_rfc3339_ms(ms: i64) -> String {
    let ts = Timestamp::from_millisecond(ms).unwrap_or(if ms < 0 {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    });
    format!("{ts:.3}")
}

/// How long before `now` the instant `t` was (both Unix milliseconds), for people: `just now`,
/// `5m ago`, `3h ago`, `2d ago`. An instant after `now` (another clock) is `just now`.
pub fn ago(now: i64, t: i64) -> String {
    let s = now.saturating_sub(t).max(0) / 1000;
    match s {
        0..=59 => "just now".into(),
        60..=3599 => format!("{}m ago", s / 60),
        3600..=86_399 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86_400),
    }
}

/// `2026-08-20T09:14:07.630Z` (or with an offset such as `+02:00`; without one, UTC) to Unix
/// milliseconds; `None` for anything else, impossible dates and times included.
pub fn parse_rfc3339_ms(s: &str) -> Option<i64> {
    parse_instant(s).ok()
}

fn parse_instant(s: &str) -> Result<i64, String> {
    let ts = match s.parse::<Timestamp>() {
        Ok(ts) => ts,
        // A date-time without an offset is read as UTC (transcripts and people write them).
        Err(e) => match s.parse::<DateTime>() {
            Ok(dt) if !s.contains(['+', 'Z', 'z', '[']) && s.len() > 10 => {
                Offset::UTC.to_timestamp(dt).map_err(|e| e.to_string())?
            }
            _ => return Err(e.to_string()),
        },
    };
    Ok(ts.as_millisecond())
}

/// A date (`2026-08-20`: midnight UTC, or the day's last millisecond with `end_of_day`) or an
/// RFC 3339 date-time, to Unix milliseconds. The error says what is wrong with the text and
/// what to write instead.
pub fn parse_date(s: &str, end_of_day: bool) -> Result<i64, String> {
    let res = if s.len() == 10 && !s.contains(['T', 't', ' ']) {
        s.parse::<Date>().map_err(|e| e.to_string()).and_then(|d| {
            let t = if end_of_day {
                d.at(23, 59, 59, 999_000_000)
            } else {
                d.at(0, 0, 0, 0)
            };
            Offset::UTC
                .to_timestamp(t)
                .map(Timestamp::as_millisecond)
                .map_err(|e| e.to_string())
        })
    } else {
        parse_instant(s)
    };
    res.map_err(|why| {
        format!(
            "`{}` is not a date ({why}): use 2026-08-20, 2026-08-20T09:14:00Z or 2026-08-20T11:14:00+02:00",
            printable(s)
        )
    })
}

/// A time in Unix milliseconds that nmem can store as an event's time: from 1970 to
/// [`MAX_MS`] (the end of year 9999). Anything else (a sender's bug, `i64::MIN`) is refused with a message.
pub fn check_stored_ms(ms: i64) -> Result<i64, String> {
    if (0..=MAX_MS).contains(&ms) {
        Ok(ms)
    } else {
        Err(format!(
            "{ms} is not a time nmem stores: Unix milliseconds from 0 (1970) to {MAX_MS} (the end of 9999)"
        ))
    }
}

/// At most 80 characters of `s` for a message, control characters escaped.
fn printable(s: &str) -> String {
    let mut out: String = s.chars().take(80).flat_map(char::escape_debug).collect();
    if s.chars().nth(80).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn how_long_ago() {
        const NOW: i64 = 1_790_000_000_000;
        let cases = [
            (NOW + 5_000, "just now"),
            (NOW - 59_999, "just now"),
            (NOW - 60_000, "1m ago"),
            (NOW - 3_600_000, "1h ago"),
            (NOW - 86_400_000 * 3, "3d ago"),
            (i64::MIN, "106751991167d ago"),
        ];
        for (t, want) in cases {
            assert_eq!(ago(NOW, t), want, "{t}");
        }
    }

    #[test]
    fn formatting_round_trips_through_the_parser() {
        for ms in [
            0,
            1_700_000_000_123,
            951_782_400_000,
            4_107_542_399_999,
            -86_400_001,
            MAX_MS,
        ] {
            let s = format_rfc3339_ms(ms);
            assert_eq!(parse_rfc3339_ms(&s), Some(ms), "{s}");
        }
        assert_eq!(
            format_rfc3339_ms(1_755_680_400_000),
            "2025-08-20T09:00:00.000Z"
        );
        // Out of any calendar: clamped, not a panic.
        assert!(format_rfc3339_ms(i64::MIN).starts_with("-009999-"));
        assert!(format_rfc3339_ms(i64::MAX).starts_with("9999-12-30T"));
        assert_eq!(MAX_MS, Timestamp::MAX.as_millisecond());
    }

    #[test]
    fn rfc3339() {
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_rfc3339_ms("2026-08-20T09:14:07.630Z"),
            Some(1_787_217_247_630)
        );
        assert_eq!(
            parse_rfc3339_ms("2026-08-20T11:14:07.630+02:00"),
            Some(1_787_217_247_630)
        );
        assert_eq!(
            parse_rfc3339_ms("2026-08-20 09:14:07.630z"),
            Some(1_787_217_247_630)
        );
        // No offset: UTC, as the old parser read it.
        assert_eq!(
            parse_rfc3339_ms("2026-08-20T09:14:07.630"),
            Some(1_787_217_247_630)
        );
        assert_eq!(parse_rfc3339_ms("garbage"), None);
    }

    #[test]
    fn dates() {
        assert_eq!(parse_date("1970-01-02", false), Ok(86_400_000));
        assert_eq!(parse_date("1970-01-01", true), Ok(86_399_999));
        assert_eq!(
            parse_date("2026-08-20T09:14:07Z", true),
            Ok(1_787_217_247_000)
        );
    }

    /// Issue 13, item 11: each of these was accepted (and stored as some other day) by the
    /// hand-written parser, or panicked it.
    #[test]
    fn impossible_dates_are_refused_with_a_reason() {
        for bad in [
            "2026-13-45",
            "2026-02-30",
            "2026-00-10",
            "2026-08-20T25:61:61Z",
            "2026-08-20T23:59:61Z",
            "2026-08-20T09:00:00+0é:00",
            "2026-08-20T09:00:00.1234567890123Zé",
            "２０２６-08-20",
            "",
            "-",
        ] {
            let err = parse_date(bad, false).expect_err(bad);
            assert!(
                err.contains("is not a date") && err.contains("use 2026-08-20"),
                "{err}"
            );
            assert_eq!(parse_rfc3339_ms(bad), None, "{bad}");
        }
        let err = parse_date("2026-13-45", false).unwrap_err();
        assert!(err.contains("month"), "names the field: {err}");
    }

    #[test]
    fn stored_times_are_bounded() {
        assert!(check_stored_ms(i64::MIN).is_err());
        assert!(check_stored_ms(-1).is_err());
        assert!(check_stored_ms(MAX_MS + 1).is_err());
        assert_eq!(check_stored_ms(0), Ok(0));
        assert_eq!(check_stored_ms(1_787_217_247_630), Ok(1_787_217_247_630));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// No string reaches a panic (with `panic = "abort"` one would kill nmemd).
        #[test]
        fn parsing_arbitrary_text_never_panics(s in "\\PC{0,40}", end in any::<bool>()) {
            let _ = parse_date(&s, end);
            let _ = parse_rfc3339_ms(&s);
        }

        /// Near-misses of the real format, where a naive parser slices at fixed offsets.
        #[test]
        fn parsing_near_dates_never_panics(
            s in "[0-9]{4}-[0-9é]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{0,12})?(Z|[+-][0-9é]{2}:[0-9]{2}|.{0,6})",
        ) {
            if let Some(ms) = parse_rfc3339_ms(&s) {
                // Whatever is accepted names a real instant that formats and parses back.
                prop_assert_eq!(parse_rfc3339_ms(&format_rfc3339_ms(ms)), Some(ms));
            }
        }

        #[test]
        fn every_instant_round_trips(ms in -MAX_MS..=MAX_MS) {
            prop_assert_eq!(parse_rfc3339_ms(&format_rfc3339_ms(ms)), Some(ms));
        }
    }
}
