//! Time zones (`docs/time-zones.md`): the IANA zone an account reads and types its times in,
//! and the zone a newsletter's publishing slots are computed in. Stored and served times stay
//! UTC (`clock::Timestamp`); a zone only changes what people read and what the times they
//! type mean. Every rule of every zone (offsets, daylight saving time, its gaps and folds)
//! comes from the IANA database bundled with `jiff`: nothing here knows an offset itself.

use std::sync::LazyLock;

use jiff::civil::DateTime;
use jiff::tz::{AmbiguousOffset, TimeZone};
use rusqlite::Connection;

use crate::clock::Timestamp;
use crate::domain::{DomainError, DomainResult};

/// An IANA time zone name the bundled database knows (`Europe/Berlin`, `UTC`), spelled as
/// the database spells it; the only way to name a zone in the service.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TimeZoneName(String);

/// Every name of the database, sorted: the choices of the dashboard's zone fields.
static NAMES: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut names: Vec<String> = jiff::tz::db()
        .available()
        .map(|name| name.as_str().to_string())
        .collect();
    names.sort();
    names
});

/// What a bad name is told, on forms and in the API's `details`.
const UNKNOWN: &str = "must be an IANA time zone name, e.g. Europe/Berlin or America/New_York";

impl TimeZoneName {
    /// UTC: what an account or a newsletter has until it picks another zone.
    pub fn utc() -> Self {
        TimeZoneName("UTC".into())
    }

    /// A name of the IANA database, in any letter case; offsets (`+01:00`) and abbreviations
    /// (`CET` aside, which the database itself lists) are refused.
    pub fn parse(text: &str) -> Result<Self, &'static str> {
        let text = text.trim();
        NAMES
            .iter()
            .find(|name| name.eq_ignore_ascii_case(text))
            .map(|name| TimeZoneName(name.clone()))
            .ok_or(UNKNOWN)
    }

    /// Every name a zone may have, sorted.
    pub fn all() -> &'static [String] {
        &NAMES
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    fn zone(&self) -> TimeZone {
        jiff::tz::db()
            .get(&self.0)
            .expect("a TimeZoneName is a name of the bundled database")
    }

    /// The instant `at` as a date and time on the clocks of this zone.
    pub fn local(&self, at: Timestamp) -> jiff::ZonedDateTime {
        at.instant().to_zoned_datetime(self.zone())
    }

    /// The instant of the local date and time `local` in this zone. A time the clocks skip
    /// (a daylight-saving gap) is refused with a sentence saying so; a time they show twice
    /// (a fold) is the first of the two.
    pub fn instant_of(&self, local: DateTime) -> Result<Timestamp, String> {
        let zone = self.zone();
        let ambiguous = zone.to_ambiguous_timestamp(local);
        if let AmbiguousOffset::Gap { before, after } = ambiguous.offset() {
            return Err(self.skipped(local, before, after));
        }
        let at = ambiguous
            .earlier()
            .expect("a local time of a real zone is within the supported range");
        Ok(Timestamp::from(at))
    }
}

impl TimeZoneName {
    /// Why `local`, in the gap between the offsets `before` and `after`, is no time here:
    /// the sentence follows the field's name ("Send time does not exist ...").
    fn skipped(
        &self,
        local: DateTime,
        before: jiff::tz::Offset,
        after: jiff::tz::Offset,
    ) -> String {
        let zone = self.zone();
        // The jump: the first transition after `local` read with the later offset.
        let jump = after
            .to_timestamp(local)
            .ok()
            .and_then(|at| zone.following(at).next())
            .map(|transition| transition.timestamp());
        match jump {
            Some(at) => format!(
                "does not exist in {}: on {} the clocks go forward from {} to {}; choose a time outside that gap",
                self.0,
                local.strftime("%-d %b %Y"),
                before.to_datetime(at).strftime("%H:%M"),
                after.to_datetime(at).strftime("%H:%M"),
            ),
            None => format!(
                "does not exist in {}: the clocks skip {} there",
                self.0,
                local.strftime("%-d %b %Y, %H:%M")
            ),
        }
    }
}

impl std::fmt::Display for TimeZoneName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl rusqlite::types::ToSql for TimeZoneName {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(rusqlite::types::ToSqlOutput::from(self.0.as_str()))
    }
}

impl rusqlite::types::FromSql for TimeZoneName {
    fn column_result(value: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        let text = value.as_str()?;
        TimeZoneName::parse(text).map_err(|_| {
            rusqlite::types::FromSqlError::Other(format!("not a time zone: {text:?}").into())
        })
    }
}

/// A `datetime-local` value (`2026-03-29T09:00`, seconds optional) read in `zone`, as the
/// RFC 3339 text the rules about times take. Text that is no local date and time is given
/// back as it is, for those rules to refuse (or take, when it carries its own offset); a
/// skipped local time is refused as `field`.
pub fn local_to_rfc3339(text: &str, zone: &TimeZoneName, field: &str) -> DomainResult<String> {
    match text.trim().parse::<DateTime>() {
        Ok(local) => zone
            .instant_of(local)
            .map(|at| at.to_string())
            .map_err(|message| DomainError::invalid(field, message)),
        Err(_) => Ok(text.trim().to_string()),
    }
}

/// The `datetime-local` value (minutes, no zone) showing `at` on `zone`'s clocks.
pub fn local_input(at: Timestamp, zone: &TimeZoneName) -> String {
    zone.local(at).strftime("%Y-%m-%dT%H:%M").to_string()
}

/// Sets the zone the account `user_id` reads and types times in.
/// `Some(zone)`: the account's own zone, on every page; `None`: each newsletter's zone on its
/// pages (the zone kept for the others).
pub fn set_account_zone(
    conn: &Connection,
    user_id: i64,
    zone: Option<&TimeZoneName>,
) -> DomainResult<()> {
    const OWN: &str =
        "UPDATE users SET time_zone = ?2, own_time_zone = 1, updated_at = ?3 WHERE id = ?1";
    const FOLLOW: &str = "UPDATE users SET own_time_zone = 0, updated_at = ?2 WHERE id = ?1";
    match zone {
        Some(zone) => conn.execute(OWN, (user_id, zone, Timestamp::now()))?,
        None => conn.execute(FOLLOW, (user_id, Timestamp::now()))?,
    };
    Ok(())
}

/// The zone of the account `user_id`.
pub fn account_zone(conn: &Connection, user_id: i64) -> DomainResult<TimeZoneName> {
    const FIND: &str = "SELECT time_zone FROM users WHERE id = ?1";
    Ok(conn.query_row(FIND, [user_id], |r| r.get(0))?)
}

/// Checks a zone typed into a form or sent to the API as `field`.
pub fn check(text: &str, field: &str) -> DomainResult<TimeZoneName> {
    TimeZoneName::parse(text).map_err(|message| DomainError::invalid(field, message))
}

/// Sets newsletter `id`'s zone when `zone` is given and differs; true when it changed. The
/// caller holds the write transaction and moves `updated_at`.
pub fn apply_newsletter_zone(
    conn: &Connection,
    id: i64,
    zone: Option<&TimeZoneName>,
) -> DomainResult<bool> {
    const UPDATE: &str = "UPDATE newsletters SET time_zone = ?2 WHERE id = ?1 AND time_zone <> ?2";
    Ok(match zone {
        Some(zone) => conn.execute(UPDATE, (id, zone))? > 0,
        None => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(name: &str) -> TimeZoneName {
        TimeZoneName::parse(name).unwrap()
    }

    fn at(text: &str) -> Timestamp {
        Timestamp::parse(text).unwrap()
    }

    #[test]
    fn names_are_the_databases_in_its_spelling() {
        assert_eq!(zone("europe/berlin").as_str(), "Europe/Berlin");
        assert_eq!(zone(" UTC ").as_str(), "UTC");
        assert_eq!(TimeZoneName::utc(), zone("utc"));
        for bad in ["", "+01:00", "Mars/Olympus_Mons", "Europe/", "CEST"] {
            assert_eq!(TimeZoneName::parse(bad), Err(UNKNOWN), "{bad:?}");
        }
        assert!(TimeZoneName::all().len() > 300);
        assert!(TimeZoneName::all().is_sorted());
        assert!(TimeZoneName::all().iter().any(|n| n == "America/New_York"));
    }

    #[test]
    fn local_times_follow_daylight_saving_time() {
        let berlin = zone("Europe/Berlin");
        assert_eq!(
            local_input(at("2026-11-26T08:00:00.000Z"), &berlin),
            "2026-11-26T09:00"
        );
        assert_eq!(
            local_input(at("2026-07-01T07:00:00.000Z"), &berlin),
            "2026-07-01T09:00"
        );
        assert_eq!(
            local_to_rfc3339("2026-11-26T09:00", &berlin, "f").unwrap(),
            "2026-11-26T08:00:00.000Z"
        );
        assert_eq!(
            local_to_rfc3339("2026-07-01T09:00:30", &berlin, "f").unwrap(),
            "2026-07-01T07:00:30.000Z"
        );
        // Not a local time: passed on for the rules about times to judge.
        assert_eq!(
            local_to_rfc3339(" next week ", &berlin, "f").unwrap(),
            "next week"
        );
    }

    #[test]
    fn a_skipped_time_is_refused_and_a_repeated_one_is_the_first() {
        let berlin = zone("Europe/Berlin");
        // 29 March 2026: 02:00 becomes 03:00.
        let refused = local_to_rfc3339("2026-03-29T02:30", &berlin, "scheduled_for");
        let Err(DomainError::Invalid(_, fields)) = refused else {
            panic!("{refused:?}");
        };
        let message = &fields.by_field()["scheduled_for"][0];
        assert_eq!(
            message,
            "does not exist in Europe/Berlin: on 29 Mar 2026 the clocks go forward from 02:00 to 03:00; choose a time outside that gap"
        );
        // 25 October 2026: 02:30 comes twice; the first is still summer time (UTC+2).
        assert_eq!(
            local_to_rfc3339("2026-10-25T02:30", &berlin, "f").unwrap(),
            "2026-10-25T00:30:00.000Z"
        );
    }

    #[test]
    fn accounts_and_newsletters_keep_their_zone() {
        let conn = crate::domain::testing::db_with_newsletter("paid");
        let owner: i64 = conn
            .query_row("SELECT owner_id FROM newsletters WHERE id = 1", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(account_zone(&conn, owner).unwrap(), TimeZoneName::utc());
        set_account_zone(&conn, owner, Some(&zone("Asia/Tokyo"))).unwrap();
        assert_eq!(account_zone(&conn, owner).unwrap(), zone("Asia/Tokyo"));

        let tokyo = zone("Asia/Tokyo");
        assert!(apply_newsletter_zone(&conn, 1, Some(&tokyo)).unwrap());
        assert!(!apply_newsletter_zone(&conn, 1, Some(&tokyo)).unwrap());
        assert!(!apply_newsletter_zone(&conn, 1, None).unwrap());
        assert!(check("Nowhere/Else", "time_zone").is_err());
    }
}
