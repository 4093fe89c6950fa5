//! Events: recorded in the transaction of the change that caused them (so none is lost if the
//! process dies right after), then delivered to webhook subscriptions by the job runner;
//! recorded only when a subscription wants them, and pruned after
//! [`webhooks::RETENTION`](crate::domain::events::webhooks::RETENTION) once delivered.

pub mod envelope;
pub mod webhooks;

pub use envelope::KINDS;

use rusqlite::Connection;
use serde_json::Value;

use crate::domain::events::envelope::envelope;

use crate::clock::Timestamp;
use crate::domain::DomainResult;

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
    let now = Timestamp::now();
    let body = envelope(conn, newsletter_id, kind, now, data)?.to_string();
    let id = store(conn, newsletter_id, kind, &body, now)?;
    crate::domain::events::webhooks::fan_out(conn, newsletter_id, id, kind, &body)?;
    Ok(Some(id))
}

/// Inserts the event whose envelope is `body`, with the subscriber it names for data
/// requests (the rule is migration 0022's): its `subscription_id`, else its delivery's
/// subscriber, else who has its address now; returns its id.
pub(super) fn store(
    conn: &Connection,
    newsletter_id: i64,
    kind: &str,
    body: &str,
    at: Timestamp,
) -> DomainResult<i64> {
    const INSERT: &str =
        "INSERT INTO events (newsletter_id, kind, payload, created_at, subscriber_id)
         VALUES (?1, ?2, ?3, ?4, CASE
             WHEN ?3 ->> '$.data.subscription_id' IS NOT NULL
                 THEN ?3 ->> '$.data.subscription_id'
             WHEN ?3 ->> '$.data.delivery_id' IS NOT NULL
                 THEN (SELECT subscriber_id FROM deliveries WHERE id = ?3 ->> '$.data.delivery_id')
             WHEN ?3 ->> '$.data.email' IS NOT NULL
                 THEN (SELECT id FROM subscribers
                       WHERE newsletter_id = ?1 AND email = ?3 ->> '$.data.email')
             END)";
    conn.prepare_cached(INSERT)?
        .execute((newsletter_id, kind, body, &at))?;
    Ok(conn.last_insert_rowid())
}

/// Whether [`record`] would record `kind` for the newsletter now.
pub fn wanted(conn: &Connection, newsletter_id: i64, kind: &str) -> DomainResult<bool> {
    crate::domain::events::webhooks::listening(conn, newsletter_id, kind)
}
