//! Timestamps as the contract writes them: UTC, RFC 3339 with `Z` and milliseconds.
//! They are stored the same way, so string order is time order.
//!
//! Every "now" of the service comes from [`now`]: the system's time plus an offset that is
//! zero unless `serve --test-clock` moves it, so integration tests run the real binary at a
//! time they choose instead of sleeping until it comes (`docs/testing.md`). A move wakes
//! whoever waits on [`wait_for_move`] (the job poller), so work it made due starts at once.
//!
//! Instants, durations and days are jiff's (`jiff::Timestamp`, `jiff::SignedDuration`,
//! `jiff::civil::Date`), the one date library of the service (docs/architecture.md). The
//! texts of times are read and written here by hand, to the byte, so that what the service
//! takes and writes does not follow jiff's wider ISO 8601 grammar.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

use jiff::SignedDuration;
use jiff::civil::{Date, DateTime};
use jiff::tz::Offset;

/// How far this process's clock is from the system's, in milliseconds.
static OFFSET_MS: AtomicI64 = AtomicI64::new(0);

/// How many times the clock has been moved, and the signal of each move.
static MOVES: Mutex<u64> = Mutex::new(0);
static MOVED: Condvar = Condvar::new();

/// The current instant, in UTC.
pub fn now() -> jiff::Timestamp {
    #[cfg(test)]
    if let Some(at) = testing::fixed_now() {
        return at;
    }
    jiff::Timestamp::now() + SignedDuration::from_millis(OFFSET_MS.load(Ordering::SeqCst))
}

/// `n` whole days of 24 hours, for lifetimes and windows (jiff has no such constructor).
pub const fn days(n: i64) -> SignedDuration {
    SignedDuration::from_hours(n * 24)
}

/// The day (UTC) `at` falls on.
pub fn date_of(at: jiff::Timestamp) -> Date {
    Offset::UTC.to_datetime(at).date()
}

/// Sets the clock to the system's time plus `offset_ms` and wakes every [`wait_for_move`].
fn set_offset(offset_ms: i64) {
    OFFSET_MS.store(offset_ms, Ordering::SeqCst);
    let mut moves = MOVES.lock().unwrap_or_else(PoisonError::into_inner);
    *moves += 1;
    MOVED.notify_all();
}

/// How many times the clock has moved so far: what [`wait_for_move`] compares with.
pub fn moves() -> u64 {
    *MOVES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Waits up to `timeout` for the clock to move after `seen` ([`moves`]); true when it has.
pub fn wait_for_move(seen: u64, timeout: Duration) -> bool {
    let moves = MOVES.lock().unwrap_or_else(PoisonError::into_inner);
    let (moves, _) = MOVED
        .wait_timeout_while(moves, timeout, |moves| *moves == seen)
        .unwrap_or_else(PoisonError::into_inner);
    *moves != seen
}

/// The file in the data directory that `serve --test-clock` takes its offset from: a whole
/// number of milliseconds (negative for the past) to add to the system's time.
pub const TEST_CLOCK_FILE: &str = "test-clock";
/// Where the server writes back each offset it has applied, once it applies it.
pub const TEST_CLOCK_APPLIED: &str = "test-clock.applied";
/// How often `--test-clock` looks at [`TEST_CLOCK_FILE`].
const TEST_CLOCK_POLL: Duration = Duration::from_millis(10);

/// `serve --test-clock`: applies the offset in `<data_dir>/test-clock` now (a bad one fails
/// the start) and on every change after, looking every 10 ms; each offset applied is written
/// to `test-clock.applied`, the signal tests wait on. Without the file the offset stays 0.
pub fn follow_test_clock(data_dir: &Path) -> std::io::Result<()> {
    let mut follower = TestClock {
        file: data_dir.join(TEST_CLOCK_FILE),
        applied: data_dir.join(TEST_CLOCK_APPLIED),
        last: None,
    };
    follower.apply_change(set_offset)?;
    eprintln!(
        "clock: --test-clock follows {} (offset {} ms)",
        follower.file.display(),
        OFFSET_MS.load(Ordering::SeqCst)
    );
    std::thread::Builder::new()
        .name("test-clock".into())
        .spawn(move || {
            let mut complaint = String::new();
            loop {
                std::thread::sleep(TEST_CLOCK_POLL);
                match follower.apply_change(set_offset) {
                    Ok(()) => complaint.clear(),
                    // Said once, not every 10 ms while the file stays wrong.
                    Err(e) if e.to_string() != complaint => {
                        complaint = e.to_string();
                        eprintln!("clock: {complaint}");
                    }
                    Err(_) => {}
                }
            }
        })?;
    Ok(())
}

/// The `--test-clock` file and the offset text last applied from it.
struct TestClock {
    file: PathBuf,
    applied: PathBuf,
    last: Option<String>,
}

impl TestClock {
    /// Applies the file's offset with `set` when it differs from the last one applied, and
    /// acknowledges it.
    fn apply_change(&mut self, set: impl FnOnce(i64)) -> std::io::Result<()> {
        let text = match std::fs::read_to_string(&self.file) {
            Ok(text) => text.trim().to_string(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        if self.last.as_ref() == Some(&text) {
            return Ok(());
        }
        let offset_ms: i64 = text.parse().map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "{} must hold a whole number of milliseconds, not {text:?}",
                    self.file.display()
                ),
            )
        })?;
        set(offset_ms);
        // Written aside and renamed, so a test never reads half an acknowledgement.
        let partial = self.applied.with_extension("applied.partial");
        std::fs::write(&partial, format!("{text}\n"))?;
        std::fs::rename(&partial, &self.applied)?;
        eprintln!("clock: moved to {offset_ms} ms from the system's time (--test-clock)");
        self.last = Some(text);
        Ok(())
    }
}

/// Formats an instant as stored and served: `2026-11-22T05:42:04.123Z` (the milliseconds
/// cut, not rounded).
pub fn format(at: jiff::Timestamp) -> String {
    let t = Offset::UTC.to_datetime(at);
    let mut text = String::with_capacity(24);
    write_day(&mut text, t.date());
    let millis = t.subsec_nanosecond() / 1_000_000;
    let (hour, minute, second) = (t.hour(), t.minute(), t.second());
    let _ = write!(text, "T{hour:02}:{minute:02}:{second:02}.{millis:03}Z");
    text
}

/// `format(now())`, the value most writes store.
pub fn now_string() -> String {
    format(now())
}

/// An instant for a sentence people read: `2026-11-22 05:42:04 UTC`.
pub fn human(at: jiff::Timestamp) -> String {
    let t = Offset::UTC.to_datetime(at);
    let mut text = String::with_capacity(23);
    write_day(&mut text, t.date());
    let (hour, minute, second) = (t.hour(), t.minute(), t.second());
    let _ = write!(text, " {hour:02}:{minute:02}:{second:02} UTC");
    text
}

/// A day as stored: `2026-11-22`.
pub fn format_day(day: Date) -> String {
    let mut text = String::with_capacity(10);
    write_day(&mut text, day);
    text
}

/// Four digits of year, with a sign only before year 0 (as stored before jiff came: jiff's
/// own `Display` writes six digits there).
fn write_day(text: &mut String, day: Date) {
    let sign = if day.year() < 0 { "-" } else { "" };
    let (year, month, day) = (day.year().unsigned_abs(), day.month(), day.day());
    let _ = write!(text, "{sign}{year:04}-{month:02}-{day:02}");
}

/// Parses an RFC 3339 timestamp (with offset) into UTC: `2026-11-22T05:42:04.123Z`,
/// `2026-11-22 06:42:04+01:00`. Any one character may stand between the date and the time,
/// the fraction of a second has any number of digits (those past nanoseconds are dropped),
/// `Z` may be lower case, and `23:59:60` at the end of a month (UTC) is a leap second, read
/// as the nanosecond before. An instant of the last 26 hours of year 9999, which jiff's
/// instants do not reach, is its last instant; one past year 9999 is refused.
pub fn parse(text: &str) -> Option<jiff::Timestamp> {
    let mut scan = Scan(text.as_bytes());
    let year = scan.digits(4)?;
    let (month, day) = scan.month_and_day()?;
    scan.skip_one()?;
    let (hour, minute, second) = scan.time_of_day()?;
    let nanos = if scan.take(b'.') {
        scan.fraction(usize::MAX)?
    } else {
        0
    };
    let offset = if scan.take(b'Z') || scan.take(b'z') {
        0
    } else {
        let sign = scan.sign()?;
        let hours = scan.digits(2).filter(|&h| h <= 23)?;
        scan.expect(b':')?;
        let minutes = scan.digits(2).filter(|&m| m <= 59)?;
        sign * (hours * 3600 + minutes * 60)
    };
    scan.end()?;
    let leap = second == 60;
    let (second, nanos) = if leap {
        (59, 999_999_999)
    } else {
        (second, nanos)
    };
    let local = DateTime::new(year as i16, month, day, hour, minute, second, nanos).ok()?;
    let utc = local
        .checked_sub(SignedDuration::from_secs(offset.into()))
        .ok()?;
    let last_second_of_month = (utc.hour(), utc.minute(), utc.second()) == (23, 59, 59)
        && utc.day() == utc.days_in_month();
    if leap && !last_second_of_month {
        return None;
    }
    Some(instant_of_utc(utc))
}

/// A day written `2026-11-22` (a sign before the year allowed): the stored form of days.
pub fn parse_day(text: &str) -> Option<Date> {
    let mut scan = Scan(text.as_bytes());
    let day = scan.day()?;
    scan.end()?;
    Some(day)
}

/// A date and time with no offset, `2024-01-05T10:11:12` with up to 32 digits of a fraction
/// of a second (a sign before the year allowed).
pub fn parse_civil(text: &str) -> Option<DateTime> {
    let mut scan = Scan(text.as_bytes());
    let day = scan.day()?;
    scan.expect(b'T')?;
    let (hour, minute, second) = scan.time_of_day()?;
    let nanos = if scan.take(b'.') {
        scan.fraction(32)?
    } else {
        0
    };
    scan.end()?;
    DateTime::new(
        day.year(),
        day.month(),
        day.day(),
        hour,
        minute,
        second,
        nanos,
    )
    .ok()
}

/// The instant a date and time on UTC's clocks names; past either end of jiff's instants
/// (the first and last hours of years -9999 and 9999), that end.
pub fn instant_of_utc(utc: DateTime) -> jiff::Timestamp {
    Offset::UTC.to_timestamp(utc).unwrap_or(if utc.year() < 0 {
        jiff::Timestamp::MIN
    } else {
        jiff::Timestamp::MAX
    })
}

/// Reads the text of a time byte by byte. The grammars are the ones the service took
/// before it moved to jiff (they were the `time` crate's parsers'), which jiff's own
/// parsers do not match: they also take `09:00` without seconds, basic `20261122T0900`,
/// bracketed zone names, and refuse a leap second.
struct Scan<'a>(&'a [u8]);

impl Scan<'_> {
    /// Takes `want` when it comes next.
    fn take(&mut self, want: u8) -> bool {
        match self.0.split_first() {
            Some((&first, rest)) if first == want => {
                self.0 = rest;
                true
            }
            _ => false,
        }
    }

    fn expect(&mut self, want: u8) -> Option<()> {
        self.take(want).then_some(())
    }

    /// Takes any one byte.
    fn skip_one(&mut self) -> Option<()> {
        self.0 = self.0.get(1..)?;
        Some(())
    }

    fn end(&self) -> Option<()> {
        self.0.is_empty().then_some(())
    }

    /// `+` as 1, `-` as -1.
    fn sign(&mut self) -> Option<i32> {
        if self.take(b'+') {
            Some(1)
        } else if self.take(b'-') {
            Some(-1)
        } else {
            None
        }
    }

    /// Exactly `n` ASCII digits, as a number.
    fn digits(&mut self, n: usize) -> Option<i32> {
        let (head, rest) = self.0.split_at_checked(n)?;
        if !head.iter().all(u8::is_ascii_digit) {
            return None;
        }
        self.0 = rest;
        Some(
            head.iter()
                .fold(0, |value, d| value * 10 + i32::from(d - b'0')),
        )
    }

    /// One to `most` digits of a fraction of a second, as nanoseconds.
    fn fraction(&mut self, most: usize) -> Option<i32> {
        let count = self
            .0
            .iter()
            .take(most)
            .take_while(|b| b.is_ascii_digit())
            .count();
        if count == 0 {
            return None;
        }
        let (digits, rest) = self.0.split_at(count);
        self.0 = rest;
        Some((0..9).fold(0, |nanos, i| {
            nanos * 10 + digits.get(i).map_or(0, |d| i32::from(d - b'0'))
        }))
    }

    /// `-MM-DD`.
    fn month_and_day(&mut self) -> Option<(i8, i8)> {
        self.expect(b'-')?;
        let month = self.digits(2)?;
        self.expect(b'-')?;
        let day = self.digits(2)?;
        Some((month as i8, day as i8))
    }

    /// `HH:MM:SS`.
    fn time_of_day(&mut self) -> Option<(i8, i8, i8)> {
        let hour = self.digits(2)?;
        self.expect(b':')?;
        let minute = self.digits(2)?;
        self.expect(b':')?;
        let second = self.digits(2)?;
        Some((hour as i8, minute as i8, second as i8))
    }

    /// `YYYY-MM-DD`, a sign allowed before the year.
    fn day(&mut self) -> Option<Date> {
        let year = match self.sign() {
            Some(sign) => sign * self.digits(4)?,
            None => self.digits(4)?,
        };
        let (month, day) = self.month_and_day()?;
        Date::new(year as i16, month, day).ok()
    }
}

/// A fixed clock for unit tests, one per test thread: time stands still (or moves only when
/// told), so a test never crosses a rate-limit window or an expiry by chance.
#[cfg(test)]
pub mod testing {
    use std::cell::Cell;

    use jiff::SignedDuration;

    thread_local! {
        static FIXED: Cell<Option<jiff::Timestamp>> = const { Cell::new(None) };
    }

    pub(super) fn fixed_now() -> Option<jiff::Timestamp> {
        FIXED.get()
    }

    /// This thread's clock, stopped at an instant until dropped.
    pub struct FixedClock(());

    /// Stops this thread's [`super::now`] at `at` until the returned clock is dropped.
    pub fn fixed(at: jiff::Timestamp) -> FixedClock {
        FIXED.set(Some(at));
        FixedClock(())
    }

    impl FixedClock {
        /// Moves the stopped clock on by `by`.
        pub fn advance(&self, by: SignedDuration) {
            FIXED.set(FIXED.get().map(|at| at + by));
        }
    }

    impl Drop for FixedClock {
        fn drop(&mut self) {
            FIXED.set(None);
        }
    }

    /// The instant an RFC 3339 text names, for writing instants in tests.
    pub fn at(text: &str) -> jiff::Timestamp {
        super::parse(text).unwrap_or_else(|| panic!("not an RFC 3339 instant: {text:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_with_millis_and_z_and_round_trips() {
        let t = testing::at("2026-11-22T05:42:04.123456Z");
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

    /// The grammar `time`'s RFC 3339 parser had, which the API's times and the stored ones
    /// were read with before jiff: the same texts are taken and refused.
    #[test]
    fn parsing_takes_and_refuses_what_it_always_did() {
        for (text, utc) in [
            ("2026-11-22 05:42:04Z", "2026-11-22T05:42:04.000Z"),
            ("2026-11-22t05:42:04z", "2026-11-22T05:42:04.000Z"),
            ("2026-11-22X05:42:04-00:00", "2026-11-22T05:42:04.000Z"),
            (
                "2026-11-22T05:42:04.1234567891234Z",
                "2026-11-22T05:42:04.123Z",
            ),
            ("2026-11-22T00:12:04-23:59", "2026-11-23T00:11:04.000Z"),
            ("0000-01-01T00:00:00+01:00", "-0001-12-31T23:00:00.000Z"),
            ("2016-12-31T23:59:60Z", "2016-12-31T23:59:59.999Z"),
            ("2017-01-01T00:59:60+01:00", "2016-12-31T23:59:59.999Z"),
            // The last hours of year 9999 are past jiff's last instant: they read as it.
            ("9999-12-31T12:00:00Z", "9999-12-30T22:00:00.999Z"),
        ] {
            assert_eq!(parse(text).map(format).as_deref(), Some(utc), "{text}");
        }
        for bad in [
            "2026-11-22T05:42Z",
            "2026-11-22T05:42:04",
            "20261122T054204Z",
            "2026-11-22T05:42:04Z[UTC]",
            "2026-11-22T05:42:04.Z",
            "2026-11-22T05:42:04+24:00",
            "2026-11-22T05:42:04+01:60",
            "2026-11-22T05:42:04+0100",
            "2026-11-22T24:00:00Z",
            "2026-11-22T12:59:60Z",
            "2026-02-29T05:42:04Z",
            "+2026-11-22T05:42:04Z",
            "2026-11-22T05:42:04Z ",
            "9999-12-31T23:30:00-01:00",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
        assert_eq!(
            parse_day("2026-11-22"),
            Some(jiff::civil::date(2026, 11, 22))
        );
        assert_eq!(
            parse_day("-0001-01-01").map(format_day).as_deref(),
            Some("-0001-01-01")
        );
        for bad in [
            "2026-11-2",
            "2026-11-22T",
            "20261122",
            "+02026-11-22",
            "2026-02-30",
        ] {
            assert_eq!(parse_day(bad), None, "{bad}");
        }
        assert_eq!(
            parse_civil("2024-01-05T10:11:12.5"),
            Some(jiff::civil::date(2024, 1, 5).at(10, 11, 12, 500_000_000))
        );
        for bad in [
            "2024-01-05 10:11:12",
            "2024-01-05T10:11",
            "2024-01-05T10:11:12.",
        ] {
            assert_eq!(parse_civil(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_fixed_clock_stands_still_moves_when_told_and_is_per_thread() {
        let at = testing::at("2026-11-22T12:30:00Z");
        let clock = testing::fixed(at);
        assert_eq!(now(), at);
        clock.advance(SignedDuration::from_mins(45));
        assert_eq!(now(), at + SignedDuration::from_mins(45));
        let elsewhere = std::thread::spawn(now).join().unwrap();
        assert_ne!(elsewhere, at + SignedDuration::from_mins(45), "per thread");
        drop(clock);
        assert_ne!(now(), at + SignedDuration::from_mins(45));
    }

    #[test]
    fn the_test_clock_file_is_applied_once_per_change_and_acknowledged() {
        let dir = tempfile::tempdir().unwrap();
        let mut follower = TestClock {
            file: dir.path().join(TEST_CLOCK_FILE),
            applied: dir.path().join(TEST_CLOCK_APPLIED),
            last: None,
        };
        let mut applied = Vec::new();
        follower.apply_change(|ms| applied.push(ms)).unwrap();
        assert!(
            applied.is_empty() && !follower.applied.exists(),
            "no file, no move"
        );

        std::fs::write(&follower.file, "3600000\n").unwrap();
        follower.apply_change(|ms| applied.push(ms)).unwrap();
        follower.apply_change(|ms| applied.push(ms)).unwrap();
        assert_eq!(applied, [3_600_000], "once per change");
        assert_eq!(
            std::fs::read_to_string(&follower.applied).unwrap(),
            "3600000\n"
        );

        std::fs::write(&follower.file, "an hour").unwrap();
        assert!(follower.apply_change(|ms| applied.push(ms)).is_err());
        std::fs::write(&follower.file, "-5").unwrap();
        follower.apply_change(|ms| applied.push(ms)).unwrap();
        assert_eq!(applied, [3_600_000, -5]);
        assert_eq!(std::fs::read_to_string(&follower.applied).unwrap(), "-5\n");
    }

    #[test]
    fn a_move_wakes_its_waiters() {
        let seen = moves();
        let waiter = std::thread::spawn(move || wait_for_move(seen, Duration::from_secs(30)));
        // The same offset again: the time does not change for the other tests of this process.
        set_offset(OFFSET_MS.load(Ordering::SeqCst));
        assert!(waiter.join().unwrap(), "the move woke the waiter");
        assert!(!wait_for_move(moves(), Duration::from_millis(1)));
    }
}

/// An instant as the service keeps it: UTC, to the millisecond. In the database, in JSON and
/// through `Display` it is the text [`format`] writes (`2026-11-22T05:42:04.123Z`), so a
/// value read and written back is the same text, and comparing two is comparing times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(jiff::Timestamp);

impl Timestamp {
    /// The current instant, from [`now`].
    pub fn now() -> Self {
        Self::from(now())
    }

    /// The instant, for arithmetic and calendars.
    pub fn instant(self) -> jiff::Timestamp {
        self.0
    }

    /// The day (UTC) this instant falls on.
    pub fn date(self) -> Date {
        date_of(self.0)
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

impl From<jiff::Timestamp> for Timestamp {
    /// Cut to whole milliseconds (towards the past, as the text is): exactly what the text
    /// holds.
    fn from(at: jiff::Timestamp) -> Self {
        let nanos = at.as_nanosecond();
        Timestamp(
            jiff::Timestamp::from_nanosecond(nanos - nanos.rem_euclid(1_000_000))
                .unwrap_or(jiff::Timestamp::MIN),
        )
    }
}

impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&format(self.0))
    }
}

impl std::ops::Add<SignedDuration> for Timestamp {
    type Output = Timestamp;

    fn add(self, by: SignedDuration) -> Timestamp {
        Timestamp::from(self.0 + by)
    }
}

impl std::ops::Sub<SignedDuration> for Timestamp {
    type Output = Timestamp;

    fn sub(self, by: SignedDuration) -> Timestamp {
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
        let at = Timestamp::from(testing::at("2026-11-22T06:42:04.123456+01:00"));
        assert_eq!(at.to_string(), "2026-11-22T05:42:04.123Z");
        assert_eq!(Timestamp::parse("2026-11-22T05:42:04.123Z"), Some(at));
        assert_eq!(at.date(), jiff::civil::date(2026, 11, 22));
        // Before 1970 the milliseconds are cut towards the past too, as in the text.
        let early = Timestamp::from(testing::at("1969-12-31T23:59:59.9995Z"));
        assert_eq!(early.to_string(), "1969-12-31T23:59:59.999Z");
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
