//! Job kind `deliver_webhook`: one attempt of one webhook delivery; a failed attempt
//! reschedules the same job for the retry the domain decided, so the delivery keeps its id.
//! These jobs run on their own worker threads, so a slow receiver never holds up sending.

use serde::{Deserialize, Serialize};

use super::{JobContext, Outcome, queue};
use crate::domain::webhooks::{self, Attempt};
use crate::store::StoreError;

pub const KIND: &str = "deliver_webhook";

#[derive(Debug, Serialize, Deserialize)]
struct Payload {
    delivery_id: i64,
}

/// Queues an attempt of `delivery_id` in the caller's transaction.
pub fn enqueue(conn: &rusqlite::Connection, delivery_id: i64) -> Result<i64, StoreError> {
    queue::enqueue_at(
        conn,
        KIND,
        &Payload { delivery_id },
        crate::clock::now(),
        1_000,
    )
}

pub fn run(ctx: &JobContext, rt: &tokio::runtime::Runtime, job: &queue::Job) -> Outcome {
    let payload: Payload = match serde_json::from_str(&job.payload) {
        Ok(p) => p,
        Err(e) => return Outcome::Fail(format!("bad payload: {e}")),
    };
    let pending = match ctx.pool.get().map_err(StoreError::from) {
        Ok(conn) => webhooks::pending(&conn, payload.delivery_id),
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
