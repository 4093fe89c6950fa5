//! Webhooks: turning recorded events into signed deliveries to subscribed endpoints.

use rusqlite::Connection;

use crate::store::StoreError;

/// Queues one delivery per enabled subscription of the newsletter that wants `kind`.
/// Subscriptions arrive with the webhooks capability; until then there is nothing to do.
pub fn fan_out(
    conn: &Connection,
    newsletter_id: i64,
    event_id: i64,
    kind: &str,
) -> Result<usize, StoreError> {
    let _ = (conn, newsletter_id, event_id, kind);
    Ok(0)
}
