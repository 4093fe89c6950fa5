//! Job kind `import_subscribers`: imports a CSV file uploaded in the dashboard. Progress is
//! committed with each batch, so a job interrupted by a restart (or stopped after a batch by
//! SIGTERM) resumes after the last committed batch and creates nobody twice.

use serde::{Deserialize, Serialize};

use super::{JobContext, Outcome, queue};
use crate::domain::{DomainError, import};
use crate::store::StoreError;

pub const KIND: &str = "import_subscribers";

#[derive(Debug, Serialize, Deserialize)]
struct Payload {
    import_id: i64,
}

/// Queues the import of upload `import_id` in the caller's transaction.
pub fn enqueue(conn: &rusqlite::Connection, import_id: i64) -> Result<i64, StoreError> {
    queue::enqueue(conn, KIND, &Payload { import_id })
}

pub fn run(ctx: &JobContext, job: &queue::Job) -> Outcome {
    let payload: Payload = match serde_json::from_str(&job.payload) {
        Ok(p) => p,
        Err(e) => return Outcome::Fail(format!("bad payload: {e}")),
    };
    let result = ctx
        .pool
        .get()
        .map_err(|e| DomainError::Store(e.into()))
        .and_then(|mut conn| {
            import::run_upload(&mut conn, payload.import_id, &|| !ctx.stop.requested())
        });
    match result {
        // The server is stopping: the rest goes on from the last batch after the restart.
        Ok(None) => Outcome::Again(crate::clock::now()),
        Ok(Some(_)) | Err(DomainError::NotFound(_)) => Outcome::Done,
        // A full disk or a busy database: the committed batches stand; go on once it passes.
        Err(DomainError::Store(e)) if super::passes_by_itself(&e) => {
            Outcome::Blocked(e.to_string())
        }
        Err(e) if job.attempts < job.max_attempts => Outcome::Retry(e.to_string()),
        Err(e) => {
            // Out of attempts: the owner sees why instead of an import that never ends.
            if let Ok(conn) = ctx.pool.get() {
                let _ = import::finish_upload(&conn, payload.import_id, Some(&e.to_string()));
            }
            Outcome::Fail(e.to_string())
        }
    }
}
