//! Job kind `send_welcome`: one subscriber's welcome e-mail (`domain::subscribers::welcome_mail`). The
//! subscriber is marked welcomed in the commit that lets the relay take the message, as an
//! issue's delivery is made `sending`: a run after a crash finds the mark and sends nothing,
//! and a relay never delivers a message cut off before that moment. When the relay then
//! refuses it, the mark is taken back so a retry can send it.

use super::marked_mail::{self, Claim, unrecorded, with_db};
use super::{ClaimedJob, Job, JobContext, Outcome};
use crate::domain::subscribers::welcome_mail::{self, Due};
use crate::mail::MailError;
use crate::store::jobs::{JobKind, WelcomeMail};

pub struct SendWelcome;

impl Job for SendWelcome {
    fn kind(&self) -> JobKind {
        JobKind::SendWelcome
    }

    fn run(&self, ctx: &JobContext, rt: &tokio::runtime::Runtime, job: &ClaimedJob) -> Outcome {
        let subscriber_id = match job.payload::<WelcomeMail>() {
            Ok(payload) => payload.subscriber_id,
            Err(bad) => return Outcome::Fail(bad),
        };
        match with_db(ctx, |conn| welcome_mail::due(conn, subscriber_id)) {
            Ok(Some(due)) => send(ctx, rt, &due),
            Ok(None) => Outcome::Done,
            Err(e) => unrecorded(e),
        }
    }
}

fn send(ctx: &JobContext, rt: &tokio::runtime::Runtime, due: &Due) -> Outcome {
    let newsletter = &due.newsletter;
    let mail = match marked_mail::compose(
        ctx,
        &marked_mail::ReaderMail {
            newsletter,
            subscriber_id: due.subscriber_id,
            to: &due.email,
            subject: &due.subject,
            body_markdown: &due.body_markdown,
            body_html: &due.body_html,
            feedback: "welcome",
            reader: None,
            tracked_step: None,
        },
    ) {
        Ok(mail) => mail,
        Err(outcome) => return outcome,
    };
    let (result, claim) = marked_mail::hand_over(ctx, rt, newsletter, &mail, "welcome", || {
        with_db(ctx, |conn| welcome_mail::mark_sent(conn, due.subscriber_id))
    });
    match result {
        Ok(()) => Outcome::Done,
        // The message went out: it may have arrived, and is never sent again.
        Err(MailError::Unconfirmed(_)) => Outcome::Done,
        Err(_) if claim == Claim::AlreadySent => Outcome::Done,
        Err(e) => {
            if claim == Claim::Marked
                && let Err(undo) =
                    with_db(ctx, |conn| welcome_mail::unmark(conn, due.subscriber_id))
            {
                // Marked but not taken, and the mark stays: this welcome is lost rather
                // than risk a second copy.
                eprintln!(
                    "welcome: subscriber {} keeps its mark after {e}: {undo}",
                    due.subscriber_id
                );
                return Outcome::Fail(e.to_string());
            }
            Outcome::of_one_message(Err(e))
        }
    }
}
