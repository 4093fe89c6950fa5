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

/// An instant as the service keeps it: UTC, to the millisecond. In the database, in JSON and
/// through `Display` it is the text [`format`] writes (`2026-11-22T05:42:04.123Z`), so a
/// value read and written back is the same text, and comparing two is comparing times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(OffsetDateTime);

impl Timestamp {
    /// The current instant, from [`now`].
    pub fn now() -> Self {
        Self::from(now())
    }

    /// The instant as a date and time in UTC, for arithmetic and calendars.
    pub fn datetime(self) -> OffsetDateTime {
        self.0
    }

    /// The day (UTC) this instant falls on.
    pub fn date(self) -> time::Date {
        self.0.date()
    }

    /// `2026-11-22 05:42:04 UTC`, for a sentence people read.
    pub fn human(self) -> String {
        human(self.0)
    }

    /// Parses any RFC 3339 timestamp (with offset).
    pub fn parse(text: &str) -> Option<Self> {
        parse(text).map(Self::from)
    }
}

impl From<OffsetDateTime> for Timestamp {
    /// Kept in UTC and cut to whole milliseconds: exactly what the text holds.
    fn from(at: OffsetDateTime) -> Self {
        let at = at.to_offset(time::UtcOffset::UTC);
        let millis = at.millisecond();
        Timestamp(
            at.replace_millisecond(millis)
                .expect("a millisecond of a valid instant is valid"),
        )
    }
}

impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&format(self.0))
    }
}

impl std::ops::Add<time::Duration> for Timestamp {
    type Output = Timestamp;

    fn add(self, by: time::Duration) -> Timestamp {
        Timestamp::from(self.0 + by)
    }
}

impl std::ops::Sub<time::Duration> for Timestamp {
    type Output = Timestamp;

    fn sub(self, by: time::Duration) -> Timestamp {
        Timestamp::from(self.0 - by)
    }
}

impl rusqlite::types::ToSql for Timestamp {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(rusqlite::types::ToSqlOutput::from(self.to_string()))
    }
}

impl rusqlite::types::FromSql for Timestamp {
    fn column_result(value: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        let text = value.as_str()?;
        Timestamp::parse(text).ok_or_else(|| {
            rusqlite::types::FromSqlError::Other(format!("not a timestamp: {text:?}").into())
        })
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod timestamp_tests {
    use super::*;

    #[test]
    fn timestamps_keep_the_stored_text() {
        let at = Timestamp::from(time::macros::datetime!(2026-11-22 06:42:04.123456 +01:00));
        assert_eq!(at.to_string(), "2026-11-22T05:42:04.123Z");
        assert_eq!(Timestamp::parse("2026-11-22T05:42:04.123Z"), Some(at));
        assert_eq!(at.date(), time::macros::date!(2026 - 11 - 22));
        assert_eq!(
            serde_json::to_string(&at).unwrap(),
            "\"2026-11-22T05:42:04.123Z\""
        );

        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let text: String = conn.query_row("SELECT ?1", [at], |r| r.get(0)).unwrap();
        assert_eq!(text, "2026-11-22T05:42:04.123Z");
        let back: Timestamp = conn.query_row("SELECT ?1", [&text], |r| r.get(0)).unwrap();
        assert_eq!(back, at);
        assert!(
            conn.query_row("SELECT 'soon'", [], |r| r.get::<_, Timestamp>(0))
                .is_err()
        );
    }
}
