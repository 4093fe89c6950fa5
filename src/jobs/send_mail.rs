//! Job kind `send_mail`: one account message (confirmation, password reset) to one address.

use serde::{Deserialize, Serialize};

use super::{JobContext, Outcome, queue};
use crate::mail::account::AccountMessage;
use crate::mail::{MailError, OutgoingMail};
use crate::store::StoreError;

pub const KIND: &str = "send_mail";

#[derive(Debug, Serialize, Deserialize)]
struct Payload {
    to: String,
    subject: String,
    text: String,
    html: String,
    link: String,
}

/// Queues `message` for `to` in the caller's transaction.
pub fn enqueue(
    conn: &rusqlite::Connection,
    to: &str,
    message: AccountMessage,
) -> Result<i64, StoreError> {
    let payload = Payload {
        to: to.to_string(),
        subject: message.subject,
        text: message.text,
        html: message.html,
        link: message.link,
    };
    queue::enqueue(conn, KIND, &payload)
}

pub fn run(ctx: &JobContext, rt: &tokio::runtime::Runtime, job: &queue::Job) -> Outcome {
    let payload: Payload = match serde_json::from_str(&job.payload) {
        Ok(p) => p,
        Err(e) => return Outcome::Fail(format!("bad payload: {e}")),
    };
    let mail = OutgoingMail {
        from_name: ctx.mail_from.0.clone(),
        from_email: ctx.mail_from.1.clone(),
        to: payload.to,
        subject: payload.subject,
        text: payload.text,
        html: payload.html,
        headers: vec![("Auto-Submitted".into(), "auto-generated".into())],
        message_id: None,
        primary_link: Some(payload.link),
    };
    match rt.block_on(ctx.transport.send(&mail)) {
        Ok(()) => Outcome::Done,
        Err(MailError::Permanent(e)) => Outcome::Fail(e),
        // The message went out; sending it again could give a second copy.
        Err(MailError::Unconfirmed(_)) => Outcome::Done,
        Err(e @ (MailError::Temporary(_) | MailError::Connection(_) | MailError::Abandoned(_))) => {
            Outcome::Retry(e.to_string())
        }
    }
}
