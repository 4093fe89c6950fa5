//! Job kind `render_content`: stores the HTML of issues saved before HTML was stored (queued
//! by migration 0008), then the excerpts of issues saved before excerpts were stored (queued
//! by migration 0032). One issue at a time, oldest first, each within the render budget;
//! an issue beyond today's content limits gets its text as plain paragraphs. Until the job
//! reaches an issue, its pages show those plain paragraphs, never rendering on a request, and
//! the archive shows it without an excerpt.

use super::{ClaimedJob, Job, JobContext, Outcome, passes_by_itself};
use crate::clock;
use crate::domain::{DomainError, content, issues};
use crate::store::StoreError;
use crate::store::jobs::JobKind;

pub struct RenderContent;

/// How long the job waits when every render slot was busy.
const BUSY_WAIT: jiff::SignedDuration = jiff::SignedDuration::from_secs(5);

impl Job for RenderContent {
    fn kind(&self) -> JobKind {
        JobKind::RenderContent
    }

    fn run(&self, ctx: &JobContext, _rt: &tokio::runtime::Runtime, _job: &ClaimedJob) -> Outcome {
        render_all(ctx)
    }
}

/// Renders issue after issue until none is left, the render slots are busy, or the server stops.
fn render_all(ctx: &JobContext) -> Outcome {
    let mut done_up_to = 0;
    while !ctx.stop.requested() {
        match render_next(ctx, done_up_to) {
            Ok(Some(Rendered::Stored(id))) => done_up_to = id,
            Ok(Some(Rendered::Busy)) => return Outcome::Again(clock::now() + BUSY_WAIT),
            Ok(None) => return fill_excerpts(ctx),
            Err(DomainError::Store(e)) if passes_by_itself(&e) => {
                return Outcome::Blocked(e.to_string());
            }
            Err(e) => return Outcome::Retry(e.to_string()),
        }
    }
    Outcome::Again(clock::now())
}

/// Stores the excerpt of every issue that has HTML but none, one short transaction each.
fn fill_excerpts(ctx: &JobContext) -> Outcome {
    let mut done_up_to = 0;
    while !ctx.stop.requested() {
        let next = ctx
            .pool
            .get()
            .map_err(StoreError::from)
            .map_err(DomainError::from)
            .and_then(|conn| {
                let next = issues::next_without_excerpt(&conn, done_up_to)?;
                if let Some(id) = next {
                    issues::fill_excerpt(&conn, id)?;
                }
                Ok(next)
            });
        match next {
            Ok(Some(id)) => done_up_to = id,
            Ok(None) => return Outcome::Done,
            Err(DomainError::Store(e)) if passes_by_itself(&e) => {
                return Outcome::Blocked(e.to_string());
            }
            Err(e) => return Outcome::Retry(e.to_string()),
        }
    }
    Outcome::Again(clock::now())
}

enum Rendered {
    /// This issue is done (or was saved meanwhile, with its own rendering).
    Stored(i64),
    /// Every render slot was busy.
    Busy,
}

/// Renders and stores the next issue after `after_id` without HTML; `None` when there is
/// none. No connection is held while it renders.
fn render_next(ctx: &JobContext, after_id: i64) -> Result<Option<Rendered>, DomainError> {
    let next = issues::next_unrendered(&*ctx.pool.get().map_err(StoreError::from)?, after_id)?;
    let Some((id, markdown)) = next else {
        return Ok(None);
    };
    let Some(html) = content::render_saved(&markdown)? else {
        return Ok(Some(Rendered::Busy));
    };
    let conn = ctx.pool.get().map_err(StoreError::from)?;
    issues::store_rendered(&conn, id, &markdown, &html)?;
    Ok(Some(Rendered::Stored(id)))
}
