//! The rules of sending an issue: one delivery row per active subscriber (recorded once, so a
//! restart never adds a second copy), each marked `sending` durably once its message went
//! out but for the end-of-data mark, then `sent`, `bounced`, or back to `pending` for a
//! retry, and the issue `sent` when no delivery is left to do.

use rusqlite::{Connection, OptionalExtension};
use time::{Duration, OffsetDateTime};

use super::issues::{self, Issue, Status};
use super::newsletters::{self, Newsletter};
use super::stats::rate;
use super::{DomainResult, tracking};
use crate::clock;
use crate::store::write_tx;

/// Attempts before a temporarily failing delivery is given up.
pub const MAX_ATTEMPTS: i64 = 5;

/// What a send needs to know, loaded when its job starts.
pub struct SendPlan {
    pub issue: Issue,
    pub newsletter: Newsletter,
}

/// Loads an issue that is `sending`, records its recipients if not yet done, and settles
/// deliveries a crash left `sending`: their whole message was on its way (only the end mark
/// was left to write, if that), so the server most likely took it and sending again could
/// give someone a second copy: they count as sent. `None` when there is nothing to send.
pub fn prepare(conn: &mut Connection, issue_id: i64) -> DomainResult<Option<SendPlan>> {
    write_tx(conn, |tx| {
        const FIND: &str = "SELECT newsletter_id FROM issues WHERE id = ?1 AND status = 'sending'";
        let Some(newsletter_id) = tx
            .query_row(FIND, [issue_id], |r| r.get::<_, i64>(0))
            .optional()?
        else {
            return Ok(None);
        };
        let issue = issues::get(tx, newsletter_id, issue_id)?;
        let now = clock::now_string();
        if issue_recipients_pending(tx, issue_id)? {
            const RECIPIENTS: &str = "INSERT OR IGNORE INTO deliveries (issue_id, subscriber_id, email, created_at)
                 SELECT ?1, id, email, ?2 FROM subscribers WHERE newsletter_id = ?3 AND status = 'active' ORDER BY id";
            tx.execute(RECIPIENTS, (issue_id, &now, newsletter_id))?;
            tx.execute(
                "UPDATE issues SET recipients_at = ?2 WHERE id = ?1",
                (issue_id, &now),
            )?;
        }
        const SETTLE: &str = "UPDATE deliveries SET status = 'sent', sent_at = ?2,
             last_error = 'the server stopped during this message; counted as sent to avoid a second copy'
             WHERE issue_id = ?1 AND status = 'sending'";
        let settled = tx.execute(SETTLE, (issue_id, &now))?;
        if settled > 0 {
            eprintln!(
                "send: issue {issue_id}: {settled} message(s) were in flight at the last stop; not sending them again"
            );
        }
        Ok(Some(SendPlan {
            newsletter: newsletters::get(tx, newsletter_id)?,
            issue,
        }))
    })
}

fn issue_recipients_pending(conn: &Connection, issue_id: i64) -> DomainResult<bool> {
    Ok(conn.query_row(
        "SELECT recipients_at IS NULL FROM issues WHERE id = ?1",
        [issue_id],
        |r| r.get(0),
    )?)
}

/// One message to send.
#[derive(Debug, Clone)]
pub struct Recipient {
    pub delivery_id: i64,
    pub email: String,
}

/// Up to `limit` deliveries due now, after delivery id `after`, in id order.
pub fn due_batch(
    conn: &Connection,
    issue_id: i64,
    after: i64,
    limit: i64,
) -> DomainResult<Vec<Recipient>> {
    const SQL: &str = "SELECT id, email FROM deliveries
         WHERE issue_id = ?1 AND status = 'pending' AND id > ?2 AND (next_attempt_at IS NULL OR next_attempt_at <= ?3)
         ORDER BY id LIMIT ?4";
    let mut stmt = conn.prepare_cached(SQL)?;
    let rows = stmt.query_map((issue_id, after, clock::now_string(), limit), |r| {
        Ok(Recipient {
            delivery_id: r.get(0)?,
            email: r.get(1)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Marks deliveries `sending`; the caller commits this after a message's envelope and body
/// went out and before its end-of-data mark, so a message the server may have taken is
/// always recorded. Returns the ids that were still pending (others are skipped).
pub fn mark_sending(conn: &Connection, ids: &[i64]) -> DomainResult<Vec<i64>> {
    const MARK: &str =
        "UPDATE deliveries SET status = 'sending' WHERE id = ?1 AND status = 'pending'";
    let mut stmt = conn.prepare_cached(MARK)?;
    let mut claimed = Vec::with_capacity(ids.len());
    for &id in ids {
        if stmt.execute([id])? == 1 {
            claimed.push(id);
        }
    }
    Ok(claimed)
}

/// What happened to one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Sent,
    /// The whole message went out but the server's answer never came: counted as sent (with
    /// the reason), since sending again could give a second copy.
    Unconfirmed(String),
    /// A permanent rejection (5xx): the address bounces.
    Rejected(String),
    /// A temporary failure (4xx, connection trouble): try again later.
    Deferred(String),
}

/// Records outcomes (each counts as an attempt); a deferred delivery waits
/// `retry_base * 4^(attempts-1)` and is failed after [`MAX_ATTEMPTS`]. A refusal can come
/// before the delivery was claimed (at RCPT), so deferrals apply to pending ones too.
pub fn record_outcomes(
    conn: &Connection,
    outcomes: &[(i64, Outcome)],
    retry_base: Duration,
) -> DomainResult<()> {
    const SENT: &str = "UPDATE deliveries SET status = 'sent', sent_at = ?2, last_error = ?3, attempts = attempts + 1
         WHERE id = ?1 AND status = 'sending'";
    const DEFER: &str = "UPDATE deliveries SET attempts = attempts + 1,
         status = CASE WHEN attempts + 1 >= ?4 THEN 'failed' ELSE 'pending' END,
         next_attempt_at = ?2, last_error = ?3 WHERE id = ?1 AND status IN ('pending', 'sending')";
    const ATTEMPTS: &str = "SELECT attempts FROM deliveries WHERE id = ?1";
    const ATTEMPT: &str = "UPDATE deliveries SET attempts = attempts + 1 WHERE id = ?1";
    let now = clock::now();
    let now_text = clock::format(now);
    for (id, outcome) in outcomes {
        match outcome {
            Outcome::Sent => {
                conn.prepare_cached(SENT)?
                    .execute((id, &now_text, None::<&str>))?;
            }
            Outcome::Unconfirmed(reason) => {
                conn.prepare_cached(SENT)?.execute((
                    id,
                    &now_text,
                    format!("no reply after the message ({reason}); counted as sent"),
                ))?;
            }
            Outcome::Rejected(reason) => {
                conn.prepare_cached(ATTEMPT)?.execute([id])?;
                tracking::bounce(conn, *id, reason)?
            }
            Outcome::Deferred(reason) => {
                let attempts = conn.query_row(ATTEMPTS, [id], |r| r.get::<_, i64>(0))? + 1;
                let wait = retry_base * 4i32.pow((attempts.clamp(1, 6) - 1) as u32);
                conn.prepare_cached(DEFER)?.execute((
                    id,
                    clock::format(now + wait),
                    reason,
                    MAX_ATTEMPTS,
                ))?;
            }
        }
    }
    Ok(())
}

/// Counts of a send, for the live status and the final report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    pub total: i64,
    pub sent: i64,
    pub bounced: i64,
    pub failed: i64,
    /// Pending or in flight.
    pub remaining: i64,
    /// When the earliest deferred delivery is due, if any waits.
    pub next_due: Option<String>,
}

impl Progress {
    /// Deliveries that are final: sent, bounced or failed.
    pub fn done(&self) -> i64 {
        self.sent + self.bounced + self.failed
    }

    /// [`Progress::done`] as a whole percentage of the recipients (0 before they are recorded).
    pub fn percent(&self) -> i64 {
        if self.total <= 0 {
            0
        } else {
            self.done() * 100 / self.total
        }
    }
}

pub fn progress(conn: &Connection, issue_id: i64) -> DomainResult<Progress> {
    const SQL: &str = "SELECT count(*), coalesce(sum(status = 'sent'), 0), coalesce(sum(status = 'bounced'), 0),
             coalesce(sum(status = 'failed'), 0), coalesce(sum(status IN ('pending', 'sending')), 0),
             min(CASE WHEN status = 'pending' THEN coalesce(next_attempt_at, '') END)
         FROM deliveries WHERE issue_id = ?1";
    Ok(conn.query_row(SQL, [issue_id], |r| {
        Ok(Progress {
            total: r.get(0)?,
            sent: r.get(1)?,
            bounced: r.get(2)?,
            failed: r.get(3)?,
            remaining: r.get(4)?,
            next_due: r.get(5)?,
        })
    })?)
}

/// One issue's numbers after (or during) its send. Opens and clicks follow the newsletter
/// stats' definitions: delivered (`sent`) messages opened or clicked at least once, and
/// rates are percentages of delivered messages.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    pub progress: Progress,
    pub opened: i64,
    pub clicked: i64,
    /// Recipients who left through this issue's unsubscribe link.
    pub unsubscribed: i64,
    pub open_rate: f64,
    pub click_rate: f64,
}

/// The report of `issue` (loaded with [`issues::get`], so it is known to be the caller's).
pub fn report(conn: &Connection, issue: &Issue) -> DomainResult<Report> {
    const SQL: &str = "SELECT coalesce(sum(status = 'sent' AND opened_at IS NOT NULL), 0),
             coalesce(sum(status = 'sent' AND clicked_at IS NOT NULL), 0),
             coalesce(sum(unsubscribed_at IS NOT NULL), 0)
         FROM deliveries WHERE issue_id = ?1";
    let progress = progress(conn, issue.id)?;
    let (opened, clicked, unsubscribed) = conn.query_row(SQL, [issue.id], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, i64>(2)?,
        ))
    })?;
    Ok(Report {
        open_rate: rate(opened, progress.sent),
        click_rate: rate(clicked, progress.sent),
        progress,
        opened,
        clicked,
        unsubscribed,
    })
}

/// What the sender does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Everything is final; the issue is now `sent`.
    Finished,
    /// Some deliveries wait for a retry at this time.
    WaitUntil(OffsetDateTime),
    /// Due deliveries remain (e.g. the connection failed); go on now.
    Continue,
}

/// Marks the issue sent when no delivery is left, else says when to come back.
pub fn finish_or_wait(conn: &mut Connection, issue_id: i64) -> DomainResult<Next> {
    write_tx(conn, |tx| {
        let p = progress(tx, issue_id)?;
        if p.remaining > 0 {
            return Ok(match p.next_due.as_deref().and_then(clock::parse) {
                Some(at) if at > clock::now() => Next::WaitUntil(at),
                _ => Next::Continue,
            });
        }
        let newsletter_id: i64 = tx.query_row(
            "SELECT newsletter_id FROM issues WHERE id = ?1",
            [issue_id],
            |r| r.get(0),
        )?;
        issues::mark_sent(tx, newsletter_id, issue_id)?;
        Ok(Next::Finished)
    })
}

/// The issue's status, to stop a send whose issue was changed meanwhile.
pub fn still_sending(conn: &Connection, issue_id: i64) -> DomainResult<bool> {
    let status: Option<String> = conn
        .query_row("SELECT status FROM issues WHERE id = ?1", [issue_id], |r| {
            r.get(0)
        })
        .optional()?;
    Ok(status.as_deref() == Some(Status::Sending.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_recipients_once_and_settles_in_flight() {
        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        let now = clock::now_string();
        conn.execute_batch(&format!(
            "INSERT INTO subscribers (newsletter_id, email, status, subscribed_at, created_at, updated_at) VALUES
               (1, 'a@x.co', 'active', '{now}', '{now}', '{now}'), (1, 'b@x.co', 'unsubscribed', '{now}', '{now}', '{now}'),
               (1, 'c@x.co', 'active', '{now}', '{now}', '{now}');
             INSERT INTO issues (newsletter_id, subject, content_markdown, status, path, created_at, updated_at)
               VALUES (1, 'S', 'x', 'sending', 's', '{now}', '{now}');"
        ))
        .unwrap();
        prepare(&mut conn, 1).unwrap().expect("a sending issue");
        let batch = due_batch(&conn, 1, 0, 10).unwrap();
        assert_eq!(
            batch.iter().map(|r| r.email.as_str()).collect::<Vec<_>>(),
            vec!["a@x.co", "c@x.co"]
        );
        assert_eq!(
            mark_sending(&conn, &[batch[0].delivery_id]).unwrap().len(),
            1
        );
        // A restart: the in-flight one counts as sent, nothing is added twice.
        prepare(&mut conn, 1).unwrap();
        let p = progress(&conn, 1).unwrap();
        assert_eq!((p.total, p.sent, p.remaining), (2, 1, 1));

        let id = due_batch(&conn, 1, 0, 10).unwrap()[0].delivery_id;
        mark_sending(&conn, &[id]).unwrap();
        record_outcomes(
            &conn,
            &[(id, Outcome::Deferred("451".into()))],
            Duration::minutes(1),
        )
        .unwrap();
        assert!(matches!(
            finish_or_wait(&mut conn, 1).unwrap(),
            Next::WaitUntil(_)
        ));
        conn.execute("UPDATE deliveries SET next_attempt_at = NULL", [])
            .unwrap();
        mark_sending(&conn, &[id]).unwrap();
        record_outcomes(
            &conn,
            &[(id, Outcome::Rejected("550".into()))],
            Duration::minutes(1),
        )
        .unwrap();
        assert_eq!(finish_or_wait(&mut conn, 1).unwrap(), Next::Finished);
        let status: String = conn
            .query_row(
                "SELECT status FROM subscribers WHERE email = 'c@x.co'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(status, "bounced");
        let events: i64 = conn
            .query_row(
                "SELECT count(*) FROM events WHERE kind IN ('email.bounced', 'issue.sent')",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(events, 2);
    }

    #[test]
    fn report_counts_like_the_stats() {
        let conn = crate::domain::testing::db_with_newsletter("paid");
        let now = clock::now_string();
        conn.execute_batch(&format!(
            "INSERT INTO issues (newsletter_id, subject, status, sent_at, path, created_at, updated_at)
               VALUES (1, 'S', 'sent', '{now}', 's', '{now}', '{now}');
             INSERT INTO deliveries (issue_id, subscriber_id, email, status, sent_at, opened_at, clicked_at, unsubscribed_at, created_at) VALUES
               (1, NULL, 'a@x.co', 'sent', '{now}', '{now}', '{now}', NULL, '{now}'),
               (1, NULL, 'b@x.co', 'sent', '{now}', '{now}', NULL, '{now}', '{now}'),
               (1, NULL, 'c@x.co', 'sent', '{now}', NULL, NULL, NULL, '{now}'),
               (1, NULL, 'd@x.co', 'bounced', NULL, NULL, NULL, NULL, '{now}');"
        ))
        .unwrap();
        let issue = issues::get(&conn, 1, 1).unwrap();
        let report = report(&conn, &issue).unwrap();
        assert_eq!(
            (
                report.progress.total,
                report.progress.sent,
                report.progress.bounced
            ),
            (4, 3, 1)
        );
        assert_eq!(
            (report.opened, report.clicked, report.unsubscribed),
            (2, 1, 1)
        );
        assert_eq!((report.open_rate, report.click_rate), (66.7, 33.3));
        assert_eq!(
            (report.progress.done(), report.progress.percent()),
            (4, 100)
        );
    }
}
