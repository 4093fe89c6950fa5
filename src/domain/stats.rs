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
             coalesce(sum(d.sent_at >= ?2), 0), coalesce(sum(d.opened_at >= ?2), 0), coalesce(sum(d.clicked_at >= ?2), 0)
         FROM deliveries d JOIN issues i ON i.id = d.issue_id WHERE i.newsletter_id = ?1";
    let (delivered, opened, clicked, last_30_days) =
        conn.query_row(DELIVERIES, (newsletter_id, &since), |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                Last30Days {
                    emails_sent: r.get(3)?,
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
            "INSERT INTO subscribers (newsletter_id, email, status, subscribed_at, created_at, updated_at) VALUES
               (1, 'a@x.co', 'active', '{now}', '{now}', '{now}'), (1, 'b@x.co', 'bounced', '{now}', '{now}', '{now}');
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
                opens: 1,
                clicks: 1
            }
        );
        assert_eq!(stats.top_issues.len(), 1);
    }
}
