//! What an event is: one of the interface's kinds, in the JSON envelope every webhook body
//! carries. A leaf, so recording events (`events`) and delivering them (`webhooks`) both
//! name it without naming each other.

use rusqlite::Connection;
use serde_json::{Value, json};

use crate::clock::Timestamp;
use crate::domain::DomainResult;

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
    "member.upgraded",
    "member.downgraded",
    "member.payment_failed",
    "sequence.step_sent",
    "sequence.completed",
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
