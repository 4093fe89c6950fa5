//! Timestamps as the contract writes them: UTC, RFC 3339 with `Z` and milliseconds.
//! They are stored the same way, so string order is time order.
//!
//! Every "now" of the service comes from [`now`]: the system's time plus an offset that is
//! zero unless `serve --test-clock` moves it, so integration tests run the real binary at a
//! time they choose instead of sleeping until it comes (`docs/testing.md`). A move wakes
//! whoever waits on [`wait_for_move`] (the job poller), so work it made due starts at once.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

use time::{OffsetDateTime, format_description::BorrowedFormatItem, macros::format_description};

const FORMAT: &[BorrowedFormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

/// How far this process's clock is from the system's, in milliseconds.
static OFFSET_MS: AtomicI64 = AtomicI64::new(0);

/// How many times the clock has been moved, and the signal of each move.
static MOVES: Mutex<u64> = Mutex::new(0);
static MOVED: Condvar = Condvar::new();

/// The current instant, in UTC.
pub fn now() -> OffsetDateTime {
    #[cfg(test)]
    if let Some(at) = testing::fixed_now() {
        return at;
    }
    OffsetDateTime::now_utc() + time::Duration::milliseconds(OFFSET_MS.load(Ordering::SeqCst))
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

/// A fixed clock for unit tests, one per test thread: time stands still (or moves only when
/// told), so a test never crosses a rate-limit window or an expiry by chance.
#[cfg(test)]
pub mod testing {
    use std::cell::Cell;

    use time::OffsetDateTime;

    thread_local! {
        static FIXED: Cell<Option<OffsetDateTime>> = const { Cell::new(None) };
    }

    pub(super) fn fixed_now() -> Option<OffsetDateTime> {
        FIXED.get()
    }

    /// This thread's clock, stopped at an instant until dropped.
    pub struct FixedClock(());

    /// Stops this thread's [`super::now`] at `at` until the returned clock is dropped.
    pub fn fixed(at: OffsetDateTime) -> FixedClock {
        FIXED.set(Some(at));
        FixedClock(())
    }

    impl FixedClock {
        /// Moves the stopped clock on by `by`.
        pub fn advance(&self, by: time::Duration) {
            FIXED.set(FIXED.get().map(|at| at + by));
        }
    }

    impl Drop for FixedClock {
        fn drop(&mut self) {
            FIXED.set(None);
        }
    }
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

    #[test]
    fn a_fixed_clock_stands_still_moves_when_told_and_is_per_thread() {
        let at = time::macros::datetime!(2026-11-22 12:30 UTC);
        let clock = testing::fixed(at);
        assert_eq!(now(), at);
        clock.advance(time::Duration::minutes(45));
        assert_eq!(now(), at + time::Duration::minutes(45));
        let elsewhere = std::thread::spawn(now).join().unwrap();
        assert_ne!(elsewhere, at + time::Duration::minutes(45), "per thread");
        drop(clock);
        assert_ne!(now(), at + time::Duration::minutes(45));
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
