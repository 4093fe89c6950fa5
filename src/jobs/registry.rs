//! Every job kind the runner knows, in one list: a kind added to `store::jobs::JobKind` gets
//! its file under `jobs/` and a line here.

use super::Job;
use super::advance_sequences::AdvanceSequences;
use super::delete_field_values::DeleteFieldValues;
use super::deliver_webhook::DeliverWebhook;
use super::import_subscribers::ImportSubscribers;
use super::poll_feeds::PollFeeds;
use super::prune_webhook_log::PruneWebhookLog;
use super::purge_account::PurgeAccount;
use super::render_content::RenderContent;
use super::send_issue::SendIssue;
use super::send_mail::SendMail;
use super::send_sequence_step::SendSequenceStep;
use super::send_welcome::SendWelcome;
use super::tell_membership_lapses::TellMembershipLapses;
use super::test_send::TestSend;
use crate::store::jobs::JobKind;

/// The jobs the runner runs, one per kind.
pub static JOBS: &[&dyn Job] = &[
    &SendMail,
    &SendIssue,
    &DeliverWebhook,
    &ImportSubscribers,
    &RenderContent,
    &PruneWebhookLog,
    &SendWelcome,
    &TestSend,
    &PurgeAccount,
    &TellMembershipLapses,
    &DeleteFieldValues,
    &PollFeeds,
    &AdvanceSequences,
    &SendSequenceStep,
];

/// The job that runs rows of `kind` (as the `jobs.kind` column names it); `None` for a kind
/// this version does not know.
pub fn find(kind: &str) -> Option<&'static dyn Job> {
    let kind = JobKind::parse(kind)?;
    JOBS.iter().copied().find(|job| job.kind() == kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_exactly_one_job() {
        for kind in JobKind::ALL {
            let jobs = JOBS.iter().filter(|job| job.kind() == *kind).count();
            assert_eq!(jobs, 1, "{kind}");
            assert_eq!(find(kind.as_str()).map(|job| job.kind()), Some(*kind));
        }
        assert_eq!(JOBS.len(), JobKind::ALL.len());
        assert!(find("send_fax").is_none());
    }
}
