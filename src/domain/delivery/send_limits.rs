//! How much a relay, or a newsletter warming up its sending domain, may still send. Messages
//! handed to a relay are counted per minute (`send_usage`, kept a day and a little more);
//! a relay's hourly and daily limits read those counts as a rolling hour and day (relays
//! such as SES and Gmail count a rolling day), a newsletter's warm-up cap as the calendar day
//! of its time zone ("today 50, tomorrow 100"). The counts are kept in memory by whoever
//! sends (`mail::relays`) and written with the send's own commits, so a restart knows what
//! was sent before it.

use std::collections::VecDeque;

use rusqlite::Connection;

use crate::clock;
use crate::domain::DomainResult;
use crate::domain::delivery::relays::RelayLimits;

/// Minutes in the longest window (a day).
const DAY_MINUTES: i64 = 24 * 60;

/// The minute `at` falls in, counted from the Unix epoch.
pub fn minute_of(at: jiff::Timestamp) -> i64 {
    at.as_second().div_euclid(60)
}

fn start_of_minute(minute: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(minute * 60).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

/// What a limit that holds a send is, in words for the owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeldBy {
    /// The relay's limit of messages in a rolling hour.
    Hour(u32),
    /// The relay's limit of messages in a rolling day.
    Day(u32),
    /// The relay answered that its sending quota is used up.
    RelayQuota(String),
    /// The relay kept throttling at the slowest pace: it rests a while.
    RelayThrottling(String),
    /// The warm-up plan's cap for today (in the newsletter's time zone).
    WarmUp(u64),
}

impl HeldBy {
    /// "the relay's hourly limit (100 messages an hour)", for "held by ..." sentences.
    pub fn describe(&self) -> String {
        match self {
            HeldBy::Hour(n) => format!("the relay's hourly limit ({n} messages an hour)"),
            HeldBy::Day(n) => format!("the relay's daily limit ({n} messages a day)"),
            HeldBy::RelayQuota(answer) => {
                format!("the relay's sending quota, which it says is used up ({answer})")
            }
            HeldBy::RelayThrottling(answer) => {
                format!("the relay, which keeps asking to send more slowly ({answer})")
            }
            HeldBy::WarmUp(cap) => format!(
                "the warm-up plan's cap for today ({cap} messages a day while the sending \
                 domain warms up)"
            ),
        }
    }
}

/// Whether another message may go now, else until when it may not and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Room {
    Free,
    Held { until: jiff::Timestamp, by: HeldBy },
}

/// Messages counted per minute over the last day, oldest first.
#[derive(Debug, Clone, Default)]
pub struct Usage {
    minutes: VecDeque<(i64, u64)>,
}

impl Usage {
    /// The counts of `key` over the last day, from the database.
    pub fn load(conn: &Connection, key: &str) -> DomainResult<Usage> {
        const SQL: &str = "SELECT minute, sent FROM send_usage WHERE key = ?1 AND minute > ?2
             ORDER BY minute";
        let since = minute_of(clock::now()) - DAY_MINUTES;
        let mut stmt = conn.prepare_cached(SQL)?;
        let minutes = stmt
            .query_map((key, since), |r| {
                Ok((r.get(0)?, r.get::<_, i64>(1)?.max(0) as u64))
            })?
            .collect::<Result<_, _>>()?;
        Ok(Usage { minutes })
    }

    /// Counts `n` messages at `at`.
    pub fn add(&mut self, at: jiff::Timestamp, n: u64) {
        let minute = minute_of(at);
        match self.minutes.back_mut() {
            Some((last, count)) if *last == minute => *count += n,
            _ => self.minutes.push_back((minute, n)),
        }
        while self
            .minutes
            .front()
            .is_some_and(|(m, _)| *m <= minute - DAY_MINUTES)
        {
            self.minutes.pop_front();
        }
    }

    /// Messages counted from the minute `first` on.
    fn since(&self, first: i64) -> u64 {
        self.minutes
            .iter()
            .rev()
            .take_while(|(m, _)| *m >= first)
            .map(|(_, n)| n)
            .sum()
    }

    /// Room under a limit of `limit` messages in the rolling `window` minutes ending at the
    /// minute of `now` (whole minutes are counted, so the window is never undercounted); when
    /// it is full, the first minute at which enough of its oldest messages have aged out.
    fn rolling(&self, limit: u32, window: i64, now: jiff::Timestamp) -> Option<jiff::Timestamp> {
        let first = minute_of(now) - window + 1;
        let mut counted = self.since(first);
        if counted < u64::from(limit) {
            return None;
        }
        for (minute, n) in self.minutes.iter().filter(|(m, _)| *m >= first) {
            counted -= n;
            if counted < u64::from(limit) {
                return Some(start_of_minute(minute + window));
            }
        }
        Some(start_of_minute(minute_of(now) + 1))
    }

    /// Room under a relay's hourly and daily limits at `now`.
    pub fn room(&self, limits: &RelayLimits, now: jiff::Timestamp) -> Room {
        let day = limits
            .per_day
            .and_then(|n| Some((self.rolling(n, DAY_MINUTES, now)?, HeldBy::Day(n))));
        let hour = limits
            .per_hour
            .and_then(|n| Some((self.rolling(n, 60, now)?, HeldBy::Hour(n))));
        // When both are full, the later reopening is the one that counts.
        match (day, hour) {
            (Some(d), Some(h)) => {
                let (until, by) = if d.0 >= h.0 { d } else { h };
                Room::Held { until, by }
            }
            (Some((until, by)), None) | (None, Some((until, by))) => Room::Held { until, by },
            (None, None) => Room::Free,
        }
    }

    /// Room under a cap of `cap` messages in the calendar day that began at `day_start` and
    /// ends at `next_day`.
    pub fn room_today(
        &self,
        cap: u64,
        day_start: jiff::Timestamp,
        next_day: jiff::Timestamp,
    ) -> Room {
        if self.since(minute_of(day_start)) < cap {
            Room::Free
        } else {
            Room::Held {
                until: next_day,
                by: HeldBy::WarmUp(cap),
            }
        }
    }
}

/// Records `n` messages handed over under `key` at `at` (in the sender's transaction), and
/// forgets that key's minutes older than two days.
pub fn record(conn: &Connection, key: &str, at: jiff::Timestamp, n: u64) -> DomainResult<()> {
    const ADD: &str = "INSERT INTO send_usage (key, minute, sent) VALUES (?1, ?2, ?3)
         ON CONFLICT (key, minute) DO UPDATE SET sent = sent + excluded.sent";
    const FORGET: &str = "DELETE FROM send_usage WHERE key = ?1 AND minute < ?2";
    let minute = minute_of(at);
    conn.prepare_cached(ADD)?.execute((key, minute, n as i64))?;
    conn.prepare_cached(FORGET)?
        .execute((key, minute - 2 * DAY_MINUTES))?;
    Ok(())
}

/// The usage key of a newsletter's own count (its warm-up plan).
pub fn newsletter_key(newsletter_id: i64) -> String {
    format!("newsletter:{newsletter_id}")
}

/// A day and the next, as instants: the bounds of the calendar day `at` falls in.
pub fn day_bounds(
    zone: &crate::domain::values::time_zones::TimeZoneName,
    at: jiff::Timestamp,
) -> (jiff::Timestamp, jiff::Timestamp) {
    let local = zone.local(at.into());
    let start = local.start_of_day().ok();
    let next = start
        .as_ref()
        .and_then(|s| s.tomorrow().ok())
        .and_then(|t| t.start_of_day().ok());
    let instant = |z: Option<jiff::ZonedDateTime>, fallback: jiff::Timestamp| {
        z.map(|z| z.timestamp()).unwrap_or(fallback)
    };
    (
        instant(start, at - clock::days(1)),
        instant(next, at + clock::days(1)),
    )
}

#[cfg(test)]
mod tests {
    use jiff::SignedDuration;

    use super::*;

    fn at(minute: i64) -> jiff::Timestamp {
        start_of_minute(minute) + SignedDuration::from_secs(30)
    }

    #[test]
    fn an_hourly_limit_reopens_as_the_oldest_messages_age_out() {
        let base = 29_000_000;
        let mut usage = Usage::default();
        usage.add(at(base), 3);
        usage.add(at(base + 10), 2);
        let limits = RelayLimits {
            per_hour: Some(5),
            ..RelayLimits::default()
        };
        // Full: the first three age out an hour after their minute.
        assert_eq!(
            usage.room(&limits, at(base + 20)),
            Room::Held {
                until: start_of_minute(base + 60),
                by: HeldBy::Hour(5)
            }
        );
        assert_eq!(usage.room(&limits, at(base + 60)), Room::Free);
        let roomy = RelayLimits {
            per_hour: Some(6),
            ..RelayLimits::default()
        };
        assert_eq!(usage.room(&roomy, at(base + 20)), Room::Free);
    }

    #[test]
    fn the_later_of_two_full_windows_holds() {
        let base = 29_000_000;
        let mut usage = Usage::default();
        usage.add(at(base), 4);
        let limits = RelayLimits {
            per_hour: Some(4),
            per_day: Some(4),
            per_second: None,
        };
        assert_eq!(
            usage.room(&limits, at(base + 1)),
            Room::Held {
                until: start_of_minute(base + DAY_MINUTES),
                by: HeldBy::Day(4)
            }
        );
        // A day later the minute is forgotten.
        usage.add(at(base + DAY_MINUTES), 1);
        assert_eq!(usage.since(0), 1);
    }

    #[test]
    fn a_warm_up_cap_counts_the_calendar_day() {
        let zone = crate::domain::values::time_zones::TimeZoneName::parse("Europe/Paris").unwrap();
        // 2026-11-27 23:30 in Paris is 22:30 UTC.
        let late = crate::clock::testing::at("2026-11-27T22:30:00Z");
        let (start, next) = day_bounds(&zone, late);
        assert_eq!(start, crate::clock::testing::at("2026-11-26T23:00:00Z"));
        assert_eq!(next, crate::clock::testing::at("2026-11-27T23:00:00Z"));
        let mut usage = Usage::default();
        usage.add(late, 50);
        assert_eq!(
            usage.room_today(50, start, next),
            Room::Held {
                until: next,
                by: HeldBy::WarmUp(50)
            }
        );
        let (start, next) = day_bounds(&zone, next + SignedDuration::from_mins(5));
        assert_eq!(usage.room_today(50, start, next), Room::Free);
    }
}
