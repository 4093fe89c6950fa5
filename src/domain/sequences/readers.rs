//! A sequence's readers: entering by the owner's hand, stopping one, and where each is
//! (`sequence_enrollments`). Entering by a trigger is `store::sequence_entries` (inside the
//! change's transaction) and the migration's triggers on tags and on leaving the list.

use rusqlite::{Connection, OptionalExtension};

use crate::clock::Timestamp;
use crate::domain::subscribers::{self, Status as SubscriberStatus};
use crate::domain::{DomainError, DomainResult, ErrorCode};
use crate::store::{sequence_entries, write_tx};

crate::string_enum!(
    /// Where a reader is in a sequence.
    pub State {
        /// Waiting for their next step.
        Active => "active",
        /// Their next step's send is queued.
        Queued => "queued",
        /// They got every step.
        Completed => "completed",
        /// They left before the end.
        Left => "left"
    }
);

crate::string_enum!(
    /// Why a reader left a sequence.
    pub LeftReason {
        Unsubscribed => "unsubscribed",
        TagAdded => "tag_added",
        TagRemoved => "tag_removed",
        Stopped => "stopped",
        /// The relay refused a step for good.
        Failed => "failed"
    }
);

/// One reader in one sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enrollment {
    pub id: i64,
    pub sequence_id: i64,
    pub subscriber_id: i64,
    /// How many steps they have reached.
    pub reached: i64,
    pub state: State,
    pub waiting_since: Option<Timestamp>,
    pub left_reason: Option<LeftReason>,
}

const SELECT: &str =
    "SELECT id, sequence_id, subscriber_id, reached, state, waiting_since, left_reason
     FROM sequence_enrollments WHERE sequence_id = ?1 AND subscriber_id = ?2";

fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Enrollment> {
    Ok(Enrollment {
        id: r.get(0)?,
        sequence_id: r.get(1)?,
        subscriber_id: r.get(2)?,
        reached: r.get(3)?,
        state: r.get(4)?,
        waiting_since: r.get(5)?,
        left_reason: r.get(6)?,
    })
}

/// Where subscriber `subscriber_id` is in sequence `sequence_id`, if they ever entered.
pub fn enrollment(
    conn: &Connection,
    sequence_id: i64,
    subscriber_id: i64,
) -> DomainResult<Option<Enrollment>> {
    Ok(conn
        .query_row(SELECT, (sequence_id, subscriber_id), from_row)
        .optional()?)
}

/// The owner adds subscriber `subscriber_id` to sequence `sequence_id`, whatever its trigger.
/// Refused when the subscriber is not active, or has been in the sequence before (a reader
/// goes through a sequence once).
pub fn add(
    conn: &mut Connection,
    newsletter_id: i64,
    sequence_id: i64,
    subscriber_id: i64,
) -> DomainResult<Enrollment> {
    write_tx(conn, |tx| {
        crate::domain::newsletters::get(tx, newsletter_id)?.ensure_writable()?;
        super::get(tx, newsletter_id, sequence_id)?;
        let subscriber = match subscribers::get(tx, newsletter_id, subscriber_id) {
            Ok(s) => s,
            Err(DomainError::NotFound(_)) => {
                return Err(DomainError::invalid(
                    "subscriber_id",
                    "is no subscriber of this newsletter",
                ));
            }
            Err(other) => return Err(other),
        };
        if subscriber.status != SubscriberStatus::Active {
            return Err(DomainError::rejected(
                ErrorCode::InvalidState,
                format!(
                    "Only active subscribers enter a sequence; this one is {}",
                    subscriber.status
                ),
            ));
        }
        if !sequence_entries::enter_one(tx, sequence_id, subscriber_id, &Timestamp::now())? {
            return Err(DomainError::rejected(
                ErrorCode::InvalidState,
                "This subscriber is in this sequence already, or went through it: a reader goes through a sequence once",
            ));
        }
        enrollment(tx, sequence_id, subscriber_id)?.ok_or(DomainError::NotFound("enrollment"))
    })
}

/// The owner stops subscriber `subscriber_id` in sequence `sequence_id`: no further step goes
/// to them (a step already handed to the relay is not called back).
pub fn stop(
    conn: &mut Connection,
    newsletter_id: i64,
    sequence_id: i64,
    subscriber_id: i64,
) -> DomainResult<Enrollment> {
    const STOP: &str =
        "UPDATE sequence_enrollments SET state = 'left', left_reason = 'stopped', ended_at = ?3
         WHERE sequence_id = ?1 AND subscriber_id = ?2 AND state IN ('active', 'queued')";
    write_tx(conn, |tx| {
        super::get(tx, newsletter_id, sequence_id)?;
        tx.execute(STOP, (sequence_id, subscriber_id, Timestamp::now()))?;
        enrollment(tx, sequence_id, subscriber_id)?
            .ok_or(DomainError::NotFound("subscriber in this sequence"))
    })
}

/// The id of the newsletter's subscriber with address `email` (as the owner types it),
/// refused under `email` when there is none.
fn subscriber_by_email(conn: &Connection, newsletter_id: i64, email: &str) -> DomainResult<i64> {
    let typed = email.trim().to_lowercase();
    if typed.is_empty() {
        return Err(DomainError::invalid("email", "can't be blank"));
    }
    subscribers::find_by_email(conn, newsletter_id, &typed)?
        .map(|s| s.id)
        .ok_or_else(|| DomainError::invalid("email", "is no subscriber of this newsletter"))
}

/// [`add`] for the subscriber with address `email` (the dashboard's form).
pub fn add_by_email(
    conn: &mut Connection,
    newsletter_id: i64,
    sequence_id: i64,
    email: &str,
) -> DomainResult<Enrollment> {
    let id = subscriber_by_email(conn, newsletter_id, email)?;
    add(conn, newsletter_id, sequence_id, id)
}

/// [`stop`] for the subscriber with address `email`; refused when they are not in the
/// sequence, or have completed or left it already.
pub fn stop_by_email(
    conn: &mut Connection,
    newsletter_id: i64,
    sequence_id: i64,
    email: &str,
) -> DomainResult<Enrollment> {
    let id = subscriber_by_email(conn, newsletter_id, email)?;
    match enrollment(conn, sequence_id, id)? {
        Some(e) if matches!(e.state, State::Active | State::Queued) => {
            stop(conn, newsletter_id, sequence_id, id)
        }
        Some(_) => Err(DomainError::invalid(
            "email",
            "has completed or left this sequence already",
        )),
        None => Err(DomainError::invalid("email", "is not in this sequence")),
    }
}
