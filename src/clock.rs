//! The calendar day that dated rules are read at: prices that change on a date, and the models'
//! announced shutdown dates. Nothing in the core reads the wall clock for them: it is handed a
//! [`Clock`], which the binary makes from `GEMINI_MCP_TODAY` (or the system clock) and the tests
//! fix, so a rule is tested on both sides of its date and a suite that passes today passes next
//! month.

/// Where "today" comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Clock {
    /// A fixed day (days since 1970-01-01), or `None` for the system clock.
    fixed: Option<i64>,
}

impl Clock {
    /// Today by the system clock (UTC).
    pub const fn system() -> Clock {
        Clock { fixed: None }
    }

    /// Always `day` (days since 1970-01-01).
    pub const fn fixed(day: i64) -> Clock {
        Clock { fixed: Some(day) }
    }

    /// Always the ISO date `YYYY-MM-DD`, or `None` when it is not one.
    pub fn on(date: &str) -> Option<Clock> {
        days_from_iso(date).map(Clock::fixed)
    }

    /// Today, as days since 1970-01-01 (UTC).
    pub fn today(&self) -> i64 {
        self.fixed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() / 86_400) as i64
        })
    }
}

/// Days since 1970-01-01 of an ISO date `YYYY-MM-DD` (the proleptic Gregorian calendar); `None`
/// for anything else, including days a month does not have.
pub fn days_from_iso(date: &str) -> Option<i64> {
    let parts: Vec<&str> = date.split('-').collect();
    let [y, m, d] = parts.as_slice() else {
        return None;
    };
    if y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !(digits(y) && digits(m) && digits(d)) {
        return None;
    }
    let (y, m, d): (i64, i64, i64) = (y.parse().ok()?, m.parse().ok()?, d.parse().ok()?);
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&m) || d < 1 || d > month_days[(m - 1) as usize] {
        return None;
    }
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

/// The ISO date `YYYY-MM-DD` of `day` (days since 1970-01-01).
pub fn iso_from_days(day: i64) -> String {
    let z = day + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_dates_convert_both_ways() {
        for (iso, days) in [
            ("1970-01-01", 0),
            ("2000-03-01", 11_017),
            ("2024-02-29", 19_782),
            ("2026-12-01", 20_788),
            ("2026-12-31", 20_818),
        ] {
            assert_eq!(days_from_iso(iso), Some(days), "{iso}");
            assert_eq!(iso_from_days(days), iso, "{days}");
        }
        for bad in [
            "2026-13-01",
            "2026-02-29",
            "2026-04-31",
            "2026-1-01",
            "26-01-01",
            "2026-01-01x",
            "+026-01-01",
            "",
        ] {
            assert_eq!(days_from_iso(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_fixed_clock_stays_and_the_system_clock_moves_on() {
        let c = Clock::on("2026-11-30").unwrap();
        assert_eq!(c.today(), 20_787);
        assert!(Clock::on("yesterday").is_none());
        // The system clock is not before this file was written.
        assert!(Clock::system().today() >= 20_788);
    }
}
