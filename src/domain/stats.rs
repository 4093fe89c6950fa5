//! Newsletter statistics from real rows: subscribers, issues and deliveries. Rates are
//! percentages (0-100, one decimal) of delivered messages.

use rusqlite::Connection;
use time::Duration;

use super::DomainResult;
use crate::clock;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SubscriberStats {
    pub total: i64,
    pub active: i64,
    pub unsubscribed: i64,
    pub bounced: i64,
    /// New subscribers minus unsubscribes in the last 30 days.
    pub growth_last_30_days: i64,
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
}

/// `part` of `whole` as a percentage with one decimal; 0 when nothing was delivered.
pub fn rate(part: i64, whole: i64) -> f64 {
    if whole <= 0 {
        0.0
    } else {
        (part as f64 * 1000.0 / whole as f64).round() / 10.0
    }
}

pub fn for_newsletter(conn: &Connection, newsletter_id: i64) -> DomainResult<Stats> {
    let since = clock::format(clock::now() - Duration::days(30));
    const SUBSCRIBERS: &str = "SELECT count(*),
             coalesce(sum(status = 'active'), 0), coalesce(sum(status = 'unsubscribed'), 0), coalesce(sum(status = 'bounced'), 0),
             coalesce(sum(created_at >= ?2), 0) - coalesce(sum(unsubscribed_at >= ?2), 0)
         FROM subscribers WHERE newsletter_id = ?1";
    let subscribers = conn.query_row(SUBSCRIBERS, (newsletter_id, &since), |r| {
        Ok(SubscriberStats {
            total: r.get(0)?,
            active: r.get(1)?,
            unsubscribed: r.get(2)?,
            bounced: r.get(3)?,
            growth_last_30_days: r.get(4)?,
        })
    })?;
    const ISSUES: &str = "SELECT count(*), coalesce(sum(status = 'sent' AND sent_at >= ?2), 0) FROM issues WHERE newsletter_id = ?1";
    let issues = conn.query_row(ISSUES, (newsletter_id, &since), |r| {
        Ok(IssueStats {
            total: r.get(0)?,
            sent_last_30_days: r.get(1)?,
        })
    })?;
    const DELIVERIES: &str = "SELECT coalesce(sum(d.status = 'sent'), 0),
             coalesce(sum(d.status = 'sent' AND d.opened_at IS NOT NULL), 0),
             coalesce(sum(d.status = 'sent' AND d.clicked_at IS NOT NULL), 0),
             coalesce(sum(d.sent_at >= ?2 AND d.status != 'unconfirmed'), 0), coalesce(sum(d.opened_at >= ?2), 0),
             coalesce(sum(d.clicked_at >= ?2), 0), coalesce(sum(d.sent_at >= ?2 AND d.status = 'unconfirmed'), 0)
         FROM deliveries d JOIN issues i ON i.id = d.issue_id WHERE i.newsletter_id = ?1";
    let (delivered, opened, clicked, last_30_days) =
        conn.query_row(DELIVERIES, (newsletter_id, &since), |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                Last30Days {
                    emails_sent: r.get(3)?,
                    emails_unconfirmed: r.get(6)?,
                    opens: r.get(4)?,
                    clicks: r.get(5)?,
                },
            ))
        })?;
    const TOP: &str = "SELECT i.id, i.subject, sum(d.status = 'sent'),
             sum(d.status = 'sent' AND d.opened_at IS NOT NULL), sum(d.status = 'sent' AND d.clicked_at IS NOT NULL)
         FROM issues i JOIN deliveries d ON d.issue_id = i.id
         WHERE i.newsletter_id = ?1 AND i.status = 'sent'
         GROUP BY i.id HAVING sum(d.status = 'sent') > 0
         ORDER BY CAST(sum(d.status = 'sent' AND d.opened_at IS NOT NULL) AS REAL) / sum(d.status = 'sent') DESC, i.id DESC
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
/// last (so the last figure is today's active count). Rebuilt from the rows as they are: a
/// subscriber counts from `subscribed_at` until it left (`unsubscribed_at`, or the bounce of
/// its delivery, or its last update when neither is known). A subscriber who came back counts
/// from the return only, because `subscribed_at` moves then.
pub fn active_by_day(
    conn: &Connection,
    newsletter_id: i64,
    days: i64,
) -> DomainResult<Vec<DayCount>> {
    let today = clock::now_string()[..10].to_string();
    active_by_day_until(conn, newsletter_id, &today, days)
}

fn active_by_day_until(
    conn: &Connection,
    newsletter_id: i64,
    last_day: &str,
    days: i64,
) -> DomainResult<Vec<DayCount>> {
    // One pass over the subscribers: +1 on the day each joined, -1 on the day each left
    // (anything before the window lands on its first day), summed per day, then a running
    // total over the days.
    const SERIES: &str = "WITH RECURSIVE
         days(day) AS (
             SELECT date(?2, '-' || (?3 - 1) || ' days')
             UNION ALL SELECT date(day, '+1 day') FROM days WHERE day < ?2
         ),
         spans AS (
             SELECT substr(s.subscribed_at, 1, 10) AS joined,
                    CASE WHEN s.status = 'active' THEN NULL ELSE substr(coalesce(
                        CASE s.status
                            WHEN 'unsubscribed' THEN s.unsubscribed_at
                            ELSE (SELECT max(d.bounced_at) FROM deliveries d WHERE d.subscriber_id = s.id)
                        END, s.updated_at), 1, 10) END AS left_on
             FROM subscribers s WHERE s.newsletter_id = ?1
         ),
         moves(day, delta) AS (
             SELECT max(joined, date(?2, '-' || (?3 - 1) || ' days')), 1 FROM spans
             UNION ALL
             SELECT max(left_on, date(?2, '-' || (?3 - 1) || ' days')), -1 FROM spans WHERE left_on IS NOT NULL
         ),
         per_day AS (SELECT day, sum(delta) AS delta FROM moves GROUP BY day)
         SELECT days.day, sum(coalesce(per_day.delta, 0)) OVER (ORDER BY days.day)
         FROM days LEFT JOIN per_day ON per_day.day = days.day
         ORDER BY days.day";
    let mut stmt = conn.prepare_cached(SERIES)?;
    let series = stmt
        .query_map((newsletter_id, last_day, days.max(1)), |r| {
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
    pub sent_at: Option<String>,
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
    const RECENT: &str = "SELECT i.id, i.subject, i.sent_at, coalesce(sum(d.status = 'sent'), 0),
             coalesce(sum(d.status = 'sent' AND d.opened_at IS NOT NULL), 0),
             coalesce(sum(d.status = 'sent' AND d.clicked_at IS NOT NULL), 0)
         FROM issues i LEFT JOIN deliveries d ON d.issue_id = i.id
         WHERE i.newsletter_id = ?1 AND i.status = 'sent'
         GROUP BY i.id ORDER BY i.sent_at DESC, i.id DESC LIMIT ?2";
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
        let now = clock::now_string();
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
        conn.execute_batch(
            "INSERT INTO newsletters (owner_id, name, subdomain, bounce_token, created_at, updated_at) VALUES (1, 'M', 'm', 'bt2', 'n', 'n');
             INSERT INTO subscribers (newsletter_id, email, status, resubscribed_at, unsubscribed_at, created_at, changed_at) VALUES
               (1, 'old@x.co', 'active', '2025-01-01T10:00:00.000Z', NULL, 'n', '2025-01-01T10:00:00.000Z'),
               (1, 'gone-early@x.co', 'unsubscribed', '2025-01-01T10:00:00.000Z', '2025-02-01T10:00:00.000Z', 'n', 'n'),
               (1, 'day2@x.co', 'active', '2026-03-02T23:59:59.999Z', NULL, 'n', 'n'),
               (1, 'left4@x.co', 'unsubscribed', '2026-03-01T08:00:00.000Z', '2026-03-04T08:00:00.000Z', 'n', 'n'),
               (1, 'bounced3@x.co', 'bounced', '2026-03-01T08:00:00.000Z', NULL, 'n', '2026-03-05T08:00:00.000Z'),
               (2, 'other@x.co', 'active', '2026-03-01T08:00:00.000Z', NULL, 'n', 'n');
             INSERT INTO issues (newsletter_id, subject, status, path, created_at, updated_at) VALUES (1, 'S', 'sent', 's', 'n', 'n');
             INSERT INTO deliveries (issue_id, subscriber_id, email, status, bounced_at, created_at) VALUES
               (1, 5, 'bounced3@x.co', 'bounced', '2026-03-03T12:00:00.000Z', 'n');",
        )
        .unwrap();
        let series = active_by_day_until(&conn, 1, "2026-03-05", 5).unwrap();
        let days: Vec<&str> = series.iter().map(|d| d.day.as_str()).collect();
        assert_eq!(
            days,
            [
                "2026-03-01",
                "2026-03-02",
                "2026-03-03",
                "2026-03-04",
                "2026-03-05"
            ]
        );
        let active: Vec<i64> = series.iter().map(|d| d.active).collect();
        // old + left4 + bounced3; + day2; - bounced3 (its delivery bounced); - left4.
        assert_eq!(active, [3, 4, 3, 2, 2]);
        // No subscribers: a flat zero line of the asked length, no error.
        assert_eq!(
            active_by_day_until(&conn, 9, "2026-03-05", 3)
                .unwrap()
                .len(),
            3
        );
    }

    #[test]
    fn recent_issues_newest_first_with_rates_of_delivered() {
        let conn = crate::domain::testing::db_with_newsletter("paid");
        conn.execute_batch(
            "INSERT INTO issues (newsletter_id, subject, status, sent_at, path, created_at, updated_at) VALUES
               (1, 'First', 'sent', '2026-03-01T09:00:00.000Z', 'a', 'n', 'n'),
               (1, 'Second', 'sent', '2026-03-02T09:00:00.000Z', 'b', 'n', 'n'),
               (1, 'Draft', 'draft', NULL, 'c', 'n', 'n');
             INSERT INTO deliveries (issue_id, subscriber_id, email, status, sent_at, opened_at, clicked_at, created_at) VALUES
               (1, NULL, 'a@x.co', 'sent', 'n', 'n', 'n', 'n'),
               (1, NULL, 'b@x.co', 'sent', 'n', 'n', NULL, 'n'),
               (1, NULL, 'c@x.co', 'sent', 'n', NULL, NULL, 'n'),
               (1, NULL, 'd@x.co', 'bounced', NULL, NULL, NULL, 'n');",
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
