//! One sent issue's report beyond its delivery counts: the clicks of each link (recipients
//! who clicked it and all its clicks) and the opens and clicks of each of the first seven
//! days after the send. Both are counters that the tracking routes update in the transaction
//! that records the open or click (`count_open`, `count_click`; migration 0029), so reading a
//! report is a few dozen rows whatever the number of deliveries (docs/statistics.md).

use rusqlite::{Connection, OptionalExtension};

use crate::clock::Timestamp;
use crate::domain::reports::stats::rate;
use crate::domain::{DomainError, DomainResult};

/// Days a report follows an issue after its send, each 24 hours from when the recipient's
/// message went out.
pub const REPORT_DAYS: i64 = 7;

/// Links a report lists, the most clicked first (a newsletter's issues carry far fewer).
pub const LINKS_SHOWN: i64 = 100;

/// The clicks of one link of an issue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkClicks {
    pub url: String,
    /// Recipients who clicked it at least once.
    pub clickers: i64,
    /// Every click of it, repeats included.
    pub clicks: i64,
}

/// One of the first [`REPORT_DAYS`] after the send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportDay {
    /// 1 for the first 24 hours after a recipient's message went out, up to 7.
    pub day: i64,
    /// Recipients who first opened in this day (a click counts as an open).
    pub opened: i64,
    /// Recipients who first clicked in this day.
    pub clicked: i64,
    /// Every click of a tracked link in this day.
    pub clicks: i64,
}

/// What one issue's report shows.
#[derive(Debug, Clone, PartialEq)]
pub struct IssueReport {
    pub issue_id: i64,
    pub subject: String,
    pub sent_at: Option<Timestamp>,
    /// Messages delivered (`sent`), the base of the rates.
    pub delivered: i64,
    /// Delivered messages opened / clicked at least once (as the issue's report counts).
    pub opened: i64,
    pub clicked: i64,
    /// Of `opened`, those whose opens were all automatic (Apple Mail Privacy Protection's
    /// prefetch, scanners within seconds of delivery): set aside by a resend to those who
    /// did not open.
    pub automatic_opens: i64,
    pub open_rate: f64,
    pub click_rate: f64,
    /// The issue's clicked links, most clicks first, at most [`LINKS_SHOWN`].
    pub links: Vec<LinkClicks>,
    /// How many different links were clicked (more than `links` holds when cut).
    pub links_clicked: i64,
    /// Every day from 1 to [`REPORT_DAYS`], zeros included.
    pub days: Vec<ReportDay>,
}

/// The report of issue `issue_id` of newsletter `newsletter_id`; another newsletter's issue
/// is not found.
pub fn for_issue(
    conn: &Connection,
    newsletter_id: i64,
    issue_id: i64,
) -> DomainResult<IssueReport> {
    const ISSUE: &str = "SELECT i.subject, i.sent_at, coalesce(c.sent, 0), coalesce(c.opened, 0),
             coalesce(c.clicked, 0), coalesce(c.auto_opened, 0)
         FROM issues i LEFT JOIN issue_counts c ON c.issue_id = i.id
         WHERE i.newsletter_id = ?1 AND i.id = ?2";
    type Counts = (String, Option<Timestamp>, i64, i64, i64, i64);
    let (subject, sent_at, delivered, opened, clicked, automatic_opens): Counts = conn
        .prepare_cached(ISSUE)?
        .query_row((newsletter_id, issue_id), |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })
        .optional()?
        .ok_or(DomainError::NotFound("issue"))?;
    const LINKS: &str = "SELECT url, clickers, clicks FROM issue_links WHERE issue_id = ?1
         ORDER BY clicks DESC, clickers DESC, url LIMIT ?2";
    let links = conn
        .prepare_cached(LINKS)?
        .query_map((issue_id, LINKS_SHOWN), |r| {
            Ok(LinkClicks {
                url: r.get(0)?,
                clickers: r.get(1)?,
                clicks: r.get(2)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    const LINKS_CLICKED: &str = "SELECT count(*) FROM issue_links WHERE issue_id = ?1";
    let links_clicked = conn
        .prepare_cached(LINKS_CLICKED)?
        .query_row([issue_id], |r| r.get(0))?;
    const DAYS: &str = "SELECT day, opened, clicked, clicks FROM issue_days WHERE issue_id = ?1";
    let mut days: Vec<ReportDay> = (1..=REPORT_DAYS)
        .map(|day| ReportDay {
            day,
            opened: 0,
            clicked: 0,
            clicks: 0,
        })
        .collect();
    let mut stmt = conn.prepare_cached(DAYS)?;
    let mut rows = stmt.query([issue_id])?;
    while let Some(row) = rows.next()? {
        let index: i64 = row.get(0)?;
        if let Some(day) = usize::try_from(index).ok().and_then(|i| days.get_mut(i)) {
            day.opened = row.get(1)?;
            day.clicked = row.get(2)?;
            day.clicks = row.get(3)?;
        }
    }
    Ok(IssueReport {
        issue_id,
        subject,
        sent_at,
        delivered,
        opened,
        clicked,
        automatic_opens,
        open_rate: rate(opened, delivered),
        click_rate: rate(clicked, delivered),
        links,
        links_clicked,
        days,
    })
}

impl IssueReport {
    /// Delivered messages no person has opened (the automatic opens count as unopened): at
    /// most whom a resend to those who did not open goes to, before leavers and pauses.
    pub fn not_opened(&self) -> i64 {
        self.delivered - self.opened + self.automatic_opens
    }
}

/// The day after the send (0-based, below [`REPORT_DAYS`]) that `at` falls in for a message
/// sent at `sent_at`; `None` when the message has no send time or the week is over. A time
/// before the send (a clock moved back) counts in the first day.
fn day_after_send(sent_at: Option<Timestamp>, at: Timestamp) -> Option<i64> {
    let since = at.instant().duration_since(sent_at?.instant());
    let day = (since.as_secs() / (24 * 3600)).max(0);
    (day < REPORT_DAYS).then_some(day)
}

/// The send time of delivery `delivery_id`.
fn sent_at(conn: &Connection, delivery_id: i64) -> DomainResult<Option<Timestamp>> {
    const SQL: &str = "SELECT sent_at FROM deliveries WHERE id = ?1";
    Ok(conn
        .prepare_cached(SQL)?
        .query_row([delivery_id], |r| r.get(0))
        .optional()?
        .flatten())
}

/// Adds to the day of issue `issue_id` that `at` falls in for the delivery.
fn add_to_day(
    conn: &Connection,
    issue_id: i64,
    delivery_id: i64,
    at: Timestamp,
    (opened, clicked, clicks): (bool, bool, bool),
) -> DomainResult<()> {
    let Some(day) = day_after_send(sent_at(conn, delivery_id)?, at) else {
        return Ok(());
    };
    const DAY: &str = "INSERT INTO issue_days (issue_id, day, opened, clicked, clicks)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT DO UPDATE SET opened = opened + excluded.opened,
             clicked = clicked + excluded.clicked, clicks = clicks + excluded.clicks";
    conn.prepare_cached(DAY)?
        .execute((issue_id, day, opened, clicked, clicks))?;
    Ok(())
}

/// Counts the first open of a delivery of issue `issue_id` at `at`, inside the caller's
/// transaction (the one that set its `opened_at`).
pub fn count_open(
    conn: &Connection,
    issue_id: i64,
    delivery_id: i64,
    at: Timestamp,
) -> DomainResult<()> {
    add_to_day(conn, issue_id, delivery_id, at, (true, false, false))
}

/// How a click changed the delivery it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClickFirsts {
    /// The delivery's first open (a click counts as one).
    pub open: bool,
    /// The delivery's first click of any link.
    pub click: bool,
}

/// Counts a click of `url` from a delivery of issue `issue_id` at `at`, inside the caller's
/// transaction: the link's clicks, its clickers when this delivery had not clicked it, and
/// the day's figures.
pub fn count_click(
    conn: &Connection,
    issue_id: i64,
    delivery_id: i64,
    url: &str,
    at: Timestamp,
    firsts: ClickFirsts,
) -> DomainResult<()> {
    const LINK: &str = "INSERT INTO issue_links (issue_id, url, clicks) VALUES (?1, ?2, 1)
         ON CONFLICT DO UPDATE SET clicks = clicks + 1 RETURNING id";
    let link_id: i64 = conn
        .prepare_cached(LINK)?
        .query_row((issue_id, url), |r| r.get(0))?;
    const CLICKER: &str =
        "INSERT OR IGNORE INTO link_clickers (link_id, delivery_id) VALUES (?1, ?2)";
    if conn
        .prepare_cached(CLICKER)?
        .execute((link_id, delivery_id))?
        == 1
    {
        const NEW_CLICKER: &str = "UPDATE issue_links SET clickers = clickers + 1 WHERE id = ?1";
        conn.prepare_cached(NEW_CLICKER)?.execute([link_id])?;
    }
    add_to_day(
        conn,
        issue_id,
        delivery_id,
        at,
        (firsts.open, firsts.click, true),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock;

    fn at(text: &str) -> Timestamp {
        Timestamp::from(clock::testing::at(text))
    }

    #[test]
    fn days_are_24_hours_from_the_send_and_end_after_seven() {
        let sent = Some(at("2026-03-01T10:00:00Z"));
        assert_eq!(day_after_send(sent, at("2026-03-01T10:00:00Z")), Some(0));
        assert_eq!(day_after_send(sent, at("2026-03-02T09:59:59Z")), Some(0));
        assert_eq!(day_after_send(sent, at("2026-03-02T10:00:00Z")), Some(1));
        assert_eq!(day_after_send(sent, at("2026-03-08T09:59:59Z")), Some(6));
        assert_eq!(day_after_send(sent, at("2026-03-08T10:00:00Z")), None);
        assert_eq!(day_after_send(sent, at("2026-02-28T10:00:00Z")), Some(0));
        assert_eq!(day_after_send(None, at("2026-03-01T10:00:00Z")), None);
    }

    #[test]
    fn links_count_clickers_once_and_every_click() {
        let conn = crate::domain::testing::db_with_newsletter("paid");
        let sent = "2026-03-01T10:00:00.000Z";
        conn.execute_batch(&format!(
            "INSERT INTO issues (newsletter_id, subject, status, sent_at, path, created_at, updated_at)
               VALUES (1, 'S', 'sent', '{sent}', 's', '{sent}', '{sent}');
             INSERT INTO deliveries (issue_id, email, status, sent_at, created_at) VALUES
               (1, 'a@x.co', 'sent', '{sent}', '{sent}'), (1, 'b@x.co', 'sent', '{sent}', '{sent}');"
        ))
        .unwrap();
        let first = ClickFirsts {
            open: true,
            click: true,
        };
        let again = ClickFirsts {
            open: false,
            click: false,
        };
        let a = "https://a.example/";
        let b = "https://b.example/";
        count_click(&conn, 1, 1, a, at("2026-03-01T11:00:00Z"), first).unwrap();
        count_click(&conn, 1, 1, a, at("2026-03-02T11:00:00Z"), again).unwrap();
        count_click(&conn, 1, 2, a, at("2026-03-02T12:00:00Z"), first).unwrap();
        count_click(&conn, 1, 2, b, at("2026-03-09T12:00:00Z"), again).unwrap();
        count_open(&conn, 1, 1, at("2026-03-01T10:30:00Z")).unwrap();
        let report = for_issue(&conn, 1, 1).unwrap();
        assert_eq!(
            report.links,
            [
                LinkClicks {
                    url: a.into(),
                    clickers: 2,
                    clicks: 3
                },
                LinkClicks {
                    url: b.into(),
                    clickers: 1,
                    clicks: 1
                },
            ]
        );
        assert_eq!(report.links_clicked, 2);
        let days: Vec<(i64, i64, i64, i64)> = report
            .days
            .iter()
            .map(|d| (d.day, d.opened, d.clicked, d.clicks))
            .collect();
        assert_eq!(days.len(), 7);
        // Day 1: one open by the pixel, one by a click; day 2: a repeat and a first click.
        assert_eq!(days[0], (1, 2, 1, 1));
        assert_eq!(days[1], (2, 1, 1, 2));
        assert!(days[2..].iter().all(|d| (d.1, d.2, d.3) == (0, 0, 0)));
        assert!(matches!(
            for_issue(&conn, 2, 1),
            Err(DomainError::NotFound(_))
        ));
        // The issue's links through their unique index, its days through their key: never a
        // scan of the links of every issue, nor of the deliveries.
        for (sql, index) in [
            (
                "SELECT url, clickers, clicks FROM issue_links WHERE issue_id = 1 ORDER BY clicks DESC, clickers DESC, url LIMIT 100",
                "USING INDEX sqlite_autoindex_issue_links_1 (issue_id=?)",
            ),
            (
                "SELECT day, opened, clicked, clicks FROM issue_days WHERE issue_id = 1",
                "USING PRIMARY KEY (issue_id=?)",
            ),
        ] {
            let plan: Vec<String> = conn
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .unwrap()
                .query_map([], |r| r.get(3))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            assert!(plan.iter().any(|p| p.contains(index)), "{sql}: {plan:?}");
        }
    }
}
