//! When a step is due: a delay after the previous step (minutes and hours as elapsed time,
//! days as calendar days on the newsletter's clocks, so "1 day" after 10:00 is 10:00 the next
//! day across a daylight-saving change), then, when the step says so, the first time its
//! hour strikes there (on its weekday, when it names one).
//!
//! Due is monotonic in the time the wait began, so the round asks the other way round: the
//! latest beginning of a wait that is due now ([`Wait::ready_if_since`]), one indexed range
//! per step, whatever the number of readers, and no row changes when the owner edits a wait.

use jiff::{SignedDuration, Span};

use super::StepInput;
use crate::clock::Timestamp;
use crate::domain::FieldErrors;
use crate::domain::values::time_zones::TimeZoneName;

/// The longest delay, in days (a year).
pub const DELAY_MAX_DAYS: i64 = 365;

crate::string_enum!(
    /// The unit of a step's delay.
    pub DelayUnit { Minutes => "minutes", Hours => "hours", Days => "days" }
);

crate::string_enum!(
    /// A day a step may wait for.
    pub Weekday {
        Monday => "monday", Tuesday => "tuesday", Wednesday => "wednesday",
        Thursday => "thursday", Friday => "friday", Saturday => "saturday", Sunday => "sunday"
    }
);

impl Weekday {
    fn jiff(self) -> jiff::civil::Weekday {
        use jiff::civil::Weekday as W;
        match self {
            Weekday::Monday => W::Monday,
            Weekday::Tuesday => W::Tuesday,
            Weekday::Wednesday => W::Wednesday,
            Weekday::Thursday => W::Thursday,
            Weekday::Friday => W::Friday,
            Weekday::Saturday => W::Saturday,
            Weekday::Sunday => W::Sunday,
        }
    }
}

/// A step's wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    pub amount: i64,
    pub unit: DelayUnit,
    /// Then the first such hour (0 to 23) on the newsletter's clocks.
    pub at_hour: Option<i64>,
    /// ... of this weekday (only with an hour).
    pub on_weekday: Option<Weekday>,
}

impl Wait {
    /// Checks a step's wait as typed; problems are added under `prefix` (`steps[0].`).
    pub(super) fn check(errors: &mut FieldErrors, prefix: &str, step: &StepInput) -> Wait {
        let unit = DelayUnit::parse(step.delay_unit.trim());
        if unit.is_none() {
            errors.add(
                &format!("{prefix}delay_unit"),
                "must be minutes, hours or days",
            );
        }
        let unit = unit.unwrap_or(DelayUnit::Days);
        let most = match unit {
            DelayUnit::Minutes => DELAY_MAX_DAYS * 24 * 60,
            DelayUnit::Hours => DELAY_MAX_DAYS * 24,
            DelayUnit::Days => DELAY_MAX_DAYS,
        };
        let amount = match step.delay_amount.trim().parse::<i64>() {
            Ok(n) if (0..=most).contains(&n) => n,
            _ => {
                errors.add(
                    &format!("{prefix}delay_amount"),
                    format!("must be a whole number from 0 to {most} ({DELAY_MAX_DAYS} days)"),
                );
                0
            }
        };
        let at_hour = match step.at_hour.trim() {
            "" => None,
            text => match text.parse::<i64>() {
                Ok(h) if (0..=23).contains(&h) => Some(h),
                _ => {
                    errors.add(
                        &format!("{prefix}at_hour"),
                        "must be an hour from 0 to 23, or empty for any time",
                    );
                    None
                }
            },
        };
        let on_weekday = match step.on_weekday.trim() {
            "" => None,
            text => {
                let day = Weekday::parse(&text.to_lowercase());
                if day.is_none() {
                    errors.add(
                        &format!("{prefix}on_weekday"),
                        "must be a day of the week (monday to sunday), or empty for any day",
                    );
                } else if at_hour.is_none() {
                    errors.add(
                        &format!("{prefix}on_weekday"),
                        "needs an hour to send at on that day",
                    );
                }
                day
            }
        };
        Wait {
            amount,
            unit,
            at_hour,
            on_weekday,
        }
    }

    /// When a wait that began at `since` is over, on the clocks of `zone`.
    pub fn due_at(&self, since: Timestamp, zone: &TimeZoneName) -> Option<Timestamp> {
        let delayed = match self.unit {
            DelayUnit::Minutes => since.instant() + SignedDuration::from_mins(self.amount),
            DelayUnit::Hours => since.instant() + SignedDuration::from_hours(self.amount),
            DelayUnit::Days => zone
                .local(since)
                .checked_add(Span::new().days(self.amount))
                .ok()?
                .timestamp(),
        };
        let Some(hour) = self.at_hour else {
            return Some(Timestamp::from(delayed));
        };
        let today = zone.local(Timestamp::from(delayed)).date();
        (0..=7).find_map(|offset| {
            let day = today.checked_add(Span::new().days(offset)).ok()?;
            let slot = zone.instant_of(day.at(hour as i8, 0, 0, 0)).ok()?;
            let fits = self.on_weekday.is_none_or(|w| w.jiff() == day.weekday());
            (fits && slot.instant() >= delayed).then_some(slot)
        })
    }

    /// The latest beginning of a wait that is over at `now`: a reader whose wait began then
    /// or earlier is due. `None` when no wait is over yet (the clocks never showed the hour).
    pub fn ready_if_since(&self, now: Timestamp, zone: &TimeZoneName) -> Option<Timestamp> {
        let slot = match self.at_hour {
            None => now,
            Some(hour) => {
                let today = zone.local(now).date();
                (0..=7).find_map(|back| {
                    let day = today.checked_sub(Span::new().days(back)).ok()?;
                    let slot = zone.instant_of(day.at(hour as i8, 0, 0, 0)).ok()?;
                    let fits = self.on_weekday.is_none_or(|w| w.jiff() == day.weekday());
                    (fits && slot <= now).then_some(slot)
                })?
            }
        };
        let since = match self.unit {
            DelayUnit::Minutes => slot.instant() - SignedDuration::from_mins(self.amount),
            DelayUnit::Hours => slot.instant() - SignedDuration::from_hours(self.amount),
            DelayUnit::Days => zone
                .local(slot)
                .checked_sub(Span::new().days(self.amount))
                .ok()?
                .timestamp(),
        };
        Some(Timestamp::from(since))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        Timestamp::from(text.parse::<jiff::Timestamp>().unwrap())
    }

    fn wait(amount: i64, unit: DelayUnit, at_hour: Option<i64>, on: Option<Weekday>) -> Wait {
        Wait {
            amount,
            unit,
            at_hour,
            on_weekday: on,
        }
    }

    #[test]
    fn days_are_calendar_days_on_the_newsletters_clocks_across_daylight_saving_time() {
        let ny = TimeZoneName::parse("America/New_York").unwrap();
        // Saturday 31 October 2026, 10:00 EDT; the clocks go back on Sunday 1 November.
        let since = at("2026-10-31T14:00:00Z");
        let one_day = wait(1, DelayUnit::Days, None, None);
        assert_eq!(one_day.due_at(since, &ny), Some(at("2026-11-01T15:00:00Z")));
        let at_nine = wait(1, DelayUnit::Days, Some(9), None);
        assert_eq!(at_nine.due_at(since, &ny), Some(at("2026-11-02T14:00:00Z")));
        let monday = wait(0, DelayUnit::Hours, Some(9), Some(Weekday::Monday));
        assert_eq!(monday.due_at(since, &ny), Some(at("2026-11-02T14:00:00Z")));
        // Hours are elapsed time.
        let day_of_hours = wait(24, DelayUnit::Hours, None, None);
        assert_eq!(
            day_of_hours.due_at(since, &ny),
            Some(at("2026-11-01T14:00:00Z"))
        );
    }

    #[test]
    fn ready_if_since_is_the_inverse_of_due_at() {
        let ny = TimeZoneName::parse("America/New_York").unwrap();
        let since = at("2026-10-31T14:00:00Z");
        for w in [
            wait(1, DelayUnit::Days, None, None),
            wait(1, DelayUnit::Days, Some(9), None),
            wait(0, DelayUnit::Hours, Some(9), Some(Weekday::Monday)),
            wait(90, DelayUnit::Minutes, None, None),
            wait(3, DelayUnit::Days, Some(23), Some(Weekday::Sunday)),
        ] {
            let due = w.due_at(since, &ny).unwrap();
            let just_before = Timestamp::from(due.instant() - SignedDuration::from_secs(1));
            assert!(
                w.ready_if_since(just_before, &ny).is_none_or(|t| t < since),
                "{w:?} is not due a second early"
            );
            assert!(
                w.ready_if_since(due, &ny).is_some_and(|t| t >= since),
                "{w:?} is due at {due}"
            );
        }
    }
}
