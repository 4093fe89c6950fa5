//! Webhook subscriptions (at most 16 per newsletter) and the bookkeeping of their deliveries:
//! fan-out of an event inside the transaction that recorded it, attempts, retries with
//! polynomial backoff, counting failed deliveries and disabling a subscription after 10.
//! The HTTP side (signing, the SSRF guard, the POST) is in `crate::webhooks`.

use jiff::SignedDuration;
use rusqlite::{Connection, OptionalExtension, Row};
use serde_json::{Value, json};

use crate::clock::{self, Timestamp};
use crate::domain::events::envelope;
use crate::domain::values::web_url::{self, Schemes};
use crate::domain::{DomainError, DomainResult, ErrorCode, FieldErrors};
use crate::store::write_tx;

/// Subscriptions one newsletter may have.
pub const MAX_SUBSCRIPTIONS: i64 = 16;
/// Retries after the first attempt; the delivery is `failed` after the last.
pub const MAX_RETRIES: i64 = 3;
/// Failed deliveries in a row that disable a subscription.
pub const DISABLE_AFTER: i64 = 10;
/// A subscription's URL, in characters once trimmed.
pub const URL_MAX: usize = 2000;

/// A subscription as owners see it (never with its secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    pub id: i64,
    pub newsletter_id: i64,
    pub url: String,
    pub events: Vec<String>,
    pub enabled: bool,
    pub consecutive_failures: i64,
    pub disabled_reason: Option<String>,
    pub created_at: Timestamp,
}

/// Fields of a new subscription.
#[derive(Debug, Clone, Default)]
pub struct NewSubscription {
    pub url: String,
    pub events: Vec<String>,
}

/// A PATCH: absent fields stay as they are.
#[derive(Debug, Clone, Default)]
pub struct Changes {
    pub url: Option<String>,
    pub events: Option<Vec<String>>,
    pub enabled: Option<bool>,
}

/// Decides whether a URL may receive webhooks (the SSRF guard); `Err` says why not.
pub type UrlPolicy<'a> = &'a dyn Fn(&str) -> Result<(), String>;

macro_rules! select_subscription {
    ($tail:literal) => {
        concat!(
            "SELECT id, newsletter_id, url, events, enabled, consecutive_failures, disabled_reason, created_at
             FROM webhook_subscriptions ",
            $tail
        )
    };
}

fn from_row(r: &Row<'_>) -> rusqlite::Result<Subscription> {
    let events: String = r.get(3)?;
    Ok(Subscription {
        id: r.get(0)?,
        newsletter_id: r.get(1)?,
        url: r.get(2)?,
        events: serde_json::from_str(&events).unwrap_or_default(),
        enabled: r.get(4)?,
        consecutive_failures: r.get(5)?,
        disabled_reason: r.get(6)?,
        created_at: r.get(7)?,
    })
}

/// A new signing secret in the Standard Webhooks form: `whsec_` and 32 random bytes, base64.
fn new_secret() -> String {
    use base64::Engine;
    let mut key = [0u8; 32];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut key);
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(key)
    )
}

fn clean_url(errors: &mut FieldErrors, raw: &str, policy: UrlPolicy<'_>) -> String {
    if raw.trim().is_empty() {
        errors.add("url", "can't be blank");
        return String::new();
    }
    match web_url::check(raw, Schemes::HttpOrHttps, URL_MAX) {
        Ok(url) => {
            if let Err(reason) = policy(&url) {
                errors.add("url", reason);
            }
            url
        }
        Err(problem) => {
            errors.add(
                "url",
                problem.message(URL_MAX, "must be an absolute http or https URL"),
            );
            raw.trim().to_string()
        }
    }
}

fn clean_events(errors: &mut FieldErrors, raw: &[String]) -> Vec<String> {
    let mut events: Vec<String> = Vec::new();
    for name in raw {
        let name = name.trim();
        if !envelope::KINDS.contains(&name) {
            errors.add(
                "events",
                format!(
                    "{name:?} is not an event; choose from {}",
                    envelope::KINDS.join(", ")
                ),
            );
        } else if !events.iter().any(|e| e == name) {
            events.push(name.to_string());
        }
    }
    if raw.is_empty() {
        errors.add("events", "must name at least one event");
    }
    events
}

pub fn list(conn: &Connection, newsletter_id: i64) -> DomainResult<Vec<Subscription>> {
    const SQL: &str = select_subscription!("WHERE newsletter_id = ?1 ORDER BY id");
    let mut stmt = conn.prepare_cached(SQL)?;
    let rows = stmt.query_map([newsletter_id], from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub fn get(conn: &Connection, newsletter_id: i64, id: i64) -> DomainResult<Subscription> {
    const SQL: &str = select_subscription!("WHERE newsletter_id = ?1 AND id = ?2");
    conn.query_row(SQL, [newsletter_id, id], from_row)
        .optional()?
        .ok_or(DomainError::NotFound("webhook subscription"))
}

/// Creates a subscription; returns it with its secret, the only time the secret is shown.
pub fn create(
    conn: &mut Connection,
    newsletter_id: i64,
    input: &NewSubscription,
    policy: UrlPolicy<'_>,
) -> DomainResult<(Subscription, String)> {
    let mut errors = FieldErrors::new();
    let url = clean_url(&mut errors, &input.url, policy);
    let events = clean_events(&mut errors, &input.events);
    errors.into_result()?;
    write_tx(conn, |tx| {
        const COUNT: &str = "SELECT count(*) FROM webhook_subscriptions WHERE newsletter_id = ?1";
        let count: i64 = tx.query_row(COUNT, [newsletter_id], |r| r.get(0))?;
        if count >= MAX_SUBSCRIPTIONS {
            return Err(DomainError::rejected(
                ErrorCode::LimitReached,
                format!("A newsletter can have at most {MAX_SUBSCRIPTIONS} webhook subscriptions"),
            ));
        }
        const INSERT: &str = "INSERT INTO webhook_subscriptions (newsletter_id, url, events, secret, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?5)";
        let secret = new_secret();
        let events = serde_json::to_string(&events).expect("strings serialise");
        tx.execute(
            INSERT,
            (newsletter_id, &url, &events, &secret, Timestamp::now()),
        )?;
        Ok((get(tx, newsletter_id, tx.last_insert_rowid())?, secret))
    })
}

/// Changes the URL, the events, or re-enables (which also clears the failure count).
pub fn update(
    conn: &mut Connection,
    newsletter_id: i64,
    id: i64,
    changes: &Changes,
    policy: UrlPolicy<'_>,
) -> DomainResult<Subscription> {
    let mut errors = FieldErrors::new();
    let url = changes
        .url
        .as_deref()
        .map(|u| clean_url(&mut errors, u, policy));
    let events = changes
        .events
        .as_deref()
        .map(|e| clean_events(&mut errors, e));
    errors.into_result()?;
    write_tx(conn, |tx| {
        let current = get(tx, newsletter_id, id)?;
        let unchanged = url.as_ref().is_none_or(|u| *u == current.url)
            && events.as_ref().is_none_or(|e| *e == current.events)
            && changes.enabled.is_none_or(|e| e == current.enabled);
        if unchanged {
            return Ok(current);
        }
        const UPDATE: &str = "UPDATE webhook_subscriptions SET url = ?2, events = ?3, enabled = ?4,
             consecutive_failures = CASE WHEN ?4 AND NOT enabled THEN 0 ELSE consecutive_failures END,
             disabled_reason = CASE WHEN ?4 THEN NULL ELSE disabled_reason END, updated_at = ?5
             WHERE id = ?1";
        let events = serde_json::to_string(events.as_ref().unwrap_or(&current.events))
            .expect("strings serialise");
        tx.execute(
            UPDATE,
            (
                id,
                url.as_ref().unwrap_or(&current.url),
                events,
                changes.enabled.unwrap_or(current.enabled),
                Timestamp::now(),
            ),
        )?;
        get(tx, newsletter_id, id)
    })
}

/// A new secret; the old one stops verifying at once (pending retries are signed anew).
pub fn rotate_secret(
    conn: &mut Connection,
    newsletter_id: i64,
    id: i64,
) -> DomainResult<(Subscription, String)> {
    write_tx(conn, |tx| {
        get(tx, newsletter_id, id)?;
        let secret = new_secret();
        const ROTATE: &str =
            "UPDATE webhook_subscriptions SET secret = ?2, updated_at = ?3 WHERE id = ?1";
        tx.execute(ROTATE, (id, &secret, Timestamp::now()))?;
        Ok((get(tx, newsletter_id, id)?, secret))
    })
}

pub fn delete(conn: &mut Connection, newsletter_id: i64, id: i64) -> DomainResult<()> {
    write_tx(conn, |tx| {
        get(tx, newsletter_id, id)?;
        tx.execute("DELETE FROM webhook_subscriptions WHERE id = ?1", [id])?;
        Ok(())
    })
}

/// Records one delivery of `body` to a subscription and queues its job.
fn queue_delivery(
    conn: &Connection,
    subscription_id: i64,
    event_id: Option<i64>,
    kind: &str,
    body: &str,
) -> DomainResult<i64> {
    const INSERT: &str = "INSERT INTO webhook_deliveries (subscription_id, event_id, uid, event, body, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)";
    let uid = format!("msg_{}", crate::domain::values::secrets::random_hex(16));
    conn.execute(
        INSERT,
        (
            subscription_id,
            event_id,
            &uid,
            kind,
            body,
            Timestamp::now(),
        ),
    )?;
    let delivery_id = conn.last_insert_rowid();
    crate::store::jobs::queue_webhook_delivery(conn, delivery_id)?;
    Ok(delivery_id)
}

/// Whether an enabled subscription of the newsletter listens to `kind`: events nobody
/// listens to are not recorded at all.
pub fn listening(conn: &Connection, newsletter_id: i64, kind: &str) -> DomainResult<bool> {
    const SQL: &str = "SELECT EXISTS (SELECT 1 FROM webhook_subscriptions s, json_each(s.events) e
         WHERE s.newsletter_id = ?1 AND s.enabled AND e.value = ?2)";
    Ok(conn
        .prepare_cached(SQL)?
        .query_row((newsletter_id, kind), |r| r.get(0))?)
}

/// Queues a delivery of the event to every enabled subscription that wants it; runs in the
/// transaction that recorded the event, so an event is never lost between the two.
pub fn fan_out(
    conn: &Connection,
    newsletter_id: i64,
    event_id: i64,
    kind: &str,
    body: &str,
) -> DomainResult<usize> {
    let mut queued = 0;
    for subscription in list(conn, newsletter_id)? {
        if subscription.enabled && subscription.events.iter().any(|e| e == kind) {
            queue_delivery(conn, subscription.id, Some(event_id), kind, body)?;
            queued += 1;
        }
    }
    Ok(queued)
}

/// Sends a sample event of `kind` to one subscription, from the dashboard.
pub fn send_test_event(
    conn: &mut Connection,
    newsletter_id: i64,
    subscription_id: i64,
    kind: &str,
) -> DomainResult<i64> {
    if !envelope::KINDS.contains(&kind) {
        return Err(DomainError::invalid("event", "is not a known event"));
    }
    write_tx(conn, |tx| {
        get(tx, newsletter_id, subscription_id)?;
        let body =
            envelope::envelope(tx, newsletter_id, kind, Timestamp::now(), sample_data(kind))?;
        queue_delivery(tx, subscription_id, None, kind, &body.to_string())
    })
}

/// Data shaped like the real event's, marked as a test.
fn sample_data(kind: &str) -> Value {
    let now = Timestamp::now();
    match kind.split('.').next() {
        Some("subscriber") => json!({
            "subscription_id": 0, "email": "test@example.com", "name": "Test Subscriber",
            "status": if kind == "subscriber.deleted" { "unsubscribed" } else { "active" },
            "subscribed_at": now, "tags": ["test"], "test": true,
        }),
        Some("issue") => json!({
            "issue_id": 0, "subject": "A test issue", "path": "a-test-issue",
            "status": if kind == "issue.published" { "published" } else { "sent" },
            "sent_at": now, "published_at": if kind == "issue.published" { json!(now) } else { Value::Null },
            "article_count": 0, "test": true,
        }),
        _ => {
            let mut data = json!({
                "delivery_id": 0, "issue_id": 0, "email": "test@example.com",
                "opened_at": if kind == "email.opened" || kind == "email.clicked" { json!(now) } else { Value::Null },
                "clicked_at": if kind == "email.clicked" { json!(now) } else { Value::Null },
                "test": true,
            });
            if kind == "email.clicked" {
                data["clicked_url"] = Value::from("https://example.com/");
            }
            data
        }
    }
}

/// Puts a finished delivery back in the queue with fresh attempts (same delivery id).
pub fn redeliver(conn: &mut Connection, newsletter_id: i64, delivery_id: i64) -> DomainResult<()> {
    write_tx(conn, |tx| {
        const OWNED: &str = "SELECT d.id FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id
             WHERE d.id = ?1 AND s.newsletter_id = ?2";
        tx.query_row(OWNED, [delivery_id, newsletter_id], |r| r.get::<_, i64>(0))
            .optional()?
            .ok_or(DomainError::NotFound("webhook delivery"))?;
        const RESET: &str =
            "UPDATE webhook_deliveries SET state = 'pending', attempts = 0, next_attempt_at = NULL,
             last_error = NULL, updated_at = ?2 WHERE id = ?1";
        tx.execute(RESET, (delivery_id, Timestamp::now()))?;
        crate::store::jobs::queue_webhook_delivery(tx, delivery_id)?;
        Ok(())
    })
}

/// How long delivered and failed webhook deliveries, and the events they carried, are kept
/// (docs/webhooks.md, "Retention"): the delivery log shows them meanwhile.
pub const RETENTION: SignedDuration = clock::days(30);

/// What one [`prune`] batch deleted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pruned {
    pub deliveries: usize,
    pub events: usize,
}

/// Deletes, in one short write transaction, up to `limit` delivered or failed deliveries whose
/// last change is more than [`RETENTION`] before `now`, and up to `limit` events recorded
/// before then that no pending delivery still carries. Pending deliveries and anything
/// younger stay. Call again while a count reaches `limit`.
pub fn prune(conn: &mut Connection, now: jiff::Timestamp, limit: i64) -> DomainResult<Pruned> {
    const DELIVERIES: &str = "DELETE FROM webhook_deliveries WHERE id IN (
         SELECT id FROM webhook_deliveries
         WHERE state IN ('delivered', 'failed') AND updated_at < ?1 LIMIT ?2)";
    // Deleting an event leaves a younger finished delivery of it in the log (event_id NULL).
    const EVENTS: &str = "DELETE FROM events WHERE id IN (
         SELECT e.id FROM events e WHERE e.created_at < ?1
           AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d
                           WHERE d.event_id = e.id AND d.state = 'pending')
         ORDER BY e.created_at LIMIT ?2)";
    let cutoff = Timestamp::from(now - RETENTION);
    write_tx(conn, |tx| {
        Ok(Pruned {
            deliveries: tx.execute(DELIVERIES, (&cutoff, limit))?,
            events: tx.execute(EVENTS, (&cutoff, limit))?,
        })
    })
}

/// A delivery as the delivery log shows it.
#[derive(Debug, Clone)]
pub struct DeliveryLog {
    pub id: i64,
    pub uid: String,
    pub event: String,
    pub state: DeliveryState,
    pub attempts: i64,
    pub response_status: Option<i64>,
    pub response_excerpt: Option<String>,
    pub last_error: Option<String>,
    pub updated_at: Timestamp,
}

/// The latest deliveries of a subscription, newest first.
pub fn recent_deliveries(
    conn: &Connection,
    newsletter_id: i64,
    subscription_id: i64,
    limit: i64,
) -> DomainResult<Vec<DeliveryLog>> {
    get(conn, newsletter_id, subscription_id)?;
    const SQL: &str = "SELECT id, uid, event, state, attempts, response_status, response_excerpt, last_error, updated_at
         FROM webhook_deliveries WHERE subscription_id = ?1 ORDER BY id DESC LIMIT ?2";
    let mut stmt = conn.prepare_cached(SQL)?;
    let rows = stmt.query_map((subscription_id, limit), log_from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// A [`DeliveryLog`] from the first nine columns of a row: id, uid, event, state, attempts,
/// response status and excerpt, last error, updated_at.
fn log_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<DeliveryLog> {
    Ok(DeliveryLog {
        id: r.get(0)?,
        uid: r.get(1)?,
        event: r.get(2)?,
        state: r.get(3)?,
        attempts: r.get(4)?,
        response_status: r.get(5)?,
        response_excerpt: r.get(6)?,
        last_error: r.get(7)?,
        updated_at: r.get(8)?,
    })
}

/// Characters of a delivery's payload its page shows. The service's envelopes are a few
/// kilobytes; this bounds the page whatever a row holds.
pub const PAYLOAD_SHOWN: i64 = 64 * 1024;

/// One delivery of the log with the payload it carries, for its own page.
#[derive(Debug, Clone)]
pub struct DeliveryDetail {
    pub log: DeliveryLog,
    pub subscription_id: i64,
    /// Where it goes: the subscription's URL.
    pub url: String,
    pub created_at: Timestamp,
    /// The payload's first [`PAYLOAD_SHOWN`] characters...
    pub payload: String,
    /// ...of this many.
    pub payload_chars: i64,
}

/// The delivery `delivery_id` of one of the newsletter's subscriptions, with the start of its
/// payload; another newsletter's is not found.
pub fn delivery_detail(
    conn: &Connection,
    newsletter_id: i64,
    delivery_id: i64,
) -> DomainResult<DeliveryDetail> {
    const SQL: &str = "SELECT d.id, d.uid, d.event, d.state, d.attempts, d.response_status,
             d.response_excerpt, d.last_error, d.updated_at, d.subscription_id, s.url,
             d.created_at, substr(d.body, 1, ?3), length(d.body)
         FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id
         WHERE d.id = ?1 AND s.newsletter_id = ?2";
    conn.query_row(SQL, (delivery_id, newsletter_id, PAYLOAD_SHOWN), |r| {
        Ok(DeliveryDetail {
            log: log_from_row(r)?,
            subscription_id: r.get(9)?,
            url: r.get(10)?,
            created_at: r.get(11)?,
            payload: r.get(12)?,
            payload_chars: r.get(13)?,
        })
    })
    .optional()?
    .ok_or(DomainError::NotFound("webhook delivery"))
}

/// What the delivery job needs for one attempt.
#[derive(Debug, Clone)]
pub struct PendingDelivery {
    pub id: i64,
    pub uid: String,
    pub event: String,
    pub body: String,
    pub url: String,
    pub secret: String,
    pub attempts: i64,
    pub subscription_enabled: bool,
}

/// The delivery if it still waits to be sent.
pub fn pending(conn: &Connection, delivery_id: i64) -> DomainResult<Option<PendingDelivery>> {
    const SQL: &str = "SELECT d.id, d.uid, d.event, d.body, s.url, s.secret, d.attempts, s.enabled
         FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id
         WHERE d.id = ?1 AND d.state = 'pending'";
    Ok(conn
        .query_row(SQL, [delivery_id], |r| {
            Ok(PendingDelivery {
                id: r.get(0)?,
                uid: r.get(1)?,
                event: r.get(2)?,
                body: r.get(3)?,
                url: r.get(4)?,
                secret: r.get(5)?,
                attempts: r.get(6)?,
                subscription_enabled: r.get(7)?,
            })
        })
        .optional()?)
}

/// How one attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// A 2xx answer.
    Acknowledged { status: u16, excerpt: String },
    /// 410 Gone: the receiver asks to be left alone; the subscription is disabled at once.
    Gone { excerpt: String },
    /// Another status, a timeout, a refused connection or a refused address.
    Failed {
        status: Option<u16>,
        excerpt: String,
        error: String,
    },
    /// The subscription was disabled meanwhile: the delivery is dropped without an attempt.
    Skipped,
}

crate::string_enum!(
    /// A delivery waits (`pending`) until it is `delivered` or has `failed` for good.
    pub DeliveryState { Pending => "pending", Delivered => "delivered", Failed => "failed" }
);

/// What one attempt leaves on its delivery row.
struct AttemptRecord<'a> {
    /// `pending` (tried again at `next_attempt_at`), `delivered` or `failed`.
    state: DeliveryState,
    attempts: i64,
    response_status: Option<u16>,
    response_excerpt: Option<&'a str>,
    last_error: Option<&'a str>,
    next_attempt_at: Option<jiff::Timestamp>,
}

impl AttemptRecord<'_> {
    fn write(&self, tx: &Connection, delivery_id: i64, now: jiff::Timestamp) -> DomainResult<()> {
        const FINISH: &str = "UPDATE webhook_deliveries SET state = ?2, attempts = ?3, response_status = ?4,
             response_excerpt = ?5, last_error = ?6, next_attempt_at = ?7,
             delivered_at = CASE WHEN ?2 = 'delivered' THEN ?8 ELSE delivered_at END, updated_at = ?8
             WHERE id = ?1";
        tx.execute(
            FINISH,
            (
                delivery_id,
                self.state,
                self.attempts,
                self.response_status,
                self.response_excerpt,
                self.last_error,
                self.next_attempt_at.map(Timestamp::from),
                Timestamp::from(now),
            ),
        )?;
        Ok(())
    }
}

/// Records an attempt; returns when to try again, or `None` when the delivery is final.
pub fn record_attempt(
    conn: &mut Connection,
    delivery_id: i64,
    attempt: &Attempt,
    retry_base: SignedDuration,
) -> DomainResult<Option<jiff::Timestamp>> {
    write_tx(conn, |tx| {
        const SUBSCRIPTION: &str =
            "SELECT subscription_id, attempts FROM webhook_deliveries WHERE id = ?1";
        let Some((subscription_id, attempts)) = tx
            .query_row(SUBSCRIPTION, [delivery_id], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
            })
            .optional()?
        else {
            return Ok(None);
        };
        let now = clock::now();
        const RESET_FAILURES: &str =
            "UPDATE webhook_subscriptions SET consecutive_failures = 0 WHERE id = ?1";
        const COUNT_FAILURE: &str = "UPDATE webhook_subscriptions SET consecutive_failures = consecutive_failures + 1,
             enabled = CASE WHEN consecutive_failures + 1 >= ?2 THEN 0 ELSE enabled END,
             disabled_reason = CASE WHEN consecutive_failures + 1 >= ?2 THEN ?3 ELSE disabled_reason END
             WHERE id = ?1";
        const DISABLE: &str =
            "UPDATE webhook_subscriptions SET enabled = 0, disabled_reason = ?2 WHERE id = ?1";
        const GONE: &str = "the endpoint answered 410 Gone";
        let attempts = attempts + 1;
        let mut next = None;
        match attempt {
            Attempt::Acknowledged { status, excerpt } => {
                AttemptRecord {
                    state: DeliveryState::Delivered,
                    attempts,
                    response_status: Some(*status),
                    response_excerpt: Some(excerpt),
                    last_error: None,
                    next_attempt_at: None,
                }
                .write(tx, delivery_id, now)?;
                tx.execute(RESET_FAILURES, [subscription_id])?;
            }
            Attempt::Gone { excerpt } => {
                AttemptRecord {
                    state: DeliveryState::Failed,
                    attempts,
                    response_status: Some(410),
                    response_excerpt: Some(excerpt),
                    last_error: Some(GONE),
                    next_attempt_at: None,
                }
                .write(tx, delivery_id, now)?;
                tx.execute(DISABLE, (subscription_id, GONE))?;
            }
            Attempt::Failed {
                status,
                excerpt,
                error,
            } => {
                let retry = attempts <= MAX_RETRIES;
                next = retry.then(|| now + retry_base * (attempts as i32).pow(4));
                AttemptRecord {
                    state: if retry {
                        DeliveryState::Pending
                    } else {
                        DeliveryState::Failed
                    },
                    attempts,
                    response_status: *status,
                    response_excerpt: Some(excerpt),
                    last_error: Some(error),
                    next_attempt_at: next,
                }
                .write(tx, delivery_id, now)?;
                if !retry {
                    tx.execute(
                        COUNT_FAILURE,
                        (
                            subscription_id,
                            DISABLE_AFTER,
                            format!("{DISABLE_AFTER} deliveries in a row failed"),
                        ),
                    )?;
                }
            }
            Attempt::Skipped => {
                AttemptRecord {
                    state: DeliveryState::Failed,
                    attempts: attempts - 1,
                    response_status: None,
                    response_excerpt: None,
                    last_error: Some("the subscription is disabled"),
                    next_attempt_at: None,
                }
                .write(tx, delivery_id, now)?;
            }
        }
        Ok(next)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::events;

    fn allow(_: &str) -> Result<(), String> {
        Ok(())
    }

    #[test]
    fn retries_then_fails_and_disables_after_ten_failed_deliveries() {
        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        let input = NewSubscription {
            url: "https://hooks.example.com/x".into(),
            events: vec!["subscriber.created".into()],
        };
        let (sub, secret) = create(&mut conn, 1, &input, &allow).unwrap();
        assert!(secret.starts_with("whsec_"));
        let failed = Attempt::Failed {
            status: Some(500),
            excerpt: "boom".into(),
            error: "500".into(),
        };
        for round in 0..DISABLE_AFTER {
            events::record(&conn, 1, "subscriber.created", json!({})).unwrap();
            let delivery: i64 = conn
                .query_row("SELECT max(id) FROM webhook_deliveries", [], |r| r.get(0))
                .unwrap();
            for n in 1..=MAX_RETRIES {
                let next =
                    record_attempt(&mut conn, delivery, &failed, SignedDuration::from_secs(30))
                        .unwrap();
                assert!(next.is_some(), "retry {n} is scheduled");
            }
            assert_eq!(
                record_attempt(&mut conn, delivery, &failed, SignedDuration::from_secs(30))
                    .unwrap(),
                None
            );
            let s = get(&conn, 1, sub.id).unwrap();
            assert_eq!(s.consecutive_failures, round + 1);
            assert_eq!(s.enabled, round + 1 < DISABLE_AFTER);
        }
        // Disabled: events no longer fan out; re-enabling resets the count.
        assert_eq!(fan_out(&conn, 1, 1, "subscriber.created", "{}").unwrap(), 0);
        let changes = Changes {
            enabled: Some(true),
            ..Changes::default()
        };
        let s = update(&mut conn, 1, sub.id, &changes, &allow).unwrap();
        assert!(s.enabled);
        assert_eq!(s.consecutive_failures, 0);
    }

    #[test]
    fn events_are_recorded_only_for_an_enabled_subscription_that_listens() {
        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        let count = |conn: &Connection, table: &str| -> i64 {
            let sql = match table {
                "events" => "SELECT count(*) FROM events",
                _ => "SELECT count(*) FROM webhook_deliveries",
            };
            conn.query_row(sql, [], |r| r.get(0)).unwrap()
        };
        assert_eq!(
            events::record(&conn, 1, "issue.sent", json!({})).unwrap(),
            None
        );
        let input = NewSubscription {
            url: "https://hooks.example.com/x".into(),
            events: vec!["issue.sent".into()],
        };
        let (sub, _) = create(&mut conn, 1, &input, &allow).unwrap();
        assert_eq!(
            events::record(&conn, 1, "issue.published", json!({})).unwrap(),
            None,
            "a kind nobody listens to"
        );
        assert!(
            events::record(&conn, 1, "issue.sent", json!({}))
                .unwrap()
                .is_some()
        );
        assert_eq!((count(&conn, "events"), count(&conn, "deliveries")), (1, 1));
        let off = Changes {
            enabled: Some(false),
            ..Changes::default()
        };
        update(&mut conn, 1, sub.id, &off, &allow).unwrap();
        assert_eq!(
            events::record(&conn, 1, "issue.sent", json!({})).unwrap(),
            None,
            "a disabled subscription"
        );
        assert_eq!(count(&conn, "events"), 1);
    }

    #[test]
    fn prune_keeps_pending_deliveries_and_everything_younger_than_the_retention() {
        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        // As on the server's connections: a pruned event lets go of its deliveries.
        conn.pragma_update(None, "foreign_keys", true).unwrap();
        let input = NewSubscription {
            url: "https://hooks.example.com/x".into(),
            events: vec!["subscriber.created".into()],
        };
        create(&mut conn, 1, &input, &allow).unwrap();
        let now = clock::now();
        let at = |days: i64| Timestamp::from(now - clock::days(days));
        // (event age, delivery state, delivery last change) in days before now.
        let rows = [
            (40, "delivered", 40), // 1: both go
            (40, "failed", 31),    // 2: both go
            (40, "pending", 40),   // 3: a pending delivery stays, and its event
            (40, "delivered", 5),  // 4: redelivered lately: stays; its event goes
            (29, "delivered", 29), // 5: younger than the retention: stays
            (29, "failed", 29),    // 6: likewise
        ];
        for (event_days, state, changed_days) in rows {
            events::record(&conn, 1, "subscriber.created", json!({})).unwrap();
            conn.execute(
                "UPDATE events SET created_at = ?1 WHERE id = (SELECT max(id) FROM events)",
                [at(event_days)],
            )
            .unwrap();
            conn.execute(
                "UPDATE webhook_deliveries SET state = ?1, created_at = ?2, updated_at = ?3
                 WHERE id = (SELECT max(id) FROM webhook_deliveries)",
                (state, at(event_days), at(changed_days)),
            )
            .unwrap();
        }
        // One row of each kind per batch: the caller repeats until a batch comes back short.
        let mut batches = Vec::new();
        loop {
            let pruned = prune(&mut conn, now, 1).unwrap();
            batches.push(pruned);
            if pruned.deliveries < 1 && pruned.events < 1 {
                break;
            }
        }
        let total = batches
            .iter()
            .fold((0, 0), |(d, e), p| (d + p.deliveries, e + p.events));
        assert_eq!(total, (2, 3));
        let ids = |sql: &str| -> Vec<i64> {
            conn.prepare(sql)
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        assert_eq!(
            ids("SELECT id FROM webhook_deliveries ORDER BY id"),
            vec![3, 4, 5, 6]
        );
        assert_eq!(ids("SELECT id FROM events ORDER BY id"), vec![3, 5, 6]);
        assert_eq!(
            ids("SELECT coalesce(event_id, 0) FROM webhook_deliveries WHERE id = 4"),
            vec![0],
            "the kept delivery keeps its body, not its pruned event"
        );
        assert!(
            pending(&conn, 3).unwrap().is_some(),
            "the pending one can still be delivered"
        );
    }

    #[test]
    fn validates_urls_events_and_the_limit() {
        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        let bad = |url: &str, events: &[&str]| NewSubscription {
            url: url.into(),
            events: events.iter().map(|e| e.to_string()).collect(),
        };
        for input in [
            bad("ftp://x.example.com", &["issue.sent"]),
            bad("/relative", &["issue.sent"]),
            bad("https://u:p@x.example.com", &["issue.sent"]),
            bad("https://x.example.com", &[]),
            bad("https://x.example.com", &["issue.exploded"]),
        ] {
            assert!(matches!(
                create(&mut conn, 1, &input, &allow),
                Err(DomainError::Invalid(..))
            ));
        }
        let private = |_: &str| Err("resolves to a private address".to_string());
        assert!(
            create(
                &mut conn,
                1,
                &bad("http://10.0.0.1/", &["issue.sent"]),
                &private
            )
            .is_err()
        );
        for _ in 0..MAX_SUBSCRIPTIONS {
            create(
                &mut conn,
                1,
                &bad("https://x.example.com", &["issue.sent"]),
                &allow,
            )
            .unwrap();
        }
        assert!(matches!(
            create(
                &mut conn,
                1,
                &bad("https://x.example.com", &["issue.sent"]),
                &allow
            ),
            Err(DomainError::Rejected(ErrorCode::LimitReached, _))
        ));
    }
}
