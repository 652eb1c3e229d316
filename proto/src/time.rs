//! Timestamps as people and harnesses write them, to Unix milliseconds and back. Shared by the
//! daemon (transcript lines, query dates), the shims (`nmem import --since`, tables) and the
//! benchmark (generated transcripts).

/// Unix milliseconds as `2026-08-20T09:14:07.630Z` (UTC; civil-from-days, proleptic Gregorian).
pub fn format_rfc3339_ms(ms: i64) -> String {
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

/// `2026-08-20T09:14:07.630Z` (or with an offset such as `+02:00`) to Unix milliseconds.
pub fn parse_rfc3339_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d, h, mi, se) = (
        num(0..4)?,
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
        num(17..19)?,
    );
    let mut rest = &s[19..];
    let mut ms = 0;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        let f = &frac[..digits];
        ms = format!("{f:0<3}")[..3].parse().ok()?;
        rest = &frac[digits..];
    }
    let offset_min = match rest {
        "Z" | "z" | "" => 0,
        o if o.len() == 6 && (o.starts_with('+') || o.starts_with('-')) => {
            let sign = if o.starts_with('-') { -1 } else { 1 };
            sign * (o[1..3].parse::<i64>().ok()? * 60 + o[4..6].parse::<i64>().ok()?)
        }
        _ => return None,
    };
    // Days from civil (Howard Hinnant's algorithm).
    let (y2, m2) = if mo <= 2 {
        (y - 1, mo + 9)
    } else {
        (y, mo - 3)
    };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let doy = (153 * m2 + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 86_400 + h * 3600 + mi * 60 + se) - offset_min * 60) * 1000 + ms)
}

/// A date (`2026-08-20`, midnight UTC, or the day's last millisecond with `end_of_day`) or an
/// RFC 3339 date-time.
pub fn parse_date(s: &str, end_of_day: bool) -> Option<i64> {
    if s.len() == 10 {
        let t = if end_of_day {
            "T23:59:59.999Z"
        } else {
            "T00:00:00Z"
        };
        return parse_rfc3339_ms(&format!("{s}{t}"));
    }
    parse_rfc3339_ms(s)
}

#[cfg(test)]
mod tests {
    #[test]
    fn formatting_round_trips_through_the_parser() {
        for ms in [
            0,
            1_700_000_000_123,
            951_782_400_000,
            4_107_542_399_999,
            -86_400_001,
        ] {
            let s = super::format_rfc3339_ms(ms);
            assert_eq!(super::parse_rfc3339_ms(&s), Some(ms), "{s}");
        }
        assert_eq!(
            super::format_rfc3339_ms(1_755_680_400_000),
            "2025-08-20T09:00:00.000Z"
        );
    }

    use super::*;

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
        assert_eq!(parse_rfc3339_ms("garbage"), None);
    }

    #[test]
    fn dates() {
        assert_eq!(parse_date("1970-01-02", false), Some(86_400_000));
        assert_eq!(parse_date("1970-01-01", true), Some(86_399_999));
    }
}
