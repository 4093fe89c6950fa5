//! Job kind `delete_field_values`: deletes a deleted custom field's values
//! (`domain::subscribers::custom_fields::delete_values_batch`), [`BATCH`] per short
//! transaction so the writer is never held long, then the field's row. The field is hidden
//! from the moment it was deleted; this only frees the space.

use super::{ClaimedJob, Job, JobContext, Outcome, until_done};
use crate::domain::subscribers::custom_fields;
use crate::store::jobs::{FieldDeletion, JobKind};

pub struct DeleteFieldValues;

/// Values deleted per transaction.
const BATCH: i64 = 5_000;

impl Job for DeleteFieldValues {
    fn kind(&self) -> JobKind {
        JobKind::DeleteFieldValues
    }

    fn run(&self, ctx: &JobContext, _rt: &tokio::runtime::Runtime, job: &ClaimedJob) -> Outcome {
        let FieldDeletion { field_id } = match job.payload::<FieldDeletion>() {
            Ok(deletion) => deletion,
            Err(bad) => return Outcome::Fail(bad),
        };
        until_done(ctx, |conn| {
            custom_fields::delete_values_batch(conn, field_id, BATCH)
        })
    }
}
