//! Timestamps: milliseconds since the Unix epoch in the database, ISO 8601 UTC in reports.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|duration| duration.as_millis() as i64)
        .unwrap_or(0)
}

/// A duration as people read it, the one rule every report uses: `8.0 min` from two minutes on,
/// `2.5 s` down to a tenth of a second, then `12.30 ms`, `41.0 µs` and `10.0 ns`.
pub fn format_seconds(seconds: f64) -> String {
    if seconds >= 120.0 {
        format!("{:.1} min", seconds / 60.0)
    } else if seconds >= 0.1 {
        format!("{seconds:.1} s")
    } else if seconds >= 1e-3 {
        format!("{:.2} ms", seconds * 1e3)
    } else if seconds >= 1e-6 {
        format!("{:.1} µs", seconds * 1e6)
    } else {
        format!("{:.1} ns", seconds * 1e9)
    }
}

/// `2026-11-22 13:54:40Z`: a timestamp in milliseconds as a UTC date and time.
pub fn format_utc(ms: i64) -> String {
    let seconds = ms.div_euclid(1000);
    let days = seconds.div_euclid(86_400);
    let second_of_day = seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}Z",
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60
    )
}

/// Howard Hinnant's `civil_from_days`: days since 1970-01-01 to (year, month, day).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        assert_eq!(format_utc(0), "1970-01-01 00:00:00Z");
        assert_eq!(format_utc(951_782_400_000), "2000-02-29 00:00:00Z");
        assert_eq!(format_utc(1_795_355_680_000), "2026-11-22 13:54:40Z");
    }

    #[test]
    fn durations_in_each_unit() {
        assert_eq!(format_seconds(480.0), "8.0 min");
        assert_eq!(format_seconds(119.0), "119.0 s");
        assert_eq!(format_seconds(0.25), "0.2 s");
        assert_eq!(format_seconds(0.0123), "12.30 ms");
        assert_eq!(format_seconds(0.000_041), "41.0 µs");
        assert_eq!(format_seconds(1e-8), "10.0 ns");
        assert_eq!(format_seconds(0.0), "0.0 ns");
    }
}
