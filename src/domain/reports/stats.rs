//! Newsletter statistics: subscribers, issues and deliveries, read from the counters that
//! migration 0011's triggers keep in the transaction of every change (docs/statistics.md).
//! Rates are percentages (0-100, one decimal) of delivered messages.

use rusqlite::{Connection, OptionalExtension};

use crate::clock::{self, Timestamp};
use crate::domain::DomainResult;
use crate::domain::subscribers::origin::Source;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SubscriberStats {
    pub total: i64,
    pub active: i64,
    pub unsubscribed: i64,
    pub bounced: i64,
    /// New subscribers minus unsubscribes in the last 30 days.
    pub growth_last_30_days: i64,
    /// New subscribers of the last 30 days by how they were added.
    pub new_by_source: NewBySource,
}

/// New subscribers (as they are now) by source (`subscribers::origin::Source`); those added
/// before sources were recorded are in none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewBySource {
    pub form: i64,
    pub import: i64,
    pub api: i64,
    pub dashboard: i64,
}

impl NewBySource {
    /// The count of `source`.
    pub fn of(&self, source: Source) -> i64 {
        match source {
            Source::Form => self.form,
            Source::Import => self.import,
            Source::Api => self.api,
            Source::Dashboard => self.dashboard,
        }
    }

    fn count_mut(&mut self, source: Source) -> &mut i64 {
        match source {
            Source::Form => &mut self.form,
            Source::Import => &mut self.import,
            Source::Api => &mut self.api,
            Source::Dashboard => &mut self.dashboard,
        }
    }
}

/// New subscribers by source since `since` (a day), from migration 0036's daily rollup: at
/// most 30 days × 4 sources of rows.
fn new_by_source(conn: &Connection, newsletter_id: i64, since: &str) -> DomainResult<NewBySource> {
    const SQL: &str = "SELECT source, sum(created) FROM newsletter_source_days
         WHERE newsletter_id = ?1 AND day >= ?2 GROUP BY source";
    let mut counts = NewBySource::default();
    let mut stmt = conn.prepare_cached(SQL)?;
    let rows = stmt.query_map((newsletter_id, since), |r| {
        Ok((r.get::<_, Source>(0)?, r.get::<_, i64>(1)?))
    })?;
    for row in rows {
        let (source, count) = row?;
        *counts.count_mut(source) = count;
    }
    Ok(counts)
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct IssueStats {
    pub total: i64,
    pub sent_last_30_days: i64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Last30Days {
    pub emails_sent: i64,
    /// Messages whose end went out but whose answer never came (not counted in `emails_sent`).
    pub emails_unconfirmed: i64,
    pub opens: i64,
    pub clicks: i64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Engagement {
    pub average_open_rate: f64,
    pub average_click_rate: f64,
    pub last_30_days: Last30Days,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TopIssue {
    pub id: i64,
    pub subject: String,
    pub open_rate: f64,
    pub click_rate: f64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    pub subscribers: SubscriberStats,
    pub issues: IssueStats,
    pub engagement: Engagement,
    pub top_issues: Vec<TopIssue>,
    /// Paid members and revenue (`domain/subscribers/memberships.rs`).
    pub memberships: crate::domain::subscribers::memberships::Figures,
}

/// `part` of `whole` as a percentage with one decimal; 0 when nothing was delivered.
pub fn rate(part: i64, whole: i64) -> f64 {
    if whole <= 0 {
        0.0
    } else {
        (part as f64 * 1000.0 / whole as f64).round() / 10.0
    }
}

/// The first UTC day of the "last 30 days" figures: today and the 29 days before it
/// (`YYYY-MM-DD`, which compares with stored timestamps as a prefix).
fn first_of_last_30_days() -> String {
    clock::format_day(clock::date_of(clock::now()) - clock::days(29))
}

/// Every figure of the newsletter's stats, read from the counters and daily rollups that
/// migration 0011's triggers keep (a few dozen rows, whatever the size of the list).
pub fn for_newsletter(conn: &Connection, newsletter_id: i64) -> DomainResult<Stats> {
    let since = first_of_last_30_days();
    const SUBSCRIBERS: &str = "SELECT t.active, t.unsubscribed, t.bounced,
             (SELECT coalesce(sum(d.created) - sum(d.unsubscribed), 0) FROM newsletter_days d
              WHERE d.newsletter_id = t.newsletter_id AND d.day >= ?2)
         FROM subscriber_totals t WHERE t.newsletter_id = ?1";
    let subscribers = conn
        .query_row(SUBSCRIBERS, (newsletter_id, &since), |r| {
            let (active, unsubscribed, bounced): (i64, i64, i64) =
                (r.get(0)?, r.get(1)?, r.get(2)?);
            Ok(SubscriberStats {
                total: active + unsubscribed + bounced,
                active,
                unsubscribed,
                bounced,
                growth_last_30_days: r.get(3)?,
                new_by_source: NewBySource::default(),
            })
        })
        .optional()?
        .map(|subscribers| -> DomainResult<_> {
            Ok(SubscriberStats {
                new_by_source: new_by_source(conn, newsletter_id, &since)?,
                ..subscribers
            })
        })
        .transpose()?
        .unwrap_or_default();
    const ISSUES: &str = "SELECT count(*), coalesce(sum(status = 'sent' AND sent_at >= ?2), 0) FROM issues WHERE newsletter_id = ?1";
    let issues = conn.query_row(ISSUES, (newsletter_id, &since), |r| {
        Ok(IssueStats {
            total: r.get(0)?,
            sent_last_30_days: r.get(1)?,
        })
    })?;
    const DELIVERED: &str =
        "SELECT coalesce(sum(c.sent), 0), coalesce(sum(c.opened), 0), coalesce(sum(c.clicked), 0)
         FROM issues i JOIN issue_counts c ON c.issue_id = i.id WHERE i.newsletter_id = ?1";
    let (delivered, opened, clicked): (i64, i64, i64) =
        conn.query_row(DELIVERED, [newsletter_id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
    const LAST_30_DAYS: &str = "SELECT coalesce(sum(sent), 0), coalesce(sum(unconfirmed), 0),
             coalesce(sum(opened), 0), coalesce(sum(clicked), 0)
         FROM newsletter_days WHERE newsletter_id = ?1 AND day >= ?2";
    let last_30_days = conn.query_row(LAST_30_DAYS, (newsletter_id, &since), |r| {
        Ok(Last30Days {
            emails_sent: r.get(0)?,
            emails_unconfirmed: r.get(1)?,
            opens: r.get(2)?,
            clicks: r.get(3)?,
        })
    })?;
    const TOP: &str = "SELECT i.id, i.subject, c.sent, c.opened, c.clicked
         FROM issues i JOIN issue_counts c ON c.issue_id = i.id
         WHERE i.newsletter_id = ?1 AND i.status = 'sent' AND c.sent > 0
         ORDER BY CAST(c.opened AS REAL) / c.sent DESC, i.id DESC
         LIMIT 5";
    let mut stmt = conn.prepare_cached(TOP)?;
    let top_issues = stmt
        .query_map([newsletter_id], |r| {
            let (sent, opened, clicked): (i64, i64, i64) = (r.get(2)?, r.get(3)?, r.get(4)?);
            Ok(TopIssue {
                id: r.get(0)?,
                subject: r.get(1)?,
                open_rate: rate(opened, sent),
                click_rate: rate(clicked, sent),
            })
        })?
        .collect::<Result<_, _>>()?;
    Ok(Stats {
        memberships: crate::domain::subscribers::memberships::figures(conn, newsletter_id)?,
        subscribers,
        issues,
        engagement: Engagement {
            average_open_rate: rate(opened, delivered),
            average_click_rate: rate(clicked, delivered),
            last_30_days,
        },
        top_issues,
    })
}

/// Active subscribers at the end of one UTC day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DayCount {
    /// `YYYY-MM-DD`.
    pub day: String,
    pub active: i64,
}

/// Days the dashboard's growth chart covers.
pub const GROWTH_DAYS: i64 = 90;

/// Active subscribers at the end of each of the last `days` UTC days, oldest first, today
/// last (so the last figure is today's active count): today's count minus the changes
/// recorded on the days after each day (`newsletter_days.active_change`, kept by triggers
/// on every join, return, unsubscribe, bounce and deletion; history before migration 0011
/// was rebuilt from the rows).
pub fn active_by_day(
    conn: &Connection,
    newsletter_id: i64,
    days: i64,
) -> DomainResult<Vec<DayCount>> {
    let today = clock::format_day(clock::date_of(clock::now()));
    // Newest day first, each day's figure is the active count now less the changes of the
    // days after it in the window: a running sum over at most `days` rows.
    const SERIES: &str = "WITH RECURSIVE
         days(day) AS (
             SELECT ?2
             UNION ALL SELECT date(day, '-1 day') FROM days WHERE day > date(?2, '-' || (?3 - 1) || ' days')
         ),
         changes AS (
             SELECT days.day, coalesce(n.active_change, 0) AS change
             FROM days LEFT JOIN newsletter_days n ON n.newsletter_id = ?1 AND n.day = days.day
         )
         SELECT day,
                coalesce((SELECT active FROM subscriber_totals WHERE newsletter_id = ?1), 0)
                - coalesce(sum(change) OVER (ORDER BY day DESC ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
         FROM changes
         ORDER BY day";
    let mut stmt = conn.prepare_cached(SERIES)?;
    let series = stmt
        .query_map((newsletter_id, &today, days.max(1)), |r| {
            Ok(DayCount {
                day: r.get(0)?,
                active: r.get(1)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    Ok(series)
}

/// Opens and clicks of one sent issue, as counts and as rates of its delivered messages.
#[derive(Debug, Clone, PartialEq)]
pub struct IssueEngagement {
    pub id: i64,
    pub subject: String,
    pub sent_at: Option<Timestamp>,
    pub delivered: i64,
    pub opens: i64,
    pub clicks: i64,
    pub open_rate: f64,
    pub click_rate: f64,
}

/// Issues the dashboard's per-issue chart shows.
pub const RECENT_ISSUES: i64 = 10;

/// The newest `limit` sent issues, newest first, with the same counting as the API's rates.
pub fn recent_issues(
    conn: &Connection,
    newsletter_id: i64,
    limit: i64,
) -> DomainResult<Vec<IssueEngagement>> {
    const RECENT: &str =
        "SELECT i.id, i.subject, i.sent_at, coalesce(c.sent, 0), coalesce(c.opened, 0),
             coalesce(c.clicked, 0)
         FROM issues i LEFT JOIN issue_counts c ON c.issue_id = i.id
         WHERE i.newsletter_id = ?1 AND i.status = 'sent'
         ORDER BY i.sent_at DESC, i.id DESC LIMIT ?2";
    let mut stmt = conn.prepare_cached(RECENT)?;
    let issues = stmt
        .query_map((newsletter_id, limit), |r| {
            let (delivered, opens, clicks): (i64, i64, i64) = (r.get(3)?, r.get(4)?, r.get(5)?);
            Ok(IssueEngagement {
                id: r.get(0)?,
                subject: r.get(1)?,
                sent_at: r.get(2)?,
                delivered,
                opens,
                clicks,
                open_rate: rate(opens, delivered),
                click_rate: rate(clicks, delivered),
            })
        })?
        .collect::<Result<_, _>>()?;
    Ok(issues)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_percentages_with_one_decimal() {
        assert_eq!(rate(1, 3), 33.3);
        assert_eq!(rate(2, 3), 66.7);
        assert_eq!(rate(0, 0), 0.0);
        assert_eq!(rate(5, 5), 100.0);
    }

    #[test]
    fn counts_from_deliveries() {
        let conn = crate::domain::testing::db_with_newsletter("paid");
        let now = Timestamp::now();
        conn.execute_batch(&format!(
            "INSERT INTO subscribers (newsletter_id, email, status, created_at) VALUES
               (1, 'a@x.co', 'active', '{now}'), (1, 'b@x.co', 'bounced', '{now}');
             INSERT INTO issues (newsletter_id, subject, status, sent_at, path, created_at, updated_at) VALUES (1, 'S', 'sent', '{now}', 's', '{now}', '{now}');
             INSERT INTO deliveries (issue_id, subscriber_id, email, status, sent_at, opened_at, clicked_at, created_at) VALUES
               (1, 1, 'a@x.co', 'sent', '{now}', '{now}', '{now}', '{now}'),
               (1, 2, 'b@x.co', 'bounced', NULL, NULL, NULL, '{now}');"
        ))
        .unwrap();
        let stats = for_newsletter(&conn, 1).unwrap();
        assert_eq!(
            (
                stats.subscribers.total,
                stats.subscribers.active,
                stats.subscribers.bounced,
                stats.subscribers.growth_last_30_days
            ),
            (2, 1, 1, 2)
        );
        assert_eq!((stats.issues.total, stats.issues.sent_last_30_days), (1, 1));
        assert_eq!(
            (
                stats.engagement.average_open_rate,
                stats.engagement.average_click_rate
            ),
            (100.0, 100.0)
        );
        assert_eq!(
            stats.engagement.last_30_days,
            Last30Days {
                emails_sent: 1,
                emails_unconfirmed: 0,
                opens: 1,
                clicks: 1
            }
        );
        assert_eq!(stats.top_issues.len(), 1);
    }

    #[test]
    fn active_by_day_follows_joins_and_departures() {
        let conn = crate::domain::testing::db_with_newsletter("paid");
        let now = clock::now();
        let ago = |days: i64| Timestamp::from(now - clock::days(days));
        let (d400, d300, d4, d3, d2, d1) = (ago(400), ago(300), ago(4), ago(3), ago(2), ago(1));
        conn.execute_batch(&format!(
            "INSERT INTO newsletters (owner_id, name, subdomain, bounce_token, created_at, updated_at) VALUES (1, 'M', 'm', 'bt2', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');
             INSERT INTO subscribers (id, newsletter_id, email, status, resubscribed_at, unsubscribed_at, created_at, changed_at) VALUES
               (1, 1, 'old@x.co', 'active', '{d400}', NULL, '{d400}', '{d400}'),
               (2, 1, 'gone-early@x.co', 'unsubscribed', '{d400}', '{d300}', '{d400}', '{d300}'),
               (3, 1, 'day3@x.co', 'active', '{d3}', NULL, '{d3}', '{d3}'),
               (4, 1, 'left@x.co', 'active', '{d4}', NULL, '{d4}', '{d4}'),
               (5, 1, 'bounced@x.co', 'active', '{d4}', NULL, '{d4}', '{d4}'),
               (6, 1, 'deleted@x.co', 'active', '{d4}', NULL, '{d4}', '{d4}'),
               (7, 1, 'back@x.co', 'unsubscribed', '{d400}', '{d300}', '{d400}', '{d300}'),
               (8, 2, 'other@x.co', 'active', '{d4}', NULL, '{d4}', '{d4}');
             UPDATE subscribers SET status = 'unsubscribed', unsubscribed_at = '{d1}', changed_at = '{d1}' WHERE id = 4;
             UPDATE subscribers SET status = 'bounced', changed_at = '{d2}' WHERE id = 5;
             DELETE FROM subscribers WHERE id = 6;
             UPDATE subscribers SET status = 'active', unsubscribed_at = NULL, resubscribed_at = '{d1}', changed_at = '{d1}' WHERE id = 7;"
        ))
        .unwrap();
        let series = active_by_day(&conn, 1, 5).unwrap();
        let days: Vec<&str> = series.iter().map(|d| d.day.as_str()).collect();
        let day_ago = |days: i64| clock::format_day(clock::date_of(now - clock::days(days)));
        assert_eq!(
            days,
            [day_ago(4), day_ago(3), day_ago(2), day_ago(1), day_ago(0)]
        );
        let active: Vec<i64> = series.iter().map(|d| d.active).collect();
        // old + left + bounced + deleted; + day3; - bounced; - left + back; - deleted (today).
        assert_eq!(active, [4, 5, 4, 4, 3]);
        // No subscribers: a flat zero line of the asked length, no error.
        let empty = active_by_day(&conn, 9, 3).unwrap();
        assert_eq!(empty.len(), 3);
        assert!(empty.iter().all(|d| d.active == 0));
    }

    /// Thousands of random changes straight in SQL, the way any door could make them (rows
    /// with history, status moves both ways, deletions with cascades, every delivery
    /// transition, opens and clicks on any day): every counter still equals a recount.
    #[test]
    fn counters_match_a_recount_after_random_changes() {
        use rand::{Rng, SeedableRng};
        let conn = crate::domain::testing::db_with_newsletter("paid");
        conn.execute_batch(
            "PRAGMA foreign_keys = ON;
             INSERT INTO newsletters (owner_id, name, subdomain, bounce_token, created_at, updated_at)
               VALUES (1, 'M', 'm', 'bt2', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');",
        )
        .unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(13);
        const DAYS: [&str; 4] = [
            "2026-03-01T10:00:00.000Z",
            "2026-03-02T23:59:59.999Z",
            "2026-03-03T00:00:00.000Z",
            "2026-03-04T12:00:00.000Z",
        ];
        const STATUSES: [&str; 3] = ["active", "unsubscribed", "bounced"];
        const DELIVERY: [&str; 6] = [
            "pending",
            "sending",
            "sent",
            "unconfirmed",
            "bounced",
            "failed",
        ];
        const TAGS: [&str; 3] = ["vip", "early", "x"];
        let pick = |rng: &mut rand::rngs::StdRng, n: usize| rng.random_range(0..n);
        // An existing row, chosen by the seeded generator (so a failure repeats).
        let any_id = |table: &str, rng: &mut rand::rngs::StdRng| -> Option<i64> {
            let count: i64 = conn
                .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
                .unwrap();
            (count > 0).then(|| {
                conn.query_row(
                    &format!("SELECT id FROM {table} ORDER BY id LIMIT 1 OFFSET ?1"),
                    [rng.random_range(0..count)],
                    |r| r.get(0),
                )
                .unwrap()
            })
        };
        for step in 0..4000 {
            let day = DAYS[pick(&mut rng, 4)];
            let later = DAYS[pick(&mut rng, 4)];
            let newsletter = 1 + pick(&mut rng, 2) as i64;
            match pick(&mut rng, 12) {
                0..=2 => {
                    let status = STATUSES[pick(&mut rng, 3)];
                    conn.execute(
                        "INSERT INTO subscribers (newsletter_id, email, status, resubscribed_at, unsubscribed_at, created_at, changed_at)
                         VALUES (?1, ?2, ?3, ?4, CASE WHEN ?3 = 'unsubscribed' THEN ?5 END, ?6, ?5)",
                        (newsletter, format!("s{step}@x.co"), status, day, later, DAYS[pick(&mut rng, 4)]),
                    )
                    .unwrap();
                }
                3 => {
                    if let Some(id) = any_id("subscribers", &mut rng) {
                        let status = STATUSES[pick(&mut rng, 3)];
                        conn.execute(
                            "UPDATE subscribers SET status = ?2, changed_at = ?3,
                                 unsubscribed_at = CASE WHEN ?2 = 'unsubscribed' THEN coalesce(unsubscribed_at, ?3)
                                                        WHEN ?2 = 'active' THEN NULL ELSE unsubscribed_at END
                             WHERE id = ?1",
                            (id, status, day),
                        )
                        .unwrap();
                    }
                }
                4 => {
                    if let Some(id) = any_id("subscribers", &mut rng) {
                        conn.execute("DELETE FROM subscribers WHERE id = ?1", [id])
                            .unwrap();
                    }
                }
                5 => {
                    if let Some(id) = any_id("subscribers", &mut rng) {
                        let tag = TAGS[pick(&mut rng, 3)];
                        let sql = if rng.random_bool(0.6) {
                            "INSERT OR IGNORE INTO subscriber_tags (subscriber_id, tag) VALUES (?1, ?2)"
                        } else {
                            "DELETE FROM subscriber_tags WHERE subscriber_id = ?1 AND tag = ?2"
                        };
                        conn.execute(sql, (id, tag)).unwrap();
                    }
                }
                6 => {
                    conn.execute(
                        "INSERT INTO issues (newsletter_id, subject, status, path, created_at, updated_at)
                         VALUES (?1, 'S', 'sending', ?2, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')",
                        (newsletter, format!("p{step}")),
                    )
                    .unwrap();
                    let issue = conn.last_insert_rowid();
                    conn.execute(
                        "INSERT INTO deliveries (issue_id, subscriber_id, email, created_at)
                         SELECT ?1, id, email, '2026-01-01T00:00:00.000Z' FROM subscribers WHERE newsletter_id = ?2 AND status = 'active'",
                        (issue, newsletter),
                    )
                    .unwrap();
                }
                7..=8 => {
                    if let Some(id) = any_id("deliveries", &mut rng) {
                        let status = DELIVERY[pick(&mut rng, 6)];
                        conn.execute(
                            "UPDATE deliveries SET status = ?2,
                                 sent_at = CASE WHEN ?2 IN ('sent', 'unconfirmed') THEN coalesce(sent_at, ?3) ELSE sent_at END
                             WHERE id = ?1",
                            (id, status, day),
                        )
                        .unwrap();
                    }
                }
                9 => {
                    if let Some(id) = any_id("deliveries", &mut rng) {
                        let sql = match pick(&mut rng, 3) {
                            0 => {
                                "UPDATE deliveries SET opened_at = ?2 WHERE id = ?1 AND opened_at IS NULL"
                            }
                            1 => {
                                "UPDATE deliveries SET clicked_at = ?2, opened_at = coalesce(opened_at, ?2) WHERE id = ?1 AND clicked_at IS NULL"
                            }
                            _ => {
                                "UPDATE deliveries SET unsubscribed_at = coalesce(unsubscribed_at, ?2) WHERE id = ?1"
                            }
                        };
                        conn.execute(sql, (id, day)).unwrap();
                    }
                }
                10 => {
                    if rng.random_bool(0.1)
                        && let Some(id) = any_id("issues", &mut rng)
                    {
                        conn.execute("DELETE FROM issues WHERE id = ?1", [id])
                            .unwrap();
                    }
                }
                _ => {
                    if let Some(id) = any_id("deliveries", &mut rng) {
                        conn.execute(
                            "INSERT INTO deliveries (issue_id, email, status, sent_at, opened_at, clicked_at, created_at)
                             SELECT issue_id, 'h@x.co', ?2, ?3, ?4, CASE WHEN ?5 THEN ?4 END, '2026-01-01T00:00:00.000Z' FROM deliveries WHERE id = ?1",
                            (id, DELIVERY[pick(&mut rng, 6)], day, later, rng.random_bool(0.5)),
                        )
                        .unwrap();
                    }
                }
            }
            if step % 500 == 499 {
                let wrong = crate::domain::testing::counter_mismatches(&conn);
                assert!(wrong.is_empty(), "after step {step}: {wrong:#?}");
            }
        }
        let sizes: (i64, i64, i64) = conn
            .query_row(
                "SELECT (SELECT count(*) FROM subscribers), (SELECT count(*) FROM subscriber_tags), (SELECT count(*) FROM deliveries)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert!(sizes.0 > 100 && sizes.1 > 50 && sizes.2 > 1000, "{sizes:?}");
    }

    #[test]
    fn recent_issues_newest_first_with_rates_of_delivered() {
        let conn = crate::domain::testing::db_with_newsletter("paid");
        conn.execute_batch(
            "INSERT INTO issues (newsletter_id, subject, status, sent_at, path, created_at, updated_at) VALUES
               (1, 'First', 'sent', '2026-03-01T09:00:00.000Z', 'a', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z'),
               (1, 'Second', 'sent', '2026-03-02T09:00:00.000Z', 'b', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z'),
               (1, 'Draft', 'draft', NULL, 'c', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');
             INSERT INTO deliveries (issue_id, subscriber_id, email, status, sent_at, opened_at, clicked_at, created_at) VALUES
               (1, NULL, 'a@x.co', 'sent', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z'),
               (1, NULL, 'b@x.co', 'sent', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', NULL, '2026-01-01T00:00:00.000Z'),
               (1, NULL, 'c@x.co', 'sent', '2026-01-01T00:00:00.000Z', NULL, NULL, '2026-01-01T00:00:00.000Z'),
               (1, NULL, 'd@x.co', 'bounced', NULL, NULL, NULL, '2026-01-01T00:00:00.000Z');",
        )
        .unwrap();
        let recent = recent_issues(&conn, 1, 10).unwrap();
        let subjects: Vec<&str> = recent.iter().map(|i| i.subject.as_str()).collect();
        assert_eq!(subjects, ["Second", "First"]);
        let first = &recent[1];
        assert_eq!((first.delivered, first.opens, first.clicks), (3, 2, 1));
        assert_eq!((first.open_rate, first.click_rate), (66.7, 33.3));
        // An issue with no delivery: zero rates, no division by zero.
        assert_eq!((recent[0].delivered, recent[0].open_rate), (0, 0.0));
        assert_eq!(recent_issues(&conn, 1, 1).unwrap().len(), 1);
    }
}
