//! Timestamps as the contract writes them: UTC, RFC 3339 with `Z` and milliseconds.
//! They are stored the same way, so string order is time order.

use time::{OffsetDateTime, format_description::BorrowedFormatItem, macros::format_description};

const FORMAT: &[BorrowedFormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

/// The current instant, in UTC.
pub fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

/// Formats an instant as stored and served: `2026-11-22T05:42:04.123Z`.
pub fn format(at: OffsetDateTime) -> String {
    at.to_offset(time::UtcOffset::UTC)
        .format(FORMAT)
        .expect("a UTC instant always formats")
}

/// `format(now())`, the value most writes store.
pub fn now_string() -> String {
    format(now())
}

/// An instant for a sentence people read: `2026-11-22 05:42:04 UTC`.
pub fn human(at: OffsetDateTime) -> String {
    const HUMAN: &[BorrowedFormatItem<'static>] =
        format_description!("[year]-[month]-[day] [hour]:[minute]:[second] UTC");
    at.to_offset(time::UtcOffset::UTC)
        .format(HUMAN)
        .expect("a UTC instant always formats")
}

/// Parses any RFC 3339 timestamp (with offset) into UTC.
pub fn parse(text: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .ok()
        .map(|t| t.to_offset(time::UtcOffset::UTC))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_with_millis_and_z_and_round_trips() {
        let t = time::macros::datetime!(2026-11-22 05:42:04.123456 UTC);
        assert_eq!(format(t), "2026-11-22T05:42:04.123Z");
        assert_eq!(
            parse("2026-11-22T06:42:04.123+01:00")
                .map(format)
                .as_deref(),
            Some("2026-11-22T05:42:04.123Z")
        );
        assert!(parse("yesterday").is_none());
        assert_eq!(human(t), "2026-11-22 05:42:04 UTC");
    }
}
