//! The in-process job runner: worker threads poll the `jobs` table, claim due jobs atomically
//! and run each through the [`Job`] of its kind (one file per kind, all listed in
//! [`registry`]); failures are retried with backoff, and jobs a crash interrupted are picked
//! up again at start. The domain records jobs through `store::jobs`, never through here.

pub mod advance_sequences;
pub mod delete_field_values;
pub mod deliver_webhook;
pub mod import_subscribers;
pub mod marked_mail;
pub mod poll_feeds;
pub mod prune_webhook_log;
pub mod purge_account;
pub mod registry;
pub mod render_content;
pub mod send_issue;
pub mod send_mail;
pub mod send_sequence_step;
pub mod send_welcome;
pub mod tell_membership_lapses;
pub mod test_send;

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::clock;
use crate::domain::delivery::relays;
use crate::domain::delivery::verp::ReturnPaths;
use crate::domain::newsletters::Newsletter;
use crate::domain::newsletters::sender_domains;
use crate::domain::values::secrets::ServerSecret;
use crate::domain::values::urls::SiteUrls;
use crate::mail::dkim::Signer;
use crate::mail::relay_settings::newsletter_relay_settings;
use crate::mail::{Relay, RelaySet, SmtpSettings, Transport};
use crate::store::Pool;
pub use crate::store::jobs::ClaimedJob;
use crate::store::jobs::JobKind;
use crate::store::jobs::{self as queue, Lane};

/// What job kinds need from the running service.
pub struct JobContext {
    pub pool: Pool,
    pub transport: Transport,
    /// The From of the service's own mail (account confirmation, password reset).
    pub mail_from: (String, String),
    pub urls: SiteUrls,
    /// Signs the tracking and unsubscribe links of sent issues.
    pub secret: ServerSecret,
    /// The envelope senders (VERP return paths) of sent issues, on the bounce domain.
    pub return_paths: ReturnPaths,
    pub send: send_issue::SendSettings,
    pub webhooks: crate::webhooks::Settings,
    /// Set when the server is asked to stop; long jobs wind down and leave the rest queued.
    pub stop: Stop,
    /// Opens the sealed passwords of newsletters' own relays (`domain::delivery::relays::for_newsletter`).
    pub credentials: crate::domain::values::credentials::CredentialKey,
    /// How newsletters' own relays are reached.
    pub own_relays: OwnRelays,
}

/// What reaching a newsletter's own relay takes, and the relays in use: each kept while its
/// settings stay the same, so its pace, counts and outages outlive a round of a send.
pub struct OwnRelays {
    /// Whom their certificates must chain to (the server's roots and `--smtp-ca`).
    pub trust: crate::mail::TlsTrust,
    /// `--allow-private-relays`: a relay on a loopback or private address is allowed.
    pub allow_private: bool,
    pub timeout: Duration,
    /// The first wait before an unreachable relay is tried again.
    pub first_retry: Duration,
    pub in_use: std::sync::Mutex<std::collections::HashMap<i64, Arc<Relay>>>,
}

/// Why a newsletter's mail cannot go out now.
pub enum TransportError {
    /// Its own relay cannot be used (its host does not resolve, or only to an address that
    /// is not allowed, or its password cannot be read): the relay's trouble, waited out like
    /// an unreachable relay.
    RelayUnusable(String),
    /// Anything else (the database).
    Other(String),
}

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TransportError::RelayUnusable(e) | TransportError::Other(e) => f.write_str(e),
        }
    }
}

impl JobContext {
    /// How a newsletter's mail leaves (issues, opt-in and welcome mail): signed as its own
    /// sending domain once that is verified, else like the service's own mail (the
    /// operator's key when `--dkim-domain` is set, else unsigned).
    ///
    /// A newsletter with a relay of its own sends through it alone: its host resolved and
    /// checked (no private or special-purpose address unless `--allow-private-relays`) and
    /// the connection pinned to the address checked.
    pub fn newsletter_transport(
        &self,
        rt: &tokio::runtime::Runtime,
        newsletter: &Newsletter,
    ) -> Result<Transport, TransportError> {
        let other = |e: &dyn std::fmt::Display| TransportError::Other(e.to_string());
        let conn = self.pool.get().map_err(|e| other(&e))?;
        let signed = match sender_domains::signing_key(&conn, newsletter).map_err(|e| other(&e))? {
            Some(key) => self
                .transport
                .signed_by(Arc::new(Signer::with_key(&key).map_err(|e| other(&e))?)),
            None => self.transport.clone(),
        };
        let Some(own) = relays::for_newsletter(&conn, &self.credentials, newsletter.id)
            .map_err(|e| other(&e))?
        else {
            return Ok(signed);
        };
        drop(conn);
        let unusable = |e: String| TransportError::RelayUnusable(format!("{}: {e}", own.name()));
        let pinned = rt
            .block_on(crate::webhooks::resolve_host(
                &own.host,
                own.port,
                self.own_relays.allow_private,
                &self.webhooks.dns,
            ))
            .map_err(unusable)?;
        let settings = newsletter_relay_settings(
            &own,
            &self.own_relays.trust,
            self.own_relays.timeout,
            pinned,
        )
        .map_err(unusable)?;
        Ok(signed.through(RelaySet::new(vec![self.own_relays.relay(
            newsletter.id,
            settings,
            &self.pool,
        )])))
    }
}

impl OwnRelays {
    /// The relay of newsletter `id` with `settings`: the one in use while its settings are
    /// the same, else a new one (and the old one forgotten).
    fn relay(&self, id: i64, settings: SmtpSettings, pool: &Pool) -> Arc<Relay> {
        let mut in_use = self.in_use.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(relay) = in_use.get(&id).filter(|r| r.settings.same_as(&settings)) {
            return relay.clone();
        }
        let relay = Arc::new(
            Relay::new(settings, Some(pool.clone()), self.first_retry)
                .counted_as(format!("newsletter-relay:{id}")),
        );
        in_use.insert(id, relay.clone());
        relay
    }
}

/// The server's request to stop, for threads and async tasks alike: set once, never unset.
#[derive(Clone)]
pub struct Stop(Arc<tokio::sync::watch::Sender<bool>>);

impl Default for Stop {
    fn default() -> Self {
        Stop(Arc::new(tokio::sync::watch::Sender::new(false)))
    }
}

impl Stop {
    /// Asks every job to wind down.
    pub fn request(&self) {
        self.0.send_replace(true);
    }

    pub fn requested(&self) -> bool {
        *self.0.borrow()
    }

    /// Waits until a stop is requested.
    pub async fn wait(&self) {
        let mut watching = self.0.subscribe();
        let _ = watching.wait_for(|stop| *stop).await;
    }

    /// [`Stop::sleep`] for async tasks.
    pub async fn pause(&self, wait: Duration) -> bool {
        tokio::select! {
            _ = self.wait() => true,
            _ = tokio::time::sleep(wait) => self.requested(),
        }
    }

    /// Sleeps for `wait`, or less when a stop is requested meanwhile; true when it was.
    pub fn sleep(&self, wait: Duration) -> bool {
        let mut watching = self.0.subscribe();
        let deadline = std::time::Instant::now() + wait;
        loop {
            if *watching.borrow_and_update() {
                return true;
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            std::thread::sleep(left.min(Duration::from_millis(50)));
        }
    }
}

/// One kind of job: how the runner runs the rows of that kind. Each lives in a file of its
/// own and is listed once in [`registry::JOBS`].
pub trait Job: Sync {
    /// The rows of the job table this job runs.
    fn kind(&self) -> JobKind;

    /// Runs one claimed job. `rt` is the worker thread's runtime, made once when the worker
    /// starts, for the job's async work.
    fn run(&self, ctx: &JobContext, rt: &tokio::runtime::Runtime, job: &ClaimedJob) -> Outcome;

    /// Whether the runner makes this job due at each start: periodic jobs, which reschedule
    /// themselves when they finish.
    fn due_at_start(&self) -> bool {
        false
    }
}

/// How a job run ended.
pub enum Outcome {
    Done,
    /// Try again after the kind's backoff.
    Retry(String),
    /// Give up now.
    Fail(String),
    /// Not finished: run again at this time (without counting a failed attempt).
    Again(jiff::Timestamp),
    /// The database could not be written (a full disk, a long lock): run again shortly,
    /// without counting an attempt, so the work resumes by itself once it can be recorded.
    Blocked(String),
}

impl Outcome {
    /// The outcome of a job that hands one message to the relay (account mail, a test send,
    /// the tail of a welcome): an unconfirmed message went out and is never sent again, a
    /// refusal gives up, a held relay waits at no cost, anything else is tried again.
    pub fn of_one_message(sent: Result<(), crate::mail::MailError>) -> Outcome {
        use crate::mail::MailError;
        match sent {
            Ok(()) | Err(MailError::Unconfirmed(_)) => Outcome::Done,
            Err(MailError::Permanent(e)) => Outcome::Fail(e),
            Err(MailError::Held { until, .. }) => Outcome::Again(until),
            Err(
                e @ (MailError::Temporary(_)
                | MailError::Connection(_)
                | MailError::Abandoned(_)
                | MailError::Throttled { .. }),
            ) => Outcome::Retry(e.to_string()),
        }
    }
}

/// How long a job blocked by the database waits before it runs again.
const BLOCKED_WAIT: jiff::SignedDuration = jiff::SignedDuration::from_secs(5);

/// Whether a store failure is one that passes by itself (a full disk, a busy database), so a
/// job hitting it should wait rather than count a failed attempt.
pub fn passes_by_itself(error: &crate::store::StoreError) -> bool {
    use rusqlite::ErrorCode;
    error.is_disk_full()
        || match error {
            crate::store::StoreError::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => {
                matches!(e.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
            }
            crate::store::StoreError::Pool(_) => true,
            _ => false,
        }
}

/// The run of a periodic job that works in batches: `batch` (one short transaction; `true`
/// while there may be more) until none is left, then again `every` later. It never gives
/// up: a store that is busy or full blocks it, any other failure waits for the next run.
pub fn periodic_batches(
    ctx: &JobContext,
    kind: JobKind,
    every: jiff::SignedDuration,
    batch: impl Fn(&JobContext) -> Result<bool, crate::domain::DomainError>,
) -> Outcome {
    loop {
        if ctx.stop.requested() {
            return Outcome::Again(clock::now());
        }
        match batch(ctx) {
            Ok(true) => {}
            Ok(false) => return Outcome::Again(clock::now() + every),
            Err(crate::domain::DomainError::Store(e)) if passes_by_itself(&e) => {
                return Outcome::Blocked(e.to_string());
            }
            Err(e) => {
                eprintln!("jobs: {kind}: {e}; trying again at the next run");
                return Outcome::Again(clock::now() + every);
            }
        }
    }
}

/// Runs `batch` (one short transaction, true while more is left) until it is done; stops
/// between batches when the service stops, and the next start goes on where it was.
pub fn until_done(
    ctx: &JobContext,
    batch: impl Fn(&mut rusqlite::Connection) -> Result<bool, crate::domain::DomainError>,
) -> Outcome {
    loop {
        if ctx.stop.requested() {
            return Outcome::Again(clock::now());
        }
        let done = ctx
            .pool
            .get()
            .map_err(|e| crate::domain::DomainError::Store(crate::store::StoreError::from(e)))
            .and_then(|mut conn| batch(&mut conn));
        match done {
            Ok(true) => {}
            Ok(false) => return Outcome::Done,
            Err(crate::domain::DomainError::Store(e)) if passes_by_itself(&e) => {
                return Outcome::Blocked(e.to_string());
            }
            Err(e) => return Outcome::Retry(e.to_string()),
        }
    }
}

/// Runs one claimed job through the job of its kind.
fn dispatch(ctx: &JobContext, rt: &tokio::runtime::Runtime, job: &ClaimedJob) -> Outcome {
    match registry::find(&job.kind) {
        Some(kind) => kind.run(ctx, rt, job),
        None => Outcome::Fail(format!("unknown job kind {:?}", job.kind)),
    }
}

/// The running workers; dropping does not stop them, [`Runner::shutdown`] does.
pub struct Runner {
    stop: Stop,
    handles: Vec<JoinHandle<()>>,
}

impl Runner {
    /// Requeues interrupted jobs, makes the periodic ones due, then starts `workers` general threads and `webhook_workers`
    /// webhook threads, each polling every `poll`; they stop when `ctx.stop` is requested.
    pub fn start(
        ctx: Arc<JobContext>,
        workers: usize,
        webhook_workers: usize,
        poll: Duration,
    ) -> Result<Self, crate::store::StoreError> {
        let conn = ctx.pool.get()?;
        let requeued = queue::requeue_interrupted(&conn)?;
        if requeued > 0 {
            eprintln!("jobs: requeued {requeued} job(s) interrupted by the last shutdown");
        }
        for job in registry::JOBS.iter().filter(|job| job.due_at_start()) {
            crate::store::jobs::schedule_now(&conn, job.kind())?;
        }
        drop(conn);
        let stop = ctx.stop.clone();
        let lanes = (0..workers.max(1))
            .map(|n| (Lane::General, n))
            .chain((0..webhook_workers.max(1)).map(|n| (Lane::Webhooks, n)));
        let handles = lanes
            .map(|(lane, n)| {
                let ctx = ctx.clone();
                let scheduler = lane == Lane::General && n == 0;
                std::thread::Builder::new()
                    .name(format!("jobs-{lane:?}-{n}").to_lowercase())
                    .spawn(move || work(&ctx, poll, lane, scheduler))
                    .expect("spawning a job worker thread")
            })
            .collect();
        Ok(Runner { stop, handles })
    }

    /// Asks the workers to stop (if the signal has not already) and waits for them: each
    /// finishes or winds down its current job and records how it ended.
    pub fn shutdown(self) {
        self.stop.request();
        for handle in self.handles {
            let _ = handle.join();
        }
    }
}

/// General worker 0 also starts scheduled issues whose time has come. Each worker makes its
/// runtime once and runs all its jobs on it.
fn work(ctx: &JobContext, poll: Duration, lane: Lane, scheduler: bool) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("building a job worker runtime");
    while !ctx.stop.requested() {
        if scheduler {
            start_scheduled(ctx);
        }
        match claim(ctx, lane) {
            Ok(Some(job)) => finish(ctx, &job, dispatch(ctx, &rt, &job)),
            Ok(None) => idle(ctx, poll),
            Err(e) => {
                eprintln!("jobs: cannot claim work: {e}");
                ctx.stop.sleep(poll);
            }
        }
    }
}

/// Waits `poll` before looking for work again, or less when a stop is requested or the clock
/// moves (`serve --test-clock`): work the move made due starts at once.
fn idle(ctx: &JobContext, poll: Duration) {
    let seen = crate::clock::moves();
    let deadline = std::time::Instant::now() + poll;
    while !ctx.stop.requested() {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        // In slices, like `Stop::sleep`, to notice a stop soon.
        if left.is_zero() || crate::clock::wait_for_move(seen, left.min(Duration::from_millis(50)))
        {
            return;
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

fn claim(ctx: &JobContext, lane: Lane) -> Result<Option<ClaimedJob>, crate::store::StoreError> {
    queue::claim_due(&*ctx.pool.get()?, lane)
}

/// Records how a job ended. When that cannot be written (a full disk), it tries again every
/// second, so the job does not stay `running` until a restart; only a stop gives up, and the
/// next start requeues the job.
fn finish(ctx: &JobContext, job: &ClaimedJob, outcome: Outcome) {
    match &outcome {
        Outcome::Retry(error) => eprintln!(
            "jobs: {} #{} attempt {} failed, will retry: {error}",
            job.kind, job.id, job.attempts
        ),
        Outcome::Fail(error) => eprintln!("jobs: {} #{} failed: {error}", job.kind, job.id),
        Outcome::Blocked(error) => eprintln!(
            "jobs: {} #{} waits for the database: {error}",
            job.kind, job.id
        ),
        Outcome::Done | Outcome::Again(_) => {}
    }
    let mut complained = false;
    loop {
        let result = ctx
            .pool
            .get()
            .map_err(crate::store::StoreError::from)
            .and_then(|conn| match &outcome {
                Outcome::Done => queue::mark_done(&conn, job.id),
                Outcome::Retry(error) => queue::mark_failed(
                    &conn,
                    job,
                    error,
                    Some(queue::default_backoff(job.attempts)),
                ),
                Outcome::Again(at) => queue::reschedule(&conn, job.id, *at),
                Outcome::Blocked(error) => {
                    queue::postpone(&conn, job.id, crate::clock::now() + BLOCKED_WAIT, error)
                }
                Outcome::Fail(error) => queue::mark_failed(&conn, job, error, None),
            });
        match result {
            Ok(()) => return,
            Err(e) => {
                if !complained {
                    eprintln!(
                        "jobs: cannot record the outcome of {} #{} yet, trying again every second: {e}",
                        job.kind, job.id
                    );
                    complained = true;
                }
                if ctx.stop.sleep(Duration::from_secs(1)) {
                    return;
                }
            }
        }
    }
}
