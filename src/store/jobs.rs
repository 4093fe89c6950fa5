//! The job table, all of it: each kind of work to do and its payload; the functions that
//! record a job inside the caller's transaction, so the work is recorded with the change that
//! caused it (or not at all); and the runner's side, which claims a due job atomically,
//! finishes it, or puts it back with a backoff. The domain records jobs here; the job runner
//! (`jobs/`) claims them and does the work, so the domain never imports the runner or the
//! mail it sends.

use jiff::SignedDuration;
use rusqlite::{Connection, OptionalExtension};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::StoreError;
use crate::clock;

/// The kinds of job, as the `jobs.kind` column names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobKind {
    /// One account message (confirmation, password reset, subscription opt-in).
    SendMail,
    /// One issue to every active subscriber.
    SendIssue,
    /// One attempt of one webhook delivery.
    DeliverWebhook,
    /// A CSV file uploaded in the dashboard.
    ImportSubscribers,
    /// Stores the HTML of issues saved before HTML was stored (queued by migration 0008).
    RenderContent,
    /// Deletes the webhook log past its retention; periodic.
    PruneWebhookLog,
    /// One subscriber's welcome e-mail.
    SendWelcome,
    /// One test message of an issue to one address (`domain/issues/test_send.rs`).
    SendTest,
    /// Deletes a deleted account's newsletters and everything in them, in short batches.
    PurgeAccount,
    /// Records `member.downgraded` when paid access ends by its date; periodic.
    TellMembershipLapses,
    /// Deletes a deleted custom field's values in short batches, then the field.
    DeleteFieldValues,
    /// Polls the newsletters' feeds that are due; periodic.
    PollFeeds,
    /// Queues the sequence steps that are due; periodic.
    AdvanceSequences,
    /// One sequence step to one reader.
    SendSequenceStep,
}

impl JobKind {
    pub const ALL: &'static [JobKind] = &[
        JobKind::SendMail,
        JobKind::SendIssue,
        JobKind::DeliverWebhook,
        JobKind::ImportSubscribers,
        JobKind::RenderContent,
        JobKind::PruneWebhookLog,
        JobKind::SendWelcome,
        JobKind::SendTest,
        JobKind::PurgeAccount,
        JobKind::TellMembershipLapses,
        JobKind::DeleteFieldValues,
        JobKind::PollFeeds,
        JobKind::AdvanceSequences,
        JobKind::SendSequenceStep,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::SendMail => "send_mail",
            JobKind::SendIssue => "send_issue",
            JobKind::DeliverWebhook => "deliver_webhook",
            JobKind::ImportSubscribers => "import_subscribers",
            JobKind::RenderContent => "render_content",
            JobKind::PruneWebhookLog => "prune_webhook_log",
            JobKind::SendWelcome => "send_welcome",
            JobKind::SendTest => "send_test",
            JobKind::PurgeAccount => "purge_account",
            JobKind::TellMembershipLapses => "tell_membership_lapses",
            JobKind::DeleteFieldValues => "delete_field_values",
            JobKind::PollFeeds => "poll_feeds",
            JobKind::AdvanceSequences => "advance_sequences",
            JobKind::SendSequenceStep => "send_sequence_step",
        }
    }

    /// The kind a `jobs.kind` value names; `None` for a kind this version does not know.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|kind| kind.as_str() == text)
    }

    /// How many times a job of this kind is tried before it fails for good. A send and a
    /// webhook delivery schedule their own retries (each counts an attempt), so they have
    /// room for all of them.
    fn max_attempts(self) -> i64 {
        match self {
            JobKind::SendIssue => 1_000_000,
            // A relay outage of days waits with the backoff; the reader stays queued.
            JobKind::DeliverWebhook | JobKind::SendSequenceStep => 1_000,
            // Gives up only on what will not pass by itself, and then it is run again by hand.
            JobKind::PurgeAccount | JobKind::DeleteFieldValues => 1_000,
            _ => 5,
        }
    }
}

impl std::fmt::Display for JobKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Payload of a `send_issue` job.
#[derive(Debug, Serialize, Deserialize)]
pub struct IssueSend {
    pub issue_id: i64,
}

/// Payload of a `purge_account` job.
#[derive(Debug, Serialize, Deserialize)]
pub struct AccountPurge {
    pub user_id: i64,
}

/// Queues the purge of a deleted account's data.
pub fn queue_account_purge(conn: &Connection, user_id: i64) -> Result<i64, StoreError> {
    queue(conn, JobKind::PurgeAccount, &AccountPurge { user_id })
}

/// Payload of a `delete_field_values` job.
#[derive(Debug, Serialize, Deserialize)]
pub struct FieldDeletion {
    pub field_id: i64,
}

/// Queues the deletion of a deleted custom field's values.
pub fn queue_field_deletion(conn: &Connection, field_id: i64) -> Result<i64, StoreError> {
    queue(
        conn,
        JobKind::DeleteFieldValues,
        &FieldDeletion { field_id },
    )
}

/// Payload of a `deliver_webhook` job.
#[derive(Debug, Serialize, Deserialize)]
pub struct WebhookDelivery {
    pub delivery_id: i64,
}

/// Payload of an `import_subscribers` job.
#[derive(Debug, Serialize, Deserialize)]
pub struct SubscriberImport {
    pub import_id: i64,
}

/// Payload of a `send_welcome` job: the job reads the rest when it runs.
#[derive(Debug, Serialize, Deserialize)]
pub struct WelcomeMail {
    pub subscriber_id: i64,
}

/// Payload of a `send_test` job: the issue is read and rendered when the job runs.
#[derive(Debug, Serialize, Deserialize)]
pub struct TestMail {
    pub newsletter_id: i64,
    pub issue_id: i64,
    pub to: String,
}

/// Payload of a `send_mail` job: which account message goes to whom, with its link. The
/// job composes the message when it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountMail {
    pub to: String,
    pub link: String,
    pub kind: AccountMailKind,
}

/// Who a message comes from: the display name and address of `From`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MailSender {
    pub name: String,
    pub email: String,
}

/// The account messages the service sends by itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AccountMailKind {
    /// Confirms a new account's e-mail address.
    Confirmation,
    /// A link to choose a new password.
    PasswordReset,
    /// The double opt-in of a newsletter's subscribe form, from the newsletter's sender (jobs
    /// queued before the sender was recorded go from the service's address).
    SubscriptionConfirmation {
        newsletter_name: String,
        #[serde(default)]
        sender: Option<MailSender>,
        /// Whose mail it is, so it is signed as the newsletter's sending domain once verified
        /// (absent in jobs queued before: the service's signature).
        #[serde(default)]
        newsletter_id: Option<i64>,
    },
    /// Tells an operator that a newsletter's owner asks for the paid tier; the link is the
    /// operator page.
    UpgradeRequest {
        newsletter_name: String,
        subdomain: String,
        owner_email: String,
    },
    /// Asks the new address of an account to confirm the change to it.
    EmailChange { old_email: String },
    /// Tells the old address of an account that the account moved to `new_email`; the link
    /// is the password reset page, in case it was not the owner.
    EmailChanged { new_email: String },
    /// A reader's one-time sign-in link to a newsletter's site, from the newsletter.
    ReaderSignIn {
        newsletter_name: String,
        sender: MailSender,
        newsletter_id: i64,
    },
    /// Confirms a reader's new address, from the newsletter.
    ReaderEmailChange {
        newsletter_name: String,
        sender: MailSender,
        newsletter_id: i64,
    },
}

/// Queues the send of an issue.
pub fn queue_issue_send(conn: &Connection, issue_id: i64) -> Result<i64, StoreError> {
    queue(conn, JobKind::SendIssue, &IssueSend { issue_id })
}

/// Queues an attempt of a webhook delivery.
pub fn queue_webhook_delivery(conn: &Connection, delivery_id: i64) -> Result<i64, StoreError> {
    queue(
        conn,
        JobKind::DeliverWebhook,
        &WebhookDelivery { delivery_id },
    )
}

/// Queues the import of an uploaded CSV file.
pub fn queue_subscriber_import(conn: &Connection, import_id: i64) -> Result<i64, StoreError> {
    queue(
        conn,
        JobKind::ImportSubscribers,
        &SubscriberImport { import_id },
    )
}

/// Queues an account message.
pub fn queue_account_mail(conn: &Connection, mail: &AccountMail) -> Result<i64, StoreError> {
    queue(conn, JobKind::SendMail, mail)
}

/// Queues a subscriber's welcome e-mail.
pub fn queue_welcome(conn: &Connection, subscriber_id: i64) -> Result<i64, StoreError> {
    queue(conn, JobKind::SendWelcome, &WelcomeMail { subscriber_id })
}

/// Payload of a `send_sequence_step` job: the reader's place in the sequence; the step is
/// read when the job runs.
#[derive(Debug, Serialize, Deserialize)]
pub struct SequenceStep {
    pub enrollment_id: i64,
}

/// Queues the next step of enrollment `enrollment_id`.
pub fn queue_sequence_step(conn: &Connection, enrollment_id: i64) -> Result<i64, StoreError> {
    queue(
        conn,
        JobKind::SendSequenceStep,
        &SequenceStep { enrollment_id },
    )
}

/// Queues one test message of an issue.
pub fn queue_test_send(
    conn: &Connection,
    newsletter_id: i64,
    issue_id: i64,
    to: &str,
) -> Result<i64, StoreError> {
    let mail = TestMail {
        newsletter_id,
        issue_id,
        to: to.to_string(),
    };
    queue(conn, JobKind::SendTest, &mail)
}

/// Records a job of `kind` due now.
fn queue<P: Serialize>(conn: &Connection, kind: JobKind, payload: &P) -> Result<i64, StoreError> {
    const INSERT: &str =
        "INSERT INTO jobs (kind, payload, run_at, max_attempts, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?3, ?3)";
    let payload = serde_json::to_string(payload).expect("job payloads serialise");
    conn.execute(
        INSERT,
        (
            kind.as_str(),
            payload,
            clock::now_string(),
            kind.max_attempts(),
        ),
    )?;
    Ok(conn.last_insert_rowid())
}

/// Makes the job of `kind` due now: the queued one is brought forward, or one is recorded
/// when none is queued or running (periodic jobs, which reschedule themselves, start so).
pub fn schedule_now(conn: &Connection, kind: JobKind) -> Result<(), StoreError> {
    const FORWARD: &str =
        "UPDATE jobs SET run_at = ?2, updated_at = ?2 WHERE kind = ?1 AND state = 'queued'";
    const INSERT: &str =
        "INSERT INTO jobs (kind, payload, run_at, max_attempts, created_at, updated_at)
         SELECT ?1, json_object(), ?2, ?3, ?2, ?2
         WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE kind = ?1 AND state IN ('queued', 'running'))";
    let now = clock::now_string();
    conn.execute(FORWARD, (kind.as_str(), &now))?;
    conn.execute(INSERT, (kind.as_str(), &now, kind.max_attempts()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_one_name() {
        for kind in JobKind::ALL {
            assert_eq!(JobKind::parse(kind.as_str()), Some(*kind));
        }
        assert_eq!(JobKind::parse("send_fax"), None);
    }

    /// The tests and operators read `to` and `link` of queued account mail with
    /// `json_extract`: they stay at the top of the payload.
    #[test]
    fn account_mail_payload_keeps_to_and_link_on_top() {
        let mut conn = Connection::open_in_memory().unwrap();
        super::super::migrate(&mut conn).unwrap();
        let mail = AccountMail {
            to: "a@example.com".into(),
            link: "http://x/confirm/1".into(),
            kind: AccountMailKind::SubscriptionConfirmation {
                newsletter_name: "Weekly".into(),
                sender: Some(MailSender {
                    name: "Weekly".into(),
                    email: "editor@example.com".into(),
                }),
                newsletter_id: Some(1),
            },
        };
        let id = queue_account_mail(&conn, &mail).unwrap();
        let (kind, to, link, payload): (String, String, String, String) = conn
            .query_row(
                "SELECT kind, json_extract(payload, '$.to'), json_extract(payload, '$.link'), payload
                 FROM jobs WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .unwrap();
        assert_eq!((kind.as_str(), to.as_str()), ("send_mail", "a@example.com"));
        assert_eq!(link, mail.link);
        assert_eq!(serde_json::from_str::<AccountMail>(&payload).unwrap(), mail);
    }
}

// The runner's side of the table: claim atomically, finish, retry with backoff.

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
    /// The payload its kind recorded; `Err` says why it does not read (the job then fails
    /// for good).
    pub fn payload<P: DeserializeOwned>(&self) -> Result<P, String> {
        serde_json::from_str(&self.payload).map_err(|e| format!("bad payload: {e}"))
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
    retry_after: Option<SignedDuration>,
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
pub fn reschedule(conn: &Connection, id: i64, at: jiff::Timestamp) -> Result<(), StoreError> {
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
    at: jiff::Timestamp,
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
pub fn default_backoff(attempts: i64) -> SignedDuration {
    let secs = 10i64.saturating_mul(4i64.saturating_pow(attempts.clamp(1, 8) as u32 - 1));
    SignedDuration::from_secs(secs.min(3600))
}

#[cfg(test)]
mod runner_tests {
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

        mark_failed(&conn, &job, "boom", Some(SignedDuration::from_secs(-1))).unwrap();
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
        assert_eq!(default_backoff(1), SignedDuration::from_secs(10));
        assert_eq!(default_backoff(30), SignedDuration::from_secs(3600));
    }
}
