//! `kill -9` in the middle of a send of a few thousand messages, then a restart: every
//! active subscriber ends with exactly one copy (issue 4).

use std::collections::HashMap;
use std::time::Duration;

use crate::support::*;

const RECIPIENTS: usize = 2000;

#[test]
fn sending_survives_kill_9_midway_with_exactly_one_copy_each() {
    let sink = SmtpSink::start_with(Rules {
        delay: Duration::from_millis(2),
        ..Rules::default()
    });
    let mut app = spawn_app_on(sink, &["--rate-limit-bulk", "100"]);
    let owner = onboard_paid(&app, "Crash Course");
    let emails: Vec<String> = (0..RECIPIENTS)
        .map(|n| format!("crash{n}@example.net"))
        .collect();
    for chunk in emails.chunks(1000) {
        let body = json!({
            "subscribers": chunk.iter().map(|e| json!({"email": e})).collect::<Vec<_>>()
        });
        let resp = owner.post("/subscribers/bulk_create", &body);
        resp.expect(200);
        assert_eq!(resp.json()["created"], chunk.len());
    }
    // A few who must get nothing.
    let skipped: Vec<&String> = emails.iter().step_by(250).collect();
    for email in &skipped {
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
    let active = RECIPIENTS - skipped.len();

    let resp = owner.post(
        "/issues",
        &json!({"issue": {"subject": "Crash test", "status": "approved",
            "content_markdown": "Exactly **once**, [please](https://example.org/once)."}}),
    );
    resp.expect(201);
    let id = resp.json()["id"].as_i64().unwrap();
    let resp = owner.post(&format!("/issues/{id}/send_now"), &json!({}));
    resp.expect(200);
    assert_eq!(resp.json()["subscribers"], active);

    // Kill once some, not all, have arrived.
    let to_readers = |app: &App| {
        app.smtp
            .messages()
            .into_iter()
            .filter(|m| m.to.iter().any(|t| t.starts_with("crash")))
            .count()
    };
    wait_for("a quarter of the messages", Duration::from_secs(60), || {
        (to_readers(&app) >= active / 4).then_some(())
    });
    app.kill();
    let at_kill = to_readers(&app);
    assert!(
        at_kill < active,
        "the send finished before the kill ({at_kill}); make the sink slower"
    );
    assert_eq!(
        app.count(&format!(
            "SELECT status = 'sending' FROM issues WHERE id = {id}"
        )),
        1
    );

    app.restart();
    wait_for("the issue to be sent", Duration::from_secs(120), || {
        let resp = owner.get(&format!("/issues/{id}"));
        (resp.json()["status"] == "sent").then_some(())
    });

    let mut per_recipient: HashMap<String, usize> = HashMap::new();
    for message in app.smtp.messages() {
        for to in message.to {
            if to.starts_with("crash") {
                *per_recipient.entry(to).or_default() += 1;
            }
        }
    }
    let twice: Vec<_> = per_recipient.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "second copies: {twice:?}");
    for email in &skipped {
        assert!(
            !per_recipient.contains_key(email.as_str()),
            "{email} unsubscribed"
        );
    }
    let missing: Vec<&String> = emails
        .iter()
        .filter(|e| !skipped.contains(e) && !per_recipient.contains_key(e.as_str()))
        .collect();
    let rows: Vec<String> = missing
        .iter()
        .take(5)
        .map(|e| {
            app.db()
                .query_row(
                    "SELECT status || ' ' || attempts || ' ' || coalesce(last_error, '') FROM deliveries WHERE email = ?1",
                    [e.as_str()],
                    |r| r.get(0),
                )
                .unwrap_or_else(|err| format!("no delivery: {err}"))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "{} recipient(s) skipped, e.g. {:?}: {rows:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    assert_eq!(per_recipient.len(), active);
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM deliveries WHERE issue_id = {id} AND status = 'sent'"
        )),
        active as i64
    );
    assert_eq!(
        app.count("SELECT count(*) FROM events WHERE kind = 'issue.sent'"),
        1
    );
}
