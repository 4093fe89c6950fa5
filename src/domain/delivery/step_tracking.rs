//! Opens and clicks of sequence steps (`tracking::step_key` in their links): the first open
//! of each send, told apart as automatic or a person's as an issue's are
//! ([`tracking::is_automatic`]), and the first click by a person. The step's counters follow
//! by the migration's trigger; no event is fired (the events name issue deliveries).

use rusqlite::{Connection, OptionalExtension};

use super::tracking::is_automatic;
use crate::clock::Timestamp;
use crate::domain::DomainResult;
use crate::store::write_tx;

/// The newsletter whose step `step_id` went to `subscriber_id`, if it went.
pub fn newsletter_of(
    conn: &Connection,
    step_id: i64,
    subscriber_id: i64,
) -> DomainResult<Option<i64>> {
    const SQL: &str = "SELECT q.newsletter_id FROM sequence_sends d
         JOIN sequence_steps p ON p.id = d.step_id JOIN sequences q ON q.id = p.sequence_id
         WHERE d.step_id = ?1 AND d.subscriber_id = ?2";
    Ok(conn
        .query_row(SQL, (step_id, subscriber_id), |r| r.get(0))
        .optional()?)
}

fn sent_at(conn: &Connection, step_id: i64, subscriber_id: i64) -> DomainResult<Option<Timestamp>> {
    const SQL: &str =
        "SELECT sent_at FROM sequence_sends WHERE step_id = ?1 AND subscriber_id = ?2";
    Ok(conn
        .query_row(SQL, (step_id, subscriber_id), |r| r.get(0))
        .optional()?)
}

/// Notes an open of the step's mail from `client`: the first open, and a person's after
/// only automatic ones.
pub fn record_open(
    conn: &mut Connection,
    step_id: i64,
    subscriber_id: i64,
    client: Option<std::net::IpAddr>,
) -> DomainResult<()> {
    write_tx(conn, |tx| {
        let now = Timestamp::now();
        let automatic = is_automatic(client, sent_at(tx, step_id, subscriber_id)?, now);
        const OPEN: &str = "UPDATE sequence_sends
             SET opened_auto = CASE WHEN opened_at IS NULL THEN ?3 ELSE opened_auto AND ?3 END,
                 opened_at = coalesce(opened_at, ?4)
             WHERE step_id = ?1 AND subscriber_id = ?2";
        tx.execute(OPEN, (step_id, subscriber_id, automatic, &now))?;
        Ok(())
    })
}

/// Notes a click: an open too (a click implies one), and the first click when a person's
/// (a scanner following links on arrival is set aside).
pub fn record_click(
    conn: &mut Connection,
    step_id: i64,
    subscriber_id: i64,
    client: Option<std::net::IpAddr>,
) -> DomainResult<()> {
    write_tx(conn, |tx| {
        let now = Timestamp::now();
        let automatic = is_automatic(client, sent_at(tx, step_id, subscriber_id)?, now);
        const CLICK: &str = "UPDATE sequence_sends
             SET opened_auto = CASE WHEN opened_at IS NULL THEN ?3 ELSE opened_auto AND ?3 END,
                 opened_at = coalesce(opened_at, ?4),
                 clicked_at = CASE WHEN ?3 THEN clicked_at ELSE coalesce(clicked_at, ?4) END
             WHERE step_id = ?1 AND subscriber_id = ?2";
        tx.execute(CLICK, (step_id, subscriber_id, automatic, &now))?;
        Ok(())
    })
}
