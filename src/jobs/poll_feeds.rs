//! Job kind `poll_feeds`: polls the newsletters' feeds that are due (`feeds::fetch`), a
//! few per round, and records what each found (`domain::issues::feed::record`: new
//! items become issues, once). The fetch happens outside any transaction; only the record is
//! written. Then it runs again [`EVERY`] later. The job runner makes it due at each start.

use super::{ClaimedJob, Job, JobContext, Outcome, periodic_batches};
use crate::clock::{self, Timestamp};
use crate::domain::DomainError;
use crate::domain::issues::feed;
use crate::store::StoreError;
use crate::store::jobs::JobKind;

pub struct PollFeeds;

/// Feeds polled per round.
const BATCH: i64 = 10;
/// Time between two rounds: a feed is polled within this long of its time.
const EVERY: jiff::SignedDuration = jiff::SignedDuration::from_mins(1);

impl Job for PollFeeds {
    fn kind(&self) -> JobKind {
        JobKind::PollFeeds
    }

    fn due_at_start(&self) -> bool {
        true
    }

    fn run(&self, ctx: &JobContext, rt: &tokio::runtime::Runtime, _job: &ClaimedJob) -> Outcome {
        periodic_batches(ctx, JobKind::PollFeeds, EVERY, |ctx| poll_batch(ctx, rt))
    }
}

/// One round; true when it was full (more may be due).
fn poll_batch(ctx: &JobContext, rt: &tokio::runtime::Runtime) -> Result<bool, DomainError> {
    let due = {
        let conn = ctx.pool.get().map_err(StoreError::from)?;
        feed::due(&conn, &Timestamp::from(clock::now()), BATCH)?
    };
    for followed in &due {
        let polled = crate::feeds::fetch(followed, &ctx.webhooks, rt);
        let mut conn = ctx.pool.get().map_err(StoreError::from)?;
        feed::record(&mut conn, followed, &polled)?;
    }
    Ok(due.len() as i64 == BATCH)
}
