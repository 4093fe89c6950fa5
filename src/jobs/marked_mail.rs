//! One message handed to a newsletter's relay with a mark written at the last moment (the
//! welcome e-mail, a sequence step): the mark is committed when the relay may take the
//! message, as an issue's delivery is made `sending`, so a run after a crash finds it and
//! sends nothing, and a relay never delivers a message cut off before that moment. Each job
//! kind decides what its outcome means; this is the composing and the hand-over they share.

use std::cell::Cell;

use super::{JobContext, Outcome};
use crate::domain::content::{self, merge_tags::Reader};
use crate::domain::delivery::tracking::Links;
use crate::domain::newsletters::Newsletter;
use crate::domain::{DomainError, DomainResult};
use crate::mail::{Commit, Envelope, Lane, MailError, Mime, OutgoingMail, render};

/// A mail to one reader in the welcome's frame (`render::welcome`): the welcome itself, or a
/// sequence step with the reader's merge tags filled.
pub struct ReaderMail<'a> {
    pub newsletter: &'a Newsletter,
    pub subscriber_id: i64,
    pub to: &'a str,
    pub subject: &'a str,
    /// For the text part, rendered here within the budget as an issue's is.
    pub body_markdown: &'a str,
    pub body_html: &'a str,
    /// What it is, in its `Feedback-ID`.
    pub feedback: &'a str,
    pub reader: Option<&'a Reader>,
    /// The sequence step whose opens and clicks the mail's links note (when the newsletter
    /// tracks them); `None`: the welcome, untracked.
    pub tracked_step: Option<i64>,
}

/// The message of `mail`, or the outcome when its text cannot be rendered now.
pub fn compose(ctx: &JobContext, mail: &ReaderMail<'_>) -> Result<OutgoingMail, Outcome> {
    let body_text = match content::plain_text(mail.body_markdown) {
        Ok(Some(text)) => text,
        Ok(None) => return Err(Outcome::Retry("every render slot is busy".into())),
        Err(e) => return Err(Outcome::Retry(e.to_string())),
    };
    let newsletter = mail.newsletter;
    let links = Links::new(
        &newsletter.site_origin(&ctx.urls),
        newsletter.id,
        ctx.secret.clone(),
        newsletter.tracking_enabled && mail.tracked_step.is_some(),
    );
    Ok(render::welcome(&render::Welcome {
        newsletter,
        public_host: ctx.urls.public_host_name(),
        links: &links,
        subscriber_id: mail.subscriber_id,
        to: mail.to,
        subject: mail.subject,
        body_html: mail.body_html,
        body_text: &body_text,
        feedback: mail.feedback,
        reader: mail.reader,
        tracked_step: mail.tracked_step,
    }))
}

/// What the commit at the last moment found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// The message never got that far.
    NotAsked,
    /// The mark is written: the relay may take the message.
    Marked,
    /// The mark was there already, or the message is no longer wanted: nothing is sent.
    AlreadySent,
    /// The mark could not be written: nothing is sent.
    NotRecorded,
}

/// Hands `mail` to `newsletter`'s relay (signed as its sending domain once verified), calling
/// `mark` at the last moment; `what` names the message in the log. Returns the relay's answer
/// and what the mark found.
pub fn hand_over(
    ctx: &JobContext,
    rt: &tokio::runtime::Runtime,
    newsletter: &Newsletter,
    mail: &OutgoingMail,
    what: &str,
    mark: impl Fn() -> DomainResult<bool>,
) -> (Result<(), MailError>, Claim) {
    let mime = Mime {
        bytes: mail.to_mime(),
        dot_free: false,
    };
    let envelope = Envelope {
        from: &mail.from_email,
        to: &mail.to,
    };
    let transport = match ctx.newsletter_transport(rt, newsletter) {
        Ok(transport) => transport,
        Err(e) => return (Err(MailError::Temporary(e.to_string())), Claim::NotAsked),
    };
    let claim = Cell::new(Claim::NotAsked);
    let result = rt.block_on(async {
        let mut lane = Lane::new(&transport);
        lane.connect().await?;
        let sent = lane
            .send(envelope, &mime, |_| async {
                let (found, answer) = match mark() {
                    Ok(true) => (Claim::Marked, Commit::Claimed { end_written: 0 }),
                    Ok(false) => (Claim::AlreadySent, Commit::Refused),
                    Err(e) => {
                        eprintln!("{what}: cannot record the mark: {e}");
                        (Claim::NotRecorded, Commit::Refused)
                    }
                };
                claim.set(found);
                answer
            })
            .await;
        lane.close().await;
        sent
    });
    (result, claim.get())
}

/// Runs `work` on a connection of the pool.
pub fn with_db<T>(
    ctx: &JobContext,
    work: impl FnOnce(&mut rusqlite::Connection) -> DomainResult<T>,
) -> DomainResult<T> {
    let mut conn = ctx.pool.get().map_err(|e| DomainError::Store(e.into()))?;
    work(&mut conn)
}

/// A database failure before anything was handed over: wait when it passes by itself.
pub fn unrecorded(e: DomainError) -> Outcome {
    match e {
        DomainError::Store(e) if super::passes_by_itself(&e) => Outcome::Blocked(e.to_string()),
        e => Outcome::Retry(e.to_string()),
    }
}
