//! Job kind `send_issue`: delivers an issue to every active subscriber.

use serde::{Deserialize, Serialize};

use super::{JobContext, Outcome, queue};
use crate::store::StoreError;

pub const KIND: &str = "send_issue";

#[derive(Debug, Serialize, Deserialize)]
struct Payload {
    issue_id: i64,
}

/// Queues the send of `issue_id` in the caller's transaction.
pub fn enqueue(conn: &rusqlite::Connection, issue_id: i64) -> Result<i64, StoreError> {
    queue::enqueue_at(conn, KIND, &Payload { issue_id }, crate::clock::now(), 1_000_000)
}

pub fn run(_ctx: &JobContext, _rt: &tokio::runtime::Runtime, _job: &queue::Job) -> Outcome {
    Outcome::Retry("sending is not available yet".into())
}
