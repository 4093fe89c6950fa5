//! Job kind `purge_account`: deletes a deleted account's newsletters and everything in them
//! (`domain::accounts::changes::purge_batch`), a batch of each big table per short
//! transaction so the writer is never held long, then the account's row itself. It stops
//! between batches when the service stops, and the next start goes on where it was.

use super::{ClaimedJob, Job, JobContext, Outcome, until_done};
use crate::domain::accounts::changes;
use crate::store::jobs::{AccountPurge, JobKind};

pub struct PurgeAccount;

impl Job for PurgeAccount {
    fn kind(&self) -> JobKind {
        JobKind::PurgeAccount
    }

    fn run(&self, ctx: &JobContext, _rt: &tokio::runtime::Runtime, job: &ClaimedJob) -> Outcome {
        let AccountPurge { user_id } = match job.payload::<AccountPurge>() {
            Ok(purge) => purge,
            Err(bad) => return Outcome::Fail(bad),
        };
        until_done(ctx, |conn| changes::purge_batch(conn, user_id))
    }
}
