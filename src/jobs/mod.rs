//! The in-process job runner: worker threads poll the `jobs` table, claim due jobs atomically
//! and run them by kind (one file per kind); failures are retried with backoff, and jobs a
//! crash interrupted are picked up again at start.

pub mod deliver_webhook;
pub mod import_subscribers;
pub mod queue;
pub mod send_issue;
pub mod send_mail;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::domain::secrets::ServerSecret;
use crate::domain::urls::SiteUrls;
use crate::mail::Transport;
use crate::store::Pool;
use queue::Lane;

/// What job kinds need from the running service.
pub struct JobContext {
    pub pool: Pool,
    pub transport: Transport,
    /// The From of the service's own mail (account confirmation, password reset).
    pub mail_from: (String, String),
    pub urls: SiteUrls,
    /// Signs the tracking and unsubscribe links of sent issues.
    pub secret: ServerSecret,
    pub send: send_issue::SendSettings,
    pub webhooks: crate::webhooks::Settings,
}

/// How a job run ended.
pub enum Outcome {
    Done,
    /// Try again after the kind's backoff.
    Retry(String),
    /// Give up now.
    Fail(String),
    /// Not finished: run again at this time (without counting a failed attempt).
    Again(time::OffsetDateTime),
}

/// Runs one claimed job by its kind.
fn dispatch(ctx: &JobContext, rt: &tokio::runtime::Runtime, job: &queue::Job) -> Outcome {
    match job.kind.as_str() {
        send_mail::KIND => send_mail::run(ctx, rt, job),
        send_issue::KIND => send_issue::run(ctx, rt, job),
        deliver_webhook::KIND => deliver_webhook::run(ctx, job),
        import_subscribers::KIND => import_subscribers::run(ctx, job),
        other => Outcome::Fail(format!("unknown job kind {other:?}")),
    }
}

/// The running workers; dropping does not stop them, [`Runner::shutdown`] does.
pub struct Runner {
    stop: Arc<AtomicBool>,
    handles: Vec<JoinHandle<()>>,
}

impl Runner {
    /// Requeues interrupted jobs, then starts `workers` general threads and `webhook_workers`
    /// webhook threads, each polling every `poll`.
    pub fn start(
        ctx: Arc<JobContext>,
        workers: usize,
        webhook_workers: usize,
        poll: Duration,
    ) -> Result<Self, crate::store::StoreError> {
        let requeued = queue::requeue_interrupted(&*ctx.pool.get()?)?;
        if requeued > 0 {
            eprintln!("jobs: requeued {requeued} job(s) interrupted by the last shutdown");
        }
        let stop = Arc::new(AtomicBool::new(false));
        let lanes = (0..workers.max(1))
            .map(|n| (Lane::General, n))
            .chain((0..webhook_workers.max(1)).map(|n| (Lane::Webhooks, n)));
        let handles = lanes
            .map(|(lane, n)| {
                let (ctx, stop) = (ctx.clone(), stop.clone());
                let scheduler = lane == Lane::General && n == 0;
                std::thread::Builder::new()
                    .name(format!("jobs-{lane:?}-{n}").to_lowercase())
                    .spawn(move || work(&ctx, &stop, poll, lane, scheduler))
                    .expect("spawning a job worker thread")
            })
            .collect();
        Ok(Runner { stop, handles })
    }

    pub fn shutdown(self) {
        self.stop.store(true, Ordering::SeqCst);
        for handle in self.handles {
            let _ = handle.join();
        }
    }
}

/// General worker 0 also starts scheduled issues whose time has come.
fn work(ctx: &JobContext, stop: &AtomicBool, poll: Duration, lane: Lane, scheduler: bool) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("building a job worker runtime");
    while !stop.load(Ordering::SeqCst) {
        if scheduler {
            start_scheduled(ctx);
        }
        match claim(ctx, lane) {
            Ok(Some(job)) => finish(ctx, &job, dispatch(ctx, &rt, &job)),
            Ok(None) => std::thread::sleep(poll),
            Err(e) => {
                eprintln!("jobs: cannot claim work: {e}");
                std::thread::sleep(poll);
            }
        }
    }
}

fn start_scheduled(ctx: &JobContext) {
    let started = ctx
        .pool
        .get()
        .map_err(|e| e.to_string())
        .and_then(|mut conn| {
            crate::domain::issues::start_due_scheduled(&mut conn).map_err(|e| e.to_string())
        });
    match started {
        Ok(0) => {}
        Ok(n) => eprintln!("jobs: started {n} scheduled issue(s)"),
        Err(e) => eprintln!("jobs: cannot start scheduled issues: {e}"),
    }
}

fn claim(ctx: &JobContext, lane: Lane) -> Result<Option<queue::Job>, crate::store::StoreError> {
    queue::claim_due(&*ctx.pool.get()?, lane)
}

fn finish(ctx: &JobContext, job: &queue::Job, outcome: Outcome) {
    let result = ctx
        .pool
        .get()
        .map_err(crate::store::StoreError::from)
        .and_then(|conn| match &outcome {
            Outcome::Done => queue::mark_done(&conn, job.id),
            Outcome::Retry(error) => {
                eprintln!(
                    "jobs: {} #{} attempt {} failed, will retry: {error}",
                    job.kind, job.id, job.attempts
                );
                queue::mark_failed(
                    &conn,
                    job,
                    error,
                    Some(queue::default_backoff(job.attempts)),
                )
            }
            Outcome::Again(at) => queue::reschedule(&conn, job.id, *at),
            Outcome::Fail(error) => {
                eprintln!("jobs: {} #{} failed: {error}", job.kind, job.id);
                queue::mark_failed(&conn, job, error, None)
            }
        });
    if let Err(e) = result {
        eprintln!(
            "jobs: cannot record the outcome of {} #{}: {e}",
            job.kind, job.id
        );
    }
}
