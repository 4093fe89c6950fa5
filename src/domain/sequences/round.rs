//! The sequences round, run every minute by the `advance_sequences` job: stamps the entries
//! the tag trigger recorded (their wait starts now), then, per step of each live sequence,
//! queues the send of every reader whose wait for it is over, in short batches, each reader
//! moved to `queued` in the transaction that queues their send, so nobody is queued twice.
//! Readers past the last step (steps were deleted) are completed. Only newsletters that may
//! mail (active, on the paid tier) are served; the others' readers wait.

use rusqlite::Connection;

use super::Status;
use crate::clock::{self, Timestamp};
use crate::domain::DomainResult;
use crate::domain::newsletters::{self, Status as NewsletterStatus, Tier};
use crate::store::{jobs, write_tx};

/// Readers queued (or stamped) per transaction.
pub const BATCH: i64 = 500;

/// Starts the wait of up to [`BATCH`] readers entered by a tag; returns how many.
pub fn stamp(conn: &mut Connection) -> DomainResult<usize> {
    const SQL: &str = "UPDATE sequence_enrollments SET waiting_since = ?1 WHERE id IN (
             SELECT id FROM sequence_enrollments WHERE state = 'active' AND waiting_since IS NULL LIMIT ?2)";
    write_tx(conn, |tx| Ok(tx.execute(SQL, (Timestamp::now(), BATCH))?))
}

/// One pass over the live sequences: queues at most [`BATCH`] readers per step and
/// transaction. Returns how many were queued or completed.
pub fn queue_due(conn: &mut Connection) -> DomainResult<usize> {
    const LIVE: &str =
        "SELECT q.id, q.newsletter_id FROM sequences q JOIN newsletters n ON n.id = q.newsletter_id
         WHERE q.status = ?1 AND n.status = ?2 AND n.tier = ?3 ORDER BY q.id";
    let live: Vec<(i64, i64)> = conn
        .prepare_cached(LIVE)?
        .query_map((Status::Live, NewsletterStatus::Active, Tier::Paid), |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?
        .collect::<Result<_, _>>()?;
    let now = Timestamp::from(clock::now());
    let mut moved = 0;
    for (sequence_id, newsletter_id) in live {
        let zone = newsletters::get(conn, newsletter_id)?.time_zone;
        let steps = super::steps(conn, sequence_id)?;
        for step in &steps {
            let Some(since) = step.wait.ready_if_since(now, &zone) else {
                continue;
            };
            loop {
                let queued = queue_batch(conn, sequence_id, step.position, &since)?;
                moved += queued;
                if (queued as i64) < BATCH {
                    break;
                }
            }
        }
        moved += complete_past_end(conn, sequence_id, steps.len() as i64)?;
    }
    Ok(moved)
}

/// Queues the send of the next step to up to [`BATCH`] readers of sequence `sequence_id`
/// waiting for step `position` since `since` or earlier. Read first, so a round with nothing
/// due takes no write lock; each reader is queued only if still waiting when written.
fn queue_batch(
    conn: &mut Connection,
    sequence_id: i64,
    position: i64,
    since: &Timestamp,
) -> DomainResult<usize> {
    const DUE: &str = "SELECT id FROM sequence_enrollments
         WHERE sequence_id = ?1 AND reached = ?2 AND state = 'active' AND waiting_since <= ?3
         ORDER BY waiting_since LIMIT ?4";
    const QUEUED: &str = "UPDATE sequence_enrollments SET state = 'queued'
         WHERE id = ?1 AND reached = ?2 AND state = 'active'";
    let due: Vec<i64> = conn
        .prepare_cached(DUE)?
        .query_map((sequence_id, position - 1, since, BATCH), |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    if due.is_empty() {
        return Ok(0);
    }
    write_tx(conn, |tx| {
        let mut queued = 0;
        for id in &due {
            if tx.execute(QUEUED, (id, position - 1))? == 1 {
                jobs::queue_sequence_step(tx, *id)?;
                queued += 1;
            }
        }
        Ok(queued)
    })
}

/// Completes the readers of sequence `sequence_id` who reached all of its `steps` (the last
/// steps were deleted after they reached them); a read first, as in [`queue_batch`].
fn complete_past_end(conn: &mut Connection, sequence_id: i64, steps: i64) -> DomainResult<usize> {
    const ANY: &str = "SELECT EXISTS(SELECT 1 FROM sequence_enrollments
         WHERE sequence_id = ?1 AND state = 'active' AND reached >= ?2)";
    const SQL: &str = "UPDATE sequence_enrollments SET state = 'completed', ended_at = ?3 WHERE id IN (
             SELECT id FROM sequence_enrollments WHERE sequence_id = ?1 AND state = 'active' AND reached >= ?2
             LIMIT ?4)";
    let any: bool = conn.query_row(ANY, (sequence_id, steps), |r| r.get(0))?;
    if !any {
        return Ok(0);
    }
    write_tx(conn, |tx| {
        Ok(tx.execute(SQL, (sequence_id, steps, Timestamp::now(), BATCH))?)
    })
}
