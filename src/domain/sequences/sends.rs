//! One step to one reader, at most once, with an issue's guarantees: the send is marked
//! (`sequence_sends`, unique per step and reader) in the commit that lets the relay take the
//! message, as an issue's delivery is made `sending`. A run after a crash that finds the mark
//! records it `unconfirmed` (it may have arrived) and never sends it again; a relay refusal
//! takes the mark back so the retry sends it. Once the outcome is recorded the reader moves
//! on: the next step's wait starts, or the sequence is complete. `sequence.step_sent` fires
//! only for a message the relay took; `sequence.completed` when the last step is reached.

use rusqlite::{Connection, OptionalExtension};
use serde_json::json;

use super::readers::State;
use crate::clock::Timestamp;
use crate::domain::DomainResult;
use crate::domain::content::merge_tags::Reader;
use crate::domain::events;
use crate::domain::newsletters::{self, Newsletter};
use crate::domain::subscribers;
use crate::store::write_tx;

crate::string_enum!(
    /// What became of one step's message to one reader.
    pub SendStatus {
        /// Marked: the relay may have it.
        Sending => "sending",
        Sent => "sent",
        /// Handed over, the answer lost; never sent again.
        Unconfirmed => "unconfirmed",
        /// Refused for good.
        Failed => "failed"
    }
);

/// A step's message ready to compose for one reader.
#[derive(Debug, Clone)]
pub struct DueStep {
    pub newsletter: Newsletter,
    pub enrollment_id: i64,
    pub sequence_id: i64,
    pub sequence_name: String,
    pub step_id: i64,
    pub position: i64,
    pub subject: String,
    pub body_markdown: String,
    pub body_html: String,
    pub subscriber_id: i64,
    pub email: String,
    /// The reader's values for the merge tags.
    pub reader: Reader,
}

/// What a queued enrollment needs now.
#[derive(Debug, Clone)]
pub enum Next {
    /// Nothing: the reader left, the sequence or the step is gone, or it was settled here.
    Nothing,
    /// A message to send.
    Send(Box<DueStep>),
}

/// The step queued enrollment `enrollment_id` is due, or [`Next::Nothing`]. A step marked by
/// a run that did not finish (a crash) is settled here as `unconfirmed`; a reader whose
/// sequence was paused, or whose newsletter may not mail now, goes back to waiting.
pub fn next(conn: &mut Connection, enrollment_id: i64) -> DomainResult<Next> {
    const ENROLLMENT: &str =
        "SELECT e.sequence_id, e.subscriber_id, e.reached, e.state, q.status, q.name,
             q.newsletter_id, s.email, s.status
         FROM sequence_enrollments e JOIN sequences q ON q.id = e.sequence_id
         JOIN subscribers s ON s.id = e.subscriber_id WHERE e.id = ?1";
    type Row = (
        i64,
        i64,
        i64,
        State,
        super::Status,
        String,
        i64,
        String,
        subscribers::Status,
    );
    let found: Option<Row> = conn
        .query_row(ENROLLMENT, [enrollment_id], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
                r.get(8)?,
            ))
        })
        .optional()?;
    let Some((
        sequence_id,
        subscriber_id,
        reached,
        state,
        status,
        name,
        newsletter_id,
        email,
        sub_status,
    )) = found
    else {
        return Ok(Next::Nothing);
    };
    if state != State::Queued || sub_status != subscribers::Status::Active {
        return Ok(Next::Nothing);
    }
    let newsletter = newsletters::get(conn, newsletter_id)?;
    let may_mail = newsletter.status == newsletters::Status::Active
        && newsletter.tier == newsletters::Tier::Paid;
    if status != super::Status::Live || !may_mail {
        const WAIT: &str =
            "UPDATE sequence_enrollments SET state = 'active' WHERE id = ?1 AND state = 'queued'";
        write_tx(conn, |tx| -> DomainResult<usize> {
            Ok(tx.execute(WAIT, [enrollment_id])?)
        })?;
        return Ok(Next::Nothing);
    }
    const STEP: &str = "SELECT p.id, p.subject, p.body_markdown, p.body_html, d.status
         FROM sequence_steps p LEFT JOIN sequence_sends d ON d.step_id = p.id AND d.subscriber_id = ?3
         WHERE p.sequence_id = ?1 AND p.position = ?2";
    let position = reached + 1;
    let step: Option<(i64, String, String, String, Option<SendStatus>)> = conn
        .query_row(STEP, (sequence_id, position, subscriber_id), |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .optional()?;
    let Some((step_id, subject, body_markdown, body_html, sent)) = step else {
        // The steps end before this one (deleted meanwhile): the reader is done.
        write_tx(conn, |tx| {
            advance(tx, enrollment_id, sequence_id, reached, false)
        })?;
        return Ok(Next::Nothing);
    };
    let due = DueStep {
        reader: subscribers::merge_reader(conn, newsletter_id, &email)?,
        newsletter,
        enrollment_id,
        sequence_id,
        sequence_name: name,
        step_id,
        position,
        subject,
        body_markdown,
        body_html,
        subscriber_id,
        email,
    };
    match sent {
        None => Ok(Next::Send(Box::new(due))),
        // Marked by a run that never recorded its outcome: it may have arrived.
        Some(SendStatus::Sending) => {
            record(conn, &due, SendStatus::Unconfirmed)?;
            Ok(Next::Nothing)
        }
        // This reader got this step before (the steps were reordered): never twice.
        Some(_) => {
            write_tx(conn, |tx| {
                advance(tx, enrollment_id, sequence_id, position, false)
            })?;
            Ok(Next::Nothing)
        }
    }
}

/// Marks the step sent to the reader, at the last moment before the relay may take it; false
/// when it must not be sent (marked already, or the reader left meanwhile).
pub fn mark(conn: &mut Connection, due: &DueStep) -> DomainResult<bool> {
    const MARK: &str = "INSERT INTO sequence_sends (step_id, subscriber_id, status, sent_at)
         SELECT ?1, ?2, 'sending', ?3 WHERE EXISTS (
             SELECT 1 FROM sequence_enrollments WHERE id = ?4 AND state = 'queued' AND reached = ?5 - 1)
         ON CONFLICT DO NOTHING";
    write_tx(conn, |tx| {
        Ok(tx.execute(
            MARK,
            (
                due.step_id,
                due.subscriber_id,
                Timestamp::now(),
                due.enrollment_id,
                due.position,
            ),
        )? == 1)
    })
}

/// Takes [`mark`] back when the relay did not take the message, so a retry sends it.
pub fn unmark(conn: &mut Connection, due: &DueStep) -> DomainResult<()> {
    const SQL: &str = "DELETE FROM sequence_sends WHERE step_id = ?1 AND subscriber_id = ?2 AND status = 'sending'";
    write_tx(conn, |tx| {
        tx.execute(SQL, (due.step_id, due.subscriber_id))?;
        Ok(())
    })
}

/// Records what became of the marked message, and moves the reader on: to the next step's
/// wait, to the end (`sequence.completed`), or out of the sequence when it was refused for
/// good.
pub fn record(conn: &mut Connection, due: &DueStep, status: SendStatus) -> DomainResult<()> {
    const OUTCOME: &str = "INSERT INTO sequence_sends (step_id, subscriber_id, status, sent_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (step_id, subscriber_id) DO UPDATE SET status = excluded.status";
    write_tx(conn, |tx| {
        tx.execute(
            OUTCOME,
            (due.step_id, due.subscriber_id, status, Timestamp::now()),
        )?;
        if status == SendStatus::Failed {
            const LEFT: &str = "UPDATE sequence_enrollments SET state = 'left', left_reason = 'failed', ended_at = ?2
                 WHERE id = ?1 AND state IN ('active', 'queued')";
            tx.execute(LEFT, (due.enrollment_id, Timestamp::now()))?;
            return Ok(());
        }
        let data = || -> DomainResult<serde_json::Value> {
            let subscriber = subscribers::get(tx, due.newsletter.id, due.subscriber_id)?;
            Ok(json!({
                "sequence": { "id": due.sequence_id, "name": due.sequence_name },
                "step": { "id": due.step_id, "position": due.position, "subject": due.subject },
                "subscriber": subscriber.event_data(),
            }))
        };
        if status == SendStatus::Sent {
            events::record(tx, due.newsletter.id, "sequence.step_sent", data()?)?;
        }
        if advance(tx, due.enrollment_id, due.sequence_id, due.position, true)? {
            events::record(tx, due.newsletter.id, "sequence.completed", data()?)?;
        }
        Ok(())
    })
}

/// Moves enrollment `id` to have reached `reached` steps, waiting from now for the next, or
/// completed when there is none; returns whether it completed. Only a reader still in the
/// sequence moves (`queued`, or `active` when `queued_only` is false).
fn advance(
    tx: &Connection,
    id: i64,
    sequence_id: i64,
    reached: i64,
    queued_only: bool,
) -> DomainResult<bool> {
    const MORE: &str =
        "SELECT EXISTS(SELECT 1 FROM sequence_steps WHERE sequence_id = ?1 AND position > ?2)";
    const MOVE: &str = "UPDATE sequence_enrollments SET reached = ?2, waiting_since = ?3,
             state = CASE WHEN ?4 THEN 'active' ELSE 'completed' END,
             ended_at = CASE WHEN ?4 THEN NULL ELSE ?3 END
         WHERE id = ?1 AND (state = 'queued' OR (state = 'active' AND NOT ?5))";
    let more: bool = tx.query_row(MORE, (sequence_id, reached), |r| r.get(0))?;
    let moved = tx.execute(MOVE, (id, reached, Timestamp::now(), more, queued_only))?;
    Ok(moved == 1 && !more)
}
