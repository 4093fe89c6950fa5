//! Events: recorded in the transaction of the change that caused them (so none is lost if the
//! process dies right after), then delivered to webhook subscriptions by the job runner;
//! recorded only when a subscription wants them, and pruned after
//! [`webhooks::RETENTION`](super::webhooks::RETENTION) once delivered.

use rusqlite::Connection;
use serde_json::{Value, json};

use super::DomainResult;
use crate::clock::Timestamp;

/// Every event kind of the interface.
pub const KINDS: &[&str] = &[
    "subscriber.created",
    "subscriber.updated",
    "subscriber.deleted",
    "issue.sent",
    "issue.published",
    "email.opened",
    "email.clicked",
    "email.bounced",
    "email.unsubscribed",
];

/// The envelope `{event, timestamp, newsletter: {id, name, subdomain}, data}` every webhook
/// body carries.
pub fn envelope(
    conn: &Connection,
    newsletter_id: i64,
    kind: &str,
    timestamp: Timestamp,
    data: Value,
) -> DomainResult<Value> {
    const NEWSLETTER: &str = "SELECT name, subdomain FROM newsletters WHERE id = ?1";
    let (name, subdomain): (String, String) =
        conn.query_row(NEWSLETTER, [newsletter_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(json!({
        "event": kind,
        "timestamp": timestamp,
        "newsletter": { "id": newsletter_id, "name": name, "subdomain": subdomain },
        "data": data,
    }))
}

/// Records `kind` with `data` for the newsletter and queues its webhook deliveries, all in
/// the caller's transaction; returns the event id. Events exist only to be delivered (only a
/// subscriber's data export reads them back), so when no enabled subscription of the
/// newsletter listens to `kind` nothing is recorded and the answer is `None`; callers with
/// costly `data` ask [`wanted`] first.
pub fn record(
    conn: &Connection,
    newsletter_id: i64,
    kind: &str,
    data: Value,
) -> DomainResult<Option<i64>> {
    debug_assert!(KINDS.contains(&kind), "unknown event kind {kind}");
    if !wanted(conn, newsletter_id, kind)? {
        return Ok(None);
    }
    const INSERT: &str =
        "INSERT INTO events (newsletter_id, kind, payload, created_at) VALUES (?1, ?2, ?3, ?4)";
    let now = Timestamp::now();
    let body = envelope(conn, newsletter_id, kind, now, data)?.to_string();
    conn.prepare_cached(INSERT)?
        .execute((newsletter_id, kind, &body, &now))?;
    let id = conn.last_insert_rowid();
    super::webhooks::fan_out(conn, newsletter_id, id, kind, &body)?;
    Ok(Some(id))
}

/// Whether [`record`] would record `kind` for the newsletter now.
pub fn wanted(conn: &Connection, newsletter_id: i64, kind: &str) -> DomainResult<bool> {
    super::webhooks::listening(conn, newsletter_id, kind)
}
