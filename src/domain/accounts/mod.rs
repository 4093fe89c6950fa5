//! Accounts: sign-up with e-mail confirmation, sign-in with throttling, sessions, password
//! reset. Passwords are hashed with argon2id; every token handed out is stored as a hash.
//! The throttles and lifetimes are listed in docs/security.md.

pub mod api_keys;
pub mod changes;
pub mod rate_limit;
pub mod tokens;

use std::sync::LazyLock;

use argon2::Argon2;
use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use jiff::SignedDuration;
use rusqlite::{Connection, OptionalExtension};

use crate::clock::{self, Timestamp};
use crate::domain::accounts::rate_limit::Bucket;
use crate::domain::accounts::tokens::TokenPurpose;
use crate::domain::values::email::EmailAddress;
use crate::domain::values::secrets::{random_hex, sha256_hex};
use crate::domain::values::time_zones::TimeZoneName;
use crate::domain::values::urls::SiteUrls;
use crate::domain::{DomainError, DomainResult, FieldErrors};
use crate::store::jobs::{AccountMail, AccountMailKind, queue_account_mail};
use crate::store::write_tx;

/// How long an e-mail confirmation link works.
pub const CONFIRMATION_TTL: SignedDuration = SignedDuration::from_hours(24);
/// How long a password-reset link works.
pub const RESET_TTL: SignedDuration = SignedDuration::from_hours(1);
/// Sign-in attempts for one e-mail address per window: past it that address is locked
/// until the window ends, whoever tries. A right password clears the count.
pub const SIGN_IN_ACCOUNT_LIMIT: u32 = 5;
/// Sign-in attempts from one client address per window, whatever the e-mail address: looser,
/// since an office or a school shares one address, but it stops guessing across accounts.
pub const SIGN_IN_CLIENT_LIMIT: u32 = 30;
pub const SIGN_IN_WINDOW_SECS: i64 = 15 * 60;
/// Accounts one client address may create per hour.
pub const SIGN_UPS_PER_CLIENT_PER_HOUR: u32 = 10;
/// Mails of one kind (confirmation links, reset links) one address gets per hour; asking
/// for more answers the same and sends nothing, so nobody can flood an inbox.
pub const MAILS_PER_ADDRESS_PER_HOUR: u32 = 3;
/// A session's `last_seen_at` is written at most this often, to spare writes.
const TOUCH_EVERY: SignedDuration = SignedDuration::from_mins(1);
const PASSWORD_MIN: usize = 8;
const PASSWORD_MAX: usize = 1024;

/// A signed-in or signing-up person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: i64,
    pub email: String,
    pub confirmed: bool,
    /// The zone the dashboard shows and takes this person's times in: on a newsletter's
    /// pages that newsletter's zone instead, unless `own_time_zone`.
    pub time_zone: TimeZoneName,
    /// The person picked `time_zone` for every page, over each newsletter's own.
    pub own_time_zone: bool,
}

/// How long a session lasts: `idle` since it was last used, `absolute` since sign-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLifetimes {
    pub idle: SignedDuration,
    pub absolute: SignedDuration,
}

impl Default for SessionLifetimes {
    /// A month without a visit, or three months in all: an owner who writes monthly stays
    /// signed in, and a stolen cookie does not work for ever.
    fn default() -> Self {
        SessionLifetimes {
            idle: clock::days(30),
            absolute: clock::days(90),
        }
    }
}

impl SessionLifetimes {
    /// The oldest `last_seen_at` and `created_at` a live session may have now.
    fn cutoffs(&self) -> (Timestamp, Timestamp) {
        let now = clock::now();
        (
            Timestamp::from(now - self.idle),
            Timestamp::from(now - self.absolute),
        )
    }
}

/// A fresh session; `token` goes into the cookie and is never stored.
#[derive(Debug, Clone)]
pub struct NewSession {
    pub token: String,
    pub user_id: i64,
}

/// What the sign-up form sends.
#[derive(Debug, Clone, Default)]
pub struct SignUp {
    pub email: String,
    pub password: String,
    pub password_confirmation: String,
    /// The browser's IANA zone, filled in by the sign-up page's script; UTC when it is
    /// missing or unknown, since the owner can change it on the account page.
    pub time_zone: String,
}

fn hash_password(password: &str) -> String {
    Argon2::default()
        .hash_password(password.as_bytes())
        .expect("argon2 hashes any password with default parameters")
        .to_string()
}

/// A hash of the same parameters as real ones, checked when the address has no account so
/// that such a sign-in costs the same time as a wrong password (one verification).
static DUMMY_HASH: LazyLock<String> = LazyLock::new(|| hash_password("timing-equaliser"));

fn password_matches(password: &str, stored_hash: &str) -> bool {
    PasswordHash::new(stored_hash)
        .map(|parsed| {
            Argon2::default()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok()
        })
        .unwrap_or(false)
}

/// Checks a new password and its confirmation, adding messages to `errors`.
fn check_new_password(errors: &mut FieldErrors, password: &str, confirmation: &str) {
    let length = password.chars().count();
    if length < PASSWORD_MIN {
        errors.add(
            "password",
            format!("is too short (minimum is {PASSWORD_MIN} characters)"),
        );
    } else if length > PASSWORD_MAX {
        errors.add(
            "password",
            format!("is too long (maximum is {PASSWORD_MAX} characters)"),
        );
    }
    if password != confirmation {
        errors.add("password_confirmation", "doesn't match Password");
    }
}

/// Creates an unconfirmed account and queues its confirmation mail. The first account of a
/// fresh install is its operator (docs/operator.md), decided by the insert itself inside the
/// write transaction, so two simultaneous sign-ups cannot both be first. Only accounts created
/// count against `client` (its network address): past [`SIGN_UPS_PER_CLIENT_PER_HOUR`] it
/// answers `RateLimited`.
pub fn sign_up(
    conn: &mut Connection,
    urls: &SiteUrls,
    client: &str,
    form: &SignUp,
) -> DomainResult<User> {
    let mut errors = FieldErrors::new();
    let email = match EmailAddress::parse(&form.email) {
        Ok(email) => Some(email),
        Err(message) => {
            errors.add("email_address", message);
            None
        }
    };
    check_new_password(&mut errors, &form.password, &form.password_confirmation);
    if let Some(email) = &email
        && find_user_by_email(conn, email.as_str())?.is_some()
    {
        errors.add("email_address", "has already been taken");
    }
    errors.into_result()?;
    let email = email.expect("validated above");
    let password_hash = hash_password(&form.password);
    write_tx(conn, |tx| {
        const INSERT: &str =
            "INSERT INTO users (email, password_hash, operator, created_at, updated_at, time_zone)
             VALUES (?1, ?2, NOT EXISTS (SELECT 1 FROM users), ?3, ?3, ?4)
             ON CONFLICT (email) DO NOTHING";
        rate_limit::hit(
            tx,
            &Bucket::SignUp { client },
            3600,
            SIGN_UPS_PER_CLIENT_PER_HOUR,
        )?;
        let now = Timestamp::now();
        let time_zone =
            TimeZoneName::parse(&form.time_zone).unwrap_or_else(|_| TimeZoneName::utc());
        if tx.execute(INSERT, (email.as_str(), &password_hash, &now, &time_zone))? == 0 {
            return Err(DomainError::invalid(
                "email_address",
                "has already been taken",
            ));
        }
        let user = User {
            id: tx.last_insert_rowid(),
            email: email.to_string(),
            confirmed: false,
            time_zone,
            own_time_zone: false,
        };
        send_confirmation(tx, urls, &user)?;
        Ok(user)
    })
}

/// Counts a mail of `kind` to `email`; false once the address had its share this hour. The
/// bucket is named by a hash, so addresses typed into the forms are not stored.
fn mail_allowed(conn: &Connection, purpose: TokenPurpose, email: &str) -> DomainResult<bool> {
    rate_limit::allow(
        conn,
        &Bucket::AccountMail { purpose, email },
        3600,
        MAILS_PER_ADDRESS_PER_HOUR,
    )
}

/// Mails a new confirmation link, unless the address had its share this hour.
fn send_confirmation(conn: &Connection, urls: &SiteUrls, user: &User) -> DomainResult<()> {
    if !mail_allowed(conn, TokenPurpose::ConfirmEmail, &user.email)? {
        return Ok(());
    }
    let token = issue_token(conn, user.id, TokenPurpose::ConfirmEmail, CONFIRMATION_TTL)?;
    let link = urls.service(&format!("/email_confirmations/{token}"));
    queue_account_mail(
        conn,
        &AccountMail {
            to: user.email.clone(),
            link,
            kind: AccountMailKind::Confirmation,
        },
    )?;
    Ok(())
}

fn issue_token(
    conn: &Connection,
    user_id: i64,
    purpose: TokenPurpose,
    ttl: SignedDuration,
) -> DomainResult<String> {
    const INSERT: &str =
        "INSERT INTO user_tokens (user_id, purpose, token_hash, expires_at, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5)";
    let token = random_hex(32);
    let now = clock::now();
    conn.execute(
        INSERT,
        (
            user_id,
            purpose,
            sha256_hex(&token),
            Timestamp::from(now + ttl),
            Timestamp::from(now),
        ),
    )?;
    Ok(token)
}

/// Finds a live (unused, unexpired) token of `purpose`; returns its id and user.
fn live_token(
    conn: &Connection,
    token: &str,
    purpose: TokenPurpose,
) -> DomainResult<Option<(i64, i64)>> {
    const FIND: &str = "SELECT id, user_id FROM user_tokens
         WHERE token_hash = ?1 AND purpose = ?2 AND used_at IS NULL AND expires_at > ?3";
    Ok(conn
        .query_row(FIND, (sha256_hex(token), purpose, Timestamp::now()), |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?)
}

/// Spends a token and every other outstanding token of its user and purpose: once one link
/// did its work, older mails in the inbox must not work any more. False when `token_id` was
/// already spent.
fn use_token(conn: &Connection, token_id: i64) -> DomainResult<bool> {
    const USE: &str = "UPDATE user_tokens SET used_at = ?2 WHERE id = ?1 AND used_at IS NULL";
    const SPEND_OTHERS: &str = "UPDATE user_tokens SET used_at = ?2
         WHERE used_at IS NULL AND (user_id, purpose) = (SELECT user_id, purpose FROM user_tokens WHERE id = ?1)";
    let now = Timestamp::now();
    if conn.execute(USE, (token_id, &now))? != 1 {
        return Ok(false);
    }
    conn.execute(SPEND_OTHERS, (token_id, &now))?;
    Ok(true)
}

/// Follows a confirmation link: confirms the account, spends its other confirmation links
/// and signs the user in. An unknown, used or expired link is `NotFound`.
pub fn confirm_email(
    conn: &mut Connection,
    token: &str,
    lifetimes: &SessionLifetimes,
) -> DomainResult<NewSession> {
    write_tx(conn, |tx| {
        let (token_id, user_id) = live_token(tx, token, TokenPurpose::ConfirmEmail)?
            .ok_or(DomainError::NotFound("confirmation link"))?;
        if !use_token(tx, token_id)? {
            return Err(DomainError::NotFound("confirmation link"));
        }
        const CONFIRM: &str = "UPDATE users SET confirmed_at = coalesce(confirmed_at, ?2), updated_at = ?2 WHERE id = ?1";
        tx.execute(CONFIRM, (user_id, Timestamp::now()))?;
        start_session(tx, user_id, lifetimes)
    })
}

/// Sends a new confirmation link if `email` belongs to an unconfirmed account and had fewer
/// than [`MAILS_PER_ADDRESS_PER_HOUR`] this hour; says nothing either way, so the form cannot
/// be used to probe for accounts.
pub fn resend_confirmation(
    conn: &mut Connection,
    urls: &SiteUrls,
    email: &str,
) -> DomainResult<()> {
    let Ok(email) = EmailAddress::parse(email) else {
        return Ok(());
    };
    write_tx(conn, |tx| match find_user_by_email(tx, email.as_str())? {
        Some((user, _)) if !user.confirmed => send_confirmation(tx, urls, &user),
        _ => Ok(()),
    })
}

fn find_user_by_email(conn: &Connection, email: &str) -> DomainResult<Option<(User, String)>> {
    const FIND: &str = "SELECT id, email, confirmed_at IS NOT NULL, password_hash, time_zone, own_time_zone FROM users WHERE email = ?1";
    Ok(conn
        .query_row(FIND, [email], |r| {
            Ok((
                User {
                    id: r.get(0)?,
                    email: r.get(1)?,
                    confirmed: r.get(2)?,
                    time_zone: r.get(4)?,
                    own_time_zone: r.get(5)?,
                },
                r.get(3)?,
            ))
        })
        .optional()?)
}

/// What a sign-in attempt leads to.
#[derive(Debug)]
pub enum SignIn {
    SignedIn(NewSession),
    /// Right password, but the e-mail address is not confirmed yet.
    Unconfirmed,
}

/// Checks credentials. The attempt counts against `client` (its network address, at most
/// [`SIGN_IN_CLIENT_LIMIT`] per window) and against the e-mail address typed (at most
/// [`SIGN_IN_ACCOUNT_LIMIT`], cleared by the right password); past either it answers
/// `RateLimited`. Known and unknown addresses cost one password check each, so neither the
/// answer nor its time tells whether an account exists.
pub fn sign_in(
    conn: &mut Connection,
    client: &str,
    email: &str,
    password: &str,
    lifetimes: &SessionLifetimes,
) -> DomainResult<SignIn> {
    rate_limit::hit(
        conn,
        &Bucket::SignIn { client },
        SIGN_IN_WINDOW_SECS,
        SIGN_IN_CLIENT_LIMIT,
    )?;
    let typed = email.trim().to_lowercase();
    let account_bucket = Bucket::SignInAccount { email: &typed };
    rate_limit::hit(
        conn,
        &account_bucket,
        SIGN_IN_WINDOW_SECS,
        SIGN_IN_ACCOUNT_LIMIT,
    )?;
    let invalid = || DomainError::invalid("base", "Invalid e-mail address or password");
    let found = match EmailAddress::parse(email) {
        Ok(email) => find_user_by_email(conn, email.as_str())?,
        Err(_) => None,
    };
    let Some((user, stored_hash)) = found else {
        let _ = password_matches(password, &DUMMY_HASH);
        return Err(invalid());
    };
    if !password_matches(password, &stored_hash) {
        return Err(invalid());
    }
    rate_limit::clear(conn, &account_bucket)?;
    if !user.confirmed {
        return Ok(SignIn::Unconfirmed);
    }
    Ok(SignIn::SignedIn(start_session(conn, user.id, lifetimes)?))
}

/// Starts a session, deleting the sessions (anyone's) that have run out meanwhile.
fn start_session(
    conn: &Connection,
    user_id: i64,
    lifetimes: &SessionLifetimes,
) -> DomainResult<NewSession> {
    const PRUNE: &str = "DELETE FROM sessions WHERE last_seen_at <= ?1 OR created_at <= ?2";
    const INSERT: &str = "INSERT INTO sessions (token_hash, user_id, created_at, last_seen_at) VALUES (?1, ?2, ?3, ?3)";
    let (idle_cutoff, absolute_cutoff) = lifetimes.cutoffs();
    conn.execute(PRUNE, (&idle_cutoff, &absolute_cutoff))?;
    let token = random_hex(32);
    conn.execute(INSERT, (sha256_hex(&token), user_id, Timestamp::now()))?;
    Ok(NewSession { token, user_id })
}

/// The confirmed user a session cookie belongs to, if the session is live: used within the
/// idle lifetime and younger than the absolute one. Marks it used (at most once a minute).
pub fn session_user(
    conn: &Connection,
    token: &str,
    lifetimes: &SessionLifetimes,
) -> DomainResult<Option<User>> {
    const FIND: &str =
        "SELECT s.id, s.last_seen_at, u.id, u.email, u.confirmed_at IS NOT NULL, u.time_zone, u.own_time_zone
         FROM sessions s JOIN users u ON u.id = s.user_id
         WHERE s.token_hash = ?1 AND s.last_seen_at > ?2 AND s.created_at > ?3";
    const TOUCH: &str = "UPDATE sessions SET last_seen_at = ?2 WHERE id = ?1";
    let (idle_cutoff, absolute_cutoff) = lifetimes.cutoffs();
    let found = conn
        .query_row(
            FIND,
            (sha256_hex(token), &idle_cutoff, &absolute_cutoff),
            |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, Timestamp>(1)?,
                    User {
                        id: r.get(2)?,
                        email: r.get(3)?,
                        confirmed: r.get(4)?,
                        time_zone: r.get(5)?,
                        own_time_zone: r.get(6)?,
                    },
                ))
            },
        )
        .optional()?;
    let Some((session_id, last_seen_at, user)) = found else {
        return Ok(None);
    };
    let now = clock::now();
    if last_seen_at < Timestamp::from(now - TOUCH_EVERY) {
        // Best effort: a page is a read and must work on a full disk; a missed touch costs the
        // session at most a minute of its idle time.
        let _ = conn.execute(TOUCH, (session_id, Timestamp::from(now)));
    }
    Ok(Some(user))
}

pub fn sign_out(conn: &Connection, token: &str) -> DomainResult<()> {
    conn.execute(
        "DELETE FROM sessions WHERE token_hash = ?1",
        [sha256_hex(token)],
    )?;
    Ok(())
}

/// One live session of a user, for the account page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    pub created_at: Timestamp,
    pub last_seen_at: Timestamp,
    /// The session of the request asking.
    pub current: bool,
}

/// The user's live sessions, newest first.
pub fn sessions_of(
    conn: &Connection,
    user_id: i64,
    current_token: &str,
    lifetimes: &SessionLifetimes,
) -> DomainResult<Vec<SessionInfo>> {
    const LIST: &str = "SELECT created_at, last_seen_at, token_hash = ?2 FROM sessions
         WHERE user_id = ?1 AND last_seen_at > ?3 AND created_at > ?4
         ORDER BY created_at DESC, id DESC";
    let (idle_cutoff, absolute_cutoff) = lifetimes.cutoffs();
    let mut stmt = conn.prepare(LIST)?;
    let rows = stmt.query_map(
        (
            user_id,
            sha256_hex(current_token),
            &idle_cutoff,
            &absolute_cutoff,
        ),
        |r| {
            Ok(SessionInfo {
                created_at: r.get(0)?,
                last_seen_at: r.get(1)?,
                current: r.get(2)?,
            })
        },
    )?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Ends every session of the user except `current_token`'s (a lost phone, a shared
/// computer); returns how many ended.
pub fn sign_out_others(
    conn: &Connection,
    user_id: i64,
    current_token: &str,
) -> DomainResult<usize> {
    const END: &str = "DELETE FROM sessions WHERE user_id = ?1 AND token_hash <> ?2";
    Ok(conn.execute(END, (user_id, sha256_hex(current_token)))?)
}

/// Mails a reset link when `email` has an account and had fewer than
/// [`MAILS_PER_ADDRESS_PER_HOUR`] reset mails this hour; says nothing either way.
pub fn request_password_reset(
    conn: &mut Connection,
    urls: &SiteUrls,
    email: &str,
) -> DomainResult<()> {
    let Ok(email) = EmailAddress::parse(email) else {
        return Ok(());
    };
    write_tx(conn, |tx| {
        if let Some((user, _)) = find_user_by_email(tx, email.as_str())?
            && mail_allowed(tx, TokenPurpose::ResetPassword, &user.email)?
        {
            let token = issue_token(tx, user.id, TokenPurpose::ResetPassword, RESET_TTL)?;
            let link = urls.service(&format!("/passwords/{token}/edit"));
            queue_account_mail(
                tx,
                &AccountMail {
                    to: user.email.clone(),
                    link,
                    kind: AccountMailKind::PasswordReset,
                },
            )?;
        }
        Ok(())
    })
}

/// Whether a reset link still works (to show its form or send the user back).
pub fn reset_link_is_live(conn: &Connection, token: &str) -> DomainResult<bool> {
    Ok(live_token(conn, token, TokenPurpose::ResetPassword)?.is_some())
}

/// Sets a new password through a reset link, spends the account's other reset links, ends
/// every session of the account and lifts a sign-in lock on its address (the mailbox is
/// proven, so the owner need not wait out someone else's guessing).
pub fn reset_password(
    conn: &mut Connection,
    token: &str,
    password: &str,
    confirmation: &str,
) -> DomainResult<()> {
    let mut errors = FieldErrors::new();
    check_new_password(&mut errors, password, confirmation);
    errors.into_result()?;
    let password_hash = hash_password(password);
    write_tx(conn, |tx| {
        let (token_id, user_id) = live_token(tx, token, TokenPurpose::ResetPassword)?
            .ok_or(DomainError::NotFound("password reset link"))?;
        use_token(tx, token_id)?;
        let email: String =
            tx.query_row("SELECT email FROM users WHERE id = ?1", [user_id], |r| {
                r.get(0)
            })?;
        rate_limit::clear(tx, &Bucket::SignInAccount { email: &email })?;
        // Following the mailed link proves the address too.
        const UPDATE: &str = "UPDATE users SET password_hash = ?2, confirmed_at = coalesce(confirmed_at, ?3), updated_at = ?3 WHERE id = ?1";
        tx.execute(UPDATE, (user_id, &password_hash, Timestamp::now()))?;
        tx.execute("DELETE FROM sessions WHERE user_id = ?1", [user_id])?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Connection {
        crate::domain::testing::db()
    }

    /// The clock stopped in the middle of every throttle's window, so a test's counts never
    /// cross into the next one (they did, now and then, on the running clock).
    fn mid_window() -> clock::testing::FixedClock {
        clock::testing::fixed(clock::testing::at("2026-11-22T12:07:30Z"))
    }

    fn life() -> SessionLifetimes {
        SessionLifetimes::default()
    }

    fn urls() -> SiteUrls {
        SiteUrls::new("http://localhost:8080", "localhost:8080")
    }

    fn form(email: &str, password: &str, confirmation: &str) -> SignUp {
        SignUp {
            email: email.into(),
            password: password.into(),
            password_confirmation: confirmation.into(),
            time_zone: String::new(),
        }
    }

    fn mailed_token(conn: &Connection) -> String {
        let payload: String = conn
            .query_row(
                "SELECT payload FROM jobs ORDER BY id DESC LIMIT 1",
                [],
                |r| r.get(0),
            )
            .unwrap();
        let link = serde_json::from_str::<serde_json::Value>(&payload).unwrap()["link"]
            .as_str()
            .unwrap()
            .to_string();
        link.rsplit('/')
            .find(|s| s.len() == 64)
            .unwrap()
            .to_string()
    }

    #[test]
    fn sign_up_confirm_and_sign_in() {
        let mut conn = db();
        let user = sign_up(
            &mut conn,
            &urls(),
            "1.2.3.4",
            &form(" Ann@Example.com ", "correct horse", "correct horse"),
        )
        .unwrap();
        assert_eq!(user.email, "ann@example.com");
        assert!(matches!(
            sign_in(
                &mut conn,
                "1.2.3.4",
                "ann@example.com",
                "correct horse",
                &life()
            )
            .unwrap(),
            SignIn::Unconfirmed
        ));

        let token = mailed_token(&conn);
        let session = confirm_email(&mut conn, &token, &life()).unwrap();
        assert_eq!(
            session_user(&conn, &session.token, &life())
                .unwrap()
                .unwrap()
                .id,
            user.id
        );
        assert!(
            matches!(
                confirm_email(&mut conn, &token, &life()),
                Err(DomainError::NotFound(_))
            ),
            "links work once"
        );

        assert!(matches!(
            sign_in(&mut conn, "1.2.3.4", "ann@example.com", "wrong", &life()).unwrap_err(),
            DomainError::Invalid(..)
        ));
        let SignIn::SignedIn(s) = sign_in(
            &mut conn,
            "1.2.3.4",
            "ANN@example.com",
            "correct horse",
            &life(),
        )
        .unwrap() else {
            panic!("confirmed user signs in")
        };
        sign_out(&conn, &s.token).unwrap();
        assert!(session_user(&conn, &s.token, &life()).unwrap().is_none());
    }

    #[test]
    fn sign_up_refuses_bad_input_and_changes_nothing() {
        let mut conn = db();
        sign_up(
            &mut conn,
            &urls(),
            "1.2.3.4",
            &form("a@example.com", "12345678", "12345678"),
        )
        .unwrap();
        for bad in [
            form("not-an-email", "12345678", "12345678"),
            form("a@example.com", "12345678", "12345678"),
            form("b@example.com", "short", "short"),
            form("b@example.com", "12345678", "87654321"),
        ] {
            assert!(
                matches!(
                    sign_up(&mut conn, &urls(), "1.2.3.4", &bad),
                    Err(DomainError::Invalid(..))
                ),
                "{bad:?}"
            );
        }
        let users: i64 = conn
            .query_row("SELECT count(*) FROM users", [], |r| r.get(0))
            .unwrap();
        assert_eq!(users, 1);
    }

    #[test]
    fn password_reset_replaces_password_and_ends_sessions() {
        let mut conn = db();
        sign_up(
            &mut conn,
            &urls(),
            "1.2.3.4",
            &form("r@example.com", "old password", "old password"),
        )
        .unwrap();
        let token = mailed_token(&conn);
        let session = confirm_email(&mut conn, &token, &life()).unwrap();
        request_password_reset(&mut conn, &urls(), "r@example.com").unwrap();
        let token = mailed_token(&conn);
        assert!(reset_link_is_live(&conn, &token).unwrap());
        reset_password(&mut conn, &token, "new password", "new password").unwrap();
        assert!(
            session_user(&conn, &session.token, &life())
                .unwrap()
                .is_none()
        );
        assert!(!reset_link_is_live(&conn, &token).unwrap());
        assert!(sign_in(&mut conn, "c", "r@example.com", "old password", &life()).is_err());
        assert!(matches!(
            sign_in(&mut conn, "c", "r@example.com", "new password", &life()).unwrap(),
            SignIn::SignedIn(_)
        ));
    }

    fn set(conn: &Connection, sql: &str) {
        conn.execute(sql, []).unwrap();
    }

    fn confirmed(conn: &mut Connection, email: &str) -> NewSession {
        sign_up(
            conn,
            &urls(),
            "1.2.3.4",
            &form(email, "correct horse", "correct horse"),
        )
        .unwrap();
        let token = mailed_token(conn);
        confirm_email(conn, &token, &life()).unwrap()
    }

    fn mails_to(conn: &Connection, email: &str) -> i64 {
        conn.query_row(
            "SELECT count(*) FROM jobs WHERE json_extract(payload, '$.to') = ?1",
            [email],
            |r| r.get(0),
        )
        .unwrap()
    }

    #[test]
    fn wrong_passwords_lock_only_their_address() {
        let _clock = mid_window();
        let mut conn = db();
        confirmed(&mut conn, "a@example.com");
        confirmed(&mut conn, "b@example.com");
        for _ in 0..SIGN_IN_ACCOUNT_LIMIT {
            assert!(matches!(
                sign_in(&mut conn, "9.9.9.9", "a@example.com", "nope", &life()),
                Err(DomainError::Invalid(..))
            ));
        }
        // Locked, even with the right password and from another client address.
        for client in ["9.9.9.9", "8.8.8.8"] {
            assert!(matches!(
                sign_in(
                    &mut conn,
                    client,
                    " A@example.com",
                    "correct horse",
                    &life()
                ),
                Err(DomainError::RateLimited(_))
            ));
        }
        assert!(matches!(
            sign_in(
                &mut conn,
                "9.9.9.9",
                "b@example.com",
                "correct horse",
                &life()
            )
            .unwrap(),
            SignIn::SignedIn(_)
        ));
        // An address without an account locks the same way (no hint that it has none).
        for _ in 0..SIGN_IN_ACCOUNT_LIMIT {
            assert!(sign_in(&mut conn, "7.7.7.7", "nobody@example.com", "x", &life()).is_err());
        }
        assert!(matches!(
            sign_in(&mut conn, "7.7.7.7", "nobody@example.com", "x", &life()),
            Err(DomainError::RateLimited(_))
        ));
    }

    #[test]
    fn a_password_reset_lifts_the_lock_of_its_address() {
        let _clock = mid_window();
        let mut conn = db();
        confirmed(&mut conn, "l@example.com");
        for _ in 0..=SIGN_IN_ACCOUNT_LIMIT {
            let _ = sign_in(&mut conn, "1.1.1.1", "l@example.com", "nope", &life());
        }
        assert!(matches!(
            sign_in(
                &mut conn,
                "1.1.1.1",
                "l@example.com",
                "correct horse",
                &life()
            ),
            Err(DomainError::RateLimited(_))
        ));
        request_password_reset(&mut conn, &urls(), "l@example.com").unwrap();
        let token = mailed_token(&conn);
        reset_password(&mut conn, &token, "new password", "new password").unwrap();
        assert!(matches!(
            sign_in(
                &mut conn,
                "1.1.1.1",
                "l@example.com",
                "new password",
                &life()
            )
            .unwrap(),
            SignIn::SignedIn(_)
        ));
    }

    #[test]
    fn the_right_password_clears_the_failures_of_its_address() {
        let _clock = mid_window();
        let mut conn = db();
        confirmed(&mut conn, "c@example.com");
        for _ in 0..3 {
            for _ in 0..SIGN_IN_ACCOUNT_LIMIT - 1 {
                assert!(sign_in(&mut conn, "1.1.1.1", "c@example.com", "nope", &life()).is_err());
            }
            assert!(matches!(
                sign_in(
                    &mut conn,
                    "1.1.1.1",
                    "c@example.com",
                    "correct horse",
                    &life()
                )
                .unwrap(),
                SignIn::SignedIn(_)
            ));
        }
    }

    #[test]
    fn sign_in_is_throttled_per_client_across_addresses() {
        let _clock = mid_window();
        let mut conn = db();
        for n in 0..SIGN_IN_CLIENT_LIMIT {
            assert!(matches!(
                sign_in(
                    &mut conn,
                    "9.9.9.9",
                    &format!("x{n}@example.com"),
                    "nope",
                    &life()
                ),
                Err(DomainError::Invalid(..))
            ));
        }
        assert!(matches!(
            sign_in(&mut conn, "9.9.9.9", "y@example.com", "nope", &life()),
            Err(DomainError::RateLimited(_))
        ));
        assert!(matches!(
            sign_in(&mut conn, "8.8.8.8", "y@example.com", "nope", &life()),
            Err(DomainError::Invalid(..))
        ));
    }

    #[test]
    fn sign_ups_are_capped_per_client() {
        let _clock = mid_window();
        let mut conn = db();
        for n in 0..SIGN_UPS_PER_CLIENT_PER_HOUR {
            let email = format!("s{n}@example.com");
            sign_up(
                &mut conn,
                &urls(),
                "5.5.5.5",
                &form(&email, "12345678", "12345678"),
            )
            .unwrap();
        }
        let more = form("more@example.com", "12345678", "12345678");
        assert!(matches!(
            sign_up(&mut conn, &urls(), "5.5.5.5", &more),
            Err(DomainError::RateLimited(_))
        ));
        sign_up(&mut conn, &urls(), "6.6.6.6", &more).unwrap();
    }

    #[test]
    fn account_mails_per_address_are_capped_quietly() {
        let _clock = mid_window();
        let mut conn = db();
        sign_up(
            &mut conn,
            &urls(),
            "1.2.3.4",
            &form("u@example.com", "12345678", "12345678"),
        )
        .unwrap();
        for _ in 0..5 {
            resend_confirmation(&mut conn, &urls(), "u@example.com").unwrap();
            request_password_reset(&mut conn, &urls(), "u@example.com").unwrap();
        }
        let kinds: Vec<(String, i64)> = conn
            .prepare("SELECT purpose, count(*) FROM user_tokens GROUP BY purpose ORDER BY purpose")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let cap = MAILS_PER_ADDRESS_PER_HOUR as i64;
        assert_eq!(
            kinds,
            [
                ("confirm_email".to_string(), cap),
                ("reset_password".to_string(), cap)
            ]
        );
        assert_eq!(mails_to(&conn, "u@example.com"), 2 * cap);
    }

    #[test]
    fn using_a_link_spends_the_other_links_of_its_kind() {
        let mut conn = db();
        sign_up(
            &mut conn,
            &urls(),
            "1.2.3.4",
            &form("t@example.com", "12345678", "12345678"),
        )
        .unwrap();
        let first_confirm = mailed_token(&conn);
        resend_confirmation(&mut conn, &urls(), "t@example.com").unwrap();
        let second_confirm = mailed_token(&conn);
        request_password_reset(&mut conn, &urls(), "t@example.com").unwrap();
        let first_reset = mailed_token(&conn);
        request_password_reset(&mut conn, &urls(), "t@example.com").unwrap();
        let second_reset = mailed_token(&conn);

        confirm_email(&mut conn, &second_confirm, &life()).unwrap();
        assert!(matches!(
            confirm_email(&mut conn, &first_confirm, &life()),
            Err(DomainError::NotFound(_))
        ));
        assert!(
            reset_link_is_live(&conn, &first_reset).unwrap(),
            "other kinds stay"
        );
        reset_password(&mut conn, &first_reset, "new password", "new password").unwrap();
        assert!(!reset_link_is_live(&conn, &second_reset).unwrap());
    }

    #[test]
    fn sessions_end_when_idle_or_old_and_are_touched_once_a_minute() {
        let mut conn = db();
        let session = confirmed(&mut conn, "s@example.com");
        let hash = sha256_hex(&session.token);
        let last_seen = |conn: &Connection| -> Timestamp {
            conn.query_row(
                "SELECT last_seen_at FROM sessions WHERE token_hash = ?1",
                [&hash],
                |r| r.get(0),
            )
            .unwrap()
        };
        let ago = |d: SignedDuration| Timestamp::from(clock::now() - d);

        // Used within the minute: no write.
        let fresh = last_seen(&conn);
        session_user(&conn, &session.token, &life())
            .unwrap()
            .unwrap();
        assert_eq!(last_seen(&conn), fresh);
        // Last used ten minutes ago: marked used now.
        let before = ago(SignedDuration::from_mins(10));
        set(
            &conn,
            &format!("UPDATE sessions SET last_seen_at = '{before}'"),
        );
        session_user(&conn, &session.token, &life())
            .unwrap()
            .unwrap();
        assert!(last_seen(&conn) > ago(SignedDuration::from_secs(30)));

        // Idle for longer than the idle lifetime: ended.
        let idle = ago(life().idle + SignedDuration::from_mins(1));
        set(
            &conn,
            &format!("UPDATE sessions SET last_seen_at = '{idle}'"),
        );
        assert!(
            session_user(&conn, &session.token, &life())
                .unwrap()
                .is_none()
        );
        // Busy, but signed in longer ago than the absolute lifetime: ended.
        let old = ago(life().absolute + SignedDuration::from_mins(1));
        set(
            &conn,
            &format!(
                "UPDATE sessions SET last_seen_at = '{}', created_at = '{old}'",
                Timestamp::now()
            ),
        );
        assert!(
            session_user(&conn, &session.token, &life())
                .unwrap()
                .is_none()
        );
        // Shorter lifetimes from the flags apply.
        set(
            &conn,
            &format!(
                "UPDATE sessions SET created_at = '{}', last_seen_at = '{before}'",
                Timestamp::now()
            ),
        );
        let short = SessionLifetimes {
            idle: SignedDuration::from_mins(5),
            absolute: clock::days(1),
        };
        assert!(
            session_user(&conn, &session.token, &short)
                .unwrap()
                .is_none()
        );
        // The next sign-in deletes the sessions that ran out.
        sign_in(
            &mut conn,
            "1.2.3.4",
            "s@example.com",
            "correct horse",
            &short,
        )
        .unwrap();
        assert!(
            conn.query_row("SELECT count(*) = 1 FROM sessions", [], |r| r
                .get::<_, bool>(0))
                .unwrap()
        );
    }

    #[test]
    fn signing_out_the_other_sessions_keeps_this_one() {
        let mut conn = db();
        let first = confirmed(&mut conn, "o@example.com");
        let mut others = Vec::new();
        for _ in 0..2 {
            let SignIn::SignedIn(s) = sign_in(
                &mut conn,
                "1.2.3.4",
                "o@example.com",
                "correct horse",
                &life(),
            )
            .unwrap() else {
                panic!("signs in")
            };
            others.push(s);
        }
        let someone_else = confirmed(&mut conn, "e@example.com");
        let listed = sessions_of(&conn, first.user_id, &first.token, &life()).unwrap();
        assert_eq!(listed.len(), 3);
        assert_eq!(listed.iter().filter(|s| s.current).count(), 1);
        assert_eq!(
            sign_out_others(&conn, first.user_id, &first.token).unwrap(),
            2
        );
        assert!(
            session_user(&conn, &first.token, &life())
                .unwrap()
                .is_some()
        );
        for s in &others {
            assert!(session_user(&conn, &s.token, &life()).unwrap().is_none());
        }
        assert!(
            session_user(&conn, &someone_else.token, &life())
                .unwrap()
                .is_some()
        );
    }
}
