//! Job kind `send_issue`: delivers an issue to every active subscriber over a few SMTP
//! connections at once, in rounds. Each message's delivery row is committed `sending` after
//! its envelope and body went out and just before the end-of-data mark that lets the relay
//! take it (commits are grouped across connections, and the writer's commits never run a WAL
//! checkpoint), so after a crash a delivery left `sending` may have been taken and is never
//! sent twice (`unconfirmed`), and one still `pending` was not taken and goes out after the
//! restart.
//!
//! A round runs on one thread: the connections and the writer that commits for them are
//! tasks of the worker thread's single-threaded runtime (made once when the worker starts),
//! so handing a claim to the writer and its answer back costs no thread wake-up.
//!
//! A round ends when the work runs out, when every connection has given up (the relay is
//! unreachable: the issue says so and the job comes back after a growing wait, or stops as
//! `failed` past the outage limit), when the database cannot be written (a full disk: the job
//! comes back by itself), or when the server stops (messages in flight finish first).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use tokio::sync::{Mutex, mpsc, oneshot, watch};

use super::{ClaimedJob, Job, JobContext, Outcome, TransportError};
use crate::clock::{self, Timestamp};
use crate::domain::content;
use crate::domain::delivery::send_limits::{self, HeldBy};
use crate::domain::delivery::sending::{self, Next, OutagePolicy, Outcome as Delivered, Recipient};
use crate::domain::delivery::tracking::Links;
use crate::domain::delivery::verp::ReturnPaths;
use crate::domain::issues::{self, Issue, Visibility};
use crate::domain::newsletters::Newsletter;
use crate::domain::values::time_zones::TimeZoneName;
use crate::mail::render::IssueEmail;
use crate::mail::{
    Commit, Envelope, Lane, MailError, MessageSocket, Permit, Relay, Transport, write_end_of_data,
};
use crate::store::jobs::{IssueSend, JobKind};
use crate::store::{Pool, PooledConnection, Tuned, write_tx};

pub struct SendIssue;

/// Deliveries read from the database at a time; memory stays flat in the number of recipients.
const BATCH: i64 = 500;

/// Transactions broken in a row after which a connection gives up for the round.
const BROKEN_IN_A_ROW: u32 = 3;

/// How often the writer checkpoints the WAL while a send runs, between two of its commits.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(500);

/// How long the writer waits before it tries again to record what it could not write.
const WRITE_RETRY: Duration = Duration::from_secs(1);

/// How long plain successes may wait for a commit: they go with the next claims, so most
/// never need one of their own.
const OUTCOMES_WAIT: Duration = Duration::from_millis(100);

/// The most writes one commit takes.
const GROUP_MAX: usize = 2000;

/// Sending knobs from the command line.
#[derive(Debug, Clone, Copy)]
pub struct SendSettings {
    /// SMTP connections used at once.
    pub concurrency: usize,
    /// Messages per second across all connections; 0 for no limit.
    pub rate: u32,
    /// Wait before the first retry of a temporarily refused message.
    pub retry_base: jiff::SignedDuration,
    /// How the send waits out an unreachable relay.
    pub outage: OutagePolicy,
}

impl Job for SendIssue {
    fn kind(&self) -> JobKind {
        JobKind::SendIssue
    }

    /// One round of the send on the worker thread's runtime.
    fn run(&self, ctx: &JobContext, rt: &tokio::runtime::Runtime, job: &ClaimedJob) -> Outcome {
        let payload = match job.payload::<IssueSend>() {
            Ok(payload) => payload,
            Err(bad) => return Outcome::Fail(bad),
        };
        match send(ctx, rt, payload.issue_id) {
            Ok(Next::Finished | Next::GaveUp) => Outcome::Done,
            Ok(Next::WaitUntil(at)) => Outcome::Again(at),
            Ok(Next::Continue) => Outcome::Again(clock::now()),
            Err(e) => Outcome::Blocked(e),
        }
    }
}

/// The HTML of an issue saved before HTML was stored, rendered now (the `render_content`
/// job has not reached it) and stored, so the mail is what the issue's content renders to.
fn render_saved_issue(ctx: &JobContext, issue: &Issue) -> Result<String, String> {
    let html = content::render_saved(&issue.content_markdown)
        .map_err(|e| e.to_string())?
        .ok_or("every render slot is busy")?;
    let conn = ctx.pool.get().map_err(|e| e.to_string())?;
    issues::store_rendered(&conn, issue.id, &issue.content_markdown, &html)
        .map_err(|e| e.to_string())?;
    Ok(html)
}

/// The issue as e-mail, ready to personalise: its HTML (rendered now and stored when it was
/// saved before HTML was), and its text part, rendered within the budget once per round
/// (never per recipient). The real send and a test send (`send_test`) both build it here.
pub(super) fn issue_email(
    ctx: &JobContext,
    issue: &mut Issue,
    newsletter: &Newsletter,
) -> Result<IssueEmail, String> {
    if issue.content_html.is_none() {
        issue.content_html = Some(render_saved_issue(ctx, issue)?);
    }
    let body_text = content::plain_text(&issue.content_markdown)
        .map_err(|e| e.to_string())?
        .ok_or("every render slot is busy")?;
    let links = Links::new(
        &newsletter.site_origin(&ctx.urls),
        newsletter.id,
        ctx.secret.clone(),
        newsletter.tracking_enabled,
    );
    Ok(IssueEmail::new(
        issue,
        newsletter,
        ctx.urls.public_host_name(),
        links,
        &body_text,
    ))
}

/// The messages of a send: the issue, and for a paid issue sent to everyone the teaser that
/// goes to readers without paid access (the delivery's `teaser`, fixed when the recipients
/// were recorded).
struct Mails {
    full: IssueEmail,
    teaser: Option<IssueEmail>,
}

impl Mails {
    fn for_recipient(&self, recipient: &Recipient) -> &IssueEmail {
        match (&self.teaser, recipient.teaser) {
            (Some(teaser), true) => teaser,
            _ => &self.full,
        }
    }
}

/// How a round of the send ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RoundEnd {
    /// Every due delivery was handed to a connection (or the issue stopped sending).
    Drained,
    /// Every connection gave up: the relay has been unreachable since then, for this reason.
    RelayDown {
        since: jiff::Timestamp,
        reason: String,
    },
    /// The database could not be written.
    Storage(String),
    /// The server is stopping.
    Stopping,
    /// A limit holds the send until then (every relay's, or the warm-up plan's): this says
    /// which.
    Held {
        until: jiff::Timestamp,
        note: String,
    },
}

/// One round: prepare, deliver what is due, then record what comes next.
fn send(ctx: &JobContext, rt: &tokio::runtime::Runtime, issue_id: i64) -> Result<Next, String> {
    let plan = {
        let mut conn = ctx.pool.get().map_err(|e| e.to_string())?;
        sending::prepare(&mut conn, issue_id).map_err(|e| e.to_string())?
    };
    let Some(mut plan) = plan else {
        return Ok(Next::Finished);
    };
    let full = issue_email(ctx, &mut plan.issue, &plan.newsletter)?;
    // A paid issue sent to everyone: free members' messages are teasers.
    let teaser = match plan.issue.visibility == Visibility::Paid && !plan.issue.audience.paid_only {
        true => {
            let account = format!("{}/account", plan.newsletter.site_origin(&ctx.urls));
            let mut teaser = plan.issue.teaser(&account);
            Some(issue_email(ctx, &mut teaser, &plan.newsletter)?)
        }
        false => None,
    };
    let email = Arc::new(Mails { full, teaser });
    let down_before = plan.issue.relay_down_since.map(Timestamp::instant);
    let transport = match ctx.newsletter_transport(rt, &plan.newsletter) {
        Ok(transport) => transport,
        Err(TransportError::RelayUnusable(reason)) => {
            eprintln!("send: issue {issue_id}: the newsletter's relay cannot be used: {reason}");
            let mut conn = ctx.pool.get().map_err(|e| e.to_string())?;
            let since = down_before.unwrap_or_else(clock::now);
            return sending::relay_unreachable(
                &mut conn,
                issue_id,
                since,
                &reason,
                &ctx.send.outage,
            )
            .map_err(|e| e.to_string());
        }
        Err(TransportError::Other(e)) => return Err(e),
    };
    let warm_up = {
        let conn = ctx.pool.get().map_err(|e| e.to_string())?;
        // Each relay's counts of the last day, read once (off the send's thread).
        for relay in Lane::new(&transport).relays() {
            relay.load_usage(&conn);
        }
        WarmUpGate::load(&conn, &plan.newsletter).map_err(|e| e.to_string())?
    };
    let started = Instant::now();
    let (sent, commits, end) = rt.block_on(deliver(
        ctx,
        &transport,
        issue_id,
        email,
        down_before,
        warm_up,
    ))?;
    let elapsed = started.elapsed().as_secs_f64();
    if sent > 0 {
        eprintln!(
            "send: issue {issue_id}: {sent} message(s) in {elapsed:.1} s ({:.0}/s, {commits} commits)",
            sent as f64 / elapsed.max(1e-9)
        );
    }
    let mut conn = ctx.pool.get().map_err(|e| e.to_string())?;
    match end {
        RoundEnd::Drained => sending::finish_or_wait(&mut conn, issue_id),
        RoundEnd::RelayDown { since, reason } => {
            eprintln!("send: issue {issue_id}: the relay is unreachable: {reason}");
            sending::relay_unreachable(&mut conn, issue_id, since, &reason, &ctx.send.outage)
        }
        RoundEnd::Held { until, note } => {
            eprintln!("send: issue {issue_id}: {note}");
            sending::held(&mut conn, issue_id, until, &note)
        }
        RoundEnd::Stopping => return Ok(Next::Continue),
        RoundEnd::Storage(e) => return Err(e),
    }
    .map_err(|e| e.to_string())
}

/// What the connections of a round share: who is still up, and how the round ends.
struct Round {
    lanes: usize,
    /// Connections that gave up for this round.
    down: AtomicUsize,
    /// When connections started failing since the last one that worked, and the last reason.
    failing: StdMutex<Failing>,
    end: watch::Sender<Option<RoundEnd>>,
}

#[derive(Default)]
struct Failing {
    since: Option<jiff::Timestamp>,
    reason: String,
    /// A connection opened during the round.
    reached: bool,
}

impl Round {
    fn new(lanes: usize, down_before: Option<jiff::Timestamp>) -> Self {
        Round {
            lanes,
            down: AtomicUsize::new(0),
            failing: StdMutex::new(Failing {
                since: down_before,
                ..Failing::default()
            }),
            end: watch::Sender::new(None),
        }
    }

    /// Ends the round, unless it already ended (the first reason stands).
    fn finish(&self, why: RoundEnd) {
        self.end.send_if_modified(|end| {
            if end.is_none() {
                *end = Some(why);
                true
            } else {
                false
            }
        });
    }

    fn is_over(&self) -> bool {
        self.end.borrow().is_some()
    }

    /// Whether the round ended in a way that drops the messages in hand: the server is
    /// stopping or the database cannot be written.
    fn refuses_claims(&self) -> bool {
        matches!(
            *self.end.borrow(),
            Some(RoundEnd::Stopping | RoundEnd::Storage(_))
        )
    }

    async fn over(&self) {
        let mut watching = self.end.subscribe();
        let _ = watching.wait_for(Option::is_some).await;
    }

    /// A connection works: any outage is over.
    fn reached(&self) {
        let mut failing = self.failing.lock().unwrap_or_else(|e| e.into_inner());
        failing.reached = true;
        failing.since = None;
    }

    /// A connection gives up for this round; when it was the last one, the relay is down.
    fn gave_up(&self, reason: String) {
        let since = {
            let mut failing = self.failing.lock().unwrap_or_else(|e| e.into_inner());
            let since = *failing.since.get_or_insert_with(clock::now);
            failing.reason = reason.clone();
            since
        };
        if self.down.fetch_add(1, Ordering::SeqCst) + 1 >= self.lanes {
            self.finish(RoundEnd::RelayDown { since, reason });
        }
    }
}

/// Messages to the database writer.
enum Write {
    /// Mark this delivery `sending` and answer once that is committed; on a plain connection
    /// also write its end-of-data mark right after the commit (nothing in between). With the
    /// relay it goes through, so the relay's counts are written in the same commit.
    Claim(Claim),
    /// Record an outcome; with an answer channel, say when it is committed.
    Done(i64, Delivered, Option<oneshot::Sender<()>>),
    /// What holds the send back for now (a relay that asked us to slow down, a relay that
    /// took over from one that cannot be reached), for the owner: the issue's note while it
    /// sends.
    Note(String),
}

/// A claim of one message.
struct Claim {
    delivery_id: i64,
    socket: MessageSocket,
    answer: oneshot::Sender<Commit>,
    relay: Option<Arc<Relay>>,
}

/// Sends every due delivery once through `transport` (signing as the newsletter's domain or
/// the operator's); returns how many went out, in how many commits, and how the round ended.
async fn deliver(
    ctx: &JobContext,
    transport: &Transport,
    issue_id: i64,
    email: Arc<Mails>,
    down_before: Option<jiff::Timestamp>,
    warm_up: Option<WarmUpGate>,
) -> Result<(usize, u64, RoundEnd), String> {
    let lanes = ctx.send.concurrency.max(1);
    let round = Arc::new(Round::new(lanes, down_before));
    let warm_up_key = warm_up.as_ref().map(|gate| gate.key.clone());
    let warm_up = warm_up.map(|gate| Arc::new(StdMutex::new(gate)));
    let (writes, write_rx) = mpsc::unbounded_channel::<Write>();
    let writer = tokio::spawn(write_loop(
        ctx.pool.clone(),
        write_rx,
        Bookkeeping {
            issue_id,
            retry_base: ctx.send.retry_base,
            warm_up_key,
        },
        round.clone(),
        ctx.stop.clone(),
    ));
    let stopping = {
        let (stop, round) = (ctx.stop.clone(), round.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = stop.wait() => round.finish(RoundEnd::Stopping),
                _ = round.over() => {}
            }
        })
    };
    let (work_tx, work_rx) = mpsc::channel::<Recipient>(BATCH as usize * 2);
    let work_rx = Arc::new(Mutex::new(work_rx));
    let pacer = Arc::new(Pacer::new(ctx.send.rate));
    let handles: Vec<_> = (0..lanes)
        .map(|_| {
            let lane = SendLane {
                lane: Lane::new(transport),
                work: work_rx.clone(),
                email: email.clone(),
                return_paths: ctx.return_paths.clone(),
                writes: writes.clone(),
                pacer: pacer.clone(),
                round: round.clone(),
                warm_up: warm_up.clone(),
                noted_relay: 0,
            };
            tokio::spawn(lane.run())
        })
        .collect();
    // Only the lanes hold the queue and the writer's channel now: when they stop, the feed
    // and the writer see it.
    drop((work_rx, writes));
    let readers = email.full.has_merge_tags()
        || email
            .teaser
            .as_ref()
            .is_some_and(IssueEmail::has_merge_tags);
    let fed = feed(ctx.pool.clone(), issue_id, readers, work_tx, round.clone()).await;
    let mut sent = 0;
    for handle in handles {
        sent += handle.await.map_err(|e| e.to_string())?;
    }
    let commits = writer
        .await
        .map_err(|_| "the send writer panicked".to_string())?;
    round.finish(match fed {
        Ok(()) => RoundEnd::Drained,
        Err(e) => RoundEnd::Storage(e),
    });
    let _ = stopping.await;
    let end = round.end.borrow().clone().unwrap_or(RoundEnd::Drained);
    Ok((sent, commits, end))
}

/// Reads due deliveries page by page and hands them to the connections, until they run out
/// or the round ends; with `readers` (the content has merge tags), each with its reader's
/// values.
async fn feed(
    pool: Pool,
    issue_id: i64,
    readers: bool,
    work: mpsc::Sender<Recipient>,
    round: Arc<Round>,
) -> Result<(), String> {
    let mut after = 0;
    loop {
        let pool = pool.clone();
        let batch =
            tokio::task::spawn_blocking(move || -> Result<(bool, Vec<Recipient>), String> {
                let conn = pool.get().map_err(|e| e.to_string())?;
                let still = sending::still_sending(&conn, issue_id).map_err(|e| e.to_string())?;
                let due = match readers {
                    true => sending::due_batch_with_readers(&conn, issue_id, after, BATCH),
                    false => sending::due_batch(&conn, issue_id, after, BATCH),
                };
                Ok((still, due.map_err(|e| e.to_string())?))
            })
            .await
            .map_err(|e| e.to_string())??;
        let (still_sending, batch) = batch;
        if !still_sending || batch.is_empty() {
            return Ok(());
        }
        after = batch.last().map(|r| r.delivery_id).unwrap_or(after);
        for recipient in batch {
            tokio::select! {
                sent = work.send(recipient) => if sent.is_err() { return Ok(()) },
                _ = round.over() => return Ok(()),
            }
        }
    }
}

/// One connection of a round.
struct SendLane {
    lane: Lane,
    work: Arc<Mutex<mpsc::Receiver<Recipient>>>,
    email: Arc<Mails>,
    return_paths: ReturnPaths,
    writes: mpsc::UnboundedSender<Write>,
    pacer: Arc<Pacer>,
    round: Arc<Round>,
    warm_up: Option<Arc<StdMutex<WarmUpGate>>>,
    /// The later relay this connection last said it goes through (0: none).
    noted_relay: usize,
}

/// Whether a message may go now.
enum Go {
    Send,
    /// Its relay's limit is reached: on another relay's connection.
    Elsewhere,
    /// The round ended.
    Stop,
}

impl SendLane {
    /// Takes recipients one at a time until the work runs out or the round ends; a
    /// connection that cannot be opened (or breaks every transaction) gives up for the round.
    async fn run(mut self) -> usize {
        let mut sent = 0;
        let mut broken_in_a_row = 0;
        // A recipient taken from the queue but not sent yet (its relay's limit was reached:
        // it goes on another relay's connection).
        let mut waiting: Option<Recipient> = None;
        while !self.round.is_over() {
            if !self.connect().await {
                break;
            }
            let Some((recipient, fresh)) = self.next_recipient(waiting.take()).await else {
                break;
            };
            // The warm-up plan counts each message once, when it is taken from the queue.
            if fresh
                && let Some(gate) = &self.warm_up
                && let Some(held) = gate.lock().unwrap_or_else(|e| e.into_inner()).take()
            {
                self.round.finish(held);
                break;
            }
            match self.wait_for_relay().await {
                Go::Send => {}
                Go::Elsewhere => {
                    waiting = Some(recipient);
                    self.lane.reconnect_later().await;
                    continue;
                }
                Go::Stop => break,
            }
            let (outcome, why_abandoned) = self.send_one(&recipient).await;
            match &outcome {
                Delivered::Sent => {
                    sent += 1;
                    broken_in_a_row = 0;
                }
                Delivered::Interrupted(_) => broken_in_a_row += 1,
                Delivered::Throttled(_) => {
                    if let Some(note) = self.lane.relay().and_then(|(_, r)| r.pace_note()) {
                        let _ = self.writes.send(Write::Note(note));
                    }
                }
                _ => broken_in_a_row = 0,
            }
            self.record(recipient.delivery_id, outcome).await;
            let gave_up = why_abandoned.or_else(|| {
                (broken_in_a_row >= BROKEN_IN_A_ROW)
                    .then(|| format!("the relay broke {BROKEN_IN_A_ROW} transactions in a row"))
            });
            if let Some(reason) = gave_up {
                self.round.gave_up(reason);
                break;
            }
        }
        self.lane.close().await;
        sent
    }

    /// Opens a connection unless one is open (or goes back to a preferred relay that may be
    /// tried again); false when the round ends here: it is over, every relay is held (the
    /// round ends held), or none answers (this connection gives up).
    async fn connect(&mut self) -> bool {
        if self.lane.better_relay_due() {
            self.lane.reconnect_later().await;
        }
        let connected = tokio::select! {
            opened = self.lane.connect() => opened,
            _ = self.round.over() => return false,
        };
        match connected {
            Err(MailError::Held { until, by, relay }) => {
                self.round.finish(RoundEnd::Held {
                    until,
                    note: held_note(&by, &relay, until),
                });
                false
            }
            Err(e) => {
                self.round.gave_up(e.to_string());
                false
            }
            Ok(()) => {
                self.round.reached();
                if let Some((index, _)) = self.lane.relay()
                    && index > 0
                    && index != self.noted_relay
                {
                    self.noted_relay = index;
                    let _ = self.writes.send(Write::Note(self.failover_note(index)));
                }
                true
            }
        }
    }

    /// The recipient `waiting` for another relay, else the next from the queue (`true`: it
    /// is fresh); `None` when the work ran out or the round ended.
    async fn next_recipient(&self, waiting: Option<Recipient>) -> Option<(Recipient, bool)> {
        if let Some(recipient) = waiting {
            return Some((recipient, false));
        }
        tokio::select! {
            next = async { self.work.lock().await.recv().await } => next.map(|r| (r, true)),
            _ = self.round.over() => None,
        }
    }

    /// Waits for the relay's pace and the send's `--send-rate`; or says the relay's limit is
    /// reached (the message goes on the next relay with room, or the round ends held when
    /// none has any), or that the round ended meanwhile.
    async fn wait_for_relay(&self) -> Go {
        match self.lane.permit() {
            Permit::After(wait) if !wait.is_zero() => {
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = self.round.over() => return Go::Stop,
                }
            }
            Permit::After(_) => {}
            Permit::Held { .. } => return Go::Elsewhere,
        }
        tokio::select! {
            _ = self.pacer.wait() => Go::Send,
            _ = self.round.over() => Go::Stop,
        }
    }

    /// Records a message's outcome. A plain success goes with the next group: this
    /// connection's next claim commits in the same group or a later one, so at most one of
    /// its messages is ever `sending`. Anything else is recorded before anything else
    /// happens on this connection, so a kill cannot leave a refused message counted as in
    /// flight; after a refusal the session is reset for the next message.
    async fn record(&mut self, delivery_id: i64, outcome: Delivered) {
        if outcome == Delivered::Sent {
            let _ = self.writes.send(Write::Done(delivery_id, outcome, None));
            return;
        }
        let refused = matches!(
            outcome,
            Delivered::Rejected(_) | Delivered::Deferred(_) | Delivered::Throttled(_)
        );
        let (saved_tx, saved) = oneshot::channel();
        let _ = self
            .writes
            .send(Write::Done(delivery_id, outcome, Some(saved_tx)));
        let _ = saved.await;
        if refused {
            self.lane.reset().await;
        }
    }

    /// "Sending through relay 2 (b:25): a:25 cannot be reached (refused) since ...".
    fn failover_note(&self, index: usize) -> String {
        let relays = self.lane.relays();
        let unreachable: Vec<String> = relays[..index]
            .iter()
            .map(|r| match (r.down_since(), r.held()) {
                (Some((since, reason)), _) => format!(
                    "{} cannot be reached since {} ({reason})",
                    r.name,
                    clock::human(since)
                ),
                (None, Some((until, by))) => format!(
                    "{} is held by {} until {}",
                    r.name,
                    by.describe(),
                    clock::human(until)
                ),
                (None, None) => format!("{} did not answer", r.name),
            })
            .collect();
        format!(
            "Sending through relay {} ({}): {}; back to it once it can be used.",
            index + 1,
            relays[index].name,
            unreachable.join("; ")
        )
    }

    /// Renders and sends one message; the claim goes to the writer at the last moment. With
    /// an abandoned message comes why, and this connection gives up for the round.
    async fn send_one(&mut self, recipient: &Recipient) -> (Delivered, Option<String>) {
        // A copy of the send's pre-encoded message with the personal parts filled in: a few
        // microseconds, so it runs right here (see `IssueEmail::message`).
        let mime = self.email.for_recipient(recipient).message(
            recipient.delivery_id,
            &recipient.email,
            &recipient.reader,
        );
        // The return path names the delivery, so a bounce mailed back to it says whose it is.
        let return_path = self.return_paths.address(recipient.delivery_id);
        let envelope = Envelope {
            from: &return_path,
            to: &recipient.email,
        };
        let (writes, round, id) = (&self.writes, &self.round, recipient.delivery_id);
        let relay = self.lane.relay().map(|(_, r)| r.clone());
        // Which relay said what, when there are several.
        let prefix = match &relay {
            Some(r) if self.lane.relays().len() > 1 => format!("{}: ", r.name),
            _ => String::new(),
        };
        let named = |e: String| format!("{prefix}{e}");
        let result = self
            .lane
            .send(envelope, &mime, |socket| async move {
                // A round that stopped (the server stopping, a full disk) claims nothing more:
                // the message is dropped before its end mark and stays due. A round that
                // ended because a limit holds lets the messages already let through finish.
                if round.refuses_claims() {
                    return Commit::Refused;
                }
                let (answer_tx, answer) = oneshot::channel();
                let claim = Claim {
                    delivery_id: id,
                    socket,
                    answer: answer_tx,
                    relay,
                };
                if writes.send(Write::Claim(claim)).is_err() {
                    return Commit::Refused;
                }
                answer.await.unwrap_or(Commit::Refused)
            })
            .await;
        let outcome = match result {
            Ok(()) => Delivered::Sent,
            Err(MailError::Unconfirmed(e)) => Delivered::Unconfirmed(named(e)),
            Err(MailError::Permanent(e)) => Delivered::Rejected(named(e)),
            Err(MailError::Temporary(e)) => Delivered::Deferred(named(e)),
            Err(MailError::Connection(e)) => Delivered::Interrupted(named(e)),
            Err(MailError::Throttled { answer, .. }) => {
                Delivered::Throttled(named(format!("the relay asked to slow down: {answer}")))
            }
            Err(e @ MailError::Held { .. }) => return (Delivered::Abandoned, Some(e.to_string())),
            Err(MailError::Abandoned(e)) => return (Delivered::Abandoned, Some(e)),
        };
        (outcome, None)
    }
}

/// The database side of a send: drains waiting claims and outcomes and commits them together,
/// so many connections share one commit. Returns how many commits it made.
async fn write_loop(
    pool: Pool,
    mut writes: mpsc::UnboundedReceiver<Write>,
    books: Bookkeeping,
    round: Arc<Round>,
    stop: super::Stop,
) -> u64 {
    let conn = loop {
        // The pool may make a caller wait for a connection: not on the send's only thread.
        let pool = pool.clone();
        let got = tokio::task::spawn_blocking(move || pool.get().map_err(|e| e.to_string()))
            .await
            .unwrap_or_else(|e| Err(e.to_string()));
        match got {
            Ok(conn) => break conn,
            Err(e) => {
                round.finish(RoundEnd::Storage(e));
                if stop.pause(WRITE_RETRY).await {
                    refuse_all(writes).await;
                    return 0;
                }
            }
        }
    };
    // The send's bookkeeping commits without waiting for fsync (the WAL write itself is done,
    // so a killed process loses nothing) and never checkpoints inside a commit: either would
    // put an fsync between a claim becoming durable and its end-of-data mark, and a crash
    // there leaves a message recorded but never sent. The writer checkpoints between its
    // commits instead. The guard hands the connection back to the pool with the service's
    // settings, even after a panic.
    let tuned = match Tuned::relaxed(conn).and_then(Tuned::without_autocheckpoint) {
        Ok(tuned) => tuned,
        Err(e) => {
            round.finish(RoundEnd::Storage(e.to_string()));
            refuse_all(writes).await;
            return 0;
        }
    };
    let mut writer = Writer {
        conn: Some(tuned),
        pool,
        checkpointed: Instant::now(),
        copying: None,
    };
    let commits = write_groups(&mut writer, &mut writes, &books, &round, &stop).await;
    refuse_all(writes).await;
    commits
}

struct Writer {
    /// The writer's connection, with the send's settings while it holds it; away only while
    /// a checkpoint runs on a blocking thread.
    conn: Option<Tuned<PooledConnection>>,
    pool: Pool,
    /// When the last checkpoint finished.
    checkpointed: Instant,
    /// The first part of a checkpoint, running beside the writer's commits.
    copying: Option<tokio::task::JoinHandle<()>>,
}

impl Writer {
    /// Every [`CHECKPOINT_EVERY`], a checkpoint of the WAL in two parts, both passive. The
    /// first runs on a connection of its own beside the writer's commits and does the bulk:
    /// it flushes the WAL to disk and copies what was committed until it started. The second
    /// runs on the writer's connection after the last commit's end-of-data marks went out and
    /// before the next commit, so no commit lands while it copies the few frames added
    /// meanwhile: the WAL is then copied back whole and starts over at the next commit,
    /// instead of growing for the whole send (a checkpointer beside a writer that commits
    /// thousands of times a second never catches up). The connections go on while either
    /// part runs; only their next claims wait for the second, short one.
    async fn checkpoint_when_due(&mut self) {
        match &self.copying {
            None if self.checkpointed.elapsed() >= CHECKPOINT_EVERY => {
                let pool = self.pool.clone();
                self.copying = Some(tokio::task::spawn_blocking(move || {
                    if let Ok(conn) = pool.get() {
                        // Busy or a full disk: the second part tries anyway.
                        let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                    }
                }));
            }
            Some(copying) if copying.is_finished() => {
                self.copying = None;
                let Some(tuned) = self.conn.take() else {
                    return;
                };
                let checkpointed = tokio::task::spawn_blocking(move || {
                    let _ = tuned.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                    tuned
                })
                .await;
                // A panicked checkpoint took the connection with it (and gave it back to the
                // pool).
                self.conn = checkpointed.ok();
                self.checkpointed = Instant::now();
            }
            _ => {}
        }
    }
}

/// Answers every claim still coming with a refusal, until the connections are gone.
async fn refuse_all(mut writes: mpsc::UnboundedReceiver<Write>) {
    while let Some(write) = writes.recv().await {
        match write {
            Write::Claim(claim) => {
                let _ = claim.answer.send(Commit::Refused);
            }
            Write::Done(..) | Write::Note(_) => {}
        }
    }
}

/// What the writer writes besides the deliveries: the issue's note, and the counts that the
/// relays' limits and the warm-up plan read.
struct Bookkeeping {
    issue_id: i64,
    retry_base: jiff::SignedDuration,
    /// The newsletter's own count, when its warm-up plan is on.
    warm_up_key: Option<String>,
}

impl Bookkeeping {
    /// Writes, in the claims' transaction, how many of `claimed` went through each relay that
    /// has hourly or daily limits, and through the newsletter when it is warming up.
    fn count(
        &self,
        conn: &rusqlite::Connection,
        claimed: &[i64],
        relays: &[(i64, Option<Arc<Relay>>)],
    ) -> crate::domain::DomainResult<()> {
        if claimed.is_empty() {
            return Ok(());
        }
        let now = clock::now();
        let mut by_relay: Vec<(&str, u64)> = Vec::new();
        for (id, relay) in relays {
            let Some(relay) = relay.as_ref().filter(|r| r.counts_usage()) else {
                continue;
            };
            if !claimed.contains(id) {
                continue;
            }
            match by_relay.iter_mut().find(|(key, _)| *key == relay.usage_key) {
                Some((_, n)) => *n += 1,
                None => by_relay.push((&relay.usage_key, 1)),
            }
        }
        for (name, n) in by_relay {
            send_limits::record(conn, name, now, n)?;
        }
        if let Some(key) = &self.warm_up_key {
            send_limits::record(conn, key, now, claimed.len() as u64)?;
        }
        Ok(())
    }
}

/// What waits for the writer's next commit: outcomes (plain successes waiting for the next
/// claims, or what a failed commit could not write), the connections waiting to hear they
/// are saved, and the issue's note.
#[derive(Default)]
struct Unsaved {
    outcomes: Vec<(i64, Delivered)>,
    acks: Vec<oneshot::Sender<()>>,
    note: Option<String>,
    /// When the successes waiting alone must be committed anyway.
    flush_by: Option<Instant>,
}

impl Unsaved {
    /// Files the writes of a group; returns its claims.
    fn take(&mut self, group: Vec<Write>) -> Vec<Claim> {
        let mut claims = Vec::new();
        for write in group {
            match write {
                Write::Claim(claim) => claims.push(claim),
                Write::Done(id, outcome, ack) => {
                    self.outcomes.push((id, outcome));
                    self.acks.extend(ack);
                }
                Write::Note(text) => self.note = Some(text),
            }
        }
        claims
    }

    /// Whether something waiting needs a commit now: claims, anyone waiting for an answer,
    /// a note, many outcomes, or outcomes that waited long enough. Otherwise outcomes wait
    /// for the next claims, at most [`OUTCOMES_WAIT`].
    fn due(&mut self, claims: &[Claim]) -> bool {
        let due = !claims.is_empty()
            || !self.acks.is_empty()
            || self.note.is_some()
            || self.outcomes.len() >= GROUP_MAX
            || self.flush_by.is_some_and(|at| Instant::now() >= at);
        if !due && !self.outcomes.is_empty() {
            self.flush_by
                .get_or_insert_with(|| Instant::now() + OUTCOMES_WAIT);
        }
        due
    }

    /// Everything waiting was committed: tell whoever waits.
    fn saved(&mut self) {
        self.note = None;
        self.outcomes.clear();
        self.flush_by = None;
        for ack in self.acks.drain(..) {
            let _ = ack.send(());
        }
    }
}

/// The next group of writes: every write waiting once the first has come (or `wait_until`
/// has passed), letting every connection that is ready go first. `None` when the channel
/// is closed and empty.
async fn next_group(
    writes: &mut mpsc::UnboundedReceiver<Write>,
    wait_until: Option<Instant>,
) -> Option<Vec<Write>> {
    let mut group = Vec::new();
    let next = match wait_until {
        Some(at) => tokio::time::timeout_at(at.into(), writes.recv()).await.ok(),
        None => Some(writes.recv().await),
    };
    match next {
        Some(Some(first)) => group.push(first),
        Some(None) => return None,
        None => {}
    }
    // Every connection ready to claim in this turn of the runtime joins the group.
    tokio::task::yield_now().await;
    while group.len() < GROUP_MAX {
        match writes.try_recv() {
            Ok(more) => group.push(more),
            Err(_) => break,
        }
    }
    Some(group)
}

/// Answers the claims of a commit, straight after it (nothing in between): the ones
/// `claimed` go on to their end-of-data marks (written here on plain SMTP), the others are
/// refused.
fn answer_claims(claims: Vec<Claim>, claimed: &[i64]) {
    for claim in claims {
        let commit = if claimed.contains(&claim.delivery_id) {
            match &claim.socket {
                MessageSocket::Plain(socket) => write_end_of_data(socket.as_deref()),
                MessageSocket::NotShared => Commit::Claimed { end_written: 0 },
            }
        } else {
            Commit::Refused
        };
        let _ = claim.answer.send(commit);
    }
}

/// Commits group after group until the connections are gone and nothing waits; returns how
/// many commits it made. A commit that fails (a full disk) keeps what it could not write and
/// tries again every [`WRITE_RETRY`], claiming nothing meanwhile.
async fn write_groups(
    writer: &mut Writer,
    writes: &mut mpsc::UnboundedReceiver<Write>,
    books: &Bookkeeping,
    round: &Round,
    stop: &super::Stop,
) -> u64 {
    let mut commits = 0;
    let mut unsaved = Unsaved::default();
    let mut closed = false;
    let mut failing = false;
    while !(closed && unsaved.outcomes.is_empty()) {
        let group = if closed {
            // Only what a failing disk kept back is left: try again in a while.
            if stop.pause(WRITE_RETRY).await {
                break;
            }
            Vec::new()
        } else {
            let wait_until = if failing {
                Some(Instant::now() + WRITE_RETRY)
            } else {
                unsaved.flush_by
            };
            next_group(writes, wait_until).await.unwrap_or_else(|| {
                closed = true;
                Vec::new()
            })
        };
        let claims = unsaved.take(group);
        if !(closed || failing || unsaved.due(&claims)) {
            continue;
        }
        // A round that cannot record claims nothing more (a claim already asked for is
        // still honoured when the server is stopping: the message is in flight).
        let ids: Vec<i64> = match *round.end.borrow() {
            Some(RoundEnd::Storage(_)) => Vec::new(),
            _ => claims.iter().map(|c| c.delivery_id).collect(),
        };
        let Some(conn) = writer.conn.as_mut() else {
            round.finish(RoundEnd::Storage(
                "the send writer lost its connection".into(),
            ));
            answer_claims(claims, &[]);
            break;
        };
        let relays: Vec<(i64, Option<Arc<Relay>>)> = claims
            .iter()
            .map(|c| (c.delivery_id, c.relay.clone()))
            .collect();
        let committed = write_tx(conn, |tx| {
            sending::record_outcomes(tx, &unsaved.outcomes, books.retry_base)?;
            if let Some(text) = &unsaved.note {
                sending::note(tx, books.issue_id, text)?;
            }
            let claimed = sending::mark_sending(tx, &ids)?;
            books.count(tx, &claimed, &relays)?;
            Ok(claimed)
        });
        match committed {
            Ok(claimed) => {
                commits += 1;
                crash_point(claimed.len());
                answer_claims(claims, &claimed);
                unsaved.saved();
                if failing {
                    eprintln!("send: the database can be written again");
                    failing = false;
                }
                writer.checkpoint_when_due().await;
            }
            Err(e) => {
                let e: crate::domain::DomainError = e;
                if !failing {
                    eprintln!(
                        "send: cannot record the send's progress ({e}); no new message goes out \
                         and the outcomes are kept until they can be written"
                    );
                    failing = true;
                }
                round.finish(RoundEnd::Storage(e.to_string()));
                answer_claims(claims, &[]);
                if stop.requested() {
                    // Left `sending`: the next start counts them as unconfirmed.
                    break;
                }
            }
        }
    }
    // What could not be written: the waiting connections are answered (their channels
    // dropped) so they can close.
    commits
}

/// "Held by the relay's hourly limit (100 messages an hour) of smtp.example.com:587; resumes
/// at ...": why a send waits, for the owner.
fn held_note(by: &HeldBy, relay: &str, until: jiff::Timestamp) -> String {
    format!(
        "Held by {} of {relay}; resumes at {}.",
        by.describe(),
        clock::human(until)
    )
}

/// A newsletter's warm-up plan during one round: today's cap (in its time zone) and what it
/// sent today, counted as messages are let through.
struct WarmUpGate {
    /// The newsletter's key in `send_usage`.
    key: String,
    cap: u64,
    day: (jiff::Timestamp, jiff::Timestamp),
    usage: send_limits::Usage,
}

impl WarmUpGate {
    /// The gate of `newsletter`'s plan, when it has one on.
    fn load(
        conn: &rusqlite::Connection,
        newsletter: &Newsletter,
    ) -> crate::domain::DomainResult<Option<Self>> {
        let Some(cap) = crate::domain::delivery::relays::warm_up_cap_today(conn, newsletter)?
        else {
            return Ok(None);
        };
        let key = send_limits::newsletter_key(newsletter.id);
        Ok(Some(WarmUpGate {
            cap,
            day: send_limits::day_bounds(&TimeZoneName::utc(), clock::now()),
            usage: send_limits::Usage::load(conn, &key)?,
            key,
        }))
    }

    /// Counts one more message, or, when today's cap is reached, how the round ends.
    fn take(&mut self) -> Option<RoundEnd> {
        let now = clock::now();
        if now >= self.day.1 {
            // A round that runs past midnight keeps today's cap: the next round reads
            // tomorrow's.
            return Some(RoundEnd::Held {
                until: now,
                note: "A new day of the warm-up plan begins.".into(),
            });
        }
        match self.usage.room_today(self.cap, self.day.0, self.day.1) {
            send_limits::Room::Free => {
                self.usage.add(now, 1);
                None
            }
            send_limits::Room::Held { until, by } => Some(RoundEnd::Held {
                until,
                note: format!(
                    "Held by {}; resumes at {}.",
                    by.describe(),
                    clock::human(until)
                ),
            }),
        }
    }
}

/// A crash point for fault trials (`examples/fault_soak.rs`): with
/// `BROADSHEET_CRASH_AFTER_CLAIMS=N` in the environment the process aborts right after the
/// commit that records its N-th claim, before that commit's end-of-data marks: the worst
/// instant for a kill, hit on purpose instead of by chance. Unset in normal use.
fn crash_point(claimed_now: usize) {
    use std::sync::OnceLock;
    use std::sync::atomic::AtomicU64;
    static AFTER: OnceLock<Option<u64>> = OnceLock::new();
    static CLAIMED: AtomicU64 = AtomicU64::new(0);
    let Some(after) = *AFTER.get_or_init(|| {
        std::env::var("BROADSHEET_CRASH_AFTER_CLAIMS")
            .ok()
            .and_then(|n| n.parse().ok())
    }) else {
        return;
    };
    let claimed = CLAIMED.fetch_add(claimed_now as u64, Ordering::SeqCst) + claimed_now as u64;
    if claimed_now > 0 && claimed >= after {
        eprintln!("send: BROADSHEET_CRASH_AFTER_CLAIMS={after}: aborting after claim {claimed}");
        std::process::abort();
    }
}

/// Spaces messages out to `--send-rate` per second across all connections.
struct Pacer {
    interval: Option<Duration>,
    next: Mutex<Instant>,
}

impl Pacer {
    fn new(rate: u32) -> Self {
        Pacer {
            interval: (rate > 0).then(|| Duration::from_secs_f64(1.0 / rate as f64)),
            next: Mutex::new(Instant::now()),
        }
    }

    async fn wait(&self) {
        let Some(interval) = self.interval else {
            return;
        };
        let at = {
            let mut next = self.next.lock().await;
            let at = (*next).max(Instant::now());
            *next = at + interval;
            at
        };
        tokio::time::sleep_until(at.into()).await;
    }
}
