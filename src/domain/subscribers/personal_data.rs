//! Everything kept about one subscriber, as one JSON document, for a data request (a reader
//! asking what the newsletter holds about them): the record with its tags, every issue sent
//! to them with what became of it, the events of that history in time order, and the stored
//! webhook events that name them (payload copies kept for the webhook log). The API
//! (`GET /subscribers/{id}/export`) and the dashboard's download serialise the same
//! [`SubscriberExport`], so both give the same document.
//!
//! Bounded: a subscriber has one delivery per issue sent to them, read newest first through
//! the `deliveries_subscriber` index, and at most [`DELIVERIES_KEPT`] are included; beyond
//! that the document says how many were left out. Stored webhook events are read through
//! `events_subscriber` (each event keeps the subscriber it names, migration 0022), newest
//! first, at most [`EVENTS_KEPT`], and the document says when more were left out.
//! docs/subscribers.md ("Data requests").

use rusqlite::{Connection, Row};
use serde::Serialize;
use serde_json::Value;

use crate::clock::Timestamp;
use crate::domain::DomainResult;
use crate::domain::subscribers::{self, Subscriber};

/// Deliveries one export includes at most: twenty-seven years of a daily newsletter.
pub const DELIVERIES_KEPT: u64 = 10_000;

/// Stored webhook events one export lists at most, newest first.
pub const EVENTS_KEPT: usize = 10_000;

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

/// A stored webhook event naming the subscriber: what the newsletter's webhook receivers are
/// sent (`docs/webhooks.md`), kept while the webhook log keeps it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredEvent {
    pub id: i64,
    pub event: String,
    pub at: Timestamp,
    /// The payload's `data`, as sent.
    pub data: Value,
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
    /// The stored webhook events that name the subscriber, newest first.
    pub webhook_events: Vec<StoredEvent>,
    /// Says how many were left out, when more than [`EVENTS_KEPT`] name the subscriber.
    pub webhook_events_note: Option<String>,
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
    let (webhook_events, webhook_events_note) = stored_events(conn, newsletter_id, &s)?;
    Ok(SubscriberExport {
        exported_at: Timestamp::now(),
        subscriber: s,
        deliveries,
        deliveries_total: total,
        note,
        events,
        webhook_events,
        webhook_events_note,
    })
}

/// The stored webhook events naming subscriber ?2 of newsletter ?1, newest first, at most ?3:
/// along `events_subscriber`, this subscriber's rows only.
const NAMING: &str = "SELECT id, kind, created_at, payload ->> '$.data' FROM events
     WHERE subscriber_id = ?2 AND newsletter_id = ?1
     ORDER BY created_at DESC, id DESC LIMIT ?3";

/// The webhook events of the newsletter that name `s`, newest first, and a note when the list
/// was cut. Each event keeps the subscriber it names (`events.subscriber_id`, filled by
/// `events::record`): by its `subscription_id` (`subscriber.*`, an unsubscribe from a welcome
/// e-mail), by the `delivery_id` of one of its deliveries (`email.*`), or, carrying neither,
/// by the address it had when the event was recorded (a complaint about no delivery); an
/// address another subscriber had is never enough.
fn stored_events(
    conn: &Connection,
    newsletter_id: i64,
    s: &Subscriber,
) -> DomainResult<(Vec<StoredEvent>, Option<String>)> {
    let mut events = conn
        .prepare(NAMING)?
        .query_map((newsletter_id, s.id, EVENTS_KEPT as i64 + 1), |row| {
            let data: String = row.get(3)?;
            Ok(StoredEvent {
                id: row.get(0)?,
                event: row.get(1)?,
                at: row.get(2)?,
                data: serde_json::from_str(&data).map_err(|e| {
                    rusqlite::Error::FromSqlConversionFailure(
                        3,
                        rusqlite::types::Type::Text,
                        e.into(),
                    )
                })?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let note = (events.len() > EVENTS_KEPT).then(|| {
        events.truncate(EVENTS_KEPT);
        format!(
            "more than {EVENTS_KEPT} stored webhook events name this subscriber; the newest {EVENTS_KEPT} are listed"
        )
    });
    Ok((events, note))
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
        let (ann, _) =
            subscribers::create(&mut conn, 1, &new, subscribers::origin::Source::Api).unwrap();
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
        assert_eq!(export.webhook_events, vec![]);
        assert_eq!(export.webhook_events_note, None);
    }

    /// Inserts a stored event of newsletter 1 with `data` in its payload.
    /// Stores event `id` (the next one) as `events::record` does.
    fn stored(conn: &Connection, id: i64, kind: &str, data: Value) {
        let payload = serde_json::json!({"event": kind, "data": data}).to_string();
        let at = Timestamp::parse("2030-01-01T09:00:00.000Z").unwrap();
        let stored = crate::domain::events::store(conn, 1, kind, &payload, at).unwrap();
        assert_eq!(stored, id);
    }

    /// The events are read along their index by subscriber, whatever else the table holds.
    #[test]
    fn stored_webhook_events_are_read_through_the_subscriber_index() {
        let conn = crate::domain::testing::db_with_newsletter("paid");
        let plan: Vec<String> = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {NAMING}"))
            .unwrap()
            .query_map((1, 1, 10), |row| row.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            plan,
            vec!["SEARCH events USING INDEX events_subscriber (subscriber_id=?)"]
        );
    }

    #[test]
    fn stored_webhook_events_are_the_ones_naming_the_subscriber() {
        use serde_json::json;
        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        let add = |conn: &mut Connection, email: &str| {
            let new = subscribers::NewSubscriber {
                email: email.into(),
                ..Default::default()
            };
            subscribers::create(conn, 1, &new, subscribers::origin::Source::Api)
                .unwrap()
                .0
                .id
        };
        let (ann, bob) = (
            add(&mut conn, "ann@example.com"),
            add(&mut conn, "bob@example.com"),
        );
        conn.execute_batch(
            "INSERT INTO issues (id, newsletter_id, subject, path, created_at, updated_at)
             VALUES (7, 1, 'First', 'first', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');",
        )
        .unwrap();
        conn.execute(
            "INSERT INTO deliveries (id, issue_id, subscriber_id, email, status, created_at)
             VALUES (70, 7, ?1, 'ann@example.com', 'sent', '2030-01-01T09:00:00.000Z'),
                    (71, 7, ?2, 'ann@example.com', 'sent', '2030-01-01T09:00:00.000Z')",
            (ann, bob),
        )
        .unwrap();
        stored(
            &conn,
            1,
            "subscriber.created",
            json!({"subscription_id": ann, "email": "ann@example.com"}),
        );
        stored(
            &conn,
            2,
            "subscriber.created",
            json!({"subscription_id": bob, "email": "bob@example.com"}),
        );
        stored(
            &conn,
            3,
            "email.opened",
            json!({"delivery_id": 70, "email": "ann@example.com"}),
        );
        // Bob's delivery, though to the address Ann has now.
        stored(
            &conn,
            4,
            "email.opened",
            json!({"delivery_id": 71, "email": "ann@example.com"}),
        );
        stored(
            &conn,
            5,
            "email.unsubscribed",
            json!({"email": "ann@example.com", "reason": "complaint"}),
        );
        stored(&conn, 6, "issue.sent", json!({"id": 7, "subject": "First"}));
        let export = export(&conn, 1, ann).unwrap();
        let ids: Vec<i64> = export.webhook_events.iter().map(|e| e.id).collect();
        assert_eq!(ids, vec![5, 3, 1], "newest first, only Ann's");
        assert_eq!(export.webhook_events[1].event, "email.opened");
        assert_eq!(export.webhook_events[1].data["delivery_id"], 70);
        assert_eq!(export.webhook_events_note, None);
        let bobs: Vec<i64> = super::export(&conn, 1, bob)
            .unwrap()
            .webhook_events
            .iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(bobs, vec![4, 2]);

        // An address-only event names who had the address when it was recorded: not Ann's
        // successor at that address once she is gone.
        subscribers::delete(&mut conn, 1, ann).unwrap();
        let cat = add(&mut conn, "ann@example.com");
        stored(
            &conn,
            7,
            "email.unsubscribed",
            json!({"email": "ann@example.com", "reason": "complaint"}),
        );
        let cats: Vec<i64> = super::export(&conn, 1, cat)
            .unwrap()
            .webhook_events
            .iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(cats, vec![7]);

        // Past EVENTS_KEPT the newest are listed and the note says so.
        conn.execute(
            "WITH RECURSIVE n(i) AS (SELECT 100 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
             INSERT INTO events (id, newsletter_id, kind, payload, created_at, subscriber_id)
             SELECT i, 1, 'email.opened', '{\"data\":{}}', '2030-02-01T00:00:00.000Z', ?2
             FROM n",
            (100 + EVENTS_KEPT as i64, cat),
        )
        .unwrap();
        let export = super::export(&conn, 1, cat).unwrap();
        assert_eq!(export.webhook_events.len(), EVENTS_KEPT);
        assert_eq!(export.webhook_events[0].id, 100 + EVENTS_KEPT as i64);
        assert_eq!(
            export.webhook_events_note.as_deref(),
            Some(
                "more than 10000 stored webhook events name this subscriber; the newest 10000 are listed"
            )
        );
    }
}
