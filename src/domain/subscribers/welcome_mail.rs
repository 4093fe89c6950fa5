//! The welcome e-mail a reader gets after confirming a subscription on the public site (and
//! after an API create that asks for it), going once (its text is the newsletter's
//! `newsletters::welcome` settings).
//!
//! Once: confirming queues the job only while the subscriber has had no welcome, and the job
//! records `welcomed_at` in the commit that lets the relay take the message (as an issue's
//! delivery is made `sending`), refusing to send when it is already set. A second click, a
//! re-subscribe, or the job run again after a crash therefore never sends a second copy.

use rusqlite::{Connection, OptionalExtension};

use crate::clock::Timestamp;
use crate::domain::DomainResult;
use crate::domain::content;
use crate::domain::newsletters::{self, Newsletter};
use crate::domain::subscribers::Status;
use crate::store::write_tx;

/// A welcome e-mail ready to compose.
#[derive(Debug, Clone)]
pub struct Due {
    pub newsletter: Newsletter,
    pub subscriber_id: i64,
    pub email: String,
    pub subject: String,
    /// The Markdown, for the text part (rendered within the budget when the job runs).
    pub body_markdown: String,
    pub body_html: String,
}

/// The welcome e-mail `subscriber_id` is due, or `None` when none is: it went already, the
/// reader left (unsubscribed, bounced, deleted) before it went, or the newsletter was
/// cancelled.
pub fn due(conn: &Connection, subscriber_id: i64) -> DomainResult<Option<Due>> {
    const SQL: &str =
        "SELECT s.newsletter_id, s.email, s.status, s.welcomed_at, n.welcome_body_html
         FROM subscribers s JOIN newsletters n ON n.id = s.newsletter_id WHERE s.id = ?1";
    type Row = (i64, String, Status, Option<Timestamp>, Option<String>);
    let found: Option<Row> = conn
        .query_row(SQL, [subscriber_id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .optional()?;
    let Some((newsletter_id, email, status, welcomed_at, body_html)) = found else {
        return Ok(None);
    };
    let newsletter = newsletters::get(conn, newsletter_id)?;
    if welcomed_at.is_some()
        || status != Status::Active
        || newsletter.status == newsletters::Status::Cancelled
    {
        return Ok(None);
    }
    let body_markdown = newsletter.welcome.body_or_default(&newsletter.name);
    // The default text is ours and short: rendered here, not stored.
    let body_html =
        body_html.unwrap_or_else(|| content::markdown_html::markdown_to_html(&body_markdown));
    Ok(Some(Due {
        subject: newsletter.welcome.subject_or_default(&newsletter.name),
        newsletter,
        subscriber_id,
        email,
        body_markdown,
        body_html,
    }))
}

/// Records that the welcome e-mail is being handed over, at the last moment before the relay
/// may take it; false when it already was (nothing must be sent then).
pub fn mark_sent(conn: &mut Connection, subscriber_id: i64) -> DomainResult<bool> {
    const SQL: &str =
        "UPDATE subscribers SET welcomed_at = ?2 WHERE id = ?1 AND welcomed_at IS NULL";
    write_tx(conn, |tx| {
        Ok(tx.execute(SQL, (subscriber_id, Timestamp::now()))? == 1)
    })
}

/// Undoes [`mark_sent`] when the relay did not take the message (it refused it, or the
/// connection broke before the end of it), so that a retry sends it.
pub fn unmark(conn: &mut Connection, subscriber_id: i64) -> DomainResult<()> {
    const SQL: &str = "UPDATE subscribers SET welcomed_at = NULL WHERE id = ?1";
    write_tx(conn, |tx| {
        Ok(tx.execute(SQL, [subscriber_id]).map(|_| ())?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_once_and_a_marked_subscriber_is_not_queued_again() {
        let mut conn = crate::domain::testing::db_with_newsletter("paid");
        conn.execute(
            "INSERT INTO subscribers (newsletter_id, email, created_at) VALUES (1, 'r@x.co', '2026-01-01T00:00:00.000Z')",
            [],
        )
        .unwrap();
        let due_now = due(&conn, 1).unwrap().unwrap();
        assert_eq!(due_now.subject, "Welcome to N");
        assert!(due_now.body_html.contains("Thank you"));
        assert!(crate::domain::subscribers::queue_welcome(&conn, 1).unwrap());
        assert!(mark_sent(&mut conn, 1).unwrap());
        assert!(
            !mark_sent(&mut conn, 1).unwrap(),
            "a second run sends nothing"
        );
        assert!(due(&conn, 1).unwrap().is_none());
        assert!(!crate::domain::subscribers::queue_welcome(&conn, 1).unwrap());
        unmark(&mut conn, 1).unwrap();
        assert!(due(&conn, 1).unwrap().is_some());
    }
}
