//! One message handed to a newsletter's relay with a mark written at the last moment (the
//! welcome e-mail, a sequence step): the mark is committed when the relay may take the
//! message, as an issue's delivery is made `sending`, so a run after a crash finds it and
//! sends nothing, and a relay never delivers a message cut off before that moment. Each job
//! kind decides what its outcome means; this is the hand-over they share.

use std::cell::Cell;

use super::{JobContext, Outcome};
use crate::domain::newsletters::Newsletter;
use crate::domain::{DomainError, DomainResult};
use crate::mail::{Commit, Envelope, Lane, MailError, Mime, OutgoingMail};

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
