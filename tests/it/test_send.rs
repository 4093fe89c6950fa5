//! Test sends: `POST /issues/{id}/send_test` mails the real message,
//! marked "[Test]", to one to five addresses; its links work and count nothing; no delivery,
//! no stats, no event. Bad input changes nothing.

use std::time::Duration;

use crate::support::http::unescape;
use crate::support::*;

/// A draft with content and a link; returns its id.
fn draft(owner: &Owner, subject: &str) -> i64 {
    let resp = owner.post(
        "/issues",
        &json!({"issue": {"subject": subject,
            "content_markdown": "Read [the piece](https://example.org/piece) first.",
            "articles": [{"title": "An article", "url": "https://example.org/article"}]}}),
    );
    resp.expect(201);
    resp.json()["id"].as_i64().expect("issue id")
}

/// Waits until every test job is done, so nothing more can arrive or be written by them.
pub fn settled_tests(app: &App) {
    wait_for("the test jobs", Duration::from_secs(20), || {
        (app.count("SELECT count(*) FROM jobs WHERE kind = 'send_test' AND state <> 'done'") == 0)
            .then_some(())
    });
}

/// What a send would leave behind: deliveries, events, webhook deliveries, stats counters.
fn traces(app: &App) -> (i64, i64, i64, i64) {
    (
        app.count("SELECT count(*) FROM deliveries"),
        app.count("SELECT count(*) FROM events"),
        app.count("SELECT count(*) FROM webhook_deliveries"),
        app.count(
            "SELECT count(*) FROM issue_counts WHERE total + opened + clicked + unsubscribed > 0",
        ),
    )
}

#[test]
fn a_test_send_mails_the_real_message_marked_and_leaves_no_trace() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Test Gazette");
    set_sender(&owner);
    listen(
        &app,
        &owner,
        &[
            "issue.sent",
            "email.opened",
            "email.clicked",
            "email.unsubscribed",
        ],
    );
    owner
        .post("/subscribers", &json!({"email": "reader@example.net"}))
        .expect(201);
    let id = draft(&owner, "Monday notes");
    let before = traces(&app);

    let resp = owner.post(
        &format!("/issues/{id}/send_test"),
        &json!({"emails": ["First@Example.net", "second@example.net", "first@example.net"]}),
    );
    resp.expect(202);
    let body = resp.json();
    assert_eq!(body["subject"], "[Test] Monday notes");
    assert_eq!(
        body["emails"],
        json!(["first@example.net", "second@example.net"])
    );

    let first = app.smtp.wait_for_message_to("first@example.net", 1);
    app.smtp.wait_for_message_to("second@example.net", 1);
    settled_tests(&app);
    assert_eq!(app.smtp.messages_to("first@example.net").len(), 1, "folded");
    assert!(app.smtp.messages_to("reader@example.net").is_empty());

    // The real message: sender, return path, list headers, the title in the body.
    let parsed = first.parsed();
    let from = parsed.from().and_then(|f| f.first()).expect("From");
    assert_eq!(from.address(), Some("sam@sender.example"));
    assert!(first.from.starts_with("bounce+0-"), "{}", first.from);
    assert_eq!(first.parsed().subject(), Some("[Test] Monday notes"));
    assert!(first.header("List-Id").is_some());
    assert!(first.header("List-Unsubscribe").is_some());
    assert!(first.header("Feedback-ID").is_some());
    let html = first.html();
    assert!(html.contains("<h1>Monday notes</h1>"), "{html}");
    assert!(first.text().contains("An article"));

    // The links work and count nothing.
    let site = app.site_client(&owner.subdomain);
    let click = link_containing(&html, "/c/").expect("a tracked link");
    let followed = site.get(&path_of(&unescape(&click)));
    followed.expect(302);
    let target = followed.header("location").unwrap_or_default();
    assert!(target.starts_with("https://example.org/"), "{target}");
    let pixel = link_containing(&html, "/o/").expect("the open pixel");
    site.get(&path_of(&unescape(&pixel))).expect(200);
    let unsubscribe = link_containing(&first.text(), "/u/").expect("an unsubscribe link");
    let page = site.get(&path_of(&unsubscribe));
    page.expect(200);
    assert!(page.body.contains("test send"), "{}", page.body);
    site.post_form(&path_of(&unsubscribe), &[]).expect(200);

    assert_eq!(traces(&app), before, "no delivery, event, webhook or stats");
    let shown = owner.get(&format!("/issues/{id}"));
    assert_eq!(shown.json()["status"], "draft");
    assert_eq!(
        app.count("SELECT count(*) FROM subscribers WHERE status = 'active'"),
        1,
        "the reader stays subscribed"
    );
}

#[test]
fn bad_addresses_other_owners_and_free_tiers_are_refused_and_change_nothing() {
    let app = spawn_app();
    let owner = onboard(&app, "Careful Weekly");
    let other = onboard(&app, "Other Weekly");
    let id = draft(&owner, "Draft");
    let theirs = draft(&other, "Theirs");
    let path = format!("/issues/{id}/send_test");

    let bad = owner.post(&path, &json!({"emails": ["ok@example.net", "nope", "x@"]}));
    assert_eq!(bad.error_code(422), "validation_error");
    let details = &bad.json()["error"]["details"]["emails"];
    assert_eq!(details.as_array().map(Vec::len), Some(2), "{}", bad.body);
    assert!(details[0].as_str().unwrap().contains("nope"));
    let six: Vec<String> = (0..6).map(|n| format!("r{n}@example.net")).collect();
    assert_eq!(
        owner.post(&path, &json!({"emails": six})).error_code(422),
        "validation_error"
    );
    assert_eq!(
        owner.post(&path, &json!({"emails": []})).error_code(422),
        "validation_error"
    );
    assert_eq!(
        owner.post(&path, &json!({"emails": [7]})).error_code(422),
        "validation_error"
    );
    assert_eq!(
        owner.post(&path, &json!({})).error_code(422),
        "validation_error"
    );
    assert_eq!(
        owner
            .post(
                &format!("/issues/{theirs}/send_test"),
                &json!({"emails": ["a@example.net"]})
            )
            .error_code(404),
        "not_found"
    );
    let empty = owner.post("/issues", &json!({"issue": {"subject": "Empty"}}));
    let empty = empty.json()["id"].as_i64().unwrap();
    assert_eq!(
        owner
            .post(
                &format!("/issues/{empty}/send_test"),
                &json!({"emails": ["a@example.net"]})
            )
            .error_code(422),
        "no_content"
    );

    // A free newsletter tests to its owner only.
    let (code, _, err) = app.cli(&["tier", &owner.subdomain, "free"]);
    assert_eq!(code, 0, "{err}");
    let refused = owner.post(
        &path,
        &json!({"emails": [owner.email, "friend@example.net"]}),
    );
    assert_eq!(refused.error_code(402), "payment_required");
    assert!(
        refused.body.contains("friend@example.net"),
        "{}",
        refused.body
    );
    assert_eq!(
        app.count("SELECT count(*) FROM jobs WHERE kind = 'send_test'"),
        0
    );

    owner
        .post(&path, &json!({"emails": [owner.email.to_uppercase()]}))
        .expect(202);
    let mail = app.smtp.wait_for_message_to(&owner.email, 2);
    assert_eq!(mail.parsed().subject(), Some("[Test] Draft"));
    settled_tests(&app);
    assert!(app.smtp.messages_to("ok@example.net").is_empty());
    assert!(app.smtp.messages_to("friend@example.net").is_empty());
}

#[test]
fn the_dashboard_sends_a_test_from_the_editor_and_the_send_page() {
    let app = spawn_app();
    let owner = onboard_paid(&app, "Dash Tests");
    let other = onboard_paid(&app, "Other Dash");
    let id = draft(&owner, "Editor notes");
    let base = format!("/newsletters/{}/issues/{id}", owner.newsletter_id);
    let action = format!("{base}/send_test");

    // The editor offers the form, filled with the owner's address.
    let editor = owner.client.get(&format!("{base}/edit"));
    editor.expect(200);
    assert!(editor.body.contains("Send a test"), "{}", editor.body);
    assert!(
        editor
            .body
            .contains(&format!(">{}</textarea>", owner.email))
    );
    let sent = owner.client.submit(
        &format!("{base}/edit"),
        &action,
        &[
            ("emails", "one@example.net,\r\nTwo@example.net"),
            ("from", "edit"),
        ],
    );
    assert_eq!(sent.redirect(), format!("{base}/edit"));
    let back = owner.client.get(&format!("{base}/edit"));
    assert!(
        back.body
            .contains("on its way to one@example.net, two@example.net"),
        "{}",
        back.body
    );
    let mail = app.smtp.wait_for_message_to("two@example.net", 1);
    assert_eq!(mail.parsed().subject(), Some("[Test] Editor notes"));

    // Bad input: the form again with the messages and what was typed; nothing queued.
    let queued = app.count("SELECT count(*) FROM jobs WHERE kind = 'send_test'");
    let bad = owner.client.submit(
        &format!("{base}/send_test"),
        &action,
        &[("emails", "nope, ok@example.net"), ("from", "send")],
    );
    bad.expect(422);
    assert!(
        bad.body.contains("Emails \"nope\" is invalid")
            || bad.body.contains("Emails &quot;nope&quot; is invalid"),
        "{}",
        bad.body
    );
    assert!(bad.body.contains(">nope, ok@example.net</textarea>"));
    assert_eq!(
        app.count("SELECT count(*) FROM jobs WHERE kind = 'send_test'"),
        queued
    );

    // The send page has it too, and goes back there.
    let approved = owner.post(
        "/issues",
        &json!({"issue": {"subject": "Approved one", "status": "approved", "content_markdown": "Hi"}}),
    );
    let approved = approved.json()["id"].as_i64().unwrap();
    let send_page = format!(
        "/newsletters/{}/issues/{approved}/send",
        owner.newsletter_id
    );
    let page = owner.client.get(&send_page);
    assert!(page.body.contains("Send a test"), "{}", page.body);
    let sent = owner.client.submit(
        &send_page,
        &format!(
            "/newsletters/{}/issues/{approved}/send_test",
            owner.newsletter_id
        ),
        &[("emails", &owner.email), ("from", "send")],
    );
    assert_eq!(sent.redirect(), send_page);
    let mail = app.smtp.wait_for_message_to(&owner.email, 2);
    assert_eq!(mail.parsed().subject(), Some("[Test] Approved one"));

    // Without the CSRF token, or for someone else's issue, nothing is queued.
    let queued = app.count("SELECT count(*) FROM jobs WHERE kind = 'send_test'");
    assert_eq!(
        owner
            .client
            .post_form(&action, &[("emails", "x@example.net")])
            .status,
        403
    );
    let theirs = draft(&other, "Theirs");
    let resp = owner.client.submit(
        &format!("{base}/edit"),
        &format!(
            "/newsletters/{}/issues/{theirs}/send_test",
            other.newsletter_id
        ),
        &[("emails", "x@example.net")],
    );
    resp.expect(404);
    assert_eq!(
        app.count("SELECT count(*) FROM jobs WHERE kind = 'send_test'"),
        queued
    );
    settled_tests(&app);
}
