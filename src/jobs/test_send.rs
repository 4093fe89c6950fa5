//! Job kind `send_test` (a test send): one test message of an issue to one address (`domain/issues/test_send.rs`).
//! The message is the real send's ([`super::send_issue::issue_email`], the newsletter's
//! transport and DKIM key) under a "[Test] " subject, personalised for the test delivery, so
//! its links work and count nothing; its merge tags show the values of the subscriber with
//! the test address, or their fallbacks. Nothing is written to the database but the job's own
//! row: a test has no delivery, no stats and no event.

use super::send_issue::issue_email;
use super::{ClaimedJob, Job, JobContext, Outcome};
use crate::domain::issues::test_send::{TEST_DELIVERY, test_subject};
use crate::domain::{DomainError, issues, newsletters, subscribers};
use crate::mail::{Commit, Envelope, Lane};
use crate::store::jobs::{JobKind, TestMail};

pub struct TestSend;

impl Job for TestSend {
    fn kind(&self) -> JobKind {
        JobKind::SendTest
    }

    fn run(&self, ctx: &JobContext, rt: &tokio::runtime::Runtime, job: &ClaimedJob) -> Outcome {
        let mail = match job.payload::<TestMail>() {
            Ok(mail) => mail,
            Err(bad) => return Outcome::Fail(bad),
        };
        let found = ctx
            .pool
            .get()
            .map_err(|e| DomainError::Store(e.into()))
            .and_then(|conn| {
                let newsletter = newsletters::get(&conn, mail.newsletter_id)?;
                let issue = issues::get_as_mailed(&conn, mail.newsletter_id, mail.issue_id)?;
                let reader = subscribers::merge_reader(&conn, mail.newsletter_id, &mail.to)?;
                Ok((newsletter, issue, reader))
            });
        let (newsletter, mut issue, reader) = match found {
            Ok(found) => found,
            // Deleted since: there is nothing to test any more.
            Err(DomainError::NotFound(_)) => return Outcome::Done,
            Err(e) => return Outcome::Retry(e.to_string()),
        };
        let email = match issue_email(ctx, &mut issue, &newsletter) {
            Ok(email) => email.with_subject(test_subject(&issue.subject)),
            Err(e) => return Outcome::Retry(e),
        };
        let transport = match ctx.newsletter_transport(rt, &newsletter) {
            Ok(transport) => transport,
            Err(e) => return Outcome::Retry(e.to_string()),
        };
        let mime = email.message(TEST_DELIVERY, &mail.to, &reader);
        // A bounce mailed back to this return path names no delivery, so it changes nothing.
        let return_path = ctx.return_paths.address(TEST_DELIVERY);
        let envelope = Envelope {
            from: &return_path,
            to: &mail.to,
        };
        let result = rt.block_on(async {
            let mut lane = Lane::new(&transport);
            lane.connect().await?;
            let sent = lane
                .send(envelope, &mime, |_| async {
                    Commit::Claimed { end_written: 0 }
                })
                .await;
            lane.close().await;
            sent
        });
        Outcome::of_one_message(result)
    }
}
