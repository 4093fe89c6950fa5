//! Accounts: sign-up with e-mail confirmation, sign-in with throttling, sessions, password
//! reset. Passwords are hashed with argon2id; every token handed out is stored as a hash.

use argon2::Argon2;
use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use rusqlite::{Connection, OptionalExtension};
use time::Duration;

use super::email::EmailAddress;
use super::secrets::{random_hex, sha256_hex};
use super::urls::SiteUrls;
use super::{DomainError, DomainResult, FieldErrors, rate_limit};
use crate::clock;
use crate::jobs::send_mail;
use crate::mail::account as account_mail;
use crate::store::write_tx;

/// How long an e-mail confirmation link works.
pub const CONFIRMATION_TTL: Duration = Duration::hours(24);
/// How long a password-reset link works.
pub const RESET_TTL: Duration = Duration::hours(1);
/// Sign-in attempts allowed per client address per window.
pub const SIGN_IN_LIMIT: u32 = 10;
pub const SIGN_IN_WINDOW_SECS: i64 = 180;
const PASSWORD_MIN: usize = 8;
const PASSWORD_MAX: usize = 1024;

/// A signed-in or signing-up person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: i64,
    pub email: String,
    pub confirmed: bool,
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
}

fn hash_password(password: &str) -> String {
    Argon2::default()
        .hash_password(password.as_bytes())
        .expect("argon2 hashes any password with default parameters")
        .to_string()
}

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

/// Creates an unconfirmed account and queues its confirmation mail.
pub fn sign_up(conn: &mut Connection, urls: &SiteUrls, form: &SignUp) -> DomainResult<User> {
    let mut errors = FieldErrors::new();
    let email = match EmailAddress::parse(&form.email) {
        Ok(email) => Some(email),
        Err(message) => {
            errors.add("email_address", message);
            None
        }
    };
    check_new_password(&mut errors, &form.password, &form.password_confirmation);
    if let Some(email) = &email {
        if find_user_by_email(conn, email.as_str())?.is_some() {
            errors.add("email_address", "has already been taken");
        }
    }
    errors.into_result()?;
    let email = email.expect("validated above");
    let password_hash = hash_password(&form.password);
    write_tx(conn, |tx| {
        const INSERT: &str = "INSERT INTO users (email, password_hash, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)
             ON CONFLICT (email) DO NOTHING";
        let now = clock::now_string();
        if tx.execute(INSERT, (email.as_str(), &password_hash, &now))? == 0 {
            return Err(DomainError::invalid(
                "email_address",
                "has already been taken",
            ));
        }
        let user = User {
            id: tx.last_insert_rowid(),
            email: email.to_string(),
            confirmed: false,
        };
        send_confirmation(tx, urls, &user)?;
        Ok(user)
    })
}

fn send_confirmation(conn: &Connection, urls: &SiteUrls, user: &User) -> DomainResult<()> {
    let token = issue_token(conn, user.id, "confirm_email", CONFIRMATION_TTL)?;
    let link = urls.service(&format!("/email_confirmations/{token}"));
    send_mail::enqueue(conn, &user.email, account_mail::confirmation(&link))?;
    Ok(())
}

fn issue_token(
    conn: &Connection,
    user_id: i64,
    purpose: &str,
    ttl: Duration,
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
            clock::format(now + ttl),
            clock::format(now),
        ),
    )?;
    Ok(token)
}

/// Finds a live (unused, unexpired) token of `purpose`; returns its id and user.
fn live_token(conn: &Connection, token: &str, purpose: &str) -> DomainResult<Option<(i64, i64)>> {
    const FIND: &str = "SELECT id, user_id FROM user_tokens
         WHERE token_hash = ?1 AND purpose = ?2 AND used_at IS NULL AND expires_at > ?3";
    Ok(conn
        .query_row(
            FIND,
            (sha256_hex(token), purpose, clock::now_string()),
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?)
}

fn use_token(conn: &Connection, token_id: i64) -> DomainResult<bool> {
    const USE: &str = "UPDATE user_tokens SET used_at = ?2 WHERE id = ?1 AND used_at IS NULL";
    Ok(conn.execute(USE, (token_id, clock::now_string()))? == 1)
}

/// Follows a confirmation link: confirms the account and signs the user in. An unknown,
/// used or expired link is `NotFound`.
pub fn confirm_email(conn: &mut Connection, token: &str) -> DomainResult<NewSession> {
    write_tx(conn, |tx| {
        let (token_id, user_id) = live_token(tx, token, "confirm_email")?
            .ok_or(DomainError::NotFound("confirmation link"))?;
        if !use_token(tx, token_id)? {
            return Err(DomainError::NotFound("confirmation link"));
        }
        const CONFIRM: &str = "UPDATE users SET confirmed_at = coalesce(confirmed_at, ?2), updated_at = ?2 WHERE id = ?1";
        tx.execute(CONFIRM, (user_id, clock::now_string()))?;
        start_session(tx, user_id)
    })
}

/// Sends a new confirmation link if `email` belongs to an unconfirmed account; says nothing
/// either way, so the form cannot be used to probe for accounts.
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
    const FIND: &str =
        "SELECT id, email, confirmed_at IS NOT NULL, password_hash FROM users WHERE email = ?1";
    Ok(conn
        .query_row(FIND, [email], |r| {
            Ok((
                User {
                    id: r.get(0)?,
                    email: r.get(1)?,
                    confirmed: r.get(2)?,
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

/// Checks credentials, counting the attempt against `client` (its network address): past
/// [`SIGN_IN_LIMIT`] attempts in [`SIGN_IN_WINDOW_SECS`] it answers `RateLimited`.
pub fn sign_in(
    conn: &mut Connection,
    client: &str,
    email: &str,
    password: &str,
) -> DomainResult<SignIn> {
    rate_limit::hit(
        conn,
        &format!("sign_in:{client}"),
        SIGN_IN_WINDOW_SECS,
        SIGN_IN_LIMIT,
    )?;
    let invalid = || DomainError::invalid("base", "Invalid e-mail address or password");
    let found = match EmailAddress::parse(email) {
        Ok(email) => find_user_by_email(conn, email.as_str())?,
        Err(_) => None,
    };
    let Some((user, stored_hash)) = found else {
        // Spend the same time as a real check, so timing does not reveal which addresses exist.
        let _ = password_matches(password, &hash_password("timing-equaliser"));
        return Err(invalid());
    };
    if !password_matches(password, &stored_hash) {
        return Err(invalid());
    }
    if !user.confirmed {
        return Ok(SignIn::Unconfirmed);
    }
    Ok(SignIn::SignedIn(start_session(conn, user.id)?))
}

fn start_session(conn: &Connection, user_id: i64) -> DomainResult<NewSession> {
    const INSERT: &str = "INSERT INTO sessions (token_hash, user_id, created_at, last_seen_at) VALUES (?1, ?2, ?3, ?3)";
    let token = random_hex(32);
    conn.execute(INSERT, (sha256_hex(&token), user_id, clock::now_string()))?;
    Ok(NewSession { token, user_id })
}

/// The confirmed user a session cookie belongs to, if the session is live.
pub fn session_user(conn: &Connection, token: &str) -> DomainResult<Option<User>> {
    const FIND: &str = "SELECT u.id, u.email, u.confirmed_at IS NOT NULL FROM sessions s
         JOIN users u ON u.id = s.user_id WHERE s.token_hash = ?1";
    Ok(conn
        .query_row(FIND, [sha256_hex(token)], |r| {
            Ok(User {
                id: r.get(0)?,
                email: r.get(1)?,
                confirmed: r.get(2)?,
            })
        })
        .optional()?)
}

pub fn sign_out(conn: &Connection, token: &str) -> DomainResult<()> {
    conn.execute(
        "DELETE FROM sessions WHERE token_hash = ?1",
        [sha256_hex(token)],
    )?;
    Ok(())
}

/// Mails a reset link when `email` has an account; says nothing either way.
pub fn request_password_reset(
    conn: &mut Connection,
    urls: &SiteUrls,
    email: &str,
) -> DomainResult<()> {
    let Ok(email) = EmailAddress::parse(email) else {
        return Ok(());
    };
    write_tx(conn, |tx| {
        if let Some((user, _)) = find_user_by_email(tx, email.as_str())? {
            let token = issue_token(tx, user.id, "reset_password", RESET_TTL)?;
            let link = urls.service(&format!("/passwords/{token}/edit"));
            send_mail::enqueue(tx, &user.email, account_mail::password_reset(&link))?;
        }
        Ok(())
    })
}

/// Whether a reset link still works (to show its form or send the user back).
pub fn reset_link_is_live(conn: &Connection, token: &str) -> DomainResult<bool> {
    Ok(live_token(conn, token, "reset_password")?.is_some())
}

/// Sets a new password through a reset link and ends every session of the account.
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
        let (token_id, user_id) = live_token(tx, token, "reset_password")?
            .ok_or(DomainError::NotFound("password reset link"))?;
        use_token(tx, token_id)?;
        // Following the mailed link proves the address too.
        const UPDATE: &str = "UPDATE users SET password_hash = ?2, confirmed_at = coalesce(confirmed_at, ?3), updated_at = ?3 WHERE id = ?1";
        tx.execute(UPDATE, (user_id, &password_hash, clock::now_string()))?;
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

    fn urls() -> SiteUrls {
        SiteUrls::new("http://localhost:8080", "localhost:8080")
    }

    fn form(email: &str, password: &str, confirmation: &str) -> SignUp {
        SignUp {
            email: email.into(),
            password: password.into(),
            password_confirmation: confirmation.into(),
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
            &form(" Ann@Example.com ", "correct horse", "correct horse"),
        )
        .unwrap();
        assert_eq!(user.email, "ann@example.com");
        assert!(matches!(
            sign_in(&mut conn, "1.2.3.4", "ann@example.com", "correct horse").unwrap(),
            SignIn::Unconfirmed
        ));

        let token = mailed_token(&conn);
        let session = confirm_email(&mut conn, &token).unwrap();
        assert_eq!(
            session_user(&conn, &session.token).unwrap().unwrap().id,
            user.id
        );
        assert!(
            matches!(
                confirm_email(&mut conn, &token),
                Err(DomainError::NotFound(_))
            ),
            "links work once"
        );

        assert!(matches!(
            sign_in(&mut conn, "1.2.3.4", "ann@example.com", "wrong").unwrap_err(),
            DomainError::Invalid(..)
        ));
        let SignIn::SignedIn(s) =
            sign_in(&mut conn, "1.2.3.4", "ANN@example.com", "correct horse").unwrap()
        else {
            panic!("confirmed user signs in")
        };
        sign_out(&conn, &s.token).unwrap();
        assert!(session_user(&conn, &s.token).unwrap().is_none());
    }

    #[test]
    fn sign_up_refuses_bad_input_and_changes_nothing() {
        let mut conn = db();
        sign_up(
            &mut conn,
            &urls(),
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
                    sign_up(&mut conn, &urls(), &bad),
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
            &form("r@example.com", "old password", "old password"),
        )
        .unwrap();
        let token = mailed_token(&conn);
        let session = confirm_email(&mut conn, &token).unwrap();
        request_password_reset(&mut conn, &urls(), "r@example.com").unwrap();
        let token = mailed_token(&conn);
        assert!(reset_link_is_live(&conn, &token).unwrap());
        reset_password(&mut conn, &token, "new password", "new password").unwrap();
        assert!(session_user(&conn, &session.token).unwrap().is_none());
        assert!(!reset_link_is_live(&conn, &token).unwrap());
        assert!(sign_in(&mut conn, "c", "r@example.com", "old password").is_err());
        assert!(matches!(
            sign_in(&mut conn, "c", "r@example.com", "new password").unwrap(),
            SignIn::SignedIn(_)
        ));
    }

    #[test]
    fn sign_in_is_throttled_per_client() {
        let mut conn = db();
        for _ in 0..SIGN_IN_LIMIT {
            assert!(matches!(
                sign_in(&mut conn, "9.9.9.9", "x@example.com", "nope"),
                Err(DomainError::Invalid(..))
            ));
        }
        assert!(matches!(
            sign_in(&mut conn, "9.9.9.9", "x@example.com", "nope"),
            Err(DomainError::RateLimited(_))
        ));
        assert!(matches!(
            sign_in(&mut conn, "8.8.8.8", "x@example.com", "nope"),
            Err(DomainError::Invalid(..))
        ));
    }
}
