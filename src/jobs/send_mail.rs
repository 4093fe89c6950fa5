//! Job kind `send_mail`: one account message (confirmation, password reset, subscription
//! opt-in, an upgrade request told to an operator) to one address. The domain records which message, its link and, for an opt-in, the
//! newsletter's sender; the message is composed here, when the job runs.

use serde::Deserialize;

use super::{ClaimedJob, Job, JobContext, Outcome};
use crate::domain::DomainError;
use crate::domain::newsletters;
use crate::mail::account::{self, AccountMessage};
use crate::mail::{OutgoingMail, Transport};
use crate::store::jobs::{AccountMail, AccountMailKind, JobKind, MailSender};

pub struct SendMail;

/// A `send_mail` payload: what this version records, or the message composed in full that
/// versions before it recorded (such a job may still be queued after an upgrade).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Recorded {
    Mail(AccountMail),
    Composed {
        to: String,
        subject: String,
        text: String,
        html: String,
        link: String,
    },
}

impl Recorded {
    /// The newsletter whose mail this is (an opt-in); `None` for the service's own mail.
    fn newsletter_id(&self) -> Option<i64> {
        match self {
            Recorded::Mail(AccountMail {
                kind: AccountMailKind::SubscriptionConfirmation { newsletter_id, .. },
                ..
            }) => *newsletter_id,
            Recorded::Mail(AccountMail {
                kind:
                    AccountMailKind::ReaderSignIn { newsletter_id, .. }
                    | AccountMailKind::ReaderEmailChange { newsletter_id, .. },
                ..
            }) => Some(*newsletter_id),
            _ => None,
        }
    }

    /// The recipient, the message, and its sender when it is not the service.
    fn compose(self) -> (String, AccountMessage, Option<MailSender>) {
        match self {
            Recorded::Mail(AccountMail { to, link, kind }) => match kind {
                AccountMailKind::Confirmation => (to, account::confirmation(&link), None),
                AccountMailKind::PasswordReset => (to, account::password_reset(&link), None),
                AccountMailKind::SubscriptionConfirmation {
                    newsletter_name,
                    sender,
                    ..
                } => (
                    to,
                    account::subscription_confirmation(&newsletter_name, &link),
                    sender,
                ),
                AccountMailKind::ReaderSignIn {
                    newsletter_name,
                    sender,
                    ..
                } => (
                    to,
                    account::reader_sign_in(&newsletter_name, &link),
                    Some(sender),
                ),
                AccountMailKind::ReaderEmailChange {
                    newsletter_name,
                    sender,
                    ..
                } => (
                    to,
                    account::reader_email_change(&newsletter_name, &link),
                    Some(sender),
                ),
                AccountMailKind::EmailChange { old_email } => {
                    (to, account::email_change(&old_email, &link), None)
                }
                AccountMailKind::EmailChanged { new_email } => {
                    (to, account::email_changed(&new_email, &link), None)
                }
                AccountMailKind::UpgradeRequest {
                    newsletter_name,
                    subdomain,
                    owner_email,
                } => (
                    to,
                    account::upgrade_request(&newsletter_name, &subdomain, &owner_email, &link),
                    None,
                ),
            },
            Recorded::Composed {
                to,
                subject,
                text,
                html,
                link,
            } => (
                to,
                AccountMessage {
                    subject,
                    text,
                    html,
                    link,
                },
                None,
            ),
        }
    }
}

impl Job for SendMail {
    fn kind(&self) -> JobKind {
        JobKind::SendMail
    }

    fn run(&self, ctx: &JobContext, rt: &tokio::runtime::Runtime, job: &ClaimedJob) -> Outcome {
        let recorded = match job.payload::<Recorded>() {
            Ok(recorded) => recorded,
            Err(bad) => return Outcome::Fail(bad),
        };
        let transport = match recorded.newsletter_id() {
            Some(id) => match newsletter_transport(ctx, rt, id) {
                Ok(transport) => transport,
                Err(e) => return Outcome::Retry(e),
            },
            None => ctx.transport.clone(),
        };
        let (to, message, sender) = recorded.compose();
        let (from_name, from_email) = match sender {
            Some(MailSender { name, email }) => (name, email),
            None => ctx.mail_from.clone(),
        };
        let mail = OutgoingMail {
            from_name,
            from_email,
            to,
            subject: message.subject,
            text: message.text,
            html: message.html,
            headers: vec![("Auto-Submitted".into(), "auto-generated".into())],
            message_id: None,
            primary_link: Some(message.link),
        };
        Outcome::of_one_message(rt.block_on(transport.send(&mail)))
    }
}

/// The transport of newsletter `id`'s mail ([`JobContext::newsletter_transport`]); the
/// service's own when the newsletter is gone.
fn newsletter_transport(
    ctx: &JobContext,
    rt: &tokio::runtime::Runtime,
    id: i64,
) -> Result<Transport, String> {
    let found = newsletters::get(&*ctx.pool.get().map_err(|e| e.to_string())?, id);
    match found {
        Ok(newsletter) => ctx
            .newsletter_transport(rt, &newsletter)
            .map_err(|e| e.to_string()),
        Err(DomainError::NotFound(_)) => Ok(ctx.transport.clone()),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job queued by a version that recorded the whole message still runs: it sends what
    /// was recorded.
    #[test]
    fn reads_the_composed_payload_of_earlier_versions() {
        let earlier = account::password_reset("http://localhost/passwords/t/edit");
        let payload = serde_json::json!({
            "to": "a@example.com",
            "subject": earlier.subject,
            "text": earlier.text,
            "html": earlier.html,
            "link": earlier.link,
        });
        let recorded: Recorded = serde_json::from_value(payload).unwrap();
        let (to, message, sender) = recorded.compose();
        assert_eq!(to, "a@example.com");
        assert_eq!(sender, None);
        assert_eq!(message.subject, "Reset your Broadsheet password");
        assert_eq!(message.text, earlier.text);
        assert_eq!(message.html, earlier.html);
        assert_eq!(message.link, earlier.link);
    }

    /// An opt-in queued before the sender was recorded goes from the service's address.
    #[test]
    fn an_opt_in_queued_without_a_sender_has_none() {
        let payload = serde_json::json!({
            "to": "c@example.com",
            "link": "http://n.localhost/subscribe/confirm/t",
            "kind": {"subscription_confirmation": {"newsletter_name": "Weekly"}},
        });
        let recorded: Recorded = serde_json::from_value(payload).unwrap();
        let (_, message, sender) = recorded.compose();
        assert_eq!(message.subject, "Confirm your subscription to Weekly");
        assert_eq!(sender, None);
    }

    #[test]
    fn composes_the_recorded_kind_with_its_link() {
        let mail = AccountMail {
            to: "b@example.com".into(),
            link: "http://n.localhost/subscribe/confirm/t".into(),
            kind: AccountMailKind::SubscriptionConfirmation {
                newsletter_name: "Weekly Notes".into(),
                sender: Some(MailSender {
                    name: "Weekly Notes".into(),
                    email: "editor@example.org".into(),
                }),
                newsletter_id: Some(1),
            },
        };
        let recorded: Recorded =
            serde_json::from_str(&serde_json::to_string(&mail).unwrap()).unwrap();
        let (to, message, sender) = recorded.compose();
        assert_eq!(to, "b@example.com");
        assert_eq!(sender.unwrap().email, "editor@example.org");
        assert_eq!(message.subject, "Confirm your subscription to Weekly Notes");
        assert!(message.text.contains(&mail.link));
        assert_eq!(message.link, mail.link);
    }
}
