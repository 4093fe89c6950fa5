//! Per-recipient links in sent mail (signed so they cannot be forged or turned into an open
//! redirect) and what following them does: first open, first click, unsubscribe. Also
//! bounces, which end a recipient's mail the same way.

use rusqlite::{Connection, OptionalExtension};
use serde_json::json;

use super::secrets::{ServerSecret, Signer};
use super::subscribers::{self, Status};
use super::{DomainError, DomainResult, events};
use crate::clock::Timestamp;
use crate::store::write_tx;

/// Hex characters of signature kept in URLs (128 bits).
const SIG_LEN: usize = 32;

fn sig(secret: &ServerSecret, purpose: &str, value: &str) -> String {
    secret.sign(purpose, value)[..SIG_LEN].to_string()
}

fn check(secret: &ServerSecret, purpose: &str, value: &str, given: &str) -> bool {
    super::secrets::constant_time_eq(&sig(secret, purpose, value), given)
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
    open: Signer,
    click: Signer,
    click_target: Signer,
}

impl Links {
    pub fn new(origin: &str, newsletter_id: i64, secret: ServerSecret, tracking: bool) -> Self {
        Links {
            origin: origin.trim_end_matches('/').to_string(),
            newsletter_id,
            tracking,
            unsubscribe: secret.signer("unsubscribe"),
            open: secret.signer("open"),
            click: secret.signer("click"),
            click_target: secret.signer("click-target"),
        }
    }

    /// The host part of the origin, for Message-IDs and the sender's fallback address.
    pub fn host(&self) -> String {
        super::urls::host_of(&self.origin)
    }

    pub fn unsubscribe(&self, delivery_id: i64) -> String {
        format!(
            "{}/u/{delivery_id}/{}",
            self.origin,
            self.unsubscribe.sign_hex(&delivery_id.to_string(), SIG_LEN)
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

pub fn verify_unsubscribe(secret: &ServerSecret, delivery_id: i64, given: &str) -> bool {
    check(secret, "unsubscribe", &delivery_id.to_string(), given)
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
    check(secret, "click", &delivery_id.to_string(), given)
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

/// Notes the first open of a delivery and fires `email.opened` once.
pub fn record_open(conn: &mut Connection, delivery_id: i64) -> DomainResult<()> {
    write_tx(conn, |tx| {
        let now = Timestamp::now();
        if tx.execute(
            "UPDATE deliveries SET opened_at = ?2 WHERE id = ?1 AND opened_at IS NULL",
            (delivery_id, &now),
        )? == 1
        {
            let d = delivery(tx, delivery_id)?;
            events::record(tx, d.newsletter_id, "email.opened", d.event_data())?;
        }
        Ok(())
    })
}

/// Notes the first click of a delivery (a click implies an open) and fires `email.clicked` once.
pub fn record_click(conn: &mut Connection, delivery_id: i64, target: &str) -> DomainResult<()> {
    write_tx(conn, |tx| {
        let now = Timestamp::now();
        const CLICK: &str = "UPDATE deliveries SET clicked_at = ?2, opened_at = coalesce(opened_at, ?2) WHERE id = ?1 AND clicked_at IS NULL";
        if tx.execute(CLICK, (delivery_id, &now))? == 1 {
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
        let subscriber = subscribers::get(tx, d.newsletter_id, subscriber_id)?;
        if subscriber.status != Status::Unsubscribed {
            let now = Timestamp::now();
            subscribers::set_status(tx, &subscriber, Status::Unsubscribed, now)?;
            tx.execute("UPDATE deliveries SET unsubscribed_at = coalesce(unsubscribed_at, ?2) WHERE id = ?1", (delivery_id, &now))?;
            events::record(tx, d.newsletter_id, "email.unsubscribed", d.event_data())?;
        }
        Ok(d)
    })
}

/// A hard bounce of one delivery: the delivery is `bounced`, the subscriber `bounced`, and
/// `email.bounced` fires. Called by the sender on a 5xx and by bounce reports.
pub fn bounce(conn: &Connection, delivery_id: i64, reason: &str) -> DomainResult<()> {
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
    events::record(conn, d.newsletter_id, "email.bounced", d.event_data())?;
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
    let email = super::email::EmailAddress::parse(email).map_err(|m| {
        DomainError::Invalid(
            super::ErrorCode::InvalidEmail,
            super::FieldErrors::single("email", m),
        )
    })?;
    write_tx(conn, |tx| {
        // Through the subscriber (its address never changes, and its deliveries carry it):
        // two index lookups, where matching deliveries by address would read them all.
        const LATEST: &str =
            "SELECT d.id FROM subscribers s JOIN deliveries d ON d.subscriber_id = s.id
             WHERE s.newsletter_id = ?1 AND s.email = ?2 ORDER BY d.id DESC LIMIT 1";
        let latest: Option<i64> = tx
            .query_row(LATEST, (newsletter_id, email.as_str()), |r| r.get(0))
            .optional()?;
        match latest {
            Some(id) => bounce(tx, id, reason),
            None => {
                const FIND: &str =
                    "SELECT id FROM subscribers WHERE newsletter_id = ?1 AND email = ?2";
                let id: i64 = tx
                    .query_row(FIND, (newsletter_id, email.as_str()), |r| r.get(0))
                    .optional()?
                    .ok_or(DomainError::NotFound("subscriber"))?;
                let subscriber = subscribers::get(tx, newsletter_id, id)?;
                subscribers::set_status(tx, &subscriber, Status::Bounced, Timestamp::now())?;
                Ok(())
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
