//! Double opt-in for a newsletter's public subscribe form: the address becomes a subscriber
//! (firing `subscriber.created`) only when the e-mailed link is followed. Asking again is
//! harmless: one open request per address, the newest link wins, an address that is
//! already subscribed gets no mail at all, and one that had its few mails this hour gets no
//! more (its last link keeps working).

use jiff::SignedDuration;
use rusqlite::{Connection, OptionalExtension};

use crate::clock::{self, Timestamp};
use crate::domain::accounts::rate_limit::{self, Bucket};
use crate::domain::newsletters::Newsletter;
use crate::domain::subscribers::{self, NewSubscriber, Status, Subscriber};
use crate::domain::values::secrets::{random_hex, sha256_hex};
use crate::domain::values::urls::{SiteUrls, host_of};
use crate::domain::{DomainError, DomainResult, events};
use crate::store::jobs::{AccountMail, AccountMailKind, queue_account_mail};
use crate::store::write_tx;

/// How long a confirmation link works.
const LINK_LIFETIME: SignedDuration = clock::days(7);
/// Subscribe requests one client address may make per hour, across all newsletters.
const PER_CLIENT_PER_HOUR: u32 = 20;
/// Confirmation mails one e-mail address gets per hour, across all newsletters, so the form
/// cannot be used to flood an inbox.
pub const MAILS_PER_ADDRESS_PER_HOUR: u32 = 5;

/// What a subscribe request did; the page says the same either way, so it leaks nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requested {
    /// A confirmation link was mailed.
    LinkSent,
    /// The address is already an active subscriber: nothing to do.
    AlreadySubscribed,
    /// The address had [`MAILS_PER_ADDRESS_PER_HOUR`] mails this hour: nothing sent, and
    /// the link mailed last still works.
    MailCapped,
}

/// Validates the form, throttles per client, records the request and mails the link.
pub fn request(
    conn: &mut Connection,
    urls: &SiteUrls,
    newsletter: &Newsletter,
    email: &str,
    name: &str,
    client: &str,
) -> DomainResult<Requested> {
    newsletter.ensure_writable()?;
    let name = Some(name.trim().to_string()).filter(|n| !n.is_empty());
    let valid = subscribers::validate(&NewSubscriber {
        email: email.to_string(),
        name,
        tags: Vec::new(),
        subscribed_at: None,
    })?;
    write_tx(conn, |tx| {
        rate_limit::hit(tx, &Bucket::Subscribe { client }, 3600, PER_CLIENT_PER_HOUR)?;
        const EXISTING: &str =
            "SELECT status FROM subscribers WHERE newsletter_id = ?1 AND email = ?2";
        let status: Option<Status> = tx
            .query_row(EXISTING, (newsletter.id, valid.email.as_str()), |r| {
                r.get(0)
            })
            .optional()?;
        if status == Some(Status::Active) {
            return Ok(Requested::AlreadySubscribed);
        }
        if !rate_limit::allow(
            tx,
            &Bucket::SubscribeMail {
                email: valid.email.as_str(),
            },
            3600,
            MAILS_PER_ADDRESS_PER_HOUR,
        )? {
            return Ok(Requested::MailCapped);
        }
        let token = random_hex(32);
        let now = clock::now();
        const UPSERT: &str = "INSERT INTO subscription_requests (newsletter_id, email, name, token_hash, expires_at, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (newsletter_id, email) DO UPDATE SET name = excluded.name,
                 token_hash = excluded.token_hash, expires_at = excluded.expires_at, created_at = excluded.created_at";
        tx.execute(
            UPSERT,
            (
                newsletter.id,
                valid.email.as_str(),
                valid.name.as_deref(),
                sha256_hex(&token),
                Timestamp::from(now + LINK_LIFETIME),
                Timestamp::from(now),
            ),
        )?;
        let origin = newsletter.site_origin(urls);
        let link = format!("{origin}/subscribe/confirm/{token}");
        queue_account_mail(
            tx,
            &AccountMail {
                to: valid.email.as_str().to_string(),
                link,
                kind: AccountMailKind::SubscriptionConfirmation {
                    newsletter_name: newsletter.name.clone(),
                    sender: Some(newsletter.sender(&host_of(&origin))),
                    newsletter_id: Some(newsletter.id),
                },
            },
        )?;
        Ok(Requested::LinkSent)
    })
}

/// Follows a confirmation link of `newsletter_id`'s site: the address becomes an active
/// subscriber (a former subscriber who had left is active again), and its welcome e-mail is
/// queued when the newsletter sends one and the subscriber never had it (`welcome`). Works
/// once; a link followed after the newsletter was cancelled is refused.
pub fn confirm(conn: &mut Connection, newsletter_id: i64, token: &str) -> DomainResult<Subscriber> {
    write_tx(conn, |tx| {
        let newsletter = crate::domain::newsletters::get(tx, newsletter_id)?;
        newsletter.ensure_writable()?;
        let subscriber = activate(tx, newsletter_id, token)?;
        if newsletter.welcome.enabled && subscriber.status == Status::Active {
            subscribers::queue_welcome(tx, subscriber.id)?;
        }
        Ok(subscriber)
    })
}

/// The confirmation itself, inside [`confirm`]'s transaction.
fn activate(tx: &Connection, newsletter_id: i64, token: &str) -> DomainResult<Subscriber> {
    const FIND: &str = "SELECT id, email, name FROM subscription_requests
         WHERE newsletter_id = ?1 AND token_hash = ?2 AND expires_at > ?3";
    let (request_id, email, name): (i64, String, Option<String>) = tx
        .query_row(
            FIND,
            (newsletter_id, sha256_hex(token), Timestamp::now()),
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?
        .ok_or(DomainError::NotFound("subscription request"))?;
    tx.execute(
        "DELETE FROM subscription_requests WHERE id = ?1",
        [request_id],
    )?;
    let valid = subscribers::validate(&NewSubscriber {
        email,
        name,
        tags: Vec::new(),
        subscribed_at: None,
    })?;
    let (subscriber, _created) = subscribers::insert(tx, newsletter_id, &valid)?;
    if subscriber.status != Status::Unsubscribed {
        return Ok(subscriber);
    }
    const RESUBSCRIBE: &str = "UPDATE subscribers SET status = 'active', unsubscribed_at = NULL,
         resubscribed_at = ?2, changed_at = ?2 WHERE id = ?1";
    tx.execute(RESUBSCRIBE, (subscriber.id, Timestamp::now()))?;
    let subscriber = subscribers::get(tx, newsletter_id, subscriber.id)?;
    events::record(
        tx,
        newsletter_id,
        "subscriber.updated",
        subscriber.event_data(),
    )?;
    Ok(subscriber)
}
