//! Everything kept about one subscriber, as one JSON document, for a data request (a reader
//! asking what the newsletter holds about them): the record with its tags, every issue sent
//! to them with what became of it, and the events of that history in time order. The API
//! (`GET /subscribers/{id}/export`) and the dashboard's download serialise the same
//! [`SubscriberExport`], so both give the same document.
//!
//! Bounded: a subscriber has one delivery per issue sent to them, read newest first through
//! the `deliveries_subscriber` index, and at most [`DELIVERIES_KEPT`] are included; beyond
//! that the document says how many were left out. docs/subscribers.md ("Data requests").

use rusqlite::{Connection, Row};
use serde::Serialize;

use super::DomainResult;
use super::subscribers::{self, Subscriber};
use crate::clock::Timestamp;

/// Deliveries one export includes at most: twenty-seven years of a daily newsletter.
pub const DELIVERIES_KEPT: u64 = 10_000;

crate::string_enum!(
    /// A delivery's state, as `deliveries.status` keeps it (docs/sending.md).
    pub DeliveryStatus {
        Pending => "pending",
        Sending => "sending",
        Sent => "sent",
        Unconfirmed => "unconfirmed",
        Bounced => "bounced",
        Failed => "failed",
    }
);

/// One issue sent (or being sent) to the subscriber.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Delivery {
    pub id: i64,
    pub issue_id: i64,
    pub issue_subject: String,
    /// The address it went to (the subscriber's at the time).
    pub email: String,
    pub status: DeliveryStatus,
    pub sent_at: Option<Timestamp>,
    pub opened_at: Option<Timestamp>,
    pub clicked_at: Option<Timestamp>,
    pub bounced_at: Option<Timestamp>,
    pub unsubscribed_at: Option<Timestamp>,
    /// The mail relay's last refusal, if any.
    pub last_error: Option<String>,
}

/// One moment of the subscriber's history, named like the webhook events.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    pub event: &'static str,
    pub at: Timestamp,
    pub issue_id: Option<i64>,
}

/// The whole document.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SubscriberExport {
    pub exported_at: Timestamp,
    /// The record with its tags, as the API's subscriber object shows it.
    pub subscriber: Subscriber,
    /// Newest first, at most [`DELIVERIES_KEPT`].
    pub deliveries: Vec<Delivery>,
    /// All the subscriber's deliveries, including any left out.
    pub deliveries_total: u64,
    /// Says how many deliveries were left out, when some were.
    pub note: Option<String>,
    /// `subscriber.created`, then per delivery `email.sent`, `email.opened`, `email.clicked`,
    /// `email.bounced`, `email.unsubscribed`, oldest first.
    pub events: Vec<Event>,
}

fn delivery_from_row(row: &Row<'_>) -> rusqlite::Result<Delivery> {
    Ok(Delivery {
        id: row.get(0)?,
        issue_id: row.get(1)?,
        issue_subject: row.get(2)?,
        email: row.get(3)?,
        status: row.get(4)?,
        sent_at: row.get(5)?,
        opened_at: row.get(6)?,
        clicked_at: row.get(7)?,
        bounced_at: row.get(8)?,
        unsubscribed_at: row.get(9)?,
        last_error: row.get(10)?,
    })
}

/// The export of one subscriber of the newsletter; another newsletter's is not found.
pub fn export(
    conn: &Connection,
    newsletter_id: i64,
    subscriber_id: i64,
) -> DomainResult<SubscriberExport> {
    // Both run on the deliveries_subscriber index (subscriber_id, then the row id).
    const DELIVERIES: &str = "SELECT d.id, d.issue_id, i.subject, d.email, d.status, d.sent_at,
             d.opened_at, d.clicked_at, d.bounced_at, d.unsubscribed_at, d.last_error
         FROM deliveries d JOIN issues i ON i.id = d.issue_id
         WHERE d.subscriber_id = ?1 ORDER BY d.id DESC LIMIT ?2";
    const TOTAL: &str = "SELECT count(*) FROM deliveries WHERE subscriber_id = ?1";
    let s = subscribers::get(conn, newsletter_id, subscriber_id)?;
    let deliveries = conn
        .prepare(DELIVERIES)?
        .query_map((s.id, DELIVERIES_KEPT as i64), delivery_from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    let total: i64 = conn.query_row(TOTAL, [s.id], |r| r.get(0))?;
    let total = total.max(0) as u64;
    let note = (total > deliveries.len() as u64).then(|| {
        format!(
            "{total} deliveries in all; the newest {DELIVERIES_KEPT} are listed, the {} older ones left out",
            total - deliveries.len() as u64
        )
    });
    let events = history(s.created_at, &deliveries);
    Ok(SubscriberExport {
        exported_at: Timestamp::now(),
        subscriber: s,
        deliveries,
        deliveries_total: total,
        note,
        events,
    })
}

/// The subscriber's history from the record and the deliveries, oldest first.
fn history(created_at: Timestamp, deliveries: &[Delivery]) -> Vec<Event> {
    let mut events = vec![Event {
        event: "subscriber.created",
        at: created_at,
        issue_id: None,
    }];
    for d in deliveries {
        for (event, at) in [
            ("email.sent", d.sent_at),
            ("email.opened", d.opened_at),
            ("email.clicked", d.clicked_at),
            ("email.bounced", d.bounced_at),
            ("email.unsubscribed", d.unsubscribed_at),
        ] {
            if let Some(at) = at {
                events.push(Event {
                    event,
                    at,
                    issue_id: Some(d.issue_id),
                });
            }
        }
    }
    events.sort_by_key(|e| e.at);
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::DomainError;

    #[test]
    fn an_export_holds_the_record_the_deliveries_and_their_history() {
        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        let new = subscribers::NewSubscriber {
            email: "ann@example.com".into(),
            tags: vec!["vip".into()],
            ..Default::default()
        };
        let (ann, _) = subscribers::create(&mut conn, 1, &new).unwrap();
        conn.execute_batch(
            "INSERT INTO issues (id, newsletter_id, subject, path, created_at, updated_at)
             VALUES (7, 1, 'First', 'first', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z'),
                    (8, 1, 'Second', 'second', '2026-01-02T00:00:00.000Z', '2026-01-02T00:00:00.000Z');",
        )
        .unwrap();
        conn.execute(
            "INSERT INTO deliveries (issue_id, subscriber_id, email, status, sent_at, opened_at, created_at)
             VALUES (7, ?1, 'ann@example.com', 'sent', '2030-01-01T09:00:00.000Z', '2030-01-01T10:00:00.000Z', '2030-01-01T09:00:00.000Z'),
                    (8, ?1, 'ann@example.com', 'bounced', NULL, NULL, '2030-01-02T09:00:00.000Z')",
            [ann.id],
        )
        .unwrap();
        let export = export(&conn, 1, ann.id).unwrap();
        assert_eq!(export.subscriber.tags, vec!["vip"]);
        assert_eq!(export.deliveries_total, 2);
        assert_eq!(export.note, None);
        assert_eq!(
            export
                .deliveries
                .iter()
                .map(|d| (d.issue_subject.as_str(), d.status))
                .collect::<Vec<_>>(),
            vec![
                ("Second", DeliveryStatus::Bounced),
                ("First", DeliveryStatus::Sent)
            ]
        );
        assert_eq!(
            export.events.iter().map(|e| e.event).collect::<Vec<_>>(),
            vec!["subscriber.created", "email.sent", "email.opened"]
        );
        assert!(matches!(
            super::export(&conn, 2, ann.id),
            Err(DomainError::NotFound(_))
        ));
    }
}
