//! How a reader enters sequences (docs/automations.md, "Sequences"): one statement, recorded
//! inside the transaction of the change that triggers it (a confirmation, paid access, the
//! owner adding a reader), so the entry happens with the change or not at all. A reader
//! enters a sequence at most once; entering by a tag is the migration's trigger on
//! `subscriber_tags`, which records the same row.

use rusqlite::Connection;

use super::StoreError;
use crate::clock::Timestamp;

/// Enters subscriber `subscriber_id` (when active) into every live sequence of
/// `newsletter_id` started by a confirmed subscription, its wait starting at `now`. A
/// sequence without steps of its own (the welcome sequence holding only the welcome e-mail)
/// is not entered.
pub fn enter_on_confirmation(
    conn: &Connection,
    newsletter_id: i64,
    subscriber_id: i64,
    now: &Timestamp,
) -> Result<usize, StoreError> {
    enter_by_trigger(conn, newsletter_id, subscriber_id, "confirmed", now)
}

/// [`enter_on_confirmation`] for the sequences started by paid access.
pub fn enter_on_paid_access(
    conn: &Connection,
    newsletter_id: i64,
    subscriber_id: i64,
    now: &Timestamp,
) -> Result<usize, StoreError> {
    enter_by_trigger(conn, newsletter_id, subscriber_id, "became_paid", now)
}

fn enter_by_trigger(
    conn: &Connection,
    newsletter_id: i64,
    subscriber_id: i64,
    trigger: &str,
    now: &Timestamp,
) -> Result<usize, StoreError> {
    const SQL: &str = "INSERT OR IGNORE INTO sequence_enrollments (sequence_id, subscriber_id, waiting_since)
         SELECT q.id, s.id, ?4 FROM sequences q JOIN subscribers s ON s.newsletter_id = q.newsletter_id
         WHERE q.newsletter_id = ?1 AND q.trigger = ?3 AND q.status = 'live'
             AND s.id = ?2 AND s.status = 'active'
             AND EXISTS (SELECT 1 FROM sequence_steps p WHERE p.sequence_id = q.id)";
    Ok(conn.execute(SQL, (newsletter_id, subscriber_id, trigger, now))?)
}

/// Enters subscriber `subscriber_id` into sequence `sequence_id` whatever starts it (the
/// owner's choice); false when they were in it already, or are not an active subscriber of
/// its newsletter.
pub fn enter_one(
    conn: &Connection,
    sequence_id: i64,
    subscriber_id: i64,
    now: &Timestamp,
) -> Result<bool, StoreError> {
    const SQL: &str = "INSERT OR IGNORE INTO sequence_enrollments (sequence_id, subscriber_id, waiting_since)
         SELECT q.id, s.id, ?3 FROM sequences q JOIN subscribers s ON s.newsletter_id = q.newsletter_id
         WHERE q.id = ?1 AND s.id = ?2 AND s.status = 'active'";
    Ok(conn.execute(SQL, (sequence_id, subscriber_id, now))? == 1)
}
