//! Job kind `advance_sequences`: the sequences round (`domain::sequences::round`), every
//! minute: stamps the readers a tag entered, then queues a `send_sequence_step` job for each
//! reader whose next step is due. The job runner makes it due at each start.

use super::{ClaimedJob, Job, JobContext, Outcome, periodic_batches};
use crate::domain::DomainError;
use crate::domain::sequences::round;
use crate::store::StoreError;
use crate::store::jobs::JobKind;

pub struct AdvanceSequences;

/// Time between two rounds: a step goes within this long of its time.
const EVERY: jiff::SignedDuration = jiff::SignedDuration::from_mins(1);

impl Job for AdvanceSequences {
    fn kind(&self) -> JobKind {
        JobKind::AdvanceSequences
    }

    fn due_at_start(&self) -> bool {
        true
    }

    fn run(&self, ctx: &JobContext, _rt: &tokio::runtime::Runtime, _job: &ClaimedJob) -> Outcome {
        periodic_batches(ctx, JobKind::AdvanceSequences, EVERY, advance)
    }
}

/// One round; true when the stamping was full (more entries wait for their stamp).
fn advance(ctx: &JobContext) -> Result<bool, DomainError> {
    let mut conn = ctx.pool.get().map_err(StoreError::from)?;
    let stamped = round::stamp(&mut conn)?;
    round::queue_due(&mut conn)?;
    Ok(stamped as i64 == round::BATCH)
}
