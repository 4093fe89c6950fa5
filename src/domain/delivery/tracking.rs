//! Per-recipient links in sent mail (signed so they cannot be forged or turned into an open
//! redirect) and what following them does: first open, first click, unsubscribe. Also
//! bounces, which end a recipient's mail the same way.

use rusqlite::{Connection, OptionalExtension};
use serde_json::json;

use crate::clock::Timestamp;
use crate::domain::delivery::bounce_report::{
    self, Complaint, Failure, NotAReport, Report, Severity,
};
use crate::domain::reports::issue_report;
use crate::domain::subscribers::{self, Status, Subscriber};
use crate::domain::values::secrets::{ServerSecret, Signer};
use crate::domain::{DomainError, DomainResult, events};
use crate::store::write_tx;

/// Hex characters of signature kept in URLs (128 bits).
const SIG_LEN: usize = 32;

fn sig(secret: &ServerSecret, purpose: &str, value: &str) -> String {
    secret.sign(purpose, value)[..SIG_LEN].to_string()
}

fn check(secret: &ServerSecret, purpose: &str, value: &str, given: &str) -> bool {
    crate::domain::values::secrets::constant_time_eq(&sig(secret, purpose, value), given)
}

/// Builds the personal URLs of one send, on the newsletter's public origin. A tracked link
/// carries two signatures: one of its target, bound to the newsletter (computed once per
/// send, it keeps the redirect from being opened to any other address), and one of the
/// delivery (computed once per recipient, it says whose click it was). A message has dozens
/// of links, so this is two signatures per link target per send plus three per recipient,
/// not one per link per recipient.
#[derive(Clone)]
pub struct Links {
    origin: String,
    newsletter_id: i64,
    tracking: bool,
    unsubscribe: Signer,
    unsubscribe_subscriber: Signer,
    open: Signer,
    click: Signer,
    click_target: Signer,
    view: Signer,
}

impl Links {
    pub fn new(origin: &str, newsletter_id: i64, secret: ServerSecret, tracking: bool) -> Self {
        Links {
            origin: origin.trim_end_matches('/').to_string(),
            newsletter_id,
            tracking,
            unsubscribe: secret.signer("unsubscribe"),
            unsubscribe_subscriber: secret.signer(SUBSCRIBER_UNSUBSCRIBE),
            open: secret.signer("open"),
            click: secret.signer("click"),
            click_target: secret.signer("click-target"),
            view: secret.signer(VIEW),
        }
    }

    /// The host part of the origin, for Message-IDs and the sender's fallback address.
    pub fn host(&self) -> String {
        crate::domain::values::urls::host_of(&self.origin)
    }

    /// The site's home page, which mail links from its footer.
    pub fn site_home(&self) -> String {
        format!("{}/", self.origin)
    }

    /// The "view in your browser" address of issue `issue_id`: the same for every recipient
    /// (so it costs nothing per message), signed so that only the mail leads to an issue the
    /// site does not show (a draft's test send, an issue sent to a segment only).
    pub fn view(&self, issue_id: i64) -> String {
        format!(
            "{}/view/{issue_id}/{}",
            self.origin,
            self.view.sign_hex(&issue_id.to_string(), SIG_LEN)
        )
    }

    pub fn unsubscribe(&self, delivery_id: i64) -> String {
        format!(
            "{}/u/{delivery_id}/{}",
            self.origin,
            self.unsubscribe.sign_hex(&delivery_id.to_string(), SIG_LEN)
        )
    }

    /// The unsubscribe link of mail that is no issue's delivery (the welcome e-mail): it names
    /// the subscriber, as `s<id>` where a delivery link has the delivery's id.
    pub fn unsubscribe_subscriber(&self, subscriber_id: i64) -> String {
        format!(
            "{}/u/s{subscriber_id}/{}",
            self.origin,
            self.unsubscribe_subscriber
                .sign_hex(&subscriber_id.to_string(), SIG_LEN)
        )
    }

    /// `None` when the newsletter turned tracking off.
    pub fn open_pixel(&self, delivery_id: i64) -> Option<String> {
        self.tracking.then(|| {
            format!(
                "{}/o/{delivery_id}/{}.gif",
                self.origin,
                self.open.sign_hex(&delivery_id.to_string(), SIG_LEN)
            )
        })
    }

    /// The tracked address of `target`, or `target` itself without tracking or for non-web links.
    pub fn click(&self, delivery_id: i64, target: &str) -> String {
        match self.click_query(target) {
            Some(query) => format!("{}{query}", self.click_prefix(delivery_id)),
            None => target.to_string(),
        }
    }

    /// The query of a tracked link to `target` (`?u=<target, URL-encoded>&t=<its signature>`),
    /// the same for every recipient so a send computes it once; `None` when the link is not
    /// tracked.
    pub fn click_query(&self, target: &str) -> Option<String> {
        if !self.tracking || !(target.starts_with("http://") || target.starts_with("https://")) {
            return None;
        }
        let encoded: String = url::form_urlencoded::byte_serialize(target.as_bytes()).collect();
        let signature = self
            .click_target
            .sign_hex(&format!("{}:{target}", self.newsletter_id), SIG_LEN);
        Some(format!("?u={encoded}&t={signature}"))
    }

    /// The open pixel of a sequence step's mail to one subscriber ([`step_key`]); `None`
    /// when the newsletter turned tracking off.
    pub fn step_open_pixel(&self, step_id: i64, subscriber_id: i64) -> Option<String> {
        self.tracking.then(|| {
            let key = step_key(step_id, subscriber_id);
            let sig = self.open.sign_hex(&key, SIG_LEN);
            format!("{}/o/{key}/{sig}.gif", self.origin)
        })
    }

    /// The tracked address of `target` in a sequence step's mail to one subscriber, or
    /// `target` itself as [`Links::click`] has it.
    pub fn step_click(&self, step_id: i64, subscriber_id: i64, target: &str) -> String {
        match self.click_query(target) {
            Some(query) => {
                let key = step_key(step_id, subscriber_id);
                let sig = self.click.sign_hex(&key, SIG_LEN);
                format!("{}/c/{key}/{sig}{query}", self.origin)
            }
            None => target.to_string(),
        }
    }

    /// The part of every tracked link of one delivery before its query: the same for all the
    /// links of one message, so a message computes it once.
    pub fn click_prefix(&self, delivery_id: i64) -> String {
        format!(
            "{}/c/{delivery_id}/{}",
            self.origin,
            self.click.sign_hex(&delivery_id.to_string(), SIG_LEN)
        )
    }
}

/// The purpose of "view in your browser" signatures.
const VIEW: &str = "view";

pub fn verify_view(secret: &ServerSecret, issue_id: i64, given: &str) -> bool {
    check(secret, VIEW, &issue_id.to_string(), given)
}

pub fn verify_unsubscribe(secret: &ServerSecret, delivery_id: i64, given: &str) -> bool {
    check(secret, "unsubscribe", &delivery_id.to_string(), given)
}

/// The purpose of subscribers' unsubscribe signatures: apart from deliveries', so a delivery's
/// signature can never unsubscribe the subscriber with the same number.
const SUBSCRIBER_UNSUBSCRIBE: &str = "unsubscribe-subscriber";

pub fn verify_subscriber_unsubscribe(
    secret: &ServerSecret,
    subscriber_id: i64,
    given: &str,
) -> bool {
    check(
        secret,
        SUBSCRIBER_UNSUBSCRIBE,
        &subscriber_id.to_string(),
        given,
    )
}

pub fn verify_open(secret: &ServerSecret, delivery_id: i64, given: &str) -> bool {
    check(secret, "open", &delivery_id.to_string(), given)
}

/// Both signatures of a tracked link: the delivery's (`given`) and the target's within the
/// newsletter the delivery belongs to (`given_target`).
pub fn verify_click(
    secret: &ServerSecret,
    newsletter_id: i64,
    delivery_id: i64,
    target: &str,
    given: &str,
    given_target: &str,
) -> bool {
    let key = delivery_id.to_string();
    verify_step_click(secret, newsletter_id, &key, target, given, given_target)
}

/// How a sequence step's mail to one subscriber is named in its links, where an issue's
/// names its delivery: `q<step>-<subscriber>` (signed as a delivery's id is, and never one).
pub fn step_key(step_id: i64, subscriber_id: i64) -> String {
    format!("q{step_id}-{subscriber_id}")
}

/// The step and subscriber of a [`step_key`].
pub fn parse_step_key(raw: &str) -> Option<(i64, i64)> {
    let (step, subscriber) = raw.strip_prefix('q')?.split_once('-')?;
    Some((step.parse().ok()?, subscriber.parse().ok()?))
}

pub fn verify_step_open(secret: &ServerSecret, key: &str, given: &str) -> bool {
    check(secret, "open", key, given)
}

/// [`verify_click`] for a [`step_key`] (or a delivery's id as text).
pub fn verify_step_click(
    secret: &ServerSecret,
    newsletter_id: i64,
    key: &str,
    target: &str,
    given: &str,
    given_target: &str,
) -> bool {
    check(secret, "click", key, given)
        & check(
            secret,
            "click-target",
            &format!("{newsletter_id}:{target}"),
            given_target,
        )
}

/// A delivery as the tracking routes need it.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub id: i64,
    pub issue_id: i64,
    pub newsletter_id: i64,
    pub subscriber_id: Option<i64>,
    pub email: String,
    pub opened_at: Option<Timestamp>,
    pub clicked_at: Option<Timestamp>,
}

impl Delivery {
    fn event_data(&self) -> serde_json::Value {
        json!({
            "delivery_id": self.id,
            "issue_id": self.issue_id,
            "email": self.email,
            "opened_at": self.opened_at,
            "clicked_at": self.clicked_at,
        })
    }
}

pub fn delivery(conn: &Connection, id: i64) -> DomainResult<Delivery> {
    const SQL: &str = "SELECT d.id, d.issue_id, i.newsletter_id, d.subscriber_id, d.email, d.opened_at, d.clicked_at
         FROM deliveries d JOIN issues i ON i.id = d.issue_id WHERE d.id = ?1";
    conn.query_row(SQL, [id], |r| {
        Ok(Delivery {
            id: r.get(0)?,
            issue_id: r.get(1)?,
            newsletter_id: r.get(2)?,
            subscriber_id: r.get(3)?,
            email: r.get(4)?,
            opened_at: r.get(5)?,
            clicked_at: r.get(6)?,
        })
    })
    .optional()?
    .ok_or(DomainError::NotFound("delivery"))
}

/// The first octet of Apple's own network, 17.0.0.0/8 (one allocation, ARIN's
/// `APPLE-WWNET`): Apple Mail Privacy Protection fetches every image of a mail through it
/// as soon as the mail arrives, whether anyone reads it or not.
const APPLE_NETWORK: u8 = 17;
/// An open or click this soon after the relay took the message is a scanner's (mail
/// security gateways fetch images and follow links on arrival), not a reader's.
pub const AUTOMATIC_WITHIN: jiff::SignedDuration = jiff::SignedDuration::from_secs(10);

/// Whether an open (or click) from `client` at `now` of a message the relay took at
/// `sent_at` is no person's: from Apple's prefetching network, or within
/// [`AUTOMATIC_WITHIN`] of delivery.
pub fn is_automatic(
    client: Option<std::net::IpAddr>,
    sent_at: Option<Timestamp>,
    now: Timestamp,
) -> bool {
    let apple = match client {
        Some(std::net::IpAddr::V4(ip)) => ip.octets()[0] == APPLE_NETWORK,
        _ => false,
    };
    let at_once = sent_at.is_some_and(|sent| now < sent + AUTOMATIC_WITHIN);
    apple || at_once
}

/// When the relay took delivery `id`'s message.
fn sent_at(conn: &Connection, id: i64) -> DomainResult<Option<Timestamp>> {
    const SQL: &str = "SELECT sent_at FROM deliveries WHERE id = ?1";
    Ok(conn
        .query_row(SQL, [id], |r| r.get(0))
        .optional()?
        .flatten())
}

/// Notes the first open of a delivery and fires `email.opened` once; `client` is where the
/// open came from, to tell an automatic open ([`is_automatic`]) from a person's: a person's
/// open after only automatic ones makes the delivery opened by a person.
pub fn record_open(
    conn: &mut Connection,
    delivery_id: i64,
    client: Option<std::net::IpAddr>,
) -> DomainResult<()> {
    write_tx(conn, |tx| {
        let now = Timestamp::now();
        let automatic = is_automatic(client, sent_at(tx, delivery_id)?, now);
        const FIRST: &str = "UPDATE deliveries SET opened_at = ?2, opened_auto = ?3
             WHERE id = ?1 AND opened_at IS NULL";
        if tx.execute(FIRST, (delivery_id, &now, automatic))? == 1 {
            let d = delivery(tx, delivery_id)?;
            issue_report::count_open(tx, d.issue_id, d.id, now)?;
            let mut data = d.event_data();
            data["automatic"] = json!(automatic);
            events::record(tx, d.newsletter_id, "email.opened", data)?;
        } else if !automatic {
            const PERSON: &str =
                "UPDATE deliveries SET opened_auto = 0 WHERE id = ?1 AND opened_auto = 1";
            tx.execute(PERSON, [delivery_id])?;
        }
        Ok(())
    })
}

/// Counts a click in the issue's report (every click, per link and per day) and notes the
/// first click of a delivery (a click implies an open: a person's, unless the click is
/// automatic as [`record_open`] tells), firing `email.clicked` once.
pub fn record_click(
    conn: &mut Connection,
    delivery_id: i64,
    target: &str,
    client: Option<std::net::IpAddr>,
) -> DomainResult<()> {
    write_tx(conn, |tx| {
        let now = Timestamp::now();
        let before = delivery(tx, delivery_id)?;
        let automatic = is_automatic(client, sent_at(tx, delivery_id)?, now);
        const OPEN: &str = "UPDATE deliveries SET opened_auto = CASE WHEN opened_at IS NULL THEN ?2 ELSE opened_auto AND ?2 END
             WHERE id = ?1";
        tx.execute(OPEN, (delivery_id, automatic))?;
        const CLICK: &str = "UPDATE deliveries SET clicked_at = ?2, opened_at = coalesce(opened_at, ?2) WHERE id = ?1 AND clicked_at IS NULL";
        let first_click = tx.execute(CLICK, (delivery_id, &now))? == 1;
        let firsts = issue_report::ClickFirsts {
            open: before.opened_at.is_none(),
            click: first_click,
        };
        issue_report::count_click(tx, before.issue_id, delivery_id, target, now, firsts)?;
        if first_click {
            let d = delivery(tx, delivery_id)?;
            let mut data = d.event_data();
            data["clicked_url"] = json!(target);
            events::record(tx, d.newsletter_id, "email.clicked", data)?;
        }
        Ok(())
    })
}

/// The unsubscribe link: the subscriber becomes `unsubscribed` and `email.unsubscribed` fires
/// (once; following the link again changes nothing).
pub fn unsubscribe(conn: &mut Connection, delivery_id: i64) -> DomainResult<Delivery> {
    write_tx(conn, |tx| {
        let d = delivery(tx, delivery_id)?;
        let Some(subscriber_id) = d.subscriber_id else {
            return Ok(d);
        };
        if let Some(now) = leave(tx, d.newsletter_id, subscriber_id)? {
            tx.execute("UPDATE deliveries SET unsubscribed_at = coalesce(unsubscribed_at, ?2) WHERE id = ?1", (delivery_id, &now))?;
            events::record(tx, d.newsletter_id, "email.unsubscribed", d.event_data())?;
        }
        Ok(d)
    })
}

/// The unsubscribe link of a welcome e-mail, which names the subscriber of `newsletter_id`:
/// as [`unsubscribe`], the event naming the subscriber (there is no delivery).
pub fn unsubscribe_subscriber(
    conn: &mut Connection,
    newsletter_id: i64,
    subscriber_id: i64,
) -> DomainResult<()> {
    write_tx(conn, |tx| {
        if leave(tx, newsletter_id, subscriber_id)?.is_some() {
            let subscriber = subscribers::get(tx, newsletter_id, subscriber_id)?;
            let data = json!({"subscription_id": subscriber.id, "email": subscriber.email});
            events::record(tx, newsletter_id, "email.unsubscribed", data)?;
        }
        Ok(())
    })
}

/// Subscribes again, from the page their unsubscribe link leads to, a reader who left
/// (`subscriber_id` of `newsletter_id`): an unsubscribed subscriber becomes active and
/// `subscriber.updated` fires; an active one stays as it is, and a bounced one stays out (an
/// address that bounced cannot be mailed). The subscriber as it is afterwards.
pub fn resubscribe(
    conn: &mut Connection,
    newsletter_id: i64,
    subscriber_id: i64,
) -> DomainResult<Subscriber> {
    write_tx(conn, |tx| {
        crate::domain::newsletters::get(tx, newsletter_id)?.ensure_writable()?;
        let subscriber = subscribers::get(tx, newsletter_id, subscriber_id)?;
        if subscriber.status != Status::Unsubscribed {
            return Ok(subscriber);
        }
        subscribers::set_status(tx, &subscriber, Status::Active, Timestamp::now())?;
        let after = subscribers::get(tx, newsletter_id, subscriber_id)?;
        events::record(tx, newsletter_id, "subscriber.updated", after.event_data())?;
        Ok(after)
    })
}

/// The subscriber delivery `delivery_id` went to; not found when it names none (deleted).
pub fn recipient(conn: &Connection, delivery_id: i64) -> DomainResult<i64> {
    delivery(conn, delivery_id)?
        .subscriber_id
        .ok_or(DomainError::NotFound("subscriber"))
}

/// Makes the subscriber `unsubscribed`; the time when it was not already, else `None`.
fn leave(
    conn: &Connection,
    newsletter_id: i64,
    subscriber_id: i64,
) -> DomainResult<Option<Timestamp>> {
    let subscriber = subscribers::get(conn, newsletter_id, subscriber_id)?;
    if subscriber.status == Status::Unsubscribed {
        return Ok(None);
    }
    let now = Timestamp::now();
    subscribers::set_status(conn, &subscriber, Status::Unsubscribed, now)?;
    Ok(Some(now))
}

/// A hard bounce of one delivery: the delivery is `bounced`, the subscriber `bounced`, and
/// `email.bounced` fires. Called by the sender on a 5xx and by bounce reports.
pub fn bounce(conn: &Connection, delivery_id: i64, reason: &str) -> DomainResult<()> {
    bounce_reported(conn, delivery_id, reason, None)
}

/// [`bounce`], with the DSN's `status` and `diagnostic` added to the event when a report
/// gave them.
fn bounce_reported(
    conn: &Connection,
    delivery_id: i64,
    reason: &str,
    dsn: Option<&Failure>,
) -> DomainResult<()> {
    let now = Timestamp::now();
    const BOUNCE: &str = "UPDATE deliveries SET status = 'bounced', bounced_at = coalesce(bounced_at, ?2), last_error = ?3
         WHERE id = ?1 AND bounced_at IS NULL";
    if conn.execute(BOUNCE, (delivery_id, &now, reason))? == 0 {
        return Ok(());
    }
    let d = delivery(conn, delivery_id)?;
    if let Some(subscriber_id) = d.subscriber_id {
        let subscriber = subscribers::get(conn, d.newsletter_id, subscriber_id)?;
        if subscriber.status == Status::Active {
            subscribers::set_status(conn, &subscriber, Status::Bounced, now)?;
        }
    }
    let mut data = d.event_data();
    if let Some(dsn) = dsn {
        data["status"] = json!(dsn.status);
        data["diagnostic"] = json!(dsn.diagnostic);
    }
    events::record(conn, d.newsletter_id, "email.bounced", data)?;
    Ok(())
}

/// A bounce reported after the fact (by an MTA or provider) for `email`: the newest delivery
/// to that address bounces; without one, the subscriber alone is marked bounced.
pub fn report_bounce(
    conn: &mut Connection,
    newsletter_id: i64,
    email: &str,
    reason: &str,
) -> DomainResult<()> {
    let email = parse_email(email)?;
    write_tx(conn, |tx| {
        bounce_address(tx, newsletter_id, email.as_str(), reason, None)
    })
}

fn parse_email(email: &str) -> DomainResult<crate::domain::values::email::EmailAddress> {
    crate::domain::values::email::EmailAddress::parse(email).map_err(|m| {
        DomainError::Invalid(
            crate::domain::ErrorCode::InvalidEmail,
            crate::domain::FieldErrors::single("email", m),
        )
    })
}

/// The subscriber of `newsletter_id` with address `email`, and its newest delivery if any.
fn subscriber_and_latest(
    conn: &Connection,
    newsletter_id: i64,
    email: &str,
) -> DomainResult<(i64, Option<i64>)> {
    // Through the subscriber (its address never changes, and its deliveries carry it):
    // two index lookups, where matching deliveries by address would read them all.
    const FIND: &str =
        "SELECT s.id, (SELECT max(d.id) FROM deliveries d WHERE d.subscriber_id = s.id)
         FROM subscribers s WHERE s.newsletter_id = ?1 AND s.email = ?2";
    conn.query_row(FIND, (newsletter_id, email), |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?
        .ok_or(DomainError::NotFound("subscriber"))
}

fn bounce_address(
    conn: &Connection,
    newsletter_id: i64,
    email: &str,
    reason: &str,
    dsn: Option<&Failure>,
) -> DomainResult<()> {
    match subscriber_and_latest(conn, newsletter_id, email)? {
        (_, Some(delivery_id)) => bounce_reported(conn, delivery_id, reason, dsn),
        (subscriber_id, None) => {
            let subscriber = subscribers::get(conn, newsletter_id, subscriber_id)?;
            subscribers::set_status(conn, &subscriber, Status::Bounced, Timestamp::now())?;
            Ok(())
        }
    }
}

/// Consecutive soft bounces (the subscriber's newest deliveries, each with a 4.x.x report)
/// that mark a subscriber bounced. A delivery with no soft bounce between them ends the run.
pub const SOFT_BOUNCE_LIMIT: i64 = 3;

/// A soft bounce of the newest delivery to `email`; see [`soft_bounce_of`].
fn soft_bounce(
    conn: &Connection,
    newsletter_id: i64,
    email: &str,
    dsn: &Failure,
) -> DomainResult<()> {
    match subscriber_and_latest(conn, newsletter_id, email)? {
        (subscriber_id, Some(delivery_id)) => {
            soft_bounce_of(conn, Some(subscriber_id), delivery_id, dsn)
        }
        (_, None) => Ok(()),
    }
}

/// A soft bounce of `delivery_id`; the [`SOFT_BOUNCE_LIMIT`]th in a row of its subscriber
/// bounces the subscriber (`email.bounced` with the last report's status).
fn soft_bounce_of(
    conn: &Connection,
    subscriber_id: Option<i64>,
    delivery_id: i64,
    dsn: &Failure,
) -> DomainResult<()> {
    const NOTE: &str =
        "UPDATE deliveries SET soft_bounced_at = coalesce(soft_bounced_at, ?2) WHERE id = ?1";
    conn.execute(NOTE, (delivery_id, Timestamp::now()))?;
    let Some(subscriber_id) = subscriber_id else {
        return Ok(());
    };
    const RUN: &str = "SELECT count(*) FROM (SELECT soft_bounced_at FROM deliveries
         WHERE subscriber_id = ?1 ORDER BY id DESC LIMIT ?2) WHERE soft_bounced_at IS NOT NULL";
    let run: i64 = conn.query_row(RUN, (subscriber_id, SOFT_BOUNCE_LIMIT), |r| r.get(0))?;
    if run >= SOFT_BOUNCE_LIMIT {
        let reason = format!(
            "{SOFT_BOUNCE_LIMIT} soft bounces in a row; last: {}",
            dsn_reason(dsn)
        );
        bounce_reported(conn, delivery_id, &reason, Some(dsn))?;
    }
    Ok(())
}

fn dsn_reason(dsn: &Failure) -> String {
    let text = match &dsn.diagnostic {
        Some(diagnostic) => format!("{} {diagnostic}", dsn.status),
        None => format!("{} ({})", dsn.status, dsn.action),
    };
    text.chars().take(500).collect()
}

/// A spam complaint: the subscriber is unsubscribed and `email.unsubscribed` fires with
/// `"reason": "complaint"` (once; a second complaint changes nothing).
fn complain(conn: &Connection, newsletter_id: i64, complaint: &Complaint) -> DomainResult<()> {
    let (subscriber_id, latest) = subscriber_and_latest(conn, newsletter_id, &complaint.email)?;
    complain_of(
        conn,
        newsletter_id,
        subscriber_id,
        latest,
        &complaint.feedback_type,
    )
}

/// [`complain`] about `subscriber_id`, the message complained of being `delivery_id` (when
/// known).
fn complain_of(
    conn: &Connection,
    newsletter_id: i64,
    subscriber_id: i64,
    delivery_id: Option<i64>,
    feedback_type: &str,
) -> DomainResult<()> {
    let subscriber = subscribers::get(conn, newsletter_id, subscriber_id)?;
    if subscriber.status == Status::Unsubscribed {
        return Ok(());
    }
    let now = Timestamp::now();
    subscribers::set_status(conn, &subscriber, Status::Unsubscribed, now)?;
    let mut data = match delivery_id {
        Some(delivery_id) => {
            conn.execute("UPDATE deliveries SET unsubscribed_at = coalesce(unsubscribed_at, ?2) WHERE id = ?1", (delivery_id, &now))?;
            delivery(conn, delivery_id)?.event_data()
        }
        None => json!({"email": subscriber.email}),
    };
    data["reason"] = json!("complaint");
    data["feedback_type"] = json!(feedback_type);
    events::record(conn, newsletter_id, "email.unsubscribed", data)?;
    Ok(())
}

/// What applying a report did, for the door to say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// Addresses marked bounced by a permanent failure.
    pub bounced: Vec<String>,
    /// Addresses with a soft bounce noted (bounced too when it made the run).
    pub soft: Vec<String>,
    /// Addresses unsubscribed by a complaint.
    pub complained: Vec<String>,
    /// Addresses the report named that are not subscribers of the newsletter.
    pub unknown: Vec<String>,
}

/// Applies a parsed DSN or ARF report to `newsletter_id`'s subscribers, in one transaction.
pub fn apply_report(
    conn: &mut Connection,
    newsletter_id: i64,
    report: &Report,
) -> DomainResult<Applied> {
    write_tx(conn, |tx| {
        let mut applied = Applied::default();
        let mut note =
            |email: &str, outcome: DomainResult<()>, into: fn(&mut Applied) -> &mut Vec<String>| {
                match outcome {
                    Ok(()) => {
                        into(&mut applied).push(email.to_string());
                        Ok(())
                    }
                    Err(DomainError::NotFound(_)) => {
                        applied.unknown.push(email.to_string());
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            };
        match report {
            Report::Delivery(failures) => {
                for failure in failures {
                    // An address that does not parse cannot be a subscriber's.
                    let email = parse_email(&failure.email)
                        .map_err(|_| DomainError::NotFound("subscriber"));
                    match failure.severity {
                        Severity::Permanent => note(
                            &failure.email,
                            email.and_then(|email| {
                                let reason = dsn_reason(failure);
                                bounce_address(
                                    tx,
                                    newsletter_id,
                                    email.as_str(),
                                    &reason,
                                    Some(failure),
                                )
                            }),
                            |a| &mut a.bounced,
                        )?,
                        Severity::Soft => note(
                            &failure.email,
                            email.and_then(|email| {
                                soft_bounce(tx, newsletter_id, email.as_str(), failure)
                            }),
                            |a| &mut a.soft,
                        )?,
                    }
                }
            }
            Report::Complaint(complaint) => {
                let outcome = parse_email(&complaint.email)
                    .map_err(|_| DomainError::NotFound("subscriber"))
                    .and_then(|email| {
                        complain(
                            tx,
                            newsletter_id,
                            &Complaint {
                                email: email.as_str().to_string(),
                                feedback_type: complaint.feedback_type.clone(),
                            },
                        )
                    });
                note(&complaint.email, outcome, |a| &mut a.complained)?
            }
        }
        Ok(applied)
    })
}

/// Whom a raw report is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportAbout {
    /// The subscribers of a newsletter the report names (the bounce token's doors).
    Newsletter(i64),
    /// One delivery, named by the return path the report was mailed to (VERP): it is applied
    /// to that delivery and its subscriber, whatever address the report gives.
    Delivery(i64),
}

/// Reads one raw DSN or ARF message and applies it: the one path of every door that takes
/// raw reports (`broadsheet bounce`, `POST /bounces/<token>`, the bounce listener). A message
/// that is not a report changes nothing and comes back as the inner `Err`, for the door to
/// log and answer.
pub fn apply_raw_report(
    conn: &mut Connection,
    about: ReportAbout,
    raw: &[u8],
) -> DomainResult<Result<Applied, NotAReport>> {
    let report = match bounce_report::parse(raw) {
        Ok(report) => report,
        Err(why) => return Ok(Err(why)),
    };
    match about {
        ReportAbout::Newsletter(newsletter_id) => apply_report(conn, newsletter_id, &report),
        ReportAbout::Delivery(delivery_id) => apply_to_delivery(conn, delivery_id, &report),
    }
    .map(Ok)
}

/// A report about one message (mailed to its return path): its first permanent failure, or
/// else its first delay, or its complaint, applied to the delivery in one transaction.
fn apply_to_delivery(
    conn: &mut Connection,
    delivery_id: i64,
    report: &Report,
) -> DomainResult<Applied> {
    write_tx(conn, |tx| {
        let d = delivery(tx, delivery_id)?;
        let mut applied = Applied::default();
        match report {
            Report::Delivery(failures) => {
                let failure = failures
                    .iter()
                    .find(|f| f.severity == Severity::Permanent)
                    .or_else(|| failures.first());
                match failure {
                    Some(f) if f.severity == Severity::Permanent => {
                        bounce_reported(tx, d.id, &dsn_reason(f), Some(f))?;
                        applied.bounced.push(d.email);
                    }
                    Some(f) => {
                        soft_bounce_of(tx, d.subscriber_id, d.id, f)?;
                        applied.soft.push(d.email);
                    }
                    None => {}
                }
            }
            Report::Complaint(complaint) => match d.subscriber_id {
                Some(subscriber_id) => {
                    complain_of(
                        tx,
                        d.newsletter_id,
                        subscriber_id,
                        Some(d.id),
                        &complaint.feedback_type,
                    )?;
                    applied.complained.push(d.email);
                }
                None => applied.unknown.push(d.email),
            },
        }
        Ok(applied)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_from_apples_network_or_on_arrival_are_automatic() {
        let sent = Timestamp::now();
        let later = sent + jiff::SignedDuration::from_secs(60);
        let ip = |s: &str| Some(s.parse().unwrap());
        assert!(is_automatic(ip("17.58.101.4"), Some(sent), later), "Apple");
        assert!(
            is_automatic(ip("198.51.100.7"), Some(sent), sent),
            "on arrival"
        );
        assert!(
            !is_automatic(ip("198.51.100.7"), Some(sent), later),
            "a person"
        );
        assert!(
            !is_automatic(ip("171.58.1.1"), Some(sent), later),
            "not 17/8"
        );
        assert!(
            !is_automatic(ip("2001:db8::17"), None, later),
            "IPv6, no send time"
        );
        assert!(!is_automatic(None, Some(sent), later));
    }

    #[test]
    fn links_are_signed_and_respect_tracking() {
        let secret = ServerSecret::for_tests(b"s");
        let links = Links::new("https://n.example.com", 3, secret.clone(), true);
        let target = "https://target.example/a?b=1";
        let click = links.click(7, target);
        let (path, query) = click
            .trim_start_matches("https://n.example.com/c/")
            .split_once('?')
            .unwrap();
        let (id, sig) = path.split_once('/').unwrap();
        assert_eq!(id, "7");
        let params: std::collections::HashMap<String, String> =
            url::form_urlencoded::parse(query.as_bytes())
                .into_owned()
                .collect();
        assert_eq!(params["u"], target);
        let t = params["t"].as_str();
        assert!(verify_click(&secret, 3, 7, target, sig, t));
        assert!(!verify_click(
            &secret,
            3,
            7,
            "https://evil.example/",
            sig,
            t
        ));
        assert!(!verify_click(&secret, 3, 8, target, sig, t));
        assert!(
            !verify_click(&secret, 4, 7, target, sig, t),
            "another newsletter"
        );
        assert!(!verify_click(&secret, 3, 7, target, t, sig), "swapped");
        assert_eq!(
            click,
            format!(
                "{}{}",
                links.click_prefix(7),
                links.click_query(target).unwrap()
            )
        );
        assert!(links.open_pixel(7).is_some());
        let untracked = Links::new("https://n.example.com", 3, secret, false);
        assert_eq!(
            untracked.click(7, "https://t.example/"),
            "https://t.example/"
        );
        assert!(untracked.open_pixel(7).is_none());
        assert!(untracked.unsubscribe(7).contains("/u/7/"));
    }
}
