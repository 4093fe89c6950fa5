//! Instants in the tests, with jiff (the service's date library): the clock is set to them,
//! API times are computed from them, and stored times are compared with them.

use jiff::civil::{Date, Weekday};
use jiff::tz::Offset;
use jiff::{SignedDuration, Timestamp};

/// The instant an RFC 3339 text names (`2026-11-26T08:00:00Z`): where a test sets the clock.
pub fn instant(text: &str) -> Timestamp {
    text.parse()
        .unwrap_or_else(|e| panic!("not an instant: {text:?}: {e}"))
}

/// `at` as the service stores and serves instants: `2026-11-22T05:42:04.123Z` (UTC, the
/// milliseconds cut).
pub fn stored(at: Timestamp) -> String {
    format!("{at:.3}")
}

/// The day (UTC) `at` falls on.
pub fn utc_day(at: Timestamp) -> Date {
    Offset::UTC.to_datetime(at).date()
}

/// The first Tuesday 09:00 UTC after `now`: the `weekly` slot of a newsletter in UTC.
pub fn next_tuesday_nine(now: Timestamp) -> Timestamp {
    let today = utc_day(now);
    (0..=7)
        .map(|d| today + SignedDuration::from_hours(24 * d))
        .filter(|day| day.weekday() == Weekday::Tuesday)
        .filter_map(|day| Offset::UTC.to_timestamp(day.at(9, 0, 0, 0)).ok())
        .find(|slot| *slot > now)
        .expect("a Tuesday within a week")
}
