//! Sends under test: a newsletter with many subscribers, an issue to send, and the check of
//! the promise afterwards: every active subscriber once, or accounted as `unconfirmed`,
//! `bounced` or `failed`; never a second copy, never a message counted `sent` that did not
//! arrive.

use std::collections::HashMap;
use std::time::Duration;

use super::{App, Owner, Value, json, wait_for};

/// Subscribes `emails` through `bulk_create` (1,000 a request; start the app with a high
/// enough `--rate-limit-bulk`).
pub fn subscribe_all(owner: &Owner, emails: &[String]) {
    for chunk in emails.chunks(1000) {
        let body = json!({
            "subscribers": chunk.iter().map(|e| json!({"email": e})).collect::<Vec<_>>()
        });
        let resp = owner.post("/subscribers/bulk_create", &body);
        resp.expect(200);
        assert_eq!(resp.json()["created"], chunk.len());
    }
}

/// Unsubscribes the subscribers with `emails` through `PATCH /subscribers/{id}`.
pub fn unsubscribe_all(app: &App, owner: &Owner, emails: &[String]) {
    for email in emails {
        let id: i64 = app
            .db()
            .query_row(
                "SELECT id FROM subscribers WHERE email = ?1",
                [email.as_str()],
                |r| r.get(0),
            )
            .unwrap();
        owner
            .patch(
                &format!("/subscribers/{id}"),
                &json!({"subscriber": {"status": "unsubscribed"}}),
            )
            .expect(200);
    }
}

/// `count` addresses `<stem><n>@example.net`.
pub fn addresses(stem: &str, count: usize) -> Vec<String> {
    (0..count)
        .map(|n| format!("{stem}{n}@example.net"))
        .collect()
}

/// An approved issue with content; returns its id.
pub fn approved_issue(owner: &Owner, subject: &str) -> i64 {
    let resp = owner.post(
        "/issues",
        &json!({"issue": {"subject": subject, "status": "approved",
            "content_markdown": "Every reader **once**, [whatever fails](https://example.org/once)."}}),
    );
    resp.expect(201);
    resp.json()["id"].as_i64().expect("issue id")
}

/// `send_now`; returns the recipient count it reports.
pub fn send_now(owner: &Owner, id: i64) -> i64 {
    send_now_answer(owner, id)["subscribers"]
        .as_i64()
        .expect("recipient count")
}

/// `send_now`; returns its whole answer (the recipient count and the issue).
pub fn send_now_answer(owner: &Owner, id: i64) -> Value {
    let resp = owner.post(&format!("/issues/{id}/send_now"), &json!({}));
    resp.expect(200);
    resp.json()
}

/// The issue as the API shows it (with its `delivery` counts).
pub fn issue(owner: &Owner, id: i64) -> Value {
    let resp = owner.get(&format!("/issues/{id}"));
    resp.expect(200);
    resp.json()
}

/// Waits until the issue has `status`; returns it.
pub fn wait_status(owner: &Owner, id: i64, status: &str, timeout: Duration) -> Value {
    wait_for(&format!("issue {id} {status}"), timeout, || {
        let shown = issue(owner, id);
        (shown["status"] == status).then_some(shown)
    })
}

/// Where the recipients of a send ended, checked against what the SMTP sink received.
#[derive(Debug, Default)]
pub struct Tally {
    pub sent: usize,
    pub unconfirmed: usize,
    /// Unconfirmed messages that did arrive (the relay took them; the answer was lost).
    pub unconfirmed_arrived: usize,
    pub bounced: usize,
    pub failed: usize,
    pub pending: usize,
    /// Received more than once.
    pub duplicates: Vec<String>,
    /// Counted `sent`, `bounced` or `failed` but received a number of times that contradicts it.
    pub misreported: Vec<String>,
}

impl Tally {
    /// No second copy, nothing reported that did not happen, nothing left behind.
    pub fn assert_promise_kept(&self) {
        assert!(
            self.duplicates.is_empty(),
            "second copies: {:?}",
            self.duplicates
        );
        assert!(
            self.misreported.is_empty(),
            "recipients whose status contradicts what arrived: {:?}",
            self.misreported
        );
        assert_eq!(self.pending, 0, "deliveries left pending: {self:?}");
    }
}

/// Compares each recipient's delivery status with the messages the sink received.
pub fn tally(app: &App, issue_id: i64, emails: &[String]) -> Tally {
    let received = app.smtp.counts();
    let statuses: HashMap<String, String> = {
        let db = app.db();
        let mut stmt = db
            .prepare("SELECT email, status FROM deliveries WHERE issue_id = ?1")
            .unwrap();
        stmt.query_map([issue_id], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    let mut tally = Tally::default();
    for email in emails {
        let got = received.get(email).copied().unwrap_or(0);
        if got > 1 {
            tally.duplicates.push(format!("{email} ({got} copies)"));
        }
        let status = statuses.get(email).map(String::as_str).unwrap_or("none");
        let consistent = match status {
            "sent" => {
                tally.sent += 1;
                got == 1
            }
            "unconfirmed" => {
                tally.unconfirmed += 1;
                tally.unconfirmed_arrived += usize::from(got == 1);
                got <= 1
            }
            "bounced" => {
                tally.bounced += 1;
                got == 0
            }
            "failed" => {
                tally.failed += 1;
                got == 0
            }
            _ => {
                tally.pending += 1;
                got == 0
            }
        };
        if !consistent {
            tally
                .misreported
                .push(format!("{email}: {status}, received {got}"));
        }
    }
    tally
}
