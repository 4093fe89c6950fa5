//! Job kind `tell_membership_lapses`: paid access that ends by its date (a comp or an
//! imported paid period running out, a canceled membership reaching its period's end) is
//! noticed by no request, so this job records `member.downgraded` for each such end, once
//! (`domain::subscribers::memberships::tell_lapsed`), [`BATCH`] members per short
//! transaction; then it runs again [`EVERY`] later. The job runner makes it due at each
//! start.

use super::{ClaimedJob, Job, JobContext, Outcome, periodic_batches};
use crate::clock::{self, Timestamp};
use crate::domain::DomainError;
use crate::domain::subscribers::memberships;
use crate::store::StoreError;
use crate::store::jobs::JobKind;

pub struct TellMembershipLapses;

/// Members told per transaction.
const BATCH: i64 = 500;
/// Time between two runs: an end is told within this long.
const EVERY: jiff::SignedDuration = jiff::SignedDuration::from_mins(10);

impl Job for TellMembershipLapses {
    fn kind(&self) -> JobKind {
        JobKind::TellMembershipLapses
    }

    fn due_at_start(&self) -> bool {
        true
    }

    fn run(&self, ctx: &JobContext, _rt: &tokio::runtime::Runtime, _job: &ClaimedJob) -> Outcome {
        periodic_batches(ctx, JobKind::TellMembershipLapses, EVERY, tell_batch)
    }
}

/// One batch; true when it was full (more may be due).
fn tell_batch(ctx: &JobContext) -> Result<bool, DomainError> {
    let mut conn = ctx.pool.get().map_err(StoreError::from)?;
    let told = memberships::tell_lapsed(&mut conn, Timestamp::from(clock::now()), BATCH)?;
    Ok(told as i64 == BATCH)
}
