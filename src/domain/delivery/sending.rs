//! The rules of sending an issue: one delivery row per active subscriber of the issue's
//! audience (`domain::subscribers::audience`; recorded once, so a restart never adds a second copy), each
//! marked `sending` durably just before the end-of-data mark that lets the relay take its
//! message, then `sent`, `unconfirmed` (the relay's answer never came), `bounced`, or back to
//! `pending` for a retry; the issue turns `sent` when no delivery is left to do, or `failed`
//! when the relay stays unreachable past the outage limit.

use jiff::SignedDuration;
use rusqlite::{Connection, OptionalExtension};

use crate::clock::{self, Timestamp};
use crate::domain::content::merge_tags::Reader;
use crate::domain::issues::{self, Issue, Queued, Status, Visibility};
use crate::domain::newsletters::{self, Newsletter};
use crate::domain::reports::stats::rate;
use crate::domain::subscribers::audience::{
    FieldCondition, FieldSegmentSql, field_segment_params, field_segment_sql,
};
use crate::domain::subscribers::custom_fields::values_from_json;
use crate::domain::{DomainError, DomainResult, ErrorCode, delivery::tracking, events};
use crate::store::write_tx;

/// Attempts before a temporarily failing delivery is given up.
pub const MAX_ATTEMPTS: i64 = 5;

/// Connections the relay may break during one message before that message is given up: a
/// break is the relay's failure, not the recipient's, so it costs no attempt, but a message
/// that breaks every connection it goes out on must still end.
pub const MAX_CUT_OFFS: i64 = 10;

/// The longest wait between two tries of an unreachable relay.
pub const MAX_OUTAGE_WAIT: SignedDuration = SignedDuration::from_mins(10);

/// What a send needs to know, loaded when its job starts.
pub struct SendPlan {
    pub issue: Issue,
    pub newsletter: Newsletter,
}

/// Why a delivery left `sending` at a stop is `unconfirmed`.
const STOPPED_IN_FLIGHT: &str = "the server stopped between the end of this message and the relay's answer; \
     the relay may have taken it, so it is not sent again";

/// Loads an issue that is `sending`, or `sent` while messages its owner asked to send again
/// go out (`resending_since`, [`resend_unconfirmed`]), records its recipients if not yet done, and settles
/// deliveries a stop left `sending`: their claim was recorded just before the end-of-data
/// mark, so the relay may have taken the message, and sending it again could give someone a
/// second copy; they become `unconfirmed` (a message sent again keeps its `resent_at`, so it
/// is never offered a third time). `None` when there is nothing to send.
pub fn prepare(conn: &mut Connection, issue_id: i64) -> DomainResult<Option<SendPlan>> {
    write_tx(conn, |tx| {
        const FIND: &str = "SELECT newsletter_id FROM issues WHERE id = ?1 AND (status = 'sending'
             OR (status = 'sent' AND resending_since IS NOT NULL))";
        let Some(newsletter_id) = tx
            .query_row(FIND, [issue_id], |r| r.get::<_, i64>(0))
            .optional()?
        else {
            return Ok(None);
        };
        // The mail as it went out, whatever the web copy became since.
        let issue = issues::get_as_mailed(tx, newsletter_id, issue_id)?;
        let now = Timestamp::now();
        if issue_recipients_pending(tx, issue_id)? {
            record_recipients(tx, &issue, &now)?;
            tx.execute(
                "UPDATE issues SET recipients_at = ?2 WHERE id = ?1",
                (issue_id, &now),
            )?;
        }
        const SETTLE: &str =
            "UPDATE deliveries SET status = 'unconfirmed', sent_at = ?2, last_error = ?3
             WHERE issue_id = ?1 AND status = 'sending'";
        let settled = tx.execute(SETTLE, (issue_id, &now, STOPPED_IN_FLIGHT))?;
        if settled > 0 {
            eprintln!(
                "send: issue {issue_id}: {settled} message(s) were in flight at the last stop; \
                 counted as unconfirmed and not sent again"
            );
        }
        Ok(Some(SendPlan {
            newsletter: newsletters::get(tx, newsletter_id)?,
            issue,
        }))
    })
}

/// One delivery per active subscriber of the issue's audience (`domain::subscribers::audience`): any of
/// its tags (no tags: everyone), none of its excluded tags; for a paid issue sent to paid
/// members only, those with paid access now. A paid issue sent to everyone marks the
/// messages of readers without paid access as teasers (the excerpt and an upgrade link).
/// Runs once, in the transaction that marks the recipients recorded, so a resumed send
/// never widens or narrows it, nor changes who gets the teaser.
fn record_recipients(conn: &Connection, issue: &Issue, now: &Timestamp) -> DomainResult<()> {
    const EVERYONE: &str =
        "INSERT OR IGNORE INTO deliveries (issue_id, subscriber_id, email, created_at, teaser)
         SELECT ?1, id, email, ?2, ?4 AND NOT EXISTS (SELECT 1 FROM memberships m
                WHERE m.subscriber_id = subscribers.id AND m.status != 'free'
                  AND (m.access_until IS NULL OR m.access_until > ?2))
         FROM subscribers WHERE newsletter_id = ?3 AND status = 'active'
           AND NOT EXISTS (SELECT 1 FROM subscriber_pauses z WHERE z.subscriber_id = subscribers.id AND z.until > ?2)
         ORDER BY id";
    const AUDIENCE: &str =
        "INSERT OR IGNORE INTO deliveries (issue_id, subscriber_id, email, created_at, teaser)
         SELECT ?1, s.id, s.email, ?2, ?6 AND NOT EXISTS (SELECT 1 FROM memberships m
                WHERE m.subscriber_id = s.id AND m.status != 'free'
                  AND (m.access_until IS NULL OR m.access_until > ?2))
         FROM subscribers s WHERE s.newsletter_id = ?3 AND s.status = 'active'
           AND (?4 = '[]' OR EXISTS (SELECT 1 FROM subscriber_tags t
                WHERE t.subscriber_id = s.id AND +t.tag IN (SELECT value FROM json_each(?4))))
           AND NOT EXISTS (SELECT 1 FROM subscriber_tags x
                WHERE x.subscriber_id = s.id AND +x.tag IN (SELECT value FROM json_each(?5)))
           AND NOT EXISTS (SELECT 1 FROM subscriber_pauses z WHERE z.subscriber_id = s.id AND z.until > ?2)
         ORDER BY s.id";
    // Along the members' rows: a paid send reads them, not the list.
    const PAID_MEMBERS: &str = "INSERT OR IGNORE INTO deliveries (issue_id, subscriber_id, email, created_at)
         SELECT ?1, s.id, s.email, ?2 FROM memberships m CROSS JOIN subscribers s ON s.id = m.subscriber_id
         WHERE m.newsletter_id = ?3 AND m.status != 'free'
           AND (m.access_until IS NULL OR m.access_until > ?2) AND s.status = 'active'
           AND (?4 = '[]' OR EXISTS (SELECT 1 FROM subscriber_tags t
                WHERE t.subscriber_id = s.id AND +t.tag IN (SELECT value FROM json_each(?4))))
           AND NOT EXISTS (SELECT 1 FROM subscriber_tags x
                WHERE x.subscriber_id = s.id AND +x.tag IN (SELECT value FROM json_each(?5)))
           AND NOT EXISTS (SELECT 1 FROM subscriber_pauses z WHERE z.subscriber_id = s.id AND z.until > ?2)
         ORDER BY s.id";
    if let Some(original) = issue.audience.resend_of {
        // The original's non-openers, each with the teaser their first copy had.
        const RESEND: &str = concat!(
            "INSERT OR IGNORE INTO deliveries (issue_id, subscriber_id, email, created_at, teaser)
             SELECT ?3, s.id, s.email, ?2, o.teaser FROM",
            crate::non_openers!(),
            " ORDER BY s.id"
        );
        conn.execute(RESEND, (original, now, issue.id))?;
        return Ok(());
    }
    let teasers = issue.visibility == Visibility::Paid && !issue.audience.paid_only;
    if let Some(condition) = &issue.audience.field {
        return record_field_segment(conn, issue, condition, now, teasers);
    }
    if issue.audience.is_everyone() {
        conn.execute(EVERYONE, (issue.id, now, issue.newsletter_id, teasers))?;
    } else {
        let (tags, exclude_tags) =
            crate::domain::subscribers::audience::stored_json(conn, issue.id)?;
        if issue.audience.paid_only {
            conn.execute(
                PAID_MEMBERS,
                (issue.id, now, issue.newsletter_id, tags, exclude_tags),
            )?;
        } else {
            conn.execute(
                AUDIENCE,
                (
                    issue.id,
                    now,
                    issue.newsletter_id,
                    tags,
                    exclude_tags,
                    teasers,
                ),
            )?;
        }
    }
    Ok(())
}

/// [`record_recipients`] for an audience with a field condition: the rows its count reads
/// (`audience::field_segment`), a teaser for those without paid access when `teasers`.
fn record_field_segment(
    conn: &Connection,
    issue: &Issue,
    condition: &FieldCondition,
    now: &Timestamp,
    teasers: bool,
) -> DomainResult<()> {
    macro_rules! insert {
        ($drive:ident, $op:literal) => {
            concat!(
                "INSERT OR IGNORE INTO deliveries (issue_id, subscriber_id, email, created_at, teaser)
                 SELECT ?8, s.id, s.email, ?7, ?9 AND NOT EXISTS (SELECT 1 FROM memberships p
                        WHERE p.subscriber_id = s.id AND p.status != 'free'
                          AND (p.access_until IS NULL OR p.access_until > ?7)) FROM",
                crate::field_segment!($drive, $op),
                " ORDER BY s.id"
            )
        };
    }
    const SQL: FieldSegmentSql = [
        [
            insert!(by_values, "="),
            insert!(by_values, "<"),
            insert!(by_values, ">"),
        ],
        [
            insert!(by_list, "="),
            insert!(by_list, "<"),
            insert!(by_list, ">"),
        ],
    ];
    let sql = field_segment_sql(conn, issue.newsletter_id, condition, &SQL)?;
    let (n, tags, except, field, value, paid_only, at) =
        field_segment_params(issue.newsletter_id, &issue.audience, condition, now);
    conn.prepare_cached(sql)?.execute((
        n, tags, except, field, value, paid_only, at, issue.id, teasers,
    ))?;
    Ok(())
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
    /// The excerpt and an upgrade link instead of the issue (a paid issue to a free member).
    pub teaser: bool,
    /// What the issue's merge tags show this reader; read only for an issue that has some
    /// ([`due_batch_with_readers`]).
    pub reader: Reader,
}

/// Up to `limit` deliveries due now, after delivery id `after`, in id order.
pub fn due_batch(
    conn: &Connection,
    issue_id: i64,
    after: i64,
    limit: i64,
) -> DomainResult<Vec<Recipient>> {
    const SQL: &str = "SELECT id, email, teaser FROM deliveries
         WHERE issue_id = ?1 AND status = 'pending' AND id > ?2 AND (next_attempt_at IS NULL OR next_attempt_at <= ?3)
         ORDER BY id LIMIT ?4";
    let mut stmt = conn.prepare_cached(SQL)?;
    let rows = stmt.query_map((issue_id, after, Timestamp::now(), limit), |r| {
        Ok(Recipient {
            delivery_id: r.get(0)?,
            email: r.get(1)?,
            teaser: r.get(2)?,
            reader: Reader::default(),
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// [`due_batch`] with each reader's name and custom field values, for an issue whose content
/// has merge tags: one subscriber row and its values (by primary key) per delivery.
pub fn due_batch_with_readers(
    conn: &Connection,
    issue_id: i64,
    after: i64,
    limit: i64,
) -> DomainResult<Vec<Recipient>> {
    const SQL: &str = concat!(
        "SELECT d.id, d.email, d.teaser, s.name, ",
        crate::subscriber_field_values_json!(),
        " FROM deliveries d LEFT JOIN subscribers s ON s.id = d.subscriber_id
         WHERE d.issue_id = ?1 AND d.status = 'pending' AND d.id > ?2
           AND (d.next_attempt_at IS NULL OR d.next_attempt_at <= ?3)
         ORDER BY d.id LIMIT ?4"
    );
    let mut stmt = conn.prepare_cached(SQL)?;
    let rows = stmt.query_map((issue_id, after, Timestamp::now(), limit), |r| {
        let email: String = r.get(1)?;
        Ok(Recipient {
            delivery_id: r.get(0)?,
            teaser: r.get(2)?,
            reader: Reader {
                name: r.get(3)?,
                email: email.clone(),
                fields: values_from_json(r.get(4)?),
            },
            email,
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
    /// The relay took it (2xx after the end-of-data mark).
    Sent,
    /// The end-of-data mark went out but the relay's answer never came (timeout, broken
    /// connection): it may have taken the message, so it is never sent again.
    Unconfirmed(String),
    /// A permanent refusal (5xx): the address bounces.
    Rejected(String),
    /// A temporary refusal (4xx): try again after the delivery's backoff.
    Deferred(String),
    /// The connection broke before the relay could take the message (before the end-of-data
    /// mark went out whole, or reset before the answer): due again at once. It is the
    /// relay's failure, so it costs the recipient no attempt; it counts in `cut_offs`, and
    /// the [`MAX_CUT_OFFS`]-th makes the delivery `failed`, so a message that breaks every
    /// connection still ends.
    Interrupted(String),
    /// The send stopped (shutdown) before the end-of-data mark: pending again, no attempt.
    Abandoned,
    /// The relay answered that we send too fast, or that its quota is used up: not taken,
    /// and the relay's doing, so pending again at no cost to the recipient (the relay is
    /// slowed down or rests meanwhile; `mail::relays`).
    Throttled(String),
}

/// Records outcomes. Every outcome but [`Outcome::Abandoned`] and [`Outcome::Interrupted`]
/// counts as an attempt; a deferred delivery waits `retry_base * 4^(attempts-1)` and is
/// failed after [`MAX_ATTEMPTS`]; an interrupted one is due again at once and failed after
/// [`MAX_CUT_OFFS`]. A refusal can come before the delivery was claimed (at RCPT), so
/// refusals apply to pending deliveries too.
pub fn record_outcomes(
    conn: &Connection,
    outcomes: &[(i64, Outcome)],
    retry_base: SignedDuration,
) -> DomainResult<()> {
    const SENT: &str = "UPDATE deliveries SET status = 'sent', sent_at = ?2, last_error = NULL, attempts = attempts + 1
         WHERE id = ?1 AND status = 'sending'";
    const UNCONFIRMED: &str =
        "UPDATE deliveries SET status = 'unconfirmed', sent_at = ?2, last_error = ?3,
         attempts = attempts + 1 WHERE id = ?1 AND status = 'sending'";
    const RETRY: &str = "UPDATE deliveries SET attempts = attempts + 1,
         status = CASE WHEN attempts + 1 >= ?4 THEN 'failed' ELSE 'pending' END,
         next_attempt_at = ?2, last_error = ?3 WHERE id = ?1 AND status IN ('pending', 'sending')";
    const CUT_OFF: &str = "UPDATE deliveries SET cut_offs = cut_offs + 1,
         status = CASE WHEN cut_offs + 1 >= ?3 THEN 'failed' ELSE 'pending' END,
         next_attempt_at = NULL, last_error = ?2 WHERE id = ?1 AND status IN ('pending', 'sending')";
    const THROTTLED: &str = "UPDATE deliveries SET status = 'pending', next_attempt_at = NULL,
         last_error = ?2 WHERE id = ?1 AND status IN ('pending', 'sending')";
    const ABANDON: &str =
        "UPDATE deliveries SET status = 'pending' WHERE id = ?1 AND status = 'sending'";
    const ATTEMPTS: &str = "SELECT attempts FROM deliveries WHERE id = ?1";
    const ATTEMPT: &str = "UPDATE deliveries SET attempts = attempts + 1 WHERE id = ?1";
    let now = clock::now();
    let now_text = Timestamp::from(now);
    for (id, outcome) in outcomes {
        match outcome {
            Outcome::Sent => {
                conn.prepare_cached(SENT)?.execute((id, &now_text))?;
            }
            Outcome::Unconfirmed(reason) => {
                conn.prepare_cached(UNCONFIRMED)?.execute((
                    id,
                    &now_text,
                    format!("no answer after the end of the message ({reason}); not sent again"),
                ))?;
            }
            Outcome::Rejected(reason) => {
                conn.prepare_cached(ATTEMPT)?.execute([id])?;
                tracking::bounce(conn, *id, reason)?
            }
            Outcome::Deferred(reason) => {
                let attempts = conn.query_row(ATTEMPTS, [id], |r| r.get::<_, i64>(0))? + 1;
                let wait = retry_base * 4i32.pow((attempts.clamp(1, 6) - 1) as u32);
                conn.prepare_cached(RETRY)?.execute((
                    id,
                    Some(Timestamp::from(now + wait)),
                    reason,
                    MAX_ATTEMPTS,
                ))?;
            }
            Outcome::Interrupted(reason) => {
                conn.prepare_cached(CUT_OFF)?
                    .execute((id, reason, MAX_CUT_OFFS))?;
            }
            Outcome::Abandoned => {
                conn.prepare_cached(ABANDON)?.execute([id])?;
            }
            Outcome::Throttled(reason) => {
                conn.prepare_cached(THROTTLED)?.execute((id, reason))?;
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
    /// The end of the message went out, the relay's answer never came; not sent again.
    pub unconfirmed: i64,
    pub bounced: i64,
    pub failed: i64,
    /// Pending or in flight.
    pub remaining: i64,
}

impl Progress {
    /// Deliveries that are final: sent, unconfirmed, bounced or failed.
    pub fn done(&self) -> i64 {
        self.sent + self.unconfirmed + self.bounced + self.failed
    }

    /// [`Progress::done`] as a whole percentage of the recipients (0 before they are recorded).
    pub fn percent(&self) -> i64 {
        if self.total <= 0 {
            0
        } else {
            self.done() * 100 / self.total
        }
    }

    /// One sentence on the messages that did not plainly arrive, for a finished send whose
    /// report is not all `sent`; `None` when every message was delivered.
    pub fn shortfall(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.bounced > 0 {
            parts.push(format!("{} bounced", self.bounced));
        }
        if self.failed > 0 {
            parts.push(format!(
                "{} failed (refused for now {MAX_ATTEMPTS} times, or cut off by the relay \
                 {MAX_CUT_OFFS} times)",
                self.failed
            ));
        }
        if self.unconfirmed > 0 {
            parts.push(format!(
                "{} unconfirmed (the relay did not answer after the message; not sent again)",
                self.unconfirmed
            ));
        }
        (!parts.is_empty()).then(|| {
            format!(
                "Delivered {} of {} messages: {}.",
                self.sent,
                self.total,
                parts.join(", ")
            )
        })
    }
}

/// The send's counts, from the issue's counters (`issue_counts`, kept by triggers). A send
/// queued whose recipients are not recorded yet counts from the recipients it will have, so
/// its progress starts at "0 of N", never at "0 of 0".
pub fn progress(conn: &Connection, issue_id: i64) -> DomainResult<Progress> {
    Ok(counts(conn, issue_id)?.0)
}

/// The issue's counters: its progress, then opened, clicked and unsubscribed.
fn counts(conn: &Connection, issue_id: i64) -> DomainResult<(Progress, [i64; 3])> {
    const SQL: &str =
        "SELECT total, sent, unconfirmed, bounced, failed, remaining, opened, clicked, unsubscribed
         FROM issue_counts WHERE issue_id = ?1";
    let (mut progress, others) = conn
        .query_row(SQL, [issue_id], |r| {
            Ok((
                Progress {
                    total: r.get(0)?,
                    sent: r.get(1)?,
                    unconfirmed: r.get(2)?,
                    bounced: r.get(3)?,
                    failed: r.get(4)?,
                    remaining: r.get(5)?,
                },
                [r.get(6)?, r.get(7)?, r.get(8)?],
            ))
        })
        .optional()?
        .unwrap_or_default();
    if progress.total == 0
        && let Some(planned) = planned_recipients(conn, issue_id)?
    {
        progress.total = planned;
        progress.remaining = planned;
    }
    Ok((progress, others))
}

/// The recipients of a send queued but not yet planned (`sending`, no delivery rows
/// recorded by [`prepare`] yet): the count the send confirmation stated
/// (`issues::check_sendable`), over the issue's recorded audience. `None` for any other
/// issue. The window is short: the send job records the rows when it starts.
fn planned_recipients(conn: &Connection, issue_id: i64) -> DomainResult<Option<i64>> {
    const QUEUED: &str = "SELECT newsletter_id FROM issues WHERE id = ?1 AND status = 'sending' AND recipients_at IS NULL";
    let Some(newsletter_id) = conn
        .query_row(QUEUED, [issue_id], |r| r.get::<_, i64>(0))
        .optional()?
    else {
        return Ok(None);
    };
    let issue = crate::domain::issues::get(conn, newsletter_id, issue_id)?;
    Ok(Some(crate::domain::subscribers::audience::count(
        conn,
        newsletter_id,
        &issue.audience,
    )?))
}

/// When the earliest pending delivery is due: `""` when one is due at once, `None` when none
/// is pending. Only the sender asks, once a round, so it may read the pending rows.
fn next_due(conn: &Connection, issue_id: i64) -> DomainResult<Option<String>> {
    const SQL: &str = "SELECT min(coalesce(next_attempt_at, '')) FROM deliveries
         WHERE issue_id = ?1 AND status = 'pending'";
    Ok(conn.query_row(SQL, [issue_id], |r| r.get(0))?)
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
    /// Unconfirmed messages of a sent issue its owner may have sent again ([`resendable`]).
    pub resendable: i64,
}

/// The report of `issue` (loaded with [`issues::get`], so it is known to be the caller's).
pub fn report(conn: &Connection, issue: &Issue) -> DomainResult<Report> {
    let (progress, [opened, clicked, unsubscribed]) = counts(conn, issue.id)?;
    let resendable = if issue.status == Status::Sent && progress.unconfirmed > 0 {
        resendable(conn, issue.id)?
    } else {
        0
    };
    Ok(Report {
        open_rate: rate(opened, progress.sent),
        click_rate: rate(clicked, progress.sent),
        progress,
        opened,
        clicked,
        unsubscribed,
        resendable,
    })
}

/// What the sender does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Everything is final; the issue is now `sent`.
    Finished,
    /// Some deliveries wait for a retry, or the relay for another try, until this time.
    WaitUntil(jiff::Timestamp),
    /// Due deliveries remain; go on now.
    Continue,
    /// The relay stayed unreachable past the outage limit: the issue is now `failed`.
    GaveUp,
}

/// Marks the issue sent when no delivery is left (its `last_error` then sums up what did
/// not plainly arrive), else says when to come back. A round that ends here reached the
/// relay, so any note of an outage is cleared. A sent issue sending its unconfirmed
/// messages again stays `sent`: while they go out its `last_error` says so, and once they
/// are done the summary is made again and the resend is over (`resending_since` cleared in
/// this transaction, so a later request queues a job of its own; one before it finds this
/// job still owning the messages; [`resend_unconfirmed`]).
pub fn finish_or_wait(conn: &mut Connection, issue_id: i64) -> DomainResult<Next> {
    const WAITING: &str = "UPDATE issues SET relay_down_since = NULL, send_resumes_at = ?2,
         last_error = CASE status WHEN 'sent' THEN ?3 END
         WHERE id = ?1 AND (status = 'sending' OR (status = 'sent' AND resending_since IS NOT NULL))";
    const RESENT: &str = "UPDATE issues SET last_error = ?2, relay_down_since = NULL,
         send_resumes_at = NULL, resending_since = NULL, updated_at = ?3
         WHERE id = ?1 AND status = 'sent' AND resending_since IS NOT NULL";
    write_tx(conn, |tx| {
        let p = progress(tx, issue_id)?;
        if p.remaining > 0 {
            let next = match next_due(tx, issue_id)?.as_deref().and_then(clock::parse) {
                Some(at) if at > clock::now() => Next::WaitUntil(at),
                _ => Next::Continue,
            };
            let resumes = match next {
                Next::WaitUntil(at) => Some(Timestamp::from(at)),
                _ => None,
            };
            tx.execute(WAITING, (issue_id, resumes, resend_note(&p)))?;
            return Ok(next);
        }
        if tx.execute(RESENT, (issue_id, p.shortfall(), Timestamp::now()))? > 0 {
            return Ok(Next::Finished);
        }
        let newsletter_id: i64 = tx.query_row(
            "SELECT newsletter_id FROM issues WHERE id = ?1",
            [issue_id],
            |r| r.get(0),
        )?;
        mark_sent(tx, newsletter_id, issue_id, p.shortfall().as_deref())?;
        Ok(Next::Finished)
    })
}

/// How a send waits out an unreachable mail relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutagePolicy {
    /// The first wait. Each later wait lasts as long as the relay has been down so far (so
    /// the waits double), at most [`MAX_OUTAGE_WAIT`].
    pub retry_base: SignedDuration,
    /// Down this long, the send stops as `failed` until the owner resumes it.
    pub give_up_after: SignedDuration,
}

impl OutagePolicy {
    /// When to try again, the relay having been down since `since`.
    pub fn next_try(&self, since: jiff::Timestamp, now: jiff::Timestamp) -> jiff::Timestamp {
        let down = (now - since).max(SignedDuration::ZERO);
        now + down.clamp(self.retry_base, MAX_OUTAGE_WAIT.max(self.retry_base))
    }
}

/// Records that a round of the send could not reach the relay at all, unreachable since
/// `since` for `reason`: the issue says so and when the next try is, or, past the policy's
/// limit, turns `failed` with the reason. Deliveries are untouched: an unreachable relay is
/// nobody's fault among the recipients. A sent issue sending its unconfirmed messages again
/// waits the same way; past the limit it stays `sent` and those messages are `unconfirmed`
/// again, as they were before the owner asked ([`stop_resend`]).
pub fn relay_unreachable(
    conn: &mut Connection,
    issue_id: i64,
    since: jiff::Timestamp,
    reason: &str,
    policy: &OutagePolicy,
) -> DomainResult<Next> {
    const WAIT: &str =
        "UPDATE issues SET relay_down_since = ?2, send_resumes_at = ?3, last_error = ?4
         WHERE id = ?1 AND (status = 'sending' OR (status = 'sent' AND resending_since IS NOT NULL))";
    const GIVE_UP: &str =
        "UPDATE issues SET status = 'failed', relay_down_since = ?2, send_resumes_at = NULL,
         last_error = ?3, updated_at = ?4 WHERE id = ?1 AND status = 'sending'";
    write_tx(conn, |tx| {
        let now = clock::now();
        if now - since >= policy.give_up_after && resending(tx, issue_id)? {
            stop_resend(tx, issue_id, since, reason)?;
            return Ok(Next::GaveUp);
        }
        if now - since >= policy.give_up_after {
            let left = progress(tx, issue_id)?.remaining;
            let message = format!(
                "Sending stopped: the mail relay has been unreachable since {} ({reason}). \
                 {left} message(s) were not sent; resume the send once the relay works.",
                clock::human(since)
            );
            tx.execute(
                GIVE_UP,
                (
                    issue_id,
                    Timestamp::from(since),
                    message,
                    Timestamp::from(now),
                ),
            )?;
            return Ok(Next::GaveUp);
        }
        let next = policy.next_try(since, now);
        let message = format!(
            "The mail relay has been unreachable since {} ({reason}); next try at {}.",
            clock::human(since),
            clock::human(next)
        );
        tx.execute(
            WAIT,
            (
                issue_id,
                Timestamp::from(since),
                Timestamp::from(next),
                message,
            ),
        )?;
        Ok(Next::WaitUntil(next))
    })
}

/// Records that a limit holds the send until `until` (a relay's hourly or daily limit, its
/// quota, the warm-up plan): the issue says so (`note`, its `last_error` while it sends) and
/// when it resumes; the send comes back by itself then. Deliveries are untouched.
pub fn held(
    conn: &mut Connection,
    issue_id: i64,
    until: jiff::Timestamp,
    note: &str,
) -> DomainResult<Next> {
    const HOLD: &str =
        "UPDATE issues SET relay_down_since = NULL, send_resumes_at = ?2, last_error = ?3
         WHERE id = ?1 AND (status = 'sending' OR (status = 'sent' AND resending_since IS NOT NULL))";
    write_tx(conn, |tx| {
        tx.execute(HOLD, (issue_id, Timestamp::from(until), note))?;
        Ok(Next::WaitUntil(until))
    })
}

/// The issue's note while it sends (why it goes slower, or through which relay), in its
/// `last_error` until the round ends.
pub fn note(conn: &Connection, issue_id: i64, note: &str) -> DomainResult<()> {
    const NOTE: &str = "UPDATE issues SET last_error = ?2
         WHERE id = ?1 AND (status = 'sending' OR (status = 'sent' AND resending_since IS NOT NULL))";
    conn.prepare_cached(NOTE)?.execute((issue_id, note))?;
    Ok(())
}

/// The issue's status, to stop a send whose issue was changed meanwhile: `sending`, or
/// `sent` while its unconfirmed messages go out again (only those are pending then).
pub fn still_sending(conn: &Connection, issue_id: i64) -> DomainResult<bool> {
    let status: Option<Status> = conn
        .query_row("SELECT status FROM issues WHERE id = ?1", [issue_id], |r| {
            r.get(0)
        })
        .optional()?;
    Ok(status == Some(Status::Sending) || resending(conn, issue_id)?)
}

/// Whether a send job owns this sent issue's unconfirmed messages going out again.
pub fn resending(conn: &Connection, issue_id: i64) -> DomainResult<bool> {
    const SQL: &str = "SELECT EXISTS (SELECT 1 FROM issues
         WHERE id = ?1 AND status = 'sent' AND resending_since IS NOT NULL)";
    Ok(conn.query_row(SQL, [issue_id], |r| r.get(0))?)
}

/// The `unconfirmed` deliveries of issue `?1` that its owner may have sent again: never sent
/// again before (`resent_at`), with no sign that the first copy arrived (an open, a click,
/// its unsubscribe link), to a subscriber still active (nobody who left gets it again). Read
/// along `deliveries_work (issue_id, status, id)`: as many rows as the issue has
/// unconfirmed messages, usually a handful (at most one per connection at a kill or outage).
macro_rules! resendable {
    ($head:literal) => {
        concat!(
            $head,
            " WHERE issue_id = ?1 AND status = 'unconfirmed' AND resent_at IS NULL
               AND opened_at IS NULL AND clicked_at IS NULL AND unsubscribed_at IS NULL
               AND EXISTS (SELECT 1 FROM subscribers s
                           WHERE s.id = deliveries.subscriber_id AND s.status = 'active')"
        )
    };
}

/// How many unconfirmed messages of the issue the owner may have sent again (see
/// [`resend_unconfirmed`]).
pub fn resendable(conn: &Connection, issue_id: i64) -> DomainResult<i64> {
    const COUNT: &str = resendable!("SELECT count(*) FROM deliveries");
    Ok(conn.query_row(COUNT, [issue_id], |r| r.get(0))?)
}

/// Puts the issue's resendable unconfirmed messages back in the queue, once: each is marked
/// with the time of the request (`resent_at`), so it is never offered again, and starts over
/// as a new message: `pending`, no `sent_at` (the counters move it from unconfirmed to
/// remaining), no error, and the usual [`MAX_ATTEMPTS`] tries. One statement over the
/// issue's unconfirmed rows, in the caller's transaction; the caller (the domain's
/// [`resend_unconfirmed`], which checks the issue) queues the send job. Returns how
/// many were put back.
pub fn mark_for_resend(conn: &Connection, issue_id: i64) -> DomainResult<i64> {
    const MARK: &str = resendable!(
        "UPDATE deliveries SET status = 'pending', resent_at = ?2, sent_at = NULL, attempts = 0, cut_offs = 0,
         next_attempt_at = NULL, last_error = NULL"
    );
    Ok(conn.execute(MARK, (issue_id, Timestamp::now()))? as i64)
}

/// The issue's `last_error` while its unconfirmed messages go out again.
pub fn resend_note(p: &Progress) -> String {
    format!(
        "Sending again to the unconfirmed, as you asked: {} message(s) to go.",
        p.remaining
    )
}

/// Ends a resend the relay stayed unreachable for: the messages it had not sent again are
/// `unconfirmed` again, as before the owner asked, and may be asked for again once the
/// relay works (`resent_at` cleared: none of them went out a second time). One left in
/// flight by a stop may have gone out, so it stays sent again (`resent_at` kept).
fn stop_resend(
    conn: &Connection,
    issue_id: i64,
    since: jiff::Timestamp,
    reason: &str,
) -> DomainResult<()> {
    const SETTLE: &str =
        "UPDATE deliveries SET status = 'unconfirmed', sent_at = ?2, last_error = ?3
         WHERE issue_id = ?1 AND status = 'sending'";
    const UNSENT: &str = "UPDATE deliveries SET status = 'unconfirmed', resent_at = NULL,
         sent_at = ?2, last_error = ?3 WHERE issue_id = ?1 AND status = 'pending'";
    const STOPPED: &str = "UPDATE issues SET relay_down_since = NULL, send_resumes_at = NULL,
         resending_since = NULL, last_error = ?2, updated_at = ?3
         WHERE id = ?1 AND status = 'sent'";
    let now = Timestamp::now();
    conn.execute(SETTLE, (issue_id, &now, STOPPED_IN_FLIGHT))?;
    let unsent = conn.execute(
        UNSENT,
        (
            issue_id,
            &now,
            format!("not sent again: the mail relay stayed unreachable ({reason})"),
        ),
    )?;
    let summary = progress(conn, issue_id)?.shortfall().unwrap_or_default();
    let message = format!(
        "Sending again stopped: the mail relay has been unreachable since {} ({reason}). \
         {unsent} message(s) were not sent again and are unconfirmed as before; you can send \
         them again once the relay works. {summary}",
        clock::human(since)
    );
    conn.execute(STOPPED, (issue_id, message.trim_end(), &now))?;
    Ok(())
}

/// Resumes a send that stopped (`failed`) because the mail relay stayed unreachable: the
/// messages not yet sent go out and nobody gets a second copy. `recipients` in the answer
/// counts the messages still to send.
pub fn resume(conn: &mut Connection, newsletter_id: i64, id: i64) -> DomainResult<Queued> {
    write_tx(conn, |tx| {
        let newsletter = newsletters::get(tx, newsletter_id)?;
        newsletter.ensure_writable()?;
        let issue = issues::get(tx, newsletter_id, id)?;
        if issue.status != Status::Failed {
            return Err(DomainError::rejected(
                ErrorCode::InvalidState,
                format!(
                    "Only a send that stopped can be resumed; this issue is {}",
                    issue.status.as_str()
                ),
            ));
        }
        issues::ensure_may_mail(&newsletter)?;
        let recipients = progress(tx, id)?.remaining;
        issues::start_sending(tx, &issue)?;
        Ok(Queued { issue, recipients })
    })
}

/// The outcome of [`resend_unconfirmed`]: the issue as it is now and how many messages go
/// out again.
#[derive(Debug, Clone)]
pub struct Resent {
    pub issue: Issue,
    pub resent: i64,
}

/// The owner's choice to send a sent issue's unconfirmed messages once more
/// (`docs/sending.md`, "Sending again to the unconfirmed"): each went out whole but the
/// relay's answer never came, so whoever got the first copy gets a second one. Only the
/// resendable ones go ([`resendable`]: never sent again before, not opened or
/// clicked, to a subscriber still active), each at most once ever, through the send job
/// queued in this transaction with the engine's usual guarantees. The issue stays `sent` (no
/// second `issue.sent`, nothing published again); its `last_error` says the messages are
/// going out, and sums up the send again once they are done. Asking again while nothing is
/// resendable changes nothing (`resent` 0). Any status but `sent` is `invalid_state`; a
/// paused or unpaid newsletter is refused as [`resume`] refuses it.
pub fn resend_unconfirmed(
    conn: &mut Connection,
    newsletter_id: i64,
    id: i64,
) -> DomainResult<Resent> {
    write_tx(conn, |tx| {
        let newsletter = newsletters::get(tx, newsletter_id)?;
        newsletter.ensure_writable()?;
        let issue = issues::get(tx, newsletter_id, id)?;
        if issue.status != Status::Sent {
            return Err(DomainError::rejected(
                ErrorCode::InvalidState,
                format!(
                    "Only a sent issue's unconfirmed messages can be sent again; this issue is {}",
                    issue.status.as_str()
                ),
            ));
        }
        issues::ensure_may_mail(&newsletter)?;
        let resent = mark_for_resend(tx, id)?;
        if resent > 0 {
            // A resend under way has its job, which has not yet found its work done (it
            // clears `resending_since` when it does): it takes these too. Otherwise this
            // request queues the one job of the issue.
            if !resending(tx, id)? {
                const STARTED: &str = "UPDATE issues SET resending_since = ?2 WHERE id = ?1";
                tx.execute(STARTED, (id, Timestamp::now()))?;
                crate::store::jobs::queue_issue_send(tx, id)?;
            }
            const NOTE: &str = "UPDATE issues SET last_error = ?2, updated_at = ?3 WHERE id = ?1";
            let note = resend_note(&progress(tx, id)?);
            tx.execute(NOTE, (id, note, Timestamp::now()))?;
        }
        Ok(Resent {
            issue: issues::get(tx, newsletter_id, id)?,
            resent,
        })
    })
}

/// Marks a sending issue sent (once) and records `issue.sent`; `shortfall` (what did not
/// plainly arrive) becomes its `last_error`, so a partial failure never hides under `sent`.
/// When the send publishes the issue (the owner's choice, else the rule of
/// `issues::publishes_by_default`), it is published in the same transaction, as `publish`
/// does (`issue.published` follows `issue.sent`).
pub fn mark_sent(
    conn: &Connection,
    newsletter_id: i64,
    id: i64,
    shortfall: Option<&str>,
) -> DomainResult<bool> {
    const SENT: &str =
        "UPDATE issues SET status = 'sent', sent_at = ?2, updated_at = ?2, last_error = ?3,
         relay_down_since = NULL, send_resumes_at = NULL WHERE id = ?1 AND status = 'sending'";
    if conn.execute(SENT, (id, Timestamp::now(), shortfall))? == 0 {
        return Ok(false);
    }
    let issue = issues::get(conn, newsletter_id, id)?;
    events::record(conn, newsletter_id, "issue.sent", issue.event_data("sent"))?;
    let newsletter = newsletters::get(conn, newsletter_id)?;
    if newsletter.ensure_writable().is_ok()
        && issues::publishes_when_sent(conn, &newsletter, &issue)?
    {
        issues::make_public(conn, newsletter_id, issue)?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_recipients_once_and_settles_in_flight() {
        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        crate::domain::testing::listen(&mut conn, 1, &["email.bounced", "issue.sent"]);
        let now = Timestamp::now();
        conn.execute_batch(&format!(
            "INSERT INTO subscribers (newsletter_id, email, status, created_at) VALUES
               (1, 'a@x.co', 'active', '{now}'), (1, 'b@x.co', 'unsubscribed', '{now}'),
               (1, 'c@x.co', 'active', '{now}');
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
        // A restart: the in-flight one is unconfirmed (never sent again), nothing is added twice.
        prepare(&mut conn, 1).unwrap();
        let p = progress(&conn, 1).unwrap();
        assert_eq!((p.total, p.sent, p.unconfirmed, p.remaining), (2, 0, 1, 1));
        assert!(due_batch(&conn, 1, 0, 10).unwrap().len() == 1);

        // A transaction broken before its end mark, or dropped at a stop, is due again.
        let id = due_batch(&conn, 1, 0, 10).unwrap()[0].delivery_id;
        let interrupt = |id: i64| {
            mark_sending(&conn, &[id]).unwrap();
            record_outcomes(
                &conn,
                &[(id, Outcome::Interrupted("reset".into()))],
                SignedDuration::from_hours(1),
            )
            .unwrap();
        };
        interrupt(id);
        assert_eq!(due_batch(&conn, 1, 0, 10).unwrap()[0].delivery_id, id);
        mark_sending(&conn, &[id]).unwrap();
        record_outcomes(
            &conn,
            &[(id, Outcome::Abandoned)],
            SignedDuration::from_hours(1),
        )
        .unwrap();
        let charged = |id: i64| -> (i64, i64, String) {
            conn.query_row(
                "SELECT attempts, cut_offs, status FROM deliveries WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap()
        };
        assert_eq!(
            charged(id),
            (0, 1, "pending".to_string()),
            "an interruption is the relay's failure, not an attempt; an abandoned message \
             counts nothing"
        );
        // A message that breaks every connection still ends.
        for _ in 1..MAX_CUT_OFFS {
            interrupt(id);
        }
        assert_eq!(charged(id), (0, MAX_CUT_OFFS, "failed".to_string()));
        conn.execute(
            "UPDATE deliveries SET status = 'pending', cut_offs = 0 WHERE id = ?1",
            [id],
        )
        .unwrap();

        let id = due_batch(&conn, 1, 0, 10).unwrap()[0].delivery_id;
        mark_sending(&conn, &[id]).unwrap();
        record_outcomes(
            &conn,
            &[(id, Outcome::Deferred("451".into()))],
            SignedDuration::from_mins(1),
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
            SignedDuration::from_mins(1),
        )
        .unwrap();
        assert_eq!(finish_or_wait(&mut conn, 1).unwrap(), Next::Finished);
        let (issue_status, summary): (String, String) = conn
            .query_row(
                "SELECT status, last_error FROM issues WHERE id = 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(issue_status, "sent");
        assert!(
            summary.contains("1 bounced") && summary.contains("1 unconfirmed"),
            "{summary}"
        );
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
    fn an_unreachable_relay_waits_longer_each_time_then_gives_up() {
        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        let now = clock::now();
        conn.execute_batch(
            "INSERT INTO issues (newsletter_id, subject, content_markdown, status, path, created_at, updated_at)
               VALUES (1, 'S', 'x', 'sending', 's', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');
             INSERT INTO deliveries (issue_id, email, created_at) VALUES (1, 'a@x.co', '2026-01-01T00:00:00.000Z');",
        )
        .unwrap();
        let policy = OutagePolicy {
            retry_base: SignedDuration::from_secs(5),
            give_up_after: SignedDuration::from_hours(1),
        };
        assert_eq!(
            policy.next_try(now, now),
            now + SignedDuration::from_secs(5)
        );
        let later = now + SignedDuration::from_secs(40);
        assert_eq!(
            policy.next_try(now, later),
            later + SignedDuration::from_secs(40)
        );
        let much_later = now + SignedDuration::from_mins(50);
        assert_eq!(
            policy.next_try(now, much_later),
            much_later + MAX_OUTAGE_WAIT
        );

        let lately = now - SignedDuration::from_mins(2);
        let next = relay_unreachable(&mut conn, 1, lately, "refused", &policy).unwrap();
        assert!(matches!(next, Next::WaitUntil(at) if at > now));
        let (status, error): (String, String) = conn
            .query_row(
                "SELECT status, last_error FROM issues WHERE id = 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(status, "sending");
        assert!(
            error.contains("unreachable since") && error.contains("next try"),
            "{error}"
        );

        let long_ago = now - SignedDuration::from_hours(2);
        let next = relay_unreachable(&mut conn, 1, long_ago, "refused", &policy).unwrap();
        assert_eq!(next, Next::GaveUp);
        let (status, error, pending): (String, String, String) = conn
            .query_row(
                "SELECT i.status, i.last_error, d.status FROM issues i JOIN deliveries d ON d.issue_id = i.id",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!((status.as_str(), pending.as_str()), ("failed", "pending"));
        assert!(error.contains("1 message(s) were not sent"), "{error}");
    }

    #[test]
    fn report_counts_like_the_stats() {
        let conn = crate::domain::testing::db_with_newsletter("paid");
        let now = Timestamp::now();
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

    /// Counting and marking the messages to send again read the issue's unconfirmed rows
    /// along `deliveries_work`, never the whole table.
    #[test]
    fn resendable_messages_are_read_through_the_work_index() {
        let conn = crate::domain::testing::db_with_newsletter("paid");
        let (issue, at): (&dyn rusqlite::ToSql, &dyn rusqlite::ToSql) = (&1, &"x");
        for (sql, params) in [
            (resendable!("SELECT count(*) FROM deliveries"), &[issue][..]),
            (
                resendable!("UPDATE deliveries SET resent_at = ?2"),
                &[issue, at],
            ),
        ] {
            let plan: Vec<String> = conn
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .unwrap()
                .query_map(params, |row| row.get(3))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            assert!(
                plan[0].starts_with(
                    "SEARCH deliveries USING INDEX deliveries_work (issue_id=? AND status=?)"
                ),
                "{plan:?}"
            );
        }
    }
}
