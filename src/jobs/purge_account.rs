//! Job kind `purge_account`: deletes a deleted account's newsletters and everything in them
//! (`domain::accounts::changes::purge_batch`), a batch of each big table per short
//! transaction so the writer is never held long, then the account's row itself. It stops
//! between batches when the service stops, and the next start goes on where it was.

use super::{ClaimedJob, Job, JobContext, Outcome, passes_by_itself};
use crate::clock;
use crate::domain::DomainError;
use crate::domain::accounts::changes;
use crate::store::StoreError;
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
        loop {
            if ctx.stop.requested() {
                return Outcome::Again(clock::now());
            }
            let batch = ctx
                .pool
                .get()
                .map_err(|e| DomainError::Store(StoreError::from(e)))
                .and_then(|mut conn| changes::purge_batch(&mut conn, user_id));
            match batch {
                Ok(true) => {}
                Ok(false) => return Outcome::Done,
                Err(DomainError::Store(e)) if passes_by_itself(&e) => {
                    return Outcome::Blocked(e.to_string());
                }
                Err(e) => return Outcome::Retry(e.to_string()),
            }
        }
    }
}
