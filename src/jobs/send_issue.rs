//! Job kind `send_issue`: delivers an issue to every active subscriber over a few SMTP
//! connections at once. Each message's delivery row is committed `sending` after its
//! envelope and body went out and before the end-of-data mark that makes the server take it
//! (commits are grouped across connections), so after a crash a delivery left `sending` was
//! taken by the server (or cut off within microseconds of it) and is never sent twice, and
//! one still `pending` was not taken and goes out after the restart.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::{Mutex, mpsc, oneshot};

use super::{JobContext, Outcome, queue};
use crate::domain::sending::{self, Next, Outcome as Delivered, Recipient};
use crate::domain::tracking::Links;
use crate::mail::render::IssueEmail;
use crate::mail::{Commit, END_OF_DATA, Lane, MailError};
use crate::store::{Pool, StoreError, write_tx};

pub const KIND: &str = "send_issue";

/// Deliveries read from the database at a time; memory stays flat in the number of recipients.
const BATCH: i64 = 500;

#[derive(Debug, Serialize, Deserialize)]
struct Payload {
    issue_id: i64,
}

/// Sending knobs from the command line.
#[derive(Debug, Clone, Copy)]
pub struct SendSettings {
    /// SMTP connections used at once.
    pub concurrency: usize,
    /// Messages per second across all connections; 0 for no limit.
    pub rate: u32,
    /// Wait before the first retry of a temporarily refused message.
    pub retry_base: time::Duration,
}

/// Queues the send of `issue_id` in the caller's transaction.
pub fn enqueue(conn: &rusqlite::Connection, issue_id: i64) -> Result<i64, StoreError> {
    queue::enqueue_at(
        conn,
        KIND,
        &Payload { issue_id },
        crate::clock::now(),
        1_000_000,
    )
}

pub fn run(ctx: &JobContext, _rt: &tokio::runtime::Runtime, job: &queue::Job) -> Outcome {
    let payload: Payload = match serde_json::from_str(&job.payload) {
        Ok(p) => p,
        Err(e) => return Outcome::Fail(format!("bad payload: {e}")),
    };
    match send(ctx, payload.issue_id) {
        Ok(Next::Finished) => Outcome::Done,
        Ok(Next::WaitUntil(at)) => Outcome::Again(at),
        Ok(Next::Continue) => Outcome::Again(crate::clock::now() + time::Duration::seconds(5)),
        Err(e) => Outcome::Retry(e),
    }
}

fn send(ctx: &JobContext, issue_id: i64) -> Result<Next, String> {
    let plan = {
        let mut conn = ctx.pool.get().map_err(|e| e.to_string())?;
        sending::prepare(&mut conn, issue_id).map_err(|e| e.to_string())?
    };
    let Some(plan) = plan else {
        return Ok(Next::Finished);
    };
    let links = Links::new(
        &plan.newsletter.site_origin(&ctx.urls),
        plan.newsletter.id,
        ctx.secret.clone(),
        plan.newsletter.tracking_enabled,
    );
    let email = Arc::new(IssueEmail::new(&plan.issue, &plan.newsletter, links));
    let started = Instant::now();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let sent = rt.block_on(deliver(ctx, issue_id, email))?;
    let elapsed = started.elapsed().as_secs_f64();
    if sent > 0 {
        eprintln!(
            "send: issue {issue_id}: {sent} message(s) in {elapsed:.1} s ({:.0}/s)",
            sent as f64 / elapsed.max(1e-9)
        );
    }
    let mut conn = ctx.pool.get().map_err(|e| e.to_string())?;
    sending::finish_or_wait(&mut conn, issue_id).map_err(|e| e.to_string())
}

/// Messages to the database writer.
enum Write {
    /// Mark this delivery `sending` and answer once that is committed; with the message's
    /// socket, also write its end-of-data mark right after the commit (no wake-up between).
    Claim(i64, Option<std::net::TcpStream>, oneshot::Sender<Commit>),
    Done(i64, Delivered),
}

/// Sends every due delivery once; returns how many went out.
async fn deliver(ctx: &JobContext, issue_id: i64, email: Arc<IssueEmail>) -> Result<usize, String> {
    let (write_tx_chan, write_rx) = std_mpsc::channel::<Write>();
    let writer = {
        let pool = ctx.pool.clone();
        let retry_base = ctx.send.retry_base;
        std::thread::Builder::new()
            .name("send-writer".into())
            .spawn(move || write_loop(&pool, write_rx, retry_base))
            .map_err(|e| e.to_string())?
    };
    let (work_tx, work_rx) = mpsc::channel::<Recipient>(BATCH as usize * 2);
    let work_rx = Arc::new(Mutex::new(work_rx));
    let pacer = Arc::new(Pacer::new(ctx.send.rate));
    let mut lanes = Vec::new();
    for _ in 0..ctx.send.concurrency.max(1) {
        let (work_rx, email, writes, pacer, lane) = (
            work_rx.clone(),
            email.clone(),
            write_tx_chan.clone(),
            pacer.clone(),
            Lane::new(&ctx.transport),
        );
        lanes.push(tokio::spawn(run_lane(lane, work_rx, email, writes, pacer)));
    }
    drop(write_tx_chan);
    let feed = feed(ctx.pool.clone(), issue_id, work_tx).await;
    let mut sent = 0;
    for lane in lanes {
        sent += lane.await.map_err(|e| e.to_string())?;
    }
    writer
        .join()
        .map_err(|_| "the send writer panicked".to_string())??;
    feed.map(|_| sent)
}

/// Reads due deliveries page by page and hands them to the lanes.
async fn feed(pool: Pool, issue_id: i64, work: mpsc::Sender<Recipient>) -> Result<(), String> {
    let mut after = 0;
    loop {
        let pool = pool.clone();
        let batch =
            tokio::task::spawn_blocking(move || -> Result<(bool, Vec<Recipient>), String> {
                let conn = pool.get().map_err(|e| e.to_string())?;
                let still = sending::still_sending(&conn, issue_id).map_err(|e| e.to_string())?;
                Ok((
                    still,
                    sending::due_batch(&conn, issue_id, after, BATCH).map_err(|e| e.to_string())?,
                ))
            })
            .await
            .map_err(|e| e.to_string())??;
        let (still_sending, batch) = batch;
        if !still_sending || batch.is_empty() {
            return Ok(());
        }
        after = batch.last().map(|r| r.delivery_id).unwrap_or(after);
        for recipient in batch {
            if work.send(recipient).await.is_err() {
                return Ok(()); // every lane stopped
            }
        }
    }
}

/// One connection's loop: take a recipient, have it claimed, send, report.
async fn run_lane(
    mut lane: Lane,
    work: Arc<Mutex<mpsc::Receiver<Recipient>>>,
    email: Arc<IssueEmail>,
    writes: std_mpsc::Sender<Write>,
    pacer: Arc<Pacer>,
) -> usize {
    let mut sent = 0;
    let mut connection_failures = 0;
    loop {
        let Some(recipient) = work.lock().await.recv().await else {
            break;
        };
        pacer.wait().await;
        // Rendering is the CPU-heavy part: off the async threads, so a lane whose claim was
        // just committed is woken at once and writes its end-of-data mark without delay.
        let rendered = {
            let (email, id, to) = (
                email.clone(),
                recipient.delivery_id,
                recipient.email.clone(),
            );
            tokio::task::spawn_blocking(move || {
                let mail = email.personalise(id, &to);
                let mime = mail.to_mime();
                (mail, mime)
            })
            .await
        };
        let Ok((mail, mime)) = rendered else {
            break;
        };
        // 0: not asked yet, 1: claimed, 2: refused.
        let claim = AtomicU8::new(0);
        let result = lane
            .send(&mail, &mime, |socket| async {
                let (claimed_tx, claimed_rx) = oneshot::channel();
                let answer = if writes
                    .send(Write::Claim(recipient.delivery_id, socket, claimed_tx))
                    .is_ok()
                {
                    claimed_rx.await.unwrap_or(Commit::Refused)
                } else {
                    Commit::Refused
                };
                claim.store(
                    if answer == Commit::Refused { 2 } else { 1 },
                    Ordering::SeqCst,
                );
                answer
            })
            .await;
        if claim.load(Ordering::SeqCst) == 2 {
            continue; // no longer ours to send
        }
        let outcome = match result {
            Ok(()) => {
                sent += 1;
                connection_failures = 0;
                Delivered::Sent
            }
            Err(MailError::Unconfirmed(e)) => {
                sent += 1;
                Delivered::Unconfirmed(e)
            }
            Err(MailError::Permanent(e)) => Delivered::Rejected(e),
            Err(MailError::Temporary(e)) => Delivered::Deferred(e),
            Err(MailError::Connection(e)) => {
                connection_failures += 1;
                Delivered::Deferred(e)
            }
        };
        let _ = writes.send(Write::Done(recipient.delivery_id, outcome));
        if connection_failures >= 3 {
            // The server is unreachable: leave the rest for the job's next run.
            eprintln!("send: giving up this round after repeated connection failures");
            break;
        }
    }
    lane.close().await;
    sent
}

/// The database side of a send: drains waiting claims and outcomes and commits them together,
/// so many connections share one commit.
fn write_loop(
    pool: &Pool,
    writes: std_mpsc::Receiver<Write>,
    retry_base: time::Duration,
) -> Result<(), String> {
    let mut conn = pool.get().map_err(|e| e.to_string())?;
    // The send's bookkeeping commits without waiting for fsync (the WAL write itself is done,
    // so a killed process loses nothing). Waiting for the disk would widen the moment between
    // a claim becoming durable and its end-of-data mark going out from microseconds to the
    // length of an fsync, and a crash in it leaves a message recorded but never sent. The
    // connection goes back to the pool with the service's FULL setting.
    struct Restore<'a>(&'a rusqlite::Connection);
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            let _ = self.0.pragma_update(None, "synchronous", "FULL");
        }
    }
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(|e| e.to_string())?;
    let result = write_groups(&mut conn, writes, retry_base);
    drop(Restore(&conn));
    result
}

fn write_groups(
    conn: &mut rusqlite::Connection,
    writes: std_mpsc::Receiver<Write>,
    retry_base: time::Duration,
) -> Result<(), String> {
    while let Ok(first) = writes.recv() {
        let mut group = vec![first];
        while let Ok(more) = writes.try_recv() {
            group.push(more);
            if group.len() >= 2000 {
                break;
            }
        }
        let mut claims = Vec::new();
        let mut done = Vec::new();
        for write in group {
            match write {
                Write::Claim(id, socket, answer) => claims.push((id, socket, answer)),
                Write::Done(id, outcome) => done.push((id, outcome)),
            }
        }
        let ids: Vec<i64> = claims.iter().map(|(id, _, _)| *id).collect();
        let claimed = write_tx(conn, |tx| {
            sending::record_outcomes(tx, &done, retry_base)?;
            sending::mark_sending(tx, &ids)
        })
        .map_err(|e: crate::domain::DomainError| e.to_string())?;
        let claimed: std::collections::HashSet<i64> = claimed.into_iter().collect();
        for (id, socket, answer) in claims {
            let commit = if claimed.contains(&id) {
                Commit::Claimed {
                    end_written: socket.map(|s| write_end_of_data(&s)).unwrap_or(0),
                }
            } else {
                Commit::Refused
            };
            let _ = answer.send(commit);
        }
    }
    Ok(())
}

/// Writes what it can of the end-of-data mark on a (non-blocking) socket at once; the lane
/// writes the rest. Returns the bytes written.
fn write_end_of_data(mut socket: &std::net::TcpStream) -> usize {
    use std::io::Write as _;
    let mut written = 0;
    while written < END_OF_DATA.len() {
        match socket.write(&END_OF_DATA[written..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => written += n,
        }
    }
    written
}

/// Spaces messages out to `--send-rate` per second across all lanes.
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
