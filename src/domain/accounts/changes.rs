//! What an owner changes about their own account: the password (other sessions then end),
//! the e-mail address (it changes once the link mailed to the new address is followed, and
//! the old address is told), and deleting the account with its newsletters. Each asks for the
//! current password, and a wrong one counts against the account like a failed sign-in, so a
//! borrowed session cannot be used to guess it.

use jiff::SignedDuration;
use rusqlite::{Connection, OptionalExtension};

use crate::clock::Timestamp;
use crate::domain::accounts::rate_limit::{self, Bucket};
use crate::domain::accounts::tokens::TokenPurpose;
use crate::domain::accounts::{
    SIGN_IN_ACCOUNT_LIMIT, SIGN_IN_WINDOW_SECS, check_new_password, hash_password, issue_token,
    live_token, mail_allowed, password_matches, use_token,
};
use crate::domain::values::email::EmailAddress;
use crate::domain::values::secrets::sha256_hex;
use crate::domain::values::urls::SiteUrls;
use crate::domain::{DomainError, DomainResult, FieldErrors};
use crate::store::jobs::{AccountMail, AccountMailKind, queue_account_mail, queue_account_purge};
use crate::store::write_tx;

/// How long the link that confirms a new e-mail address works.
pub const EMAIL_CHANGE_TTL: SignedDuration = SignedDuration::from_hours(24);

/// The account's address and whether `password` is its password. A wrong one counts against
/// the account as a failed sign-in would (past the limit: `RateLimited`), and is refused as
/// the field `current_password`; the right one clears the count.
fn check_current_password(conn: &Connection, user_id: i64, password: &str) -> DomainResult<String> {
    const FIND: &str = "SELECT email, password_hash FROM users WHERE id = ?1";
    let (email, hash): (String, String) = conn
        .query_row(FIND, [user_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?
        .ok_or(DomainError::NotFound("account"))?;
    let bucket = Bucket::SignInAccount { email: &email };
    rate_limit::hit(conn, &bucket, SIGN_IN_WINDOW_SECS, SIGN_IN_ACCOUNT_LIMIT)?;
    if !password_matches(password, &hash) {
        return Err(DomainError::invalid(
            "current_password",
            "is not the password of this account",
        ));
    }
    rate_limit::clear(conn, &bucket)?;
    Ok(email)
}

/// Sets a new password after checking the current one, and ends every other session of the
/// account (whoever else was signed in must sign in again); returns how many ended.
pub fn change_password(
    conn: &mut Connection,
    user_id: i64,
    current_session: &str,
    current_password: &str,
    password: &str,
    confirmation: &str,
) -> DomainResult<usize> {
    let mut errors = FieldErrors::new();
    check_new_password(&mut errors, password, confirmation);
    errors.into_result()?;
    check_current_password(conn, user_id, current_password)?;
    let password_hash = hash_password(password);
    write_tx(conn, |tx| {
        const UPDATE: &str = "UPDATE users SET password_hash = ?2, updated_at = ?3 WHERE id = ?1";
        const END_OTHERS: &str = "DELETE FROM sessions WHERE user_id = ?1 AND token_hash <> ?2";
        tx.execute(UPDATE, (user_id, &password_hash, Timestamp::now()))?;
        // Reset links mailed before no longer work: the password they would replace is gone.
        tx.execute(
            "UPDATE user_tokens SET used_at = ?2 WHERE user_id = ?1 AND purpose = ?3 AND used_at IS NULL",
            (user_id, Timestamp::now(), TokenPurpose::ResetPassword),
        )?;
        Ok(tx.execute(END_OTHERS, (user_id, sha256_hex(current_session)))?)
    })
}

/// Asks to move the account to `new_email`: after the current password, a link is mailed to
/// the new address (at most [`crate::domain::accounts::MAILS_PER_ADDRESS_PER_HOUR`] an hour;
/// past that nothing more is sent). Nothing changes until it is followed. Returns the new
/// address as it will be stored.
pub fn request_email_change(
    conn: &mut Connection,
    urls: &SiteUrls,
    user_id: i64,
    current_password: &str,
    new_email: &str,
) -> DomainResult<String> {
    let new_email = EmailAddress::parse(new_email)
        .map_err(|message| DomainError::invalid("email", message))?
        .into_string();
    let old_email = check_current_password(conn, user_id, current_password)?;
    if new_email == old_email {
        return Err(DomainError::invalid(
            "email",
            "is already the address of this account",
        ));
    }
    write_tx(conn, |tx| {
        if address_taken(tx, &new_email, user_id)? {
            return Err(DomainError::invalid("email", "has already been taken"));
        }
        if !mail_allowed(tx, TokenPurpose::ChangeEmail, &new_email)? {
            return Ok(new_email.clone());
        }
        let token = issue_token(tx, user_id, TokenPurpose::ChangeEmail, EMAIL_CHANGE_TTL)?;
        tx.execute(
            "UPDATE user_tokens SET new_email = ?2 WHERE token_hash = ?1",
            (sha256_hex(&token), &new_email),
        )?;
        queue_account_mail(
            tx,
            &AccountMail {
                to: new_email.clone(),
                link: urls.service(&format!("/account/email/{token}")),
                kind: AccountMailKind::EmailChange {
                    old_email: old_email.clone(),
                },
            },
        )?;
        Ok(new_email.clone())
    })
}

/// Whether another account has `email`.
fn address_taken(conn: &Connection, email: &str, user_id: i64) -> DomainResult<bool> {
    const FIND: &str = "SELECT 1 FROM users WHERE email = ?1 AND id <> ?2";
    Ok(conn
        .query_row(FIND, (email, user_id), |_| Ok(()))
        .optional()?
        .is_some())
}

/// The address a live change link would move its account to (to show before confirming).
pub fn email_change_target(conn: &Connection, token: &str) -> DomainResult<String> {
    let (token_id, _) = live_token(conn, token, TokenPurpose::ChangeEmail)?
        .ok_or(DomainError::NotFound("e-mail change link"))?;
    Ok(conn.query_row(
        "SELECT new_email FROM user_tokens WHERE id = ?1",
        [token_id],
        |r| r.get(0),
    )?)
}

/// Follows a change link: the account takes the new address (its other change links are
/// spent), and the old address is told (if it was not its owner's doing, the operator can
/// help). Returns the new address.
pub fn confirm_email_change(
    conn: &mut Connection,
    urls: &SiteUrls,
    token: &str,
) -> DomainResult<String> {
    write_tx(conn, |tx| {
        let (token_id, user_id) = live_token(tx, token, TokenPurpose::ChangeEmail)?
            .ok_or(DomainError::NotFound("e-mail change link"))?;
        let new_email: String = tx.query_row(
            "SELECT new_email FROM user_tokens WHERE id = ?1",
            [token_id],
            |r| r.get(0),
        )?;
        if address_taken(tx, &new_email, user_id)? {
            return Err(DomainError::invalid("email", "has already been taken"));
        }
        if !use_token(tx, token_id)? {
            return Err(DomainError::NotFound("e-mail change link"));
        }
        let old_email: String =
            tx.query_row("SELECT email FROM users WHERE id = ?1", [user_id], |r| {
                r.get(0)
            })?;
        const UPDATE: &str = "UPDATE users SET email = ?2, updated_at = ?3 WHERE id = ?1";
        tx.execute(UPDATE, (user_id, &new_email, Timestamp::now()))?;
        queue_account_mail(
            tx,
            &AccountMail {
                to: old_email,
                link: urls.service("/session/new"),
                kind: AccountMailKind::EmailChanged {
                    new_email: new_email.clone(),
                },
            },
        )?;
        Ok(new_email)
    })
}

/// Deletes the account once `confirmation` is its e-mail address and `current_password` its
/// password: at once it can no longer be signed in to (its address is free again, its
/// sessions and API keys are gone) and its newsletters are cancelled, so nothing more is sent;
/// a `purge_account` job then deletes them and everything in them in short batches, the
/// writer never held long. Refused while one of its issues
/// is being sent (pause or wait for it first).
pub fn delete_account(
    conn: &mut Connection,
    user_id: i64,
    confirmation: &str,
    current_password: &str,
) -> DomainResult<()> {
    const EMAIL: &str = "SELECT email FROM users WHERE id = ?1";
    let email: String = conn
        .query_row(EMAIL, [user_id], |r| r.get(0))
        .optional()?
        .ok_or(DomainError::NotFound("account"))?;
    if !confirmation.trim().eq_ignore_ascii_case(&email) {
        return Err(DomainError::invalid(
            "confirmation",
            "must be the e-mail address of this account, as it is shown",
        ));
    }
    check_current_password(conn, user_id, current_password)?;
    write_tx(conn, |tx| {
        const SENDING: &str = "SELECT 1 FROM issues i JOIN newsletters n ON n.id = i.newsletter_id
             WHERE n.owner_id = ?1 AND i.status = 'sending' LIMIT 1";
        if tx
            .query_row(SENDING, [user_id], |_| Ok(()))
            .optional()?
            .is_some()
        {
            return Err(DomainError::invalid(
                "base",
                "An issue of yours is being sent: wait until it is sent, or pause the newsletter, then delete the account",
            ));
        }
        // The address is free for a new account at once; the row itself goes with the purge.
        const RETIRE: &str =
            "UPDATE users SET email = ?2, password_hash = '', updated_at = ?3 WHERE id = ?1";
        tx.execute(
            RETIRE,
            (
                user_id,
                format!("deleted-{user_id}@deleted.invalid"),
                Timestamp::now(),
            ),
        )?;
        tx.execute("DELETE FROM sessions WHERE user_id = ?1", [user_id])?;
        tx.execute("DELETE FROM user_tokens WHERE user_id = ?1", [user_id])?;
        tx.execute(
            "DELETE FROM api_keys WHERE newsletter_id IN (SELECT id FROM newsletters WHERE owner_id = ?1)",
            [user_id],
        )?;
        tx.execute(
            "UPDATE newsletters SET status = 'cancelled', updated_at = ?2 WHERE owner_id = ?1",
            (user_id, Timestamp::now()),
        )?;
        queue_account_purge(tx, user_id)?;
        Ok(())
    })
}

/// What one [`purge_batch`] deletes per table, each table's batch its own short transaction.
pub const PURGE_BATCH: i64 = 2_000;

/// One batch of a deleted account's rows, child tables first so the cascade at the end is
/// small; true while some table still had a full batch (more is left). The last call deletes
/// the account's row, and the rest goes with it by the schema's cascades.
pub fn purge_batch(conn: &mut Connection, user_id: i64) -> DomainResult<bool> {
    // The big tables, each through the index of its parent; LIMIT keeps each transaction short.
    // A subscriber's tags (a few each) go with it by the cascade.
    const BATCHES: [&str; 4] = [
        "DELETE FROM deliveries WHERE rowid IN (SELECT d.rowid FROM newsletters n
             JOIN issues i ON i.newsletter_id = n.id JOIN deliveries d ON d.issue_id = i.id
             WHERE n.owner_id = ?1 LIMIT ?2)",
        "DELETE FROM webhook_deliveries WHERE rowid IN (SELECT w.rowid FROM newsletters n
             JOIN webhook_subscriptions s ON s.newsletter_id = n.id
             JOIN webhook_deliveries w ON w.subscription_id = s.id
             WHERE n.owner_id = ?1 LIMIT ?2)",
        "DELETE FROM events WHERE rowid IN (SELECT e.rowid FROM newsletters n
             JOIN events e ON e.newsletter_id = n.id WHERE n.owner_id = ?1 LIMIT ?2)",
        "DELETE FROM subscribers WHERE rowid IN (SELECT s.rowid FROM newsletters n
             JOIN subscribers s ON s.newsletter_id = n.id WHERE n.owner_id = ?1 LIMIT ?2)",
    ];
    for sql in BATCHES {
        let deleted = write_tx(conn, |tx| {
            Ok::<_, DomainError>(tx.execute(sql, (user_id, PURGE_BATCH))?)
        })?;
        if deleted as i64 == PURGE_BATCH {
            return Ok(true);
        }
    }
    write_tx(conn, |tx| {
        tx.execute("DELETE FROM users WHERE id = ?1", [user_id])?;
        Ok::<_, DomainError>(false)
    })
}
