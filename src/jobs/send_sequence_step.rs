//! Job kind `send_sequence_step`: one step of a sequence to one reader
//! (`domain::sequences::sends`), at most once: marked at the last moment before the relay may
//! take it (`marked_mail`), its outcome recorded after; a relay refusal takes the mark back
//! and the job is tried again with the backoff, the reader staying queued.

use super::marked_mail::{self, Claim, unrecorded, with_db};
use super::{ClaimedJob, Job, JobContext, Outcome};
use crate::domain::sequences::sends::{self, DueStep, Next, SendStatus};
use crate::mail::MailError;
use crate::store::jobs::{JobKind, SequenceStep};

pub struct SendSequenceStep;

impl Job for SendSequenceStep {
    fn kind(&self) -> JobKind {
        JobKind::SendSequenceStep
    }

    fn run(&self, ctx: &JobContext, rt: &tokio::runtime::Runtime, job: &ClaimedJob) -> Outcome {
        let enrollment_id = match job.payload::<SequenceStep>() {
            Ok(payload) => payload.enrollment_id,
            Err(bad) => return Outcome::Fail(bad),
        };
        match with_db(ctx, |conn| sends::next(conn, enrollment_id)) {
            Ok(Next::Send(due)) => send(ctx, rt, &due),
            Ok(Next::Nothing) => Outcome::Done,
            Err(e) => unrecorded(e),
        }
    }
}

fn send(ctx: &JobContext, rt: &tokio::runtime::Runtime, due: &DueStep) -> Outcome {
    let feedback = format!("sequence-{}", due.sequence_id);
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
            feedback: &feedback,
            reader: Some(&due.reader),
            tracked_step: Some(due.step_id),
        },
    ) {
        Ok(mail) => mail,
        Err(outcome) => return outcome,
    };
    let (result, claim) = marked_mail::hand_over(ctx, rt, newsletter, &mail, "sequence", || {
        with_db(ctx, |conn| sends::mark(conn, due))
    });
    let record = |status: SendStatus| match with_db(ctx, |conn| sends::record(conn, due, status)) {
        Ok(()) => Outcome::Done,
        // The mark stays `sending`: the retry records it unconfirmed, never sends it again.
        Err(e) => Outcome::Retry(format!("cannot record the step's outcome: {e}")),
    };
    match (result, claim) {
        (Ok(()), _) => record(SendStatus::Sent),
        (Err(MailError::Unconfirmed(_)), _) => record(SendStatus::Unconfirmed),
        (Err(_), Claim::AlreadySent) => Outcome::Done,
        // Refused for good (the address, or the message): the reader leaves the sequence.
        (Err(MailError::Permanent(_)), Claim::Marked | Claim::NotAsked) => {
            record(SendStatus::Failed)
        }
        (Err(e), Claim::Marked) => match with_db(ctx, |conn| sends::unmark(conn, due)) {
            Ok(()) => Outcome::of_one_message(Err(e)),
            // The mark stays: the step counts unconfirmed rather than risk a second copy.
            Err(undo) => {
                eprintln!(
                    "sequence: subscriber {} keeps the mark of step {} after {e}: {undo}",
                    due.subscriber_id, due.step_id
                );
                Outcome::Retry(e.to_string())
            }
        },
        (Err(e), _) => Outcome::of_one_message(Err(e)),
    }
}
