//! Job kind `import_subscribers`: imports a CSV file uploaded in the dashboard. Progress is
//! committed with each batch, so a job interrupted by a restart (or stopped after a batch by
//! SIGTERM) resumes after the last committed batch and creates nobody twice.
//!
//! The rest of the import: `domain::subscribers::import` (the import itself, which this job
//! calls, and the uploads) and `domain::subscribers::import_columns` (how columns are read),
//! `web::subscribers::import` (the pages that upload a file and start this job) and
//! `cli::import` (`broadsheet import`, the same import without a job).

use super::{ClaimedJob, Job, JobContext, Outcome};
use crate::domain::{DomainError, subscribers::import};
use crate::store::jobs::{JobKind, SubscriberImport};

pub struct ImportSubscribers;

impl Job for ImportSubscribers {
    fn kind(&self) -> JobKind {
        JobKind::ImportSubscribers
    }

    fn run(&self, ctx: &JobContext, _rt: &tokio::runtime::Runtime, job: &ClaimedJob) -> Outcome {
        match job.payload::<SubscriberImport>() {
            Ok(payload) => import_upload(ctx, job, payload.import_id),
            Err(bad) => Outcome::Fail(bad),
        }
    }
}

fn import_upload(ctx: &JobContext, job: &ClaimedJob, import_id: i64) -> Outcome {
    let result = ctx
        .pool
        .get()
        .map_err(|e| DomainError::Store(e.into()))
        .and_then(|mut conn| import::run_upload(&mut conn, import_id, &|| !ctx.stop.requested()));
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
                let _ = import::finish_upload(&conn, import_id, Some(&e.to_string()));
            }
            Outcome::Fail(e.to_string())
        }
    }
}
