//! The job table as the runner sees it: claim atomically, finish, or retry with backoff.
//! Jobs are recorded by the domain through `store::jobs`, inside the transaction of the
//! change that caused them.

use rusqlite::{Connection, OptionalExtension};
use serde::de::DeserializeOwned;
use time::Duration;

use super::Outcome;
use crate::clock;
use crate::store::StoreError;
use crate::store::jobs::JobKind;

/// A claimed job, as the runner sees it.
#[derive(Debug, Clone)]
pub struct ClaimedJob {
    pub id: i64,
    pub kind: String,
    pub payload: String,
    pub attempts: i64,
    pub max_attempts: i64,
}

impl ClaimedJob {
    /// The payload its kind recorded; one that does not read fails the job for good.
    pub fn payload<P: DeserializeOwned>(&self) -> Result<P, Outcome> {
        serde_json::from_str(&self.payload).map_err(|e| Outcome::Fail(format!("bad payload: {e}")))
    }
}

/// Deletes up to `limit` finished (done or failed) jobs of `kind` last changed before
/// `before`; returns how many.
pub fn prune_finished(
    conn: &Connection,
    kind: JobKind,
    before: &str,
    limit: i64,
) -> Result<usize, StoreError> {
    // run_at <= updated_at for a finished job, so the index on (state, run_at) bounds the scan.
    const PRUNE: &str = "DELETE FROM jobs WHERE id IN (
         SELECT id FROM jobs WHERE state IN ('done', 'failed') AND run_at < ?2
           AND updated_at < ?2 AND kind = ?1 LIMIT ?3)";
    Ok(conn.execute(PRUNE, (kind.as_str(), before, limit))?)
}

/// Which workers run a job: webhook deliveries have threads of their own, so slow receivers
/// never hold up sending and account mail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    General,
    Webhooks,
}

/// Takes the oldest due job of `lane` and marks it running, in one statement so two runners
/// never take the same job.
pub fn claim_due(conn: &Connection, lane: Lane) -> Result<Option<ClaimedJob>, StoreError> {
    const CLAIM: &str =
        "UPDATE jobs SET state = 'running', attempts = attempts + 1, updated_at = ?1
         WHERE id = (SELECT id FROM jobs WHERE state = 'queued' AND run_at <= ?1
                     AND (kind = ?3) = ?2 ORDER BY run_at, id LIMIT 1)
         RETURNING id, kind, payload, attempts, max_attempts";
    let now = clock::now_string();
    Ok(conn
        .query_row(
            CLAIM,
            (
                &now,
                lane == Lane::Webhooks,
                JobKind::DeliverWebhook.as_str(),
            ),
            |row| {
                Ok(ClaimedJob {
                    id: row.get(0)?,
                    kind: row.get(1)?,
                    payload: row.get(2)?,
                    attempts: row.get(3)?,
                    max_attempts: row.get(4)?,
                })
            },
        )
        .optional()?)
}

pub fn mark_done(conn: &Connection, id: i64) -> Result<(), StoreError> {
    const DONE: &str =
        "UPDATE jobs SET state = 'done', last_error = NULL, updated_at = ?2 WHERE id = ?1";
    conn.execute(DONE, (id, clock::now_string()))?;
    Ok(())
}

/// Puts a failed job back in the queue after `backoff`, or marks it failed for good when it
/// has used its attempts or the failure is permanent.
pub fn mark_failed(
    conn: &Connection,
    job: &ClaimedJob,
    error: &str,
    retry_after: Option<Duration>,
) -> Result<(), StoreError> {
    const RETRY: &str = "UPDATE jobs SET state = 'queued', run_at = ?2, last_error = ?3, updated_at = ?4 WHERE id = ?1";
    const FAIL: &str =
        "UPDATE jobs SET state = 'failed', last_error = ?2, updated_at = ?3 WHERE id = ?1";
    let now = clock::now();
    match retry_after {
        Some(wait) if job.attempts < job.max_attempts => {
            conn.execute(
                RETRY,
                (job.id, clock::format(now + wait), error, clock::format(now)),
            )?;
        }
        _ => {
            conn.execute(FAIL, (job.id, error, clock::format(now)))?;
        }
    }
    Ok(())
}

/// Puts an unfinished job back in the queue for `at`, without counting a failure.
pub fn reschedule(conn: &Connection, id: i64, at: time::OffsetDateTime) -> Result<(), StoreError> {
    const AGAIN: &str =
        "UPDATE jobs SET state = 'queued', run_at = ?2, updated_at = ?3 WHERE id = ?1";
    conn.execute(AGAIN, (id, clock::format(at), clock::now_string()))?;
    Ok(())
}

/// Puts a job that could not get on (the database could not be written) back in the queue
/// for `at`, giving back the attempt its claim counted.
pub fn postpone(
    conn: &Connection,
    id: i64,
    at: time::OffsetDateTime,
    reason: &str,
) -> Result<(), StoreError> {
    const POSTPONE: &str = "UPDATE jobs SET state = 'queued', run_at = ?2, last_error = ?3,
         attempts = max(attempts - 1, 0), updated_at = ?4 WHERE id = ?1";
    conn.execute(
        POSTPONE,
        (id, clock::format(at), reason, clock::now_string()),
    )?;
    Ok(())
}

/// Jobs a crashed process left `running` go back to the queue; called once at start, before
/// the runner claims anything (only one server holds the data directory).
pub fn requeue_interrupted(conn: &Connection) -> Result<usize, StoreError> {
    const REQUEUE: &str =
        "UPDATE jobs SET state = 'queued', updated_at = ?1 WHERE state = 'running'";
    Ok(conn.execute(REQUEUE, [clock::now_string()])?)
}

/// Exponential backoff for generic jobs: 10 s, 40 s, 2.5 min, 10 min, ... capped at 1 hour.
pub fn default_backoff(attempts: i64) -> Duration {
    let secs = 10i64.saturating_mul(4i64.saturating_pow(attempts.clamp(1, 8) as u32 - 1));
    Duration::seconds(secs.min(3600))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Connection {
        crate::domain::testing::db()
    }

    #[test]
    fn claims_once_retries_and_recovers_interrupted() {
        let conn = db();
        let id = crate::store::jobs::queue_subscriber_import(&conn, 1).unwrap();
        let job = claim_due(&conn, Lane::General).unwrap().expect("due job");
        assert_eq!((job.id, job.attempts), (id, 1));
        assert!(
            claim_due(&conn, Lane::General).unwrap().is_none(),
            "a running job is not claimed twice"
        );

        mark_failed(&conn, &job, "boom", Some(Duration::seconds(-1))).unwrap();
        let again = claim_due(&conn, Lane::General)
            .unwrap()
            .expect("retried job is due");
        assert_eq!(again.attempts, 2);

        assert_eq!(requeue_interrupted(&conn).unwrap(), 1);
        let third = claim_due(&conn, Lane::General).unwrap().unwrap();
        mark_failed(&conn, &third, "permanent", None).unwrap();
        let state: String = conn
            .query_row("SELECT state FROM jobs WHERE id = ?1", [id], |r| r.get(0))
            .unwrap();
        assert_eq!(state, "failed");
        assert_eq!(default_backoff(1), Duration::seconds(10));
        assert_eq!(default_backoff(30), Duration::seconds(3600));
    }
}
