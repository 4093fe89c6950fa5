//! Fixed-window counters kept in SQLite (so a restart does not reset them): the account
//! throttles (sign-in, sign-up, mail per address), the subscribe form's and the API's
//! per-key hourly buckets.

use rusqlite::{Connection, OptionalExtension};

use crate::domain::accounts::tokens::TokenPurpose;
use crate::domain::values::secrets::sha256_hex;
use crate::domain::{DomainError, DomainResult, Window};

crate::string_enum!(
    /// The API's three hourly limits: reads, writes (deletes included) and bulk creation.
    pub ApiClass { Get => "get", Write => "write", Bulk => "bulk" }
);

/// Which counter a hit counts on. Its [`Bucket::name`] is the `rate_counters.bucket` text;
/// buckets of addresses are named by a hash, so what people type is not stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bucket<'a> {
    /// Sign-ups from one client address.
    SignUp { client: &'a str },
    /// Sign-in attempts from one client address.
    SignIn { client: &'a str },
    /// Failed sign-ins to one account, by the address as typed, trimmed and lowercased.
    SignInAccount { email: &'a str },
    /// Account mail of one purpose to one address.
    AccountMail {
        purpose: TokenPurpose,
        email: &'a str,
    },
    /// Subscribe form posts from one client address.
    Subscribe { client: &'a str },
    /// Confirmation mails of the subscribe form to one address.
    SubscribeMail { email: &'a str },
    /// Confirmation mails of one newsletter to the addresses of one e-mail domain.
    SubscribeDomain { newsletter_id: i64, domain: &'a str },
    /// Confirmation mails of one signup form, with or without a solved proof-of-work.
    FormMail { form_id: i64, proven: bool },
    /// One API key's requests of one class.
    Api { class: ApiClass, key_id: i64 },
    /// Sign-in link requests on newsletters' sites from one client address.
    ReaderSignIn { client: &'a str },
    /// Reader mails (sign-in links, address changes) to one address.
    ReaderMail { email: &'a str },
}

impl Bucket<'_> {
    /// The text kept in `rate_counters.bucket`.
    pub fn name(&self) -> String {
        match *self {
            Bucket::SignUp { client } => format!("sign_up:{client}"),
            Bucket::SignIn { client } => format!("sign_in:{client}"),
            Bucket::SignInAccount { email } => format!("sign_in_account:{}", sha256_hex(email)),
            Bucket::AccountMail { purpose, email } => {
                format!("{purpose}_mail:{}", sha256_hex(email))
            }
            Bucket::Subscribe { client } => format!("subscribe:{client}"),
            Bucket::SubscribeMail { email } => format!("subscribe_mail:{}", sha256_hex(email)),
            Bucket::SubscribeDomain {
                newsletter_id,
                domain,
            } => format!("subscribe_domain:{newsletter_id}:{}", sha256_hex(domain)),
            Bucket::FormMail { form_id, proven } => format!("form_mail:{form_id}:{proven}"),
            Bucket::Api { class, key_id } => format!("api:{class}:{key_id}"),
            Bucket::ReaderSignIn { client } => format!("reader_sign_in:{client}"),
            Bucket::ReaderMail { email } => format!("reader_mail:{}", sha256_hex(email)),
        }
    }
}

/// The longest window any caller uses; counts older than this are deleted whenever a new
/// window starts, so buckets named after addresses that never come back do not pile up.
pub const MAX_WINDOW_SECS: i64 = 86_400;

/// The current window of `window_secs` and a `Window` for `used` hits of `limit` in it.
fn current(window_secs: i64, limit: u32) -> (i64, impl Fn(u32) -> Window) {
    let now = crate::clock::now().as_second();
    let window_start = now - now.rem_euclid(window_secs);
    let reset_at = window_start + window_secs;
    let window = move |used: u32| Window {
        limit,
        remaining: limit.saturating_sub(used),
        reset_at,
        retry_after: (reset_at - now).max(1),
    };
    (window_start, window)
}

/// Counts one hit on `bucket` in the current window of `window_secs`; refuses with
/// `RateLimited` once `limit` hits were already counted (refused hits do not count).
///
/// Outside a transaction the count commits without waiting for the disk: losing the last
/// counts in a power cut only hands a client a few extra requests, while an fsync per request
/// would make every API read wait for the disk.
pub fn hit(
    conn: &Connection,
    bucket: &Bucket<'_>,
    window_secs: i64,
    limit: u32,
) -> DomainResult<Window> {
    if conn.is_autocommit() {
        crate::store::without_fsync(conn, |conn| count_hit(conn, bucket, window_secs, limit))
    } else {
        count_hit(conn, bucket, window_secs, limit)
    }
}

fn count_hit(
    conn: &Connection,
    bucket: &Bucket<'_>,
    window_secs: i64,
    limit: u32,
) -> DomainResult<Window> {
    const COUNT: &str = "INSERT INTO rate_counters (bucket, window_start, count) VALUES (?1, ?2, 1)
         ON CONFLICT (bucket, window_start) DO UPDATE SET count = count + 1
         WHERE count < ?3
         RETURNING count";
    const PRUNE: &str = "DELETE FROM rate_counters WHERE bucket = ?1 AND window_start < ?2";
    const PRUNE_STALE: &str = "DELETE FROM rate_counters WHERE window_start < ?1";
    debug_assert!(window_secs <= MAX_WINDOW_SECS);
    let bucket = bucket.name();
    let (window_start, window) = current(window_secs, limit);
    let counted: Option<u32> = {
        let mut stmt = conn.prepare_cached(COUNT)?;
        let mut rows = stmt.query((&bucket, window_start, limit))?;
        rows.next()?.map(|row| row.get(0)).transpose()?
    };
    match counted {
        Some(used) if used <= limit => {
            if used == 1 {
                conn.execute(PRUNE, (&bucket, window_start))?;
                conn.execute(PRUNE_STALE, [window_start - MAX_WINDOW_SECS])?;
            }
            Ok(window(used))
        }
        _ => Err(DomainError::RateLimited(window(limit))),
    }
}

/// Like [`hit`] for a limit kept quietly: `Ok(false)` instead of `RateLimited`, for answers
/// that must not tell whether anything happened (a mail to an address that had its share).
pub fn allow(
    conn: &Connection,
    bucket: &Bucket<'_>,
    window_secs: i64,
    limit: u32,
) -> DomainResult<bool> {
    match hit(conn, bucket, window_secs, limit) {
        Ok(_) => Ok(true),
        Err(DomainError::RateLimited(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Forgets a bucket's counts (a right password clears its address's failures).
pub fn clear(conn: &Connection, bucket: &Bucket<'_>) -> DomainResult<()> {
    conn.execute(
        "DELETE FROM rate_counters WHERE bucket = ?1",
        [bucket.name()],
    )?;
    Ok(())
}

/// Like [`hit`] without counting: for when nothing can be written (a full disk), so a
/// request is still held to its bucket's limit.
pub fn peek(
    conn: &Connection,
    bucket: &Bucket<'_>,
    window_secs: i64,
    limit: u32,
) -> DomainResult<Window> {
    const USED: &str = "SELECT count FROM rate_counters WHERE bucket = ?1 AND window_start = ?2";
    let (window_start, window) = current(window_secs, limit);
    let used: u32 = conn
        .query_row(USED, (bucket.name(), window_start), |r| r.get(0))
        .optional()?
        .unwrap_or(0);
    if used < limit {
        Ok(window(used))
    } else {
        Err(DomainError::RateLimited(window(limit)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stopped clock half way through an hour: a test's hits stay in one window.
    fn mid_hour() -> crate::clock::testing::FixedClock {
        crate::clock::testing::fixed(crate::clock::testing::at("2026-11-22T12:30:00Z"))
    }

    #[test]
    fn a_new_window_starts_the_count_again() {
        let clock = mid_hour();
        let conn = crate::domain::testing::db();
        hit(&conn, &Bucket::SignIn { client: "t" }, 3600, 1).unwrap();
        assert!(
            matches!(hit(&conn, &Bucket::SignIn { client: "t" }, 3600, 1), Err(DomainError::RateLimited(w)) if w.retry_after == 1800)
        );
        clock.advance(jiff::SignedDuration::from_mins(30));
        let w = hit(&conn, &Bucket::SignIn { client: "t" }, 3600, 1).unwrap();
        assert_eq!((w.remaining, w.retry_after), (0, 3600));
    }

    #[test]
    fn buckets_keep_their_stored_names() {
        let api = Bucket::Api {
            class: ApiClass::Bulk,
            key_id: 7,
        };
        assert_eq!(api.name(), "api:bulk:7");
        assert_eq!(
            Bucket::SignUp { client: "1.2.3.4" }.name(),
            "sign_up:1.2.3.4"
        );
        let mail = Bucket::AccountMail {
            purpose: TokenPurpose::ResetPassword,
            email: "a@b.c",
        };
        assert_eq!(
            mail.name(),
            format!("reset_password_mail:{}", sha256_hex("a@b.c"))
        );
    }

    #[test]
    fn counts_up_to_the_limit_then_refuses() {
        let _clock = mid_hour();
        let conn = crate::domain::testing::db();
        for expected_remaining in (0..3).rev() {
            let w = hit(&conn, &Bucket::SignIn { client: "t" }, 3600, 3).unwrap();
            assert_eq!(w.remaining, expected_remaining);
        }
        match hit(&conn, &Bucket::SignIn { client: "t" }, 3600, 3) {
            Err(DomainError::RateLimited(w)) => assert!(w.retry_after >= 1 && w.remaining == 0),
            other => panic!("expected RateLimited, got {other:?}"),
        }
        assert!(
            hit(&conn, &Bucket::SignIn { client: "other" }, 3600, 3).is_ok(),
            "buckets are independent"
        );
    }

    #[test]
    fn allowing_says_no_quietly_and_clearing_starts_over() {
        let _clock = mid_hour();
        let conn = crate::domain::testing::db();
        assert!(allow(&conn, &Bucket::SignIn { client: "m" }, 3600, 2).unwrap());
        assert!(allow(&conn, &Bucket::SignIn { client: "m" }, 3600, 2).unwrap());
        assert!(!allow(&conn, &Bucket::SignIn { client: "m" }, 3600, 2).unwrap());
        clear(&conn, &Bucket::SignIn { client: "m" }).unwrap();
        assert!(allow(&conn, &Bucket::SignIn { client: "m" }, 3600, 2).unwrap());
    }

    #[test]
    fn a_new_window_deletes_counts_older_than_the_longest_window() {
        let conn = crate::domain::testing::db();
        conn.execute(
            "INSERT INTO rate_counters (bucket, window_start, count) VALUES ('gone', 0, 3), ('kept', ?1, 1)",
            [crate::clock::now().as_second() - 60],
        )
        .unwrap();
        hit(&conn, &Bucket::SignIn { client: "fresh" }, 3600, 5).unwrap();
        let buckets: Vec<String> = conn
            .prepare("SELECT bucket FROM rate_counters ORDER BY bucket")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(buckets, ["kept", "sign_in:fresh"]);
    }

    #[test]
    fn peeking_holds_to_the_limit_without_counting() {
        let _clock = mid_hour();
        let conn = crate::domain::testing::db();
        assert_eq!(
            peek(&conn, &Bucket::SignIn { client: "t" }, 3600, 2)
                .unwrap()
                .remaining,
            2
        );
        hit(&conn, &Bucket::SignIn { client: "t" }, 3600, 2).unwrap();
        assert_eq!(
            peek(&conn, &Bucket::SignIn { client: "t" }, 3600, 2)
                .unwrap()
                .remaining,
            1
        );
        assert_eq!(
            peek(&conn, &Bucket::SignIn { client: "t" }, 3600, 2)
                .unwrap()
                .remaining,
            1
        );
        hit(&conn, &Bucket::SignIn { client: "t" }, 3600, 2).unwrap();
        assert!(matches!(
            peek(&conn, &Bucket::SignIn { client: "t" }, 3600, 2),
            Err(DomainError::RateLimited(_))
        ));
    }
}
