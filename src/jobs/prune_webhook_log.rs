//! Job kind `prune_webhook_log`: deletes delivered and failed webhook deliveries, their
//! events and their finished delivery jobs once they are older than
//! [`webhooks::RETENTION`]; pending deliveries stay whatever their age. It deletes
//! [`BATCH`] rows of each at a time, each batch its own short transaction, so the writer is
//! never held long; then it runs again [`EVERY`] later. The job runner makes it due at each
//! start.

use super::{ClaimedJob, Job, JobContext, Outcome, periodic_batches, queue};
use crate::clock;
use crate::domain::{DomainError, events::webhooks};
use crate::store::StoreError;
use crate::store::jobs::JobKind;

pub struct PruneWebhookLog;

/// Rows of each kind deleted per transaction.
const BATCH: i64 = 500;
/// Time between two runs.
const EVERY: jiff::SignedDuration = jiff::SignedDuration::from_hours(1);

impl Job for PruneWebhookLog {
    fn kind(&self) -> JobKind {
        JobKind::PruneWebhookLog
    }

    fn due_at_start(&self) -> bool {
        true
    }

    fn run(&self, ctx: &JobContext, _rt: &tokio::runtime::Runtime, _job: &ClaimedJob) -> Outcome {
        periodic_batches(ctx, JobKind::PruneWebhookLog, EVERY, prune_batch)
    }
}

/// One batch of each; true while a batch was full (more may be left).
fn prune_batch(ctx: &JobContext) -> Result<bool, DomainError> {
    let mut conn = ctx.pool.get().map_err(StoreError::from)?;
    let now = clock::now();
    let pruned = webhooks::prune(&mut conn, now, BATCH)?;
    let jobs = queue::prune_finished(
        &conn,
        JobKind::DeliverWebhook,
        &clock::format(now - webhooks::RETENTION),
        BATCH,
    )?;
    Ok(pruned.deliveries as i64 == BATCH || pruned.events as i64 == BATCH || jobs as i64 == BATCH)
}
