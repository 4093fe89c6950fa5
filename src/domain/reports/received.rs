//! The issues one subscriber was sent, newest first, with whether they opened and clicked
//! each: read through the deliveries' index on the subscriber, one page at a time, so a
//! subscriber of years costs one page of rows.

use rusqlite::Connection;

use crate::clock::Timestamp;
use crate::domain::DomainResult;

/// Rows of one page.
pub const PER_PAGE: i64 = 20;

/// One issue as one subscriber received it.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    pub delivery_id: i64,
    pub issue_id: i64,
    pub subject: String,
    /// The delivery's state (`pending`, `sending`, `sent`, `unconfirmed`, `bounced`, `failed`).
    pub status: String,
    pub sent_at: Option<Timestamp>,
    pub opened_at: Option<Timestamp>,
    pub clicked_at: Option<Timestamp>,
}

/// One page of [`Received`], and where the next one starts.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedPage {
    pub rows: Vec<Received>,
    /// The `before` of the next (older) page, when there is one.
    pub next_before: Option<i64>,
}

/// The issues subscriber `subscriber_id` of newsletter `newsletter_id` was sent, newest
/// first, starting below delivery `before` (the whole list when `None`). The subscriber's
/// ownership is the caller's check; the newsletter is named again so that no other
/// newsletter's delivery can show.
pub fn page(
    conn: &Connection,
    newsletter_id: i64,
    subscriber_id: i64,
    before: Option<i64>,
) -> DomainResult<ReceivedPage> {
    const SQL: &str =
        "SELECT d.id, d.issue_id, i.subject, d.status, d.sent_at, d.opened_at, d.clicked_at
         FROM deliveries d INDEXED BY deliveries_subscriber JOIN issues i ON i.id = d.issue_id
         WHERE d.subscriber_id = ?1 AND d.id < ?2 AND i.newsletter_id = ?3
         ORDER BY d.id DESC LIMIT ?4";
    let mut rows = conn
        .prepare_cached(SQL)?
        .query_map(
            (
                subscriber_id,
                before.unwrap_or(i64::MAX),
                newsletter_id,
                PER_PAGE + 1,
            ),
            |r| {
                Ok(Received {
                    delivery_id: r.get(0)?,
                    issue_id: r.get(1)?,
                    subject: r.get(2)?,
                    status: r.get(3)?,
                    sent_at: r.get(4)?,
                    opened_at: r.get(5)?,
                    clicked_at: r.get(6)?,
                })
            },
        )?
        .collect::<Result<Vec<_>, _>>()?;
    let next_before = if rows.len() as i64 > PER_PAGE {
        rows.truncate(PER_PAGE as usize);
        rows.last().map(|r| r.delivery_id)
    } else {
        None
    };
    Ok(ReceivedPage { rows, next_before })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_first_in_pages_through_the_subscriber_index() {
        let conn = crate::domain::testing::db_with_newsletter("paid");
        let t = "2026-03-01T10:00:00.000Z";
        conn.execute(
            "INSERT INTO subscribers (id, newsletter_id, email, status, created_at) VALUES (1, 1, 'a@x.co', 'active', ?1)",
            [t],
        )
        .unwrap();
        for n in 0..(PER_PAGE + 5) {
            conn.execute(
                "INSERT INTO issues (newsletter_id, subject, status, sent_at, path, created_at, updated_at)
                 VALUES (1, ?1, 'sent', ?2, ?3, ?2, ?2)",
                (format!("Issue {n}"), t, format!("p{n}")),
            )
            .unwrap();
            let issue = conn.last_insert_rowid();
            conn.execute(
                "INSERT INTO deliveries (issue_id, subscriber_id, email, status, sent_at, opened_at, created_at)
                 VALUES (?1, 1, 'a@x.co', 'sent', ?2, CASE WHEN ?1 % 2 = 0 THEN ?2 END, ?2)",
                (issue, t),
            )
            .unwrap();
        }
        let first = page(&conn, 1, 1, None).unwrap();
        assert_eq!(first.rows.len() as i64, PER_PAGE);
        assert_eq!(first.rows[0].subject, format!("Issue {}", PER_PAGE + 4));
        let second = page(&conn, 1, 1, first.next_before).unwrap();
        assert_eq!(second.rows.len(), 5);
        assert_eq!(second.next_before, None);
        assert_eq!(second.rows.last().unwrap().subject, "Issue 0");
        assert!(page(&conn, 2, 1, None).unwrap().rows.is_empty());
        let plan: String = conn
            .query_row(
                "EXPLAIN QUERY PLAN SELECT d.id FROM deliveries d INDEXED BY deliveries_subscriber
                 JOIN issues i ON i.id = d.issue_id WHERE d.subscriber_id = 1 AND d.id < 9 AND i.newsletter_id = 1
                 ORDER BY d.id DESC LIMIT 21",
                [],
                |r| r.get(3),
            )
            .unwrap();
        assert!(plan.contains("deliveries_subscriber"), "{plan}");
    }
}
