//! The job table as the domain writes to it: each kind of work to do, its payload, and the
//! functions that record it inside the caller's transaction, so the work is recorded with the
//! change that caused it (or not at all). The domain calls these; the job runner (`jobs/`)
//! claims the rows and does the work, so the domain never imports the runner or the mail it
//! sends.

use rusqlite::Connection;
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
            JobKind::DeliverWebhook => 1_000,
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
