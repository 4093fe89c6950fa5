//! Job kind `deliver_webhook`: one attempt of one webhook delivery; a failed attempt
//! reschedules the same job for the retry the domain decided, so the delivery keeps its id.
//! These jobs run on their own worker threads, so a slow receiver never holds up sending.

use super::{ClaimedJob, Job, JobContext, Outcome};
use crate::domain::events::webhooks::{self, Attempt};
use crate::store::StoreError;
use crate::store::jobs::{JobKind, WebhookDelivery};

pub struct DeliverWebhook;

impl Job for DeliverWebhook {
    fn kind(&self) -> JobKind {
        JobKind::DeliverWebhook
    }

    fn run(&self, ctx: &JobContext, rt: &tokio::runtime::Runtime, job: &ClaimedJob) -> Outcome {
        match job.payload::<WebhookDelivery>() {
            Ok(payload) => deliver(ctx, rt, payload.delivery_id),
            Err(bad) => Outcome::Fail(bad),
        }
    }
}

fn deliver(ctx: &JobContext, rt: &tokio::runtime::Runtime, delivery_id: i64) -> Outcome {
    let pending = match ctx.pool.get().map_err(StoreError::from) {
        Ok(conn) => webhooks::pending(&conn, delivery_id),
        Err(e) => return Outcome::Blocked(e.to_string()),
    };
    let delivery = match pending {
        Ok(Some(d)) => d,
        Ok(None) => return Outcome::Done,
        Err(e) => return Outcome::Retry(e.to_string()),
    };
    let attempt = if delivery.subscription_enabled {
        crate::webhooks::attempt(&delivery, &ctx.webhooks, rt)
    } else {
        Attempt::Skipped
    };
    let recorded = ctx
        .pool
        .get()
        .map_err(StoreError::from)
        .map_err(Into::into)
        .and_then(|mut conn| {
            webhooks::record_attempt(&mut conn, delivery.id, &attempt, ctx.webhooks.retry_base)
        });
    match recorded {
        Ok(Some(at)) => Outcome::Again(at),
        Ok(None) => Outcome::Done,
        // The attempt happened but could not be recorded (a full disk): the delivery is still
        // due, and goes again once the database can be written; the receiver dedupes by its
        // delivery id, which stays the same.
        Err(crate::domain::DomainError::Store(e)) if super::passes_by_itself(&e) => {
            Outcome::Blocked(e.to_string())
        }
        Err(e) => Outcome::Retry(e.to_string()),
    }
}
