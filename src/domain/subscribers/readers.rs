//! Readers signed in to a newsletter's site (docs/memberships.md, "Reader sign-in"): no
//! password, a one-time link mailed to the subscriber's address, valid 15 minutes and once,
//! which opens a session of that site only (its cookie is the site host's). Signed in, a
//! reader sees their membership, upgrades, manages billing, changes their address (confirmed
//! at the new one) or leaves.
//!
//! Asking for a link answers the same whether the address is a subscriber or not, and is
//! throttled like the subscribe form: per client address, and per e-mail address for the
//! mails themselves.

use jiff::SignedDuration;
use rusqlite::{Connection, OptionalExtension};

use crate::clock::{self, Timestamp};
use crate::domain::accounts::rate_limit::{self, Bucket};
use crate::domain::newsletters::Newsletter;
use crate::domain::subscribers::memberships::{self, Membership};
use crate::domain::subscribers::{self, Subscriber};
use crate::domain::values::email::EmailAddress;
use crate::domain::values::secrets::{random_hex, sha256_hex};
use crate::domain::values::urls::{SiteUrls, host_of};
use crate::domain::{DomainError, DomainResult};
use crate::store::jobs::{AccountMail, AccountMailKind, queue_account_mail};
use crate::store::write_tx;

/// How long a mailed link works.
pub const LINK_LIFETIME: SignedDuration = SignedDuration::from_mins(15);
/// How long a session lasts.
pub const SESSION_LIFETIME: SignedDuration = clock::days(30);
/// Link requests one client address may make per hour, across all sites.
pub const PER_CLIENT_PER_HOUR: u32 = 20;
/// Reader mails (sign-in and address change) one address gets per hour.
pub const MAILS_PER_ADDRESS_PER_HOUR: u32 = 5;

/// A signed-in reader: the subscriber and their membership now.
#[derive(Debug, Clone)]
pub struct Reader {
    pub subscriber: Subscriber,
}

impl Reader {
    pub fn membership(&self) -> &Membership {
        &self.subscriber.membership
    }
}

/// Mails a sign-in link to `email` when it is a subscriber of `newsletter` (not one whose
/// address bounced); says nothing about which it was.
pub fn request_link(
    conn: &mut Connection,
    urls: &SiteUrls,
    newsletter: &Newsletter,
    email: &str,
    client: &str,
) -> DomainResult<()> {
    let email = subscribers::checked_email(email)?;
    write_tx(conn, |tx| {
        rate_limit::hit(
            tx,
            &Bucket::ReaderSignIn { client },
            3600,
            PER_CLIENT_PER_HOUR,
        )?;
        const FIND: &str = "SELECT id FROM subscribers
             WHERE newsletter_id = ?1 AND email = ?2 AND status != 'bounced'";
        let Some(id) = tx
            .query_row(FIND, (newsletter.id, email.as_str()), |r| {
                r.get::<_, i64>(0)
            })
            .optional()?
        else {
            return Ok(());
        };
        mail_link(tx, urls, newsletter, id, &email, None)
    })
}

/// Records a link for subscriber `id` and queues its mail to `to`: a sign-in link, or with
/// `new_email` the confirmation of an address change (mailed to the new address).
fn mail_link(
    tx: &Connection,
    urls: &SiteUrls,
    newsletter: &Newsletter,
    id: i64,
    to: &EmailAddress,
    new_email: Option<&EmailAddress>,
) -> DomainResult<()> {
    if !rate_limit::allow(
        tx,
        &Bucket::ReaderMail { email: to.as_str() },
        3600,
        MAILS_PER_ADDRESS_PER_HOUR,
    )? {
        return Ok(());
    }
    let token = random_hex(32);
    let purpose = if new_email.is_some() {
        "change_email"
    } else {
        "sign_in"
    };
    const LINK: &str =
        "INSERT INTO reader_links (token_hash, subscriber_id, purpose, new_email, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5)";
    tx.execute(
        LINK,
        (
            sha256_hex(&token),
            id,
            purpose,
            new_email.map(EmailAddress::as_str),
            Timestamp::from(clock::now() + LINK_LIFETIME),
        ),
    )?;
    let origin = newsletter.site_origin(urls);
    let (link, kind) = match new_email {
        None => (
            format!("{origin}/signin/{token}"),
            AccountMailKind::ReaderSignIn {
                newsletter_name: newsletter.name.clone(),
                sender: newsletter.sender(&host_of(&origin)),
                newsletter_id: newsletter.id,
            },
        ),
        Some(_) => (
            format!("{origin}/account/email/{token}"),
            AccountMailKind::ReaderEmailChange {
                newsletter_name: newsletter.name.clone(),
                sender: newsletter.sender(&host_of(&origin)),
                newsletter_id: newsletter.id,
            },
        ),
    };
    queue_account_mail(
        tx,
        &AccountMail {
            to: to.as_str().to_string(),
            link,
            kind,
        },
    )?;
    Ok(())
}

/// Uses a link of `purpose` once: the subscriber it is for, and the address it confirms.
fn use_link(
    tx: &Connection,
    newsletter_id: i64,
    token: &str,
    purpose: &str,
) -> DomainResult<(i64, Option<String>)> {
    const USE: &str = "UPDATE reader_links SET used_at = ?3
         WHERE token_hash = ?1 AND purpose = ?2 AND used_at IS NULL AND expires_at > ?3
         RETURNING subscriber_id, new_email";
    let now = Timestamp::now();
    let (id, new_email): (i64, Option<String>) = tx
        .query_row(USE, (sha256_hex(token), purpose, now), |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?
        .ok_or(DomainError::NotFound("link"))?;
    // A link of another newsletter's site is no link here (and stays used).
    subscribers::get(tx, newsletter_id, id)?;
    Ok((id, new_email))
}

/// Follows a sign-in link: opens a session and returns its token (for the cookie).
pub fn sign_in(conn: &mut Connection, newsletter_id: i64, token: &str) -> DomainResult<String> {
    write_tx(conn, |tx| {
        let (id, _) = use_link(tx, newsletter_id, token, "sign_in")?;
        session_of(tx, id)
    })
}

/// Opens a session for subscriber `subscriber_id` of `newsletter_id`, whom a signed link of
/// their own mail named (the preference centre's way in); returns its token.
pub fn open_session(
    conn: &mut Connection,
    newsletter_id: i64,
    subscriber_id: i64,
) -> DomainResult<String> {
    write_tx(conn, |tx| {
        subscribers::get(tx, newsletter_id, subscriber_id)?;
        session_of(tx, subscriber_id)
    })
}

/// A new session of subscriber `id`, inside the caller's transaction; its token.
fn session_of(tx: &Connection, id: i64) -> DomainResult<String> {
    let session = random_hex(32);
    let now = Timestamp::now();
    const OPEN: &str =
        "INSERT INTO reader_sessions (token_hash, subscriber_id, created_at, expires_at)
         VALUES (?1, ?2, ?3, ?4)";
    tx.execute(
        OPEN,
        (sha256_hex(&session), id, now, now + SESSION_LIFETIME),
    )?;
    Ok(session)
}

/// The reader of `session` on `newsletter_id`'s site, if it is open.
pub fn reader(
    conn: &Connection,
    newsletter_id: i64,
    session: &str,
) -> DomainResult<Option<Reader>> {
    const FIND: &str =
        "SELECT subscriber_id FROM reader_sessions WHERE token_hash = ?1 AND expires_at > ?2";
    let id: Option<i64> = conn
        .query_row(FIND, (sha256_hex(session), Timestamp::now()), |r| r.get(0))
        .optional()?;
    let Some(id) = id else { return Ok(None) };
    match subscribers::get(conn, newsletter_id, id) {
        Ok(subscriber) => Ok(Some(Reader { subscriber })),
        Err(DomainError::NotFound(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

pub fn sign_out(conn: &Connection, session: &str) -> DomainResult<()> {
    conn.execute(
        "DELETE FROM reader_sessions WHERE token_hash = ?1",
        [sha256_hex(session)],
    )?;
    Ok(())
}

/// Mails a link to `new_email` that moves the reader there once followed.
pub fn request_email_change(
    conn: &mut Connection,
    urls: &SiteUrls,
    newsletter: &Newsletter,
    reader: &Reader,
    new_email: &str,
    client: &str,
) -> DomainResult<()> {
    let email = subscribers::checked_email(new_email)?;
    if email.as_str() == reader.subscriber.email {
        return Err(DomainError::invalid("email", "is already your address"));
    }
    write_tx(conn, |tx| {
        rate_limit::hit(
            tx,
            &Bucket::ReaderSignIn { client },
            3600,
            PER_CLIENT_PER_HOUR,
        )?;
        mail_link(
            tx,
            urls,
            newsletter,
            reader.subscriber.id,
            &email,
            Some(&email),
        )
    })
}

/// Follows an address-change link: the subscriber's address is the new one.
pub fn confirm_email_change(
    conn: &mut Connection,
    newsletter_id: i64,
    token: &str,
) -> DomainResult<Subscriber> {
    write_tx(conn, |tx| {
        let (id, new_email) = use_link(tx, newsletter_id, token, "change_email")?;
        let email = new_email
            .as_deref()
            .and_then(|e| EmailAddress::parse(e).ok())
            .ok_or(DomainError::NotFound("link"))?;
        subscribers::change_email(tx, newsletter_id, id, &email)
    })
}

/// The member's Stripe customer, for the billing page; `None` when they never paid through
/// Stripe.
pub fn stripe_customer(conn: &Connection, reader: &Reader) -> DomainResult<Option<String>> {
    Ok(memberships::stored(conn, reader.subscriber.id)?.and_then(|s| s.stripe_customer))
}
